/* ODL_API marks the functions of the public API (the headers of include/odl).
 *
 * libodl is built with hidden visibility (CMake's C_VISIBILITY_PRESET hidden), so only functions declared
 * with ODL_API are exported from libodl.so; everything else (the CPU and CUDA kernels' entry points, the
 * comm internals, the models' helpers) stays inside the library. tests/layering.py checks that
 * `nm -D libodl.so` lists nothing else.
 */
#ifndef ODL_API_H
#define ODL_API_H

#if defined(__GNUC__) || defined(__clang__)
#define ODL_API __attribute__((visibility("default")))
#else
#define ODL_API
#endif

#endif /* ODL_API_H */
