/* Bad input and the odl_worker --task=infer command line:
 *  - odl_yolov5_load on a missing file, a text file, an HDF5 file of another kind and weights with a
 *    tensor of the wrong shape: clear errors naming the file (and the tensor);
 *  - odl_worker on a directory holding bus.jpg, zidane.jpg, a truncated JPEG, a text file named .jpg and
 *    a README (ignored): goes on with the good images, writes detections.json (checked against
 *    detect_rect640.json) and the drawn images, names each failure at the end and exits 1;
 *  - odl_worker on one missing image, with weights of another kind, with a bad flag: one clear line,
 *    non-zero exit;
 *  - odl_worker --half on bus.jpg (the CPU's float16 reference kernels): the boxes of the float32 run, and
 *    --half listed by --task=infer --help. */
#include <sys/wait.h>
#include <unistd.h>

#include "yolov5_test_util.h"

static char g_tmp[1024];

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

static void copy_prefix(const char *src, const char *dst, long keep /* -1 = all */) {
    FILE *f = fopen(src, "rb");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n);
    size_t got = fread(b, 1, (size_t)n, f);
    fclose(f);
    write_file(dst, b, keep < 0 ? got : (size_t)keep);
    free(b);
}

/* Run a shell command, capturing stderr into `err` (cap bytes); returns the exit status. */
static int run_cmd(const char *cmd, char *err, size_t cap) {
    char full[8192], errpath[4096];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", g_tmp);
    snprintf(full, sizeof full, "%s 2>%s >/dev/null", cmd, errpath);
    int st = system(full);
    err[0] = 0;
    FILE *f = fopen(errpath, "rb");
    if (f) {
        size_t n = fread(err, 1, cap - 1, f);
        err[n] = 0;
        fclose(f);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void weights_errors(const char *weights) {
    odl_yolov5 *m = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/none.h5", g_tmp);
    TFAIL(odl_yolov5_load(path, odl_cpu(), &m), ODL_E_NOTFOUND);
    TCHECK(strstr(odl_error_msg(), "none.h5") != NULL, "%s", odl_error_msg());
    snprintf(path, sizeof path, "%s/text.h5", g_tmp);
    write_file(path, "hello\n", 6);
    TFAIL(odl_yolov5_load(path, odl_cpu(), &m), ODL_E_FORMAT);
    TCHECK(strstr(odl_error_msg(), "text.h5") && strstr(odl_error_msg(), "not an HDF5"), "%s", odl_error_msg());
    /* An HDF5 file of another model */
    snprintf(path, sizeof path, "%s/mnist.h5", g_tmp);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t sp = H5Screate(H5S_SCALAR), t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 9);
    hid_t a = H5Acreate2(f, "model", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, "mnist_cnn");
    H5Aclose(a);
    H5Tclose(t);
    H5Sclose(sp);
    H5Fclose(f);
    TFAIL(odl_yolov5_load(path, odl_cpu(), &m), ODL_E_FORMAT);
    TCHECK(strstr(odl_error_msg(), "mnist.h5") && strstr(odl_error_msg(), "not YOLOv5") &&
               strstr(odl_error_msg(), "mnist_cnn"), "%s", odl_error_msg());
    printf("other model: %s\n", odl_error_msg());
    /* Real weights with one tensor reshaped: the description and the tensors disagree */
    snprintf(path, sizeof path, "%s/broken.h5", g_tmp);
    copy_prefix(weights, path, -1);
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    TCHECK(f >= 0, "open copy");
    if (f >= 0) {
        H5Ldelete(f, "model/4/cv1/conv/weight", H5P_DEFAULT);
        hsize_t dims[4] = {8, 64, 1, 1};
        float zeros[8 * 64] = {0};
        hid_t s2 = H5Screate_simple(4, dims, NULL);
        hid_t d = H5Dcreate2(f, "model/4/cv1/conv/weight", H5T_NATIVE_FLOAT, s2, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros);
        H5Dclose(d);
        H5Sclose(s2);
        H5Fclose(f);
        TFAIL(odl_yolov5_load(path, odl_cpu(), &m), ODL_E_FORMAT);
        TCHECK(strstr(odl_error_msg(), "model/4/cv1/conv/weight") && strstr(odl_error_msg(), "[8, 64, 1, 1]") &&
                   strstr(odl_error_msg(), "layer 4"), "%s", odl_error_msg());
        printf("wrong shape: %s\n", odl_error_msg());
    }
    /* A flipped bit in a tensor: the crc32 attribute catches it */
    snprintf(path, sizeof path, "%s/corrupt.h5", g_tmp);
    copy_prefix(weights, path, -1);
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f >= 0) {
        hid_t d = H5Dopen2(f, "model/2/m/0/cv2/conv/weight", H5P_DEFAULT);
        float v[9 * 16 * 16];
        H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
        v[100] = -v[100] + 1.0f;
        H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
        H5Dclose(d);
        H5Fclose(f);
        TFAIL(odl_yolov5_load(path, odl_cpu(), &m), ODL_E_CHECKSUM);
        TCHECK(strstr(odl_error_msg(), "model/2/m/0/cv2/conv/weight") != NULL, "%s", odl_error_msg());
        printf("corrupt tensor: %s\n", odl_error_msg());
    }
    TCHECK(m == NULL, "no model on failure");
}

/* The detections (an array) of the one image of DIR/detections.json, loaded into *js; NULL on failure. */
static const json_t *single_image_dets(const char *dir, json_t **js) {
    char p[4096];
    snprintf(p, sizeof p, "%s/detections.json", dir);
    *js = j_load(p);
    const json_t *d = json_array_size(*js) == 1 ? j_get(json_array_get(*js, 0), "detections") : NULL;
    return json_is_array(d) ? d : NULL;
}

/* A reduced-precision run (--half, --precision tf32) against float32 on bus.jpg: the boxes with conf >= 0.3
 * pair up one to one (same class, every coordinate within 1 px, conf within 0.01). Pairing by nearest box
 * of the same class, not by position, since two boxes of close confidence may swap places in NMS's order
 * between the precisions. The float32 run is o_float, made by the first call. */
static void lowp_matches_float(const char *worker, const char *weights, const char *dir, const char *flag,
                               const char *tag) {
    char cmd[16384], err[65536];
    const char *runs[2][2] = {{"", "float"}, {flag, tag}};
    for (int h = 0; h < 2; h++) {
        char out[4096];
        snprintf(out, sizeof out, "%s/o_%s", g_tmp, runs[h][1]);
        if (!h && access(out, F_OK) == 0) continue;
        snprintf(cmd, sizeof cmd, "'%s' --task=infer --model=yolov5 --weights='%s' --input='%s/bus.jpg' "
                 "--output='%s' --device cpu --no-save-images%s", worker, weights, dir, out, runs[h][0]);
        int rc = run_cmd(cmd, err, sizeof err);
        if (h) printf("---%s run (exit %d) ---\n%s", flag, rc, err);
        TCHECK(rc == 0, "%s run on bus.jpg: exit %d: %s", h ? flag : "float32", rc, err);
    }
    char d32[4096], dlo[4096];
    snprintf(d32, sizeof d32, "%s/o_float", g_tmp);
    snprintf(dlo, sizeof dlo, "%s/o_%s", g_tmp, tag);
    json_t *j32 = NULL, *jlo = NULL;
    const json_t *a = single_image_dets(d32, &j32), *b = single_image_dets(dlo, &jlo);
    TCHECK(a && b, "detections.json of both runs (one image each)");
    if (a && b) {
        int na = 0, nb = 0, used[1024] = {0};
        const int an = (int)json_array_size(a), bn = (int)json_array_size(b);
        for (int k = 0; k < bn; k++) nb += j_num(json_array_get(b, (size_t)k), "conf") >= 0.3;
        for (int i = 0; i < an; i++) {
            const json_t *da = json_array_get(a, (size_t)i);
            if (j_num(da, "conf") < 0.3) continue;
            na++;
            int best = -1;
            double best_md = 1e30;
            for (int k = 0; k < bn && k < 1024; k++) {
                const json_t *db = json_array_get(b, (size_t)k);
                if (used[k] || j_num(db, "conf") < 0.3 || (int)j_num(db, "class_id") != (int)j_num(da, "class_id"))
                    continue;
                double md = 0;
                for (int c = 0; c < 4; c++)
                    md = fmax(md, fabs(j_at(j_get(da, "xyxy"), (size_t)c) - j_at(j_get(db, "xyxy"), (size_t)c)));
                if (md < best_md) best_md = md, best = k;
            }
            TCHECK(best >= 0, "float32 box %d (class %d) has no%s box of its class", i, (int)j_num(da, "class_id"), flag);
            if (best < 0) continue;
            used[best] = 1;
            double dc = fabs(j_num(da, "conf") - j_num(json_array_get(b, (size_t)best), "conf"));
            printf("box %d class %d:%s delta %.3f px, conf %.4f\n", i, (int)j_num(da, "class_id"), flag, best_md, dc);
            TCHECK(best_md <= 1.0 && dc <= 0.01, "box %d:%s delta %.3f px, conf %.4f", i, flag, best_md, dc);
        }
        TCHECK(na == nb && na > 0, "%d float32 boxes with conf >= 0.3, %d with%s", na, nb, flag);
    }
    json_decref(j32);
    json_decref(jlo);
}

static void half_matches_float(const char *worker, const char *weights, const char *dir) {
    char cmd[16384], err[65536];
    lowp_matches_float(worker, weights, dir, " --half", "half");
    lowp_matches_float(worker, weights, dir, " --precision tf32", "tf32");
    /* --precision and --half do not go together; a precision that is not one is refused */
    const char *bad[2][2] = {{"--precision tf32 --half", "--half"}, {"--precision fp64", "expected fp32, tf32 or bf16"}};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "'%s' --task=infer --model=yolov5 --weights='%s' --input='%s/bus.jpg' "
                 "--output='%s/o_bad' --device cpu %s", worker, weights, dir, g_tmp, bad[i][0]);
        int rc = run_cmd(cmd, err, sizeof err);
        TCHECK(rc == 2 && strstr(err, bad[i][1]) && !strchr(strchr(err, '\n') ? strchr(err, '\n') + 1 : "", '\n'),
               "%s: exit %d, one line naming '%s': %s", bad[i][0], rc, bad[i][1], err);
    }
    /* --half is documented by --help (printed on stdout, which run_cmd discards) */
    char line[1024];
    int listed = 0;
    snprintf(cmd, sizeof cmd, "'%s' --task=infer --help", worker);
    FILE *f = popen(cmd, "r");
    TCHECK(f != NULL, "popen %s", cmd);
    if (f) {
        while (fgets(line, sizeof line, f))
            if (strstr(line, "--half")) listed = 1;
        TCHECK(pclose(f) == 0, "--task=infer --help exit status");
    }
    TCHECK(listed, "--half in --task=infer --help");
}

static void worker_runs(const char *weights) {
    const char *bin = getenv("ODL_BINARY_DIR");
    char worker[2048], dir[2048], out[2048], cmd[16384], err[65536], p[4096];
    snprintf(worker, sizeof worker, "%s/odl_worker", bin ? bin : ".");
    if (access(worker, X_OK) != 0) {
        TCHECK(0, "%s not built", worker);
        return;
    }
    snprintf(dir, sizeof dir, "%s/images", g_tmp);
    snprintf(out, sizeof out, "%s/out", g_tmp);
    mkdir(dir, 0777);
    snprintf(p, sizeof p, "%s/bus.jpg", dir);
    copy_prefix(odl_test_data_path("yolov5/images/bus.jpg"), p, -1);
    snprintf(p, sizeof p, "%s/zidane.jpg", dir);
    copy_prefix(odl_test_data_path("yolov5/images/zidane.jpg"), p, -1);
    snprintf(p, sizeof p, "%s/broken_truncated.jpg", dir);
    copy_prefix(odl_test_data_path("yolov5/images/bus.jpg"), p, 100000);
    snprintf(p, sizeof p, "%s/fake.jpg", dir);
    write_file(p, "I am text\n", 10);
    snprintf(p, sizeof p, "%s/README.txt", dir);
    write_file(p, "ignored\n", 8);

    snprintf(cmd, sizeof cmd, "'%s' --task=infer --model=yolov5 --weights='%s' --input='%s' --output='%s' --device cpu "
             "--batch-size 4", worker, weights, dir, out);
    int rc = run_cmd(cmd, err, sizeof err);
    printf("--- directory run (exit %d) ---\n%s", rc, err);
    TCHECK(rc == 1, "directory with bad files: exit %d, expected 1", rc);
    TCHECK(strstr(err, "broken_truncated.jpg") && strstr(err, "truncated"), "truncated file named");
    TCHECK(strstr(err, "fake.jpg") && strstr(err, "not a JPEG or PNG"), "text file named");
    TCHECK(strstr(err, "README") == NULL, "README ignored");
    TCHECK(strstr(err, "2 of 4 image(s) failed") != NULL, "failure summary");
    /* detections.json */
    snprintf(p, sizeof p, "%s/detections.json", out);
    json_t *js = j_load(p), *ref = j_load(odl_test_data_path("yolov5/reference/detect_rect640.json"));
    int ok = json_is_array(js);
    TCHECK(ok, "%s is a JSON list", p);
    TCHECK(ref != NULL, "reference json");
    if (ok) {
        const int n = (int)json_array_size(js);
        TCHECK(n == 2, "%d entries, expected 2 (bus, zidane)", n);
        for (int i = 0; i < n; i++) {
            const json_t *e = json_array_get(js, (size_t)i), *dets = j_get(e, "detections");
            const char *file = json_string_value(j_get(e, "file"));
            if (!file || !json_is_array(dets)) {
                TCHECK(0, "entry %d lacks file/detections", i);
                continue;
            }
            const json_t *r = j_get(j_get(j_get(ref, "images"), file), "detections_xyxy_conf_cls");
            const json_t *ohw = j_get(j_get(j_get(ref, "images"), file), "orig_hw");
            TCHECK(r && ohw, "%s in the reference", file);
            if (!r || !ohw) continue;
            TCHECK((int)j_num(e, "width") == (int)j_at(ohw, 1) && (int)j_num(e, "height") == (int)j_at(ohw, 0),
                   "%s size", file);
            const int nd = (int)json_array_size(dets), nr = (int)json_array_size(r);
            TCHECK(nd == nr, "%s: %d boxes, reference %d", file, nd, nr);
            for (int k = 0; k < nd && k < nr; k++) {
                const json_t *d = json_array_get(dets, (size_t)k), *xy = j_get(d, "xyxy");
                const json_t *rk = json_array_get(r, (size_t)k);
                double md = 0;
                for (int c = 0; c < 4; c++) md = fmax(md, fabs(j_at(xy, (size_t)c) - j_at(rk, (size_t)c)));
                TCHECK(md <= 1.0 && fabs(j_num(d, "conf") - j_at(rk, 4)) <= 0.01 && (int)j_num(d, "class_id") == (int)j_at(rk, 5),
                       "%s box %d: delta %.3f", file, k, md);
                TCHECK(json_is_string(j_get(d, "class_name")), "class_name");
            }
        }
    }
    json_decref(js);
    json_decref(ref);
    odl_image im;
    snprintf(p, sizeof p, "%s/bus.jpg", out);
    TOK(odl_image_load(p, &im));
    TCHECK(im.width == 810 && im.height == 1080, "drawn bus.jpg");
    odl_image_free(&im);

    /* One missing image */
    snprintf(cmd, sizeof cmd, "'%s' --task=infer --weights='%s' --input='%s/nope.jpg' --output='%s/o2' --device cpu",
             worker, weights, g_tmp, g_tmp);
    rc = run_cmd(cmd, err, sizeof err);
    printf("--- missing image (exit %d) ---\n%s", rc, err);
    TCHECK(rc != 0 && strstr(err, "nope.jpg"), "missing image: exit %d", rc);
    /* A non-image single file */
    snprintf(cmd, sizeof cmd, "'%s' --task=infer --weights='%s' --input='%s/fake.jpg' --output='%s/o3' --device cpu "
             "--no-save-images", worker, weights, dir, g_tmp);
    rc = run_cmd(cmd, err, sizeof err);
    TCHECK(rc == 1 && strstr(err, "fake.jpg"), "text image: exit %d: %s", rc, err);
    /* Weights of another kind */
    snprintf(cmd, sizeof cmd, "'%s' --task=infer --weights='%s/mnist.h5' --input='%s/bus.jpg' --output='%s/o4' --device cpu",
             worker, g_tmp, dir, g_tmp);
    rc = run_cmd(cmd, err, sizeof err);
    printf("--- other weights (exit %d) ---\n%s", rc, err);
    TCHECK(rc == 1 && strstr(err, "mnist.h5") && strstr(err, "not YOLOv5"), "other weights: exit %d", rc);
    /* Bad flag values */
    snprintf(cmd, sizeof cmd, "'%s' --task=infer --weights='%s' --input='%s' --img-size 0", worker, weights, dir);
    rc = run_cmd(cmd, err, sizeof err);
    TCHECK(rc == 2 && strstr(err, "--img-size"), "bad --img-size: exit %d: %s", rc, err);
    snprintf(cmd, sizeof cmd, "'%s' --task=infer --weights='%s' --input='%s' --conf-thres x", worker, weights, dir);
    rc = run_cmd(cmd, err, sizeof err);
    TCHECK(rc == 2 && strstr(err, "--conf-thres"), "bad --conf-thres: exit %d: %s", rc, err);
    snprintf(cmd, sizeof cmd, "'%s' --task=infer --weights='%s' --input='%s' --cuda-graph 1", worker, weights, dir);
    rc = run_cmd(cmd, err, sizeof err);
    TCHECK(rc == 2 && strstr(err, "--cuda-graph '1': on or off"), "bad --cuda-graph: exit %d: %s", rc, err);
    /* Square letterbox, single good image, no drawn copy */
    snprintf(cmd, sizeof cmd, "'%s' --task=infer --weights='%s' --input='%s/zidane.jpg' --output='%s/o5' --device cpu "
             "--square --no-save-images --max-det 2", worker, weights, dir, g_tmp);
    rc = run_cmd(cmd, err, sizeof err);
    TCHECK(rc == 0, "square single image: exit %d: %s", rc, err);
    snprintf(p, sizeof p, "%s/o5/detections.json", g_tmp);
    js = j_load(p);
    TCHECK(json_array_size(js) == 1 && json_array_size(j_get(json_array_get(js, 0), "detections")) == 2,
           "--max-det 2 gives 2 boxes");
    json_decref(js);
    snprintf(p, sizeof p, "%s/o5/zidane.jpg", g_tmp);
    TCHECK(access(p, F_OK) != 0, "--no-save-images wrote %s", p);

    half_matches_float(worker, weights, dir);
}

int main(int argc, char **argv) {
    const char *w = yolo_weights_path(argc, argv);
    if (!w) return ODL_TEST_SKIP;
    char weights[4096];
    snprintf(weights, sizeof weights, "%s", w);
    if (odl_test_mkdtemp(g_tmp, sizeof g_tmp, "yolov5_worker")) return 1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    weights_errors(weights);
    worker_runs(weights);
    return odl_test_finish_in("test_yolov5_worker", g_tmp);
}
