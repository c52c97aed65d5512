/* Checkpoint files' HDF5 side: dataset paths, metadata and verification (odl/ckpt.h,
 * docs/checkpoint_format.md). File names, the directory listing and the manifest are manifest.c's. */
#include "odl/ckpt.h"

#include "odl/json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "odl/log.h"
#include "odl/nn.h"

/* ---------------------------------------------------------------------------------------------- */
/* Names                                                                                            */

static odl_status prefixed_path(const char *prefix, const char *param, const char *state, char *buf, size_t cap) {
    if (!param || !param[0]) return ODL_ERR(ODL_E_INVAL, "empty parameter name");
    if (strchr(param, '/')) return ODL_ERR(ODL_E_INVAL, "parameter name '%s' contains '/'", param);
    int n = state ? snprintf(buf, cap, "%s/%s/%s", prefix, param, state) : snprintf(buf, cap, "%s/%s", prefix, param);
    if (n < 0 || (size_t)n >= cap) return ODL_ERR(ODL_E_INVAL, "dataset path for '%s' longer than %zu bytes", param, cap);
    size_t start = strlen(prefix) + 1, end = start + strlen(param);
    for (size_t i = start; i < end; i++)
        if (buf[i] == '.') buf[i] = '/';
    return ODL_OK;
}

odl_status odl_ckpt_param_path(const char *param, char *buf, size_t cap) {
    return prefixed_path("/model", param, NULL, buf, cap);
}

odl_status odl_ckpt_optim_path(const char *param, const char *state, char *buf, size_t cap) {
    if (!state || !state[0]) return ODL_ERR(ODL_E_INVAL, "empty optimiser state name for '%s'", param ? param : "");
    return prefixed_path("/optim", param, state, buf, cap);
}

/* ---------------------------------------------------------------------------------------------- */
/* Optimiser names                                                                                  */

/* The names are nn's (odl_optim_names); these take and give the names stored in files. */
const char *odl_ckpt_optim_name(int type) { return odl_optim_type_name(type); }

int odl_ckpt_optim_parse(const char *name) { return odl_optim_type_parse(name); }

int odl_ckpt_optim_nstate(const char *name) { return odl_optim_type_nstate(odl_optim_type_parse(name)); }

const char *odl_ckpt_optim_state(const char *name, int j) { return odl_optim_type_state(odl_optim_type_parse(name), j); }

/* ---------------------------------------------------------------------------------------------- */
/* Metadata                                                                                         */

odl_status odl_ckpt_write_root(odl_h5_writer *w, const char *format, const char *model, int64_t world_size,
                               const char *config_yaml) {
    ODL_CHECK(odl_h5_writer_attr_str(w, "/", "format", format));
    ODL_CHECK(odl_h5_writer_attr_i64(w, "/", "format_version", ODL_CKPT_FORMAT_VERSION));
    ODL_CHECK(odl_h5_writer_attr_str(w, "/", "model", model));
    if (world_size > 0) ODL_CHECK(odl_h5_writer_attr_i64(w, "/", "world_size", world_size));
    if (config_yaml) ODL_CHECK(odl_h5_writer_attr_str(w, "/", "config", config_yaml));
    return ODL_OK;
}

static int has_prefix(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

odl_status odl_ckpt_read_meta(odl_h5_reader *r, odl_ckpt_meta *m) {
    const char *path = odl_h5_reader_path(r);
    memset(m, 0, sizeof *m);
    odl_status s = odl_h5_reader_attr_str(r, "/", "format", m->format, sizeof m->format);
    if (s == ODL_E_NOTFOUND) s = odl_h5_reader_attr_str(r, "/", "odl_format", m->format, sizeof m->format);
    if (s == ODL_E_NOTFOUND)
        return ODL_ERR(ODL_E_FORMAT, "%s: no 'format' attribute at the root: not an odl checkpoint or weights file", path);
    if (s != ODL_OK) return ODL_ERR(ODL_E_FORMAT, "%s: bad 'format' attribute: %s", path, odl_error_msg());
    if (strcmp(m->format, ODL_CKPT_FORMAT) != 0 && strcmp(m->format, ODL_CKPT_WEIGHTS_FORMAT) != 0)
        return ODL_ERR(ODL_E_FORMAT, "%s: format '%s', expected '%s' or '%s'", path, m->format, ODL_CKPT_FORMAT,
                       ODL_CKPT_WEIGHTS_FORMAT);
    s = odl_h5_reader_attr_i64(r, "/", "format_version", &m->format_version);
    if (s == ODL_E_NOTFOUND) s = odl_h5_reader_attr_i64(r, "/", "odl_format_version", &m->format_version);
    if (s != ODL_OK) return ODL_ERR(ODL_E_FORMAT, "%s: no readable format_version: %s", path, odl_error_msg());
    if (m->format_version < 1 || m->format_version > ODL_CKPT_FORMAT_VERSION)
        return ODL_ERR(ODL_E_FORMAT, "%s: format_version %" PRId64 "; this build reads versions 1..%d", path,
                       m->format_version, ODL_CKPT_FORMAT_VERSION);
    if (odl_h5_reader_attr_str(r, "/", "model", m->model, sizeof m->model) != ODL_OK) snprintf(m->model, sizeof m->model, "?");
    if (odl_h5_reader_attr_i64(r, "/", "world_size", &m->world_size) != ODL_OK) m->world_size = 0;

    size_t nd = odl_h5_reader_count(r);
    m->n_datasets = (int64_t)nd;
    for (size_t i = 0; i < nd; i++) {
        const char *name = odl_h5_reader_name(r, i);
        if (!has_prefix(name, "/model/")) continue;
        odl_h5_info info;
        ODL_CHECK(odl_h5_reader_info(r, name, &info));
        m->n_model_tensors++;
        m->n_model_params += info.numel;
    }
    m->is_checkpoint = strcmp(m->format, ODL_CKPT_FORMAT) == 0;
    if (!m->is_checkpoint) return ODL_OK;

    /* The checksummed counters are what a resume uses; the attributes are their readable copy. */
    int64_t c[ODL_CKPT_NCOUNTERS];
    int64_t cshape[1] = {ODL_CKPT_NCOUNTERS};
    s = odl_h5_reader_read(r, "/train/counters", ODL_I64, 1, cshape, c);
    if (s == ODL_E_NOTFOUND) return ODL_ERR(ODL_E_FORMAT, "%s: checkpoint without /train/counters", path);
    ODL_CHECK(s);
    s = odl_h5_reader_read(r, "/train/epoch_loss_sum", ODL_F64, 0, NULL, &m->epoch_loss_sum);
    if (s == ODL_E_NOTFOUND) return ODL_ERR(ODL_E_FORMAT, "%s: checkpoint without /train/epoch_loss_sum", path);
    ODL_CHECK(s);
    m->step = c[0];
    m->epoch = c[1];
    m->cursor = c[2];
    m->epoch_samples = c[3];
    m->seed = c[4];
    m->optim_step = c[6];
    if (c[5] != m->world_size)
        return ODL_ERR(ODL_E_CHECKSUM, "%s: world_size attribute %" PRId64 " disagrees with /train/counters (%" PRId64 ")",
                       path, m->world_size, c[5]);
    if (m->step < 0 || m->epoch < 0 || m->cursor < 0 || m->epoch_samples < 0 || m->optim_step < 0)
        return ODL_ERR(ODL_E_FORMAT, "%s: negative training counters in /train/counters", path);
    static const char *const names[] = {"step", "epoch", "cursor", "epoch_samples", "seed"};
    for (int i = 0; i < 5; i++) {
        int64_t a;
        if (odl_h5_reader_attr_i64(r, "/train", names[i], &a) != ODL_OK)
            return ODL_ERR(ODL_E_FORMAT, "%s: /train has no integer attribute '%s'", path, names[i]);
        if (a != c[i])
            return ODL_ERR(ODL_E_CHECKSUM, "%s: /train attribute %s = %" PRId64 " disagrees with /train/counters (%" PRId64 ")",
                           path, names[i], a, c[i]);
    }
    if (odl_h5_reader_attr_str(r, "/optim", "type", m->optimizer, sizeof m->optimizer) != ODL_OK)
        return ODL_ERR(ODL_E_FORMAT, "%s: /optim has no 'type' attribute", path);
    if (odl_ckpt_optim_parse(m->optimizer) < 0)
        return ODL_ERR(ODL_E_FORMAT, "%s: unknown optimiser '%s' in /optim", path, m->optimizer);
    int64_t ostep;
    if (odl_h5_reader_attr_i64(r, "/optim", "step", &ostep) != ODL_OK || ostep != m->optim_step)
        return ODL_ERR(ODL_E_CHECKSUM, "%s: /optim step attribute disagrees with /train/counters (%" PRId64 ")", path,
                       m->optim_step);
    if (odl_h5_reader_attr_f64(r, "/optim", "lr", &m->lr) != ODL_OK) m->lr = 0;
    return ODL_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* Verification                                                                                     */

static int same_shape(const odl_h5_info *a, const odl_h5_info *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

odl_status odl_ckpt_verify(const char *path, odl_ckpt_meta *meta, odl_ckpt_verify_fn fn, void *ctx) {
    odl_h5_reader *r = NULL;
    odl_ckpt_meta m;
    memset(&m, 0, sizeof m);
    if (meta) memset(meta, 0, sizeof *meta);
    ODL_CHECK(odl_h5_reader_open(path, &r));
    odl_status first = ODL_OK;
    char first_msg[2048] = "";
#define NOTE(st_)                                                                           \
    do {                                                                                    \
        odl_status ns_ = (st_);                                                             \
        if (first == ODL_OK && ns_ != ODL_OK) {                                             \
            first = ns_;                                                                    \
            snprintf(first_msg, sizeof first_msg, "%s", odl_error_msg());                   \
        }                                                                                   \
    } while (0)
    odl_status ms = odl_ckpt_read_meta(r, &m);
    NOTE(ms);
    if (meta && ms == ODL_OK) *meta = m;

    /* Every dataset reads back with its checksum. */
    void *buf = NULL;
    size_t bufcap = 0;
    size_t nd = odl_h5_reader_count(r);
    for (size_t i = 0; i < nd; i++) {
        const char *name = odl_h5_reader_name(r, i);
        odl_h5_info info;
        memset(&info, 0, sizeof info);
        odl_status s = odl_h5_reader_info(r, name, &info);
        if (s == ODL_OK && !info.has_crc32)
            s = ODL_ERR(ODL_E_CHECKSUM, "%s:%s: no crc32 attribute", path, name);
        if (s == ODL_OK) {
            size_t need = (size_t)info.numel * odl_dtype_size(info.dtype);
            if (need > bufcap) {
                void *nb = realloc(buf, need ? need : 1);
                if (!nb) s = ODL_ERR(ODL_E_NOMEM, "%s:%s: %zu bytes", path, name, need);
                else {
                    buf = nb;
                    bufcap = need;
                }
            }
            if (s == ODL_OK) s = odl_h5_reader_read(r, name, info.dtype, info.ndim, info.shape, buf);
        }
        NOTE(s);
        if (fn) fn(ctx, name, &info, s, s == ODL_OK ? "" : odl_error_msg());
    }
    free(buf);

    /* Layout. */
    if (ms == ODL_OK) {
        int nstate = m.is_checkpoint ? odl_ckpt_optim_nstate(m.optimizer) : 0;
        int64_t n_optim = 0;
        for (size_t i = 0; i < nd; i++) {
            const char *name = odl_h5_reader_name(r, i);
            odl_status s = ODL_OK;
            if (has_prefix(name, "/model/")) {
                if (!m.is_checkpoint) continue;
                odl_h5_info pi, si;
                if (odl_h5_reader_info(r, name, &pi) != ODL_OK) continue; /* reported above */
                for (int j = 0; j < nstate && s == ODL_OK; j++) {
                    char op[ODL_CKPT_DSET_MAX + 64];
                    snprintf(op, sizeof op, "/optim/%s/%s", name + 7, odl_ckpt_optim_state(m.optimizer, j));
                    if (!odl_h5_reader_has(r, op))
                        s = ODL_ERR(ODL_E_FORMAT, "%s: %s has no optimiser state %s", path, name, op);
                    else if (odl_h5_reader_info(r, op, &si) == ODL_OK && !same_shape(&pi, &si))
                        s = ODL_ERR(ODL_E_FORMAT, "%s: %s and %s differ in shape", path, name, op);
                }
            } else if (has_prefix(name, "/optim/") && m.is_checkpoint) {
                n_optim++;
            } else if (m.is_checkpoint && (!strcmp(name, "/train/counters") || !strcmp(name, "/train/epoch_loss_sum"))) {
                continue;
            } else {
                s = ODL_ERR(ODL_E_FORMAT, "%s: unexpected dataset %s in an %s file", path, name, m.format);
            }
            NOTE(s);
        }
        if (m.is_checkpoint && nstate >= 0 && n_optim != m.n_model_tensors * nstate)
            NOTE(ODL_ERR(ODL_E_FORMAT, "%s: %" PRId64 " datasets under /optim, %" PRId64 " expected (%s: %d per parameter)",
                         path, n_optim, m.n_model_tensors * nstate, m.optimizer, nstate));
        if (m.n_model_tensors == 0) NOTE(ODL_ERR(ODL_E_FORMAT, "%s: no tensors under /model", path));
    }
#undef NOTE
    odl_h5_reader_close(r);
    if (first != ODL_OK) { /* the first problem's message, as it was */
        odl_error_clear();
        odl_error_prefix("%s", first_msg);
    }
    return first;
}
