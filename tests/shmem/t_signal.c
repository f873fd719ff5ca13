/* put_signal and put_signal_nbi (typed, sized, mem, ctx), SET and ADD, and
 * shmem_signal_fetch. The receiver waits for the signal and then checks
 * the data, many rounds, so a signal that became visible before its data
 * shows up as stale data. Heap and static data and signal words.
 */
#include "shmem_test.h"

#include <stdint.h>
#include <string.h>

#define BIGN (64 * 1024 / 8) /* elements of 8 bytes: 64 KiB */

static int me, npes, right, left;
static uint64_t s_sig, s_ack;
static uint64_t s_data[BIGN];

/* One round trip's worth of data: every element says round r, sender pe. */
static uint64_t val(int pe, int r, size_t i)
{
    return (uint64_t)pe << 48 | (uint64_t)r << 24 | i;
}

/* Each PE streams @rounds put_signals of @n elements to its right and
 * checks those from its left; the right PE acks each round with a p (which
 * rings) before the next one reuses the buffer. form: 0 typed, 1 typed nbi,
 * 2 ctx mem, 3 ctx sized-64 nbi. */
static void stream(uint64_t *data, uint64_t *sig, uint64_t *ack, size_t n, int rounds, int op,
                   int form)
{
    uint64_t *src = malloc(n * sizeof *src + 1);
    ST_CHECK(src != NULL);
    *sig = 0;
    *ack = 0;
    shmem_barrier_all();
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < n; i++)
            src[i] = val(me, r, i);
        uint64_t s = op == SHMEM_SIGNAL_SET ? (uint64_t)r + 1 : 1;
        switch (form) {
        case 0:
            shmem_uint64_put_signal(data, src, n, sig, s, op, right);
            break;
        case 1:
            shmem_uint64_put_signal_nbi(data, src, n, sig, s, op, right);
            break;
        case 2:
            shmem_ctx_putmem_signal(SHMEM_CTX_DEFAULT, data, src, n * 8, sig, s, op, right);
            break;
        default:
            shmem_ctx_put64_signal_nbi(SHMEM_CTX_DEFAULT, data, src, n, sig, s, op, right);
            break;
        }
        /* receive round r from the left */
        uint64_t got = shmem_signal_wait_until(sig, SHMEM_CMP_GE, (uint64_t)r + 1);
        ST_EQ(got, (uint64_t)r + 1);
        ST_EQ(shmem_signal_fetch(sig), (uint64_t)r + 1);
        for (size_t i = 0; i < n; i++)
            if (data[i] != val(left, r, i))
                ST_FAIL("op %d form %d round %d: element %zu of %zu is %#llx, not %#llx after "
                        "the signal",
                        op, form, r, i, n, (unsigned long long)data[i],
                        (unsigned long long)val(left, r, i));
        shmem_uint64_p(ack, (uint64_t)r + 1, left);
        /* the right PE checked round r: my buffer there may be rewritten */
        shmem_uint64_wait_until(ack, SHMEM_CMP_GE, (uint64_t)r + 1);
        if (form == 1 || form == 3)
            shmem_quiet();
    }
    shmem_barrier_all();
    free(src);
}

static void test_stream(void)
{
    uint64_t *data = shmem_malloc(BIGN * sizeof(uint64_t));
    uint64_t *sig = shmem_malloc(2 * sizeof(uint64_t));
    ST_CHECK(data != NULL && sig != NULL);
    static const size_t ns[] = {1, 100, BIGN};
    for (int op = 0; op < 2; op++)
        for (int form = 0; form < 4; form++)
            for (int k = 0; k < 3; k++) {
                int rounds = ns[k] == BIGN ? 30 : 150;
                stream(data, &sig[0], &sig[1], ns[k], rounds, op, form);
            }
    ST_OK("put_signal SET/ADD, typed/nbi/mem/sized, 8 B..64 KiB: data before signal, heap");
    /* static data and signal words, and the mixes of heap and static */
    stream(s_data, &s_sig, &s_ack, 100, 100, SHMEM_SIGNAL_SET, 0);
    stream(s_data, &s_sig, &s_ack, BIGN, 20, SHMEM_SIGNAL_ADD, 1);
    stream(data, &s_sig, &s_ack, BIGN, 20, SHMEM_SIGNAL_SET, 1);
    stream(s_data, &sig[0], &sig[1], BIGN, 20, SHMEM_SIGNAL_ADD, 3);
    ST_OK("put_signal into static data and with a static signal");
    shmem_free(data);
    shmem_free(sig);
}

/* Every PE adds 1 to one signal on PE 0 with its slot of data: PE 0 sees
 * the count reach npes - 1 only after every slot landed. */
static void test_many_to_one(void)
{
    enum { SLOT = 2048 };
    int *data = shmem_malloc((size_t)npes * SLOT * sizeof(int));
    uint64_t *sig = shmem_malloc(sizeof(uint64_t));
    int src[SLOT];
    ST_CHECK(data != NULL && sig != NULL);
    for (int round = 0; round < 20; round++) {
        *sig = 0;
        memset(data, 0, (size_t)npes * SLOT * sizeof(int));
        shmem_barrier_all();
        if (me != 0) {
            for (int i = 0; i < SLOT; i++)
                src[i] = round * 1000000 + me * 10000 + i;
            shmem_int_put_signal_nbi(data + me * SLOT, src, SLOT, sig, 1, SHMEM_SIGNAL_ADD, 0);
            shmem_quiet();
        } else {
            shmem_signal_wait_until(sig, SHMEM_CMP_EQ, (uint64_t)npes - 1);
            for (int pe = 1; pe < npes; pe++)
                for (int i = 0; i < SLOT; i++)
                    ST_EQ(data[pe * SLOT + i], round * 1000000 + pe * 10000 + i);
        }
        shmem_barrier_all();
    }
    shmem_free(data);
    shmem_free(sig);
    ST_OK("put_signal_nbi ADD from every PE to one");
}

/* Typed forms on other types, 0 elements (the signal alone), sized 8/128. */
static void test_types(void)
{
    long double *ld = shmem_malloc(8 * sizeof(long double));
    int8_t *i8 = shmem_malloc(8);
    uint64_t *sig = shmem_malloc(sizeof(uint64_t));
    ST_CHECK(ld && i8 && sig);
    long double lsrc[8];
    int8_t bsrc[8];
    for (int i = 0; i < 8; i++) {
        lsrc[i] = (long double)me + (long double)i / 3;
        bsrc[i] = (int8_t)(-me - i);
        ld[i] = -1;
        i8[i] = 99;
    }
    *sig = 0;
    shmem_barrier_all();
    shmem_longdouble_put_signal(ld, lsrc, 7, sig, 1, SHMEM_SIGNAL_ADD, right);
    shmem_ctx_int8_put_signal_nbi(SHMEM_CTX_DEFAULT, i8, bsrc, 7, sig, 1, SHMEM_SIGNAL_ADD,
                                  right);
    shmem_put128_signal(ld + 7, lsrc + 7, 0, sig, 1, SHMEM_SIGNAL_ADD, right);
    shmem_put8_signal_nbi(i8 + 7, bsrc + 7, 0, sig, 1, SHMEM_SIGNAL_ADD, right);
    shmem_quiet();
    shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 4);
    for (int i = 0; i < 7; i++) {
        ST_CHECK(ld[i] == (long double)left + (long double)i / 3);
        ST_EQ(i8[i], -left - i);
    }
    ST_CHECK(ld[7] == -1);
    ST_EQ(i8[7], 99);
    shmem_barrier_all();
    /* SHMEM_CTX_INVALID: nothing moves, not even the signal */
    shmem_ctx_int8_put_signal(SHMEM_CTX_INVALID, i8, bsrc, 1, sig, 100, SHMEM_SIGNAL_SET, right);
    shmem_barrier_all();
    ST_EQ(shmem_signal_fetch(sig), 4);
    ST_EQ(i8[0], -left);
    shmem_barrier_all();
    shmem_free(ld);
    shmem_free(i8);
    shmem_free(sig);
    ST_OK("put_signal long double/int8, nelems 0, sized 8/128, ctx invalid");
}

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    right = (me + 1) % npes;
    left = (me + npes - 1) % npes;
    test_types();
    test_stream();
    test_many_to_one();
    shmem_finalize();
    return 0;
}
