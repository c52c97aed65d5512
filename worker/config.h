/* The training program's configuration: config.yaml, CLI overrides, the effective config.
 *
 * Its schema (worker/config.c) is one table of keys over the odl_config struct below, served by the
 * library's strict YAML engine (odl/config.h). docs/config.md and the sample config.yaml at the repository
 * root are generated from it (tests/test_config checks that they are in step; `test_config --regen
 * <srcdir>` rewrites them). Enum keys take the names of the module that owns the enum: `model`
 * odl_model_names() (odl/models.h), `train.optimizer` odl_optim_names() (odl/nn.h).
 *
 * Value syntax (the same in YAML and on the command line):
 *   int    decimal integer, optional sign ("64", "-1")
 *   float  a finite number in C strtod syntax ("1.0", "1e-3", "0.7"); NaN and infinities are refused
 *   bool   true|false, also yes|no, on|off, 1|0 (case-insensitive)
 *   enum   one of the listed names, exactly (lower case)
 *   string any text; in YAML an empty value, `~` or `null` is the empty string
 * Strings are stored in fixed buffers of ODL_CONFIG_STR_MAX bytes (paths up to PATH_MAX).
 */
#ifndef ODL_WORKER_CONFIG_H
#define ODL_WORKER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "odl/config.h"
#include "odl/log.h"
#include "odl/nn.h"
#include "odl/precision.h"

/* device: auto = CUDA when a GPU is present, else the CPU. */
typedef enum odl_cfg_device { ODL_CFG_DEVICE_AUTO = 0, ODL_CFG_DEVICE_CPU, ODL_CFG_DEVICE_CUDA } odl_cfg_device;
/* logging.progress: auto = a progress bar only when stderr is a terminal. */
typedef enum odl_cfg_progress { ODL_CFG_PROGRESS_AUTO = 0, ODL_CFG_PROGRESS_ON, ODL_CFG_PROGRESS_OFF } odl_cfg_progress;

/* Every key, typed. Field names are the dotted key names. Fill with odl_config_defaults first. */
typedef struct odl_config {
    int model; /* index into odl_model_names() */
    char data_dir[ODL_CONFIG_STR_MAX];
    odl_cfg_device device;
    odl_precision precision; /* of the GEMMs of linear layers (odl/precision.h) */
    int64_t seed;
    struct {
        int64_t epochs;
        int64_t batch_size;
        int64_t test_batch_size;
        double lr;
        odl_optim_type optimizer;
        double momentum;
        double weight_decay;
        double gamma;
        int64_t max_steps;         /* 0 = no limit */
        int64_t max_train_samples; /* 0 = all */
        int64_t max_test_samples;  /* 0 = all */
        bool dropout;
        bool eval_every_epoch;
        bool cuda_graph; /* replay full steps from CUDA graphs (worker/train_step.h) */
    } train;
    struct {
        double preallocate_fraction;
    } memory;
    struct {
        odl_log_level level;
        char metrics_out[ODL_CONFIG_STR_MAX];
        odl_cfg_progress progress;
        int64_t log_interval; /* steps between progress lines off a terminal */
        char tensorboard[ODL_CONFIG_STR_MAX];
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

/* The schema of odl_config (worker/config.c). */
const odl_config_schema *odl_train_config_schema(void);

/* ODL_CONFIG_YAML_MAX bytes always hold odl_config_to_yaml's output (five string keys, each at most
 * 4 bytes per character escaped, plus the rest). */
#define ODL_CONFIG_YAML_MAX (5 * 4 * ODL_CONFIG_STR_MAX + 8192)

/* The engine's functions (odl/config.h) on this schema; errors as documented there. */
static inline const odl_config_key *odl_config_keys(size_t *n) {
    const odl_config_schema *s = odl_train_config_schema();
    if (n) *n = s->n;
    return s->keys;
}
static inline const odl_config_key *odl_config_find_key(const char *k) {
    return odl_config_schema_find_key(odl_train_config_schema(), k);
}
static inline void odl_config_defaults(odl_config *c) { odl_config_schema_defaults(odl_train_config_schema(), c); }
static inline odl_status odl_config_load_file(odl_config *c, const char *path) {
    return odl_config_schema_load_file(odl_train_config_schema(), c, path);
}
static inline odl_status odl_config_load_string(odl_config *c, const char *yaml, const char *name) {
    return odl_config_schema_load_string(odl_train_config_schema(), c, yaml, name);
}
static inline odl_status odl_config_set(odl_config *c, const char *key, const char *value) {
    return odl_config_schema_set(odl_train_config_schema(), c, key, value);
}
static inline odl_status odl_config_set_arg(odl_config *c, const char *key_eq_value) {
    return odl_config_schema_set_arg(odl_train_config_schema(), c, key_eq_value);
}
static inline odl_status odl_config_get(const odl_config *c, const char *key, char *buf, size_t cap) {
    return odl_config_schema_get(odl_train_config_schema(), c, key, buf, cap);
}
static inline odl_status odl_config_to_yaml(const odl_config *c, char *buf, size_t cap) {
    return odl_config_schema_to_yaml(odl_train_config_schema(), c, buf, cap);
}
static inline void odl_config_doc_write(FILE *out, odl_config_doc_format f) {
    odl_config_schema_doc_write(odl_train_config_schema(), out, f);
}
static inline void odl_config_doc(FILE *out) { odl_config_doc_write(out, ODL_CONFIG_DOC_TEXT); }

#endif
