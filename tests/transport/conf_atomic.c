/* Remote atomics (vmmc_atomic), on a whole allocation with VMMC_EXPORT_READ
 * (mapped on shm) and on heap memory (not mapped):
 * - fetch-add from every other rank and 4 threads each, on a 64-bit and a
 *   32-bit counter: the old values all ranks saw are exactly 0 .. total - 1
 *   (none twice, none missing) and each thread saw its own increase;
 * - CSWAP as a lock around a read-modify-write done with plain vmmc_fetch
 *   and vmmc_send: no increment is lost, so atomics are ordered with sends;
 * - every op at both sizes, wrapping, the word next to it untouched;
 * - refusals: misaligned, bad size or op, out of bounds, fetching from an
 *   export without VMMC_EXPORT_READ;
 * - typed atomics: every operation on every type (signed, unsigned, float,
 *   double) against a plain C reference, with vmmc_atomic and with
 *   vmmc_atomic_cq, the bytes next to each word untouched; bitwise and
 *   logical operations on floats and unknown type bits refused by both;
 *   threads of every other rank adding 1.0 to a double and a float lose no
 *   update. */
#include <pthread.h>

#include "atomic_ref.h"
#include "conf.h"

#define NT 4
#define MAXR 4
#define K 1500      /* fetch-adds per thread and counter */
#define LOCKS 150   /* lock rounds per thread */
#define KF 400      /* float and double adds per thread and counter */
#define W 4000      /* bytes per export (a mapped one: its page's tail guards it) */
/* Word offsets in each export. */
enum { C64 = 0, C32 = 8, DBL = 16, FLT = 24, LOCK = 64, GUARDED = 128, OPS = 256, TYPED = 1024 };
#define CASES 3     /* value triples per operation and type */
#define CELL 16     /* a word and the guard bytes after it */

static vmmc_ep_t *ep;
static int me, np;
static vmmc_proxy_t *px[2], *olds_px;
static const char *names[2] = {"at.mem", "at.heap"};
/* Rank 0: every old value, [export][counter][rank][thread][i]. */
static uint64_t *olds;
#define OLD_IDX(x, c, r, t) ((((size_t)(x) * 2 + (c)) * MAXR + (r)) * NT + (t)) * K

static int at(vmmc_proxy_t *p, size_t off, vmmc_atomic_op_t op, int size, uint64_t v,
              uint64_t cmp, uint64_t *res)
{
    return vmmc_atomic(p, off, op, size, v, cmp, res);
}

static void *adder(void *arg)
{
    int t = (int)(intptr_t)arg;
    static __thread uint64_t mine[K];
    for (int x = 0; x < 2; x++)
        for (int c = 0; c < 2; c++) {
            int size = c ? 4 : 8;
            for (int i = 0; i < K; i++) {
                VT_OK(at(px[x], c ? C32 : C64, VMMC_ATOMIC_ADD, size, 1, 0, &mine[i]));
                if (i && mine[i] <= mine[i - 1])
                    VT_FAIL("[%s] %s: thread %d saw %llu after %llu", conf_transport(),
                            names[x], t, (unsigned long long)mine[i],
                            (unsigned long long)mine[i - 1]);
            }
            VT_OK(vmmc_send(olds_px, OLD_IDX(x, c, me, t) * 8, mine, sizeof mine, 0));
        }
    /* Floats: a compare-and-swap loop at whoever executes it. */
    for (int x = 0; x < 2; x++)
        for (int i = 0; i < KF; i++) {
            VT_OK(at(px[x], DBL, VMMC_ATOMIC_ADD, 8 | VMMC_ATOMIC_FLOAT,
                     vmmc_atomic_from_double(1.0), 0, NULL));
            VT_OK(at(px[x], FLT, VMMC_ATOMIC_ADD, 4 | VMMC_ATOMIC_FLOAT,
                     vmmc_atomic_from_float(1.0f), 0, NULL));
        }
    /* The lock: acquire with CSWAP, increment a plain word, release. */
    for (int x = 0; x < 2; x++)
        for (int i = 0; i < LOCKS; i++) {
            uint64_t owner = (uint64_t)(me * NT + t) + 1, old, v;
            double w0 = vt_now();
            for (;;) {
                VT_OK(at(px[x], LOCK, VMMC_ATOMIC_CSWAP, 8, owner, 0, &old));
                if (old == 0)
                    break;
                if (vt_now() - w0 > conf_timeout())
                    VT_FAIL("[%s] lock held by %llu for too long", conf_transport(),
                            (unsigned long long)old);
                sched_yield();
            }
            VT_OK(vmmc_fetch(px[x], GUARDED, &v, sizeof v));
            v++;
            VT_OK(vmmc_send(px[x], GUARDED, &v, sizeof v, 0));
            VT_OK(at(px[x], LOCK, VMMC_ATOMIC_CSWAP, 8, 0, owner, &old));
            if (old != owner)
                VT_FAIL("[%s] lock taken from %llu by %llu", conf_transport(),
                        (unsigned long long)owner, (unsigned long long)old);
        }
    return NULL;
}

/* Every op at both sizes on fresh words (rank 1 only). */
static void every_op(vmmc_proxy_t *p, const char *name)
{
    static const vmmc_atomic_op_t ops[] = {VMMC_ATOMIC_ADD,  VMMC_ATOMIC_AND,
                                           VMMC_ATOMIC_OR,   VMMC_ATOMIC_XOR,
                                           VMMC_ATOMIC_SWAP, VMMC_ATOMIC_CSWAP,
                                           VMMC_ATOMIC_READ};
    for (int size = 4; size <= 8; size += 4)
        for (unsigned k = 0; k < sizeof ops / sizeof ops[0]; k++)
            for (int hit = 0; hit < 2; hit++) {
                uint64_t mask = size == 4 ? 0xffffffffu : ~0ull;
                uint64_t init = (0xF0F0F0F0F0F0F0F5ull + k) & mask;
                uint64_t operand = hit ? mask : (0x0FF00FF00FF00FF1ull & mask);
                uint64_t cmp = hit ? init : init ^ 1, want = init;
                switch (ops[k]) {
                case VMMC_ATOMIC_ADD: want = (init + operand) & mask; break;
                case VMMC_ATOMIC_AND: want = init & operand; break;
                case VMMC_ATOMIC_OR: want = init | operand; break;
                case VMMC_ATOMIC_XOR: want = init ^ operand; break;
                case VMMC_ATOMIC_SWAP: want = operand; break;
                case VMMC_ATOMIC_CSWAP: want = hit ? operand : init; break;
                default: break;
                }
                size_t off = OPS + (size_t)(k * 2 + hit) * 24 + 8;
                /* The word and 8 bytes either side, set by a plain send. */
                unsigned char around[24], back[24];
                memset(around, 0x5A, sizeof around);
                memcpy(around + 8, &init, (size_t)size);
                VT_OK(vmmc_send(p, off - 8, around, sizeof around, 0));
                uint64_t old = 0xdeadbeef;
                VT_OK(at(p, off, ops[k], size, operand, cmp, &old));
                if (old != init)
                    VT_FAIL("[%s] %s: op %d size %d returned old %llx, word was %llx",
                            conf_transport(), name, ops[k], size, (unsigned long long)old,
                            (unsigned long long)init);
                VT_OK(vmmc_fetch(p, off - 8, back, sizeof back));
                memcpy(around + 8, &want, (size_t)size);
                if (memcmp(around, back, sizeof back))
                    VT_FAIL("[%s] %s: op %d size %d: word or its neighbours wrong after it",
                            conf_transport(), name, ops[k], size);
                uint64_t rd;
                VT_OK(at(p, off, VMMC_ATOMIC_READ, size, 0, 0, &rd));
                VT_CHECK(rd == want);
                VT_OK(at(p, off, VMMC_ATOMIC_ADD, size, 0, 0, NULL)); /* no result wanted */
            }
    uint64_t r;
    VT_STATUS(VMMC_ERR_INVALID, at(p, OPS + 4, VMMC_ATOMIC_ADD, 8, 1, 0, &r));
    VT_STATUS(VMMC_ERR_INVALID, at(p, OPS + 2, VMMC_ATOMIC_ADD, 4, 1, 0, &r));
    VT_STATUS(VMMC_ERR_INVALID, at(p, OPS, VMMC_ATOMIC_ADD, 2, 1, 0, &r));
    VT_STATUS(VMMC_ERR_INVALID, at(p, OPS, VMMC_ATOMIC_ADD, 16, 1, 0, &r));
    VT_STATUS(VMMC_ERR_INVALID, at(p, OPS, (vmmc_atomic_op_t)0, 8, 1, 0, &r));
    VT_STATUS(VMMC_ERR_INVALID, at(p, OPS, (vmmc_atomic_op_t)99, 8, 1, 0, &r));
    VT_STATUS(VMMC_ERR_BOUNDS, at(p, W, VMMC_ATOMIC_ADD, 8, 1, 0, &r));
    VT_STATUS(VMMC_ERR_BOUNDS, at(p, W, VMMC_ATOMIC_ADD, 4, 1, 0, &r));
    VT_STATUS(VMMC_ERR_BOUNDS, at(p, SIZE_MAX - 7, VMMC_ATOMIC_ADD, 8, 1, 0, &r));
    VT_OK(at(p, W - 8, VMMC_ATOMIC_ADD, 8, 0, 0, &r)); /* the last word */
    VT_OK(at(p, W - 4, VMMC_ATOMIC_ADD, 4, 0, 0, &r));
}

/* Every operation on every type (rank 1 only): one cell per (operation,
 * case) set by one send, the operations (with vmmc_atomic, or all posted
 * to a queue), then one fetch of all cells against the reference. */
static void typed_ops(vmmc_proxy_t *p, const char *name, int use_cq)
{
    enum { NCELLS = REF_OP_LAST * CASES };
    unsigned char img[NCELLS * CELL], back[NCELLS * CELL];
    vmmc_cq_t *cq = NULL;
    if (use_cq)
        VT_OK(vmmc_cq_open(ep, NCELLS, &cq));
    for (int t = 0; t < REF_NTYPES; t++) {
        int size = ref_types[t], w = size & 15, posted = 0;
        uint64_t vals[16], init[NCELLS], opnd[NCELLS], cmp[NCELLS];
        int nv = ref_values(size, vals);
        memset(img, 0x5A, sizeof img);
        for (int op = 1; op <= REF_OP_LAST; op++)
            for (int k = 0; k < CASES; k++) {
                int i = (op - 1) * CASES + k;
                init[i] = vals[(op * 3 + k * 5 + t) % nv];
                opnd[i] = vals[(op * 7 + k * 3 + 1) % nv];
                cmp[i] = k == 0 ? init[i] : k == 1 ? opnd[i] : vals[(op + k + t) % nv];
                memcpy(img + i * CELL, &init[i], (size_t)w);
            }
        VT_OK(vmmc_send(p, TYPED, img, sizeof img, 0));
        for (int op = 1; op <= REF_OP_LAST; op++)
            for (int k = 0; k < CASES; k++) {
                int i = (op - 1) * CASES + k;
                size_t off = TYPED + (size_t)i * CELL;
                if (!ref_valid(op, size)) {
                    uint64_t r = 7;
                    VT_STATUS(VMMC_ERR_INVALID, at(p, off, op, size, opnd[i], cmp[i], &r));
                    VT_CHECK(r == 7);
                    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic_cq(p, off, op, size, opnd[i], cmp[i],
                                                               cq ? cq : (vmmc_cq_t *)1, NULL));
                    continue;
                }
                if (use_cq) {
                    VT_OK(vmmc_atomic_cq(p, off, op, size, opnd[i], cmp[i], cq, &init[i]));
                    posted++;
                    continue;
                }
                uint64_t old = 0xdeadbeef;
                VT_OK(at(p, off, op, size, opnd[i], cmp[i], &old));
                if (old != init[i])
                    VT_FAIL("[%s] %s: %s on %s: old %llx, the word was %llx", conf_transport(),
                            name, ref_op_name(op), ref_type_name(size),
                            (unsigned long long)old, (unsigned long long)init[i]);
            }
        for (double t0 = vt_now(); posted > 0;) {
            vmmc_completion_t c[8];
            int n = vmmc_cq_wait(cq, c, 8, 100);
            VT_CHECK(n >= 0);
            for (int j = 0; j < n; j++) {
                VT_CHECK(c[j].status == VMMC_OK && c[j].op == VMMC_OP_ATOMIC &&
                         c[j].length == (size_t)w);
                uint64_t *want = c[j].context;
                if (c[j].value != *want)
                    VT_FAIL("[%s] %s: queued %s: old %llx, the word was %llx", conf_transport(),
                            name, ref_type_name(size), (unsigned long long)c[j].value,
                            (unsigned long long)*want);
            }
            posted -= n;
            if (vt_now() - t0 > conf_timeout())
                VT_FAIL("[%s] %d queued atomics never completed", conf_transport(), posted);
        }
        VT_OK(vmmc_fetch(p, TYPED, back, sizeof back));
        for (int op = 1; op <= REF_OP_LAST; op++)
            for (int k = 0; k < CASES; k++) {
                int i = (op - 1) * CASES + k;
                uint64_t want = ref_valid(op, size)
                                    ? ref_apply(op, size, init[i], opnd[i], cmp[i])
                                    : init[i];
                memcpy(img + i * CELL, &want, (size_t)w);
                if (memcmp(img + i * CELL, back + i * CELL, CELL)) {
                    uint64_t got = 0;
                    memcpy(&got, back + i * CELL, (size_t)w);
                    VT_FAIL("[%s] %s%s: %s on %s %llx with %llx (compare %llx): %llx, want %llx "
                            "(or a byte beside it changed)", conf_transport(), name,
                            use_cq ? " (queued)" : "", ref_op_name(op),
                            ref_type_name(size), (unsigned long long)init[i],
                            (unsigned long long)opnd[i], (unsigned long long)cmp[i],
                            (unsigned long long)got, (unsigned long long)want);
                }
            }
    }
    uint64_t r;
    VT_STATUS(VMMC_ERR_INVALID, at(p, TYPED, VMMC_ATOMIC_ADD, 8 | 0x40, 1, 0, &r));
    VT_STATUS(VMMC_ERR_INVALID,
              at(p, TYPED, VMMC_ATOMIC_ADD, 8 | VMMC_ATOMIC_SIGNED | VMMC_ATOMIC_FLOAT, 1, 0, &r));
    VT_STATUS(VMMC_ERR_INVALID, at(p, TYPED, VMMC_ATOMIC_ADD, VMMC_ATOMIC_FLOAT, 1, 0, &r));
    VT_STATUS(VMMC_ERR_INVALID, at(p, TYPED + 4, VMMC_ATOMIC_ADD, 8 | VMMC_ATOMIC_FLOAT, 1, 0, &r));
    if (cq)
        VT_OK(vmmc_cq_close(cq));
}

int main(void)
{
    ep = conf_init(0);
    me = vmmc_rank(ep);
    np = vmmc_size(ep);
    VT_CHECK(np <= MAXR);
    conf_region_t reg[3], ol;
    if (me == 0) {
        conf_region_alloc(ep, &reg[0], CONF_MEM, W);
        conf_region_alloc(ep, &reg[1], CONF_HEAP, W);
        conf_region_alloc(ep, &reg[2], CONF_HEAP, W);
        conf_export(ep, &reg[0], names[0], VMMC_EXPORT_READ, NULL, NULL);
        conf_export(ep, &reg[1], names[1], VMMC_EXPORT_READ, NULL, NULL);
        conf_export(ep, &reg[2], "at.wo", 0, NULL, NULL);
        conf_region_alloc(ep, &ol, CONF_HEAP, OLD_IDX(2, 0, 0, 0) * 8);
        conf_export(ep, &ol, "at.olds", 0, NULL, NULL);
        olds = (uint64_t *)ol.p;
    }
    VT_OK(vmmc_barrier(ep));
    if (me != 0) {
        px[0] = conf_import(ep, 0, names[0]);
        px[1] = conf_import(ep, 0, names[1]);
        olds_px = conf_import(ep, 0, "at.olds");
        pthread_t th[NT];
        for (int t = 0; t < NT; t++)
            VT_CHECK(pthread_create(&th[t], NULL, adder, (void *)(intptr_t)t) == 0);
        for (int t = 0; t < NT; t++)
            VT_CHECK(pthread_join(th[t], NULL) == 0);
        if (me == 1) {
            vmmc_proxy_t *wo = conf_import(ep, 0, "at.wo");
            uint64_t r = 7;
            VT_STATUS(VMMC_ERR_PERMISSION, at(wo, 0, VMMC_ATOMIC_ADD, 8, 1, 0, &r));
            VT_STATUS(VMMC_ERR_PERMISSION, at(wo, 0, VMMC_ATOMIC_READ, 8, 0, 0, &r));
            VT_CHECK(r == 7);
            VT_OK(at(wo, 0, VMMC_ATOMIC_ADD, 8, 5, 0, NULL)); /* nothing to fetch */
            VT_OK(at(wo, 8, VMMC_ATOMIC_SWAP, 4, 9, 0, NULL));
        }
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        every_op(px[0], names[0]);
        every_op(px[1], names[1]);
        for (int q = 0; q < 2; q++) {
            typed_ops(px[0], names[0], q);
            typed_ops(px[1], names[1], q);
        }
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        uint64_t total = (uint64_t)(np - 1) * NT * K;
        unsigned char *seen = malloc(total);
        for (int x = 0; x < 2; x++) {
            uint64_t c64, c32 = 0;
            memcpy(&c64, reg[x].p + C64, 8);
            memcpy(&c32, reg[x].p + C32, 4);
            if (c64 != total || c32 != total)
                VT_FAIL("[%s] %s: counters %llu and %llu after %llu fetch-adds each",
                        conf_transport(), names[x], (unsigned long long)c64,
                        (unsigned long long)c32, (unsigned long long)total);
            for (int c = 0; c < 2; c++) {
                memset(seen, 0, total);
                for (int r = 1; r < np; r++)
                    for (int t = 0; t < NT; t++)
                        for (int i = 0; i < K; i++) {
                            uint64_t v = olds[OLD_IDX(x, c, r, t) + (size_t)i];
                            if (v >= total || seen[v]++)
                                VT_FAIL("[%s] %s: old value %llu seen twice or out of range",
                                        conf_transport(), names[x], (unsigned long long)v);
                        }
            }
            double d;
            float f;
            memcpy(&d, reg[x].p + DBL, 8);
            memcpy(&f, reg[x].p + FLT, 4);
            if (d != (double)((np - 1) * NT * KF) || f != (float)((np - 1) * NT * KF))
                VT_FAIL("[%s] %s: double %.1f and float %.1f after %d adds of 1.0 each",
                        conf_transport(), names[x], d, (double)f, (np - 1) * NT * KF);
            uint64_t g, lk;
            memcpy(&g, reg[x].p + GUARDED, 8);
            memcpy(&lk, reg[x].p + LOCK, 8);
            if (g != (uint64_t)(np - 1) * NT * LOCKS || lk != 0)
                VT_FAIL("[%s] %s: %llu increments under the lock, expected %d (lock %llu)",
                        conf_transport(), names[x], (unsigned long long)g,
                        (np - 1) * NT * LOCKS, (unsigned long long)lk);
        }
        uint64_t wo0, wo1 = 0;
        memcpy(&wo0, reg[2].p, 8);
        memcpy(&wo1, reg[2].p + 8, 4);
        VT_CHECK(wo0 == 5 && wo1 == 9);
        for (int k = 0; k < 3; k++)
            conf_guard_check(&reg[k]);
        free(seen);
    }
    conf_ok(me, "atomics: counters exact (integer and float), lock held, every op on every type "
                "and refusal as documented");
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    if (me == 0) {
        conf_region_release(&reg[1]);
        conf_region_release(&reg[2]);
        conf_region_release(&ol);
    }
    return 0;
}
