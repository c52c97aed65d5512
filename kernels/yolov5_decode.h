/* YOLOv5 Detect decoding of one head value, shared by the backends' yolov5_detect_decode entries (CPU
 * reference kernels/cpu/yolov5_detect.c; CUDA kernels/cuda/yolov5_detect.cu, and the float16 head
 * epilogue of kernels/cuda/conv2d_f16.cu), so that every path does the same float operations. Private
 * to kernels/. YOLOv5 v7.0 models/yolo.py Detect.forward, inference branch:
 *   s = sigmoid(v); x, y = (s * 2 + (grid - 0.5)) * stride; w, h = (s * 2)^2 * anchor; objectness and
 *   class scores = s.
 * v: the head output of channel k (0..4 + nc) of one anchor at grid cell (x, y); gx = (float)x - 0.5f,
 * gy = (float)y - 0.5f; anchor: that anchor's width (k == 2) or height (k == 3) in input pixels, ignored
 * for other k. */
#ifndef ODL_KERNELS_YOLOV5_DECODE_H
#define ODL_KERNELS_YOLOV5_DECODE_H

#include <math.h>

#ifdef __CUDACC__
#define YOLOV5_DECODE_FN static __host__ __device__ __forceinline__
#else
#define YOLOV5_DECODE_FN static inline
#endif

YOLOV5_DECODE_FN float yolov5_decode(float v, int k, float gx, float gy, float stride, float anchor) {
    const float s = 1.0f / (1.0f + expf(-v));
    if (k == 0) return (s * 2.0f + gx) * stride;
    if (k == 1) return (s * 2.0f + gy) * stride;
    if (k < 4) {
        const float t = s * 2.0f;
        return t * t * anchor;
    }
    return s;
}

#endif
