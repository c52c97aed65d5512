/* The training step of odl_worker (worker/train_step.c) against the plain loop it replaces: forward and
 * backward with the dropout offset of odl_net_dropout_offset, the loss accumulated, odl_optim_step with
 * host scalars. The examples/mnist CNN with dropout on random data, fed from three batch buffers as the
 * loader's slots, for Adadelta and Adam:
 *   phase 1, batch 32: 9 full steps, a partial one (20 samples), 6 full; StepLR (lr x 0.7, written to
 *     the device scalars) after steps 4 and 12;
 *   phase 2, the batch size changed to 16 (a new step object on the same network and optimiser, as a
 *     resumed run with another batch size): 8 full steps and a step with no sample on this rank (the
 *     gradients zeroed), with the learning rate changed once more.
 * After every step the parameters and the loss accumulator must equal the plain loop's bit for bit. On
 * the CPU (label unit) every step runs op by op. With --device cuda (label gpu; exit 77 without a GPU)
 * the plain loop, the step object op by op (--cuda-graph off) and the step object with CUDA graphs run
 * side by side on three copies of the network: graph replays (one capture per buffer and batch size, the
 * partial and empty steps op by op) equal both, and the run must have replayed.
 * --quick or ODL_TEST_QUICK=1 (the ASan build, where the CPU kernels run 50-100x slower; compute-sanitizer,
 * bench/sanitize_gpu.sh): the same kinds of step, fewer of
 * each (phase 1: 2 full, the partial, 2 full, the rate changed after the second; phase 2: a full one,
 * the empty one, a full one, the rate changed after the first). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/device.h"
#include "odl/models.h"
#include "odl/nn.h"
#include "odl/ops.h"
#include "test_util.h"
#include "worker/train_step.h"

#define MAXB 32
#define SEED 5

typedef struct run {
    odl_net net;
    odl_optim opt;
    odl_tensor acc;
    odl_train_step ts;
    int use_step, graph; /* 0: the plain loop */
    int64_t steps;
} run;

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 32);
}

static void run_init(run *r, odl_device dev, odl_optim_type type, float lr, int use_step, int graph) {
    memset(r, 0, sizeof *r);
    r->use_step = use_step;
    r->graph = graph;
    TOK(odl_model_build(&r->net, ODL_MODEL_MNIST_CNN, dev, MAXB, 1));
    TOK(odl_net_init_params(&r->net, SEED));
    TOK(odl_optim_init(&r->opt, type, lr, 0.0f, 0.0f, &r->net));
    int64_t one[1] = {1};
    TOK(odl_tensor_zeros(&r->acc, dev, ODL_F32, 1, one));
}

static void step_begin(run *r, int batch) {
    if (r->use_step)
        TOK(odl_train_step_init(&r->ts, &r->net, &r->opt, &r->acc, NULL, SEED, batch, 1, 0, r->graph, r->steps));
}

static void step_end(run *r) {
    if (r->use_step) odl_train_step_free(&r->ts);
}

static void set_lr(run *r, float lr) {
    r->opt.lr = lr;
    if (r->use_step) TOK(odl_train_step_sync(&r->ts, r->steps));
}

/* One step on b (its x, y, local, global). */
static void step(run *r, odl_batch *b) {
    if (r->use_step) {
        TOK(odl_train_step_run(&r->ts, b));
        r->opt.step++;
    } else {
        const uint64_t off = odl_net_dropout_offset(r->steps, 1, 0);
        TOK(odl_net_bind_batch(&r->net, &b->x, &b->y));
        if (b->local > 0) {
            TOK(odl_net_forward(&r->net, b->local, 1, SEED, off));
            TOK(odl_net_backward(&r->net, b->local, (float)b->local / (float)b->global, SEED, off));
            TOK(odl_axpy((float)b->local, &r->net.loss, &r->acc));
        } else {
            for (int i = 0; i < r->net.n_params; i++) TOK(odl_tensor_fill(&r->net.params[i].grad, 0.0f));
        }
        odl_net_unbind_batch(&r->net);
        TOK(odl_optim_step(&r->opt, &r->net));
    }
    r->steps++;
}

/* Parameters and accumulator of b equal a's, bit for bit. */
static int same(const run *a, const run *b) {
    int ok = 1;
    for (int i = 0; i < a->net.n_params && ok; i++) {
        size_t n = odl_tensor_nbytes(&a->net.params[i].value);
        char *x = malloc(n), *y = malloc(n);
        TOK(odl_tensor_copy_to_host(&a->net.params[i].value, x, n));
        TOK(odl_tensor_copy_to_host(&b->net.params[i].value, y, n));
        ok = memcmp(x, y, n) == 0;
        free(x);
        free(y);
    }
    float la = 0, lb = 0;
    TOK(odl_tensor_copy_to_host(&a->acc, &la, sizeof la));
    TOK(odl_tensor_copy_to_host(&b->acc, &lb, sizeof lb));
    return ok && memcmp(&la, &lb, sizeof la) == 0;
}

static void run_free(run *r) {
    odl_tensor_free(&r->acc);
    odl_optim_free(&r->opt);
    odl_net_free(&r->net);
}

/* Three batch buffers (the loader's slots); step k uses buffer k % 3 with fresh random samples. */
typedef struct slots {
    odl_batch b[3];
} slots;

static void slots_init(slots *s, odl_device dev) {
    memset(s, 0, sizeof *s);
    int64_t xs[4] = {MAXB, 1, 28, 28}, ys[1] = {MAXB};
    for (int i = 0; i < 3; i++) {
        TOK(odl_tensor_alloc(&s->b[i].x, dev, ODL_F32, 4, xs));
        TOK(odl_tensor_alloc(&s->b[i].y, dev, ODL_I32, 1, ys));
    }
}

static odl_batch *slots_fill(slots *s, int64_t k, int local, int global) {
    odl_batch *b = &s->b[k % 3];
    static float hx[MAXB * 28 * 28];
    static int32_t hy[MAXB];
    for (int i = 0; i < MAXB * 28 * 28; i++) hx[i] = (float)(rnd() % 2001) / 1000.0f - 1.0f;
    for (int i = 0; i < MAXB; i++) hy[i] = (int32_t)(rnd() % 10);
    TOK(odl_tensor_copy_from_host(&b->x, hx, sizeof hx));
    TOK(odl_tensor_copy_from_host(&b->y, hy, sizeof hy));
    b->local = local;
    b->global = global;
    return b;
}

static void slots_free(slots *s) {
    for (int i = 0; i < 3; i++) {
        odl_tensor_free(&s->b[i].y);
        odl_tensor_free(&s->b[i].x);
    }
}

static void check_optimizer(odl_device dev, odl_optim_type type, float lr, int quick) {
    const int cuda = dev.type == ODL_DEV_CUDA;
    run plain, eager, graph;
    run *runs[3] = {&plain, &eager, &graph};
    const int nr = cuda ? 3 : 2;
    run_init(&plain, dev, type, lr, 0, 0);
    run_init(&eager, dev, type, lr, 1, 0);
    if (cuda) run_init(&graph, dev, type, lr, 1, 1);
    slots sl;
    slots_init(&sl, dev);
    int64_t k = 0, first_diff = -1, replays = 0, captures = 0;
    /* (local, global) of each step: phase 1 at batch 32, phase 2 at batch 16 */
    static const int p1[][2] = {{32, 32}, {32, 32}, {32, 32}, {32, 32}, {32, 32}, {32, 32}, {32, 32}, {32, 32},
                                {32, 32}, {20, 20}, {32, 32}, {32, 32}, {32, 32}, {32, 32}, {32, 32}, {32, 32}};
    static const int p2[][2] = {{16, 16}, {16, 16}, {16, 16}, {16, 16}, {0, 16}, {16, 16}, {16, 16}, {16, 16}, {16, 16}};
    static const int q1[][2] = {{32, 32}, {32, 32}, {20, 20}, {32, 32}, {32, 32}};
    static const int q2[][2] = {{16, 16}, {0, 16}, {16, 16}};
    for (int phase = 0; phase < 2; phase++) {
        const int batch = phase ? 16 : 32, n = quick ? (phase ? 3 : 5) : (phase ? 9 : 16);
        for (int r = 0; r < nr; r++) step_begin(runs[r], batch);
        for (int i = 0; i < n; i++, k++) {
            const int *lg = quick ? (phase ? q2[i] : q1[i]) : (phase ? p2[i] : p1[i]);
            odl_batch *b = slots_fill(&sl, k, lg[0], lg[1]);
            for (int r = 0; r < nr; r++) step(runs[r], b);
            for (int r = 1; r < nr && first_diff < 0; r++)
                if (!same(&plain, runs[r])) first_diff = k;
            if (quick ? (phase == 0 && i == 1) || (phase == 1 && i == 0)
                      : (phase == 0 && (i == 3 || i == 11)) || (phase == 1 && i == 5)) {
                lr *= 0.7f;
                for (int r = 0; r < nr; r++) set_lr(runs[r], lr);
            }
        }
        if (cuda) {
            replays += graph.ts.n_replayed;
            captures += graph.ts.n_captured;
            TCHECK(eager.ts.n_replayed == 0, "--cuda-graph off replayed %lld steps", (long long)eager.ts.n_replayed);
        }
        for (int r = 0; r < nr; r++) step_end(runs[r]);
    }
    TCHECK(first_diff < 0, "%s on %s: the step object differs from the plain loop from step %lld on",
           odl_optim_type_name(type), odl_device_name(dev), (long long)first_diff + 1);
    if (cuda) {
        /* A step object runs its first full step op by op and every later full one from a graph (a capture
         * launches too), one capture per buffer; partial and empty steps op by op. Full: phase 1, 15 full
         * steps: 14 from graphs, 3 captures; phase 2, 8 full: 7, 3 captures. Quick: phase 1, full steps 0, 1,
         * 3, 4: 3 from graphs in buffers 1, 0, 1 (2 captures); phase 2, full steps 5 and 7: 1, 1 capture. */
        const int64_t want_c = quick ? 3 : 6, want_r = quick ? 4 : 21;
        TCHECK(captures == want_c && replays == want_r, "%s: %lld captures, %lld replays (want %lld, %lld)",
               odl_optim_type_name(type), (long long)captures, (long long)replays, (long long)want_c, (long long)want_r);
        printf("%s on %s: %lld steps, %lld CUDA graph captures and %lld replays equal the op-by-op steps: %s\n",
               odl_optim_type_name(type), odl_device_name(dev), (long long)k, (long long)captures, (long long)replays,
               first_diff < 0 ? "bit for bit" : "NO");
    } else {
        printf("%s on %s: %lld steps of the step object equal the plain loop: %s\n", odl_optim_type_name(type),
               odl_device_name(dev), (long long)k, first_diff < 0 ? "bit for bit" : "NO");
    }
    slots_free(&sl);
    for (int r = nr - 1; r >= 0; r--) run_free(runs[r]);
}

int main(int argc, char **argv) {
    odl_device dev;
    const int rc = odl_test_device(argc, argv, 0.1, &dev);
    if (rc) return rc;
    const int cuda = dev.type == ODL_DEV_CUDA;
    const int quick = odl_test_quick(argc, argv);
    check_optimizer(dev, ODL_OPTIM_ADADELTA, 1.0f, quick);
    check_optimizer(dev, ODL_OPTIM_ADAM, 1e-3f, quick);
    if (cuda) TOK(odl_cuda_shutdown()); /* every graph and buffer freed */
    return odl_test_finish("test_train_step");
}
