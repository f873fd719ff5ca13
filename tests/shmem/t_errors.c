/* Errors the library detects end the whole job with a clear line: run as
 * `t_errors MODE` under tests/shmem/t_errors.sh, which checks the job's
 * exit status and that stderr names the call and the fault. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "shmem/shmem_int.h"
#include "shmem_test.h"

static int never(void *arg)
{
    (void)arg;
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *rank = getenv("VMMC_RANK");
    if (!strcmp(mode, "before_init")) {
        (void)shmem_my_pe(); /* every PE: "called before shmem_init" */
        return 0;
    }
    if (!strcmp(mode, "heapsize") && rank && atoi(rank) == 1)
        setenv("SHMEM_SYMMETRIC_SIZE", "8M", 1);
    if (!strcmp(mode, "badsize"))
        setenv("SHMEM_SYMMETRIC_SIZE", "12Q", 1);
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    long *h = shmem_malloc(64);
    long local[4] = {0};
    if (!strcmp(mode, "badpe")) {
        if (me == n - 1)
            (void)shmem_ptr(h, n + 5);
    } else if (!strcmp(mode, "nonsym")) {
        if (me == 0)
            shm_put_bytes("shmem_long_put", SHMEM_CTX_DEFAULT, local, h, 8, n - 1);
    } else if (!strcmp(mode, "straddle")) {
        /* starts in the heap, ends past it */
        if (me == 0)
            shm_get_bytes("shmem_getmem", SHMEM_CTX_DEFAULT, local,
                          shm_g.heap + shm_g.heap_size - 8, 16, n - 1);
    } else if (!strcmp(mode, "disagree")) {
        (void)shmem_malloc(me == 0 ? 100 : 200);
    } else if (!strcmp(mode, "badfree")) {
        if (me == 0)
            shmem_free(h + 1);
    } else if (!strcmp(mode, "gexit")) {
        /* the last PE ends the job with 3: PE 0 waits for a change that
         * never comes, the others compute (sleep) far longer than the
         * test's timeout */
        shmem_barrier_all();
        if (me == n - 1)
            shmem_global_exit(3);
        if (me == 0)
            shm_wait(never, NULL);
        for (int i = 0; i < 600; i++)
            usleep(200000);
    } else if (!strcmp(mode, "nofinalize")) {
        /* returning from main without shmem_finalize is a clean end: the
         * library finalizes at exit (a barrier with the other PEs) */
        h[0] = me;
        shmem_barrier_all();
        return 0;
    } else if (!strcmp(mode, "afterfinalize")) {
        shmem_barrier_all();
        shmem_finalize();
        (void)shmem_n_pes();
        return 0;
    } else {
        fprintf(stderr, "t_errors: unknown mode '%s'\n", mode);
        return 2;
    }
    shmem_barrier_all();
    shmem_finalize();
    return 0;
}
