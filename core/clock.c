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
