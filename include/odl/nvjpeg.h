/* nvJPEG through dlopen: batched JPEG decoding on the GPU, with no build or link dependency on nvJPEG
 * (the few types and calls used are declared in datasets/nvjpeg.c from NVIDIA's documented API,
 * docs.nvidia.com/cuda/nvjpeg), so binaries run and tests pass where nvJPEG is absent.
 *
 * Backends: the hardware decoder (NVJPEG_BACKEND_HARDWARE: the JPEG engines of A100, H100, H200...)
 * where the GPU has one, else the GPU-assisted hybrid one (NVJPEG_BACKEND_GPU_HYBRID), chosen when
 * nvjpegCreateEx reports NVJPEG_STATUS_ARCH_MISMATCH for the hardware backend (as torchvision's
 * decode_jpeg does). Output: interleaved RGB, 8 bits.
 *
 * The library: $ODL_NVJPEG_LIBRARY when set (tests use a stand-in), else libnvjpeg.so.13 (then .12) on
 * the loader's path, in the CUDA toolkit the build found, under /usr/local/cuda, or in a pip
 * `nvidia-nvjpeg` wheel found at configure time (docs/eval.md, "Decoding"). ODL_NVJPEG=0 turns it off;
 * ODL_NVJPEG_BACKEND=hardware|gpu-hybrid forces a backend.
 *
 * A handle is used by one thread at a time, with the CUDA device it was opened for current. */
#ifndef ODL_NVJPEG_H
#define ODL_NVJPEG_H

#include <stddef.h>
#include <stdint.h>

#include "odl/api.h"
#include "odl/device.h"
#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct odl_nvjpeg odl_nvjpeg;

typedef enum odl_nvjpeg_backend {
    ODL_NVJPEG_HARDWARE = 1,  /* the GPU's JPEG engines */
    ODL_NVJPEG_GPU_HYBRID = 2 /* Huffman on the CPU (GPU for large batches), the rest on the GPU */
} odl_nvjpeg_backend;

/* Load nvJPEG and create its handle, decoder state and stream parser for the current CUDA device.
 * Errors: ODL_E_UNSUPPORTED "nvJPEG not available: <why>" (ODL_NVJPEG=0, no library found with the
 * places tried, a symbol missing, a bad ODL_NVJPEG_BACKEND), ODL_E_NODEV when nvjpegCreateEx fails (no
 * usable GPU or driver; the status is named). */
ODL_API odl_status odl_nvjpeg_open(odl_nvjpeg **out);
ODL_API void odl_nvjpeg_close(odl_nvjpeg *j);

ODL_API odl_nvjpeg_backend odl_nvjpeg_backend_of(const odl_nvjpeg *j);
/* "hardware" or "gpu-hybrid". */
ODL_API const char *odl_nvjpeg_backend_name(odl_nvjpeg_backend b);
/* The library file that was loaded, and its version "13.0.1". */
ODL_API const char *odl_nvjpeg_library(const odl_nvjpeg *j);
ODL_API const char *odl_nvjpeg_version(const odl_nvjpeg *j);
/* 1 when the handle took NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION (asked for because libjpeg's fancy
 * upsampling, the CPU path's, interpolates chroma too), 0 where the library refused the flag. */
ODL_API int odl_nvjpeg_interpolated(const odl_nvjpeg *j);

/* 1 when the batched decoder takes this JPEG: its header parses (nvjpegJpegStreamParseHeader), it is
 * baseline or extended sequential Huffman with 1 or 3 components in a known chroma subsampling, and on
 * the hardware backend nvjpegDecodeBatchedSupported accepts it; 0 otherwise (progressive, CMYK/YCCK,
 * lossless, 4:1:1 on hardware, a header nvJPEG rejects): such an image is for the CPU decoder. */
ODL_API int odl_nvjpeg_supported(odl_nvjpeg *j, const uint8_t *data, size_t n);

/* Decode n JPEGs (host memory) at once into interleaved RGB: image k, w x h as its header says (no EXIF
 * orientation), at dst[k] in device memory with rows pitch[k] >= 3 w bytes apart, queued on stream s.
 * The host buffers must stay valid until the work on s is done. The call first waits on the host for the
 * work already queued on s: NVIDIA's JPEG engines do not order their writes after it (seen on H100 by
 * torchcodec, meta-pytorch/torchcodec#1634, and pytorch/vision#9606), and the batch initialisation resets
 * the decoder state that the previous call's decode may still be using. Errors:
 * ODL_E_FORMAT (a bitstream the
 * decoder rejects) or ODL_E_CUDA (an execution failure), naming the nvJPEG call and status; the batch
 * as a whole has failed then (the caller decodes its images another way). */
ODL_API odl_status odl_nvjpeg_decode_batch(odl_nvjpeg *j, int n, const uint8_t *const *data, const size_t *len,
                                           uint8_t *const *dst, const size_t *pitch, odl_stream s);

#ifdef __cplusplus
}
#endif
#endif
