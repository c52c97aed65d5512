/* test_ops: op-by-op verification of every op of odl/ops.h on every available backend, against the
 * float64 reference of tests/ops_ref.c (in the spirit of ggml's test-backend-ops and llm.c's tests).
 *
 *   test_ops [--backend cpu|cuda|all] [--seed N] [--op NAME] [--list]
 *
 * --backend  all (default): the CPU and, when odl_cuda_device_count() > 0, CUDA device 0;
 *            cpu: the CPU only; cuda: CUDA device 0 only (prints "skipped: no CUDA device" and exits 77,
 *            ctest's skip code, in a CPU-only build or without a device). CUDA is set up with
 *            odl_cuda_init(0, 0.2).
 * --seed     inputs are fresh random numbers each run; the seed (printed first) reproduces a run. Each
 *            case draws from its own stream derived from (seed, op, case number), so that
 *            `--seed N --op NAME` gives the same inputs as the full run did.
 * --op       run only the op NAME (exact name from --list), else every op whose name contains NAME;
 *            "bad_calls" runs only the invalid-argument checks.
 *
 * For each case: random float32 inputs; every output buffer is poisoned with NaN (int32 outputs with
 * 0x80000007) and surrounded by 64 guard words, so that unwritten elements and out-of-bounds writes
 * fail; inputs are checked to be unchanged after the call. The float64 reference runs on the same
 * float32 inputs; every backward of the reference is first proven by central finite differences of the
 * reference forward (line "ref ... fd.*"), then the backend's backward is compared with it.
 * Output: one line per (op, shape, backend) with each measured error and its tolerance, then a summary.
 *
 * ---------------------------------------------------------------------------------------------------
 * Tolerances. u = 2^-24 (float32 unit roundoff). For float outputs the measure is
 *     err = max_i |got_i - ref_i| / den_i          (0 when equal; NaN/inf in got -> inf)
 * with den_i given per op, and the case passes when err <= tol. mag_i is the magnitude bound of the
 * reference (ops_ref.h): the sum of |terms| that make output i. dot(K) = 8u + min((K+2)u, 8u sqrt(K)):
 * (K+2)u is the worst-case bound of any summation order (Higham, 3.1); 8u sqrt(K) the statistical size.
 * l2(K) = 8u sqrt(K) + 16u: bound of the relative L2 error of length-K dot products, measured as
 * ||got - ref|| / sqrt(||ref||^2 + ||mag / sqrt(K)||^2) (mag/sqrt(K): the typical size of such a sum).
 *
 *  op                      output            den_i                                   tol
 *  gemm, linear_fwd,       C, y              mag_i + |ref_i|                         dot(K), and l2(K)
 *    conv2d_fwd            (K = inner dim; conv: C*R*S; mag includes |bias|, |beta C|, |act|, |residual|)
 *  linear_bwd              dx (K=out), dw (K=B), db (K=B)  mag_i + |ref_i|           dot(K), l2(K)
 *  conv2d_bwd              dx (K=K*R*S), dw, db (K=N*P*Q)  mag_i + |ref_i|           dot(K), l2(K)
 *  maxpool2d_fwd           y, argmax         exact (values are copies; argmax int)   0
 *  maxpool2d_bwd           dx                mag_i + |ref_i| (sum of |dy| landing)   dot(kh*kw)
 *  act_fwd none/relu       y                 exact                                   0
 *  act_fwd silu/sigmoid    y                 |ref_i| + 1e-30                         32u
 *  act_bwd none/relu       dx                exact                                   0
 *  act_bwd silu            dx                |ref_i| + |dy|(s + |x| s (1-s)) + 1e-30 32u
 *  act_bwd sigmoid         dx                |ref_i| + |dy| y / 8 + 1e-30            32u
 *  dropout_fwd/bwd         y, dx             |ref_i| (one rounding of x * scale_f32; p = 0: exact)   u
 *                          y.bits, dx.bits: elements that differ from float(x * scale_f32)     0
 *  batchnorm_infer         y                 |ref| + |gamma| invstd (|x - mean| + |mean|) + |beta|   32u
 *  batchnorm_train_fwd     y                 |ref| + |gamma| invstd (|x - mean| + A) + |beta|        dot(M)
 *                          save_mean         |ref| + A                               dot(M)
 *                          save_invstd       |ref| (E[x^2] + eps) / (var + eps)      dot(M)
 *                          running_mean/var  (1-mom)|r| + mom * (A resp. var_u (E[x^2]+eps)/(var+eps))  dot(M)
 *                          (M = N*H*W, A = mean of |x| over the channel)
 *  batchnorm_bwd           dx                |gamma| invstd (|dy| + S|dy|/M + |xhat| S|dy xhat|/M)    dot(M)
 *                          dgamma, dbeta     S|dy xhat|, S|dy|                       dot(M)
 *  upsample2x_fwd          y                 exact                                   0
 *  upsample2x_bwd          dx                mag_i + |ref_i|                         dot(4)
 *                          dx.bits: elements that differ from float ((a + b) + c) + d   0
 *  concat_channels_*       y, dxs            exact                                   0
 *  log_softmax_nll_fwd     logprobs          |x_i| + |max_row| + 1 + |ref_i|         dot(C) + 16u
 *                          loss              mean of those dens at the labels        dot(C) + dot(B)
 *  log_softmax_nll_bwd     dlogits           (exp(lp_i) + [i = label]) |dloss| / B   16u
 *  argmax_rows             out               exact (first maximum)                   0
 *  add, mul, scale         y                 |ref_i| (+ 1e-37)                       2u
 *  axpy                    y                 |ref_i| + |alpha x_i|                   2u
 *  fill                    y                 exact                                   0
 *  sum_rows (K = M), sum   y, out            mag + |ref|                             dot(K), l2 for sum_rows
 *  sgd_step                p                 |ref| + lr (|g| + wd|p| + mom|buf| + ...)  16u
 *                          buf               |ref| + mom|buf| + |g| + wd|p|          16u
 *  adam_step               p                 (16u/1e-4)|ref| + lr |update| + lr wd |p|   1e-4  (float bias
 *                                            corrections 1 - beta^step lose up to ~3e-5 relative)
 *                          m, v              |ref| + |terms|                          16u
 *  adadelta_step           p                 |ref| + lr |delta|                      32u
 *                          sq, acc           |ref| + |terms|                          32u
 *   (optimisers: |terms| use |g| + wd|p| for g + wd p, which may cancel; each step starts from the
 *    backend's own state, 5 steps, step = 1..5)
 *  finite differences      each sampled dL/dx_j, L = sum(w_rand * out), h = 1e-6 max(1, |x_j|),
 *   (reference only)       err = (|fd - g_j| - r) / (|g_j| + 1e-3 rms(g)),                1e-5
 *                          r = 16 eps_64 sum |w_i| (|out+_i| + |out-_i|) / 2h over the outputs that changed
 *                          (over all outputs when there are at most 16, e.g. the scalar loss); a forward
 *                          whose intermediates outgrow its outputs adds them (log_softmax_nll: the loss of
 *                          0.013 is a difference of log-sum-exps of 8.4, whose rounding a seed of 2026-12-07
 *                          showed as 1.2e-10 in a gradient of 1.4e-6)
 *                          points where the one-sided slopes differ, also at h/4 (a ReLU or max-pool kink),
 *                          are skipped.
 * Invalid calls (mismatched shapes, wrong dtype, other device, NULL tensor, a few bad scalars) must return
 * ODL_E_INVAL with a message (TFAIL of tests/test_util.h).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "odl/backend.h"
#include "odl/device.h"
#include "odl/ops.h"
#include "odl/rng.h"
#include "odl/status.h"
#include "odl/tensor.h"
#include "gemm_cases.h"
#include "ops_ref.h"
#include "test_util.h"

/* ================================================================ tolerances */

#define U 5.9604644775390625e-8 /* 2^-24 */
static double tol_dot(double K) {
    double a = (K + 2) * U, b = 8 * U * sqrt(K);
    return 8 * U + (a < b ? a : b);
}
static double tol_l2(double K) { return 8 * U * sqrt(K) + 16 * U; }
#define TOL_EXACT 0.0
#define TOL_TRANS (32 * U) /* transcendental element-wise ops */
#define TOL_ARITH (2 * U)  /* one or two correctly rounded operations */
#define TOL_FD 1e-5
#define TOL_ADAM 1e-4

/* ================================================================ options, random numbers */

static uint64_t g_seed;
static const char *g_filter;
static int g_filter_exact;
static uint64_t g_rs;

static const char *const OP_NAMES[] = {
    "gemm",
    "linear_fwd",
    "linear_bwd",
    "conv2d_fwd",
    "conv2d_bwd",
    "maxpool2d_fwd",
    "maxpool2d_bwd",
    "act_fwd",
    "act_bwd",
    "dropout_fwd",
    "dropout_bwd",
    "batchnorm_infer",
    "batchnorm_train_fwd",
    "batchnorm_bwd",
    "upsample2x_fwd",
    "upsample2x_bwd",
    "concat_channels_fwd",
    "concat_channels_bwd",
    "log_softmax_nll_fwd",
    "log_softmax_nll_bwd",
    "argmax_rows",
    "add",
    "mul",
    "scale",
    "axpy",
    "fill",
    "sum_rows",
    "sum",
    "sgd_step",
    "adam_step",
    "adadelta_step",
    "bad_calls",
};
#define N_OPS ((int)(sizeof OP_NAMES / sizeof OP_NAMES[0]))

static int want(const char *op) {
    if (!g_filter) return 1;
    return g_filter_exact ? strcmp(op, g_filter) == 0 : strstr(op, g_filter) != NULL;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t rnext(void) { return splitmix(&g_rs); }
/* Each case its own stream: (seed, op name, case number). */
static void rng_case(const char *op, int idx) {
    uint64_t h = g_seed ^ 0x5851F42D4C957F2Dull;
    for (const char *p = op; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001B3ull;
    h ^= (uint64_t)idx * 0xD6E8FEB86659FD93ull;
    g_rs = h;
    (void)rnext();
}
static double runif(void) { return (double)(rnext() >> 11) * 0x1.0p-53; }
static double runi(double a, double b) { return a + (b - a) * runif(); }
static double rnorm(void) {
    double u1 = (double)((rnext() >> 11) + 1) * 0x1.0p-53, u2 = runif();
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}
static int rint_n(int n) { return (int)(runif() * n); }

/* ================================================================ host arena (freed after each case) */

static void **g_arena;
static size_t g_narena, g_caparena;

static void *hal(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "test_ops: out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    if (g_narena == g_caparena) {
        g_caparena = g_caparena ? 2 * g_caparena : 256;
        g_arena = realloc(g_arena, g_caparena * sizeof *g_arena);
        if (!g_arena) {
            fprintf(stderr, "test_ops: out of host memory\n");
            exit(1);
        }
    }
    g_arena[g_narena++] = p;
    return p;
}
static void arena_free(void) {
    for (size_t i = 0; i < g_narena; i++)
        free(g_arena[i]);
    g_narena = 0;
}
static float *falloc(int64_t n) { return hal((size_t)n * sizeof(float)); }
static double *dalloc(int64_t n) { return hal((size_t)n * sizeof(double)); }
static int32_t *ialloc(int64_t n) { return hal((size_t)n * sizeof(int32_t)); }

static float *fgen(int64_t n, double lo, double hi) {
    float *a = falloc(n);
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)runi(lo, hi);
    return a;
}
static float *fnorm(int64_t n, double mean, double sd) {
    float *a = falloc(n);
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)(mean + sd * rnorm());
    return a;
}
/* rows x cols in a buffer of leading dimension ld; the gap columns hold NaN (a kernel must not read them). */
static float *fmat(int64_t rows, int64_t cols, int64_t ld, double lo, double hi) {
    float *a = falloc(rows * ld);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < ld; c++)
            a[r * ld + c] = c < cols ? (float)runi(lo, hi) : NAN;
    return a;
}
static double *f2d(const float *f, int64_t n) {
    double *d = dalloc(n);
    for (int64_t i = 0; i < n; i++)
        d[i] = f[i];
    return d;
}
static float *d2f(const double *d, int64_t n) {
    float *f = falloc(n);
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)d[i];
    return f;
}
static float *fnan(int64_t n) {
    float *f = falloc(n);
    for (int64_t i = 0; i < n; i++)
        f[i] = NAN;
    return f;
}
static double rms(const double *a, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * a[i];
    return n ? sqrt(s / (double)n) : 0;
}

static const char *act_name(odl_act a) {
    switch (a) {
    case ODL_ACT_RELU: return "relu";
    case ODL_ACT_SILU: return "silu";
    case ODL_ACT_SIGMOID: return "sigmoid";
    default: return "none";
    }
}

/* ================================================================ backends */

typedef struct bk {
    const char *name;
    odl_device dev;
    const odl_backend *be;
} bk;
static bk g_bk[2];
static int g_nbk;
static int g_have_cuda; /* a CUDA device is initialised (used for the other-device checks) */

/* ================================================================ result lines */

static struct {
    const char *bk;
    char op[40];
    char desc[160];
    char parts[1400];
    int fail;
} L;

static void line_begin(const char *bkname, const char *op, const char *desc) {
    L.bk = bkname;
    snprintf(L.op, sizeof L.op, "%s", op);
    snprintf(L.desc, sizeof L.desc, "%s", desc);
    L.parts[0] = 0;
    L.fail = 0;
}
static void line_add(const char *what, double err, double tol) {
    int ok = err <= tol;
    size_t o = strlen(L.parts);
    if (o < sizeof L.parts - 64)
        snprintf(L.parts + o, sizeof L.parts - o, " %s=%.2e%s%.1e", what, err, ok ? "<=" : ">", tol);
    if (!ok) L.fail = 1;
}
static void line_note_fail(const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL [%s %s %s] %s\n", L.bk, L.op, L.desc, msg);
    size_t o = strlen(L.parts);
    if (o < sizeof L.parts - 32) snprintf(L.parts + o, sizeof L.parts - o, " [error]");
    L.fail = 1;
}
static void line_end(void) {
    printf("%-7s %-20s %-46s%s %s\n", L.bk, L.op, L.desc, L.parts, L.fail ? "FAIL" : "ok");
    fflush(stdout);
    odl_test_checks++;
    if (L.fail) odl_test_failures++;
}

/* A failed call: print its status and message. */
static int call_ok(odl_status st, const char *what) {
    if (st == ODL_OK) return 1;
    line_note_fail("%s returned %s: %s", what, odl_status_str(st), odl_error_msg());
    return 0;
}

/* ================================================================ comparisons */

typedef struct cmpr {
    double err;
    int64_t worst, nbad;
} cmpr;

/* err = max |got - ref| / (wref |ref| + mag + floor); exact equality counts 0; NaN/inf in got -> inf. */
static cmpr cmp_f32(const float *got, const double *ref, const double *mag, int64_t n, double wref, double floor_) {
    cmpr r = {0, -1, 0};
    for (int64_t i = 0; i < n; i++) {
        double g = got[i];
        if (!isfinite(g) && !(isinf(g) && g == ref[i])) {
            if (r.nbad++ == 0 || r.err < INFINITY) r.worst = i;
            r.err = INFINITY;
            continue;
        }
        double d = fabs(g - ref[i]);
        if (d == 0) continue;
        double den = wref * fabs(ref[i]) + (mag ? mag[i] : 0) + floor_;
        double e = den > 0 ? d / den : INFINITY;
        if (e > r.err) {
            r.err = e;
            r.worst = i;
        }
    }
    return r;
}

static void report_cmp(const char *what, cmpr r, const float *got, const double *ref, double tol) {
    line_add(what, r.err, tol);
    if (!(r.err <= tol) && r.worst >= 0)
        line_note_fail("%s: worst element %" PRId64 ": got %.9g, want %.9g (err %.3g > tol %.3g); %" PRId64 " NaN/inf",
                       what, r.worst, (double)got[r.worst], ref[r.worst], r.err, tol, r.nbad);
}

static void check_f32(const char *what, const float *got, const double *ref, const double *mag, int64_t n, double wref,
                      double floor_, double tol) {
    report_cmp(what, cmp_f32(got, ref, mag, n, wref, floor_), got, ref, tol);
}

/* ||got - ref|| / sqrt(sum ref^2 + sum (mag / sqrt(K))^2): the relative L2 error, with mag/sqrt(K) (the
 * typical size of a K-term sum of random signs) as a floor so that a few cancelling outputs do not
 * dominate. */
static void check_l2(const char *what, const float *got, const double *ref, const double *mag, double K, int64_t n,
                     double tol) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i], m = mag ? mag[i] / sqrt(K) : 0;
        num += d * d;
        den += ref[i] * ref[i] + m * m;
    }
    double e = isfinite(num) ? (den > 0 ? sqrt(num / den) : sqrt(num)) : INFINITY;
    line_add(what, e, tol);
}

static void check_i32(const char *what, const int32_t *got, const int32_t *ref, int64_t n) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != ref[i] && bad++ == 0) first = i;
    line_add(what, (double)bad, 0);
    if (bad)
        line_note_fail("%s: %" PRId64 " of %" PRId64 " differ, first at %" PRId64 ": got %d, want %d", what, bad, n,
                       first, (int)got[first], (int)ref[first]);
}

/* ================================================================ device tensors with guards */

#define GUARD 64
#define GUARD_BITS 0x7FA5A5A5u
#define POISON_F32 0x7FC00000u
#define POISON_I32 0x80000007u

typedef struct dten {
    odl_tensor base; /* owning, 1-D [GUARD + n + GUARD] */
    odl_tensor t;    /* the view handed to the op */
    int64_t n;
} dten;
#define MAX_DT 128
static dten g_dt[MAX_DT];
static int g_ndt;

static int64_t shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

/* A float32/int32 tensor on dev with `host` as contents (NULL: poisoned). On failure the returned tensor
 * has NULL data (the op must then fail) and the line is marked failed. */
static odl_tensor *dnew(odl_device dev, odl_dtype dt, int ndim, const int64_t *shape, const void *host) {
    if (g_ndt == MAX_DT) {
        fprintf(stderr, "test_ops: too many device tensors in one case\n");
        exit(1);
    }
    dten *d = &g_dt[g_ndt++];
    memset(d, 0, sizeof *d);
    int64_t n = shape_numel(ndim, shape);
    d->n = n;
    uint32_t *st = malloc((size_t)(n + 2 * GUARD) * 4);
    if (!st) {
        fprintf(stderr, "test_ops: out of host memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < GUARD; i++)
        st[i] = st[GUARD + n + i] = GUARD_BITS;
    if (host)
        memcpy(st + GUARD, host, (size_t)n * 4);
    else
        for (int64_t i = 0; i < n; i++)
            st[GUARD + i] = dt == ODL_I32 ? POISON_I32 : POISON_F32;
    int64_t bs[1] = {n + 2 * GUARD};
    odl_tensor v;
    odl_status s = odl_tensor_alloc(&d->base, dev, dt, 1, bs);
    if (s == ODL_OK) s = odl_tensor_copy_from_host(&d->base, st, (size_t)(n + 2 * GUARD) * 4);
    if (s == ODL_OK) s = odl_tensor_view_rows(&d->base, GUARD, n, &v);
    if (s == ODL_OK) s = odl_tensor_reshape(&v, ndim, shape, &d->t);
    free(st);
    if (s != ODL_OK) {
        line_note_fail("allocating a %s tensor on %s: %s", odl_dtype_name(dt), odl_device_name(dev), odl_error_msg());
        odl_tensor_free(&d->base);
        memset(&d->t, 0, sizeof d->t);
        d->t.dtype = dt;
        d->t.device = dev;
        d->t.ndim = ndim;
        for (int i = 0; i < ndim; i++)
            d->t.shape[i] = shape[i];
    }
    return &d->t;
}
static odl_tensor *dnew_f(odl_device dev, int ndim, const int64_t *shape, const float *host) {
    return dnew(dev, ODL_F32, ndim, shape, host);
}
#define SH(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* dF(dev, host, d0, d1, ...): a float tensor of that shape. */
#define dF(dev, host, ...) dnew_f((dev), NDIM(__VA_ARGS__), SH(__VA_ARGS__), (host))
#define dI(dev, host, ...) dnew((dev), ODL_I32, NDIM(__VA_ARGS__), SH(__VA_ARGS__), (host))

static dten *dof(odl_tensor *t) { return (dten *)((char *)t - offsetof(dten, t)); }

/* Download the tensor's contents into host (n words), checking the guard words. Returns 1 on success. */
static int dget(const char *what, odl_tensor *t, void *host) {
    dten *d = dof(t);
    if (!d->base.data) {
        memset(host, 0xFF, (size_t)d->n * 4);
        return 0;
    }
    uint32_t *st = malloc((size_t)(d->n + 2 * GUARD) * 4);
    if (!st) exit(1);
    odl_status s = odl_tensor_copy_to_host(&d->base, st, (size_t)(d->n + 2 * GUARD) * 4);
    if (s != ODL_OK) {
        line_note_fail("reading %s back: %s: %s", what, odl_status_str(s), odl_error_msg());
        memset(host, 0xFF, (size_t)d->n * 4);
        free(st);
        return 0;
    }
    int64_t lo = 0, hi = 0;
    for (int64_t i = 0; i < GUARD; i++) {
        lo += st[i] != GUARD_BITS;
        hi += st[GUARD + d->n + i] != GUARD_BITS;
    }
    if (lo || hi)
        line_note_fail("%s: out-of-bounds write: %" PRId64 " guard words before and %" PRId64 " after changed", what,
                       lo, hi);
    memcpy(host, st + GUARD, (size_t)d->n * 4);
    free(st);
    return !(lo || hi);
}

/* An input must be unchanged by the call. */
static void dsame(const char *what, odl_tensor *t, const void *host) {
    dten *d = dof(t);
    if (!d->base.data || !host) return;
    void *now = malloc((size_t)d->n * 4 + 4);
    if (!now) exit(1);
    if (dget(what, t, now) && memcmp(now, host, (size_t)d->n * 4) != 0)
        line_note_fail("input %s was modified by the call", what);
    free(now);
}

static void dfree_all(void) {
    for (int i = g_ndt - 1; i >= 0; i--)
        odl_tensor_free(&g_dt[i].base);
    g_ndt = 0;
}

/* ================================================================ finite differences */

typedef void (*fd_fn)(void *ctx, double *out);

/* Central differences of L = sum_i w_i out_i with respect to x[j] for a sample of j (always the first
 * and the last), compared with the analytic gradient g. Returns the worst err (table at the top) and
 * the number of checked and skipped (kink) points. */
typedef struct fdres {
    double err;
    int checked, skipped;
    int64_t worst;
} fdres;

/* One-sided sums S+ = sum w (out(x_j + h) - out(x)), S- = sum w (out(x) - out(x_j - h)) and the
 * rounding floor of their difference quotient. */
typedef struct fdpt {
    double sp, sm, hp, hm, sa;
} fdpt;
static fdpt fd_point(fd_fn f, void *ctx, int64_t nout, const double *w, double *x, int64_t j, double h,
                     const double *o0, double *op, double *om) {
    fdpt r = {0, 0, 0, 0, 0};
    double x0 = x[j];
    x[j] = x0 + h;
    r.hp = x[j] - x0;
    f(ctx, op);
    x[j] = x0 - h;
    r.hm = x0 - x[j];
    f(ctx, om);
    x[j] = x0;
    for (int64_t i = 0; i < nout; i++) {
        r.sp += w[i] * (op[i] - o0[i]);
        r.sm += w[i] * (o0[i] - om[i]);
        /* outputs that changed; for a few outputs (a scalar loss) all: a change below their rounding
         * leaves them equal */
        if (op[i] != om[i] || nout <= 16) r.sa += fabs(w[i]) * (fabs(op[i]) + fabs(om[i]));
    }
    return r;
}

/* inner: the magnitude of the forward's intermediates per unit of weight where they exceed its outputs' (0:
 * the outputs bound them), added to the rounding floor. */
static fdres fd_grad(fd_fn f, void *ctx, int64_t nout, const double *w, double *x, int64_t nx, const double *g,
                     int nsample, double inner) {
    fdres r = {0, 0, 0, -1};
    double *o0 = malloc((size_t)nout * 8), *op = malloc((size_t)nout * 8), *om = malloc((size_t)nout * 8);
    if (!o0 || !op || !om) exit(1);
    f(ctx, o0);
    double gs = rms(g, nx), wsum = 0;
    for (int64_t i = 0; inner > 0 && i < nout; i++) wsum += fabs(w[i]);
    for (int s = 0; s < nsample && s < nx + 2; s++) {
        int64_t j = s == 0 ? 0 : s == 1 ? nx - 1 : (int64_t)(runif() * (double)nx);
        if (j < 0 || j >= nx) continue;
        double h = 1e-6 * fmax(1.0, fabs(x[j]));
        fdpt p = fd_point(f, ctx, nout, w, x, j, h, o0, op, om);
        double jump = fabs(p.sp / p.hp - p.sm / p.hm);
        /* what rounding of the outputs alone moves a one-sided slope by: a gradient below it (batchnorm
         * over M=2, whose dx is of order eps / var^1.5) is no kink however its slopes differ */
        double noise = 16 * 2.220446049250313e-16 * p.sa / fmin(p.hp, p.hm);
        if (jump > 1e-3 * (fabs(p.sp / p.hp) + fabs(p.sm / p.hm)) + 1e-3 * gs + noise) {
            /* a kink keeps its jump in slope as h shrinks; curvature makes it shrink with h */
            fdpt q = fd_point(f, ctx, nout, w, x, j, h / 4, o0, op, om);
            if (fabs(q.sp / q.hp - q.sm / q.hm) > 0.5 * jump) {
                r.skipped++;
                continue;
            }
        }
        double fd = (p.sp + p.sm) / (p.hp + p.hm);
        /* rounding of the outputs, divided by 2h: the floor of what the differences can resolve */
        double floor_abs = 16 * 2.220446049250313e-16 * (p.sa + 2 * inner * wsum) / (p.hp + p.hm);
        double d = fabs(fd - g[j]) - floor_abs;
        double e = (d > 0 ? d : 0) / (fabs(g[j]) + 1e-3 * gs + 1e-300);
        r.checked++;
        if (e > r.err) {
            r.err = e;
            r.worst = j;
        }
        if (!(e <= TOL_FD) && r.worst == j)
            fprintf(stderr, "  fd: element %" PRId64 ": finite difference %.10g, analytic %.10g\n", j, fd, g[j]);
    }
    free(o0);
    free(op);
    free(om);
    return r;
}

static void fd_add_inner(const char *what, fd_fn f, void *ctx, int64_t nout, const double *w, double *x, int64_t nx,
                         const double *g, int nsample, double inner) {
    fdres r = fd_grad(f, ctx, nout, w, x, nx, g, nsample, inner);
    char name[48];
    snprintf(name, sizeof name, "fd.%s", what);
    line_add(name, r.err, TOL_FD);
    if (r.checked == 0 || r.skipped > r.checked)
        line_note_fail("%s: %d points checked, %d skipped as kinks", name, r.checked, r.skipped);
}

static void fd_add(const char *what, fd_fn f, void *ctx, int64_t nout, const double *w, double *x, int64_t nx,
                   const double *g, int nsample) {
    fd_add_inner(what, f, ctx, nout, w, x, nx, g, nsample, 0);
}

/* How many points to sample for a reference forward of `cost` multiply-adds (0: no FD for this shape). */
static int fd_samples(double cost) { return cost <= 2e5 ? 16 : cost <= 4e6 ? 6 : 0; }

/* ================================================================ GEMM */

/* The fixed cases and N_RAND_CASES random ones drawn from the seed (so each run covers new shapes). */
#define N_RAND_CASES 4
static const float RAND_ALPHA[] = {1.f, -.5f, 2.f, 0.f}, RAND_BETA[] = {0.f, 0.f, 1.f, .5f};
static int gemm_cases(gemm_case *out) {
    int n = N_GEMM_CASES;
    memcpy(out, GEMM_CASES, sizeof GEMM_CASES);
    rng_case("gemm_shapes", 0);
    for (int r = 0; r < N_RAND_CASES; r++) {
        gemm_case c;
        memset(&c, 0, sizeof c);
        c.M = 1 + rint_n(300);
        c.N = 1 + rint_n(300);
        c.K = 1 + rint_n(rint_n(2) ? 300 : 5000);
        while ((double)c.M * c.N * c.K > 1e7 && c.K > 1)
            c.K /= 2;
        c.ta = rint_n(2);
        c.tb = rint_n(2);
        c.alpha = RAND_ALPHA[rint_n(4)];
        c.beta = RAND_BETA[rint_n(4)];
        c.direct = rint_n(2);
        c.pad = c.direct ? rint_n(4) : 0;
        c.bias = rint_n(c.direct ? 3 : 2);
        c.res = rint_n(2);
        c.act = (odl_act)rint_n(4);
        out[n++] = c;
    }
    return n;
}

static void run_gemm(void) {
    gemm_case cases[N_GEMM_CASES + N_RAND_CASES];
    int ncases = gemm_cases(cases);
    for (int ci = 0; ci < ncases; ci++) {
        const gemm_case *c = &cases[ci];
        rng_case("gemm", ci);
        int64_t M = c->M, N = c->N, K = c->K;
        const gemm_dims d = gemm_case_dims(c);
        const int64_t ra = d.ra, ca = d.ca, rb = d.rb, cb = d.cb, lda = d.lda, ldb = d.ldb, ldc = d.ldc;
        float *A = fmat(ra, ca, lda, -1, 1), *B = fmat(rb, cb, ldb, -1, 1);
        float *C0 = falloc(M * ldc);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < ldc; j++) {
                float v = c->beta != 0 ? (float)runi(-1, 1) : NAN;
                if (j >= N) memcpy(&v, &(uint32_t){GUARD_BITS}, 4); /* gap columns must stay untouched */
                C0[i * ldc + j] = v;
            }
        int64_t nbias = c->bias == 2 ? M : N;
        float *bias = c->bias ? fgen(nbias, -1, 1) : NULL;
        float *res = c->res ? fmat(M, N, ldc, -1, 1) : NULL;
        double *rC = f2d(C0, M * ldc), *mag = dalloc(M * ldc);
        ref_gemm_args ra_ = {.trans_a = c->ta,
                             .trans_b = c->tb,
                             .M = M,
                             .N = N,
                             .K = K,
                             .alpha = c->alpha,
                             .A = f2d(A, ra * lda),
                             .lda = lda,
                             .B = f2d(B, rb * ldb),
                             .ldb = ldb,
                             .beta = c->beta,
                             .C = rC,
                             .ldc = ldc,
                             .bias = bias ? f2d(bias, nbias) : NULL,
                             .bias_per_row = c->bias == 2,
                             .residual = res ? f2d(res, M * ldc) : NULL,
                             .act = c->act,
                             .mag = mag};
        ref_gemm(&ra_);
        double *rv = dalloc(M * N), *mv = dalloc(M * N);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                rv[i * N + j] = rC[i * ldc + j];
                mv[i * N + j] = mag[i * ldc + j];
            }
        char desc[160];
        snprintf(desc, sizeof desc, "M%d N%d K%d%s%s a%g b%g%s%s %s%s", c->M, c->N, c->K, c->ta ? " tA" : "",
                 c->tb ? " tB" : "", c->alpha, c->beta,
                 c->bias == 1   ? " +bias"
                 : c->bias == 2 ? " +rowbias"
                                : "",
                 c->res ? " +res" : "", act_name(c->act), c->direct ? (c->pad ? " [table,ld+]" : " [table]") : "");
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "gemm", desc);
            odl_tensor *tA = dF(dev, A, ra, lda), *tB = dF(dev, B, rb, ldb), *tC = dF(dev, C0, M, ldc);
            odl_tensor *tb = bias ? dF(dev, bias, nbias) : NULL, *tr = res ? dF(dev, res, M, ldc) : NULL;
            odl_status st;
            if (c->direct) {
                odl_gemm_args g = {.trans_a = c->ta,
                                   .trans_b = c->tb,
                                   .M = M,
                                   .N = N,
                                   .K = K,
                                   .alpha = c->alpha,
                                   .A = tA->data,
                                   .lda = lda,
                                   .B = tB->data,
                                   .ldb = ldb,
                                   .beta = c->beta,
                                   .C = tC->data,
                                   .ldc = ldc};
                g.ep.bias = tb ? tb->data : NULL;
                g.ep.bias_per_row = c->bias == 2;
                g.ep.residual = tr ? tr->data : NULL;
                g.ep.act = c->act;
                st = g_bk[b].be->gemm(&g);
            } else {
                st = odl_gemm(c->ta, c->tb, c->alpha, tA, tB, c->beta, tC, tb, tr, c->act);
            }
            if (call_ok(st, c->direct ? "backend gemm" : "odl_gemm")) {
                float *got = falloc(M * ldc), *gv = falloc(M * N);
                dget("C", tC, got);
                int64_t gap_bad = 0;
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < ldc; j++) {
                        if (j < N)
                            gv[i * N + j] = got[i * ldc + j];
                        else
                            gap_bad += memcmp(&got[i * ldc + j], &C0[i * ldc + j], 4) != 0;
                    }
                check_f32("C", gv, rv, mv, M * N, 1.0, 0, tol_dot((double)K));
                check_l2("C.l2", gv, rv, mv, (double)K, M * N, tol_l2((double)K));
                if (gap_bad) line_note_fail("%" PRId64 " elements of C beyond N (the ldc gap) were written", gap_bad);
                dsame("A", tA, A);
                dsame("B", tB, B);
                if (tb) dsame("bias", tb, bias);
                if (tr) dsame("residual", tr, res);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

/* ================================================================ linear */

typedef struct lin_case {
    int B, in, out, bias;
    odl_act act;
    int no_dx, no_db;
} lin_case;

static const lin_case LIN_CASES[] = {
    {1, 1, 1, 1, ODL_ACT_NONE, 0, 0},    {4, 9216, 128, 1, ODL_ACT_RELU, 0, 0}, /* MNIST fc1 */
    {4, 128, 10, 1, ODL_ACT_NONE, 0, 1},                                        /* MNIST fc2 */
    {3, 17, 65, 0, ODL_ACT_SILU, 1, 0},  {129, 127, 3, 1, ODL_ACT_SIGMOID, 0, 0}, {2, 4099, 3, 1, ODL_ACT_NONE, 0, 0},
    {64, 1, 17, 1, ODL_ACT_RELU, 0, 0},  {65, 33, 129, 1, ODL_ACT_NONE, 0, 0},    {256, 129, 65, 1, ODL_ACT_SILU, 0, 0},
};
#define N_LIN_FIXED ((int)(sizeof LIN_CASES / sizeof LIN_CASES[0]))
#define N_LIN (N_LIN_FIXED + 2)
static lin_case g_lin[N_LIN];
static void lin_cases(void) {
    memcpy(g_lin, LIN_CASES, sizeof LIN_CASES);
    rng_case("linear_shapes", 0);
    for (int r = N_LIN_FIXED; r < N_LIN; r++) {
        lin_case c = {1 + rint_n(200), 1 + rint_n(600), 1 + rint_n(200), rint_n(2), (odl_act)rint_n(4), 0, 0};
        c.no_dx = rint_n(4) == 0;
        c.no_db = rint_n(4) == 0;
        g_lin[r] = c;
    }
}

static void lin_desc(char *d, size_t cap, const lin_case *c, int bwd) {
    if (bwd)
        snprintf(d, cap, "B%d in%d out%d%s%s", c->B, c->in, c->out, c->no_dx ? " no-dx" : "", c->no_db ? " no-db" : "");
    else
        snprintf(d, cap, "B%d in%d out%d%s %s", c->B, c->in, c->out, c->bias ? " +bias" : "", act_name(c->act));
}

static void run_linear_fwd(void) {
    lin_cases();
    for (int ci = 0; ci < N_LIN; ci++) {
        const lin_case *c = &g_lin[ci];
        rng_case("linear_fwd", ci);
        int64_t B = c->B, I = c->in, O = c->out;
        float *x = fgen(B * I, -1, 1), *w = fgen(O * I, -1, 1), *bb = c->bias ? fgen(O, -1, 1) : NULL;
        double *ry = dalloc(B * O), *mag = dalloc(B * O);
        ref_gemm_args a = {.trans_a = 0,
                           .trans_b = 1,
                           .M = B,
                           .N = O,
                           .K = I,
                           .alpha = 1,
                           .A = f2d(x, B * I),
                           .lda = I,
                           .B = f2d(w, O * I),
                           .ldb = I,
                           .beta = 0,
                           .C = ry,
                           .ldc = O,
                           .bias = bb ? f2d(bb, O) : NULL,
                           .act = c->act,
                           .mag = mag};
        ref_gemm(&a);
        char desc[160];
        lin_desc(desc, sizeof desc, c, 0);
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "linear_fwd", desc);
            odl_tensor *tx = dF(dev, x, B, I), *tw = dF(dev, w, O, I), *tb = bb ? dF(dev, bb, O) : NULL;
            odl_tensor *ty = dF(dev, NULL, B, O);
            if (call_ok(odl_linear_fwd(tx, tw, tb, c->act, ty), "odl_linear_fwd")) {
                float *got = falloc(B * O);
                dget("y", ty, got);
                check_f32("y", got, ry, mag, B * O, 1.0, 0, tol_dot((double)I));
                check_l2("y.l2", got, ry, mag, (double)I, B * O, tol_l2((double)I));
                dsame("x", tx, x);
                dsame("w", tw, w);
                if (tb) dsame("b", tb, bb);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

typedef struct fd_lin_ctx {
    int64_t B, I, O;
    double *x, *w, *b;
} fd_lin_ctx;
static void fd_lin_f(void *c_, double *out) {
    fd_lin_ctx *c = c_;
    ref_gemm_args a = {.trans_a = 0,
                       .trans_b = 1,
                       .M = c->B,
                       .N = c->O,
                       .K = c->I,
                       .alpha = 1,
                       .A = c->x,
                       .lda = c->I,
                       .B = c->w,
                       .ldb = c->I,
                       .beta = 0,
                       .C = out,
                       .ldc = c->O,
                       .bias = c->b,
                       .act = ODL_ACT_NONE};
    ref_gemm(&a);
}

static void run_linear_bwd(void) {
    lin_cases();
    for (int ci = 0; ci < N_LIN; ci++) {
        const lin_case *c = &g_lin[ci];
        rng_case("linear_bwd", ci);
        int64_t B = c->B, I = c->in, O = c->out;
        float *x = fgen(B * I, -1, 1), *w = fgen(O * I, -1, 1), *dy = fgen(B * O, -1, 1);
        double *rx = f2d(x, B * I), *rw = f2d(w, O * I), *rdy = f2d(dy, B * O);
        double *rdx = dalloc(B * I), *mdx = dalloc(B * I), *rdw = dalloc(O * I), *mdw = dalloc(O * I);
        double *rdb = dalloc(O), *mdb = dalloc(O);
        ref_gemm_args a1 = {
            .M = B, .N = I, .K = O, .alpha = 1, .A = rdy, .lda = O, .B = rw, .ldb = I, .C = rdx, .ldc = I, .mag = mdx};
        ref_gemm(&a1);
        ref_gemm_args a2 = {.trans_a = 1,
                            .M = O,
                            .N = I,
                            .K = B,
                            .alpha = 1,
                            .A = rdy,
                            .lda = O,
                            .B = rx,
                            .ldb = I,
                            .C = rdw,
                            .ldc = I,
                            .mag = mdw};
        ref_gemm(&a2);
        ref_sum_rows(B, O, rdy, rdb, mdb);
        char desc[160];
        lin_desc(desc, sizeof desc, c, 1);
        int ns = fd_samples((double)B * I * O);
        if (ns) {
            line_begin("ref", "linear_bwd", desc);
            double *bias = f2d(fgen(O, -1, 1), O);
            fd_lin_ctx fc = {B, I, O, rx, rw, bias};
            fd_add("dx", fd_lin_f, &fc, B * O, rdy, rx, B * I, rdx, ns);
            fd_add("dw", fd_lin_f, &fc, B * O, rdy, rw, O * I, rdw, ns);
            fd_add("db", fd_lin_f, &fc, B * O, rdy, bias, O, rdb, ns);
            line_end();
        }
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "linear_bwd", desc);
            odl_tensor *tx = dF(dev, x, B, I), *tw = dF(dev, w, O, I), *tdy = dF(dev, dy, B, O);
            odl_tensor *tdx = c->no_dx ? NULL : dF(dev, NULL, B, I), *tdw = dF(dev, NULL, O, I);
            odl_tensor *tdb = c->no_db ? NULL : dF(dev, NULL, O);
            if (call_ok(odl_linear_bwd(tx, tw, tdy, tdx, tdw, tdb), "odl_linear_bwd")) {
                float *got = falloc(B * I > O * I ? B * I : O * I);
                if (tdx) {
                    dget("dx", tdx, got);
                    check_f32("dx", got, rdx, mdx, B * I, 1.0, 0, tol_dot((double)O));
                    check_l2("dx.l2", got, rdx, mdx, (double)O, B * I, tol_l2((double)O));
                }
                dget("dw", tdw, got);
                check_f32("dw", got, rdw, mdw, O * I, 1.0, 0, tol_dot((double)B));
                check_l2("dw.l2", got, rdw, mdw, (double)B, O * I, tol_l2((double)B));
                if (tdb) {
                    dget("db", tdb, got);
                    check_f32("db", got, rdb, mdb, O, 1.0, 0, tol_dot((double)B));
                }
                dsame("x", tx, x);
                dsame("w", tw, w);
                dsame("dy", tdy, dy);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

/* ================================================================ convolution */

typedef struct conv_case {
    int N, C, H, W, K, R, S, sh, sw, ph, pw;
    int bias, res;
    odl_act act;
    int direct; /* backend table (allows stride_h != stride_w, pad_h != pad_w) */
    int no_dx, no_db;
    const char *tag;
} conv_case;

static const conv_case CONV_CASES[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, ODL_ACT_NONE, 0, 0, 0, "1x1x1"},
    {2, 3, 13, 29, 5, 3, 3, 1, 1, 1, 1, 1, 1, ODL_ACT_SILU, 0, 0, 0, ""},
    {1, 4, 17, 17, 3, 3, 3, 2, 2, 1, 1, 0, 0, ODL_ACT_RELU, 0, 0, 1, ""},
    {2, 3, 13, 29, 4, 5, 5, 2, 2, 2, 2, 1, 0, ODL_ACT_SIGMOID, 0, 0, 0, ""},
    {1, 2, 7, 9, 3, 1, 1, 1, 1, 0, 0, 1, 1, ODL_ACT_NONE, 0, 1, 0, "1x1 conv"},
    {1, 3, 8, 8, 2, 3, 3, 2, 2, 0, 0, 1, 0, ODL_ACT_NONE, 0, 0, 0, ""},
    {2, 3, 64, 48, 16, 6, 6, 2, 2, 2, 2, 1, 0, ODL_ACT_SILU, 0, 1, 0, "yolov5 stem"},
    {2, 1, 28, 28, 32, 3, 3, 1, 1, 0, 0, 1, 0, ODL_ACT_RELU, 0, 1, 0, "mnist conv1"},
    {2, 32, 26, 26, 64, 3, 3, 1, 1, 0, 0, 1, 0, ODL_ACT_RELU, 0, 0, 0, "mnist conv2"},
    {1, 32, 20, 20, 32, 3, 3, 1, 1, 1, 1, 1, 1, ODL_ACT_SILU, 0, 0, 0, "yolov5 bottleneck"},
    {1, 64, 20, 20, 32, 1, 1, 1, 1, 0, 0, 1, 0, ODL_ACT_SILU, 0, 0, 0, "yolov5 1x1"},
    {1, 16, 32, 24, 32, 3, 3, 2, 2, 1, 1, 1, 0, ODL_ACT_SILU, 0, 0, 0, "yolov5 down"},
    {1, 2, 65, 3, 3, 3, 3, 1, 1, 1, 1, 1, 0, ODL_ACT_NONE, 0, 0, 0, ""},
    {1, 1, 127, 129, 2, 3, 3, 2, 2, 1, 1, 1, 0, ODL_ACT_RELU, 0, 0, 0, ""},
    {1, 3, 5, 5, 2, 5, 5, 1, 1, 2, 2, 0, 1, ODL_ACT_NONE, 0, 0, 0, "kernel=input"},
    {1, 17, 5, 3, 65, 3, 3, 1, 1, 1, 1, 1, 0, ODL_ACT_SIGMOID, 0, 0, 0, ""},
    {3, 2, 4, 4, 2, 3, 3, 1, 1, 2, 2, 1, 0, ODL_ACT_NONE, 0, 0, 0, ""},
    {2, 3, 11, 13, 4, 3, 5, 1, 2, 2, 0, 1, 1, ODL_ACT_RELU, 1, 0, 0, ""},
    {1, 2, 9, 6, 3, 2, 4, 2, 1, 0, 1, 0, 0, ODL_ACT_SILU, 1, 0, 0, "even kernel"},
    {1, 129, 3, 3, 1, 3, 3, 1, 1, 1, 1, 1, 0, ODL_ACT_NONE, 1, 0, 0, "C129 K1"},
    {1, 64, 40, 40, 128, 3, 3, 2, 2, 1, 1, 1, 0, ODL_ACT_SILU, 0, 0, 0, "yolov5 down 64->128"},
    /* for CUDA's GatherTableTile (ODL_CONV_GATHER_TABLE, on by default; test_ops_gpu_gather_divide runs them without it; the tiles and splits are
     * those of a GPU of 132 multiprocessors, an H100 or H200): a data gradient of K*R*S = 1152 rows, the most
     * the table holds, in one range (133 tiles of 16 x 128: no split-K), its forward on 128 x 128 tiles; one of
     * 1170 rows, past the table (the per-thread divisions); the data gradient on 32 x 256 tiles (MNIST conv2's
     * at batch 512) and the forward on 64 x 256 tiles, 398 tiles each, the last one partial */
    {1, 1, 130, 130, 128, 3, 3, 1, 1, 1, 1, 1, 0, ODL_ACT_RELU, 0, 0, 0, "K*R*S 1152 unsplit"},
    {1, 3, 6, 7, 130, 3, 3, 1, 1, 1, 1, 0, 0, ODL_ACT_NONE, 0, 0, 0, "K*R*S 1170"},
    {1, 17, 319, 319, 3, 3, 3, 1, 1, 1, 1, 1, 0, ODL_ACT_NONE, 0, 0, 0, "C17 (32x256 tiles)"},
    {1, 1, 319, 319, 33, 3, 3, 1, 1, 1, 1, 1, 1, ODL_ACT_SILU, 0, 0, 0, "K33 (64x256 tiles)"},
};
#define N_CONV_FIXED ((int)(sizeof CONV_CASES / sizeof CONV_CASES[0]))
#define N_CONV (N_CONV_FIXED + N_RAND_CASES)
static conv_case g_conv[N_CONV];
/* The same random geometries for forward and backward. */
static void conv_cases(void) {
    memcpy(g_conv, CONV_CASES, sizeof CONV_CASES);
    rng_case("conv2d_shapes", 0);
    for (int r = N_CONV_FIXED; r < N_CONV; r++) {
        conv_case c;
        memset(&c, 0, sizeof c);
        c.direct = rint_n(3) == 0;
        c.N = 1 + rint_n(3);
        c.C = 1 + rint_n(24);
        c.K = 1 + rint_n(24);
        c.R = 1 + rint_n(7);
        c.S = c.direct ? 1 + rint_n(7) : c.R;
        c.sh = 1 + rint_n(3);
        c.sw = c.direct ? 1 + rint_n(3) : c.sh;
        c.ph = rint_n(c.R < 4 ? c.R : 4);
        c.pw = c.direct ? rint_n(c.S < 4 ? c.S : 4) : c.ph;
        c.H = (c.R - 2 * c.ph > 1 ? c.R - 2 * c.ph : 1) + rint_n(40);
        c.W = (c.S - 2 * c.pw > 1 ? c.S - 2 * c.pw : 1) + rint_n(40);
        c.bias = rint_n(2);
        c.res = rint_n(2);
        c.act = (odl_act)rint_n(4);
        c.no_dx = rint_n(5) == 0;
        c.no_db = rint_n(3) == 0;
        c.tag = "random";
        for (;;) {
            double P = odl_conv_out_size(c.H, c.R, c.sh, c.ph), Q = odl_conv_out_size(c.W, c.S, c.sw, c.pw);
            if ((double)c.N * c.K * P * Q * c.C * c.R * c.S <= 8e6 || (c.C == 1 && c.K == 1)) break;
            if (c.C >= c.K)
                c.C = (c.C + 1) / 2;
            else
                c.K = (c.K + 1) / 2;
        }
        g_conv[r] = c;
    }
}

static odl_conv2d_shape conv_shape(const conv_case *c) {
    odl_conv2d_shape s = {c->N, c->C, c->H, c->W, c->K, c->R, c->S, c->sh, c->sw, c->ph, c->pw, 0, 0};
    s.P = odl_conv_out_size(c->H, c->R, c->sh, c->ph);
    s.Q = odl_conv_out_size(c->W, c->S, c->sw, c->pw);
    return s;
}

static void conv_desc(char *d, size_t cap, const conv_case *c, int bwd) {
    char geo[64];
    if (c->sh == c->sw && c->ph == c->pw)
        snprintf(geo, sizeof geo, "s%d p%d", c->sh, c->ph);
    else
        snprintf(geo, sizeof geo, "s%dx%d p%dx%d", c->sh, c->sw, c->ph, c->pw);
    if (bwd)
        snprintf(d, cap, "N%d C%d %dx%d K%d %dx%d %s%s%s%s%s%s", c->N, c->C, c->H, c->W, c->K, c->R, c->S, geo,
                 c->no_dx ? " no-dx" : "", c->no_db ? " no-db" : "", c->direct ? " [table]" : "", *c->tag ? " " : "",
                 c->tag);
    else
        snprintf(d, cap, "N%d C%d %dx%d K%d %dx%d %s%s%s %s%s%s%s", c->N, c->C, c->H, c->W, c->K, c->R, c->S, geo,
                 c->bias ? " +b" : "", c->res ? " +res" : "", act_name(c->act), c->direct ? " [table]" : "",
                 *c->tag ? " " : "", c->tag);
}

static void run_conv_fwd(void) {
    conv_cases();
    for (int ci = 0; ci < N_CONV; ci++) {
        const conv_case *c = &g_conv[ci];
        rng_case("conv2d_fwd", ci);
        odl_conv2d_shape s = conv_shape(c);
        int64_t nx = (int64_t)s.N * s.C * s.H * s.W, nw = (int64_t)s.K * s.C * s.R * s.S;
        int64_t ny = (int64_t)s.N * s.K * s.P * s.Q;
        float *x = fgen(nx, -1, 1), *w = fgen(nw, -1, 1), *bb = c->bias ? fgen(s.K, -1, 1) : NULL;
        float *res = c->res ? fgen(ny, -1, 1) : NULL;
        double *ry = dalloc(ny), *mag = dalloc(ny);
        ref_conv2d_fwd(&s, f2d(x, nx), f2d(w, nw), bb ? f2d(bb, s.K) : NULL, res ? f2d(res, ny) : NULL, c->act, ry,
                       mag);
        double Keff = (double)s.C * s.R * s.S;
        char desc[160];
        conv_desc(desc, sizeof desc, c, 0);
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "conv2d_fwd", desc);
            odl_tensor *tx = dF(dev, x, s.N, s.C, s.H, s.W), *tw = dF(dev, w, s.K, s.C, s.R, s.S);
            odl_tensor *tb = bb ? dF(dev, bb, s.K) : NULL, *tr = res ? dF(dev, res, s.N, s.K, s.P, s.Q) : NULL;
            odl_tensor *ty = dF(dev, NULL, s.N, s.K, s.P, s.Q);
            odl_status st;
            if (c->direct) {
                odl_epilogue ep = {tb ? tb->data : NULL, 0, tr ? tr->data : NULL, c->act};
                st = g_bk[b].be->conv2d_fwd(&s, tx->data, tw->data, &ep, ty->data);
            } else {
                st = odl_conv2d_fwd(tx, tw, tb, tr, c->act, c->sh, c->ph, ty);
            }
            if (call_ok(st, c->direct ? "backend conv2d_fwd" : "odl_conv2d_fwd")) {
                float *got = falloc(ny);
                dget("y", ty, got);
                check_f32("y", got, ry, mag, ny, 1.0, 0, tol_dot(Keff));
                check_l2("y.l2", got, ry, mag, Keff, ny, tol_l2(Keff));
                dsame("x", tx, x);
                dsame("w", tw, w);
                if (tb) dsame("b", tb, bb);
                if (tr) dsame("residual", tr, res);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

typedef struct fd_conv_ctx {
    const odl_conv2d_shape *s;
    double *x, *w, *b;
} fd_conv_ctx;
static void fd_conv_f(void *c_, double *out) {
    fd_conv_ctx *c = c_;
    ref_conv2d_fwd(c->s, c->x, c->w, c->b, NULL, ODL_ACT_NONE, out, NULL);
}


/* The ReLU's backward fused into the data gradient (odl_conv2d_relu_bwd, or the entry's relu_x for direct
 * cases): with x as the ReLU's output, the bits of tdx (just computed) with 0 wherever x <= 0; dw and db
 * those of the plain call. */
static void conv_relu_bwd_check(int b, const conv_case *c, const odl_conv2d_shape *s, const float *x,
                                odl_tensor *tx, odl_tensor *tw, odl_tensor *tdy, odl_tensor *tdx, odl_tensor *tdw,
                                odl_tensor *tdb) {
    const odl_device dev = g_bk[b].dev;
    const int64_t nx = (int64_t)s->N * s->C * s->H * s->W, nw = (int64_t)s->K * s->C * s->R * s->S;
    odl_tensor *tdx2 = dF(dev, NULL, s->N, s->C, s->H, s->W), *tdw2 = dF(dev, NULL, s->K, s->C, s->R, s->S);
    odl_tensor *tdb2 = tdb ? dF(dev, NULL, s->K) : NULL;
    const int ok = c->direct ? call_ok(g_bk[b].be->conv2d_bwd_data(s, tdy->data, tw->data, tx->data, tdx2->data),
                                       "backend conv2d_bwd_data relu_x")
                             : call_ok(odl_conv2d_relu_bwd(tx, tw, tdy, c->sh, c->ph, tdx2, tdw2, tdb2),
                                       "odl_conv2d_relu_bwd");
    if (!ok) return;
    float *want = falloc(nx), *got = falloc(nx);
    if (!dget("dx", tdx, want) || !dget("dx", tdx2, got)) return;
    int64_t nbad = 0, first = -1;
    for (int64_t i = 0; i < nx; i++) {
        if (x[i] <= 0.0f) want[i] = 0.0f;
        if (memcmp(&want[i], &got[i], 4) != 0 && nbad++ == 0) first = i;
    }
    if (nbad)
        line_note_fail("relu dx: %" PRId64 " of %" PRId64 " elements differ from dx gated by x > 0 (first %" PRId64
                       ": %.9g, want %.9g)", nbad, nx, first, got[first], want[first]);
    if (c->direct) return;
    float *w1 = falloc(nw), *w2 = falloc(nw);
    if (dget("dw", tdw, w1) && dget("dw", tdw2, w2) && memcmp(w1, w2, (size_t)nw * 4) != 0)
        line_note_fail("relu dw: not the bits of odl_conv2d_bwd's");
    if (tdb && dget("db", tdb, w1) && dget("db", tdb2, w2) && memcmp(w1, w2, (size_t)s->K * 4) != 0)
        line_note_fail("relu db: not the bits of odl_conv2d_bwd's");
}

/* odl_conv2d_relu_out_bwd_weight (a first layer's ReLU backward inside its weight gradient): with y a ReLU
 * output (exact zeros, positives, one NaN, which act_bwd's ReLU passes dy through), dw and db bit for bit
 * those of odl_act_bwd(RELU) on dy and then odl_conv2d_bwd without dx; dy may be overwritten only with that
 * masked gradient. */
static void conv_relu_out_check(int b, const conv_case *c, const odl_conv2d_shape *s, const float *dy,
                                odl_tensor *tx, odl_tensor *tw, odl_tensor *tdb_like) {
    const odl_device dev = g_bk[b].dev;
    const int64_t ny = (int64_t)s->N * s->K * s->P * s->Q, nw = (int64_t)s->K * s->C * s->R * s->S;
    float *y = fgen(ny, -1, 1);
    for (int64_t i = 0; i < ny; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
    if (ny > 2) y[ny / 2] = NAN;
    odl_tensor *ty = dF(dev, y, s->N, s->K, s->P, s->Q);
    odl_tensor *dya = dF(dev, dy, s->N, s->K, s->P, s->Q), *dyb = dF(dev, dy, s->N, s->K, s->P, s->Q);
    odl_tensor *dwa = dF(dev, NULL, s->K, s->C, s->R, s->S), *dwb = dF(dev, NULL, s->K, s->C, s->R, s->S);
    odl_tensor *dba = tdb_like ? dF(dev, NULL, s->K) : NULL, *dbb = tdb_like ? dF(dev, NULL, s->K) : NULL;
    if (!call_ok(odl_act_bwd(ODL_ACT_RELU, ty, ty, dya, dya), "odl_act_bwd relu") ||
        !call_ok(odl_conv2d_bwd(tx, tw, dya, c->sh, c->ph, NULL, dwa, dba), "odl_conv2d_bwd (masked dy)") ||
        !call_ok(odl_conv2d_relu_out_bwd_weight(tx, tw, ty, dyb, c->sh, c->ph, dwb, dbb),
                 "odl_conv2d_relu_out_bwd_weight"))
        return;
    float *w1 = falloc(nw > ny ? nw : ny), *w2 = falloc(nw > ny ? nw : ny);
    if (dget("dw", dwa, w1) && dget("dw", dwb, w2) && memcmp(w1, w2, (size_t)nw * 4) != 0)
        line_note_fail("relu_out dw: not the bits of act_bwd then odl_conv2d_bwd");
    if (dba && dget("db", dba, w1) && dget("db", dbb, w2) && memcmp(w1, w2, (size_t)s->K * 4) != 0)
        line_note_fail("relu_out db: not the bits of act_bwd then odl_conv2d_bwd");
    if (dget("dy", dya, w1) && dget("dy", dyb, w2))
        for (int64_t i = 0; i < ny; i++)
            if (memcmp(&w2[i], &dy[i], 4) != 0 && memcmp(&w2[i], &w1[i], 4) != 0) {
                line_note_fail("relu_out dy[%" PRId64 "]: %.9g, neither dy nor the masked dy", i, w2[i]);
                break;
            }
}

static void run_conv_bwd(void) {
    conv_cases();
    for (int ci = 0; ci < N_CONV; ci++) {
        const conv_case *c = &g_conv[ci];
        rng_case("conv2d_bwd", ci);
        odl_conv2d_shape s = conv_shape(c);
        int64_t nx = (int64_t)s.N * s.C * s.H * s.W, nw = (int64_t)s.K * s.C * s.R * s.S;
        int64_t ny = (int64_t)s.N * s.K * s.P * s.Q;
        float *x = fgen(nx, -1, 1), *w = fgen(nw, -1, 1), *dy = fgen(ny, -1, 1);
        double *rx = f2d(x, nx), *rw = f2d(w, nw), *rdy = f2d(dy, ny);
        double *rdx = dalloc(nx), *mdx = dalloc(nx), *rdw = dalloc(nw), *mdw = dalloc(nw), *rdb = dalloc(s.K),
               *mdb = dalloc(s.K);
        ref_conv2d_bwd_data(&s, rdy, rw, rdx, mdx);
        ref_conv2d_bwd_weight(&s, rx, rdy, rdw, rdb, mdw, mdb);
        double Kx = (double)s.K * s.R * s.S, Kw = (double)s.N * s.P * s.Q;
        char desc[160];
        conv_desc(desc, sizeof desc, c, 1);
        int ns = fd_samples((double)ny * s.C * s.R * s.S);
        if (ns) {
            line_begin("ref", "conv2d_bwd", desc);
            double *bias = f2d(fgen(s.K, -1, 1), s.K);
            fd_conv_ctx fc = {&s, rx, rw, bias};
            fd_add("dx", fd_conv_f, &fc, ny, rdy, rx, nx, rdx, ns);
            fd_add("dw", fd_conv_f, &fc, ny, rdy, rw, nw, rdw, ns);
            fd_add("db", fd_conv_f, &fc, ny, rdy, bias, s.K, rdb, ns);
            line_end();
        }
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "conv2d_bwd", desc);
            odl_tensor *tx = dF(dev, x, s.N, s.C, s.H, s.W), *tw = dF(dev, w, s.K, s.C, s.R, s.S);
            odl_tensor *tdy = dF(dev, dy, s.N, s.K, s.P, s.Q);
            odl_tensor *tdx = c->no_dx ? NULL : dF(dev, NULL, s.N, s.C, s.H, s.W);
            odl_tensor *tdw = dF(dev, NULL, s.K, s.C, s.R, s.S), *tdb = c->no_db ? NULL : dF(dev, NULL, s.K);
            int ok;
            if (c->direct) {
                ok = !tdx || call_ok(g_bk[b].be->conv2d_bwd_data(&s, tdy->data, tw->data, NULL, tdx->data),
                                     "backend conv2d_bwd_data");
                ok = call_ok(g_bk[b].be->conv2d_bwd_weight(&s, tx->data, tdy->data, tdw->data, tdb ? tdb->data : NULL),
                             "backend conv2d_bwd_weight") &&
                     ok;
            } else {
                ok = call_ok(odl_conv2d_bwd(tx, tw, tdy, c->sh, c->ph, tdx, tdw, tdb), "odl_conv2d_bwd");
            }
            if (ok) {
                float *got = falloc(nx > nw ? nx : nw);
                if (tdx) {
                    dget("dx", tdx, got);
                    check_f32("dx", got, rdx, mdx, nx, 1.0, 0, tol_dot(Kx));
                    check_l2("dx.l2", got, rdx, mdx, Kx, nx, tol_l2(Kx));
                }
                dget("dw", tdw, got);
                check_f32("dw", got, rdw, mdw, nw, 1.0, 0, tol_dot(Kw));
                check_l2("dw.l2", got, rdw, mdw, Kw, nw, tol_l2(Kw));
                if (tdb) {
                    dget("db", tdb, got);
                    check_f32("db", got, rdb, mdb, s.K, 1.0, 0, tol_dot(Kw));
                }
                dsame("x", tx, x);
                dsame("w", tw, w);
                dsame("dy", tdy, dy);
                if (tdx) conv_relu_bwd_check(b, c, &s, x, tx, tw, tdy, tdx, tdw, tdb);
                if (!c->direct) conv_relu_out_check(b, c, &s, dy, tx, tw, tdb);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

/* ================================================================ max-pool */

typedef struct pool_case {
    int N, C, H, W, kh, kw, sh, sw, ph, pw;
    int direct, ties, no_argmax;
    const char *tag;
} pool_case;

static const pool_case POOL_CASES[] = {
    {2, 64, 24, 24, 2, 2, 2, 2, 0, 0, 0, 0, 0, "mnist"},
    {1, 8, 20, 20, 5, 5, 1, 1, 2, 2, 0, 0, 0, "yolov5 sppf"},
    {1, 3, 13, 29, 3, 3, 2, 2, 1, 1, 0, 0, 0, ""},
    {2, 2, 17, 17, 3, 3, 3, 3, 0, 0, 0, 0, 0, ""},
    {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, "1x1"},
    {1, 2, 7, 9, 2, 2, 1, 1, 1, 1, 0, 0, 0, ""},
    {1, 4, 13, 29, 5, 5, 1, 1, 2, 2, 0, 1, 0, "ties"},
    {2, 3, 11, 8, 3, 2, 2, 1, 1, 0, 1, 0, 0, ""},
    {1, 3, 65, 127, 2, 2, 2, 2, 0, 0, 0, 0, 0, ""},
    {1, 16, 40, 40, 5, 5, 1, 1, 2, 2, 0, 0, 1, "yolov5 sppf, no argmax"},
    {1, 2, 3, 129, 3, 3, 2, 2, 1, 1, 0, 1, 0, "ties"},
};
#define N_POOL_FIXED ((int)(sizeof POOL_CASES / sizeof POOL_CASES[0]))
#define N_POOL (N_POOL_FIXED + N_RAND_CASES)
static pool_case g_pool[N_POOL];
static void pool_cases(void) {
    memcpy(g_pool, POOL_CASES, sizeof POOL_CASES);
    rng_case("maxpool2d_shapes", 0);
    for (int r = N_POOL_FIXED; r < N_POOL; r++) {
        pool_case c;
        memset(&c, 0, sizeof c);
        c.direct = rint_n(3) == 0;
        c.N = 1 + rint_n(2);
        c.C = 1 + rint_n(8);
        c.kh = 1 + rint_n(6);
        c.kw = c.direct ? 1 + rint_n(6) : c.kh;
        c.sh = 1 + rint_n(3);
        c.sw = c.direct ? 1 + rint_n(3) : c.sh;
        c.ph = rint_n(c.kh / 2 + 1);
        c.pw = c.direct ? rint_n(c.kw / 2 + 1) : c.ph;
        c.H = (c.kh - 2 * c.ph > 1 ? c.kh - 2 * c.ph : 1) + rint_n(40);
        c.W = (c.kw - 2 * c.pw > 1 ? c.kw - 2 * c.pw : 1) + rint_n(40);
        c.ties = rint_n(4) == 0;
        c.tag = c.ties ? "random ties" : "random";
        g_pool[r] = c;
    }
}

static odl_pool2d_shape pool_shape(const pool_case *c) {
    odl_pool2d_shape s = {c->N, c->C, c->H, c->W, c->kh, c->kw, c->sh, c->sw, c->ph, c->pw, 0, 0};
    s.P = odl_conv_out_size(c->H, c->kh, c->sh, c->ph);
    s.Q = odl_conv_out_size(c->W, c->kw, c->sw, c->pw);
    return s;
}
static void pool_desc(char *d, size_t cap, const pool_case *c) {
    if (c->kh == c->kw && c->sh == c->sw && c->ph == c->pw)
        snprintf(d, cap, "N%d C%d %dx%d k%d s%d p%d%s%s%s", c->N, c->C, c->H, c->W, c->kh, c->sh, c->ph,
                 c->direct ? " [table]" : "", *c->tag ? " " : "", c->tag);
    else
        snprintf(d, cap, "N%d C%d %dx%d k%dx%d s%dx%d p%dx%d%s%s%s", c->N, c->C, c->H, c->W, c->kh, c->kw, c->sh, c->sw,
                 c->ph, c->pw, c->direct ? " [table]" : "", *c->tag ? " " : "", c->tag);
}
static float *pool_input(const pool_case *c, int64_t n) {
    if (!c->ties) return fgen(n, -1, 1);
    float *x = falloc(n);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(rint_n(5) - 2) * 0.5f; /* many equal values */
    return x;
}

static void run_pool_fwd(void) {
    pool_cases();
    for (int ci = 0; ci < N_POOL; ci++) {
        const pool_case *c = &g_pool[ci];
        rng_case("maxpool2d_fwd", ci);
        odl_pool2d_shape s = pool_shape(c);
        int64_t nx = (int64_t)s.N * s.C * s.H * s.W, ny = (int64_t)s.N * s.C * s.P * s.Q;
        float *x = pool_input(c, nx);
        double *ry = dalloc(ny);
        int32_t *ra = ialloc(ny);
        ref_maxpool2d_fwd(&s, f2d(x, nx), ry, ra);
        char desc[160];
        pool_desc(desc, sizeof desc, c);
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "maxpool2d_fwd", desc);
            odl_tensor *tx = dF(dev, x, s.N, s.C, s.H, s.W), *ty = dF(dev, NULL, s.N, s.C, s.P, s.Q);
            odl_tensor *ta = c->no_argmax ? NULL : dI(dev, NULL, s.N, s.C, s.P, s.Q);
            odl_status st = c->direct
                                ? g_bk[b].be->maxpool2d_fwd(&s, tx->data, ty->data, ta ? (int32_t *)ta->data : NULL)
                                : odl_maxpool2d_fwd(tx, c->kh, c->sh, c->ph, ty, ta);
            if (call_ok(st, c->direct ? "backend maxpool2d_fwd" : "odl_maxpool2d_fwd")) {
                float *got = falloc(ny);
                dget("y", ty, got);
                check_f32("y", got, ry, NULL, ny, 1.0, 0, TOL_EXACT);
                if (ta) {
                    int32_t *ga = ialloc(ny);
                    dget("argmax", ta, ga);
                    check_i32("argmax", ga, ra, ny);
                }
                dsame("x", tx, x);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

typedef struct fd_pool_ctx {
    const odl_pool2d_shape *s;
    double *x;
} fd_pool_ctx;
static void fd_pool_f(void *c_, double *out) {
    fd_pool_ctx *c = c_;
    ref_maxpool2d_fwd(c->s, c->x, out, NULL);
}

/* odl_maxpool2d_relu_bwd on backend b: a max-pool over a ReLU's output (max(x, 0): ties of zeros in most
 * windows) whose fused backward must give the bits of odl_maxpool2d_bwd followed by odl_act_bwd's ReLU. */
static void pool_relu_bwd_case(int b, const pool_case *c, const odl_pool2d_shape *s, const float *x, const float *dy,
                               const char *desc) {
    const odl_device dev = g_bk[b].dev;
    const int64_t nx = (int64_t)s->N * s->C * s->H * s->W;
    float *xr = falloc(nx), *want = falloc(nx), *got = falloc(nx);
    for (int64_t i = 0; i < nx; i++) xr[i] = x[i] > 0.0f ? x[i] : 0.0f;
    line_begin(g_bk[b].name, "maxpool2d_relu_bwd", desc);
    odl_tensor *txr = dF(dev, xr, s->N, s->C, s->H, s->W), *ty = dF(dev, NULL, s->N, s->C, s->P, s->Q);
    odl_tensor *ta = dI(dev, NULL, s->N, s->C, s->P, s->Q), *tdy = dF(dev, dy, s->N, s->C, s->P, s->Q);
    odl_tensor *t1 = dF(dev, NULL, s->N, s->C, s->H, s->W), *t2 = dF(dev, NULL, s->N, s->C, s->H, s->W);
    if (call_ok(odl_maxpool2d_fwd(txr, c->kh, c->sh, c->ph, ty, ta), "odl_maxpool2d_fwd") &&
        call_ok(odl_maxpool2d_bwd(tdy, ta, c->kh, c->sh, c->ph, t1), "odl_maxpool2d_bwd") &&
        call_ok(odl_act_bwd(ODL_ACT_RELU, txr, txr, t1, t1), "odl_act_bwd") &&
        call_ok(odl_maxpool2d_relu_bwd(tdy, ta, ty, c->kh, c->sh, c->ph, t2), "odl_maxpool2d_relu_bwd") &&
        dget("dx", t1, want) && dget("dx", t2, got)) {
        int64_t nbad = 0, first = -1;
        for (int64_t i = 0; i < nx; i++)
            if (memcmp(&want[i], &got[i], 4) != 0 && nbad++ == 0) first = i;
        if (nbad)
            line_note_fail("dx: %" PRId64 " of %" PRId64 " elements differ from maxpool2d_bwd + relu bwd (first %" PRId64
                           ": %.9g, want %.9g)", nbad, nx, first, got[first], want[first]);
        dsame("dy", tdy, dy);
    }
    line_end();
    dfree_all();
}

static void run_pool_bwd(void) {
    pool_cases();
    for (int ci = 0; ci < N_POOL; ci++) {
        const pool_case *c = &g_pool[ci];
        if (c->no_argmax) continue;
        rng_case("maxpool2d_bwd", ci);
        odl_pool2d_shape s = pool_shape(c);
        int64_t nx = (int64_t)s.N * s.C * s.H * s.W, ny = (int64_t)s.N * s.C * s.P * s.Q;
        float *x = pool_input(c, nx), *dy = fgen(ny, -1, 1);
        double *rx = f2d(x, nx), *ry = dalloc(ny), *rdy = f2d(dy, ny), *rdx = dalloc(nx), *mdx = dalloc(nx);
        double *ady = dalloc(ny);
        int32_t *ra = ialloc(ny);
        ref_maxpool2d_fwd(&s, rx, ry, ra);
        ref_maxpool2d_bwd(&s, rdy, ra, rdx);
        for (int64_t i = 0; i < ny; i++)
            ady[i] = fabs(rdy[i]);
        ref_maxpool2d_bwd(&s, ady, ra, mdx);
        char desc[160];
        pool_desc(desc, sizeof desc, c);
        if (!c->ties) {
            line_begin("ref", "maxpool2d_bwd", desc);
            fd_pool_ctx fc = {&s, rx};
            fd_add("dx", fd_pool_f, &fc, ny, rdy, rx, nx, rdx, 24);
            line_end();
        }
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "maxpool2d_bwd", desc);
            odl_tensor *tdy = dF(dev, dy, s.N, s.C, s.P, s.Q), *ta = dI(dev, ra, s.N, s.C, s.P, s.Q);
            odl_tensor *tdx = dF(dev, NULL, s.N, s.C, s.H, s.W);
            odl_status st = c->direct ? g_bk[b].be->maxpool2d_bwd(&s, tdy->data, ta->data, NULL, tdx->data)
                                      : odl_maxpool2d_bwd(tdy, ta, c->kh, c->sh, c->ph, tdx);
            if (call_ok(st, c->direct ? "backend maxpool2d_bwd" : "odl_maxpool2d_bwd")) {
                float *got = falloc(nx);
                dget("dx", tdx, got);
                check_f32("dx", got, rdx, mdx, nx, 1.0, 0, tol_dot((double)c->kh * c->kw));
                dsame("dy", tdy, dy);
                dsame("argmax", ta, ra);
            }
            line_end();
            dfree_all();
            if (!c->direct) pool_relu_bwd_case(b, c, &s, x, dy, desc);
        }
        arena_free();
    }
}

/* ================================================================ activations */

static const int64_t ACT_N[] = {1, 17, 129, 4099, 100003};
#define N_ACT_N ((int)(sizeof ACT_N / sizeof ACT_N[0]))
static const odl_act ACTS[] = {ODL_ACT_NONE, ODL_ACT_RELU, ODL_ACT_SILU, ODL_ACT_SIGMOID};

/* Normal(0, 3) values with special ones (0, -0, tiny, +-30, +-88.5, +-100) spread over the array. */
static float *act_input(int64_t n) {
    static const float special[] = {0.f, -0.f, 1e-30f, -1e-30f, 30.f, -30.f, 88.5f, -88.5f, 100.f, -100.f, 1.f, -1.f};
    float *x = fnorm(n, 0, 3);
    if (n > 24)
        for (int i = 0; i < 12; i++)
            x[rint_n((int)(n < 1000000 ? n : 1000000))] = special[i];
    return x;
}

static void act_fwd_check(odl_act act, const float *got, const double *ref, int64_t n) {
    if (act == ODL_ACT_NONE || act == ODL_ACT_RELU)
        check_f32("y", got, ref, NULL, n, 1.0, 0, TOL_EXACT);
    else
        check_f32("y", got, ref, NULL, n, 1.0, 1e-30, TOL_TRANS);
}
static void act_bwd_check(odl_act act, const float *got, const double *ref, const double *x, const double *y,
                          const double *dy, int64_t n) {
    if (act == ODL_ACT_NONE || act == ODL_ACT_RELU) {
        check_f32("dx", got, ref, NULL, n, 1.0, 0, TOL_EXACT);
        return;
    }
    double *mag = dalloc(n);
    for (int64_t i = 0; i < n; i++) {
        if (act == ODL_ACT_SILU) {
            double s = ref_sigmoid(x[i]);
            mag[i] = fabs(dy[i]) * (s + fabs(x[i]) * s * (1 - s));
        } else {
            mag[i] = fabs(dy[i]) * y[i] / 8;
        }
    }
    check_f32("dx", got, ref, mag, n, 1.0, 1e-30, TOL_TRANS);
}

static void run_act_fwd(void) {
    int ci = 0;
    for (int a = 0; a < 4; a++)
        for (int k = 0; k <= N_ACT_N; k++, ci++) {
            int inplace = k == N_ACT_N;
            int64_t n = inplace ? 4099 : ACT_N[k];
            odl_act act = ACTS[a];
            rng_case("act_fwd", ci);
            float *x = act_input(n);
            double *ry = dalloc(n);
            ref_act_fwd(act, n, f2d(x, n), ry);
            char desc[96];
            snprintf(desc, sizeof desc, "%s n%" PRId64 "%s", act_name(act), n, inplace ? " in-place" : "");
            for (int b = 0; b < g_nbk; b++) {
                odl_device dev = g_bk[b].dev;
                line_begin(g_bk[b].name, "act_fwd", desc);
                odl_tensor *tx = dF(dev, x, n), *ty = inplace ? tx : dF(dev, NULL, n);
                if (call_ok(odl_act_fwd(act, tx, ty), "odl_act_fwd")) {
                    float *got = falloc(n);
                    dget("y", ty, got);
                    act_fwd_check(act, got, ry, n);
                    if (!inplace) dsame("x", tx, x);
                }
                line_end();
                dfree_all();
            }
            arena_free();
        }
}

typedef struct fd_act_ctx {
    odl_act act;
    int64_t n;
    double *x;
} fd_act_ctx;
static void fd_act_f(void *c_, double *out) {
    fd_act_ctx *c = c_;
    ref_act_fwd(c->act, c->n, c->x, out);
}

static void run_act_bwd(void) {
    int ci = 0;
    for (int a = 0; a < 4; a++)
        for (int k = 0; k <= N_ACT_N; k++, ci++) {
            int inplace = k == N_ACT_N;
            int64_t n = inplace ? 4099 : ACT_N[k];
            odl_act act = ACTS[a];
            rng_case("act_bwd", ci);
            float *x = act_input(n), *dy = fnorm(n, 0, 1);
            double *rx = f2d(x, n), *ry = dalloc(n), *rdy = f2d(dy, n), *rdx = dalloc(n);
            ref_act_fwd(act, n, rx, ry);
            float *y = d2f(ry, n);
            double *ryf = f2d(y, n); /* the backend gets y rounded to float; so does the reference */
            ref_act_bwd(act, n, rx, ryf, rdy, rdx);
            char desc[96];
            snprintf(desc, sizeof desc, "%s n%" PRId64 "%s", act_name(act), n, inplace ? " in-place dx=dy" : "");
            if (!inplace && n <= 4099) {
                /* the reference backward against differences of the reference forward (y exact) */
                line_begin("ref", "act_bwd", desc);
                double *rdx_exact = dalloc(n);
                ref_act_bwd(act, n, rx, ry, rdy, rdx_exact);
                fd_act_ctx fc = {act, n, rx};
                fd_add("dx", fd_act_f, &fc, n, rdy, rx, n, rdx_exact, 24);
                line_end();
            }
            for (int b = 0; b < g_nbk; b++) {
                odl_device dev = g_bk[b].dev;
                line_begin(g_bk[b].name, "act_bwd", desc);
                odl_tensor *tx = dF(dev, x, n), *ty = dF(dev, y, n), *tdy = dF(dev, dy, n);
                odl_tensor *tdx = inplace ? tdy : dF(dev, NULL, n);
                if (call_ok(odl_act_bwd(act, tx, ty, tdy, tdx), "odl_act_bwd")) {
                    float *got = falloc(n);
                    dget("dx", tdx, got);
                    act_bwd_check(act, got, rdx, rx, ryf, rdy, n);
                    dsame("x", tx, x);
                    dsame("y", ty, y);
                    if (!inplace) dsame("dy", tdy, dy);
                }
                line_end();
                dfree_all();
            }
            arena_free();
        }
}

/* ================================================================ dropout */

typedef struct drop_case {
    int64_t n;
    float p;
} drop_case;
static const drop_case DROP_CASES[] = {{1, .5f}, {3, 0.f}, {129, .25f}, {4099, .5f}, {100003, .9f}, {65, .1f}};
#define N_DROP ((int)(sizeof DROP_CASES / sizeof DROP_CASES[0]))

typedef struct fd_drop_ctx {
    int64_t n;
    float p;
    uint64_t seed, off;
    double *x;
} fd_drop_ctx;
static void fd_drop_f(void *c_, double *out) {
    fd_drop_ctx *c = c_;
    ref_dropout_fwd(c->n, c->p, c->seed, c->off, c->x, out);
}

static void run_dropout(int bwd) {
    const char *op = bwd ? "dropout_bwd" : "dropout_fwd";
    for (int ci = 0; ci < N_DROP; ci++) {
        const drop_case *c = &DROP_CASES[ci];
        rng_case(op, ci);
        int64_t n = c->n;
        uint64_t seed = rnext(), off = ci % 2 ? rnext() : (rnext() & 0xFFFF);
        float *x = fgen(n, -2, 2);
        double *rx = f2d(x, n), *ry = dalloc(n);
        if (bwd)
            ref_dropout_bwd(n, c->p, seed, off, rx, ry);
        else
            ref_dropout_fwd(n, c->p, seed, off, rx, ry);
        int64_t kept = 0;
        for (int64_t i = 0; i < n; i++)
            kept += ref_dropout_keep(c->p, seed, off, i);
        char desc[128];
        snprintf(desc, sizeof desc, "n%" PRId64 " p%g offset%s (kept %" PRId64 ")", n, c->p,
                 off > 0xFFFFFFFFull ? ">2^32" : "<2^16", kept);
        if (bwd) {
            line_begin("ref", op, desc);
            double *w = f2d(fgen(n, -1, 1), n), *g = dalloc(n);
            ref_dropout_bwd(n, c->p, seed, off, w, g);
            fd_drop_ctx fc = {n, c->p, seed, off, rx};
            fd_add("dx", fd_drop_f, &fc, n, w, rx, n, g, 16);
            line_end();
        }
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, op, desc);
            odl_tensor *tx = dF(dev, x, n), *ty = dF(dev, NULL, n);
            odl_status st = bwd ? odl_dropout_bwd(c->p, seed, off, tx, ty) : odl_dropout_fwd(c->p, seed, off, tx, ty);
            if (call_ok(st, bwd ? "odl_dropout_bwd" : "odl_dropout_fwd")) {
                float *got = falloc(n);
                dget(bwd ? "dx" : "y", ty, got);
                check_f32(bwd ? "dx" : "y", got, ry, NULL, n, 1.0, 0, c->p == 0 ? TOL_EXACT : U);
                /* x * scale of two floats is exact in double: its rounding is the only right float */
                int64_t diff = 0;
                for (int64_t i = 0; i < n; i++) {
                    float want = (float)ry[i];
                    diff += memcmp(&got[i], &want, 4) != 0;
                }
                line_add(bwd ? "dx.bits" : "y.bits", (double)diff, 0);
                dsame(bwd ? "dy" : "x", tx, x);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

/* ================================================================ batch normalisation */

typedef struct bn_case {
    int N, C, H, W;
    float momentum, eps;
    const char *tag;
    float offset; /* added to every channel mean (a one-pass E[x^2] - E[x]^2 variance loses it all) */
} bn_case;
static const bn_case BN_CASES[] = {
    {2, 3, 5, 7, .1f, 1e-5f, "", 0.f},           {1, 16, 13, 29, .03f, 1e-3f, "yolov5 momentum/eps", 0.f},
    {4, 32, 8, 8, .1f, 1e-5f, "", 0.f},          {8, 3, 1, 1, .1f, 1e-5f, "HW=1", 0.f},
    {2, 64, 24, 24, .1f, 1e-5f, "", 0.f},        {3, 5, 17, 1, .1f, 1e-5f, "", 0.f},
    {1, 1, 1, 2, .1f, 1e-5f, "M=2", 0.f},        {2, 17, 65, 3, .03f, 1e-3f, "", 0.f},
    {1, 129, 3, 3, .1f, 1e-5f, "C129", 0.f},     {8, 16, 64, 64, .03f, 1e-3f, "M=32768", 0.f},
    {4, 3, 16, 16, .1f, 1e-5f, "mean 30", 30.f},
};
#define N_BN_FIXED ((int)(sizeof BN_CASES / sizeof BN_CASES[0]))
#define N_BN (N_BN_FIXED + 2)
static bn_case g_bn[N_BN];
static void bn_cases(void) {
    memcpy(g_bn, BN_CASES, sizeof BN_CASES);
    rng_case("batchnorm_shapes", 0);
    for (int r = N_BN_FIXED; r < N_BN; r++) {
        bn_case c = {1 + rint_n(4),
                     1 + rint_n(40),
                     1 + rint_n(30),
                     1 + rint_n(30),
                     rint_n(2) ? .1f : .03f,
                     rint_n(2) ? 1e-5f : 1e-3f,
                     "random",
                     0.f};
        if (c.N * c.H * c.W < 2) c.W = 2;
        g_bn[r] = c;
    }
}

static void bn_desc(char *d, size_t cap, const bn_case *c) {
    snprintf(d, cap, "N%d C%d %dx%d mom%g eps%g%s%s", c->N, c->C, c->H, c->W, c->momentum, c->eps, *c->tag ? " " : "",
             c->tag);
}

/* Per-channel offsets and scales so that the statistics are not trivial. */
static float *bn_input(const bn_case *c) {
    int64_t HW = (int64_t)c->H * c->W, n = (int64_t)c->N * c->C * HW;
    float *x = falloc(n);
    double *mu = dalloc(c->C), *sd = dalloc(c->C);
    for (int ch = 0; ch < c->C; ch++) {
        mu[ch] = runi(-1, 1) + c->offset;
        sd[ch] = runi(.5, 2);
    }
    for (int64_t i = 0; i < n; i++) {
        int ch = (int)((i / HW) % c->C);
        x[i] = (float)(mu[ch] + sd[ch] * rnorm());
    }
    return x;
}

/* Channel statistics of float inputs, in double: A = mean |x|, Ex2 = mean x^2, var = biased variance. */
static void bn_stats(const bn_case *c, const double *x, double *A, double *Ex2, double *var) {
    int64_t HW = (int64_t)c->H * c->W;
    double M = (double)c->N * HW;
    for (int ch = 0; ch < c->C; ch++) {
        double sa = 0, s2 = 0, s = 0;
        for (int n = 0; n < c->N; n++)
            for (int64_t i = 0; i < HW; i++) {
                double v = x[((int64_t)n * c->C + ch) * HW + i];
                sa += fabs(v);
                s2 += v * v;
                s += v;
            }
        A[ch] = sa / M;
        Ex2[ch] = s2 / M;
        var[ch] = s2 / M - (s / M) * (s / M);
        if (var[ch] < 0) var[ch] = 0;
    }
}

static void run_bn_infer(void) {
    bn_cases();
    for (int ci = 0; ci < N_BN; ci++) {
        const bn_case *c = &g_bn[ci];
        rng_case("batchnorm_infer", ci);
        int C = c->C;
        int64_t HW = (int64_t)c->H * c->W, n = (int64_t)c->N * C * HW;
        float *x = bn_input(c), *gamma = fgen(C, -1.5, 1.5), *beta = fgen(C, -1, 1), *mean = fgen(C, -1, 1),
              *var = fgen(C, .2, 2);
        double *rx = f2d(x, n), *rg = f2d(gamma, C), *rb = f2d(beta, C), *rm = f2d(mean, C), *rv = f2d(var, C);
        double *ry = dalloc(n), *mag = dalloc(n);
        ref_batchnorm_infer(c->N, C, HW, rx, rg, rb, rm, rv, c->eps, ry);
        for (int64_t i = 0; i < n; i++) {
            int ch = (int)((i / HW) % C);
            double is = 1 / sqrt(rv[ch] + (double)c->eps);
            mag[i] = fabs(rg[ch]) * is * (fabs(rx[i] - rm[ch]) + fabs(rm[ch])) + fabs(rb[ch]);
        }
        char desc[128];
        bn_desc(desc, sizeof desc, c);
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "batchnorm_infer", desc);
            odl_tensor *tx = dF(dev, x, c->N, C, c->H, c->W), *tg = dF(dev, gamma, C), *tb = dF(dev, beta, C);
            odl_tensor *tm = dF(dev, mean, C), *tv = dF(dev, var, C), *ty = dF(dev, NULL, c->N, C, c->H, c->W);
            if (call_ok(odl_batchnorm_infer(tx, tg, tb, tm, tv, c->eps, ty), "odl_batchnorm_infer")) {
                float *got = falloc(n);
                dget("y", ty, got);
                check_f32("y", got, ry, mag, n, 1.0, 0, TOL_TRANS);
                dsame("x", tx, x);
                dsame("mean", tm, mean);
                dsame("var", tv, var);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

static void run_bn_train(void) {
    bn_cases();
    for (int ci = 0; ci < N_BN; ci++) {
        const bn_case *c = &g_bn[ci];
        rng_case("batchnorm_train_fwd", ci);
        int C = c->C;
        int64_t HW = (int64_t)c->H * c->W, n = (int64_t)c->N * C * HW;
        double M = (double)c->N * HW;
        float *x = bn_input(c), *gamma = fgen(C, -1.5, 1.5), *beta = fgen(C, -1, 1), *rmean = fgen(C, -1, 1),
              *rvar = fgen(C, .2, 2);
        double *rx = f2d(x, n), *rg = f2d(gamma, C), *rb = f2d(beta, C), *rrm = f2d(rmean, C), *rrv = f2d(rvar, C);
        double *ry = dalloc(n), *rsm = dalloc(C), *rsi = dalloc(C);
        ref_batchnorm_train_fwd(c->N, C, HW, rx, rg, rb, rrm, rrv, c->momentum, c->eps, ry, rsm, rsi);
        double *A = dalloc(C), *Ex2 = dalloc(C), *var = dalloc(C);
        bn_stats(c, rx, A, Ex2, var);
        double *my = dalloc(n), *mm = dalloc(C), *mi = dalloc(C), *mrm = dalloc(C), *mrv = dalloc(C);
        double mom = c->momentum, eps = c->eps;
        for (int64_t i = 0; i < n; i++) {
            int ch = (int)((i / HW) % C);
            my[i] = fabs(rg[ch]) * rsi[ch] * (fabs(rx[i] - rsm[ch]) + A[ch]) + fabs(rb[ch]);
        }
        for (int ch = 0; ch < C; ch++) {
            double amp = (Ex2[ch] + eps) / (var[ch] + eps);
            mm[ch] = A[ch];
            mi[ch] = fabs(rsi[ch]) * amp;
            mrm[ch] = (1 - mom) * fabs((double)rmean[ch]) + mom * A[ch];
            mrv[ch] = (1 - mom) * fabs((double)rvar[ch]) + mom * var[ch] * M / (M - 1) * amp;
        }
        double tol = tol_dot(M);
        char desc[128];
        bn_desc(desc, sizeof desc, c);
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "batchnorm_train_fwd", desc);
            odl_tensor *tx = dF(dev, x, c->N, C, c->H, c->W), *tg = dF(dev, gamma, C), *tb = dF(dev, beta, C);
            odl_tensor *trm = dF(dev, rmean, C), *trv = dF(dev, rvar, C), *ty = dF(dev, NULL, c->N, C, c->H, c->W);
            odl_tensor *tsm = dF(dev, NULL, C), *tsi = dF(dev, NULL, C);
            if (call_ok(odl_batchnorm_train_fwd(tx, tg, tb, trm, trv, c->momentum, c->eps, ty, tsm, tsi),
                        "odl_batchnorm_train_fwd")) {
                float *got = falloc(n);
                dget("y", ty, got);
                check_f32("y", got, ry, my, n, 1.0, 0, tol);
                dget("save_mean", tsm, got);
                check_f32("save_mean", got, rsm, mm, C, 1.0, 0, tol);
                dget("save_invstd", tsi, got);
                check_f32("save_invstd", got, rsi, mi, C, 0.0, 0, tol);
                dget("running_mean", trm, got);
                check_f32("running_mean", got, rrm, mrm, C, 1.0, 0, tol);
                dget("running_var", trv, got);
                check_f32("running_var", got, rrv, mrv, C, 1.0, 0, tol);
                dsame("x", tx, x);
                dsame("gamma", tg, gamma);
                dsame("beta", tb, beta);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

typedef struct fd_bn_ctx {
    int N, C;
    int64_t HW;
    double *x, *g, *b, eps;
} fd_bn_ctx;
static void fd_bn_f(void *c_, double *out) {
    fd_bn_ctx *c = c_;
    ref_batchnorm_train_fwd(c->N, c->C, c->HW, c->x, c->g, c->b, NULL, NULL, 0, c->eps, out, NULL, NULL);
}

static void run_bn_bwd(void) {
    bn_cases();
    for (int ci = 0; ci < N_BN; ci++) {
        const bn_case *c = &g_bn[ci];
        rng_case("batchnorm_bwd", ci);
        int C = c->C;
        int64_t HW = (int64_t)c->H * c->W, n = (int64_t)c->N * C * HW;
        double M = (double)c->N * HW;
        float *x = bn_input(c), *gamma = fgen(C, -1.5, 1.5), *beta = fgen(C, -1, 1), *dy = fnorm(n, 0, 1);
        double *rx = f2d(x, n), *rg = f2d(gamma, C), *rb = f2d(beta, C), *rdy = f2d(dy, n);
        double *ry = dalloc(n), *sm = dalloc(C), *si = dalloc(C);
        ref_batchnorm_train_fwd(c->N, C, HW, rx, rg, rb, NULL, NULL, 0, c->eps, ry, sm, si);
        char desc[128];
        bn_desc(desc, sizeof desc, c);
        {
            /* the reference backward with exact saved statistics against differences of the forward */
            double *gx = dalloc(n), *gg = dalloc(C), *gb = dalloc(C);
            ref_batchnorm_bwd(c->N, C, HW, rx, rdy, rg, sm, si, gx, gg, gb);
            int ns = fd_samples(M * C * 8);
            if (ns) {
                line_begin("ref", "batchnorm_bwd", desc);
                fd_bn_ctx fc = {c->N, C, HW, rx, rg, rb, c->eps};
                fd_add("dx", fd_bn_f, &fc, n, rdy, rx, n, gx, ns);
                fd_add("dgamma", fd_bn_f, &fc, n, rdy, rg, C, gg, ns);
                fd_add("dbeta", fd_bn_f, &fc, n, rdy, rb, C, gb, ns);
                line_end();
            }
        }
        /* the backend gets the saved statistics rounded to float, and so does the reference */
        float *fsm = d2f(sm, C), *fsi = d2f(si, C);
        double *rsm = f2d(fsm, C), *rsi = f2d(fsi, C);
        double *rdx = dalloc(n), *rdg = dalloc(C), *rdb = dalloc(C);
        ref_batchnorm_bwd(c->N, C, HW, rx, rdy, rg, rsm, rsi, rdx, rdg, rdb);
        double *sdy = dalloc(C), *sdyx = dalloc(C), *mdx = dalloc(n);
        for (int64_t i = 0; i < n; i++) {
            int ch = (int)((i / HW) % C);
            sdy[ch] += fabs(rdy[i]);
            sdyx[ch] += fabs(rdy[i] * (rx[i] - rsm[ch]) * rsi[ch]);
        }
        for (int64_t i = 0; i < n; i++) {
            int ch = (int)((i / HW) % C);
            double xh = fabs((rx[i] - rsm[ch]) * rsi[ch]);
            mdx[i] = fabs(rg[ch]) * rsi[ch] * (fabs(rdy[i]) + sdy[ch] / M + xh * sdyx[ch] / M);
        }
        double tol = tol_dot(M);
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "batchnorm_bwd", desc);
            odl_tensor *tx = dF(dev, x, c->N, C, c->H, c->W), *tdy = dF(dev, dy, c->N, C, c->H, c->W);
            odl_tensor *tg = dF(dev, gamma, C), *tsm = dF(dev, fsm, C), *tsi = dF(dev, fsi, C);
            odl_tensor *tdx = dF(dev, NULL, c->N, C, c->H, c->W), *tdg = dF(dev, NULL, C), *tdb = dF(dev, NULL, C);
            if (call_ok(odl_batchnorm_bwd(tx, tdy, tg, tsm, tsi, tdx, tdg, tdb), "odl_batchnorm_bwd")) {
                float *got = falloc(n);
                dget("dx", tdx, got);
                check_f32("dx", got, rdx, mdx, n, 0.0, 0, tol);
                dget("dgamma", tdg, got);
                check_f32("dgamma", got, rdg, sdyx, C, 1.0, 0, tol);
                dget("dbeta", tdb, got);
                check_f32("dbeta", got, rdb, sdy, C, 1.0, 0, tol);
                dsame("x", tx, x);
                dsame("dy", tdy, dy);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

/* ================================================================ upsample, concat */

static const int UP_CASES[][4] = {{1, 1, 1, 1}, {2, 3, 13, 29}, {1, 16, 20, 20}, {1, 5, 17, 3}, {2, 128, 10, 10}};
#define N_UP ((int)(sizeof UP_CASES / sizeof UP_CASES[0]))

typedef struct fd_up_ctx {
    int N, C, H, W;
    double *x;
} fd_up_ctx;
static void fd_up_f(void *c_, double *out) {
    fd_up_ctx *c = c_;
    ref_upsample2x_fwd(c->N, c->C, c->H, c->W, c->x, out);
}

static void run_upsample(int bwd) {
    const char *op = bwd ? "upsample2x_bwd" : "upsample2x_fwd";
    for (int ci = 0; ci < N_UP; ci++) {
        int N = UP_CASES[ci][0], C = UP_CASES[ci][1], H = UP_CASES[ci][2], W = UP_CASES[ci][3];
        rng_case(op, ci);
        int64_t nx = (int64_t)N * C * H * W, ny = 4 * nx;
        char desc[96];
        snprintf(desc, sizeof desc, "N%d C%d %dx%d", N, C, H, W);
        float *in = fgen(bwd ? ny : nx, -1, 1);
        double *rin = f2d(in, bwd ? ny : nx), *rout = dalloc(bwd ? nx : ny), *mag = NULL;
        if (bwd) {
            ref_upsample2x_bwd(N, C, H, W, rin, rout);
            double *a = dalloc(ny);
            for (int64_t i = 0; i < ny; i++)
                a[i] = fabs(rin[i]);
            mag = dalloc(nx);
            ref_upsample2x_bwd(N, C, H, W, a, mag);
            line_begin("ref", op, desc);
            double *x = f2d(fgen(nx, -1, 1), nx);
            fd_up_ctx fc = {N, C, H, W, x};
            fd_add("dx", fd_up_f, &fc, ny, rin, x, nx, rout, 16);
            line_end();
        } else {
            ref_upsample2x_fwd(N, C, H, W, rin, rout);
        }
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, op, desc);
            odl_tensor *tin = bwd ? dF(dev, in, N, C, 2 * H, 2 * W) : dF(dev, in, N, C, H, W);
            odl_tensor *tout = bwd ? dF(dev, NULL, N, C, H, W) : dF(dev, NULL, N, C, 2 * H, 2 * W);
            odl_status st = bwd ? odl_upsample2x_bwd(tin, tout) : odl_upsample2x_fwd(tin, tout);
            if (call_ok(st, bwd ? "odl_upsample2x_bwd" : "odl_upsample2x_fwd")) {
                int64_t no = bwd ? nx : ny;
                float *got = falloc(no);
                dget(bwd ? "dx" : "y", tout, got);
                if (bwd) {
                    check_f32("dx", got, rout, mag, no, 1.0, 0, tol_dot(4));
                    /* the contract's float order ((a + b) + c) + d gives bitwise the same on every backend */
                    int64_t diff = 0;
                    for (int64_t nc = 0; nc < (int64_t)N * C; nc++)
                        for (int h = 0; h < H; h++)
                            for (int w = 0; w < W; w++) {
                                const float *d0 = in + (nc * 2 * H + 2 * h) * 2 * W + 2 * w, *d1 = d0 + 2 * W;
                                volatile float ab = d0[0] + d0[1];
                                volatile float abc = ab + d1[0];
                                volatile float abcd = abc + d1[1];
                                float g = got[(nc * H + h) * W + w];
                                diff += memcmp(&g, (const void *)&abcd, 4) != 0;
                            }
                    line_add("dx.bits", (double)diff, 0);
                } else
                    check_f32("y", got, rout, NULL, no, 1.0, 0, TOL_EXACT);
                dsame(bwd ? "dy" : "x", tin, in);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

typedef struct cat_case {
    int N, H, W, n;
    int Cs[4];
    int null_dx; /* bit i: dxs[i] is NULL in the backward */
    const char *tag;
} cat_case;
static const cat_case CAT_CASES[] = {
    {1, 1, 1, 2, {1, 1}, 0, ""},
    {2, 13, 29, 3, {3, 5, 1}, 2, ""},
    {1, 20, 20, 2, {16, 16}, 0, "yolov5 C3"},
    {2, 10, 10, 4, {32, 16, 8, 8}, 8, "yolov5 sppf"},
    {1, 3, 17, 2, {1, 127}, 1, ""},
    {2, 5, 7, 4, {3, 1, 4, 2}, 12, "trailing NULLs"},
};
#define N_CAT ((int)(sizeof CAT_CASES / sizeof CAT_CASES[0]))

typedef struct fd_cat_ctx {
    int N, n;
    int64_t HW;
    const int *Cs;
    double **xs;
} fd_cat_ctx;
static void fd_cat_f(void *c_, double *out) {
    fd_cat_ctx *c = c_;
    ref_concat_fwd(c->N, c->HW, c->n, c->Cs, (const double *const *)c->xs, out);
}

static void run_concat(int bwd) {
    const char *op = bwd ? "concat_channels_bwd" : "concat_channels_fwd";
    for (int ci = 0; ci < N_CAT; ci++) {
        const cat_case *c = &CAT_CASES[ci];
        rng_case(op, ci);
        int64_t HW = (int64_t)c->H * c->W;
        int Ct = 0;
        for (int i = 0; i < c->n; i++)
            Ct += c->Cs[i];
        int64_t ny = (int64_t)c->N * Ct * HW;
        float *parts[4];
        double *rparts[4];
        for (int i = 0; i < c->n; i++) {
            parts[i] = fgen((int64_t)c->N * c->Cs[i] * HW, -1, 1);
            rparts[i] = f2d(parts[i], (int64_t)c->N * c->Cs[i] * HW);
        }
        float *dy = fgen(ny, -1, 1);
        double *rdy = f2d(dy, ny), *ry = dalloc(ny), *rdx[4];
        ref_concat_fwd(c->N, HW, c->n, c->Cs, (const double *const *)rparts, ry);
        for (int i = 0; i < c->n; i++)
            rdx[i] = dalloc((int64_t)c->N * c->Cs[i] * HW);
        ref_concat_bwd(c->N, HW, c->n, c->Cs, rdy, rdx);
        char desc[128];
        int o = snprintf(desc, sizeof desc, "N%d %dx%d C", c->N, c->H, c->W);
        for (int i = 0; i < c->n; i++)
            o += snprintf(desc + o, sizeof desc - (size_t)o, "%s%d", i ? "+" : "", c->Cs[i]);
        for (int i = 0; bwd && i < c->n; i++)
            if (c->null_dx & (1 << i)) o += snprintf(desc + o, sizeof desc - (size_t)o, " dx%d=NULL", i);
        if (*c->tag) snprintf(desc + o, sizeof desc - (size_t)o, " %s", c->tag);
        if (bwd) {
            line_begin("ref", op, desc);
            fd_cat_ctx fc = {c->N, c->n, HW, c->Cs, rparts};
            for (int i = 0; i < c->n; i++) {
                char nm[16];
                snprintf(nm, sizeof nm, "dx%d", i);
                fd_add(nm, fd_cat_f, &fc, ny, rdy, rparts[i], (int64_t)c->N * c->Cs[i] * HW, rdx[i], 8);
            }
            line_end();
        }
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, op, desc);
            odl_tensor *tp[4];
            for (int i = 0; i < c->n; i++)
                tp[i] = (bwd && (c->null_dx & (1 << i))) ? NULL
                                                         : dF(dev, bwd ? NULL : parts[i], c->N, c->Cs[i], c->H, c->W);
            odl_tensor *ty = dF(dev, bwd ? dy : NULL, c->N, Ct, c->H, c->W);
            odl_status st = bwd ? odl_concat_channels_bwd(ty, c->n, tp)
                                : odl_concat_channels_fwd(c->n, (const odl_tensor *const *)tp, ty);
            if (call_ok(st, bwd ? "odl_concat_channels_bwd" : "odl_concat_channels_fwd")) {
                if (bwd) {
                    for (int i = 0; i < c->n; i++) {
                        if (!tp[i]) continue;
                        int64_t ni = (int64_t)c->N * c->Cs[i] * HW;
                        float *got = falloc(ni);
                        char nm[16];
                        snprintf(nm, sizeof nm, "dx%d", i);
                        dget(nm, tp[i], got);
                        check_f32(nm, got, rdx[i], NULL, ni, 1.0, 0, TOL_EXACT);
                    }
                    dsame("dy", ty, dy);
                } else {
                    float *got = falloc(ny);
                    dget("y", ty, got);
                    check_f32("y", got, ry, NULL, ny, 1.0, 0, TOL_EXACT);
                    for (int i = 0; i < c->n; i++)
                        dsame("x", tp[i], parts[i]);
                }
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

/* ================================================================ losses, argmax */

typedef struct lsm_case {
    int B, C;
    int big; /* rows offset by +-100 (a naive exp overflows) */
} lsm_case;
static const lsm_case LSM_CASES[] = {{1, 1, 0},  {1, 10, 0},  {64, 10, 1}, {3, 1000, 1},
                                     {17, 3, 1}, {5, 129, 0}, {4099, 2, 1}};
#define N_LSM_FIXED ((int)(sizeof LSM_CASES / sizeof LSM_CASES[0]))
#define N_LSM (N_LSM_FIXED + 2)
static lsm_case g_lsm[N_LSM];
static void lsm_cases(void) {
    memcpy(g_lsm, LSM_CASES, sizeof LSM_CASES);
    rng_case("log_softmax_shapes", 0);
    for (int r = N_LSM_FIXED; r < N_LSM; r++)
        g_lsm[r] = (lsm_case){1 + rint_n(300), 1 + rint_n(300), rint_n(2)};
}

static float *lsm_logits(const lsm_case *c) {
    int64_t n = (int64_t)c->B * c->C;
    float *x = fnorm(n, 0, 3);
    if (c->big && c->B > 1) {
        for (int j = 0; j < c->C; j++) {
            x[j] += 100.f;
            x[(int64_t)c->C + j] -= 100.f;
        }
    }
    return x;
}
static int32_t *lsm_labels(const lsm_case *c) {
    int32_t *l = ialloc(c->B);
    for (int b = 0; b < c->B; b++)
        l[b] = rint_n(c->C);
    return l;
}

static void run_lsm_fwd(void) {
    lsm_cases();
    for (int ci = 0; ci < N_LSM; ci++) {
        const lsm_case *c = &g_lsm[ci];
        rng_case("log_softmax_nll_fwd", ci);
        int64_t n = (int64_t)c->B * c->C;
        float *x = lsm_logits(c);
        int32_t *lab = lsm_labels(c);
        double *rx = f2d(x, n), *rlp = dalloc(n), rloss, *mag = dalloc(n), mloss = 0;
        ref_log_softmax_nll_fwd(c->B, c->C, rx, lab, rlp, &rloss);
        for (int b = 0; b < c->B; b++) {
            double m = rx[(int64_t)b * c->C];
            for (int j = 1; j < c->C; j++)
                m = fmax(m, rx[(int64_t)b * c->C + j]);
            for (int j = 0; j < c->C; j++) {
                int64_t o = (int64_t)b * c->C + j;
                mag[o] = fabs(rx[o]) + fabs(m) + 1;
            }
            mloss += mag[(int64_t)b * c->C + lab[b]] / c->B;
        }
        char desc[96];
        snprintf(desc, sizeof desc, "B%d C%d%s", c->B, c->C, c->big && c->B > 1 ? " rows +-100" : "");
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "log_softmax_nll_fwd", desc);
            odl_tensor *tx = dF(dev, x, c->B, c->C), *tl = dI(dev, lab, c->B);
            odl_tensor *tlp = dF(dev, NULL, c->B, c->C), *tloss = dF(dev, NULL, 1);
            if (call_ok(odl_log_softmax_nll_fwd(tx, tl, tlp, tloss), "odl_log_softmax_nll_fwd")) {
                float *got = falloc(n), gl;
                dget("logprobs", tlp, got);
                check_f32("logprobs", got, rlp, mag, n, 1.0, 0, tol_dot(c->C) + 16 * U);
                dget("loss", tloss, &gl);
                check_f32("loss", &gl, &rloss, &mloss, 1, 1.0, 0, tol_dot(c->C) + tol_dot(c->B));
                dsame("logits", tx, x);
                dsame("labels", tl, lab);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

typedef struct fd_lsm_ctx {
    int B, C;
    double *x, *lp;
    const int32_t *lab;
} fd_lsm_ctx;
static void fd_lsm_f(void *c_, double *out) {
    fd_lsm_ctx *c = c_;
    ref_log_softmax_nll_fwd(c->B, c->C, c->x, c->lab, c->lp, out);
}

static void run_lsm_bwd(void) {
    lsm_cases();
    for (int ci = 0; ci < N_LSM; ci++) {
        const lsm_case *c = &g_lsm[ci];
        rng_case("log_softmax_nll_bwd", ci);
        int64_t n = (int64_t)c->B * c->C;
        float *x = lsm_logits(c);
        int32_t *lab = lsm_labels(c);
        double dloss = runi(.5, 2) * (rint_n(2) ? 1 : -1);
        float fdl = (float)dloss;
        dloss = fdl;
        double *rx = f2d(x, n), *rlp = dalloc(n), rloss;
        ref_log_softmax_nll_fwd(c->B, c->C, rx, lab, rlp, &rloss);
        char desc[96];
        snprintf(desc, sizeof desc, "B%d C%d dloss%.3g%s", c->B, c->C, dloss, c->big && c->B > 1 ? " rows +-100" : "");
        {
            double *g = dalloc(n), *lp = dalloc(n);
            ref_log_softmax_nll_bwd(c->B, c->C, rlp, lab, dloss, g);
            line_begin("ref", "log_softmax_nll_bwd", desc);
            fd_lsm_ctx fc = {c->B, c->C, rx, lp, lab};
            /* the loss is log-sum-exp minus the label's logit, each of up to max |x| + log C */
            double xmax = 0;
            for (int64_t i = 0; i < n; i++) xmax = fmax(xmax, fabs(rx[i]));
            fd_add_inner("dlogits", fd_lsm_f, &fc, 1, &dloss, rx, n, g, 16, 2 * xmax + log((double)c->C));
            line_end();
        }
        float *lpf = d2f(rlp, n);
        double *rlpf = f2d(lpf, n), *rd = dalloc(n), *mag = dalloc(n);
        ref_log_softmax_nll_bwd(c->B, c->C, rlpf, lab, dloss, rd);
        for (int64_t i = 0; i < n; i++)
            mag[i] = (exp(rlpf[i]) + (lab[i / c->C] == (int32_t)(i % c->C))) * fabs(dloss) / c->B;
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "log_softmax_nll_bwd", desc);
            odl_tensor *tlp = dF(dev, lpf, c->B, c->C), *tl = dI(dev, lab, c->B), *td = dF(dev, NULL, c->B, c->C);
            if (call_ok(odl_log_softmax_nll_bwd(tlp, tl, fdl, td), "odl_log_softmax_nll_bwd")) {
                float *got = falloc(n);
                dget("dlogits", td, got);
                check_f32("dlogits", got, rd, mag, n, 0.0, 0, 16 * U);
                dsame("logprobs", tlp, lpf);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

static void run_argmax(void) {
    static const int CASES[][3] = {{1, 1, 0},  {1, 10, 0},   {64, 10, 0}, {3, 1000, 0},
                                   {17, 3, 1}, {129, 65, 1}, {4099, 2, 0}};
    for (int ci = 0; ci < (int)(sizeof CASES / sizeof CASES[0]); ci++) {
        int B = CASES[ci][0], C = CASES[ci][1], ties = CASES[ci][2];
        rng_case("argmax_rows", ci);
        int64_t n = (int64_t)B * C;
        float *x = fnorm(n, 0, 3);
        if (ties)
            for (int64_t i = 0; i < n; i++)
                x[i] = (float)rint_n(3);
        int32_t *ra = ialloc(B);
        ref_argmax_rows(B, C, f2d(x, n), ra);
        char desc[96];
        snprintf(desc, sizeof desc, "B%d C%d%s", B, C, ties ? " ties" : "");
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "argmax_rows", desc);
            odl_tensor *tx = dF(dev, x, B, C), *to = dI(dev, NULL, B);
            if (call_ok(odl_argmax_rows(tx, to), "odl_argmax_rows")) {
                int32_t *got = ialloc(B);
                dget("out", to, got);
                check_i32("out", got, ra, B);
                dsame("x", tx, x);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

/* ================================================================ element-wise arithmetic, reductions */

static const int64_t EW_N[] = {1, 17, 129, 4099, 100003};
#define N_EW ((int)(sizeof EW_N / sizeof EW_N[0]))

/* which: 0 add, 1 mul, 2 scale, 3 axpy */
static void run_ew(int which) {
    static const char *names[] = {"add", "mul", "scale", "axpy"};
    const char *op = names[which];
    for (int ci = 0; ci < N_EW; ci++) {
        int64_t n = EW_N[ci];
        rng_case(op, ci);
        float *a = fnorm(n, 0, 2), *bb = fnorm(n, 0, 2);
        float alpha = (float)runi(-2, 2);
        double *ra = f2d(a, n), *rb = f2d(bb, n), *ry = dalloc(n), *mag = dalloc(n);
        for (int64_t i = 0; i < n; i++) {
            switch (which) {
            case 0: ry[i] = ra[i] + rb[i]; break;
            case 1: ry[i] = ra[i] * rb[i]; break;
            case 2: ry[i] = (double)alpha * ra[i]; break;
            default: ry[i] = rb[i] + (double)alpha * ra[i]; mag[i] = fabs((double)alpha * ra[i]);
            }
        }
        char desc[96];
        if (which >= 2)
            snprintf(desc, sizeof desc, "n%" PRId64 " alpha%.4g", n, alpha);
        else
            snprintf(desc, sizeof desc, "n%" PRId64, n);
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, op, desc);
            odl_tensor *ta = dF(dev, a, n), *tb = dF(dev, which == 3 ? bb : (which == 2 ? NULL : bb), n);
            odl_tensor *ty = which == 3 ? tb : (which == 2 ? tb : dF(dev, NULL, n));
            odl_status st;
            switch (which) {
            case 0: st = odl_add(ta, tb, ty); break;
            case 1: st = odl_mul(ta, tb, ty); break;
            case 2: st = odl_scale(alpha, ta, ty); break;
            default: st = odl_axpy(alpha, ta, ty);
            }
            if (call_ok(st, op)) {
                float *got = falloc(n);
                dget("y", ty, got);
                check_f32("y", got, ry, mag, n, 1.0, 1e-37, TOL_ARITH);
                dsame("x", ta, a);
                if (which < 2) dsame("b", tb, bb);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

static void run_fill(void) {
    static const int64_t NS[] = {1, 129, 4099};
    for (int ci = 0; ci < 3; ci++) {
        int64_t n = NS[ci];
        rng_case("fill", ci);
        float v = (float)runi(-3, 3);
        double *ry = dalloc(n);
        for (int64_t i = 0; i < n; i++)
            ry[i] = v;
        for (int via = 0; via < 2; via++) {
            char desc[96];
            snprintf(desc, sizeof desc, "n%" PRId64 " value%.4g%s", n, v, via ? " [table]" : " odl_tensor_fill");
            for (int b = 0; b < g_nbk; b++) {
                odl_device dev = g_bk[b].dev;
                line_begin(g_bk[b].name, "fill", desc);
                odl_tensor *ty = dF(dev, NULL, n);
                odl_status st = via ? g_bk[b].be->fill(n, v, ty->data) : odl_tensor_fill(ty, v);
                if (call_ok(st, via ? "backend fill" : "odl_tensor_fill")) {
                    float *got = falloc(n);
                    dget("y", ty, got);
                    check_f32("y", got, ry, NULL, n, 1.0, 0, TOL_EXACT);
                }
                line_end();
                dfree_all();
            }
        }
        arena_free();
    }
}

static void run_sum_rows(void) {
    static const int64_t CASES[][2] = {{1, 1}, {3, 17}, {129, 65}, {4099, 3}, {1000, 129}, {4, 128}, {1, 4099}};
    for (int ci = 0; ci < (int)(sizeof CASES / sizeof CASES[0]); ci++) {
        int64_t M = CASES[ci][0], N = CASES[ci][1];
        rng_case("sum_rows", ci);
        float *x = fnorm(M * N, 0.5, 1);
        double *ry = dalloc(N), *mag = dalloc(N);
        ref_sum_rows(M, N, f2d(x, M * N), ry, mag);
        char desc[96];
        snprintf(desc, sizeof desc, "M%" PRId64 " N%" PRId64, M, N);
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "sum_rows", desc);
            odl_tensor *tx = dF(dev, x, M, N), *ty = dF(dev, NULL, N);
            if (call_ok(odl_sum_rows(tx, ty), "odl_sum_rows")) {
                float *got = falloc(N);
                dget("y", ty, got);
                check_f32("y", got, ry, mag, N, 1.0, 0, tol_dot((double)M));
                check_l2("y.l2", got, ry, mag, (double)M, N, tol_l2((double)M));
                dsame("x", tx, x);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

static void run_sum(void) {
    static const int64_t NS[] = {1, 3, 17, 129, 4099, 100003, 1000003};
    for (int ci = 0; ci < (int)(sizeof NS / sizeof NS[0]); ci++) {
        int64_t n = NS[ci];
        rng_case("sum", ci);
        float *x = fnorm(n, ci % 2 ? 0.5 : 0.0, 1); /* odd cases have a positive mean (growing partial sums) */
        double ry, mag;
        ref_sum(n, f2d(x, n), &ry, &mag);
        char desc[96];
        snprintf(desc, sizeof desc, "n%" PRId64 " %s", n, ci % 2 ? "mean 0.5" : "mean 0");
        for (int b = 0; b < g_nbk; b++) {
            odl_device dev = g_bk[b].dev;
            line_begin(g_bk[b].name, "sum", desc);
            odl_tensor *tx = dF(dev, x, n), *to = dF(dev, NULL, 1);
            if (call_ok(odl_sum(tx, to), "odl_sum")) {
                float got;
                dget("out", to, &got);
                check_f32("out", &got, &ry, &mag, 1, 1.0, 0, tol_dot((double)n));
                dsame("x", tx, x);
            }
            line_end();
            dfree_all();
        }
        arena_free();
    }
}

/* ================================================================ optimisers */

#define OPT_STEPS 5
static const int64_t OPT_N[] = {1, 129, 65537};
#define N_OPT_N ((int)(sizeof OPT_N / sizeof OPT_N[0]))

typedef struct sgd_cfg {
    float lr, momentum, dampening, wd;
    int nesterov;
} sgd_cfg;
static const sgd_cfg SGD_CFGS[] = {
    {.1f, .9f, 0.f, 5e-4f, 0}, {.01f, .9f, 0.f, 0.f, 1}, {.05f, 0.f, 0.f, 1e-4f, 0}, {.1f, .5f, .1f, 0.f, 0}};

/* Optimiser state trajectories: each step starts from the backend's own state (downloaded), so that each
 * step is compared on its own; the step counter runs 1..OPT_STEPS. */
static void run_sgd(void) {
    int ci = 0;
    for (int k = 0; k < (int)(sizeof SGD_CFGS / sizeof SGD_CFGS[0]); k++)
        for (int ni = 0; ni < N_OPT_N; ni++, ci++) {
            const sgd_cfg *c = &SGD_CFGS[k];
            int64_t n = OPT_N[ni];
            rng_case("sgd_step", ci);
            float *p0 = fnorm(n, 0, 1);
            float *gs[OPT_STEPS];
            for (int s = 0; s < OPT_STEPS; s++)
                gs[s] = fnorm(n, 0, 1);
            char desc[128];
            snprintf(desc, sizeof desc, "n%" PRId64 " lr%g mom%g damp%g wd%g%s x%d steps", n, c->lr, c->momentum,
                     c->dampening, c->wd, c->nesterov ? " nesterov" : "", OPT_STEPS);
            for (int b = 0; b < g_nbk; b++) {
                odl_device dev = g_bk[b].dev;
                line_begin(g_bk[b].name, "sgd_step", desc);
                /* buf starts as NaN: step 1 must not read it (buf = g) */
                odl_tensor *tp = dF(dev, p0, n), *tg = dF(dev, gs[0], n), *tbuf = dF(dev, NULL, n);
                float *p = falloc(n), *buf = fnan(n);
                memcpy(p, p0, (size_t)n * 4);
                double ep = 0, eb = 0;
                for (int s = 1; s <= OPT_STEPS; s++) {
                    if (s > 1) TOK(odl_tensor_copy_from_host(tg, gs[s - 1], (size_t)n * 4));
                    double *rp = f2d(p, n), *rg = f2d(gs[s - 1], n), *rbuf = f2d(buf, n);
                    double *mp = dalloc(n), *mb = dalloc(n);
                    for (int64_t i = 0; i < n; i++) {
                        double gi = fabs(rg[i]) + c->wd * fabs(rp[i]);
                        double bm = s == 1 ? gi : c->momentum * fabs(rbuf[i]) + (1 - c->dampening) * gi;
                        mb[i] = bm;
                        mp[i] = c->lr * (c->momentum != 0 ? (c->nesterov ? gi + c->momentum * bm : bm) : gi);
                    }
                    ref_sgd_step(n, rp, rg, rbuf, c->lr, c->momentum, c->dampening, c->wd, c->nesterov, s);
                    if (!call_ok(odl_sgd_step(tp, tg, tbuf, c->lr, c->momentum, c->dampening, c->wd, c->nesterov, s),
                                 "odl_sgd_step"))
                        break;
                    dget("p", tp, p);
                    cmpr r = cmp_f32(p, rp, mp, n, 1.0, 0);
                    if (r.err > ep) ep = r.err;
                    if (!(r.err <= 16 * U)) report_cmp("p", r, p, rp, 16 * U);
                    if (c->momentum != 0) {
                        dget("buf", tbuf, buf);
                        r = cmp_f32(buf, rbuf, mb, n, 1.0, 0);
                        if (r.err > eb) eb = r.err;
                        if (!(r.err <= 16 * U)) report_cmp("buf", r, buf, rbuf, 16 * U);
                    }
                    dsame("g", tg, gs[s - 1]);
                }
                line_add("p", ep, 16 * U);
                if (c->momentum != 0) line_add("buf", eb, 16 * U);
                line_end();
                dfree_all();
            }
            arena_free();
        }
}

typedef struct adam_cfg {
    float lr, b1, b2, eps, wd;
    int decoupled;
} adam_cfg;
static const adam_cfg ADAM_CFGS[] = {
    {1e-3f, .9f, .999f, 1e-8f, 0.f, 0}, {1e-2f, .9f, .99f, 1e-6f, 1e-2f, 0}, {1e-3f, .9f, .999f, 1e-8f, 1e-2f, 1}};

static void run_adam(void) {
    int ci = 0;
    for (int k = 0; k < (int)(sizeof ADAM_CFGS / sizeof ADAM_CFGS[0]); k++)
        for (int ni = 0; ni < N_OPT_N; ni++, ci++) {
            const adam_cfg *c = &ADAM_CFGS[k];
            int64_t n = OPT_N[ni];
            rng_case("adam_step", ci);
            float *p0 = fnorm(n, 0, 1);
            float *gs[OPT_STEPS];
            for (int s = 0; s < OPT_STEPS; s++)
                gs[s] = fnorm(n, 0, 1);
            char desc[128];
            snprintf(desc, sizeof desc, "n%" PRId64 " %s lr%g b1 %g b2 %g eps%g wd%g x%d steps", n,
                     c->decoupled ? "adamw" : "adam", c->lr, c->b1, c->b2, c->eps, c->wd, OPT_STEPS);
            for (int b = 0; b < g_nbk; b++) {
                odl_device dev = g_bk[b].dev;
                line_begin(g_bk[b].name, "adam_step", desc);
                float *p = falloc(n), *m = falloc(n), *v = falloc(n); /* zeros, as torch.optim starts */
                memcpy(p, p0, (size_t)n * 4);
                odl_tensor *tp = dF(dev, p, n), *tg = dF(dev, gs[0], n), *tm = dF(dev, m, n), *tv = dF(dev, v, n);
                double ep = 0, em = 0, ev = 0;
                for (int s = 1; s <= OPT_STEPS; s++) {
                    if (s > 1) TOK(odl_tensor_copy_from_host(tg, gs[s - 1], (size_t)n * 4));
                    double *rp = f2d(p, n), *rg = f2d(gs[s - 1], n), *rm = f2d(m, n), *rv = f2d(v, n);
                    double *mp = dalloc(n), *mm = dalloc(n), *mv = dalloc(n);
                    double bc1 = 1 - pow(c->b1, s), bc2 = 1 - pow(c->b2, s);
                    for (int64_t i = 0; i < n; i++) {
                        /* ga bounds the float error of g + wd p (which may cancel) */
                        double gi = c->decoupled ? rg[i] : rg[i] + (double)c->wd * rp[i];
                        double ga = fabs(rg[i]) + (c->decoupled ? 0 : (double)c->wd * fabs(rp[i]));
                        double v1 = c->b2 * rv[i] + (1 - (double)c->b2) * gi * gi;
                        mm[i] = fabs(c->b1 * rm[i]) + (1 - (double)c->b1) * ga;
                        mv[i] = c->b2 * rv[i] + (1 - (double)c->b2) * ga * ga;
                        double den = sqrt(v1 / bc2) + c->eps;
                        mp[i] = c->lr * (mm[i] / bc1) / den * (1 + mv[i] / (v1 + 1e-300)) +
                                (double)c->lr * c->wd * fabs(rp[i]);
                    }
                    ref_adam_step(n, rp, rg, rm, rv, c->lr, c->b1, c->b2, c->eps, c->wd, c->decoupled, s);
                    if (!call_ok(odl_adam_step(tp, tg, tm, tv, c->lr, c->b1, c->b2, c->eps, c->wd, c->decoupled, s),
                                 "odl_adam_step"))
                        break;
                    dget("p", tp, p);
                    dget("m", tm, m);
                    dget("v", tv, v);
                    cmpr r = cmp_f32(p, rp, mp, n, 16 * U / TOL_ADAM, 0);
                    if (r.err > ep) ep = r.err;
                    if (!(r.err <= TOL_ADAM)) report_cmp("p", r, p, rp, TOL_ADAM);
                    r = cmp_f32(m, rm, mm, n, 1.0, 0);
                    if (r.err > em) em = r.err;
                    if (!(r.err <= 16 * U)) report_cmp("m", r, m, rm, 16 * U);
                    r = cmp_f32(v, rv, mv, n, 1.0, 0);
                    if (r.err > ev) ev = r.err;
                    if (!(r.err <= 16 * U)) report_cmp("v", r, v, rv, 16 * U);
                    dsame("g", tg, gs[s - 1]);
                }
                line_add("p", ep, TOL_ADAM);
                line_add("m", em, 16 * U);
                line_add("v", ev, 16 * U);
                line_end();
                dfree_all();
            }
            arena_free();
        }
}

typedef struct adadelta_cfg {
    float lr, rho, eps, wd;
} adadelta_cfg;
static const adadelta_cfg ADADELTA_CFGS[] = {{1.f, .9f, 1e-6f, 0.f}, {.5f, .95f, 1e-6f, 1e-4f}};

static void run_adadelta(void) {
    int ci = 0;
    for (int k = 0; k < (int)(sizeof ADADELTA_CFGS / sizeof ADADELTA_CFGS[0]); k++)
        for (int ni = 0; ni < N_OPT_N; ni++, ci++) {
            const adadelta_cfg *c = &ADADELTA_CFGS[k];
            int64_t n = OPT_N[ni];
            rng_case("adadelta_step", ci);
            float *p0 = fnorm(n, 0, 1);
            float *gs[OPT_STEPS];
            for (int s = 0; s < OPT_STEPS; s++)
                gs[s] = fnorm(n, 0, 1);
            char desc[128];
            snprintf(desc, sizeof desc, "n%" PRId64 " lr%g rho%g eps%g wd%g x%d steps", n, c->lr, c->rho, c->eps, c->wd,
                     OPT_STEPS);
            for (int b = 0; b < g_nbk; b++) {
                odl_device dev = g_bk[b].dev;
                line_begin(g_bk[b].name, "adadelta_step", desc);
                float *p = falloc(n), *sq = falloc(n), *acc = falloc(n);
                memcpy(p, p0, (size_t)n * 4);
                odl_tensor *tp = dF(dev, p, n), *tg = dF(dev, gs[0], n), *tsq = dF(dev, sq, n), *tacc = dF(dev, acc, n);
                double ep = 0, es = 0, ea = 0;
                double tol = 32 * U;
                for (int s = 1; s <= OPT_STEPS; s++) {
                    if (s > 1) TOK(odl_tensor_copy_from_host(tg, gs[s - 1], (size_t)n * 4));
                    double *rp = f2d(p, n), *rg = f2d(gs[s - 1], n), *rs = f2d(sq, n), *ra = f2d(acc, n);
                    double *mp = dalloc(n), *ms = dalloc(n), *ma = dalloc(n);
                    for (int64_t i = 0; i < n; i++) {
                        double gi = rg[i] + (double)c->wd * rp[i], ga = fabs(rg[i]) + (double)c->wd * fabs(rp[i]);
                        double s1 = c->rho * rs[i] + (1 - (double)c->rho) * gi * gi;
                        ms[i] = c->rho * rs[i] + (1 - (double)c->rho) * ga * ga;
                        double dm = sqrt(ra[i] + c->eps) / sqrt(s1 + c->eps) * (ga + fabs(gi) * ms[i] / (s1 + c->eps));
                        ma[i] = c->rho * ra[i] + (1 - (double)c->rho) * dm * dm;
                        mp[i] = c->lr * dm;
                    }
                    ref_adadelta_step(n, rp, rg, rs, ra, c->lr, c->rho, c->eps, c->wd);
                    if (!call_ok(odl_adadelta_step(tp, tg, tsq, tacc, c->lr, c->rho, c->eps, c->wd),
                                 "odl_adadelta_step"))
                        break;
                    dget("p", tp, p);
                    dget("sq", tsq, sq);
                    dget("acc", tacc, acc);
                    cmpr r = cmp_f32(p, rp, mp, n, 1.0, 0);
                    if (r.err > ep) ep = r.err;
                    if (!(r.err <= tol)) report_cmp("p", r, p, rp, tol);
                    r = cmp_f32(sq, rs, ms, n, 1.0, 0);
                    if (r.err > es) es = r.err;
                    if (!(r.err <= tol)) report_cmp("sq", r, sq, rs, tol);
                    r = cmp_f32(acc, ra, ma, n, 1.0, 0);
                    if (r.err > ea) ea = r.err;
                    if (!(r.err <= tol)) report_cmp("acc", r, acc, ra, tol);
                    dsame("g", tg, gs[s - 1]);
                }
                line_add("p", ep, tol);
                line_add("sq", es, tol);
                line_add("acc", ea, tol);
                line_end();
                dfree_all();
            }
            arena_free();
        }
}

/* ================================================================ invalid calls */

/* Each op is called through a wrapper on an array of tensors; the driver first checks that the valid call
 * succeeds, then replaces one argument at a time by: NULL (unless optional), a copy of the wrong dtype, a
 * copy on another device, and a copy with one dimension one larger (unless that dimension is free for
 * the op, e.g. the rows of sum_rows' input). Each must return ODL_E_INVAL with a message. Buffers are
 * allocated with room to spare, so that an op that fails to validate does not write out of bounds. */
#define BAD_MAX_ARGS 10
typedef struct bad_arg {
    const char *name;
    odl_dtype dt;
    int ndim;
    int64_t shape[4];
    int optional;  /* may be NULL */
    int free_dims; /* bit d: dimension d may legally differ (not checked) */
} bad_arg;
typedef odl_status (*bad_fn)(odl_tensor *const *t);
typedef struct bad_op {
    const char *op;
    bad_fn call;
    int n;
    bad_arg a[BAD_MAX_ARGS];
} bad_op;

static odl_status bc_gemm(odl_tensor *const *t) {
    return odl_gemm(0, 1, 1.f, t[0], t[1], 0.f, t[2], t[3], t[4], ODL_ACT_RELU);
}
static odl_status bc_lin_fwd(odl_tensor *const *t) { return odl_linear_fwd(t[0], t[1], t[2], ODL_ACT_NONE, t[3]); }
static odl_status bc_lin_bwd(odl_tensor *const *t) { return odl_linear_bwd(t[0], t[1], t[2], t[3], t[4], t[5]); }
static odl_status bc_conv_fwd(odl_tensor *const *t) {
    return odl_conv2d_fwd(t[0], t[1], t[2], t[3], ODL_ACT_SILU, 1, 1, t[4]);
}
static odl_status bc_conv_bwd(odl_tensor *const *t) { return odl_conv2d_bwd(t[0], t[1], t[2], 1, 1, t[3], t[4], t[5]); }
/* x, w, dy, dx (nullable), dw, db (nullable) of a 3x3 convolution, pad 1, 2 -> 3 channels */
#define CONV_BWD_ARGS                                                                                                   \
    {{"x", F32, 4, {1, 2, 5, 6}, 0, 0}, {"w", F32, 4, {3, 2, 3, 3}, 0, 0}, {"dy", F32, 4, {1, 3, 5, 6}, 0, 0},          \
     {"dx", F32, 4, {1, 2, 5, 6}, 1, 0}, {"dw", F32, 4, {3, 2, 3, 3}, 0, 0}, {"db", F32, 1, {3}, 1, 0}}
static odl_status bc_conv_relu_bwd(odl_tensor *const *t) {
    return odl_conv2d_relu_bwd(t[0], t[1], t[2], 1, 1, t[3], t[4], t[5]);
}
static odl_status bc_conv_relu_out_bwd(odl_tensor *const *t) {
    return odl_conv2d_relu_out_bwd_weight(t[0], t[1], t[2], t[3], 1, 1, t[4], t[5]);
}
static odl_status bc_pool_fwd(odl_tensor *const *t) { return odl_maxpool2d_fwd(t[0], 3, 1, 1, t[1], t[2]); }
static odl_status bc_pool_bwd(odl_tensor *const *t) { return odl_maxpool2d_bwd(t[0], t[1], 3, 1, 1, t[2]); }
static odl_status bc_pool_relu_bwd(odl_tensor *const *t) { return odl_maxpool2d_relu_bwd(t[0], t[1], t[2], 3, 1, 1, t[3]); }
static odl_status bc_act_fwd(odl_tensor *const *t) { return odl_act_fwd(ODL_ACT_SIGMOID, t[0], t[1]); }
static odl_status bc_act_bwd(odl_tensor *const *t) { return odl_act_bwd(ODL_ACT_SIGMOID, t[0], t[1], t[2], t[3]); }
static odl_status bc_drop_fwd(odl_tensor *const *t) { return odl_dropout_fwd(.5f, 1, 2, t[0], t[1]); }
static odl_status bc_drop_bwd(odl_tensor *const *t) { return odl_dropout_bwd(.5f, 1, 2, t[0], t[1]); }
static odl_status bc_bn_infer(odl_tensor *const *t) {
    return odl_batchnorm_infer(t[0], t[1], t[2], t[3], t[4], 1e-5f, t[5]);
}
static odl_status bc_bn_train(odl_tensor *const *t) {
    return odl_batchnorm_train_fwd(t[0], t[1], t[2], t[3], t[4], .1f, 1e-5f, t[5], t[6], t[7]);
}
static odl_status bc_bn_bwd(odl_tensor *const *t) {
    return odl_batchnorm_bwd(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]);
}
static odl_status bc_up_fwd(odl_tensor *const *t) { return odl_upsample2x_fwd(t[0], t[1]); }
static odl_status bc_up_bwd(odl_tensor *const *t) { return odl_upsample2x_bwd(t[0], t[1]); }
static odl_status bc_cat_fwd(odl_tensor *const *t) {
    const odl_tensor *xs[2] = {t[0], t[1]};
    return odl_concat_channels_fwd(2, xs, t[2]);
}
static odl_status bc_cat_bwd(odl_tensor *const *t) {
    odl_tensor *dxs[2] = {t[1], t[2]};
    return odl_concat_channels_bwd(t[0], 2, dxs);
}
static odl_status bc_lsm_fwd(odl_tensor *const *t) { return odl_log_softmax_nll_fwd(t[0], t[1], t[2], t[3]); }
static odl_status bc_lsm_bwd(odl_tensor *const *t) { return odl_log_softmax_nll_bwd(t[0], t[1], 1.f, t[2]); }
static odl_status bc_argmax(odl_tensor *const *t) { return odl_argmax_rows(t[0], t[1]); }
static odl_status bc_add(odl_tensor *const *t) { return odl_add(t[0], t[1], t[2]); }
static odl_status bc_mul(odl_tensor *const *t) { return odl_mul(t[0], t[1], t[2]); }
static odl_status bc_scale(odl_tensor *const *t) { return odl_scale(2.f, t[0], t[1]); }
static odl_status bc_axpy(odl_tensor *const *t) { return odl_axpy(2.f, t[0], t[1]); }
static odl_status bc_sum_rows(odl_tensor *const *t) { return odl_sum_rows(t[0], t[1]); }
static odl_status bc_sum(odl_tensor *const *t) { return odl_sum(t[0], t[1]); }
static odl_status bc_sgd(odl_tensor *const *t) { return odl_sgd_step(t[0], t[1], t[2], .1f, .9f, 0.f, 0.f, 0, 1); }
static odl_status bc_adam(odl_tensor *const *t) {
    return odl_adam_step(t[0], t[1], t[2], t[3], 1e-3f, .9f, .999f, 1e-8f, 0.f, 0, 1);
}
static odl_status bc_adadelta(odl_tensor *const *t) {
    return odl_adadelta_step(t[0], t[1], t[2], t[3], 1.f, .9f, 1e-6f, 0.f);
}

#define F32 ODL_F32
#define I32 ODL_I32
static const bad_op BAD_OPS[] = {
    {"gemm",
     bc_gemm,
     5,
     {{"A", F32, 2, {3, 5}, 0, 0},
      {"B", F32, 2, {4, 5}, 0, 0},
      {"C", F32, 2, {3, 4}, 0, 0},
      {"bias", F32, 1, {4}, 1, 0},
      {"residual", F32, 2, {3, 4}, 1, 0}}},
    {"linear_fwd",
     bc_lin_fwd,
     4,
     {{"x", F32, 2, {2, 5}, 0, 0}, {"w", F32, 2, {3, 5}, 0, 0}, {"b", F32, 1, {3}, 1, 0}, {"y", F32, 2, {2, 3}, 0, 0}}},
    {"linear_bwd",
     bc_lin_bwd,
     6,
     {{"x", F32, 2, {2, 5}, 0, 0},
      {"w", F32, 2, {3, 5}, 0, 0},
      {"dy", F32, 2, {2, 3}, 0, 0},
      {"dx", F32, 2, {2, 5}, 1, 0},
      {"dw", F32, 2, {3, 5}, 0, 0},
      {"db", F32, 1, {3}, 1, 0}}},
    {"conv2d_fwd",
     bc_conv_fwd,
     5,
     {{"x", F32, 4, {1, 2, 5, 6}, 0, 0},
      {"w", F32, 4, {3, 2, 3, 3}, 0, 0},
      {"b", F32, 1, {3}, 1, 0},
      {"residual", F32, 4, {1, 3, 5, 6}, 1, 0},
      {"y", F32, 4, {1, 3, 5, 6}, 0, 0}}},
    {"conv2d_bwd", bc_conv_bwd, 6, CONV_BWD_ARGS},
    {"conv2d_relu_bwd", bc_conv_relu_bwd, 6, CONV_BWD_ARGS},
    {"conv2d_relu_out_bwd_weight",
     bc_conv_relu_out_bwd,
     6,
     {{"x", F32, 4, {1, 2, 5, 6}, 0, 0}, {"w", F32, 4, {3, 2, 3, 3}, 0, 0}, {"y", F32, 4, {1, 3, 5, 6}, 0, 0},
      {"dy", F32, 4, {1, 3, 5, 6}, 0, 0}, {"dw", F32, 4, {3, 2, 3, 3}, 0, 0}, {"db", F32, 1, {3}, 1, 0}}},
    {"maxpool2d_fwd",
     bc_pool_fwd,
     3,
     {{"x", F32, 4, {1, 2, 5, 6}, 0, 0}, {"y", F32, 4, {1, 2, 5, 6}, 0, 0}, {"argmax", I32, 4, {1, 2, 5, 6}, 1, 0}}},
    {"maxpool2d_bwd",
     bc_pool_bwd,
     3,
     {{"dy", F32, 4, {1, 2, 5, 6}, 0, 0}, {"argmax", I32, 4, {1, 2, 5, 6}, 0, 0}, {"dx", F32, 4, {1, 2, 5, 6}, 0, 0}}},
    {"maxpool2d_relu_bwd",
     bc_pool_relu_bwd,
     4,
     {{"dy", F32, 4, {1, 2, 5, 6}, 0, 0},
      {"argmax", I32, 4, {1, 2, 5, 6}, 0, 0},
      {"y", F32, 4, {1, 2, 5, 6}, 0, 0},
      {"dx", F32, 4, {1, 2, 5, 6}, 0, 0}}},
    {"act_fwd", bc_act_fwd, 2, {{"x", F32, 2, {2, 3}, 0, 0}, {"y", F32, 2, {2, 3}, 0, 0}}},
    {"act_bwd",
     bc_act_bwd,
     4,
     {{"x", F32, 2, {2, 3}, 0, 0},
      {"y", F32, 2, {2, 3}, 1, 0},
      {"dy", F32, 2, {2, 3}, 0, 0},
      {"dx", F32, 2, {2, 3}, 0, 0}}},
    {"dropout_fwd", bc_drop_fwd, 2, {{"x", F32, 1, {7}, 0, 0}, {"y", F32, 1, {7}, 0, 0}}},
    {"dropout_bwd", bc_drop_bwd, 2, {{"dy", F32, 1, {7}, 0, 0}, {"dx", F32, 1, {7}, 0, 0}}},
    {"batchnorm_infer",
     bc_bn_infer,
     6,
     {{"x", F32, 4, {2, 3, 2, 2}, 0, 0},
      {"gamma", F32, 1, {3}, 0, 0},
      {"beta", F32, 1, {3}, 0, 0},
      {"mean", F32, 1, {3}, 0, 0},
      {"var", F32, 1, {3}, 0, 0},
      {"y", F32, 4, {2, 3, 2, 2}, 0, 0}}},
    {"batchnorm_train_fwd",
     bc_bn_train,
     8,
     {{"x", F32, 4, {2, 3, 2, 2}, 0, 0},
      {"gamma", F32, 1, {3}, 0, 0},
      {"beta", F32, 1, {3}, 0, 0},
      {"running_mean", F32, 1, {3}, 0, 0},
      {"running_var", F32, 1, {3}, 0, 0},
      {"y", F32, 4, {2, 3, 2, 2}, 0, 0},
      {"save_mean", F32, 1, {3}, 0, 0},
      {"save_invstd", F32, 1, {3}, 0, 0}}},
    {"batchnorm_bwd",
     bc_bn_bwd,
     8,
     {{"x", F32, 4, {2, 3, 2, 2}, 0, 0},
      {"dy", F32, 4, {2, 3, 2, 2}, 0, 0},
      {"gamma", F32, 1, {3}, 0, 0},
      {"save_mean", F32, 1, {3}, 0, 0},
      {"save_invstd", F32, 1, {3}, 0, 0},
      {"dx", F32, 4, {2, 3, 2, 2}, 0, 0},
      {"dgamma", F32, 1, {3}, 0, 0},
      {"dbeta", F32, 1, {3}, 0, 0}}},
    {"upsample2x_fwd", bc_up_fwd, 2, {{"x", F32, 4, {1, 2, 3, 4}, 0, 0}, {"y", F32, 4, {1, 2, 6, 8}, 0, 0}}},
    {"upsample2x_bwd", bc_up_bwd, 2, {{"dy", F32, 4, {1, 2, 6, 8}, 0, 0}, {"dx", F32, 4, {1, 2, 3, 4}, 0, 0}}},
    {"concat_channels_fwd",
     bc_cat_fwd,
     3,
     {{"x0", F32, 4, {2, 1, 3, 3}, 0, 0}, {"x1", F32, 4, {2, 2, 3, 3}, 0, 0}, {"y", F32, 4, {2, 3, 3, 3}, 0, 0}}},
    {"concat_channels_bwd",
     bc_cat_bwd,
     3,
     {{"dy", F32, 4, {2, 3, 3, 3}, 0, 0}, {"dx0", F32, 4, {2, 1, 3, 3}, 1, 0}, {"dx1", F32, 4, {2, 2, 3, 3}, 1, 0}}},
    {"log_softmax_nll_fwd",
     bc_lsm_fwd,
     4,
     {{"logits", F32, 2, {4, 5}, 0, 0},
      {"labels", I32, 1, {4}, 0, 0},
      {"logprobs", F32, 2, {4, 5}, 0, 0},
      {"loss", F32, 1, {1}, 0, 0}}},
    {"log_softmax_nll_bwd",
     bc_lsm_bwd,
     3,
     {{"logprobs", F32, 2, {4, 5}, 0, 0}, {"labels", I32, 1, {4}, 0, 0}, {"dlogits", F32, 2, {4, 5}, 0, 0}}},
    {"argmax_rows", bc_argmax, 2, {{"x", F32, 2, {4, 5}, 0, 2}, {"out", I32, 1, {4}, 0, 0}}},
    {"add", bc_add, 3, {{"a", F32, 1, {7}, 0, 0}, {"b", F32, 1, {7}, 0, 0}, {"y", F32, 1, {7}, 0, 0}}},
    {"mul", bc_mul, 3, {{"a", F32, 1, {7}, 0, 0}, {"b", F32, 1, {7}, 0, 0}, {"y", F32, 1, {7}, 0, 0}}},
    {"scale", bc_scale, 2, {{"x", F32, 1, {7}, 0, 0}, {"y", F32, 1, {7}, 0, 0}}},
    {"axpy", bc_axpy, 2, {{"x", F32, 1, {7}, 0, 0}, {"y", F32, 1, {7}, 0, 0}}},
    {"sum_rows", bc_sum_rows, 2, {{"x", F32, 2, {3, 4}, 0, 1}, {"y", F32, 1, {4}, 0, 0}}},
    {"sum", bc_sum, 2, {{"x", F32, 2, {2, 3}, 0, 3}, {"out", F32, 1, {1}, 0, 0}}},
    {"sgd_step", bc_sgd, 3, {{"p", F32, 1, {5}, 0, 0}, {"g", F32, 1, {5}, 0, 0}, {"buf", F32, 1, {5}, 0, 0}}},
    {"adam_step",
     bc_adam,
     4,
     {{"p", F32, 1, {5}, 0, 0}, {"g", F32, 1, {5}, 0, 0}, {"m", F32, 1, {5}, 0, 0}, {"v", F32, 1, {5}, 0, 0}}},
    {"adadelta_step",
     bc_adadelta,
     4,
     {{"p", F32, 1, {5}, 0, 0}, {"g", F32, 1, {5}, 0, 0}, {"sq", F32, 1, {5}, 0, 0}, {"acc", F32, 1, {5}, 0, 0}}},
};
#define N_BAD ((int)(sizeof BAD_OPS / sizeof BAD_OPS[0]))

/* A zero-filled buffer with room for twice the elements (+16), and a tensor struct over it. */
static odl_tensor bad_tensor(odl_device dev, odl_dtype dt, int ndim, const int64_t *shape, odl_tensor *owner) {
    int64_t n = shape_numel(ndim, shape) * 2 + 16;
    odl_tensor t;
    memset(&t, 0, sizeof t);
    memset(owner, 0, sizeof *owner);
    odl_status s = odl_tensor_zeros(owner, dev, dt, 1, &n);
    if (s != ODL_OK) {
        fprintf(stderr, "FAIL allocating a tensor on %s: %s\n", odl_device_name(dev), odl_error_msg());
        odl_test_failures++;
        return t;
    }
    t = *owner;
    t.owns = 0;
    t.ndim = ndim;
    for (int i = 0; i < ODL_MAX_DIMS; i++)
        t.shape[i] = i < ndim ? shape[i] : 1;
    return t;
}

static void run_bad_op(const bk *b, const bad_op *op) {
    int fail0 = odl_test_failures, checks0 = odl_test_checks;
    odl_tensor own[BAD_MAX_ARGS], other_own[BAD_MAX_ARGS], valid[BAD_MAX_ARGS], other[BAD_MAX_ARGS];
    odl_tensor *args[BAD_MAX_ARGS];
    /* another device: the CUDA device for the CPU backend and vice versa; without a second device a
     * struct that claims cuda:0 over host memory (it must be rejected before anything reads it) */
    int real_other = g_have_cuda;
    odl_device odev = b->dev.type == ODL_DEV_CPU ? odl_cuda(0) : odl_cpu();
    for (int i = 0; i < op->n; i++) {
        valid[i] = bad_tensor(b->dev, op->a[i].dt, op->a[i].ndim, op->a[i].shape, &own[i]);
        if (real_other) {
            other[i] = bad_tensor(odev, op->a[i].dt, op->a[i].ndim, op->a[i].shape, &other_own[i]);
        } else {
            memset(&other_own[i], 0, sizeof other_own[i]);
            other[i] = valid[i];
            other[i].device = odev;
        }
    }
    odl_tensor mut;
    for (int i = 0; i < op->n; i++)
        args[i] = &valid[i];
    TOK(op->call(args));
    for (int i = 0; i < op->n; i++) {
        const bad_arg *a = &op->a[i];
        if (!a->optional) {
            args[i] = NULL;
            TFAIL(op->call(args), ODL_E_INVAL);
        }
        mut = valid[i];
        mut.dtype = a->dt == ODL_F32 ? ODL_I32 : ODL_F32;
        args[i] = &mut;
        TFAIL(op->call(args), ODL_E_INVAL);
        if (real_other || i > 0) {
            args[i] = &other[i];
            TFAIL(op->call(args), ODL_E_INVAL);
        }
        for (int d = 0; d < a->ndim; d++) {
            if (a->free_dims & (1 << d)) continue;
            mut = valid[i];
            mut.shape[d] += 1;
            args[i] = &mut;
            TFAIL(op->call(args), ODL_E_INVAL);
        }
        mut = valid[i];
        mut.data = NULL; /* a tensor without memory */
        args[i] = &mut;
        TFAIL(op->call(args), ODL_E_INVAL);
        args[i] = &valid[i];
    }
    for (int i = op->n - 1; i >= 0; i--) {
        odl_tensor_free(&other_own[i]);
        odl_tensor_free(&own[i]);
    }
    char desc[96];
    snprintf(desc, sizeof desc, "%s: %d invalid calls", op->op, odl_test_checks - checks0 - 1);
    printf("%-7s %-20s %-46s %s\n", b->name, "bad_calls", desc, odl_test_failures > fail0 ? "FAIL" : "ok");
    fflush(stdout);
}

/* Invalid scalar arguments that would otherwise divide by zero or index out of bounds. */
static void run_bad_scalars(const bk *b) {
    int fail0 = odl_test_failures, checks0 = odl_test_checks;
    odl_tensor o[11], x, w, y, a, x2, y2, big;
    memset(o, 0, sizeof o);
    x = bad_tensor(b->dev, F32, 4, SH(1, 2, 5, 5), &o[0]);
    w = bad_tensor(b->dev, F32, 4, SH(3, 2, 3, 3), &o[1]);
    y = bad_tensor(b->dev, F32, 4, SH(1, 3, 5, 5), &o[2]);
    a = bad_tensor(b->dev, I32, 4, SH(1, 2, 5, 5), &o[3]);
    x2 = bad_tensor(b->dev, F32, 4, SH(1, 2, 2, 2), &o[4]);
    y2 = bad_tensor(b->dev, F32, 4, SH(1, 3, 1, 1), &o[5]);
    big = bad_tensor(b->dev, F32, 4, SH(3, 2, 5, 5), &o[6]);
    odl_tensor py = bad_tensor(b->dev, F32, 4, SH(1, 2, 5, 5), &o[7]);
    if (want("conv2d_fwd")) {
        TFAIL(odl_conv2d_fwd(&x, &w, NULL, NULL, ODL_ACT_NONE, 0, 1, &y), ODL_E_INVAL);     /* stride 0 */
        TFAIL(odl_conv2d_fwd(&x, &w, NULL, NULL, ODL_ACT_NONE, 1, -1, &y), ODL_E_INVAL);    /* pad < 0 */
        TFAIL(odl_conv2d_fwd(&x2, &big, NULL, NULL, ODL_ACT_NONE, 1, 0, &y2), ODL_E_INVAL); /* window > input */
        TFAIL(odl_conv2d_fwd(&x, &w, NULL, NULL, (odl_act)99, 1, 1, &y), ODL_E_INVAL);      /* unknown act */
    }
    if (want("conv2d_bwd")) TFAIL(odl_conv2d_bwd(&x, &w, &y, 0, 1, &x, &w, NULL), ODL_E_INVAL);
    if (want("maxpool2d_fwd")) {
        TFAIL(odl_maxpool2d_fwd(&x, 0, 1, 0, &py, &a), ODL_E_INVAL); /* kernel 0 */
        TFAIL(odl_maxpool2d_fwd(&x, 3, 0, 1, &py, &a), ODL_E_INVAL); /* stride 0 */
        TFAIL(odl_maxpool2d_fwd(&x, 3, 1, -1, &py, &a), ODL_E_INVAL);
    }
    if (want("maxpool2d_bwd")) TFAIL(odl_maxpool2d_bwd(&py, &a, 3, 0, 1, &x), ODL_E_INVAL);
    if (want("act_fwd")) TFAIL(odl_act_fwd((odl_act)99, &x, &py), ODL_E_INVAL);
    if (want("dropout_fwd")) {
        TFAIL(odl_dropout_fwd(1.f, 1, 0, &x, &py), ODL_E_INVAL);
        TFAIL(odl_dropout_fwd(-.5f, 1, 0, &x, &py), ODL_E_INVAL);
        TFAIL(odl_dropout_fwd(NAN, 1, 0, &x, &py), ODL_E_INVAL);
    }
    if (want("dropout_bwd")) TFAIL(odl_dropout_bwd(1.f, 1, 0, &x, &py), ODL_E_INVAL);
    if (want("concat_channels_bwd")) {
        /* NULL, dx1, NULL, dx3: the offset of dx1 is unknown (odl/ops.h allows one NULL or trailing NULLs) */
        odl_tensor c1 = bad_tensor(b->dev, F32, 4, SH(1, 1, 5, 5), &o[8]),
                   c3 = bad_tensor(b->dev, F32, 4, SH(1, 1, 5, 5), &o[9]);
        odl_tensor *dxs[4] = {NULL, &c1, NULL, &c3};
        odl_tensor dyc = bad_tensor(b->dev, F32, 4, SH(1, 5, 5, 5), &o[10]);
        TFAIL(odl_concat_channels_bwd(&dyc, 4, dxs), ODL_E_INVAL);
    }
    if (want("concat_channels_fwd")) {
        const odl_tensor *xs[1] = {&x};
        TFAIL(odl_concat_channels_fwd(0, xs, &py), ODL_E_INVAL);
        TFAIL(odl_concat_channels_fwd(1, NULL, &py), ODL_E_INVAL);
    }
    for (int i = 10; i >= 0; i--)
        odl_tensor_free(&o[i]);
    if (odl_test_checks > checks0)
        printf("%-7s %-20s %-46s %s\n", b->name, "bad_calls", "bad scalar arguments",
               odl_test_failures > fail0 ? "FAIL" : "ok");
}

static void run_bad_calls(void) {
    int all = g_filter && strcmp(g_filter, "bad_calls") == 0;
    const char *save = g_filter;
    if (all) g_filter = NULL;
    for (int b = 0; b < g_nbk; b++) {
        for (int i = 0; i < N_BAD; i++)
            if (want(BAD_OPS[i].op)) run_bad_op(&g_bk[b], &BAD_OPS[i]);
        run_bad_scalars(&g_bk[b]);
    }
    g_filter = save;
}

/* ================================================================ main */

static void usage(void) {
    fprintf(stderr, "usage: test_ops [--backend cpu|cuda|all] [--seed N] [--op NAME] [--list]\n");
}

int main(int argc, char **argv) {
    const char *backend = "all";
    int have_seed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            backend = argv[++i];
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            char *end;
            g_seed = strtoull(argv[++i], &end, 0);
            if (*end) {
                fprintf(stderr, "test_ops: bad --seed '%s'\n", argv[i]);
                return 2;
            }
            have_seed = 1;
        } else if (!strcmp(argv[i], "--op") && i + 1 < argc) {
            g_filter = argv[++i];
        } else if (!strcmp(argv[i], "--list")) {
            for (int k = 0; k < N_OPS; k++)
                printf("%s\n", OP_NAMES[k]);
            return 0;
        } else {
            usage();
            return 2;
        }
    }
    if (strcmp(backend, "cpu") && strcmp(backend, "cuda") && strcmp(backend, "all")) {
        fprintf(stderr, "test_ops: unknown backend '%s' (cpu, cuda or all)\n", backend);
        return 2;
    }
    if (g_filter) {
        int any = 0;
        for (int k = 0; k < N_OPS; k++) {
            if (!strcmp(OP_NAMES[k], g_filter)) g_filter_exact = 1;
            if (strstr(OP_NAMES[k], g_filter)) any = 1;
        }
        if (!any) {
            fprintf(stderr, "test_ops: no op matches '%s' (see --list)\n", g_filter);
            return 2;
        }
    }
    if (!have_seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        g_seed = ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 20);
        g_seed &= 0xFFFFFFFFFFFFull;
    }
    printf("test_ops: seed %" PRIu64 " (reproduce with --seed %" PRIu64 ")\n", g_seed, g_seed);

    int want_cpu = strcmp(backend, "cuda") != 0, want_cuda = strcmp(backend, "cpu") != 0;
    if (want_cuda) {
        int built = odl_cuda_built(), ndev = built ? odl_cuda_device_count() : 0;
        if (ndev <= 0) {
            if (!want_cpu) {
                printf("test_ops: skipped: no CUDA device (%s)\n", built ? "no device visible" : "CPU-only build");
                return ODL_TEST_SKIP;
            }
            printf("test_ops: no CUDA device (%s); CPU only\n", built ? "no device visible" : "CPU-only build");
        } else {
            odl_status st = odl_cuda_init(0, 0.2);
            if (st != ODL_OK) {
                printf("test_ops: FAIL: odl_cuda_init(0, 0.2): %s: %s\n", odl_status_str(st), odl_error_msg());
                return 1;
            }
            g_have_cuda = 1;
        }
    }
    if (want_cpu) {
        const odl_backend *be = odl_backend_for(odl_cpu());
        if (!be) {
            printf("test_ops: FAIL: no CPU backend: %s\n", odl_error_msg());
            return 1;
        }
        g_bk[g_nbk++] = (bk){"cpu", odl_cpu(), be};
    }
    if (g_have_cuda) {
        const odl_backend *be = odl_backend_for(odl_cuda(0));
        if (!be) {
            printf("test_ops: FAIL: no CUDA backend for cuda:0: %s\n", odl_error_msg());
            return 1;
        }
        g_bk[g_nbk++] = (bk){"cuda:0", odl_cuda(0), be};
    }
    printf("test_ops: backends:");
    for (int b = 0; b < g_nbk; b++)
        printf(" %s (%s)", g_bk[b].name, g_bk[b].be->name ? g_bk[b].be->name : "?");
    printf("\n");

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (want("gemm")) run_gemm();
    if (want("linear_fwd")) run_linear_fwd();
    if (want("linear_bwd")) run_linear_bwd();
    if (want("conv2d_fwd")) run_conv_fwd();
    if (want("conv2d_bwd")) run_conv_bwd();
    if (want("maxpool2d_fwd")) run_pool_fwd();
    if (want("maxpool2d_bwd")) run_pool_bwd();
    if (want("act_fwd")) run_act_fwd();
    if (want("act_bwd")) run_act_bwd();
    if (want("dropout_fwd")) run_dropout(0);
    if (want("dropout_bwd")) run_dropout(1);
    if (want("batchnorm_infer")) run_bn_infer();
    if (want("batchnorm_train_fwd")) run_bn_train();
    if (want("batchnorm_bwd")) run_bn_bwd();
    if (want("upsample2x_fwd")) run_upsample(0);
    if (want("upsample2x_bwd")) run_upsample(1);
    if (want("concat_channels_fwd")) run_concat(0);
    if (want("concat_channels_bwd")) run_concat(1);
    if (want("log_softmax_nll_fwd")) run_lsm_fwd();
    if (want("log_softmax_nll_bwd")) run_lsm_bwd();
    if (want("argmax_rows")) run_argmax();
    if (want("add")) run_ew(0);
    if (want("mul")) run_ew(1);
    if (want("scale")) run_ew(2);
    if (want("axpy")) run_ew(3);
    if (want("fill")) run_fill();
    if (want("sum_rows")) run_sum_rows();
    if (want("sum")) run_sum();
    if (want("sgd_step")) run_sgd();
    if (want("adam_step")) run_adam();
    if (want("adadelta_step")) run_adadelta();
    run_bad_calls();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("test_ops: %.1f s\n", secs);
    if (odl_test_failures)
        printf("test_ops: FAILED; reproduce with: test_ops --seed %" PRIu64 " --backend %s%s%s\n", g_seed, backend,
               g_filter ? " --op " : "", g_filter ? g_filter : "");
    free(g_arena);
    if (g_have_cuda) TOK(odl_cuda_shutdown()); /* no device memory left in use */
    return odl_test_finish("test_ops");
}
