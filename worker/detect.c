/* Batched YOLOv5 detection (worker/detect.h). */
#include "worker/detect.h"

#include <stdlib.h>
#include <string.h>

#include "odl/clock.h"
#include "odl/device.h"
#include "odl/tensor.h"

odl_status odl_detector_init(odl_detector *d, odl_yolov5 *net, int backend_post) {
    memset(d, 0, sizeof *d);
    d->net = net;
    d->dev = odl_yolov5_device(net);
    if (d->dev.type == ODL_DEV_CUDA || backend_post) {
        if (!(d->be = odl_backend_for(d->dev))) return ODL_ERR(ODL_E_NODEV, "%s", odl_error_msg_user());
    }
    return ODL_OK;
}

static void free_batch_bufs(odl_detector *d) {
    odl_mem_free(d->dev, d->off);
    odl_mem_free(d->dev, d->geo);
    odl_mem_free(d->dev, d->cnt);
    odl_mem_free(d->dev, d->out);
    odl_host_free_pinned(d->h_off);
    odl_host_free_pinned(d->h_geo);
    odl_host_free_pinned(d->h_cnt);
    odl_host_free_pinned(d->h_out);
    d->off = d->h_off = NULL;
    d->geo = d->h_geo = d->cnt = d->h_cnt = NULL;
    d->out = d->h_out = NULL;
    d->cap_n = d->cap_det = 0;
}

void odl_detector_free(odl_detector *d) {
    if (d->be) {
        odl_mem_free(d->dev, d->src);
        free_batch_bufs(d);
    }
    free(d->h_pred);
    memset(d, 0, sizeof *d);
}

/* The backend's buffers for n images of src_bytes in all, max_det boxes each. */
static odl_status reserve(odl_detector *d, int n, size_t src_bytes, int max_det) {
    if (src_bytes > d->src_cap) {
        odl_mem_free(d->dev, d->src);
        d->src = NULL;
        d->src_cap = 0;
        ODL_CHECK(odl_mem_alloc(d->dev, src_bytes, (void **)&d->src));
        d->src_cap = src_bytes;
    }
    if (n <= d->cap_n && max_det <= d->cap_det) return ODL_OK;
    free_batch_bufs(d);
    const size_t boxes = sizeof(float) * 6 * (size_t)max_det * (size_t)n;
    ODL_CHECK(odl_mem_alloc(d->dev, sizeof(int64_t) * (size_t)n, (void **)&d->off));
    ODL_CHECK(odl_mem_alloc(d->dev, sizeof(int32_t) * 4 * (size_t)n, (void **)&d->geo));
    ODL_CHECK(odl_mem_alloc(d->dev, sizeof(int32_t) * (size_t)n, (void **)&d->cnt));
    ODL_CHECK(odl_mem_alloc(d->dev, boxes, (void **)&d->out));
    ODL_CHECK(odl_host_alloc_pinned(sizeof(int64_t) * (size_t)n, (void **)&d->h_off));
    ODL_CHECK(odl_host_alloc_pinned(sizeof(int32_t) * 4 * (size_t)n, (void **)&d->h_geo));
    ODL_CHECK(odl_host_alloc_pinned(sizeof(int32_t) * (size_t)n, (void **)&d->h_cnt));
    ODL_CHECK(odl_host_alloc_pinned(boxes, (void **)&d->h_out));
    d->cap_n = n;
    d->cap_det = max_det;
    return ODL_OK;
}

static odl_status host_pred(odl_detector *d, size_t n_floats) {
    if (d->h_pred_cap >= n_floats) return ODL_OK;
    free(d->h_pred);
    d->h_pred_cap = 0;
    if (!(d->h_pred = malloc(sizeof(float) * n_floats))) return ODL_ERR(ODL_E_NOMEM, "output batch of %zu floats", n_floats);
    d->h_pred_cap = n_floats;
    return ODL_OK;
}

/* The network's input for the batch: the host's CHW floats copied, or the backend's letterbox of the
 * uint8 images. */
static odl_status input(odl_detector *d, const odl_detect_batch *b, odl_tensor **x) {
    const size_t per = (size_t)3 * b->H * b->W;
    ODL_CHECK(odl_yolov5_input(d->net, b->n, b->H, b->W, x));
    if (b->chw) return odl_tensor_copy_from_host(*x, b->chw, sizeof(float) * per * b->n);
    if (!d->be) return ODL_ERR(ODL_E_INVAL, "uint8 images to detect on need a backend's letterbox");
    const odl_stream st = odl_stream_current();
    for (int i = 0; i < b->n; i++) {
        d->h_off[i] = (int64_t)(per * i);
        d->h_geo[4 * i] = b->res[i].geo.unpad_w;
        d->h_geo[4 * i + 1] = b->res[i].geo.unpad_h;
        d->h_geo[4 * i + 2] = b->res[i].geo.left;
        d->h_geo[4 * i + 3] = b->res[i].geo.top;
    }
    ODL_CHECK(odl_memcpy_async(d->src, d->dev, b->u8, odl_cpu(), per * b->n, st));
    ODL_CHECK(odl_memcpy_async(d->off, d->dev, d->h_off, odl_cpu(), sizeof(int64_t) * b->n, st));
    ODL_CHECK(odl_memcpy_async(d->geo, d->dev, d->h_geo, odl_cpu(), sizeof(int32_t) * 4 * b->n, st));
    return d->be->letterbox_u8_to_chw(b->n, b->H, b->W, d->src, d->off, d->geo, 114, (float *)(*x)->data);
}

/* NMS on the backend; an image over its candidate buffer (count < 0) through odl_yolo_nms. */
static odl_status backend_nms(odl_detector *d, const odl_tensor *y, int n, const odl_nms_params *p, odl_detection *det,
                              int *nd) {
    const odl_stream st = odl_stream_current();
    const int64_t rows = y->shape[1];
    const int nc = (int)y->shape[2] - 5;
    odl_yolo_nms_args a = {.N = n, .rows = rows, .nc = nc, .pred = (const float *)y->data,
                           .conf_thres = p->conf_thres, .iou_thres = p->iou_thres, .max_wh = p->max_wh,
                           .multi_label = p->multi_label, .agnostic = p->agnostic, .max_nms = p->max_nms,
                           .max_det = p->max_det, .cand_cap = 1 << 16, .out = d->out, .count = d->cnt};
    ODL_CHECK(d->be->yolo_nms(&a));
    ODL_CHECK(odl_memcpy_async(d->h_cnt, odl_cpu(), d->cnt, d->dev, sizeof(int32_t) * n, st));
    ODL_CHECK(odl_memcpy_async(d->h_out, odl_cpu(), d->out, d->dev, sizeof(float) * 6 * p->max_det * n, st));
    ODL_CHECK(odl_stream_synchronize(st));
    for (int b = 0; b < n; b++) {
        odl_detection *o = det + (size_t)b * p->max_det;
        if (d->h_cnt[b] < 0) { /* too many candidates for the backend's buffer: the host reference */
            size_t rn = (size_t)rows * (5 + nc);
            ODL_CHECK(host_pred(d, rn));
            ODL_CHECK(odl_memcpy_async(d->h_pred, odl_cpu(), (const float *)y->data + rn * b, d->dev, sizeof(float) * rn, st));
            ODL_CHECK(odl_stream_synchronize(st));
            ODL_CHECK(odl_yolo_nms(d->h_pred, rows, nc, p, o, p->max_det, &nd[b]));
            continue;
        }
        nd[b] = d->h_cnt[b];
        for (int k = 0; k < nd[b]; k++) {
            const float *v = d->h_out + ((size_t)b * p->max_det + k) * 6;
            o[k] = (odl_detection){v[0], v[1], v[2], v[3], v[4], (int)v[5]};
        }
    }
    return ODL_OK;
}

/* NMS on the host over the copied output; an image whose rows hold NaN or Inf gets no boxes. */
static odl_status host_nms(odl_detector *d, const odl_tensor *y, int n, const odl_nms_params *p, odl_detection *det,
                           int *nd, int64_t *bad) {
    const int64_t rows = y->shape[1], no = y->shape[2];
    for (int b = 0; b < n; b++) {
        const float *pred = d->h_pred + (size_t)b * rows * no;
        nd[b] = 0;
        if (bad && (bad[b] = odl_yolo_nonfinite_rows(pred, rows, (int)no - 5)) > 0) continue;
        ODL_CHECK(odl_yolo_nms(pred, rows, (int)no - 5, p, det + (size_t)b * p->max_det, p->max_det, &nd[b]));
    }
    return ODL_OK;
}

odl_status odl_detector_run(odl_detector *d, const odl_detect_batch *b, const odl_nms_params *p, odl_detection *det,
                            int *nd, int64_t *bad, double *t_forward_ms) {
    double t0 = odl_mono_ms();
    if (d->be) ODL_CHECK(reserve(d, b->n, b->u8 ? (size_t)3 * b->H * b->W * b->n : 0, p->max_det));
    odl_tensor *x;
    const odl_tensor *y;
    ODL_CHECK(input(d, b, &x));
    ODL_CHECK(odl_yolov5_forward(d->net, x, &y));
    d->rows = y->shape[1];
    if (d->be) {
        ODL_CHECK(backend_nms(d, y, b->n, p, det, nd));
        for (int i = 0; bad && i < b->n; i++) bad[i] = 0;
        if (t_forward_ms) *t_forward_ms = odl_mono_ms() - t0;
        return ODL_OK;
    }
    const size_t outn = (size_t)b->n * y->shape[1] * y->shape[2];
    ODL_CHECK(host_pred(d, outn));
    ODL_CHECK(odl_tensor_copy_to_host(y, d->h_pred, sizeof(float) * outn)); /* synchronises */
    if (t_forward_ms) *t_forward_ms = odl_mono_ms() - t0;
    return host_nms(d, y, b->n, p, det, nd, bad);
}
