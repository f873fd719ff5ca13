/* A rank that dies mid-run: the others get an error, not a hang.
 *
 *   t_dsm_dead fault    rank 1 owns a minipage and dies; rank 0 then reads
 *                       it: the fault cannot be served, so rank 0 prints
 *                       why and exits with status 1 by itself.
 *   t_dsm_dead barrier  rank 1 dies before a barrier: rank 0's
 *                       vmmc_dsm_barrier returns VMMC_ERR_PEER_DEAD and
 *                       rank 0 exits with status 0 after printing "ok".
 *
 * t_dsm_dead.sh runs both under `vmmc run` with a long grace period (so the
 * launcher does not end rank 0 first) and checks rank 0's words. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dsm_test.h"

static void wait_gone(pid_t pid)
{
    /* the launcher reaps its ranks: kill(pid, 0) fails once it did */
    struct timespec ts = {0, 5 * 1000000L};
    for (int i = 0; i < 12000; i++) {
        if (kill(pid, 0) != 0 && errno == ESRCH)
            return;
        nanosleep(&ts, NULL);
    }
    DT_FAIL("rank 1 (pid %d) is still there after 60 s", (int)pid);
}

int main(int argc, char **argv)
{
    int fault = argc > 1 && strcmp(argv[1], "fault") == 0;
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank();
    long *pid = NULL, *data = NULL;
    if (me == 1) {
        pid = vmmc_dsm_malloc(sizeof *pid);
        data = vmmc_dsm_malloc(sizeof *data);
        if (!pid || !data)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        *pid = getpid();
        *data = 42;
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&pid, 1));
    DT_OK(vmmc_dsm_bcast_ptr((void **)&data, 1));
    long victim = *pid; /* served by rank 1, alive */
    DT_OK(vmmc_dsm_barrier());
    if (me == 1)
        _exit(3);
    if (me != 0) {
        (void)vmmc_dsm_barrier();
        return 0;
    }
    wait_gone((pid_t)victim);
    if (fault) {
        long v = *data; /* owned by the dead rank: never served */
        printf("FAIL read %ld from a dead rank's minipage\n", v);
        return 2;
    }
    int st = vmmc_dsm_barrier();
    if (st != VMMC_ERR_PEER_DEAD) {
        printf("FAIL barrier with a dead rank: %d (%s)\n", st, vmmc_dsm_last_error());
        return 2;
    }
    printf("ok barrier: %s\n", vmmc_dsm_last_error());
    return 0;
}
