/* CUDA graphs of the YOLOv5 forward (odl_yolov5_set_graphs in odl/yolov5.h).
 *
 * A graph replays fixed kernel arguments: the input size, float16 or not, and the addresses of the input,
 * of every activation and scratch buffer, of the weights and of the backend's workspace (the matmul
 * precision is set once per process before any work, odl/precision.h, so it is not part of the key). An
 * entry is keyed by the size, float16 and the input (the model's own input buffer by name, since a prepare
 * may move it; another buffer by its address), and remembers the model's buffer generation (m->buf_gen,
 * counted by yolov5_buf_set at every allocation; set_half, which frees and makes the rest, drops every
 * graph) and the backend's workspace epoch: when either moved, the entry captures again. A workspace
 * growth during a capture fails that capture, which then runs op by op. When the table is full the least
 * recently used entry makes room. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "models/yolov5_impl.h"
#include "odl/graph.h"
#include "odl/log.h"

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

/* The entry of this forward's key, a new one (the least recently used one's place when the table is
 * full), and whether it is new. */
static ygraph *entry_of(odl_yolov5 *m, const void *xkey, int *fresh) {
    ygraph *lru = NULL;
    for (int i = 0; i < m->n_graphs; i++) {
        ygraph *e = &m->graphs[i];
        if (e->N == m->N && e->H == m->H && e->W == m->W && e->half == m->half && e->x == xkey) {
            *fresh = 0;
            return e;
        }
        if (!lru || e->used < lru->used) lru = e;
    }
    ygraph *e = m->n_graphs < Y_GRAPHS ? &m->graphs[m->n_graphs++] : lru;
    odl_graph_free(e->g);
    *e = (ygraph){.N = m->N, .H = m->H, .W = m->W, .half = m->half, .x = xkey};
    *fresh = 1;
    return e;
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
    const uint64_t epoch = odl_backend_workspace_epoch(m->dev);
    const void *xkey = x->data == m->input.data ? NULL : x->data; /* NULL: the model's own input */
    int fresh = 0;
    ygraph *e = entry_of(m, xkey, &fresh);
    e->used = ++m->graph_clock;
    if (fresh || e->failed) return yolov5_forward_ops(m, x); /* a new key: its lazy set-up before a capture */
    /* a buffer moved, or workspace memory was freed, since the capture */
    if (e->g && (e->buf_gen != m->buf_gen || e->ws_epoch != epoch)) {
        odl_graph_free(e->g);
        e->g = NULL;
    }
    const odl_stream s = odl_stream_current();
    if (!e->g) {
        e->buf_gen = m->buf_gen;
        e->ws_epoch = epoch;
        capture(m, e, x, s);
        if (!e->g) return yolov5_forward_ops(m, x);
    } else {
        m->n_replayed++;
    }
    return odl_graph_launch(e->g, s);
}
