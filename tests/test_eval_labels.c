/* YOLO label files and detection datasets (datasets/labels.c): good and bad lines (each error names
 * the file and line), missing and empty files, duplicates, polygons, a folder with subfolders, a
 * dataset yaml, val.py's rectangular batch plan, and the image-preparation pool against the
 * synchronous path (datasets/pipeline.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "odl/backend.h"
#include "odl/image.h"
#include "odl/labels.h"
#include "odl/pipeline.h"
#include "test_util.h"

static char g_tmp[1024];

static void write_file(const char *rel, const char *text) {
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", g_tmp, rel);
    FILE *f = fopen(p, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}
static const char *tp(const char *rel) {
    static char p[2048];
    snprintf(p, sizeof p, "%s/%s", g_tmp, rel);
    return p;
}

/* A bad file must fail with ODL_E_FORMAT and a message holding "FILE:LINE:" and `why`. */
static void expect_bad(const char *text, int line, const char *why) {
    write_file("bad.txt", text);
    odl_box_label *v = NULL;
    int n = -1;
    TFAIL(odl_labels_read(tp("bad.txt"), 80, &v, &n, NULL), ODL_E_FORMAT);
    char want[2100];
    snprintf(want, sizeof want, "%s:%d:", tp("bad.txt"), line);
    TCHECK(strstr(odl_error_msg(), want) && strstr(odl_error_msg(), why), "'%s' wanted '%s' and '%s'", odl_error_msg(),
           want, why);
    TCHECK(v == NULL, "no labels on error");
    free(v);
}

static void test_label_files(void) {
    odl_box_label *v = NULL;
    int n = 0, dup = 0;
    write_file("good.txt", "45 0.479492 0.688771 0.955609 0.5955\n\n  3 0.5 0.5 1 1  \r\n45 0.479492 0.688771 0.955609 0.5955\n"
                           "7 0.1 0.2 0.3 0.2 0.2 0.6 0.1 0.5\n");
    TOK(odl_labels_read(tp("good.txt"), 80, &v, &n, &dup));
    TCHECK(n == 3 && dup == 1, "n %d dup %d", n, dup);
    if (n == 3) {
        TCHECK(v[0].class_id == 45 && v[0].cx == 0.479492f && v[0].h == 0.5955f, "first line");
        TCHECK(v[1].class_id == 3 && v[1].w == 1.f, "second line");
        /* polygon (0.1,0.2) (0.3,0.2) (0.2,0.6) (0.1,0.5): x 0.1..0.3, y 0.2..0.6 */
        TCHECK(v[2].class_id == 7 && fabsf(v[2].cx - 0.2f) < 1e-6f && fabsf(v[2].cy - 0.4f) < 1e-6f &&
                   fabsf(v[2].w - 0.2f) < 1e-6f && fabsf(v[2].h - 0.4f) < 1e-6f,
               "polygon box %g %g %g %g", v[2].cx, v[2].cy, v[2].w, v[2].h);
    }
    free(v);
    write_file("empty.txt", "");
    TOK(odl_labels_read(tp("empty.txt"), 80, &v, &n, NULL));
    TCHECK(n == 0 && v == NULL, "empty file: %d labels", n);
    TFAIL(odl_labels_read(tp("none.txt"), 80, &v, &n, NULL), ODL_E_NOTFOUND);
    TCHECK(strstr(odl_error_msg(), "none.txt") != NULL, "%s", odl_error_msg());

    expect_bad("0 0.5 0.5 0.1 0.1\n80 0.5 0.5 0.1 0.1\n", 2, "class 80 out of range");
    expect_bad("1 0.5 1.2 0.1 0.1\n", 1, "outside 0..1");
    expect_bad("1 0.5 0.5 -0.1 0.1\n", 1, "outside 0..1");
    expect_bad("\n\n1 0.5 0.5 0.1\n", 3, "4 field(s)");
    expect_bad("1 0.5 0.5 0.1 0.1 0.3\n", 1, "6 field(s)");
    expect_bad("1 0.5 zero 0.1 0.1\n", 1, "not a number");
    expect_bad("1.5 0.5 0.5 0.1 0.1\n", 1, "not a non-negative integer");
    expect_bad("-1 0.5 0.5 0.1 0.1\n", 1, "not a non-negative integer");
}

static void test_dataset(void) {
    char p[8192];
    const char *dirs[] = {"ds", "ds/images", "ds/images/a", "ds/images/b", "ds/labels", "ds/labels/a", "ds/labels/b"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) mkdir(tp(dirs[i]), 0777);
    /* Three real images (sizes 640x480 bus? no: read their sizes with the decoder) under two subfolders. */
    const char *src[] = {"yolov5/images/bus.jpg", "yolov5/images/zidane.jpg", "yolov5/images/000000000077.jpg"};
    const char *dst[] = {"ds/images/a/bus.jpg", "ds/images/b/zidane.jpg", "ds/images/b/x77.jpg"};
    int w[3], h[3];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "cp '%s' '%s'", odl_test_data_path(src[i]), tp(dst[i]));
        TCHECK(system(p) == 0, "%s", p);
        odl_image im;
        TOK(odl_image_load(tp(dst[i]), &im));
        w[i] = im.width;
        h[i] = im.height;
        int pw = 0, ph = 0;
        TOK(odl_image_probe(tp(dst[i]), &pw, &ph));
        TCHECK(pw == w[i] && ph == h[i], "probe %dx%d, decoded %dx%d", pw, ph, w[i], h[i]);
        odl_image_free(&im);
    }
    write_file("ds/images/b/notes.md", "not an image");
    write_file("ds/labels/a/bus.txt", "5 0.5 0.5 0.9 0.7\n0 0.1 0.6 0.1 0.5\n");
    write_file("ds/labels/b/zidane.txt", ""); /* empty; x77 has none */
    odl_det_dataset ds;
    TOK(odl_det_dataset_open(tp("ds"), 80, &ds));
    TCHECK(ds.n == 3 && ds.n_missing == 1 && ds.n_empty == 1, "n %d missing %d empty %d", ds.n, ds.n_missing, ds.n_empty);
    if (ds.n == 3) {
        TCHECK(strstr(ds.samples[0].image, "a/bus.jpg") && strstr(ds.samples[0].label, "labels/a/bus.txt"), "%s %s",
               ds.samples[0].image, ds.samples[0].label);
        TCHECK(strstr(ds.samples[1].image, "b/x77.jpg") && strstr(ds.samples[2].image, "b/zidane.jpg"), "sorted");
        TCHECK(ds.samples[0].n_labels == 2 && ds.samples[0].labels[1].class_id == 0, "bus labels");
        TCHECK(ds.samples[0].width == w[0] && ds.samples[0].height == h[0], "bus size");
        /* val.py's rect plan, batch 2: sorted by h/w; batch shapes by hand. */
        int order[3], shape[6];
        TOK(odl_det_dataset_plan(&ds, 640, 2, 32, 0.5, 1, order, shape));
        double ar[3];
        for (int i = 0; i < 3; i++) ar[i] = (double)ds.samples[i].height / ds.samples[i].width;
        for (int k = 0; k + 1 < 3; k++) TCHECK(ar[order[k]] <= ar[order[k + 1]], "sorted by aspect ratio");
        for (int b = 0; b < 2; b++) {
            int k0 = 2 * b, k1 = b == 0 ? 1 : 2;
            double mn = ar[order[k0]], mx = ar[order[k1]], sh = 1, sw = 1;
            if (mx < 1) sh = mx;
            else if (mn > 1) sw = 1 / mn;
            int H = (int)ceil(sh * 640 / 32 + 0.5) * 32, W = (int)ceil(sw * 640 / 32 + 0.5) * 32;
            for (int k = k0; k <= k1; k++) TCHECK(shape[2 * k] == H && shape[2 * k + 1] == W, "batch %d shape", b);
        }
        /* zidane 1280x720: ar 0.5625 < 1 alone in... at least check one known value: a 0.5625 batch -> 384x672 */
        TOK(odl_det_dataset_plan(&ds, 640, 1, 32, 0.5, 1, order, shape));
        for (int k = 0; k < 3; k++)
            if (strstr(ds.samples[order[k]].image, "zidane"))
                TCHECK(shape[2 * k] == 384 && shape[2 * k + 1] == 672, "zidane %dx%d", shape[2 * k], shape[2 * k + 1]);
        TOK(odl_det_dataset_plan(&ds, 640, 2, 32, 0.5, 0, order, shape));
        TCHECK(order[0] == 0 && order[2] == 2 && shape[0] == 640 && shape[5] == 640, "square plan");
    }
    odl_det_dataset_free(&ds);

    /* The same through a yaml: names as a mapping, val a list of a folder and a .txt list. */
    write_file("ds/list.txt", "./images/b/zidane.jpg\n");
    write_file("ds/d.yaml", "path: .\nval: [images/a, list.txt]\nnames:\n  0: person\n  1: bicycle\n  2: car\n");
    TFAIL(odl_det_dataset_open(tp("ds/d.yaml"), 80, &ds), ODL_E_CONFIG);
    TCHECK(strstr(odl_error_msg(), "3 class names") && strstr(odl_error_msg(), "80 classes"), "%s", odl_error_msg());
    write_file("ds/labels/a/bus.txt", "2 0.5 0.5 0.9 0.7\n");
    TOK(odl_det_dataset_open(tp("ds/d.yaml"), 3, &ds));
    TCHECK(ds.n == 2 && ds.n_names == 3 && !strcmp(ds.names[2], "car"), "yaml: %d images, %d names", ds.n, ds.n_names);
    odl_det_dataset_free(&ds);
    write_file("ds/e.yaml", "names: [a, b]\nval: [images/a\n");
    TFAIL(odl_det_dataset_open(tp("ds/e.yaml"), 2, &ds), ODL_E_FORMAT);
    TCHECK(strstr(odl_error_msg(), "e.yaml:"), "%s", odl_error_msg());
    write_file("ds/f.yaml", "names: [a, b]\n");
    TFAIL(odl_det_dataset_open(tp("ds/f.yaml"), 2, &ds), ODL_E_FORMAT);
    TCHECK(strstr(odl_error_msg(), "no 'val'"), "%s", odl_error_msg());
    /* a bad line stops the open, naming the file and line */
    write_file("ds/labels/b/zidane.txt", "0 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2\n");
    TFAIL(odl_det_dataset_open(tp("ds"), 80, &ds), ODL_E_FORMAT);
    TCHECK(strstr(odl_error_msg(), "labels/b/zidane.txt:2:"), "%s", odl_error_msg());
    TFAIL(odl_det_dataset_open(tp("nothing"), 80, &ds), ODL_E_NOTFOUND);
}

static void count_hit(void *ctx, int i) { ((int *)ctx)[i]++; }

/* The pool gives the same floats as the synchronous path, and a val.py letterbox of a 640-wide image to a
 * 640 square is the plain letterbox with auto = 0. */
static void test_pool(void) {
    const char *imgs[] = {"yolov5/images/bus.jpg", "yolov5/images/zidane.jpg", "yolov5/images/000000000077.jpg",
                          "yolov5/images/000000000086.jpg"};
    enum { N = 4, H = 480, W = 672 };
    static char paths[N][4200];
    odl_prep_job jobs[N];
    odl_prep_result r1[N], r2[N];
    float *a = malloc(sizeof(float) * 3 * H * W * N), *b = malloc(sizeof(float) * 3 * H * W * N);
    for (int i = 0; i < N; i++) {
        snprintf(paths[i], sizeof paths[i], "%s", odl_test_data_path(imgs[i]));
        jobs[i] = (odl_prep_job){paths[i], 640, W, H, 0};
        TOK(odl_prep_image(&jobs[i], a + (size_t)3 * H * W * i, &r1[i]));
    }
    odl_prep_pool *pool;
    TOK(odl_prep_pool_create(3, &pool));
    odl_prep_batch *bt;
    TOK(odl_prep_submit(pool, jobs, N, b, r2, &bt));
    odl_prep_wait(bt);
    for (int i = 0; i < N; i++) TCHECK(r2[i].status == ODL_OK, "%s", r2[i].err);
    TCHECK(memcmp(a, b, sizeof(float) * 3 * H * W * N) == 0, "pool output differs from the synchronous one");
    /* a missing file is reported in its result, the others still done */
    jobs[1].path = "/no/such.jpg";
    TOK(odl_prep_submit(pool, jobs, N, b, r2, &bt));
    odl_prep_wait(bt);
    TCHECK(r2[1].status == ODL_E_NOTFOUND && strstr(r2[1].err, "/no/such.jpg"), "%d %s", r2[1].status, r2[1].err);
    TCHECK(r2[0].status == ODL_OK && r2[3].status == ODL_OK, "other jobs");
    /* the parallel for: every index once */
    {
        int hits[1000];
        memset(hits, 0, sizeof hits);
        TOK(odl_prep_pool_for(pool, 1000, count_hit, hits));
        int bad = 0;
        for (int i = 0; i < 1000; i++) bad += hits[i] != 1;
        TCHECK(bad == 0, "%d indices not run exactly once", bad);
    }
    odl_prep_pool_free(pool);

    /* bus.jpg is 810x1080: load_image shrinks it to 480x640 (ceil), then a 640 square pads 80 left and right. */
    odl_image im, rs, lb;
    odl_letterbox g;
    TOK(odl_image_load(paths[0], &im));
    int w = (int)ceil(im.width * (640.0 / im.height)), h = 640;
    TOK(odl_image_alloc(&rs, w, h, 0, 0, 0));
    TOK(odl_image_resize_linear(im.data, im.width, im.height, 3, rs.data, w, h));
    TOK(odl_image_letterbox(&rs, 640, 0, 32, 114, &lb, &g));
    float *ref = malloc(sizeof(float) * 3 * 640 * 640), *got = malloc(sizeof(float) * 3 * 640 * 640);
    odl_image_to_chw(&lb, ref);
    odl_prep_job sj = {paths[0], 640, 640, 640, 0};
    odl_prep_result sr;
    TOK(odl_prep_image(&sj, got, &sr));
    TCHECK(memcmp(ref, got, sizeof(float) * 3 * 640 * 640) == 0, "square val letterbox");
    TCHECK(sr.pad_x == g.dw && sr.pad_y == 0 && fabs(sr.gain - 640.0 / im.height) < 1e-12, "ratio_pad %g %g %g", sr.gain,
           sr.pad_x, sr.pad_y);
    float box[4] = {(float)g.dw, 0, (float)g.dw + w, 640};
    odl_prep_unmap(&sr, box);
    TCHECK(fabsf(box[0]) < 1e-3f && fabsf(box[2] - im.width) < 0.01f * im.width && box[3] == (float)im.height,
           "unmap %g %g %g %g", box[0], box[1], box[2], box[3]);
    odl_image_free(&im);
    odl_image_free(&rs);
    odl_image_free(&lb);
    free(ref);
    free(got);
    free(a);
    free(b);
}

int main(void) {
    struct stat sb;
    if (stat(odl_test_data_path("yolov5/images/bus.jpg"), &sb) != 0) {
        printf("SKIP: no %s\n", odl_test_data_path("yolov5/images/bus.jpg"));
        return ODL_TEST_SKIP;
    }
    if (odl_test_mkdtemp(g_tmp, sizeof g_tmp, "eval_labels")) return 1;
    test_label_files();
    test_dataset();
    test_pool();
    return odl_test_finish_in("eval_labels", g_tmp);
}
