/* The health monitor thread: follows the kernel log (and NVML's Xid events), classifies what it
 * finds for this rank's GPU, queues the findings, and reads telemetry every telemetry_ms. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/clock.h"
#include "odl/health.h"

#define QUEUE_CAP 64
#define INJECT_CAP 8
#define LINE_CAP 1024
#define POLL_MS 100

struct odl_health_monitor {
    /* What the thread needs of the options, owned here: the caller's strings and table may be gone
     * once odl_health_monitor_start returns (worker/health_monitor.c passes a stack buffer). */
    odl_pci_id pci; /* this rank's GPU, parsed at start; not valid on the CPU */
    int telemetry_ms;
    void (*on_finding)(void *ctx, const odl_health_finding *f);
    void *ctx;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    odl_kmsg_reader *kmsg;
    odl_nvml *nvml;
    odl_nvml_events *events;
    int nvml_index;
    char nvml_error[256];
    int reported_unhealthy; /* monitor thread only */
    odl_xid_classifier cls;
    /* guarded by mu */
    odl_health_finding queue[QUEUE_CAP];
    int q_head, q_len;
    char inject[INJECT_CAP][LINE_CAP];
    int n_inject;
    odl_gpu_telemetry tel;
    int have_tel;
    double util_sum, peak_mem;
    int util_n;
};

static void push(odl_health_monitor *m, const odl_xid_record *rec) {
    odl_health_finding f;
    if (!odl_xid_classify(&m->cls, rec, &f)) return; /* classifier state: monitor thread only */
    pthread_mutex_lock(&m->mu);
    if (m->q_len == QUEUE_CAP) { /* keep the newest; the oldest were reported to whoever polls late */
        m->q_head = (m->q_head + 1) % QUEUE_CAP;
        m->q_len--;
    }
    m->queue[(m->q_head + m->q_len) % QUEUE_CAP] = f;
    m->q_len++;
    pthread_mutex_unlock(&m->mu);
    if (m->on_finding) m->on_finding(m->ctx, &f);
}

static void handle_line(odl_health_monitor *m, const char *line) {
    odl_xid_record rec;
    if (odl_xid_parse_line(line, &rec)) push(m, &rec);
}

/* An NVML error other than a time-out or "not supported": the GPU is unhealthy, reported as a node-fatal
 * bus_lost finding of its own (as a lost GPU would be; odl_health gpu exits 2 for it too). */
static void push_unhealthy(odl_health_monitor *m, const char *why) {
    odl_xid_record lost;
    memset(&lost, 0, sizeof lost);
    lost.xid = ODL_XID_BUS_LOST;
    lost.gpu_instance = lost.compute_instance = lost.pid = -1;
    lost.ts_us = odl_kmsg_now_us();
    lost.pci = m->pci;
    snprintf(lost.text, sizeof lost.text, "%.150s", why);
    snprintf(m->nvml_error, sizeof m->nvml_error, "%s", lost.text);
    push(m, &lost);
}

static void read_telemetry(odl_health_monitor *m) {
    odl_gpu_telemetry t;
    if (odl_nvml_read(m->nvml, m->nvml_index, &t) != ODL_OK) return;
    pthread_mutex_lock(&m->mu);
    m->tel = t;
    m->have_tel = 1;
    if (t.util_gpu_pct >= 0) m->util_sum += t.util_gpu_pct, m->util_n++;
    if (t.mem_used_mib > m->peak_mem) m->peak_mem = t.mem_used_mib;
    pthread_mutex_unlock(&m->mu);
    if (!t.healthy && !m->reported_unhealthy) { /* once: the readings go on, the finding is not repeated */
        m->reported_unhealthy = 1;
        char why[300];
        snprintf(why, sizeof why, "NVML reading failed: %.200s: the GPU is treated as unhealthy", t.error);
        push_unhealthy(m, why);
    }
}

static void *run(void *arg) {
    odl_health_monitor *m = arg;
    char line[LINE_CAP];
    int64_t next_tel = 0;
    for (;;) {
        pthread_mutex_lock(&m->mu);
        int stop = m->stop;
        int n_inj = m->n_inject;
        char inj[INJECT_CAP][LINE_CAP];
        memcpy(inj, m->inject, (size_t)n_inj * LINE_CAP);
        m->n_inject = 0;
        pthread_mutex_unlock(&m->mu);
        if (stop) break;
        for (int i = 0; i < n_inj; i++) handle_line(m, inj[i]);
        if (m->kmsg) {
            int r;
            while ((r = odl_kmsg_read_line(m->kmsg, line, sizeof line)) == 1) handle_line(m, line);
        }
        if (m->nvml && odl_kmsg_now_us() >= next_tel) {
            read_telemetry(m);
            next_tel = odl_kmsg_now_us() + (int64_t)m->telemetry_ms * 1000;
        }
        if (m->events) {
            odl_xid_record rec;
            int r = odl_nvml_events_wait(m->events, POLL_MS, &rec);
            if (r == 1) {
                push(m, &rec);
            } else if (r < 0) {
                /* An NVML error other than a time-out: the GPU is unhealthy, the event set is given up. */
                odl_nvml_events_close(m->events);
                m->events = NULL;
                m->reported_unhealthy = 1;
                push_unhealthy(m, odl_error_msg());
            }
            continue;
        }
        const struct timespec ts = odl_mono_deadline(POLL_MS);
        pthread_mutex_lock(&m->mu);
        if (!m->stop && !m->n_inject) pthread_cond_timedwait(&m->cv, &m->mu, &ts);
        pthread_mutex_unlock(&m->mu);
    }
    return NULL;
}

odl_status odl_health_monitor_start(const odl_health_monitor_opts *o, odl_health_monitor **out) {
    *out = NULL;
    odl_health_monitor *m = calloc(1, sizeof *m);
    if (!m) return ODL_ERR(ODL_E_NOMEM, "health monitor");
    m->telemetry_ms = o->telemetry_ms > 0 ? o->telemetry_ms : ODL_HEALTH_TELEMETRY_MS_DEFAULT;
    m->on_finding = o->on_finding;
    m->ctx = o->ctx;
    odl_xid_classifier_init(&m->cls, o->table); /* copies the table */
    m->cls.since_us = o->since_us;
    m->cls.only_gi = o->mig_gpu_instance;
    odl_status s = ODL_OK;
    if (o->pci_bus_id) ODL_CHECK_GOTO(odl_pci_parse(o->pci_bus_id, &m->pci), s, fail);
    m->cls.only = m->pci;
    if (o->kmsg_path) ODL_CHECK_GOTO(odl_kmsg_open(o->kmsg_path, 1, &m->kmsg), s, fail);
    if (o->use_nvml && o->pci_bus_id) {
        if (odl_nvml_open(&m->nvml) != ODL_OK || odl_nvml_find(m->nvml, o->pci_bus_id, &m->nvml_index) != ODL_OK) {
            snprintf(m->nvml_error, sizeof m->nvml_error, "%s", odl_error_msg());
            odl_nvml_close(m->nvml);
            m->nvml = NULL;
        } else if (odl_nvml_events_open(m->nvml, &m->nvml_index, 1, &m->events) != ODL_OK) {
            /* Telemetry without events is still worth having (e.g. events unsupported in a container). */
            snprintf(m->nvml_error, sizeof m->nvml_error, "%s", odl_error_msg());
        }
    } else if (o->use_nvml) {
        snprintf(m->nvml_error, sizeof m->nvml_error, "no GPU given to the monitor");
    }
    m->peak_mem = ODL_HEALTH_NA;
    pthread_mutex_init(&m->mu, NULL);
    odl_cond_init_mono(&m->cv);
    int e = pthread_create(&m->thread, NULL, run, m);
    if (e) {
        s = ODL_ERR(ODL_E_NOMEM, "pthread_create (health monitor): %s", strerror(e));
        pthread_mutex_destroy(&m->mu);
        pthread_cond_destroy(&m->cv);
        goto fail;
    }
    *out = m;
    return ODL_OK;
fail:
    odl_nvml_events_close(m->events);
    odl_nvml_close(m->nvml);
    odl_kmsg_close(m->kmsg);
    free(m);
    return s;
}

void odl_health_monitor_stop(odl_health_monitor *m) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
    odl_nvml_events_close(m->events);
    odl_nvml_close(m->nvml);
    odl_kmsg_close(m->kmsg);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    free(m);
}

int odl_health_monitor_poll(odl_health_monitor *m, odl_health_finding *out, int cap) {
    pthread_mutex_lock(&m->mu);
    int n = 0;
    while (n < cap && m->q_len) {
        out[n++] = m->queue[m->q_head];
        m->q_head = (m->q_head + 1) % QUEUE_CAP;
        m->q_len--;
    }
    pthread_mutex_unlock(&m->mu);
    return n;
}

void odl_health_monitor_inject(odl_health_monitor *m, const char *line) {
    pthread_mutex_lock(&m->mu);
    if (m->n_inject < INJECT_CAP) {
        snprintf(m->inject[m->n_inject], LINE_CAP, "%s", line);
        m->n_inject++;
    }
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

int odl_health_monitor_telemetry(odl_health_monitor *m, odl_gpu_telemetry *out) {
    pthread_mutex_lock(&m->mu);
    int have = m->have_tel;
    if (have) *out = m->tel;
    pthread_mutex_unlock(&m->mu);
    return have;
}

void odl_health_monitor_window(odl_health_monitor *m, int reset, double *mean_util, double *peak_mem) {
    pthread_mutex_lock(&m->mu);
    *mean_util = m->util_n ? m->util_sum / m->util_n : ODL_HEALTH_NA;
    *peak_mem = m->peak_mem;
    if (reset) {
        m->util_sum = 0;
        m->util_n = 0;
        m->peak_mem = ODL_HEALTH_NA;
    }
    pthread_mutex_unlock(&m->mu);
}

const char *odl_health_monitor_nvml_error(odl_health_monitor *m) { return m->nvml_error; }
