/* Environment variables: the one table of every ODL_* tunable, read once (as NCCL reads its NCCL_*).
 *
 * Each row of ODL_ENV_TABLE is X(ID, TYPE, DEFAULT, MIN, MAX, DOC): the variable ODL_<ID>, read as TYPE
 * (INT: a decimal integer in MIN..MAX; BOOL: 0/1, true/false, on/off, yes/no; STR: any text), DEFAULT
 * the value when it is unset or empty ("" = unset: the code that reads it says what it does then), and
 * DOC one line for docs/environment.md. To add a variable, add one row here and its row to
 * docs/environment.md (test_env checks that the two agree); read it with odl_env_int(ODL_ENV_<ID>),
 * odl_env_bool or odl_env_str.
 *
 * The launcher's own variables (OMPI_COMM_WORLD_SIZE and the like, PMI_RANK, PMIX_RANK, SLURM_PROCID, CUDA_VISIBLE_DEVICES) are the
 * launcher's interface, not tunables: comm/launch_detect.c reads them.
 *
 * Reading: odl_env_load() parses the whole table the first time any odl_env_* function runs, and keeps
 * the first bad value as an error naming the variable, e.g. "ODL_CPU_THREADS='abc': not an integer".
 * Programs call odl_env_load() at start and exit with that message; library code that reads a bad
 * variable gets its default. No layer sets a variable for another (no setenv).
 */
#ifndef ODL_ENV_H
#define ODL_ENV_H

#include "odl/api.h"
#include <stddef.h>
#include <stdint.h>

#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(ID, TYPE, DEFAULT, MIN, MAX, DOC) */
#define ODL_ENV_TABLE(X)                                                                                        \
    X(CPU_THREADS, INT, "", 1, 64, "threads of the CPU backend, the calling thread included (unset: the online CPUs, at most 64)") \
    X(CUDA_LABEL_CHECK, BOOL, "", 0, 0, "the CUDA loss copies its label range check back each call (unset: on, except in training, whose labels are checked when read)") \
    X(NCCL_BLOCKING, BOOL, "1", 0, 0, "0: a non-blocking NCCL communicator (about 50 us more per collective; the watchdog bounds hangs either way)") \
    X(DUMP_PARAMS, STR, "", 0, 0, "tests: odl_worker --task=train writes each rank's final parameters to PREFIX.rankR.h5") \
    X(CKPT_TEST_PAUSE_AT_STEP, INT, "-1", -1, INT64_MAX, "tests: odl_worker pauses the write of the checkpoint of this step before its commit, for a kill -9 there") \
    X(SAMPLE_RECORD, STR, "", 0, 0, "tests: odl_worker --task=train appends each step's sample indices to PREFIX.genG.rankR.txt (bench/soak.sh)") \
    X(SAMPLE_TEST_LOSE_AT_STEP, INT, "-1", -1, INT64_MAX, "tests: a planted bug, rank 0 trains this step without its batch's last sample (bench/soak.sh --plant lose-sample)") \
    X(COORD_ADDR, STR, "", 0, 0, "set by odl_coordinator: HOST:PORT of the job's coordinator, where odl_worker registers (unset: no coordinator)") \
    X(COORD_SECRET_FILE, STR, "", 0, 0, "set by odl_coordinator: the job secret file (0600) whose key proves the worker's membership") \
    X(COORD_GENERATION, INT, "", 0, INT64_MAX, "set by odl_coordinator: the launch generation, bound into the worker's proof (required with ODL_COORD_ADDR)") \
    X(JOB_DIR, STR, "", 0, 0, "set by odl_coordinator: the job directory; ODL_FAULT keeps its once-per-job markers there (unset: faults fire every run)") \
    X(HEALTH, BOOL, "1", 0, 0, "0/off: odl_worker starts no GPU-health monitor (docs/health.md)") \
    X(HEALTH_KMSG, STR, "", 0, 0, "kernel log the worker's health monitor follows instead of /dev/kmsg (tests append Xid lines to it)") \
    X(HEALTH_XID_TABLE, STR, "", 0, 0, "YAML overrides of the Xid class table (docs/health.md)") \
    X(HEALTH_GPU, STR, "", 0, 0, "the GPU the health monitor of a rank training on the CPU watches: PCI bus ids or UUIDs, comma-separated, local rank i takes entry i mod n (ignored on a GPU)") \
    X(HEALTH_TELEMETRY_MS, INT, "5000", 10, 3600000, "period of the health monitor's NVML telemetry samples, in ms") \
    X(NVML_LIBRARY, STR, "libnvidia-ml.so.1", 0, 0, "the NVML library the health layer dlopens (tests use a stand-in)") \
    X(NVJPEG, BOOL, "1", 0, 0, "0/off: JPEGs are decoded on the CPU (libjpeg-turbo) even where nvJPEG is there (docs/eval.md)") \
    X(NVJPEG_LIBRARY, STR, "", 0, 0, "the nvJPEG library to dlopen (unset: libnvjpeg.so.13 on the loader path, in the build's CUDA toolkit or /usr/local/cuda; tests use a stand-in, which also serves the CPU device)") \
    X(NVJPEG_CPU_SHARE, INT, "", 0, 100, "percent of the JPEGs nvJPEG could take that --decoder auto decodes on the CPU threads instead, both decoders at once (unset: 0, docs/eval.md)") \
    X(GPU_PREP_FEEDERS, INT, "1", 1, 3, "threads of the device image prep that each feed one batch at a time (nvJPEG's batched call, with a state of its own, and the wait for the batch's CPU decodes), so that up to this many batches decode at once (docs/eval.md)") \
    X(GPU_PREP_STALL_S, INT, "60", 1, 86400, "seconds a batch of the device image prep may wait for its decode before the wait logs what each feeder thread is doing, and again every as many seconds (docs/eval.md)") \
    X(NVJPEG_BACKEND, STR, "", 0, 0, "hardware or gpu-hybrid: force that nvJPEG backend (unset: hardware where the GPU has JPEG engines, else gpu-hybrid)") \
    X(SCONTROL, STR, "scontrol", 0, 0, "the scontrol program that drains fenced nodes") \
    X(NODE_NAME, STR, "", 0, 0, "node name of health findings, the worker's stop message and drains (unset: the short host name; tests emulate nodes with it)") \
    X(CUDA_POOL_PERCENT_MAX, INT, "100", 1, 100, "at most this percent of the free GPU memory a pre-allocated pool reserves, whatever memory.preallocate_fraction says (bench/sanitize_gpu.sh sets it when it runs several GPU tests at once)") \
    X(GEMM_SM90, BOOL, "1", 0, 0, "0/off: GEMMs on compute capability 9.0 take the mma.sync kernels of gemm_tc.cu instead of the wgmma + TMA ones of gemm_sm90.cu") \
    X(GEMM_TF32_SWAP, BOOL, "1", 0, 0, "0/off: a TF32 GEMM with an N-major B on compute capability 9.0 transposes B into a copy first instead of computing the transposed product with A from registers (kernels/cuda/gemm_sm90.cu)") \
    X(CONV_SM90, INT, "1", 0, 2, "TF32 and BF16 convolutions on compute capability 9.0 on the wgmma kernels of conv2d_sm90.cu: 1 (default) where measured faster (forward and stride-1 bwd_data from the NHWC copy with C*R*S >= 256 and a quarter of the multiprocessors in tiles, or from the NCHW gather in TF32 with > 32 channels, C*R*S >= 256 and tiles filling the GPU; every bwd_weight), 2 always, 0 never (the mma.sync kernels of conv2d_tc.cu)") \
    X(CONV_PATCH, BOOL, "0", 0, 0, "1/on: the wgmma stride-1 forward and data gradient of ODL_CONV_SM90 read their input straight from NCHW into a window patch in shared memory instead of through the NHWC copy (kernels/cuda/conv2d_sm90.cu; measured slower on an H100, 2026-12-07: opt-in while it is worked on)") \
    X(CONV_F16_SM90, INT, "1", 0, 2, "float16 NHWC convolutions (YOLOv5 --half) on compute capability 9.0 on the wgmma kernels of conv2d_f16_sm90.cu: 1 (default) where the kernel lab measured them faster (at most 64 output channels, a reduction C*R*S of 64 or more, a CTA per multiprocessor), 2 wherever they can (C a multiple of 8), 0 never: the mma.sync kernels of conv2d_f16.cu") \
    X(CONV_F16_PERSIST, BOOL, "1", 0, 0, "0/off: the wgmma float16 convolutions of ODL_CONV_F16_SM90 launch a CTA per tile instead of two (one for 128-channel tiles) per multiprocessor that walk the tiles (kernels/cuda/conv2d_f16_sm90.cu)") \
    X(CONV_WGRAD_PRODUCER, INT, "2", 0, 2, "the wgmma weight gradient's producers (kernels/cuda/conv2d_sm90.cu WgradCfg): 2 (default) two warpgroups, dy's rows in 16-byte copies where a stage's 32 pixels are consecutive in one image; 1 one warpgroup with those copies; 0 one warpgroup of 4-byte copies (MNIST conv2 at batch 512 on an H100: 245 -> 174 us)") \
    X(CONV_WGRAD_BF16_STAGE, BOOL, "1", 0, 0, "0/off: the BF16 weight gradient on compute capability 9.0's wgmma kernel reads dy and x from two float32 copies rounded to bfloat16 first, and its bias gradient gets a pass of its own, instead of the kernel rounding each stage in shared memory and summing db as TF32's (kernels/cuda/conv2d_sm90.cu conv_wgrad_bf16: the same dw bits); on: +12.6 % examples-CNN batch-512 bf16 samples/s on an H100") \
    X(CONV_WGRAD_BIAS, BOOL, "1", 0, 0, "0/off: a convolution's bias gradient on CUDA gets a pass of its own over dy instead of being summed by the weight gradient from its own reads of dy: the TF32 wgmma kernel on compute capability 9.0 (kernels/cuda/conv2d_sm90.cu; BF16's with ODL_CONV_WGRAD_BF16_STAGE) and the FMA kernel of C*R*S <= 16 in every precision (conv2d.cu bwd_weight_smalln); on: +5 % examples-CNN batch-512 tf32 samples/s on an H100") \
    X(CONV_WGRAD_BIAS_FMA, BOOL, "1", 0, 0, "0/off: the FMA implicit-GEMM weight gradient (C*R*S > 16 in fp32: MNIST conv2) leaves the bias gradient to a pass of its own over dy (double sums) instead of summing it from its A loader's reads of dy (with ODL_CONV_WGRAD_BIAS; kernels/cuda/conv2d_tiles.cuh DyRowsSumTile: float32 split sums, added in order). On: +1.4 % examples-CNN batch-512 fp32 samples/s on an H200 (bench/NOTES.md)") \
    X(CONV_GATHER_TABLE, BOOL, "1", 0, 0, "1/on (default): the FMA implicit-GEMM forward (not 1x1 stride-1 unpadded) and stride-1 data gradient of at most 1152 reduction rows (fp32: MNIST conv2) read each row's channel and window shift from a table in shared memory each block writes once, instead of two divisions per row in every thread (kernels/cuda/conv2d_tiles.cuh GatherTableTile); 0: the divisions (fp32 batch 512 on an H100: 275k -> 292k samples/s with it)") \
    X(CONV_NHWC, BOOL, "1", 0, 0, "0/off: the wgmma convolutions of ODL_CONV_SM90 gather from the NCHW tensor by 4-byte copies instead of from an NHWC copy made first (kernels/cuda/conv2d_sm90.cu)") \
    X(CONV_TC_TILE, STR, "", 0, 0, "forces the tile of the TF32/BF16 tensor-core convolutions (fwd and bwd_data): 64x256, 32x256 or 64x128 (unset: the built-in plan)") \
    X(POOL_RELU_FUSE, BOOL, "1", 0, 0, "0/off: training runs the backward of a ReLU (a convolution's or linear layer's epilogue) followed by a max-pool as two passes instead of one (odl_maxpool2d_relu_bwd, the same bits; nn/net.c; +7 % examples-CNN batch-512 samples/s on an H100, bench/NOTES.md)") \
    X(CONV_RELU_FUSE, BOOL, "0", 0, 0, "1/on: training runs the backward of a ReLU (a convolution's or linear layer's epilogue) followed by a convolution inside that convolution's data gradient, as it stores dx (odl_conv2d_relu_bwd, the same bits; nn/net.c). Off: measured 1 % slower on an H100 (bench/NOTES.md)") \
    X(CONV_WGRAD_RELU, BOOL, "0", 0, 0, "1/on: training runs a first convolution's own ReLU backward (no input gradient wanted: MNIST conv1) inside its weight gradient's reads of dy (odl_conv2d_relu_out_bwd_weight; CUDA where C*R*S <= 16: bwd_weight_smalln; the same bits; nn/net.c). Off: on an H200 the fused kernel took 91 us against 43 plus the ~40 us pass it saves, -0.8 % fp32 and -2.1 % tf32 samples/s (bench/NOTES.md)") \
    X(OPTIM_GROUP, BOOL, "1", 0, 0, "0/off: a training step's optimiser updates its parameters with one call per parameter instead of one grouped call (nn/optim.c, odl_*_step_group_at: on CUDA one launch, and one CUDA-graph node, per 16 parameters instead of one per parameter); the same bits either way") \
    X(EXIT_SKIP_TEARDOWN, BOOL, "0", 0, 0, "1/on: odl_worker --task=infer and eval end with _exit() once their outputs are written and closed and what they hold released, skipping the CUDA runtime's teardown at exit (primary context, modules), which the driver does anyway as the process ends (worker/main.c). Off: on an H200 one-image --task=infer took 429 ms whole process (median of 7) with it off and 434 with it on: the teardown moves, it does not go") \
    X(GEMM_CONFIG, STR, "", 0, 0, "forces the wgmma GEMM's configuration: TILE[:SPLITS[:CTAS]], TILE one of 128x256, 128x128, 64x128 or its index (unset: the tuned table, else the built-in plan)") \
    X(GEMM_TABLE, STR, "", 0, 0, "the tuned GEMM table odl_bench_kernels --tune writes and GEMMs read (unset: $XDG_CACHE_HOME/odl/gemm_sm90.tsv, else ~/.cache/odl/gemm_sm90.tsv)") \
    X(FAULT, STR, "", 0, 0, "tests and drills: fault injection after a step (an eval batch in --task=eval), faults separated by ';': kill@rank=1,step=15; hang@, exit@, stop@, slow@...,ms=M (docs/coordinator.md); xidNN@rank=R,step=S (docs/health.md)")

typedef enum odl_env_id {
#define ODL_ENV_ENUM_(id, type, def, lo, hi, doc) ODL_ENV_##id,
    ODL_ENV_TABLE(ODL_ENV_ENUM_)
#undef ODL_ENV_ENUM_
    ODL_ENV_COUNT
} odl_env_id;

typedef enum odl_env_type { ODL_ENV_INT, ODL_ENV_BOOL, ODL_ENV_STR } odl_env_type;

typedef struct odl_env_var {
    const char *name; /* "ODL_CPU_THREADS" */
    odl_env_type type;
    const char *def;  /* "" = unset */
    int64_t min, max; /* INT only */
    const char *doc;
} odl_env_var;

/* The table, ODL_ENV_COUNT rows in ODL_ENV_TABLE's order. */
ODL_API const odl_env_var *odl_env_table(size_t *n);
/* "int", "bool" or "string". */
ODL_API const char *odl_env_type_name(odl_env_type t);

/* Parse every variable (once; later calls return the first call's result). Errors: ODL_E_CONFIG naming
 * the first bad variable and its value ("ODL_CPU_THREADS='abc': not an integer", "... outside 1..64"). */
ODL_API odl_status odl_env_load(void);
/* Parse the environment again (tests, and programs that change their own environment before starting). */
ODL_API odl_status odl_env_reload(void);

/* 1 when the variable is set to a valid, non-empty value (otherwise its default applies). */
ODL_API int odl_env_is_set(odl_env_id id);
/* The value (INT and BOOL rows: the default when unset, empty or bad; 0 when that default is ""). */
ODL_API int64_t odl_env_int(odl_env_id id);
ODL_API int odl_env_bool(odl_env_id id);
/* The text (STR rows; the row's default, often "", when unset). Valid for the life of the process. */
ODL_API const char *odl_env_str(odl_env_id id);

#ifdef __cplusplus
}
#endif
#endif
