/* YOLO label files and detection datasets (folder or YOLOv5 dataset yaml), as YOLOv5 v7.0
 * utils/dataloaders.py. See include/odl/labels.h for the rules and their sources. */
#include "odl/labels.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "odl/image.h"

/* ------------------------------------------------------------------------------------------------
 * Label files
 * ---------------------------------------------------------------------------------------------- */

static int same_label(const odl_box_label *a, const odl_box_label *b) {
    return a->class_id == b->class_id && a->cx == b->cx && a->cy == b->cy && a->w == b->w && a->h == b->h;
}

/* One line (NUL-terminated, modified) into *lb. */
static odl_status parse_line(char *line, const char *path, int lineno, int nc, odl_box_label *lb) {
    enum { MAXF = 4096 };
    static _Thread_local float v[MAXF];
    int nf = 0;
    char *save = NULL;
    for (char *tok = strtok_r(line, " \t\r", &save); tok; tok = strtok_r(NULL, " \t\r", &save)) {
        if (nf == MAXF) return ODL_ERR(ODL_E_FORMAT, "%s:%d: more than %d fields", path, lineno, MAXF);
        char *e;
        errno = 0;
        double d = strtod(tok, &e);
        if (*e || errno || !isfinite(d))
            return ODL_ERR(ODL_E_FORMAT, "%s:%d: field %d '%s' is not a number", path, lineno, nf + 1, tok);
        v[nf++] = (float)d; /* numpy reads labels as float32 */
    }
    if (nf < 5 || nf == 6 || (nf > 6 && nf % 2 == 0))
        return ODL_ERR(ODL_E_FORMAT, "%s:%d: %d field(s); expected 5 (class cx cy w h) or a polygon (class x1 y1 x2 y2 ...)",
                       path, lineno, nf);
    if (v[0] < 0 || v[0] != floorf(v[0]))
        return ODL_ERR(ODL_E_FORMAT, "%s:%d: class '%g' is not a non-negative integer", path, lineno, v[0]);
    if (nc > 0 && v[0] >= nc)
        return ODL_ERR(ODL_E_FORMAT, "%s:%d: class %d out of range (the model has %d classes, 0..%d)", path, lineno,
                       (int)v[0], nc, nc - 1);
    for (int i = 1; i < nf; i++)
        if (v[i] < 0 || v[i] > 1)
            return ODL_ERR(ODL_E_FORMAT, "%s:%d: coordinate %d is %g, outside 0..1 (labels are normalised)", path, lineno,
                           i, v[i]);
    lb->class_id = (int)v[0];
    if (nf == 5) {
        lb->cx = v[1];
        lb->cy = v[2];
        lb->w = v[3];
        lb->h = v[4];
    } else { /* segments2boxes: the polygon's extent, then xyxy2xywh */
        float x1 = v[1], x2 = v[1], y1 = v[2], y2 = v[2];
        for (int i = 1; i + 1 < nf; i += 2) {
            x1 = fminf(x1, v[i]);
            x2 = fmaxf(x2, v[i]);
            y1 = fminf(y1, v[i + 1]);
            y2 = fmaxf(y2, v[i + 1]);
        }
        lb->cx = (x1 + x2) / 2;
        lb->cy = (y1 + y2) / 2;
        lb->w = x2 - x1;
        lb->h = y2 - y1;
    }
    return ODL_OK;
}

odl_status odl_labels_read(const char *path, int nc, odl_box_label **out, int *n, int *n_dup) {
    if (!path || !out || !n) return ODL_ERR(ODL_E_INVAL, "odl_labels_read: NULL argument");
    *out = NULL;
    *n = 0;
    if (n_dup) *n_dup = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return ODL_ERR(ODL_E_NOTFOUND, "%s: no such label file", path);
        return ODL_ERR(ODL_E_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    odl_status st = ODL_OK;
    odl_box_label *v = NULL;
    int cnt = 0, cap = 0, lineno = 0, dups = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) >= 0) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (!*p) continue; /* val.py skips empty lines */
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        odl_box_label lb;
        ODL_CHECK_GOTO(parse_line(p, path, lineno, nc, &lb), st, done);
        int dup = 0;
        for (int i = 0; i < cnt && !dup; i++) dup = same_label(&v[i], &lb);
        if (dup) {
            dups++;
            continue;
        }
        if (cnt == cap) {
            cap = cap ? 2 * cap : 16;
            odl_box_label *nv = realloc(v, sizeof *v * (size_t)cap);
            if (!nv) {
                st = ODL_ERR(ODL_E_NOMEM, "%s: labels", path);
                goto done;
            }
            v = nv;
        }
        v[cnt++] = lb;
    }
    if (ferror(f)) st = ODL_ERR(ODL_E_IO, "%s: read error", path);
done:
    free(line);
    fclose(f);
    if (st != ODL_OK) {
        free(v);
        return st;
    }
    *out = v;
    *n = cnt;
    if (n_dup) *n_dup = dups;
    return ODL_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Image lists
 * ---------------------------------------------------------------------------------------------- */

typedef struct strv {
    char **v;
    int n, cap;
} strv;

static odl_status strv_push(strv *l, const char *s) {
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 64;
        char **nv = realloc(l->v, sizeof(char *) * (size_t)nc);
        if (!nv) return ODL_ERR(ODL_E_NOMEM, "image list");
        l->v = nv;
        l->cap = nc;
    }
    if (!(l->v[l->n] = strdup(s))) return ODL_ERR(ODL_E_NOMEM, "image list");
    l->n++;
    return ODL_OK;
}
static void strv_free(strv *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* YOLOv5's IMG_FORMATS (utils/dataloaders.py). */
static int is_image(const char *name) {
    static const char *const ext[] = {"bmp", "dng", "jpeg", "jpg", "mpo", "png", "tif", "tiff", "webp", "pfm"};
    const char *d = strrchr(name, '.');
    if (!d) return 0;
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
        if (!strcasecmp(d + 1, ext[i])) return 1;
    return 0;
}

/* Every image below dir, recursively (YOLOv5 globs recursively; glob skips hidden names, so do we). */
static odl_status list_dir(const char *dir, strv *out) {
    DIR *d = opendir(dir);
    if (!d) return ODL_ERR(errno == ENOENT ? ODL_E_NOTFOUND : ODL_E_IO, "%s: cannot read the folder: %s", dir, strerror(errno));
    odl_status st = ODL_OK;
    struct dirent *e;
    char buf[4096];
    while (st == ODL_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (snprintf(buf, sizeof buf, "%s/%s", dir, e->d_name) >= (int)sizeof buf) {
            st = ODL_ERR(ODL_E_INVAL, "%s/%s: path too long", dir, e->d_name);
            break;
        }
        struct stat sb;
        if (stat(buf, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) st = list_dir(buf, out);
        else if (is_image(e->d_name)) st = strv_push(out, buf);
    }
    closedir(d);
    return st;
}

/* A .txt list of images: one path a line, "./x" and other relative paths relative to the list's folder. */
static odl_status list_txt(const char *txt, strv *out) {
    FILE *f = fopen(txt, "r");
    if (!f) return ODL_ERR(errno == ENOENT ? ODL_E_NOTFOUND : ODL_E_IO, "%s: cannot open: %s", txt, strerror(errno));
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", txt);
    char *sl = strrchr(parent, '/');
    if (sl) *sl = 0;
    else snprintf(parent, sizeof parent, ".");
    odl_status st = ODL_OK;
    char *line = NULL, buf[8192];
    size_t cap = 0;
    while (st == ODL_OK && getline(&line, &cap, f) >= 0) {
        char *p = line, *q = p + strlen(p);
        while (q > p && (q[-1] == '\n' || q[-1] == '\r' || q[-1] == ' ')) *--q = 0;
        if (!*p || !is_image(p)) continue;
        if (p[0] == '.' && p[1] == '/') p += 2;
        if (p[0] == '/') snprintf(buf, sizeof buf, "%s", p);
        else snprintf(buf, sizeof buf, "%s/%s", parent, p);
        st = strv_push(out, buf);
    }
    free(line);
    fclose(f);
    return st;
}

static odl_status list_source(const char *p, strv *out) {
    struct stat sb;
    if (stat(p, &sb) != 0) return ODL_ERR(ODL_E_NOTFOUND, "%s: no such file or folder", p);
    if (S_ISDIR(sb.st_mode)) return list_dir(p, out);
    return list_txt(p, out);
}

/* img2label_paths: /images/ -> /labels/ (the last occurrence), extension -> .txt. */
static char *label_path(const char *img) {
    size_t n = strlen(img);
    char *o = malloc(n + 16);
    if (!o) return NULL;
    const char *last = NULL;
    for (const char *s = strstr(img, "/images/"); s; s = strstr(s + 1, "/images/")) last = s;
    if (last) {
        size_t k = (size_t)(last - img);
        memcpy(o, img, k);
        strcpy(o + k, "/labels/");
        strcpy(o + k + 8, last + 8);
    } else {
        strcpy(o, img);
    }
    char *dot = strrchr(o, '.'), *slash = strrchr(o, '/');
    if (dot && (!slash || dot > slash)) *dot = 0;
    strcat(o, ".txt");
    return o;
}

/* ------------------------------------------------------------------------------------------------
 * Dataset yaml (path, val, names)
 * ---------------------------------------------------------------------------------------------- */

static const char *scalar(yaml_node_t *n) {
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static odl_status join_path(char *buf, size_t cap, const char *base, const char *p) {
    int k = p[0] == '/' || !base[0] ? snprintf(buf, cap, "%s", p) : snprintf(buf, cap, "%s/%s", base, p);
    if (k < 0 || (size_t)k >= cap) return ODL_ERR(ODL_E_INVAL, "%s/%s: path too long", base, p);
    return ODL_OK;
}

static odl_status read_yaml(const char *yml, strv *images, odl_det_dataset *ds) {
    FILE *f = fopen(yml, "rb");
    if (!f) return ODL_ERR(errno == ENOENT ? ODL_E_NOTFOUND : ODL_E_IO, "--data %s: cannot open: %s", yml, strerror(errno));
    yaml_parser_t parser;
    yaml_document_t doc;
    odl_status st = ODL_OK;
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        return ODL_ERR(ODL_E_NOMEM, "%s: yaml_parser_initialize failed", yml);
    }
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &doc)) {
        st = ODL_ERR(ODL_E_FORMAT, "%s:%zu: %s", yml, parser.problem_mark.line + 1,
                     parser.problem ? parser.problem : "malformed YAML");
        yaml_parser_delete(&parser);
        fclose(f);
        return st;
    }
    yaml_parser_delete(&parser);
    fclose(f);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    yaml_node_t *val = NULL, *names = NULL;
    const char *path = NULL;
    if (!root || root->type != YAML_MAPPING_NODE) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: not a YOLOv5 dataset yaml (expected a mapping with path, val, names)", yml);
        goto out;
    }
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        const char *k = scalar(yaml_document_get_node(&doc, p->key));
        yaml_node_t *v = yaml_document_get_node(&doc, p->value);
        if (!k) continue;
        if (!strcmp(k, "path")) path = scalar(v);
        else if (!strcmp(k, "val")) val = v;
        else if (!strcmp(k, "names")) names = v;
    }
    if (!val || (scalar(val) && !scalar(val)[0])) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: no 'val' key (the images to evaluate)", yml);
        goto out;
    }
    /* Root: `path`, relative to the yaml's folder. */
    char ydir[4096], root_dir[4096], buf[8192];
    snprintf(ydir, sizeof ydir, "%s", yml);
    char *sl = strrchr(ydir, '/');
    if (sl) *sl = 0;
    else snprintf(ydir, sizeof ydir, ".");
    if (path && path[0]) ODL_CHECK_GOTO(join_path(root_dir, sizeof root_dir, ydir, path), st, out);
    else snprintf(root_dir, sizeof root_dir, "%s", ydir);
    if (val->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = val->data.sequence.items.start; st == ODL_OK && it < val->data.sequence.items.top; it++) {
            const char *s = scalar(yaml_document_get_node(&doc, *it));
            if (!s) {
                st = ODL_ERR(ODL_E_FORMAT, "%s: 'val' list items must be paths", yml);
                break;
            }
            st = join_path(buf, sizeof buf, root_dir, s);
            if (st == ODL_OK) st = list_source(buf, images);
        }
    } else if (scalar(val)) {
        st = join_path(buf, sizeof buf, root_dir, scalar(val));
        if (st == ODL_OK) st = list_source(buf, images);
    } else {
        st = ODL_ERR(ODL_E_FORMAT, "%s: 'val' must be a path or a list of paths", yml);
    }
    if (st != ODL_OK) {
        odl_error_prefix("--data %s", yml);
        goto out;
    }
    /* names: a list, or a mapping {0: person, ...} with keys 0..n-1. */
    if (names && names->type == YAML_SEQUENCE_NODE) {
        int n = (int)(names->data.sequence.items.top - names->data.sequence.items.start);
        ds->names = calloc((size_t)(n ? n : 1), sizeof(char *));
        if (!ds->names) {
            st = ODL_ERR(ODL_E_NOMEM, "names");
            goto out;
        }
        ds->n_names = n;
        for (int i = 0; i < n; i++) {
            const char *s = scalar(yaml_document_get_node(&doc, names->data.sequence.items.start[i]));
            ds->names[i] = strdup(s ? s : "");
        }
    } else if (names && names->type == YAML_MAPPING_NODE) {
        int n = (int)(names->data.mapping.pairs.top - names->data.mapping.pairs.start);
        ds->names = calloc((size_t)(n ? n : 1), sizeof(char *));
        if (!ds->names) {
            st = ODL_ERR(ODL_E_NOMEM, "names");
            goto out;
        }
        ds->n_names = n;
        for (yaml_node_pair_t *p = names->data.mapping.pairs.start; p < names->data.mapping.pairs.top; p++) {
            yaml_node_t *kn = yaml_document_get_node(&doc, p->key);
            const char *k = scalar(kn), *v = scalar(yaml_document_get_node(&doc, p->value));
            char *e = NULL;
            long id = k ? strtol(k, &e, 10) : -1;
            if (!k || *e || id < 0 || id >= n || ds->names[id] || !v) {
                st = ODL_ERR(ODL_E_FORMAT, "%s:%zu: names: keys must be the class ids 0..%d, each once", yml,
                             kn ? kn->start_mark.line + 1 : 0, n - 1);
                goto out;
            }
            ds->names[id] = strdup(v);
        }
    } else if (names) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: 'names' must be a list or a mapping of class id to name", yml);
    }
out:
    yaml_document_delete(&doc);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * Dataset
 * ---------------------------------------------------------------------------------------------- */

void odl_det_dataset_free(odl_det_dataset *ds) {
    if (!ds) return;
    for (int i = 0; i < ds->n; i++) {
        free(ds->samples[i].image);
        free(ds->samples[i].label);
        free(ds->samples[i].labels);
    }
    free(ds->samples);
    for (int i = 0; i < ds->n_names; i++) free(ds->names[i]);
    free(ds->names);
    memset(ds, 0, sizeof *ds);
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcasecmp(s + a - b, suf);
}

odl_status odl_det_dataset_open(const char *data, int nc, odl_det_dataset *out) {
    if (!data || !out) return ODL_ERR(ODL_E_INVAL, "odl_det_dataset_open: NULL argument");
    memset(out, 0, sizeof *out);
    strv imgs = {0};
    odl_status st = ODL_OK;
    struct stat sb;
    if (stat(data, &sb) != 0) return ODL_ERR(ODL_E_NOTFOUND, "--data %s: no such file or folder", data);
    if (S_ISDIR(sb.st_mode)) {
        char buf[4096];
        snprintf(buf, sizeof buf, "%s/images", data);
        if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            st = ODL_ERR(ODL_E_NOTFOUND, "--data %s: no images/ folder (expected D/images and D/labels, or a dataset yaml)", data);
            goto fail;
        }
        ODL_CHECK_GOTO(list_dir(buf, &imgs), st, fail);
    } else if (ends_with(data, ".yaml") || ends_with(data, ".yml")) {
        ODL_CHECK_GOTO(read_yaml(data, &imgs, out), st, fail);
        if (nc > 0 && out->n_names > 0 && out->n_names != nc) {
            st = ODL_ERR(ODL_E_CONFIG, "--data %s: %d class names, but the weights are for %d classes", data,
                         out->n_names, nc);
            goto fail;
        }
    } else {
        ODL_CHECK_GOTO(list_txt(data, &imgs), st, fail);
    }
    if (imgs.n == 0) {
        st = ODL_ERR(ODL_E_NOTFOUND, "--data %s: no images found", data);
        goto fail;
    }
    qsort(imgs.v, (size_t)imgs.n, sizeof(char *), cmp_str);
    out->samples = calloc((size_t)imgs.n, sizeof(odl_det_sample));
    if (!out->samples) {
        st = ODL_ERR(ODL_E_NOMEM, "%d samples", imgs.n);
        goto fail;
    }
    for (int i = 0; i < imgs.n; i++) {
        odl_det_sample *s = &out->samples[i];
        s->image = imgs.v[i];
        imgs.v[i] = NULL;
        out->n++;
        if (!(s->label = label_path(s->image))) {
            st = ODL_ERR(ODL_E_NOMEM, "label path");
            goto fail;
        }
        int dup = 0;
        odl_status ls = odl_labels_read(s->label, nc, &s->labels, &s->n_labels, &dup);
        if (ls == ODL_E_NOTFOUND) out->n_missing++;
        else if (ls != ODL_OK) {
            st = ls;
            goto fail;
        } else if (s->n_labels == 0 && dup == 0) out->n_empty++;
        out->n_duplicates += dup;
        ODL_CHECK_GOTO(odl_image_probe(s->image, &s->width, &s->height), st, fail);
    }
    strv_free(&imgs);
    return ODL_OK;
fail:
    strv_free(&imgs);
    odl_det_dataset_free(out);
    return st;
}

typedef struct ar_idx {
    double ar;
    int i;
} ar_idx;
static int cmp_ar(const void *a, const void *b) {
    const ar_idx *x = a, *y = b;
    if (x->ar != y->ar) return x->ar < y->ar ? -1 : 1;
    return x->i - y->i; /* stable */
}

odl_status odl_det_dataset_plan(const odl_det_dataset *ds, int img_size, int batch, int stride, double pad, int rect,
                                int *order, int *shape_hw) {
    if (!ds || !order || !shape_hw || img_size <= 0 || batch <= 0 || stride <= 0 || pad < 0)
        return ODL_ERR(ODL_E_INVAL, "odl_det_dataset_plan: bad arguments");
    const int n = ds->n;
    if (!rect) {
        for (int i = 0; i < n; i++) {
            order[i] = i;
            shape_hw[2 * i] = shape_hw[2 * i + 1] = img_size;
        }
        return ODL_OK;
    }
    ar_idx *a = malloc(sizeof *a * (size_t)(n ? n : 1));
    if (!a) return ODL_ERR(ODL_E_NOMEM, "batch plan");
    for (int i = 0; i < n; i++) {
        a[i].ar = (double)ds->samples[i].height / ds->samples[i].width;
        a[i].i = i;
    }
    qsort(a, (size_t)n, sizeof *a, cmp_ar);
    for (int b0 = 0; b0 < n; b0 += batch) {
        int b1 = b0 + batch < n ? b0 + batch : n;
        double mini = a[b0].ar, maxi = a[b1 - 1].ar, sh = 1, sw = 1;
        if (maxi < 1) sh = maxi;
        else if (mini > 1) sw = 1 / mini;
        int H = (int)ceil(sh * img_size / stride + pad) * stride;
        int W = (int)ceil(sw * img_size / stride + pad) * stride;
        for (int k = b0; k < b1; k++) {
            order[k] = a[k].i;
            shape_hw[2 * k] = H;
            shape_hw[2 * k + 1] = W;
        }
    }
    free(a);
    return ODL_OK;
}
