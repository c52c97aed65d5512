/* Quick self-check of the CPU backend (kernels/cpu/) and the tensor-level ops (kernels/ops.c) against
 * naive double-precision loops: GEMM (transposes, leading dimensions, beta, bias per row/column, residual,
 * activations, edge tiles, K beyond one cache block), convolution forward/backward (stride, padding,
 * 1x1, non-square, more output pixels than one column block), max-pool with argmax, batch norm, dropout's
 * Philox mask, log-softmax/NLL, optimisers, reductions; bitwise equality of results for 1 to 4 threads;
 * and a few argument errors. The op-by-op harness with finite differences is tests/test_ops.c; both take
 * their GEMM and convolution references from tests/ops_ref.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/backend.h"
#include "odl/device.h"
#include "odl/ops.h"
#include "odl/rng.h"
#include "odl/tensor.h"
#include "ops_ref.h"
#include "test_util.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static void fill_rand(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = frand();
}

static odl_tensor mk(int nd, int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t shape[4] = {a, b, c, d};
    odl_tensor t;
    odl_status s = odl_tensor_alloc(&t, odl_cpu(), ODL_F32, nd, shape);
    if (s != ODL_OK) {
        fprintf(stderr, "alloc failed: %s\n", odl_error_msg());
        exit(1);
    }
    fill_rand((float *)t.data, odl_tensor_numel(&t));
    return t;
}
static odl_tensor mki(int nd, int64_t a, int64_t b) {
    int64_t shape[2] = {a, b};
    odl_tensor t;
    if (odl_tensor_zeros(&t, odl_cpu(), ODL_I32, nd, shape) != ODL_OK) exit(1);
    return t;
}
#define F(t) ((float *)(t).data)

/* A float64 copy of n floats, for the references of ops_ref.h (free it). NULL stays NULL. */
static double *to_f64(const float *x, int64_t n) {
    if (!x) return NULL;
    double *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* |got - want| <= atol + rtol*|want| everywhere; prints the worst element. */
static int close_to(const char *what, const float *got, const double *want, int64_t n, double atol, double rtol) {
    double worst = 0;
    int64_t wi = -1;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(got[i]) && isnan(want[i])) continue; /* untouched padding of C */
        double r = fabs((double)got[i] - want[i]) / (atol + rtol * fabs(want[i]));
        if (!(r <= worst)) {
            worst = r;
            wi = i;
        }
    }
    if (!(worst <= 1.0)) {
        fprintf(stderr, "  %s: element %lld got %.9g want %.9g (ratio %.3g)\n", what, (long long)wi,
                (double)got[wi], want[wi], worst);
        return 0;
    }
    return 1;
}

/* ---------------- GEMM ---------------- */
static void gemm_case(int64_t M, int64_t N, int64_t K, int ta, int tb, float alpha, float beta, int bias_mode,
                      int resid, odl_act act, int pad) {
    int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    int64_t arows = ta ? K : M, brows = tb ? N : K;
    float *A = malloc(sizeof(float) * (size_t)(arows * lda + 1)), *B = malloc(sizeof(float) * (size_t)(brows * ldb + 1));
    float *C = malloc(sizeof(float) * (size_t)(M * ldc + 1)), *R = malloc(sizeof(float) * (size_t)(M * ldc + 1));
    float *bias = malloc(sizeof(float) * (size_t)(M + N + 1));
    double *want = malloc(sizeof(double) * (size_t)(M * ldc + 1));
    fill_rand(A, arows * lda);
    fill_rand(B, brows * ldb);
    fill_rand(R, M * ldc);
    fill_rand(bias, M + N);
    for (int64_t i = 0; i < M * ldc; i++) C[i] = beta == 0.0f ? NAN : frand(); /* beta == 0 must not read C */
    /* the reference leaves the ldc gap as it was: the kernel must too */
    for (int64_t i = 0; i < M * ldc; i++) want[i] = C[i];
    double *dA = to_f64(A, arows * lda), *dB = to_f64(B, brows * ldb), *dR = to_f64(R, M * ldc);
    double *dbias = to_f64(bias, M + N);
    ref_gemm(&(ref_gemm_args){.trans_a = ta, .trans_b = tb, .M = M, .N = N, .K = K, .alpha = alpha, .A = dA,
                              .lda = lda, .B = dB, .ldb = ldb, .beta = beta, .C = want, .ldc = ldc,
                              .bias = bias_mode ? dbias : NULL, .bias_per_row = bias_mode == 2,
                              .residual = resid ? dR : NULL, .act = act});
    free(dA), free(dB), free(dR), free(dbias);
    odl_gemm_args g = {ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                       {bias_mode ? bias : NULL, bias_mode == 2, resid ? R : NULL, act}};
    TOK(odl_backend_cpu()->gemm(&g));
    char what[160];
    snprintf(what, sizeof what, "gemm M%lld N%lld K%lld ta%d tb%d a%g b%g bias%d res%d act%d pad%d", (long long)M,
             (long long)N, (long long)K, ta, tb, (double)alpha, (double)beta, bias_mode, resid, (int)act, pad);
    int ok = close_to(what, C, want, M * ldc, 1e-5 * sqrt((double)K + 1), 1e-4);
    TCHECK(ok, "%s", what);
    free(A), free(B), free(C), free(R), free(bias), free(want);
}

static void test_gemm(void) {
    const int64_t dims[][3] = {{1, 1, 1},   {1, 7, 3},    {5, 1, 9},     {4, 8, 16},   {3, 5, 7},
                               {17, 33, 65}, {130, 9, 300}, {64, 128, 513}, {9, 2100, 20}, {33, 17, 1000}};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                gemm_case(dims[d][0], dims[d][1], dims[d][2], ta, tb, 1.0f, 0.0f, 0, 0, ODL_ACT_NONE, (int)(d % 3));
    gemm_case(37, 45, 260, 0, 1, 0.5f, 1.0f, 1, 1, ODL_ACT_RELU, 2);
    gemm_case(37, 45, 260, 1, 0, -1.5f, 0.25f, 2, 0, ODL_ACT_SILU, 1);
    gemm_case(12, 70, 31, 1, 1, 2.0f, 0.0f, 2, 1, ODL_ACT_SIGMOID, 0);
    gemm_case(6, 5, 0, 0, 0, 1.0f, 0.5f, 1, 1, ODL_ACT_RELU, 0); /* K = 0: C = beta*C, epilogue */
    gemm_case(6, 5, 4, 0, 0, 0.0f, 2.0f, 0, 0, ODL_ACT_NONE, 0); /* alpha = 0 */
}

/* ---------------- convolution ---------------- */
static void conv_case(int N, int C, int H, int W, int K, int R, int S, int stride, int pad, odl_act act) {
    odl_tensor x = mk(4, N, C, H, W), w = mk(4, K, C, R, S), b = mk(1, K, 1, 1, 1);
    int P = odl_conv_out_size(H, R, stride, pad), Q = odl_conv_out_size(W, S, stride, pad);
    odl_tensor y = mk(4, N, K, P, Q), res = mk(4, N, K, P, Q), dy = mk(4, N, K, P, Q);
    odl_tensor dx = mk(4, N, C, H, W), dw = mk(4, K, C, R, S), db = mk(1, K, 1, 1, 1);
    odl_conv2d_shape s = {N, C, H, W, K, R, S, stride, stride, pad, pad, P, Q};
    int64_t ny = (int64_t)N * K * P * Q, nx = (int64_t)N * C * H * W, nw = (int64_t)K * C * R * S;
    double *want = malloc(sizeof(double) * (size_t)(ny > nx ? (ny > nw ? ny : nw) : (nx > nw ? nx : nw)));
    char what[128];
    snprintf(what, sizeof what, "conv N%d C%d %dx%d K%d %dx%d s%d p%d act%d", N, C, H, W, K, R, S, stride, pad, (int)act);

    double *dx_ = to_f64(F(x), nx), *dw_ = to_f64(F(w), nw), *db_ = to_f64(F(b), K), *dres = to_f64(F(res), ny);
    double *ddy = to_f64(F(dy), ny), *want_db = malloc(sizeof(double) * (size_t)K);

    /* forward with bias, act and residual */
    TOK(odl_conv2d_fwd(&x, &w, &b, &res, act, stride, pad, &y));
    ref_conv2d_fwd(&s, dx_, dw_, db_, dres, act, want, NULL);
    double atol = 2e-5 * sqrt((double)C * R * S);
    TCHECK(close_to(what, F(y), want, ny, atol, 1e-4), "%s forward", what);

    /* bwd_data: dx = d/dx sum(dy * conv(x, w)) */
    TOK(odl_conv2d_bwd(&x, &w, &dy, stride, pad, &dx, &dw, &db));
    ref_conv2d_bwd_data(&s, ddy, dw_, want, NULL);
    TCHECK(close_to(what, F(dx), want, nx, 2e-5 * sqrt((double)K * R * S), 1e-4), "%s bwd_data", what);
    /* bwd_weight and the bias gradient */
    ref_conv2d_bwd_weight(&s, dx_, ddy, want, want_db, NULL, NULL);
    TCHECK(close_to(what, F(dw), want, nw, 2e-5 * sqrt((double)N * P * Q), 1e-4), "%s bwd_weight", what);
    TCHECK(close_to(what, F(db), want_db, K, 1e-5, 1e-5), "%s db", what);
    free(dx_), free(dw_), free(db_), free(dres), free(ddy), free(want_db);
    free(want);
    odl_tensor *all[] = {&x, &w, &b, &y, &res, &dy, &dx, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) odl_tensor_free(all[i]);
}

static void test_conv(void) {
    conv_case(2, 1, 28, 28, 32, 3, 3, 1, 0, ODL_ACT_RELU); /* MNIST conv1 shape, two images */
    conv_case(3, 5, 9, 7, 6, 3, 3, 2, 1, ODL_ACT_NONE);     /* non-square, stride 2, pad 1 */
    conv_case(1, 7, 6, 11, 5, 1, 1, 1, 0, ODL_ACT_SILU);    /* pointwise (x used as col) */
    conv_case(2, 3, 8, 8, 9, 1, 1, 2, 0, ODL_ACT_NONE);     /* 1x1 stride 2 */
    conv_case(1, 2, 70, 66, 3, 3, 5, 1, 2, ODL_ACT_SIGMOID); /* P*Q > one column block, R != S */
    conv_case(5, 4, 5, 5, 3, 5, 5, 1, 0, ODL_ACT_NONE);     /* kernel = image: 1x1 output */
    conv_case(1, 3, 4, 4, 2, 3, 3, 3, 2, ODL_ACT_RELU);     /* stride 3, pad 2 */
}

/* ---------------- pooling ---------------- */
static void test_pool(void) {
    const int cfg[][4] = {{12, 10, 2, 2}, {7, 9, 3, 2}, {5, 5, 3, 1}};
    const int pads[] = {0, 1, 1};
    for (int t = 0; t < 3; t++) {
        int H = cfg[t][0], W = cfg[t][1], k = cfg[t][2], st = cfg[t][3], pad = pads[t];
        int P = odl_conv_out_size(H, k, st, pad), Q = odl_conv_out_size(W, k, st, pad);
        odl_tensor x = mk(4, 2, 3, H, W), y = mk(4, 2, 3, P, Q), dy = mk(4, 2, 3, P, Q), dx = mk(4, 2, 3, H, W);
        odl_tensor am;
        int64_t ash[4] = {2, 3, P, Q};
        TOK(odl_tensor_alloc(&am, odl_cpu(), ODL_I32, 4, ash));
        F(x)[5] = F(x)[6]; /* a tie */
        TOK(odl_maxpool2d_fwd(&x, k, st, pad, &y, &am));
        TOK(odl_maxpool2d_bwd(&dy, &am, k, st, pad, &dx));
        int bad = 0;
        double *gx = calloc((size_t)(6 * H * W), sizeof(double));
        for (int pl = 0; pl < 6; pl++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    float m = -INFINITY;
                    int idx = -1;
                    for (int r = 0; r < k; r++)
                        for (int s = 0; s < k; s++) {
                            int ih = p * st - pad + r, iw = q * st - pad + s;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            float v = F(x)[pl * H * W + ih * W + iw];
                            if (v > m) m = v, idx = ih * W + iw;
                        }
                    int o = pl * P * Q + p * Q + q;
                    if (F(y)[o] != m || ((int32_t *)am.data)[o] != idx) bad++;
                    gx[pl * H * W + idx] += F(dy)[o];
                }
        TCHECK(bad == 0, "maxpool fwd %dx%d k%d s%d p%d: %d wrong outputs", H, W, k, st, pad, bad);
        TCHECK(close_to("maxpool bwd", F(dx), gx, 6 * H * W, 1e-6, 1e-6), "maxpool bwd case %d", t);
        free(gx);
        odl_tensor_free(&x), odl_tensor_free(&y), odl_tensor_free(&dy), odl_tensor_free(&dx), odl_tensor_free(&am);
    }
}

/* ---------------- batch norm ---------------- */
static void test_batchnorm(void) {
    const int N = 3, C = 4, H = 5, W = 6, HW = H * W;
    odl_tensor x = mk(4, N, C, H, W), y = mk(4, N, C, H, W), dy = mk(4, N, C, H, W), dx = mk(4, N, C, H, W);
    odl_tensor g = mk(1, C, 1, 1, 1), b = mk(1, C, 1, 1, 1), rm = mk(1, C, 1, 1, 1), rv = mk(1, C, 1, 1, 1);
    odl_tensor sm = mk(1, C, 1, 1, 1), si = mk(1, C, 1, 1, 1), dg = mk(1, C, 1, 1, 1), dbt = mk(1, C, 1, 1, 1);
    for (int i = 0; i < N * C * HW; i++) F(x)[i] = 3.0f + 2.0f * F(x)[i];
    for (int c = 0; c < C; c++) F(rv)[c] = 1.0f + 0.5f * F(rv)[c];
    float rm0[4], rv0[4];
    memcpy(rm0, F(rm), sizeof rm0);
    memcpy(rv0, F(rv), sizeof rv0);
    const float eps = 1e-5f, mom = 0.1f;
    TOK(odl_batchnorm_train_fwd(&x, &g, &b, &rm, &rv, mom, eps, &y, &sm, &si));
    TOK(odl_batchnorm_bwd(&x, &dy, &g, &sm, &si, &dx, &dg, &dbt));
    double want_y[3 * 4 * 30], want_dx[3 * 4 * 30], want_c[4];
    int cnt = N * HW;
    for (int c = 0; c < C; c++) {
        double mean = 0, var = 0, sdy = 0, dot = 0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) mean += F(x)[(n * C + c) * HW + i];
        mean /= cnt;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                double d = F(x)[(n * C + c) * HW + i] - mean;
                var += d * d;
                sdy += F(dy)[(n * C + c) * HW + i];
                dot += d * F(dy)[(n * C + c) * HW + i];
            }
        double invstd = 1 / sqrt(var / cnt + eps);
        TCHECK(fabs(F(sm)[c] - mean) < 1e-5 && fabs(F(si)[c] - invstd) < 1e-5 * invstd, "bn saved stats c%d", c);
        TCHECK(fabs(F(rm)[c] - (0.9 * rm0[c] + 0.1 * mean)) < 1e-5, "bn running_mean c%d", c);
        TCHECK(fabs(F(rv)[c] - (0.9 * rv0[c] + 0.1 * var / (cnt - 1))) < 1e-5, "bn running_var (unbiased) c%d", c);
        TCHECK(fabs(F(dbt)[c] - sdy) < 1e-4 && fabs(F(dg)[c] - dot * invstd) < 1e-4, "bn dgamma/dbeta c%d", c);
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                int o = (n * C + c) * HW + i;
                double xh = (F(x)[o] - mean) * invstd;
                want_y[o] = xh * F(g)[c] + F(b)[c];
                want_dx[o] = F(g)[c] * invstd * (F(dy)[o] - sdy / cnt - xh * dot * invstd / cnt);
            }
        want_c[c] = 0;
    }
    (void)want_c;
    TCHECK(close_to("bn y", F(y), want_y, N * C * HW, 1e-5, 1e-5), "bn train forward");
    TCHECK(close_to("bn dx", F(dx), want_dx, N * C * HW, 1e-5, 1e-4), "bn backward dx");
    /* inference with the running statistics */
    TOK(odl_batchnorm_infer(&x, &g, &b, &rm, &rv, eps, &y));
    for (int c = 0; c < C; c++)
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                int o = (n * C + c) * HW + i;
                want_y[o] = (F(x)[o] - F(rm)[c]) / sqrt(F(rv)[c] + eps) * F(g)[c] + F(b)[c];
            }
    TCHECK(close_to("bn infer", F(y), want_y, N * C * HW, 1e-5, 1e-5), "bn infer");
    odl_tensor *all[] = {&x, &y, &dy, &dx, &g, &b, &rm, &rv, &sm, &si, &dg, &dbt};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) odl_tensor_free(all[i]);
}

/* ---------------- element-wise, dropout, loss, reductions, optimisers ---------------- */
static void test_misc(void) {
    const int64_t n = 100003;
    odl_tensor x = mk(1, n, 1, 1, 1), y = mk(1, n, 1, 1, 1), dy = mk(1, n, 1, 1, 1), dx = mk(1, n, 1, 1, 1);
    /* dropout: mask from the Philox stream, scale 1/(1-p) */
    const float p = 0.3f;
    TOK(odl_dropout_fwd(p, 1234, 7, &x, &y));
    int bad = 0;
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        int keep = odl_philox_uniform(1234, 7, (uint64_t)i) >= p;
        kept += keep;
        float w = keep ? F(x)[i] * (1.0f / (1.0f - p)) : 0.0f;
        if (F(y)[i] != w) bad++;
    }
    TCHECK(bad == 0, "dropout forward: %d elements differ from the Philox mask", bad);
    TCHECK(fabs((double)kept / n - 0.7) < 0.01, "dropout keeps %.4f of the elements, expected 0.7", (double)kept / n);
    TOK(odl_dropout_bwd(p, 1234, 7, &x, &dx));
    TCHECK(memcmp(F(dx), F(y), (size_t)n * sizeof(float)) == 0, "dropout backward uses the forward mask");

    /* activations */
    double *want = malloc(sizeof(double) * (size_t)n);
    odl_act acts[] = {ODL_ACT_RELU, ODL_ACT_SILU, ODL_ACT_SIGMOID};
    for (int a = 0; a < 3; a++) {
        TOK(odl_act_fwd(acts[a], &x, &y));
        for (int64_t i = 0; i < n; i++) want[i] = ref_act(acts[a], 4.0 * F(x)[i] / 4.0);
        TCHECK(close_to("act fwd", F(y), want, n, 1e-6, 1e-5), "act %d forward", (int)acts[a]);
        TOK(odl_act_bwd(acts[a], &x, &y, &dy, &dx));
        for (int64_t i = 0; i < n; i++) {
            double v = F(x)[i], d;
            if (acts[a] == ODL_ACT_RELU) d = v > 0;
            else {
                double s = 1 / (1 + exp(-v));
                d = acts[a] == ODL_ACT_SILU ? s * (1 + v * (1 - s)) : s * (1 - s);
            }
            want[i] = d * F(dy)[i];
        }
        TCHECK(close_to("act bwd", F(dx), want, n, 1e-6, 1e-5), "act %d backward", (int)acts[a]);
    }
    /* sum and sum_rows */
    odl_tensor one = mk(1, 1, 1, 1, 1);
    TOK(odl_sum(&x, &one));
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += F(x)[i];
    TCHECK(fabs(F(one)[0] - s) < 1e-3, "sum %.7g vs %.7g", (double)F(one)[0], s);
    odl_tensor m = mk(2, 301, 333, 1, 1), cs = mk(1, 333, 1, 1, 1);
    TOK(odl_sum_rows(&m, &cs));
    for (int j = 0; j < 333; j++) {
        double a = 0;
        for (int i = 0; i < 301; i++) a += F(m)[i * 333 + j];
        want[j] = a;
    }
    TCHECK(close_to("sum_rows", F(cs), want, 333, 1e-5, 1e-6), "sum_rows");

    /* log-softmax + NLL */
    const int B = 7, C = 10;
    odl_tensor lg = mk(2, B, C, 1, 1), lp = mk(2, B, C, 1, 1), dl = mk(2, B, C, 1, 1), lab = mki(1, B, 1);
    odl_tensor am = mki(1, B, 1);
    for (int b = 0; b < B; b++) ((int32_t *)lab.data)[b] = (b * 3) % C;
    F(lg)[0] = 80.0f; /* large logits must not overflow */
    TOK(odl_log_softmax_nll_fwd(&lg, &lab, &lp, &one));
    TOK(odl_log_softmax_nll_bwd(&lp, &lab, 1.0f, &dl));
    TOK(odl_argmax_rows(&lg, &am));
    double loss = 0, wd[70];
    for (int b = 0; b < B; b++) {
        double mx = -INFINITY, se = 0;
        int best = 0;
        for (int j = 0; j < C; j++)
            if (F(lg)[b * C + j] > mx) mx = F(lg)[b * C + j], best = j;
        for (int j = 0; j < C; j++) se += exp(F(lg)[b * C + j] - mx);
        for (int j = 0; j < C; j++) {
            double l = F(lg)[b * C + j] - mx - log(se);
            want[b * C + j] = l;
            wd[b * C + j] = (exp(l) - (j == ((int32_t *)lab.data)[b])) / B;
        }
        loss -= want[b * C + ((int32_t *)lab.data)[b]] / B;
        TCHECK(((int32_t *)am.data)[b] == best, "argmax row %d", b);
    }
    TCHECK(close_to("logprobs", F(lp), want, B * C, 1e-5, 1e-6), "log_softmax");
    TCHECK(fabs(F(one)[0] - loss) < 1e-5, "nll loss %.7g vs %.7g", (double)F(one)[0], loss);
    TCHECK(close_to("dlogits", F(dl), wd, B * C, 1e-6, 1e-5), "log_softmax_nll backward");
    ((int32_t *)lab.data)[3] = C; /* out of range label */
    TFAIL(odl_log_softmax_nll_fwd(&lg, &lab, &lp, &one), ODL_E_INVAL);

    /* optimisers: one element checked against the formulas in double */
    odl_tensor pp = mk(1, 5, 1, 1, 1), gg = mk(1, 5, 1, 1, 1), s1 = mk(1, 5, 1, 1, 1), s2 = mk(1, 5, 1, 1, 1);
    for (int i = 0; i < 5; i++) F(s2)[i] = fabsf(F(s2)[i]);
    double p0 = F(pp)[0], g0 = F(gg)[0], m0 = F(s1)[0], v0 = F(s2)[0];
    TOK(odl_adam_step(&pp, &gg, &s1, &s2, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0, 3));
    {
        double g = g0 + 0.01 * p0, mm = 0.9 * m0 + 0.1 * g, vv = 0.999 * v0 + 0.001 * g * g;
        double pn = p0 - 1e-3 * (mm / (1 - pow(0.9, 3))) / (sqrt(vv / (1 - pow(0.999, 3))) + 1e-8);
        TCHECK(fabs(F(pp)[0] - pn) < 1e-6 && fabs(F(s1)[0] - mm) < 1e-6, "adam step");
    }
    p0 = F(pp)[1], g0 = F(gg)[1], m0 = F(s1)[1];
    TOK(odl_sgd_step(&pp, &gg, &s1, 0.1f, 0.9f, 0.0f, 0.0f, 1, 2));
    {
        double buf = 0.9 * m0 + g0, pn = p0 - 0.1 * (g0 + 0.9 * buf);
        TCHECK(fabs(F(pp)[1] - pn) < 1e-6 && fabs(F(s1)[1] - buf) < 1e-6, "sgd nesterov step");
    }
    for (int i = 0; i < 5; i++) F(s1)[i] = fabsf(F(s1)[i]);
    p0 = F(pp)[2], g0 = F(gg)[2], m0 = F(s1)[2], v0 = F(s2)[2];
    TOK(odl_adadelta_step(&pp, &gg, &s1, &s2, 1.0f, 0.9f, 1e-6f, 0.0f));
    {
        double sq = 0.9 * m0 + 0.1 * g0 * g0, d = sqrt(v0 + 1e-6) / sqrt(sq + 1e-6) * g0;
        TCHECK(fabs(F(pp)[2] - (p0 - d)) < 1e-6 && fabs(F(s2)[2] - (0.9 * v0 + 0.1 * d * d)) < 1e-6, "adadelta step");
    }
    free(want);
    odl_tensor *all[] = {&x, &y, &dy, &dx, &one, &m, &cs, &lg, &lp, &dl, &lab, &am, &pp, &gg, &s1, &s2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) odl_tensor_free(all[i]);
}

/* ---------------- concat / upsample ---------------- */
static void test_layout(void) {
    odl_tensor a = mk(4, 2, 3, 4, 5), b = mk(4, 2, 2, 4, 5), y = mk(4, 2, 5, 4, 5), da = mk(4, 2, 3, 4, 5);
    const odl_tensor *xs[2] = {&a, &b};
    TOK(odl_concat_channels_fwd(2, xs, &y));
    int bad = 0;
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 5; c++)
            for (int i = 0; i < 20; i++) {
                float want = c < 3 ? F(a)[(n * 3 + c) * 20 + i] : F(b)[(n * 2 + c - 3) * 20 + i];
                if (F(y)[(n * 5 + c) * 20 + i] != want) bad++;
            }
    TCHECK(bad == 0, "concat forward: %d wrong", bad);
    odl_tensor *dxs[2] = {&da, NULL};
    TOK(odl_concat_channels_bwd(&y, 2, dxs));
    TCHECK(memcmp(F(da), F(a), sizeof(float) * 120) == 0, "concat backward slice");
    const odl_tensor *bad_xs[2] = {&a, &da};
    TFAIL(odl_concat_channels_fwd(2, bad_xs, &y), ODL_E_INVAL); /* 6 channels into 5 */

    odl_tensor u = mk(4, 2, 5, 8, 10), ux;
    int64_t sh[4] = {2, 5, 4, 5};
    TOK(odl_tensor_alloc(&ux, odl_cpu(), ODL_F32, 4, sh));
    TOK(odl_upsample2x_fwd(&y, &u));
    TCHECK(F(u)[3 * 10 + 5] == F(y)[1 * 5 + 2] && F(u)[80 * 7 + 2 * 10 + 9] == F(y)[20 * 7 + 1 * 5 + 4],
           "upsample forward");
    TOK(odl_upsample2x_bwd(&u, &ux));
    TCHECK(fabsf(F(ux)[7] - 4 * F(y)[7]) < 1e-6f, "upsample backward sums the 2x2 block");
    odl_tensor *all[] = {&a, &b, &y, &da, &u, &ux};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) odl_tensor_free(all[i]);
}

/* ---------------- same bits for any thread count ---------------- */
static uint64_t hash_f(const float *x, int64_t n) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        h = (h ^ u) * 1099511628211ull;
    }
    return h;
}

static void test_determinism(void) {
    odl_tensor x = mk(4, 5, 16, 20, 18), w = mk(4, 24, 16, 3, 3), bb = mk(1, 24, 1, 1, 1);
    odl_tensor y = mk(4, 5, 24, 18, 16), dy = mk(4, 5, 24, 18, 16), dx = mk(4, 5, 16, 20, 18), dw = mk(4, 24, 16, 3, 3);
    odl_tensor db = mk(1, 24, 1, 1, 1), A = mk(2, 203, 517, 1, 1), B = mk(2, 517, 190, 1, 1), C = mk(2, 203, 190, 1, 1);
    odl_tensor sm = mk(1, 16, 1, 1, 1), si = mk(1, 16, 1, 1, 1), rm = mk(1, 16, 1, 1, 1), rv = mk(1, 16, 1, 1, 1);
    odl_tensor bnx = mk(4, 5, 16, 20, 18), one = mk(1, 1, 1, 1, 1), big = mk(1, 300001, 1, 1, 1);
    odl_tensor gam = mk(1, 16, 1, 1, 1), bet = mk(1, 16, 1, 1, 1);
    uint64_t ref[8] = {0};
    const int threads[] = {1, 2, 3, 4};
    for (int t = 0; t < 4; t++) {
        odl_cpu_set_num_threads(threads[t]);
        uint64_t h[8];
        TOK(odl_gemm(0, 0, 1.0f, &A, &B, 0.0f, &C, NULL, NULL, ODL_ACT_NONE));
        h[0] = hash_f(F(C), odl_tensor_numel(&C));
        TOK(odl_conv2d_fwd(&x, &w, &bb, NULL, ODL_ACT_SILU, 1, 0, &y));
        h[1] = hash_f(F(y), odl_tensor_numel(&y));
        TOK(odl_conv2d_bwd(&x, &w, &dy, 1, 0, &dx, &dw, &db));
        h[2] = hash_f(F(dx), odl_tensor_numel(&dx));
        h[3] = hash_f(F(dw), odl_tensor_numel(&dw));
        h[4] = hash_f(F(db), odl_tensor_numel(&db));
        for (int i = 0; i < 16; i++) F(rm)[i] = 0.0f, F(rv)[i] = 1.0f;
        TOK(odl_batchnorm_train_fwd(&x, &gam, &bet, &rm, &rv, 0.1f, 1e-5f, &bnx, &sm, &si));
        h[5] = hash_f(F(bnx), odl_tensor_numel(&bnx));
        TOK(odl_sum(&big, &one));
        h[6] = hash_f(F(one), 1);
        odl_tensor v;
        int64_t sh[2] = {5 * 24, 18 * 16};
        TOK(odl_tensor_reshape(&dy, 2, sh, &v));
        odl_tensor cs = mk(1, 18 * 16, 1, 1, 1);
        TOK(odl_sum_rows(&v, &cs));
        h[7] = hash_f(F(cs), 18 * 16);
        odl_tensor_free(&cs);
        for (int i = 0; i < 8; i++) {
            if (t == 0) ref[i] = h[i];
            TCHECK(h[i] == ref[i], "result %d with %d threads differs from 1 thread", i, threads[t]);
        }
    }
    odl_cpu_set_num_threads(2);
    odl_tensor *all[] = {&x, &w, &bb, &y, &dy, &dx, &dw, &db, &A, &B, &C, &sm, &si, &rm, &rv, &bnx, &one, &big, &gam, &bet};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) odl_tensor_free(all[i]);
}

/* ---------------- argument errors ---------------- */
static void test_errors(void) {
    odl_tensor x = mk(4, 2, 3, 8, 8), w = mk(4, 4, 2, 3, 3), y = mk(4, 2, 4, 6, 6);
    TFAIL(odl_conv2d_fwd(&x, &w, NULL, NULL, ODL_ACT_NONE, 1, 0, &y), ODL_E_INVAL); /* C mismatch */
    TCHECK(strstr(odl_error_msg(), "[4, 2, 3, 3]") && strstr(odl_error_msg(), "odl_conv2d_fwd"),
           "message names the op and shape: %s", odl_error_msg());
    TFAIL(odl_conv2d_fwd(NULL, &w, NULL, NULL, ODL_ACT_NONE, 1, 0, &y), ODL_E_INVAL);
    TFAIL(odl_maxpool2d_fwd(&x, 2, 2, 2, &y, NULL), ODL_E_INVAL); /* pad > kernel/2 */
    odl_tensor a = mk(2, 3, 4, 1, 1), b = mk(2, 5, 6, 1, 1), c = mk(2, 3, 6, 1, 1);
    TFAIL(odl_gemm(0, 0, 1.0f, &a, &b, 0.0f, &c, NULL, NULL, ODL_ACT_NONE), ODL_E_INVAL);
    TFAIL(odl_add(&a, &b, &c), ODL_E_INVAL);
    odl_tensor gpu = a;
    gpu.device = odl_cuda(0);
    TFAIL(odl_add(&a, &gpu, &a), ODL_E_INVAL);
#ifndef ODL_HAVE_CUDA
    TFAIL(odl_add(&gpu, &gpu, &gpu), ODL_E_NODEV); /* no CUDA backend in this build */
#endif
    TFAIL(odl_dropout_fwd(1.0f, 1, 0, &a, &a), ODL_E_INVAL);
    odl_tensor *all[] = {&x, &w, &y, &a, &b, &c};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) odl_tensor_free(all[i]);
}

/* ---------------- odl_memcpy2d_async on the host: rows packed, the padding neither read nor written ---------------- */
static void test_copies(void) {
    enum { W = 5, SP = 8, DP = 6, ROWS = 4 };
    unsigned char src[SP * ROWS], dst[DP * ROWS];
    for (int i = 0; i < SP * ROWS; i++) src[i] = (unsigned char)(i % SP < W ? i : 0xEE); /* 0xEE: padding */
    memset(dst, 0x55, sizeof dst);
    TOK(odl_memcpy2d_async(dst, DP, odl_cpu(), src, SP, odl_cpu(), W, ROWS, NULL));
    for (int y = 0; y < ROWS; y++)
        for (int x = 0; x < DP; x++) {
            const int want = x < W ? y * SP + x : 0x55;
            TCHECK(dst[y * DP + x] == want, "2D copy: row %d byte %d is %d, want %d", y, x, dst[y * DP + x], want);
        }
    TFAIL(odl_memcpy2d_async(dst, DP, odl_cpu(), src, SP, odl_cpu(), DP + 1, ROWS, NULL), ODL_E_INVAL);
    TOK(odl_memcpy2d_async(dst, DP, odl_cpu(), src, SP, odl_cpu(), W, 0, NULL)); /* nothing to copy */
#ifndef ODL_HAVE_CUDA
    TFAIL(odl_memcpy2d_async(dst, DP, odl_cuda(0), src, SP, odl_cpu(), W, ROWS, NULL), ODL_E_NODEV);
#endif
}

int main(void) {
    TCHECK(odl_backend_for(odl_cpu()) == odl_backend_cpu(), "CPU backend table");
    TCHECK(strcmp(odl_backend_cpu()->name, "cpu") == 0, "name");
    test_gemm();
    test_conv();
    test_pool();
    test_batchnorm();
    test_misc();
    test_layout();
    test_determinism();
    test_errors();
    test_copies();
    return odl_test_finish("test_cpu_smoke");
}
