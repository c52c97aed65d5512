/* --save: the trained weights as HDF5, the checkpoint format without training state
 * (docs/checkpoint_format.md): root attributes format = "odl-weights", format_version, model, config, and /model/<layer>/<param> float32 datasets with crc32, committed crash-safely. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/ckpt.h"
#include "worker/config.h"
#include "odl/h5io.h"
#include "odl/models.h"
#include "odl/nn.h"
#include "worker/train.h"

odl_status odl_train_save_weights(const char *path, const odl_config *cfg, const odl_net *net) {
    odl_h5_writer *w = NULL;
    odl_status s = ODL_OK;
    float *host = NULL;
    char *yaml = malloc(ODL_CONFIG_YAML_MAX);
    if (!yaml) return ODL_ERR(ODL_E_NOMEM, "saving weights to %s", path);
    char model[64];
    ODL_CHECK_GOTO(odl_config_get(cfg, "model", model, sizeof model), s, out);
    ODL_CHECK_GOTO(odl_config_to_yaml(cfg, yaml, ODL_CONFIG_YAML_MAX), s, out);
    ODL_CHECK_GOTO(odl_h5_writer_open(path, &w), s, out);
    ODL_CHECK_GOTO(odl_ckpt_write_root(w, ODL_CKPT_WEIGHTS_FORMAT, model, 0, yaml), s, fail);
    for (int i = 0; i < net->n_params; i++) {
        const odl_param *p = &net->params[i];
        size_t n = odl_tensor_nbytes(&p->value);
        float *h = realloc(host, n ? n : 1);
        if (!h) {
            s = ODL_ERR(ODL_E_NOMEM, "saving %s", p->name);
            goto fail;
        }
        host = h;
        ODL_CHECK_GOTO(odl_tensor_copy_to_host(&p->value, host, n), s, fail);
        char dset[ODL_CKPT_DSET_MAX];
        ODL_CHECK_GOTO(odl_ckpt_param_path(p->name, dset, sizeof dset), s, fail);
        ODL_CHECK_GOTO(odl_h5_writer_write(w, dset, ODL_F32, p->value.ndim, p->value.shape, host), s, fail);
    }
    ODL_CHECK_GOTO(odl_h5_writer_commit(w), s, out);
    goto out;
fail:
    odl_h5_writer_abort(w);
out:
    free(host);
    free(yaml);
    if (s != ODL_OK) odl_error_prefix("saving weights to %s", path);
    return s;
}

/* --init-from and --task=eval: /model/<layer>/<param> of a weights file (or of a checkpoint, which has the
 * same tensors) into the network; the reader verifies each dataset's crc32 and its shape. */
odl_status odl_train_load_weights(const char *path, const char *model, odl_net *net) {
    odl_h5_reader *r = NULL;
    odl_status s = ODL_OK;
    float *host = NULL;
    ODL_CHECK_GOTO(odl_h5_reader_open(path, &r), s, out);
    char stored[64];
    if (model && odl_h5_reader_attr_str(r, "/", "model", stored, sizeof stored) == ODL_OK) {
        odl_model_kind a, b;
        /* "mnist" and "mnist_cnn" name one network */
        if (odl_model_parse(stored, &a) == ODL_OK && odl_model_parse(model, &b) == ODL_OK && a != b) {
            s = ODL_ERR(ODL_E_FORMAT, "%s holds model '%s', not '%s' (--model)", path, stored, model);
            goto out;
        }
    }
    odl_error_clear();
    for (int i = 0; i < net->n_params; i++) {
        const odl_param *p = &net->params[i];
        char dset[ODL_CKPT_DSET_MAX];
        ODL_CHECK_GOTO(odl_ckpt_param_path(p->name, dset, sizeof dset), s, out);
        if (!odl_h5_reader_has(r, dset)) {
            s = ODL_ERR(ODL_E_FORMAT, "%s has no tensor %s: weights of another model?", path, dset);
            goto out;
        }
        size_t n = odl_tensor_nbytes(&p->value);
        float *h = realloc(host, n ? n : 1);
        if (!h) {
            s = ODL_ERR(ODL_E_NOMEM, "reading %s", dset);
            goto out;
        }
        host = h;
        ODL_CHECK_GOTO(odl_h5_reader_read(r, dset, ODL_F32, p->value.ndim, p->value.shape, host), s, out);
        ODL_CHECK_GOTO(odl_tensor_copy_from_host((odl_tensor *)&p->value, host, n), s, out);
    }
out:
    free(host);
    if (r) odl_h5_reader_close(r);
    if (s != ODL_OK) odl_error_prefix("loading weights from %s", path);
    return s;
}
