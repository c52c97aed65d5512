/* CUDA graphs of the YOLOv5 forward (odl_yolov5_set_graphs): every graphed forward's Detect output equals,
 * bit for bit, the op-by-op forward of the same input, through the entry's whole life -- the first forward
 * of a size (op by op), its capture, replays, a second size and back, a larger size that moves every
 * buffer (captured again), float16 after float32, and graphs turned off.
 * usage: test_yolov5_graph cpu|cuda --weights=PATH. On the CPU set_graphs is accepted and changes nothing
 * (no graph captured, outputs as before). Inputs: random pixels in [0, 1], fixed seed, small sizes
 * (multiples of the stride 32) so that the CPU run is quick. */
#include "yolov5_test_util.h"

/* Detect output of one forward of in (N images of H x W from the pixels px) as host floats. */
static float *forward(odl_yolov5 *m, const float *px, int N, int H, int W, int64_t *n) {
    odl_tensor *in = NULL;
    const odl_tensor *out = NULL;
    if (odl_yolov5_input(m, N, H, W, &in) != ODL_OK || odl_tensor_copy_from_host(in, px, sizeof(float) * N * 3 * H * W) ||
        odl_yolov5_forward(m, in, &out) != ODL_OK) {
        fprintf(stderr, "forward [%d, 3, %d, %d]: %s\n", N, H, W, odl_error_msg());
        return NULL;
    }
    *n = odl_tensor_numel(out);
    return to_host(out);
}

/* The graphed model's output for (N, H, W) equals the reference model's, bitwise. */
static void same(odl_yolov5 *g, odl_yolov5 *ref, const float *px, int N, int H, int W, const char *when) {
    int64_t ng = 0, nr = 0;
    float *a = forward(g, px, N, H, W, &ng), *b = forward(ref, px, N, H, W, &nr);
    TCHECK(a && b && ng == nr, "%s: outputs (%lld, %lld values)", when, (long long)ng, (long long)nr);
    if (a && b && ng == nr) {
        int64_t diff = 0;
        for (int64_t i = 0; i < ng; i++) diff += memcmp(&a[i], &b[i], sizeof *a) != 0;
        TCHECK(diff == 0, "%s [%d, 3, %d, %d]: %lld of %lld values differ from the op-by-op forward", when, N, H, W,
               (long long)diff, (long long)ng);
    }
    free(a);
    free(b);
}

static void counts(odl_yolov5 *m, int64_t cap, int64_t rep, const char *when) {
    int64_t c = -1, r = -1;
    odl_yolov5_graph_counts(m, &c, &r);
    TCHECK(c == cap && r == rep, "%s: %lld captured, %lld replays (want %lld, %lld)", when, (long long)c, (long long)r,
           (long long)cap, (long long)rep);
}

int main(int argc, char **argv) {
    const char *wpath = NULL;
    odl_device dev;
    int r = yolo_test_start(argc, argv, NULL, &wpath, &dev); /* random inputs: no reference data */
    if (r) return r;
    const int cuda = dev.type == ODL_DEV_CUDA;
    odl_yolov5 *g = NULL, *ref = NULL;
    TOK(odl_yolov5_load(wpath, dev, &g));
    TOK(odl_yolov5_load(wpath, dev, &ref));
    if (!g || !ref) return odl_test_finish("test_yolov5_graph");
    TOK(odl_yolov5_set_graphs(g, 1));

    const int N = 2, H = 128, W = 160;
    float *px = malloc(sizeof(float) * 4 * 3 * 256 * 256);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 4 * 3 * 256 * 256; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        px[i] = (float)(s >> 40) / (float)(1 << 24);
    }
    for (int half = 0; half <= 1; half++) {
        const int64_t c0 = half ? 3 * cuda : 0, r0 = half ? 2 * cuda : 0; /* float32's stay counted */
        if (half) {
            TOK(odl_yolov5_set_half(g, 1));
            TOK(odl_yolov5_set_half(ref, 1));
        }
        same(g, ref, px, N, H, W, half ? "float16, first forward (op by op)" : "first forward (op by op)");
        counts(g, c0, r0, "after the first forward");
        same(g, ref, px, N, H, W, "second forward (captured)");
        counts(g, c0 + cuda, r0, "after the capture");
        same(g, ref, px + 1000, N, H, W, "third forward, other pixels (replayed)");
        counts(g, c0 + cuda, r0 + cuda, "after a replay");
        same(g, ref, px, 1, 64, 96, "another size (op by op)");
        same(g, ref, px, N, H, W, "the first size again (replayed)");
        counts(g, c0 + cuda, r0 + 2 * cuda, "back at the first size");
        same(g, ref, px, 4, 256, 256, "a larger size (every buffer moves)");
        same(g, ref, px, N, H, W, "the first size after the move (captured again)");
        counts(g, c0 + 2 * cuda, r0 + 2 * cuda, "after the move");
        same(g, ref, px, 1, 64, 96, "the other size again (captured)");
        counts(g, c0 + 3 * cuda, r0 + 2 * cuda, "after the other size's capture");
        if (!cuda) counts(g, 0, 0, "on the CPU");
    }
    /* nine sizes in turn: the ninth takes the place of the least recently used (the first), which is
     * then new again; the ninth replays */
    TOK(odl_yolov5_set_graphs(g, 0));
    TOK(odl_yolov5_set_graphs(g, 1));
    for (int k = 1; k <= 9; k++) {
        same(g, ref, px, 1, 32 * k, 64, "one of nine sizes (op by op)");
        same(g, ref, px, 1, 32 * k, 64, "one of nine sizes (captured)");
    }
    counts(g, 15 * cuda, 4 * cuda, "after nine sizes");
    same(g, ref, px, 1, 32, 64, "the first of nine, evicted (op by op)");
    same(g, ref, px, 1, 32, 64, "the first of nine again (captured)");
    same(g, ref, px, 1, 32 * 9, 64, "the ninth (replayed)");
    counts(g, 16 * cuda, 5 * cuda, "after the eviction");
    /* a caller's own input buffer: a graph of its own, keyed by its address */
    odl_tensor own = {0};
    const int64_t shape[4] = {N, 3, H, W};
    TOK(odl_tensor_alloc(&own, dev, ODL_F32, 4, shape));
    TOK(odl_tensor_copy_from_host(&own, px, sizeof(float) * N * 3 * H * W));
    int64_t nr = 0;
    float *want = forward(ref, px, N, H, W, &nr);
    for (int k = 0; k < 3; k++) {
        const odl_tensor *out = NULL;
        TOK(odl_yolov5_forward(g, &own, &out));
        float *got = out ? to_host(out) : NULL;
        TCHECK(got && want && odl_tensor_numel(out) == nr && !memcmp(got, want, sizeof(float) * (size_t)nr),
               "a caller's input, forward %d: not the op-by-op output", k + 1);
        free(got);
    }
    counts(g, 17 * cuda, 6 * cuda, "a caller's input: op by op, captured, replayed");
    free(want);
    odl_tensor_free(&own);
    TOK(odl_yolov5_set_graphs(g, 0));
    same(g, ref, px, N, H, W, "graphs off");
    counts(g, 17 * cuda, 6 * cuda, "graphs off");
    free(px);
    odl_yolov5_free(g);
    odl_yolov5_free(ref);
    if (cuda) odl_cuda_shutdown();
    return odl_test_finish("test_yolov5_graph");
}
