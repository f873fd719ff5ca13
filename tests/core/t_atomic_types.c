/* Typed atomics, one process, white box (src/core/atomic_word.c):
 * - every operation on every type, for every pair of interesting values
 *   (and every compare value where one matters), gives the word and the old
 *   value a plain C reference computes (tests/atomic_ref.h), and leaves the
 *   4 bytes next to a 4-byte word alone;
 * - exactly the documented (operation, type) pairs are accepted, and every
 *   other one is VMMC_ERR_INVALID with a message (bitwise or logical on a
 *   float, unknown type bits, both type flags, a width other than 4 or 8);
 * - NaN and signed zero as C has them, spelled out;
 * - concurrency: threads adding 1.0 to one double (a compare-and-swap loop)
 *   lose no update; a compare-and-swap loop (MSWAP on the high half) and the
 *   processor's fetch-add (on the low half) on one word lose nothing of
 *   each other. */
#include <pthread.h>
#include <string.h>

#include "atomic_ref.h"
#include "core/atomic_word.h"
#include "core/core.h"
#include "vtest.h"

static void reference_all(void)
{
    long checked = 0;
    for (int t = 0; t < REF_NTYPES; t++) {
        int size = ref_types[t], w = size & 15;
        uint64_t vals[16];
        int nv = ref_values(size, vals);
        for (int op = VMMC_ATOMIC_ADD; op <= REF_OP_LAST; op++) {
            if (!ref_valid(op, size))
                continue;
            int uses_compare = op == VMMC_ATOMIC_CSWAP || op == VMMC_ATOMIC_MSWAP ||
                               op >= VMMC_ATOMIC_CSWAP_NE;
            for (int a = 0; a < nv; a++)
                for (int b = 0; b < nv; b++)
                    for (int c = 0; c < (uses_compare ? nv : 1); c++) {
                        uint64_t mem[2] = {0x5a5a5a5a5a5a5a5aull, 0x5a5a5a5a5a5a5a5aull};
                        memcpy(mem, &vals[a], (size_t)w);
                        uint64_t cmp = uses_compare ? vals[c] : vals[(a + 1) % nv];
                        /* High bits of a 4-byte operand are ignored. */
                        uint64_t opnd = w == 4 ? vals[b] | 0xdead000000000000ull : vals[b];
                        uint64_t cmpw = w == 4 ? cmp | 0xbeef000000000000ull : cmp;
                        uint64_t old = vmmc_atomic_apply(mem, op, size, opnd, cmpw);
                        uint64_t want = ref_apply(op, size, vals[a], vals[b], cmp), got = 0;
                        memcpy(&got, mem, (size_t)w);
                        if (old != vals[a] || got != want)
                            VT_FAIL("%s %s: word %llx operand %llx compare %llx: got %llx "
                                    "(old %llx), want %llx", ref_op_name(op),
                                    ref_type_name(size), (unsigned long long)vals[a],
                                    (unsigned long long)vals[b], (unsigned long long)cmp,
                                    (unsigned long long)got, (unsigned long long)old,
                                    (unsigned long long)want);
                        if (w == 4) {
                            uint32_t next;
                            memcpy(&next, (char *)mem + 4, 4);
                            VT_CHECK(next == 0x5a5a5a5au);
                        }
                        VT_CHECK(mem[1] == 0x5a5a5a5a5a5a5a5aull);
                        checked++;
                    }
        }
    }
    printf("reference: %ld operations agree\n", checked);
}

static void validity(void)
{
    static const int sizes[] = {0, 1, 2, 4, 8, 12, 16, 4 | 0x40, 8 | 0x80, 8 | 0x100,
                                4 | VMMC_ATOMIC_SIGNED, 8 | VMMC_ATOMIC_SIGNED,
                                4 | VMMC_ATOMIC_FLOAT, 8 | VMMC_ATOMIC_FLOAT,
                                8 | VMMC_ATOMIC_SIGNED | VMMC_ATOMIC_FLOAT, VMMC_ATOMIC_FLOAT,
                                2 | VMMC_ATOMIC_FLOAT, -8};
    int ok = 0, refused = 0;
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int op = -1; op <= REF_OP_LAST + 2; op++) {
            int known = 0;
            for (int t = 0; t < REF_NTYPES; t++)
                known |= ref_types[t] == sizes[s];
            int want = known && ref_valid(op, sizes[s]);
            int rc = vmmc_atomic_valid(op, sizes[s]);
            if (want ? rc != VMMC_OK : rc != VMMC_ERR_INVALID)
                VT_FAIL("op %d size 0x%x: status %d, want %s", op, (unsigned)sizes[s], rc,
                        want ? "accepted" : "VMMC_ERR_INVALID");
            if (!want && strlen(vmmc_last_error()) < 10)
                VT_FAIL("op %d size 0x%x refused without a message", op, (unsigned)sizes[s]);
            want ? ok++ : refused++;
        }
    VT_CHECK(vmmc_atomic_valid(VMMC_ATOMIC_XOR, 8 | VMMC_ATOMIC_FLOAT) == VMMC_ERR_INVALID);
    VT_CHECK(strstr(vmmc_last_error(), "xor") && strstr(vmmc_last_error(), "double") &&
             strstr(vmmc_last_error(), "integers"));
    printf("validity: %d pairs accepted, %d refused\n", ok, refused);
}

/* The corners of IEEE 754 the header promises, one by one. */
static void float_corners(void)
{
    const int D = 8 | VMMC_ATOMIC_FLOAT;
    uint64_t w = vmmc_atomic_from_double(NAN);
    /* CSWAP never matches a NaN, even one with the same bits. */
    vmmc_atomic_apply(&w, VMMC_ATOMIC_CSWAP, D, vmmc_atomic_from_double(1.0), w);
    VT_CHECK(isnan(vmmc_atomic_to_double(w)));
    /* ... but CSWAP_NE does replace it. */
    vmmc_atomic_apply(&w, VMMC_ATOMIC_CSWAP_NE, D, vmmc_atomic_from_double(1.0), w);
    VT_CHECK(vmmc_atomic_to_double(w) == 1.0);
    /* MIN and MAX with a NaN operand change nothing; a NaN word stays. */
    vmmc_atomic_apply(&w, VMMC_ATOMIC_MIN, D, vmmc_atomic_from_double(NAN), 0);
    vmmc_atomic_apply(&w, VMMC_ATOMIC_MAX, D, vmmc_atomic_from_double(NAN), 0);
    VT_CHECK(vmmc_atomic_to_double(w) == 1.0);
    w = vmmc_atomic_from_double(NAN);
    vmmc_atomic_apply(&w, VMMC_ATOMIC_MIN, D, vmmc_atomic_from_double(-5.0), 0);
    VT_CHECK(isnan(vmmc_atomic_to_double(w)));
    /* -0.0 == +0.0: CSWAP with compare +0.0 replaces -0.0; MIN(-0.0) leaves +0.0. */
    w = vmmc_atomic_from_double(-0.0);
    vmmc_atomic_apply(&w, VMMC_ATOMIC_CSWAP, D, vmmc_atomic_from_double(2.0),
                      vmmc_atomic_from_double(0.0));
    VT_CHECK(vmmc_atomic_to_double(w) == 2.0);
    w = vmmc_atomic_from_double(0.0);
    vmmc_atomic_apply(&w, VMMC_ATOMIC_MIN, D, vmmc_atomic_from_double(-0.0), 0);
    VT_CHECK(w == 0); /* still +0.0, bit for bit */
    /* Float arithmetic is in float precision: 2^24 + 1 rounds back. */
    uint64_t f = vmmc_atomic_from_float(16777216.0f);
    vmmc_atomic_apply(&f, VMMC_ATOMIC_ADD, 4 | VMMC_ATOMIC_FLOAT, vmmc_atomic_from_float(1.0f), 0);
    VT_CHECK(vmmc_atomic_to_float(f) == 16777216.0f && (f >> 32) == 0);
    /* Signed comparisons: -1 < 0 for int32, the largest for uint32. */
    uint64_t s = 0;
    vmmc_atomic_apply(&s, VMMC_ATOMIC_MIN, 4 | VMMC_ATOMIC_SIGNED, 0xffffffffu, 0);
    VT_CHECK(s == 0xffffffffu);
    uint64_t u = 0;
    vmmc_atomic_apply(&u, VMMC_ATOMIC_MIN, 4, 0xffffffffu, 0);
    VT_CHECK(u == 0);
    printf("float and sign corners: as C has them\n");
}

#define THREADS 4
#define ADDS 40000
static uint64_t dbl, mixed;

static void *adder(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < ADDS; i++) {
        vmmc_atomic_apply(&dbl, VMMC_ATOMIC_ADD, 8 | VMMC_ATOMIC_FLOAT,
                          vmmc_atomic_from_double(1.0), 0);
        if (t % 2)
            vmmc_atomic_apply(&mixed, VMMC_ATOMIC_ADD, 8, 1, 0); /* the instruction */
        else /* a compare-and-swap loop on the same word: the high half only */
            vmmc_atomic_apply(&mixed, VMMC_ATOMIC_MSWAP, 8, (uint64_t)(i + 1) << 32,
                              0xffffffff00000000ull);
    }
    return NULL;
}

static void concurrency(void)
{
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        VT_CHECK(pthread_create(&th[t], NULL, adder, (void *)(intptr_t)t) == 0);
    for (int t = 0; t < THREADS; t++)
        VT_CHECK(pthread_join(th[t], NULL) == 0);
    double d = vmmc_atomic_to_double(dbl);
    uint64_t low = mixed & 0xffffffffu, high = mixed >> 32;
    printf("concurrency: double %.1f (want %d), fetch-adds %llu (want %d), high half %llu\n", d,
           THREADS * ADDS, (unsigned long long)low, (THREADS / 2) * ADDS,
           (unsigned long long)high);
    VT_CHECK(d == (double)(THREADS * ADDS));
    VT_CHECK(low == (uint64_t)(THREADS / 2) * ADDS);
    VT_CHECK(high >= 1 && high <= ADDS);
}

int main(void)
{
    VT_CHECK(vmmc_atomic_to_double(vmmc_atomic_from_double(-2.5)) == -2.5);
    VT_CHECK(vmmc_atomic_to_float(vmmc_atomic_from_float(-2.5f)) == -2.5f);
    VT_CHECK(vmmc_atomic_from_float(1.0f) == 0x3f800000u);
    reference_all();
    validity();
    float_corners();
    concurrency();
    printf("t_atomic_types: ok\n");
    return 0;
}
