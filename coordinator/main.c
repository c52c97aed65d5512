/* odl_coordinator: one per job (docs/coordinator.md).
 *   odl_coordinator --job-dir DIR [--listen HOST:PORT] [--http HOST:PORT|off] [--max-restarts N]
 *                   [--heartbeat-ms MS] [--timeout S] [--backoff S] [--checkpoint-every N] [--keep N]
 *                   [--token-file PATH] [--hostfile FILE] [--slurm] [-- CMD ARGS...]
 * (usage() below says what each does.)
 * It starts CMD (e.g. mpirun -np 8 odl_worker --task=train ...) with the coordinator's address, the
 * job secret and the generation in its environment, watches the ranks that register, relaunches the
 * job from the last committed checkpoint when it fails, and exits with the job's status. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coordinator/coord.h"
#include "odl/clock.h"
#include "odl/log.h"
#include "odl/parse.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: odl_coordinator --job-dir DIR [options] [-- CMD ARGS...]\n"
            "  --listen HOST:PORT     the workers' port (default 0.0.0.0:0, any free port)\n"
            "  --http HOST:PORT|off   /metrics and /healthz (default 127.0.0.1:0)\n"
            "  --max-restarts N       relaunches after failures (default 3)\n"
            "  --heartbeat-ms MS      heartbeat interval of the workers (default 200)\n"
            "  --timeout S            a rank without heartbeat, or a job without progress, fails after S s (default 10)\n"
            "  --backoff S            first relaunch delay, doubled each time, at most 30 s (default 1)\n"
            "  --checkpoint-every N   checkpoint every N steps (default 0: the workers' checkpoint.every)\n"
            "  --keep N               checkpoints kept after each commit (default 0: the workers' checkpoint.keep)\n"
            "  --token-file PATH      the job secret (default DIR/secret, created with mode 0600)\n"
            "  --hostfile FILE        Open MPI hostfile; each launch gets DIR/hosts.GEN without the fenced nodes,\n"
            "                         named in CMD as {hostfile}, its slot count as {np}\n"
            "  --slurm                drain fenced nodes once (scontrol); {exclude} in CMD is srun's --exclude=...\n"
            "Signals: SIGTERM/SIGINT checkpoint and stop (exit 75), SIGUSR1 checkpoint now.\n"
            "Exit status: the job's (0 done), 1 failed after --max-restarts, 2 usage, 70 internal, 75 preempted.\n");
}

static int parse_hostport(const char *s, char *host, size_t cap, int *port) {
    const char *colon = strrchr(s, ':');
    int64_t p;
    if (!colon || colon == s || (size_t)(colon - s) >= cap || odl_parse_i64(colon + 1, 0, 65535, &p) != ODL_PARSE_OK)
        return -1;
    snprintf(host, cap, "%.*s", (int)(colon - s), s);
    *port = (int)p;
    return 0;
}

/* A number option in [lo, hi] (odl/parse.h: "abc" or "1.5" for a count is an error, never 0). */
static int parse_real(const char *flag, const char *v, double lo, double hi, double *out) {
    if (odl_parse_f64(v, lo, hi, out) == ODL_PARSE_OK) return 0;
    fprintf(stderr, "odl_coordinator: error: %s %s: expected a number in [%g, %g]\n", flag, v, lo, hi);
    return -1;
}
static int parse_count(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out) {
    if (odl_parse_i64(v, lo, hi, out) == ODL_PARSE_OK) return 0;
    fprintf(stderr, "odl_coordinator: error: %s %s: expected an integer in [%" PRId64 ", %" PRId64 "]\n", flag, v, lo, hi);
    return -1;
}

static int parse_args(int argc, char **argv, coord_opts *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->listen_host, sizeof o->listen_host, "0.0.0.0");
    snprintf(o->http_host, sizeof o->http_host, "127.0.0.1");
    o->max_restarts = 3;
    o->heartbeat_s = ODL_WIRE_HEARTBEAT_S_DEFAULT;
    o->timeout_s = 10;
    o->backoff_s = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            if (i + 1 < argc) o->cmd = argv + i + 1;
            break;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--slurm")) {
            o->slurm = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "odl_coordinator: error: %s needs a value (or is unknown; see --help)\n", a);
            return -1;
        }
        const char *v = argv[++i];
        double x;
        int64_t n;
        if (!strcmp(a, "--job-dir")) snprintf(o->job_dir, sizeof o->job_dir, "%s", v);
        else if (!strcmp(a, "--token-file")) snprintf(o->token_file, sizeof o->token_file, "%s", v);
        else if (!strcmp(a, "--hostfile")) snprintf(o->hostfile, sizeof o->hostfile, "%s", v);
        else if (!strcmp(a, "--listen")) {
            if (parse_hostport(v, o->listen_host, sizeof o->listen_host, &o->listen_port)) goto bad_addr;
        } else if (!strcmp(a, "--http")) {
            if (!strcmp(v, "off")) o->http_port = -1;
            else if (parse_hostport(v, o->http_host, sizeof o->http_host, &o->http_port)) goto bad_addr;
        } else if (!strcmp(a, "--max-restarts")) {
            if (parse_count(a, v, 0, INT_MAX, &n)) return -1;
            o->max_restarts = (int)n;
        } else if (!strcmp(a, "--heartbeat-ms")) {
            if (parse_real(a, v, 10, 3600e3, &x)) return -1;
            o->heartbeat_s = x / 1000;
        } else if (!strcmp(a, "--timeout")) {
            if (parse_real(a, v, 0.1, 86400, &x)) return -1;
            o->timeout_s = x;
        } else if (!strcmp(a, "--backoff")) {
            if (parse_real(a, v, 0, 3600, &x)) return -1;
            o->backoff_s = x;
        } else if (!strcmp(a, "--checkpoint-every")) {
            if (parse_count(a, v, 0, INT64_MAX, &o->checkpoint_every)) return -1;
        } else if (!strcmp(a, "--keep")) {
            if (parse_count(a, v, 0, INT64_MAX, &o->keep)) return -1;
        } else {
            fprintf(stderr, "odl_coordinator: error: unknown option %s (see --help)\n", a);
            return -1;
        }
        continue;
    bad_addr:
        fprintf(stderr, "odl_coordinator: error: %s %s: expected HOST:PORT\n", a, v);
        return -1;
    }
    if (!o->job_dir[0]) {
        fprintf(stderr, "odl_coordinator: error: --job-dir DIR is required\n");
        return -1;
    }
    if (o->heartbeat_s * 3 > o->timeout_s) {
        fprintf(stderr, "odl_coordinator: error: --timeout %g s must be at least 3 heartbeats (--heartbeat-ms %g)\n",
                o->timeout_s, o->heartbeat_s * 1000);
        return -1;
    }
    return 0;
}

static void on_tick(uv_timer_t *t) {
    coord *c = t->data;
    coord_server_tick(c);
    coord_work_tick(c);
    coord_job_tick(c);
    coord_metrics_update(c);
}

static void on_signal(uv_signal_t *h, int sig) {
    coord *c = h->data;
    if (sig == SIGUSR1) {
        if (c->state == JOB_RUNNING && coord_ranks_training(c)) coord_request_checkpoint(c, 0);
        else ODL_LOG_WARN("SIGUSR1: no training is running to checkpoint");
        return;
    }
    ODL_LOG_WARN("%s: preemption", strsignal(sig));
    if (c->req.stop) { /* a second signal: do not wait any longer */
        if (c->child.alive) kill(-(pid_t)c->child.pid, SIGKILL);
        else coord_finish(c, COORD_EXIT_PREEMPTED);
        return;
    }
    c->req.stop = 1;
    c->req.t_stop = odl_mono_s();
    if (c->state == JOB_RUNNING && coord_ranks_training(c)) {
        c->state = JOB_STOPPING;
        coord_request_checkpoint(c, 1);
    } else if (c->child.alive) {
        kill(-(pid_t)c->child.pid, SIGTERM); /* no rank registered yet, or all finished: nothing to checkpoint */
    } else {
        coord_finish(c, COORD_EXIT_PREEMPTED);
    }
}

static void close_walk(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Phase 1, the process: SIGPIPE ignored, the log tag, room for many connections, the job directory
 * (created, made absolute, locked). Returns 0 or the exit status. */
static int prepare(coord *c) {
    signal(SIGPIPE, SIG_IGN);
    odl_log_set_tag("coordinator"); /* not a rank: its lines interleave with the ranks' in one log */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (mkdir(c->o.job_dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "odl_coordinator: error: cannot create the job directory %s: %s\n", c->o.job_dir, strerror(errno));
        return COORD_EXIT_USAGE;
    }
    /* Absolute: the job's processes carry it in ODL_JOB_DIR, and a later coordinator started from
     * another folder must recognise them (leftovers.c). */
    char abs_dir[PATH_MAX];
    if (!realpath(c->o.job_dir, abs_dir)) {
        fprintf(stderr, "odl_coordinator: error: the job directory %s: %s\n", c->o.job_dir, strerror(errno));
        return COORD_EXIT_USAGE;
    }
    snprintf(c->o.job_dir, sizeof c->o.job_dir, "%s", abs_dir);
    c->lock_fd = -1;
    if (coord_job_dir_lock(c) != ODL_OK) {
        fprintf(stderr, "odl_coordinator: error: %s\n", odl_error_msg_user());
        return COORD_EXIT_USAGE;
    }
    return 0;
}

/* Phase 2, after the loop exists: the job directory's state, the port, HTTP, the tick and the signals,
 * then the first generation. */
static odl_status start(coord *c) {
    ODL_CHECK(coord_secret_prepare(c));
    ODL_CHECK(coord_state_load(c));
    if (c->o.cmd) coord_end_leftovers(c); /* before the next generation starts beside them */
    ODL_LOG_INFO("job directory %s: generation %" PRIu64 " so far, %d restart%s, last committed checkpoint %s",
                 c->o.job_dir, c->generation, c->restarts, c->restarts == 1 ? "" : "s", c->ck.path[0] ? c->ck.path : "none");
    coord_supervise_init(c);
    ODL_CHECK(coord_server_start(c));
    ODL_CHECK(coord_http_start(c));
    uv_timer_init(&c->loop, &c->tick);
    c->tick.data = c;
    uv_timer_init(&c->loop, &c->backoff);
    c->backoff.data = c;
    uv_timer_init(&c->loop, &c->kill_grace);
    c->kill_grace.data = c;
    uv_signal_t *sigs[3] = {&c->sig_term, &c->sig_int, &c->sig_usr1};
    int nums[3] = {SIGTERM, SIGINT, SIGUSR1};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(&c->loop, sigs[i]);
        sigs[i]->data = c;
        uv_signal_start(sigs[i], on_signal, nums[i]);
    }
    uint64_t tick_ms = (uint64_t)(c->o.heartbeat_s * 500); /* two ticks a heartbeat */
    uv_timer_start(&c->tick, on_tick, tick_ms ? tick_ms : 1, tick_ms ? tick_ms : 1);
    coord_metrics_update(c);
    return coord_job_launch(c);
}

/* Phase 4: nothing of the job outlives the coordinator; the loop must close cleanly (uv_loop_close),
 * or the exit status says it did not. */
static void shut_down(coord *c, int loop_ok) {
    if (c->child.alive) kill(-(pid_t)c->child.pid, SIGKILL);
    coord_http_stop(c);
    if (loop_ok) {
        coord_conn_close_all(c);
        uv_walk(&c->loop, close_walk, NULL);
        uv_run(&c->loop, UV_RUN_DEFAULT);
        int lc = uv_loop_close(&c->loop);
        if (lc != 0) {
            ODL_LOG_ERROR("the event loop did not close cleanly: %s", uv_strerror(lc));
            c->exit_code = COORD_EXIT_INTERNAL;
        } else {
            ODL_LOG_INFO("event loop closed cleanly; exit status %d", c->exit_code);
        }
    }
    if (c->lock_fd >= 0) close(c->lock_fd);
    coord_work_free(c);
    free(c->ranks);
    free(c->metrics);
    pthread_mutex_destroy(&c->metrics_mu);
}

int main(int argc, char **argv) {
    static coord c;
    int r = parse_args(argc, argv, &c.o);
    if (r) return r > 0 ? 0 : COORD_EXIT_USAGE;
    if ((r = prepare(&c)) != 0) return r;
    pthread_mutex_init(&c.metrics_mu, NULL);
    c.exit_code = COORD_EXIT_INTERNAL;
    int loop_ok = uv_loop_init(&c.loop) == 0;
    odl_status s = loop_ok ? start(&c) : ODL_ERR(ODL_E_INTERNAL, "uv_loop_init failed");
    if (s == ODL_OK) { /* phase 3: the job, until coord_finish stops the loop */
        uv_run(&c.loop, UV_RUN_DEFAULT);
    } else {
        fprintf(stderr, "odl_coordinator: error: %s\n", odl_error_msg_user());
        c.exit_code = c.exit_code == COORD_EXIT_INTERNAL ? COORD_EXIT_FAILED : c.exit_code;
    }
    shut_down(&c, loop_ok);
    return c.exit_code;
}
