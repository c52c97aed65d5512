/* nvJPEG through dlopen (include/odl/nvjpeg.h). The types, constants and signatures used are declared
 * here from NVIDIA's documented API (docs.nvidia.com/cuda/nvjpeg: nvjpegCreateEx, the batched decode,
 * the JPEG stream parser), checked against nvjpeg.h of the nvidia-nvjpeg 13.3 wheel; the build needs no
 * nvJPEG header or library. Which images go to nvJPEG follows torchvision's decode_jpegs_cuda (a parsed
 * header, then nvjpegDecodeBatchedSupported on the hardware backend). */
#include "odl/nvjpeg.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/device.h"
#include "odl/env.h"

/* ---- from nvjpeg.h ---- */
typedef int nvjpegStatus_t;
enum {
    NVJPEG_STATUS_SUCCESS = 0,
    NVJPEG_STATUS_INVALID_PARAMETER = 2,
    NVJPEG_STATUS_BAD_JPEG = 3,
    NVJPEG_STATUS_JPEG_NOT_SUPPORTED = 4,
    NVJPEG_STATUS_ARCH_MISMATCH = 7,
    NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED = 9,
    NVJPEG_STATUS_INCOMPLETE_BITSTREAM = 10,
};
enum { NVJPEG_BACKEND_GPU_HYBRID = 2, NVJPEG_BACKEND_HARDWARE = 3 };
enum { NVJPEG_OUTPUT_RGBI = 5 };
#define NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION (1u << 5)
enum { NVJPEG_CSS_411 = 4, NVJPEG_CSS_410 = 5, NVJPEG_CSS_UNKNOWN = -1 };
enum { NVJPEG_ENCODING_BASELINE_DCT = 0xc0, NVJPEG_ENCODING_EXTENDED_SEQUENTIAL_DCT_HUFFMAN = 0xc1 };
enum { MAJOR_VERSION = 0, MINOR_VERSION = 1, PATCH_LEVEL = 2 }; /* libraryPropertyType (library_types.h) */
#define NVJPEG_MAX_COMPONENT 4
typedef struct {
    unsigned char *channel[NVJPEG_MAX_COMPONENT];
    size_t pitch[NVJPEG_MAX_COMPONENT];
} nvjpegImage_t;
typedef struct nvjpegHandle *nvjpegHandle_t;
typedef struct nvjpegJpegState *nvjpegJpegState_t;
typedef struct nvjpegJpegStream *nvjpegJpegStream_t;
typedef void *cudaStream_t;

static const char *status_name(nvjpegStatus_t s) {
    static const char *names[] = {"NVJPEG_STATUS_SUCCESS", "NVJPEG_STATUS_NOT_INITIALIZED", "NVJPEG_STATUS_INVALID_PARAMETER",
                                  "NVJPEG_STATUS_BAD_JPEG", "NVJPEG_STATUS_JPEG_NOT_SUPPORTED",
                                  "NVJPEG_STATUS_ALLOCATOR_FAILURE", "NVJPEG_STATUS_EXECUTION_FAILED",
                                  "NVJPEG_STATUS_ARCH_MISMATCH", "NVJPEG_STATUS_INTERNAL_ERROR",
                                  "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED", "NVJPEG_STATUS_INCOMPLETE_BITSTREAM"};
    return s >= 0 && s < (int)(sizeof names / sizeof *names) ? names[s] : "unknown nvJPEG status";
}

struct odl_nvjpeg {
    void *lib;
    char path[1024], version[32];
    odl_nvjpeg_backend backend;
    int interpolated; /* the handle took NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION */
    nvjpegHandle_t h;
    nvjpegJpegState_t state;
    nvjpegJpegStream_t stream;
    nvjpegImage_t *out; /* batch descriptors, grown on demand */
    int out_cap;
    nvjpegStatus_t (*GetProperty)(int, int *);
    nvjpegStatus_t (*CreateEx)(int, void *, void *, unsigned, nvjpegHandle_t *);
    nvjpegStatus_t (*Destroy)(nvjpegHandle_t);
    nvjpegStatus_t (*StateCreate)(nvjpegHandle_t, nvjpegJpegState_t *);
    nvjpegStatus_t (*StateDestroy)(nvjpegJpegState_t);
    nvjpegStatus_t (*StreamCreate)(nvjpegHandle_t, nvjpegJpegStream_t *);
    nvjpegStatus_t (*StreamDestroy)(nvjpegJpegStream_t);
    nvjpegStatus_t (*ParseHeader)(nvjpegHandle_t, const unsigned char *, size_t, nvjpegJpegStream_t);
    nvjpegStatus_t (*Encoding)(nvjpegJpegStream_t, int *);
    nvjpegStatus_t (*Components)(nvjpegJpegStream_t, unsigned *);
    nvjpegStatus_t (*Subsampling)(nvjpegJpegStream_t, int *);
    nvjpegStatus_t (*Supported)(nvjpegHandle_t, nvjpegJpegStream_t, int *);
    nvjpegStatus_t (*BatchedInit)(nvjpegHandle_t, nvjpegJpegState_t, int, int, int);
    nvjpegStatus_t (*Batched)(nvjpegHandle_t, nvjpegJpegState_t, const unsigned char *const *, const size_t *,
                              nvjpegImage_t *, cudaStream_t);
};

/* The library: ODL_NVJPEG_LIBRARY, else the first of these that dlopen takes. ODL_NVJPEG_HINTS (from the
 * build: the toolkit's library folder, a pip wheel's) is a ':'-separated list of folders. */
static void *load_library(char *path, size_t cap, char *tried, size_t tcap) {
    const char *want = odl_env_str(ODL_ENV_NVJPEG_LIBRARY);
    tried[0] = 0;
    if (want[0]) {
        snprintf(path, cap, "%s", want);
        void *l = dlopen(want, RTLD_NOW | RTLD_LOCAL);
        if (!l) snprintf(tried, tcap, "%s", dlerror());
        return l;
    }
    static const char *names[] = {"libnvjpeg.so.13", "libnvjpeg.so.12"};
#ifndef ODL_NVJPEG_HINTS
#define ODL_NVJPEG_HINTS ""
#endif
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s%s/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib", ODL_NVJPEG_HINTS,
             ODL_NVJPEG_HINTS[0] ? ":" : "");
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        snprintf(path, cap, "%s", names[k]);
        void *l = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (l) return l;
        char *save = NULL, buf[4096];
        snprintf(buf, sizeof buf, "%s", dirs);
        for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
            snprintf(path, cap, "%s/%s", d, names[k]);
            if ((l = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return l;
        }
    }
    snprintf(tried, tcap, "no libnvjpeg.so.13 or .12 on the loader's path nor in %s (set ODL_NVJPEG_LIBRARY)", dirs);
    return NULL;
}

/* nvjpegCreateEx with chroma upsampling by interpolation, which is what libjpeg's "fancy upsampling"
 * (the CPU path, cv2.imread) does; without the flag where the library does not take it. */
static nvjpegStatus_t create(odl_nvjpeg *j, int backend) {
    j->h = NULL;
    nvjpegStatus_t r = j->CreateEx(backend, NULL, NULL, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, &j->h);
    j->interpolated = r == NVJPEG_STATUS_SUCCESS;
    if (r == NVJPEG_STATUS_INVALID_PARAMETER) {
        j->h = NULL;
        r = j->CreateEx(backend, NULL, NULL, 0, &j->h);
    }
    if (r != NVJPEG_STATUS_SUCCESS) j->h = NULL;
    return r;
}

#define SYM(field, name)                                                                          \
    do {                                                                                          \
        *(void **)&j->field = dlsym(j->lib, name);                                                \
        if (!j->field) {                                                                          \
            s = ODL_ERR(ODL_E_UNSUPPORTED, "nvJPEG not available: %s lacks %s", j->path, name);   \
            goto fail;                                                                            \
        }                                                                                         \
    } while (0)
#define NVJ(call, code)                                                                                     \
    do {                                                                                                    \
        nvjpegStatus_t r_ = (call);                                                                         \
        if (r_ != NVJPEG_STATUS_SUCCESS) {                                                                  \
            s = ODL_ERR(code, "nvJPEG (%s): %s: %s (%d)", j->path, #call, status_name(r_), r_);              \
            goto fail;                                                                                      \
        }                                                                                                   \
    } while (0)

odl_status odl_nvjpeg_open(odl_nvjpeg **out) {
    if (!out) return ODL_ERR(ODL_E_INVAL, "odl_nvjpeg_open: NULL output");
    *out = NULL;
    if (!odl_env_bool(ODL_ENV_NVJPEG)) return ODL_ERR(ODL_E_UNSUPPORTED, "nvJPEG not available: turned off (ODL_NVJPEG=0)");
    const char *force = odl_env_str(ODL_ENV_NVJPEG_BACKEND);
    if (force[0] && strcmp(force, "hardware") && strcmp(force, "gpu-hybrid"))
        return ODL_ERR(ODL_E_UNSUPPORTED, "nvJPEG not available: ODL_NVJPEG_BACKEND='%s' is not hardware or gpu-hybrid",
                       force);
    odl_nvjpeg *j = calloc(1, sizeof *j);
    if (!j) return ODL_ERR(ODL_E_NOMEM, "nvJPEG handle");
    odl_status s = ODL_OK;
    char tried[4400];
    if (!(j->lib = load_library(j->path, sizeof j->path, tried, sizeof tried))) {
        s = ODL_ERR(ODL_E_UNSUPPORTED, "nvJPEG not available: %s", tried);
        goto fail;
    }
    SYM(GetProperty, "nvjpegGetProperty");
    SYM(CreateEx, "nvjpegCreateEx");
    SYM(Destroy, "nvjpegDestroy");
    SYM(StateCreate, "nvjpegJpegStateCreate");
    SYM(StateDestroy, "nvjpegJpegStateDestroy");
    SYM(StreamCreate, "nvjpegJpegStreamCreate");
    SYM(StreamDestroy, "nvjpegJpegStreamDestroy");
    SYM(ParseHeader, "nvjpegJpegStreamParseHeader");
    SYM(Encoding, "nvjpegJpegStreamGetJpegEncoding");
    SYM(Components, "nvjpegJpegStreamGetComponentsNum");
    SYM(Subsampling, "nvjpegJpegStreamGetChromaSubsampling");
    SYM(Supported, "nvjpegDecodeBatchedSupported");
    SYM(BatchedInit, "nvjpegDecodeBatchedInitialize");
    SYM(Batched, "nvjpegDecodeBatched");
    int v[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) j->GetProperty(k, &v[k]);
    snprintf(j->version, sizeof j->version, "%d.%d.%d", v[0], v[1], v[2]);
    /* The hardware backend where the GPU has JPEG engines; the hybrid one where nvJPEG says the
     * architecture has none (ARCH_MISMATCH; IMPLEMENTATION_NOT_SUPPORTED from builds without it). */
    nvjpegStatus_t r = NVJPEG_STATUS_ARCH_MISMATCH;
    if (strcmp(force, "gpu-hybrid")) {
        r = create(j, NVJPEG_BACKEND_HARDWARE);
        j->backend = ODL_NVJPEG_HARDWARE;
    }
    if ((r == NVJPEG_STATUS_ARCH_MISMATCH || r == NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED) && strcmp(force, "hardware")) {
        r = create(j, NVJPEG_BACKEND_GPU_HYBRID);
        j->backend = ODL_NVJPEG_GPU_HYBRID;
    }
    if (r != NVJPEG_STATUS_SUCCESS) {
        s = ODL_ERR(ODL_E_NODEV, "nvJPEG %s (%s): nvjpegCreateEx(%s): %s (%d)", j->version, j->path,
                    odl_nvjpeg_backend_name(j->backend), status_name(r), r);
        goto fail;
    }
    NVJ(j->StateCreate(j->h, &j->state), ODL_E_NODEV);
    NVJ(j->StreamCreate(j->h, &j->stream), ODL_E_NODEV);
    *out = j;
    return ODL_OK;
fail:
    odl_nvjpeg_close(j);
    return s;
}

void odl_nvjpeg_close(odl_nvjpeg *j) {
    if (!j) return;
    if (j->stream) j->StreamDestroy(j->stream);
    if (j->state) j->StateDestroy(j->state);
    if (j->h) j->Destroy(j->h);
    if (j->lib) dlclose(j->lib);
    free(j->out);
    free(j);
}

odl_nvjpeg_backend odl_nvjpeg_backend_of(const odl_nvjpeg *j) { return j->backend; }
const char *odl_nvjpeg_backend_name(odl_nvjpeg_backend b) { return b == ODL_NVJPEG_HARDWARE ? "hardware" : "gpu-hybrid"; }
const char *odl_nvjpeg_library(const odl_nvjpeg *j) { return j->path; }
const char *odl_nvjpeg_version(const odl_nvjpeg *j) { return j->version; }
int odl_nvjpeg_interpolated(const odl_nvjpeg *j) { return j->interpolated; }

int odl_nvjpeg_supported(odl_nvjpeg *j, const uint8_t *data, size_t n) {
    if (!j || !data || n < 4) return 0;
    if (j->ParseHeader(j->h, data, n, j->stream) != NVJPEG_STATUS_SUCCESS) return 0;
    int enc = 0, css = NVJPEG_CSS_UNKNOWN;
    unsigned comps = 0;
    if (j->Encoding(j->stream, &enc) != NVJPEG_STATUS_SUCCESS || j->Components(j->stream, &comps) != NVJPEG_STATUS_SUCCESS ||
        j->Subsampling(j->stream, &css) != NVJPEG_STATUS_SUCCESS)
        return 0;
    if (enc != NVJPEG_ENCODING_BASELINE_DCT && enc != NVJPEG_ENCODING_EXTENDED_SEQUENTIAL_DCT_HUFFMAN) return 0;
    if ((comps != 1 && comps != 3) || css == NVJPEG_CSS_UNKNOWN) return 0;
    if (j->backend != ODL_NVJPEG_HARDWARE) return 1;
    if (css == NVJPEG_CSS_411 || css == NVJPEG_CSS_410) return 0; /* not on the hardware decoder (nvjpeg.h) */
    int unsupported = 1; /* nvjpegDecodeBatchedSupported: 0 means supported */
    return j->Supported(j->h, j->stream, &unsupported) == NVJPEG_STATUS_SUCCESS && unsupported == 0;
}

odl_status odl_nvjpeg_decode_batch(odl_nvjpeg *j, int n, const uint8_t *const *data, const size_t *len,
                                   uint8_t *const *dst, const size_t *pitch, odl_stream st) {
    if (!j || n < 0 || (n > 0 && (!data || !len || !dst || !pitch)))
        return ODL_ERR(ODL_E_INVAL, "odl_nvjpeg_decode_batch: bad arguments");
    if (n == 0) return ODL_OK;
    if (n > j->out_cap) {
        nvjpegImage_t *o = realloc(j->out, sizeof *o * (size_t)n);
        if (!o) return ODL_ERR(ODL_E_NOMEM, "nvJPEG batch of %d", n);
        j->out = o;
        j->out_cap = n;
    }
    for (int k = 0; k < n; k++) {
        memset(&j->out[k], 0, sizeof j->out[k]);
        j->out[k].channel[0] = dst[k];
        j->out[k].pitch[0] = pitch[k];
    }
    odl_status s = ODL_OK;
    /* Two reasons to wait on the host for the work already queued on st, on either backend: the JPEG
     * engines can write dst before it has run (an upload into the same arena), and a device-side wait
     * does not order them (torchcodec#1634, on H100); and nvjpegDecodeBatchedInitialize resets the
     * decoder state that the previous call's decode, queued on st, may still be using (nvjpeg.h: "Resets
     * and initializes batch decoder"; torchvision drains the stream around its batched call too). */
    if (st) ODL_CHECK(odl_stream_synchronize(st));
    NVJ(j->BatchedInit(j->h, j->state, n, 1, NVJPEG_OUTPUT_RGBI), ODL_E_CUDA);
    nvjpegStatus_t r = j->Batched(j->h, j->state, (const unsigned char *const *)data, len, j->out, (cudaStream_t)st);
    if (r != NVJPEG_STATUS_SUCCESS)
        return ODL_ERR(r == NVJPEG_STATUS_BAD_JPEG || r == NVJPEG_STATUS_JPEG_NOT_SUPPORTED ||
                               r == NVJPEG_STATUS_INCOMPLETE_BITSTREAM
                           ? ODL_E_FORMAT
                           : ODL_E_CUDA,
                       "nvJPEG (%s): nvjpegDecodeBatched of %d images: %s (%d)", odl_nvjpeg_backend_name(j->backend), n,
                       status_name(r), r);
    return ODL_OK;
fail:
    return s;
}
