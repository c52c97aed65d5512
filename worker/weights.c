/* --save: the trained weights as HDF5 (the checkpoint format without training state). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/config.h"
#include "odl/h5io.h"
#include "odl/nn.h"
#include "worker/train.h"

/* "conv1.weight" -> "/model/conv1/weight" */
static void param_path(const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "/model/%s", name);
    for (char *c = buf + 7; *c; c++)
        if (*c == '.') *c = '/';
}

odl_status odl_train_save_weights(const char *path, const odl_config *cfg, const odl_net *net) {
    odl_h5_writer *w = NULL;
    odl_status s = ODL_OK;
    float *host = NULL;
    ODL_CHECK(odl_h5_writer_open(path, &w));
    ODL_CHECK_GOTO(odl_h5_writer_attr_str(w, "/", "format", "odl-weights"), s, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_i64(w, "/", "format_version", 1), s, fail);
    {
        char model[64];
        ODL_CHECK_GOTO(odl_config_get(cfg, "model", model, sizeof model), s, fail);
        ODL_CHECK_GOTO(odl_h5_writer_attr_str(w, "/", "model", model), s, fail);
    }
    for (int i = 0; i < net->n_params; i++) {
        const odl_param *p = &net->params[i];
        size_t n = odl_tensor_nbytes(&p->value);
        float *h = realloc(host, n);
        if (!h) {
            s = ODL_ERR(ODL_E_NOMEM, "saving %s", p->name);
            goto fail;
        }
        host = h;
        ODL_CHECK_GOTO(odl_tensor_copy_to_host(&p->value, host, n), s, fail);
        char dset[160];
        param_path(p->name, dset, sizeof dset);
        ODL_CHECK_GOTO(odl_h5_writer_write(w, dset, ODL_F32, p->value.ndim, p->value.shape, host), s, fail);
    }
    free(host);
    ODL_CHECK(odl_h5_writer_commit(w));
    return ODL_OK;
fail:
    free(host);
    odl_h5_writer_abort(w);
    odl_error_prefix("saving weights to %s", path);
    return s;
}
