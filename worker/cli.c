/* Command-line habits shared by the tasks; see worker/cli.h. */
#include "worker/cli.h"

#include <stdlib.h>
#include <string.h>

#include "worker/config.h"
#include "odl/device.h"
#include "odl_build_info.h"

#ifdef ODL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef ODL_HAVE_NCCL
#include <nccl.h>
#endif
#ifdef ODL_HAVE_MPI
#include <mpi.h>
#endif

const char *odl_cli_suggest(const char *name, const char *const *known, size_t n, int with_config_keys) {
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        size_t d = odl_name_distance(name, known[i]);
        if (d < best_d) best_d = d, best = known[i];
    }
    size_t nk = 0;
    const odl_config_key *keys = with_config_keys ? odl_config_keys(&nk) : NULL;
    for (size_t i = 0; i < nk; i++) {
        size_t d = odl_name_distance(name, keys[i].name);
        if (d < best_d) best_d = d, best = keys[i].name;
    }
    return best && odl_name_close_enough(name, best_d) ? best : NULL;
}

void odl_cli_unknown(const char *name, const char *const *known, size_t n, int with_config_keys, const char *help) {
    const char *s = odl_cli_suggest(name, known, n, with_config_keys);
    if (s) fprintf(stderr, "odl_worker: error: unknown option --%s (did you mean --%s?) (see %s)\n", name, s, help);
    else fprintf(stderr, "odl_worker: error: unknown option --%s (see %s)\n", name, help);
}

int odl_cli_once(odl_cli_seen *s, const char *key, const char *given) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->key[i], key)) {
            fprintf(stderr, "odl_worker: error: %s given twice (first as %s); give each option once\n", given,
                    s->given[i]);
            return -1;
        }
    if (s->n < ODL_CLI_MAX_SEEN) {
        s->key[s->n] = key;
        s->given[s->n] = given;
        s->n++;
    }
    return 0;
}

void odl_cli_print_version(FILE *f) {
    fprintf(f, "odl_worker (OriginDL) %s, commit %s\n", ODL_BUILD_VERSION, ODL_BUILD_COMMIT);
#ifdef ODL_HAVE_CUDA
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    fprintf(f, "CUDA:  built with %d.%d, runtime %d.%d, driver %d.%d; GPU architectures %s\n", CUDART_VERSION / 1000,
            CUDART_VERSION % 1000 / 10, rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10, ODL_BUILD_CUDA_ARCHS);
#else
    fprintf(f, "CUDA:  not built (CPU-only build)\n");
#endif
#ifdef ODL_HAVE_NCCL
    int nv = 0;
    ncclGetVersion(&nv);
    fprintf(f, "NCCL:  built with %d.%d.%d, library %d\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, nv);
#else
    fprintf(f, "NCCL:  not built\n");
#endif
#ifdef ODL_HAVE_MPI
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = 0;
    char *comma = strchr(lib, ',');
    if (comma) *comma = 0;
    fprintf(f, "MPI:   %d.%d, %s\n", MPI_VERSION, MPI_SUBVERSION, lib);
#else
    fprintf(f, "MPI:   not built\n");
#endif
    fprintf(f, "CUDA devices usable now: %d\n", odl_cuda_device_count());
}

int odl_cli_take(int argc, char **argv, int *i, const odl_cli_opt *opts, size_t n, odl_cli_seen *seen) {
    const char *a = argv[*i];
    for (size_t k = 0; k < n; k++) {
        const odl_cli_opt *o = &opts[k];
        const char *key = o->key ? o->key : o->name;
        if (o->kind == ODL_CLI_BOOL) {
            if (strcmp(a, o->name) != 0) continue;
            if (odl_cli_once(seen, key, a)) return -1;
            *(int *)o->dst = o->bool_value;
            return 1;
        }
        int m;
        const char *v = odl_cli_flag_value(argc, argv, i, o->name, &m);
        if (!m) continue;
        if (odl_cli_once(seen, key, a)) return -1;
        int bad = 0;
        if (o->kind == ODL_CLI_STR) {
            if (!v || !*v) {
                fprintf(stderr, "odl_worker: error: %s needs a value\n", o->name);
                return -1;
            }
            *(const char **)o->dst = v;
        } else if (o->kind == ODL_CLI_INT) {
            bad = odl_cli_parse_int(v, (int)o->lo, (int)o->hi, (int *)o->dst);
        } else {
            bad = odl_cli_parse_float(v, (float)o->lo, (float)o->hi, (float *)o->dst);
        }
        if (bad) {
            fprintf(stderr, "odl_worker: error: %s '%s': expected %s\n", o->name, v ? v : "", o->what);
            return -1;
        }
        return 1;
    }
    return 0;
}

void odl_cli_reject(const char *arg, const odl_cli_opt *opts, size_t n, const char *const *extra, size_t n_extra,
                    const char *help) {
    if (strncmp(arg, "--", 2) != 0) {
        fprintf(stderr, "odl_worker: error: unexpected argument '%s' (see %s)\n", arg, help);
        return;
    }
    const char *known[ODL_CLI_MAX_SEEN];
    size_t k = 0;
    for (size_t j = 0; j < n && k < ODL_CLI_MAX_SEEN; j++) known[k++] = opts[j].name + 2;
    for (size_t j = 0; j < n_extra && k < ODL_CLI_MAX_SEEN; j++) known[k++] = extra[j];
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(arg + 2, "="), arg + 2);
    odl_cli_unknown(name, known, k, 0, help);
}

double odl_cli_pool_fraction(double preallocate_fraction) {
    return preallocate_fraction == 0 ? ODL_CUDA_POOL_GROW : preallocate_fraction;
}

odl_status odl_cli_pick_device(const char *spec, double preallocate_fraction, odl_device *dev) {
    ODL_CHECK(odl_cli_device_choice(spec, dev));
    if (dev->type == ODL_DEV_CUDA) ODL_CHECK(odl_cuda_init(dev->index, odl_cli_pool_fraction(preallocate_fraction)));
    return ODL_OK;
}

odl_status odl_cli_device_choice(const char *spec, odl_device *dev) {
    if (!strcmp(spec, "cpu")) { /* without asking the driver anything */
        *dev = odl_cpu();
        return ODL_OK;
    }
    int n = odl_cuda_device_count();
    if (!strcmp(spec, "auto") && n == 0) {
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
    *dev = odl_cuda(idx);
    return ODL_OK;
}

int odl_cli_check_decoder(const char *spec) {
    if (!strcmp(spec, "auto") || !strcmp(spec, "nvjpeg") || !strcmp(spec, "cpu")) return 0;
    fprintf(stderr, "odl_worker: error: --decoder '%s': expected auto, nvjpeg (nvJPEG where it is there) or cpu\n", spec);
    return 2;
}

int odl_cli_cuda_graph(const char *spec, int *on) {
    *on = spec && !strcmp(spec, "on");
    if (!spec || *on || !strcmp(spec, "off")) return 0;
    fprintf(stderr, "odl_worker: error: --cuda-graph '%s': on or off\n", spec);
    return 2;
}

int odl_cli_yolo_precision(const char *spec, int half, odl_precision *out) {
    *out = ODL_PRECISION_FP32;
    if (spec && odl_precision_parse(spec, out) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: --precision '%s': expected fp32, tf32 or bf16\n", spec);
        return 2;
    }
    if (half && *out != ODL_PRECISION_FP32) {
        fprintf(stderr, "odl_worker: error: --precision %s with --half: --half runs float16 weights and activations; "
                        "--precision applies to the float32 network (give one of them)\n", spec);
        return 2;
    }
    return 0;
}

const char *odl_cli_yolo_precision_note(int half, odl_precision p) {
    if (half) return "float16";
    if (p == ODL_PRECISION_TF32) return "float32, TF32 convolutions";
    if (p == ODL_PRECISION_BF16) return "float32, BF16 convolutions";
    return "float32";
}
