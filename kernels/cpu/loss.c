/* CPU log-softmax + negative log-likelihood (PyTorch's F.log_softmax followed by F.nll_loss with mean
 * reduction) and row-wise argmax. Formulas: backend.h.
 *   forward: per row, m = max_j x_j, lse = m + log(sum_j exp(x_j - m)) in double (numerically stable);
 *     logprobs_j = x_j - lse; loss = -(1/B) sum_b logprobs[b, label_b] accumulated in double.
 *   backward: dlogits = (exp(logprobs) - onehot(label)) * (dloss / B).
 * Labels outside [0, C) are reported (ODL_E_INVAL naming the row and the label) instead of read.
 * argmax: first maximum of each row; a NaN counts as the maximum (first NaN), as torch.argmax.
 */
#include "kernels/cpu/cpu.h"

#include <math.h>

static odl_status check_labels(int B, int C, const int32_t *labels) {
    for (int b = 0; b < B; b++)
        if (labels[b] < 0 || labels[b] >= C)
            return ODL_ERR(ODL_E_INVAL, "log_softmax_nll: labels[%d] = %d is outside [0, %d)", b, (int)labels[b], C);
    return ODL_OK;
}

odl_status odl_cpu_log_softmax_nll_fwd(int B, int C, const float *logits, const int32_t *labels, float *logprobs,
                                       float *loss) {
    ODL_CHECK(check_labels(B, C, labels));
    double total = 0.0;
    for (int b = 0; b < B; b++) {
        const float *x = logits + (int64_t)b * C;
        float *lp = logprobs + (int64_t)b * C;
        float m = -INFINITY;
        for (int j = 0; j < C; j++)
            if (x[j] > m || isnan(x[j])) m = x[j];
        double s = 0.0;
        if (isfinite(m))
            for (int j = 0; j < C; j++) s += exp((double)x[j] - (double)m);
        /* all -inf row: log_softmax is NaN in PyTorch (-inf - -inf); m + log(0) gives the same */
        double lse = isfinite(m) ? (double)m + log(s) : (double)m;
        for (int j = 0; j < C; j++) lp[j] = (float)((double)x[j] - lse);
        total += (double)x[labels[b]] - lse;
    }
    *loss = B > 0 ? (float)(-total / (double)B) : NAN; /* PyTorch: mean over an empty batch is NaN */
    return ODL_OK;
}

odl_status odl_cpu_log_softmax_nll_bwd(int B, int C, const float *logprobs, const int32_t *labels, float dloss,
                                       float *dlogits) {
    ODL_CHECK(check_labels(B, C, labels));
    const float g = B > 0 ? dloss / (float)B : 0.0f;
    for (int b = 0; b < B; b++) {
        const float *lp = logprobs + (int64_t)b * C;
        float *d = dlogits + (int64_t)b * C;
        for (int j = 0; j < C; j++) d[j] = expf(lp[j]) * g;
        d[labels[b]] = (expf(lp[labels[b]]) - 1.0f) * g;
    }
    return ODL_OK;
}

odl_status odl_cpu_argmax_rows(int B, int C, const float *x, int32_t *out) {
    for (int b = 0; b < B; b++) {
        const float *r = x + (int64_t)b * C;
        int best = 0;
        for (int j = 1; j < C && !isnan(r[best]); j++)
            if (r[j] > r[best] || isnan(r[j])) best = j;
        out[b] = best;
    }
    return ODL_OK;
}
