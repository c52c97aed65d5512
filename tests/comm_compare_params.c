/* Compare two parameter dumps written by odl_worker with ODL_DUMP_PARAMS (format in
 * docs/distributed.md):
 *   comm_compare_params A.bin B.bin --bitwise           every value bit-identical
 *   comm_compare_params A.bin B.bin --atol X --rtol Y   |a - b| <= X + Y * |b| for every value
 * Prints the largest absolute and relative difference per parameter and overall; exit 0 when the
 * files match, 1 when they differ, 2 on a malformed file or usage error. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dump {
    int n;
    char names[64][128];
    int64_t numel[64];
    float *data[64];
} dump;

static int read_dump(const char *path, dump *d) {
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "comm_compare_params: cannot open %s\n", path);
        return -1;
    }
    char magic[8];
    int32_t n;
    int ok = fread(magic, 1, 8, f) == 8 && !memcmp(magic, "ODLPRM1", 8) && fread(&n, sizeof n, 1, f) == 1 && n >= 0 &&
             n <= 64;
    for (int i = 0; ok && i < n; i++) {
        int32_t len;
        ok = fread(&len, sizeof len, 1, f) == 1 && len > 0 && len < 128 && fread(d->names[i], 1, (size_t)len, f) == (size_t)len &&
             fread(&d->numel[i], sizeof d->numel[i], 1, f) == 1 && d->numel[i] >= 0 && d->numel[i] < ((int64_t)1 << 32);
        if (!ok) break;
        d->data[i] = malloc((size_t)d->numel[i] * sizeof(float) + 1);
        ok = d->data[i] && fread(d->data[i], sizeof(float), (size_t)d->numel[i], f) == (size_t)d->numel[i];
        d->n = i + 1;
    }
    if (ok) d->n = n;
    fclose(f);
    if (!ok) fprintf(stderr, "comm_compare_params: %s is not a complete parameter dump\n", path);
    return ok ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: comm_compare_params A.bin B.bin --bitwise | --atol X --rtol Y\n");
        return 2;
    }
    int bitwise = 0;
    double atol = 0, rtol = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--bitwise")) bitwise = 1;
        else if (!strcmp(argv[i], "--atol") && i + 1 < argc) atol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--rtol") && i + 1 < argc) rtol = atof(argv[++i]);
        else {
            fprintf(stderr, "comm_compare_params: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    static dump a, b;
    if (read_dump(argv[1], &a) || read_dump(argv[2], &b)) return 2;
    if (a.n != b.n) {
        printf("DIFFER: %d parameters in %s, %d in %s\n", a.n, argv[1], b.n, argv[2]);
        return 1;
    }
    int differ = 0;
    double worst_abs = 0, worst_rel = 0, worst_ratio = 0;
    int64_t total = 0, nbits = 0;
    for (int i = 0; i < a.n; i++) {
        if (strcmp(a.names[i], b.names[i]) || a.numel[i] != b.numel[i]) {
            printf("DIFFER: parameter %d is %s[%lld] in one file and %s[%lld] in the other\n", i, a.names[i],
                   (long long)a.numel[i], b.names[i], (long long)b.numel[i]);
            return 1;
        }
        double pa = 0, pr = 0;
        int64_t pbits = 0;
        for (int64_t j = 0; j < a.numel[i]; j++) {
            float x = a.data[i][j], y = b.data[i][j];
            if (memcmp(&x, &y, sizeof x)) pbits++;
            double d = fabs((double)x - (double)y);
            if (isnan(x) || isnan(y)) d = INFINITY;
            double r = d / (fabs((double)y) > 1e-12 ? fabs((double)y) : 1e-12);
            if (d > pa) pa = d;
            if (r > pr && fabs((double)y) > 1e-6) pr = r;
            if (!bitwise) {
                double ratio = d / (atol + rtol * fabs((double)y));
                if (!(ratio <= worst_ratio)) worst_ratio = ratio;
            }
        }
        total += a.numel[i];
        nbits += pbits;
        printf("  %-16s %8lld values  max |diff| %.3e  max rel %.3e  %lld not bit-identical\n", a.names[i],
               (long long)a.numel[i], pa, pr, (long long)pbits);
        if (pa > worst_abs) worst_abs = pa;
        if (pr > worst_rel) worst_rel = pr;
    }
    if (bitwise) differ = nbits > 0;
    else differ = !(worst_ratio <= 1.0);
    printf("%s: %lld values, max |diff| %.3e, max rel diff %.3e, %lld not bit-identical (%s)\n",
           differ ? "DIFFER" : "MATCH", (long long)total, worst_abs, worst_rel, (long long)nbits,
           bitwise ? "bitwise" : "tolerance");
    if (!bitwise) printf("  tolerance: atol %g rtol %g, worst |diff| / (atol + rtol |b|) = %.3f\n", atol, rtol, worst_ratio);
    for (int i = 0; i < a.n; i++) {
        free(a.data[i]);
        free(b.data[i]);
    }
    return differ ? 1 : 0;
}
