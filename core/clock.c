/* The monotonic clock (odl/clock.h). */
#include "odl/clock.h"

#include <time.h>

int64_t odl_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double odl_mono_s(void) {
    return (double)odl_mono_ns() * 1e-9;
}

double odl_mono_ms(void) {
    return (double)odl_mono_ns() * 1e-6;
}

int odl_cond_init_mono(pthread_cond_t *cv) {
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);
    if (rc) return rc;
    rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (!rc) rc = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc;
}

struct timespec odl_mono_deadline(int64_t ms) {
    const int64_t t = odl_mono_ns() + ms * 1000000;
    return (struct timespec){(time_t)(t / 1000000000), (long)(t % 1000000000)};
}
