/* The device image pipeline (odl/gpu_prep.h) against the CPU one (odl_prep_image), on a batch mixing
 * baseline, progressive, CMYK and grey JPEGs, a PNG, EXIF orientations 2..8, and corrupt files (cut short,
 * text, a damaged header), made here with libjpeg-turbo and libpng (and bus.jpg / zidane.jpg when the data
 * folder is there):
 *   test_gpu_prep absent     CPU device, the nvJPEG library absent (ODL_NVJPEG_LIBRARY names no file):
 *                            the loader says so and every image decodes on the CPU;
 *   test_gpu_prep fake LIB   CPU device, nvJPEG through tests/fake_nvjpeg.c (libjpeg-turbo inside): the
 *                            baseline, grey and EXIF images go to nvJPEG (hardware, or with
 *                            FAKE_NVJPEG_NO_HW=1 the hybrid backend), the rest to the CPU; a batch nvJPEG
 *                            fails as a whole is decoded again on the CPU;
 *   test_gpu_prep cuda       the GPU with the real nvJPEG (label gpu; exit 77 without a GPU);
 *   test_gpu_prep write DIR  only write the test images into DIR (tests/infer_device.sh).
 * Every image gets the CPU path's outcome: the same error message, sizes, gain, pad and geometry; its
 * letterbox (val.py's load_size 640 + square 640, and a 1024 upscale) is bitwise odl_prep_image's when
 * decoded on the CPU or by the stand-in, and within the bounds below when decoded by the real nvJPEG.
 * An image that val.py resizes twice (load size, then a scaling letterbox) stays on the CPU. Two batches
 * are in flight at once. */
#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jpeg_test_util.h"
#include "odl/env.h"
#include "odl/gpu_prep.h"
#include "odl/nvjpeg.h"
#include "png_test_util.h"
#include "yolov5_test_util.h"

/* nvJPEG (real) against libjpeg-turbo, over the letterboxed values x 255 of one image: the mean absolute
 * difference and the 99.9th percentile. Both decoders follow the JPEG standard's IDCT to within rounding;
 * the rest is chroma upsampling at colour edges. Measured over the 42 images of this test on an H100
 * (2026-12-07, docs/eval.md "Decoding"): the hardware backend worst mean 0.000, 99.9th percentile 0, max 1;
 * the GPU-hybrid backend 0.037, 2, max 3. The bounds leave room above the hybrid's. */
#define NVJPEG_MEAN_BOUND 0.25
#define NVJPEG_P999_BOUND 4.0

enum { MODE_ABSENT, MODE_FAKE, MODE_CUDA };
static int mode;
static char dir[2048];

typedef struct file {
    const char *name;
    int gpu;  /* 1: nvJPEG takes it (when present), 0: the CPU path, -1: an error for every path */
    int fake_gpu_hw_only; /* 1: only the hardware check refuses it (nvjpegDecodeBatchedSupported) */
} file;

/* The file's path, valid for the whole test (the jobs point at it). */
static const char *path_of(const char *name) {
    static char buf[64][4096];
    static int i;
    for (int k = 0; k < i; k++)
        if (!strcmp(strrchr(buf[k], '/') + 1, strrchr(name, '/') ? strrchr(name, '/') + 1 : name)) return buf[k];
    if (i == 64) return "too-many-files";
    if (!strncmp(name, "data:", 5)) snprintf(buf[i], sizeof buf[i], "%s", odl_test_data_path(name + 5));
    else snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
    return buf[i++];
}

static void write_bytes(const char *name, const void *p, size_t n) {
    FILE *f = fopen(path_of(name), "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

static void make_files(void) {
    char name[64];
    TCHECK(test_write_jpeg(path_of("base.jpg"), 97, 61, TJ_RGB, 0, 0, NULL) == 0, "write base.jpg");
    TCHECK(test_write_jpeg(path_of("wide.jpg"), 640, 427, TJ_RGB, 0, 0, NULL) == 0, "write wide.jpg");
    TCHECK(test_write_jpeg(path_of("big.jpg"), 1021, 769, TJ_RGB, 0, 0, NULL) == 0, "write big.jpg");
    TCHECK(test_write_jpeg(path_of("prog.jpg"), 200, 150, TJ_RGB, 1, 0, NULL) == 0, "write prog.jpg");
    TCHECK(test_write_jpeg(path_of("cmyk.jpg"), 120, 90, TJ_CMYK, 0, 0, NULL) == 0, "write cmyk.jpg");
    TCHECK(test_write_jpeg(path_of("grey.jpg"), 150, 101, TJ_GREY, 0, 0, NULL) == 0, "write grey.jpg");
    TCHECK(test_write_jpeg(path_of("unsup.jpg"), 64, 48, TJ_RGB, 0, 0, "fake-nvjpeg: unsupported") == 0, "write unsup.jpg");
    TCHECK(test_write_jpeg(path_of("fail.jpg"), 64, 48, TJ_RGB, 0, 0, "fake-nvjpeg: fail") == 0, "write fail.jpg");
    for (int o = 2; o <= 8; o++) {
        snprintf(name, sizeof name, "exif%d.jpg", o);
        TCHECK(test_write_jpeg(path_of(name), 91, 57, TJ_RGB, 0, o, NULL) == 0, "write %s", name);
    }
    uint8_t rgb[80 * 60 * 3];
    for (int y = 0; y < 60; y++)
        for (int x = 0; x < 80; x++)
            for (int c = 0; c < 3; c++) rgb[(y * 80 + x) * 3 + c] = test_pattern(x, y, c, 80, 60);
    TCHECK(test_write_png(path_of("rgb.png"), 80, 60, PNG_COLOR_TYPE_RGB, 8, rgb, 240, NULL, 0, NULL, 0, NULL) == 0,
           "write rgb.png");
    uint8_t *b = NULL;
    size_t n = 0;
    TOK(odl_file_read(path_of("big.jpg"), &b, &n));
    if (b) {
        write_bytes("trunc.jpg", b, n / 2);
        b[3] ^= 0xFF; /* a damaged header, as test_yolov5_image's */
        b[20] ^= 0x55;
        memset(b + 4, 0xFF, 200);
        write_bytes("corrupt.jpg", b, 4096);
    }
    free(b);
    write_bytes("text.jpg", "this is not an image\n", 21);
}

/* The message without its " [at file:line]" locations (the two paths fail in different places). */
static void strip_at(const char *in, char *out, size_t cap) {
    size_t o = 0;
    for (const char *p = in; *p && o + 1 < cap;) {
        if (!strncmp(p, " [at ", 5)) {
            const char *e = strchr(p, ']');
            if (e) {
                p = e + 1;
                continue;
            }
        }
        out[o++] = *p++;
    }
    out[o] = 0;
}

static int is_nvjpeg(int d) { return d == ODL_DECODER_NVJPEG_HW || d == ODL_DECODER_NVJPEG_HYBRID; }

typedef struct stats {
    int gpu_images;
    double worst_mean, worst_p999, worst_max;
} stats;

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Check a finished batch against odl_prep_image, image by image. */
static void check_batch(odl_device dev, odl_gpu_prep *gp, odl_gpu_prep_batch *b, const odl_prep_job *jobs,
                        odl_prep_result *res, const file *files, int n, const char *what, stats *sv) {
    TOK(odl_gpu_prep_wait(b));
    const int W = jobs[0].out_w, H = jobs[0].out_h;
    const size_t per = (size_t)3 * H * W;
    int idx[64], m = 0;
    for (int k = 0; k < n; k++)
        if (res[k].status == ODL_OK) idx[m++] = k;
    float *y = NULL, *got = malloc(sizeof(float) * per * (m ? m : 1)), *ref = malloc(sizeof(float) * per);
    TOK(odl_mem_alloc(dev, sizeof(float) * per * (m ? m : 1), (void **)&y));
    TOK(odl_gpu_prep_letterbox(b, idx, m, y, odl_stream_current()));
    TOK(odl_memcpy_async(got, odl_cpu(), y, dev, sizeof(float) * per * m, odl_stream_current()));
    TOK(odl_stream_synchronize(odl_stream_current()));
    const int hw = odl_gpu_prep_decoder(gp);
    for (int k = 0, j = 0; k < n; k++) {
        odl_prep_result rr;
        odl_error_clear();
        odl_status rs = odl_prep_image(&jobs[k], ref, &rr);
        char want[1024] = "", have[1024] = "";
        if (rs != ODL_OK) strip_at(odl_error_msg(), want, sizeof want);
        if (res[k].status != ODL_OK) strip_at(res[k].err, have, sizeof have);
        TCHECK(res[k].status == rs && !strcmp(want, have), "%s %s: status %d '%s', the CPU path's %d '%s'", what,
               files[k].name, res[k].status, have, rs, want);
        if (files[k].gpu < 0) TCHECK(rs != ODL_OK, "%s %s should fail", what, files[k].name);
        if (rs != ODL_OK || res[k].status != ODL_OK) continue;
        printf("%s %-12s %4dx%-4d %s\n", what, files[k].name, res[k].src_w, res[k].src_h, odl_decoder_name(res[k].decoder));
        TCHECK(res[k].src_w == rr.src_w && res[k].src_h == rr.src_h && res[k].gain == rr.gain && res[k].pad_x == rr.pad_x &&
                   res[k].pad_y == rr.pad_y && !memcmp(&res[k].geo, &rr.geo, sizeof rr.geo),
               "%s %s: the sizes or the geometry differ from the CPU path's", what, files[k].name);
        /* which decoder */
        if (mode == MODE_ABSENT) TCHECK(res[k].decoder == ODL_DECODER_CPU, "%s %s: decoded by %s", what, files[k].name,
                                        odl_decoder_name(res[k].decoder));
        if (mode == MODE_FAKE) {
            const int want_gpu = files[k].gpu == 1 && !(files[k].fake_gpu_hw_only && hw == ODL_DECODER_NVJPEG_HW);
            TCHECK(want_gpu ? res[k].decoder == hw : res[k].decoder == ODL_DECODER_CPU, "%s %s: decoded by %s", what,
                   files[k].name, odl_decoder_name(res[k].decoder));
        }
        if (mode == MODE_CUDA && files[k].gpu == 0)
            TCHECK(res[k].decoder == ODL_DECODER_CPU, "%s %s: decoded by %s", what, files[k].name,
                   odl_decoder_name(res[k].decoder));
        /* the letterbox */
        const float *g = got + per * j++;
        if (!(mode == MODE_CUDA && is_nvjpeg(res[k].decoder))) {
            int64_t bad = 0;
            for (size_t e = 0; e < per; e++) bad += g[e] != ref[e];
            TCHECK(bad == 0, "%s %s (%s): %lld of %zu letterbox values differ from odl_prep_image's", what, files[k].name,
                   odl_decoder_name(res[k].decoder), (long long)bad, per);
            continue;
        }
        float *d = malloc(sizeof(float) * per);
        double sum = 0;
        for (size_t e = 0; e < per; e++) sum += d[e] = fabsf(g[e] - ref[e]) * 255.0f;
        qsort(d, per, sizeof(float), cmp_float);
        const double mean = sum / per, p999 = d[(size_t)(per * 0.999)], mx = d[per - 1];
        printf("%s %-12s nvJPEG vs libjpeg-turbo: mean |diff| %.3f, 99.9th percentile %.1f, max %.1f (of 255)\n", what,
               files[k].name, mean, p999, mx);
        TCHECK(mean <= NVJPEG_MEAN_BOUND && p999 <= NVJPEG_P999_BOUND, "%s %s: nvJPEG differs from libjpeg-turbo by %.3f "
               "(mean) / %.1f (99.9%%) > %.1f / %.1f", what, files[k].name, mean, p999, NVJPEG_MEAN_BOUND, NVJPEG_P999_BOUND);
        sv->gpu_images++;
        if (mean > sv->worst_mean) sv->worst_mean = mean;
        if (p999 > sv->worst_p999) sv->worst_p999 = p999;
        if (mx > sv->worst_max) sv->worst_max = mx;
        free(d);
    }
    odl_gpu_prep_release(b);
    odl_mem_free(dev, y);
    free(got);
    free(ref);
}

/* Every batch kind through a prep with `feeders` feeder threads (ODL_GPU_PREP_DEPTH of them: every
 * batch in flight decodes at once, each on its own nvJPEG state). */
static void run_prep(odl_device dev, int feeders, stats *sv) {
    odl_gpu_prep *gp = NULL;
    const odl_gpu_prep_options o = {.threads = 3, .max_batch = 24, .nvjpeg = 1, .keep_host = 1, .feeders = feeders};
    TOK(odl_gpu_prep_create(dev, &o, &gp));
    if (!gp) return;
    printf("%d feeder(s): decoder: %s; %s\n", feeders, odl_decoder_name(odl_gpu_prep_decoder(gp)), odl_gpu_prep_nvjpeg_note(gp));
    if (mode == MODE_ABSENT) TCHECK(odl_gpu_prep_decoder(gp) == ODL_DECODER_CPU, "no nvJPEG, yet %s",
                                    odl_decoder_name(odl_gpu_prep_decoder(gp)));
    if (mode == MODE_FAKE) TCHECK(is_nvjpeg(odl_gpu_prep_decoder(gp)), "the stand-in nvJPEG is not used: %s",
                                  odl_gpu_prep_nvjpeg_note(gp));

    /* batch 1: val.py's input (load_size 640, square 640, no upscale in the letterbox) of every kind */
    const int have_data = odl_test_have_data("yolov5/images/bus.jpg");
    file f1[] = {{"base.jpg", 1, 0},   {"wide.jpg", 1, 0},  {"big.jpg", 1, 0},     {"prog.jpg", 0, 0},  {"cmyk.jpg", 0, 0},
                 {"grey.jpg", 1, 0},   {"rgb.png", 0, 0},   {"unsup.jpg", 1, 1},   {"trunc.jpg", -1, 0}, {"text.jpg", -1, 0},
                 {"corrupt.jpg", -1, 0}, {"missing.jpg", -1, 0}, {"exif2.jpg", 1, 0}, {"exif3.jpg", 1, 0}, {"exif4.jpg", 1, 0},
                 {"exif5.jpg", 1, 0},  {"exif6.jpg", 1, 0}, {"exif7.jpg", 1, 0},   {"exif8.jpg", 1, 0},
                 {"data:yolov5/images/bus.jpg", 1, 0}, {"data:yolov5/images/zidane.jpg", 1, 0}};
    const int n1 = (int)(sizeof f1 / sizeof *f1) - (have_data ? 0 : 2);
    odl_prep_job j1[32], j2[8], j3[4];
    odl_prep_result r1[32], r2[8], r3[4];
    for (int k = 0; k < n1; k++) j1[k] = (odl_prep_job){path_of(f1[k].name), 640, 640, 640, 0};
    /* batch 2: an upscale to 1024 in the letterbox (detect.py's scaleup), with orientation */
    file f2[] = {{"base.jpg", 1, 0}, {"grey.jpg", 1, 0}, {"exif6.jpg", 1, 0}, {"exif7.jpg", 1, 0}, {"prog.jpg", 0, 0}};
    const int n2 = (int)(sizeof f2 / sizeof *f2);
    for (int k = 0; k < n2; k++) j2[k] = (odl_prep_job){path_of(f2[k].name), 0, 1024, 1024, 1};
    /* batch 3: the stand-in fails the nvJPEG batch as a whole; every image still comes out right */
    file f3[] = {{"base.jpg", 1, 0}, {"fail.jpg", 1, 0}, {"grey.jpg", 1, 0}, {"prog.jpg", 0, 0}};
    if (mode == MODE_FAKE) f3[0].gpu = f3[1].gpu = f3[2].gpu = 0;
    const int n3 = (int)(sizeof f3 / sizeof *f3);
    for (int k = 0; k < n3; k++) j3[k] = (odl_prep_job){path_of(f3[k].name), 640, 640, 640, 0};

    /* batch 4: val.py's load resize, then a letterbox that scales again (a target smaller than the load
     * size): two resizes, which stay on the CPU (the GPU resizes once) */
    file f4[] = {{"base.jpg", 0, 0}, {"big.jpg", 0, 0}, {"grey.jpg", 0, 0}};
    const int n4 = (int)(sizeof f4 / sizeof *f4);
    odl_prep_job j4[4];
    odl_prep_result r4[4];
    for (int k = 0; k < n4; k++) j4[k] = (odl_prep_job){path_of(f4[k].name), 640, 320, 320, 0};

    char logp[4200];
    snprintf(logp, sizeof logp, "%s/fake_nvjpeg.log", dir);
    if (mode == MODE_FAKE) setenv("FAKE_NVJPEG_LOG", logp, 1); /* read by the stand-in library, not by odl */
    odl_gpu_prep_batch *b1 = NULL, *b2 = NULL, *b3 = NULL;
    TOK(odl_gpu_prep_submit(gp, j1, n1, r1, &b1));
    TOK(odl_gpu_prep_submit(gp, j2, n2, r2, &b2)); /* two in flight */
    if (b1) check_batch(dev, gp, b1, j1, r1, f1, n1, "square640", sv);
    TOK(odl_gpu_prep_submit(gp, j3, n3, r3, &b3));
    if (b2) check_batch(dev, gp, b2, j2, r2, f2, n2, "up1024", sv);
    if (b3) check_batch(dev, gp, b3, j3, r3, f3, n3, "failbatch", sv);
    odl_gpu_prep_batch *b4 = NULL;
    TOK(odl_gpu_prep_submit(gp, j4, n4, r4, &b4));
    if (b4) check_batch(dev, gp, b4, j4, r4, f4, n4, "tworesize", sv);
    if (mode == MODE_FAKE) {
        char *log = odl_test_read_text(logp);
        TCHECK(log && strstr(log, "fail 3"), "the stand-in's log has no failed batch of 3: %s", log ? log : "(none)");
        free(log);
    }

    /* keep_host: an EXIF-rotated image's pixels as odl_image_load gives them */
    {
        odl_prep_job hj[1] = {{path_of("exif6.jpg"), 0, 64, 96, 1}};
        odl_prep_result hr[1];
        odl_gpu_prep_batch *hb = NULL;
        odl_image want = {0}, have = {0};
        TOK(odl_image_load(hj[0].path, &want));
        TOK(odl_letterbox_geometry_hw(want.width, want.height, 64, 96, 0, 32, 1, &hr[0].geo));
        TOK(odl_gpu_prep_submit(gp, hj, 1, hr, &hb));
        if (hb) {
            TOK(odl_gpu_prep_wait(hb));
            TOK(odl_gpu_prep_host_image(hb, 0, &have));
            int bad = !have.data || have.width != want.width || have.height != want.height;
            int64_t nd = 0;
            for (size_t e = 0; !bad && e < (size_t)3 * want.width * want.height; e++) nd += have.data[e] != want.data[e];
            TCHECK(!bad && (mode == MODE_CUDA ? nd < (int64_t)want.width * want.height * 3 : nd == 0),
                   "host image of exif6.jpg (%s): %dx%d, %lld bytes differ", odl_decoder_name(hr[0].decoder), have.width,
                   have.height, (long long)nd);
            odl_gpu_prep_release(hb);
        }
        odl_image_free(&want);
        odl_image_free(&have);
    }
    odl_gpu_prep_stats ps;
    odl_gpu_prep_get_stats(gp, &ps);
    TCHECK(ps.feeders == feeders && ps.batches == 5 && ps.images_nvjpeg + ps.images_cpu > 0,
           "%d feeder(s): stats say %d feeders, %lld batches, %lld + %lld images", feeders, ps.feeders, (long long)ps.batches,
           (long long)ps.images_nvjpeg, (long long)ps.images_cpu);
    if (mode == MODE_FAKE && feeders > 1)
        TCHECK(strstr(odl_gpu_prep_nvjpeg_note(gp), "batches at once") != NULL, "note: %s", odl_gpu_prep_nvjpeg_note(gp));
    odl_gpu_prep_free(gp);
}

int main(int argc, char **argv) {
    const char *m = argc > 1 ? argv[1] : "absent";
    if (!strcmp(m, "write") && argc > 2) { /* the test images into DIR, for tests/infer_device.sh */
        snprintf(dir, sizeof dir, "%s", argv[2]);
        make_files();
        return odl_test_failures ? 1 : 0;
    }
    odl_device dev = odl_cpu();
    if (!strcmp(m, "cuda")) {
        mode = MODE_CUDA;
        char *cargv[] = {argv[0], "cuda"};
        int r = yolo_test_device(2, cargv, &dev);
        if (r) return r;
    } else if (!strcmp(m, "fake")) {
        mode = MODE_FAKE;
        if (argc < 3 || strcmp(odl_env_str(ODL_ENV_NVJPEG_LIBRARY), argv[2])) {
            fprintf(stderr, "test_gpu_prep fake LIB: run with ODL_NVJPEG_LIBRARY=LIB (tests/datasets.cmake does)\n");
            return 2;
        }
    } else {
        mode = MODE_ABSENT;
    }
    if (odl_test_mkdtemp(dir, sizeof dir, "gpu_prep")) return 1;
    make_files();

    /* the loader alone */
    odl_nvjpeg *nv = NULL;
    odl_status os = odl_nvjpeg_open(&nv);
    printf("odl_nvjpeg_open: %s\n", os == ODL_OK ? odl_nvjpeg_library(nv) : odl_error_msg());
    if (mode == MODE_ABSENT)
        TCHECK(os == ODL_E_UNSUPPORTED && strstr(odl_error_msg(), "nvJPEG not available"), "absent library: %d %s", os,
               odl_error_msg());
    if (mode == MODE_FAKE) {
        TOK(os);
        const char *nohw = getenv("FAKE_NVJPEG_NO_HW");
        if (nv) TCHECK(odl_nvjpeg_backend_of(nv) == (nohw && nohw[0] == '1' ? ODL_NVJPEG_GPU_HYBRID : ODL_NVJPEG_HARDWARE),
                       "backend %s", odl_nvjpeg_backend_name(odl_nvjpeg_backend_of(nv)));
    }
    odl_nvjpeg_close(nv);
    odl_error_clear();

    stats sv = {0};
    /* one feeder, then every slot its own (batches decoding at once) */
    for (int feeders = 1; feeders <= ODL_GPU_PREP_DEPTH && !odl_test_failures; feeders += ODL_GPU_PREP_DEPTH - 1)
        run_prep(dev, feeders, &sv);
    if (mode == MODE_CUDA) {
        if (sv.gpu_images)
            printf("nvJPEG vs libjpeg-turbo over %d images: worst mean |diff| %.3f, worst 99.9th percentile %.1f, max %.1f "
                   "(bounds %.1f / %.1f)\n", sv.gpu_images, sv.worst_mean, sv.worst_p999, sv.worst_max, NVJPEG_MEAN_BOUND,
                   NVJPEG_P999_BOUND);
        else
            printf("no image was decoded by nvJPEG here (%s): the GPU letterbox of CPU-decoded images was checked\n",
                   "see the decoder line above");
        TCHECK(odl_cuda_shutdown() == ODL_OK, "odl_cuda_shutdown: %s", odl_error_msg());
    }
    odl_test_rmtree(dir);
    return odl_test_finish("test_gpu_prep");
}
