/* Training-batch loader with a prefetch thread.
 *
 * A host thread gathers each step's samples (in the order of odl/sampler.h), normalises them,
 * (x / 255 - mean) / std as torchvision's Normalize, into pinned host buffers and, for a CUDA device,
 * copies them to device buffers on its own stream while the previous step computes. The consumer
 * waits on the copy's event on its compute stream only (no host synchronisation). A ring of
 * ODL_LOADER_SLOTS slots bounds the look-ahead.
 */
#ifndef ODL_LOADER_H
#define ODL_LOADER_H

#include "odl/api.h"
#include <pthread.h>
#include <stdint.h>

#include "odl/device.h"
#include "odl/sampler.h"
#include "odl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ODL_LOADER_SLOTS 3

typedef struct odl_batch {
    odl_tensor x;        /* float32 [max_batch, C, H, W] on the device; rows 0..local-1 valid */
    odl_tensor y;        /* int32 [max_batch] */
    int64_t epoch;       /* 0-based */
    int64_t cursor;      /* global sample cursor at the start of this step */
    int local, global;   /* samples on this rank / on all ranks in this step (local may be 0) */
    int64_t *idx;        /* host [max_batch]: rows 0..local-1's sample indices into the data set (the
                            sampler's order), valid while the batch is held */
    /* private */
    float *h_x;
    int32_t *h_y;
    odl_event ready, consumed;
    int used_before;
    int state;
} odl_batch;

/* Copied by odl_loader_start; images and labels are borrowed (read by the loader's thread): they must
 * outlive the loader. */
typedef struct odl_loader_config {
    const uint8_t *images;      /* [n, sample_shape] uint8, host */
    const uint8_t *labels;      /* [n] */
    int64_t n;                  /* samples used per epoch (the first n of the set) */
    int sample_ndim;
    int64_t sample_shape[3];    /* e.g. {1, 28, 28} */
    float mean, std;            /* normalisation */
    int rank, world_size, batch; /* per-rank batch */
    uint64_t seed;
    int shuffle;
    int64_t start_epoch, start_cursor, end_epoch; /* produce steps from (start_epoch, start_cursor) up to end_epoch (exclusive) */
    odl_device device;
} odl_loader_config;

typedef struct odl_loader {
    odl_loader_config cfg;
    odl_sampler sampler;
    odl_batch slots[ODL_LOADER_SLOTS];
    int64_t produced, consumed;
    int stop, done;
    odl_status error;
    char error_msg[1024];
    odl_stream copy_stream;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} odl_loader;

/* Allocate the slots and start the thread. Errors: ODL_E_INVAL, ODL_E_NOMEM, ODL_E_CUDA. */
ODL_API odl_status odl_loader_start(odl_loader *L, const odl_loader_config *cfg);
/* Next step's batch, in order, waiting for the thread if needed; *out = NULL after the last step.
 * The batch's data are usable on the calling thread's current stream. */
ODL_API odl_status odl_loader_next(odl_loader *L, odl_batch **out);
/* Give a batch back once the work that reads it has been enqueued on the current stream. */
ODL_API odl_status odl_loader_release(odl_loader *L, odl_batch *b);
/* Stop the thread and free everything (safe after an error, and twice). */
ODL_API void odl_loader_stop(odl_loader *L);

/* Fill rows [0, count) of host buffers from samples idx[0..count) of a data set of n samples with the
 * same normalisation (used by the loader and by evaluation). Errors: ODL_E_INVAL naming the first index
 * outside [0, n) -- nothing is read past the set's end (a test's reference indices into a smaller copy
 * of the set, a damaged cursor); rows before it are filled. */
ODL_API odl_status odl_loader_gather(const uint8_t *images, const uint8_t *labels, int64_t n, int64_t sample_elems,
                                     float mean, float std, const int64_t *idx, int count, float *x, int32_t *y);

#ifdef __cplusplus
}
#endif
#endif
