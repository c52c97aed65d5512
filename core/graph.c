/* CUDA graphs of a stream's work (odl/graph.h). */
#include "odl/graph.h"

#include <stdlib.h>

#ifdef ODL_HAVE_CUDA
#include <cuda_runtime_api.h>

struct odl_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    size_t nodes;
};

int odl_stream_is_capturing(odl_stream s) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (!s || cudaStreamIsCapturing((cudaStream_t)s, &cs) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return cs != cudaStreamCaptureStatusNone;
}

odl_status odl_graph_begin(odl_stream s) {
    if (!s) return ODL_ERR(ODL_E_UNSUPPORTED, "CUDA graph capture needs a stream of its own, not the legacy default stream");
    unsigned flags = 0;
    cudaError_t e = cudaStreamGetFlags((cudaStream_t)s, &flags);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ODL_ERR(ODL_E_CUDA, "cudaStreamGetFlags: %s", cudaGetErrorString(e));
    }
    /* a blocking stream synchronises with the legacy stream, which capture does not allow */
    if (!(flags & cudaStreamNonBlocking))
        return ODL_ERR(ODL_E_UNSUPPORTED, "CUDA graph capture needs a non-blocking stream (cudaStreamNonBlocking)");
    if (odl_stream_is_capturing(s)) return ODL_ERR(ODL_E_UNSUPPORTED, "the stream is already being captured");
    e = cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ODL_ERR(ODL_E_CUDA, "cudaStreamBeginCapture: %s", cudaGetErrorString(e));
    }
    return ODL_OK;
}

odl_status odl_graph_end(odl_stream s, odl_graph **out) {
    *out = NULL;
    /* The error that invalidated a capture is reported by the end of it; the last error of the thread
     * may be an earlier, more precise one (the call that was refused). */
    cudaError_t before = cudaGetLastError();
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)s, &g);
    if (e != cudaSuccess || !g) {
        cudaGetLastError();
        if (g) cudaGraphDestroy(g);
        return ODL_ERR(ODL_E_CUDA, "CUDA graph capture failed: %s%s%s", cudaGetErrorString(e),
                       before != cudaSuccess ? "; first error: " : "",
                       before != cudaSuccess ? cudaGetErrorString(before) : "");
    }
    odl_graph *r = calloc(1, sizeof *r);
    if (!r) {
        cudaGraphDestroy(g);
        return ODL_ERR(ODL_E_NOMEM, "CUDA graph");
    }
    r->graph = g;
    cudaGraphGetNodes(g, NULL, &r->nodes);
    e = cudaGraphInstantiate(&r->exec, g, 0);
    if (e == cudaSuccess) e = cudaGraphUpload(r->exec, (cudaStream_t)s);
    if (e != cudaSuccess) {
        cudaGetLastError();
        const size_t nodes = r->nodes;
        odl_graph_free(r);
        return ODL_ERR(ODL_E_CUDA, "cudaGraphInstantiate of %zu nodes: %s", nodes, cudaGetErrorString(e));
    }
    *out = r;
    return ODL_OK;
}

void odl_graph_abort(odl_stream s) {
    if (!odl_stream_is_capturing(s)) return;
    cudaGraph_t g = NULL;
    cudaStreamEndCapture((cudaStream_t)s, &g);
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
}

odl_status odl_graph_launch(const odl_graph *g, odl_stream s) {
    if (!g) return ODL_ERR(ODL_E_INVAL, "odl_graph_launch: NULL graph");
    cudaError_t e = cudaGraphLaunch(g->exec, (cudaStream_t)s);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ODL_ERR(ODL_E_CUDA, "cudaGraphLaunch (%zu nodes): %s", g->nodes, cudaGetErrorString(e));
    }
    return ODL_OK;
}

void odl_graph_free(odl_graph *g) {
    if (!g) return;
    if (g->exec) cudaGraphExecDestroy(g->exec);
    if (g->graph) cudaGraphDestroy(g->graph);
    free(g);
}

size_t odl_graph_num_nodes(const odl_graph *g) { return g ? g->nodes : 0; }

#else /* ------------------------------------------------------------------ CPU-only build */

struct odl_graph {
    int unused;
};

int odl_stream_is_capturing(odl_stream s) {
    (void)s;
    return 0;
}
odl_status odl_graph_begin(odl_stream s) {
    (void)s;
    return ODL_ERR(ODL_E_UNSUPPORTED, "CUDA graphs need the CUDA backend (a CPU-only build)");
}
odl_status odl_graph_end(odl_stream s, odl_graph **out) {
    (void)s;
    *out = NULL;
    return ODL_ERR(ODL_E_UNSUPPORTED, "CUDA graphs need the CUDA backend (a CPU-only build)");
}
void odl_graph_abort(odl_stream s) { (void)s; }
odl_status odl_graph_launch(const odl_graph *g, odl_stream s) {
    (void)g;
    (void)s;
    return ODL_ERR(ODL_E_UNSUPPORTED, "CUDA graphs need the CUDA backend (a CPU-only build)");
}
void odl_graph_free(odl_graph *g) { free(g); }
size_t odl_graph_num_nodes(const odl_graph *g) {
    (void)g;
    return 0;
}
#endif
