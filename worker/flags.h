/* Command-line helpers shared by odl_worker's tasks: --name=value / --name value flags, checked
 * numbers, the --device choice and --output folders. */
#ifndef ODL_WORKER_FLAGS_H
#define ODL_WORKER_FLAGS_H

#include "odl/device.h"
#include "odl/status.h"

/* argv[*i] is --name=value or --name value: returns the value (NULL when missing) and sets *matched;
 * *i advances past a separate value. Otherwise *matched = 0 and NULL. */
const char *odl_cli_flag_value(int argc, char **argv, int *i, const char *name, int *matched);
/* Whole-string integer / number in [lo, hi]; 0 ok, -1 otherwise. */
int odl_cli_parse_int(const char *s, int lo, int hi, int *out);
int odl_cli_parse_float(const char *s, float lo, float hi, float *out);
/* --device auto|cpu|cuda|cuda:N: auto is the first GPU when one is usable, else the CPU. A CUDA device
 * is initialised (odl_cuda_init, half of its memory for the pool). Errors: ODL_E_INVAL, ODL_E_NODEV. */
odl_status odl_cli_pick_device(const char *spec, odl_device *dev);
/* mkdir -p; ODL_E_IO naming the path (as --output) when it cannot be made or is not a folder. */
odl_status odl_cli_mkdir_p(const char *path);

#endif
