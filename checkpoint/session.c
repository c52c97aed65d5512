/* Checkpoints of a training run (odl/ckpt_session.h, docs/checkpoints.md, docs/checkpoint_format.md).
 *
 * Saving: odl_ckpt_session_save copies every parameter and optimiser state tensor into a host buffer
 * (for CUDA: one asynchronous copy per tensor on the current stream, then one synchronisation) and
 * queues the copy; a writer thread writes DIR/ckpt-<step>.h5 through odl/h5io (temporary file, fsync,
 * rename, directory fsync), then commits it with odl_ckpt_commit (DIR/manifest.json the same way, then
 * deletes checkpoints beyond the newest `keep`) unless the options say commit_elsewhere (a worker under
 * odl_coordinator: the coordinator commits after the write observer has reported). Two host buffers:
 * the loop fills one while the thread writes the other; when both are busy the loop waits (counted in
 * the stall that is logged). Only rank 0 writes (parameters are replicated); the other ranks' save is
 * a no-op.
 *
 * A failed write (disk full, I/O error) is kept; the next odl_ckpt_session_save (with one rank: the
 * next step, since odl_ckpt_session_due then says yes) and odl_ckpt_session_finish return it, so
 * training stops with the error. The failed file's temporary is removed; earlier checkpoints and the
 * manifest are untouched.
 *
 * Resuming: every rank reads the same file. "auto" tries the directory's ckpt-<step>.h5 files newest
 * first and takes the first that is whole (every checksum verifies); a damaged one is skipped with a
 * warning naming it. A checkpoint that does not fit the run (another model's tensors, another
 * optimiser, another seed or epoch size) is an error, never skipped. Nothing of the network, the
 * optimiser or the state is changed until the whole file has been read and checked.
 */
#include "odl/clock.h"
#include "odl/ckpt_session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "odl/ckpt.h"
#include "odl/config.h"
#include "odl/device.h"
#include "odl/file.h"
#include "odl/h5io.h"
#include "odl/log.h"
#include "odl/parse.h"

#define MAX_RECS (ODL_MAX_PARAMS * 3)
#define NJOBS 2
#define CONFIG_TEXT_MAX (1 << 20) /* the stored config attribute, at most */

/* One tensor of a job: where it goes in the file and where its bytes are in the job's buffer. */
typedef struct rec {
    char dset[ODL_CKPT_DSET_MAX];
    int ndim;
    int64_t shape[ODL_MAX_DIMS];
    size_t off, nbytes;
} rec;

enum { JOB_FREE = 0, JOB_QUEUED, JOB_WRITING };

typedef struct job {
    int state;
    int64_t seq;
    odl_train_state st;
    odl_optim opt_hyper; /* type, hyper-parameters and step; its state tensors are not used */
    int n_recs;
    rec recs[MAX_RECS];
    unsigned char *buf;
    size_t cap, used;
} job;

struct odl_ckpt_session {
    int rank, world;
    int writes; /* rank 0 with checkpoint.every > 0 */
    int commit_elsewhere; /* odl_ckpt_session_opts.commit_elsewhere */
    int64_t every, keep;
    char dir[PATH_MAX];
    char resume[PATH_MAX];
    char model[64];
    int64_t seed, max_train_samples, batch;
    int optimizer;
    char *yaml; /* effective config, written into every checkpoint */
    odl_ckpt_before_commit_fn before_commit;
    void *before_commit_ctx;
    odl_ckpt_write_observer observer; /* odl_ckpt_session_opts.observer: set before the writer starts */
    void *observer_ctx;

    pthread_t thread;
    int thread_started, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job jobs[NJOBS];
    int64_t next_seq;
    atomic_int failed;
    odl_status err;
    char err_msg[2048];

    /* statistics */
    int n_saved, n_written;
    double stall_sum, stall_max, write_sum;
};

/* Put a saved message back as the thread's error, unchanged. */
static odl_status restore_error(odl_status code, const char *msg) {
    odl_error_clear();
    odl_error_prefix("%s", msg);
    return code;
}

static void path_in_dir(const odl_ckpt_session *s, const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", s->dir, name);
}

/* ---------------------------------------------------------------------------------------------- */
/* Writing (on the writer thread)                                                                   */

static odl_status write_job(odl_ckpt_session *s, const job *j, size_t *bytes_out) {
    char name[64], path[PATH_MAX + 64];
    odl_ckpt_file_name(j->st.step, name, sizeof name);
    path_in_dir(s, name, path, sizeof path);
    odl_h5_writer *w = NULL;
    odl_status st = ODL_OK;
    {
        /* A disk that is already too full fails here, before HDF5 writes anything: HDF5 cannot close a
         * file whose writes failed, and its exit handler then crashes (see docs/checkpoints.md). */
        struct statvfs vfs;
        uint64_t need = (uint64_t)j->used + j->used / 16 + (256u << 10);
        if (statvfs(s->dir, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < need)
            return ODL_ERR(ODL_E_IO, "%.1f MB free in %s, the checkpoint needs about %.1f MB: %s",
                           (double)vfs.f_bavail * vfs.f_frsize / 1e6, s->dir, need / 1e6, strerror(ENOSPC));
    }
    ODL_CHECK(odl_h5_writer_open(path, &w));
    ODL_CHECK_GOTO(odl_ckpt_write_root(w, ODL_CKPT_FORMAT, s->model, s->world, s->yaml), st, fail);
    for (int i = 0; i < j->n_recs; i++) {
        const rec *r = &j->recs[i];
        ODL_CHECK_GOTO(odl_h5_writer_write(w, r->dset, ODL_F32, r->ndim, r->shape, j->buf + r->off), st, fail);
    }
    const odl_optim *o = &j->opt_hyper;
    ODL_CHECK_GOTO(odl_h5_writer_attr_str(w, "/optim", "type", odl_ckpt_optim_name((int)o->type)), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_i64(w, "/optim", "step", o->step), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_f64(w, "/optim", "lr", o->lr), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_f64(w, "/optim", "momentum", o->momentum), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_f64(w, "/optim", "dampening", o->dampening), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_i64(w, "/optim", "nesterov", o->nesterov), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_f64(w, "/optim", "weight_decay", o->weight_decay), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_f64(w, "/optim", "rho", o->rho), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_f64(w, "/optim", "eps", o->eps), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_f64(w, "/optim", "beta1", o->beta1), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_f64(w, "/optim", "beta2", o->beta2), st, fail);

    const odl_train_state *t = &j->st;
    int64_t counters[ODL_CKPT_NCOUNTERS] = {t->step, t->epoch, t->cursor, t->epoch_samples, s->seed, s->world, o->step};
    int64_t cshape[1] = {ODL_CKPT_NCOUNTERS};
    ODL_CHECK_GOTO(odl_h5_writer_write(w, "/train/counters", ODL_I64, 1, cshape, counters), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_write(w, "/train/epoch_loss_sum", ODL_F64, 0, NULL, &t->epoch_loss_sum), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_i64(w, "/train", "step", t->step), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_i64(w, "/train", "epoch", t->epoch), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_i64(w, "/train", "cursor", t->cursor), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_i64(w, "/train", "epoch_samples", t->epoch_samples), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_f64(w, "/train", "epoch_loss_sum", t->epoch_loss_sum), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_i64(w, "/train", "seed", s->seed), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_str(w, "/rng", "generator", "philox4x32-10"), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_i64(w, "/rng", "seed", s->seed), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_i64(w, "/rng", "step", t->step), st, fail);
    char dropout_doc[128];
    snprintf(dropout_doc, sizeof dropout_doc,
             "Philox(seed) at offset (step * world_size + rank) * %d for the step after `step`", ODL_NET_RNG_STRIDE);
    ODL_CHECK_GOTO(odl_h5_writer_attr_str(w, "/rng", "dropout", dropout_doc), st, fail);
    ODL_CHECK_GOTO(odl_h5_writer_attr_str(w, "/rng", "shuffle", "Philox(seed) permutation of epoch `epoch` (odl/sampler.h)"),
                   st, fail);

    if (s->before_commit) ODL_CHECK_GOTO(s->before_commit(s->before_commit_ctx, t->step, path), st, fail);
    *bytes_out = j->used;
    return odl_h5_writer_commit(w);
fail:
    odl_h5_writer_abort(w);
    return st;
}

static void *writer_main(void *arg) {
    odl_ckpt_session *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        job *j = NULL;
        for (int i = 0; i < NJOBS; i++)
            if (s->jobs[i].state == JOB_QUEUED && (!j || s->jobs[i].seq < j->seq)) j = &s->jobs[i];
        if (!j) {
            if (s->stop) break;
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        j->state = JOB_WRITING;
        int skip = atomic_load(&s->failed); /* after a failure nothing more is written */
        pthread_mutex_unlock(&s->mu);

        odl_status st = ODL_OK;
        size_t bytes = 0;
        double t0 = odl_mono_ms();
        char name[64];
        odl_ckpt_file_name(j->st.step, name, sizeof name);
        if (!skip && s->observer) s->observer(s->observer_ctx, 1, &j->st, NULL, 0, 0, ODL_OK, NULL);
        if (!skip) {
            st = write_job(s, j, &bytes);
            /* Supervised: the coordinator commits once the observer has reported the write. */
            if (st == ODL_OK && !s->commit_elsewhere)
                st = odl_ckpt_commit(s->dir, j->st.step, j->st.epoch, j->st.cursor, s->keep, NULL);
            if (st != ODL_OK) odl_error_prefix("checkpoint %s/%s", s->dir, name);
        }
        double ms = odl_mono_ms() - t0;
        if (!skip && s->observer) {
            char path[PATH_MAX + 64];
            path_in_dir(s, name, path, sizeof path);
            s->observer(s->observer_ctx, 0, &j->st, path, bytes, ms, st, st == ODL_OK ? NULL : odl_error_msg());
        }
        if (!skip && st == ODL_OK && s->commit_elsewhere)
            ODL_LOG_INFO("checkpoint %s/%s written: %.1f MB in %.1f ms (reported; the coordinator commits it)", s->dir,
                         name, bytes / 1e6, ms);
        else if (!skip && st == ODL_OK)
            ODL_LOG_INFO("checkpoint %s/%s written: %.1f MB in %.1f ms (manifest updated, keeping %" PRId64 ")", s->dir,
                         name, bytes / 1e6, ms, s->keep);

        pthread_mutex_lock(&s->mu);
        if (!skip && st == ODL_OK) {
            s->n_written++;
            s->write_sum += ms;
        } else if (!skip) {
            ODL_LOG_ERROR("%s; earlier checkpoints are intact; training stops", odl_error_msg_user());
            if (!atomic_load(&s->failed)) {
                s->err = st;
                snprintf(s->err_msg, sizeof s->err_msg, "%s", odl_error_msg_user());
                atomic_store(&s->failed, 1);
            }
        }
        j->state = JOB_FREE;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------- */
/* Start                                                                                            */

/* Create and remove a file in dir: the real test of writability (also for root, read-only mounts and
 * full disks' inode tables). */
static odl_status probe_writable(const char *dir) {
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/.odl-write-probe.%ld", dir, (long)getpid());
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ODL_ERR(ODL_E_IO, "cannot write checkpoints into %s: %s", dir, strerror(errno));
    close(fd);
    unlink(p);
    return ODL_OK;
}

/* Remove temporaries of interrupted writes: ckpt-*.h5.tmp and manifest.json.tmp. */
static void remove_stale_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        int ours = 0;
        if (len > 4 && !strcmp(de->d_name + len - 4, ".tmp")) {
            char base[NAME_MAX + 1];
            snprintf(base, sizeof base, "%.*s", (int)(len - 4), de->d_name);
            ours = odl_ckpt_parse_file_name(base, NULL) || !strcmp(base, ODL_CKPT_MANIFEST);
        }
        if (!ours) continue;
        char p[PATH_MAX + NAME_MAX + 2];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (unlink(p) == 0) ODL_LOG_INFO("removed %s, left by an interrupted checkpoint write", p);
        else ODL_LOG_WARN("could not remove stale %s: %s", p, strerror(errno));
    }
    closedir(d);
}

odl_status odl_ckpt_session_start(odl_ckpt_session **out, const odl_ckpt_session_opts *o, int rank, int world_size) {
    *out = NULL;
    if (!o) return ODL_ERR(ODL_E_INVAL, "odl_ckpt_session_start: no options");
    const char *dir = o->dir ? o->dir : "", *resume = o->resume ? o->resume : "";
    int saving = o->every > 0;
    if (!saving && !resume[0]) return ODL_OK;
    if (saving && !dir[0])
        return ODL_ERR(ODL_E_CONFIG, "checkpoint.every = %" PRId64 " needs checkpoint.dir (--checkpoint-dir DIR)",
                       o->every);
    if (!strcmp(resume, "auto") && !dir[0])
        return ODL_ERR(ODL_E_CONFIG, "checkpoint.resume = auto needs checkpoint.dir (--checkpoint-dir DIR)");
    if (saving || !strcmp(resume, "auto")) {
        struct stat sb;
        if (stat(dir, &sb) != 0) {
            int e = errno;
            return ODL_ERR(e == ENOENT ? ODL_E_NOTFOUND : ODL_E_IO, "checkpoint directory %s: %s%s", dir, strerror(e),
                           e == ENOENT ? " (create it first)" : "");
        }
        if (!S_ISDIR(sb.st_mode)) return ODL_ERR(ODL_E_IO, "checkpoint directory %s is not a directory", dir);
    }
    if (saving && !resume[0]) {
        /* A fresh run must not overwrite another run's checkpoints. */
        odl_ckpt_entry *e = NULL;
        size_t n = 0;
        ODL_CHECK(odl_ckpt_list(dir, &e, &n));
        if (n > 0) {
            odl_status st = ODL_ERR(ODL_E_CONFIG,
                                    "checkpoint directory %s already holds %zu checkpoint(s) (newest %s); continue them "
                                    "with --resume auto, or give an empty directory",
                                    dir, n, e[0].name);
            free(e);
            return st;
        }
        free(e);
    }
    if (saving && rank == 0) ODL_CHECK(probe_writable(dir));

    odl_ckpt_session *s = calloc(1, sizeof *s);
    if (!s) return ODL_ERR(ODL_E_NOMEM, "checkpoint session");
    s->rank = rank;
    s->world = world_size > 0 ? world_size : 1;
    s->writes = saving && rank == 0;
    s->every = o->every;
    s->keep = o->keep > 0 ? o->keep : 1;
    s->commit_elsewhere = o->commit_elsewhere != 0;
    s->observer = o->observer;
    s->observer_ctx = o->observer_ctx;
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    snprintf(s->resume, sizeof s->resume, "%s", resume);
    s->seed = o->seed;
    s->max_train_samples = o->max_train_samples;
    s->batch = o->batch;
    s->optimizer = o->optimizer;
    odl_status st = ODL_OK;
    snprintf(s->model, sizeof s->model, "%s", o->model && o->model[0] ? o->model : "?");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (s->writes) {
        s->yaml = strdup(o->config_yaml ? o->config_yaml : "");
        if (!s->yaml) {
            st = ODL_ERR(ODL_E_NOMEM, "config text for checkpoints");
            goto fail;
        }
        remove_stale_tmp(dir);
        if (pthread_create(&s->thread, NULL, writer_main, s) != 0) {
            st = ODL_ERR(ODL_E_INTERNAL, "cannot start the checkpoint writer thread");
            goto fail;
        }
        s->thread_started = 1;
        if (s->commit_elsewhere)
            ODL_LOG_INFO("checkpoints: every %" PRId64 " steps into %s (written by a background thread); the coordinator "
                         "commits them, writes the manifest and applies retention", s->every, s->dir);
        else
            ODL_LOG_INFO("checkpoints: every %" PRId64 " steps into %s, keeping the newest %" PRId64 " (written by a "
                         "background thread)", s->every, s->dir, s->keep);
    }
    *out = s;
    return ODL_OK;
fail:
    odl_ckpt_session_finish(s);
    return st;
}

/* ---------------------------------------------------------------------------------------------- */
/* Restore                                                                                          */

/* Everything a checkpoint holds for this run, read and checked, in host memory. */
typedef struct staged {
    odl_ckpt_meta meta;
    float *buf;        /* params then optimiser states, in the order of the net */
    size_t nfloats;
} staged;

/* Load phase 1: a checkpoint (not a weights file) of this run's optimiser. *mismatch: the file is fine
 * but not this run's. */
static odl_status check_kind(const char *path, const odl_ckpt_meta *m, const odl_optim *opt, int *mismatch) {
    if (!m->is_checkpoint) {
        *mismatch = 1;
        return ODL_ERR(ODL_E_INVAL, "%s is a weights file (format %s, from --save) without training state; a resume needs "
                                    "a checkpoint (format %s)", path, m->format, ODL_CKPT_FORMAT);
    }
    const char *opt_name = odl_ckpt_optim_name((int)opt->type);
    if (strcmp(m->optimizer, opt_name) != 0) {
        *mismatch = 1;
        return ODL_ERR(ODL_E_CONFIG, "%s was trained with the %s optimiser, this run uses %s (--optimizer %s to resume it)",
                       path, m->optimizer, opt_name, m->optimizer);
    }
    return ODL_OK;
}

/* Phase 2: the model's parameters, the same names and shapes, and nothing else. */
static odl_status check_params(odl_ckpt_session *s, odl_h5_reader *r, const char *path, const odl_ckpt_meta *m,
                               const odl_net *net, int *mismatch) {
    for (int i = 0; i < net->n_params; i++) {
        const odl_param *p = &net->params[i];
        char dset[ODL_CKPT_DSET_MAX], a[96], b[96];
        ODL_CHECK(odl_ckpt_param_path(p->name, dset, sizeof dset));
        odl_h5_info info;
        if (!odl_h5_reader_has(r, dset)) {
            *mismatch = 1;
            return ODL_ERR(ODL_E_INVAL, "%s does not fit this model (%s): it has no tensor %s (it holds model '%s', %" PRId64
                                        " tensors)", path, s->model, dset, m->model, m->n_model_tensors);
        }
        ODL_CHECK(odl_h5_reader_info(r, dset, &info));
        int same = info.ndim == p->value.ndim;
        for (int d = 0; same && d < info.ndim; d++) same = info.shape[d] == p->value.shape[d];
        if (!same) {
            *mismatch = 1;
            return ODL_ERR(ODL_E_INVAL, "%s does not fit this model (%s): %s is %s in the file, %s in the model (the file "
                                        "holds model '%s')", path, s->model, dset, odl_dims_str(info.ndim, info.shape, a, sizeof a),
                           odl_dims_str(p->value.ndim, p->value.shape, b, sizeof b), m->model);
        }
    }
    if (m->n_model_tensors == net->n_params) return ODL_OK;
    /* The file has a tensor the model lacks: name it. */
    for (size_t i = 0; i < odl_h5_reader_count(r); i++) {
        const char *name = odl_h5_reader_name(r, i);
        if (strncmp(name, "/model/", 7) != 0) continue;
        int found = 0;
        for (int k = 0; k < net->n_params && !found; k++) {
            char dset[ODL_CKPT_DSET_MAX];
            found = odl_ckpt_param_path(net->params[k].name, dset, sizeof dset) == ODL_OK && !strcmp(dset, name);
        }
        if (!found) {
            *mismatch = 1;
            return ODL_ERR(ODL_E_INVAL, "%s does not fit this model (%s): it has tensor %s, which the model lacks (the "
                                        "file holds model '%s')", path, s->model, name, m->model);
        }
    }
    return ODL_OK;
}

/* Phase 3: the random streams and the epoch's sample set are the ones the checkpoint continues (the
 * seed; the stored effective config's train.max_train_samples). */
static odl_status check_run(odl_ckpt_session *s, odl_h5_reader *r, const char *path, const odl_ckpt_meta *m,
                            int *mismatch) {
    if (m->seed != s->seed) {
        *mismatch = 1;
        return ODL_ERR(ODL_E_CONFIG, "%s was trained with seed %" PRId64 ", this run has seed %" PRId64 "; shuffling and "
                                     "dropout derive from the seed: resume with --seed %" PRId64, path, m->seed, s->seed, m->seed);
    }
    char *yaml = malloc(CONFIG_TEXT_MAX);
    if (!yaml) return ODL_ERR(ODL_E_NOMEM, "reading the config of %s", path);
    odl_status st = ODL_OK;
    if (odl_h5_reader_attr_str(r, "/", "config", yaml, CONFIG_TEXT_MAX) == ODL_OK) {
        char v[64];
        int64_t old_max = 0;
        if (odl_config_yaml_value(yaml, "train.max_train_samples", v, sizeof v) != ODL_OK ||
            odl_parse_i64(v, INT64_MIN, INT64_MAX, &old_max) != ODL_PARSE_OK) {
            ODL_LOG_WARN("%s: its config does not say train.max_train_samples (%s); not comparing it with this run's",
                         path, odl_error_msg_user());
        } else if (old_max != s->max_train_samples) {
            *mismatch = 1;
            st = ODL_ERR(ODL_E_CONFIG, "%s was trained with train.max_train_samples = %" PRId64 ", this run has %" PRId64
                                       ": the epoch's samples differ, so its sample cursor does not apply",
                         path, old_max, s->max_train_samples);
        }
    }
    free(yaml);
    return st;
}

/* Phase 4: the parameters and optimiser state into sg->buf, every checksum verified. */
static odl_status read_tensors(odl_h5_reader *r, const char *path, const odl_net *net, const odl_optim *opt, staged *sg) {
    const char *opt_name = odl_ckpt_optim_name((int)opt->type);
    int nstate = odl_ckpt_optim_nstate(opt_name);
    size_t total = 0;
    for (int i = 0; i < net->n_params; i++) total += (size_t)odl_tensor_numel(&net->params[i].value) * (size_t)(1 + nstate);
    sg->nfloats = total;
    sg->buf = malloc((total ? total : 1) * sizeof(float));
    if (!sg->buf) return ODL_ERR(ODL_E_NOMEM, "%s: %zu bytes of tensors", path, total * sizeof(float));
    size_t off = 0;
    for (int i = 0; i < net->n_params; i++) {
        const odl_param *p = &net->params[i];
        char dset[ODL_CKPT_DSET_MAX];
        ODL_CHECK(odl_ckpt_param_path(p->name, dset, sizeof dset));
        ODL_CHECK(odl_h5_reader_read(r, dset, ODL_F32, p->value.ndim, p->value.shape, sg->buf + off));
        off += (size_t)odl_tensor_numel(&p->value);
        for (int j = 0; j < nstate; j++) {
            ODL_CHECK(odl_ckpt_optim_path(p->name, odl_ckpt_optim_state(opt_name, j), dset, sizeof dset));
            odl_status st = odl_h5_reader_read(r, dset, ODL_F32, p->value.ndim, p->value.shape, sg->buf + off);
            if (st == ODL_E_NOTFOUND || st == ODL_E_INVAL) return ODL_ERR(ODL_E_FORMAT, "%s: damaged: %s", path, odl_error_msg_user());
            ODL_CHECK(st);
            off += (size_t)odl_tensor_numel(&p->value);
        }
    }
    return ODL_OK;
}

/* Read `path` for net/opt into *sg. *mismatch = 1 when the file is whole but does not fit this run
 * (another model, optimiser, seed, epoch size, or a weights file): such an error is never skipped. */
static odl_status load_file(odl_ckpt_session *s, const char *path, const odl_net *net, const odl_optim *opt, staged *sg,
                            int *mismatch) {
    odl_h5_reader *r = NULL;
    *mismatch = 0;
    memset(sg, 0, sizeof *sg);
    ODL_CHECK(odl_h5_reader_open(path, &r));
    const odl_ckpt_meta *m = &sg->meta;
    odl_status st = odl_ckpt_read_meta(r, &sg->meta);
    if (st == ODL_OK) st = check_kind(path, m, opt, mismatch);
    if (st == ODL_OK) st = check_params(s, r, path, m, net, mismatch);
    if (st == ODL_OK) st = check_run(s, r, path, m, mismatch);
    if (st == ODL_OK) st = read_tensors(r, path, net, opt, sg);
    if (st == ODL_OK && s->max_train_samples > 0 && m->cursor >= s->max_train_samples)
        st = ODL_ERR(ODL_E_FORMAT, "%s: sample cursor %" PRId64 " is outside the epoch of %" PRId64 " samples", path, m->cursor,
                     s->max_train_samples);
    odl_h5_reader_close(r);
    if (st != ODL_OK) {
        free(sg->buf);
        sg->buf = NULL;
    }
    return st;
}

/* Copy staged tensors and counters into the run. */
static odl_status apply(const staged *sg, odl_net *net, odl_optim *opt, odl_train_state *st) {
    int nstate = odl_ckpt_optim_nstate(odl_ckpt_optim_name((int)opt->type));
    size_t off = 0;
    for (int i = 0; i < net->n_params; i++) {
        odl_tensor *v = &net->params[i].value;
        size_t n = (size_t)odl_tensor_numel(v);
        ODL_CHECK(odl_tensor_copy_from_host(v, sg->buf + off, n * sizeof(float)));
        off += n;
        for (int j = 0; j < nstate; j++) {
            ODL_CHECK(odl_tensor_copy_from_host(&opt->state[i][j], sg->buf + off, n * sizeof(float)));
            off += n;
        }
    }
    const odl_ckpt_meta *m = &sg->meta;
    opt->step = m->optim_step;
    if (m->lr > 0) opt->lr = (float)m->lr;
    memset(st, 0, sizeof *st);
    st->step = m->step;
    st->epoch = m->epoch;
    st->cursor = m->cursor;
    st->epoch_samples = m->epoch_samples;
    st->epoch_loss_sum = m->epoch_loss_sum;
    return ODL_OK;
}

/* Files of the directory newer than the step we resume at belong to a run we do not continue (or are
 * damaged): move them aside so that a later "auto" does not take them and nothing overwrites them. */
static void move_aside_newer(odl_ckpt_session *s, int64_t step) {
    odl_ckpt_entry *e = NULL;
    size_t n = 0;
    if (odl_ckpt_list(s->dir, &e, &n) != ODL_OK) return;
    for (size_t i = 0; i < n; i++) {
        if (e[i].step <= step) continue;
        char from[PATH_MAX + 64], to[PATH_MAX + 96];
        path_in_dir(s, e[i].name, from, sizeof from);
        snprintf(to, sizeof to, "%s.superseded", from);
        if (rename(from, to) == 0) {
            ODL_LOG_WARN("moved %s aside to %s: it is newer than step %" PRId64 " where training resumes (damaged, or "
                         "from a run that is not continued)", from, to, step);
            /* durable: after a power cut it must not come back under its checkpoint name */
            if (odl_file_fsync_dir_of(to) != ODL_OK) ODL_LOG_WARN("%s", odl_error_msg());
        } else {
            ODL_LOG_WARN("could not move %s aside: %s", from, strerror(errno));
        }
    }
    free(e);
}

odl_status odl_ckpt_session_restore(odl_ckpt_session *s, odl_net *net, odl_optim *opt, odl_train_state *st,
                                    int *resumed) {
    *resumed = 0;
    if (!s || !s->resume[0]) return ODL_OK; /* start() refused a fresh run into a directory with checkpoints */
    staged sg;
    memset(&sg, 0, sizeof sg);
    char chosen[PATH_MAX + 64] = "";
    int mismatch = 0;
    if (strcmp(s->resume, "auto") != 0) {
        odl_status e = load_file(s, s->resume, net, opt, &sg, &mismatch);
        if (e != ODL_OK) {
            odl_error_prefix("cannot resume");
            return e;
        }
        snprintf(chosen, sizeof chosen, "%s", s->resume);
    } else {
        odl_ckpt_entry *e = NULL;
        size_t n = 0;
        ODL_CHECK(odl_ckpt_list(s->dir, &e, &n));
        char mlatest[64] = "";
        int64_t mstep = -1;
        odl_status ms = odl_ckpt_manifest_read(s->dir, mlatest, sizeof mlatest, &mstep);
        if (ms != ODL_OK && ms != ODL_E_NOTFOUND) ODL_LOG_WARN("ignoring the manifest: %s", odl_error_msg_user());
        int skipped = 0;
        for (size_t i = 0; i < n; i++) {
            char path[PATH_MAX + 64];
            path_in_dir(s, e[i].name, path, sizeof path);
            odl_status ls = load_file(s, path, net, opt, &sg, &mismatch);
            if (ls == ODL_OK) {
                snprintf(chosen, sizeof chosen, "%s", path);
                if (mstep >= 0 && e[i].step > mstep)
                    ODL_LOG_INFO("%s is newer than the manifest's latest (%s): the run stopped between the two writes",
                                 e[i].name, mlatest);
                break;
            }
            if (mismatch) {
                free(e);
                odl_error_prefix("cannot resume");
                return ls;
            }
            ODL_LOG_WARN("skipping checkpoint %s: %s", path, odl_error_msg_user());
            skipped++;
        }
        if (ms == ODL_OK) {
            int listed = 0;
            for (size_t i = 0; i < n; i++) listed |= !strcmp(e[i].name, mlatest);
            if (!listed) ODL_LOG_WARN("the manifest of %s names %s, which is not there", s->dir, mlatest);
        }
        free(e);
        if (!chosen[0]) {
            if (n == 0) ODL_LOG_INFO("resume=auto: no checkpoint in %s; starting fresh", s->dir);
            else ODL_LOG_WARN("resume=auto: none of the %zu checkpoint(s) in %s is usable (%d skipped); starting fresh", n,
                              s->dir, skipped);
            if (s->writes) move_aside_newer(s, 0);
            return ODL_OK;
        }
    }
    odl_status a = apply(&sg, net, opt, st);
    free(sg.buf);
    if (a != ODL_OK) {
        odl_error_prefix("resuming from %s", chosen);
        return a;
    }
    const odl_ckpt_meta *m = &sg.meta;
    ODL_LOG_INFO("resuming from %s: step %" PRId64 ", epoch %" PRId64 ", sample cursor %" PRId64 " (checksums verified, "
                 "%" PRId64 " tensors)", chosen, m->step, m->epoch + 1, m->cursor, m->n_model_tensors);
    if (m->world_size != s->world)
        ODL_LOG_INFO("the checkpoint was written by a job of world size %" PRId64 ", this one has %d: the epoch continues "
                     "from global sample cursor %" PRId64 " (each remaining sample once)", m->world_size, s->world, m->cursor);
    if (s->writes) move_aside_newer(s, m->step);
    *resumed = 1;
    return ODL_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* Save                                                                                             */

int odl_ckpt_session_due(const odl_ckpt_session *s, const odl_train_state *st) {
    if (!s) return 0;
    /* One rank: a failed write stops training at the next step (save returns the error). With more
     * ranks every rank must agree (the caller reduces a scalar first), so the error waits for the next
     * regular checkpoint. */
    if (s->world == 1 && atomic_load(&((odl_ckpt_session *)s)->failed)) return 1;
    return s->every > 0 && st->step > 0 && st->step % s->every == 0;
}

odl_status odl_ckpt_session_save(odl_ckpt_session *s, const odl_net *net, const odl_optim *opt,
                                 const odl_train_state *st) {
    if (!s || !s->writes) return ODL_OK;
    double t0 = odl_mono_ms();
    pthread_mutex_lock(&s->mu);
    job *j = NULL;
    for (;;) {
        if (atomic_load(&s->failed)) {
            odl_status e = s->err;
            char msg[sizeof s->err_msg];
            snprintf(msg, sizeof msg, "%s", s->err_msg);
            pthread_mutex_unlock(&s->mu);
            return restore_error(e, msg);
        }
        /* A free buffer, preferring one already allocated (and paged in): usually the write of the
         * last checkpoint is over and the same buffer serves every checkpoint. */
        for (int i = 0; i < NJOBS; i++)
            if (s->jobs[i].state == JOB_FREE && (!j || s->jobs[i].cap > j->cap)) j = &s->jobs[i];
        if (j) break;
        pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    double t_wait = odl_mono_ms() - t0;

    /* Layout and buffer (allocated on the first checkpoint, then reused). */
    int nstate = 0;
    while (nstate < 2 && odl_optim_state_name(opt, nstate)) nstate++;
    size_t need = 0;
    int nr = 0;
    odl_status e = ODL_OK;
    for (int i = 0; i < net->n_params && e == ODL_OK; i++) {
        const odl_param *p = &net->params[i];
        for (int k = 0; k <= nstate && e == ODL_OK; k++) {
            if (nr >= MAX_RECS) {
                e = ODL_ERR(ODL_E_INTERNAL, "too many tensors for a checkpoint");
                break;
            }
            rec *r = &j->recs[nr++];
            e = k == 0 ? odl_ckpt_param_path(p->name, r->dset, sizeof r->dset)
                       : odl_ckpt_optim_path(p->name, odl_optim_state_name(opt, k - 1), r->dset, sizeof r->dset);
            r->ndim = p->value.ndim;
            memcpy(r->shape, p->value.shape, sizeof r->shape);
            r->off = need;
            r->nbytes = odl_tensor_nbytes(&p->value);
            need += (r->nbytes + 63) & ~(size_t)63;
        }
    }
    if (e == ODL_OK && need > j->cap) {
        odl_host_free_pinned(j->buf);
        j->buf = NULL;
        j->cap = 0;
        void *b = NULL;
        e = odl_host_alloc_pinned(need, &b);
        if (e == ODL_OK) {
            j->buf = b;
            j->cap = need;
        }
    }
    /* Off the device: every copy queued on the current stream (after the step's work), one wait. */
    odl_device dev = odl_cpu();
    for (int i = 0, r = 0; i < net->n_params && e == ODL_OK; i++) {
        const odl_param *p = &net->params[i];
        dev = p->value.device;
        for (int k = 0; k <= nstate && e == ODL_OK; k++, r++) {
            const odl_tensor *t = k == 0 ? &p->value : &opt->state[i][k - 1];
            e = odl_memcpy_async(j->buf + j->recs[r].off, odl_cpu(), t->data, t->device, j->recs[r].nbytes,
                                 odl_stream_current());
        }
    }
    if (e == ODL_OK && dev.type != ODL_DEV_CPU) e = odl_stream_synchronize(odl_stream_current());
    if (e != ODL_OK) {
        odl_error_prefix("checkpoint at step %" PRId64 ": copying the state to the host", st->step);
        return e;
    }
    j->n_recs = nr;
    j->used = need;
    j->st = *st;
    j->opt_hyper = *opt;
    memset(j->opt_hyper.state, 0, sizeof j->opt_hyper.state);

    pthread_mutex_lock(&s->mu);
    j->seq = s->next_seq++;
    j->state = JOB_QUEUED;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);

    double stall = odl_mono_ms() - t0;
    s->n_saved++;
    s->stall_sum += stall;
    if (stall > s->stall_max) s->stall_max = stall;
    ODL_LOG_INFO("checkpoint at step %" PRId64 ": step loop stalled %.2f ms (copy of %.1f MB off %s %.2f ms, waiting for "
                 "the previous write %.2f ms); writing in the background",
                 st->step, stall, need / 1e6, odl_device_name(dev), stall - t_wait, t_wait);
    return ODL_OK;
}

void odl_ckpt_session_set_before_commit(odl_ckpt_session *s, odl_ckpt_before_commit_fn fn, void *ctx) {
    if (!s) return;
    s->before_commit = fn;
    s->before_commit_ctx = ctx;
}

odl_status odl_ckpt_session_finish(odl_ckpt_session *s) {
    if (!s) return ODL_OK;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        s->thread_started = 0;
    }
    if (s->n_saved > 0)
        ODL_LOG_INFO("checkpoints: %d taken, %d written; step-loop stall per checkpoint %.2f ms mean, %.2f ms max; "
                     "background write %.1f ms mean",
                     s->n_saved, s->n_written, s->stall_sum / s->n_saved, s->stall_max,
                     s->n_written ? s->write_sum / s->n_written : 0.0);
    odl_status e = ODL_OK;
    char msg[sizeof s->err_msg];
    if (atomic_load(&s->failed)) {
        e = s->err;
        snprintf(msg, sizeof msg, "%s", s->err_msg);
    }
    for (int i = 0; i < NJOBS; i++) odl_host_free_pinned(s->jobs[i].buf);
    free(s->yaml);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    if (e != ODL_OK) return restore_error(e, msg);
    return ODL_OK;
}
