/* Sequential consistency, with two litmus tests that the hardware alone
 * (x86 TSO with store buffers) does not pass, between ranks A = n-2 and
 * B = n-1 (A allocates, so with 3 ranks the owner is not the manager and
 * reads go one hop):
 *
 *  store buffering: x = y = 0; A: x = 1, a = y; B: y = 1, b = x.
 *    SC forbids a == 0 && b == 0.
 *  message passing: A writes data = i then flag = i; B reads
 *    flag then data: if it sees flag == i it must see data == i; it
 *    answers through ack before A writes i + 1.
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
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    int A = n - 2, B = n - 1; /* the players; with 3 ranks neither is the manager */
    cell_t **c = NULL; /* x[i], y[i] for each round; data, flag, ack */
    if (me == A) {
        c = vmmc_dsm_malloc((2 * ROUNDS + 3) * sizeof *c);
        if (!c)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        for (int i = 0; i < 2 * ROUNDS + 3; i++)
            if (!(c[i] = vmmc_dsm_malloc(sizeof(cell_t))))
                DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&c, A));
    cell_t **x = c, **y = c + ROUNDS, *data = c[2 * ROUNDS], *flag = c[2 * ROUNDS + 1],
           *ack = c[2 * ROUNDS + 2];
    long *res = vmmc_dsm_malloc(ROUNDS * sizeof *res); /* this rank's results */
    if (!res)
        DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    for (int i = 0; i < ROUNDS; i++) {
        DT_OK(vmmc_dsm_barrier());
        if (me == A) {
            x[i]->v = 1;
            res[i] = y[i]->v;
        } else if (me == B) {
            y[i]->v = 1;
            res[i] = x[i]->v;
        }
    }
    DT_OK(vmmc_dsm_barrier());
    /* A collects B's results through shared memory */
    long *r1 = res;
    DT_OK(vmmc_dsm_bcast_ptr((void **)&r1, B));
    if (me == A)
        for (int i = 0; i < ROUNDS; i++)
            if (res[i] == 0 && r1[i] == 0)
                DT_FAIL("round %d: both ranks read 0 (store buffering seen)", i);
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("store buffering never seen");

    /* ping-pong: A writes data then flag and waits for B's ack;
     * B reads flag then data until the flag is new. A copy that is
     * never invalidated keeps a rank waiting (the test then times out). */
    for (long i = 1; i <= ROUNDS; i++) {
        if (me == A) {
            data->v = i;
            flag->v = i;
            while (ack->v != i)
                sched_yield();
        } else if (me == B) {
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
