/* One coordinator per job directory, and no process of an older generation beside a new one
 * (docs/coordinator.md "Restarting the coordinator").
 *
 * A coordinator killed with SIGKILL cannot stop the generation it launched: its workers exit when they
 * notice the lost connection, but an mpirun that was relaunching, or a process frozen in D or T state,
 * can outlive it. The next coordinator on the same DIR ends them before it launches, so that no
 * orphan finishing a checkpoint races the new generation in DIR/checkpoints. Every process of the job
 * carries ODL_JOB_DIR and ODL_COORD_GENERATION in its environment (supervise.c), which is how they
 * are found on this node (Linux /proc; processes of other users are not readable and not ours).
 * Processes on other nodes exit on their own when their coordinator is gone (exit status 86). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "coordinator/coord.h"
#include "odl/log.h"
#include "odl/strbuf.h"

odl_status coord_job_dir_lock(coord *c) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/coordinator.lock", c->o.job_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return ODL_ERR(ODL_E_IO, "cannot open %s: %s", path, strerror(errno));
    /* flock: released by the kernel however this process ends, SIGKILL included; O_CLOEXEC keeps it
     * out of the job's processes. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK) {
            snprintf(path, sizeof path, "%s/coordinator.json", c->o.job_dir);
            json_t *j = json_load_file(path, 0, NULL);
            json_int_t pid = json_integer_value(json_object_get(j, "pid"));
            json_decref(j);
            char who[32] = "";
            if (pid > 0) snprintf(who, sizeof who, " (pid %lld)", (long long)pid);
            return ODL_ERR(ODL_E_BUSY, "another odl_coordinator%s runs on the job directory %s", who, c->o.job_dir);
        }
        return ODL_ERR(ODL_E_IO, "cannot lock %s: %s", path, strerror(e));
    }
    c->lock_fd = fd;
    return ODL_OK;
}

/* The value of NAME= in a NUL-separated environment block, or NULL. */
static const char *env_value(const char *env, size_t n, const char *name) {
    size_t ln = strlen(name);
    for (size_t i = 0; i < n;) {
        const char *e = env + i;
        size_t len = strnlen(e, n - i);
        if (len > ln && !memcmp(e, name, ln) && e[ln] == '=') return e + ln + 1;
        i += len + 1;
    }
    return NULL;
}

/* 1 when pid belongs to a generation <= gen of this job directory; *g its generation. */
static int of_this_job(pid_t pid, const char *job_dir, uint64_t gen, uint64_t *g) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0; /* gone, or another user's */
    enum { CAP = 256 * 1024 };
    char *env = malloc(CAP + 1);
    size_t n = 0;
    ssize_t r;
    while (env && n < CAP && (r = read(fd, env + n, CAP - n)) > 0) n += (size_t)r;
    close(fd);
    int match = 0;
    if (env) {
        env[n] = 0;
        const char *d = env_value(env, n, "ODL_JOB_DIR");
        const char *s = env_value(env, n, "ODL_COORD_GENERATION");
        char *end = NULL;
        if (d && s && !strcmp(d, job_dir)) {
            unsigned long long v = strtoull(s, &end, 10);
            if (end != s && *end == 0 && v <= gen) {
                *g = v;
                match = 1;
            }
        }
    }
    free(env);
    return match;
}

/* A zombie has let go of everything; it waits only for its parent. */
static int alive(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

int coord_end_leftovers(coord *c) {
    enum { MAX = 4096 };
    pid_t *pids = malloc(MAX * sizeof *pids);
    if (!pids) return 0;
    int n = 0;
    uint64_t newest = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t self = getpid();
    while (d && (e = readdir(d)) && n < MAX) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        uint64_t g = 0;
        if (pid == self || !of_this_job(pid, c->o.job_dir, c->generation, &g) || !alive(pid)) continue;
        pids[n++] = pid;
        if (g > newest) newest = g;
    }
    if (d) closedir(d);
    /* All found first, then all killed: a parent's death would otherwise hang up some of its children
     * (an orphaned process group with stopped members gets SIGHUP) while the scan is still going. */
    for (int i = 0; i < n; i++) kill(pids[i], SIGKILL); /* SIGKILL ends stopped (T) processes too */
    if (n) {
        char list[512];
        odl_strbuf b;
        odl_strbuf_fixed(&b, list, sizeof list);
        for (int i = 0; i < n; i++) odl_strbuf_printf(&b, " %d", (int)pids[i]);
        ODL_LOG_WARN("ended %d process%s of generation %" PRIu64 " that outlived their coordinator (pid%s%s)", n,
                     n == 1 ? "" : "es", newest, n == 1 ? "" : "s", list);
        /* Wait (at most 10 s) until they are gone: one still writing a checkpoint must not overlap the
         * new generation. A process in D state ends when its I/O returns. */
        struct timespec ts = {0, 20 * 1000 * 1000};
        for (int t = 0; t < 500; t++) {
            int left = 0;
            for (int i = 0; i < n; i++) left += alive(pids[i]);
            if (!left) break;
            if (t == 499) ODL_LOG_ERROR("%d of them are still there after 10 s (stuck in the kernel?)", left);
            nanosleep(&ts, NULL);
        }
    }
    free(pids);
    return n;
}
