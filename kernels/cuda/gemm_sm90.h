/* The Hopper GEMM (gemm_sm90.cu) as the rest of the CUDA backend sees it: gemm_tc.cu sends its products
 * here on compute capability 9.0 devices, the typed GEMM entry always. */
#ifndef ODL_KERNELS_CUDA_GEMM_SM90_H
#define ODL_KERNELS_CUDA_GEMM_SM90_H

#include <cudaTypedefs.h>

#include "common.cuh"
#include "gemm_core.cuh"
#include "gemm_typed.cuh"

namespace odlk {
namespace sm90 {

using Args = odl_gemm_typed_args;

constexpr int kRowBytes = 128; /* bytes of K per shared-memory row and stage: the 128-byte swizzle span */

/* The wgmma tiles (gemm_sm90.cu holds the table; gemm_sm90_kernel.cuh instantiates each). */
struct TileDesc {
    int bm, bn, stages;
    const char *name, *short_name;
};
constexpr int kTileCount = 3;
extern const TileDesc kTiles[kTileCount];

/* Kernel parameters besides the tensor maps. */
struct Params {
    int M, N, K;
    int tiles_m, tiles_n;
    int kblocks;  /* ceil(K / BK) */
    int splits;   /* K ranges per tile */
    int kb_chunk; /* K blocks per split */
    int units;    /* tiles_m * tiles_n * splits */
};

/* One launch of the kernel: operand majors (MN = M- or N-major in memory), the tile, operands, sizes,
 * output and epilogue, and the persistent grid's CTA count. */
struct Launch {
    bool a_mn, b_mn;
    int tile;
    const void *A, *B;
    int64_t lda, ldb;
    int abtype;
    Params p;
    TypedOut out;
    Epi ep;
    int ctas;
};
/* Per operand dtype (gemm_{bf16,f16,tf32}_sm90.cu); tf32 takes K-major operands only. */
odl_status run_bf16(const Launch &l);
odl_status run_f16(const Launch &l);
odl_status run_tf32(const Launch &l);

/* cuTensorMapEncodeTiled through the runtime's driver entry point (no link against libcuda). */
odl_status encoder(PFN_cuTensorMapEncodeTiled_v12000 *out);

/* Whether the current device is compute capability 9.0 and the driver encodes tensor maps; cached per
 * device. ODL_GEMM_SM90=0 (odl/env.h) turns the path off. */
bool available();

/* The product of a on wgmma. tile: -1 = the plan's, else below num_tiles(); splits: 0 = the plan's,
 * >= 1 forced (clamped to the K blocks). ODL_E_UNSUPPORTED for what the kernels do not take (misaligned
 * operands or leading dimensions, sizes of 2^31 or more, not a 9.0 device): the caller falls back. */
odl_status gemm(const Args &a, int tile, int splits, size_t reserve = 0);

/* Workspace bytes gemm(a, tile, splits, reserve) takes after the first `reserve` (which hold the caller's
 * operands: a caller that packs into the workspace first asks for reserve + this, so that gemm's own
 * request does not grow, and so move, the buffer). 0 where gemm would refuse a. */
size_t workspace_need(const Args &a, int tile, int splits);

/* The configuration of a's product: ODL_GEMM_CONFIG when set, else the tuned table's row for this GPU and
 * shape (kernels/gemm_table.h), else plan_builtin. */
void plan(const Args &a, int *tile, int *splits);
/* The built-in plan for an M x N x K product of esz-byte operands: the largest tile whose tiles fill 3/4
 * of the multiprocessors, split-K when even the smallest leaves them idle. */
void plan_builtin(int64_t M, int64_t N, int64_t K, int esz, int *tile, int *splits);
int num_tiles();
const char *tile_name(int tile);       /* "wgmma 128x256 4 stages" */
const char *tile_short_name(int tile); /* "128x256": ODL_GEMM_CONFIG's and the table's name */
int tile_index(const char *name);      /* by short name or index; -1 if none */
const char *dtype_key(int ab_type);    /* "tf32", "bf16", "fp16": the table's dtype column */
const char *device_name();             /* the current device's cudaDeviceProp.name */

} // namespace sm90
} // namespace odlk

#endif
