/* Compare the parameters of two HDF5 weights files (odl_worker --save, or the per-rank dumps of
 * ODL_DUMP_PARAMS; every /model dataset, read with odl/h5io.h, crc32 verified):
 *   comm_compare_params A.h5 B.h5 --bitwise           every value bit-identical
 *   comm_compare_params A.h5 B.h5 --atol X --rtol Y   |a - b| <= X + Y * |b| for every value
 * Prints the largest absolute and relative difference per parameter and overall; exit 0 when the
 * files match, 1 when they differ, 2 on an unreadable file or a usage error. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/h5io.h"

static int fail_read(const char *what) {
    fprintf(stderr, "comm_compare_params: %s: %s\n", what, odl_error_msg());
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: comm_compare_params A.h5 B.h5 --bitwise | --atol X --rtol Y\n");
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
    odl_h5_reader *a = NULL, *b = NULL;
    if (odl_h5_reader_open(argv[1], &a) != ODL_OK) return fail_read(argv[1]);
    if (odl_h5_reader_open(argv[2], &b) != ODL_OK) {
        odl_h5_reader_close(a);
        return fail_read(argv[2]);
    }
    int rc = 0, nparams = 0;
    double worst_abs = 0, worst_rel = 0, worst_ratio = 0;
    int64_t total = 0, nbits = 0;
    float *x = NULL, *y = NULL;
    for (size_t k = 0; k < odl_h5_reader_count(a) && rc == 0; k++) {
        const char *name = odl_h5_reader_name(a, k);
        if (strncmp(name, "/model/", 7) != 0) continue;
        odl_h5_info ia, ib;
        if (!odl_h5_reader_has(b, name)) {
            printf("DIFFER: %s is in %s but not in %s\n", name, argv[1], argv[2]);
            rc = 1;
            break;
        }
        if (odl_h5_reader_info(a, name, &ia) != ODL_OK || odl_h5_reader_info(b, name, &ib) != ODL_OK) {
            rc = fail_read(name);
            break;
        }
        if (ia.numel != ib.numel || ia.ndim != ib.ndim || memcmp(ia.shape, ib.shape, sizeof(int64_t) * (size_t)ia.ndim)) {
            printf("DIFFER: %s has another shape in the two files\n", name);
            rc = 1;
            break;
        }
        free(x);
        free(y);
        x = malloc((size_t)ia.numel * sizeof *x + 1);
        y = malloc((size_t)ia.numel * sizeof *y + 1);
        if (!x || !y) {
            fprintf(stderr, "comm_compare_params: out of memory\n");
            rc = 2;
            break;
        }
        if (odl_h5_reader_read(a, name, ODL_F32, ia.ndim, ia.shape, x) != ODL_OK ||
            odl_h5_reader_read(b, name, ODL_F32, ib.ndim, ib.shape, y) != ODL_OK) {
            rc = fail_read(name);
            break;
        }
        double pa = 0, pr = 0;
        int64_t pbits = 0;
        for (int64_t j = 0; j < ia.numel; j++) {
            if (memcmp(&x[j], &y[j], sizeof x[j])) pbits++;
            double d = fabs((double)x[j] - (double)y[j]);
            if (isnan(x[j]) || isnan(y[j])) d = INFINITY;
            double ay = fabs((double)y[j]);
            if (d > pa) pa = d;
            if (ay > 1e-6 && d / ay > pr) pr = d / ay;
            if (!bitwise) {
                double ratio = d / (atol + rtol * ay);
                if (!(ratio <= worst_ratio)) worst_ratio = ratio;
            }
        }
        printf("  %-22s %8lld values  max |diff| %.3e  max rel %.3e  %lld not bit-identical\n", name,
               (long long)ia.numel, pa, pr, (long long)pbits);
        total += ia.numel;
        nbits += pbits;
        nparams++;
        if (pa > worst_abs) worst_abs = pa;
        if (pr > worst_rel) worst_rel = pr;
    }
    if (rc == 0) {
        size_t nb = 0;
        for (size_t k = 0; k < odl_h5_reader_count(b); k++) nb += !strncmp(odl_h5_reader_name(b, k), "/model/", 7);
        if ((int)nb != nparams || nparams == 0) {
            printf("DIFFER: %d parameters in %s, %zu in %s\n", nparams, argv[1], nb, argv[2]);
            rc = 1;
        }
    }
    if (rc == 0) {
        int differ = bitwise ? nbits > 0 : !(worst_ratio <= 1.0);
        printf("%s: %d parameters, %lld values, max |diff| %.3e, max rel diff %.3e, %lld not bit-identical (%s)\n",
               differ ? "DIFFER" : "MATCH", nparams, (long long)total, worst_abs, worst_rel, (long long)nbits,
               bitwise ? "bitwise" : "tolerance");
        if (!bitwise)
            printf("  tolerance: atol %g rtol %g, worst |diff| / (atol + rtol |b|) = %.3f\n", atol, rtol, worst_ratio);
        rc = differ;
    }
    free(x);
    free(y);
    odl_h5_reader_close(a);
    odl_h5_reader_close(b);
    return rc;
}
