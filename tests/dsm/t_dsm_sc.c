/* Sequential consistency, with two litmus tests that the hardware alone
 * (x86 TSO with store buffers) does not pass, between ranks 0 and 1:
 *
 *  store buffering: x = y = 0; rank 0: x = 1, a = y; rank 1: y = 1, b = x.
 *    SC forbids a == 0 && b == 0.
 *  message passing: rank 0 writes data = i then flag = i; rank 1 reads
 *    flag then data: if it sees flag == i it must see data == i.
 *
 * x, y, data and flag are minipages of the same pages (different views),
 * written and read from both sides in every round. Other ranks only meet
 * at the barriers. */
#include <sched.h>

#include "dsm_test.h"

#define ROUNDS 150

typedef struct cell {
    volatile long v;
} cell_t;

int main(void)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank();
    cell_t **c = NULL; /* x[i], y[i] for each round; data, flag */
    if (me == 0) {
        c = vmmc_dsm_malloc((2 * ROUNDS + 2) * sizeof *c);
        if (!c)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        for (int i = 0; i < 2 * ROUNDS + 2; i++)
            if (!(c[i] = vmmc_dsm_malloc(sizeof(cell_t))))
                DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&c, 0));
    cell_t **x = c, **y = c + ROUNDS, *data = c[2 * ROUNDS], *flag = c[2 * ROUNDS + 1];
    long *res = vmmc_dsm_malloc(ROUNDS * sizeof *res); /* this rank's results */
    if (!res)
        DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    for (int i = 0; i < ROUNDS; i++) {
        DT_OK(vmmc_dsm_barrier());
        if (me == 0) {
            x[i]->v = 1;
            res[i] = y[i]->v;
        } else if (me == 1) {
            y[i]->v = 1;
            res[i] = x[i]->v;
        }
    }
    DT_OK(vmmc_dsm_barrier());
    /* rank 0 collects rank 1's results through shared memory */
    long *r1 = res;
    DT_OK(vmmc_dsm_bcast_ptr((void **)&r1, 1));
    if (me == 0)
        for (int i = 0; i < ROUNDS; i++)
            if (res[i] == 0 && r1[i] == 0)
                DT_FAIL("round %d: both ranks read 0 (store buffering seen)", i);
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("store buffering never seen");

    /* rank 1 reads until it sees the last flag: a stale copy never
     * updated would keep it reading (and the test would time out) */
    const long last = ROUNDS * 4;
    if (me == 0) {
        for (long i = 1; i <= last; i++) {
            data->v = i;
            flag->v = i;
        }
    } else if (me == 1) {
        for (;;) {
            long f = flag->v;
            long d = data->v;
            if (d < f)
                DT_FAIL("read flag %ld then data %ld", f, d);
            if (f == last)
                break;
            sched_yield();
        }
    }
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("message passing ordered");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
