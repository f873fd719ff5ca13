/* The service thread's place in the scheduler.
 *
 * A rank whose application thread computes serves requests in its service
 * thread, which sleeps until a notification arrives. On a core the computing
 * thread keeps busy, Linux's fair scheduler (EEVDF) lets a just-woken thread
 * of the same weight and default slice wait until the running one's slice
 * ends: requests then wait milliseconds. Two ways to be picked at once, both
 * for this thread only and without touching the application's threads:
 *
 *   - a shorter requested slice (VMMC_DSM_SERVICE_SLICE; sched_setattr with
 *     sched_runtime on a SCHED_OTHER thread, Linux 6.12 and later): an
 *     earlier virtual deadline, so the waking thread may preempt; needs no
 *     privilege, and the thread runs for microseconds anyway;
 *   - a lower nice value (VMMC_DSM_SERVICE_NICE), a larger share of the
 *     core; lowering nice needs CAP_SYS_NICE or RLIMIT_NICE, so it is only
 *     tried when asked for.
 * Both are off by default: on a 2-core machine loaded by other processes
 * neither changed the serving delay measurably (`vmmc bench dsm`,
 * serve_busy, alternating runs; docs/dsm.md). Either that the kernel
 * refuses is left as it is (VMMC_DSM_DEBUG says why). A progress hook,
 * installed only when one is set, applies them in the first pass of every
 * thread that runs the rank's progress and is not an application thread
 * (marked in vmmc_dsm_init/finalize and in a wait that handles its own
 * answer): the service thread's first pass, before any message. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dsm/dsm_int.h"

struct dsm_sched_attr { /* struct sched_attr of <linux/sched/types.h> */
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};

static __thread int tuned; /* 1: done (or not to be done) in this thread */

void dsm_sched_skip_thread(int skip)
{
    tuned = skip;
}

void dsm_sched_service_thread(void)
{
    if (tuned)
        return;
    tuned = 1;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    if (dsm_cfg.service_nice != 0 && setpriority(PRIO_PROCESS, (id_t)tid, (int)dsm_cfg.service_nice)) {
        if (dsm_cfg.debug)
            fprintf(stderr, "vmmc dsm: rank %d: service thread nice %lld: %s\n", dsm.me,
                    (long long)dsm_cfg.service_nice, strerror(errno));
    }
#ifdef SYS_sched_setattr
    if (dsm_cfg.service_slice) {
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, (id_t)tid);
        struct dsm_sched_attr a = {.size = sizeof a, .policy = 0 /* SCHED_OTHER */,
                                   .nice = errno ? 0 : nice, .runtime = dsm_cfg.service_slice};
        if (syscall(SYS_sched_setattr, tid, &a, 0) != 0 && dsm_cfg.debug)
            fprintf(stderr, "vmmc dsm: rank %d: service thread slice %llu ns: %s\n", dsm.me,
                    (unsigned long long)dsm_cfg.service_slice, strerror(errno));
    }
#endif
}

static int sched_hook(void *arg)
{
    (void)arg;
    dsm_sched_service_thread();
    return 0;
}

static int hooked;

int dsm_sched_hook(int add)
{
    if (!add) {
        if (hooked)
            vmmc_progress_hook_remove(dsm.ep, sched_hook, NULL);
        hooked = 0;
        return VMMC_OK;
    }
    if (!dsm_cfg.service_nice && !dsm_cfg.service_slice)
        return VMMC_OK;
    int st = vmmc_progress_hook_add(dsm.ep, sched_hook, NULL, NULL);
    if (st)
        return dsm_error_vmmc(st, "vmmc_dsm_init: adding the scheduling hook");
    hooked = 1;
    return VMMC_OK;
}
