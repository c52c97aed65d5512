/* A small fixed thread pool for the CPU backend, and per-thread scratch buffers.
 *
 * The pool runs one parallel loop at a time: the caller splits [0, n) into contiguous chunks, wakes the
 * workers (started on first use, parked on a condition variable between loops, joined at exit), runs
 * chunk 0 itself and waits for the rest. A loop started from inside a loop, or while another thread owns the
 * pool, simply runs on the calling thread; results never depend on this because kernels only split work
 * whose per-element result is independent of the split (see cpu.h).
 *
 * Tunable: ODL_CPU_THREADS (odl/env.h) = number of threads, calling thread included.
 */
#include "kernels/cpu/cpu.h"
#include "odl/env.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ODL_CPU_MAX_THREADS 64
#define ODL_CPU_MSG_CAP 1024

static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static int g_nthreads = 1;

static void read_thread_env(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (odl_env_is_set(ODL_ENV_CPU_THREADS)) n = (long)odl_env_int(ODL_ENV_CPU_THREADS); /* 1..64 (odl/env.h) */
    if (n < 1) n = 1;
    if (n > ODL_CPU_MAX_THREADS) n = ODL_CPU_MAX_THREADS;
    g_nthreads = (int)n;
}

int odl_cpu_num_threads(void) {
    pthread_once(&g_env_once, read_thread_env);
    return g_nthreads;
}

void odl_cpu_set_num_threads(int n) {
    pthread_once(&g_env_once, read_thread_env);
    if (n < 1) n = 1;
    if (n > ODL_CPU_MAX_THREADS) n = ODL_CPU_MAX_THREADS;
    g_nthreads = n;
}

int odl_cpu_plan_chunks(int64_t n, int64_t grain) {
    if (n <= 0) return 0;
    if (grain < 1) grain = 1;
    int64_t by_grain = (n + grain - 1) / grain;
    int64_t t = odl_cpu_num_threads();
    return (int)(by_grain < t ? by_grain : t);
}

/* ---- the pool ---- */
static struct {
    pthread_mutex_t owner; /* held by the thread running a parallel loop */
    pthread_mutex_t mu;    /* guards everything below */
    pthread_cond_t start_cv, done_cv;
    int nworkers;          /* workers started (ids 1..nworkers) */
    int quit;              /* set at exit: workers return */
    pthread_t threads[ODL_CPU_MAX_THREADS];
    unsigned long gen;     /* incremented per loop */
    int pending;           /* worker chunks not finished */
    odl_cpu_range_fn fn;
    void *ctx;
    int64_t n;
    int nchunks;
    unsigned long start_gen[ODL_CPU_MAX_THREADS]; /* gen when worker i was started */
    odl_status st[ODL_CPU_MAX_THREADS];
    char msg[ODL_CPU_MAX_THREADS][ODL_CPU_MSG_CAP];
} g_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
            0, 0, {0}, 0, 0, NULL, NULL, 0, 0, {0}, {ODL_OK}, {{0}}};

static _Thread_local int tl_in_loop;

static void chunk_range(int64_t n, int nchunks, int i, int64_t *b, int64_t *e) {
    *b = n * i / nchunks;
    *e = n * (i + 1) / nchunks;
}

static void run_chunk(int i, odl_cpu_range_fn fn, void *ctx, int64_t n, int nchunks) {
    int64_t b, e;
    chunk_range(n, nchunks, i, &b, &e);
    odl_status st = fn(ctx, i, b, e);
    g_pool.st[i] = st;
    if (st != ODL_OK) snprintf(g_pool.msg[i], ODL_CPU_MSG_CAP, "%s", odl_error_msg());
}

static void *worker_main(void *arg) {
    int id = (int)(intptr_t)arg;
    unsigned long seen = 0;
    tl_in_loop = 1;
    pthread_mutex_lock(&g_pool.mu);
    seen = g_pool.start_gen[id];
    for (;;) {
        while (g_pool.gen == seen && !g_pool.quit) pthread_cond_wait(&g_pool.start_cv, &g_pool.mu);
        if (g_pool.quit) break;
        seen = g_pool.gen;
        if (id >= g_pool.nchunks) continue;
        odl_cpu_range_fn fn = g_pool.fn;
        void *ctx = g_pool.ctx;
        int64_t n = g_pool.n;
        int nchunks = g_pool.nchunks;
        pthread_mutex_unlock(&g_pool.mu);
        run_chunk(id, fn, ctx, n, nchunks);
        pthread_mutex_lock(&g_pool.mu);
        if (--g_pool.pending == 0) pthread_cond_signal(&g_pool.done_cv);
    }
    pthread_mutex_unlock(&g_pool.mu);
    return NULL;
}

static void scratch_release_this_thread(void);

/* At exit: stop and join the workers, so that the process ends with no thread of ours running (clean
 * under valgrind and sanitizers). Waits for a loop in progress in another thread to finish first. */
static void pool_shutdown(void) {
    pthread_mutex_lock(&g_pool.owner);
    pthread_mutex_lock(&g_pool.mu);
    g_pool.quit = 1;
    pthread_cond_broadcast(&g_pool.start_cv);
    pthread_mutex_unlock(&g_pool.mu);
    for (int i = 1; i <= g_pool.nworkers; i++) pthread_join(g_pool.threads[i], NULL);
    pthread_mutex_lock(&g_pool.mu);
    g_pool.nworkers = 0;
    g_pool.quit = 0;
    pthread_mutex_unlock(&g_pool.mu);
    pthread_mutex_unlock(&g_pool.owner);
    scratch_release_this_thread(); /* the exiting thread's buffers (workers free theirs as they end) */
}

/* In a child after fork() the workers do not exist; start afresh. */
static void pool_after_fork_child(void) {
    pthread_mutex_init(&g_pool.owner, NULL);
    pthread_mutex_init(&g_pool.mu, NULL);
    pthread_cond_init(&g_pool.start_cv, NULL);
    pthread_cond_init(&g_pool.done_cv, NULL);
    g_pool.nworkers = 0;
    g_pool.pending = 0;
    tl_in_loop = 0;
}

static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) {
    pthread_atfork(NULL, NULL, pool_after_fork_child);
    atexit(pool_shutdown);
}

/* Called with `owner` held. Starts workers up to want-1; returns how many exist. */
static int ensure_workers(int want) {
    pthread_once(&g_atfork_once, register_atfork);
    while (g_pool.nworkers < want - 1) {
        const int id = g_pool.nworkers + 1;
        pthread_mutex_lock(&g_pool.mu);
        g_pool.start_gen[id] = g_pool.gen;
        pthread_mutex_unlock(&g_pool.mu);
        if (pthread_create(&g_pool.threads[id], NULL, worker_main, (void *)(intptr_t)id) != 0)
            break; /* run with the workers we have */
        g_pool.nworkers++;
    }
    return g_pool.nworkers;
}

odl_status odl_cpu_parallel_for(int64_t n, int64_t grain, odl_cpu_range_fn fn, void *ctx, int *nchunks_out) {
    if (nchunks_out) *nchunks_out = n > 0 ? 1 : 0;
    if (n <= 0) return ODL_OK;
    int nc = odl_cpu_plan_chunks(n, grain);
    if (nc <= 1 || tl_in_loop || pthread_mutex_trylock(&g_pool.owner) != 0) return fn(ctx, 0, 0, n);

    int workers = ensure_workers(nc);
    if (nc > workers + 1) nc = workers + 1;
    if (nc <= 1) {
        pthread_mutex_unlock(&g_pool.owner);
        return fn(ctx, 0, 0, n);
    }
    if (nchunks_out) *nchunks_out = nc;

    pthread_mutex_lock(&g_pool.mu);
    g_pool.fn = fn;
    g_pool.ctx = ctx;
    g_pool.n = n;
    g_pool.nchunks = nc;
    g_pool.pending = nc - 1;
    g_pool.gen++;
    pthread_cond_broadcast(&g_pool.start_cv);
    pthread_mutex_unlock(&g_pool.mu);

    tl_in_loop = 1;
    int64_t b, e;
    chunk_range(n, nc, 0, &b, &e);
    odl_status st0 = fn(ctx, 0, b, e);
    tl_in_loop = 0;

    pthread_mutex_lock(&g_pool.mu);
    while (g_pool.pending > 0) pthread_cond_wait(&g_pool.done_cv, &g_pool.mu);
    pthread_mutex_unlock(&g_pool.mu);

    odl_status st = st0;
    if (st == ODL_OK) {
        for (int i = 1; i < nc; i++) {
            if (g_pool.st[i] != ODL_OK) {
                st = g_pool.st[i];
                odl_error_clear();
                odl_error_prefix("%s", g_pool.msg[i]);
                break;
            }
        }
    }
    pthread_mutex_unlock(&g_pool.owner);
    return st;
}

/* ---- per-thread scratch ---- */
typedef struct scratch_set {
    float *buf[ODL_CPU_SCRATCH_SLOTS];
    size_t cap[ODL_CPU_SCRATCH_SLOTS];
} scratch_set;

static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;
static _Thread_local scratch_set *tl_scratch;

static void scratch_free(void *p) {
    scratch_set *s = (scratch_set *)p;
    if (!s) return;
    for (int i = 0; i < ODL_CPU_SCRATCH_SLOTS; i++) free(s->buf[i]);
    free(s);
}

static void scratch_key_create(void) { pthread_key_create(&g_scratch_key, scratch_free); }

static void scratch_release_this_thread(void) {
    if (!tl_scratch) return;
    pthread_setspecific(g_scratch_key, NULL);
    scratch_free(tl_scratch);
    tl_scratch = NULL;
}

odl_status odl_cpu_scratch(int slot, size_t nfloats, float **out) {
    *out = NULL;
    if (slot < 0 || slot >= ODL_CPU_SCRATCH_SLOTS) return ODL_ERR(ODL_E_INTERNAL, "scratch slot %d out of range", slot);
    if (!tl_scratch) {
        pthread_once(&g_scratch_once, scratch_key_create);
        scratch_set *s = (scratch_set *)calloc(1, sizeof *s);
        if (!s) return ODL_ERR(ODL_E_NOMEM, "CPU scratch: cannot allocate %zu bytes", sizeof *s);
        pthread_setspecific(g_scratch_key, s);
        tl_scratch = s;
    }
    if (nfloats == 0) nfloats = 1;
    if (tl_scratch->cap[slot] < nfloats) {
        if (nfloats > SIZE_MAX / sizeof(float) - 64)
            return ODL_ERR(ODL_E_NOMEM, "CPU scratch: %zu floats is too large", nfloats);
        size_t bytes = (nfloats * sizeof(float) + 63) & ~(size_t)63;
        free(tl_scratch->buf[slot]);
        tl_scratch->buf[slot] = NULL;
        tl_scratch->cap[slot] = 0;
        float *p = (float *)aligned_alloc(64, bytes);
        if (!p) return ODL_ERR(ODL_E_NOMEM, "CPU scratch: cannot allocate %zu bytes", bytes);
        tl_scratch->buf[slot] = p;
        tl_scratch->cap[slot] = bytes / sizeof(float);
    }
    *out = tl_scratch->buf[slot];
    return ODL_OK;
}
