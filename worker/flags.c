/* Command-line helpers of odl_worker's tasks. See worker/flags.h. */
#include "worker/flags.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

odl_status odl_cli_pick_device(const char *spec, odl_device *dev) {
    int n = odl_cuda_device_count();
    if (!strcmp(spec, "cpu") || (!strcmp(spec, "auto") && n == 0)) {
        *dev = odl_cpu();
        return ODL_OK;
    }
    int idx = 0;
    if (!strcmp(spec, "auto") || !strcmp(spec, "cuda")) idx = 0;
    else if (!strncmp(spec, "cuda:", 5) && spec[5]) {
        char *e;
        long v = strtol(spec + 5, &e, 10);
        if (*e || v < 0 || v > 1024) return ODL_ERR(ODL_E_INVAL, "--device '%s': expected auto, cpu, cuda or cuda:N", spec);
        idx = (int)v;
    } else {
        return ODL_ERR(ODL_E_INVAL, "--device '%s': expected auto, cpu, cuda or cuda:N", spec);
    }
    if (n == 0)
        return ODL_ERR(ODL_E_NODEV, "--device %s: no CUDA device is usable (%s)", spec,
                       odl_cuda_built() ? "no GPU or driver found" : "this build has no CUDA backend");
    if (idx >= n) return ODL_ERR(ODL_E_NODEV, "--device %s: only %d CUDA device(s)", spec, n);
    ODL_CHECK(odl_cuda_init(idx, 0.5));
    *dev = odl_cuda(idx);
    return ODL_OK;
}

odl_status odl_cli_mkdir_p(const char *path) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return ODL_ERR(ODL_E_IO, "--output %s: path too long", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return ODL_ERR(ODL_E_IO, "--output %s: cannot create %s: %s", path, buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return ODL_ERR(ODL_E_IO, "--output %s: not a directory", path);
    return ODL_OK;
}
