/* Flag parsing shared by the programs; see worker/cli_flags.h. */
#include "worker/cli_flags.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *odl_cli_flag_value(int argc, char **argv, int *i, const char *name, int *matched) {
    size_t n = strlen(name);
    const char *a = argv[*i];
    *matched = 0;
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') {
        *matched = 1;
        return a + n + 1;
    }
    if (a[n] == 0) {
        *matched = 1;
        if (*i + 1 < argc) return argv[++*i];
        return NULL;
    }
    return NULL;
}

int odl_cli_parse_int(const char *s, int lo, int hi, int *out) {
    if (!s || !*s) return -1;
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (*e || errno || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

int odl_cli_parse_float(const char *s, float lo, float hi, float *out) {
    if (!s || !*s) return -1;
    char *e;
    errno = 0;
    double v = strtod(s, &e);
    if (*e || errno || !(v >= lo && v <= hi)) return -1;
    *out = (float)v;
    return 0;
}
