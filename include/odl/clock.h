/* The one monotonic clock of the project (CLOCK_MONOTONIC): durations, time-outs, rates and liveness.
 * Wall-clock time (log lines, file timestamps) is another matter and stays CLOCK_REALTIME / time(). */
#ifndef ODL_CLOCK_H
#define ODL_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "odl/api.h"

/* Nanoseconds since an arbitrary start (boot on Linux: the kernel log's printk clock follows it on
 * machines that do not suspend). */
ODL_API int64_t odl_mono_ns(void);
/* The same in seconds. */
ODL_API double odl_mono_s(void);
/* The same in milliseconds. */
ODL_API double odl_mono_ms(void);

/* Condition variables that time out on this clock: odl_cond_init_mono initialises cv with
 * CLOCK_MONOTONIC (pthread_condattr_setclock), so that a wall-clock step neither cuts a wait short nor
 * stretches it; odl_mono_deadline gives the absolute time ms milliseconds from now for
 * pthread_cond_timedwait on such a variable. Returns pthread_cond_init's result (0: ok). */
ODL_API int odl_cond_init_mono(pthread_cond_t *cv);
ODL_API struct timespec odl_mono_deadline(int64_t ms);

#endif
