/* Command-line habits shared by odl_worker's tasks: --name=value / --name value flags, checked
 * numbers, the --device choice, "did you mean" for a mistyped flag (the same
 * distance as config keys, odl_name_distance), a flag given twice is an error (as a key given twice in
 * YAML), and --version. */
#ifndef ODL_WORKER_CLI_H
#define ODL_WORKER_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "odl/device.h"
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

/* --device auto|cpu|cuda|cuda:N: auto is the first GPU when one is usable, else the CPU. A CUDA device
 * is initialised (odl_cuda_init, half of its memory for the pool). Errors: ODL_E_INVAL, ODL_E_NODEV. */
odl_status odl_cli_pick_device(const char *spec, odl_device *dev);

#endif
