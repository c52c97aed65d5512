/* The command line's flags, one parser for every program: odl_worker's tasks (through worker/cli.h) and
 * the tools (odl_health, odl_ckpt and yolov5_bench compile worker/cli_flags.c in); its numbers go through
 * core's checked parsers (odl/parse.h). */
#ifndef ODL_WORKER_CLI_FLAGS_H
#define ODL_WORKER_CLI_FLAGS_H

/* argv[*i] is --name=value or --name value: returns the value (NULL when missing) and sets *matched;
 * *i advances past a separate value. Otherwise *matched = 0 and NULL. */
const char *odl_cli_flag_value(int argc, char **argv, int *i, const char *name, int *matched);
/* Whole-string integer / number in [lo, hi] (odl_parse_i64 / odl_parse_f64); 0 ok, -1 otherwise. */
int odl_cli_parse_int(const char *s, int lo, int hi, int *out);
int odl_cli_parse_float(const char *s, float lo, float hi, float *out);

#endif
