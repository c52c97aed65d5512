/* Image preparation for detection on a pool of threads: decode (libjpeg-turbo / libpng), resize and
 * letterbox as YOLOv5's val.py dataloader, and write the network input (CHW float32, value / 255).
 * A batch is submitted at once and waited for later, so that the next batch decodes while the current
 * one runs through the network (odl_worker --task=eval).
 *
 * One job, as utils/dataloaders.py LoadImagesAndLabels.__getitem__ (augment off):
 *   load_image: r = load_size / max(h0, w0); when r != 1 resize to (ceil(w0 r), ceil(h0 r)) (cv2 uses
 *     INTER_AREA when shrinking; here the INTER_LINEAR resize is used for both, a known difference for
 *     images larger than load_size);
 *   letterbox(img, (out_h, out_w), auto=False, scaleup): pad 114 around the (resized) image;
 *   ratio_pad for scale_boxes: gain = (h / h0) * letterbox ratio, pad = (dw, dh).
 */
#ifndef ODL_PIPELINE_H
#define ODL_PIPELINE_H

#include <stdint.h>

#include "odl/image.h"
#include "odl/api.h"
#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct odl_prep_job {
    const char *path;
    int load_size;      /* > 0: resize the long side to load_size first (val.py); 0: keep the size */
    int out_w, out_h;   /* letterbox target */
    int scaleup;        /* 0: never enlarge in the letterbox (val.py) */
} odl_prep_job;

typedef struct odl_prep_result {
    odl_status status;  /* ODL_OK or the error of this image (message in err) */
    char err[512];
    int src_w, src_h;   /* original size */
    double gain;        /* letterboxed pixels per original pixel (val.py's ratio_pad[0][0]) */
    double pad_x, pad_y; /* val.py's ratio_pad[1] */
    odl_letterbox geo;  /* of the letterbox step */
    int decoder;        /* odl_decoder (odl/gpu_prep.h) that decoded it: ODL_DECODER_CPU here */
} odl_prep_result;

/* Run one job now on the calling thread: dst receives 3 * out_h * out_w floats (CHW, value / 255). */
ODL_API odl_status odl_prep_image(const odl_prep_job *job, float *dst, odl_prep_result *res);

/* Map a box from letterboxed pixels to the original image: val.py's scale_boxes with ratio_pad
 * ((x - pad_x) / gain, (y - pad_y) / gain, float32 as YOLOv5's tensors) and clip_boxes to the image. */
ODL_API void odl_prep_unmap(const odl_prep_result *res, float xyxy[4]);

typedef struct odl_prep_pool odl_prep_pool;
typedef struct odl_prep_batch odl_prep_batch;

/* n_threads >= 1 worker threads (0: jobs run inside odl_prep_submit). Errors: ODL_E_INVAL, ODL_E_NOMEM. */
ODL_API odl_status odl_prep_pool_create(int n_threads, odl_prep_pool **out);
/* Stops the threads after the jobs already queued. */
ODL_API void odl_prep_pool_free(odl_prep_pool *p);

/* Queue n jobs; job k writes dst + k * 3 * out_h * out_w... (each job's own size: offsets are the sums of
 * the previous jobs' 3 * out_h * out_w) and res[k]. jobs, dst and res must stay valid until
 * odl_prep_wait returns. Errors: ODL_E_INVAL, ODL_E_NOMEM. */
ODL_API odl_status odl_prep_submit(odl_prep_pool *p, const odl_prep_job *jobs, int n, float *dst, odl_prep_result *res,
                           odl_prep_batch **out);
/* Block until every job of b is done and free b. Per-image errors are in res[k].status. */
ODL_API void odl_prep_wait(odl_prep_batch *b);

/* Queue fn(ctx, i) for i in [0, n) on the pool's threads and return at once: odl_prep_wait(*out) waits
 * for them and frees *out (with 0 threads they run here, before the return). fn must not fail the
 * process; it keeps its own per-item results. Errors: ODL_E_INVAL, ODL_E_NOMEM. */
ODL_API odl_status odl_prep_pool_run(odl_prep_pool *p, int n, void (*fn)(void *ctx, int i), void *ctx,
                                     odl_prep_batch **out);

/* Run fn(ctx, i) for i in [0, n) on the pool's threads and return when all are done (a parallel for;
 * odl_worker --task=infer decodes and letterboxes a batch with it). fn must not fail the process; it
 * keeps its own per-item results. Errors: ODL_E_INVAL, ODL_E_NOMEM. */
ODL_API odl_status odl_prep_pool_for(odl_prep_pool *p, int n, void (*fn)(void *ctx, int i), void *ctx);

#ifdef __cplusplus
}
#endif
#endif
