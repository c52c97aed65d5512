/* odl_health: node health check (usable as Slurm's HealthCheckProgram or from cron) and the operator's
 * fence commands. Exit status (docs/health.md):
 *   0 healthy, 1 only application errors / needs attention, 2 node-fatal, 3 nothing to check (no GPU),
 *   4 usage or input error. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "odl/clock.h"
#include "odl/env.h"
#include "odl/health.h"
#include "odl/parse.h"
#include "worker/cli_flags.h"

enum { EXIT_HEALTHY = 0, EXIT_APPLICATION = 1, EXIT_NODE_FATAL = 2, EXIT_NOTHING = 3, EXIT_USAGE = 4 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: odl_health xid --kmsg FILE|-|/dev/kmsg [--since-s SECONDS] [--table FILE.yaml] [--drain]\n"
            "       odl_health gpu [--timeout-s S] [--readings-only | --prometheus]\n"
            "       odl_health events [--seconds S]\n"
            "       odl_health fence list|exclude|drain --job-dir DIR\n"
            "       odl_health fence add --job-dir DIR --node N --xid X [--gpu PCI] [--generation G]\n"
            "       odl_health fence lift --job-dir DIR --node N [--by NAME]\n"
            "       odl_health fence hostfile --job-dir DIR --in HOSTFILE --out HOSTFILE\n"
            "exit status: 0 healthy, 1 application errors only, 2 node-fatal, 3 no GPU to check, 4 usage error\n");
}

static int fail(const char *what) {
    fprintf(stderr, "odl_health: error: %s%s%s\n", what, odl_error_msg()[0] ? ": " : "", odl_error_msg_user());
    return EXIT_USAGE;
}

/* The value of "--name V" / "--name=V" at argv[*i] (the programs' one flag parser, worker/cli_flags.h);
 * NULL when argv[*i] is another argument, and then *missing is set when it is this option without a value. */
static const char *opt(int argc, char **argv, int *i, const char *name, int *missing) {
    int matched;
    const char *v = odl_cli_flag_value(argc, argv, i, name, &matched);
    if (matched && !v) *missing = 1;
    return v;
}

/* The usage error of an argument that no option of `cmd` took. */
static int unexpected(const char *cmd, const char *arg, int missing) {
    if (missing) fprintf(stderr, "odl_health %s: error: %s needs a value\n", cmd, arg);
    else fprintf(stderr, "odl_health %s: error: unexpected argument '%s'\n", cmd, arg);
    return EXIT_USAGE;
}

/* A number flag's value (odl/parse.h), or a usage error naming it: "abc" is never 0. */
static int flag_f64(const char *cmd, const char *flag, const char *v, double lo, double hi, double *out) {
    if (odl_parse_f64(v, lo, hi, out) == ODL_PARSE_OK) return 0;
    fprintf(stderr, "odl_health %s: error: %s %s: expected a number in [%g, %g]\n", cmd, flag, v, lo, hi);
    return -1;
}
static int flag_int(const char *cmd, const char *flag, const char *v, int lo, int hi, int *out) {
    int64_t x;
    if (odl_parse_i64(v, lo, hi, &x) == ODL_PARSE_OK) return *out = (int)x, 0;
    fprintf(stderr, "odl_health %s: error: %s %s: expected an integer in [%d, %d]\n", cmd, flag, v, lo, hi);
    return -1;
}

/* ---- xid ---- */

static int cmd_xid(int argc, char **argv) {
    const char *kmsg = NULL, *table_path = odl_env_is_set(ODL_ENV_HEALTH_XID_TABLE) ? odl_env_str(ODL_ENV_HEALTH_XID_TABLE) : NULL;
    double since_s = 0;
    int drain = 0;
    for (int i = 0; i < argc; i++) {
        const char *v;
        int missing = 0;
        if ((v = opt(argc, argv, &i, "--kmsg", &missing))) kmsg = v;
        else if ((v = opt(argc, argv, &i, "--table", &missing))) table_path = v;
        else if ((v = opt(argc, argv, &i, "--since-s", &missing))) {
            if (flag_f64("xid", "--since-s", v, 0, 1e12, &since_s)) return EXIT_USAGE;
        }
        else if (!strcmp(argv[i], "--drain")) drain = 1;
        else return unexpected("xid", argv[i], missing);
    }
    if (!kmsg) {
        fprintf(stderr, "odl_health xid: error: --kmsg FILE is required (- for stdin, /dev/kmsg for the live log)\n");
        return EXIT_USAGE;
    }
    odl_xid_table table;
    odl_xid_table_defaults(&table);
    if (table_path && odl_xid_table_load_yaml(&table, table_path) != ODL_OK) return fail("Xid table");
    odl_kmsg_reader *r;
    if (odl_kmsg_open(!strcmp(kmsg, "-") ? "/dev/stdin" : kmsg, 0, &r) != ODL_OK) return fail("kernel log");
    odl_xid_classifier c;
    odl_xid_classifier_init(&c, &table);
    c.since_us = (int64_t)(since_s * 1e6);
    char line[2048], out[512];
    int worst = EXIT_HEALTHY, n = 0, rc;
    odl_health_finding fatal = {0};
    while ((rc = odl_kmsg_read_line(r, line, sizeof line)) == 1) {
        odl_xid_record rec;
        odl_health_finding f;
        if (!odl_xid_parse_line(line, &rec) || !odl_xid_classify(&c, &rec, &f)) continue;
        printf("%s\n", odl_health_finding_format(&f, out, sizeof out));
        n++;
        if (f.cls == ODL_XID_NODE_FATAL && worst < EXIT_NODE_FATAL) {
            worst = EXIT_NODE_FATAL;
            fatal = f;
        } else if (f.cls == ODL_XID_APPLICATION && worst < EXIT_APPLICATION) {
            worst = EXIT_APPLICATION;
        }
    }
    odl_kmsg_close(r);
    if (rc < 0) return fail("reading the kernel log");
    printf("odl_health xid: %d finding%s: %s\n", n, n == 1 ? "" : "s",
           worst == EXIT_NODE_FATAL ? "node-fatal" : worst == EXIT_APPLICATION ? "application errors only" : "healthy");
    fflush(stdout);
    if (drain && worst == EXIT_NODE_FATAL) {
        /* Slurm ignores a HealthCheckProgram's exit status: the program drains the node itself. */
        const char *host = odl_health_node_name();
        char dir[] = "/tmp/odl_health.XXXXXX";
        if (!mkdtemp(dir)) return fail("mkdtemp");
        odl_fence_list l;
        odl_fence fe = {0};
        int added, issued;
        snprintf(fe.node, sizeof fe.node, "%s", host);
        fe.xid = fatal.rec.xid;
        odl_pci_format(&fatal.rec.pci, fe.gpu);
        odl_status s = odl_fence_list_load(&l, dir);
        if (s == ODL_OK) s = odl_fence_add(&l, &fe, &added);
        if (s == ODL_OK) s = odl_fence_drain(&l, &issued);
        char path[sizeof l.path];
        snprintf(path, sizeof path, "%s", l.path);
        odl_fence_list_free(&l);
        unlink(path);
        rmdir(dir);
        if (s != ODL_OK) {
            fail("drain");
            return EXIT_NODE_FATAL;
        }
        printf("odl_health xid: drained %s\n", host);
    }
    return worst;
}

/* ---- gpu ---- */

static void print_reading(const char *name, double v, const char *unit) {
    if (v == ODL_HEALTH_NA) printf(" %s=unavailable", name);
    else printf(" %s=%.*f%s", name, fabs(v - rint(v)) < 1e-9 ? 0 : 1, v, unit);
}

/* The compute check (tools/odl_gpu_check.c, beside this program: odl_health itself links no CUDA, so
 * it runs on a node whose CUDA runtime is broken) in a child with its one-line verdict on a pipe, killed
 * past the time limit: a hung GPU cannot hold the health check. Returns an EXIT_*; -1 when the build has
 * no CUDA backend (odl_gpu_check's exit 3). */
static int check_in_child(int index, double timeout_s, char *why, size_t cap) {
    char prog[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", prog, sizeof prog - 32);
    if (len <= 0) {
        snprintf(why, cap, "cannot find this program's folder (/proc/self/exe): %s", strerror(errno));
        return EXIT_NODE_FATAL;
    }
    prog[len] = '\0';
    char *slash = strrchr(prog, '/');
    snprintf(slash ? slash + 1 : prog, sizeof prog - (size_t)(slash ? slash + 1 - prog : 0), "odl_gpu_check");
    int pfd[2];
    if (pipe(pfd) != 0) {
        snprintf(why, cap, "pipe: %s", strerror(errno));
        return EXIT_NODE_FATAL;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], STDOUT_FILENO);
        close(pfd[1]);
        char idx[16];
        snprintf(idx, sizeof idx, "%d", index);
        execl(prog, prog, idx, (char *)NULL);
        printf("cannot run %s: %s", prog, strerror(errno));
        fflush(stdout);
        _exit(2);
    }
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        snprintf(why, cap, "fork: %s", strerror(errno));
        return EXIT_NODE_FATAL;
    }
    double t0 = odl_mono_s();
    int st = 0, done = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            done = 1;
            break;
        }
        if (odl_mono_s() - t0 > timeout_s) break;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (!done) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        close(pfd[0]);
        snprintf(why, cap, "compute check did not finish within %.0f s", timeout_s);
        return EXIT_NODE_FATAL;
    }
    ssize_t n = read(pfd[0], why, cap - 1);
    why[n > 0 ? n : 0] = '\0';
    close(pfd[0]);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3) return -1;
    if (WIFEXITED(st) && WEXITSTATUS(st) <= 1) return WEXITSTATUS(st) ? EXIT_APPLICATION : EXIT_HEALTHY;
    return EXIT_NODE_FATAL;
}

/* The readings a GPU's verdict rests on: NVML's "not available" value there leaves the row-remap state
 * unknown, which is not healthy (a remap may be pending or have failed): "needs attention". */
static const unsigned k_verdict_readings = ODL_GPU_READING_REMAP_PENDING | ODL_GPU_READING_REMAP_FAILED;

/* NVML readings of every GPU as Prometheus text (node_exporter's textfile collector). */
static int cmd_prometheus(void) {
    odl_nvml *n = NULL;
    if (odl_nvml_open(&n) != ODL_OK) {
        fprintf(stderr, "odl_health gpu: no GPU to check: %s\n", odl_error_msg_user());
        return EXIT_NOTHING;
    }
    int count = 0;
    odl_nvml_device_count(n, &count);
    if (count > 64) count = 64;
    static odl_gpu_telemetry t[64];
    int worst = count ? EXIT_HEALTHY : EXIT_NOTHING;
    for (int i = 0; i < count; i++) {
        if (odl_nvml_read(n, i, &t[i]) != ODL_OK) {
            memset(&t[i], 0, sizeof t[i]);
            t[i].healthy = 0;
        }
        if (!t[i].healthy) worst = EXIT_NODE_FATAL;
        else if ((t[i].not_available & k_verdict_readings) && worst < EXIT_APPLICATION) worst = EXIT_APPLICATION;
    }
    odl_nvml_close(n);
    const char *host = odl_health_node_name();
    size_t need = odl_health_prometheus(NULL, 0, t, count, host, NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf) return fail("out of memory");
    odl_health_prometheus(buf, need + 1, t, count, host, NULL, 0);
    fputs(buf, stdout);
    free(buf);
    return worst;
}

static int cmd_gpu(int argc, char **argv) {
    double timeout_s = 60;
    int readings_only = 0;
    for (int i = 0; i < argc; i++) {
        const char *v;
        int missing = 0;
        if ((v = opt(argc, argv, &i, "--timeout-s", &missing))) {
            if (flag_f64("gpu", "--timeout-s", v, 0, 1e6, &timeout_s)) return EXIT_USAGE;
        }
        else if (!strcmp(argv[i], "--readings-only")) readings_only = 1;
        else if (!strcmp(argv[i], "--prometheus")) return cmd_prometheus();
        else return unexpected("gpu", argv[i], missing);
    }
    odl_nvml *n = NULL;
    if (odl_nvml_open(&n) != ODL_OK) {
        printf("odl_health gpu: no GPU to check: %s\n", odl_error_msg_user());
        return EXIT_NOTHING;
    }
    int count = 0;
    char ver[96] = "?";
    odl_nvml_driver_version(n, ver, sizeof ver);
    if (odl_nvml_device_count(n, &count) != ODL_OK || count == 0) {
        printf("odl_health gpu: no GPU to check: NVML (driver %s) sees %d devices\n", ver, count);
        odl_nvml_close(n);
        return EXIT_NOTHING;
    }
    printf("odl_health gpu: driver %s, %d GPU%s\n", ver, count, count == 1 ? "" : "s");
    int worst = EXIT_HEALTHY;
    for (int i = 0; i < count; i++) {
        odl_gpu_telemetry t;
        if (odl_nvml_read(n, i, &t) != ODL_OK) {
            printf("gpu %d: %s\n", i, odl_error_msg());
            worst = EXIT_NODE_FATAL;
            continue;
        }
        const struct {
            const char *name;
            double v;
            const char *unit;
            unsigned bit;
        } rd[] = {
            {"util", t.util_gpu_pct, "%", ODL_GPU_READING_UTIL},
            {"mem_used", t.mem_used_mib, "MiB", ODL_GPU_READING_MEM_USED},
            {"mem_total", t.mem_total_mib, "MiB", ODL_GPU_READING_MEM_TOTAL},
            {"temp", t.temp_c, "C", ODL_GPU_READING_TEMP},
            {"power", t.power_w, "W", ODL_GPU_READING_POWER},
            {"sm_clock", t.sm_clock_mhz, "MHz", ODL_GPU_READING_SM_CLOCK},
            {"ecc_corrected", t.ecc_corrected, "", ODL_GPU_READING_ECC_CORRECTED},
            {"ecc_uncorrected", t.ecc_uncorrected, "", ODL_GPU_READING_ECC_UNCORRECTED},
            {"remapped_corrected", t.remap_corrected, "", ODL_GPU_READING_REMAP_CORRECTED},
            {"remapped_uncorrected", t.remap_uncorrected, "", ODL_GPU_READING_REMAP_UNCORRECTED},
            {"remap_pending", t.remap_pending, "", ODL_GPU_READING_REMAP_PENDING},
            {"remap_failed", t.remap_failed, "", ODL_GPU_READING_REMAP_FAILED},
        };
        const size_t n_rd = sizeof rd / sizeof rd[0];
        printf("gpu %d %s %s %s:", i, t.pci, t.uuid, t.name);
        for (size_t k = 0; k < n_rd; k++) print_reading(rd[k].name, rd[k].v, rd[k].unit);
        printf("\n");
        int g = EXIT_HEALTHY;
        if (!t.healthy) {
            printf("gpu %d: unhealthy: %s\n", i, t.error);
            g = EXIT_NODE_FATAL;
        }
        if (t.not_available & k_verdict_readings) {
            printf("gpu %d: needs attention: NVML answered its \"not available\" value for", i);
            for (size_t k = 0; k < n_rd; k++)
                if (t.not_available & k_verdict_readings & rd[k].bit) printf(" %s", rd[k].name);
            printf(": the row-remap state is unknown\n");
            if (g < EXIT_APPLICATION) g = EXIT_APPLICATION;
        }
        if (t.remap_failed > 0) {
            printf("gpu %d: unhealthy: a row remap failed (replace or repair the GPU)\n", i);
            g = EXIT_NODE_FATAL;
        } else if (t.remap_pending > 0) {
            printf("gpu %d: needs attention: a row remap is pending (reset the GPU when idle)\n", i);
            if (g < EXIT_APPLICATION) g = EXIT_APPLICATION;
        }
        /* NVML and CUDA number GPUs alike with CUDA_DEVICE_ORDER=PCI_BUS_ID (set in main). */
        if (readings_only) {
            /* bench/health_gpu_check.sh compares these readings with nvidia-smi's. */
        } else {
            char why[320];
            int r = check_in_child(i, timeout_s, why, sizeof why);
            if (r < 0) {
                printf("gpu %d: compute check skipped: this build has no CUDA backend\n", i);
                r = EXIT_APPLICATION;
            } else {
                printf("gpu %d: %s: %s\n", i, r == EXIT_HEALTHY ? "ok" : r == EXIT_APPLICATION ? "not checked" : "FAILED", why);
            }
            if (r > g) g = r;
        }
        if (g > worst) worst = g;
    }
    odl_nvml_close(n);
    printf("odl_health gpu: %s\n",
           worst == EXIT_HEALTHY ? "healthy" : worst == EXIT_APPLICATION ? "needs attention" : "unhealthy");
    return worst;
}

/* ---- events ---- */

/* Register every GPU for NVML's Xid critical-error events and wait `seconds` for one. */
static int cmd_events(int argc, char **argv) {
    double seconds = 5;
    for (int i = 0; i < argc; i++) {
        const char *v;
        int missing = 0;
        if ((v = opt(argc, argv, &i, "--seconds", &missing))) {
            if (flag_f64("events", "--seconds", v, 0, 1e6, &seconds)) return EXIT_USAGE;
        }
        else return unexpected("events", argv[i], missing);
    }
    odl_nvml *n = NULL;
    if (odl_nvml_open(&n) != ODL_OK) {
        printf("odl_health events: no GPU to check: %s\n", odl_error_msg_user());
        return EXIT_NOTHING;
    }
    int count = 0;
    if (odl_nvml_device_count(n, &count) != ODL_OK || count == 0) {
        printf("odl_health events: no GPU to check\n");
        odl_nvml_close(n);
        return EXIT_NOTHING;
    }
    int idx[64];
    if (count > 64) count = 64;
    for (int i = 0; i < count; i++) idx[i] = i;
    odl_nvml_events *e = NULL;
    if (odl_nvml_events_open(n, idx, count, &e) != ODL_OK) {
        printf("odl_health events: registration FAILED: %s\n", odl_error_msg());
        odl_nvml_close(n);
        return EXIT_NODE_FATAL;
    }
    printf("odl_health events: Xid critical-error events registered on %d GPU%s; waiting %.0f s\n", count,
           count == 1 ? "" : "s", seconds);
    fflush(stdout);
    odl_xid_classifier c;
    odl_xid_classifier_init(&c, NULL);
    int worst = EXIT_HEALTHY, seen = 0;
    int64_t end = odl_kmsg_now_us() + (int64_t)(seconds * 1e6);
    while (odl_kmsg_now_us() < end) {
        odl_xid_record rec;
        odl_health_finding f;
        int r = odl_nvml_events_wait(e, 200, &rec);
        if (r < 0) {
            printf("odl_health events: %s\n", odl_error_msg());
            worst = EXIT_NODE_FATAL;
            break;
        }
        if (r == 1 && odl_xid_classify(&c, &rec, &f)) {
            char out[512];
            printf("%s\n", odl_health_finding_format(&f, out, sizeof out));
            seen++;
            int g = f.cls == ODL_XID_NODE_FATAL ? EXIT_NODE_FATAL : f.cls == ODL_XID_APPLICATION ? EXIT_APPLICATION : 0;
            if (g > worst) worst = g;
        }
    }
    odl_nvml_events_close(e);
    odl_nvml_close(n);
    printf("odl_health events: %d Xid event%s\n", seen, seen == 1 ? "" : "s");
    return worst;
}

/* ---- fence ---- */

static int cmd_fence(int argc, char **argv) {
    if (argc < 1) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *sub = argv[0], *dir = NULL, *node = NULL, *gpu = "", *by = NULL, *in = NULL, *out = NULL;
    int xid = -1, gen = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int missing = 0;
        if ((v = opt(argc, argv, &i, "--job-dir", &missing))) dir = v;
        else if ((v = opt(argc, argv, &i, "--node", &missing))) node = v;
        else if ((v = opt(argc, argv, &i, "--gpu", &missing))) gpu = v;
        else if ((v = opt(argc, argv, &i, "--by", &missing))) by = v;
        else if ((v = opt(argc, argv, &i, "--in", &missing))) in = v;
        else if ((v = opt(argc, argv, &i, "--out", &missing))) out = v;
        else if ((v = opt(argc, argv, &i, "--xid", &missing))) {
            if (!strcmp(v, "bus_lost")) xid = ODL_XID_BUS_LOST;
            else if (flag_int("fence", "--xid", v, 0, 65535, &xid)) return EXIT_USAGE;
        } else if ((v = opt(argc, argv, &i, "--generation", &missing))) {
            if (flag_int("fence", "--generation", v, 0, INT_MAX, &gen)) return EXIT_USAGE;
        }
        else return unexpected("fence", argv[i], missing);
    }
    if (!dir) {
        fprintf(stderr, "odl_health fence: error: --job-dir DIR is required\n");
        return EXIT_USAGE;
    }
    odl_fence_list l;
    if (odl_fence_list_load(&l, dir) != ODL_OK) return fail("fence list");
    int rc = 0;
    if (!strcmp(sub, "list")) {
        for (int i = 0; i < l.n; i++) {
            const odl_fence *f = &l.items[i];
            printf("%s xid=%d gpu=%s time=%lld generation=%d drained=%d %s reason=\"%s\"", f->node, f->xid,
                   f->gpu[0] ? f->gpu : "-", (long long)f->time, f->generation, f->drained,
                   f->lifted_time ? "lifted" : "fenced", f->reason);
            if (f->lifted_time) printf(" lifted_by=%s lifted_time=%lld", f->lifted_by, (long long)f->lifted_time);
            printf("\n");
        }
    } else if (!strcmp(sub, "add")) {
        if (!node || xid < 0) {
            fprintf(stderr, "odl_health fence add: error: --node and --xid are required\n");
            rc = EXIT_USAGE;
        } else {
            odl_fence f = {0};
            snprintf(f.node, sizeof f.node, "%s", node);
            f.xid = xid;
            f.generation = gen;
            odl_pci_id id;
            if (gpu[0] && odl_pci_parse(gpu, &id) == ODL_OK) odl_pci_format(&id, f.gpu);
            else snprintf(f.gpu, sizeof f.gpu, "%s", gpu);
            int added;
            if (odl_fence_add(&l, &f, &added) != ODL_OK) rc = fail("fence add");
            else printf("%s %s\n", node, added ? "fenced" : "was already fenced");
        }
    } else if (!strcmp(sub, "lift")) {
        if (!node) {
            fprintf(stderr, "odl_health fence lift: error: --node is required\n");
            rc = EXIT_USAGE;
        } else {
            const char *who = by ? by : getenv("USER");
            if (odl_fence_lift(&l, node, who) != ODL_OK) rc = fail("fence lift");
            else printf("%s: fence lifted by %s (a drained Slurm node also needs scontrol update NodeName=%s State=RESUME)\n",
                        node, who ? who : "operator", node);
        }
    } else if (!strcmp(sub, "exclude")) {
        char buf[8192];
        if (odl_fence_srun_exclude(&l, buf, sizeof buf) != ODL_OK) rc = fail("exclude");
        else printf("%s\n", buf);
    } else if (!strcmp(sub, "hostfile")) {
        int kept;
        if (!in || !out) {
            fprintf(stderr, "odl_health fence hostfile: error: --in and --out are required\n");
            rc = EXIT_USAGE;
        } else if (odl_fence_write_hostfile(&l, in, out, &kept) != ODL_OK) {
            rc = fail("hostfile");
        } else {
            printf("%s: %d host%s\n", out, kept, kept == 1 ? "" : "s");
        }
    } else if (!strcmp(sub, "drain")) {
        int issued;
        if (odl_fence_drain(&l, &issued) != ODL_OK) rc = fail("drain");
        printf("drained %d node%s\n", issued, issued == 1 ? "" : "s");
    } else {
        fprintf(stderr, "odl_health fence: error: unknown command '%s'\n", sub);
        rc = EXIT_USAGE;
    }
    odl_fence_list_free(&l);
    return rc;
}

int main(int argc, char **argv) {
    setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
    if (odl_env_load() != ODL_OK) {
        fprintf(stderr, "odl_health: error: %s\n", odl_error_msg_user());
        return EXIT_USAGE;
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    for (int i = 2; i < argc; i++) /* "odl_health xid --help": the usage, as for the program */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    if (!strcmp(argv[1], "xid")) return cmd_xid(argc - 2, argv + 2);
    if (!strcmp(argv[1], "gpu")) return cmd_gpu(argc - 2, argv + 2);
    if (!strcmp(argv[1], "fence")) return cmd_fence(argc - 2, argv + 2);
    if (!strcmp(argv[1], "events")) return cmd_events(argc - 2, argv + 2);
    fprintf(stderr, "odl_health: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
