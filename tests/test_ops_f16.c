/* test_ops_f16: the float16 NHWC inference entries of the op table (odl/backend.h: conv2d_f16,
 * maxpool2d_f16, upsample2x_f16, copy_f16, nchw_f32_to_nhwc_f16), the half conversions of odl/half.h and
 * odl_conv2d_f16_check.
 *
 *   test_ops_f16 [--backend cpu|cuda]
 *
 * --backend  cpu (default) or cuda: CUDA device 0 (prints "skipped: no CUDA device" and exits 77, ctest's
 *            skip code, in a CPU-only build or without a device; set up with odl_cuda_init(0, 0.2)).
 * Inputs come from a fixed-seed generator (one stream per case), uniform in [-1, 1], convolution weights
 * scaled by 1/sqrt(R*S*C); every input is rounded to half first and the float64 reference is computed
 * from exactly those halves (converted by this file's own half -> double, not odl/half.h).
 * Every output buffer has room before, between (ld > channels) and after the written region, filled with
 * a sentinel that must survive; inputs must be unchanged after the call.
 * Output: one line per case with the largest err / tol, then "test_ops_f16 <backend>: N checks, F failed".
 *
 * ---------------------------------------------------------------------------------------------------
 * Conversions (odl/half.h), against this file's reference (nearest half found by comparing with the
 * exact midpoints of neighbouring halves, in double):
 *   all 65536 halves: half -> float is exact and float -> half gives the half back (NaN: stays NaN, quiet);
 *   every midpoint between neighbouring finite halves goes to the even one, one float above/below it to
 *   the nearer; 65519.99f -> 65504, 65520 -> inf; 2^20 random float bit patterns. Exact (bits).
 *
 * conv2d_f16 tolerance, per output element. u = 2^-24 (float32 unit roundoff).
 *   Products float(x)*float(w) of two halves (11-bit significands) are exact in float32 (22 bits; the
 *   smallest is 2^-48, far above float's normal range). Only the additions round: the n = R*S*C products
 *   and the bias are n' = n + 1 terms, summed in any order. With each addition off by at most one float
 *   ulp, relative 2u (covers round-to-nearest and the truncating adds of some tensor-core accumulators),
 *   Higham's bound (3.1) gives
 *     e_v = g(n') * M,   g(m) = 2um / (1 - 2um),   M = sum |x w| + |bias|.
 *   act NONE: e_a = e_v.  RELU: e_a = e_v (1-Lipschitz, exact).
 *   SILU: |silu'| <= 1.1 and the evaluation v / (1 + exp(-v)) errs by at most 40u relative to the
 *     value (exp within 32u, which covers libm and CUDA's __expf (2 + floor(1.17|v|) ulp) for |v| <= 10 -
 *     our |v| stay below 4 -, plus one add and one divide): e_a = 1.1 e_v + 40u (|silu(v)| + 1.1 e_v).
 *   residual add (exact half operand, one float rounding): e_z = e_a + 2u (|ref| + e_a).
 *   y_f32: tol = e_z.  half: one round to nearest even, relative 2^-11, absolute 2^-25 in the subnormal
 *     range: tol = e_z + 2^-11 (|ref| + e_z) + 2^-25.
 *   Plus the float64 reference's own error, (n' + 8) 2^-52 (M + |ref|) (negligible).
 * Max-pool, upsample, copy: exact (bit copies); pool inputs are multiples of 1/4 with many ties and no -0.
 * nchw_f32_to_nhwc_f16: exact against the reference rounding (ties, subnormals, overflow to inf).
 * odl_conv2d_f16_check: a valid argument set passes; each broken requirement returns ODL_E_INVAL with a
 * message naming it.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "odl/backend.h"
#include "odl/device.h"
#include "odl/half.h"
#include "odl/status.h"
#include "odl/tensor.h"
#include "test_util.h"

#define U 5.9604644775390625e-8 /* 2^-24 */

static const odl_backend *g_be;
static odl_device g_dev;
static int g_is_cpu;

/* ================================================================ random numbers (splitmix64) */

static uint64_t g_rs;
static void rng_seed(uint64_t case_id) { g_rs = 0x5EEDF16ull * 1000003u + case_id * 0x9E3779B97F4A7C15ull; }
static uint64_t rng_u64(void) {
    uint64_t z = (g_rs += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Uniform in [-1, 1). */
static float rng_sym(void) { return (float)((double)(rng_u64() >> 40) * (1.0 / 8388608.0) - 1.0); }

/* ================================================================ reference half <-> double */

static int half_is_nan(odl_half h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0; }

/* Exact value of a finite or infinite half. */
static double ref_h2d(odl_half h) {
    const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double v;
    if (e == 0x1F)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, -24);
    else
        v = ldexp((double)(1024 + m), e - 25);
    return (h & 0x8000u) ? -v : v;
}

/* Nearest half to v (ties to even), overflow to inf; v not NaN. Binary search over the ordered positive
 * finite halves, then comparison with the exact midpoint of the two neighbours. */
static odl_half ref_d2h(double v) {
    const odl_half sign = signbit(v) ? 0x8000u : 0;
    const double a = fabs(v);
    if (a >= 65520.0) return sign | 0x7C00u; /* at or beyond the midpoint of 65504 and 2^16 */
    unsigned lo = 0, hi = 0x7BFF;            /* largest h with value(h) <= a */
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;
        if (ref_h2d((odl_half)mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo == 0x7BFF) return sign | 0x7BFF;
    const double mid = (ref_h2d((odl_half)lo) + ref_h2d((odl_half)(lo + 1))) / 2; /* exact */
    unsigned r = a < mid ? lo : a > mid ? lo + 1 : ((lo & 1) ? lo + 1 : lo);
    return (odl_half)(sign | r);
}

static float bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ================================================================ device buffers */

typedef struct dbuf {
    odl_tensor t;
    size_t bytes;
} dbuf;

/* A device buffer holding a copy of host[bytes]. Returns 0 (and counts a failure) on error. */
static int dput(dbuf *b, const void *host, size_t bytes) {
    memset(b, 0, sizeof *b);
    b->bytes = bytes;
    int64_t sh[1] = {(int64_t)bytes};
    odl_status st = odl_tensor_alloc(&b->t, g_dev, ODL_U8, 1, sh);
    if (st == ODL_OK) st = odl_tensor_copy_from_host(&b->t, host, bytes);
    TCHECK(st == ODL_OK, "allocating/uploading %zu bytes: %s", bytes, odl_error_msg());
    return st == ODL_OK;
}

static int dgetb(const dbuf *b, void *host) {
    odl_status st = odl_device_synchronize(g_dev);
    if (st == ODL_OK) st = odl_tensor_copy_to_host(&b->t, host, b->bytes);
    TCHECK(st == ODL_OK, "downloading %zu bytes: %s", b->bytes, odl_error_msg());
    return st == ODL_OK;
}

/* 1 when the device copy still equals host (an input the call must not modify). */
static int dsame(const dbuf *b, const void *host) {
    void *tmp = malloc(b->bytes ? b->bytes : 1);
    int ok = tmp && dgetb(b, tmp) && memcmp(tmp, host, b->bytes) == 0;
    free(tmp);
    return ok;
}

static void dfree(dbuf *b) { odl_tensor_free(&b->t); }

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test_ops_f16: out of host memory\n");
        exit(1);
    }
    return p;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Room before and after every output region, filled with the sentinel. */
#define HEAD 64
#define TAIL 64
#define SENT_H ((odl_half)0x7E5Au)  /* a NaN pattern no kernel produces */
#define SENT_F 0x7FC0DEADu

/* Count elements of y[HEAD + i] outside the region {j*ld + off + c : j < pix, c < C} (i relative to the
 * region's base) that no longer hold the sentinel. esize 2 (half) or 4 (float). */
static int64_t guard_changes(const void *ybuf, int esize, int64_t total, int64_t pix, int64_t ld, int64_t off,
                             int64_t C) {
    int64_t bad = 0;
    for (int64_t i = 0; i < total; i++) {
        int64_t r = i - HEAD;
        int inside = r >= 0 && r < pix * ld && (r % ld) >= off && (r % ld) < off + C;
        if (inside) continue;
        if (esize == 2)
            bad += ((const odl_half *)ybuf)[i] != SENT_H;
        else
            bad += ((const uint32_t *)ybuf)[i] != SENT_F;
    }
    return bad;
}

static void *sentinel_buf(int esize, int64_t total) {
    void *p = xmalloc((size_t)(total * esize));
    for (int64_t i = 0; i < total; i++) {
        if (esize == 2)
            ((odl_half *)p)[i] = SENT_H;
        else
            ((uint32_t *)p)[i] = SENT_F;
    }
    return p;
}

static odl_half *rand_halfs(int64_t n, float scale) {
    odl_half *h = xmalloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) h[i] = odl_float_to_half(rng_sym() * scale);
    return h;
}

/* ================================================================ half conversions */

static void test_half_conversions(void) {
    int64_t bad_exact = 0, bad_rt = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = odl_half_to_float((odl_half)h);
        if (half_is_nan((odl_half)h)) {
            const odl_half back = odl_float_to_half(f);
            bad_nan += !isnan(f) || !half_is_nan(back) || !(back & 0x200u) || ((back ^ h) & 0x8000u);
            continue;
        }
        const double r = ref_h2d((odl_half)h);
        bad_exact += (double)f != r || !signbit(f) != !signbit(r);
        bad_rt += odl_float_to_half(f) != (odl_half)h;
    }
    TCHECK(bad_exact == 0, "%" PRId64 " halves convert to a float other than their exact value", bad_exact);
    TCHECK(bad_rt == 0, "%" PRId64 " halves do not come back from float -> half", bad_rt);
    TCHECK(bad_nan == 0, "%" PRId64 " NaN halves do not stay (quiet, signed) NaN", bad_nan);

    /* every midpoint of neighbouring finite halves (both signs) and one float on either side */
    int64_t bad_tie = 0;
    for (uint32_t h = 0; h < 0x7BFF + 1; h++) {
        for (int sg = 0; sg < 2; sg++) {
            const odl_half s = sg ? 0x8000u : 0;
            const double a = ref_h2d((odl_half)h), b = h == 0x7BFF ? 65536.0 : ref_h2d((odl_half)(h + 1));
            const float mid = (float)((a + b) / 2); /* exact: 12 significant bits */
            const odl_half up = h == 0x7BFF ? 0x7C00u : (odl_half)(h + 1);
            const odl_half even = (h & 1) ? up : (odl_half)h;
            const float m = sg ? -mid : mid;
            bad_tie += odl_float_to_half(m) != (odl_half)(s | even);
            bad_tie += odl_float_to_half(nextafterf(m, sg ? -INFINITY : INFINITY)) != (odl_half)(s | up);
            bad_tie += odl_float_to_half(nextafterf(m, 0.0f)) != (odl_half)(s | h);
        }
    }
    TCHECK(bad_tie == 0, "%" PRId64 " midpoint roundings wrong", bad_tie);
    TCHECK(odl_float_to_half(65519.99f) == 0x7BFF, "65519.99 -> %#x, want 0x7bff (65504)",
           odl_float_to_half(65519.99f));
    TCHECK(odl_float_to_half(65520.0f) == 0x7C00, "65520 -> %#x, want 0x7c00 (inf)", odl_float_to_half(65520.0f));
    TCHECK(odl_float_to_half(-65520.0f) == 0xFC00, "-65520 -> %#x, want 0xfc00", odl_float_to_half(-65520.0f));
    TCHECK(odl_float_to_half(INFINITY) == 0x7C00 && odl_float_to_half(-INFINITY) == 0xFC00, "inf");
    TCHECK(odl_float_to_half(-0.0f) == 0x8000 && odl_float_to_half(0.0f) == 0, "signed zero");
    TCHECK(odl_float_to_half(ldexpf(1.0f, -25)) == 0, "2^-25 (tie) -> 0");
    TCHECK(odl_float_to_half(nextafterf(ldexpf(1.0f, -25), 1.0f)) == 1, "just above 2^-25 -> 2^-24");
    TCHECK(odl_float_to_half(ldexpf(1.5f, -24)) == 2, "1.5 * 2^-24 (tie) -> 2 * 2^-24");
    TCHECK(odl_float_to_half(ldexpf(1.0f, -149)) == 0, "smallest float subnormal -> 0");
    {
        const odl_half n1 = odl_float_to_half(NAN), n2 = odl_float_to_half(bitsf(0xFF800001u)); /* signalling */
        TCHECK(half_is_nan(n1) && (n1 & 0x200u), "NaN -> %#x", n1);
        TCHECK(half_is_nan(n2) && (n2 & 0x200u) && (n2 & 0x8000u), "-sNaN -> %#x (quiet, negative NaN)", n2);
    }

    /* random float bit patterns (all binades), 2^20 of them */
    int64_t bad_rand = 0;
    rng_seed(1);
    for (int i = 0; i < (1 << 20); i++) {
        const uint32_t u = (uint32_t)rng_u64();
        const float f = bitsf(u);
        const odl_half got = odl_float_to_half(f);
        if (isnan(f))
            bad_rand += !half_is_nan(got);
        else
            bad_rand += got != ref_d2h((double)f);
    }
    /* and floats near the half range, where rounding is interesting: exponent 2^-26 .. 2^16 */
    for (int i = 0; i < (1 << 20); i++) {
        const uint32_t e = 127 - 26 + (uint32_t)(rng_u64() % 43);
        const uint32_t u = ((uint32_t)(rng_u64() & 1) << 31) | (e << 23) | ((uint32_t)rng_u64() & 0x7FFFFFu);
        bad_rand += odl_float_to_half(bitsf(u)) != ref_d2h((double)bitsf(u));
    }
    TCHECK(bad_rand == 0, "%" PRId64 " random floats round differently from the reference", bad_rand);
    {
        float src[5] = {1.0f, -2.5f, 65504.0f, 1e-7f, 70000.0f}, back[5];
        odl_half h[5];
        odl_floats_to_halfs(src, h, 5);
        odl_halfs_to_floats(h, back, 5);
        int ok = 1;
        for (int i = 0; i < 5; i++) ok &= h[i] == ref_d2h(src[i]) && (double)back[i] == ref_h2d(h[i]);
        TCHECK(ok, "array conversions");
    }
    printf("half conversions: 65536 halves, %d midpoints, 2^21 random floats: %s\n", 2 * 3 * 0x7C00,
           bad_exact + bad_rt + bad_nan + bad_tie + bad_rand ? "FAIL" : "ok");
}

/* ================================================================ odl_conv2d_f16_check */

static void test_conv_check(void) {
    /* host buffers are enough: the check only looks at pointers and numbers */
    static _Alignas(16) odl_half xbuf[64], wbuf[64], ybuf[64], rbuf[64];
    odl_conv2d_f16_args g;
    memset(&g, 0, sizeof g);
    g.s = (odl_conv2d_shape){.N = 1, .C = 16, .H = 10, .W = 7, .K = 24, .R = 3, .S = 3,
                             .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .P = 5, .Q = 4};
    g.x = xbuf;
    g.ldx = 16;
    g.w = wbuf;
    g.act = ODL_ACT_SILU;
    g.residual = rbuf;
    g.ldr = 24;
    g.y = ybuf;
    g.ldy = 24;
    TOK(odl_conv2d_f16_check(&g));
    odl_conv2d_f16_args a;
#define BAD(field_change, keyword)                                                                           \
    do {                                                                                                     \
        a = g;                                                                                               \
        field_change;                                                                                        \
        TFAIL(odl_conv2d_f16_check(&a), ODL_E_INVAL);                                                        \
        TCHECK(strstr(odl_error_msg(), keyword) != NULL, "message '%s' should name '%s'", odl_error_msg(),   \
               keyword);                                                                                     \
    } while (0)
    TFAIL(odl_conv2d_f16_check(NULL), ODL_E_INVAL);
    BAD(a.x = NULL, "x is NULL");
    BAD(a.w = NULL, "w is NULL");
    BAD(a.y = NULL, "y is NULL");
    BAD(a.s.N = 0, "dimensions");
    BAD(a.s.C = 0, "dimensions");
    BAD(a.s.H = -1, "dimensions");
    BAD(a.s.W = 0, "dimensions");
    BAD(a.s.K = 0, "dimensions");
    BAD(a.s.R = 0, "dimensions");
    BAD(a.s.S = 0, "dimensions");
    BAD(a.s.stride_h = 0, "stride");
    BAD(a.s.stride_w = -1, "stride");
    BAD(a.s.pad_h = -1, "pad");
    BAD(a.s.P = 6, "output size");
    BAD(a.s.Q = 3, "output size");
    BAD((a.s.R = 13, a.s.P = 1), "does not fit"); /* 10 + 2 < 13 */
    a = g;
    a.s.H = 9; /* (9 + 2 - 3)/2 + 1 = 5 as for H = 10: valid (floor, as PyTorch) */
    TOK(odl_conv2d_f16_check(&a));
    BAD((a.s.C = 12, a.ldx = 16), "multiple of 8");
    BAD(a.ldx = 20, "ldx");
    BAD((a.s.C = 24, a.ldx = 16), "ldx");
    BAD(a.ldy = 22, "ldy");
    BAD((a.s.K = 23, a.ldy = 23), "even");
    BAD(a.ldr = 22, "ldr");
    BAD((a.s.K = 23, a.ldy = 24, a.ldr = 23), "even");
    BAD(a.residual = rbuf + 1, "residual");
    BAD(a.x = xbuf + 4, "16-byte"); /* 8 bytes off */
    BAD(a.w = (const odl_half *)((const char *)a.w + 8), "w ");
    BAD(a.y = ybuf + 1, "4-byte");
    BAD(a.act = (odl_act)7, "activation");
#undef BAD
    /* no residual: ldr is not looked at; odd K with even ldy is fine; y_f32 */
    a = g;
    a.residual = NULL;
    a.ldr = 3;
    a.s.K = 255;
    a.ldy = 256;
    a.y_f32 = 1;
    TOK(odl_conv2d_f16_check(&a));
    a.ldy = 255; /* float32 output: any stride (the YOLOv5 Detect head, 255 channels) */
    TOK(odl_conv2d_f16_check(&a));
    a = g;
    a.x = xbuf + 8; /* a channel slice at offset 8: 16-byte aligned */
    a.ldx = 32;
    a.y = ybuf + 2;
    a.ldy = 26;
    TOK(odl_conv2d_f16_check(&a));
    printf("odl_conv2d_f16_check: bad arguments rejected\n");
}

/* ================================================================ conv2d_f16 */

typedef struct conv_case {
    int N, C, H, W, K, R, S, stride, pad;
    int xoff, ldx;          /* ldx 0: C */
    int yoff, ldy;          /* ldy 0: K rounded up to even */
    int res, roff, ldr;     /* residual when res; ldr 0: K rounded up to even */
    odl_act act;
    int bias, yf32;
    int threads;            /* CPU: also run with 1 and 3 threads and compare bits */
} conv_case;

static double silu_d(double v) { return v / (1.0 + exp(-v)); }

static void run_conv_case(int id, const conv_case *cs) {
    conv_case c = *cs;
    if (!c.S) c.S = c.R;
    if (!c.ldx) c.ldx = c.xoff + c.C;
    if (!c.ldy) c.ldy = c.yoff + c.K + ((c.yoff + c.K) & 1);
    if (!c.ldr) c.ldr = c.roff + c.K + ((c.roff + c.K) & 1);
    const int P = (c.H + 2 * c.pad - c.R) / c.stride + 1, Q = (c.W + 2 * c.pad - c.S) / c.stride + 1;
    const int64_t npix_in = (int64_t)c.N * c.H * c.W, npix = (int64_t)c.N * P * Q;
    const int64_t rsc = (int64_t)c.R * c.S * c.C;
    const int esize = c.yf32 ? 4 : 2;
    char desc[200];
    snprintf(desc, sizeof desc,
             "N%d C%d %dx%d K%d %dx%d s%d p%d ldx%d+%d ldy%d+%d%s act%d%s%s", c.N, c.C, c.H, c.W, c.K, c.R, c.S,
             c.stride, c.pad, c.ldx, c.xoff, c.ldy, c.yoff, c.res ? " res" : "", (int)c.act, c.bias ? " bias" : "",
             c.yf32 ? " f32" : "");

    rng_seed(1000 + (uint64_t)id);
    odl_half *xh = rand_halfs(npix_in * c.ldx, 1.0f);
    odl_half *wh = rand_halfs((int64_t)c.K * rsc, (float)(1.0 / sqrt((double)rsc)));
    float *bh = xmalloc((size_t)c.K * 4);
    for (int k = 0; k < c.K; k++) bh[k] = 0.5f * rng_sym();
    odl_half *rh = c.res ? rand_halfs(npix * c.ldr, 1.0f) : NULL;
    const int64_t ytotal = HEAD + npix * c.ldy + TAIL;
    void *yh = sentinel_buf(esize, ytotal);

    dbuf dx, dw, db, dr, dy;
    int ok = dput(&dx, xh, (size_t)(npix_in * c.ldx) * 2) & dput(&dw, wh, (size_t)(c.K * rsc) * 2) &
             dput(&db, bh, (size_t)c.K * 4) & (c.res ? dput(&dr, rh, (size_t)(npix * c.ldr) * 2) : 1) &
             dput(&dy, yh, (size_t)(ytotal * esize));
    if (!c.res) memset(&dr, 0, sizeof dr);
    odl_conv2d_f16_args a;
    memset(&a, 0, sizeof a);
    a.s = (odl_conv2d_shape){c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.stride, c.pad, c.pad, P, Q};
    a.x = (const odl_half *)dx.t.data + c.xoff;
    a.ldx = c.ldx;
    a.w = (const odl_half *)dw.t.data;
    a.bias = c.bias ? (const float *)db.t.data : NULL;
    a.act = c.act;
    a.residual = c.res ? (const odl_half *)dr.t.data + c.roff : NULL;
    a.ldr = c.ldr;
    a.y = (char *)dy.t.data + (size_t)(HEAD + c.yoff) * esize;
    a.ldy = c.ldy;
    a.y_f32 = c.yf32;
    void *got = xmalloc((size_t)(ytotal * esize));
    double secs = 0;
    if (ok) {
        TOK(odl_conv2d_f16_check(&a));
        double t0 = now_s();
        odl_status st = g_be->conv2d_f16(&a);
        if (st == ODL_OK) st = odl_device_synchronize(g_dev);
        secs = now_s() - t0;
        TCHECK(st == ODL_OK, "%s: conv2d_f16: %s", desc, odl_error_msg());
        ok = st == ODL_OK && dgetb(&dy, got);
    }

    /* reference and comparison */
    double worst = 0;
    int64_t nbad = 0, nguard = -1;
    if (ok) {
        double *xd = xmalloc((size_t)(npix_in * c.C) * 8), *wd = xmalloc((size_t)(c.K * rsc) * 8);
        double *patch = xmalloc((size_t)rsc * 8);
        for (int64_t i = 0; i < npix_in; i++)
            for (int ch = 0; ch < c.C; ch++) xd[i * c.C + ch] = ref_h2d(xh[i * c.ldx + c.xoff + ch]);
        for (int64_t i = 0; i < c.K * rsc; i++) wd[i] = ref_h2d(wh[i]);
        const odl_half *yg = (const odl_half *)got + HEAD + c.yoff;
        const float *yf = (const float *)got + HEAD + c.yoff;
        for (int64_t j = 0; j < npix; j++) {
            const int q = (int)(j % Q), p = (int)((j / Q) % P), n = (int)(j / ((int64_t)P * Q));
            for (int r = 0; r < c.R; r++)
                for (int s = 0; s < c.S; s++) {
                    const int ih = p * c.stride - c.pad + r, iw = q * c.stride - c.pad + s;
                    double *d = patch + ((int64_t)r * c.S + s) * c.C;
                    const int in = ih >= 0 && ih < c.H && iw >= 0 && iw < c.W;
                    for (int ch = 0; ch < c.C; ch++)
                        d[ch] = in ? xd[(((int64_t)n * c.H + ih) * c.W + iw) * c.C + ch] : 0.0;
                }
            for (int k = 0; k < c.K; k++) {
                const double *wk = wd + (int64_t)k * rsc;
                double acc = 0, mag = 0;
                for (int64_t i = 0; i < rsc; i++) {
                    const double t = patch[i] * wk[i];
                    acc += t;
                    mag += fabs(t);
                }
                if (c.bias) {
                    acc += bh[k];
                    mag += fabs(bh[k]);
                }
                const double np = (double)rsc + 1, gm = 2 * U * np / (1 - 2 * U * np);
                const double ev = gm * mag;
                double ref, ea;
                switch (c.act) {
                case ODL_ACT_RELU:
                    ref = acc < 0 ? 0 : acc;
                    ea = ev;
                    break;
                case ODL_ACT_SILU:
                    ref = silu_d(acc);
                    ea = 1.1 * ev + 40 * U * (fabs(ref) + 1.1 * ev);
                    break;
                default:
                    ref = acc;
                    ea = ev;
                }
                double ez = ea;
                if (c.res) {
                    ref += ref_h2d(rh[j * c.ldr + c.roff + k]);
                    ez = ea + 2 * U * (fabs(ref) + ea);
                }
                double tol = c.yf32 ? ez : ez + ldexp(1.0, -11) * (fabs(ref) + ez) + ldexp(1.0, -25);
                tol += (np + 8) * ldexp(1.0, -52) * (mag + fabs(ref));
                const double g = c.yf32 ? (double)yf[j * c.ldy + k] : ref_h2d(yg[j * c.ldy + k]);
                const double err = fabs(g - ref);
                if (!(err <= tol)) {
                    if (nbad < 5)
                        fprintf(stderr, "  conv %s: (n%d p%d q%d k%d) got %.9g ref %.9g err %.3g tol %.3g\n", desc,
                                n, p, q, k, g, ref, err, tol);
                    nbad++;
                    worst = INFINITY;
                } else if (err / tol > worst) {
                    worst = err / tol;
                }
            }
        }
        free(xd);
        free(wd);
        free(patch);
        nguard = guard_changes(got, esize, ytotal, npix, c.ldy, c.yoff, c.K);
        TCHECK(dsame(&dx, xh) && dsame(&dw, wh) && dsame(&db, bh) && (!c.res || dsame(&dr, rh)),
               "%s: an input changed", desc);
    }
    TCHECK(ok && nbad == 0, "%s: %" PRId64 " of %" PRId64 " outputs outside the tolerance", desc, nbad,
           npix * c.K);
    TCHECK(nguard == 0, "%s: %" PRId64 " sentinel elements outside the output region changed", desc, nguard);

    /* CPU: the same bits whatever the number of threads */
    if (ok && g_is_cpu && c.threads) {
        const int saved = odl_cpu_num_threads(), counts[2] = {1, 3};
        void *again = xmalloc((size_t)(ytotal * esize));
        for (int t = 0; t < 2; t++) {
            odl_cpu_set_num_threads(counts[t]);
            TOK(g_be->conv2d_f16(&a));
            TCHECK(dgetb(&dy, again) && memcmp(again, got, (size_t)(ytotal * esize)) == 0,
                   "%s: %d threads give other bits than %d", desc, counts[t], saved);
        }
        odl_cpu_set_num_threads(saved);
        free(again);
    }
    printf("conv2d_f16 %-72s max err/tol %.3f  %.3f s  %s\n", desc, worst, secs,
           ok && nbad == 0 && nguard == 0 ? "ok" : "FAIL");
    dfree(&dx);
    dfree(&dw);
    dfree(&db);
    if (c.res) dfree(&dr);
    dfree(&dy);
    free(xh);
    free(wh);
    free(bh);
    free(rh);
    free(yh);
    free(got);
}

static void test_conv(void) {
    const odl_act NO = ODL_ACT_NONE, SI = ODL_ACT_SILU, RE = ODL_ACT_RELU;
    /* N C H W K R S stride pad | xoff ldx | yoff ldy | res roff ldr | act bias yf32 threads */
    static conv_case cases[64];
    int n = 0;
#define CASE(...) cases[n++] = (conv_case){__VA_ARGS__}
    CASE(1, 8, 16, 16, 8, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, NO, 0, 0, 0);        /* RSC = 8 */
    CASE(3, 16, 13, 9, 24, 3, 3, 1, 1, 0, 0, 0, 0, 1, 0, 0, SI, 1, 0, 1);       /* residual, N = 3 */
    CASE(1, 24, 17, 11, 40, 3, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, SI, 1, 0, 0);      /* RSC = 216 */
    CASE(1, 64, 20, 20, 255, 1, 1, 1, 0, 0, 0, 0, 256, 0, 0, 0, NO, 1, 1, 1);   /* detect head: K 255, f32 */
    CASE(2, 64, 10, 6, 255, 1, 1, 1, 0, 0, 0, 2, 258, 1, 2, 258, NO, 1, 0, 0);  /* K 255 half, slices */
    CASE(1, 128, 10, 10, 256, 3, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, SI, 1, 0, 0);    /* RSC = 1152 */
    CASE(1, 8, 32, 24, 16, 6, 6, 2, 2, 0, 0, 0, 0, 0, 0, 0, SI, 1, 0, 1);       /* YOLOv5 stem 6x6 s2 p2 */
    CASE(3, 8, 11, 7, 24, 6, 6, 2, 2, 0, 0, 0, 0, 0, 0, 0, SI, 1, 1, 0);        /* stem, f32 */
    CASE(3, 16, 7, 5, 24, 3, 3, 1, 1, 16, 48, 8, 64, 1, 6, 40, SI, 1, 0, 1);    /* strided x, y, residual */
    CASE(1, 16, 7, 5, 40, 3, 3, 1, 1, 8, 32, 4, 50, 1, 2, 42, SI, 1, 1, 0);     /* strided, f32 + residual */
    CASE(3, 8, 5, 6, 8, 3, 3, 1, 2, 0, 0, 0, 0, 0, 0, 0, NO, 0, 0, 0);          /* pad 2 > R/2 */
    CASE(2, 16, 9, 12, 16, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, RE, 1, 0, 0);       /* 1x1 stride 2 */
    CASE(1, 64, 9, 12, 16, 3, 3, 2, 0, 0, 0, 0, 0, 0, 0, 0, SI, 0, 0, 0);       /* pad 0, stride 2 */
    CASE(2, 24, 8, 13, 8, 6, 6, 1, 0, 24, 56, 0, 0, 0, 0, 0, NO, 1, 0, 0);      /* 6x6 s1 p0, x slice */
    CASE(1, 32, 6, 6, 16, 3, 3, 1, 1, 0, 0, 16, 48, 1, 0, 16, NO, 0, 0, 0);     /* residual, no bias, y slice */
    CASE(3, 40, 15, 10, 24, 3, 3, 2, 2, 0, 0, 0, 0, 0, 0, 0, SI, 1, 0, 0);      /* s2 p2 */
    CASE(1, 128, 5, 5, 128, 1, 1, 1, 0, 0, 256, 128, 256, 0, 0, 0, SI, 1, 0, 0); /* C2f-style concat slice */
    CASE(1, 64, 4, 4, 8, 3, 3, 1, 1, 64, 256, 0, 0, 0, 0, 0, SI, 1, 0, 0);     /* K = 8 */
    CASE(3, 8, 3, 19, 255, 3, 3, 1, 1, 0, 0, 0, 0, 0, 0, 0, SI, 0, 1, 0);      /* odd K, f32, no bias */
    CASE(2, 64, 80, 80, 64, 3, 3, 1, 1, 0, 0, 0, 0, 0, 0, 0, SI, 1, 0, 1);     /* large */
#undef CASE
    for (int i = 0; i < n; i++) run_conv_case(i, &cases[i]);
}

/* ================================================================ max-pool, upsample, copy */

typedef struct move_case {
    int N, H, W, C;
    int xoff, ldx, yoff, ldy; /* ld 0: C + off */
    int k, stride, pad;       /* max-pool window */
} move_case;

/* Halves from multiples of 1/4 in [-2, 2] (ties are frequent; +0 only, never -0). */
static odl_half *tie_halfs(int64_t n) {
    odl_half *h = xmalloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) h[i] = odl_float_to_half((float)((int)(rng_u64() % 17) - 8) * 0.25f);
    return h;
}

/* kind 0: max-pool, 1: upsample, 2: copy (N*H*W pixels). */
static void run_move_case(int kind, int id, const move_case *mc) {
    move_case c = *mc;
    if (!c.ldx) c.ldx = c.xoff + c.C;
    if (!c.ldy) c.ldy = c.yoff + c.C;
    const char *name = kind == 0 ? "maxpool2d_f16" : kind == 1 ? "upsample2x_f16" : "copy_f16";
    int P = c.H, Q = c.W;
    if (kind == 0) {
        P = (c.H + 2 * c.pad - c.k) / c.stride + 1;
        Q = (c.W + 2 * c.pad - c.k) / c.stride + 1;
    } else if (kind == 1) {
        P = 2 * c.H;
        Q = 2 * c.W;
    }
    const int64_t npix_in = (int64_t)c.N * c.H * c.W, npix = (int64_t)c.N * P * Q;
    char desc[160];
    if (kind == 0)
        snprintf(desc, sizeof desc, "N%d %dx%d C%d k%d s%d p%d ldx%d+%d ldy%d+%d", c.N, c.H, c.W, c.C, c.k,
                 c.stride, c.pad, c.ldx, c.xoff, c.ldy, c.yoff);
    else
        snprintf(desc, sizeof desc, "N%d %dx%d C%d ldx%d+%d ldy%d+%d", c.N, c.H, c.W, c.C, c.ldx, c.xoff, c.ldy,
                 c.yoff);
    rng_seed(5000 + 100 * (uint64_t)kind + (uint64_t)id);
    odl_half *xh = kind == 0 ? tie_halfs(npix_in * c.ldx) : rand_halfs(npix_in * c.ldx, 1.0f);
    const int64_t ytotal = HEAD + npix * c.ldy + TAIL;
    odl_half *yh = sentinel_buf(2, ytotal), *got = xmalloc((size_t)ytotal * 2);
    dbuf dx, dy;
    int ok = dput(&dx, xh, (size_t)(npix_in * c.ldx) * 2) & dput(&dy, yh, (size_t)ytotal * 2);
    const odl_half *x = (const odl_half *)dx.t.data + c.xoff;
    odl_half *y = (odl_half *)dy.t.data + HEAD + c.yoff;
    if (ok) {
        odl_status st;
        if (kind == 0) {
            odl_pool2d_shape s = {c.N, c.C, c.H, c.W, c.k, c.k, c.stride, c.stride, c.pad, c.pad, P, Q};
            st = g_be->maxpool2d_f16(&s, x, c.ldx, y, c.ldy);
        } else if (kind == 1) {
            st = g_be->upsample2x_f16(c.N, c.H, c.W, c.C, x, c.ldx, y, c.ldy);
        } else {
            st = g_be->copy_f16(npix_in, c.C, x, c.ldx, y, c.ldy);
        }
        TCHECK(st == ODL_OK, "%s %s: %s", name, desc, odl_error_msg());
        ok = st == ODL_OK && dgetb(&dy, got);
    }
    int64_t nbad = 0, nguard = -1;
    if (ok) {
        const odl_half *yg = got + HEAD + c.yoff;
        for (int64_t j = 0; j < npix; j++) {
            const int q = (int)(j % Q), p = (int)((j / Q) % P), n = (int)(j / ((int64_t)P * Q));
            for (int ch = 0; ch < c.C; ch++) {
                odl_half want;
                if (kind == 0) {
                    double m = -INFINITY;
                    want = 0xFC00u;
                    for (int r = 0; r < c.k; r++)
                        for (int s = 0; s < c.k; s++) {
                            const int ih = p * c.stride - c.pad + r, iw = q * c.stride - c.pad + s;
                            if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                            const odl_half b = xh[(((int64_t)n * c.H + ih) * c.W + iw) * c.ldx + c.xoff + ch];
                            if (ref_h2d(b) > m) {
                                m = ref_h2d(b);
                                want = b;
                            }
                        }
                } else if (kind == 1) {
                    want = xh[(((int64_t)n * c.H + p / 2) * c.W + q / 2) * c.ldx + c.xoff + ch];
                } else {
                    want = xh[j * c.ldx + c.xoff + ch];
                }
                if (yg[j * c.ldy + ch] != want) {
                    if (nbad < 5)
                        fprintf(stderr, "  %s %s: (n%d p%d q%d c%d) got %#x want %#x\n", name, desc, n, p, q, ch,
                                yg[j * c.ldy + ch], want);
                    nbad++;
                }
            }
        }
        nguard = guard_changes(got, 2, ytotal, npix, c.ldy, c.yoff, c.C);
        TCHECK(dsame(&dx, xh), "%s %s: x changed", name, desc);
    }
    TCHECK(ok && nbad == 0, "%s %s: %" PRId64 " outputs differ", name, desc, nbad);
    TCHECK(nguard == 0, "%s %s: %" PRId64 " sentinel elements changed", name, desc, nguard);
    printf("%-15s %-60s exact: %s\n", name, desc, ok && nbad == 0 && nguard == 0 ? "ok" : "FAIL");
    dfree(&dx);
    dfree(&dy);
    free(xh);
    free(yh);
    free(got);
}

static void test_moves(void) {
    /* N H W C | xoff ldx yoff ldy | k stride pad */
    const move_case pools[] = {
        {2, 13, 10, 16, 8, 32, 8, 40, 5, 1, 2},  /* SPPF 5x5 s1 p2 on slices */
        {1, 10, 10, 128, 0, 0, 0, 0, 5, 1, 2},   /* SPPF, contiguous */
        {3, 13, 10, 24, 8, 40, 16, 48, 3, 2, 1}, /* 3x3 s2 p1 on slices */
        {1, 8, 9, 8, 0, 0, 0, 0, 3, 2, 1},
        {2, 6, 7, 16, 0, 0, 0, 0, 2, 2, 0},      /* 2x2 s2, odd W */
    };
    for (int i = 0; i < (int)(sizeof pools / sizeof pools[0]); i++) run_move_case(0, i, &pools[i]);
    const move_case ups[] = {
        {2, 5, 7, 16, 8, 32, 16, 48, 0, 0, 0},
        {1, 10, 10, 64, 0, 0, 64, 128, 0, 0, 0}, /* into the second half of a concat buffer */
        {3, 1, 3, 8, 0, 0, 0, 0, 0, 0, 0},
    };
    for (int i = 0; i < (int)(sizeof ups / sizeof ups[0]); i++) run_move_case(1, i, &ups[i]);
    const move_case copies[] = {
        {2, 9, 11, 24, 8, 40, 32, 64, 0, 0, 0},
        {1, 7, 7, 8, 0, 0, 0, 0, 0, 0, 0},
        {1, 20, 20, 128, 128, 256, 0, 0, 0, 0, 0}, /* slice out of a concat buffer */
    };
    for (int i = 0; i < (int)(sizeof copies / sizeof copies[0]); i++) run_move_case(2, i, &copies[i]);
}

/* ================================================================ nchw_f32_to_nhwc_f16 */

static void run_layout_case(int id, int N, int C, int H, int W, int b, int C_pad) {
    const int Ho = H / b, Wo = W / b;
    const int64_t nx = (int64_t)N * C * H * W, npix = (int64_t)N * Ho * Wo;
    char desc[96];
    snprintf(desc, sizeof desc, "N%d C%d %dx%d block %d C_pad %d", N, C, H, W, b, C_pad);
    rng_seed(7000 + (uint64_t)id);
    float *xh = xmalloc((size_t)nx * 4);
    for (int64_t i = 0; i < nx; i++) xh[i] = rng_sym() * (i % 3 == 0 ? 300.0f : 1.0f);
    /* values that exercise the rounding: ties to even, subnormals, the overflow boundary */
    const float special[] = {
        1.0f + 0x1p-11f,  1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-11f + 0x1p-23f, -(1.0f + 0x1p-11f),
        0x1p-24f,         1.5f * 0x1p-24f,     2.5f * 0x1p-24f,            0x1p-25f,
        0x1.000002p-25f,  0x1p-26f,            -0x1p-25f,                  0x1p-14f - 0x1p-25f,
        3e-5f,            1e-8f,               65504.0f,                   65519.99f,
        65520.0f,         -65520.0f,           1e10f,                      INFINITY,
        -INFINITY,        2049.0f,             2051.0f,                    0.1f,
        -0.0f,            0.0f,                65519.0f,                   -3e-6f,
    };
    const int nsp = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < nsp && i < nx; i++) xh[(int64_t)i * 7 % nx] = special[i];
    const int64_t ytotal = npix * C_pad + TAIL;
    odl_half *yh = xmalloc((size_t)ytotal * 2), *got = xmalloc((size_t)ytotal * 2);
    for (int64_t i = 0; i < ytotal; i++) yh[i] = SENT_H;
    dbuf dx, dy;
    int ok = dput(&dx, xh, (size_t)nx * 4) & dput(&dy, yh, (size_t)ytotal * 2);
    if (ok) {
        odl_status st = g_be->nchw_f32_to_nhwc_f16(N, C, H, W, (const float *)dx.t.data, b, C_pad, (odl_half *)dy.t.data);
        TCHECK(st == ODL_OK, "nchw_f32_to_nhwc_f16 %s: %s", desc, odl_error_msg());
        ok = st == ODL_OK && dgetb(&dy, got);
    }
    int64_t nbad = 0, nguard = 0;
    if (ok) {
        for (int64_t j = 0; j < npix; j++) {
            const int64_t n = j / ((int64_t)Ho * Wo), hw = j % ((int64_t)Ho * Wo);
            const int h = (int)(hw / Wo), w = (int)(hw % Wo);
            for (int ch = 0; ch < C_pad; ch++) {
                /* channel ch = (i*b + jj)*C + c holds x[n, c, h*b + i, w*b + jj] */
                const int used = ch < b * b * C, c = ch % C, i = ch / C / b, jj = ch / C % b;
                const double xv = used ? (double)xh[(n * C + c) * H * W + (int64_t)(h * b + i) * W + (w * b + jj)] : 0.0;
                const odl_half want = used ? ref_d2h(xv) : 0;
                if (got[j * C_pad + ch] != want) {
                    if (nbad < 5)
                        fprintf(stderr, "  layout %s: pixel %" PRId64 " c%d (x = %.9g) got %#x want %#x\n", desc,
                                j, ch, xv, got[j * C_pad + ch], want);
                    nbad++;
                }
            }
        }
        for (int64_t i = npix * C_pad; i < ytotal; i++) nguard += got[i] != SENT_H;
        TCHECK(dsame(&dx, xh), "nchw_f32_to_nhwc_f16 %s: x changed", desc);
    }
    TCHECK(ok && nbad == 0, "nchw_f32_to_nhwc_f16 %s: %" PRId64 " outputs differ", desc, nbad);
    TCHECK(nguard == 0, "nchw_f32_to_nhwc_f16 %s: %" PRId64 " tail sentinels changed", desc, nguard);
    printf("nchw_f32_to_nhwc_f16 %-40s exact: %s\n", desc, ok && nbad == 0 && nguard == 0 ? "ok" : "FAIL");
    dfree(&dx);
    dfree(&dy);
    free(xh);
    free(yh);
    free(got);
}

/* ================================================================ main */

int main(int argc, char **argv) {
    const char *backend = "cpu";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            backend = argv[++i];
        } else {
            fprintf(stderr, "usage: test_ops_f16 [--backend cpu|cuda]\n");
            return 2;
        }
    }
    if (strcmp(backend, "cpu") && strcmp(backend, "cuda")) {
        fprintf(stderr, "test_ops_f16: unknown backend '%s' (cpu or cuda)\n", backend);
        return 2;
    }
    int have_cuda = 0;
    if (!strcmp(backend, "cuda")) {
        int built = odl_cuda_built(), ndev = built ? odl_cuda_device_count() : 0;
        if (ndev <= 0) {
            printf("test_ops_f16: skipped: no CUDA device (%s)\n", built ? "no device visible" : "CPU-only build");
            return ODL_TEST_SKIP;
        }
        odl_status st = odl_cuda_init(0, 0.2);
        if (st != ODL_OK) {
            printf("test_ops_f16: FAIL: odl_cuda_init(0, 0.2): %s: %s\n", odl_status_str(st), odl_error_msg());
            return 1;
        }
        have_cuda = 1;
        g_dev = odl_cuda(0);
    } else {
        g_dev = odl_cpu();
        g_is_cpu = 1;
    }
    g_be = odl_backend_for(g_dev);
    if (!g_be) {
        printf("test_ops_f16: FAIL: no %s backend: %s\n", backend, odl_error_msg());
        return 1;
    }
    if (!g_be->conv2d_f16 || !g_be->maxpool2d_f16 || !g_be->upsample2x_f16 || !g_be->copy_f16 ||
        !g_be->nchw_f32_to_nhwc_f16) {
        printf("test_ops_f16: FAIL: the %s op table lacks float16 entries\n", backend);
        return 1;
    }
    printf("test_ops_f16: backend %s (%s)\n", backend, g_be->name ? g_be->name : "?");
    const double t0 = now_s();
    test_half_conversions();
    test_conv_check();
    test_conv();
    test_moves();
    run_layout_case(0, 2, 3, 5, 7, 1, 8);
    run_layout_case(1, 1, 16, 3, 4, 1, 16);
    run_layout_case(2, 3, 3, 17, 1, 1, 8);
    run_layout_case(3, 2, 3, 6, 10, 2, 16); /* YOLOv5's space-to-depth input: 12 channels, 4 zero */
    run_layout_case(4, 1, 2, 9, 6, 3, 24);  /* block 3: 18 channels, 6 zero (H, W multiples of 3) */
    run_layout_case(5, 1, 3, 4, 4, 2, 12);  /* C_pad not a multiple of 8: element stores */
    printf("test_ops_f16: %.1f s\n", now_s() - t0);
    if (have_cuda) TOK(odl_cuda_shutdown()); /* no device memory left in use */
    char name[64];
    snprintf(name, sizeof name, "test_ops_f16 %s", backend);
    return odl_test_finish(name);
}
