/* AllReduce bandwidth through the project's communication layer (odl_comm_allreduce_sum: events to
 * order the communication stream after the caller's stream and back, ncclAllReduce on a high-priority
 * stream, the watchdog's event) beside raw ncclAllReduce on a plain stream, float32 sum in place, for
 * buffers of 4 MiB to 1 GiB. One process per GPU:
 *
 *   mpirun -np 2 build/bench/allreduce_bench [--min-mb 4] [--max-mb 1024] [--iters N] [--warmup N]
 *
 * Time per call: cudaEvents around `iters` back-to-back calls on the caller's stream, divided by iters;
 * the slowest rank's time is reported (as the job waits for it). Bandwidths as nccl-tests defines them
 * (NCCL's doc/PERFORMANCE.md): algbw = bytes / time, busbw = algbw * 2 (n - 1) / n for AllReduce, so that
 * busbw is comparable to the link speed whatever the rank count. Rank 0 prints one row per size and the
 * ratio odl/raw of bus bandwidths. Before timing, both paths are checked on a 4 MiB buffer: every
 * element must equal n (n + 1) / 2 when rank r contributes r + 1.
 * NVLink multicast (NVLS) stays off (NCCL_NVLS_ENABLE=0) unless the caller sets NCCL_NVLS_ENABLE. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include "odl/comm.h"
#include "odl/device.h"

#define CK_CUDA(call)                                                                                   \
    do {                                                                                                \
        cudaError_t e_ = (call);                                                                        \
        if (e_ != cudaSuccess) {                                                                        \
            fprintf(stderr, "allreduce_bench: %s: %s\n", #call, cudaGetErrorString(e_));                \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                               \
        }                                                                                               \
    } while (0)
#define CK_NCCL(call)                                                                                   \
    do {                                                                                                \
        ncclResult_t r_ = (call);                                                                       \
        if (r_ != ncclSuccess) {                                                                        \
            fprintf(stderr, "allreduce_bench: %s: %s\n", #call, ncclGetErrorString(r_));                \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                               \
        }                                                                                               \
    } while (0)
#define CK_ODL(call)                                                                                    \
    do {                                                                                                \
        odl_status s_ = (call);                                                                         \
        if (s_ != ODL_OK) odl_comm_abort_job(NULL, 1, "%s: %s", #call, odl_error_msg());                \
    } while (0)

typedef struct ctx {
    odl_comm *comm;
    ncclComm_t raw;
    cudaStream_t raw_stream, odl_stream;
    float *buf;
    int rank, size;
} ctx;

static void fill(ctx *c, size_t n, float v) {
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = v;
    CK_CUDA(cudaMemcpy(c->buf, h, n * sizeof *h, cudaMemcpyHostToDevice));
    free(h);
}

static int check(ctx *c, size_t n, const char *what) {
    float *h = malloc(n * sizeof *h);
    CK_CUDA(cudaDeviceSynchronize());
    CK_CUDA(cudaMemcpy(h, c->buf, n * sizeof *h, cudaMemcpyDeviceToHost));
    float want = (float)(c->size * (c->size + 1) / 2);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += h[i] != want;
    free(h);
    int all_bad = 0, mine = bad != 0;
    MPI_Allreduce(&mine, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (c->rank == 0)
        printf("# check %-4s: %s (every element %g on every rank)\n", what, all_bad ? "WRONG" : "ok", (double)want);
    return all_bad == 0;
}

/* Seconds per call, slowest rank. */
static double time_calls(ctx *c, int use_odl, size_t count, int warmup, int iters) {
    cudaStream_t s = use_odl ? c->odl_stream : c->raw_stream;
    cudaEvent_t a, b;
    CK_CUDA(cudaEventCreate(&a));
    CK_CUDA(cudaEventCreate(&b));
    for (int i = 0; i < warmup + iters; i++) {
        if (i == warmup) CK_CUDA(cudaEventRecord(a, s));
        if (use_odl) CK_ODL(odl_comm_allreduce_sum(c->comm, c->buf, (int64_t)count));
        else CK_NCCL(ncclAllReduce(c->buf, c->buf, count, ncclFloat32, ncclSum, c->raw, s));
    }
    CK_CUDA(cudaEventRecord(b, s));
    CK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CK_CUDA(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    double t = ms * 1e-3 / iters, tmax = t;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

int main(int argc, char **argv) {
    double min_mb = 4, max_mb = 1024;
    int iters = 0, warmup = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--min-mb") && i + 1 < argc) min_mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-mb") && i + 1 < argc) max_mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: mpirun -np N allreduce_bench [--min-mb 4] [--max-mb 1024] [--iters N] [--warmup N]\n");
            return 2;
        }
    }
    setenv("NCCL_NVLS_ENABLE", "0", 0); /* NVLink multicast off unless the caller says otherwise */
    odl_launch_info li;
    CK_ODL(odl_launch_detect(&li));
    if (!li.launched) {
        fprintf(stderr, "allreduce_bench: start it with mpirun -np <GPUs> (one rank per GPU)\n");
        return 2;
    }
    ctx c;
    memset(&c, 0, sizeof c);
    odl_comm_options o = {.device_type = ODL_DEV_CUDA, .cuda_index = -1, .timeout_s = 600};
    CK_ODL(odl_comm_init(&li, &o, &c.comm));
    c.rank = odl_comm_rank(c.comm);
    c.size = odl_comm_size(c.comm);
    odl_device dev = odl_comm_device(c.comm);
    size_t max_bytes = (size_t)(max_mb * 1024 * 1024) / 4 * 4;
    /* The pool must hold the largest buffer: reserve what it needs plus slack. */
    size_t free_b = 0, total_b = 0;
    CK_CUDA(cudaMemGetInfo(&free_b, &total_b));
    double frac = (double)(max_bytes + (256u << 20)) / (double)free_b;
    if (frac > 0.9) frac = 0.9;
    CK_ODL(odl_cuda_init(dev.index, frac));
    void *p = NULL;
    CK_ODL(odl_mem_alloc(dev, max_bytes, &p));
    c.buf = p;
    c.odl_stream = (cudaStream_t)odl_stream_current();

    ncclUniqueId id;
    if (c.rank == 0) CK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    CK_NCCL(ncclCommInitRank(&c.raw, c.size, id, c.rank));
    CK_CUDA(cudaStreamCreateWithFlags(&c.raw_stream, cudaStreamNonBlocking));

    int nccl_v = 0;
    ncclGetVersion(&nccl_v);
    if (c.rank == 0) {
        struct cudaDeviceProp prop;
        cudaGetDeviceProperties(&prop, dev.index);
        printf("# allreduce_bench: %d ranks, %s, NCCL %d, odl backend %s, NCCL_NVLS_ENABLE=%s\n", c.size, prop.name,
               nccl_v, odl_comm_backend_name(odl_comm_get_backend(c.comm)),
               getenv("NCCL_NVLS_ENABLE") ? getenv("NCCL_NVLS_ENABLE") : "(unset)");
    }
    size_t check_n = (4u << 20) / sizeof(float);
    if (check_n * sizeof(float) > max_bytes) check_n = max_bytes / sizeof(float);
    int ok = 1;
    fill(&c, check_n, (float)(c.rank + 1));
    CK_ODL(odl_comm_allreduce_sum(c.comm, c.buf, (int64_t)check_n));
    ok &= check(&c, check_n, "odl");
    fill(&c, check_n, (float)(c.rank + 1));
    CK_NCCL(ncclAllReduce(c.buf, c.buf, check_n, ncclFloat32, ncclSum, c.raw, c.raw_stream));
    CK_CUDA(cudaStreamSynchronize(c.raw_stream));
    ok &= check(&c, check_n, "raw");

    if (c.rank == 0) {
        printf("| size | odl time (us) | odl algbw (GB/s) | odl busbw (GB/s) | raw NCCL time (us) | raw algbw (GB/s) | raw busbw (GB/s) | odl/raw busbw |\n");
        printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    CK_CUDA(cudaMemset(c.buf, 0, max_bytes));
    CK_CUDA(cudaDeviceSynchronize());
    for (double mb = min_mb; mb <= max_mb * 1.0001; mb *= 2) {
        size_t bytes = (size_t)(mb * 1024 * 1024) / 4 * 4, count = bytes / 4;
        int it = iters > 0 ? iters : (bytes <= (64u << 20) ? 50 : 20);
        /* Alternate the two paths so that clocks and temperature treat them alike. */
        double t_raw = time_calls(&c, 0, count, warmup, it);
        double t_odl = time_calls(&c, 1, count, warmup, it);
        double f = 2.0 * (c.size - 1) / c.size;
        double a_odl = bytes / t_odl / 1e9, a_raw = bytes / t_raw / 1e9;
        if (c.rank == 0) {
            char sz[32];
            if (bytes >= (1u << 30)) snprintf(sz, sizeof sz, "%.0f GiB", bytes / 1073741824.0);
            else snprintf(sz, sizeof sz, "%.0f MiB", bytes / 1048576.0);
            printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f |\n", sz, t_odl * 1e6, a_odl, a_odl * f,
                   t_raw * 1e6, a_raw, a_raw * f, a_odl / a_raw);
            fflush(stdout);
        }
    }
    CK_ODL(odl_comm_synchronize(c.comm));
    ncclCommDestroy(c.raw);
    cudaStreamDestroy(c.raw_stream);
    odl_mem_free(dev, c.buf);
    odl_status fs = odl_comm_finalize(c.comm);
    odl_cuda_shutdown();
    return ok && fs == ODL_OK ? 0 : 1;
}
