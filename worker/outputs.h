/* Output paths checked before any work starts (--save, --metrics-out, --output, --tensorboard), so that
 * a bad path fails in the first second instead of after the whole run, and the metrics JSONL
 * (one object per line through jansson; overwritten by a fresh run, appended to by a resumed one). */
#ifndef ODL_WORKER_OUTPUTS_H
#define ODL_WORKER_OUTPUTS_H

#include <stdint.h>
#include <stdio.h>

#include "odl/status.h"

/* A file the run will write: it is a writable regular file, or its folder exists and is writable.
 * Empty path: nothing to check. Errors: ODL_E_IO naming `flag`, the path and the reason. */
odl_status odl_output_check_file(const char *flag, const char *path);

/* A folder the run will create if needed (mkdir -p): it is a writable folder, or its nearest existing
 * ancestor is. Empty path: nothing to check. Errors: ODL_E_IO naming `flag`, the path and the reason. */
odl_status odl_output_check_dir(const char *flag, const char *path);

/* mkdir -p for an output folder. Errors: ODL_E_IO naming `flag`, the folder that could not be made. */
odl_status odl_output_mkdir_p(const char *flag, const char *path);

/* Open the metrics JSONL. resume_step == 0: a fresh run, the file is overwritten. resume_step > 0 (a
 * resumed run): the records of steps after resume_step (written after the checkpoint the run resumes
 * from) and "done" records are dropped, the file is rewritten with the others and opened for appending,
 * so that no record repeats. Lines that are not JSON objects are kept as they are. Errors: ODL_E_IO. */
odl_status odl_metrics_open(const char *path, int64_t resume_step, FILE **out);

#endif
