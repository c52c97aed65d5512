/* Detection datasets in YOLO format, as YOLOv5 v7.0's utils/dataloaders.py reads them for val.py.
 *
 * A dataset is either
 *   - a folder D with D/images/... (taken recursively) and D/labels/... , or
 *   - a YOLOv5 dataset yaml (`path`, `val`, `names`; utils/general.py check_dataset): `val` is a folder,
 *     a .txt list of image paths, or a list of those, relative to `path`; a relative `path` (or none)
 *     is relative to the yaml's folder (YOLOv5 takes it relative to its own repository).
 * Images are the files with YOLOv5's IMG_FORMATS extensions, sorted by path (LoadImagesAndLabels). The
 * label file of an image is img2label_paths': the last "/images/" of its path replaced by "/labels/"
 * and the extension by ".txt".
 *
 * A label file has one object per line: `class cx cy w h`, the box centre and size normalised by the
 * image's width and height (floats in 0..1). A line of more than 6 fields is a polygon
 * `class x1 y1 x2 y2 ...` and becomes its bounding box (segments2boxes). What val.py does with bad
 * files, and what this reader does (docs/eval.md lists the same):
 *   missing file, empty file  -> val.py: an image without objects (a "background"); same here, counted.
 *   duplicate lines           -> val.py: removed with a warning; same here (the first copy is kept).
 *   too few fields, a field that is not a number, a negative value, a coordinate above 1
 *                             -> val.py drops the whole image with a warning, which silently changes the
 *                                metrics; here: an error naming the file and the line.
 *   a class >= the model's class count -> val.py fails later (KeyError on names); here: an error
 *                                naming the file and the line.
 */
#ifndef ODL_LABELS_H
#define ODL_LABELS_H

#include "odl/api.h"
#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct odl_box_label {
    int class_id;
    float cx, cy, w, h; /* normalised to the image's width / height, float32 as numpy reads them */
} odl_box_label;

/* Read one label file. nc > 0: classes must be < nc. *out is malloc'd (NULL when there are no objects);
 * *n_dup receives the number of duplicate lines removed (may be NULL).
 * Errors: ODL_E_NOTFOUND (no such file), ODL_E_IO, ODL_E_FORMAT with "PATH:LINE: reason", ODL_E_NOMEM. */
ODL_API odl_status odl_labels_read(const char *path, int nc, odl_box_label **out, int *n, int *n_dup);

typedef struct odl_det_sample {
    char *image;            /* path of the image */
    char *label;            /* path of its label file */
    odl_box_label *labels;  /* n_labels objects */
    int n_labels;
    int width, height;      /* original size, after EXIF orientation (odl_image_probe) */
} odl_det_sample;

typedef struct odl_det_dataset {
    odl_det_sample *samples; /* sorted by image path */
    int n;
    char **names;            /* class names from the yaml (n_names of them), or NULL for a folder */
    int n_names;
    int n_missing, n_empty, n_duplicates; /* label files absent / empty; duplicate lines removed */
} odl_det_dataset;

/* Open a dataset (folder or .yaml/.yml file, see above), read every label file and probe every image's
 * size. nc > 0 checks the classes (and the yaml's names count, as val.py's "weights are for nc
 * classes" check). Errors: ODL_E_NOTFOUND (no such path, no images), ODL_E_FORMAT (bad yaml, bad label
 * line, unreadable image header), ODL_E_CONFIG (class count mismatch), ODL_E_IO, ODL_E_NOMEM. */
ODL_API odl_status odl_det_dataset_open(const char *data, int nc, odl_det_dataset *out);
ODL_API void odl_det_dataset_free(odl_det_dataset *ds);

/* val.py's batches (LoadImagesAndLabels with rect, utils/dataloaders.py): with rect, images are
 * ordered by aspect ratio h / w (a stable sort here; numpy's argsort is not stable, so ties may be
 * ordered differently) and batch i of `batch` consecutive images is letterboxed to
 *   [h, w] = ceil([s_h, s_w] * img_size / stride + pad) * stride,
 *   [s_h, s_w] = [max ar, 1] when every ar < 1, [1, 1 / min ar] when every ar > 1, else [1, 1];
 * without rect, the dataset order and img_size x img_size for every image.
 * order[n] receives sample indices in evaluation order, shape_hw[2 * n] each image's letterbox
 * target (height, width). Errors: ODL_E_INVAL. */
ODL_API odl_status odl_det_dataset_plan(const odl_det_dataset *ds, int img_size, int batch, int stride, double pad, int rect,
                                int *order, int *shape_hw);

#ifdef __cplusplus
}
#endif
#endif
