/* Internals of the YOLOv5 model shared by models/yolov5.c (loading, buffers, the float32 NCHW forward)
 * and models/yolov5_half.c (the float16 NHWC forward). Not installed. */
#ifndef ODL_MODELS_YOLOV5_IMPL_H
#define ODL_MODELS_YOLOV5_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "odl/backend.h"
#include "odl/device.h"
#include "odl/tensor.h"
#include "odl/yolov5.h"

#define Y_MAX_FROM 8
#define Y_MAX_LEVELS 8
#define Y_MAX_ANCHORS 16
#define Y_NSCRATCH 6


typedef struct yconv {
    int c1, c2, k, s, p;
    odl_tensor w, b; /* folded weight [c2, c1, k, k] and bias [c2] on the model's device */
    odl_tensor wh;   /* half mode: the folded weight as float16 KRSC [c2, k, k, c1p] */
    int c1p;         /* half mode: input channels rounded up to a multiple of 8 (zero weights) */
} yconv;

/* Half mode: an NHWC float16 activation [N, h, w, C] with pixel stride ld (a channel slice when ld > C). */
typedef struct hview {
    odl_half *p;
    int C;
    int64_t ld;
} hview;

typedef enum { YL_CONV, YL_C3, YL_SPPF, YL_UPSAMPLE, YL_CONCAT, YL_DETECT } ytype;
static const char *const YTYPE_NAMES[] = {"Conv", "C3", "SPPF", "Upsample", "Concat", "Detect"};

typedef struct ylayer {
    ytype type;
    int nfrom;
    int from[Y_MAX_FROM]; /* absolute layer indices; -1 = the network input */
    int c_out;
    int down;             /* output size = input size / down */
    yconv conv;           /* Conv */
    yconv cv1, cv2, cv3;  /* C3: cv1, cv2, cv3; SPPF: cv1, cv2 */
    int nb, shortcut;     /* C3 bottlenecks */
    yconv *bcv1, *bcv2;
    int pool_k;           /* SPPF */
    yconv *heads;         /* Detect: one 1x1 convolution with bias per level */
    odl_tensor out;
    size_t out_cap;
    /* half mode */
    hview hv;          /* this layer's output (into hbuf, or a slice of the Concat layer cat_into's hbuf) */
    odl_tensor hbuf;
    size_t hbuf_cap;
    int cat_into;      /* index of the Concat layer whose buffer holds this output, or -1 */
    int cat_off;       /* channel offset in that buffer */
} ylayer;

/* A CUDA graph of the forward for one input size, float16 or not, and input buffer (models/yolov5_graph.c). */
#define Y_GRAPHS 8
typedef struct ygraph {
    int N, H, W, half;
    const void *x;  /* a caller's input buffer; NULL: the model's own (odl_yolov5_input) */
    uint64_t buf_gen, ws_epoch; /* the model's buf_gen and the backend's workspace epoch at the capture */
    uint64_t used;  /* the model's graph_clock at its last forward: the least recently used makes room */
    int failed;     /* the capture failed: op by op */
    struct odl_graph *g;
} ygraph;

/* Tensors waiting for their upload (the views to point into the arena once it exists). */
typedef struct ystage {
    unsigned char *host; /* the bytes, each tensor at a 256-byte aligned offset */
    size_t len, cap;
    odl_tensor **t;
    size_t *off;
    int n, ncap;
} ystage;

struct odl_yolov5 {
    odl_device dev;
    char path[1024];
    int nc, na, nl, no;
    int nlayers;
    ylayer *L;
    float strides[Y_MAX_LEVELS];
    float anchors[Y_MAX_LEVELS][Y_MAX_ANCHORS][2];
    char **names;
    int max_stride;
    int64_t n_params;
    int N, H, W; /* prepared input size (0 before the first prepare) */
    odl_tensor scratch[Y_NSCRATCH];
    size_t scratch_cap[Y_NSCRATCH];
    odl_tensor input;
    size_t input_cap;
    int half;           /* odl_yolov5_set_half */
    odl_event *prof;    /* odl_yolov5_set_profile: nlayers + 1 events, or NULL */
    int prof_done;      /* a profiled forward has been recorded */
    odl_tensor hinput;  /* half mode: the input as [N, H, W, 8] float16, or [N, H/2, W/2, 16] with s2d0 */
    int use_s2d0;       /* half mode: layer 0 runs as s2d0 on the space-to-depth input */
    yconv s2d0;         /* layer 0's 6x6 stride-2 convolution as 3x3 stride 1 over 16 channels (wh only; b is
                         * layer 0's bias, not owned) */
    size_t hinput_cap;
    /* Weights reach the device in one copy: while loading (and converting to half) each tensor's bytes
     * go to a host staging buffer and the tensor is a view into one device arena, filled by
     * yolov5_stage_commit: one allocation and one synchronous copy instead of two per convolution. */
    ystage stage;
    odl_tensor warena; /* the float32 weights and biases */
    odl_tensor harena; /* half mode: the float16 weights */
    uint64_t buf_gen; /* allocations of the forward's buffers (yolov5_buf_set): a captured graph's addresses hold
                       * while it is unchanged */
    /* odl_yolov5_set_graphs */
    int graphs_on;
    ygraph graphs[Y_GRAPHS];
    int n_graphs;
    uint64_t graph_clock;
    int64_t n_captured, n_replayed;
};

/* The forward's kernels for x on the current stream, op by op (a prepared model, no profiling checks). */
odl_status yolov5_forward_ops(odl_yolov5 *m, const odl_tensor *x);
/* The same through a graph of x's size when one can be had (models/yolov5_graph.c); graphs_on only. */
odl_status yolov5_graph_forward(odl_yolov5 *m, const odl_tensor *x);
/* Free every graph (set_graphs(0), set_half, free). */
void yolov5_graphs_drop(odl_yolov5 *m);


/* Detect decoding of level `level` through the backend's yolov5_detect_decode op (odl/backend.h; YOLOv5
 * v7.0 Detect.forward, inference branch) of a head [N, na * no, ny, nx] float32, or [N, ny, nx, na * no]
 * with nhwc (the CPU's float16 path), on the model's device and the current stream, into rows
 * [row_offset, row_offset + na * ny * nx) of out [N, rows_total, no]. The float16 path on CUDA decodes
 * inside the head convolution instead (yolov5_detect_head_f16). */
odl_status yolov5_detect_decode(const odl_yolov5 *m, const float *head, float *out, int ny, int nx, int64_t rows_total,
                                int64_t row_offset, int level, int nhwc);

/* Stage host data for t (dtype, shape): t gets its shape now and its memory (a view into the arena) at
 * the commit, which allocates *arena on the model's device, copies everything staged in one copy and
 * empties the stage. Errors: ODL_E_NOMEM, device errors. */
odl_status yolov5_stage(odl_yolov5 *m, odl_tensor *t, odl_dtype dtype, int ndim, const int64_t *shape, const void *host);
odl_status yolov5_stage_commit(odl_yolov5 *m, odl_tensor *arena);
void yolov5_stage_free(ystage *s);

/* Give t, one of m's buffers, the shape [a, b, c, d] (or 3-D when d < 0) of dtype, reusing its memory when
 * large enough; a new allocation counts in m->buf_gen. */
odl_status yolov5_buf_set(odl_yolov5 *m, odl_tensor *t, size_t *cap, odl_dtype dtype, int64_t a, int64_t b, int64_t c,
                          int64_t d);

/* Half mode (models/yolov5_half.c): sizes of the float16 buffers for inputs [N, 3, H, W]; the forward. */
odl_status yolov5_half_prepare(odl_yolov5 *m, int N, int H, int W);
odl_status yolov5_half_forward(odl_yolov5 *m, const odl_tensor *x);
/* Record profiling event k (0: before the first layer, i + 1: after layer i) when profiling. */
odl_status yolov5_prof_mark(odl_yolov5 *m, int k);
/* Release every half-mode buffer and weight. */
void yolov5_half_release(odl_yolov5 *m);
/* Layer output of the last half forward as NCHW float32 on the host (count = N*C*h*w floats). */
odl_status yolov5_half_layer_to_host(const odl_yolov5 *m, int layer, float *dst, size_t count);

#endif
