/* Whole-string number parsing (odl/parse.h). */
#include "odl/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

int odl_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return ODL_PARSE_SYNTAX;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end) return ODL_PARSE_SYNTAX;
    if (errno == ERANGE || v < lo || v > hi) return ODL_PARSE_RANGE;
    *out = (int64_t)v;
    return ODL_PARSE_OK;
}

int odl_parse_f64(const char *s, double lo, double hi, double *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return ODL_PARSE_SYNTAX;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || isnan(v)) return ODL_PARSE_SYNTAX;
    /* ERANGE for an underflow (1e-400) is a number near 0: only an overflow is out of range */
    if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1) || !(v >= lo && v <= hi)) return ODL_PARSE_RANGE;
    *out = v;
    return ODL_PARSE_OK;
}
