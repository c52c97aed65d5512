/* Configuration: config.yaml, CLI overrides, the effective config.
 *
 * One table of key descriptors (odl_config_keys) is the single source of truth: every key's dotted
 * name, type, default, allowed range and one-line doc. Defaults, validation, the YAML output, the
 * `odl_config_doc` text, docs/config.md and the sample config.yaml at the repository root all come from
 * it (tests/test_config checks that the two files are in step; `test_config --regen <srcdir>` rewrites
 * them).
 *
 * Order of precedence: odl_config_defaults, then odl_config_load_file (YAML, nested mappings name the
 * dotted keys: `train: {lr: 0.5}` is `train.lr`), then odl_config_set for each CLI override
 * (`--train.lr=0.5`). An unknown key is an error, never a warning.
 *
 * Value syntax (the same in YAML and on the command line):
 *   int    decimal integer, optional sign ("64", "-1")
 *   float  a finite number in C strtod syntax ("1.0", "1e-3", "0.7"); NaN and infinities are refused
 *   bool   true|false, also yes|no, on|off, 1|0 (case-insensitive)
 *   enum   one of the listed names, exactly (lower case)
 *   string any text; in YAML an empty value, `~` or `null` is the empty string
 * Strings are stored in fixed buffers of ODL_CONFIG_STR_MAX bytes (paths up to PATH_MAX).
 */
#ifndef ODL_CONFIG_H
#define ODL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "odl/log.h"
#include "odl/precision.h"
#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ODL_CONFIG_STR_MAX 4096

/* model: which network. mnist is PyTorch examples/mnist's Net, the same network as mnist_cnn. */
typedef enum odl_cfg_model { ODL_CFG_MODEL_MNIST = 0, ODL_CFG_MODEL_MNIST_CNN, ODL_CFG_MODEL_MNIST_MLP } odl_cfg_model;
/* device: auto = CUDA when a GPU is present, else the CPU. */
typedef enum odl_cfg_device { ODL_CFG_DEVICE_AUTO = 0, ODL_CFG_DEVICE_CPU, ODL_CFG_DEVICE_CUDA } odl_cfg_device;
/* train.optimizer; same order and values as odl_optim_type in odl/nn.h. */
typedef enum odl_cfg_optimizer {
    ODL_CFG_OPT_ADADELTA = 0,
    ODL_CFG_OPT_SGD,
    ODL_CFG_OPT_ADAM,
    ODL_CFG_OPT_ADAMW
} odl_cfg_optimizer;
/* logging.progress: auto = a progress bar only when stderr is a terminal. */
typedef enum odl_cfg_progress { ODL_CFG_PROGRESS_AUTO = 0, ODL_CFG_PROGRESS_ON, ODL_CFG_PROGRESS_OFF } odl_cfg_progress;

/* Every key, typed. Field names are the dotted key names. Fill with odl_config_defaults first. */
typedef struct odl_config {
    odl_cfg_model model;
    char data_dir[ODL_CONFIG_STR_MAX];
    odl_cfg_device device;
    odl_precision precision; /* of the GEMMs of linear layers (odl/precision.h) */
    int64_t seed;
    struct {
        int64_t epochs;
        int64_t batch_size;
        int64_t test_batch_size;
        double lr;
        odl_cfg_optimizer optimizer;
        double momentum;
        double weight_decay;
        double gamma;
        int64_t max_steps;         /* 0 = no limit */
        int64_t max_train_samples; /* 0 = all */
        bool dropout;
        bool eval_every_epoch;
    } train;
    struct {
        double preallocate_fraction;
    } memory;
    struct {
        odl_log_level level;
        char metrics_out[ODL_CONFIG_STR_MAX];
        odl_cfg_progress progress;
    } logging;
    struct {
        char dir[ODL_CONFIG_STR_MAX];
        int64_t every; /* steps; 0 = off */
        int64_t keep;
        char resume[ODL_CONFIG_STR_MAX]; /* "", "auto" or a path */
    } checkpoint;
    struct {
        double bucket_mb;
        double timeout_s;
    } dist;
} odl_config;

typedef enum odl_config_type {
    ODL_CFG_INT = 0,    /* int64_t */
    ODL_CFG_FLOAT = 1,  /* double */
    ODL_CFG_BOOL = 2,   /* bool */
    ODL_CFG_STRING = 3, /* char[ODL_CONFIG_STR_MAX] */
    ODL_CFG_ENUM = 4,   /* a C enum (int-sized), value = index into `choices` */
} odl_config_type;

/* Bounds flags of a key descriptor. */
#define ODL_CFG_HAS_MIN 1u
#define ODL_CFG_MIN_OPEN 2u /* value > min rather than >= min */
#define ODL_CFG_HAS_MAX 4u
#define ODL_CFG_MAX_OPEN 8u /* value < max rather than <= max */

/* One key. */
typedef struct odl_config_key {
    const char *name;            /* dotted, e.g. "train.lr" */
    odl_config_type type;
    size_t offset;               /* of the field in odl_config */
    const char *def;             /* default, as text in the key's value syntax */
    const char *doc;             /* one line */
    const char *const *choices;  /* ODL_CFG_ENUM: NULL-terminated names, index = enum value */
    unsigned bounds;             /* ODL_CFG_HAS_MIN | ... for int and float */
    double min, max;
} odl_config_key;

/* The table, in documentation order; *n receives the number of keys. */
const odl_config_key *odl_config_keys(size_t *n);
/* The descriptor of a dotted key, or NULL. */
const odl_config_key *odl_config_find_key(const char *dotted_key);

/* Fill every field with its default. Never fails on a consistent table (the test checks it). */
void odl_config_defaults(odl_config *cfg);

/* Apply a YAML file over *cfg. On any error *cfg is unchanged.
 * Errors: ODL_E_NOTFOUND (no such file), ODL_E_IO (cannot read), ODL_E_FORMAT (YAML syntax error:
 * "file:line:col: <problem>"), ODL_E_CONFIG ("file:line: unknown key 'train.lrr' (did you mean
 * 'train.lr'?)", "file:line: train.batch_size: value '0' is out of range; allowed: an integer >= 1",
 * a key given twice, a mapping where a value is expected or the reverse, a top level that is not a
 * mapping). */
odl_status odl_config_load_file(odl_config *cfg, const char *path);
/* The same for YAML text in memory; `name` stands for the file name in messages. */
odl_status odl_config_load_string(odl_config *cfg, const char *yaml, const char *name);

/* Set one key from text (a CLI override). On error *cfg is unchanged.
 * Errors: ODL_E_CONFIG naming the key, the value and what is allowed. */
odl_status odl_config_set(odl_config *cfg, const char *dotted_key, const char *value);
/* "train.lr=0.5" (a leading "--" is accepted) -> odl_config_set. Errors: ODL_E_CONFIG also without '='. */
odl_status odl_config_set_arg(odl_config *cfg, const char *key_eq_value);

/* A key's current value as text in its value syntax (strings unquoted) into buf.
 * Errors: ODL_E_CONFIG (unknown key), ODL_E_INVAL (buffer too small, naming the size needed). */
odl_status odl_config_get(const odl_config *cfg, const char *dotted_key, char *buf, size_t cap);

/* The effective config, every key, as nested YAML that odl_config_load_string reads back to the same
 * values (floats printed with round-trip precision). NUL-terminated.
 * Errors: ODL_E_INVAL when cap is too small, naming the number of bytes needed;
 * ODL_CONFIG_YAML_MAX bytes always suffice. */
#define ODL_CONFIG_YAML_MAX (4 * 4 * ODL_CONFIG_STR_MAX + 8192)
odl_status odl_config_to_yaml(const odl_config *cfg, char *buf, size_t cap);

/* Documentation of every key generated from the table. */
typedef enum odl_config_doc_format {
    ODL_CONFIG_DOC_TEXT = 0,     /* "train.lr  float > 0  default 1.0\n    <doc>" (for --help-config) */
    ODL_CONFIG_DOC_MARKDOWN = 1, /* docs/config.md */
    ODL_CONFIG_DOC_YAML = 2,     /* the commented sample config.yaml, every key at its default */
} odl_config_doc_format;
void odl_config_doc(FILE *out);
void odl_config_doc_write(FILE *out, odl_config_doc_format format);

/* What a key allows, e.g. "an integer >= 1", "a number in (0, 1]", "one of auto|cpu|cuda". */
const char *odl_config_allowed(const odl_config_key *key, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
