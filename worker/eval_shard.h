/* odl_worker --task=eval: the evaluation loop over a range of the evaluation order (worker/eval.c owns
 * the options, the gather or the work queue, and the metrics). The loop's decoder, threads and buffers
 * live in an eval_ctx made once per run, so that under the coordinator's work queue every chunk reuses
 * them (nvJPEG's state, the pinned and device buffers, the NMS buffers). */
#ifndef ODL_WORKER_EVAL_SHARD_H
#define ODL_WORKER_EVAL_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "odl/det_metrics.h"
#include "odl/fault.h"
#include "odl/gpu_prep.h"
#include "odl/labels.h"
#include "odl/precision.h"
#include "odl/yolov5.h"

typedef struct eval_opts {
    const char *model, *weights, *data, *output, *device, *decoder, *precision_name, *cuda_graph_name;
    odl_precision precision; /* --precision: the float32 network's convolutions */
    int img_size, batch, max_det, square, half, save_json, verbose, workers, backend_post;
    int cuda_graph; /* --cuda-graph on: the forward replayed from CUDA graphs (odl_yolov5_set_graphs) */
    float conf, iou, timeout_s;
    float pool_fraction; /* memory.preallocate_fraction; 0: the pool grows on demand */
} eval_opts;

/* ---- per-image statistics, the records gathered to rank 0 (same binary on every rank) ---- */
typedef struct rec_hdr {
    int32_t index;    /* sample index in the dataset */
    int32_t n_det, n_labels;
    int32_t decoder;  /* odl_decoder that decoded the image (odl/gpu_prep.h) */
} rec_hdr;
typedef struct rec_det {
    float box[4];     /* xyxy, original-image pixels */
    float conf;
    int32_t cls;
    uint8_t correct[ODL_DET_NIOU];
    uint8_t pad[2];
} rec_det;

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

typedef struct eval_ctx eval_ctx;

/* The loop's machinery for net's device: on CUDA (and on the CPU with --backend-post) the device image
 * pipeline (odl/gpu_prep.h: nvJPEG unless --decoder cpu) with letterbox and NMS on the device, batches
 * overlapped; on the CPU decoding threads and the CPU letterbox and NMS. Errors: ODL_E_NOMEM, the
 * device's. */
odl_status eval_ctx_create(odl_yolov5 *net, const eval_opts *o, eval_ctx **out);
void eval_ctx_free(eval_ctx *c);
/* What decodes the images, for the start line: "nvJPEG 13.0.1 hardware (...)", "CPU (libjpeg-turbo, libpng),
 * 8 threads", or why nvJPEG is not used. */
const char *eval_ctx_decoder_note(const eval_ctx *c);
/* Milliseconds the device spent on this run's letterbox, forward and NMS (CUDA events around each
 * batch's work; 0 on the CPU), and the split: letterbox + forward, NMS + the copy of the boxes, batches. */
double eval_ctx_device_ms(const eval_ctx *c, double *forward_ms, double *nms_ms, int64_t *batches);
/* The device path's image prep statistics (odl_gpu_prep_get_stats) into *out: 1, or 0 on the CPU path. */
int eval_ctx_prep_stats(const eval_ctx *c, odl_gpu_prep_stats *out);

/* Evaluate samples order[lo..hi) into `out` (one record per image, in order). After each batch the
 * ODL_FAULT faults of step ++*batches fire (a step of an evaluation is one batch of this rank).
 * t[0] += ms waiting for decoding, t[1] += forward + NMS, t[2] += matching. An image that cannot be
 * decoded is an error naming it. */
odl_status eval_shard(eval_ctx *c, const odl_det_dataset *ds, const int *order, const int *shape, int lo, int hi, int rank,
                      const odl_fault_plan *faults, int64_t *batches, bytes *out, double t[3]);

#endif
