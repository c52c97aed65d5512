/* Keeping a network identical on every rank: broadcast from one rank, and a bitwise check by hash.
 * See odl/comm.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "odl/strbuf.h"

odl_status odl_comm_broadcast_net(odl_comm *c, odl_net *net, odl_optim *opt, int root) {
    if (!c || !net) return ODL_ERR(ODL_E_INVAL, "odl_comm_broadcast_net: NULL argument");
    for (int i = 0; i < net->n_params; i++) {
        odl_tensor *t = &net->params[i].value;
        odl_status st = odl_comm_broadcast(c, t->data, odl_tensor_nbytes(t), root);
        if (st != ODL_OK) {
            odl_error_prefix("broadcast of parameter %s", net->params[i].name);
            return st;
        }
    }
    if (opt) {
        for (int i = 0; i < opt->n && i < ODL_MAX_PARAMS; i++)
            for (int j = 0; j < 2; j++) {
                odl_tensor *t = &opt->state[i][j];
                if (!t->data) continue;
                odl_status st = odl_comm_broadcast(c, t->data, odl_tensor_nbytes(t), root);
                if (st != ODL_OK) {
                    odl_error_prefix("broadcast of optimiser state %d of parameter %d", j, i);
                    return st;
                }
            }
    }
    return ODL_OK;
}

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

odl_status odl_comm_check_net_equal(odl_comm *c, const odl_net *net) {
    if (!c || !net) return ODL_ERR(ODL_E_INVAL, "odl_comm_check_net_equal: NULL argument");
    int n = net->n_params;
    if (n == 0 || c->size == 1) return ODL_OK;
    odl_status st = ODL_OK;
    int64_t *mine = calloc((size_t)n, sizeof *mine), *all = calloc((size_t)n * (size_t)c->size, sizeof *all);
    void *host = NULL;
    size_t host_cap = 0;
    if (!mine || !all) {
        st = ODL_ERR(ODL_E_NOMEM, "rank %d: parameter hashes", c->rank);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        const odl_tensor *t = &net->params[i].value;
        size_t nb = odl_tensor_nbytes(t);
        if (nb > host_cap) {
            void *p = realloc(host, nb);
            if (!p) {
                st = ODL_ERR(ODL_E_NOMEM, "rank %d: host copy of %s (%zu bytes)", c->rank, net->params[i].name, nb);
                goto out;
            }
            host = p;
            host_cap = nb;
        }
        ODL_CHECK_GOTO(odl_tensor_copy_to_host(t, host, nb), st, out);
        mine[i] = (int64_t)fnv1a(0xcbf29ce484222325ull, host, nb);
    }
    ODL_CHECK_GOTO(odl_comm_allgather_host_i64(c, mine, n, all), st, out);
    {
        char ranks[256];
        odl_strbuf b;
        odl_strbuf_fixed(&b, ranks, sizeof ranks);
        int ndiff = 0, first_param = -1;
        for (int r = 1; r < c->size; r++) {
            int differs = -1;
            for (int i = 0; i < n && differs < 0; i++)
                if (all[(size_t)r * n + i] != all[i]) differs = i;
            if (differs < 0) continue;
            if (first_param < 0) first_param = differs;
            if (ndiff < 16) odl_strbuf_printf(&b, "%s%d", ndiff ? ", " : "", r);
            ndiff++;
        }
        if (ndiff)
            st = ODL_ERR(ODL_E_INTERNAL,
                         "parameters differ between ranks: rank%s %s%s differ%s from rank 0 (first at %s); data "
                         "parallel replicas have diverged",
                         ndiff > 1 ? "s" : "", ranks, ndiff > 16 ? ", ..." : "", ndiff > 1 ? "" : "s",
                         net->params[first_param].name);
    }
out:
    free(host);
    free(mine);
    free(all);
    return st;
}
