#!/bin/sh
# The H200 check of issue 13 (run by hand on a GPU machine; not a ctest): odl_health's NVML readings
# printed beside nvidia-smi's, taken right before and after (same run), the full health check (GEMM
# and CNN forward against the CPU on each GPU), and NVML Xid event registration. No real Xid can be
# provoked on a healthy GPU, so the event part shows that registration and waiting work, not a catch.
#   bench/health_gpu_check.sh [BUILD_DIR] [EVENT_SECONDS]
set -u
b="${1:-build}"
secs="${2:-5}"
h="$b/odl_health"
[ -x "$h" ] || { echo "error: $h not built"; exit 4; }
q=index,pci.bus_id,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,clocks.sm
echo "== nvidia-smi (before)"
nvidia-smi --query-gpu=$q --format=csv || echo "nvidia-smi failed"
echo "== odl_health gpu --readings-only"
"$h" gpu --readings-only
echo "== nvidia-smi (after)"
nvidia-smi --query-gpu=$q --format=csv || echo "nvidia-smi failed"
echo "== nvidia-smi ECC / remapped rows"
nvidia-smi --query-gpu=index,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total \
    --format=csv 2>/dev/null || true
nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure \
    --format=csv 2>/dev/null || true
echo "== odl_health gpu (readings, GEMM and forward vs CPU)"
"$h" gpu --timeout-s 120
rc_gpu=$?
echo "odl_health gpu exit status $rc_gpu"
echo "== odl_health events --seconds $secs (Xid event registration)"
"$h" events --seconds "$secs"
rc_ev=$?
echo "odl_health events exit status $rc_ev"
[ $rc_gpu -le 1 ] && [ $rc_ev = 0 ]
