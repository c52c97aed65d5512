/* CUDA twins of kernels/cpu/detect_post.c (formulas in odl/backend.h; bitwise the CPU's results).
 *
 * letterbox_u8: one thread per output pixel and image (grid-stride), three planes written; the resize
 *   and orientation of kernels/resize_linear.h; value / 255.0f in IEEE division.
 * yolo_nms: one block of 1024 threads per image, in four phases on a per-image slice of the backend
 *   workspace (cand_cap keys, offset boxes, areas and flags):
 *   1. candidates: each thread takes rows, appends (~score bits) << 32 | anchor * nc + class keys with
 *      a shared atomic counter (the order of appends does not matter, the keys are unique);
 *   2. a bitonic sort of the keys padded with UINT64_MAX to a power of two (global memory);
 *   3. the first max_nms: boxes recomputed from their rows, offset by class * max_wh, areas;
 *   4. greedy NMS: thread 0 finds the next unsuppressed box, writes it out, and the block marks the
 *      later boxes it suppresses; stops at max_det kept.
 * yolo_candidates: one block of 1024 threads per image (yolo_cand_kernel says how).
 *   Float arithmetic uses the _rn intrinsics so that nvcc cannot contract it into FMA, which would
 *   round differently from the CPU. */
#include "kernels/cuda/common.cuh"
#include "kernels/resize_linear.h"

namespace odlk {
namespace {

/* One thread per output pixel of every image (grid-stride): the taps and weights of its column and row
 * (kernels/resize_linear.h, the CPU's formulas in _rn arithmetic), the four stored pixels through the
 * EXIF orientation, three planes written. */
__global__ void letterbox_kernel(int64_t items, int H, int W, const uint8_t *__restrict__ src,
                                 const odl_letterbox_src *__restrict__ img, float fill, float *__restrict__ y) {
    const int64_t hw = (int64_t)H * W;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < items; k += (int64_t)gridDim.x * blockDim.x) {
        const int n = (int)(k / hw);
        const int64_t p = k - n * hw;
        const int yy = (int)(p / W), xx = (int)(p - (int64_t)yy * W);
        const odl_letterbox_src g = img[n];
        const int dx = xx - g.left, dy = yy - g.top;
        float *o = y + n * 3 * hw + p;
        if (dx < 0 || dx >= g.unpad_w || dy < 0 || dy >= g.unpad_h) {
            o[0] = fill;
            o[hw] = fill;
            o[2 * hw] = fill;
            continue;
        }
        const bool swap = g.orient >= 5 && g.orient <= 8;
        const int ow = swap ? g.h : g.w, oh = swap ? g.w : g.h;
        int x0, x1, a0, a1, y0, y1, b0, b1;
        odl_rl_coef(dx, odl_rl_scale(g.unpad_w, ow), ow, &x0, &x1, &a0, &a1);
        odl_rl_coef(dy, odl_rl_scale(g.unpad_h, oh), oh, &y0, &y1, &b0, &b1);
        const uint8_t *s = src + g.off;
        const uint8_t *t[4];
        const int tx[4] = {x0, x1, x0, x1}, ty[4] = {y0, y0, y1, y1};
#pragma unroll
        for (int q = 0; q < 4; q++) {
            int px, py;
            odl_orient_src(g.orient, g.w, g.h, tx[q], ty[q], &px, &py);
            t[q] = s + (int64_t)py * g.pitch + (int64_t)px * 3;
        }
#pragma unroll
        for (int c = 0; c < 3; c++)
            o[c * hw] = __fdiv_rn((float)odl_rl_value(t[0][c], t[1][c], t[2][c], t[3][c], a0, a1, b0, b1), 255.0f);
    }
}

constexpr int kNmsThreads = 1024;

__device__ __forceinline__ uint64_t nms_key(float score, uint32_t idx) {
    return ((uint64_t)(0xFFFFFFFFu - __float_as_uint(score)) << 32) | idx;
}

__device__ __forceinline__ void nms_cand(const float *pred, int nc, uint64_t key, float box[4], float *score, int *cls) {
    const uint32_t idx = (uint32_t)key;
    const float *r = pred + (size_t)(idx / (uint32_t)nc) * (5 + nc);
    *cls = (int)(idx % (uint32_t)nc);
    *score = __uint_as_float(0xFFFFFFFFu - (uint32_t)(key >> 32));
    const float hw = __fdiv_rn(r[2], 2.0f), hh = __fdiv_rn(r[3], 2.0f);
    box[0] = __fsub_rn(r[0], hw);
    box[1] = __fsub_rn(r[1], hh);
    box[2] = __fadd_rn(r[0], hw);
    box[3] = __fadd_rn(r[1], hh);
}

__global__ void __launch_bounds__(kNmsThreads) yolo_nms_kernel(odl_yolo_nms_args a, uint8_t *work, size_t per_image) {
    const int n = blockIdx.x, nc = a.nc, no = 5 + nc, tid = threadIdx.x;
    const int cap = a.cand_cap;
    uint8_t *base = work + (size_t)n * per_image;
    uint64_t *keys = reinterpret_cast<uint64_t *>(base);
    float *ob = reinterpret_cast<float *>(base + sizeof(uint64_t) * (size_t)cap);
    float *area = ob + 4 * (size_t)cap;
    uint8_t *sup = reinterpret_cast<uint8_t *>(area + cap);
    const float *pred = a.pred + (size_t)n * a.rows * no;
    float *out = a.out + (size_t)n * a.max_det * 6;
    __shared__ int cnt, over, next, kept;
    if (tid == 0) {
        cnt = 0;
        over = 0;
    }
    __syncthreads();
    /* 1. candidates */
    for (int64_t r = tid; r < a.rows; r += blockDim.x) {
        const float *p = pred + r * no;
        const float obj = p[4];
        if (!(obj > a.conf_thres)) continue;
        int best = 0;
        float bestc = -INFINITY;
        for (int j = 0; j < nc; j++) {
            const float c = __fmul_rn(p[5 + j], obj);
            if (a.multi_label) {
                if (!(c > a.conf_thres)) continue;
                const int slot = atomicAdd(&cnt, 1);
                if (slot < cap) keys[slot] = nms_key(c, (uint32_t)(r * nc + j));
                else over = 1;
            } else if (c > bestc) {
                bestc = c;
                best = j;
            }
        }
        if (!a.multi_label && bestc > a.conf_thres) {
            const int slot = atomicAdd(&cnt, 1);
            if (slot < cap) keys[slot] = nms_key(bestc, (uint32_t)(r * nc + best));
            else over = 1;
        }
    }
    __syncthreads();
    if (over) {
        if (tid == 0) a.count[n] = -1;
        return;
    }
    const int m_all = cnt;
    int P = 1;
    while (P < m_all) P <<= 1;
    for (int i = m_all + tid; i < P; i += blockDim.x) keys[i] = ~0ull; /* P <= cap: cap is a power of two */
    __syncthreads();
    /* 2. bitonic sort, ascending */
    for (int k = 2; k <= P; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = tid; i < P; i += blockDim.x) {
                const int l = i ^ j;
                if (l > i) {
                    const uint64_t x = keys[i], y = keys[l];
                    const bool up = (i & k) == 0;
                    if ((x > y) == up) {
                        keys[i] = y;
                        keys[l] = x;
                    }
                }
            }
            __syncthreads();
        }
    /* 3. offset boxes of the first max_nms */
    const int m = m_all < a.max_nms ? m_all : a.max_nms;
    for (int i = tid; i < m; i += blockDim.x) {
        float b[4], s;
        int c;
        nms_cand(pred, nc, keys[i], b, &s, &c);
        const float off = a.agnostic ? 0.f : __fmul_rn((float)c, a.max_wh);
        for (int q = 0; q < 4; q++) ob[4 * (size_t)i + q] = __fadd_rn(b[q], off);
        area[i] = __fmul_rn(__fsub_rn(ob[4 * (size_t)i + 2], ob[4 * (size_t)i]), __fsub_rn(ob[4 * (size_t)i + 3], ob[4 * (size_t)i + 1]));
        sup[i] = 0;
    }
    if (tid == 0) {
        next = 0;
        kept = 0;
    }
    __syncthreads();
    /* 4. greedy NMS */
    for (;;) {
        if (tid == 0) {
            int i = next;
            while (i < m && sup[i]) i++;
            next = i;
            if (i < m) {
                float b[4], s;
                int c;
                nms_cand(pred, nc, keys[i], b, &s, &c);
                float *o = out + (size_t)kept * 6;
                o[0] = b[0];
                o[1] = b[1];
                o[2] = b[2];
                o[3] = b[3];
                o[4] = s;
                o[5] = (float)c;
                kept++;
            }
        }
        __syncthreads();
        const int i = next;
        if (i >= m || kept == a.max_det) break;
        const float bx0 = ob[4 * (size_t)i], by0 = ob[4 * (size_t)i + 1], bx1 = ob[4 * (size_t)i + 2],
                    by1 = ob[4 * (size_t)i + 3], ai = area[i];
        for (int j = i + 1 + tid; j < m; j += blockDim.x) {
            if (sup[j]) continue;
            const float *bj = ob + 4 * (size_t)j;
            const float w = fmaxf(0.f, __fsub_rn(fminf(bx1, bj[2]), fmaxf(bx0, bj[0])));
            const float h = fmaxf(0.f, __fsub_rn(fminf(by1, bj[3]), fmaxf(by0, bj[1])));
            const float inter = __fmul_rn(w, h);
            if (__fdiv_rn(inter, __fsub_rn(__fadd_rn(ai, area[j]), inter)) > a.iou_thres) sup[j] = 1;
        }
        __syncthreads();
        if (tid == 0) next = i + 1;
        __syncthreads();
    }
    if (tid == 0) a.count[n] = kept;
}

constexpr int kCandThreads = 1024;

/* One block per image; each thread takes a contiguous run of rows: counts its candidates and its rows
 * with a non-finite value, an exclusive scan of the counts gives each thread's offset, and it writes its
 * candidate rows there, so that they stay in row order. */
__global__ void __launch_bounds__(kCandThreads) yolo_cand_kernel(odl_yolo_cand_args a) {
    __shared__ int32_t part[kCandThreads];
    __shared__ int32_t n_bad;
    const int n = blockIdx.x, tid = threadIdx.x, no = 5 + a.nc;
    const float *pred = a.pred + (size_t)n * a.rows * no;
    if (tid == 0) n_bad = 0;
    const int64_t per = (a.rows + blockDim.x - 1) / blockDim.x, r0 = tid * per, r1 = r0 + per < a.rows ? r0 + per : a.rows;
    int32_t cnt = 0, bad = 0;
    for (int64_t r = r0; r < r1; r++) {
        const float *p = pred + r * no;
        bool finite = true;
        for (int j = 0; j < no; j++) finite &= isfinite(p[j]);
        bad += !finite;
        cnt += p[4] > a.conf_thres;
    }
    part[tid] = cnt;
    __syncthreads();
    if (bad) atomicAdd(&n_bad, bad);
    for (int d = 1; d < blockDim.x; d <<= 1) { /* inclusive scan (Hillis-Steele) */
        const int32_t v = tid >= d ? part[tid - d] : 0;
        __syncthreads();
        part[tid] += v;
        __syncthreads();
    }
    int32_t at = part[tid] - cnt;
    float *out = a.out + (size_t)n * a.cap * no;
    for (int64_t r = r0; r < r1 && at < a.cap; r++) {
        const float *p = pred + r * no;
        if (!(p[4] > a.conf_thres)) continue;
        for (int j = 0; j < no; j++) out[(size_t)at * no + j] = p[j];
        at++;
    }
    if (tid == blockDim.x - 1) a.count[n] = part[tid];
    if (tid == 0) a.nonfinite[n] = n_bad;
}

} // namespace
} // namespace odlk

using namespace odlk;

extern "C" odl_status odl_cuda_letterbox_u8(int N, int H, int W, const uint8_t *src, const odl_letterbox_src *img,
                                            uint8_t pad, float *y) {
    const int64_t items = (int64_t)N * H * W;
    if (items == 0) return ODL_OK;
    letterbox_kernel<<<grid_for(items, 256), 256, 0, stream()>>>(items, H, W, src, img, (float)pad / 255.0f, y);
    ODL_CUDA_LAUNCH_CHECK("letterbox_kernel");
    return ODL_OK;
}

extern "C" odl_status odl_cuda_yolo_nms(const odl_yolo_nms_args *a) {
    if (a->N == 0) return ODL_OK;
    if (a->cand_cap <= 0 || (a->cand_cap & (a->cand_cap - 1)))
        return ODL_ERR(ODL_E_INVAL, "yolo_nms: cand_cap %d is not a power of two", a->cand_cap);
    if ((int64_t)a->rows * a->nc > (int64_t)UINT32_MAX)
        return ODL_ERR(ODL_E_UNSUPPORTED, "yolo_nms: %lld rows x %d classes", (long long)a->rows, a->nc);
    /* keys, 4 offset coordinates, an area and a flag per candidate, rounded to 256 bytes per image */
    size_t per_image = ((sizeof(uint64_t) + 5 * sizeof(float) + 1) * (size_t)a->cand_cap + 255) & ~(size_t)255;
    void *work = NULL;
    ODL_CHECK(workspace(per_image * (size_t)a->N, &work));
    yolo_nms_kernel<<<a->N, kNmsThreads, 0, stream()>>>(*a, static_cast<uint8_t *>(work), per_image);
    ODL_CUDA_LAUNCH_CHECK("yolo_nms_kernel");
    return ODL_OK;
}

extern "C" odl_status odl_cuda_yolo_candidates(const odl_yolo_cand_args *a) {
    if (a->N == 0) return ODL_OK;
    yolo_cand_kernel<<<a->N, kCandThreads, 0, stream()>>>(*a);
    ODL_CUDA_LAUNCH_CHECK("yolo_cand_kernel");
    return ODL_OK;
}
