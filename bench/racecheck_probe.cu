/* racecheck_probe: which shared-memory ring hand-offs compute-sanitizer's racecheck follows.
 *
 * One CTA: a producer warpgroup fills a 4-stage ring in shared memory, a consumer warpgroup reads it with
 * ordinary loads (as conv2d_sm90.cu's register-A kernel does) and releases each stage back. Each variant
 * hands the stages over another way; all are ordered by the PTX memory model, and the sums are checked
 * against the host's. Run each under `compute-sanitizer --tool racecheck` and compare the hazard counts:
 *
 *   0  cp.async + cp.async.mbarrier.arrive.noinc; consumers wait by parity, release by bar.sync + one arrival
 *   1  cp.async + cp.async.wait_all + mbarrier.arrive.release; the rest as 0
 *   2  ld.global + st.shared + mbarrier.arrive.release; the rest as 0
 *   3  as 2, every consumer thread arrives on the empty barrier (no named barrier)
 *   4  as 2, token waits: consumers arrive on the full barrier and wait on their token, the producers
 *      arrive on the empty barrier and wait on theirs (the pattern of cuda::barrier arrive_and_wait)
 *   5  cuda::barrier<thread_scope_block> (libcu++): consumers full.arrive_and_wait(), producers
 *      empty.arrive_and_wait() (NVIDIA's release notes of Compute Sanitizer 2021.2: racecheck supports
 *      cuda::barrier)
 *   6  as 0 (cp.async + noinc arrival), with the token waits of 4
 *
 * Built with the benchmarks on CUDA builds (sm_90a). Usage: racecheck_probe VARIANT: prints "variant V ok"
 * or "variant V WRONG" (exit 1). Under `compute-sanitizer --tool racecheck` on an H100 (2026-12-07,
 * bench/results/2026-12-07/twelfth): variants 0, 1 and 2 report 40,641 WAR hazards each, 3 to 6 none.
 * So racecheck follows an mbarrier's phase from each thread's own arrival to the waiters (parity waits
 * included), and not through a named barrier before one thread's arrival: kernels whose consumers read
 * a ring stage with ordinary loads hand it back by every reading thread (ConsumerRing, sm90_util.cuh).
 */
#include <cuda/barrier>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

constexpr int kStages = 4, kRounds = 24, kThreads = 128, kStageFloats = kThreads * 4;

__device__ __forceinline__ uint32_t saddr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bar_init(uint64_t *b, uint32_t n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(b)), "r"(n));
}
__device__ __forceinline__ void arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(saddr(b)) : "memory");
}
__device__ __forceinline__ uint64_t arrive_token(uint64_t *b) {
    uint64_t t;
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 %0, [%1];" : "=l"(t) : "r"(saddr(b)) : "memory");
    return t;
}
__device__ __forceinline__ void wait_token(uint64_t *b, uint64_t t) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.acquire.cta.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(saddr(b)), "l"(t) : "memory");
}
__device__ __forceinline__ void wait_parity(uint64_t *b, uint32_t parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(saddr(b)), "r"(parity) : "memory");
}
__device__ __forceinline__ void cp16(float *dst, const float *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(saddr(dst)), "l"(src) : "memory");
}

/* The consumer thread t reads 4 floats another warp's producer thread wrote, so every read crosses warps. */
__device__ __forceinline__ float consume(const float *stage, int t) {
    const int src = (t + 37) % kThreads;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) s += stage[src * 4 + i];
    return s;
}

template <int V>
__global__ void __launch_bounds__(2 * kThreads) ring(const float *in, float *out) {
    __shared__ __align__(16) float ring_buf[kStages][kStageFloats];
    __shared__ uint64_t full[kStages], empty[kStages];
    /* As NVIDIA's CUDA C++ Programming Guide declares a block-scope cuda::barrier (init() below sets it up) */
#pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ cuda::barrier<cuda::thread_scope_block> bfull[kStages], bempty[kStages];
    const int t = threadIdx.x % kThreads;
    const bool producer = threadIdx.x < kThreads;
    constexpr bool token = V == 4 || V == 6;
    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; s++) {
            bar_init(&full[s], token ? 2 * kThreads : kThreads);
            bar_init(&empty[s], token ? 2 * kThreads : (V == 3 ? kThreads : 1));
            if (V == 5) {
                init(&bfull[s], 2 * kThreads);
                init(&bempty[s], 2 * kThreads);
            }
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (producer) {
        for (int r = 0; r < kRounds; r++) {
            const int s = r % kStages;
            const uint32_t ph = (uint32_t)(r / kStages) & 1;
            if (V == 5) {
                if (r >= kStages) bempty[s].arrive_and_wait();
            } else if (token) {
                if (r >= kStages) wait_token(&empty[s], arrive_token(&empty[s]));
            } else {
                wait_parity(&empty[s], ph ^ 1);
            }
            const float *src = in + (int64_t)r * kStageFloats + t * 4;
            float *dst = &ring_buf[s][t * 4];
            if (V == 0 || V == 1 || V == 6) {
                cp16(dst, src);
                if (V == 1) {
                    asm volatile("cp.async.wait_all;" ::: "memory");
                    arrive(&full[s]);
                } else {
                    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(saddr(&full[s])) : "memory");
                }
            } else {
                *reinterpret_cast<float4 *>(dst) = *reinterpret_cast<const float4 *>(src);
                if (V == 5) (void)bfull[s].arrive();
                else arrive(&full[s]);
            }
        }
    } else {
        float acc = 0.0f;
        for (int r = 0; r < kRounds; r++) {
            const int s = r % kStages;
            const uint32_t ph = (uint32_t)(r / kStages) & 1;
            if (V == 5) bfull[s].arrive_and_wait();
            else if (token) wait_token(&full[s], arrive_token(&full[s]));
            else wait_parity(&full[s], ph);
            acc += consume(ring_buf[s], t);
            if (V == 5) (void)bempty[s].arrive();
            else if (token || V == 3) arrive(&empty[s]);
            else {
                asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory");
                if (t == 0) arrive(&empty[s]);
            }
        }
        out[t] = acc;
    }
}

template <int V>
cudaError_t launch(const float *in, float *out) {
    ring<V><<<1, 2 * kThreads>>>(in, out);
    return cudaDeviceSynchronize();
}

} // namespace

int main(int argc, char **argv) {
    const int v = argc > 1 ? atoi(argv[1]) : 0;
    const int n = kRounds * kStageFloats;
    float *h = (float *)malloc(sizeof(float) * n), want[kThreads], got[kThreads];
    for (int i = 0; i < n; i++) h[i] = (float)((i * 7919) % 1000) / 8.0f; /* exact in float sums below 2^24 */
    for (int t = 0; t < kThreads; t++) {
        want[t] = 0.0f;
        for (int r = 0; r < kRounds; r++)
            for (int i = 0; i < 4; i++) want[t] += h[r * kStageFloats + ((t + 37) % kThreads) * 4 + i];
    }
    float *din, *dout;
    if (cudaMalloc(&din, sizeof(float) * n) != cudaSuccess || cudaMalloc(&dout, sizeof(got)) != cudaSuccess) {
        fprintf(stderr, "racecheck_probe: cudaMalloc failed\n");
        return 2;
    }
    cudaMemcpy(din, h, sizeof(float) * n, cudaMemcpyHostToDevice);
    cudaError_t e;
    switch (v) {
    case 0: e = launch<0>(din, dout); break;
    case 1: e = launch<1>(din, dout); break;
    case 2: e = launch<2>(din, dout); break;
    case 3: e = launch<3>(din, dout); break;
    case 4: e = launch<4>(din, dout); break;
    case 5: e = launch<5>(din, dout); break;
    case 6: e = launch<6>(din, dout); break;
    default: fprintf(stderr, "racecheck_probe: variant %d: expected 0..6\n", v); return 2;
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "racecheck_probe: variant %d: %s\n", v, cudaGetErrorString(e));
        return 2;
    }
    cudaMemcpy(got, dout, sizeof(got), cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int t = 0; t < kThreads; t++) bad += got[t] != want[t];
    printf("variant %d %s\n", v, bad ? "WRONG" : "ok");
    return bad ? 1 : 0;
}
