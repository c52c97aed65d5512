/* IEEE 754 binary16 ("half", float16) conversions on the host. odl_half (odl/backend.h) holds the bits.
 *
 * odl_float_to_half rounds to nearest, ties to even, as CUDA's __float2half_rn and NumPy's astype(float16):
 * values beyond the half range become +-inf, NaN stays NaN (a quiet NaN), and results below the normal
 * range become subnormal or signed zero. odl_half_to_float is exact. */
#ifndef ODL_HALF_H
#define ODL_HALF_H

#include "odl/api.h"
#include <stddef.h>
#include <stdint.h>

#include "odl/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

ODL_API odl_half odl_float_to_half(float f);
ODL_API float odl_half_to_float(odl_half h);
/* n values; src and dst must not overlap. */
ODL_API void odl_floats_to_halfs(const float *src, odl_half *dst, size_t n);
ODL_API void odl_halfs_to_floats(const odl_half *src, float *dst, size_t n);

#ifdef __cplusplus
}
#endif
#endif
