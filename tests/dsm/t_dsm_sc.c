/* Sequential consistency, with two litmus tests that the hardware alone
 * (x86 TSO with store buffers) does not pass, between ranks 0 and 1:
 *
 *  store buffering: x = y = 0; rank 0: x = 1, a = y; rank 1: y = 1, b = x.
 *    SC forbids a == 0 && b == 0.
 *  message passing: rank 0 writes data = i then flag = i; rank 1 reads
 *    flag then data: if it sees flag == i it must see data == i; it
 *    answers through ack before rank 0 writes i + 1.
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
    cell_t **c = NULL; /* x[i], y[i] for each round; data, flag, ack */
    if (me == 0) {
        c = vmmc_dsm_malloc((2 * ROUNDS + 3) * sizeof *c);
        if (!c)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        for (int i = 0; i < 2 * ROUNDS + 3; i++)
            if (!(c[i] = vmmc_dsm_malloc(sizeof(cell_t))))
                DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&c, 0));
    cell_t **x = c, **y = c + ROUNDS, *data = c[2 * ROUNDS], *flag = c[2 * ROUNDS + 1],
           *ack = c[2 * ROUNDS + 2];
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

    /* ping-pong: rank 0 writes data then flag and waits for rank 1's ack;
     * rank 1 reads flag then data until the flag is new. A copy that is
     * never invalidated keeps a rank waiting (the test then times out). */
    for (long i = 1; i <= ROUNDS; i++) {
        if (me == 0) {
            data->v = i;
            flag->v = i;
            while (ack->v != i)
                sched_yield();
        } else if (me == 1) {
            for (;;) {
                long f = flag->v;
                long d = data->v;
                if (d < f)
                    DT_FAIL("read flag %ld then data %ld", f, d);
                if (f == i)
                    break;
                sched_yield();
            }
            ack->v = i;
        }
    }
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("message passing ordered");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
