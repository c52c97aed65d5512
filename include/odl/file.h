/* Durable file replacement: the one way the project makes a file it wrote survive a crash or a power
 * cut (checkpoints, manifests, the coordinator's state, fence lists, hostfiles, metrics rewritten on
 * resume, evaluation chunks). The steps are Git's lockfile (write "<path>.tmp", rename it over <path>)
 * with Redis's fsyncFileDir (rdb.c) after the rename:
 *   1. write the whole content to a temporary file beside <path> (same directory, so rename is atomic);
 *   2. fsync the temporary file: its data is on disk before any name points at it;
 *   3. rename(2) it onto <path> (or, with ODL_FILE_NO_REPLACE, link(2) it to <path>: a file already
 *      there is kept and the new one dropped);
 *   4. fsync the directory: the new name itself is on disk (without this a power cut can bring back
 *      the old file, or none, after the rename returned).
 * A process that dies at any point leaves <path> as it was or complete with the new content, never
 * partial; a stale "<path>.tmp" at worst, which the next writer truncates. tests/fsync_shim.c runs the
 * programs under an LD_PRELOAD that reports any rename or link not followed by the directory's fsync.
 *
 * Not for files that grow while they are in use (the metrics JSONL, TensorBoard events): those are
 * appended to, never replaced. */
#ifndef ODL_FILE_H
#define ODL_FILE_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#include "odl/api.h"
#include "odl/status.h"

/* Flags. */
#define ODL_FILE_NO_REPLACE 1 /* link instead of rename: an existing <path> wins (*created = 0); the
                                 temporary name carries the pid, so that processes writing the same
                                 path at once do not share it */
#define ODL_FILE_PRIVATE 2    /* mode 0600 from creation on (a secret); otherwise 0644 */

/* A file being written under its temporary name (Git's struct lock_file). */
typedef struct odl_file_tmp {
    FILE *f;                  /* write the content here (stdio) */
    int flags;
    char path[PATH_MAX];      /* the final name */
    char tmp[PATH_MAX + 32];  /* "<path>.tmp", or "<path>.<pid>.tmp" with ODL_FILE_NO_REPLACE */
} odl_file_tmp;

/* Create the temporary file (mode 0644 or ODL_FILE_PRIVATE's 0600, truncated if a stale one is there) and open it for writing.
 * Errors: ODL_E_INVAL (path too long), ODL_E_IO. On error nothing is left open. */
ODL_API odl_status odl_file_begin(odl_file_tmp *t, const char *path, int flags);
/* Steps 2-4 on t's file: flush, fsync, close, rename (or link), fsync the directory. Always releases t.
 * created (may be NULL): 1 when <path> now holds the new content, 0 when ODL_FILE_NO_REPLACE found a
 * file there. Errors: ODL_E_IO naming the failing call and path; the temporary file is removed and
 * <path> is as it was -- except when only the directory's fsync failed: then <path> is new but the
 * message says the rename may not survive a power loss. */
ODL_API odl_status odl_file_commit(odl_file_tmp *t, int *created);
/* Drop t: close and remove the temporary file; <path> is untouched. NULL-safe, and safe after commit. */
ODL_API void odl_file_abort(odl_file_tmp *t);

/* The whole of data[0, n) as <path>: begin, write, commit. */
ODL_API odl_status odl_file_write_atomic(const char *path, const void *data, size_t n, int flags, int *created);

/* Steps 2-4 for a temporary file that another library wrote and closed (HDF5's H5Fcreate in
 * core/h5io.c): fsync tmp, rename (or link) it to path, fsync path's directory. On failure before the
 * rename tmp is removed. Same errors as odl_file_commit. */
ODL_API odl_status odl_file_publish(const char *tmp, const char *path, int flags, int *created);

/* fsync the directory that holds path ("." for a bare name). Errors: ODL_E_IO. */
ODL_API odl_status odl_file_fsync_dir_of(const char *path);

#endif
