/* Flag parsing shared by the programs; see worker/cli_flags.h. */
#include "worker/cli_flags.h"

#include <string.h>

#include "odl/parse.h"

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
    int64_t v;
    if (odl_parse_i64(s, lo, hi, &v) != ODL_PARSE_OK) return -1;
    *out = (int)v;
    return 0;
}

int odl_cli_parse_float(const char *s, float lo, float hi, float *out) {
    double v;
    if (odl_parse_f64(s, lo, hi, &v) != ODL_PARSE_OK) return -1;
    *out = (float)v;
    return 0;
}
