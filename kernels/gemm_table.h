/* The tuned GEMM table: which wgmma configuration (tile, split-K) a product of a given shape runs with on a
 * given GPU model, as `odl_bench_kernels --tune` measured it there. Private to the kernels layer.
 *
 * The file: $ODL_GEMM_TABLE, else $XDG_CACHE_HOME/odl/gemm_sm90.tsv, else $HOME/.cache/odl/gemm_sm90.tsv.
 * Tab-separated lines `device dtype trans_a trans_b M N K tile splits us` ('#' starts a comment), device
 * the CUDA device name (cudaDeviceProp.name), dtype the operand storage (tf32 = float32, bf16, fp16), tile
 * a wgmma tile name ("128x256"). Read once per process; a missing file, another GPU's rows or a bad line
 * mean the built-in plan (a bad line is logged once at debug level), never an error. */
#ifndef ODL_KERNELS_GEMM_TABLE_H
#define ODL_KERNELS_GEMM_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct odl_gemm_table_row {
    char device[96];
    char dtype[8];
    int trans_a, trans_b;
    int64_t M, N, K;
    char tile[16];
    int splits;
    double us;
} odl_gemm_table_row;

/* The table's path (see above), or "" when no variable names a folder. */
const char *odl_gemm_table_path(void);

/* 1 and *row when the table has the product's row for this device, else 0. */
int odl_gemm_table_find(const char *device, const char *dtype, int trans_a, int trans_b, int64_t M, int64_t N,
                        int64_t K, odl_gemm_table_row *row);

/* Write rows to path (the folder made if missing; odl/file.h's durable replacement). Errors:
 * ODL_E_IO naming the path. The process's cached table is dropped, so the next lookup reads the new one. */
odl_status odl_gemm_table_write(const char *path, const odl_gemm_table_row *rows, size_t n, const char *comment);

/* ODL_GEMM_CONFIG (odl/env.h): 1 with *tile (a name, as written), *splits and *ctas (0 = the plan's: split-K,
 * and the persistent grid's CTA count, one per multiprocessor) when set and well formed ("128x256",
 * "128x256:8", "128x128:1:128"), else 0 (a malformed value is logged once). */
int odl_gemm_config_forced(char *tile, size_t cap, int *splits, int *ctas);

#ifdef __cplusplus
}
#endif
#endif
