/* Configuration: the key table, value parsing and validation, YAML loading (libyaml's document API),
 * the effective config as YAML, and the generated documentation. See odl/config.h. */
#include "odl/config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

_Static_assert(sizeof(odl_cfg_model) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(odl_cfg_device) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(odl_cfg_optimizer) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(odl_cfg_progress) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(odl_log_level) == sizeof(int), "enum fields are int-sized");

/* ---------------------------------------------------------------------------------------------- */
/* The table: the single source of truth. Defaults follow PyTorch's examples/mnist (main.py):       */
/* epochs 14, batch 64, test batch 1000, Adadelta lr 1.0, StepLR(step_size=1, gamma=0.7), seed 1,   */
/* dropout 0.25/0.5. bucket_mb 25 is DDP's bucket_cap_mb default.                                   */

static const char *const k_models[] = {"mnist", "mnist_cnn", "mnist_mlp", NULL};
static const char *const k_devices[] = {"auto", "cpu", "cuda", NULL};
static const char *const k_optims[] = {"adadelta", "sgd", "adam", "adamw", NULL};
static const char *const k_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const k_progress[] = {"auto", "on", "off", NULL};
/* index = odl_precision (odl/precision.h) */
static const char *const k_precisions[] = {"fp32", "tf32", "bf16", NULL};

#define OFF(f) offsetof(odl_config, f)
#define GE(x) ODL_CFG_HAS_MIN, (x), 0
#define GT(x) ODL_CFG_HAS_MIN | ODL_CFG_MIN_OPEN, (x), 0
#define NOB 0, 0, 0

static const odl_config_key g_keys[] = {
    {"model", ODL_CFG_ENUM, OFF(model), "mnist",
     "Network: mnist is PyTorch examples/mnist's CNN (the same as mnist_cnn); mnist_mlp is a multilayer perceptron",
     k_models, NOB},
    {"data_dir", ODL_CFG_STRING, OFF(data_dir), "/usr/share/datasets/fashion-mnist",
     "Directory with the MNIST IDX files train-/t10k-images-idx3-ubyte and -labels-idx1-ubyte, plain or .gz", NULL,
     NOB},
    {"device", ODL_CFG_ENUM, OFF(device), "auto", "Where to run: auto is CUDA when a GPU is present, else the CPU",
     k_devices, NOB},
    {"precision", ODL_CFG_ENUM, OFF(precision), "fp32",
     "Inputs of the linear layers' GEMMs: fp32 (FMA, bit-reproducible), tf32 or bf16 (tensor cores on CUDA, float32 "
     "accumulation, weights and optimiser state; docs/PRECISION.md)",
     k_precisions, NOB},
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
     k_optims, NOB},
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
    {"train.dropout", ODL_CFG_BOOL, OFF(train.dropout), "true",
     "Dropout layers on (examples/mnist: 0.25 and 0.5); false gives deterministic steps", NULL, NOB},
    {"train.eval_every_epoch", ODL_CFG_BOOL, OFF(train.eval_every_epoch), "true",
     "Evaluate on the test set after every epoch (else only after the last)", NULL, NOB},

    {"memory.preallocate_fraction", ODL_CFG_FLOAT, OFF(memory.preallocate_fraction), "0.5",
     "Fraction of the GPU's free memory the caching pool reserves at start", NULL,
     ODL_CFG_HAS_MIN | ODL_CFG_MIN_OPEN | ODL_CFG_HAS_MAX, 0, 1},

    {"logging.level", ODL_CFG_ENUM, OFF(logging.level), "info",
     "Lowest level printed; with several ranks, ranks other than 0 print only warn and error", k_levels, NOB},
    {"logging.metrics_out", ODL_CFG_STRING, OFF(logging.metrics_out), "",
     "Path of a JSONL metrics file (one JSON object per line); empty = none", NULL, NOB},
    {"logging.progress", ODL_CFG_ENUM, OFF(logging.progress), "auto",
     "Progress bar: auto shows it only when stderr is a terminal", k_progress, NOB},

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

const odl_config_key *odl_config_keys(size_t *n) {
    if (n) *n = NKEYS;
    return g_keys;
}

const odl_config_key *odl_config_find_key(const char *dotted_key) {
    if (!dotted_key) return NULL;
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(g_keys[i].name, dotted_key) == 0) return &g_keys[i];
    return NULL;
}

/* ---------------------------------------------------------------------------------------------- */
/* Values                                                                                           */

static void fmt_bound(char *buf, size_t cap, double v) { snprintf(buf, cap, "%.15g", v); }

static const char *allowed_sep(const odl_config_key *k, char *buf, size_t cap, const char *sep) {
    char lo[40], hi[40];
    fmt_bound(lo, sizeof lo, k->min);
    fmt_bound(hi, sizeof hi, k->max);
    const char *what = k->type == ODL_CFG_INT ? "an integer" : "a number";
    switch (k->type) {
    case ODL_CFG_INT:
    case ODL_CFG_FLOAT:
        if ((k->bounds & ODL_CFG_HAS_MIN) && (k->bounds & ODL_CFG_HAS_MAX))
            snprintf(buf, cap, "%s in %c%s, %s%c", what, (k->bounds & ODL_CFG_MIN_OPEN) ? '(' : '[', lo, hi,
                     (k->bounds & ODL_CFG_MAX_OPEN) ? ')' : ']');
        else if (k->bounds & ODL_CFG_HAS_MIN)
            snprintf(buf, cap, "%s %s %s", what, (k->bounds & ODL_CFG_MIN_OPEN) ? ">" : ">=", lo);
        else if (k->bounds & ODL_CFG_HAS_MAX)
            snprintf(buf, cap, "%s %s %s", what, (k->bounds & ODL_CFG_MAX_OPEN) ? "<" : "<=", hi);
        else
            snprintf(buf, cap, "%s", what);
        break;
    case ODL_CFG_BOOL: snprintf(buf, cap, "true or false"); break;
    case ODL_CFG_STRING: snprintf(buf, cap, "a string of at most %d bytes", ODL_CONFIG_STR_MAX - 1); break;
    case ODL_CFG_ENUM: {
        size_t n = (size_t)snprintf(buf, cap, "one of ");
        for (int i = 0; k->choices[i] && n < cap; i++)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? sep : "", k->choices[i]);
        break;
    }
    }
    return buf;
}

const char *odl_config_allowed(const odl_config_key *key, char *buf, size_t cap) {
    return allowed_sep(key, buf, cap, "|");
}

static const char *type_name(odl_config_type t) {
    switch (t) {
    case ODL_CFG_INT: return "int";
    case ODL_CFG_FLOAT: return "float";
    case ODL_CFG_BOOL: return "bool";
    case ODL_CFG_STRING: return "string";
    case ODL_CFG_ENUM: return "enum";
    }
    return "?";
}

static int in_bounds(const odl_config_key *k, double v) {
    if (k->bounds & ODL_CFG_HAS_MIN) {
        if ((k->bounds & ODL_CFG_MIN_OPEN) ? !(v > k->min) : !(v >= k->min)) return 0;
    }
    if (k->bounds & ODL_CFG_HAS_MAX) {
        if ((k->bounds & ODL_CFG_MAX_OPEN) ? !(v < k->max) : !(v <= k->max)) return 0;
    }
    return 1;
}

/* Parse `text` for key k and store it in cfg. `where` prefixes the message ("file:line: " or "").
 * Nothing is stored on error. */
static odl_status set_value(odl_config *cfg, const odl_config_key *k, const char *text, const char *where) {
    char allowed[256];
    char shown[208]; /* the value as shown in messages, shortened */
    if (!text) text = "";
    snprintf(shown, sizeof shown, "%.200s%s", text, strlen(text) > 200 ? "..." : "");
    void *dst = (char *)cfg + k->offset;
    switch (k->type) {
    case ODL_CFG_INT: {
        char *end = NULL;
        errno = 0;
        long long v = text[0] ? strtoll(text, &end, 10) : 0;
        if (!text[0] || *end != '\0' || errno == ERANGE)
            return ODL_ERR(ODL_E_CONFIG, "%s%s: value '%s' is not an integer; allowed: %s", where, k->name, shown,
                           odl_config_allowed(k, allowed, sizeof allowed));
        if (!in_bounds(k, (double)v))
            return ODL_ERR(ODL_E_CONFIG, "%s%s: value '%s' is out of range; allowed: %s", where, k->name, shown,
                           odl_config_allowed(k, allowed, sizeof allowed));
        *(int64_t *)dst = (int64_t)v;
        return ODL_OK;
    }
    case ODL_CFG_FLOAT: {
        char *end = NULL;
        errno = 0;
        double v = text[0] ? strtod(text, &end) : 0;
        if (!text[0] || *end != '\0' || !isfinite(v) || (errno == ERANGE && fabs(v) > 1))
            return ODL_ERR(ODL_E_CONFIG, "%s%s: value '%s' is not a finite number; allowed: %s", where, k->name,
                           shown, odl_config_allowed(k, allowed, sizeof allowed));
        if (!in_bounds(k, v))
            return ODL_ERR(ODL_E_CONFIG, "%s%s: value '%s' is out of range; allowed: %s", where, k->name, shown,
                           odl_config_allowed(k, allowed, sizeof allowed));
        *(double *)dst = v;
        return ODL_OK;
    }
    case ODL_CFG_BOOL: {
        static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
        for (int i = 0; i < 4; i++) {
            if (strcasecmp(text, yes[i]) == 0) { *(bool *)dst = true; return ODL_OK; }
            if (strcasecmp(text, no[i]) == 0) { *(bool *)dst = false; return ODL_OK; }
        }
        return ODL_ERR(ODL_E_CONFIG, "%s%s: value '%s' is not a boolean; allowed: true or false (also yes/no, on/off, 1/0)",
                       where, k->name, shown);
    }
    case ODL_CFG_STRING: {
        size_t n = strlen(text);
        if (n >= ODL_CONFIG_STR_MAX)
            return ODL_ERR(ODL_E_CONFIG, "%s%s: value '%s' is %zu bytes long; allowed: %s", where, k->name, shown, n,
                           odl_config_allowed(k, allowed, sizeof allowed));
        memcpy(dst, text, n + 1);
        return ODL_OK;
    }
    case ODL_CFG_ENUM:
        for (int i = 0; k->choices[i]; i++) {
            if (strcmp(text, k->choices[i]) == 0) {
                *(int *)dst = i;
                return ODL_OK;
            }
        }
        return ODL_ERR(ODL_E_CONFIG, "%s%s: value '%s' is not allowed; allowed: %s", where, k->name, shown,
                       odl_config_allowed(k, allowed, sizeof allowed));
    }
    return ODL_ERR(ODL_E_INTERNAL, "%s: bad key type %d", k->name, (int)k->type);
}

/* Shortest "%.Ng" that reads back to the same double; a ".0" is added to integral values so that a
 * float never looks like an int. */
static void fmt_double(double v, char *buf, size_t cap) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".eEni")) strncat(buf, ".0", cap - strlen(buf) - 1);
}

/* The value as text (strings raw). Returns the length, or -1 when it does not fit. */
static int value_text(const odl_config *cfg, const odl_config_key *k, char *buf, size_t cap) {
    const void *src = (const char *)cfg + k->offset;
    char tmp[64] = "";
    const char *s = tmp;
    switch (k->type) {
    case ODL_CFG_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)*(const int64_t *)src); break;
    case ODL_CFG_FLOAT: fmt_double(*(const double *)src, tmp, sizeof tmp); break;
    case ODL_CFG_BOOL: s = *(const bool *)src ? "true" : "false"; break;
    case ODL_CFG_STRING: s = (const char *)src; break;
    case ODL_CFG_ENUM: {
        int v = *(const int *)src, n = 0;
        while (k->choices[n]) n++;
        s = (v >= 0 && v < n) ? k->choices[v] : "?";
        break;
    }
    }
    size_t n = strlen(s);
    if (n + 1 > cap) return -1;
    memcpy(buf, s, n + 1);
    return (int)n;
}

void odl_config_defaults(odl_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NKEYS; i++) {
        /* A default that does not parse is a bug in the table; tests/test_config checks every one. */
        if (set_value(cfg, &g_keys[i], g_keys[i].def, "default of ") != ODL_OK) odl_error_clear();
    }
}

odl_status odl_config_set(odl_config *cfg, const char *dotted_key, const char *value);

/* ---------------------------------------------------------------------------------------------- */
/* Unknown keys: suggest the closest name.                                                          */

static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 1000;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static const char *last_part(const char *name) {
    const char *d = strrchr(name, '.');
    return d ? d + 1 : name;
}

static const char *suggest(const char *name) {
    const odl_config_key *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < NKEYS; i++) {
        size_t d = edit_distance(name, g_keys[i].name);
        if (strcmp(last_part(name), last_part(g_keys[i].name)) == 0) d = d < 1 ? d : 1; /* 'lr' -> 'train.lr' */
        if (d < best_d) {
            best_d = d;
            best = &g_keys[i];
        }
    }
    size_t limit = strlen(name) / 3;
    if (limit < 2) limit = 2;
    return best && best_d <= limit ? best->name : NULL;
}

/* 1 when some key starts with "<prefix>." */
static int is_section(const char *prefix) {
    size_t n = strlen(prefix);
    for (size_t i = 0; i < NKEYS; i++)
        if (strncmp(g_keys[i].name, prefix, n) == 0 && g_keys[i].name[n] == '.') return 1;
    return 0;
}

/* "; keys in train: train.epochs, train.batch_size, ..." */
static void section_keys(const char *prefix, char *buf, size_t cap) {
    size_t n = strlen(prefix), pos = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NKEYS && pos < cap; i++)
        if (strncmp(g_keys[i].name, prefix, n) == 0 && g_keys[i].name[n] == '.')
            pos += (size_t)snprintf(buf + pos, cap - pos, "%s%s", pos ? ", " : "", g_keys[i].name + n + 1);
}

static odl_status unknown_key(const char *where, const char *name) {
    const char *s = suggest(name);
    if (s) return ODL_ERR(ODL_E_CONFIG, "%sunknown key '%s' (did you mean '%s'?)", where, name, s);
    return ODL_ERR(ODL_E_CONFIG, "%sunknown key '%s' (docs/config.md lists every key)", where, name);
}

odl_status odl_config_set(odl_config *cfg, const char *dotted_key, const char *value) {
    if (!cfg || !dotted_key) return ODL_ERR(ODL_E_INVAL, "odl_config_set: NULL argument");
    const odl_config_key *k = odl_config_find_key(dotted_key);
    if (!k) {
        if (is_section(dotted_key)) {
            char keys[512];
            section_keys(dotted_key, keys, sizeof keys);
            return ODL_ERR(ODL_E_CONFIG, "'%s' is a section, not a key; its keys: %s", dotted_key, keys);
        }
        return unknown_key("", dotted_key);
    }
    return set_value(cfg, k, value, "");
}

odl_status odl_config_set_arg(odl_config *cfg, const char *arg) {
    if (!cfg || !arg) return ODL_ERR(ODL_E_INVAL, "odl_config_set_arg: NULL argument");
    const char *s = arg;
    if (strncmp(s, "--", 2) == 0) s += 2;
    const char *eq = strchr(s, '=');
    if (!eq) return ODL_ERR(ODL_E_CONFIG, "config override '%s' is not of the form key=value", arg);
    char key[128];
    size_t n = (size_t)(eq - s);
    if (n >= sizeof key) return unknown_key("", s);
    memcpy(key, s, n);
    key[n] = '\0';
    return odl_config_set(cfg, key, eq + 1);
}

odl_status odl_config_get(const odl_config *cfg, const char *dotted_key, char *buf, size_t cap) {
    const odl_config_key *k = odl_config_find_key(dotted_key);
    if (!k) return unknown_key("", dotted_key ? dotted_key : "(null)");
    if (!cfg || !buf) return ODL_ERR(ODL_E_INVAL, "odl_config_get: NULL argument");
    char tmp[ODL_CONFIG_STR_MAX];
    int n = value_text(cfg, k, tmp, sizeof tmp);
    if (n < 0 || (size_t)n + 1 > cap)
        return ODL_ERR(ODL_E_INVAL, "odl_config_get(%s): buffer of %zu bytes, %d needed", dotted_key, cap, n + 1);
    memcpy(buf, tmp, (size_t)n + 1);
    return ODL_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* YAML                                                                                             */

typedef struct walk_ctx {
    yaml_document_t *doc;
    odl_config *cfg;
    const char *file;
    int seen_line[NKEYS]; /* line where each key was set, 0 = not yet */
} walk_ctx;

static int node_line(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

static odl_status walk_mapping(walk_ctx *c, yaml_node_t *map, const char *prefix) {
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
        if (!kn || !vn) return ODL_ERR(ODL_E_INTERNAL, "%s: libyaml returned a pair without nodes", c->file);
        char where[512];
        snprintf(where, sizeof where, "%s:%d: ", c->file, node_line(kn));
        if (kn->type != YAML_SCALAR_NODE)
            return ODL_ERR(ODL_E_CONFIG, "%skeys must be plain names, not a %s", where,
                           kn->type == YAML_MAPPING_NODE ? "mapping" : "list");
        const char *kname = (const char *)kn->data.scalar.value;
        char full[256];
        if (snprintf(full, sizeof full, "%s%s%s", prefix, prefix[0] ? "." : "", kname) >= (int)sizeof full)
            return unknown_key(where, kname);

        if (vn->type == YAML_MAPPING_NODE) {
            if (odl_config_find_key(full))
                return ODL_ERR(ODL_E_CONFIG, "%s%s takes a single value, not a mapping", where, full);
            if (!is_section(full)) return unknown_key(where, full);
            odl_status st = walk_mapping(c, vn, full);
            if (st != ODL_OK) return st;
            continue;
        }
        const odl_config_key *k = odl_config_find_key(full);
        if (!k) {
            if (is_section(full)) {
                char keys[512];
                section_keys(full, keys, sizeof keys);
                return ODL_ERR(ODL_E_CONFIG, "%s'%s' is a section; give its keys as a mapping under it: %s", where,
                               full, keys);
            }
            return unknown_key(where, full);
        }
        if (vn->type == YAML_SEQUENCE_NODE)
            return ODL_ERR(ODL_E_CONFIG, "%s%s takes a single value, not a list", where, full);
        size_t idx = (size_t)(k - g_keys);
        if (c->seen_line[idx])
            return ODL_ERR(ODL_E_CONFIG, "%s%s is given twice (first on line %d)", where, full, c->seen_line[idx]);
        c->seen_line[idx] = node_line(kn);

        const char *val = (const char *)vn->data.scalar.value;
        if (k->type == ODL_CFG_STRING && vn->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
            (strcmp(val, "~") == 0 || strcmp(val, "null") == 0 || strcmp(val, "Null") == 0 ||
             strcmp(val, "NULL") == 0))
            val = "";
        if (strlen(val) != vn->data.scalar.length)
            return ODL_ERR(ODL_E_CONFIG, "%s%s: value contains a NUL character", where, full);
        snprintf(where, sizeof where, "%s:%d: ", c->file, node_line(vn));
        odl_status st = set_value(c->cfg, k, val, where);
        if (st != ODL_OK) return st;
    }
    return ODL_OK;
}

static odl_status load_text(odl_config *cfg, const char *text, size_t len, const char *name) {
    odl_status st = ODL_OK;
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    int have_doc = 0, have_extra = 0;
    walk_ctx *c = NULL;
    odl_config *tmp = NULL;

    if (!yaml_parser_initialize(&parser)) return ODL_ERR(ODL_E_NOMEM, "%s: yaml_parser_initialize failed", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        if (parser.context)
            st = ODL_ERR(ODL_E_FORMAT, "%s:%zu:%zu: YAML syntax error: %s %s (line %zu)", name,
                         parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                         parser.problem ? parser.problem : "error", parser.context, parser.context_mark.line + 1);
        else
            st = ODL_ERR(ODL_E_FORMAT, "%s:%zu:%zu: YAML syntax error: %s", name, parser.problem_mark.line + 1,
                         parser.problem_mark.column + 1, parser.problem ? parser.problem : "error");
        goto done;
    }
    have_doc = 1;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) goto done; /* empty file: nothing to change */
    if (!yaml_parser_load(&parser, &extra)) {
        st = ODL_ERR(ODL_E_FORMAT, "%s:%zu:%zu: YAML syntax error: %s", name, parser.problem_mark.line + 1,
                     parser.problem_mark.column + 1, parser.problem ? parser.problem : "error");
        goto done;
    }
    have_extra = 1;
    if (yaml_document_get_root_node(&extra)) {
        st = ODL_ERR(ODL_E_CONFIG, "%s:%zu: a second YAML document; a config file holds one", name,
                     extra.start_mark.line + 1);
        goto done;
    }
    if (root->type == YAML_SCALAR_NODE && root->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        (root->data.scalar.length == 0 || strcmp((const char *)root->data.scalar.value, "~") == 0 ||
         strcmp((const char *)root->data.scalar.value, "null") == 0))
        goto done; /* "---" with nothing after it */
    if (root->type != YAML_MAPPING_NODE) {
        st = ODL_ERR(ODL_E_CONFIG, "%s:%d: the top level must be a mapping of keys (model: ..., train: ...)", name,
                     node_line(root));
        goto done;
    }
    c = calloc(1, sizeof *c);
    tmp = malloc(sizeof *tmp);
    if (!c || !tmp) {
        st = ODL_ERR(ODL_E_NOMEM, "%s: out of memory", name);
        goto done;
    }
    memcpy(tmp, cfg, sizeof *tmp);
    c->doc = &doc;
    c->cfg = tmp;
    c->file = name;
    st = walk_mapping(c, root, "");
    if (st == ODL_OK) memcpy(cfg, tmp, sizeof *cfg);

done:
    free(tmp);
    free(c);
    if (have_extra) yaml_document_delete(&extra);
    if (have_doc) yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return st;
}

odl_status odl_config_load_string(odl_config *cfg, const char *yaml, const char *name) {
    if (!cfg || !yaml) return ODL_ERR(ODL_E_INVAL, "odl_config_load_string: NULL argument");
    return load_text(cfg, yaml, strlen(yaml), name ? name : "<string>");
}

odl_status odl_config_load_file(odl_config *cfg, const char *path) {
    if (!cfg || !path) return ODL_ERR(ODL_E_INVAL, "odl_config_load_file: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return ODL_ERR(e == ENOENT ? ODL_E_NOTFOUND : ODL_E_IO, "%s: cannot open config file: %s", path,
                       strerror(e));
    }
    size_t cap = 1 << 14, len = 0;
    char *buf = malloc(cap);
    odl_status st = ODL_OK;
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap) break;
        if (cap >= ((size_t)64 << 20)) {
            st = ODL_ERR(ODL_E_CONFIG, "%s: config file larger than 64 MiB", path);
            break;
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (!buf) st = ODL_ERR(ODL_E_NOMEM, "%s: out of memory reading the config file", path);
    else if (st == ODL_OK && ferror(f)) st = ODL_ERR(ODL_E_IO, "%s: read error: %s", path, strerror(errno));
    fclose(f);
    if (st == ODL_OK) st = load_text(cfg, buf, len, path);
    free(buf);
    return st;
}

/* ---------------------------------------------------------------------------------------------- */
/* Output                                                                                           */

typedef struct sbuf {
    char *p;
    size_t cap, len; /* len counts every byte asked for, even past cap */
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->len < b->cap) {
        size_t room = b->cap - b->len;
        memcpy(b->p + b->len, s, n < room ? n : room);
    }
    b->len += n;
}
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* A double-quoted YAML scalar. */
static void sb_quoted(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        char esc[8];
        if (ch == '"') sb_put(b, "\\\"", 2);
        else if (ch == '\\') sb_put(b, "\\\\", 2);
        else if (ch == '\n') sb_put(b, "\\n", 2);
        else if (ch == '\t') sb_put(b, "\\t", 2);
        else if (ch == '\r') sb_put(b, "\\r", 2);
        else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", ch);
            sb_put(b, esc, 4);
        } else sb_put(b, (const char *)&ch, 1);
    }
    sb_put(b, "\"", 1);
}

static int section_len(const char *name) {
    const char *d = strchr(name, '.');
    return d ? (int)(d - name) : 0;
}

odl_status odl_config_to_yaml(const odl_config *cfg, char *buf, size_t cap) {
    if (!cfg || !buf || cap == 0) return ODL_ERR(ODL_E_INVAL, "odl_config_to_yaml: NULL or empty buffer");
    sbuf b = {buf, cap, 0};
    const char *cur = "";
    int cur_len = 0;
    char val[ODL_CONFIG_STR_MAX];
    for (size_t i = 0; i < NKEYS; i++) {
        const odl_config_key *k = &g_keys[i];
        int sl = section_len(k->name);
        if (sl != cur_len || strncmp(k->name, cur, (size_t)sl) != 0) {
            cur = k->name;
            cur_len = sl;
            if (sl) {
                sb_put(&b, k->name, (size_t)sl);
                sb_str(&b, ":\n");
            }
        }
        if (sl) sb_str(&b, "  ");
        sb_str(&b, k->name + (sl ? sl + 1 : 0));
        sb_str(&b, ": ");
        if (value_text(cfg, k, val, sizeof val) < 0) return ODL_ERR(ODL_E_INTERNAL, "%s: value too long", k->name);
        if (k->type == ODL_CFG_STRING) sb_quoted(&b, val);
        else sb_str(&b, val);
        sb_str(&b, "\n");
    }
    if (b.len + 1 > cap) {
        buf[0] = '\0';
        return ODL_ERR(ODL_E_INVAL, "odl_config_to_yaml: buffer of %zu bytes, %zu needed", cap, b.len + 1);
    }
    buf[b.len] = '\0';
    return ODL_OK;
}

/* The default as shown in docs: strings quoted. */
static void default_shown(const odl_config_key *k, char *buf, size_t cap) {
    if (k->type == ODL_CFG_STRING) {
        sbuf b = {buf, cap - 1, 0};
        sb_quoted(&b, k->def);
        buf[b.len < cap - 1 ? b.len : cap - 1] = '\0';
    } else {
        snprintf(buf, cap, "%s", k->def);
    }
}

static void doc_text(FILE *out) {
    char allowed[256], def[512];
    fprintf(out, "Configuration keys (config.yaml; override with --<key>=<value>):\n\n");
    for (size_t i = 0; i < NKEYS; i++) {
        const odl_config_key *k = &g_keys[i];
        default_shown(k, def, sizeof def);
        fprintf(out, "%s  (%s: %s; default %s)\n    %s\n", k->name, type_name(k->type),
                odl_config_allowed(k, allowed, sizeof allowed), def, k->doc);
    }
}

static void doc_markdown(FILE *out) {
    char allowed[256], def[512];
    fprintf(out,
            "# Configuration keys\n\n"
            "<!-- Generated from the key table in core/config.c by `test_config --regen <source dir>`;\n"
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
            "examples/mnist.\n\n"
            "| Key | Type | Allowed | Default | Description |\n"
            "|-----|------|---------|---------|-------------|\n");
    for (size_t i = 0; i < NKEYS; i++) {
        const odl_config_key *k = &g_keys[i];
        default_shown(k, def, sizeof def);
        fprintf(out, "| `%s` | %s | %s | `%s` | %s |\n", k->name, type_name(k->type),
                allowed_sep(k, allowed, sizeof allowed, ", "), def, k->doc);
    }
}

static void doc_yaml(FILE *out) {
    char allowed[256], def[512];
    fprintf(out,
            "# OriginDL configuration: every key at its default (PyTorch examples/mnist settings).\n"
            "# Generated from the key table in core/config.c (`test_config --regen <source dir>`); docs/config.md\n"
            "# describes the same keys. Use: odl_worker --config config.yaml [--train.lr=0.5 ...]\n"
            "# Command-line flags override this file. An unknown key or a bad value is an error.\n");
    int cur_len = -1;
    const char *cur = "";
    for (size_t i = 0; i < NKEYS; i++) {
        const odl_config_key *k = &g_keys[i];
        int sl = section_len(k->name);
        const char *ind = sl ? "  " : "";
        int first_in_section = 0;
        if (sl != cur_len || strncmp(k->name, cur, (size_t)sl) != 0) {
            cur = k->name;
            cur_len = sl;
            if (sl) {
                fprintf(out, "\n%.*s:\n", sl, k->name);
                first_in_section = 1;
            }
        }
        fprintf(out, "%s%s# %s. [%s]\n", first_in_section ? "" : "\n", ind, k->doc,
                odl_config_allowed(k, allowed, sizeof allowed));
        default_shown(k, def, sizeof def);
        fprintf(out, "%s%s: %s\n", ind, k->name + (sl ? sl + 1 : 0), def);
    }
}

void odl_config_doc_write(FILE *out, odl_config_doc_format format) {
    if (!out) return;
    switch (format) {
    case ODL_CONFIG_DOC_TEXT: doc_text(out); break;
    case ODL_CONFIG_DOC_MARKDOWN: doc_markdown(out); break;
    case ODL_CONFIG_DOC_YAML: doc_yaml(out); break;
    }
}

void odl_config_doc(FILE *out) { odl_config_doc_write(out, ODL_CONFIG_DOC_TEXT); }
