/* ODL_FAULT (odl/fault.h): the one parser of every kind (kill@ ... xidNN@), and the firing of the
 * process faults after a step; the xid entries are acted on by the GPU-health layer (health/). */
#include "odl/fault.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odl/env.h"
#include "odl/log.h"

static const struct {
    const char *name;
    odl_fault_action action;
} k_fault_actions[] = {
    {"kill", ODL_FAULT_KILL},
    {"hang", ODL_FAULT_HANG},
    {"exit", ODL_FAULT_EXIT},
    {"slow", ODL_FAULT_SLOW},
    {"stop", ODL_FAULT_STOP},
};

static odl_status parse_one(const char *s, size_t len, odl_fault *f) {
    char buf[256];
    if (len >= sizeof buf) return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: entry too long: %.40s...", s);
    memcpy(buf, s, len);
    buf[len] = 0;
    char *at = strchr(buf, '@');
    if (!at) return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: '%s' is not ACTION@rank=R,step=S", buf);
    *at = 0;
    memset(f, 0, sizeof *f);
    f->rank = -1;
    f->step = -1;
    for (size_t i = 0; i < sizeof k_fault_actions / sizeof k_fault_actions[0]; i++)
        if (!strcmp(buf, k_fault_actions[i].name)) f->action = k_fault_actions[i].action;
    if (!f->action && !strncmp(buf, "xid", 3) && isdigit((unsigned char)buf[3])) {
        char *end = NULL;
        long x = strtol(buf + 3, &end, 10);
        if (*end || x < 1 || x > 100000)
            return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: '%s': want xidNN@rank=R,step=S (NN an Xid code)", buf);
        f->action = ODL_FAULT_XID;
        f->xid = (int)x;
    }
    if (!f->action) {
        char known[128] = "";
        for (size_t i = 0; i < sizeof k_fault_actions / sizeof k_fault_actions[0]; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", k_fault_actions[i].name);
        return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: unknown action '%s' (known: %s, xidNN)", buf, known);
    }
    snprintf(f->name, sizeof f->name, "%.15s", buf);
    char *save = NULL;
    for (char *kv = strtok_r(at + 1, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '='), *end = NULL;
        if (!eq) return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: '%s' in %s@ is not KEY=VALUE", kv, f->name);
        *eq = 0;
        if (strcmp(kv, "rank") != 0 && strcmp(kv, "step") != 0 && strcmp(kv, "ms") != 0)
            return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: unknown key '%s' in %s@ (rank, step, ms)", kv, f->name);
        errno = 0;
        long long v = strtoll(eq + 1, &end, 10);
        if (errno || end == eq + 1 || *end || v < 0)
            return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: %s=%s in %s@ is not a non-negative integer", kv, eq + 1, f->name);
        if (!strcmp(kv, "rank")) f->rank = (int)v;
        else if (!strcmp(kv, "step")) f->step = v;
        else f->ms = v;
    }
    if (f->step < 0) return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: %s@ needs step=S", f->name);
    return ODL_OK;
}

odl_status odl_fault_parse(const char *text, odl_fault_plan *out) {
    memset(out, 0, sizeof *out);
    if (!text) return ODL_OK;
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, ';');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0) {
            if (out->n == ODL_FAULT_MAX) return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: more than %d faults", ODL_FAULT_MAX);
            ODL_CHECK(parse_one(p, len, &out->f[out->n]));
            out->n++;
        }
        p += len + (e ? 1 : 0);
    }
    return ODL_OK;
}

odl_status odl_fault_from_env(odl_fault_plan *out) {
    return odl_fault_parse(odl_env_is_set(ODL_ENV_FAULT) ? odl_env_str(ODL_ENV_FAULT) : NULL, out);
}

int odl_fault_claim(const odl_fault *f, int rank) {
    if (!odl_env_is_set(ODL_ENV_JOB_DIR)) return 1;
    const char *dir = odl_env_str(ODL_ENV_JOB_DIR);
    char path[4096];
    snprintf(path, sizeof path, "%s/fault-%s-rank%d-step%" PRId64, dir, f->name, rank, f->step);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno != EEXIST) ODL_LOG_WARN("ODL_FAULT: cannot create the marker %s (%s): not firing", path, strerror(errno));
        return 0;
    }
    fsync(fd);
    close(fd);
    return 1;
}

/* A hang@ that fired and waits for the rank's next collective (odl_fault_collective). Only the
 * training thread touches it. */
static const odl_fault *g_hang_pending;
static int g_hang_rank;

static void hang_forever(const char *where) {
    ODL_LOG_WARN("ODL_FAULT: %s@rank=%d,step=%" PRId64 ": the rank stops %s", g_hang_pending->name, g_hang_rank,
                 g_hang_pending->step, where);
    fflush(NULL);
    for (;;) pause(); /* until someone kills the job */
}

void odl_fault_collective(void) {
    if (g_hang_pending) hang_forever("at the entry of its next collective, before taking part (it never reports waiting there)");
}

void odl_fault_after_step(const odl_fault_plan *p, int rank, int64_t step) {
    /* A whole step went by without a collective (one rank, no process group): stop here instead. */
    if (g_hang_pending) hang_forever("at the step boundary (the step had no collective)");
    for (int i = 0; p && i < p->n; i++) {
        const odl_fault *f = &p->f[i];
        if (f->action == ODL_FAULT_XID) continue; /* the GPU-health monitor injects it */
        if (f->action == ODL_FAULT_SLOW) {
            if (step >= f->step && (f->rank < 0 || f->rank == rank)) usleep((useconds_t)(f->ms * 1000));
            continue;
        }
        if (f->step != step || (f->rank >= 0 && f->rank != rank) || !odl_fault_claim(f, rank)) continue;
        ODL_LOG_WARN("ODL_FAULT: %s@rank=%d,step=%" PRId64 " fires now", f->name, rank, step);
        fflush(NULL);
        switch (f->action) {
        case ODL_FAULT_KILL: kill(getpid(), SIGKILL); break;
        case ODL_FAULT_EXIT: _exit(ODL_FAULT_EXIT_STATUS);
        case ODL_FAULT_HANG:
            g_hang_pending = f; /* it stops inside the next collective, where a real hang would */
            g_hang_rank = rank;
            break;
        case ODL_FAULT_STOP: raise(SIGSTOP); break; /* the whole process, heartbeat thread too, until SIGCONT */
        case ODL_FAULT_SLOW:
        case ODL_FAULT_XID: break;
        }
    }
}
