/* Device runtime: CPU memory, and for CUDA builds the per-device caching pool, streams and events.
 * The pool is a best-fit allocator over cudaMalloc'd arenas (coalescing neighbours of one arena on
 * free): one arena reserved at init (memory.preallocate_fraction), so that the step loop never calls
 * cudaMalloc and peak use is known exactly, or, growing on demand, arenas of at least 32 MiB taken when
 * a request does not fit (kept until shutdown, so a steady loop stops asking the driver after its first
 * pass). */
#include "odl/device.h"

#include "core/device_internal.h"
#include "odl/env.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef ODL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define ODL_HOST_ALIGN 64
#define ODL_POOL_ALIGN 256
#define ODL_MAX_CUDA_DEVICES 16

int odl_cuda_built(void) {
#ifdef ODL_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

/* ------------------------------------------------------------------ copies */

static odl_status check_2d(size_t width, size_t dpitch, size_t spitch) {
    if (width > dpitch || width > spitch)
        return ODL_ERR(ODL_E_INVAL, "2D copy: rows of %zu bytes, pitches %zu (destination) and %zu (source)", width,
                       dpitch, spitch);
    return ODL_OK;
}

static void copy_rows_host(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows) {
    for (size_t y = 0; y < rows; y++) memcpy((char *)dst + y * dpitch, (const char *)src + y * spitch, width);
}

/* ------------------------------------------------------------------ host memory */

static odl_status host_alloc(size_t nbytes, void **out) {
    size_t n = (nbytes + ODL_HOST_ALIGN - 1) / ODL_HOST_ALIGN * ODL_HOST_ALIGN;
    void *p = aligned_alloc(ODL_HOST_ALIGN, n ? n : ODL_HOST_ALIGN);
    if (!p) return ODL_ERR(ODL_E_NOMEM, "host allocation of %zu bytes failed", nbytes);
    *out = p;
    return ODL_OK;
}

#ifdef ODL_HAVE_CUDA
/* ------------------------------------------------------------------ CUDA pool */

#define CUDA_TRY(call)                                                                                    \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        if (e_ != cudaSuccess) return ODL_ERR(ODL_E_CUDA, "%s: %s", #call, cudaGetErrorString(e_));       \
    } while (0)

typedef struct pool_block {
    char *ptr;
    size_t size;
    int used;
    int arena; /* blocks of two arenas never merge, even when the driver placed them side by side */
} pool_block;

typedef struct pool_arena {
    char *base;
    size_t cap;
} pool_arena;

typedef struct cuda_pool {
    int ready;
    int grow;           /* 1: arenas taken from the driver on demand; 0: the one reservation made at init */
    pool_arena *arenas;
    int narenas, arenas_cap;
    pool_block *blocks; /* sorted by address, covering every arena */
    int nblocks, blocks_cap;
    odl_pool_stats st;
    cudaStream_t default_stream;
    pthread_mutex_t mu;
} cuda_pool;

static cuda_pool g_pools[ODL_MAX_CUDA_DEVICES];
static pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local cudaStream_t t_stream;
static _Thread_local int t_stream_set;
static _Thread_local int t_device = -1;

int odl_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

odl_status odl_cuda_pci_bus_id(int index, char *buf, size_t cap) {
    cudaError_t e = cudaDeviceGetPCIBusId(buf, (int)cap, index);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ODL_ERR(ODL_E_CUDA, "cudaDeviceGetPCIBusId(%d): %s", index, cudaGetErrorString(e));
    }
    return ODL_OK;
}

static odl_status pool_insert(cuda_pool *p, int at, pool_block b) {
    if (p->nblocks == p->blocks_cap) {
        int cap = p->blocks_cap ? p->blocks_cap * 2 : 256;
        pool_block *nb = realloc(p->blocks, (size_t)cap * sizeof *nb);
        if (!nb) return ODL_ERR(ODL_E_NOMEM, "pool bookkeeping");
        p->blocks = nb;
        p->blocks_cap = cap;
    }
    memmove(p->blocks + at + 1, p->blocks + at, (size_t)(p->nblocks - at) * sizeof *p->blocks);
    p->blocks[at] = b;
    p->nblocks++;
    return ODL_OK;
}

static void pool_remove(cuda_pool *p, int at) {
    memmove(p->blocks + at, p->blocks + at + 1, (size_t)(p->nblocks - at - 1) * sizeof *p->blocks);
    p->nblocks--;
}

/* Add [base, base + cap) from cudaMalloc as a new arena: one free block at its place in address order. */
static odl_status pool_add_arena(cuda_pool *p, char *base, size_t cap) {
    if (p->narenas == p->arenas_cap) {
        int ncap = p->arenas_cap ? p->arenas_cap * 2 : 16;
        pool_arena *na = realloc(p->arenas, (size_t)ncap * sizeof *na);
        if (!na) return ODL_ERR(ODL_E_NOMEM, "pool bookkeeping");
        p->arenas = na;
        p->arenas_cap = ncap;
    }
    int at = 0;
    while (at < p->nblocks && p->blocks[at].ptr < base) at++;
    pool_block all = {base, cap, 0, p->narenas};
    ODL_CHECK(pool_insert(p, at, all));
    p->arenas[p->narenas++] = (pool_arena){base, cap};
    p->st.reserved += cap;
    return ODL_OK;
}

static double g_fraction = ODL_CUDA_DEFAULT_FRACTION; /* the last fraction a caller gave */

odl_status odl_cuda_init(int index, double fraction) {
    if (index < 0 || index >= ODL_MAX_CUDA_DEVICES || index >= odl_cuda_device_count())
        return ODL_ERR(ODL_E_NODEV, "CUDA device %d not present (%d visible)", index, odl_cuda_device_count());
    if (fraction != 0 && fraction != ODL_CUDA_POOL_GROW && !(fraction > 0 && fraction <= 1))
        return ODL_ERR(ODL_E_INVAL, "memory.preallocate_fraction %g outside (0, 1] (0 in the config: grow on demand)",
                       fraction);
    pthread_mutex_lock(&g_init_mu);
    if (fraction != 0) g_fraction = fraction;
    else fraction = g_fraction;
    pthread_mutex_unlock(&g_init_mu);
    CUDA_TRY(cudaSetDevice(index));
    t_device = index;
    pthread_mutex_lock(&g_init_mu);
    cuda_pool *p = &g_pools[index];
    odl_status st = ODL_OK;
    if (!p->ready) {
        cudaError_t e = cudaStreamCreateWithFlags(&p->default_stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            st = ODL_ERR(ODL_E_CUDA, "cudaStreamCreate on cuda:%d: %s", index, cudaGetErrorString(e));
            goto out;
        }
        pthread_mutex_init(&p->mu, NULL);
        p->nblocks = p->narenas = 0;
        memset(&p->st, 0, sizeof p->st);
        p->grow = fraction == ODL_CUDA_POOL_GROW;
        if (!p->grow) {
            size_t free_b = 0, total_b = 0;
            e = cudaMemGetInfo(&free_b, &total_b);
            /* several GPU processes sharing one device (a sanitizer's parallel runs) each take a part */
            double most = (double)odl_env_int(ODL_ENV_CUDA_POOL_PERCENT_MAX) / 100;
            if (fraction > most) fraction = most;
            size_t cap = (size_t)((double)free_b * fraction) / ODL_POOL_ALIGN * ODL_POOL_ALIGN;
            void *base = NULL;
            if (e != cudaSuccess)
                st = ODL_ERR(ODL_E_CUDA, "cudaMemGetInfo on device %d: %s", index, cudaGetErrorString(e));
            else if ((e = cudaMalloc(&base, cap)) != cudaSuccess)
                st = ODL_ERR(ODL_E_NOMEM, "pre-allocating %zu bytes (%.0f%% of %zu free) on cuda:%d: %s", cap,
                             fraction * 100, free_b, index, cudaGetErrorString(e));
            else if ((st = pool_add_arena(p, base, cap)) != ODL_OK)
                cudaFree(base);
            if (st != ODL_OK) {
                cudaGetLastError();
                cudaStreamDestroy(p->default_stream);
                pthread_mutex_destroy(&p->mu);
                free(p->blocks);
                free(p->arenas);
                memset(p, 0, sizeof *p);
                goto out;
            }
        }
        p->ready = 1;
    }
out:
    pthread_mutex_unlock(&g_init_mu);
    return st;
}

/* Teardown hooks (core/device_internal.h). */
#define ODL_MAX_RELEASE_HOOKS 8
static odl_device_release_fn g_release[ODL_MAX_RELEASE_HOOKS];
static int g_nrelease;

odl_status odl_device_at_shutdown(odl_device_release_fn fn) {
    pthread_mutex_lock(&g_init_mu);
    odl_status st = ODL_OK;
    int known = 0;
    for (int i = 0; i < g_nrelease; i++) known |= g_release[i] == fn;
    if (!known && g_nrelease == ODL_MAX_RELEASE_HOOKS)
        st = ODL_ERR(ODL_E_NOMEM, "more than %d device release hooks", ODL_MAX_RELEASE_HOOKS);
    else if (!known)
        g_release[g_nrelease++] = fn;
    pthread_mutex_unlock(&g_init_mu);
    return st;
}

odl_status odl_cuda_shutdown(void) {
    pthread_mutex_lock(&g_init_mu);
    int n = g_nrelease;
    odl_device_release_fn hooks[ODL_MAX_RELEASE_HOOKS];
    memcpy(hooks, g_release, sizeof hooks);
    g_nrelease = 0;
    pthread_mutex_unlock(&g_init_mu);
    for (int i = n - 1; i >= 0; i--) hooks[i]();

    pthread_mutex_lock(&g_init_mu);
    /* Live allocations: report them and keep every pool (freeing memory in use would leave dangling
     * tensors). */
    for (int i = 0; i < ODL_MAX_CUDA_DEVICES; i++) {
        cuda_pool *p = &g_pools[i];
        if (!p->ready) continue;
        pthread_mutex_lock(&p->mu);
        int live = 0;
        for (int b = 0; b < p->nblocks; b++) live += p->blocks[b].used;
        size_t bytes = p->st.in_use;
        pthread_mutex_unlock(&p->mu);
        if (live) {
            pthread_mutex_unlock(&g_init_mu);
            return ODL_ERR(ODL_E_BUSY, "odl_cuda_shutdown: cuda:%d still has %d allocation(s) of %zu bytes in use; "
                           "free every tensor first (the pools are kept)", i, live, bytes);
        }
    }
    for (int i = 0; i < ODL_MAX_CUDA_DEVICES; i++) {
        cuda_pool *p = &g_pools[i];
        if (!p->ready) continue;
        cudaSetDevice(i);
        cudaDeviceSynchronize();
        cudaStreamDestroy(p->default_stream);
        for (int a = 0; a < p->narenas; a++) cudaFree(p->arenas[a].base);
        free(p->arenas);
        free(p->blocks);
        pthread_mutex_destroy(&p->mu);
        memset(p, 0, sizeof *p);
    }
    pthread_mutex_unlock(&g_init_mu);
    return ODL_OK;
}

static odl_status pool_for(odl_device dev, cuda_pool **out) {
    if (dev.index < 0 || dev.index >= ODL_MAX_CUDA_DEVICES)
        return ODL_ERR(ODL_E_NODEV, "CUDA device %d out of range", dev.index);
    cuda_pool *p = &g_pools[dev.index];
    if (!p->ready) ODL_CHECK(odl_cuda_init(dev.index, 0)); /* the program's fraction, else the default */
    *out = p;
    return ODL_OK;
}

static int best_fit(const cuda_pool *p, size_t need) {
    int best = -1;
    for (int i = 0; i < p->nblocks; i++)
        if (!p->blocks[i].used && p->blocks[i].size >= need && (best < 0 || p->blocks[i].size < p->blocks[best].size))
            best = i;
    return best;
}

/* Grow mode: a new arena of at least `need` bytes (ODL_POOL_GROW_MIN at least, whole ODL_POOL_GROW_STEP
 * units, so that small tensors share arenas and the driver is asked rarely). p->mu held. */
#define ODL_POOL_GROW_STEP ((size_t)2 << 20)
#define ODL_POOL_GROW_MIN ((size_t)32 << 20)
static odl_status pool_grow(cuda_pool *p, int dev, size_t need) {
    size_t cap = (need + ODL_POOL_GROW_STEP - 1) / ODL_POOL_GROW_STEP * ODL_POOL_GROW_STEP;
    if (cap < ODL_POOL_GROW_MIN) cap = ODL_POOL_GROW_MIN;
    /* cudaMalloc would end a graph capture on this thread's stream with an error of its own */
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaStream_t cur = t_stream_set ? t_stream : p->default_stream;
    if (cudaStreamIsCapturing(cur, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone)
        return ODL_ERR(ODL_E_UNSUPPORTED, "CUDA pool of cuda:%d must take %zu more bytes from the driver while the "
                       "stream is captured into a graph (cudaMalloc is not allowed there)", dev, cap);
    void *base = NULL;
    cudaError_t e = cudaMalloc(&base, cap);
    if (e != cudaSuccess && cap > need) {
        cudaGetLastError();
        cap = (need + ODL_POOL_ALIGN - 1) / ODL_POOL_ALIGN * ODL_POOL_ALIGN;
        e = cudaMalloc(&base, cap);
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ODL_ERR(ODL_E_NOMEM, "CUDA pool of cuda:%d (growing on demand, %zu bytes taken) cannot take %zu more "
                       "bytes from the driver: %s", dev, p->st.reserved, cap, cudaGetErrorString(e));
    }
    odl_status s = pool_add_arena(p, base, cap);
    if (s != ODL_OK) cudaFree(base);
    return s;
}

static odl_status pool_alloc(odl_device dev, size_t nbytes, void **out) {
    cuda_pool *p = NULL;
    ODL_CHECK(pool_for(dev, &p));
    size_t need = (nbytes + ODL_POOL_ALIGN - 1) / ODL_POOL_ALIGN * ODL_POOL_ALIGN;
    if (need == 0) need = ODL_POOL_ALIGN;
    pthread_mutex_lock(&p->mu);
    int best = best_fit(p, need);
    if (best < 0 && p->grow) {
        odl_status g = pool_grow(p, dev.index, need);
        if (g != ODL_OK) {
            pthread_mutex_unlock(&p->mu);
            return g;
        }
        best = best_fit(p, need);
    }
    if (best < 0) {
        odl_pool_stats st = p->st;
        pthread_mutex_unlock(&p->mu);
        return ODL_ERR(ODL_E_NOMEM,
                       "CUDA pool of cuda:%d cannot serve %zu bytes (in use %zu of %zu reserved, peak %zu); "
                       "raise memory.preallocate_fraction (0: grow on demand) or lower the batch size",
                       dev.index, nbytes, st.in_use, st.reserved, st.peak);
    }
    odl_status s = ODL_OK;
    pool_block *b = &p->blocks[best];
    if (b->size > need) {
        pool_block rest = {b->ptr + need, b->size - need, 0, b->arena};
        b->size = need;
        s = pool_insert(p, best + 1, rest);
    }
    if (s == ODL_OK) {
        p->blocks[best].used = 1;
        p->st.in_use += need;
        if (p->st.in_use > p->st.peak) p->st.peak = p->st.in_use;
        p->st.n_allocs++;
        *out = p->blocks[best].ptr;
    }
    pthread_mutex_unlock(&p->mu);
    return s;
}

static void pool_free(odl_device dev, void *ptr) {
    if (dev.index < 0 || dev.index >= ODL_MAX_CUDA_DEVICES) return;
    cuda_pool *p = &g_pools[dev.index];
    if (!p->ready) return;
    pthread_mutex_lock(&p->mu);
    int lo = 0, hi = p->nblocks - 1, at = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (p->blocks[mid].ptr == (char *)ptr) { at = mid; break; }
        if (p->blocks[mid].ptr < (char *)ptr) lo = mid + 1; else hi = mid - 1;
    }
    if (at >= 0 && p->blocks[at].used) {
        p->blocks[at].used = 0;
        p->st.in_use -= p->blocks[at].size;
        if (at + 1 < p->nblocks && !p->blocks[at + 1].used && p->blocks[at + 1].arena == p->blocks[at].arena) {
            p->blocks[at].size += p->blocks[at + 1].size;
            pool_remove(p, at + 1);
        }
        if (at > 0 && !p->blocks[at - 1].used && p->blocks[at - 1].arena == p->blocks[at].arena) {
            p->blocks[at - 1].size += p->blocks[at].size;
            pool_remove(p, at);
        }
    }
    pthread_mutex_unlock(&p->mu);
}

odl_status odl_pool_get_stats(odl_device dev, odl_pool_stats *out) {
    if (dev.type != ODL_DEV_CUDA) return ODL_ERR(ODL_E_INVAL, "pool statistics exist for CUDA devices only");
    cuda_pool *p = NULL;
    ODL_CHECK(pool_for(dev, &p));
    pthread_mutex_lock(&p->mu);
    *out = p->st;
    pthread_mutex_unlock(&p->mu);
    return ODL_OK;
}

odl_status odl_mem_alloc(odl_device dev, size_t nbytes, void **out) {
    if (!out) return ODL_ERR(ODL_E_INVAL, "odl_mem_alloc: NULL out");
    if (dev.type == ODL_DEV_CPU) return host_alloc(nbytes, out);
    return pool_alloc(dev, nbytes, out);
}

void odl_mem_free(odl_device dev, void *p) {
    if (!p) return;
    if (dev.type == ODL_DEV_CPU) free(p);
    else pool_free(dev, p);
}

odl_status odl_host_alloc_pinned(size_t nbytes, void **out) {
    if (odl_cuda_device_count() == 0) return host_alloc(nbytes, out);
    CUDA_TRY(cudaMallocHost(out, nbytes ? nbytes : 1));
    return ODL_OK;
}

void odl_host_free_pinned(void *p) {
    if (!p) return;
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeHost) cudaFreeHost(p);
    else {
        cudaGetLastError();
        free(p);
    }
}

odl_status odl_stream_create(odl_stream *out) {
    cudaStream_t s;
    CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *out = (odl_stream)s;
    return ODL_OK;
}
void odl_stream_destroy(odl_stream s) { if (s) cudaStreamDestroy((cudaStream_t)s); }
void odl_stream_set_current(odl_stream s) { t_stream = (cudaStream_t)s; t_stream_set = s != NULL; }
odl_stream odl_stream_current(void) {
    if (t_stream_set) return (odl_stream)t_stream;
    int d = t_device;
    if (d < 0) {
        if (cudaGetDevice(&d) != cudaSuccess) { cudaGetLastError(); return NULL; }
    }
    if (d >= 0 && d < ODL_MAX_CUDA_DEVICES && g_pools[d].ready) return (odl_stream)g_pools[d].default_stream;
    return NULL;
}
odl_status odl_stream_synchronize(odl_stream s) {
    if (odl_cuda_device_count() == 0) return ODL_OK;
    CUDA_TRY(cudaStreamSynchronize((cudaStream_t)s));
    return ODL_OK;
}
odl_status odl_event_create(odl_event *out) {
    cudaEvent_t e;
    CUDA_TRY(cudaEventCreate(&e));
    *out = (odl_event)e;
    return ODL_OK;
}
void odl_event_destroy(odl_event e) { if (e) cudaEventDestroy((cudaEvent_t)e); }
odl_status odl_event_record(odl_event e, odl_stream s) { CUDA_TRY(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s)); return ODL_OK; }
odl_status odl_stream_wait_event(odl_stream s, odl_event e) { CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0)); return ODL_OK; }
odl_status odl_event_synchronize(odl_event e) { CUDA_TRY(cudaEventSynchronize((cudaEvent_t)e)); return ODL_OK; }
odl_status odl_event_elapsed_ms(odl_event a, odl_event b, float *ms) {
    CUDA_TRY(cudaEventElapsedTime(ms, (cudaEvent_t)a, (cudaEvent_t)b));
    return ODL_OK;
}

odl_status odl_memcpy_async(void *dst, odl_device dst_dev, const void *src, odl_device src_dev, size_t nbytes,
                            odl_stream s) {
    if (nbytes == 0) return ODL_OK;
    if (dst_dev.type == ODL_DEV_CPU && src_dev.type == ODL_DEV_CPU) {
        memcpy(dst, src, nbytes);
        return ODL_OK;
    }
    enum cudaMemcpyKind kind = dst_dev.type == ODL_DEV_CPU ? cudaMemcpyDeviceToHost
                               : src_dev.type == ODL_DEV_CPU ? cudaMemcpyHostToDevice
                                                             : cudaMemcpyDeviceToDevice;
    CUDA_TRY(cudaMemcpyAsync(dst, src, nbytes, kind, (cudaStream_t)s));
    return ODL_OK;
}

odl_status odl_memcpy2d_async(void *dst, size_t dpitch, odl_device dst_dev, const void *src, size_t spitch,
                              odl_device src_dev, size_t width, size_t rows, odl_stream s) {
    ODL_CHECK(check_2d(width, dpitch, spitch));
    if (width == 0 || rows == 0) return ODL_OK;
    if (dst_dev.type == ODL_DEV_CPU && src_dev.type == ODL_DEV_CPU) {
        copy_rows_host(dst, dpitch, src, spitch, width, rows);
        return ODL_OK;
    }
    enum cudaMemcpyKind kind = dst_dev.type == ODL_DEV_CPU ? cudaMemcpyDeviceToHost
                               : src_dev.type == ODL_DEV_CPU ? cudaMemcpyHostToDevice
                                                             : cudaMemcpyDeviceToDevice;
    CUDA_TRY(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, (cudaStream_t)s));
    return ODL_OK;
}

odl_status odl_device_synchronize(odl_device dev) {
    if (dev.type == ODL_DEV_CPU) return ODL_OK;
    CUDA_TRY(cudaSetDevice(dev.index));
    CUDA_TRY(cudaDeviceSynchronize());
    return ODL_OK;
}

#else /* ------------------------------------------------------------------ CPU-only build */

int odl_cuda_device_count(void) { return 0; }
odl_status odl_cuda_pci_bus_id(int index, char *buf, size_t cap) {
    (void)buf; (void)cap;
    return ODL_ERR(ODL_E_NODEV, "CUDA device %d requested, but this build has no CUDA backend", index);
}
odl_status odl_cuda_init(int index, double fraction) {
    (void)fraction;
    return ODL_ERR(ODL_E_NODEV, "CUDA device %d requested, but this build has no CUDA backend", index);
}
odl_status odl_cuda_shutdown(void) { return ODL_OK; }
odl_status odl_device_at_shutdown(odl_device_release_fn fn) {
    (void)fn;
    return ODL_OK;
}
odl_status odl_pool_get_stats(odl_device dev, odl_pool_stats *out) {
    (void)dev; (void)out;
    return ODL_ERR(ODL_E_NODEV, "this build has no CUDA backend");
}
odl_status odl_mem_alloc(odl_device dev, size_t nbytes, void **out) {
    if (!out) return ODL_ERR(ODL_E_INVAL, "odl_mem_alloc: NULL out");
    if (dev.type != ODL_DEV_CPU) return ODL_ERR(ODL_E_NODEV, "%s: this build has no CUDA backend", odl_device_name(dev));
    return host_alloc(nbytes, out);
}
void odl_mem_free(odl_device dev, void *p) { (void)dev; free(p); }
odl_status odl_host_alloc_pinned(size_t nbytes, void **out) { return host_alloc(nbytes, out); }
void odl_host_free_pinned(void *p) { free(p); }
odl_status odl_stream_create(odl_stream *out) { *out = NULL; return ODL_OK; }
void odl_stream_destroy(odl_stream s) { (void)s; }
void odl_stream_set_current(odl_stream s) { (void)s; }
odl_stream odl_stream_current(void) { return NULL; }
odl_status odl_stream_synchronize(odl_stream s) { (void)s; return ODL_OK; }
odl_status odl_event_create(odl_event *out) { *out = NULL; return ODL_OK; }
void odl_event_destroy(odl_event e) { (void)e; }
odl_status odl_event_record(odl_event e, odl_stream s) { (void)e; (void)s; return ODL_OK; }
odl_status odl_stream_wait_event(odl_stream s, odl_event e) { (void)s; (void)e; return ODL_OK; }
odl_status odl_event_synchronize(odl_event e) { (void)e; return ODL_OK; }
odl_status odl_event_elapsed_ms(odl_event a, odl_event b, float *ms) {
    (void)a; (void)b; *ms = 0;
    return ODL_ERR(ODL_E_UNSUPPORTED, "events need the CUDA backend");
}
odl_status odl_memcpy_async(void *dst, odl_device dst_dev, const void *src, odl_device src_dev, size_t nbytes,
                            odl_stream s) {
    (void)s;
    if (dst_dev.type != ODL_DEV_CPU || src_dev.type != ODL_DEV_CPU)
        return ODL_ERR(ODL_E_NODEV, "copy to or from a CUDA device in a CPU-only build");
    if (nbytes) memcpy(dst, src, nbytes);
    return ODL_OK;
}
odl_status odl_memcpy2d_async(void *dst, size_t dpitch, odl_device dst_dev, const void *src, size_t spitch,
                              odl_device src_dev, size_t width, size_t rows, odl_stream s) {
    (void)s;
    ODL_CHECK(check_2d(width, dpitch, spitch));
    if (dst_dev.type != ODL_DEV_CPU || src_dev.type != ODL_DEV_CPU)
        return ODL_ERR(ODL_E_NODEV, "copy to or from a CUDA device in a CPU-only build");
    if (width && rows) copy_rows_host(dst, dpitch, src, spitch, width, rows);
    return ODL_OK;
}
odl_status odl_device_synchronize(odl_device dev) { (void)dev; return ODL_OK; }
#endif
