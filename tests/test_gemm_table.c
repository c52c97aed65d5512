/* test_gemm_table: the tuned GEMM table and the forced configuration (kernels/gemm_table.h), no GPU:
 * the path from ODL_GEMM_TABLE, a missing table (no row, no error), a written table read back row for row,
 * rows of another GPU or shape not taken, damaged lines ignored while the good ones still serve, and
 * ODL_GEMM_CONFIG's TILE[:SPLITS[:CTAS]] parsed whole (a malformed value is no configuration). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_table.h"
#include "odl/env.h"
#include "test_util.h"

static void set_env(const char *k, const char *v) {
    if (v) setenv(k, v, 1);
    else unsetenv(k);
    odl_env_reload();
}

static int forced(const char *v, char *tile, int *splits, int *ctas) {
    set_env("ODL_GEMM_CONFIG", v);
    *splits = *ctas = -1;
    tile[0] = 0;
    return odl_gemm_config_forced(tile, 16, splits, ctas);
}

int main(void) {
    char dir[256], path[320];
    if (odl_test_mkdtemp(dir, sizeof dir, "gemm_table") != 0) return 1;
    snprintf(path, sizeof path, "%s/sub/gemm_sm90.tsv", dir); /* the folder is made by the writer */
    set_env("ODL_GEMM_TABLE", path);
    TCHECK(!strcmp(odl_gemm_table_path(), path), "path from ODL_GEMM_TABLE: %s", odl_gemm_table_path());

    odl_gemm_table_row r;
    TCHECK(!odl_gemm_table_find("NVIDIA H200", "bf16", 0, 1, 512, 128, 9216, &r), "no table: no row");

    odl_gemm_table_row rows[2];
    memset(rows, 0, sizeof rows);
    snprintf(rows[0].device, sizeof rows[0].device, "NVIDIA H200");
    snprintf(rows[0].dtype, sizeof rows[0].dtype, "bf16");
    rows[0].trans_a = 0, rows[0].trans_b = 1, rows[0].M = 512, rows[0].N = 128, rows[0].K = 9216;
    snprintf(rows[0].tile, sizeof rows[0].tile, "128x128");
    rows[0].splits = 8, rows[0].us = 49.8;
    rows[1] = rows[0];
    snprintf(rows[1].dtype, sizeof rows[1].dtype, "tf32");
    rows[1].trans_a = 1, rows[1].trans_b = 0;
    snprintf(rows[1].tile, sizeof rows[1].tile, "64x128");
    rows[1].splits = 1;
    TOK(odl_gemm_table_write(path, rows, 2, "test_gemm_table"));
    TCHECK(odl_gemm_table_find("NVIDIA H200", "bf16", 0, 1, 512, 128, 9216, &r), "the bf16 row back");
    TCHECK(!strcmp(r.tile, "128x128") && r.splits == 8 && r.us > 49.7 && r.us < 49.9, "bf16 row: %s %d %.2f", r.tile,
           r.splits, r.us);
    TCHECK(odl_gemm_table_find("NVIDIA H200", "tf32", 1, 0, 512, 128, 9216, &r) && !strcmp(r.tile, "64x128") &&
               r.splits == 1,
           "the tf32 row back");
    TCHECK(!odl_gemm_table_find("NVIDIA H100 80GB HBM3", "bf16", 0, 1, 512, 128, 9216, &r), "another GPU's rows");
    TCHECK(!odl_gemm_table_find("NVIDIA H200", "bf16", 0, 1, 512, 128, 9217, &r), "another shape");
    TCHECK(!odl_gemm_table_find("NVIDIA H200", "bf16", 1, 1, 512, 128, 9216, &r), "another layout");

    /* damaged lines: each ignored, the rest of the table still served (a write drops the process's cached
     * table, so the next lookup reads the file as rewritten by hand below) */
    TOK(odl_gemm_table_write(path, rows, 0, NULL));
    FILE *f = fopen(path, "w");
    TCHECK(f != NULL, "rewrite %s", path);
    if (f) {
        fputs("# a table with damaged lines\n", f);
        fputs("NVIDIA H200\tbf16\t0\t0\t64\t64\t64\t128x128\t0\t1.0\n", f);
        fputs("NVIDIA H200\tbf16\t0\t0\t64\t64\tabc\t128x128\t1\t1.0\n", f);
        fputs("garbage without tabs\n", f);
        fputs("NVIDIA H200\tfp16\t0\t0\t256\t256\t256\t128x256\t2\t9.5\n", f);
        fclose(f);
    }
    TCHECK(!odl_gemm_table_find("NVIDIA H200", "bf16", 0, 0, 64, 64, 64, &r), "a row with splits 0 is not taken");
    TCHECK(odl_gemm_table_find("NVIDIA H200", "fp16", 0, 0, 256, 256, 256, &r) && r.splits == 2 &&
               !strcmp(r.tile, "128x256"),
           "the good row after damaged ones");

    /* ODL_GEMM_CONFIG */
    char tile[16];
    int s, c;
    TCHECK(!forced(NULL, tile, &s, &c), "unset: nothing forced");
    TCHECK(forced("128x256", tile, &s, &c) && !strcmp(tile, "128x256") && s == 0 && c == 0, "TILE alone");
    TCHECK(forced("128x128:8", tile, &s, &c) && !strcmp(tile, "128x128") && s == 8 && c == 0, "TILE:SPLITS");
    TCHECK(forced("1:4:128", tile, &s, &c) && !strcmp(tile, "1") && s == 4 && c == 128, "index:SPLITS:CTAS");
    TCHECK(!forced("64x128:abc", tile, &s, &c), "splits not a number");
    TCHECK(!forced("64x128:300", tile, &s, &c), "splits above 256");
    TCHECK(!forced("64x128:2:3:4", tile, &s, &c), "a fourth field");
    TCHECK(!forced(":2", tile, &s, &c), "no tile");
    set_env("ODL_GEMM_CONFIG", NULL);
    odl_test_rmtree(dir);
    return odl_test_finish("test_gemm_table");
}
