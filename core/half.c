/* IEEE 754 binary16 conversions on the host (odl/half.h), by bit manipulation so that the result does
 * not depend on the compiler's _Float16 support or the FPU's rounding mode.
 *
 * float -> half, round to nearest, ties to even:
 *   |f| >= 65520 (0x477FF000: halfway between 65504, the largest half, and 2^16) -> inf; the tie at 65520
 *     itself goes to the even neighbour 2^16, i.e. overflows, as __float2half_rn and NumPy do.
 *   2^-14 <= |f| < 65520: rebias the exponent and round the 23-bit mantissa to 10 bits; a carry out of the
 *     mantissa correctly increments the exponent (0x3FF + 1 = next binade).
 *   |f| < 2^-14: the result is round(|f| / 2^-24) subnormal units (or the smallest normal when that
 *     rounds up to 0x400, which the bits also encode correctly); |f| <= 2^-25 rounds to signed zero.
 *   NaN -> sign | 0x7E00 | top mantissa bits (quiet bit set); inf -> inf.
 * half -> float is exact: normals rebias, subnormals are normalised, NaN keeps its payload (quietened).
 */
#include "odl/half.h"

#include <string.h>

static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

odl_half odl_float_to_half(float f) {
    const uint32_t x = float_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return (odl_half)(sign | 0x7E00u | ((ax >> 13) & 0x3FFu)); /* NaN, quiet */
    if (ax >= 0x477FF000u) return (odl_half)(sign | 0x7C00u);                        /* inf or overflow */
    if (ax >= 0x38800000u) {                                                           /* normal half */
        const uint32_t m = ax - ((uint32_t)(127 - 15) << 23);                         /* rebiased */
        return (odl_half)(sign | ((m + 0x0FFFu + ((m >> 13) & 1u)) >> 13));
    }
    if (ax <= 0x33000000u) return sign; /* |f| <= 2^-25: zero (2^-25 is a tie, to the even 0) */
    /* subnormal: |f| = mant * 2^(e - 150) = (mant >> shift) units of 2^-24 with shift = 126 - e in 14..24 */
    const uint32_t e = ax >> 23, mant = (ax & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e;
    const uint32_t rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    uint32_t r = mant >> shift;
    if (rem > halfway || (rem == halfway && (r & 1u))) r++;
    return (odl_half)(sign | r);
}

float odl_half_to_float(odl_half h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return bits_float(sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0u)); /* inf, NaN */
    if (e == 0) {
        if (m == 0) return bits_float(sign); /* signed zero */
        /* subnormal m * 2^-24: shift the leading 1 into the implicit bit position */
        int k = 0;
        while (!(m & 0x400u)) {
            m <<= 1;
            k++;
        }
        /* value = (m / 2^10) * 2^(-14 - k) with m now in [0x400, 0x7FF] */
        return bits_float(sign | ((uint32_t)(127 - 14 - k) << 23) | ((m & 0x3FFu) << 13));
    }
    return bits_float(sign | ((e + 127u - 15u) << 23) | (m << 13));
}

void odl_floats_to_halfs(const float *src, odl_half *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = odl_float_to_half(src[i]);
}

void odl_halfs_to_floats(const odl_half *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = odl_half_to_float(src[i]);
}
