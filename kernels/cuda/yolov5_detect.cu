/* YOLOv5 Detect decoding on the GPU: the CUDA backend's yolov5_detect_decode entry (odl/backend.h; CPU
 * reference kernels/cpu/yolov5_detect.c; the formula, shared by both: kernels/yolov5_decode.h).
 *
 * head: one level's 1x1-convolution output [N, na * no, ny, nx] float32 (the CUDA float16 path decodes
 * inside its head convolution instead, conv2d_f16.cu); out: [N, rows_total, no], this level's rows
 * starting at row_offset, ordered anchor, y, x. A tiled kernel reads the head along the pixels and writes
 * along the rows, with a shared-memory transpose between; class counts too large for its tile, or more
 * than 65535 (image, anchor) pairs, take a kernel with one thread per output element. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/yolov5_decode.h"
#include "odl/backend.h"
#include "odl/device.h"
#include "odl/status.h"

namespace {

struct Anchors {
    float wh[32]; /* na <= 16 pairs */
};

__global__ void yolov5_decode_kernel(const float *__restrict__ head, float *__restrict__ out, int N, int na, int no,
                                     int ny, int nx, long long rows_total, long long row_offset, float stride,
                                     Anchors anc) {
    const long long plane = (long long)ny * nx;
    const long long total = (long long)N * na * plane * no;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        int k = (int)(i % no);
        long long r = i / no; /* (n, a, y, x) */
        int xx = (int)(r % nx);
        long long r2 = r / nx;
        int yy = (int)(r2 % ny);
        long long r3 = r2 / ny;
        int a = (int)(r3 % na);
        int n = (int)(r3 / na);
        const long long pix = (long long)yy * nx + xx;
        out[((long long)n * rows_total + row_offset + (long long)a * plane + pix) * no + k] =
            yolov5_decode(head[(((long long)n * na + a) * no + k) * plane + pix], k, (float)xx - 0.5f,
                          (float)yy - 0.5f, stride, k == 2 || k == 3 ? anc.wh[a * 2 + (k - 2)] : 0.0f);
    }
}

/* NCHW head, tiled: block (x: 32-pixel tile of the plane, y: n * na + a). The head's no planes of the
 * tile are read along the pixels (coalesced) into shared memory, and the tile's 32 output rows, which
 * are contiguous (32 * no floats), are written along the row. */
constexpr int kTile = 32;
__global__ void yolov5_decode_tiled_kernel(const float *__restrict__ head, float *__restrict__ out, int na, int no,
                                           int nx, long long plane, long long rows_total, long long row_offset,
                                           float stride, Anchors anc) {
    extern __shared__ float sh[]; /* [no][kTile + 1] */
    const int na_idx = blockIdx.y, n = na_idx / na, a = na_idx % na;
    const long long p0 = (long long)blockIdx.x * kTile;
    const int np = (int)(plane - p0 < kTile ? plane - p0 : kTile);
    const float *h = head + (long long)na_idx * no * plane + p0;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int k = warp; k < no; k += nwarps)
        if (lane < np) sh[k * (kTile + 1) + lane] = h[(long long)k * plane + lane];
    __syncthreads();
    float *o = out + ((long long)n * rows_total + row_offset + (long long)a * plane + p0) * no;
    for (int idx = threadIdx.x; idx < np * no; idx += blockDim.x) {
        const int t = idx / no, k = idx - t * no;
        const int pix = (int)(p0 + t); /* plane < 2^31 (checked by the caller) */
        const int yy = pix / nx, xx = pix - yy * nx;
        o[idx] = yolov5_decode(sh[k * (kTile + 1) + t], k, (float)xx - 0.5f, (float)yy - 0.5f, stride,
                               k == 2 || k == 3 ? anc.wh[a * 2 + (k - 2)] : 0.0f);
    }
}

} // namespace

extern "C" odl_status odl_cuda_yolov5_detect_decode(const odl_detect_args *d, const float *head, int nhwc) {
    if (!d || !head || !d->out || !d->anchors_wh) return ODL_ERR(ODL_E_INVAL, "yolov5 decode: NULL argument");
    if (nhwc)
        return ODL_ERR(ODL_E_UNSUPPORTED, "yolov5 decode: an NHWC head on CUDA (the float16 path decodes in its head "
                       "convolution, yolov5_detect_head_f16)");
    float *out = d->out;
    const int N = d->N, na = d->na, no = d->no, ny = d->ny, nx = d->nx;
    const int64_t rows_total = d->rows_total, row_offset = d->row_offset;
    const float stride = d->stride, *anchors_wh = d->anchors_wh;
    if (na < 1 || na > 16) return ODL_ERR(ODL_E_INVAL, "yolov5 decode: %d anchors (1..16)", na);
    Anchors anc;
    for (int i = 0; i < 2 * na; i++) anc.wh[i] = anchors_wh[i];
    const long long total = (long long)N * na * ny * nx * no;
    if (total == 0) return ODL_OK;
    const long long plane = (long long)ny * nx;
    const size_t smem = (size_t)no * (kTile + 1) * sizeof(float);
    if (smem <= 48 * 1024 && (long long)N * na <= 65535 && plane <= INT32_MAX) {
        dim3 grid((unsigned)((plane + kTile - 1) / kTile), (unsigned)(N * na));
        yolov5_decode_tiled_kernel<<<grid, 256, smem, (cudaStream_t)odl_stream_current()>>>(
            head, out, na, no, nx, plane, rows_total, row_offset, stride, anc);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return ODL_ERR(ODL_E_CUDA, "yolov5_decode_tiled_kernel: %s", cudaGetErrorString(e));
        return ODL_OK;
    }
    const int threads = 256;
    long long blocks = (total + threads - 1) / threads;
    if (blocks > 65536) blocks = 65536; /* grid-stride loop covers the rest */
    yolov5_decode_kernel<<<(unsigned)blocks, threads, 0, (cudaStream_t)odl_stream_current()>>>(
        head, out, N, na, no, ny, nx, rows_total, row_offset, stride, anc);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return ODL_ERR(ODL_E_CUDA, "yolov5_decode_kernel: %s", cudaGetErrorString(e));
    return ODL_OK;
}
