/* Configuration engine over a program's key table (odl_config_schema): value parsing and validation,
 * strict YAML loading (libyaml's document API), the effective config as YAML, and the generated
 * documentation. See odl/config.h; the training program's table is worker/config.c. */
#include "odl/config.h"
#include "odl/parse.h"
#include "odl/strbuf.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>


/* ---------------------------------------------------------------------------------------------- */
/* Keys                                                                                             */

const odl_config_key *odl_config_schema_find_key(const odl_config_schema *sc, const char *dotted_key) {
    if (!sc || !dotted_key) return NULL;
    for (size_t i = 0; i < sc->n; i++)
        if (strcmp(sc->keys[i].name, dotted_key) == 0) return &sc->keys[i];
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
        odl_strbuf b;
        odl_strbuf_fixed(&b, buf, cap);
        odl_strbuf_printf(&b, "one of ");
        for (int i = 0; k->choices[i]; i++) odl_strbuf_printf(&b, "%s%s", i ? sep : "", k->choices[i]);
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
static odl_status set_value(void *cfg, const odl_config_key *k, const char *text, const char *where) {
    char allowed[256];
    char shown[208]; /* the value as shown in messages, shortened */
    if (!text) text = "";
    snprintf(shown, sizeof shown, "%.200s%s", text, strlen(text) > 200 ? "..." : "");
    void *dst = (char *)cfg + k->offset;
    switch (k->type) {
    case ODL_CFG_INT: {
        int64_t v = 0;
        if (odl_parse_i64(text, INT64_MIN, INT64_MAX, &v) != ODL_PARSE_OK)
            return ODL_ERR(ODL_E_CONFIG, "%s%s: value '%s' is not an integer; allowed: %s", where, k->name, shown,
                           odl_config_allowed(k, allowed, sizeof allowed));
        if (!in_bounds(k, (double)v))
            return ODL_ERR(ODL_E_CONFIG, "%s%s: value '%s' is out of range; allowed: %s", where, k->name, shown,
                           odl_config_allowed(k, allowed, sizeof allowed));
        *(int64_t *)dst = (int64_t)v;
        return ODL_OK;
    }
    case ODL_CFG_FLOAT: {
        double v = 0;
        if (odl_parse_f64(text, -INFINITY, INFINITY, &v) != ODL_PARSE_OK)
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
static int value_text(const void *cfg, const odl_config_key *k, char *buf, size_t cap) {
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

void odl_config_schema_defaults(const odl_config_schema *sc, void *cfg) {
    memset(cfg, 0, sc->size);
    for (size_t i = 0; i < sc->n; i++) {
        /* A default that does not parse is a bug in the table; tests/test_config checks every one. */
        if (set_value(cfg, &sc->keys[i], sc->keys[i].def, "default of ") != ODL_OK) odl_error_clear();
    }
}

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

size_t odl_name_distance(const char *name, const char *known) {
    size_t d = edit_distance(name, known);
    if (strcmp(last_part(name), last_part(known)) == 0) d = d < 1 ? d : 1; /* 'lr' -> 'train.lr' */
    return d;
}

int odl_name_close_enough(const char *name, size_t distance) {
    size_t limit = strlen(name) / 3;
    if (limit < 2) limit = 2;
    return distance <= limit;
}

static const char *suggest(const odl_config_schema *sc, const char *name) {
    const odl_config_key *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < sc->n; i++) {
        size_t d = odl_name_distance(name, sc->keys[i].name);
        if (d < best_d) {
            best_d = d;
            best = &sc->keys[i];
        }
    }
    return best && odl_name_close_enough(name, best_d) ? best->name : NULL;
}

/* 1 when some key starts with "<prefix>." */
static int is_section(const odl_config_schema *sc, const char *prefix) {
    size_t n = strlen(prefix);
    for (size_t i = 0; i < sc->n; i++)
        if (strncmp(sc->keys[i].name, prefix, n) == 0 && sc->keys[i].name[n] == '.') return 1;
    return 0;
}

/* "; keys in train: train.epochs, train.batch_size, ..." */
static void section_keys(const odl_config_schema *sc, const char *prefix, char *buf, size_t cap) {
    size_t n = strlen(prefix);
    odl_strbuf b;
    odl_strbuf_fixed(&b, buf, cap);
    for (size_t i = 0; i < sc->n; i++)
        if (strncmp(sc->keys[i].name, prefix, n) == 0 && sc->keys[i].name[n] == '.')
            odl_strbuf_printf(&b, "%s%s", b.len ? ", " : "", sc->keys[i].name + n + 1);
}

static odl_status unknown_key(const odl_config_schema *sc, const char *where, const char *name) {
    const char *s = suggest(sc, name);
    if (s) return ODL_ERR(ODL_E_CONFIG, "%sunknown key '%s' (did you mean '%s'?)", where, name, s);
    return ODL_ERR(ODL_E_CONFIG, "%sunknown key '%s' (%s lists every key)", where, name,
                   sc->doc_path ? sc->doc_path : "the documentation");
}

odl_status odl_config_schema_set(const odl_config_schema *sc, void *cfg, const char *dotted_key, const char *value) {
    if (!sc || !cfg || !dotted_key) return ODL_ERR(ODL_E_INVAL, "odl_config_set: NULL argument");
    const odl_config_key *k = odl_config_schema_find_key(sc, dotted_key);
    if (!k) {
        if (is_section(sc, dotted_key)) {
            char keys[512];
            section_keys(sc, dotted_key, keys, sizeof keys);
            return ODL_ERR(ODL_E_CONFIG, "'%s' is a section, not a key; its keys: %s", dotted_key, keys);
        }
        return unknown_key(sc, "", dotted_key);
    }
    return set_value(cfg, k, value, "");
}

odl_status odl_config_schema_set_arg(const odl_config_schema *sc, void *cfg, const char *arg) {
    if (!sc || !cfg || !arg) return ODL_ERR(ODL_E_INVAL, "odl_config_set_arg: NULL argument");
    const char *s = arg;
    if (strncmp(s, "--", 2) == 0) s += 2;
    const char *eq = strchr(s, '=');
    if (!eq) return ODL_ERR(ODL_E_CONFIG, "config override '%s' is not of the form key=value", arg);
    char key[128];
    size_t n = (size_t)(eq - s);
    if (n >= sizeof key) return unknown_key(sc, "", s);
    memcpy(key, s, n);
    key[n] = '\0';
    return odl_config_schema_set(sc, cfg, key, eq + 1);
}

odl_status odl_config_schema_get(const odl_config_schema *sc, const void *cfg, const char *dotted_key, char *buf,
                                 size_t cap) {
    const odl_config_key *k = odl_config_schema_find_key(sc, dotted_key);
    if (!k) return unknown_key(sc, "", dotted_key ? dotted_key : "(null)");
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
    const odl_config_schema *sc;
    yaml_document_t *doc;
    void *cfg;
    const char *file;
    int *seen_line; /* [sc->n]: line where each key was set, 0 = not yet */
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
            return unknown_key(c->sc, where, kname);

        if (vn->type == YAML_MAPPING_NODE) {
            if (odl_config_schema_find_key(c->sc, full))
                return ODL_ERR(ODL_E_CONFIG, "%s%s takes a single value, not a mapping", where, full);
            if (!is_section(c->sc, full)) return unknown_key(c->sc, where, full);
            odl_status st = walk_mapping(c, vn, full);
            if (st != ODL_OK) return st;
            continue;
        }
        const odl_config_key *k = odl_config_schema_find_key(c->sc, full);
        if (!k) {
            if (is_section(c->sc, full)) {
                char keys[512];
                section_keys(c->sc, full, keys, sizeof keys);
                return ODL_ERR(ODL_E_CONFIG, "%s'%s' is a section; give its keys as a mapping under it: %s", where,
                               full, keys);
            }
            return unknown_key(c->sc, where, full);
        }
        if (vn->type == YAML_SEQUENCE_NODE)
            return ODL_ERR(ODL_E_CONFIG, "%s%s takes a single value, not a list", where, full);
        size_t idx = (size_t)(k - c->sc->keys);
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

static odl_status load_text(const odl_config_schema *sc, void *cfg, const char *text, size_t len, const char *name) {
    odl_status st = ODL_OK;
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    int have_doc = 0, have_extra = 0;
    walk_ctx *c = NULL;
    void *tmp = NULL;
    int *seen = NULL;

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
    tmp = malloc(sc->size);
    seen = calloc(sc->n ? sc->n : 1, sizeof *seen);
    if (!c || !tmp || !seen) {
        st = ODL_ERR(ODL_E_NOMEM, "%s: out of memory", name);
        goto done;
    }
    memcpy(tmp, cfg, sc->size);
    c->sc = sc;
    c->doc = &doc;
    c->cfg = tmp;
    c->file = name;
    c->seen_line = seen;
    st = walk_mapping(c, root, "");
    if (st == ODL_OK) memcpy(cfg, tmp, sc->size);

done:
    free(seen);
    free(tmp);
    free(c);
    if (have_extra) yaml_document_delete(&extra);
    if (have_doc) yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return st;
}

odl_status odl_config_schema_load_string(const odl_config_schema *sc, void *cfg, const char *yaml, const char *name) {
    if (!sc || !cfg || !yaml) return ODL_ERR(ODL_E_INVAL, "odl_config_load_string: NULL argument");
    return load_text(sc, cfg, yaml, strlen(yaml), name ? name : "<string>");
}

odl_status odl_config_schema_load_file(const odl_config_schema *sc, void *cfg, const char *path) {
    if (!sc || !cfg || !path) return ODL_ERR(ODL_E_INVAL, "odl_config_load_file: NULL argument");
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
    if (st == ODL_OK) st = load_text(sc, cfg, buf, len, path);
    free(buf);
    return st;
}

/* The scalar at `key` (dotted, possibly split over nested mappings) under mapping node map. */
static yaml_node_t *find_scalar(yaml_document_t *doc, yaml_node_t *map, const char *key) {
    if (!map || map->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(doc, p->key), *vn = yaml_document_get_node(doc, p->value);
        if (!kn || !vn || kn->type != YAML_SCALAR_NODE) continue;
        const char *k = (const char *)kn->data.scalar.value;
        size_t n = strlen(k);
        if (!strcmp(k, key)) return vn->type == YAML_SCALAR_NODE ? vn : NULL;
        if (!strncmp(k, key, n) && key[n] == '.') {
            yaml_node_t *v = find_scalar(doc, vn, key + n + 1);
            if (v) return v;
        }
    }
    return NULL;
}

odl_status odl_config_yaml_value(const char *yaml, const char *dotted_key, char *buf, size_t cap) {
    if (!yaml || !dotted_key || !buf || cap == 0) return ODL_ERR(ODL_E_INVAL, "odl_config_yaml_value: NULL argument");
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) return ODL_ERR(ODL_E_NOMEM, "yaml_parser_initialize failed");
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, strlen(yaml));
    odl_status st = ODL_OK;
    if (!yaml_parser_load(&parser, &doc)) {
        st = ODL_ERR(ODL_E_FORMAT, "YAML syntax error at line %zu: %s", parser.problem_mark.line + 1,
                     parser.problem ? parser.problem : "error");
        yaml_parser_delete(&parser);
        return st;
    }
    yaml_node_t *v = find_scalar(&doc, yaml_document_get_root_node(&doc), dotted_key);
    if (!v) st = ODL_ERR(ODL_E_NOTFOUND, "no key %s", dotted_key);
    else if (v->data.scalar.length + 1 > cap)
        st = ODL_ERR(ODL_E_INVAL, "%s: value of %zu bytes, buffer of %zu", dotted_key, v->data.scalar.length, cap);
    else memcpy(buf, v->data.scalar.value, v->data.scalar.length + 1);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
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

odl_status odl_config_schema_to_yaml(const odl_config_schema *sc, const void *cfg, char *buf, size_t cap) {
    if (!sc || !cfg || !buf || cap == 0) return ODL_ERR(ODL_E_INVAL, "odl_config_to_yaml: NULL or empty buffer");
    sbuf b = {buf, cap, 0};
    const char *cur = "";
    int cur_len = 0;
    char val[ODL_CONFIG_STR_MAX];
    for (size_t i = 0; i < sc->n; i++) {
        const odl_config_key *k = &sc->keys[i];
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

static void doc_text(const odl_config_schema *sc, FILE *out) {
    char allowed[256], def[512];
    fprintf(out, "Configuration keys (config.yaml; override with --<key>=<value>):\n\n");
    for (size_t i = 0; i < sc->n; i++) {
        const odl_config_key *k = &sc->keys[i];
        default_shown(k, def, sizeof def);
        fprintf(out, "%s  (%s: %s; default %s)\n    %s\n", k->name, type_name(k->type),
                odl_config_allowed(k, allowed, sizeof allowed), def, k->doc);
    }
}

static void doc_markdown(const odl_config_schema *sc, FILE *out) {
    char allowed[256], def[512];
    fprintf(out, "%s", sc->markdown_intro ? sc->markdown_intro : "");
    fprintf(out, "| Key | Type | Allowed | Default | Description |\n"
                 "|-----|------|---------|---------|-------------|\n");
    for (size_t i = 0; i < sc->n; i++) {
        const odl_config_key *k = &sc->keys[i];
        default_shown(k, def, sizeof def);
        fprintf(out, "| `%s` | %s | %s | `%s` | %s |\n", k->name, type_name(k->type),
                allowed_sep(k, allowed, sizeof allowed, ", "), def, k->doc);
    }
}

static void doc_yaml(const odl_config_schema *sc, FILE *out) {
    char allowed[256], def[512];
    fprintf(out, "%s", sc->yaml_intro ? sc->yaml_intro : "");
    int cur_len = -1;
    const char *cur = "";
    for (size_t i = 0; i < sc->n; i++) {
        const odl_config_key *k = &sc->keys[i];
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

void odl_config_schema_doc_write(const odl_config_schema *sc, FILE *out, odl_config_doc_format format) {
    if (!sc || !out) return;
    switch (format) {
    case ODL_CONFIG_DOC_TEXT: doc_text(sc, out); break;
    case ODL_CONFIG_DOC_MARKDOWN: doc_markdown(sc, out); break;
    case ODL_CONFIG_DOC_YAML: doc_yaml(sc, out); break;
    }
}
