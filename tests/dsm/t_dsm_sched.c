/* VMMC_DSM_SERVICE_SLICE reaches the service thread and only it: run with
 * VMMC_DSM_SERVICE_SLICE=200us, every rank makes its service thread handle
 * a message (rank 0 reads what rank 1 wrote: rank 1's thread serves the
 * request, rank 0's receives the data), then looks at each of its threads'
 * slice in /proc/self/task/<tid>/sched: the service thread's must be
 * 200 us, the application thread's the kernel's default. Skips (77) where
 * the kernel does not give a thread the slice it asks for (before Linux
 * 6.12). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dsm_test.h"

/* The slice of thread @tid in ns, or -1 if the kernel does not say. */
static long long slice_of(const char *tid)
{
    char path[256], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%s/sched", tid);
    FILE *f = fopen(path, "r");
    long long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "se.slice", 8)) {
            char *c = strchr(line, ':');
            if (c)
                v = atoll(c + 1);
        }
    if (f)
        fclose(f);
    return v;
}

struct attr { /* struct sched_attr */
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};

/* Does this kernel give a thread the slice it asks for? (a scratch thread) */
static void *probe(void *arg)
{
    char tid[32];
    long t = (long)syscall(SYS_gettid);
    snprintf(tid, sizeof tid, "%ld", t);
    struct attr a = {.size = sizeof a, .runtime = 300000};
    *(int *)arg = syscall(SYS_sched_setattr, t, &a, 0) == 0 && slice_of(tid) == 300000;
    return NULL;
}

int main(void)
{
    int custom = 0;
    pthread_t th;
    if (pthread_create(&th, NULL, probe, &custom) == 0)
        pthread_join(th, NULL);
    if (!custom) {
        printf("skip: this kernel does not give a thread the slice it asks for\n");
        return 77;
    }
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank();
    long *a = NULL;
    if (me == 1 && !(a = vmmc_dsm_malloc(64)))
        DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    DT_OK(vmmc_dsm_bcast_ptr((void **)&a, 1));
    if (me == 1)
        a[0] = 42;
    DT_OK(vmmc_dsm_barrier());
    if (me == 0)
        DT_EQ(a[0], 42);
    DT_OK(vmmc_dsm_barrier());
    char self[32];
    snprintf(self, sizeof self, "%ld", (long)syscall(SYS_gettid));
    long long mine = slice_of(self);
    /* The service thread asks in a progress pass of its own; on a loaded
     * machine it may not have run one yet (the barriers' answers were
     * handled by this thread), but it wakes at least once a second. */
    int found = 0;
    for (int tries = 0; tries < 100; tries++) {
        found = 0;
        DIR *d = opendir("/proc/self/task");
        if (!d)
            DT_FAIL("opendir /proc/self/task");
        for (struct dirent *e; (e = readdir(d));)
            if (e->d_name[0] != '.' && slice_of(e->d_name) == 200000)
                found++;
        closedir(d);
        if (found || me > 1)
            break;
        usleep(100000);
    }
    if (mine == 200000)
        DT_FAIL("the application thread's slice was changed too");
    if (me <= 1 && found != 1)
        DT_FAIL("rank %d: %d threads with a 200 us slice, expected the service thread only", me,
                found);
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("the service thread asked for its slice");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
