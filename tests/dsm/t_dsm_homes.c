/* Homes spread over the ranks (VMMC_DSM_MANAGERS=all, the default): faults
 * on minipages homed elsewhere than rank 0 never reach rank 0, so a rank 0
 * that computes delays nobody. 4 ranks.
 *
 * Ranks 1, 2 and 3 in turn allocate K page-sized objects each (K pages in a
 * row). Finding the homes: for each object, a rank that is neither its
 * owner nor rank 0 reads it once (its first read goes to the home, which
 * forwards it to the owner); rank 0's `forwards` counter tells whether rank
 * 0 was the home. With homes spread (page mod ranks) at least K - 2 of
 * each rank's objects are homed elsewhere; with VMMC_DSM_MANAGERS=1 none is
 * (the test checks both, as the setting says).
 *
 * Then rank 0 computes: a loop that calls nothing and only reads the
 * "done" words of ranks 1-3 (one object homed elsewhere per rank, of which
 * rank 0 holds a read copy, so the loop faults only when a word changes).
 * Meanwhile ranks 1-3 run ROUNDS rounds on their other objects homed
 * elsewhere: each writes its own (a write fault that takes the others'
 * copies back) and reads everyone else's (read faults), every value checked
 * to move forward only; then each sets its done word. Rank 0 leaves its
 * loop when all three are set (bounded by LIMIT_S, a generous limit that
 * fails the test rather than hanging it). Over the loop rank 0 must have
 * forwarded nothing (as a home) and served nothing as owner; what reaches
 * it is only about its own copies of the done words (invalidations, at
 * least one per word, more when its read catches a word between its
 * writer's fault and the store). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsm_test.h"

#define K 6
#define NOBJ (3 * K)
#define ROUNDS 40
#define LIMIT_S 100.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank();
    if (vmmc_dsm_size() != 4) {
        if (me == 0)
            printf("SKIP: needs 4 ranks, not %d\n", vmmc_dsm_size());
        DT_OK(vmmc_dsm_finalize());
        return 77;
    }
    const char *mg = getenv("VMMC_DSM_MANAGERS");
    int spread = !mg || strcmp(mg, "1") != 0;
    volatile long *obj[NOBJ];
    for (int o = 1; o <= 3; o++) { /* in turn: each rank's pages in a row */
        for (int k = 0; k < K; k++) {
            void *p = NULL;
            if (me == o && !(p = vmmc_dsm_malloc(4096)))
                DT_FAIL("malloc: %s", vmmc_dsm_last_error());
            DT_OK(vmmc_dsm_bcast_ptr(&p, o));
            obj[(o - 1) * K + k] = p;
        }
        DT_OK(vmmc_dsm_barrier());
    }
    /* obj j is owned by rank 1 + j / K */
    volatile long *home0 = NULL; /* home0[j]: rank 0 is obj j's home */
    if (me == 0 && !(home0 = vmmc_dsm_malloc(NOBJ * sizeof *home0)))
        DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    DT_OK(vmmc_dsm_bcast_ptr((void **)&home0, 0));
    for (int j = 0; j < NOBJ; j++) {
        int owner = 1 + j / K, reader = owner % 3 + 1;
        vmmc_dsm_stats_t s0, s1;
        DT_OK(vmmc_dsm_stats(&s0));
        DT_OK(vmmc_dsm_barrier());
        if (me == reader)
            DT_EQ(obj[j][0], 0);
        DT_OK(vmmc_dsm_barrier());
        DT_OK(vmmc_dsm_stats(&s1));
        if (me == 0)
            home0[j] = s1.forwards > s0.forwards;
    }
    DT_OK(vmmc_dsm_barrier());
    /* objects homed elsewhere: each owner's first is its done word, the rest the work */
    int work[NOBJ], nwork = 0, done_obj[4] = {-1, -1, -1, -1}, elsewhere = 0;
    for (int j = 0; j < NOBJ; j++) {
        if (home0[j])
            continue;
        elsewhere++;
        int owner = 1 + j / K;
        if (done_obj[owner] < 0)
            done_obj[owner] = j;
        else
            work[nwork++] = j;
    }
    if (!spread) {
        DT_EQ(elsewhere, 0); /* rank 0 manages every minipage */
        DT_OK(vmmc_dsm_barrier());
        DT_PASS("with VMMC_DSM_MANAGERS=1 rank 0 is the home of every minipage");
        DT_OK(vmmc_dsm_finalize());
        return 0;
    }
    if (elsewhere < 3 * (K - 2))
        DT_FAIL("only %d of %d objects (on %d pages in a row per rank) are homed elsewhere "
                "than rank 0",
                elsewhere, NOBJ, K);
    if (me == 0) {
        for (int o = 1; o <= 3; o++) /* read copies of the done words */
            DT_EQ(obj[done_obj[o]][0], 0);
    }
    vmmc_dsm_stats_t a, b;
    DT_OK(vmmc_dsm_barrier());
    DT_OK(vmmc_dsm_stats(&a));
    if (me == 0) {
        double t0 = now_s(), t = t0;
        unsigned long x = 1, spins = 0;
        while (!(obj[done_obj[1]][0] && obj[done_obj[2]][0] && obj[done_obj[3]][0])) {
            for (int k = 0; k < 1000; k++) /* compute: no call, no fault */
                x = x * 6364136223846793005ul + 1442695040888963407ul;
            if ((++spins & 1023) == 0 && (t = now_s()) - t0 > LIMIT_S)
                DT_FAIL("ranks 1-3 did not finish within %.0f s", LIMIT_S);
        }
        DT_OK(vmmc_dsm_stats(&b));
        printf("rank 0 computed %lu rounds (x=%lx) while ranks 1-3 worked\n", spins, x & 0xff);
        if (b.forwards != a.forwards || b.requests_served != a.requests_served)
            DT_FAIL("rank 0 forwarded %llu requests and served %llu as owner while computing",
                    (unsigned long long)(b.forwards - a.forwards),
                    (unsigned long long)(b.requests_served - a.requests_served));
        printf("rank 0 lost its copy of a done word %llu times (it reads them)\n",
               (unsigned long long)(b.invalidations - a.invalidations));
    } else {
        long last[NOBJ] = {0};
        for (long r = 1; r <= ROUNDS; r++) {
            for (int i = 0; i < nwork; i++) {
                int j = work[i];
                if (1 + j / K == me) {
                    obj[j][0] = r;
                    obj[j][1] = r * 7;
                } else {
                    long v = obj[j][0], w = obj[j][1];
                    if (v < last[j] || v > ROUNDS || w != v * 7)
                        DT_FAIL("object %d read %ld/%ld after %ld", j, v, w, last[j]);
                    last[j] = v;
                }
            }
        }
        obj[done_obj[me]][0] = 1;
        DT_OK(vmmc_dsm_stats(&b));
        if (b.read_faults == a.read_faults || b.write_faults == a.write_faults)
            DT_FAIL("rank %d took no fault in the rounds", me);
    }
    DT_OK(vmmc_dsm_barrier());
    /* every final value, everywhere */
    for (int i = 0; i < nwork; i++) {
        int j = work[i];
        DT_EQ(obj[j][0], ROUNDS);
        DT_EQ(obj[j][1], ROUNDS * 7);
    }
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("faults on minipages homed elsewhere never reached a computing rank 0");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
