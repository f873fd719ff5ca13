/* Distributed locks: mutual exclusion and handing over among all PEs.
 *  - every PE takes the lock ITERS times; inside, it checks that nobody
 *    else is inside (a fetch_inc of an occupancy word on PE 0 returns 0)
 *    and increments a plain counter on PE 0 by get, (sometimes a pause,)
 *    put; the counter ends at npes * ITERS exactly: no update was lost;
 *  - the same with a lock in static data and the counter on the last PE;
 *  - test_lock never waits: it fails while another PE (or this one) holds
 *    the lock and succeeds once it is free;
 *  - PEs that ask one after the other get the lock in that order (the
 *    test watches the queue's tail, word 0 of the lock on PE 0).
 * `t_lock clear_unheld` and `t_lock set_twice` are the error cases. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "shmem_test.h"

#define ITERS 150

static long slock;    /* static symmetric data: zero at start */
static long scounter; /* counter on the last PE */

static void exclusion(long *lock, long *counter, int owner, int *inside, const char *what)
{
    int me = shmem_my_pe(), npes = shmem_n_pes();
    shmem_barrier_all();
    for (int i = 0; i < ITERS; i++) {
        shmem_set_lock(lock);
        int others = shmem_int_atomic_fetch_inc(inside, 0);
        if (others != 0)
            ST_FAIL("%s: %d other PE(s) inside the critical section", what, others);
        long v = shmem_long_g(counter, owner);
        if ((i + me) % 16 == 0)
            usleep(200); /* let the others pile up in the queue */
        shmem_long_p(counter, v + 1, owner);
        shmem_int_atomic_add(inside, -1, 0);
        shmem_clear_lock(lock);
    }
    shmem_barrier_all();
    if (me == owner)
        ST_EQ(*counter, (long)npes * ITERS);
    ST_EQ(*lock, 0); /* every word of the lock is zero again on every PE */
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    long *lock = shmem_calloc(1, sizeof(long));
    long *counter = shmem_calloc(1, sizeof(long));
    int *inside = shmem_calloc(1, sizeof(int));
    int *flag = shmem_calloc(1, sizeof(int));
    ST_CHECK(lock && counter && inside && flag);
    if (!strcmp(mode, "clear_unheld")) {
        shmem_clear_lock(lock); /* "this PE does not hold the lock" */
        return 0;
    }
    if (!strcmp(mode, "set_twice")) {
        if (me == 0) {
            shmem_set_lock(lock);
            shmem_set_lock(lock); /* "this PE holds the lock already" */
        }
        shmem_barrier_all();
        return 0;
    }

    exclusion(lock, counter, 0, inside, "heap lock");
    ST_OK("set_lock/clear_lock: mutual exclusion, no lost update (heap lock)");
    exclusion(&slock, &scounter, npes - 1, inside, "static lock");
    ST_OK("set_lock/clear_lock: mutual exclusion, no lost update (static lock)");

    /* test_lock: PE 0 holds the lock; every other PE fails to take it. */
    if (me == 0) {
        ST_EQ(shmem_test_lock(lock), 0);
        ST_EQ(shmem_test_lock(lock), 1); /* held by this PE */
    }
    shmem_barrier_all();
    if (me != 0)
        ST_EQ(shmem_test_lock(lock), 1);
    shmem_barrier_all();
    if (me == 0)
        shmem_clear_lock(lock);
    /* Now free: each PE polls test_lock until it gets the lock once. */
    int tries = 0;
    while (shmem_test_lock(lock) != 0) {
        if (++tries > 200000)
            ST_FAIL("test_lock never succeeded on a free lock");
        usleep(50);
    }
    int others = shmem_int_atomic_fetch_inc(inside, 0);
    ST_EQ(others, 0);
    shmem_int_atomic_add(inside, -1, 0);
    shmem_int_atomic_inc(flag, 0);
    shmem_clear_lock(lock);
    shmem_barrier_all();
    if (me == 0)
        ST_EQ(*flag, npes);
    ST_OK("test_lock: fails while held, succeeds once free, never waits");

    /* First come, first served: PE 0 holds the lock, PEs 1, 2, ... ask in
     * that order (each waits until the queue's tail, word 0 of the lock on
     * PE 0, names the one before it), and get it in that order. */
    int *order = shmem_calloc((size_t)npes + 1, sizeof(int));
    shmem_barrier_all();
    if (me == 0)
        shmem_set_lock(lock);
    shmem_barrier_all();
    if (me != 0) {
        uint32_t *tail = (uint32_t *)(void *)lock;
        int spins = 0;
        while (shmem_uint32_atomic_fetch(tail, 0) != (uint32_t)me) {
            if (++spins > 400000)
                ST_FAIL("PE %d never saw PE %d in the queue", me, me - 1);
            usleep(50);
        }
        shmem_set_lock(lock);
    } else {
        uint32_t *tail = (uint32_t *)(void *)lock;
        int spins = 0;
        while (shmem_uint32_atomic_fetch(tail, 0) != (uint32_t)npes) {
            if (++spins > 400000)
                ST_FAIL("the last PE never entered the queue");
            usleep(50);
        }
    }
    int pos = shmem_int_atomic_fetch_inc(&order[npes], 0);
    shmem_int_p(&order[pos], me, 0);
    shmem_clear_lock(lock);
    shmem_barrier_all();
    if (me == 0)
        for (int i = 0; i < npes; i++)
            if (order[i] != i)
                ST_FAIL("lock granted out of order: position %d went to PE %d", i, order[i]);
    ST_OK("set_lock grants the lock in the order PEs asked for it");

    shmem_barrier_all();
    shmem_free(order);
    shmem_free(flag);
    shmem_free(inside);
    shmem_free(counter);
    shmem_free(lock);
    shmem_finalize();
    return 0;
}
