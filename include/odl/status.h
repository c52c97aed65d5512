/* Status codes and error context.
 *
 * Every function that can fail returns an odl_status: 0 on success, a negative code otherwise, and
 * leaves a message in a thread-local buffer that says what failed, where (file:line) and with what
 * (a path, a rank, a shape). Callers add their own location as the error travels up, as NCCL's
 * NCCLCHECK does; main() prints odl_error_msg() once and chooses the exit code. Library code never
 * calls exit() or abort().
 */
#ifndef ODL_STATUS_H
#define ODL_STATUS_H


#include "odl/api.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef enum odl_status {
    ODL_OK = 0,
    ODL_E_INVAL = -1,       /* bad argument: shape, dtype, device, null pointer */
    ODL_E_NOMEM = -2,       /* host or device allocation failed */
    ODL_E_IO = -3,          /* open/read/write/fsync/rename failed */
    ODL_E_FORMAT = -4,      /* a file's content is malformed (IDX, JPEG, HDF5, YAML) */
    ODL_E_CUDA = -5,        /* a CUDA runtime call failed */
    ODL_E_NCCL = -6,        /* an NCCL call failed */
    ODL_E_MPI = -7,         /* an MPI call failed */
    ODL_E_HDF5 = -8,        /* an HDF5 call failed */
    ODL_E_UNSUPPORTED = -9, /* valid request this build or backend cannot serve */
    ODL_E_TIMEOUT = -10,    /* a collective or peer did not answer in time */
    ODL_E_CONFIG = -11,     /* unknown config key or bad value */
    ODL_E_NODEV = -12,      /* no such device */
    ODL_E_CHECKSUM = -13,   /* stored checksum does not match the data */
    ODL_E_NOTFOUND = -14,   /* a file, key or dataset that must exist does not */
    ODL_E_INTERNAL = -15,   /* a bug: an invariant of the library was broken */
    ODL_E_BUSY = -16,       /* still in use: e.g. device memory live at odl_cuda_shutdown */
} odl_status;

/* Short name of a code, e.g. "invalid argument". Never NULL. */
ODL_API const char *odl_status_str(odl_status s);

/* Replace the thread's message with "file:line: <printf text>" and return code. */
ODL_API odl_status odl_error_set(odl_status code, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Prefix the thread's message with context, "<printf text>: <old message>". Returns nothing so that
 * it can be used in any cleanup path. */
ODL_API void odl_error_prefix(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Append a location " [at file:line]" to the thread's message (used by ODL_CHECK). */
ODL_API void odl_error_trace(const char *file, int line);

/* The thread's current message ("" when none). */
ODL_API const char *odl_error_msg(void);
/* The message as users see it: without its " [at file:line]" trace unless the log level is debug
 * (--verbose, logging.level: debug). Programs print this; tests and logs of internal failures may use
 * odl_error_msg. */
ODL_API const char *odl_error_msg_user(void);
ODL_API void odl_error_clear(void);

#define ODL_ERR(code, ...) odl_error_set((code), __FILE__, __LINE__, __VA_ARGS__)

/* Propagate a failure, recording this location. */
#define ODL_CHECK(call)                                      \
    do {                                                     \
        odl_status odl_s_ = (call);                          \
        if (odl_s_ != ODL_OK) {                              \
            odl_error_trace(__FILE__, __LINE__);             \
            return odl_s_;                                   \
        }                                                    \
    } while (0)

/* Propagate a failure into `st` and jump to a cleanup label. */
#define ODL_CHECK_GOTO(call, st, label)                      \
    do {                                                     \
        (st) = (call);                                       \
        if ((st) != ODL_OK) {                                \
            odl_error_trace(__FILE__, __LINE__);             \
            goto label;                                      \
        }                                                    \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
