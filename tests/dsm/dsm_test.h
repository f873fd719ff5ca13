/* Small helpers of the DSM tests: every check prints what was expected and
 * what was found, and ends the rank with status 1 (vmmc run then reports
 * the job as failed). */
#ifndef DSM_TEST_H
#define DSM_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include "vmmc/dsm.h"

#define DT_FAIL(...)                                                                      \
    do {                                                                                  \
        fprintf(stderr, "FAIL rank %d %s:%d: ", vmmc_dsm_rank(), __FILE__, __LINE__);    \
        fprintf(stderr, __VA_ARGS__);                                                     \
        fprintf(stderr, "\n");                                                            \
        exit(1);                                                                          \
    } while (0)

/* a call that must succeed */
#define DT_OK(call)                                                                       \
    do {                                                                                  \
        int dt_st_ = (call);                                                              \
        if (dt_st_ != 0)                                                                  \
            DT_FAIL("%s: %s: %s", #call, vmmc_strerror(dt_st_), vmmc_dsm_last_error());   \
    } while (0)

#define DT_EQ(got, want)                                                                  \
    do {                                                                                  \
        long long dt_g_ = (long long)(got), dt_w_ = (long long)(want);                    \
        if (dt_g_ != dt_w_)                                                               \
            DT_FAIL("%s = %lld, expected %lld", #got, dt_g_, dt_w_);                      \
    } while (0)

#define DT_PASS(what)                                                                     \
    do {                                                                                  \
        if (vmmc_dsm_rank() == 0)                                                         \
            printf("ok %s\n", what);                                                      \
        fflush(stdout);                                                                   \
    } while (0)

#endif
