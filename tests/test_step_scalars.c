/* A training step's scalars in the device's memory (odl_step_scalars, odl/backend.h): what the CUDA graph
 * of a training step reads when it runs instead of baking into its kernels' arguments.
 *   - odl_step_scalars_advance: the dropout offset of the step (odl_net_dropout_offset of the steps done,
 *     for a rank of a world), both counters forward by one, SGD's first-step flag, Adam's scalars;
 *   - dropout_*_at, sgd_step_at (momentum, Nesterov, weight decay), adam_step_at, adamw, adadelta_step_at
 *     bitwise equal to the host-scalar ops at (lr, step) = (s->lr, s->optim_step) over 30 steps with the
 *     learning rate written by the host twice on the way (a StepLR change: no stale value);
 *   - the grouped updates (odl_*_step_group_at) bitwise one *_at call per tensor, and their argument errors;
 *   - Adam's bias corrections by repeated squaring in double-double (kernels/step_scalars.h) against the C
 *     library's pow: within an ulp of a double, and the same floats for (nearly) every step of a long run.
 * Usage: test_step_scalars [--device cuda]: the CPU by default (label unit); on CUDA device 0 (label gpu;
 * exit 77 without one) the *_at ops run on the device and match the CPU's host-scalar ops bit for bit. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/step_scalars.h"
#include "odl/device.h"
#include "odl/nn.h"
#include "odl/ops.h"
#include "test_util.h"

#define N 1027 /* not a multiple of 4: the CUDA kernels' scalar tail runs too */
#define STEPS 30

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static odl_tensor *tens(odl_device dev, const float *h) {
    odl_tensor *t = calloc(1, sizeof *t);
    int64_t shape[1] = {N};
    TOK(odl_tensor_alloc(t, dev, ODL_F32, 1, shape));
    TOK(odl_tensor_copy_from_host(t, h, N * sizeof(float)));
    return t;
}

static void get(const odl_tensor *t, float *h) { TOK(odl_tensor_copy_to_host(t, h, N * sizeof(float))); }

static void put_scalars(odl_device dev, odl_step_scalars *d, const odl_step_scalars *h) {
    TOK(odl_memcpy_async(d, dev, h, odl_cpu(), sizeof *h, odl_stream_current()));
}

static void get_scalars(odl_device dev, const odl_step_scalars *d, odl_step_scalars *h) {
    TOK(odl_memcpy_async(h, odl_cpu(), d, dev, sizeof *h, odl_stream_current()));
    TOK(odl_stream_synchronize(odl_stream_current()));
}

enum { OPT_SGD, OPT_NESTEROV, OPT_ADAM, OPT_ADAMW, OPT_ADADELTA, N_OPT };
static const char *const k_names[N_OPT] = {"sgd momentum", "sgd nesterov", "adam", "adamw", "adadelta"};

/* One optimiser over STEPS steps from the same start: the host-scalar ops on the CPU (A) and the *_at ops
 * reading s on dev (B). */
static void check_optim(odl_device dev, int which) {
    float h0[N], hg[STEPS][N];
    for (int i = 0; i < N; i++) h0[i] = frand();
    for (int k = 0; k < STEPS; k++)
        for (int i = 0; i < N; i++) hg[k][i] = frand() * 0.1f;
    float zero[N];
    memset(zero, 0, sizeof zero);
    const odl_device cpu = odl_cpu();
    odl_tensor *pa = tens(cpu, h0), *ga = tens(cpu, hg[0]), *a1 = tens(cpu, zero), *a2 = tens(cpu, zero);
    odl_tensor *pb = tens(dev, h0), *g = tens(dev, hg[0]), *b1 = tens(dev, zero), *b2 = tens(dev, zero);
    const float momentum = 0.9f, wd = which == OPT_ADADELTA ? 0.0f : 0.01f, beta1 = 0.9f, beta2 = 0.999f;
    odl_step_scalars *s = NULL;
    TOK(odl_mem_alloc(dev, sizeof *s, (void **)&s));
    const odl_step_hyper hy = {1, 0, ODL_NET_RNG_STRIDE, beta1, beta2, wd};
    float lr = which == OPT_ADADELTA ? 1.0f : 1e-2f;
    odl_step_scalars hs = {.optim_step = 0, .rng_step = 0, .lr = lr};
    put_scalars(dev, s, &hs);
    int same = 1;
    for (int k = 0; k < STEPS && same; k++) {
        if (k == 10 || k == 20) { /* StepLR: the host writes the new rate between steps */
            lr *= 0.7f;
            get_scalars(dev, s, &hs);
            hs.lr = lr;
            put_scalars(dev, s, &hs);
        }
        const int64_t t = k + 1;
        TOK(odl_tensor_copy_from_host(g, hg[k], sizeof hg[k]));
        TOK(odl_tensor_copy_from_host(ga, hg[k], sizeof hg[k]));
        TOK(odl_step_scalars_advance(dev, s, &hy));
        switch (which) {
        case OPT_SGD:
        case OPT_NESTEROV: {
            const int nest = which == OPT_NESTEROV;
            TOK(odl_sgd_step(pa, ga, a1, lr, momentum, 0.0f, wd, nest, t));
            TOK(odl_sgd_step_at(pb, g, b1, s, momentum, 0.0f, wd, nest));
            break;
        }
        case OPT_ADAM:
        case OPT_ADAMW:
            TOK(odl_adam_step(pa, ga, a1, a2, lr, beta1, beta2, 1e-8f, wd, which == OPT_ADAMW, t));
            TOK(odl_adam_step_at(pb, g, b1, b2, s, beta1, beta2, 1e-8f, wd, which == OPT_ADAMW));
            break;
        case OPT_ADADELTA:
            TOK(odl_adadelta_step(pa, ga, a1, a2, lr, 0.9f, 1e-6f, wd));
            TOK(odl_adadelta_step_at(pb, g, b1, b2, s, 0.9f, 1e-6f, wd));
            break;
        }
        float x[N], y[N];
        get(pa, x);
        get(pb, y);
        same &= memcmp(x, y, sizeof x) == 0;
        get(a1, x);
        get(b1, y);
        same &= memcmp(x, y, sizeof x) == 0;
        get(a2, x);
        get(b2, y);
        same &= memcmp(x, y, sizeof x) == 0;
        TCHECK(same, "%s on %s: step %d: the update reading the device scalars differs from the CPU's host-scalar one",
               k_names[which], odl_device_name(dev), k + 1);
        get_scalars(dev, s, &hs);
        TCHECK(hs.optim_step == t && hs.rng_step == t && hs.first == (t == 1) && hs.lr == lr,
               "%s: scalars after step %d: optim_step %lld rng_step %lld first %d lr %g", k_names[which], k + 1,
               (long long)hs.optim_step, (long long)hs.rng_step, hs.first, hs.lr);
    }
    odl_mem_free(dev, s);
    odl_tensor *all[] = {pa, ga, a1, a2, pb, g, b1, b2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        odl_tensor_free(all[i]);
        free(all[i]);
    }
    printf("%-13s on %s: %d steps, device scalars %s\n", k_names[which], odl_device_name(dev), STEPS,
           same ? "bitwise equal" : "DIFFER");
}

/* The grouped updates (odl_*_step_group_at: one launch per ODL_OPTIM_GROUP_MAX entries on CUDA) against one
 * *_at call per tensor on the same device, bit for bit, over 3 steps: 20 entries (two groups) of sizes that
 * take one or many blocks, a float4 tail or none, an empty one, a view one float into its buffer in all four
 * streams (entry 0) and in the gradient alone (entry 3: either takes the scalar path); SGD without momentum
 * (a NULL buffer list: the kernel of no state stream) and Nesterov's with; then the argument errors, which
 * leave every parameter as it was. */
#define G_ENTRIES 20
static int shifted(int i, int k) { return i == 0 || (i == 3 && k == 1); }
static void check_group(odl_device dev, int which) {
    static const int64_t sizes[G_ENTRIES] = {1027, 5, 70001, 4096, 4097, 3, 1, 65536, 0, 12345,
                                             4, 16383, 2, 9999, 64, 7, 100000, 31, 4095, 513};
    odl_tensor *t[2][4][G_ENTRIES], view[2][4][G_ENTRIES]; /* [grouped or per tensor][p g s1 s2][entry] */
    odl_tensor *e[2][4][G_ENTRIES];
    for (int i = 0; i < G_ENTRIES; i++) {
        float *h = malloc((size_t)(sizes[i] + 1) * sizeof *h);
        for (int k = 0; k < 4; k++) {
            const int64_t n = sizes[i] + shifted(i, k); /* a view from the second float on */
            for (int64_t j = 0; j < n; j++) h[j] = k >= 2 && which != OPT_ADAM && which != OPT_ADAMW ? 0.0f : frand();
            if (k == 3)
                for (int64_t j = 0; j < n; j++) h[j] = fabsf(h[j]); /* Adam's v and Adadelta's acc are >= 0 */
            for (int a = 0; a < 2; a++) {
                t[a][k][i] = calloc(1, sizeof(odl_tensor));
                TOK(odl_tensor_alloc(t[a][k][i], dev, ODL_F32, 1, &n));
                TOK(odl_tensor_copy_from_host(t[a][k][i], h, (size_t)n * sizeof *h));
                e[a][k][i] = t[a][k][i];
                if (shifted(i, k)) {
                    view[a][k][i] = *t[a][k][i];
                    view[a][k][i].data = (float *)view[a][k][i].data + 1;
                    view[a][k][i].shape[0] = n - 1;
                    view[a][k][i].owns = 0;
                    e[a][k][i] = &view[a][k][i];
                }
            }
        }
        free(h);
    }
    odl_step_scalars *s = NULL;
    TOK(odl_mem_alloc(dev, sizeof *s, (void **)&s));
    const float wd = which == OPT_ADADELTA ? 0.0f : 0.01f;
    const odl_step_hyper hy = {1, 0, ODL_NET_RNG_STRIDE, 0.9f, 0.999f, wd};
    odl_step_scalars hs = {.optim_step = 0, .rng_step = 0, .lr = which == OPT_ADADELTA ? 1.0f : 1e-2f};
    put_scalars(dev, s, &hs);
    const int nest = which == OPT_NESTEROV, adamw = which == OPT_ADAMW;
    const float momentum = nest ? 0.9f : 0.0f;
    for (int step = 0; step < 3; step++) {
        TOK(odl_step_scalars_advance(dev, s, &hy));
        odl_tensor **p = e[0][0], **g = e[0][1], **s1 = e[0][2], **s2 = e[0][3];
        switch (which) {
        case OPT_SGD:
        case OPT_NESTEROV:
            TOK(odl_sgd_step_group_at(G_ENTRIES, p, g, nest ? s1 : NULL, s, momentum, 0.0f, wd, nest));
            for (int i = 0; i < G_ENTRIES; i++)
                TOK(odl_sgd_step_at(e[1][0][i], e[1][1][i], nest ? e[1][2][i] : NULL, s, momentum, 0.0f, wd, nest));
            break;
        case OPT_ADAM:
        case OPT_ADAMW:
            TOK(odl_adam_step_group_at(G_ENTRIES, p, g, s1, s2, s, 0.9f, 0.999f, 1e-8f, wd, adamw));
            for (int i = 0; i < G_ENTRIES; i++)
                TOK(odl_adam_step_at(e[1][0][i], e[1][1][i], e[1][2][i], e[1][3][i], s, 0.9f, 0.999f, 1e-8f, wd,
                                     adamw));
            break;
        case OPT_ADADELTA:
            TOK(odl_adadelta_step_group_at(G_ENTRIES, p, g, s1, s2, s, 0.9f, 1e-6f, wd));
            for (int i = 0; i < G_ENTRIES; i++)
                TOK(odl_adadelta_step_at(e[1][0][i], e[1][1][i], e[1][2][i], e[1][3][i], s, 0.9f, 1e-6f, wd));
            break;
        }
    }
    int64_t differ = 0, total = 0;
    for (int i = 0; i < G_ENTRIES; i++)
        for (int k = 0; k < 4; k++) {
            const int64_t n = sizes[i] + shifted(i, k);
            float *a = malloc((size_t)(n + 1) * sizeof *a), *b = malloc((size_t)(n + 1) * sizeof *b);
            TOK(odl_tensor_copy_to_host(t[0][k][i], a, (size_t)n * sizeof *a));
            TOK(odl_tensor_copy_to_host(t[1][k][i], b, (size_t)n * sizeof *b));
            for (int64_t j = 0; j < n; j++) differ += memcmp(&a[j], &b[j], sizeof *a) != 0;
            total += n;
            free(a);
            free(b);
        }
    TCHECK(differ == 0, "%s grouped on %s: %lld of %lld floats differ from one *_at call per tensor", k_names[which],
           odl_device_name(dev), (long long)differ, (long long)total);
    if (which == OPT_ADADELTA) { /* argument errors, once */
        odl_tensor **p = e[0][0], **g = e[0][1], **s1 = e[0][2], **s2 = e[0][3];
        TFAIL(odl_adadelta_step_group_at(-1, p, g, s1, s2, s, 0.9f, 1e-6f, 0.0f), ODL_E_INVAL);
        TFAIL(odl_adadelta_step_group_at(2, p, g, s1, s2, NULL, 0.9f, 1e-6f, 0.0f), ODL_E_INVAL);
        TFAIL(odl_adadelta_step_group_at(2, p, g, NULL, s2, s, 0.9f, 1e-6f, 0.0f), ODL_E_INVAL);
        TOK(odl_adadelta_step_group_at(0, NULL, NULL, NULL, NULL, s, 0.9f, 1e-6f, 0.0f));
        odl_tensor *mixed[2] = {p[1], p[3]}; /* entry 1: a gradient of another size */
        odl_tensor *mg[2] = {g[1], g[2]};
        float before[5], after[5];
        TOK(odl_tensor_copy_to_host(p[1], before, sizeof before));
        TFAIL(odl_adadelta_step_group_at(2, mixed, mg, s1 + 1, s2 + 1, s, 0.9f, 1e-6f, 0.0f), ODL_E_INVAL);
        TCHECK(strstr(odl_error_msg(), "entry 1 of 2") != NULL, "the error names the entry: %s", odl_error_msg());
        TOK(odl_tensor_copy_to_host(p[1], after, sizeof after));
        TCHECK(memcmp(before, after, sizeof before) == 0, "entry 0 was updated though entry 1 was refused");
        if (dev.type == ODL_DEV_CUDA) { /* entries on two devices */
            odl_tensor c[4];
            const int64_t n = sizes[1];
            for (int k = 0; k < 4; k++) TOK(odl_tensor_zeros(&c[k], odl_cpu(), ODL_F32, 1, &n));
            odl_tensor *dp[2] = {p[1], &c[0]}, *dg[2] = {g[1], &c[1]}, *d1[2] = {s1[1], &c[2]}, *d2[2] = {s2[1], &c[3]};
            TFAIL(odl_adadelta_step_group_at(2, dp, dg, d1, d2, s, 0.9f, 1e-6f, 0.0f), ODL_E_INVAL);
            for (int k = 0; k < 4; k++) odl_tensor_free(&c[k]);
        }
        odl_error_clear();
    }
    odl_mem_free(dev, s);
    for (int a = 0; a < 2; a++)
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < G_ENTRIES; i++) {
                odl_tensor_free(t[a][k][i]);
                free(t[a][k][i]);
            }
    printf("%-13s on %s: grouped update of %d tensors (%d per call), 3 steps: %s\n",
           which == OPT_SGD ? "sgd" : k_names[which],
           odl_device_name(dev), G_ENTRIES, ODL_OPTIM_GROUP_MAX, differ ? "DIFFERS" : "bitwise the per-tensor one");
}

/* The dropout offset of rank 2 of 3 after 41 steps, and the masks it gives. */
static void check_dropout(odl_device dev) {
    float hx[N];
    for (int i = 0; i < N; i++) hx[i] = frand();
    odl_tensor *x = tens(dev, hx), *ya = tens(dev, hx), *yb = tens(dev, hx);
    odl_step_scalars *s = NULL;
    TOK(odl_mem_alloc(dev, sizeof *s, (void **)&s));
    const odl_step_hyper hy = {3, 2, ODL_NET_RNG_STRIDE, 0.9f, 0.999f, 0.0f};
    odl_step_scalars hs = {.optim_step = 41, .rng_step = 41, .lr = 1.0f};
    put_scalars(dev, s, &hs);
    TOK(odl_step_scalars_advance(dev, s, &hy));
    get_scalars(dev, s, &hs);
    const uint64_t off = odl_net_dropout_offset(41, 3, 2);
    TCHECK(hs.rng_offset == off && hs.rng_step == 42 && hs.optim_step == 42 && !hs.first,
           "advance: rng_offset %llu (want %llu), rng_step %lld, optim_step %lld", (unsigned long long)hs.rng_offset,
           (unsigned long long)off, (long long)hs.rng_step, (long long)hs.optim_step);
    for (int layer = 0; layer < 3; layer++)
        for (int bwd = 0; bwd < 2; bwd++) {
            TOK(bwd ? odl_dropout_bwd(0.25f, 7, off + (uint64_t)layer, x, ya) : odl_dropout_fwd(0.25f, 7, off + (uint64_t)layer, x, ya));
            TOK(bwd ? odl_dropout_bwd_at(0.25f, 7, s, (uint64_t)layer, x, yb) : odl_dropout_fwd_at(0.25f, 7, s, (uint64_t)layer, x, yb));
            float a[N], b[N];
            get(ya, a);
            get(yb, b);
            TCHECK(memcmp(a, b, sizeof a) == 0, "dropout %s at layer %d on %s: the device offset gives another mask",
                   bwd ? "bwd" : "fwd", layer, odl_device_name(dev));
        }
    TFAIL(odl_dropout_fwd_at(0.25f, 7, NULL, 0, x, ya), ODL_E_INVAL);
    TFAIL(odl_adadelta_step_at(x, x, ya, yb, NULL, 0.9f, 1e-6f, 0.0f), ODL_E_INVAL);
    const odl_step_hyper bad = {2, 2, ODL_NET_RNG_STRIDE, 0.9f, 0.999f, 0.0f};
    TFAIL(odl_step_scalars_advance(dev, s, &bad), ODL_E_INVAL);
    odl_mem_free(dev, s);
    odl_tensor *all[] = {x, ya, yb};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        odl_tensor_free(all[i]);
        free(all[i]);
    }
}

/* Repeated squaring against pow: the floats Adam uses, for 200,000 steps of three (beta1, beta2) pairs. */
static void check_powi(void) {
    static const float betas[3][2] = {{0.9f, 0.999f}, {0.8f, 0.99f}, {0.95f, 0.9999f}};
    int64_t differ = 0, total = 0;
    double worst = 0;
    for (int b = 0; b < 3; b++)
        for (int64_t t = 1; t <= 200000; t++) {
            float ss, bc, dc;
            odl_adam_scalars(1e-3f, betas[b][0], betas[b][1], 0.01f, t, &ss, &bc, &dc);
            const double bc1 = 1.0 - pow((double)betas[b][0], (double)t), bc2 = 1.0 - pow((double)betas[b][1], (double)t);
            const float ss_ref = (float)((double)1e-3f / bc1), bc_ref = (float)sqrt(bc2);
            differ += (ss != ss_ref) + (bc != bc_ref);
            total += 2;
            const double r = fabs(odl_powi((double)betas[b][1], t) - pow((double)betas[b][1], (double)t)) /
                             fmax(pow((double)betas[b][1], (double)t), 1e-300);
            if (r > worst) worst = r;
        }
    printf("Adam scalars by squaring vs pow: %lld of %lld floats differ; beta2^t worst relative difference %.2e\n",
           (long long)differ, (long long)total, worst);
    TCHECK(worst <= 2.3e-16, "beta^t by squaring off by %.2e relative (more than pow's ulp)", worst);
    /* pow is within an ulp, not always correctly rounded: a near-tie may flip a float, at most 1 in 10^5 */
    TCHECK(differ * 100000 <= total, "%lld of %lld Adam scalars differ from the pow-based ones", (long long)differ,
           (long long)total);
    TCHECK(odl_powi(0.5, 0) == 1.0 && odl_powi(0.5, 1) == 0.5 && odl_powi(0.5, 10) == 1.0 / 1024, "powi basics");
}

int main(int argc, char **argv) {
    odl_device dev;
    const int rc = odl_test_device(argc, argv, ODL_CUDA_POOL_GROW, &dev);
    if (rc) return rc;
    const int cuda = dev.type == ODL_DEV_CUDA;
    check_powi();
    for (int w = 0; w < N_OPT; w++) check_optim(dev, w);
    for (int w = 0; w < N_OPT; w++) check_group(dev, w);
    check_dropout(dev);
    if (cuda) TOK(odl_cuda_shutdown());
    return odl_test_finish("test_step_scalars");
}
