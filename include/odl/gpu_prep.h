/* Detection input on a device: batches of image files read, decoded and letterboxed into the network
 * input, with the decoding on the GPU where nvJPEG takes the image (odl/nvjpeg.h: its hardware engines,
 * or the GPU-hybrid backend) and on CPU threads otherwise (libjpeg-turbo, libpng: progressive and
 * CMYK/YCCK JPEGs, PNGs, files nvJPEG's header check rejects, and every image where nvJPEG is absent
 * or off), and the letterbox on the device (the backend's letterbox_u8: EXIF orientation, cv2's
 * INTER_LINEAR resize, pad 114, / 255). Every image rule of the CPU path holds (odl/pipeline.h and
 * odl/image.h): the same geometry, ratio_pad and errors; a CPU-decoded image gives bitwise the
 * letterbox of odl_prep_image, a GPU-decoded one differs only by nvJPEG's IDCT and chroma upsampling
 * (docs/eval.md gives the measured bounds).
 *
 * A batch goes through, asynchronously and overlapped with the batch before it:
 *   odl_gpu_prep_submit   CPU threads read the files and parse the headers (geometry, route);
 *   (feeder thread)       nvJPEG decodes its images on the prep stream while CPU threads decode the
 *                         rest into pinned memory, which is then uploaded on the prep stream;
 *   odl_gpu_prep_wait     the host waits until every image is decoded or queued, and reads the results;
 *   odl_gpu_prep_letterbox on the caller's stream (the forward's): waits for the prep stream, then the
 *                         letterbox kernel writes the network input;
 *   odl_gpu_prep_release  the batch's buffers go back (reused once the caller's stream passes them).
 * ODL_GPU_PREP_DEPTH batches may be in flight (submitted and not released) at a time, so a caller can
 * keep the files of later batches reading while one decodes and another computes; buffers, streams, threads and
 * the nvJPEG decoder live as long as the odl_gpu_prep, so a program keeps one for a whole run (the
 * evaluation keeps one across the coordinator's chunks).
 *
 * On the CPU device the same path runs with host memory and the CPU backend's letterbox_u8 (the
 * evaluation's --backend-post, and the tests); nvJPEG is used there only through a stand-in named by
 * ODL_NVJPEG_LIBRARY. */
#ifndef ODL_GPU_PREP_H
#define ODL_GPU_PREP_H

#include <stdint.h>

#include "odl/api.h"
#include "odl/device.h"
#include "odl/image.h"
#include "odl/pipeline.h"
#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum odl_decoder {
    ODL_DECODER_CPU = 0,           /* libjpeg-turbo / libpng on a CPU thread */
    ODL_DECODER_NVJPEG_HW = 1,     /* nvJPEG, hardware backend */
    ODL_DECODER_NVJPEG_HYBRID = 2, /* nvJPEG, GPU-hybrid backend */
    ODL_DECODER_COUNT
} odl_decoder;
/* "cpu", "nvjpeg-hardware", "nvjpeg-gpu-hybrid". */
ODL_API const char *odl_decoder_name(int decoder);

/* Batches in flight at once (each holds its own device and pinned arenas). On the H200 (512-file eval,
 * fp16 batch 32, 16 threads; bench/results/2026-12-03) three rather than two took the CPU decoder from
 * 1850 to 2120-2130 images/s; nvJPEG's hardware decoder stayed where it was (2220 with two, 2020-2110
 * with three): what paces that loop is not yet found. */
#define ODL_GPU_PREP_DEPTH 3

typedef struct odl_gpu_prep_options {
    int threads;   /* CPU threads for file reads, headers and CPU decodes (>= 1) */
    int max_batch; /* images per batch (>= 1) */
    int nvjpeg;    /* 1: decode on the GPU with nvJPEG where it opens (ODL_NVJPEG and the rest of
                      odl/nvjpeg.h apply); 0: every image on the CPU */
    int keep_host; /* 1: odl_gpu_prep_host_image gives each image's decoded pixels on the host */
    int cpu_share; /* with nvJPEG: percent (0..100) of the JPEGs it could take that decode on the CPU
                      threads instead, so that both decoders work at once; chosen by a hash of the file's
                      name, so an image takes the same decoder whatever its batch or rank. 0: every one on
                      nvJPEG; -1: odl_gpu_prep_default_cpu_share() */
    int feeders;   /* batches fed at once (1..ODL_GPU_PREP_DEPTH), each by a thread with an nvJPEG state of
                      its own; 0: ODL_GPU_PREP_FEEDERS (default 1) */
} odl_gpu_prep_options;

/* The default CPU share (percent) of --decoder auto: ODL_NVJPEG_CPU_SHARE where set, else 0 (on the H200
 * no share was faster than nvJPEG's hardware decoder alone; datasets/gpu_prep.c gives the figures). */
ODL_API int odl_gpu_prep_default_cpu_share(void);

typedef struct odl_gpu_prep odl_gpu_prep;
typedef struct odl_gpu_prep_batch odl_gpu_prep_batch;

/* For dev (CUDA: the device must be initialised, odl_cuda_init). When nvJPEG is asked for and cannot be
 * opened, the prep decodes on the CPU and odl_gpu_prep_nvjpeg_note says why. Errors: ODL_E_INVAL,
 * ODL_E_NOMEM, ODL_E_CUDA (streams, events). */
ODL_API odl_status odl_gpu_prep_create(odl_device dev, const odl_gpu_prep_options *o, odl_gpu_prep **out);
/* Waits for batches in flight; NULL is fine. */
ODL_API void odl_gpu_prep_free(odl_gpu_prep *p);
/* The GPU decoder in use (ODL_DECODER_NVJPEG_*), or ODL_DECODER_CPU when every image decodes on the CPU. */
ODL_API int odl_gpu_prep_decoder(const odl_gpu_prep *p);
/* One line for the log: "nvJPEG 13.0.1 hardware (/usr/local/cuda/lib64/libnvjpeg.so.13)" or why there is
 * none ("nvJPEG not available: ..."; "nvJPEG off (--decoder cpu)"). */
ODL_API const char *odl_gpu_prep_nvjpeg_note(const odl_gpu_prep *p);

/* Queue n (1..max_batch) jobs sharing one letterbox size (every job's out_w and out_h equal; u8 is
 * ignored): job k's outcome goes to res[k] (status and message, sizes, gain, pad, geometry and the
 * decoder, as odl_prep_image gives them). jobs and res must stay valid until odl_gpu_prep_release.
 * Blocks while ODL_GPU_PREP_DEPTH batches are in flight. Errors (the batch was not queued): ODL_E_INVAL, ODL_E_NOMEM. */
ODL_API odl_status odl_gpu_prep_submit(odl_gpu_prep *p, const odl_prep_job *jobs, int n, odl_prep_result *res,
                                       odl_gpu_prep_batch **out);
/* Until every image of b is decoded on the CPU or queued on the GPU; then res[] is final. Errors: a
 * failure of the batch as a whole (a CUDA call, memory), naming it; an image's own failure is in its
 * res[k].status only. A wait longer than ODL_GPU_PREP_STALL_S seconds (default 60) logs a warning that
 * names each feeder thread's phase and how long it has been in it, and again every as many seconds; it
 * keeps waiting (a decode cannot be cancelled). */
ODL_API odl_status odl_gpu_prep_wait(odl_gpu_prep_batch *b);
/* Queue on stream s (NULL on the CPU): wait for b's decoding, then letterbox its images idx[0..m)
 * (ones whose res[k].status is ODL_OK) into y [m, 3, out_h, out_w] float32 on the device. After
 * odl_gpu_prep_wait. Errors: ODL_E_INVAL (an index out of range or of a failed image), the backend's. */
ODL_API odl_status odl_gpu_prep_letterbox(odl_gpu_prep_batch *b, const int *idx, int m, float *y, odl_stream s);
/* With keep_host: image k's decoded pixels (EXIF orientation applied, before any resize) into *out (a
 * new image; free it). Synchronous. Errors: ODL_E_INVAL (no keep_host, a failed image), ODL_E_NOMEM,
 * ODL_E_CUDA. */
ODL_API odl_status odl_gpu_prep_host_image(odl_gpu_prep_batch *b, int k, odl_image *out);
/* The batch's buffers go back to the prep (after its letterbox, if any, on the caller's stream). */
ODL_API void odl_gpu_prep_release(odl_gpu_prep_batch *b);

/* Where the feeder threads' time went (host clock, milliseconds summed over the batches they fed): a
 * feeder handles one batch at a time, so when busy_ms / feeders nears the caller's wall time the feeders
 * pace the pipeline, and the largest phase says why. */
typedef struct odl_gpu_prep_stats {
    int feeders; /* feeder threads running */
    int64_t batches, images_nvjpeg, images_cpu; /* images by the decoder that ended up taking them */
    double stage1_wait_ms; /* waiting for the pool's file reads, header parses and plans of the batch */
    double nvjpeg_check_ms; /* nvJPEG's own header checks of its candidates */
    double reuse_ms;       /* waiting for the slot's previous letterbox and uploads; growing its arenas */
    double nvjpeg_call_ms; /* inside nvjpegDecodeBatchedInitialize + nvjpegDecodeBatched (the host's part) */
    double stage2_wait_ms; /* waiting for the batch's CPU decodes (its CPU share and fallbacks) */
    double upload_ms;      /* queuing the CPU images' uploads and the batch's ready event */
    double busy_ms;        /* the feeders' whole time on their batches: the phases above and the rest */
} odl_gpu_prep_stats;
/* A snapshot of p's statistics (taken under its lock: callable while batches are in flight). */
ODL_API void odl_gpu_prep_get_stats(odl_gpu_prep *p, odl_gpu_prep_stats *out);

#ifdef __cplusplus
}
#endif
#endif
