/* Checkpoint and weights files: names, layout, manifest, verification (docs/checkpoint_format.md).
 *
 * One HDF5 format (odl/h5io.h: whole little-endian C-order tensors, a crc32 attribute per dataset)
 * serves two kinds of file, told apart by the root attribute "format":
 *   "odl-checkpoint"  a training checkpoint: /model, /optim and /train (written by odl_worker
 *                     --checkpoint-dir, read by --resume)
 *   "odl-weights"     trained weights only: /model (written by odl_worker --save)
 * Parameters live at /model/<name with '.' as '/'> ("conv1.weight" -> /model/conv1/weight), float32,
 * in the parameter's own shape. Optimiser state tensor j of a parameter lives at
 * /optim/<same path>/<odl_optim_state_name(opt, j)> ("/optim/conv1/weight/square_avg").
 *
 * A checkpoint directory holds ckpt-<step>.h5 files (step zero-padded to 8 digits, more when larger)
 * and manifest.json naming the latest; both are written by write-to-temporary, fsync, rename, fsync of
 * the directory. Nothing here keeps global state; every function is safe to call from any thread
 * (HDF5 access is serialised inside odl/h5io).
 */
#ifndef ODL_CKPT_H
#define ODL_CKPT_H

#include "odl/api.h"
#include <stddef.h>
#include <stdint.h>

#include "odl/h5io.h"
#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ODL_CKPT_FORMAT "odl-checkpoint"
#define ODL_CKPT_WEIGHTS_FORMAT "odl-weights"
/* Version written by this build; readers refuse files of a newer version. */
#define ODL_CKPT_FORMAT_VERSION 1
#define ODL_CKPT_MANIFEST "manifest.json"
#define ODL_CKPT_MANIFEST_FORMAT "odl-checkpoint-manifest"
/* Length of /train/counters (int64): step, epoch, cursor, epoch_samples, seed, world_size, optim_step. */
#define ODL_CKPT_NCOUNTERS 7
/* Longest dataset path produced here ("/optim/<64-byte name>/<state>"). */
#define ODL_CKPT_DSET_MAX 192

/* ---- names ---- */

/* "conv1.weight" -> "/model/conv1/weight". Errors: ODL_E_INVAL (empty name, name with '/', too long). */
ODL_API odl_status odl_ckpt_param_path(const char *param, char *buf, size_t cap);
/* ("conv1.weight", "square_avg") -> "/optim/conv1/weight/square_avg". Errors as above. */
ODL_API odl_status odl_ckpt_optim_path(const char *param, const char *state, char *buf, size_t cap);
/* "ckpt-00000020.h5" for step 20. */
ODL_API void odl_ckpt_file_name(int64_t step, char *buf, size_t cap);
/* 1 when `name` (a file name without directory) is exactly ckpt-<decimal digits>.h5, with the step in
 * *step; 0 otherwise (temporary "*.h5.tmp", "*.superseded" and other files are not checkpoints). */
ODL_API int odl_ckpt_parse_file_name(const char *name, int64_t *step);

/* ---- directory ---- */

typedef struct odl_ckpt_entry {
    int64_t step;
    char name[64]; /* file name inside the directory */
} odl_ckpt_entry;

/* The checkpoint files of `dir` (by name only; nothing is opened), highest step first. *out is
 * malloc'ed (free() it; NULL when *n is 0). Errors: ODL_E_NOTFOUND (no such directory), ODL_E_IO
 * (opendir failed, not a directory), ODL_E_NOMEM. */
ODL_API odl_status odl_ckpt_list(const char *dir, odl_ckpt_entry **out, size_t *n);


/* 1-based number of the epoch a checkpoint's last step belongs to, as the logs and the metrics JSONL
 * print it, from its completed epochs and its sample cursor (a checkpoint at an epoch's end has cursor
 * 0 and belongs to that epoch; one at step 0 to epoch 1). */
static inline int64_t odl_ckpt_epoch_label(int64_t epochs_done, int64_t cursor) {
    return cursor == 0 && epochs_done > 0 ? epochs_done : epochs_done + 1;
}

/* manifest.json of `dir`, written through jansson with odl_json_save_file (odl/file.h's durable replacement):
 * {"format": "odl-checkpoint-manifest", "format_version": 1, "latest": NAME, "step": S,
 *  "epoch": odl_ckpt_epoch_label(epochs_done, cursor), "epochs_completed": epochs_done, "cursor": C,
 *  "checkpoints": [NAME, ...]} (newest first). kept[0] is the latest.
 * Errors: ODL_E_INVAL (n == 0), ODL_E_IO. */
ODL_API odl_status odl_ckpt_manifest_write(const char *dir, const odl_ckpt_entry *kept, size_t n, int64_t epochs_done,
                                   int64_t cursor);
/* Commit checkpoint `step` of `dir` and apply retention: the one place that does both, for the writer
 * of an unsupervised run (checkpoint/session.c, after each write) and for odl_coordinator (after rank 0
 * reports a successful write; docs/coordinator.md "Checkpoints"). Writes manifest.json
 * (odl_ckpt_manifest_write) naming ckpt-<step>.h5 as the latest, followed by the newest keep - 1
 * checkpoints older than it; then deletes the other checkpoints older than `step`. Never deleted:
 * ckpt-<step>.h5 itself, and every checkpoint newer than `step` (a write not committed: it does not
 * count against `keep`, and the next resume moves it aside). Nothing is deleted when the manifest
 * cannot be written. A failed delete is a warning in the log, not an error. epochs_done and cursor are
 * the checkpoint's (manifest fields "epochs_completed", "cursor"); keep < 1 is taken as 1; *n_deleted
 * (may be NULL) = the files deleted.
 * Errors: ODL_E_NOTFOUND (no such directory, or no ckpt-<step>.h5 in it: nothing is written or
 * deleted), ODL_E_IO, ODL_E_NOMEM. */
ODL_API odl_status odl_ckpt_commit(const char *dir, int64_t step, int64_t epochs_done, int64_t cursor, int64_t keep,
                                   int *n_deleted);
/* The manifest's latest file name and step. Errors: ODL_E_NOTFOUND (no manifest), ODL_E_FORMAT
 * (unreadable: no "latest" naming a ckpt-<step>.h5), ODL_E_IO. */
ODL_API odl_status odl_ckpt_manifest_read(const char *dir, char *latest, size_t cap, int64_t *step);

/* ---- contents ---- */

/* What the attributes and the checksummed counters of a file say. */
typedef struct odl_ckpt_meta {
    char format[32];            /* "odl-checkpoint" or "odl-weights" */
    int64_t format_version;
    char model[64];             /* the config's model name ("mnist", "mnist_cnn", "mnist_mlp") */
    int64_t world_size;         /* of the job that wrote it (0 when the file does not say: weights) */
    int is_checkpoint;          /* 1 for "odl-checkpoint": the fields below are valid */
    int64_t step, epoch, cursor, epoch_samples, seed, optim_step;
    double epoch_loss_sum;
    char optimizer[16];         /* "adadelta", "sgd", "adam", "adamw" */
    double lr;
    int64_t n_model_tensors;    /* datasets under /model */
    int64_t n_model_params;     /* elements of those datasets */
    int64_t n_datasets;         /* every dataset of the file */
} odl_ckpt_meta;

/* Read the metadata of an open file. For a checkpoint, the /train attributes must agree with the
 * checksummed /train/counters and /train/epoch_loss_sum (read, and so verified, here).
 * Errors: ODL_E_FORMAT (no or unknown "format" attribute, a newer format_version, a missing /train
 * item), ODL_E_CHECKSUM (a counter's crc32, or attributes that disagree with the counters),
 * ODL_E_HDF5. Messages name the file. */
ODL_API odl_status odl_ckpt_read_meta(odl_h5_reader *r, odl_ckpt_meta *m);

/* Name of an optimiser type in files ("adadelta", ...), from odl_optim_type's value; "?" when unknown.
 * And the reverse: -1 when unknown. */
ODL_API const char *odl_ckpt_optim_name(int type);
ODL_API int odl_ckpt_optim_parse(const char *name);
/* Number of state tensors per parameter for an optimiser name (adadelta 2, sgd 1, adam/adamw 2), or -1. */
ODL_API int odl_ckpt_optim_nstate(const char *name);
/* State tensor names of an optimiser name, j < odl_ckpt_optim_nstate. NULL otherwise. */
ODL_API const char *odl_ckpt_optim_state(const char *name, int j);

/* Called by odl_ckpt_verify once per dataset, in the file's name order: st is ODL_OK or the error of
 * reading/verifying it, msg its message ("" when fine). */
typedef void (*odl_ckpt_verify_fn)(void *ctx, const char *dset, const odl_h5_info *info, odl_status st,
                                   const char *msg);

/* Check a whole file: it opens, the metadata reads (odl_ckpt_read_meta), every dataset reads back with
 * its crc32 matching (a dataset without a crc32 attribute is an error in these files), and the layout
 * is whole: every dataset is under /model, /optim or /train, a checkpoint has every optimiser state
 * tensor of every /model tensor with the same shape and nothing else under /optim. `meta` (may be
 * NULL) receives the metadata when it could be read. Returns ODL_OK for a good file, else the first
 * error (the callback, when given, sees every dataset). Errors: those of odl_h5_reader_open
 * (ODL_E_NOTFOUND, ODL_E_IO, ODL_E_FORMAT for a truncated or damaged file), of odl_ckpt_read_meta,
 * ODL_E_CHECKSUM (naming the dataset), ODL_E_FORMAT (layout), ODL_E_NOMEM. */
ODL_API odl_status odl_ckpt_verify(const char *path, odl_ckpt_meta *meta, odl_ckpt_verify_fn fn, void *ctx);

/* Root attributes shared by both kinds: format, format_version, model, world_size (when > 0; weights
 * files have none) and, when config_yaml is not NULL, config (the effective config as YAML). Errors: those of odl_h5_writer_attr_*. */
ODL_API odl_status odl_ckpt_write_root(odl_h5_writer *w, const char *format, const char *model, int64_t world_size,
                               const char *config_yaml);

#ifdef __cplusplus
}
#endif
#endif
