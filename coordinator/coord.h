/* odl_coordinator's internal state (docs/coordinator.md). One libuv loop owns everything below; the
 * HTTP thread (libmicrohttpd) only reads the metrics text, under metrics_mu. */
#ifndef ODL_COORDINATOR_COORD_H
#define ODL_COORDINATOR_COORD_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <uv.h>

#include "comm/coord_wire.h"
#include "odl/status.h"

#define COORD_MAX_RANKS 65536
#define COORD_MAX_CONNS 4096
#define COORD_AUTH_TIMEOUT_S 10.0 /* a connection that has not proved the secret by then is closed */

/* Exit statuses of odl_coordinator (docs/coordinator.md "Exit statuses"). */
#define COORD_EXIT_OK 0
#define COORD_EXIT_FAILED 1     /* the job failed and --max-restarts was used up (or the job's own status) */
#define COORD_EXIT_USAGE 2
#define COORD_EXIT_INTERNAL 70  /* e.g. the event loop did not close cleanly */
#define COORD_EXIT_PREEMPTED 75 /* SIGTERM: the job checkpointed (when it was training) and stopped */

typedef enum coord_job_state {
    JOB_IDLE,      /* no child (before the first launch, during backoff) */
    JOB_RUNNING,
    JOB_FAILING,   /* a failure was seen; the process group was killed; waiting for the child's exit */
    JOB_STOPPING,  /* preemption: waiting for the checkpoint and the ranks' exit */
    JOB_DONE,
} coord_job_state;

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
    int has_gpu; /* the heartbeats carry GPU telemetry (below; NaN: unavailable) */
    double gpu[6]; /* utilisation %, memory used / total MiB, temperature C, power W, SM clock MHz */
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

typedef struct coord {
    coord_opts o;
    uv_loop_t loop;
    uv_tcp_t server;
    uv_timer_t tick, backoff;
    uv_signal_t sig_term, sig_int, sig_usr1;
    uv_process_t child;
    int lock_fd; /* DIR/coordinator.lock, flocked for the coordinator's life (leftovers.c) */
    int child_alive;
    int64_t child_pid;
    uint8_t key[ODL_WIRE_KEY_BYTES];
    char advertise[300]; /* host:port given to the workers */
    char http_addr[300];

    uint64_t generation;
    int restarts;
    coord_job_state state;
    int exit_code;
    int world_size; /* of this generation; 0 until the first rank registers */
    int n_registered; /* registrations in this generation (0: its command failed before any worker spoke) */
    coord_rank *ranks;
    double t_generation;
    char failure[512];

    /* the dataset plan of this generation (from the committed checkpoint) */
    int have_plan;
    uint64_t seed;
    /* the last committed checkpoint */
    int64_t ck_step, ck_epoch, ck_cursor;
    char ck_path[PATH_MAX];
    uint64_t ck_bytes;
    double ck_write_ms, ck_time; /* ck_time: wall clock (s since the epoch) of the commit */
    /* a checkpoint requested now (SIGUSR1, SIGTERM) */
    uint64_t req_id;
    int64_t req_step;
    int req_stop, req_active, req_tries;
    double t_stop;

    /* GPU health (fence.c): a node-fatal Xid stops the job at a checkpoint to relaunch it without the node */
    int fence_relaunch;
    coord_xid xids[COORD_MAX_XIDS];
    int n_xids;

    struct coord_wq *wq; /* the evaluation work queue (work_queue.c), NULL until a rank asks for work */

    coord_conn *conns;
    int n_conns;
    uint64_t refused_auth, refused_generation, refused_duplicate, refused_protocol, refused_full;

    pthread_mutex_t metrics_mu;
    char *metrics; /* Prometheus text, rebuilt on every tick */
    void *http;    /* struct MHD_Daemon * */
} coord;

double coord_now(const coord *c); /* monotonic seconds (the loop's clock) */

/* server.c: the port */
odl_status coord_server_start(coord *c);
void coord_server_tick(coord *c);
void coord_conns_close_all(coord *c);
void coord_members_reset(coord *c);
void coord_request_checkpoint(coord *c, int stop);
void coord_broadcast_shutdown(coord *c, const char *reason);
void coord_conn_send(coord_conn *k, Odl__Envelope *e); /* queue one frame to k (closes k on failure) */

/* work_queue.c: the evaluation work queue (docs/coordinator.md "Evaluation work queue"), persisted in
 * DIR/eval/queue.json. A request is answered at once with a WorkItem (a chunk, wait, finished or an
 * error); a WorkDone marks a chunk done (first result wins). */
void coord_work_request(coord *c, coord_conn *k, int rank, const Odl__WorkRequest *r);
void coord_work_done(coord *c, int rank, const Odl__WorkDone *d);
void coord_work_tick(coord *c); /* ends a rank stuck on a chunk another rank finished, after --timeout */
void coord_work_free(coord *c);

/* supervise.c: the job */
odl_status coord_job_launch(coord *c);
void coord_job_fail(coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void coord_job_member_done(coord *c);
void coord_finish(coord *c, int exit_code);

/* fence.c: Xid reports, the fence list, launch arguments without the fenced nodes */
void coord_xid_report(coord *c, int rank, const Odl__XidReport *x);
struct odl_xid_table;
/* Record an application Xid of `node` in JOB_DIR/xid_history.json (coordinator/xid_history.c), dropping
 * entries older than t->escalate_window_s; *n = the node's application Xids now within the window,
 * codes = them comma-separated. Errors: ODL_E_IO, ODL_E_FORMAT (a damaged file). */
odl_status coord_xid_history_add(const char *job_dir, const char *node, int xid, const struct odl_xid_table *t, int *n,
                                 char *codes, size_t cap);
odl_status coord_fence_argv(coord *c, char ***argv_out); /* the command, {hostfile} {np} {exclude} filled */
void coord_fence_argv_free(char **argv);
void coord_gpu_metrics(const coord *c, char **text, size_t *len);

/* state.c: files in the job directory (jansson) */
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

/* http.c */
odl_status coord_http_start(coord *c);
void coord_http_stop(coord *c);
void coord_metrics_update(coord *c);

#endif
