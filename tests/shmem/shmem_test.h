/* Helpers of the OpenSHMEM tests: every check names what it checked and the
 * PE; the first failure ends the job with status 1 (through
 * shmem_global_exit, so no PE waits forever for one that failed). */
#ifndef VMMC_SHMEM_TEST_H
#define VMMC_SHMEM_TEST_H

#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>

#define ST_FAIL(...)                                                                           \
    do {                                                                                       \
        fprintf(stderr, "FAIL [pe %d] %s:%d: ", shmem_my_pe(), __FILE__, __LINE__);            \
        fprintf(stderr, __VA_ARGS__);                                                          \
        fprintf(stderr, "\n");                                                                 \
        fflush(stderr);                                                                        \
        shmem_global_exit(1);                                                                  \
    } while (0)

#define ST_CHECK(cond)                                                                         \
    do {                                                                                       \
        if (!(cond))                                                                           \
            ST_FAIL("%s", #cond);                                                              \
    } while (0)

/* Equality of two integers, printing both on failure. */
#define ST_EQ(got, want)                                                                       \
    do {                                                                                       \
        long long g_ = (long long)(got), w_ = (long long)(want);                               \
        if (g_ != w_)                                                                          \
            ST_FAIL("%s == %lld, expected %lld", #got, g_, w_);                                \
    } while (0)

/* "ok <what>" once, from PE 0. */
#define ST_OK(what)                                                                            \
    do {                                                                                       \
        if (shmem_my_pe() == 0)                                                                \
            printf("ok   %s\n", what);                                                         \
        fflush(stdout);                                                                        \
    } while (0)

#endif
