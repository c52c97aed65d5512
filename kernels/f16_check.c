/* odl_conv2d_f16_check (odl/backend.h): the requirements of odl_conv2d_f16_args, checked in one place
 * for every backend's conv2d_f16. Each failure returns ODL_E_INVAL with a message that starts with the
 * function's name and names the requirement and the values found. */
#include <stdint.h>

#include "odl/backend.h"

#define OP "odl_conv2d_f16_check"

/* PyTorch's output size, or -1 when the kernel does not fit (in + 2 pad < k). */
static int64_t out_size(int in, int k, int stride, int pad) {
    int64_t span = (int64_t)in + 2 * (int64_t)pad - k;
    return span < 0 ? -1 : span / stride + 1;
}

odl_status odl_conv2d_f16_check(const odl_conv2d_f16_args *a) {
    if (!a) return ODL_ERR(ODL_E_INVAL, OP ": args is NULL");
    const odl_conv2d_shape *s = &a->s;
    if (!a->x) return ODL_ERR(ODL_E_INVAL, OP ": x is NULL");
    if (!a->w) return ODL_ERR(ODL_E_INVAL, OP ": w is NULL");
    if (!a->y) return ODL_ERR(ODL_E_INVAL, OP ": y is NULL");
    if (s->N < 1 || s->C < 1 || s->H < 1 || s->W < 1 || s->K < 1 || s->R < 1 || s->S < 1)
        return ODL_ERR(ODL_E_INVAL, OP ": dimensions must be >= 1, got N %d C %d H %d W %d K %d R %d S %d", s->N,
                       s->C, s->H, s->W, s->K, s->R, s->S);
    if (s->stride_h < 1 || s->stride_w < 1)
        return ODL_ERR(ODL_E_INVAL, OP ": stride must be >= 1, got %d x %d", s->stride_h, s->stride_w);
    if (s->pad_h < 0 || s->pad_w < 0)
        return ODL_ERR(ODL_E_INVAL, OP ": pad must be >= 0, got %d x %d", s->pad_h, s->pad_w);
    const int64_t P = out_size(s->H, s->R, s->stride_h, s->pad_h), Q = out_size(s->W, s->S, s->stride_w, s->pad_w);
    if (P < 1 || Q < 1)
        return ODL_ERR(ODL_E_INVAL, OP ": kernel %dx%d does not fit input %dx%d with pad %dx%d", s->R, s->S, s->H,
                       s->W, s->pad_h, s->pad_w);
    if (s->P != P || s->Q != Q)
        return ODL_ERR(ODL_E_INVAL,
                       OP ": output size P x Q = %d x %d, expected %lld x %lld for input %dx%d, kernel %dx%d, "
                          "stride %dx%d, pad %dx%d",
                       s->P, s->Q, (long long)P, (long long)Q, s->H, s->W, s->R, s->S, s->stride_h, s->stride_w,
                       s->pad_h, s->pad_w);
    if (s->C % 8 != 0)
        return ODL_ERR(ODL_E_INVAL, OP ": C = %d must be a multiple of 8 (pad channels with zeros)", s->C);
    if (a->ldx % 8 != 0) return ODL_ERR(ODL_E_INVAL, OP ": ldx = %lld must be a multiple of 8", (long long)a->ldx);
    if (a->ldx < s->C)
        return ODL_ERR(ODL_E_INVAL, OP ": ldx = %lld must be >= C = %d", (long long)a->ldx, s->C);
    if (a->ldy < s->K)
        return ODL_ERR(ODL_E_INVAL, OP ": ldy = %lld must be >= K = %d", (long long)a->ldy, s->K);
    if (!a->y_f32 && a->ldy % 2 != 0)
        return ODL_ERR(ODL_E_INVAL, OP ": ldy = %lld must be even for a float16 output", (long long)a->ldy);
    if (a->residual) {
        if (a->ldr < s->K)
            return ODL_ERR(ODL_E_INVAL, OP ": ldr = %lld must be >= K = %d", (long long)a->ldr, s->K);
        if (a->ldr % 2 != 0) return ODL_ERR(ODL_E_INVAL, OP ": ldr = %lld must be even", (long long)a->ldr);
        if ((uintptr_t)a->residual % 4 != 0)
            return ODL_ERR(ODL_E_INVAL, OP ": residual %p must be 4-byte aligned", (const void *)a->residual);
    }
    if ((uintptr_t)a->x % 16 != 0) return ODL_ERR(ODL_E_INVAL, OP ": x %p must be 16-byte aligned", (const void *)a->x);
    if ((uintptr_t)a->w % 16 != 0) return ODL_ERR(ODL_E_INVAL, OP ": w %p must be 16-byte aligned", (const void *)a->w);
    if ((uintptr_t)a->y % 4 != 0) return ODL_ERR(ODL_E_INVAL, OP ": y %p must be 4-byte aligned", a->y);
    if (a->act != ODL_ACT_NONE && a->act != ODL_ACT_RELU && a->act != ODL_ACT_SILU && a->act != ODL_ACT_SIGMOID)
        return ODL_ERR(ODL_E_INVAL, OP ": unknown activation %d", (int)a->act);
    return ODL_OK;
}
