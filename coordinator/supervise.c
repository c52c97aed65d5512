/* Supervision (docs/coordinator.md "Supervision"): the job's command runs in its own process group
 * with the coordinator's address, the job secret and the generation in its environment; on a failure
 * the whole group is killed and, after a backoff, the command is started again (a new generation,
 * resuming from the last committed checkpoint), at most --max-restarts times. The ranks' failures,
 * completions and Xid reports arrive as the server's events (coord_job_events, set here). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/coord.h"
#include "odl/clock.h"
#include "odl/log.h"

extern char **environ;

static void on_child_exit(uv_process_t *p, int64_t status, int term_signal);

static void kill_group(coord *c, int sig) {
    if (c->child.alive && c->child.pid > 1) kill(-(pid_t)c->child.pid, sig);
}

static void on_kill_grace(uv_timer_t *t) {
    kill_group(t->data, SIGKILL);
}

void coord_finish(coord *c, int exit_code) {
    c->state = JOB_DONE;
    c->exit_code = exit_code;
    if (coord_state_save(c) != ODL_OK) ODL_LOG_ERROR("%s", odl_error_msg());
    uv_stop(&c->loop);
}

odl_status coord_job_launch(coord *c) {
    c->generation++;
    coord_members_reset(c);
    c->req.active = 0;
    c->failure[0] = 0;
    c->n_registered = 0;
    c->t_generation = odl_mono_s();
    c->state = JOB_RUNNING;
    /* Persisted before any worker hears of it: a coordinator started again on DIR continues from a
     * higher generation and refuses this one's workers. */
    ODL_CHECK(coord_state_save(c));
    ODL_CHECK(coord_plan_save(c));
    ODL_CHECK(coord_info_save(c));
    if (!c->o.cmd) {
        ODL_LOG_INFO("generation %" PRIu64 ": serving workers started elsewhere (no command to supervise)", c->generation);
        return ODL_OK;
    }
    size_t n_env = 0;
    while (environ[n_env]) n_env++;
    char **env = calloc(n_env + 8, sizeof *env);
    if (!env) return ODL_ERR(ODL_E_NOMEM, "environment");
    char e_addr[400], e_secret[PATH_MAX + 64], e_gen[64], e_dir[PATH_MAX + 32];
    snprintf(e_addr, sizeof e_addr, "ODL_COORD_ADDR=%s", c->advertise);
    snprintf(e_secret, sizeof e_secret, "ODL_COORD_SECRET_FILE=%s", c->o.token_file);
    snprintf(e_gen, sizeof e_gen, "ODL_COORD_GENERATION=%" PRIu64, c->generation);
    snprintf(e_dir, sizeof e_dir, "ODL_JOB_DIR=%s", c->o.job_dir);
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++)
        if (strncmp(environ[i], "ODL_COORD_", 10) && strncmp(environ[i], "ODL_JOB_DIR=", 12)) env[k++] = environ[i];
    env[k++] = e_addr;
    env[k++] = e_secret;
    env[k++] = e_gen;
    env[k++] = e_dir;
    env[k] = NULL;
    uv_stdio_container_t stdio[3];
    for (int i = 0; i < 3; i++) {
        stdio[i].flags = UV_INHERIT_FD;
        stdio[i].data.fd = i;
    }
    char **argv = NULL;
    odl_status fs = coord_launch_argv(c, &argv);
    if (fs != ODL_OK) {
        free(env);
        return fs;
    }
    uv_process_options_t po;
    memset(&po, 0, sizeof po);
    po.file = argv[0];
    po.args = argv;
    po.env = env;
    po.exit_cb = on_child_exit;
    po.flags = UV_PROCESS_DETACHED; /* setsid: the job is one process group that can be killed whole */
    po.stdio_count = 3;
    po.stdio = stdio;
    int r = uv_spawn(&c->loop, &c->child.proc, &po);
    free(env);
    coord_launch_argv_free(argv);
    if (r != 0) {
        uv_close((uv_handle_t *)&c->child.proc, NULL);
        return ODL_ERR(ODL_E_IO, "cannot start %s: %s", c->o.cmd[0], uv_strerror(r));
    }
    c->child.alive = 1;
    c->child.pid = c->child.proc.pid;
    ODL_LOG_INFO("generation %" PRIu64 ": started %s (pid %" PRId64 ", its own process group)%s%s", c->generation,
                 c->o.cmd[0], c->child.pid, c->ck.path[0] ? ", resuming from " : "", c->ck.path);
    ODL_CHECK(coord_state_save(c));
    return ODL_OK;
}

/* A rank of this generation refused before it registered explains a failure that only looks like a
 * death: say it in the failure line (and the give-up line, which repeats it). */
static void append_refusal(coord *c) {
    if (c->refusal.generation != c->generation || !c->refusal.text[0]) return;
    size_t n = strlen(c->failure);
    snprintf(c->failure + n, sizeof c->failure - n, "; earlier, %s", c->refusal.text);
}

void coord_job_fail(coord *c, const char *fmt, ...) {
    if (c->state != JOB_RUNNING && c->state != JOB_STOPPING) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->failure, sizeof c->failure, fmt, ap);
    va_end(ap);
    append_refusal(c);
    ODL_LOG_ERROR("generation %" PRIu64 " failed: %s; killing the job's process group", c->generation, c->failure);
    c->state = JOB_FAILING;
    /* The failed generation must not step, checkpoint or report on: its ranks end now; the launcher gets
     * COORD_KILL_GRACE_MS to relay their last lines and exit before the group is killed. */
    char reason[96];
    snprintf(reason, sizeof reason, "generation %" PRIu64 " failed (the coordinator's log names the cause)", c->generation);
    coord_conn_send_shutdown(c, NULL, reason);
    if (c->child.alive) uv_timer_start(&c->kill_grace, on_kill_grace, COORD_KILL_GRACE_MS, 0);
    if (!c->child.alive && !c->o.cmd) { /* serve-only: nothing to relaunch */
        coord_members_reset(c);
        c->state = JOB_RUNNING;
    }
}

/* ------------------------------------------------------------------ what the server reports */

static void on_failed(coord *c, const char *why) {
    coord_job_fail(c, "%s", why);
}

static void on_member_done(coord *c) {
    for (int r = 0; r < c->world_size; r++)
        if (!c->ranks[r].finished) return;
    ODL_LOG_INFO("all %d ranks of generation %" PRIu64 " finished", c->world_size, c->generation);
}

static void on_xid(coord *c, int rank, const Odl__XidReport *x) {
    char why[400];
    switch (coord_xid_decide(c, rank, x, why, sizeof why)) {
    case COORD_XID_NONE:
    case COORD_XID_FENCED_ALSO: return; /* launch_args.c reads fence.json at the relaunch */
    case COORD_XID_RESTART:
    case COORD_XID_UNRECORDED: coord_job_fail(c, "%s", why); return;
    case COORD_XID_FENCED: break;
    }
    const char *node = c->ranks[rank].node;
    if (!c->o.cmd) { /* serve-only: the launcher elsewhere relaunches; fence.json tells it what to leave out */
        ODL_LOG_WARN("serving only (no command): node %s stays in this generation; its launcher must relaunch "
                     "without it (odl_health fence hostfile|exclude --job-dir %s)", node, c->o.job_dir);
        return;
    }
    c->fence_relaunch = 1;
    c->state = JOB_STOPPING;
    c->req.t_stop = odl_mono_s();
    coord_request_checkpoint(c, 1);
}

void coord_supervise_init(coord *c) {
    c->job = (coord_job_events){.failed = on_failed, .member_done = on_member_done, .xid = on_xid};
}

void coord_job_tick(coord *c) {
    if (c->state == JOB_STOPPING && odl_mono_s() - c->req.t_stop > COORD_STOP_GRACE_S(c->o.timeout_s)) {
        ODL_LOG_ERROR("preemption: the ranks did not stop within %.0f s; killing the job", COORD_STOP_GRACE_S(c->o.timeout_s));
        c->state = JOB_FAILING;
        kill_group(c, SIGKILL);
    }
}

static void on_backoff(uv_timer_t *t) {
    coord *c = t->data;
    if (coord_job_launch(c) != ODL_OK) {
        ODL_LOG_ERROR("%s", odl_error_msg());
        coord_finish(c, COORD_EXIT_FAILED);
    }
}

static void on_child_closed(uv_handle_t *h) {
    (void)h;
}

static void on_child_exit(uv_process_t *p, int64_t status, int term_signal) {
    coord *c = (coord *)((char *)p - offsetof(coord, child.proc));
    /* JOB_FAILING: a rank's failure was seen and the coordinator killed the group itself, so a signal here
     * is its own SIGKILL, not the job's status (which of the two a launcher shows depends on which event
     * the loop saw first: tests/coord_test.sh refused_rank saw 137 once, 1 otherwise) */
    const int ended_by_us = c->state == JOB_FAILING;
    uv_timer_stop(&c->kill_grace);
    c->child.alive = 0;
    uv_close((uv_handle_t *)p, on_child_closed);
    /* Anything of the group still running (a rank that outlived its launcher) ends with it. */
    kill(-(pid_t)c->child.pid, SIGKILL);
    int code = term_signal ? 128 + term_signal : (int)status;
    ODL_LOG_INFO("generation %" PRIu64 ": the job's command exited with %s %d", c->generation,
                 term_signal ? "signal" : "status", term_signal ? term_signal : (int)status);
    if (c->fence_relaunch) {
        /* A node was fenced: relaunch without it from the checkpoint the ranks just wrote (or, when they
         * could not, the last committed one) -- unless the job finished its training first. */
        int finished = code == 0 && c->req.active;
        c->fence_relaunch = 0;
        c->req.stop = 0;
        c->req.active = 0;
        if (finished) {
            ODL_LOG_INFO("the job finished before the fence's checkpoint step; the fence stays for the next job");
            coord_finish(c, COORD_EXIT_OK);
            return;
        }
        if (!c->failure[0]) snprintf(c->failure, sizeof c->failure, "a node-fatal Xid fenced a node");
    } else if (c->req.stop) {
        int ok = c->req.stop && !c->req.active;
        if (ok) ODL_LOG_INFO("preempted: stopped after the checkpoint of step %" PRId64 " (exit status %d)", c->ck.step,
                             COORD_EXIT_PREEMPTED);
        else ODL_LOG_WARN("preempted before a checkpoint was committed; the last committed one is step %" PRId64
                          " (exit status %d)", c->ck.step, COORD_EXIT_PREEMPTED);
        coord_finish(c, COORD_EXIT_PREEMPTED);
        return;
    }
    if (c->state == JOB_RUNNING && code == 0) {
        coord_finish(c, COORD_EXIT_OK);
        return;
    }
    if (c->state == JOB_RUNNING) {
        const int refused = c->refusal.generation == c->generation && c->refusal.text[0];
        snprintf(c->failure, sizeof c->failure, "the job's command exited with %s %d%s", term_signal ? "signal" : "status",
                 term_signal ? term_signal : (int)status,
                 c->n_registered || refused ? "" : " before any rank registered (the launch itself failed: see the command's "
                                        "output above, e.g. mpirun refusing to run as root without --allow-run-as-root)");
        append_refusal(c);
        ODL_LOG_ERROR("generation %" PRIu64 " failed: %s", c->generation, c->failure);
    }
    coord_members_reset(c);
    if (c->restarts >= c->o.max_restarts) {
        ODL_LOG_ERROR("giving up after %d restart%s (--max-restarts %d): %s", c->restarts, c->restarts == 1 ? "" : "s",
                      c->o.max_restarts, c->failure);
        coord_finish(c, code && !(ended_by_us && term_signal) ? code : COORD_EXIT_FAILED);
        return;
    }
    int doublings = c->restarts < COORD_BACKOFF_DOUBLINGS ? c->restarts : COORD_BACKOFF_DOUBLINGS;
    double delay = c->o.backoff_s * (double)(1 << doublings);
    if (delay > COORD_BACKOFF_MAX_S) delay = COORD_BACKOFF_MAX_S;
    c->restarts++;
    c->state = JOB_IDLE;
    ODL_LOG_INFO("relaunching in %.1f s (restart %d of at most %d) from %s", delay, c->restarts, c->o.max_restarts,
                 c->ck.path[0] ? c->ck.path
                 : c->wq     ? "the evaluation's work queue (DIR/eval/queue.json: the chunks done stay done)"
                             : "the start (no committed checkpoint)");
    if (coord_state_save(c) != ODL_OK) ODL_LOG_ERROR("%s", odl_error_msg());
    uv_timer_start(&c->backoff, on_backoff, (uint64_t)(delay * 1000), 0);
}
