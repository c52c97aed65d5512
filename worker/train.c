/* --task=train: MNIST-family training (PyTorch examples/mnist recipe by default). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "odl/clock.h"
#include "odl/backend.h"
#include "odl/ckpt_session.h"
#include "odl/coord_client.h"
#include "worker/config.h"
#include "odl/json.h"
#include "odl/device.h"
#include "odl/env.h"
#include "odl/loader.h"
#include "odl/log.h"
#include "odl/mnist.h"
#include "odl/models.h"
#include "odl/ckpt.h"
#include "odl/nn.h"
#include "odl/ops.h"
#include "worker/cli.h"
#include "worker/coord.h"
#include "worker/outputs.h"
#include "worker/sample_record.h"
#include "worker/tensorboard.h"
#include "worker/health_monitor.h"
#include "worker/tasks.h"
#include "worker/train.h"
#include "worker/train_step.h"

#define MNIST_MEAN 0.1307f
#define MNIST_STD 0.3081f

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
    {"max-test-samples", "train.max_test_samples"},
    {"metrics-out", "logging.metrics_out"},
    {"log-level", "logging.level"},
    {"progress", "logging.progress"},
    {"checkpoint-dir", "checkpoint.dir"},
    {"checkpoint-every", "checkpoint.every"},
    {"keep", "checkpoint.keep"},
    {"resume", "checkpoint.resume"},
    {"preallocate-fraction", "memory.preallocate_fraction"},
    {"cuda-graph", "train.cuda_graph"},
    {"log-interval", "logging.log_interval"},
    {"tensorboard", "logging.tensorboard"},
};

static void train_usage(FILE *f) {
    fprintf(f,
            "usage: odl_worker --task=train [--config FILE.yaml] [options]\n"
            "  --model=mnist|mnist_cnn|mnist_mlp   --data_dir=DIR (four MNIST IDX files, .gz or not)\n"
            "  --epochs N  --batch-size B (per rank)  --test-batch-size B  --lr X  --gamma G (StepLR)\n"
            "  --optimizer adadelta|sgd|adam|adamw  --device auto|cpu|cuda  --seed S  --precision fp32|tf32|bf16\n"
            "  --cuda-graph on|off (replay each step from a CUDA graph; default on)\n"
            "  --preallocate-fraction F (GPU memory the pool reserves at start; default 0.5, 0: grow on demand)\n"
            "  --max-steps N (total, across resumes)  --max-train-samples N (first N per epoch)\n"
            "  --max-test-samples N (evaluate the test set's first N only; --task=eval too)\n"
            "  --no-dropout  --save FILE.h5  --metrics-out FILE.jsonl  --log-level L  --progress auto|on|off\n"
            "  --checkpoint-dir DIR --checkpoint-every N --keep K --resume auto|PATH\n"
            "  --init-from W.h5 (fine-tune saved weights)  --tensorboard DIR  --log-interval N  --verbose\n"
            "  --task=eval --weights W.h5: test loss, accuracy and per-class accuracy of saved weights\n"
            "  --KEY=VALUE for any config key (e.g. --train.weight_decay=0.01); --help-config lists them.\n"
            "Flags override the config file.\n");
}

/* Flags that are no config key, for "did you mean". */
static const char *const k_plain_flags[] = {"task", "config", "save", "init-from", "no-dropout", "verbose",
                                            "help", "help-config", "version", "weights"};

static int known_flag(const char *name) {
    for (size_t k = 0; k < sizeof k_plain_flags / sizeof *k_plain_flags; k++)
        if (!strcmp(name, k_plain_flags[k])) return 1;
    return 0;
}

static void unknown_flag(const char *name) {
    const char *known[sizeof k_flag_keys / sizeof *k_flag_keys + sizeof k_plain_flags / sizeof *k_plain_flags];
    size_t n = 0;
    for (size_t k = 0; k < sizeof k_flag_keys / sizeof *k_flag_keys; k++) known[n++] = k_flag_keys[k].flag;
    for (size_t k = 0; k < sizeof k_plain_flags / sizeof *k_plain_flags; k++) known[n++] = k_plain_flags[k];
    odl_cli_unknown(name, known, n, 1, "--task=train --help");
}

/* Parse argv into cfg and opts (--task=train; --task=eval shares it). Returns 0 to go on, 1 when help
 * was printed, -1 on error (printed). A flag given twice, under any of its names, is an error. */
int odl_train_parse_args(int argc, char **argv, odl_config *cfg, odl_train_opts *opts) {
    odl_config_defaults(cfg);
    memset(opts, 0, sizeof *opts);
    static odl_cli_seen seen;
    memset(&seen, 0, sizeof seen);
    /* The config file first, so that flags override it wherever they stand. */
    for (int i = 1; i < argc; i++) {
        const char *path = NULL;
        if (!strncmp(argv[i], "--config=", 9)) path = argv[i] + 9;
        else if (!strcmp(argv[i], "--config") && i + 1 < argc) path = argv[++i];
        if (path && odl_cli_once(&seen, "config", "--config")) return -1;
        if (path && odl_config_load_file(cfg, path) != ODL_OK) {
            fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
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
        if (!strcmp(a, "--no-dropout") || !strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            const char *key = a[2] == 'n' ? "train.dropout" : "logging.level";
            if (odl_cli_once(&seen, key, a)) return -1;
            odl_config_set(cfg, key, a[2] == 'n' ? "false" : "debug");
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
            if (!known_flag(name) && !odl_config_find_key(name)) {
                int mapped = 0;
                for (size_t k = 0; k < sizeof k_flag_keys / sizeof k_flag_keys[0]; k++) mapped |= !strcmp(name, k_flag_keys[k].flag);
                if (!mapped) {
                    unknown_flag(name);
                    return -1;
                }
            }
            if (i + 1 >= argc) {
                fprintf(stderr, "odl_worker: error: option --%s needs a value\n", name);
                return -1;
            }
            val = argv[++i];
        }
        if (!strcmp(name, "save") || !strcmp(name, "init-from") || !strcmp(name, "weights")) {
            const char *key = name[0] == 's' ? "save" : "init-from"; /* eval's --weights = the weights to read */
            if (odl_cli_once(&seen, key, a)) return -1;
            snprintf(key[0] == 's' ? opts->save_path : opts->init_from, sizeof opts->save_path, "%s", val);
            continue;
        }
        const char *key = name;
        for (size_t k = 0; k < sizeof k_flag_keys / sizeof k_flag_keys[0]; k++)
            if (!strcmp(name, k_flag_keys[k].flag)) key = k_flag_keys[k].key;
        if (!odl_config_find_key(key)) {
            unknown_flag(name);
            return -1;
        }
        if (odl_cli_once(&seen, odl_config_find_key(key)->name, a)) return -1;
        if (odl_config_set(cfg, key, val) != ODL_OK) {
            fprintf(stderr, "odl_worker: error: --%s: %s\n", name, odl_error_msg_user());
            return -1;
        }
    }
    return 0;
}

/* ODL_CKPT_TEST_PAUSE_AT_STEP (tests/test_ckpt_resume.sh): stop the checkpoint write of that step with its
 * data written but not committed, so that a kill -9 lands in the middle of a checkpoint write. */
static odl_status pause_before_commit(void *ctx, int64_t step, const char *path) {
    (void)ctx;
    if (step != odl_env_int(ODL_ENV_CKPT_TEST_PAUSE_AT_STEP)) return ODL_OK;
    ODL_LOG_WARN("test hook ODL_CKPT_TEST_PAUSE_AT_STEP: pausing the write of %s before its commit", path);
    for (;;) sleep(60);
}

/* The checkpoint session of this run, from the config's checkpoint.* keys (NULL when off). */
static odl_status start_checkpoints(const odl_config *cfg, const odl_train_opts *opts, int rank, int world,
                                    odl_ckpt_session **out) {
    char *yaml = malloc(ODL_CONFIG_YAML_MAX);
    if (!yaml) return ODL_ERR(ODL_E_NOMEM, "config text for checkpoints");
    odl_status s = odl_config_to_yaml(cfg, yaml, ODL_CONFIG_YAML_MAX);
    odl_ckpt_session_opts o = {
        .dir = cfg->checkpoint.dir,
        .every = cfg->checkpoint.every,
        .keep = cfg->checkpoint.keep,
        .resume = cfg->checkpoint.resume,
        .model = odl_model_names()[cfg->model],
        .seed = cfg->seed,
        .max_train_samples = cfg->train.max_train_samples,
        .batch = cfg->train.batch_size,
        .optimizer = (int)cfg->train.optimizer,
        .config_yaml = yaml,
        .commit_elsewhere = opts->coord != NULL, /* supervised: odl_coordinator commits, writes the manifest, retains */
        .observer = opts->ckpt_observer,
        .observer_ctx = opts->ckpt_observer_ctx,
    };
    if (s == ODL_OK) s = odl_ckpt_session_start(out, &o, rank, world);
    free(yaml);
    if (s == ODL_OK && *out && odl_env_int(ODL_ENV_CKPT_TEST_PAUSE_AT_STEP) >= 0)
        odl_ckpt_session_set_before_commit(*out, pause_before_commit, NULL);
    return s;
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
    ODL_CHECK(odl_cuda_init(idx, odl_cli_pool_fraction(cfg->memory.preallocate_fraction)));
    *dev = odl_cuda(idx);
    return ODL_OK;
}

/* train.max_test_samples on the test set; see train.h. */
void odl_train_limit_test(const odl_config *cfg, odl_mnist *test) {
    if (cfg->train.max_test_samples > 0 && cfg->train.max_test_samples < test->n) test->n = cfg->train.max_test_samples;
}

/* Evaluate on the test set: mean NLL and accuracy (PyTorch examples/mnist's test()); see train.h. */
odl_status odl_train_evaluate(odl_net *net, const odl_mnist *test, int batch, double *loss_out, double *acc_out,
                              int64_t *class_correct, int64_t *class_total) {
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
        ODL_CHECK_GOTO(odl_loader_gather(test->images, test->labels, test->n, elems, MNIST_MEAN, MNIST_STD, idx, B, hx, hy),
                       s, out);
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
        for (int b = 0; b < B; b++) {
            correct += hp[b] == hy[b];
            if (class_total && hy[b] >= 0 && hy[b] < ODL_MNIST_CLASSES) {
                class_total[hy[b]]++;
                class_correct[hy[b]] += hp[b] == hy[b];
            }
        }
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

/* "1h02m", "3m04s", "12s": a duration for the ETA. */
static void fmt_eta(double sec, char *buf, size_t cap) {
    if (!(sec >= 0) || sec > 1e7) {
        snprintf(buf, cap, "?");
        return;
    }
    long t = (long)(sec + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, cap, "%lds", t);
}

/* Progress: on a terminal a bar redrawn in place (epoch N/M, loss, samples/s, ETA of the run); else a
 * log line (called every logging.log_interval steps or 10 s). loss: the last step's batch loss, as
 * PyTorch's examples/mnist prints it. */
static void progress_report(int bar, int64_t done, int64_t total, int64_t epoch, int64_t epochs, float loss, double rate,
                            double eta_s, int64_t step) {
    char eta[32];
    fmt_eta(eta_s, eta, sizeof eta);
    if (!bar) {
        ODL_LOG_INFO("epoch %" PRId64 "/%" PRId64 " step %" PRId64 " [%" PRId64 "/%" PRId64 " samples] loss %.4f %.0f samples/s "
                     "ETA %s", epoch, epochs, step, done, total, loss, rate, eta);
        return;
    }
    int width = 30, fill = total ? (int)(width * done / total) : width;
    fprintf(stderr, "\repoch %" PRId64 "/%" PRId64 " [", epoch, epochs);
    for (int i = 0; i < width; i++) fputc(i < fill ? '=' : ' ', stderr);
    fprintf(stderr, "] %" PRId64 "/%" PRId64 " loss %.4f %.0f samples/s ETA %s  ", done, total, loss, rate, eta);
    fflush(stderr);
}

/* One JSONL record (through jansson: a value that is not finite, such as the test loss of an epoch that
 * was not evaluated, is null). epoch is 1-based: the epoch the record's last step belongs to. */
static void metrics_record(FILE *f, const char *event, int64_t epoch, int partial, int64_t step, double train_loss,
                           double test_loss, double test_acc, double sps, double wall, int world, double lr,
                           const json_t *extra /* more fields (the GPU telemetry); NULL: none */) {
    if (!f) return;
    json_t *o = json_pack("{s:s,s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:i,s:o,s:b}", "event", event, "epoch", (json_int_t)epoch,
                          "step", (json_int_t)step, "train_loss", odl_json_num(train_loss, 6), "test_loss",
                          odl_json_num(test_loss, 6), "test_acc", odl_json_num(test_acc, 4), "samples_per_s",
                          odl_json_num(sps, 1), "wall_s", odl_json_num(wall, 3), "world_size", world, "lr",
                          odl_json_num(lr, 8), "partial", partial);
    if (extra) json_object_update(o, (json_t *)extra);
    if (odl_json_write_line(f, o, "--metrics-out") != ODL_OK) ODL_LOG_WARN("%s", odl_error_msg_user());
    json_decref(o);
}

/* One training run: what its parts share. */
typedef struct train_run {
    const odl_config *cfg;
    const odl_train_opts *opts;
    const odl_train_hooks *hooks; /* NULL: none */
    odl_train_result *result;
    int rank, world;
    odl_device dev;
    odl_model_kind kind;
    odl_mnist train, test;
    int batch, test_batch;
    int64_t n_epoch; /* training samples per epoch */
    odl_net net;
    odl_optim opt;
    odl_loader loader;
    odl_train_step step; /* the step's device scalars and its CUDA graphs */
    odl_train_state st;
    odl_ckpt_session *ckpt;
    odl_tensor loss_acc; /* [1] on the device: sum over this rank's samples of the epoch's losses */
    FILE *metrics;
    odl_tb_writer *tb; /* --tensorboard; NULL: none */
    odl_worker_health health; /* GPU telemetry and Xid watch (health/), inactive on CPU */
    odl_sample_record samples; /* test hooks: ODL_SAMPLE_RECORD, ODL_SAMPLE_TEST_LOSE_AT_STEP */
    int have_net, have_opt, have_loader, have_step;
    int show_progress;  /* a bar on a terminal (or with progress: on) */
    int progress_lines; /* else, unless progress: off, a line every logging.log_interval steps or 10 s */
    int64_t steps_per_epoch, total_steps, start_step;
    /* since t_epoch, in this process (a resume starts mid-epoch) */
    double t_start, t_epoch, t_last_line;
    int64_t epoch_steps, run_samples;
    /* host time of the steps of this process by odl_step_how: from the batch handed over by the loader to
     * the step queued and counted, with the step hooks (not the waits for the loader or for the device in
     * a progress readback, the epoch ends or checkpoints) */
    double host_s[3];
    int64_t host_n[3];
    double train_loss, test_loss, test_acc;
    double epoch_lr; /* the StepLR rate of the epoch last reported, unrounded */
} train_run;

/* Device, data, model, optimiser, resume and the metrics file. Returns 1 in *nothing_to_do when the
 * restored state has already reached the end of training. */
static odl_status run_setup(train_run *r, int *nothing_to_do) {
    const odl_config *cfg = r->cfg;
    *nothing_to_do = 0;
    /* Every output path before any work, so a typo fails now and not after the whole run. */
    if (r->rank == 0) {
        ODL_CHECK(odl_output_check_file("--save", r->opts->save_path));
        ODL_CHECK(odl_output_check_file("--metrics-out", cfg->logging.metrics_out));
        ODL_CHECK(odl_output_check_dir("--tensorboard", cfg->logging.tensorboard));
    }
    /* Labels were range-checked when the IDX files were read; the CUDA loss's own per-call label check
     * would synchronise the stream twice a step. ODL_CUDA_LABEL_CHECK=1 in the environment keeps it. */
    odl_backend_set_label_check(0);
    ODL_CHECK(pick_device(cfg, r->opts->local_rank, &r->dev));
    ODL_CHECK(odl_worker_health_start(&r->health, r->dev, r->rank, r->opts->local_rank, r->opts->coord));
    ODL_CHECK(odl_model_parse(odl_model_names()[cfg->model], &r->kind));
    ODL_CHECK(odl_mnist_load(cfg->data_dir, "train", &r->train));
    ODL_CHECK(odl_mnist_load(cfg->data_dir, "t10k", &r->test));
    if (r->train.rows != 28 || r->train.cols != 28 || r->test.rows != 28 || r->test.cols != 28)
        return ODL_ERR(ODL_E_FORMAT, "%s: images are %dx%d, the MNIST models need 28x28", cfg->data_dir, r->train.rows,
                       r->train.cols);
    r->batch = (int)cfg->train.batch_size;
    r->test_batch = (int)cfg->train.test_batch_size;
    r->n_epoch = r->train.n;
    if (cfg->train.max_train_samples > 0 && cfg->train.max_train_samples < r->n_epoch)
        r->n_epoch = cfg->train.max_train_samples;
    odl_train_limit_test(cfg, &r->test);
    r->steps_per_epoch = (r->n_epoch + (int64_t)r->world * r->batch - 1) / ((int64_t)r->world * r->batch);
    ODL_LOG_INFO("training %s on %s: %" PRId64 " train / %" PRId64 " test samples, %s, world size %d, batch %d per rank "
                 "(%d global), %" PRId64 " epochs of %" PRId64 " steps, %s lr %g (StepLR gamma %g)",
                 odl_model_name(r->kind), cfg->data_dir, r->n_epoch, r->test.n, odl_device_name(r->dev), r->world,
                 r->batch, r->batch * r->world, cfg->train.epochs, r->steps_per_epoch,
                 odl_optim_names()[cfg->train.optimizer], cfg->train.lr, cfg->train.gamma);

    int max_batch = r->batch > r->test_batch ? r->batch : r->test_batch;
    ODL_CHECK(odl_model_build(&r->net, r->kind, r->dev, max_batch, cfg->train.dropout));
    r->have_net = 1;
    ODL_CHECK(odl_net_init_params(&r->net, (uint64_t)cfg->seed));
    if (r->opts->init_from[0]) { /* fine-tuning: every rank reads the same file, so the replicas agree */
        ODL_CHECK(odl_train_load_weights(r->opts->init_from, odl_model_name(r->kind), &r->net));
        ODL_LOG_INFO("parameters initialised from %s", r->opts->init_from);
    }
    ODL_CHECK(odl_optim_init(&r->opt, (odl_optim_type)cfg->train.optimizer, (float)cfg->train.lr,
                             (float)cfg->train.momentum, (float)cfg->train.weight_decay, &r->net));
    r->have_opt = 1;
    ODL_LOG_INFO("%s: %" PRId64 " parameters", odl_model_name(r->kind), odl_net_num_params(&r->net));

    ODL_CHECK(start_checkpoints(cfg, r->opts, r->rank, r->world, &r->ckpt));
    if (r->ckpt) {
        int resumed = 0;
        ODL_CHECK(odl_ckpt_session_restore(r->ckpt, &r->net, &r->opt, &r->st, &resumed));
        if (resumed)
            ODL_LOG_INFO("resumed at epoch %" PRId64 ", step %" PRId64 ", sample cursor %" PRId64, r->st.epoch + 1,
                         r->st.step, r->st.cursor);
    }
    /* After a restore, so that rank 0's broadcast of the replicas covers the restored state. */
    if (r->hooks && r->hooks->on_start) ODL_CHECK(r->hooks->on_start(r->hooks->ctx, cfg, &r->net, &r->opt, &r->st));
    if (r->st.epoch >= cfg->train.epochs || (cfg->train.max_steps > 0 && r->st.step >= cfg->train.max_steps)) {
        if (r->st.epoch >= cfg->train.epochs)
            ODL_LOG_INFO("nothing to do: all %" PRId64 " epochs are done (step %" PRId64 ")", (int64_t)cfg->train.epochs,
                         r->st.step);
        else
            ODL_LOG_INFO("nothing to do: --max-steps %" PRId64 " already reached (epoch %" PRId64 ", step %" PRId64 ")",
                         (int64_t)cfg->train.max_steps, r->st.epoch + 1, r->st.step);
        *nothing_to_do = 1;
        return ODL_OK;
    }
    if (cfg->logging.metrics_out[0] && r->rank == 0) ODL_CHECK(odl_metrics_open(cfg->logging.metrics_out, r->st.step, &r->metrics));
    if (cfg->logging.tensorboard[0] && r->rank == 0) {
        ODL_CHECK(odl_tb_open(cfg->logging.tensorboard, &r->tb));
        ODL_LOG_INFO("TensorBoard events: %s", odl_tb_path(r->tb));
    }
    return ODL_OK;
}

/* The loss accumulator (continuing a resumed epoch's sum) and the loader from the restored position. */
static odl_status run_start_loader(train_run *r) {
    const odl_config *cfg = r->cfg;
    int64_t one[1] = {1};
    ODL_CHECK(odl_tensor_zeros(&r->loss_acc, r->dev, ODL_F32, 1, one));
    if (r->st.epoch_loss_sum != 0) {
        /* A resumed epoch: go on with the float32 accumulator from the checkpoint's sum (itself a float32
         * value), so that the epoch's loss adds up exactly as in an uninterrupted run. With several ranks
         * rank 0 carries it (the ranks' accumulators are summed). */
        float acc0 = r->rank == 0 ? (float)r->st.epoch_loss_sum : 0.0f;
        ODL_CHECK(odl_tensor_copy_from_host(&r->loss_acc, &acc0, sizeof acc0));
        r->st.epoch_loss_sum = 0;
    }
    odl_loader_config lc = {
        .images = r->train.images, .labels = r->train.labels, .n = r->n_epoch, .sample_ndim = 3,
        .sample_shape = {1, 28, 28}, .mean = MNIST_MEAN, .std = MNIST_STD, .rank = r->rank, .world_size = r->world,
        .batch = r->batch, .seed = (uint64_t)cfg->seed, .shuffle = 1, .start_epoch = r->st.epoch,
        .start_cursor = r->st.cursor, .end_epoch = cfg->train.epochs, .device = r->dev,
    };
    ODL_CHECK(odl_loader_start(&r->loader, &lc));
    r->have_loader = 1;
    ODL_CHECK(odl_sample_record_open(&r->samples, r->rank, r->batch));
    return ODL_OK;
}

/* One optimiser step on batch b (reading the loader's device buffers directly; worker/train_step.c),
 * queued or replayed from a CUDA graph; b goes back to the loader once its work is queued. */
static odl_status run_step(train_run *r, odl_batch *b) {
    odl_sample_record_plant(&r->samples, b, r->st.step + 1); /* a test's planted fault, before the step reads b */
    odl_status s = odl_train_step_run(&r->step, b);
    if (s != ODL_OK) {
        odl_error_prefix("training step %" PRId64 " (epoch %" PRId64 ", %s)", r->st.step + 1, r->st.epoch + 1,
                         r->step.last == ODL_STEP_EAGER ? "op by op" : "a CUDA graph replay");
        return s;
    }
    const int64_t b_cursor = b->cursor;
    const int b_global = b->global;
    odl_sample_record_keep(&r->samples, b); /* b's indices, before b goes back to the loader */
    ODL_CHECK(odl_loader_release(&r->loader, b)); /* b belongs to the loader again */
    r->opt.step++; /* the device's count was advanced by the step itself */
    r->st.step++;
    ODL_CHECK(odl_sample_record_step(&r->samples, r->st.step, r->world));
    r->st.cursor = b_cursor + b_global;
    r->st.epoch_samples += b_global;
    r->run_samples += b_global;
    r->epoch_steps++;
    return ODL_OK;
}

/* A readback of the device waits for every step queued before it: an error of one of them (a fault of a
 * kernel, of a graph replay) shows here, so the message names the steps it may come from. */
static odl_status step_readback(train_run *r, const odl_tensor *t, void *dst, size_t n) {
    odl_status s = odl_tensor_copy_to_host(t, dst, n);
    if (s != ODL_OK)
        odl_error_prefix("waiting for training steps up to %" PRId64 " (epoch %" PRId64 "; %" PRId64
                         " replayed from CUDA graphs in this run)", r->st.step, r->st.epoch + 1, r->step.n_replayed);
    return s;
}

/* The epoch's loss so far over all ranks: the device accumulator, summed over ranks. */
static odl_status epoch_loss_sum(train_run *r, double *sum) {
    float acc_h;
    ODL_CHECK(step_readback(r, &r->loss_acc, &acc_h, sizeof acc_h));
    *sum = acc_h;
    if (r->hooks && r->hooks->reduce_scalar) ODL_CHECK(r->hooks->reduce_scalar(r->hooks->ctx, sum));
    return ODL_OK;
}

/* At the end of an epoch or of the run (stop): the epoch line, evaluation, metrics, StepLR. */
static odl_status run_epoch_end(train_run *r, int epoch_end, int stop) {
    const odl_config *cfg = r->cfg;
    odl_train_state *st = &r->st;
    double loss_sum;
    ODL_CHECK(epoch_loss_sum(r, &loss_sum));
    r->train_loss = (st->epoch_loss_sum + loss_sum) / (double)st->epoch_samples;
    double wall = odl_mono_s() - r->t_epoch, sps = r->run_samples / wall;
    if (r->show_progress) fputc('\n', stderr);
    r->epoch_lr = cfg->train.lr * pow(cfg->train.gamma, (double)st->epoch); /* this epoch's StepLR rate, unrounded */
    if (r->rank == 0 && (cfg->train.eval_every_epoch || stop || st->epoch + 1 == cfg->train.epochs)) {
        odl_coord_client_evaluating(r->opts->coord, 1); /* the coordinator: not a hang */
        odl_status es = odl_train_evaluate(&r->net, &r->test, r->test_batch, &r->test_loss, &r->test_acc, NULL, NULL);
        odl_coord_client_evaluating(r->opts->coord, 0);
        ODL_CHECK(es);
    }
    char gpu_log[96];
    json_t *gpu = odl_worker_health_epoch(&r->health, gpu_log, sizeof gpu_log);
    odl_pool_stats ps;
    if (r->dev.type == ODL_DEV_CUDA && odl_pool_get_stats(r->dev, &ps) == ODL_OK) {
        /* the device pool (odl/device.h): a leak or fragmentation shows as a peak that keeps growing */
        if (!gpu) gpu = json_object();
        json_object_set_new(gpu, "pool_peak_mib", odl_json_num((double)ps.peak / 1048576.0, 1));
        json_object_set_new(gpu, "pool_reserved_mib", odl_json_num((double)ps.reserved / 1048576.0, 1));
    }
    /* The epoch's own 1-based number, also for a partial epoch (a stop mid-epoch). */
    ODL_LOG_INFO("epoch %" PRId64 "/%" PRId64 " step %" PRId64 ": lr %g train_loss %.4f test_loss %.4f test_acc %.4f "
                 "%.0f samples/s %.2f s%s%s",
                 st->epoch + 1, cfg->train.epochs, st->step, r->epoch_lr, r->train_loss, r->test_loss, r->test_acc, sps,
                 wall, gpu_log, epoch_end ? "" : " (stopped mid-epoch)");
    metrics_record(r->metrics, "epoch", st->epoch + 1, !epoch_end, st->step, r->train_loss, r->test_loss, r->test_acc,
                   sps, wall, r->world, r->epoch_lr, gpu);
    json_decref(gpu);
    if (r->tb) { /* the JSONL's numbers, at the global step (a value not computed is skipped) */
        ODL_CHECK(odl_tb_scalar(r->tb, "train/loss", st->step, r->train_loss));
        ODL_CHECK(odl_tb_scalar(r->tb, "test/loss", st->step, r->test_loss));
        ODL_CHECK(odl_tb_scalar(r->tb, "test/accuracy", st->step, r->test_acc));
        ODL_CHECK(odl_tb_scalar(r->tb, "train/lr", st->step, r->epoch_lr));
        ODL_CHECK(odl_tb_scalar(r->tb, "train/samples_per_s", st->step, sps));
    }
    r->result->train_loss = r->train_loss;
    r->result->test_loss = r->test_loss;
    r->result->test_acc = r->test_acc;
    r->result->samples_per_s = sps;
    if (epoch_end) {
        st->epoch++;
        st->cursor = 0;
        r->opt.lr = (float)(cfg->train.lr * pow(cfg->train.gamma, (double)st->epoch)); /* StepLR(step_size=1) */
        ODL_CHECK(odl_train_step_sync(&r->step, st->step)); /* the steps' kernels read it on the device */
        /* A stop mid-epoch keeps the epoch's sums: the checkpoint taken below must hold them. */
        ODL_CHECK(odl_tensor_fill(&r->loss_acc, 0.0f));
        st->epoch_loss_sum = 0;
        st->epoch_samples = 0;
    }
    r->epoch_steps = 0;
    r->run_samples = 0;
    r->t_epoch = odl_mono_s();
    return ODL_OK;
}

/* A checkpoint when one is due or asked for (the coordinator), and after the last step of the run, so
 * that a resume never repeats steps already taken. It holds the epoch's loss so far, so a resumed run prints the same epoch line. */
static odl_status run_checkpoint(train_run *r, int last_step, int asked) {
    if (!r->ckpt || !(odl_ckpt_session_due(r->ckpt, &r->st) || asked || (last_step && r->cfg->checkpoint.every > 0)))
        return ODL_OK;
    double loss_sum;
    ODL_CHECK(epoch_loss_sum(r, &loss_sum));
    odl_train_state snap = r->st;
    snap.epoch_loss_sum += loss_sum;
    ODL_CHECK(odl_ckpt_session_save(r->ckpt, &r->net, &r->opt, &snap));
    return ODL_OK;
}

/* After a step: the progress bar or line (with the last batch's loss and the run's ETA) and the
 * TensorBoard batch loss, each when due. */
static odl_status run_progress(train_run *r) {
    const odl_config *cfg = r->cfg;
    const odl_train_state *st = &r->st;
    int bar = r->show_progress && (r->epoch_steps % 20 == 0 || st->cursor >= r->n_epoch);
    int line = r->progress_lines && (st->step % cfg->logging.log_interval == 0 || odl_mono_s() - r->t_last_line >= 10.0);
    int tb = r->tb && st->step % cfg->logging.log_interval == 0;
    if (!bar && !line && !tb) return ODL_OK;
    float l = NAN;
    ODL_CHECK(step_readback(r, &r->net.loss, &l, sizeof l));
    if (bar || line) {
        double t = odl_mono_s(), rate = r->run_samples / (t - r->t_epoch);
        double eta = (double)(r->total_steps - st->step) * (t - r->t_start) / (double)(st->step - r->start_step);
        progress_report(bar, st->cursor, r->n_epoch, st->epoch + 1, cfg->train.epochs, l, rate, eta, st->step);
        r->t_last_line = t;
    }
    if (tb) ODL_CHECK(odl_tb_scalar(r->tb, "train/batch_loss", st->step, l));
    return ODL_OK;
}

/* The step loop, from the restored position to the last epoch or train.max_steps. */
static odl_status run_loop(train_run *r) {
    const odl_config *cfg = r->cfg;
    odl_train_state *st = &r->st;
    r->show_progress = r->rank == 0 && (cfg->logging.progress == ODL_CFG_PROGRESS_ON ||
                                        (cfg->logging.progress == ODL_CFG_PROGRESS_AUTO && isatty(2)));
    r->progress_lines = r->rank == 0 && !r->show_progress && cfg->logging.progress == ODL_CFG_PROGRESS_AUTO;
    r->total_steps = r->steps_per_epoch * cfg->train.epochs;
    if (cfg->train.max_steps > 0 && cfg->train.max_steps < r->total_steps) r->total_steps = cfg->train.max_steps;
    r->start_step = st->step;
    r->t_start = r->t_epoch = r->t_last_line = odl_mono_s();
    r->epoch_lr = cfg->train.lr * pow(cfg->train.gamma, (double)st->epoch);
    r->opt.lr = (float)(cfg->train.lr * pow(cfg->train.gamma, (double)st->epoch));
    r->have_step = 1; /* odl_train_step_free undoes a partial set-up too */
    ODL_CHECK(odl_train_step_init(&r->step, &r->net, &r->opt, &r->loss_acc, r->hooks, (uint64_t)cfg->seed, r->batch,
                                  r->world, r->rank, cfg->train.cuda_graph, st->step));
    for (;;) {
        odl_batch *b;
        ODL_CHECK(odl_loader_next(&r->loader, &b));
        if (!b) break;
        const double t0 = odl_mono_s();
        if (b->epoch != st->epoch) /* cannot happen: epochs end below */
            return ODL_ERR(ODL_E_INTERNAL, "loader epoch %" PRId64 " != %" PRId64, b->epoch, st->epoch);
        ODL_CHECK(run_step(r, b));
        const double t1 = odl_mono_s();
        ODL_CHECK(run_progress(r));
        int epoch_end = st->cursor >= r->n_epoch;
        int stop = cfg->train.max_steps > 0 && st->step >= cfg->train.max_steps;
        if (epoch_end || stop) ODL_CHECK(run_epoch_end(r, epoch_end, stop));
        const int req = r->hooks && r->hooks->step_request ? r->hooks->step_request(r->hooks->ctx, st) : 0;
        ODL_CHECK(run_checkpoint(r, stop || (epoch_end && st->epoch >= cfg->train.epochs), req & ODL_TRAIN_CHECKPOINT));
        const double t2 = odl_mono_s();
        if (r->hooks && r->hooks->after_step) ODL_CHECK(r->hooks->after_step(r->hooks->ctx, cfg, &r->net, &r->opt, st));
        ODL_CHECK(odl_worker_health_step(&r->health, st->step)); /* after the step's checkpoint */
        r->host_s[r->step.last] += (t1 - t0) + (odl_mono_s() - t2);
        r->host_n[r->step.last]++;
        if (stop) break;
        if (req & ODL_TRAIN_STOP) {
            ODL_LOG_INFO("stopping after step %" PRId64 " as the coordinator asked (preemption)", st->step);
            break;
        }
    }
    double wall = odl_mono_s() - r->t_start;
    char how[400];
    odl_train_step_summary(&r->step, how, sizeof how);
    /* the host's share of a step: what bounds a small batch once the GPU runs its kernels back to back */
    static const char *const k_how[3] = {"op by op", "captured", "replayed"};
    char host[260] = "";
    size_t hl = 0;
    for (int k = 2; k >= 0; k--) {
        if (!r->host_n[k] || hl >= sizeof host) continue;
        hl += (size_t)snprintf(host + hl, sizeof host - hl, "%s %.1f us %s (%" PRId64, hl ? "," : "",
                               1e6 * r->host_s[k] / (double)r->host_n[k], k_how[k], r->host_n[k]);
        if (k == ODL_STEP_REPLAYED && hl < sizeof host) /* the driver's part, beside the framework's own */
            hl += (size_t)snprintf(host + hl, sizeof host - hl, "; %.1f us of it in the graph launch",
                                   1e6 * r->step.replay_launch_s / (double)r->host_n[k]);
        if (hl < sizeof host) hl += (size_t)snprintf(host + hl, sizeof host - hl, ")");
    }
    ODL_LOG_INFO("steps: %s; mean host time per step%s", how, host);
    metrics_record(r->metrics, "done", odl_ckpt_epoch_label(st->epoch, st->cursor), st->cursor != 0, st->step,
                   r->train_loss, r->test_loss, r->test_acc, r->result->samples_per_s, wall, r->world, r->epoch_lr,
                   NULL);
    if (isnan(r->test_acc)) /* stopped before any evaluation (a preemption at its checkpoint) */
        ODL_LOG_INFO("done: %" PRId64 " steps, the test set not evaluated, %.2f s", st->step, wall);
    else
        ODL_LOG_INFO("done: %" PRId64 " steps, test_acc %.4f, %.2f s", st->step, r->test_acc, wall);
    return ODL_OK;
}

/* --save, the finish hook, the result; the network goes to opts->keep_net when asked. */
static odl_status run_finish(train_run *r) {
    if (r->opts->save_path[0] && r->rank == 0) {
        ODL_CHECK(odl_train_save_weights(r->opts->save_path, r->cfg, &r->net));
        ODL_LOG_INFO("weights written to %s (%d tensors, %" PRId64 " parameters; HDF5, docs/checkpoint_format.md)",
                     r->opts->save_path, r->net.n_params, odl_net_num_params(&r->net));
    }
    if (r->hooks && r->hooks->on_finish) ODL_CHECK(r->hooks->on_finish(r->hooks->ctx, r->cfg, &r->net, &r->opt, &r->st));
    r->result->steps = r->st.step;
    r->result->epochs = r->st.epoch;
    if (r->opts->keep_net) {
        *r->opts->keep_net = r->net;
        r->have_net = 0;
    }
    return ODL_OK;
}

/* Reverse order of set-up; the first error of the run wins over the checkpoint writer's. */
static odl_status run_teardown(train_run *r, odl_status s) {
    if (r->ckpt) {
        odl_status cs = odl_ckpt_session_finish(r->ckpt);
        if (s == ODL_OK) s = cs;
    }
    if (r->have_loader) odl_loader_stop(&r->loader);
    if (r->have_step) odl_train_step_free(&r->step);
    odl_sample_record_close(&r->samples);
    odl_worker_health_stop(&r->health);
    odl_tensor_free(&r->loss_acc);
    if (r->have_opt) odl_optim_free(&r->opt);
    if (r->have_net) odl_net_free(&r->net);
    if (r->metrics) fclose(r->metrics);
    odl_tb_close(r->tb);
    odl_mnist_free(&r->test);
    odl_mnist_free(&r->train);
    return s;
}

odl_status odl_train_run(const odl_config *cfg, const odl_train_opts *opts, odl_train_result *result) {
    train_run *r = calloc(1, sizeof *r); /* odl_net and odl_optim are large: not on the stack */
    if (!r) return ODL_ERR(ODL_E_NOMEM, "training run");
    memset(result, 0, sizeof *result);
    r->cfg = cfg;
    r->opts = opts;
    r->hooks = opts->hooks;
    r->result = result;
    r->rank = opts->rank;
    r->world = opts->world_size > 0 ? opts->world_size : 1;
    r->train_loss = r->test_loss = r->test_acc = NAN;
    r->samples.fd = -1;
    int nothing_to_do = 0;
    odl_status s = run_setup(r, &nothing_to_do);
    if (s == ODL_OK && !nothing_to_do) s = run_start_loader(r);
    if (s == ODL_OK && !nothing_to_do) s = run_loop(r);
    if (s == ODL_OK) s = run_finish(r);
    if (s != ODL_OK) odl_error_trace(__FILE__, __LINE__);
    s = run_teardown(r, s);
    free(r);
    return s;
}
