/* YOLOv5 (v6.x / v7.0 P5 detection models: n, s, m, l, x, any class count) for inference.
 *
 * The network is built from the description stored with the weights by tools/convert_yolov5.py (layer
 * list, depth and width multiples, anchors, strides, class names; the format is documented in that
 * script and in docs/yolov5.md), the way YOLOv5's models/yolo.py parse_model does:
 *   repeats n' = max(round(n * depth_multiple), 1) when n > 1; channels c2' = ceil(c2 * width_multiple / 8) * 8;
 *   Conv(c1, c2, k, s, p = k // 2) = SiLU(BN(conv)); Bottleneck(c, c, shortcut) = x + cv2(cv1(x)) (cv1 1x1,
 *   cv2 3x3; no add without shortcut); C3(c1, c2, n, shortcut) with c_ = c2 / 2:
 *   cv3(cat(m(cv1(x)), cv2(x))); SPPF(c1, c2, k) with c_ = c1 / 2: y0 = cv1(x), y1..y3 successive
 *   max-pools k x k stride 1 pad k // 2, cv2(cat(y0, y1, y2, y3)); nearest x2 Upsample; Concat along
 *   channels; Detect: a 1x1 convolution with bias per level, then the inference decoding.
 * Every shape the description implies is checked against the stored tensors. BatchNorm is folded into
 * each convolution at load (as YOLOv5's fuse_conv_and_bn, float32): s = gamma / sqrt(var + eps),
 * w' = w * s, b' = beta - gamma * mean / sqrt(var + eps); SiLU and the Bottleneck shortcut run in the
 * convolution's epilogue (odl_conv2d_fwd with act SiLU and a residual).
 *
 * Detect output (YOLOv5 v7.0 models/yolo.py Detect.forward, inference): [N, A, 5 + nc] float32 with
 * A = sum over levels l of na * ny_l * nx_l, rows ordered level, anchor, grid y, grid x; per row,
 * with s = sigmoid(head output): cx, cy = (s * 2 + (grid - 0.5)) * stride (input pixels),
 * w, h = (s * 2)^2 * anchor (input pixels), then objectness and nc class scores (s itself).
 *
 * Activations are allocated on the model's device by odl_yolov5_prepare for a batch and input size and
 * reused by every forward of that size or smaller (no allocation in the forward), which is what lets
 * the forward be captured into a CUDA graph.
 */
#ifndef ODL_YOLOV5_H
#define ODL_YOLOV5_H

#include "odl/api.h"
#include <stdint.h>

#include "odl/status.h"
#include "odl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct odl_yolov5 odl_yolov5;

/* Load weights written by tools/convert_yolov5.py onto `dev` and build the network.
 * Errors naming the path: ODL_E_NOTFOUND (no such file), ODL_E_FORMAT (not HDF5, or not YOLOv5
 * weights: e.g. another model's checkpoint, with a hint to run the converter; a description that is
 * malformed or disagrees with the stored tensor shapes, naming the layer and tensor), ODL_E_HDF5,
 * ODL_E_NOMEM, device errors. */
ODL_API odl_status odl_yolov5_load(const char *path, odl_device dev, odl_yolov5 **out);
/* odl_yolov5_load in two halves, so that a program can create the CUDA context on another thread while
 * the file is read (worker/infer.c): odl_yolov5_read reads, checks and folds the weights on the host
 * without any device call (errors as odl_yolov5_load's); odl_yolov5_upload then puts every weight on
 * `dev` in one allocation and one copy. Between the two only the description (classes, layers, strides,
 * parameter count) may be used, and odl_yolov5_free. Errors of the upload: ODL_E_INVAL (uploaded
 * already), ODL_E_NOMEM, device errors. */
ODL_API odl_status odl_yolov5_read(const char *path, odl_yolov5 **out);
ODL_API odl_status odl_yolov5_upload(odl_yolov5 *m, odl_device dev);
ODL_API void odl_yolov5_free(odl_yolov5 *m);

ODL_API odl_device odl_yolov5_device(const odl_yolov5 *m);
ODL_API int odl_yolov5_num_classes(const odl_yolov5 *m);
/* Class name, or "class<N>" style fallbacks never: NULL when out of range. */
ODL_API const char *odl_yolov5_class_name(const odl_yolov5 *m, int class_id);
ODL_API int odl_yolov5_num_layers(const odl_yolov5 *m);
/* "Conv", "C3", "SPPF", "Upsample", "Concat" or "Detect"; NULL when out of range. */
ODL_API const char *odl_yolov5_layer_type(const odl_yolov5 *m, int layer);
/* Largest stride (32 for P5 models): input height and width must be multiples of it. */
ODL_API int odl_yolov5_max_stride(const odl_yolov5 *m);
/* Parameter count after BatchNorm folding (weights + biases). */
ODL_API int64_t odl_yolov5_num_params(const odl_yolov5 *m);
/* Rows of the Detect output for an H x W input (25200 for 640 x 640 with 3 levels and 3 anchors). */
ODL_API int64_t odl_yolov5_num_predictions(const odl_yolov5 *m, int H, int W);

/* Allocate (or reuse, when large enough) every activation for inputs [N, 3, H, W]. Called by the
 * forward when needed; call it first to keep allocations out of a timed or captured region.
 * Errors: ODL_E_INVAL (H or W not a positive multiple of the max stride, N < 1), ODL_E_NOMEM. */
ODL_API odl_status odl_yolov5_prepare(odl_yolov5 *m, int N, int H, int W);

/* The model's own input buffer [N, 3, H, W] float32 on its device (prepared for that size); fill it
 * and pass it to odl_yolov5_forward. Valid until the next prepare of a larger size or free. */
ODL_API odl_status odl_yolov5_input(odl_yolov5 *m, int N, int H, int W, odl_tensor **x);

/* Run the network: x [N, 3, H, W] float32 on the model's device, RGB in [0, 1] (image / 255), NCHW.
 * *out (may be NULL) points to the model's Detect output [N, A, 5 + nc] on the device, valid until the
 * next forward. Asynchronous on CUDA (kernels on the current stream). */
ODL_API odl_status odl_yolov5_forward(odl_yolov5 *m, const odl_tensor *x, const odl_tensor **out);

/* The batch forward of a host caller (the CPU image paths of --task=infer and eval): in [N, 3, H, W]
 * float32 NCHW on the host, RGB in [0, 1], goes to the model's input; the Detect output [N, A, 5 + nc]
 * comes back to *out on the host, which grows (malloc; *cap floats) when too small and stays the
 * caller's to free. *rows = A, *no = 5 + nc. Synchronous. Errors: those of odl_yolov5_forward,
 * ODL_E_NOMEM. */
ODL_API odl_status odl_yolov5_forward_host(odl_yolov5 *m, const float *in, int N, int H, int W, float **out, size_t *cap,
                                           int64_t *rows, int *no);

/* Output of layer `layer` of the last forward ([N, C, H, W]; for Detect [N, A, 5 + nc]), or NULL.
 * In half mode only the Detect output is a tensor (float32); the others are NULL (use
 * odl_yolov5_layer_output_host). */
ODL_API const odl_tensor *odl_yolov5_layer_output(const odl_yolov5 *m, int layer);

/* Copy layer `layer`'s output of the last forward to host memory as float32, NCHW [N, C, H, W] (Detect:
 * [N, A, 5 + nc]); count is the number of floats of dst and must equal the output's element count.
 * Synchronous. Works in both precisions. Errors: ODL_E_INVAL (no such layer, no forward yet, wrong
 * count), device errors. */
ODL_API odl_status odl_yolov5_layer_output_host(const odl_yolov5 *m, int layer, float *dst, size_t count);

/* Half precision, as YOLOv5's detect.py --half (model.half()): from the next forward on, the network
 * runs in float16 with the activations NHWC ([N, H, W, C], channels padded to 8 for the 3-channel input),
 * tensor-core convolutions on CUDA (kernels/cuda/conv2d_f16.cu) and the CPU backend's float16 reference
 * otherwise. Weights are the float32 BatchNorm-folded ones rounded to half; biases, accumulation and
 * activations are float32 inside each convolution, whose output is rounded once to half; the Detect heads
 * write float32 and the decoding is float32, so the Detect output stays [N, A, 5 + nc] float32. Input
 * and output of odl_yolov5_forward are the same as in float32 mode. Switching frees the activations of
 * the other mode. Errors: ODL_E_UNSUPPORTED (the backend has no float16 kernels; a layer whose input
 * channel count is not a multiple of 8, other than the 3-channel image), ODL_E_NOMEM. */
ODL_API odl_status odl_yolov5_set_half(odl_yolov5 *m, int half);

/* CUDA graphs of the forward (odl/graph.h), off by default. With on = 1 on a CUDA model, odl_yolov5_forward
 * keeps a graph per input size [N, 3, H, W], float16 or not, and input buffer
 * (the model's own, odl_yolov5_input, or a caller's; up to 8, the least recently used making room for a
 * ninth): the first forward of a size runs op by op (its lazy set-up: the backend's workspace, kernel
 * attributes), the second is captured and launched, later ones replay it -- one launch instead of one per
 * kernel (one per convolution and more), which is what bounds a small batch and what a busy host thread slows.
 * Output and outputs of every layer are bitwise those of the op-by-op forward. A graph is captured again
 * when a prepare moved any of the model's buffers or the backend freed workspace memory
 * (odl_backend.workspace_epoch); the matmul precision (odl/precision.h) is set once per process before
 * any forward, as that header says, and is not part of the key; a capture that fails (CUDA's reason in one warning)
 * leaves that size op by op. No effect on the CPU or while profiling (odl_yolov5_set_profile); on = 0
 * frees the graphs. The caller queues the forward on the same stream as ever (odl_stream_current), and
 * must not write the input while a replay may still read it, as with the op-by-op forward.
 * Errors: ODL_E_INVAL (NULL model). */
ODL_API odl_status odl_yolov5_set_graphs(odl_yolov5 *m, int on);
/* Graphs captured and replays since the load (0 and 0 until graphs are turned on; kept across
 * set_graphs(m, 0) and set_half): for logs and tests. */
ODL_API void odl_yolov5_graph_counts(const odl_yolov5 *m, int64_t *captured, int64_t *replayed);

/* Per-layer timing for benchmarks (CUDA only): with on = 1, every later forward records an event before
 * its first layer and after each layer on the current stream (do not capture such a forward into a graph).
 * odl_yolov5_layer_ms then waits for the last forward and gives each layer's milliseconds in ms[0..n)
 * (layer 0 includes the input's conversion in half mode). Errors: ODL_E_UNSUPPORTED (not a CUDA model),
 * ODL_E_INVAL (no timed forward yet, n > layers), event errors. */
ODL_API odl_status odl_yolov5_set_profile(odl_yolov5 *m, int on);
ODL_API odl_status odl_yolov5_layer_ms(const odl_yolov5 *m, float *ms, int n);
ODL_API int odl_yolov5_is_half(const odl_yolov5 *m);

#ifdef __cplusplus
}
#endif
#endif
