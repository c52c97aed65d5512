/* CPU data-movement kernels over NCHW: nearest upsampling by 2 and the channel slice copy used by concat.
 * Formulas: backend.h. H and W are always the dimensions of the small tensor (x of the forward pass, dx
 * of the backward pass). The backward pass adds each 2x2 block in scan order, ((a + b) + c) + d with
 * a, b the upper row, as PyTorch's upsample_nearest2d_backward accumulates.
 * Threads: planes (n, c) are independent.
 */
#include "kernels/cpu/cpu.h"

#include <string.h>

typedef struct up_job {
    int H, W;
    const float *in;
    float *out;
} up_job;

static odl_status up_fwd_chunk(void *ctx, int chunk, int64_t b, int64_t e) {
    (void)chunk;
    const up_job *J = (const up_job *)ctx;
    const int H = J->H, W = J->W;
    for (int64_t pl = b; pl < e; pl++) {
        const float *x = J->in + pl * H * W;
        float *y = J->out + pl * 4 * H * W;
        for (int h = 0; h < H; h++) {
            const float *xr = x + (int64_t)h * W;
            float *y0 = y + (int64_t)(2 * h) * 2 * W;
            for (int w = 0; w < W; w++) {
                y0[2 * w] = xr[w];
                y0[2 * w + 1] = xr[w];
            }
            memcpy(y0 + 2 * W, y0, (size_t)(2 * W) * sizeof(float));
        }
    }
    return ODL_OK;
}

static odl_status up_bwd_chunk(void *ctx, int chunk, int64_t b, int64_t e) {
    (void)chunk;
    const up_job *J = (const up_job *)ctx;
    const int H = J->H, W = J->W;
    for (int64_t pl = b; pl < e; pl++) {
        const float *dy = J->in + pl * 4 * H * W;
        float *dx = J->out + pl * H * W;
        for (int h = 0; h < H; h++) {
            const float *r0 = dy + (int64_t)(2 * h) * 2 * W, *r1 = r0 + 2 * W;
            float *d = dx + (int64_t)h * W;
            for (int w = 0; w < W; w++) d[w] = ((r0[2 * w] + r0[2 * w + 1]) + r1[2 * w]) + r1[2 * w + 1];
        }
    }
    return ODL_OK;
}

static int64_t plane_grain(int64_t per_plane) { return per_plane >= 16384 ? 1 : 16384 / (per_plane > 0 ? per_plane : 1); }

odl_status odl_cpu_upsample2x_fwd(int N, int C, int H, int W, const float *x, float *y) {
    up_job J = {H, W, x, y};
    return odl_cpu_parallel_for((int64_t)N * C, plane_grain(5 * (int64_t)H * W), up_fwd_chunk, &J, NULL);
}

odl_status odl_cpu_upsample2x_bwd(int N, int C, int H, int W, const float *dy, float *dx) {
    up_job J = {H, W, dy, dx};
    return odl_cpu_parallel_for((int64_t)N * C, plane_grain(5 * (int64_t)H * W), up_bwd_chunk, &J, NULL);
}

odl_status odl_cpu_channel_copy(int N, int64_t HW, float *src, int C_src, float *dst, int C_dst, int c_offset,
                                int to_slice) {
    const size_t bytes = (size_t)C_src * (size_t)HW * sizeof(float);
    for (int64_t n = 0; n < N; n++) {
        float *s = src + n * C_src * HW;
        float *d = dst + (n * C_dst + c_offset) * HW;
        if (to_slice)
            memcpy(d, s, bytes);
        else
            memcpy(s, d, bytes);
    }
    return ODL_OK;
}
