/* Point-to-point synchronisation on every type of its table: every PE waits
 * on its own ivars while its left neighbour writes them after a delay (the
 * waiter really sleeps), then checks the test_* results on values it knows.
 *  - test family on known values, including the signedness of the compare
 *    (0 > (T)-1 only for a signed type);
 *  - wait_until, wait_until_any with a status array, wait_until_some until
 *    every written index was reported, wait_until_all, the _vector forms;
 *  - nelems 0 and all-excluded status: any gives SIZE_MAX, some 0, all
 *    returns, test_all 1;
 *  - signal_wait_until returns the value that satisfied it; the deprecated
 *    shmem_wait / shmem_<T>_wait wait while the ivar equals the value.
 * `t_p2p badcmp` and `t_p2p nonsym` are the error cases (t_p2p.cmake). */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "shmem_test.h"

#define NV 8
#define DELAY_US 20000

static int me, npes, left, right;

/* The writer's side of a round: after a delay, put each (index, value). */
#define PUT_LATER(T, N, iv, idx, val)                                                          \
    do {                                                                                       \
        usleep(DELAY_US);                                                                      \
        shmem_##N##_p(&(iv)[idx], (T)(val), right);                                            \
        shmem_quiet();                                                                         \
    } while (0)

#define IS_SIGNED(T) ((T)-1 < (T)1)

#define TEST_P2P(T, N)                                                                         \
    static void p2p_##N(void)                                                                  \
    {                                                                                          \
        T *iv = shmem_calloc(NV, sizeof(T));                                                   \
        int status[NV] = {0};                                                                  \
        size_t idx[NV];                                                                        \
        T vals[NV];                                                                            \
        ST_CHECK(iv != NULL);                                                                  \
        shmem_barrier_all();                                                                   \
        /* Known values (all 0): every comparison, every test form. */                        \
        ST_EQ(shmem_##N##_test(&iv[0], SHMEM_CMP_EQ, 0), 1);                                   \
        ST_EQ(shmem_##N##_test(&iv[0], SHMEM_CMP_NE, 0), 0);                                   \
        ST_EQ(shmem_##N##_test(&iv[0], SHMEM_CMP_GT, 0), 0);                                   \
        ST_EQ(shmem_##N##_test(&iv[0], SHMEM_CMP_LE, 0), 1);                                   \
        ST_EQ(shmem_##N##_test(&iv[0], SHMEM_CMP_LT, 0), 0);                                   \
        ST_EQ(shmem_##N##_test(&iv[0], SHMEM_CMP_GE, 0), 1);                                   \
        ST_EQ(shmem_##N##_test(&iv[0], SHMEM_CMP_GT, (T)-1), IS_SIGNED(T));                    \
        ST_EQ(shmem_##N##_test(&iv[0], SHMEM_CMP_LT, (T)-1), !IS_SIGNED(T));                   \
        ST_EQ(shmem_##N##_test_all(iv, NV, NULL, SHMEM_CMP_EQ, 0), 1);                         \
        ST_EQ(shmem_##N##_test_all(iv, NV, NULL, SHMEM_CMP_NE, 0), 0);                         \
        ST_EQ(shmem_##N##_test_any(iv, NV, NULL, SHMEM_CMP_NE, 0), SIZE_MAX);                  \
        ST_EQ(shmem_##N##_test_any(iv, NV, NULL, SHMEM_CMP_EQ, 0), 0);                         \
        ST_EQ(shmem_##N##_test_some(iv, NV, idx, NULL, SHMEM_CMP_NE, 0), 0);                   \
        ST_EQ(shmem_##N##_test_some(iv, NV, idx, NULL, SHMEM_CMP_GE, 0), NV);                  \
        for (size_t i_ = 0; i_ < NV; i_++)                                                     \
            ST_EQ(idx[i_], i_);                                                                \
        /* Nothing to wait for. */                                                            \
        for (int i_ = 0; i_ < NV; i_++)                                                        \
            status[i_] = 1;                                                                    \
        ST_EQ(shmem_##N##_wait_until_any(iv, NV, status, SHMEM_CMP_NE, 0), SIZE_MAX);          \
        ST_EQ(shmem_##N##_wait_until_any(iv, 0, NULL, SHMEM_CMP_NE, 0), SIZE_MAX);             \
        ST_EQ(shmem_##N##_wait_until_some(iv, NV, idx, status, SHMEM_CMP_NE, 0), 0);           \
        ST_EQ(shmem_##N##_wait_until_some(iv, 0, idx, NULL, SHMEM_CMP_NE, 0), 0);              \
        shmem_##N##_wait_until_all(iv, NV, status, SHMEM_CMP_NE, 0);                           \
        shmem_##N##_wait_until_all(iv, 0, NULL, SHMEM_CMP_NE, 0);                              \
        ST_EQ(shmem_##N##_test_all(iv, NV, status, SHMEM_CMP_NE, 0), 1);                       \
        ST_EQ(shmem_##N##_test_any(iv, NV, status, SHMEM_CMP_EQ, 0), SIZE_MAX);                \
        ST_EQ(shmem_##N##_test_some(iv, NV, idx, status, SHMEM_CMP_EQ, 0), 0);                 \
        memset(status, 0, sizeof status);                                                      \
        shmem_barrier_all();                                                                   \
        /* Round 1: wait_until on one ivar. */                                                 \
        PUT_LATER(T, N, iv, 3, 7);                                                             \
        shmem_##N##_wait_until(&iv[3], SHMEM_CMP_GE, 7);                                       \
        ST_EQ(iv[3], 7);                                                                       \
        ST_EQ(shmem_##N##_test_any(iv, NV, NULL, SHMEM_CMP_NE, 0), 3);                         \
        ST_EQ(shmem_##N##_test_some(iv, NV, idx, NULL, SHMEM_CMP_NE, 0), 1);                   \
        ST_EQ(idx[0], 3);                                                                      \
        ST_EQ(shmem_##N##_test_all(iv, NV, NULL, SHMEM_CMP_EQ, 0), 0);                         \
        status[3] = 1;                                                                         \
        ST_EQ(shmem_##N##_test_all(iv, NV, status, SHMEM_CMP_EQ, 0), 1);                       \
        ST_EQ(shmem_##N##_test_any(iv, NV, status, SHMEM_CMP_NE, 0), SIZE_MAX);                \
        shmem_barrier_all();                                                                   \
        /* Round 2: wait_until_any skips the excluded ivar 3 (already != 0). */              \
        PUT_LATER(T, N, iv, 5, -2);                                                            \
        ST_EQ(shmem_##N##_wait_until_any(iv, NV, status, SHMEM_CMP_NE, 0), 5);                 \
        ST_CHECK(iv[5] == (T)-2);                                                              \
        /* The signedness of the compare on (T)-2. */                                         \
        ST_EQ(shmem_##N##_test(&iv[5], SHMEM_CMP_LT, 0), IS_SIGNED(T));                        \
        ST_EQ(shmem_##N##_test(&iv[5], SHMEM_CMP_GT, 0), !IS_SIGNED(T));                       \
        status[5] = 1;                                                                         \
        shmem_barrier_all();                                                                   \
        /* Round 3: wait_until_some until indices 1 and 6 were both reported. */              \
        usleep(DELAY_US);                                                                      \
        shmem_##N##_p(&iv[1], 4, right);                                                       \
        shmem_fence();                                                                         \
        usleep(DELAY_US / 4);                                                                  \
        shmem_##N##_p(&iv[6], 4, right);                                                       \
        shmem_quiet();                                                                         \
        int got1 = 0, got6 = 0;                                                                \
        while (!(got1 && got6)) {                                                              \
            size_t n_ = shmem_##N##_wait_until_some(iv, NV, idx, status, SHMEM_CMP_EQ, 4);     \
            ST_CHECK(n_ >= 1 && n_ <= 2);                                                      \
            for (size_t k_ = 0; k_ < n_; k_++) {                                               \
                ST_CHECK(idx[k_] == 1 || idx[k_] == 6);                                        \
                ST_CHECK(status[idx[k_]] == 0);                                                \
                status[idx[k_]] = 1;                                                           \
                got1 |= idx[k_] == 1;                                                          \
                got6 |= idx[k_] == 6;                                                          \
            }                                                                                  \
        }                                                                                      \
        shmem_barrier_all();                                                                   \
        /* Round 4: wait_until_all on the four ivars still 0. */                              \
        usleep(DELAY_US);                                                                      \
        for (int i_ = 0; i_ < NV; i_ += 2)                                                     \
            if (i_ != 6)                                                                       \
                shmem_##N##_p(&iv[i_], 2, right);                                              \
        shmem_##N##_p(&iv[7], 2, right);                                                       \
        shmem_quiet();                                                                         \
        shmem_##N##_wait_until_all(iv, NV, NULL, SHMEM_CMP_NE, 0);                             \
        ST_EQ(iv[0], 2);                                                                       \
        ST_EQ(iv[2], 2);                                                                       \
        ST_EQ(iv[4], 2);                                                                       \
        ST_EQ(iv[7], 2);                                                                       \
        shmem_barrier_all();                                                                   \
        /* Round 5: the _vector forms, each ivar against its own value. */                   \
        memset(status, 0, sizeof status);                                                      \
        for (int i_ = 0; i_ < NV; i_++)                                                        \
            vals[i_] = (T)(i_ + 10);                                                           \
        ST_EQ(shmem_##N##_test_all_vector(iv, NV, NULL, SHMEM_CMP_EQ, vals), 0);               \
        ST_EQ(shmem_##N##_test_any_vector(iv, NV, NULL, SHMEM_CMP_EQ, vals), SIZE_MAX);        \
        shmem_barrier_all();                                                                   \
        usleep(DELAY_US);                                                                      \
        for (int i_ = 0; i_ < NV; i_++)                                                        \
            shmem_##N##_p(&iv[i_], (T)(i_ + 10), right);                                       \
        shmem_quiet();                                                                         \
        for (int i_ = 0; i_ < NV; i_++)                                                        \
            status[i_] = i_ != 6;                                                              \
        ST_EQ(shmem_##N##_wait_until_any_vector(iv, NV, status, SHMEM_CMP_EQ, vals), 6);       \
        shmem_##N##_wait_until_all_vector(iv, NV, NULL, SHMEM_CMP_EQ, vals);                   \
        ST_EQ(shmem_##N##_test_all_vector(iv, NV, NULL, SHMEM_CMP_EQ, vals), 1);               \
        ST_EQ(shmem_##N##_test_any_vector(iv, NV, NULL, SHMEM_CMP_NE, vals), SIZE_MAX);        \
        ST_EQ(shmem_##N##_wait_until_some_vector(iv, NV, idx, NULL, SHMEM_CMP_GE, vals), NV);  \
        ST_EQ(shmem_##N##_test_some_vector(iv, NV, idx, status, SHMEM_CMP_LE, vals), 1);       \
        ST_EQ(idx[0], 6);                                                                      \
        vals[2] = 13; /* iv[2] == 12 < 13 */                                                   \
        ST_EQ(shmem_##N##_test_any_vector(iv, NV, NULL, SHMEM_CMP_LT, vals), 2);               \
        ST_EQ(shmem_##N##_test_all_vector(iv, NV, NULL, SHMEM_CMP_LE, vals), 1);               \
        ST_EQ(shmem_##N##_test_all_vector(iv, NV, NULL, SHMEM_CMP_GE, vals), 0);               \
        shmem_barrier_all();                                                                   \
        shmem_free(iv);                                                                        \
    }
VSHMEM_P2P_TYPES(TEST_P2P)

/* signal_wait_until and the deprecated waits. */
static void p2p_signal_old(void)
{
    uint64_t *sig = shmem_calloc(1, sizeof(uint64_t));
    long *lv = shmem_calloc(1, sizeof(long));
    short *sv = shmem_calloc(1, sizeof(short));
    long long *llv = shmem_calloc(1, sizeof(long long));
    shmem_barrier_all();
    usleep(DELAY_US);
    shmem_uint64_atomic_set(sig, 5, right);
    ST_EQ(shmem_signal_wait_until(sig, SHMEM_CMP_GE, 3), 5);
    ST_EQ(shmem_signal_fetch(sig), 5);
    shmem_barrier_all();
    usleep(DELAY_US);
    shmem_uint64_atomic_add(sig, 0x100000000ull, right);
    ST_EQ(shmem_signal_wait_until(sig, SHMEM_CMP_GT, 0xffffffffull), 0x100000005ull);
    shmem_barrier_all();
    usleep(DELAY_US);
    shmem_long_atomic_set(lv, -1, right);
    shmem_wait(lv, 0);
    ST_EQ(*lv, -1);
    shmem_short_p(sv, 9, right);
    shmem_quiet();
    shmem_short_wait(sv, 0);
    ST_EQ(*sv, 9);
    shmem_longlong_atomic_set(llv, 1LL << 40, right);
    shmem_longlong_wait(llv, 0);
    ST_EQ(*llv, 1LL << 40);
    shmem_barrier_all();
    /* An ivar in static data (not the heap). */
    static int sflag;
    usleep(DELAY_US);
    shmem_int_atomic_set(&sflag, 3, right);
    shmem_int_wait_until(&sflag, SHMEM_CMP_EQ, 3);
    ST_EQ(shmem_int_test(&sflag, SHMEM_CMP_EQ, 3), 1);
    ST_EQ(shmem_int_test_any(&sflag, 1, NULL, SHMEM_CMP_EQ, 3), 0);
    shmem_barrier_all();
    shmem_free(llv);
    shmem_free(sv);
    shmem_free(lv);
    shmem_free(sig);
}

/* A waiter woken by each other PE: every PE adds to a counter on PE 0 and
 * sets its own flag there after a delay; PE 0 waits until all arrived, and
 * collects the flags one by one with wait_until_any, excluding each one it
 * got through the status array. */
static void p2p_many_writers(void)
{
    int *cnt = shmem_calloc(1, sizeof(int));
    long *flags = shmem_calloc((size_t)npes, sizeof(long));
    shmem_barrier_all();
    if (me != 0) {
        usleep((useconds_t)(DELAY_US / 2 * me));
        shmem_int_atomic_inc(cnt, 0);
        usleep((useconds_t)(DELAY_US / 2 * (npes - me)));
        shmem_long_p(&flags[me], me, 0);
        shmem_quiet();
    } else {
        shmem_int_wait_until(cnt, SHMEM_CMP_EQ, npes - 1);
        ST_EQ(*cnt, npes - 1);
        int status[64] = {1}; /* PE 0 writes no flag */
        ST_CHECK(npes <= 64);
        for (int k = 1; k < npes; k++) {
            size_t i = shmem_long_wait_until_any(flags, (size_t)npes, status, SHMEM_CMP_NE, 0);
            ST_CHECK(i >= 1 && i < (size_t)npes);
            ST_EQ(status[i], 0);
            ST_EQ(flags[i], (long)i);
            status[i] = 1;
        }
        ST_EQ(shmem_long_wait_until_any(flags, (size_t)npes, status, SHMEM_CMP_NE, 0), SIZE_MAX);
    }
    shmem_barrier_all();
    shmem_free(flags);
    shmem_free(cnt);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    left = (me + npes - 1) % npes;
    right = (me + 1) % npes;
    (void)left;
    if (!strcmp(mode, "badcmp")) {
        int *x = shmem_calloc(1, sizeof(int));
        shmem_int_wait_until(x, 17, 0); /* "unknown comparison" */
        return 0;
    }
    if (!strcmp(mode, "nonsym")) {
        long local = 0;
        shmem_long_wait_until(&local, SHMEM_CMP_NE, 0); /* would wait forever */
        return 0;
    }
#define RUN(T, N) p2p_##N();
    VSHMEM_P2P_TYPES(RUN)
    ST_OK("wait_until/test families on every type, status arrays, vector forms");
    p2p_signal_old();
    ST_OK("signal_wait_until, shmem_wait and shmem_<T>_wait, an ivar in static data");
    p2p_many_writers();
    ST_OK("one waiter, every other PE writes: counter, then flags collected by wait_until_any");
    shmem_finalize();
    return 0;
}
