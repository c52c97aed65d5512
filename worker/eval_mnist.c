/* odl_worker --task=eval --model=mnist|mnist_cnn|mnist_mlp --weights W.h5 [--data_dir DIR]: the test
 * loss, accuracy and per-class accuracy of saved weights (--save or a checkpoint) on the t10k split,
 * as PyTorch's examples/mnist test() computes them (mean NLL, argmax). Flags and config keys are the
 * training ones (--max-test-samples N: the split's first N); with --metrics-out the result is one JSON
 * line ("event": "eval").
 * Exit status: 0 done, 1 failure (unreadable weights or data), 2 usage error. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "odl/json.h"
#include "odl/log.h"
#include "odl/mnist.h"
#include "odl/models.h"
#include "odl/nn.h"
#include "worker/outputs.h"
#include "worker/tasks.h"
#include "worker/train.h"

static odl_status eval_run(const odl_config *cfg, const odl_train_opts *opts) {
    odl_mnist test = {0};
    odl_net net;
    int have_net = 0;
    odl_status s = ODL_OK;
    FILE *mf = NULL;
    int64_t correct[ODL_MNIST_CLASSES] = {0}, total[ODL_MNIST_CLASSES] = {0};
    ODL_CHECK_GOTO(odl_output_check_file("--metrics-out", cfg->logging.metrics_out), s, out);
    odl_model_kind kind;
    ODL_CHECK_GOTO(odl_model_parse(odl_model_names()[cfg->model], &kind), s, out);
    ODL_CHECK_GOTO(odl_mnist_load(cfg->data_dir, "t10k", &test), s, out);
    odl_train_limit_test(cfg, &test);
    const int batch = (int)cfg->train.test_batch_size;
    /* Evaluation runs on the CPU reference backend: it is one pass over at most 10,000 images. */
    ODL_CHECK_GOTO(odl_model_build(&net, kind, odl_cpu(), batch, 0), s, out);
    have_net = 1;
    ODL_CHECK_GOTO(odl_train_load_weights(opts->init_from, odl_model_name(kind), &net), s, out);
    double loss = 0, acc = 0;
    ODL_CHECK_GOTO(odl_train_evaluate(&net, &test, batch, &loss, &acc, correct, total), s, out);
    printf("%s on %s (t10k, %" PRId64 " images): test_loss %.4f test_acc %.4f\n", opts->init_from, cfg->data_dir,
           test.n, loss, acc);
    json_t *per = json_array();
    for (int c = 0; c < ODL_MNIST_CLASSES; c++) {
        double a = total[c] ? (double)correct[c] / (double)total[c] : 0.0;
        printf("  class %d: %.4f (%" PRId64 "/%" PRId64 ")\n", c, a, correct[c], total[c]);
        json_array_append_new(per, odl_json_num(a, 4));
    }
    if (cfg->logging.metrics_out[0]) {
        ODL_CHECK_GOTO(odl_metrics_open(cfg->logging.metrics_out, 0, &mf), s, out_json);
        json_t *o = json_pack("{s:s,s:s,s:I,s:o,s:o,s:O}", "event", "eval", "weights", opts->init_from, "samples",
                              (json_int_t)test.n, "test_loss", odl_json_num(loss, 6), "test_acc", odl_json_num(acc, 4),
                              "class_acc", per);
        s = odl_json_write_line(mf, o, "--metrics-out");
        json_decref(o);
    }
out_json:
    json_decref(per);
out:
    if (mf) fclose(mf);
    if (have_net) odl_net_free(&net);
    odl_mnist_free(&test);
    return s;
}

int odl_task_eval_mnist_main(int argc, char **argv) {
    static odl_config cfg;
    odl_train_opts opts;
    int r = odl_train_parse_args(argc, argv, &cfg, &opts);
    if (r) return r > 0 ? 0 : 2;
    odl_log_set_level(cfg.logging.level);
    if (opts.save_path[0]) {
        fprintf(stderr, "odl_worker: error: --save is for --task=train; --task=eval reads --weights\n");
        return 2;
    }
    if (!opts.init_from[0]) {
        fprintf(stderr, "odl_worker: error: --task=eval needs --weights W.h5 (written by --task=train --save)\n");
        return 2;
    }
    if (eval_run(&cfg, &opts) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 1;
    }
    return 0;
}
