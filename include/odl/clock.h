/* The one monotonic clock of the project (CLOCK_MONOTONIC): durations, time-outs, rates and liveness.
 * Wall-clock time (log lines, file timestamps) is another matter and stays CLOCK_REALTIME / time(). */
#ifndef ODL_CLOCK_H
#define ODL_CLOCK_H

#include <stdint.h>

#include "odl/api.h"

/* Nanoseconds since an arbitrary start (boot on Linux: the kernel log's printk clock follows it on
 * machines that do not suspend). */
ODL_API int64_t odl_mono_ns(void);
/* The same in seconds. */
ODL_API double odl_mono_s(void);
/* The same in milliseconds. */
ODL_API double odl_mono_ms(void);

#endif
