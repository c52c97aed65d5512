/* CUDA graphs: the work a thread queues on a stream, captured once and replayed (cudaStreamBeginCapture,
 * cudaGraphInstantiate, cudaGraphLaunch). A replay costs the host one launch instead of one per kernel,
 * and the GPU runs the kernels back to back. What a graph replays is fixed at capture: every kernel's
 * arguments, pointers and sizes; values that change from one replay to the next must live in device
 * memory that the kernels read when they run (odl_step_scalars, odl/backend.h).
 *
 * Capture runs in thread-local mode: only the capturing thread is barred from calls that are not
 * allowed during capture (cudaMalloc, a synchronisation, the legacy default stream), so a loader or a
 * watchdog thread may go on using CUDA meanwhile. A call that is not allowed invalidates the capture;
 * odl_graph_end then fails with CUDA's reason and leaves no capture behind, so the caller can run the
 * same work eagerly. The CPU has no graphs: every function returns ODL_E_UNSUPPORTED (or 0) there.
 */
#ifndef ODL_GRAPH_H
#define ODL_GRAPH_H

#include <stddef.h>

#include "odl/api.h"
#include "odl/device.h"
#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct odl_graph odl_graph;

/* Begin capturing the work the calling thread queues on s, a stream of odl_stream_create or
 * odl_stream_current (non-blocking). Errors: ODL_E_UNSUPPORTED (no CUDA, a NULL or legacy stream, a
 * blocking stream, s already capturing), ODL_E_CUDA. */
ODL_API odl_status odl_graph_begin(odl_stream s);
/* End the capture of s and instantiate it (and upload it, so that the first replay costs no more than
 * the next). On failure *out is NULL, the capture is over and CUDA's sticky error cleared; the error
 * names the reason (e.g. "operation not permitted when stream is capturing"). */
ODL_API odl_status odl_graph_end(odl_stream s, odl_graph **out);
/* Abandon a capture on an error path: end it and drop what was captured; a no-op when s is not capturing. */
ODL_API void odl_graph_abort(odl_stream s);
/* Queue one replay of g on s. Errors: ODL_E_CUDA (a launch failure; an error of the replayed kernels
 * shows at the next synchronisation of s). */
ODL_API odl_status odl_graph_launch(const odl_graph *g, odl_stream s);
ODL_API void odl_graph_free(odl_graph *g);
/* Nodes of the captured graph (kernels, copies, event records...): for logs and tests. */
ODL_API size_t odl_graph_num_nodes(const odl_graph *g);
/* 1 when s is being captured by some thread, else 0 (also on the CPU). */
ODL_API int odl_stream_is_capturing(odl_stream s);

#ifdef __cplusplus
}
#endif
#endif
