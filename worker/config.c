/* The training program's configuration schema (worker/config.h): one table of keys over odl_config,
 * served by the library's YAML engine (core/config.c). */
#include "worker/config.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "odl/models.h"

_Static_assert(sizeof(odl_cfg_device) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(odl_optim_type) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(odl_cfg_progress) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(odl_log_level) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(odl_precision) == sizeof(int), "enum fields are int-sized");

/* ---------------------------------------------------------------------------------------------- */
/* The table: the single source of truth. Defaults follow PyTorch's examples/mnist (main.py):       */
/* epochs 14, batch 64, test batch 1000, Adadelta lr 1.0, StepLR(step_size=1, gamma=0.7), seed 1,   */
/* dropout 0.25/0.5. bucket_mb 25 is DDP's bucket_cap_mb default.                                   */

static const char *const k_devices[] = {"auto", "cpu", "cuda", NULL};
static const char *const k_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const k_progress[] = {"auto", "on", "off", NULL};

#define OFF(f) offsetof(odl_config, f)
#define GE(x) ODL_CFG_HAS_MIN, (x), 0
#define GT(x) ODL_CFG_HAS_MIN | ODL_CFG_MIN_OPEN, (x), 0
#define NOB 0, 0, 0

static odl_config_key g_keys[] = {
    {"model", ODL_CFG_ENUM, OFF(model), "mnist",
     "Network: mnist is PyTorch examples/mnist's CNN (the same as mnist_cnn); mnist_mlp is a multilayer perceptron",
     NULL, NOB} /* choices: odl_model_names() */,
    {"data_dir", ODL_CFG_STRING, OFF(data_dir), "/usr/share/datasets/fashion-mnist",
     "Directory with the MNIST IDX files train-/t10k-images-idx3-ubyte and -labels-idx1-ubyte, plain or .gz", NULL,
     NOB},
    {"device", ODL_CFG_ENUM, OFF(device), "auto", "Where to run: auto is CUDA when a GPU is present, else the CPU",
     k_devices, NOB},
    {"precision", ODL_CFG_ENUM, OFF(precision), "fp32",
     "Inputs of the linear layers' GEMMs: fp32 (FMA, bit-reproducible), tf32 or bf16 (tensor cores on CUDA, float32 "
     "accumulation, weights and optimiser state; docs/PRECISION.md)",
     NULL, NOB} /* choices: odl_precision_names() */,
    {"seed", ODL_CFG_INT, OFF(seed), "1", "Random seed for initial weights, shuffling and dropout (Philox RNG)", NULL,
     GE(0)},

    {"train.epochs", ODL_CFG_INT, OFF(train.epochs), "14", "Number of passes over the training set", NULL, GE(1)},
    {"train.batch_size", ODL_CFG_INT, OFF(train.batch_size), "64",
     "Training samples per step on each rank (as PyTorch DDP: the global batch is batch_size x world size)", NULL,
     GE(1)},
    {"train.test_batch_size", ODL_CFG_INT, OFF(train.test_batch_size), "1000", "Evaluation batch size", NULL,
     GE(1)},
    {"train.lr", ODL_CFG_FLOAT, OFF(train.lr), "1.0",
     "Initial learning rate; multiplied by train.gamma after every epoch", NULL, GT(0)},
    {"train.optimizer", ODL_CFG_ENUM, OFF(train.optimizer), "adadelta",
     "Optimizer: adadelta (rho 0.9, eps 1e-6, as examples/mnist), sgd (with train.momentum), adam, adamw",
     NULL, NOB}, /* choices: odl_optim_names() */
    {"train.momentum", ODL_CFG_FLOAT, OFF(train.momentum), "0.0", "SGD momentum (0 = plain SGD); used by sgd only",
     NULL, GE(0)},
    {"train.weight_decay", ODL_CFG_FLOAT, OFF(train.weight_decay), "0.0",
     "Weight decay: L2 penalty added to the gradient (decoupled for adamw)", NULL, GE(0)},
    {"train.gamma", ODL_CFG_FLOAT, OFF(train.gamma), "0.7",
     "StepLR factor: the learning rate is multiplied by gamma after every epoch (step_size 1)", NULL, GT(0)},
    {"train.max_steps", ODL_CFG_INT, OFF(train.max_steps), "0",
     "Stop after this many optimizer steps in total (0 = no limit)", NULL, GE(0)},
    {"train.max_train_samples", ODL_CFG_INT, OFF(train.max_train_samples), "0",
     "Use only the first N samples of the training set (0 = all)", NULL, GE(0)},
    {"train.max_test_samples", ODL_CFG_INT, OFF(train.max_test_samples), "0",
     "Evaluate on only the first N samples of the test set (0 = all): quicker epochs, a coarser test accuracy",
     NULL, GE(0)},
    {"train.dropout", ODL_CFG_BOOL, OFF(train.dropout), "true",
     "Dropout layers on (examples/mnist: 0.25 and 0.5); false gives deterministic steps", NULL, NOB},
    {"train.eval_every_epoch", ODL_CFG_BOOL, OFF(train.eval_every_epoch), "true",
     "Evaluate on the test set after every epoch (else only after the last)", NULL, NOB},
    {"train.cuda_graph", ODL_CFG_BOOL, OFF(train.cuda_graph), "true",
     "On CUDA, capture each full training step (forward, backward, gradient AllReduce, optimiser) once per loader "
     "slot into a CUDA graph and replay it (--cuda-graph on or off); off runs every step op by op, for debugging",
     NULL, NOB},

    {"memory.preallocate_fraction", ODL_CFG_FLOAT, OFF(memory.preallocate_fraction), "0.5",
     "Fraction of the GPU's free memory the caching pool reserves at start (one cudaMalloc, none in the step loop); "
     "0 = grow on demand (arenas of 32 MiB or more taken as needed and kept; the default of --task=infer and eval)",
     NULL, ODL_CFG_HAS_MIN | ODL_CFG_HAS_MAX, 0, 1},

    {"logging.level", ODL_CFG_ENUM, OFF(logging.level), "info",
     "Lowest level printed; with several ranks, ranks other than 0 print only warn and error", k_levels, NOB},
    {"logging.metrics_out", ODL_CFG_STRING, OFF(logging.metrics_out), "",
     "Path of a JSONL metrics file (one JSON object per line); empty = none", NULL, NOB},
    {"logging.progress", ODL_CFG_ENUM, OFF(logging.progress), "auto",
     "Progress bar: auto shows it only when stderr is a terminal", k_progress, NOB},
    {"logging.log_interval", ODL_CFG_INT, OFF(logging.log_interval), "100",
     "When stderr is not a terminal, a progress line every N steps (and at least every 10 s)", NULL, GE(1)},
    {"logging.tensorboard", ODL_CFG_STRING, OFF(logging.tensorboard), "",
     "Directory for TensorBoard event files (created if missing); empty = none", NULL, NOB},

    {"checkpoint.dir", ODL_CFG_STRING, OFF(checkpoint.dir), "", "Directory for checkpoints; empty = no checkpoints",
     NULL, NOB},
    {"checkpoint.every", ODL_CFG_INT, OFF(checkpoint.every), "0", "Save a checkpoint every N optimizer steps (0 = off)",
     NULL, GE(0)},
    {"checkpoint.keep", ODL_CFG_INT, OFF(checkpoint.keep), "3", "Number of most recent complete checkpoints kept", NULL,
     GE(1)},
    {"checkpoint.resume", ODL_CFG_STRING, OFF(checkpoint.resume), "",
     "Resume from: empty = start fresh, auto = the latest complete checkpoint in checkpoint.dir, else a file path",
     NULL, NOB},

    {"dist.bucket_mb", ODL_CFG_FLOAT, OFF(dist.bucket_mb), "25.0",
     "Gradient bucket size in MiB for the AllReduce overlapped with backward (DDP's bucket_cap_mb)", NULL, GT(0)},
    {"dist.timeout_s", ODL_CFG_FLOAT, OFF(dist.timeout_s), "300.0",
     "Seconds a collective or a peer may take before the job reports a hang", NULL, GT(0)},
};
#define NKEYS (sizeof g_keys / sizeof g_keys[0])

static const char k_markdown_intro[] =
    "# Configuration keys\n\n"
    "<!-- Generated from the key table in worker/config.c by `test_config --regen <source dir>`;\n"
    "     tests/test_config fails when this file and the table disagree. Do not edit by hand. -->\n\n"
    "OriginDL reads one YAML file (`--config config.yaml`; the repository's `config.yaml` lists every\n"
    "key at its default). Nested mappings name dotted keys: `train: {lr: 0.5}` sets `train.lr`, and a\n"
    "dotted key may also be written in full at the top level. Command-line flags override the file:\n"
    "`--train.lr=0.5`. Precedence: defaults, then the file, then the flags. The effective config\n"
    "(`odl_config_to_yaml`: every key, nested YAML that reads back to the same values) is logged at\n"
    "start and, per DESIGN.md, stored in checkpoints.\n\n"
    "Errors are never warnings: an unknown key, a value of the wrong type, out of range or not among\n"
    "an enum's names, a key given twice, or a YAML syntax error stops the program with one line naming\n"
    "the file, line, key, value and what is allowed, e.g.\n\n"
    "```\n"
    "config.yaml:7: train.batch_size: value '0' is out of range; allowed: an integer >= 1\n"
    "config.yaml:3: unknown key 'train.lrr' (did you mean 'train.lr'?)\n"
    "```\n\n"
    "Value syntax: `int` is a decimal integer; `float` a finite number (`1.0`, `1e-3`); `bool` is\n"
    "`true`/`false` (also `yes`/`no`, `on`/`off`, `1`/`0`); `enum` one of the listed names; `string`\n"
    "any text (in YAML an empty value, `~` or `null` is the empty string). Defaults follow PyTorch's\n"
    "examples/mnist.\n\n";

static const char k_yaml_intro[] =
    "# OriginDL configuration: every key at its default (PyTorch examples/mnist settings).\n"
    "# Generated from the key table in worker/config.c (`test_config --regen <source dir>`); docs/config.md\n"
    "# describes the same keys. Use: odl_worker --config config.yaml [--train.lr=0.5 ...]\n"
    "# Command-line flags override this file. An unknown key or a bad value is an error.\n";

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The enum keys take their names from the modules that own the enums. */
static void fill_choices(void) {
    for (size_t i = 0; i < NKEYS; i++) {
        if (!strcmp(g_keys[i].name, "model")) g_keys[i].choices = odl_model_names();
        if (!strcmp(g_keys[i].name, "train.optimizer")) g_keys[i].choices = odl_optim_names();
        if (!strcmp(g_keys[i].name, "precision")) g_keys[i].choices = odl_precision_names();
    }
}

const odl_config_schema *odl_train_config_schema(void) {
    static const odl_config_schema s = {g_keys, NKEYS, sizeof(odl_config), "docs/config.md", k_markdown_intro,
                                        k_yaml_intro};
    pthread_once(&g_once, fill_choices);
    return &s;
}
