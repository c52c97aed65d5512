/* cv2.resize INTER_LINEAR on 8-bit images and EXIF orientation, one pixel at a time, shared by the CPU
 * image path (datasets/image.c: odl_image_resize_linear, the EXIF rotation of odl_image_load) and the
 * backends' letterbox_u8 entries (kernels/cpu/detect_post.c, kernels/cuda/detect_post.cu), so that a
 * letterbox made on the GPU from an image decoded there is byte for byte the one of the CPU path.
 * Private to kernels/ and datasets/.
 *
 * OpenCV (modules/imgproc/src/resize.cpp, resizeGeneric with INTER_LINEAR for CV_8U):
 *   source coordinate of output d: f = (float)((d + 0.5) * scale - 0.5), scale = 1 / (dst / src) in
 *   double; s = floor(f), f -= s; clamped: s < 0 -> 0, f = 0; s >= size - 1 -> size - 1, f = 0; the
 *   second tap min(s + 1, size - 1); weights saturate_cast<short>((1 - f) * 2048) and (f * 2048),
 *   rounded half to even;
 *   HResizeLinear: h = p0 * a0 + p1 * a1 (integers); VResizeLinearVec_32s8u: v = ((h0 >> 4) * b0 >> 16)
 *   + ((h1 >> 4) * b1 >> 16) in 16-bit high products, then (v + 2) >> 2, saturated to 0..255.
 * On the device the float and double operations go through the _rn intrinsics, so that nvcc cannot
 * contract them into FMAs (which round once instead of twice); the host build is C11 without
 * contraction (-std=c11 sets -ffp-contract=off).
 *
 * EXIF orientation (the tag 0x0112 values 1..8, as cv2.imread applies them): output pixel (x, y) of the
 * oriented image takes stored pixel odl_orient_src(...) of the w x h stored image; 5..8 swap the axes. */
#ifndef ODL_KERNELS_RESIZE_LINEAR_H
#define ODL_KERNELS_RESIZE_LINEAR_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ODL_RL_FN static __host__ __device__ __forceinline__
#else
#define ODL_RL_FN static inline
#endif

#define ODL_RL_COEF_SCALE 2048 /* 1 << 11: OpenCV's INTER_RESIZE_COEF_BITS */

/* OpenCV's scale of one axis: 1 / (dst / src), in double. */
ODL_RL_FN double odl_rl_scale(int dst, int src) {
#ifdef __CUDA_ARCH__
    return __ddiv_rn(1.0, __ddiv_rn((double)dst, (double)src));
#else
    return 1.0 / ((double)dst / src);
#endif
}

/* saturate_cast<short>(float): round half to even, clamped to int16. */
ODL_RL_FN int odl_rl_sat_short(float v) {
#ifdef __CUDA_ARCH__
    const int r = __float2int_rn(v);
#else
    const int r = (int)nearbyintf(v);
#endif
    return r > 32767 ? 32767 : r < -32768 ? -32768 : r;
}

/* Taps s0, s1 and weights a0, a1 of output coordinate d along an axis of ssize source pixels. */
ODL_RL_FN void odl_rl_coef(int d, double scale, int ssize, int *s0, int *s1, int *a0, int *a1) {
#ifdef __CUDA_ARCH__
    float f = __double2float_rn(__dadd_rn(__dmul_rn(__dadd_rn((double)d, 0.5), scale), -0.5));
    int s = (int)floorf(f);
    f = __fsub_rn(f, (float)s);
#else
    float f = (float)((d + 0.5) * scale - 0.5);
    int s = (int)floorf(f);
    f -= (float)s;
#endif
    if (s < 0) {
        s = 0;
        f = 0.f;
    }
    if (s >= ssize - 1) {
        s = ssize - 1;
        f = 0.f;
    }
    *s0 = s;
    *s1 = s + 1 < ssize ? s + 1 : ssize - 1;
#ifdef __CUDA_ARCH__
    *a0 = odl_rl_sat_short(__fmul_rn(__fsub_rn(1.f, f), (float)ODL_RL_COEF_SCALE));
    *a1 = odl_rl_sat_short(__fmul_rn(f, (float)ODL_RL_COEF_SCALE));
#else
    *a0 = odl_rl_sat_short((1.f - f) * ODL_RL_COEF_SCALE);
    *a1 = odl_rl_sat_short(f * ODL_RL_COEF_SCALE);
#endif
}

/* One output byte from the four taps p00 (row 0, column 0), p01, p10, p11 and the weights. */
ODL_RL_FN uint8_t odl_rl_value(int p00, int p01, int p10, int p11, int a0, int a1, int b0, int b1) {
    const int h0 = (p00 * a0 + p01 * a1) >> 4, h1 = (p10 * a0 + p11 * a1) >> 4;
    int v = ((h0 * b0) >> 16) + ((h1 * b1) >> 16);
    v = (v + 2) >> 2;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Stored pixel (*sx, *sy) of a w x h stored image that output pixel (x, y) of its EXIF orientation
 * `orient` shows (1 or out of range: none). */
ODL_RL_FN void odl_orient_src(int orient, int w, int h, int x, int y, int *sx, int *sy) {
    switch (orient) {
    case 2: *sx = w - 1 - x; *sy = y; break;         /* mirror horizontal */
    case 3: *sx = w - 1 - x; *sy = h - 1 - y; break; /* rotate 180 */
    case 4: *sx = x; *sy = h - 1 - y; break;         /* mirror vertical */
    case 5: *sx = y; *sy = x; break;                 /* transpose */
    case 6: *sx = y; *sy = h - 1 - x; break;         /* rotate 90 clockwise */
    case 7: *sx = w - 1 - y; *sy = h - 1 - x; break; /* transverse */
    case 8: *sx = w - 1 - y; *sy = x; break;         /* rotate 270 clockwise */
    default: *sx = x; *sy = y; break;
    }
}

#endif
