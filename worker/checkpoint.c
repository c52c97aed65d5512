/* Placeholder until checkpoints land: refuses checkpoint options instead of ignoring them. */
#include "worker/checkpoint.h"

odl_status odl_ckpt_session_start(odl_ckpt_session **out, const odl_config *cfg, int rank, int world_size) {
    (void)rank; (void)world_size;
    *out = NULL;
    if (cfg->checkpoint.dir[0] || cfg->checkpoint.resume[0])
        return ODL_ERR(ODL_E_UNSUPPORTED, "checkpoints are not implemented yet");
    return ODL_OK;
}
odl_status odl_ckpt_session_restore(odl_ckpt_session *s, odl_net *net, odl_optim *opt, odl_train_state *st, int *resumed) {
    (void)s; (void)net; (void)opt; (void)st;
    *resumed = 0;
    return ODL_OK;
}
int odl_ckpt_session_due(const odl_ckpt_session *s, const odl_train_state *st) { (void)s; (void)st; return 0; }
odl_status odl_ckpt_session_save(odl_ckpt_session *s, const odl_config *cfg, const odl_net *net, const odl_optim *opt,
                                 const odl_train_state *st) {
    (void)s; (void)cfg; (void)net; (void)opt; (void)st;
    return ODL_ERR(ODL_E_UNSUPPORTED, "checkpoints are not implemented yet");
}
odl_status odl_ckpt_session_finish(odl_ckpt_session *s) { (void)s; return ODL_OK; }
