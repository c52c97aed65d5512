/* CUDA float16 NHWC data-movement kernels for inference (odl/backend.h, "float16 NHWC inference"; CPU
 * twin: kernels/cpu/nhwc_f16.c): max-pooling, nearest upsampling by 2, channel-slice copy and the
 * float32 NCHW -> float16 NHWC conversion of a network input.
 *
 * A tensor is [N, H, W, C] with pixel stride ld (a channel slice of a wider tensor). Each thread moves
 * one pixel's 8 channels as one 16-byte vector when C, both strides and both pointers allow it
 * (C % 8 == 0, ld % 8 == 0, 16-byte aligned), else one element; the values are the same either way:
 * pooling compares in float32 (exact for halves), a NaN wins as in pool.cu (`v > m || v != v`), and
 * padding cells are -inf. The conversion of the input can also apply space-to-depth (odl/backend.h).
 * Grid-stride loops of 256 threads. Limits: pixel and element counts < 2^31.
 */
#include <cuda_fp16.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops_util.cuh"

namespace odlk {
namespace {

constexpr int kT = 256;

struct alignas(16) Half8 {
    __half2 h[4];
};

/* Item = (pixel o of y, channel group g) with G groups of V channels per pixel. */
template <int V>
__global__ void maxpool_f16_kernel(int items, int G, int H, int W, int P, int Q, int kh, int kw, int sh, int sw,
                                   int ph, int pw, FastDiv fdG, FastDiv fdQ, FastDiv fdP, const __half *__restrict__ x,
                                   int64_t ldx, __half *__restrict__ y, int64_t ldy) {
    for (int it = blockIdx.x * blockDim.x + threadIdx.x; it < items; it += gridDim.x * blockDim.x) {
        int o, g, t, q, n, pp;
        fdG.divmod(it, o, g);
        fdQ.divmod(o, t, q);
        fdP.divmod(t, n, pp);
        int h0 = pp * sh - ph, h1 = h0 + kh, w0 = q * sw - pw, w1 = w0 + kw;
        h0 = h0 < 0 ? 0 : h0;
        h1 = h1 > H ? H : h1;
        w0 = w0 < 0 ? 0 : w0;
        w1 = w1 > W ? W : w1;
        float m[V];
#pragma unroll
        for (int v = 0; v < V; v++) m[v] = -INFINITY;
        for (int ih = h0; ih < h1; ih++)
            for (int iw = w0; iw < w1; iw++) {
                const __half *src = x + (((int64_t)n * H + ih) * W + iw) * ldx + g * V;
                if (V == 8) {
                    const Half8 hv = *reinterpret_cast<const Half8 *>(src);
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        const float2 f = __half22float2(hv.h[k]);
                        if (f.x > m[2 * k] || f.x != f.x) m[2 * k] = f.x;
                        if (f.y > m[2 * k + 1] || f.y != f.y) m[2 * k + 1] = f.y;
                    }
                } else {
                    const float f = __half2float(src[0]);
                    if (f > m[0] || f != f) m[0] = f;
                }
            }
        __half *dst = y + (int64_t)o * ldy + g * V;
        if (V == 8) {
            Half8 hv;
#pragma unroll
            for (int k = 0; k < 4; k++) hv.h[k] = __floats2half2_rn(m[2 * k], m[2 * k + 1]);
            *reinterpret_cast<Half8 *>(dst) = hv;
        } else {
            dst[0] = __float2half_rn(m[0]);
        }
    }
}

/* Item = (pixel o of y, channel group g); y[n, h, w] = x[n, h/2, w/2] (H, W: x's size). */
template <int V>
__global__ void upsample2x_f16_kernel(int items, int G, int H, int W, FastDiv fdG, FastDiv fdW2, FastDiv fdH2,
                                      const __half *__restrict__ x, int64_t ldx, __half *__restrict__ y, int64_t ldy) {
    for (int it = blockIdx.x * blockDim.x + threadIdx.x; it < items; it += gridDim.x * blockDim.x) {
        int o, g, t, w, n, h;
        fdG.divmod(it, o, g);
        fdW2.divmod(o, t, w);
        fdH2.divmod(t, n, h);
        const __half *src = x + (((int64_t)n * H + (h >> 1)) * W + (w >> 1)) * ldx + g * V;
        __half *dst = y + (int64_t)o * ldy + g * V;
        if (V == 8) *reinterpret_cast<Half8 *>(dst) = *reinterpret_cast<const Half8 *>(src);
        else dst[0] = src[0];
    }
}

template <int V>
__global__ void copy_f16_kernel(int items, FastDiv fdG, const __half *__restrict__ x, int64_t ldx,
                                __half *__restrict__ y, int64_t ldy) {
    for (int it = blockIdx.x * blockDim.x + threadIdx.x; it < items; it += gridDim.x * blockDim.x) {
        int o, g;
        fdG.divmod(it, o, g);
        if (V == 8)
            *reinterpret_cast<Half8 *>(y + (int64_t)o * ldy + g * 8) =
                *reinterpret_cast<const Half8 *>(x + (int64_t)o * ldx + g * 8);
        else
            y[(int64_t)o * ldy + g] = x[(int64_t)o * ldx + g];
    }
}

/* One thread per output pixel o = (n*Ho + h)*Wo + w: channel ch = (i*b + j)*C + c of it is
 * x[n, c, h*b + i, w*b + j] (space-to-depth by b), zero from b*b*C on; writes C_pad halves (V: as 16-byte
 * vectors). Reads are coalesced across threads within each (c, i, j) plane. */
template <bool V>
__global__ void nchw_to_nhwc_f16_kernel(int pixels, int C, int H, int W, int b, FastDiv fdHoWo, FastDiv fdWo,
                                        int C_pad, const float *__restrict__ x, __half *__restrict__ y) {
    const int used = b * b * C;
    for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < pixels; o += gridDim.x * blockDim.x) {
        int n, hw, h, w;
        fdHoWo.divmod(o, n, hw);
        fdWo.divmod(hw, h, w);
        const float *src = x + (int64_t)n * C * H * W + (int64_t)(h * b) * W + w * b;
        auto val = [&](int ch) -> float {
            if (ch >= used) return 0.0f;
            const int ij = ch / C, c = ch - ij * C, i = ij / b, j = ij - i * b;
            return src[(int64_t)c * H * W + (int64_t)i * W + j];
        };
        __half *dst = y + (int64_t)o * C_pad;
        if (V) {
            for (int c0 = 0; c0 < C_pad; c0 += 8) {
                Half8 hv;
#pragma unroll
                for (int k = 0; k < 4; k++) hv.h[k] = __floats2half2_rn(val(c0 + 2 * k), val(c0 + 2 * k + 1));
                *reinterpret_cast<Half8 *>(dst + c0) = hv;
            }
        } else {
            for (int c = 0; c < C_pad; c++) dst[c] = __float2half_rn(val(c));
        }
    }
}

bool vec8(int C, int64_t ldx, int64_t ldy, const void *x, const void *y) {
    return C % 8 == 0 && ldx % 8 == 0 && ldy % 8 == 0 && aligned16(x) && aligned16(y);
}

} // namespace
} // namespace odlk

using namespace odlk;

extern "C" odl_status odl_cuda_maxpool2d_f16(const odl_pool2d_shape *s, const odl_half *x, int64_t ldx, odl_half *y,
                                             int64_t ldy) {
    const int64_t pix = (int64_t)s->N * s->P * s->Q;
    if (pix * s->C > INT32_MAX) return ODL_ERR(ODL_E_UNSUPPORTED, "maxpool2d_f16: %lld elements", (long long)(pix * s->C));
    if (pix == 0 || s->C == 0) return ODL_OK;
    const __half *hx = reinterpret_cast<const __half *>(x);
    __half *hy = reinterpret_cast<__half *>(y);
    if (vec8(s->C, ldx, ldy, x, y)) {
        const int G = s->C / 8, items = (int)(pix * G);
        maxpool_f16_kernel<8><<<grid_for(items, kT), kT, 0, stream()>>>(
            items, G, s->H, s->W, s->P, s->Q, s->kh, s->kw, s->stride_h, s->stride_w, s->pad_h, s->pad_w, FastDiv(G),
            FastDiv(s->Q), FastDiv(s->P), hx, ldx, hy, ldy);
    } else {
        const int G = s->C, items = (int)(pix * G);
        maxpool_f16_kernel<1><<<grid_for(items, kT), kT, 0, stream()>>>(
            items, G, s->H, s->W, s->P, s->Q, s->kh, s->kw, s->stride_h, s->stride_w, s->pad_h, s->pad_w, FastDiv(G),
            FastDiv(s->Q), FastDiv(s->P), hx, ldx, hy, ldy);
    }
    ODL_CUDA_LAUNCH_CHECK("maxpool_f16_kernel");
    return ODL_OK;
}

extern "C" odl_status odl_cuda_upsample2x_f16(int N, int H, int W, int C, const odl_half *x, int64_t ldx, odl_half *y,
                                              int64_t ldy) {
    const int64_t pix = (int64_t)N * 4 * H * W;
    if (pix * C > INT32_MAX) return ODL_ERR(ODL_E_UNSUPPORTED, "upsample2x_f16: %lld elements", (long long)(pix * C));
    if (pix == 0 || C == 0) return ODL_OK;
    const __half *hx = reinterpret_cast<const __half *>(x);
    __half *hy = reinterpret_cast<__half *>(y);
    if (vec8(C, ldx, ldy, x, y)) {
        const int G = C / 8, items = (int)(pix * G);
        upsample2x_f16_kernel<8><<<grid_for(items, kT), kT, 0, stream()>>>(items, G, H, W, FastDiv(G), FastDiv(2 * W),
                                                                            FastDiv(2 * H), hx, ldx, hy, ldy);
    } else {
        const int G = C, items = (int)(pix * G);
        upsample2x_f16_kernel<1><<<grid_for(items, kT), kT, 0, stream()>>>(items, G, H, W, FastDiv(G), FastDiv(2 * W),
                                                                            FastDiv(2 * H), hx, ldx, hy, ldy);
    }
    ODL_CUDA_LAUNCH_CHECK("upsample2x_f16_kernel");
    return ODL_OK;
}

extern "C" odl_status odl_cuda_copy_f16(int64_t pixels, int C, const odl_half *x, int64_t ldx, odl_half *y,
                                        int64_t ldy) {
    if (pixels * C > INT32_MAX) return ODL_ERR(ODL_E_UNSUPPORTED, "copy_f16: %lld elements", (long long)(pixels * C));
    if (pixels == 0 || C == 0) return ODL_OK;
    const __half *hx = reinterpret_cast<const __half *>(x);
    __half *hy = reinterpret_cast<__half *>(y);
    if (vec8(C, ldx, ldy, x, y)) {
        const int items = (int)(pixels * (C / 8));
        copy_f16_kernel<8><<<grid_for(items, kT), kT, 0, stream()>>>(items, FastDiv(C / 8), hx, ldx, hy, ldy);
    } else {
        const int items = (int)(pixels * C);
        copy_f16_kernel<1><<<grid_for(items, kT), kT, 0, stream()>>>(items, FastDiv(C), hx, ldx, hy, ldy);
    }
    ODL_CUDA_LAUNCH_CHECK("copy_f16_kernel");
    return ODL_OK;
}

extern "C" odl_status odl_cuda_nchw_f32_to_nhwc_f16(int N, int C, int H, int W, const float *x, int block, int C_pad,
                                                    odl_half *y) {
    const int Ho = H / block, Wo = W / block;
    const int64_t pix = (int64_t)N * Ho * Wo;
    if ((int64_t)N * C * H * W > INT32_MAX)
        return ODL_ERR(ODL_E_UNSUPPORTED, "nchw_f32_to_nhwc_f16: %lld elements", (long long)N * C * H * W);
    if (pix == 0) return ODL_OK;
    __half *hy = reinterpret_cast<__half *>(y);
    const FastDiv fdHoWo(Ho * Wo), fdWo(Wo);
    if ((C_pad & 7) == 0 && aligned16(y))
        nchw_to_nhwc_f16_kernel<true><<<grid_for(pix, kT), kT, 0, stream()>>>((int)pix, C, H, W, block, fdHoWo, fdWo,
                                                                               C_pad, x, hy);
    else
        nchw_to_nhwc_f16_kernel<false><<<grid_for(pix, kT), kT, 0, stream()>>>((int)pix, C, H, W, block, fdHoWo, fdWo,
                                                                                C_pad, x, hy);
    ODL_CUDA_LAUNCH_CHECK("nchw_to_nhwc_f16_kernel");
    return ODL_OK;
}
