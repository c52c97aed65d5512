/* YOLOv5 Detect decoding on the CPU: the reference of the backends' yolov5_detect_decode entry
 * (odl/backend.h; the formula, shared with the CUDA kernels: kernels/yolov5_decode.h). */
#include "kernels/cpu/cpu.h"
#include "kernels/yolov5_decode.h"

odl_status odl_cpu_yolov5_detect_decode(const odl_detect_args *d, const float *head, int nhwc) {
    if (!d || !head || !d->out || !d->anchors_wh) return ODL_ERR(ODL_E_INVAL, "yolov5 decode: NULL argument");
    if (d->na < 1 || d->na > 16) return ODL_ERR(ODL_E_INVAL, "yolov5 decode: %d anchors (1..16)", d->na);
    const int N = d->N, na = d->na, no = d->no, ny = d->ny, nx = d->nx;
    const int64_t plane = (int64_t)ny * nx;
    for (int n = 0; n < N; n++)
        for (int a = 0; a < na; a++)
            for (int yy = 0; yy < ny; yy++)
                for (int xx = 0; xx < nx; xx++) {
                    const int64_t pix = (int64_t)yy * nx + xx;
                    float *row = d->out + ((int64_t)n * d->rows_total + d->row_offset + (int64_t)a * plane + pix) * no;
                    /* element k of this anchor's outputs is h[k * hs] */
                    const float *h = nhwc ? head + (((int64_t)n * plane + pix) * na + a) * no
                                          : head + ((int64_t)n * na * no + (int64_t)a * no) * plane + pix;
                    const int64_t hs = nhwc ? 1 : plane;
                    for (int k = 0; k < no; k++)
                        row[k] = yolov5_decode(h[(int64_t)k * hs], k, (float)xx - 0.5f, (float)yy - 0.5f, d->stride,
                                               k == 2 || k == 3 ? d->anchors_wh[a * 2 + (k - 2)] : 0.0f);
                }
    return ODL_OK;
}
