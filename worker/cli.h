/* Command-line habits shared by odl_worker's tasks: --name=value / --name value flags, checked
 * numbers, the --device choice, "did you mean" for a mistyped flag (the same
 * distance as config keys, odl_name_distance), a flag given twice is an error (as a key given twice in
 * YAML), and --version. */
#ifndef ODL_WORKER_CLI_H
#define ODL_WORKER_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "odl/device.h"
#include "odl/precision.h"
#include "odl/status.h"
#include "worker/cli_flags.h"

/* The closest of `known` (n names, without the leading "--") and, when with_config_keys, of the config
 * keys, to `name`; NULL when none is close enough. */
const char *odl_cli_suggest(const char *name, const char *const *known, size_t n, int with_config_keys);

/* Print "odl_worker: error: unknown option --NAME (did you mean --X?) (see HELP)". */
void odl_cli_unknown(const char *name, const char *const *known, size_t n, int with_config_keys, const char *help);

#define ODL_CLI_MAX_SEEN 128
typedef struct odl_cli_seen {
    const char *key[ODL_CLI_MAX_SEEN];   /* what the flag sets (a config key or a field name) */
    const char *given[ODL_CLI_MAX_SEEN]; /* how it was spelled */
    int n;
} odl_cli_seen;

/* Record that `given` (e.g. "--batch-size") set `key`; returns 0, or -1 after printing
 * "odl_worker: error: --batch_size given twice (first as --batch-size)". */
int odl_cli_once(odl_cli_seen *s, const char *key, const char *given);

/* --version: version, the git commit baked in at configure time, and what the build has (CUDA runtime,
 * NCCL, MPI, GPU architectures). */
void odl_cli_print_version(FILE *f);

/* A task's options as a table, one parser for them (--task=eval and --task=infer). A BOOL flag is the
 * name alone (it stores bool_value); the others take --name=value or --name value. */
typedef enum odl_cli_kind { ODL_CLI_BOOL, ODL_CLI_STR, ODL_CLI_INT, ODL_CLI_FLOAT } odl_cli_kind;
typedef struct odl_cli_opt {
    const char *name; /* "--img-size" */
    const char *key;  /* what it sets, shared by aliases (--imgsz, --input); NULL: the name */
    odl_cli_kind kind;
    void *dst;        /* int * (BOOL, INT), const char ** (STR), float * (FLOAT) */
    double lo, hi;    /* INT, FLOAT: the accepted range */
    const char *what; /* INT, FLOAT: what a value must be, for the error ("an integer in 1..4096") */
    int bool_value;   /* BOOL: the value stored */
} odl_cli_opt;
#define ODL_CLI_BOOL_OPT(name, dst, v) {name, NULL, ODL_CLI_BOOL, (dst), 0, 0, NULL, (v)}
#define ODL_CLI_STR_OPT(name, key, dst) {name, key, ODL_CLI_STR, (void *)(dst), 0, 0, NULL, 0}
#define ODL_CLI_INT_OPT(name, key, dst, lo, hi, what) {name, key, ODL_CLI_INT, (dst), lo, hi, what, 0}
#define ODL_CLI_FLOAT_OPT(name, key, dst, lo, hi, what) {name, key, ODL_CLI_FLOAT, (dst), lo, hi, what, 0}
/* argv[*i] against opts[0..n): 1 when one matched (its value stored, *i past a separate value), 0 when
 * none did, -1 after printing one error line (a missing or bad value, an option given twice). */
int odl_cli_take(int argc, char **argv, int *i, const odl_cli_opt *opts, size_t n, odl_cli_seen *seen);
/* argv[i] matched no option: print "unknown option --X (did you mean --Y?)" (the names of opts and of
 * extra, without "--") or "unexpected argument"; help names the task's --help. */
void odl_cli_reject(const char *arg, const odl_cli_opt *opts, size_t n, const char *const *extra, size_t n_extra,
                    const char *help);

/* memory.preallocate_fraction (a number in [0, 1]) as odl_cuda_init takes it: 0 (grow on demand) is
 * ODL_CUDA_POOL_GROW. */
double odl_cli_pool_fraction(double preallocate_fraction);
/* The --memory.preallocate_fraction option of --task=infer and eval (alias --preallocate-fraction, as
 * training's), default 0: the pool grows on demand. */
#define ODL_CLI_POOL_OPTS(dst)                                                                                   \
    ODL_CLI_FLOAT_OPT("--memory.preallocate_fraction", NULL, (dst), 0, 1, "a number in [0, 1] (0: grow on demand)"), \
        ODL_CLI_FLOAT_OPT("--preallocate-fraction", "--memory.preallocate_fraction", (dst), 0, 1,                 \
                          "a number in [0, 1] (0: grow on demand)")
/* --device auto|cpu|cuda|cuda:N: auto is the first GPU when one is usable, else the CPU. A CUDA device
 * is initialised with its pool (odl_cuda_init; preallocate_fraction as memory.preallocate_fraction, 0 =
 * grow on demand). Errors: ODL_E_INVAL, ODL_E_NODEV. */
odl_status odl_cli_pick_device(const char *spec, double preallocate_fraction, odl_device *dev);
/* The device of --device without initialising it (no CUDA context yet; the driver is asked for the
 * device count). Errors: as odl_cli_pick_device's. */
odl_status odl_cli_device_choice(const char *spec, odl_device *dev);

/* --decoder auto|nvjpeg|cpu (eval and infer): nvjpeg decodes JPEGs with nvJPEG where it is there and takes
 * the image (odl/gpu_prep.h), cpu always with libjpeg-turbo; auto is nvjpeg, except that --task=infer
 * decodes runs of fewer than 64 images on the CPU (nvJPEG's set-up costs more). 0 when spec is one of
 * them, else 2 after printing the error. */
int odl_cli_check_decoder(const char *spec);
/* --cuda-graph on|off of infer and eval: *on = 1 for "on", 0 for "off" or no value (NULL). Returns 0, or 2
 * after an error line for another value. */
int odl_cli_cuda_graph(const char *spec, int *on);

/* --precision fp32|tf32|bf16 of --task=infer and --task=eval (docs/PRECISION.md): the float32 network's
 * convolutions on tensor cores with TF32 or BF16 operands and float32 accumulation
 * (odl_set_matmul_precision); --half runs its own float16 kernels, so only fp32 goes with it. spec NULL
 * is fp32. 0 with *out set, else 2 after printing the error. */
int odl_cli_yolo_precision(const char *spec, int half, odl_precision *out);

/* What a YOLOv5 forward computes in, for the run's first line: "float16", "float32" or
 * "float32, TF32 convolutions" (BF16). */
const char *odl_cli_yolo_precision_note(int half, odl_precision p);

#endif
