/* Whole-string number parsing: the one check behind every number a person types -- command-line flags
 * (worker/cli_flags.c, odl_coordinator, odl_health), config keys (core/config.c) and environment
 * variables (core/env.c). "abc", "12x", "" and a value past the type's range are errors, never 0. */
#ifndef ODL_PARSE_H
#define ODL_PARSE_H

#include <stdint.h>

#include "odl/api.h"

#define ODL_PARSE_OK 0
#define ODL_PARSE_SYNTAX 1 /* not (all of it) a number of the kind asked */
#define ODL_PARSE_RANGE 2  /* a number, outside [lo, hi] (or past int64 / double) */

/* A base-10 integer (leading '+' or '-' allowed, nothing else around it) in [lo, hi]. *out is set only
 * on ODL_PARSE_OK. */
ODL_API int odl_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* A finite number as strtod reads it, in [lo, hi]. *out is set only on ODL_PARSE_OK. */
ODL_API int odl_parse_f64(const char *s, double lo, double hi, double *out);

#endif
