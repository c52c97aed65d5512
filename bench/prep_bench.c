/* The CPU image path per image on one thread: file read + decode (odl_image_load: libjpeg-turbo/libpng,
 * EXIF orientation) and YOLOv5's letterbox (odl_image_letterbox: cv2 INTER_LINEAR resize, pad 114),
 * with detect.py's geometry (--img-size 640, minimum stride-32 padding; --square: 640 x 640). Prints
 * the mean milliseconds per image of each stage and of the whole, over --reps passes of the files, and
 * one JSON line. bench/prep_bench.sh runs it beside OpenCV (bench/prep_cv2.py, cv2.imread + YOLOv5's
 * letterbox) in the same call.
 *
 *   prep_bench [--reps N] [--square] [--img-size N] FILE|DIR ...
 *
 * Timing only; the pixels are checked by tests/test_yolov5_image.c (byte for byte against YOLOv5's). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "odl/clock.h"
#include "odl/image.h"
#include "worker/cli_flags.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int is_image(const char *name) {
    const char *d = strrchr(name, '.');
    return d && (!strcasecmp(d, ".jpg") || !strcasecmp(d, ".jpeg") || !strcasecmp(d, ".png"));
}

/* Append arg (a file, or the images of a folder, sorted) to the list. */
static int add_input(const char *arg, char ***v, int *n, int *cap) {
    struct stat sb;
    if (stat(arg, &sb) != 0) {
        fprintf(stderr, "prep_bench: error: %s: no such file or folder\n", arg);
        return -1;
    }
    int first = *n;
    DIR *d = S_ISDIR(sb.st_mode) ? opendir(arg) : NULL;
    struct dirent *e;
    for (;;) {
        char path[4096];
        if (d) {
            if (!(e = readdir(d))) break;
            if (e->d_name[0] == '.' || !is_image(e->d_name)) continue;
            snprintf(path, sizeof path, "%s/%s", arg, e->d_name);
        } else {
            snprintf(path, sizeof path, "%s", arg);
        }
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 64;
            *v = realloc(*v, sizeof(char *) * (size_t)*cap);
        }
        (*v)[(*n)++] = strdup(path);
        if (!d) break;
    }
    if (d) closedir(d);
    qsort(*v + first, (size_t)(*n - first), sizeof(char *), cmp_str);
    return 0;
}

int main(int argc, char **argv) {
    int reps = 20, square = 0, size = 640;
    char **files = NULL;
    int n = 0, cap = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int m = 0;
        if (!strcmp(argv[i], "--square")) square = 1;
        else if ((v = odl_cli_flag_value(argc, argv, &i, "--reps", &m)) || m) {
            if (odl_cli_parse_int(v, 1, 100000, &reps)) {
                fprintf(stderr, "prep_bench: error: --reps: an integer >= 1\n");
                return 2;
            }
        } else if ((v = odl_cli_flag_value(argc, argv, &i, "--img-size", &m)) || m) {
            if (odl_cli_parse_int(v, 32, 8192, &size)) {
                fprintf(stderr, "prep_bench: error: --img-size: an integer in 32..8192\n");
                return 2;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: prep_bench [--reps N] [--square] [--img-size N] FILE|DIR ...\n");
            return 2;
        } else if (add_input(argv[i], &files, &n, &cap)) {
            return 2;
        }
    }
    if (!n) {
        fprintf(stderr, "prep_bench: error: no images given\n");
        return 2;
    }
    /* One untimed pass: the files in the page cache, the allocator warm (as OpenCV's first pass). */
    double t_dec = 0, t_lb = 0;
    int failed = 0;
    for (int r = -1; r < reps; r++)
        for (int k = 0; k < n; k++) {
            odl_image img, lb;
            odl_letterbox g;
            double t0 = odl_mono_ms();
            if (odl_image_load(files[k], &img) != ODL_OK) {
                if (r < 0) fprintf(stderr, "prep_bench: %s\n", odl_error_msg());
                failed += r < 0;
                continue;
            }
            double t1 = odl_mono_ms();
            odl_status st = odl_image_letterbox(&img, size, !square, 32, 114, &lb, &g);
            double t2 = odl_mono_ms();
            if (st != ODL_OK) {
                fprintf(stderr, "prep_bench: error: %s: %s\n", files[k], odl_error_msg());
                return 1;
            }
            if (r >= 0) {
                t_dec += t1 - t0;
                t_lb += t2 - t1;
            }
            odl_image_free(&img);
            odl_image_free(&lb);
        }
    const int done = n - failed;
    const double per = 1.0 / ((double)reps * (done ? done : 1));
    printf("odl prep_bench: %d images (%d failed to decode), %d passes, %s letterbox %d, one thread\n", n, failed, reps,
           square ? "square" : "rectangular", size);
    printf("  read + decode      %.3f ms/image\n", t_dec * per);
    printf("  letterbox          %.3f ms/image\n", t_lb * per);
    printf("  decode + letterbox %.3f ms/image\n", (t_dec + t_lb) * per);
    printf("{\"bench\": \"prep\", \"impl\": \"odl\", \"images\": %d, \"reps\": %d, \"square\": %s, \"decode_ms\": %.4f, "
           "\"letterbox_ms\": %.4f, \"total_ms\": %.4f}\n",
           done, reps, square ? "true" : "false", t_dec * per, t_lb * per, (t_dec + t_lb) * per);
    for (int k = 0; k < n; k++) free(files[k]);
    free(files);
    return failed ? 1 : 0;
}
