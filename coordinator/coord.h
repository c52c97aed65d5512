/* odl_coordinator's internal state (docs/coordinator.md). One libuv loop owns everything below; the
 * HTTP thread (libmicrohttpd) only reads the metrics text, under metrics_mu.
 *
 * The files, each calling only those listed after it (test_layering checks that no two call each
 * other in a circle):
 *   main.c        options, signals, the tick, start and shutdown: the phases of one run
 *   supervise.c   the job: launch, failure, backoff and relaunch, finish; hears of the ranks through the
 *                 events that server.c raises (coord_job_events), decides on Xid reports (xid_policy.c)
 *   server.c      membership, heartbeats, liveness, the checkpoint protocol (on conn.c's frames)
 *   work_queue.c  the evaluation work queue
 *   conn.c        the port: connections, frames, sends, refusals
 *   xid_policy.c  what an Xid report means: counted, a restart, or a fence (health/fence_list.c)
 *   xid_history.c application Xids per node across generations (escalation)
 *   launch_args.c the command of a generation: {hostfile} {np} {exclude} without the fenced nodes
 *   metrics.c     the Prometheus text of /metrics, rebuilt every tick
 *   http.c        /metrics and /healthz on libmicrohttpd's thread
 *   state.c       the job directory's JSON files
 *   leftovers.c   one coordinator per DIR; older generations' processes ended
 * The clock is core's (odl_mono_s, odl/clock.h): liveness is decided on the coordinator's own monotonic
 * clock, never a worker's. */
#ifndef ODL_COORDINATOR_COORD_H
#define ODL_COORDINATOR_COORD_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <uv.h>

#include "comm/coord_wire.h"
#include "odl/health.h"
#include "odl/status.h"

#define COORD_MAX_RANKS 65536
#define COORD_MAX_CONNS 4096
#define COORD_AUTH_TIMEOUT_S 10.0 /* a connection that has not proved the secret by then is closed */
/* Relaunch delay: --backoff doubled after each restart, at most COORD_BACKOFF_DOUBLINGS times and never
 * more than COORD_BACKOFF_MAX_S. */
#define COORD_BACKOFF_DOUBLINGS 5
#define COORD_BACKOFF_MAX_S 30.0
/* A preemption or fence stop gives the ranks this long to checkpoint and exit before the job is killed:
 * a checkpoint request can be cancelled and re-issued (each retry further ahead) a few times, each
 * within a timeout, and the write itself takes its time. */
#define COORD_STOP_GRACE_S(timeout_s) (6 * (timeout_s) + 30)
/* A failed job's ranks are told to end at once (Shutdown) and its process group is SIGKILLed this long
 * after the failure unless its command exits first: a rank that dies writes its last lines into a pipe its
 * launcher relays (mpirun's I/O forwarding), and killing the launcher at once lost them (3 of 16 "fires
 * now" lines of killed evaluation ranks in the GPU soak of 2026-12-06). mpirun, seeing its ranks end,
 * exits by itself well within it; a rank that cannot read the Shutdown (SIGSTOPped) is killed with it. */
#define COORD_KILL_GRACE_MS 1000
/* Smoothing of a rank's steps per second (an exponential moving average: the new rate's weight). */
#define COORD_RATE_EMA_WEIGHT 0.3

/* Exit statuses of odl_coordinator (docs/coordinator.md "Exit statuses"). */
#define COORD_EXIT_OK 0
#define COORD_EXIT_FAILED 1     /* the job failed and --max-restarts was used up (or the job's own status) */
#define COORD_EXIT_USAGE 2
#define COORD_EXIT_INTERNAL 70  /* e.g. the event loop did not close cleanly */
#define COORD_EXIT_PREEMPTED 75 /* SIGTERM: the job checkpointed (when it was training) and stopped */

typedef enum coord_job_state {
    JOB_IDLE,      /* no child (before the first launch, during backoff) */
    JOB_RUNNING,
    JOB_FAILING,   /* a failure was seen; waiting for the child's exit (killed after COORD_KILL_GRACE_MS) */
    JOB_STOPPING,  /* preemption: waiting for the checkpoint and the ranks' exit */
    JOB_DONE,
} coord_job_state;

typedef struct coord coord;
typedef struct coord_conn coord_conn;

typedef struct coord_rank {
    coord_conn *conn; /* NULL: not connected */
    int finished;     /* said goodbye with status 0 */
    char node[64], gpu_uuid[64], pci_bus_id[32], gpu_model[96];
    int gpu_index; /* NVML's index on its node, -1 unknown */
    uint32_t pid;
    double t_join, t_heartbeat, t_progress; /* coordinator monotonic seconds */
    int64_t step, epoch, cursor, first_step;
    double samples_per_s, steps_per_s;
    uint64_t collective_seq;
    char waiting_in[128];
    int checkpoint_writing, evaluating;
    int has_gpu;       /* the heartbeats carry GPU telemetry */
    odl_gpu_sample gpu; /* the latest (ODL_HEALTH_NA: unavailable) */
} coord_rank;

typedef struct coord_opts {
    char job_dir[PATH_MAX];
    char token_file[PATH_MAX + 16];
    char listen_host[256];
    int listen_port;
    char http_host[256];
    int http_port; /* -1: no HTTP server */
    int max_restarts;
    double heartbeat_s, timeout_s, backoff_s;
    int64_t checkpoint_every;
    int64_t keep; /* --keep: checkpoints kept at each commit; 0: the writer's checkpoint.keep */
    char hostfile[PATH_MAX]; /* --hostfile: the Open MPI hostfile that fenced nodes are taken out of */
    int slurm;               /* --slurm: drain fenced nodes with scontrol; {exclude} is srun's --exclude */
    char **cmd; /* NULL-terminated; NULL: serve only (no supervision) */
} coord_opts;

/* Xids the ranks reported, per node, GPU and code, over every generation (odl_gpu_xid_errors_total). */
#define COORD_MAX_XIDS 256
typedef struct coord_xid {
    char node[64], pci[32], uuid[64];
    int xid, cls;
    uint64_t count;
} coord_xid;

/* The last committed checkpoint (DIR/committed.json): what a relaunch resumes from. One value, so that
 * a commit that cannot be recorded puts the previous one back whole. */
typedef struct coord_commit {
    int64_t step, epoch, cursor; /* epoch: epochs completed */
    char path[PATH_MAX];         /* "" for none */
    uint64_t bytes;
    double write_ms, time;       /* time: wall clock (s since the epoch) of the commit */
} coord_commit;

/* A checkpoint requested now (SIGUSR1, SIGTERM, a fence). */
typedef struct coord_request {
    uint64_t id;
    int64_t step;
    int stop, active, tries;
    double t_stop; /* when the stop was asked (coordinator clock) */
} coord_request;

/* Connections refused, by reason (odl_refused_connections_total). */
typedef struct coord_refusals {
    uint64_t auth, generation, duplicate, protocol, full;
} coord_refusals;

/* What server.c tells the job's supervisor (supervise.c sets them, coord_supervise_init): events, not
 * calls, so that the server does not depend on the supervisor. */
typedef struct coord_job_events {
    void (*failed)(coord *c, const char *why);                 /* a rank died, timed out, hung or failed */
    void (*member_done)(coord *c);                             /* a rank finished (goodbye with status 0) */
    void (*xid)(coord *c, int rank, const Odl__XidReport *x);  /* a rank's GPU-health monitor saw an Xid */
} coord_job_events;

/* What conn.c hands up to server.c (coord_conn_listen). */
typedef struct coord_conn_events {
    void (*frame)(coord *c, coord_conn *k, Odl__Envelope *e); /* one decoded frame (freed after the call) */
    void (*member_closed)(coord *c, coord_conn *k);           /* a member's connection is closing */
} coord_conn_events;

struct coord {
    coord_opts o;
    uv_loop_t loop;
    uv_tcp_t server;
    uv_timer_t tick, backoff, kill_grace;
    uv_signal_t sig_term, sig_int, sig_usr1;
    struct {
        uv_process_t proc;
        int alive;
        int64_t pid;
    } child; /* the job's command: one process group */
    int lock_fd; /* DIR/coordinator.lock, flocked for the coordinator's life (leftovers.c) */
    uint8_t key[ODL_WIRE_KEY_BYTES];
    char advertise[300]; /* host:port given to the workers */
    char http_addr[300];
    coord_job_events job;
    coord_conn_events conn_ev;

    uint64_t generation;
    int restarts;
    coord_job_state state;
    int exit_code;
    int world_size; /* of this generation; 0 until the first rank registers */
    int n_registered; /* registrations in this generation (0: its command failed before any worker spoke) */
    coord_rank *ranks;
    double t_generation;
    char failure[1024];

    /* the dataset plan of this generation (from the committed checkpoint) */
    int have_plan;
    uint64_t seed;
    coord_commit ck;
    coord_request req;

    /* GPU health (xid_policy.c): a node-fatal Xid stops the job at a checkpoint to relaunch it without the node */
    int fence_relaunch;
    coord_xid xids[COORD_MAX_XIDS];
    int n_xids;

    struct coord_wq *wq; /* the evaluation work queue (work_queue.c), NULL until a rank asks for work */

    coord_conn *conns;
    int n_conns;
    coord_refusals refused;
    struct {
        uint64_t generation; /* the generation it claimed (0: none yet) */
        char text[512];      /* "rank R was refused before it registered, from PEER: REASON" */
    } refusal;               /* the last refusal of a rank claiming the current generation (server.c) */

    pthread_mutex_t metrics_mu;
    char *metrics; /* Prometheus text, rebuilt on every tick */
    void *http;    /* struct MHD_Daemon * */
    void *http_ctx; /* http.c's slot accounting */
};

/* conn.c: the port. Frames are decoded by odl_wire_decode, which refuses a bad length from the header
 * alone, and a connection buffers at most one frame: any bytes a client sends end, at worst, that
 * client's connection. */
typedef enum { CONN_HELLO, CONN_PROOF, CONN_MEMBER, CONN_CLOSING } coord_conn_state;
struct coord_conn {
    uv_tcp_t tcp;
    coord *c;
    coord_conn_state state;
    uint8_t *buf;
    size_t len, cap;
    double t_open;
    char peer[96];
    uint8_t nonce[ODL_WIRE_NONCE_BYTES];
    Odl__Hello *hello; /* kept from Hello until the proof is checked */
    int rank;          /* when a member */
    int said_goodbye;
    coord_conn *next, *prev;
};
/* Listen on --listen; frames and closed members go to ev. Errors: ODL_E_INVAL, ODL_E_IO. */
odl_status coord_conn_listen(coord *c, const coord_conn_events *ev);
void coord_conn_send(coord_conn *k, Odl__Envelope *e); /* queue one frame to k (closes k on failure) */
void coord_conn_send_members(coord *c, Odl__Envelope *e);
/* Tells the rank on k (NULL: every connected rank) to end itself now (Shutdown{reason}: it logs the
 * reason and exits with ODL_WORKER_EXIT_COORD_LOST); the connections stay open until the ranks close them. */
void coord_conn_send_shutdown(coord *c, coord_conn *k, const char *reason);
void coord_conn_close(coord_conn *k);
void coord_conn_close_all(coord *c);
/* Count the refusal, log it, send Refused with the reason, close. */
void coord_conn_refuse(coord_conn *k, uint64_t *counter, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Refuse connections that have not proved the secret within COORD_AUTH_TIMEOUT_S. */
void coord_conn_tick(coord *c);

/* server.c: membership, liveness, checkpoints */
odl_status coord_server_start(coord *c);
void coord_server_tick(coord *c);
void coord_members_reset(coord *c);
void coord_request_checkpoint(coord *c, int stop);
/* A rank is registered and has not said it finished: there is training to checkpoint. */
int coord_ranks_training(const coord *c);

/* work_queue.c: the evaluation work queue (docs/coordinator.md "Evaluation work queue"), persisted in
 * DIR/eval/queue.json. A request is answered at once with a WorkItem (a chunk, wait, finished or an
 * error); a WorkDone marks a chunk done (first result wins). */
void coord_work_request(coord *c, coord_conn *k, int rank, const Odl__WorkRequest *r);
void coord_work_done(coord *c, int rank, const Odl__WorkDone *d);
void coord_work_tick(coord *c); /* ends a rank stuck on a chunk another rank finished, after --timeout */
void coord_work_free(coord *c);

/* supervise.c: the job */
void coord_supervise_init(coord *c); /* sets c->job */
odl_status coord_job_launch(coord *c);
void coord_job_fail(coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void coord_finish(coord *c, int exit_code);
/* Every tick: a stop (preemption, fence) that outlived COORD_STOP_GRACE_S kills the job. */
void coord_job_tick(coord *c);

/* xid_policy.c: what a rank's Xid report means (docs/health.md "Fencing"). */
typedef enum coord_xid_decision {
    COORD_XID_NONE,     /* counted only (an ignored class, or the job is not running) */
    COORD_XID_RESTART,  /* an application Xid: restart the job without fencing */
    COORD_XID_FENCED,   /* the node is in fence.json: checkpoint, stop, relaunch without it */
    COORD_XID_FENCED_ALSO, /* the node is in fence.json; the job was stopping or failing already */
    COORD_XID_UNRECORDED, /* node-fatal, but fence.json could not be written: fail the job */
} coord_xid_decision;
/* Count the report for /metrics and decide; why says it for the job's failure line (RESTART,
 * UNRECORDED). A node-fatal Xid fences its node (fence.json) whatever the job's state, as application
 * ones reaching escalate_after on one node while it runs; an application Xid of a job already stopping
 * or failing is only counted. */
coord_xid_decision coord_xid_decide(coord *c, int rank, const Odl__XidReport *x, char *why, size_t cap);
/* xid_history.c: record an application Xid of `node` in JOB_DIR/xid_history.json, dropping entries older
 * than t->escalate_window_s; *n = the node's application Xids now within the window, codes = them
 * comma-separated. Errors: ODL_E_IO, ODL_E_FORMAT (a damaged file). */
odl_status coord_xid_history_add(const char *job_dir, const char *node, int xid, const odl_xid_table *t, int *n,
                                 char *codes, size_t cap);

/* launch_args.c: the command of this generation with {hostfile} {np} {exclude} filled from the fence list
 * (and the fenced nodes drained under --slurm). */
odl_status coord_launch_argv(coord *c, char ***argv_out);
void coord_launch_argv_free(char **argv);

/* metrics.c: rebuild c->metrics (under metrics_mu) from the state. */
void coord_metrics_update(coord *c);

/* http.c */
odl_status coord_http_start(coord *c);
void coord_http_stop(coord *c);

/* state.c: files in the job directory (jansson, odl/file.h) */
odl_status coord_state_load(coord *c);
odl_status coord_state_save(coord *c);
odl_status coord_commit_save(coord *c);
odl_status coord_plan_save(coord *c);
odl_status coord_info_save(coord *c);
odl_status coord_secret_prepare(coord *c);

/* leftovers.c: one coordinator per DIR (ODL_E_BUSY when another holds DIR/coordinator.lock), and the
 * processes of older generations of DIR on this node ended (SIGKILL, then waited for, at most 10 s)
 * before a launch; returns how many were ended. */
odl_status coord_job_dir_lock(coord *c);
int coord_end_leftovers(coord *c);

#endif
