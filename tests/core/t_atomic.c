/* Remote atomics: every operation at both sizes on a mapped export and on
 * one written with process_vm_writev (over udp both are remote); several
 * ranks with several threads hammering one counter with fetch-add while
 * the exporter adds to it with its own __atomic instructions (the final
 * value is exact, and no two fetch-adds of one process see the same old
 * value); a compare-and-swap lock guarding a non-atomic read-modify-write
 * (fetch, then send, then unlock: the send must land before the unlock);
 * and the refusals: alignment, bounds, unknown operation, size or type,
 * fetching from an export without VMMC_EXPORT_READ; requests with a bad
 * operation or type forged past the importer's checks are refused by the
 * target.
 *
 * usage (under vmmc run -n N, N >= 2): t_atomic [adds per thread] */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "vtest.h"

#define THREADS 3
#define LOCK_ROUNDS 40

static vmmc_ep_t *ep;
static int me, nranks, adds = 2000;

/* Rank 0's memory: one page in library memory (mapped by importers on this
 * host), the same in ordinary heap memory, a write-only export, and a
 * region that starts one byte past an 8-byte boundary. */
enum { OFF_COUNT = 0, OFF_LOCK = 64, OFF_GUARDED = 128, OFF_WORK = 256 };
#define REGION 4096

typedef struct hammer {
    vmmc_proxy_t *px;
    uint64_t *olds;
} hammer_t;

static void *hammer_main(void *arg)
{
    hammer_t *h = arg;
    for (int i = 0; i < adds; i++)
        VT_OK(vmmc_atomic(h->px, OFF_COUNT, VMMC_ATOMIC_ADD, 8, 1, 0, &h->olds[i]));
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Every operation at @size on the word at @off (rank 1's own area). */
static void every_op(vmmc_proxy_t *px, size_t off, int size)
{
    uint64_t mask = size == 4 ? 0xffffffffull : ~0ull, v = 0;
    uint64_t big = 0xa5a5a5a5deadbeefull;
    VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_READ, size, 0, 0, &v));
    VT_CHECK(v == 0);
    VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_SWAP, size, big, 0, &v));
    VT_CHECK(v == 0);
    VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_ADD, size, 0x11, 0, &v));
    VT_CHECK(v == (big & mask));
    uint64_t cur = (big + 0x11) & mask;
    VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_AND, size, 0xff00ff00ff00ff00ull, 0, &v));
    VT_CHECK(v == cur);
    cur &= 0xff00ff00ff00ff00ull & mask;
    VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_OR, size, 0x0f, 0, &v));
    VT_CHECK(v == cur);
    cur |= 0x0f;
    VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_XOR, size, 0x3c3c3c3c3c3c3c3cull, 0, &v));
    VT_CHECK(v == cur);
    cur = (cur ^ 0x3c3c3c3c3c3c3c3cull) & mask;
    /* Compare-and-swap: a wrong expectation changes nothing and tells the value. */
    VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_CSWAP, size, 7, cur + 1, &v));
    VT_CHECK(v == cur);
    VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_CSWAP, size, 7, cur, &v));
    VT_CHECK(v == cur);
    /* Without a result (a plain remote write of the operation). */
    VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_ADD, size, mask, 0, NULL)); /* 7 - 1 */
    VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_READ, size, 0, 0, &v));
    VT_CHECK(v == 6);
    /* A 4-byte add wraps within its word and leaves the next word alone. */
    if (size == 4) {
        VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_SWAP, 4, 0xffffffffull, 0, NULL));
        VT_OK(vmmc_atomic(px, off + 4, VMMC_ATOMIC_SWAP, 4, 0x1234, 0, NULL));
        VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_ADD, 4, 2, 0, &v));
        VT_CHECK(v == 0xffffffffull);
        VT_OK(vmmc_atomic(px, off, VMMC_ATOMIC_READ, 8, 0, 0, &v));
        VT_CHECK(v == (0x1234ull << 32 | 1));
    }
}

static void refusals(vmmc_proxy_t *pm, vmmc_proxy_t *ph, vmmc_proxy_t *pw, vmmc_proxy_t *po)
{
    uint64_t v = 0;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic(pm, 4, VMMC_ATOMIC_ADD, 8, 1, 0, &v));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic(pm, 2, VMMC_ATOMIC_ADD, 4, 1, 0, &v));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic(pm, 0, VMMC_ATOMIC_ADD, 2, 1, 0, &v));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic(pm, 0, 0, 8, 1, 0, &v));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic(pm, 0, VMMC_ATOMIC_CSWAP_GT + 1, 8, 1, 0, &v));
    /* Types: bitwise or logical on a float, unknown type bits, both flags. */
    VT_STATUS(VMMC_ERR_INVALID,
              vmmc_atomic(pm, 0, VMMC_ATOMIC_XOR, 8 | VMMC_ATOMIC_FLOAT, 1, 0, &v));
    VT_STATUS(VMMC_ERR_INVALID,
              vmmc_atomic(ph, 0, VMMC_ATOMIC_LOR, 4 | VMMC_ATOMIC_FLOAT, 1, 0, NULL));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic(pm, 0, VMMC_ATOMIC_ADD, 8 | 0x40, 1, 0, &v));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic(
        pm, 0, VMMC_ATOMIC_ADD, 8 | VMMC_ATOMIC_SIGNED | VMMC_ATOMIC_FLOAT, 1, 0, &v));
    /* The same, forged past the importer's checks: the target refuses them
     * (through its control thread on shm, its link thread over udp). */
    uint64_t before;
    VT_OK(vmmc_fetch(ph, OFF_WORK, &before, 8));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic_exec(ph, OFF_WORK, VMMC_ATOMIC_XOR,
                                                 8 | VMMC_ATOMIC_FLOAT, 1, 0, &v));
    VT_STATUS(VMMC_ERR_INVALID,
              vmmc_atomic_exec(ph, OFF_WORK, VMMC_ATOMIC_ADD, 8 | 0x40, 1, 0, NULL));
    VT_STATUS(VMMC_ERR_INVALID,
              vmmc_atomic_exec(ph, OFF_WORK, VMMC_ATOMIC_CSWAP_GT + 1, 8, 1, 0, &v));
    uint64_t after;
    VT_OK(vmmc_fetch(ph, OFF_WORK, &after, 8));
    VT_CHECK(before == after);
    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic(NULL, 0, VMMC_ATOMIC_ADD, 8, 1, 0, &v));
    VT_STATUS(VMMC_ERR_BOUNDS, vmmc_atomic(pm, REGION, VMMC_ATOMIC_ADD, 8, 1, 0, &v));
    VT_STATUS(VMMC_ERR_BOUNDS, vmmc_atomic(pm, REGION, VMMC_ATOMIC_ADD, 4, 1, 0, &v));
    VT_STATUS(VMMC_ERR_BOUNDS, vmmc_atomic(pm, SIZE_MAX - 7, VMMC_ATOMIC_SWAP, 8, 1, 0, NULL));
    /* Write-only export: the operation itself is allowed, its old value is not. */
    VT_STATUS(VMMC_ERR_PERMISSION, vmmc_atomic(pw, 0, VMMC_ATOMIC_ADD, 8, 1, 0, &v));
    VT_STATUS(VMMC_ERR_PERMISSION, vmmc_atomic(pw, 0, VMMC_ATOMIC_READ, 8, 0, 0, NULL));
    VT_OK(vmmc_atomic(pw, 0, VMMC_ATOMIC_ADD, 8, 5, 0, NULL));
    VT_OK(vmmc_atomic(pw, 0, VMMC_ATOMIC_ADD, 8, 5, 0, NULL));
    /* A multiple of the size within the region, but not aligned in memory:
     * refused by whoever sees the real address (the target, or the mapping). */
    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic(po, 8, VMMC_ATOMIC_ADD, 8, 1, 0, &v));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic(po, 8, VMMC_ATOMIC_SWAP, 4, 1, 0, NULL));
}

int main(int argc, char **argv)
{
    vt_require_transport();
    if (argc > 1)
        adds = atoi(argv[1]);
    VT_OK(vmmc_init(NULL, &ep));
    me = vmmc_rank(ep);
    nranks = vmmc_size(ep);
    VT_CHECK(nranks >= 2);
    char *mem = NULL, *heap = NULL, *wo = NULL, *odd = NULL;
    vmmc_export_t *ex_mem = NULL, *ex_heap = NULL;
    if (me == 0) {
        VT_OK(vmmc_mem_alloc(ep, REGION, (void **)&mem));
        VT_CHECK(posix_memalign((void **)&heap, 64, REGION) == 0);
        memset(heap, 0, REGION);
        wo = calloc(1, 64);
        odd = calloc(1, 128);
        vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_FLAGS, .flags = VMMC_EXPORT_READ,
                                  .length = REGION};
        vmmc_export_t *e;
        p.name = "mem", p.addr = mem;
        VT_OK(vmmc_export(ep, &p, &ex_mem));
        p.name = "heap", p.addr = heap;
        VT_OK(vmmc_export(ep, &p, &ex_heap));
        p.name = "odd", p.addr = odd + 1, p.length = 64;
        VT_OK(vmmc_export(ep, &p, &e));
        p.flags = 0;
        p.name = "wo", p.addr = wo, p.length = 64;
        VT_OK(vmmc_export(ep, &p, &e));
    }
    VT_OK(vmmc_barrier(ep));
    vmmc_proxy_t *pm = NULL, *ph = NULL, *pw = NULL, *po = NULL;
    if (me > 0) {
        VT_OK(vmmc_import(ep, 0, "mem", 5000, &pm));
        VT_OK(vmmc_import(ep, 0, "heap", 5000, &ph));
        VT_OK(vmmc_import(ep, 0, "wo", 5000, &pw));
        VT_OK(vmmc_import(ep, 0, "odd", 5000, &po));
        void *map;
        int mapped = vmmc_proxy_map(pm, &map) == VMMC_OK;
        VT_CHECK(mapped == !vt_remote()); /* both kinds are really exercised */
    }
    if (me == 1) {
        for (int k = 0; k < 2; k++) {
            vmmc_proxy_t *px = k ? ph : pm;
            every_op(px, OFF_WORK, 8);
            every_op(px, OFF_WORK + 16, 4);
        }
        refusals(pm, ph, pw, po);
    }
    VT_OK(vmmc_barrier(ep));

    /* Hammer one counter in each region. */
    uint64_t local = 0;
    if (me > 0) {
        for (int k = 0; k < 2; k++) {
            pthread_t t[THREADS];
            hammer_t h[THREADS];
            uint64_t *all = malloc(sizeof(uint64_t) * (size_t)(adds * THREADS));
            for (int i = 0; i < THREADS; i++) {
                h[i].px = k ? ph : pm;
                h[i].olds = all + (size_t)i * (size_t)adds;
                VT_CHECK(pthread_create(&t[i], NULL, hammer_main, &h[i]) == 0);
            }
            for (int i = 0; i < THREADS; i++)
                pthread_join(t[i], NULL);
            qsort(all, (size_t)(adds * THREADS), sizeof *all, cmp_u64);
            for (int i = 1; i < adds * THREADS; i++)
                if (all[i] == all[i - 1])
                    VT_FAIL("two fetch-adds saw the old value %llu", (unsigned long long)all[i]);
            free(all);
        }
    } else {
        /* The exporter's own atomics on the same words, meanwhile. */
        for (int i = 0; i < adds; i++) {
            __atomic_fetch_add((uint64_t *)(void *)(mem + OFF_COUNT), 1, __ATOMIC_SEQ_CST);
            __atomic_fetch_add((uint64_t *)(void *)(heap + OFF_COUNT), 1, __ATOMIC_SEQ_CST);
            local++;
            if (i % 64 == 0)
                vmmc_progress(ep);
        }
    }
    VT_OK(vmmc_barrier(ep));

    /* A compare-and-swap lock around a fetch, an increment and a send. */
    if (me > 0) {
        for (int k = 0; k < 2; k++) {
            vmmc_proxy_t *px = k ? ph : pm;
            for (int i = 0; i < LOCK_ROUNDS; i++) {
                uint64_t old = 1;
                double t0 = vt_now();
                for (;;) {
                    VT_OK(vmmc_atomic(px, OFF_LOCK, VMMC_ATOMIC_CSWAP, 8, (uint64_t)me, 0, &old));
                    if (old == 0)
                        break;
                    if (vt_now() - t0 > 30)
                        VT_FAIL("lock held by rank %llu for 30 s", (unsigned long long)old);
                    sched_yield();
                }
                uint64_t g;
                VT_OK(vmmc_fetch(px, OFF_GUARDED, &g, sizeof g));
                g++;
                VT_OK(vmmc_send(px, OFF_GUARDED, &g, sizeof g, 0));
                VT_OK(vmmc_atomic(px, OFF_LOCK, VMMC_ATOMIC_SWAP, 8, 0, 0, &old));
                VT_CHECK(old == (uint64_t)me);
            }
        }
    }
    VT_OK(vmmc_fence(ep, -1));
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        uint64_t want = (uint64_t)(nranks - 1) * THREADS * (uint64_t)adds + local;
        for (int k = 0; k < 2; k++) {
            char *b = k ? heap : mem;
            uint64_t count, lock, guarded;
            memcpy(&count, b + OFF_COUNT, 8);
            memcpy(&lock, b + OFF_LOCK, 8);
            memcpy(&guarded, b + OFF_GUARDED, 8);
            printf("%s: counter %llu (want %llu), lock %llu, guarded %llu (want %d)\n",
                   k ? "heap" : "mem", (unsigned long long)count, (unsigned long long)want,
                   (unsigned long long)lock, (unsigned long long)guarded,
                   (nranks - 1) * LOCK_ROUNDS);
            VT_CHECK(count == want);
            VT_CHECK(lock == 0);
            VT_CHECK(guarded == (uint64_t)(nranks - 1) * LOCK_ROUNDS);
        }
        uint64_t w;
        memcpy(&w, wo, 8);
        VT_CHECK(w == 10);
        /* Counted here: those this process executed for its peers (never
         * the ones done in a mapping), the two misaligned ones it refused and
         * the three forged ones. */
        uint64_t served = 0, refused = 0, v;
        const char *name;
        for (int i = 0; vmmc_counter_get(ep, i, &name, &v) == VMMC_OK; i++) {
            if (!strcmp(name, "atomics_served"))
                served = v;
            if (!strcmp(name, "atomics_refused"))
                refused = v;
        }
        printf("atomics served %llu, refused %llu\n", (unsigned long long)served,
               (unsigned long long)refused);
        VT_CHECK(served >= (uint64_t)(nranks - 1) * THREADS * (uint64_t)adds);
        VT_CHECK(refused == 5);
    }
    /* After unexport no atomic reaches the memory. */
    if (me == 0) {
        VT_OK(vmmc_unexport(ex_mem));
        VT_OK(vmmc_unexport(ex_heap));
    }
    VT_OK(vmmc_barrier(ep));
    if (me > 0) {
        uint64_t v;
        VT_STATUS(VMMC_ERR_STALE, vmmc_atomic(pm, OFF_COUNT, VMMC_ATOMIC_ADD, 8, 1, 0, &v));
        VT_STATUS(VMMC_ERR_STALE, vmmc_atomic(ph, OFF_COUNT, VMMC_ATOMIC_ADD, 8, 1, 0, NULL));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        uint64_t want = (uint64_t)(nranks - 1) * THREADS * (uint64_t)adds + local, c;
        memcpy(&c, heap + OFF_COUNT, 8);
        VT_CHECK(c == want);
        memcpy(&c, mem + OFF_COUNT, 8);
        VT_CHECK(c == want);
        printf("t_atomic: ok (%d ranks, %s)\n", nranks, vt_remote() ? "udp" : "shm");
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    free(heap);
    free(wo);
    free(odd);
    return 0;
}
