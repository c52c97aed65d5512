/* The float16 NHWC convolution's parameters and epilogue store, shared by its mma.sync kernels
 * (conv2d_f16.cu, every device) and its wgmma kernels (conv2d_f16_sm90.cu, compute capability 9.0). */
#ifndef ODL_KERNELS_CUDA_CONV2D_F16_CUH
#define ODL_KERNELS_CUDA_CONV2D_F16_CUH

#include <cuda_fp16.h>

#include "kernels/cuda/common.cuh"

namespace odlk {

/* One conv2d_f16 call (odl/backend.h odl_conv2d_f16_args), decoded for the kernels. */
struct ConvF16Params {
    const __half *x;
    const __half *w;
    const float *bias;
    const __half *res;
    void *y;
    int64_t ldx, ldr, ldy;
    int M;    /* N*P*Q */
    int Kout; /* output channels */
    int Kred; /* R*S*C */
    int H, W, C, S;
    int sh, sw, ph, pw;
    FastDiv fdPQ, fdQ, fdC, fdS;
    int tilesN;
    int smem_stages; /* pipeline stages in shared memory: STAGES, or KT when the reduction is shorter */
    int smem_bytes;  /* dynamic shared memory of the launch */
    int act;
    /* OUT == kOutDetect: YOLOv5 Detect decoding of this level into out [N, rows_total, no] */
    int na, no;
    int64_t rows_total, row_offset;
    float stride;
    float anchors[32];
};

enum { kOutHalf = 0, kOutF32 = 1, kOutDetect = 2 };

/* Output channels col and (when `two`) col + 1 of output pixel gm, v0 / v1 the accumulators plus bias:
 * act(v) + residual, stored as half (rounded once) or (OUT == kOutF32) float. */
template <int OUT>
__device__ __forceinline__ void f16_store_pair(const ConvF16Params &p, int gm, int col, bool two, float v0, float v1) {
    v0 = act_apply(p.act, v0);
    v1 = act_apply(p.act, v1);
    if (p.res) {
        const __half *rp = p.res + (int64_t)gm * p.ldr + col;
        if (two) {
            const float2 r = __half22float2(*reinterpret_cast<const __half2 *>(rp));
            v0 += r.x;
            v1 += r.y;
        } else {
            v0 += __half2float(rp[0]);
        }
    }
    if (OUT == kOutF32) {
        float *yp = reinterpret_cast<float *>(p.y) + (int64_t)gm * p.ldy + col;
        yp[0] = v0;
        if (two) yp[1] = v1;
    } else {
        __half *yp = reinterpret_cast<__half *>(p.y) + (int64_t)gm * p.ldy + col;
        if (two) *reinterpret_cast<__half2 *>(yp) = __floats2half2_rn(v0, v1);
        else yp[0] = __float2half_rn(v0);
    }
}

/* The window of output pixel gm (row of the implicit GEMM): the input row hb and column wb of its tap
 * (0, 0) and that element's offset in x (pixel stride ldx); a pixel past M gets a row never inside the
 * image. */
__device__ __forceinline__ void f16_pixel_window(const ConvF16Params &p, int gm, int &hb, int &wb, int64_t &base) {
    if (gm < p.M) {
        int n, pq, pp, qq;
        p.fdPQ.divmod(gm, n, pq);
        p.fdQ.divmod(pq, pp, qq);
        hb = pp * p.sh - p.ph;
        wb = qq * p.sw - p.pw;
        base = (((int64_t)n * p.H + hb) * p.W + wb) * p.ldx;
    } else {
        hb = -(1 << 29);
        wb = 0;
        base = 0;
    }
}

/* Reduction element kk (a multiple of 8: 8 channels of one tap) as its tap (r, s) and its offset in x
 * from a window's base; r = s = 0 past the reduction (kin false). */
__device__ __forceinline__ bool f16_tap(const ConvF16Params &p, int kk, int &r, int &s, int64_t &off) {
    const bool kin = kk < p.Kred;
    int rs = 0, c = 0;
    r = s = 0;
    if (kin) {
        p.fdC.divmod(kk, rs, c);
        p.fdS.divmod(rs, r, s);
    }
    off = ((int64_t)r * p.W + s) * p.ldx + c;
    return kin;
}

/* Output channels col, col + 1 (col even) of a warp's MT m16n8 accumulator fragments, as mma.sync m16n8
 * and wgmma m64nN (per warp) lay them out: fragment i holds rows row0 + 16 i (elements 0, 1) and
 * row0 + 16 i + 8 (elements 2, 3), frag(i, e) its element e; bias added, then f16_store_pair for the rows
 * below M. frag is called with constant arguments only, so that the accumulators stay in registers. */
template <int OUT, int MT, class Frag>
__device__ __forceinline__ void f16_store_cols(const ConvF16Params &p, int col, int row0, const Frag &frag) {
    if (col >= p.Kout) return;
    const bool two = col + 1 < p.Kout;
    float b0 = 0.0f, b1 = 0.0f;
    if (p.bias) {
        b0 = p.bias[col];
        if (two) b1 = p.bias[col + 1];
    }
#pragma unroll
    for (int i = 0; i < MT; i++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int gm = row0 + i * 16 + h * 8;
            if (gm < p.M) f16_store_pair<OUT>(p, gm, col, two, frag(i, 2 * h) + b0, frag(i, 2 * h + 1) + b1);
        }
    }
}

namespace sm90 {
/* The wgmma kernels of conv2d_f16_sm90.cu. conv_f16_use: whether ODL_CONV_F16_SM90 (odl/env.h) sends p
 * there (kOutHalf / kOutF32 only; a 9.0 device with the wgmma path on; C and ldx multiples of 8, x and w
 * 16-byte aligned, so that a 16-byte copy is 8 channels of one pixel). conv_f16: the convolution, cfg -1
 * their choice of tile, else 0..3 for 16 / 32 / 64 / 128 output channels a tile; ODL_E_UNSUPPORTED for a call
 * they cannot run (whatever ODL_CONV_F16_SM90 says). */
bool conv_f16_use(const ConvF16Params &p, int out);
odl_status conv_f16(const ConvF16Params &p, int out, int cfg);
} // namespace sm90

} // namespace odlk

#endif
