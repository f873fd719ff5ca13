/* Several threads per rank: each thread writes its own minipages (of pages
 * shared with every other thread of every rank) and all of them read one
 * minipage owned elsewhere at the same time (one request in flight per page
 * and view, the others wait for it). Values checked everywhere. */
#include <pthread.h>

#include "dsm_test.h"

#define THREADS 3
#define PER 4
#define ROUNDS 100

static long **obj;
static long *common;
static int me, n;

static void *work(void *arg)
{
    int t = (int)(long)arg;
    long sum = 0;
    for (int i = 0; i < 64; i++)
        sum += common[i]; /* every thread of every rank at once */
    if (sum != 64L * 63 / 2)
        DT_FAIL("thread %d read sum %ld", t, sum);
    for (int r = 0; r < ROUNDS; r++)
        for (int j = 0; j < PER; j++)
            *obj[(me * THREADS + t) * PER + j] = r * 1000 + me * 100 + t * 10 + j;
    return NULL;
}

int main(void)
{
    DT_OK(vmmc_dsm_init(NULL));
    me = vmmc_dsm_rank();
    n = vmmc_dsm_size();
    int total = n * THREADS * PER;
    if (me == 0) {
        obj = vmmc_dsm_malloc((size_t)total * sizeof *obj);
        common = vmmc_dsm_malloc(64 * sizeof *common);
        if (!obj || !common)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        for (int i = 0; i < total; i++)
            if (!(obj[i] = vmmc_dsm_malloc(sizeof(long))))
                DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&obj, 0));
    DT_OK(vmmc_dsm_bcast_ptr((void **)&common, 0));
    if (me == n - 1)
        for (int i = 0; i < 64; i++)
            common[i] = i; /* owned by the last rank from now on */
    DT_OK(vmmc_dsm_barrier());
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, work, (void *)(long)t) != 0)
            DT_FAIL("pthread_create");
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    DT_OK(vmmc_dsm_barrier());
    for (int r = 0; r < n; r++)
        for (int t = 0; t < THREADS; t++)
            for (int j = 0; j < PER; j++)
                DT_EQ(*obj[(r * THREADS + t) * PER + j],
                      (ROUNDS - 1) * 1000 + r * 100 + t * 10 + j);
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("threads of every rank fault side by side");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
