/* YAML overrides of the Xid class table (libyaml's document API). Keys: docs/health.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "odl/health.h"
#include "odl/parse.h"

static int line_of(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

static int parse_class(const char *s, odl_xid_class *c) {
    if (!strcmp(s, "ignore")) *c = ODL_XID_IGNORE;
    else if (!strcmp(s, "application")) *c = ODL_XID_APPLICATION;
    else if (!strcmp(s, "node_fatal") || !strcmp(s, "node-fatal")) *c = ODL_XID_NODE_FATAL;
    else return 0;
    return 1;
}

/* One code entry: 79, "144-150" or bus_lost -> [lo, hi]. */
static int parse_codes(const char *s, int *lo, int *hi) {
    if (!strcmp(s, "bus_lost")) {
        *lo = *hi = ODL_XID_BUS_LOST;
        return 1;
    }
    char *end;
    errno = 0;
    long a = strtol(s, &end, 10), b = a;
    if (end == s || errno) return 0;
    if (*end == '-') {
        const char *q = end + 1;
        b = strtol(q, &end, 10);
        if (end == q) return 0;
    }
    if (*end || a < 1 || b < a || b >= ODL_XID_TABLE_SIZE) return 0;
    *lo = (int)a;
    *hi = (int)b;
    return 1;
}

static odl_status apply(odl_xid_table *t, yaml_document_t *doc, yaml_node_t *root, const char *name) {
    if (root->type != YAML_MAPPING_NODE)
        return ODL_ERR(ODL_E_FORMAT, "%s:%d: the Xid table must be a mapping (node_fatal: [...], ...)", name,
                       line_of(root));
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key), *v = yaml_document_get_node(doc, p->value);
        if (!k || !v || k->type != YAML_SCALAR_NODE)
            return ODL_ERR(ODL_E_FORMAT, "%s: malformed key", name);
        const char *key = (const char *)k->data.scalar.value;
        odl_xid_class cls = ODL_XID_IGNORE;
        int is_follows = !strcmp(key, "follows");
        if (parse_class(key, &cls) || is_follows) {
            if (v->type != YAML_SEQUENCE_NODE)
                return ODL_ERR(ODL_E_FORMAT, "%s:%d: %s must be a list of codes", name, line_of(v), key);
            for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
                yaml_node_t *e = yaml_document_get_node(doc, *it);
                int lo, hi;
                if (!e || e->type != YAML_SCALAR_NODE || !parse_codes((const char *)e->data.scalar.value, &lo, &hi))
                    return ODL_ERR(ODL_E_FORMAT, "%s:%d: %s: '%s' is not an Xid code, range A-B (1..%d) or bus_lost",
                                   name, e ? line_of(e) : line_of(v), key,
                                   e && e->type == YAML_SCALAR_NODE ? (const char *)e->data.scalar.value : "?",
                                   ODL_XID_TABLE_SIZE - 1);
                for (int x = lo; x <= hi; x++) {
                    if (is_follows) t->follows[x] = 1;
                    else t->cls[x] = (uint8_t)cls;
                }
            }
            continue;
        }
        if (v->type != YAML_SCALAR_NODE)
            return ODL_ERR(ODL_E_FORMAT, "%s:%d: %s must be a scalar", name, line_of(v), key);
        const char *val = (const char *)v->data.scalar.value;
        if (!strcmp(key, "unknown")) {
            if (!parse_class(val, &cls))
                return ODL_ERR(ODL_E_FORMAT, "%s:%d: unknown: '%s' is not ignore, application or node_fatal", name,
                               line_of(v), val);
            t->unknown_cls = (uint8_t)cls;
        } else if (!strcmp(key, "escalate_after")) {
            int64_t n;
            if (odl_parse_i64(val, 0, ODL_XID_HISTORY, &n) != ODL_PARSE_OK)
                return ODL_ERR(ODL_E_FORMAT, "%s:%d: escalate_after: '%s' is not an integer in 0..%d", name,
                               line_of(v), val, ODL_XID_HISTORY);
            t->escalate_after = (int)n;
        } else if (!strcmp(key, "escalate_window_s") || !strcmp(key, "incident_window_s")) {
            double d;
            if (odl_parse_f64(val, -1e12, 1e12, &d) != ODL_PARSE_OK)
                return ODL_ERR(ODL_E_FORMAT, "%s:%d: %s: '%s' is not a number", name, line_of(v), key, val);
            *(key[0] == 'e' ? &t->escalate_window_s : &t->incident_window_s) = d;
        } else {
            return ODL_ERR(ODL_E_FORMAT,
                           "%s:%d: unknown key '%s' (node_fatal, application, ignore, follows, unknown, "
                           "escalate_after, escalate_window_s, incident_window_s)",
                           name, line_of(k), key);
        }
    }
    return ODL_OK;
}

/* Parse the parser's input (string or file) and apply it to *t, all or nothing. Deletes the parser.
 * libyaml's file reader reports a failed fread as the reader error "input error". */
static odl_status load(odl_xid_table *t, yaml_parser_t *parser, const char *name) {
    yaml_document_t doc;
    if (!yaml_parser_load(parser, &doc)) {
        odl_status s = parser->error == YAML_READER_ERROR && parser->problem && !strcmp(parser->problem, "input error")
                           ? ODL_ERR(ODL_E_IO, "reading %s failed: %s", name, parser->problem ? parser->problem : "error")
                           : ODL_ERR(ODL_E_FORMAT, "%s:%zu:%zu: YAML syntax error: %s", name,
                                     parser->problem_mark.line + 1, parser->problem_mark.column + 1,
                                     parser->problem ? parser->problem : "error");
        yaml_parser_delete(parser);
        return s;
    }
    odl_status s = ODL_OK;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root) {
        odl_xid_table tmp = *t; /* all or nothing */
        s = apply(&tmp, &doc, root, name);
        if (s == ODL_OK) *t = tmp;
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(parser);
    return s;
}

odl_status odl_xid_table_load_yaml_string(odl_xid_table *t, const char *text, size_t len, const char *name) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return ODL_ERR(ODL_E_NOMEM, "%s: yaml_parser_initialize failed", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    return load(t, &parser, name);
}

odl_status odl_xid_table_load_yaml(odl_xid_table *t, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return ODL_ERR(ODL_E_IO, "cannot open Xid table %s: %s", path, strerror(errno));
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        return ODL_ERR(ODL_E_NOMEM, "%s: yaml_parser_initialize failed", path);
    }
    yaml_parser_set_input_file(&parser, f);
    odl_status s = load(t, &parser, path);
    fclose(f);
    return s;
}
