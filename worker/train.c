/* --task=train: MNIST-family training (PyTorch examples/mnist recipe by default). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "odl/config.h"
#include "odl/device.h"
#include "odl/loader.h"
#include "odl/log.h"
#include "odl/mnist.h"
#include "odl/models.h"
#include "odl/nn.h"
#include "odl/ops.h"
#include "worker/checkpoint.h"
#include "worker/tasks.h"
#include "worker/train.h"

#define MNIST_MEAN 0.1307f
#define MNIST_STD 0.3081f

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Short flags of the command line, mapped onto config keys. */
static const struct { const char *flag, *key; } k_flag_keys[] = {
    {"model", "model"},
    {"data_dir", "data_dir"},
    {"data-dir", "data_dir"},
    {"device", "device"},
    {"precision", "precision"},
    {"seed", "seed"},
    {"epochs", "train.epochs"},
    {"batch-size", "train.batch_size"},
    {"batch_size", "train.batch_size"},
    {"test-batch-size", "train.test_batch_size"},
    {"lr", "train.lr"},
    {"optimizer", "train.optimizer"},
    {"gamma", "train.gamma"},
    {"max-steps", "train.max_steps"},
    {"max-train-samples", "train.max_train_samples"},
    {"metrics-out", "logging.metrics_out"},
    {"log-level", "logging.level"},
    {"progress", "logging.progress"},
    {"checkpoint-dir", "checkpoint.dir"},
    {"checkpoint-every", "checkpoint.every"},
    {"keep", "checkpoint.keep"},
    {"resume", "checkpoint.resume"},
    {"preallocate-fraction", "memory.preallocate_fraction"},
};

static void train_usage(FILE *f) {
    fprintf(f,
            "usage: odl_worker --task=train [--config FILE.yaml] [options]\n"
            "  --model=mnist|mnist_cnn|mnist_mlp   --data_dir=DIR (four MNIST IDX files, .gz or not)\n"
            "  --epochs N  --batch-size B (per rank)  --test-batch-size B  --lr X  --gamma G (StepLR)\n"
            "  --optimizer adadelta|sgd|adam|adamw  --device auto|cpu|cuda  --seed S  --precision fp32|tf32|bf16\n"
            "  --max-steps N (total, across resumes)  --max-train-samples N (first N per epoch)\n"
            "  --no-dropout  --save FILE.h5  --metrics-out FILE.jsonl  --log-level L  --progress auto|on|off\n"
            "  --checkpoint-dir DIR --checkpoint-every N --keep K --resume auto|PATH\n"
            "  --KEY=VALUE for any config key (e.g. --train.weight_decay=0.01); --help-config lists them.\n"
            "Flags override the config file.\n");
}

/* Parse argv into cfg and opts. Returns 0 to go on, 1 when help was printed, -1 on error (printed). */
static int parse_args(int argc, char **argv, odl_config *cfg, odl_train_opts *opts) {
    odl_config_defaults(cfg);
    memset(opts, 0, sizeof *opts);
    /* The config file first, so that flags override it wherever they stand. */
    for (int i = 1; i < argc; i++) {
        const char *path = NULL;
        if (!strncmp(argv[i], "--config=", 9)) path = argv[i] + 9;
        else if (!strcmp(argv[i], "--config") && i + 1 < argc) path = argv[++i];
        if (path && odl_config_load_file(cfg, path) != ODL_OK) {
            fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg());
            return -1;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "--task", 6) || !strncmp(a, "--config", 8)) {
            if (!strchr(a, '=')) i++;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            train_usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--help-config")) {
            odl_config_doc(stdout);
            return 1;
        }
        if (!strcmp(a, "--no-dropout")) {
            odl_config_set(cfg, "train.dropout", "false");
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "odl_worker: error: unexpected argument '%s'\n", a);
            return -1;
        }
        char name[256];
        const char *val;
        const char *eq = strchr(a, '=');
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a - 2), a + 2);
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a + 2);
            if (i + 1 >= argc) {
                fprintf(stderr, "odl_worker: error: option --%s needs a value\n", name);
                return -1;
            }
            val = argv[++i];
        }
        if (!strcmp(name, "save")) {
            snprintf(opts->save_path, sizeof opts->save_path, "%s", val);
            continue;
        }
        const char *key = name;
        for (size_t k = 0; k < sizeof k_flag_keys / sizeof k_flag_keys[0]; k++)
            if (!strcmp(name, k_flag_keys[k].flag)) key = k_flag_keys[k].key;
        if (!odl_config_find_key(key)) {
            fprintf(stderr, "odl_worker: error: unknown option --%s (see --help)\n", name);
            return -1;
        }
        if (odl_config_set(cfg, key, val) != ODL_OK) {
            fprintf(stderr, "odl_worker: error: --%s: %s\n", name, odl_error_msg());
            return -1;
        }
    }
    return 0;
}

static odl_status pick_device(const odl_config *cfg, int local_rank, odl_device *dev) {
    odl_set_matmul_precision(cfg->precision); /* CPU: the rounding emulated (kernels/cpu/gemm_lowp.c) */
    int n = odl_cuda_device_count();
    if (cfg->device == ODL_CFG_DEVICE_CPU || (cfg->device == ODL_CFG_DEVICE_AUTO && n == 0)) {
        *dev = odl_cpu();
        return ODL_OK;
    }
    if (n == 0)
        return ODL_ERR(ODL_E_NODEV, "device=cuda but no CUDA device is usable (%s)",
                       odl_cuda_built() ? "no GPU or driver found" : "this build has no CUDA backend");
    int idx = local_rank % n;
    ODL_CHECK(odl_cuda_init(idx, cfg->memory.preallocate_fraction));
    *dev = odl_cuda(idx);
    return ODL_OK;
}

/* Evaluate on the test set: mean NLL and accuracy (PyTorch examples/mnist's test()). */
static odl_status evaluate(odl_net *net, const odl_mnist *test, int batch, double *loss_out, double *acc_out) {
    int64_t elems = (int64_t)test->rows * test->cols;
    float *hx = NULL;
    int32_t *hy = NULL, *hp = NULL;
    int64_t *idx = NULL;
    odl_status s = ODL_OK;
    hx = malloc((size_t)(batch * elems) * sizeof *hx);
    hy = malloc((size_t)batch * sizeof *hy);
    hp = malloc((size_t)batch * sizeof *hp);
    idx = malloc((size_t)batch * sizeof *idx);
    if (!hx || !hy || !hp || !idx) {
        s = ODL_ERR(ODL_E_NOMEM, "evaluation buffers");
        goto out;
    }
    double loss_sum = 0;
    int64_t correct = 0;
    for (int64_t start = 0; start < test->n; start += batch) {
        int B = (int)((test->n - start < batch) ? test->n - start : batch);
        for (int b = 0; b < B; b++) idx[b] = start + b;
        odl_loader_gather(test->images, test->labels, elems, MNIST_MEAN, MNIST_STD, idx, B, hx, hy);
        odl_tensor xin, yin, pred;
        int64_t xs[4] = {B, 1, test->rows, test->cols};
        ODL_CHECK_GOTO(odl_tensor_view_rows(&net->input, 0, B, &xin), s, out);
        ODL_CHECK_GOTO(odl_tensor_reshape(&xin, 4, xs, &xin), s, out);
        ODL_CHECK_GOTO(odl_tensor_view_rows(&net->labels, 0, B, &yin), s, out);
        ODL_CHECK_GOTO(odl_tensor_copy_from_host(&xin, hx, (size_t)(B * elems) * sizeof *hx), s, out);
        ODL_CHECK_GOTO(odl_tensor_copy_from_host(&yin, hy, (size_t)B * sizeof *hy), s, out);
        ODL_CHECK_GOTO(odl_net_forward(net, B, 0, 0, 0), s, out);
        float l;
        ODL_CHECK_GOTO(odl_tensor_copy_to_host(&net->loss, &l, sizeof l), s, out);
        ODL_CHECK_GOTO(odl_tensor_view_rows(&net->pred, 0, B, &pred), s, out);
        ODL_CHECK_GOTO(odl_tensor_copy_to_host(&pred, hp, (size_t)B * sizeof *hp), s, out);
        loss_sum += (double)l * B;
        for (int b = 0; b < B; b++) correct += hp[b] == hy[b];
    }
    *loss_out = loss_sum / (double)test->n;
    *acc_out = (double)correct / (double)test->n;
out:
    free(hx);
    free(hy);
    free(hp);
    free(idx);
    return s;
}

static void progress_bar(int64_t done, int64_t total, int64_t epoch, double rate) {
    int width = 30, fill = total ? (int)(width * done / total) : width;
    fprintf(stderr, "\repoch %" PRId64 " [", epoch);
    for (int i = 0; i < width; i++) fputc(i < fill ? '=' : ' ', stderr);
    fprintf(stderr, "] %" PRId64 "/%" PRId64 " %.0f samples/s ", done, total, rate);
    fflush(stderr);
}

static void metrics_line(FILE *f, const char *event, const odl_train_state *st, double train_loss, double test_loss,
                         double test_acc, double sps, double wall, int world) {
    if (!f) return;
    fprintf(f,
            "{\"event\":\"%s\",\"epoch\":%" PRId64 ",\"step\":%" PRId64 ",\"train_loss\":%.6f,\"test_loss\":%.6f,"
            "\"test_acc\":%.4f,\"samples_per_s\":%.1f,\"wall_s\":%.3f,\"world_size\":%d}\n",
            event, st->epoch, st->step, train_loss, test_loss, test_acc, sps, wall, world);
    fflush(f);
}

odl_status odl_train_run(const odl_config *cfg, const odl_train_opts *opts, odl_train_result *result) {
    odl_status s = ODL_OK;
    odl_mnist train = {0}, test = {0};
    odl_net net;
    odl_optim opt;
    odl_loader loader;
    odl_train_state st;
    FILE *metrics = NULL;
    int have_net = 0, have_opt = 0, have_loader = 0;
    odl_ckpt_session *ckpt = NULL;
    odl_tensor loss_acc = {0};
    odl_tensor net_input = {0}, net_labels = {0}; /* the net's own buffers while a step borrows the loader's */
    memset(&loader, 0, sizeof loader);
    memset(&st, 0, sizeof st);
    memset(result, 0, sizeof *result);
    const int rank = opts->rank, world = opts->world_size > 0 ? opts->world_size : 1;

    /* Labels were range-checked when the IDX files were read; the CUDA loss's own per-call label check
     * would synchronise the stream twice a step. ODL_CUDA_LABEL_CHECK=1 in the environment keeps it. */
    setenv("ODL_CUDA_LABEL_CHECK", "0", 0);
    odl_device dev;
    ODL_CHECK_GOTO(pick_device(cfg, opts->local_rank, &dev), s, out);
    odl_model_kind kind;
    ODL_CHECK_GOTO(odl_model_parse(cfg->model == ODL_CFG_MODEL_MNIST_MLP ? "mnist_mlp" : "mnist", &kind), s, out);
    ODL_CHECK_GOTO(odl_mnist_load(cfg->data_dir, "train", &train), s, out);
    ODL_CHECK_GOTO(odl_mnist_load(cfg->data_dir, "t10k", &test), s, out);
    if (train.rows != 28 || train.cols != 28 || test.rows != 28 || test.cols != 28) {
        s = ODL_ERR(ODL_E_FORMAT, "%s: images are %dx%d, the MNIST models need 28x28", cfg->data_dir, train.rows, train.cols);
        goto out;
    }
    const int batch = (int)cfg->train.batch_size, test_batch = (int)cfg->train.test_batch_size;
    int64_t n_epoch = train.n;
    if (cfg->train.max_train_samples > 0 && cfg->train.max_train_samples < n_epoch) n_epoch = cfg->train.max_train_samples;
    const int64_t steps_per_epoch = (n_epoch + (int64_t)world * batch - 1) / ((int64_t)world * batch);
    ODL_LOG_INFO("training %s on %s: %" PRId64 " train / %" PRId64 " test samples, %s, world size %d, batch %d per rank "
                 "(%d global), %" PRId64 " steps per epoch",
                 odl_model_name(kind), cfg->data_dir, n_epoch, test.n, odl_device_name(dev), world, batch, batch * world,
                 steps_per_epoch);

    int max_batch = batch > test_batch ? batch : test_batch;
    ODL_CHECK_GOTO(odl_model_build(&net, kind, dev, max_batch, cfg->train.dropout), s, out);
    have_net = 1;
    ODL_CHECK_GOTO(odl_net_init_params(&net, (uint64_t)cfg->seed), s, out);
    ODL_CHECK_GOTO(odl_optim_init(&opt, (odl_optim_type)cfg->train.optimizer, (float)cfg->train.lr,
                                  (float)cfg->train.momentum, (float)cfg->train.weight_decay, &net), s, out);
    have_opt = 1;
    ODL_LOG_INFO("%s: %" PRId64 " parameters", odl_model_name(kind), odl_net_num_params(&net));

    ODL_CHECK_GOTO(odl_ckpt_session_start(&ckpt, cfg, rank, world), s, out);
    if (ckpt) {
        int resumed = 0;
        ODL_CHECK_GOTO(odl_ckpt_session_restore(ckpt, &net, &opt, &st, &resumed), s, out);
        if (resumed)
            ODL_LOG_INFO("resumed at epoch %" PRId64 ", step %" PRId64 ", sample cursor %" PRId64, st.epoch + 1, st.step,
                         st.cursor);
    }
    /* After a restore, so that rank 0's broadcast of the replicas covers the restored state. */
    if (opts->hooks && opts->hooks->on_start) ODL_CHECK_GOTO(opts->hooks->on_start(opts->hooks->ctx, cfg, &net, &opt, &st), s, out);
    if (st.epoch >= cfg->train.epochs || (cfg->train.max_steps > 0 && st.step >= cfg->train.max_steps)) {
        ODL_LOG_INFO("nothing to do: training already reached epoch %" PRId64 ", step %" PRId64, st.epoch, st.step);
        goto done;
    }
    if (cfg->logging.metrics_out[0] && rank == 0) {
        metrics = fopen(cfg->logging.metrics_out, st.step > 0 ? "a" : "w");
        if (!metrics) {
            s = ODL_ERR(ODL_E_IO, "cannot open metrics file %s: %s", cfg->logging.metrics_out, strerror(errno));
            goto out;
        }
    }
    int64_t one[1] = {1};
    ODL_CHECK_GOTO(odl_tensor_zeros(&loss_acc, dev, ODL_F32, 1, one), s, out);
    if (st.epoch_loss_sum != 0) {
        /* A resumed epoch: go on with the float32 accumulator from the checkpoint's sum (itself a float32
         * value), so that the epoch's loss adds up exactly as in an uninterrupted run. With several ranks
         * rank 0 carries it (the ranks' accumulators are summed). */
        float acc0 = rank == 0 ? (float)st.epoch_loss_sum : 0.0f;
        ODL_CHECK_GOTO(odl_tensor_copy_from_host(&loss_acc, &acc0, sizeof acc0), s, out);
        st.epoch_loss_sum = 0;
    }

    odl_loader_config lc = {
        .images = train.images, .labels = train.labels, .n = n_epoch, .sample_ndim = 3,
        .sample_shape = {1, 28, 28}, .mean = MNIST_MEAN, .std = MNIST_STD, .rank = rank, .world_size = world,
        .batch = batch, .seed = (uint64_t)cfg->seed, .shuffle = 1, .start_epoch = st.epoch,
        .start_cursor = st.cursor, .end_epoch = cfg->train.epochs, .device = dev,
    };
    ODL_CHECK_GOTO(odl_loader_start(&loader, &lc), s, out);
    have_loader = 1;

    int show_progress = rank == 0 && (cfg->logging.progress == ODL_CFG_PROGRESS_ON ||
                                      (cfg->logging.progress == ODL_CFG_PROGRESS_AUTO && isatty(2)));
    const double t_start = now_s();
    double t_epoch = t_start;
    int64_t epoch_steps = 0, run_samples = 0; /* since t_epoch, in this process (a resume starts mid-epoch) */
    double test_loss = NAN, test_acc = NAN, train_loss = NAN;
    opt.lr = (float)(cfg->train.lr * pow(cfg->train.gamma, (double)st.epoch));
    net_input = net.input;
    net_labels = net.labels;
    for (;;) {
        odl_batch *b;
        ODL_CHECK_GOTO(odl_loader_next(&loader, &b), s, out);
        if (!b) break;
        if (b->epoch != st.epoch) { /* cannot happen: epochs end below */
            s = ODL_ERR(ODL_E_INTERNAL, "loader epoch %" PRId64 " != %" PRId64, b->epoch, st.epoch);
            goto out;
        }
        /* The step reads the loader's device buffers directly. */
        net.input = b->x;
        net.input.owns = 0;
        net.labels = b->y;
        net.labels.owns = 0;
        uint64_t offset = ((uint64_t)st.step * (uint64_t)world + (uint64_t)rank) * ODL_MAX_LAYERS;
        if (b->local > 0) {
            ODL_CHECK_GOTO(odl_net_forward(&net, b->local, 1, (uint64_t)cfg->seed, offset), s, out);
            ODL_CHECK_GOTO(odl_net_backward(&net, b->local, (float)b->local / (float)b->global, (uint64_t)cfg->seed, offset), s, out);
            ODL_CHECK_GOTO(odl_axpy((float)b->local, &net.loss, &loss_acc), s, out);
        } else {
            for (int i = 0; i < net.n_params; i++) ODL_CHECK_GOTO(odl_tensor_fill(&net.params[i].grad, 0.0f), s, out);
        }
        net.input = net_input;
        net.labels = net_labels;
        const int64_t b_cursor = b->cursor;
        const int b_global = b->global;
        ODL_CHECK_GOTO(odl_loader_release(&loader, b), s, out); /* b belongs to the loader again */
        if (opts->hooks && opts->hooks->reduce_grads) ODL_CHECK_GOTO(opts->hooks->reduce_grads(opts->hooks->ctx, &net), s, out);
        ODL_CHECK_GOTO(odl_optim_step(&opt, &net), s, out);
        st.step++;
        st.cursor = b_cursor + b_global;
        st.epoch_samples += b_global;
        run_samples += b_global;
        epoch_steps++;
        if (show_progress && (epoch_steps % 20 == 0 || st.cursor >= n_epoch))
            progress_bar(st.cursor, n_epoch, st.epoch + 1, run_samples / (now_s() - t_epoch));
        int epoch_end = st.cursor >= n_epoch;
        int stop = cfg->train.max_steps > 0 && st.step >= cfg->train.max_steps;
        if (epoch_end || stop) {
            float acc_h;
            ODL_CHECK_GOTO(odl_tensor_copy_to_host(&loss_acc, &acc_h, sizeof acc_h), s, out);
            double loss_sum = acc_h;
            if (opts->hooks && opts->hooks->reduce_scalar) ODL_CHECK_GOTO(opts->hooks->reduce_scalar(opts->hooks->ctx, &loss_sum), s, out);
            train_loss = (st.epoch_loss_sum + loss_sum) / (double)st.epoch_samples;
            double wall = now_s() - t_epoch, sps = run_samples / wall;
            if (show_progress) fputc('\n', stderr);
            if (rank == 0 && (cfg->train.eval_every_epoch || stop || st.epoch + 1 == cfg->train.epochs))
                ODL_CHECK_GOTO(evaluate(&net, &test, test_batch, &test_loss, &test_acc), s, out);
            odl_train_state rep = st;
            rep.epoch = st.epoch + (epoch_end ? 1 : 0);
            ODL_LOG_INFO("epoch %" PRId64 " step %" PRId64 ": train_loss %.4f test_loss %.4f test_acc %.4f "
                         "%.0f samples/s %.2f s%s",
                         st.epoch + 1, st.step, train_loss, test_loss, test_acc, sps, wall, epoch_end ? "" : " (stopped mid-epoch)");
            metrics_line(metrics, "epoch", &rep, train_loss, test_loss, test_acc, sps, wall, world);
            result->train_loss = train_loss;
            result->test_loss = test_loss;
            result->test_acc = test_acc;
            result->samples_per_s = sps;
            if (epoch_end) {
                st.epoch++;
                st.cursor = 0;
                opt.lr = (float)(cfg->train.lr * pow(cfg->train.gamma, (double)st.epoch)); /* StepLR(step_size=1) */
                /* A stop mid-epoch keeps the epoch's sums: the checkpoint taken below must hold them. */
                ODL_CHECK_GOTO(odl_tensor_fill(&loss_acc, 0.0f), s, out);
                st.epoch_loss_sum = 0;
                st.epoch_samples = 0;
            }
            epoch_steps = 0;
            run_samples = 0;
            t_epoch = now_s();
        }
        /* Also after the last step of the run, so that a resume never repeats steps already taken. */
        const int last_step = stop || (epoch_end && st.epoch >= cfg->train.epochs);
        if (ckpt && (odl_ckpt_session_due(ckpt, &st) || (last_step && cfg->checkpoint.every > 0))) {
            /* The checkpoint holds the epoch's loss so far, so a resumed run prints the same epoch line. */
            float acc_h;
            ODL_CHECK_GOTO(odl_tensor_copy_to_host(&loss_acc, &acc_h, sizeof acc_h), s, out);
            double loss_sum = acc_h;
            if (opts->hooks && opts->hooks->reduce_scalar) ODL_CHECK_GOTO(opts->hooks->reduce_scalar(opts->hooks->ctx, &loss_sum), s, out);
            odl_train_state snap = st;
            snap.epoch_loss_sum += loss_sum;
            ODL_CHECK_GOTO(odl_ckpt_session_save(ckpt, cfg, &net, &opt, &snap), s, out);
        }
        if (opts->hooks && opts->hooks->after_step) ODL_CHECK_GOTO(opts->hooks->after_step(opts->hooks->ctx, cfg, &net, &opt, &st), s, out);
        if (stop) break;
    }
    {
        double wall = now_s() - t_start;
        odl_train_state rep = st;
        metrics_line(metrics, "done", &rep, train_loss, test_loss, test_acc, result->samples_per_s, wall, world);
        ODL_LOG_INFO("done: %" PRId64 " steps, test_acc %.4f, %.2f s", st.step, test_acc, wall);
    }
done:
    if (opts->save_path[0] && rank == 0) ODL_CHECK_GOTO(odl_train_save_weights(opts->save_path, cfg, &net), s, out);
    if (opts->hooks && opts->hooks->on_finish) ODL_CHECK_GOTO(opts->hooks->on_finish(opts->hooks->ctx, cfg, &net, &opt, &st), s, out);
    result->steps = st.step;
    result->epochs = st.epoch;
    if (opts->keep_net) {
        *opts->keep_net = net;
        have_net = 0;
    }
out:
    if (ckpt) {
        odl_status cs = odl_ckpt_session_finish(ckpt);
        if (s == ODL_OK) s = cs;
    }
    if (net_input.data) {
        net.input = net_input;
        net.labels = net_labels;
    }
    if (have_loader) odl_loader_stop(&loader);
    odl_tensor_free(&loss_acc);
    if (have_opt) odl_optim_free(&opt);
    if (have_net) odl_net_free(&net);
    if (metrics) fclose(metrics);
    odl_mnist_free(&test);
    odl_mnist_free(&train);
    return s;
}

int odl_task_train_main(int argc, char **argv) {
    static odl_config cfg;
    odl_train_opts opts;
    int r = parse_args(argc, argv, &cfg, &opts);
    if (r) return r > 0 ? 0 : 2;
    odl_log_set_level(cfg.logging.level);
    int rc = odl_train_launch(&cfg, &opts);
    return rc;
}
