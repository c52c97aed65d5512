/* Configuration engine: a strict YAML layer over a program's table of keys (odl_config_schema).
 *
 * A program owns its schema: a plain struct of typed fields and one table of key descriptors, the single
 * source of truth for every key's dotted name, type, default, allowed range and one-line doc (the
 * training program's is worker/config.c, with the odl_config struct of worker/config.h). Defaults,
 * validation, the YAML output, the --help text and the generated documentation all come from the table.
 *
 * Order of precedence: odl_config_schema_defaults, then odl_config_schema_load_file (YAML, nested
 * mappings name the dotted keys: `train: {lr: 0.5}` is `train.lr`), then odl_config_schema_set for each
 * CLI override (`--train.lr=0.5`). An unknown key is an error, never a warning.
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

#include "odl/api.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ODL_CONFIG_STR_MAX 4096

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
    size_t offset;               /* of the field in the program's config struct */
    const char *def;             /* default, as text in the key's value syntax */
    const char *doc;             /* one line */
    const char *const *choices;  /* ODL_CFG_ENUM: NULL-terminated names, index = enum value */
    unsigned bounds;             /* ODL_CFG_HAS_MIN | ... for int and float */
    double min, max;
} odl_config_key;

/* Documentation of every key generated from the table. */
typedef enum odl_config_doc_format {
    ODL_CONFIG_DOC_TEXT = 0,     /* "train.lr  float > 0  default 1.0\n    <doc>" (for --help-config) */
    ODL_CONFIG_DOC_MARKDOWN = 1, /* e.g. docs/config.md: markdown_intro, then a table of every key */
    ODL_CONFIG_DOC_YAML = 2,     /* the commented sample config.yaml, every key at its default */
} odl_config_doc_format;

/* A program's keys: the table in documentation order over a struct of `size` bytes. */
typedef struct odl_config_schema {
    const odl_config_key *keys;
    size_t n;
    size_t size;
    const char *doc_path;       /* where every key is documented, named in "unknown key" errors */
    const char *markdown_intro; /* text before the key table of ODL_CONFIG_DOC_MARKDOWN */
    const char *yaml_intro;     /* comment lines at the top of ODL_CONFIG_DOC_YAML */
} odl_config_schema;

/* The descriptor of a dotted key, or NULL. */
ODL_API const odl_config_key *odl_config_schema_find_key(const odl_config_schema *sc, const char *dotted_key);

/* Fill every field of cfg (sc->size bytes) with its default. Never fails on a consistent table. */
ODL_API void odl_config_schema_defaults(const odl_config_schema *sc, void *cfg);

/* Apply a YAML file over *cfg. On any error *cfg is unchanged.
 * Errors: ODL_E_NOTFOUND (no such file), ODL_E_IO (cannot read), ODL_E_FORMAT (YAML syntax error:
 * "file:line:col: <problem>"), ODL_E_CONFIG ("file:line: unknown key 'train.lrr' (did you mean
 * 'train.lr'?)", "file:line: train.batch_size: value '0' is out of range; allowed: an integer >= 1",
 * a key given twice, a mapping where a value is expected or the reverse, a top level that is not a
 * mapping). */
ODL_API odl_status odl_config_schema_load_file(const odl_config_schema *sc, void *cfg, const char *path);
/* The same for YAML text in memory; `name` stands for the file name in messages. */
ODL_API odl_status odl_config_schema_load_string(const odl_config_schema *sc, void *cfg, const char *yaml,
                                                const char *name);

/* Set one key from text (a CLI override). On error *cfg is unchanged.
 * Errors: ODL_E_CONFIG naming the key, the value and what is allowed. */
ODL_API odl_status odl_config_schema_set(const odl_config_schema *sc, void *cfg, const char *dotted_key,
                                        const char *value);
/* "train.lr=0.5" (a leading "--" is accepted) -> odl_config_schema_set. Errors: ODL_E_CONFIG also without '='. */
ODL_API odl_status odl_config_schema_set_arg(const odl_config_schema *sc, void *cfg, const char *key_eq_value);

/* A key's current value as text in its value syntax (strings unquoted) into buf.
 * Errors: ODL_E_CONFIG (unknown key), ODL_E_INVAL (buffer too small, naming the size needed). */
ODL_API odl_status odl_config_schema_get(const odl_config_schema *sc, const void *cfg, const char *dotted_key,
                                        char *buf, size_t cap);

/* The effective config, every key, as nested YAML that odl_config_schema_load_string reads back to the
 * same values (floats printed with round-trip precision). NUL-terminated.
 * Errors: ODL_E_INVAL when cap is too small, naming the number of bytes needed. */
ODL_API odl_status odl_config_schema_to_yaml(const odl_config_schema *sc, const void *cfg, char *buf, size_t cap);

/* The scalar value of a dotted key in YAML text, without a schema (nested mappings name the parts:
 * "train.max_train_samples" is `train: {max_train_samples: ...}`; the dotted name at the top level works
 * too), e.g. to read one key of a config stored in a checkpoint. Errors: ODL_E_FORMAT (not YAML),
 * ODL_E_NOTFOUND (no such key or not a scalar), ODL_E_INVAL (buffer too small). */
ODL_API odl_status odl_config_yaml_value(const char *yaml, const char *dotted_key, char *buf, size_t cap);

ODL_API void odl_config_schema_doc_write(const odl_config_schema *sc, FILE *out, odl_config_doc_format format);

/* What a key allows, e.g. "an integer >= 1", "a number in (0, 1]", "one of auto|cpu|cuda". */
ODL_API const char *odl_config_allowed(const odl_config_key *key, char *buf, size_t cap);

/* "Did you mean": the Levenshtein distance between a mistyped name and a known one (1 at most when
 * their last dotted parts agree, so 'lr' finds 'train.lr'), and whether it is close enough to suggest
 * (at most max(2, strlen(name) / 3)). Used for config keys and for command-line flags. */
ODL_API size_t odl_name_distance(const char *name, const char *known);
ODL_API int odl_name_close_enough(const char *name, size_t distance);

#ifdef __cplusplus
}
#endif
#endif
