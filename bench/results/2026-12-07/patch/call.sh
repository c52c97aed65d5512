#!/usr/bin/env bash
# conv-patch call 1: descriptor probe, GPU conv tests (patch / nhwc / nchw), kernel lab A/B, all in one tgz.
t0=$(date +%s)
source .devdeps/env.sh && source bench/device_unpack.sh .carryM >/dev/null || exit 2
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
./.carryS/desc_probe | tee $R/probe.txt
xz -dc .carryK/odl_bench_kernels.xz > build/bench/odl_bench_kernels && chmod +x build/bench/odl_bench_kernels
(cd build && timeout 200 ctest -FA '.*' -R '^(test_conv_tc_gpu|test_conv_tc_gpu_sm90|test_conv_tc_gpu_sm90_nhwc|test_conv_tc_gpu_sm90_nchw)$' --output-on-failure > $R/ctest.log 2>&1); grep -E 'tests passed|Failed|\*\*\*|FAIL' $R/ctest.log | head -20
if grep -q "mismatches [1-9]" <(grep "mode 0" $R/probe.txt); then
  echo "== probe says base offset needed: rerun sm90 test with ODL_CONV_PATCH_DESC_BASE=1"
  (cd build && ODL_CONV_PATCH_DESC_BASE=1 timeout 100 ctest -FA '.*' -R '^test_conv_tc_gpu_sm90$' --output-on-failure > $R/ctest_db.log 2>&1); grep -E 'tests passed|Failed' $R/ctest_db.log
fi
echo "t=$(( $(date +%s) - t0 ))"
for r in 1 2; do for v in "2 1" "2 0" "1 1"; do set -- $v
  ODL_CONV_SM90=$1 ODL_CONV_PATCH=$2 timeout 100 build/bench/odl_bench_kernels --only convtc --csv $R/convtc_$1_$2_r$r.csv > $R/convtc_$1_$2_r$r.txt 2>&1
  echo "== sm90=$1 patch=$2 r$r"; grep -E "geomean|^conv2 N512 (fwd|bwd_data)|FAIL|BAD" $R/convtc_$1_$2_r$r.txt
done; done
echo "t=$(( $(date +%s) - t0 ))"
ODL_CONV_SM90=2 timeout 100 ncu --clock-control none -k regex:conv_patch_sm90 -s 20 -c 6 --section SpeedOfLight --section WarpStateStats \
  --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis build/bench/odl_bench_kernels --only convtc --reps 2 > $R/ncu.txt 2>&1
grep -E "conv_patch_sm90|Grid Size|Duration|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Registers|Achieved Occ" $R/ncu.txt | head -60
tar czf $OUT/p1.tgz -C $OUT r && rm -rf $R
echo "t=$(( $(date +%s) - t0 )) done"
