/* CUDA data-movement kernels over NCHW: nearest upsampling by 2 and the channel slice copy used by
 * concat. Formulas: odl/backend.h; CPU twin: kernels/cpu/layout.c. H and W are always the small
 * tensor's size. Results are bitwise the CPU's: the forward pass and the copy move values, and the
 * backward pass adds each 2x2 block in the CPU's (and PyTorch's) order ((a + b) + c) + d, a, b the
 * upper row.
 *
 * Index scheme: a row of the small tensor is r = (n*C + c)*H + h; its two big rows are 2r and 2r + 1
 * (each 2W long), so y[2r*2W + 2w + {0,1}] and y[(2r+1)*2W + 2w + {0,1}] come from x[r*W + w].
 *   upsample2x_fwd: W even and x 8-byte / y 16-byte aligned: a thread reads a float2 (w, w+1) and
 *     writes one float4 to each big row; otherwise a thread per small element, four scalar stores.
 *   upsample2x_bwd: W even and dy 16-byte / dx 8-byte aligned: a thread reads one float4 from each
 *     big row and writes a float2 of dx; otherwise a thread per dx element.
 *   channel_copy: grid (x: range of the C_src*HW floats of an image, y: images); float4 when the slice
 *     length, both image strides and the channel offset are multiples of 4 floats and both pointers
 *     16-byte aligned.
 * All grid-stride loops (32 registers) sized by odlk::grid_for_kernel to one resident wave.
 * Limit: N*C*H*W < 2^31 for upsampling
 * (ODL_E_UNSUPPORTED otherwise).
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops_util.cuh"

namespace odlk {
namespace {

/* Item k = small-tensor element (V: pair of elements 2k, 2k+1 of a row; Wi = W/2 pairs per row). */
template <bool V>
__global__ void ODLK_MAXNREG32 upsample2x_fwd_kernel(int items, int W, FastDiv fdWi,
                                                                     const float *__restrict__ x,
                                                                     float *__restrict__ y) {
    const int stride = gridDim.x * blockDim.x;
    const int64_t W2 = 2 * (int64_t)W;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < items; k += stride) {
        int r, w;
        fdWi.divmod(k, r, w);
        if (V) {
            w *= 2;
            const float2 v = *reinterpret_cast<const float2 *>(x + (int64_t)r * W + w);
            const float4 o = make_float4(v.x, v.x, v.y, v.y);
            float *y0 = y + 2 * (int64_t)r * W2 + 2 * w;
            *reinterpret_cast<float4 *>(y0) = o;
            *reinterpret_cast<float4 *>(y0 + W2) = o;
        } else {
            const float v = x[k];
            float *y0 = y + 2 * (int64_t)r * W2 + 2 * w;
            y0[0] = v;
            y0[1] = v;
            y0[W2] = v;
            y0[W2 + 1] = v;
        }
    }
}

template <bool V>
__global__ void ODLK_MAXNREG32 upsample2x_bwd_kernel(int items, int W, FastDiv fdWi,
                                                                     const float *__restrict__ dy,
                                                                     float *__restrict__ dx) {
    const int stride = gridDim.x * blockDim.x;
    const int64_t W2 = 2 * (int64_t)W;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < items; k += stride) {
        int r, w;
        fdWi.divmod(k, r, w);
        if (V) {
            w *= 2;
            const float *r0 = dy + 2 * (int64_t)r * W2 + 2 * w;
            const float4 u = *reinterpret_cast<const float4 *>(r0), l = *reinterpret_cast<const float4 *>(r0 + W2);
            float2 o;
            o.x = ((u.x + u.y) + l.x) + l.y;
            o.y = ((u.z + u.w) + l.z) + l.w;
            *reinterpret_cast<float2 *>(dx + (int64_t)r * W + w) = o;
        } else {
            const float *r0 = dy + 2 * (int64_t)r * W2 + 2 * w, *r1 = r0 + W2;
            dx[k] = ((r0[0] + r0[1]) + r1[0]) + r1[1];
        }
    }
}

/* Copy L items per image from `from` (image stride sfrom items) to `to` (stride sto); V: items are
 * float4. */
template <bool V>
__global__ void ODLK_MAXNREG32 channel_copy_kernel(int N, int64_t L, const float *__restrict__ from,
                                                                   int64_t sfrom, float *__restrict__ to,
                                                                   int64_t sto) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int n = blockIdx.y; n < N; n += gridDim.y) {
        const float *f = from + (int64_t)n * sfrom * (V ? 4 : 1);
        float *t = to + (int64_t)n * sto * (V ? 4 : 1);
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < L; i += stride) {
            if (V)
                st4(t, i, ld4(f, i));
            else
                t[i] = f[i];
        }
    }
}

} // namespace
} // namespace odlk

using namespace odlk;

static odl_status up_size(const char *op, int N, int C, int H, int W, int64_t *nx) {
    *nx = (int64_t)N * C * H * W;
    if (*nx > INT_MAX || (int64_t)N * C * H > INT_MAX)
        return ODL_ERR(ODL_E_UNSUPPORTED, "%s: N=%d C=%d H=%d W=%d: more than 2^31-1 elements", op, N, C, H, W);
    return ODL_OK;
}

extern "C" odl_status odl_cuda_upsample2x_fwd(int N, int C, int H, int W, const float *x, float *y) {
    int64_t nx;
    ODL_CHECK(up_size("upsample2x_fwd", N, C, H, W, &nx));
    if (nx <= 0) return ODL_OK;
    const bool v = W % 2 == 0 && ((uintptr_t)x & 7u) == 0 && aligned16(y);
    const int items = (int)(v ? nx / 2 : nx);
    void (*k)(int, int, FastDiv, const float *, float *) =
        v ? upsample2x_fwd_kernel<true> : upsample2x_fwd_kernel<false>;
    k<<<grid_for_kernel((const void *)k, items, kThreads), kThreads, 0, stream()>>>(items, W, FastDiv(v ? W / 2 : W), x,
                                                                                  y);
    ODL_CUDA_LAUNCH_CHECK("upsample2x_fwd_kernel");
    return ODL_OK;
}

extern "C" odl_status odl_cuda_upsample2x_bwd(int N, int C, int H, int W, const float *dy, float *dx) {
    int64_t nx;
    ODL_CHECK(up_size("upsample2x_bwd", N, C, H, W, &nx));
    if (nx <= 0) return ODL_OK;
    const bool v = W % 2 == 0 && aligned16(dy) && ((uintptr_t)dx & 7u) == 0;
    const int items = (int)(v ? nx / 2 : nx);
    void (*k)(int, int, FastDiv, const float *, float *) =
        v ? upsample2x_bwd_kernel<true> : upsample2x_bwd_kernel<false>;
    k<<<grid_for_kernel((const void *)k, items, kThreads), kThreads, 0, stream()>>>(items, W, FastDiv(v ? W / 2 : W),
                                                                                  dy, dx);
    ODL_CUDA_LAUNCH_CHECK("upsample2x_bwd_kernel");
    return ODL_OK;
}

extern "C" odl_status odl_cuda_channel_copy(int N, int64_t HW, float *src, int C_src, float *dst, int C_dst,
                                            int c_offset, int to_slice) {
    const int64_t L = (int64_t)C_src * HW;
    if (N <= 0 || L <= 0) return ODL_OK;
    const int64_t ssrc = L, sdst = (int64_t)C_dst * HW, off = (int64_t)c_offset * HW;
    const float *from = to_slice ? src : dst + off;
    float *to = to_slice ? dst + off : src;
    const int64_t sfrom = to_slice ? ssrc : sdst, sto = to_slice ? sdst : ssrc;
    const bool v = L % 4 == 0 && sfrom % 4 == 0 && sto % 4 == 0 && aligned16(from) && aligned16(to);
    const int64_t items = v ? L / 4 : L;
    const unsigned gy = (unsigned)(N < 65535 ? N : 65535);
    void (*k)(int, int64_t, const float *, int64_t, float *, int64_t) =
        v ? channel_copy_kernel<true> : channel_copy_kernel<false>;
    unsigned gx = grid_for_kernel((const void *)k, items * gy, kThreads);
    gx = (gx + gy - 1) / gy;
    const int64_t need = cdiv(items, kThreads);
    if ((int64_t)gx > need) gx = (unsigned)need;
    if (gx < 1) gx = 1;
    const dim3 grid(gx, gy);
    k<<<grid, kThreads, 0, stream()>>>(N, items, from, v ? sfrom / 4 : sfrom, to, v ? sto / 4 : sto);
    ODL_CUDA_LAUNCH_CHECK("channel_copy_kernel");
    return ODL_OK;
}
