/* Philox4x32-10 counter-based RNG (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
 * SC'11; the constants are those of Random123 and cuRAND). The same (seed, offset, index) gives the
 * same number on the CPU and in a CUDA kernel, which is what makes dropout reproducible across
 * backends and resumable from a checkpoint: the RNG state is just (seed, offset).
 *
 * Stream layout used by the whole library: element i of a draw at `offset` uses counter
 * {i/4 (low 32), i/4 (high 32), offset (low 32), offset (high 32)}, key {seed low, seed high}, and takes
 * word i%4 of the block. A consumer advances its offset by one per draw (per step), not per element.
 */
#ifndef ODL_RNG_H
#define ODL_RNG_H

#include <stdint.h>

#if defined(__CUDACC__)
#define ODL_HD __host__ __device__ __forceinline__
#else
#define ODL_HD static inline
#endif

typedef struct odl_philox_out { uint32_t v[4]; } odl_philox_out;

ODL_HD uint32_t odl_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

ODL_HD odl_philox_out odl_philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = odl_mulhilo32(0xD2511F53u, c0, &hi0);
        uint32_t lo1 = odl_mulhilo32(0xCD9E8D57u, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    odl_philox_out o;
    o.v[0] = c0; o.v[1] = c1; o.v[2] = c2; o.v[3] = c3;
    return o;
}

/* The 32-bit random word for element `index` of the draw at `offset`. */
ODL_HD uint32_t odl_philox_u32(uint64_t seed, uint64_t offset, uint64_t index) {
    uint64_t blk = index >> 2;
    odl_philox_out o = odl_philox4x32_10((uint32_t)blk, (uint32_t)(blk >> 32), (uint32_t)offset,
                                         (uint32_t)(offset >> 32), (uint32_t)seed, (uint32_t)(seed >> 32));
    return o.v[index & 3];
}

/* Uniform float in [0, 1) with 24 random bits. */
ODL_HD float odl_philox_uniform(uint64_t seed, uint64_t offset, uint64_t index) {
    return (float)(odl_philox_u32(seed, offset, index) >> 8) * (1.0f / 16777216.0f);
}

/* Standard normal via Box-Muller on two uniforms of the same block (elements 2j, 2j+1 pair up). */
#if !defined(__CUDACC__)
#include <math.h>
#endif
ODL_HD float odl_philox_normal(uint64_t seed, uint64_t offset, uint64_t index) {
    uint64_t j = index & ~(uint64_t)1;
    float u1 = ((float)(odl_philox_u32(seed, offset, j) >> 8) + 1.0f) * (1.0f / 16777216.0f); /* (0, 1] */
    float u2 = (float)(odl_philox_u32(seed, offset, j + 1) >> 8) * (1.0f / 16777216.0f);
    float r = sqrtf(-2.0f * logf(u1));
    return (index & 1) ? r * sinf(6.2831853071795864f * u2) : r * cosf(6.2831853071795864f * u2);
}

#endif
