// Probe: does a wgmma A descriptor whose start is R0 rows (R0 % 8 != 0) into a 128-byte-swizzled tile
// (swizzle by absolute address) read rows R0.. correctly with base_offset 0, or does it need (R0 & 7)?
#include <cstdio>
#include <cstdint>
#include "kernels/cuda/sm90_util.cuh"
#include "kernels/cuda/wgmma_ops.cuh"
using namespace odlk::sm90;
__device__ uint32_t sw(int row, uint32_t b) { return row * 128u + ((((b >> 4) ^ (uint32_t)(row & 7))) << 4) + (b & 15); }
__global__ void probe(int R0, int mode, float *out) {
    extern __shared__ unsigned char raw[];
    unsigned char *sm = (unsigned char *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
    unsigned char *A = sm, *Ref = sm + 80 * 128, *B = Ref + 64 * 128;
    for (int i = threadIdx.x; i < 80 * 32; i += 128) { int r = i / 32, k = i % 32; *(float *)(A + sw(r, k * 4)) = (float)((r * 7 + k * 3) % 17 - 8); }
    for (int i = threadIdx.x; i < 64 * 32; i += 128) { int r = i / 32, k = i % 32; int rr = r + R0; *(float *)(Ref + sw(r, k * 4)) = (float)((rr * 7 + k * 3) % 17 - 8); }
    for (int i = threadIdx.x; i < 32 * 32; i += 128) { int r = i / 32, k = i % 32; *(float *)(B + sw(r, k * 4)) = (float)((r * 5 + k) % 13 - 6); }
    fence_proxy_async_shared();
    __syncthreads();
    float acc[16], ref[16];
    for (int i = 0; i < 16; i++) acc[i] = ref[i] = 0.f;
    const uint32_t a0 = smem_addr(A) + R0 * 128, r0 = smem_addr(Ref), b0 = smem_addr(B);
    wgmma_fence();
    for (int j = 0; j < 4; j++) {
        uint64_t da = desc_sw128(a0 + 32 * j, 16, 1024);
        if (mode == 1) da |= (uint64_t)(R0 & 7) << 49;
        Wgmma<WgIn::TF32, 32, 0, 0>::run(acc, da, desc_sw128(b0 + 32 * j, 16, 1024), j > 0);
        Wgmma<WgIn::TF32, 32, 0, 0>::run(ref, desc_sw128(r0 + 32 * j, 16, 1024), desc_sw128(b0 + 32 * j, 16, 1024), j > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    int bad = 0;
    for (int i = 0; i < 16; i++) bad += acc[i] != ref[i];
    atomicAdd(out, (float)bad);
}
int main() {
    float *d; cudaMalloc(&d, 4);
    cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
    for (int mode = 0; mode < 2; mode++) for (int R0 : {0, 1, 3, 5, 8, 13, 26, 55}) {
        cudaMemset(d, 0, 4);
        probe<<<1, 128, 64 * 1024>>>(R0, mode, d);
        float h = -1; cudaError_t e = cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost);
        printf("desc_probe base_offset_mode %d R0 %2d mismatches %g %s\n", mode, R0, h, cudaGetErrorString(e));
    }
    return 0;
}
