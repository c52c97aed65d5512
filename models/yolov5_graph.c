/* CUDA graphs of the YOLOv5 forward (odl_yolov5_set_graphs in odl/yolov5.h).
 *
 * A graph replays fixed kernel arguments: the input size, the precision, and the addresses of the input,
 * of every activation and scratch buffer and of the weights. An entry is keyed by the first three and
 * the input's address, and remembers a signature of the model's own buffer addresses: a prepare that
 * moved any of them (a larger size than any before) makes the entry capture again. The backend's
 * workspace keeps the buffers a growth replaced while graphs may use them (kernels/cuda/backend.cu), and a
 * growth during a capture fails that capture, which then runs op by op. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "models/yolov5_impl.h"
#include "odl/graph.h"
#include "odl/log.h"

static uint64_t mix(uint64_t h, const void *p) {
    uint64_t v = (uint64_t)(uintptr_t)p;
    for (int i = 0; i < 8; i++, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ull; /* FNV-1a */
    return h;
}

/* Every device address a forward's kernels are given, other than the input. */
static uint64_t buffers_signature(const odl_yolov5 *m) {
    uint64_t h = 14695981039346656037ull;
    h = mix(h, m->input.data);
    h = mix(h, m->hinput.data);
    h = mix(h, m->warena.data);
    h = mix(h, m->harena.data);
    for (int s = 0; s < Y_NSCRATCH; s++) h = mix(h, m->scratch[s].data);
    for (int i = 0; i < m->nlayers; i++) {
        h = mix(h, m->L[i].out.data);
        h = mix(h, m->L[i].hbuf.data);
        h = mix(h, m->L[i].hv.p);
    }
    return h;
}

void yolov5_graphs_drop(odl_yolov5 *m) {
    for (int i = 0; i < m->n_graphs; i++) odl_graph_free(m->graphs[i].g);
    memset(m->graphs, 0, sizeof m->graphs);
    m->n_graphs = 0;
}

odl_status odl_yolov5_set_graphs(odl_yolov5 *m, int on) {
    if (!m) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_set_graphs: NULL model");
    if (!on) yolov5_graphs_drop(m);
    m->graphs_on = on != 0 && m->dev.type == ODL_DEV_CUDA;
    return ODL_OK;
}

void odl_yolov5_graph_counts(const odl_yolov5 *m, int64_t *captured, int64_t *replayed) {
    if (captured) *captured = m ? m->n_captured : 0;
    if (replayed) *replayed = m ? m->n_replayed : 0;
}

static ygraph *find(odl_yolov5 *m, const odl_tensor *x) {
    for (int i = 0; i < m->n_graphs; i++) {
        ygraph *e = &m->graphs[i];
        if (e->N == m->N && e->H == m->H && e->W == m->W && e->half == m->half && e->x == x->data) return e;
    }
    return NULL;
}

/* Capture the forward into e->g; on failure the entry runs op by op from now on (said once). */
static void capture(odl_yolov5 *m, ygraph *e, const odl_tensor *x, odl_stream s) {
    odl_status st = odl_graph_begin(s);
    if (st == ODL_OK) {
        st = yolov5_forward_ops(m, x);
        if (st != ODL_OK) odl_graph_abort(s);
        else st = odl_graph_end(s, &e->g);
    }
    if (st == ODL_OK) {
        m->n_captured++;
        return;
    }
    e->failed = 1;
    ODL_LOG_WARN("yolov5: no CUDA graph for the forward of [%d, 3, %d, %d]%s (%s); it runs op by op", e->N, e->H, e->W,
                 e->half ? " float16" : "", odl_error_msg());
    odl_error_clear();
}

odl_status yolov5_graph_forward(odl_yolov5 *m, const odl_tensor *x) {
    const uint64_t sig = buffers_signature(m);
    ygraph *e = find(m, x);
    if (!e) { /* a new size: op by op first, so that its lazy set-up is done before a capture */
        if (m->n_graphs < Y_GRAPHS) {
            e = &m->graphs[m->n_graphs++];
            *e = (ygraph){.N = m->N, .H = m->H, .W = m->W, .half = m->half, .x = x->data, .sig = sig};
        }
        return yolov5_forward_ops(m, x);
    }
    if (e->failed) return yolov5_forward_ops(m, x);
    if (e->g && e->sig != sig) { /* a buffer moved since the capture */
        odl_graph_free(e->g);
        e->g = NULL;
    }
    const odl_stream s = odl_stream_current();
    if (!e->g) {
        e->sig = sig;
        capture(m, e, x, s);
        if (!e->g) return yolov5_forward_ops(m, x);
    } else {
        m->n_replayed++;
    }
    return odl_graph_launch(e->g, s);
}
