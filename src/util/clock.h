/* Monotonic time in nanoseconds, for deadlines and timestamps. */
#ifndef VMMC_UTIL_CLOCK_H
#define VMMC_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t vmmc_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

#endif
