/* MNIST IDX files (MNIST, Fashion-MNIST, and any data set in the same format).
 *
 * A directory holds, for a split "train" or "t10k",
 *   <split>-images-idx3-ubyte   magic 2051 (0x00000803): uint8 pixels, dims n, rows, cols
 *   <split>-labels-idx1-ubyte   magic 2049 (0x00000801): uint8 labels, dim n
 * each plain or gzip-compressed with a ".gz" suffix (the plain file wins when both exist). All header
 * integers are big-endian int32 (Y. LeCun, "THE MNIST DATABASE of handwritten digits", file formats).
 * Pixels are row-major per image, 0 = background, 255 = foreground; Fashion-MNIST uses the same layout.
 *
 * Checks: magic numbers, non-zero dimensions, exact sizes (a file with fewer bytes than its header
 * announces is "truncated", one with more has "trailing data"), equal image and label counts, and
 * label values 0..9 (the 10 classes of MNIST and Fashion-MNIST; a label >= 10 is ODL_E_FORMAT naming
 * its index and value).
 */
#ifndef ODL_MNIST_H
#define ODL_MNIST_H

#include "odl/api.h"
#include <stdint.h>

#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ODL_MNIST_CLASSES 10

typedef struct odl_mnist {
    int64_t n;        /* number of images (60000 train, 10000 t10k) */
    int rows, cols;   /* 28 x 28 for MNIST and Fashion-MNIST */
    uint8_t *images;  /* [n, rows, cols] row-major, malloc'ed */
    uint8_t *labels;  /* [n], values 0..9, malloc'ed */
} odl_mnist;

/* Load `split` ("train" or "t10k"; "test" is accepted for "t10k") from `dir` into *out (which is
 * overwritten; free it with odl_mnist_free). On error *out is left empty.
 * Errors (one line naming the file and the problem):
 *   ODL_E_NOTFOUND  dir does not exist, or holds neither the plain nor the .gz file (names the
 *                   directory and the expected names)
 *   ODL_E_IO        open/read failure (errno text, or zlib's message for a damaged gzip stream)
 *   ODL_E_FORMAT    wrong magic, zero or absurd dimensions, truncated file, trailing data, image and
 *                   label counts that differ, a label >= 10
 *   ODL_E_INVAL     bad split name or NULL argument
 *   ODL_E_NOMEM */
ODL_API odl_status odl_mnist_load(const char *dir, const char *split, odl_mnist *out);

/* The same from two explicit file paths (plain or gzip, detected by content). */
ODL_API odl_status odl_mnist_load_files(const char *images_path, const char *labels_path, odl_mnist *out);

/* Release the buffers and reset *m to empty. NULL and empty are fine. */
ODL_API void odl_mnist_free(odl_mnist *m);

#ifdef __cplusplus
}
#endif
#endif
