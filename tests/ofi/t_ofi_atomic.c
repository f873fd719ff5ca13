/* Atomics through the provider (two processes, see ofi_pair.h): every
 * operation on every type the provider offers, in its write, fetch and
 * compare forms, one element and many, each element checked against a plain
 * C reference (tests/atomic_ref.h) at the target's memory and in the fetched
 * results; what is not offered is refused by query, valid and the call; the
 * errors (alignment, count, bounds, access) and inject.
 * `t_ofi_atomic [scenario-substring]`. */
#include "ofi_pair.h"

#include <rdma/fi_atomic.h>

#include "atomic_ref.h"

#define NWORDS 64

enum { K_WRITE, K_FETCH, K_COMPARE };

/* fi_atomic(3)'s operations as vmmc's, written from the man page. */
static const struct {
    enum fi_op op;
    int vop, kind, int_only;
    const char *name;
} ops[] = {
    {FI_MIN, VMMC_ATOMIC_MIN, K_WRITE, 0, "min"},
    {FI_MAX, VMMC_ATOMIC_MAX, K_WRITE, 0, "max"},
    {FI_SUM, VMMC_ATOMIC_ADD, K_WRITE, 0, "sum"},
    {FI_PROD, VMMC_ATOMIC_PROD, K_WRITE, 0, "prod"},
    {FI_LOR, VMMC_ATOMIC_LOR, K_WRITE, 1, "lor"},
    {FI_LAND, VMMC_ATOMIC_LAND, K_WRITE, 1, "land"},
    {FI_BOR, VMMC_ATOMIC_OR, K_WRITE, 1, "bor"},
    {FI_BAND, VMMC_ATOMIC_AND, K_WRITE, 1, "band"},
    {FI_LXOR, VMMC_ATOMIC_LXOR, K_WRITE, 1, "lxor"},
    {FI_BXOR, VMMC_ATOMIC_XOR, K_WRITE, 1, "bxor"},
    {FI_ATOMIC_READ, VMMC_ATOMIC_READ, K_FETCH, 0, "read"},
    {FI_ATOMIC_WRITE, VMMC_ATOMIC_SWAP, K_WRITE, 0, "write"},
    {FI_CSWAP, VMMC_ATOMIC_CSWAP, K_COMPARE, 0, "cswap"},
    {FI_CSWAP_NE, VMMC_ATOMIC_CSWAP_NE, K_COMPARE, 0, "cswap_ne"},
    {FI_CSWAP_LE, VMMC_ATOMIC_CSWAP_LE, K_COMPARE, 0, "cswap_le"},
    {FI_CSWAP_LT, VMMC_ATOMIC_CSWAP_LT, K_COMPARE, 0, "cswap_lt"},
    {FI_CSWAP_GE, VMMC_ATOMIC_CSWAP_GE, K_COMPARE, 0, "cswap_ge"},
    {FI_CSWAP_GT, VMMC_ATOMIC_CSWAP_GT, K_COMPARE, 0, "cswap_gt"},
    {FI_MSWAP, VMMC_ATOMIC_MSWAP, K_COMPARE, 1, "mswap"},
};
#define NOPS (sizeof ops / sizeof ops[0])

static const struct {
    enum fi_datatype dt;
    int vsize;
    size_t size;
} types[] = {
    {FI_UINT32, 4, 4},
    {FI_UINT64, 8, 8},
    {FI_INT32, 4 | VMMC_ATOMIC_SIGNED, 4},
    {FI_INT64, 8 | VMMC_ATOMIC_SIGNED, 8},
    {FI_FLOAT, 4 | VMMC_ATOMIC_FLOAT, 4},
    {FI_DOUBLE, 8 | VMMC_ATOMIC_FLOAT, 8},
};
#define NTYPES (sizeof types / sizeof types[0])

static op_cfg_t cfg_atomic(void)
{
    op_cfg_t c = op_cfg_default();
    c.caps = FI_MSG | FI_RMA | FI_ATOMIC;
    return c;
}

typedef struct rinfo {
    uint64_t key, addr;
} rinfo_t;

static rinfo_t swap_mr(op_side_t *s, struct fid_mr *mr, void *buf)
{
    int virt = (s->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
    rinfo_t me = {fi_mr_key(mr), virt ? (uint64_t)(uintptr_t)buf : 0}, peer;
    op_oob_send(s, &me, sizeof me);
    op_oob_recv(s, &peer, sizeof peer);
    return peer;
}

static uint64_t get(const void *p, size_t size)
{
    if (size == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void put(void *p, size_t size, uint64_t v)
{
    if (size == 4) {
        uint32_t w = (uint32_t)v;
        memcpy(p, &w, 4);
    } else {
        memcpy(p, &v, 8);
    }
}

/* One operation of @p count elements on the peer's words, checked. */
static void one(op_side_t *s, rinfo_t p, size_t t, size_t o, size_t count)
{
    size_t sz = types[t].size;
    int vs = types[t].vsize;
    uint64_t vals[16];
    int nv = ref_values(vs, vals);
    uint8_t init[NWORDS * 8], opnd[NWORDS * 8], cmp[NWORDS * 8], res[NWORDS * 8], after[NWORDS * 8];
    uint64_t want[NWORDS];
    for (size_t i = 0; i < count; i++) {
        uint64_t w = vals[i % (size_t)nv], a = vals[(i * 7 + 3) % (size_t)nv];
        uint64_t c = (i & 1) ? w : vals[(i * 5 + 1) % (size_t)nv];
        put(init + i * sz, sz, w);
        put(opnd + i * sz, sz, a);
        put(cmp + i * sz, sz, c);
        want[i] = ref_apply(ops[o].vop, vs, w, a, c);
    }
    memset(res, 0xcd, sizeof res);
    char ctx;
    OP_POST(s, "fi_write", fi_write(s->ep, init, count * sz, NULL, s->peer, p.addr, p.key, &ctx));
    op_wait_ok(s, s->txcq, &ctx, "write of the initial words");
    switch (ops[o].kind) {
    case K_WRITE:
        OP_POST(s, "fi_atomic", fi_atomic(s->ep, opnd, count, NULL, s->peer, p.addr, p.key,
                                          types[t].dt, ops[o].op, &ctx));
        break;
    case K_FETCH:
        OP_POST(s, "fi_fetch_atomic",
                fi_fetch_atomic(s->ep, opnd, count, NULL, res, NULL, s->peer, p.addr, p.key,
                                types[t].dt, ops[o].op, &ctx));
        break;
    default:
        OP_POST(s, "fi_compare_atomic",
                fi_compare_atomic(s->ep, opnd, count, NULL, cmp, NULL, res, NULL, s->peer,
                                  p.addr, p.key, types[t].dt, ops[o].op, &ctx));
    }
    op_ent_t e = op_wait_ok(s, s->txcq, &ctx, "atomic");
    uint64_t fl = FI_ATOMIC | (ops[o].kind == K_WRITE ? FI_WRITE : FI_READ);
    if (e.e.flags != fl)
        OP_FAIL("%s %s: completion flags 0x%llx", ref_type_name(vs), ops[o].name,
                (unsigned long long)e.e.flags);
    OP_POST(s, "fi_read", fi_read(s->ep, after, count * sz, NULL, s->peer, p.addr, p.key, &ctx));
    op_wait_ok(s, s->txcq, &ctx, "read of the words after");
    for (size_t i = 0; i < count; i++) {
        uint64_t got = get(after + i * sz, sz);
        if (got != want[i])
            OP_FAIL("%s %s (%s, %zu elements): element %zu is 0x%llx, expected 0x%llx "
                    "(word 0x%llx operand 0x%llx compare 0x%llx)",
                    ref_type_name(vs), ops[o].name, ops[o].kind == K_WRITE ? "write"
                    : ops[o].kind == K_FETCH ? "fetch" : "compare", count, i,
                    (unsigned long long)got, (unsigned long long)want[i],
                    (unsigned long long)get(init + i * sz, sz),
                    (unsigned long long)get(opnd + i * sz, sz),
                    (unsigned long long)get(cmp + i * sz, sz));
        if (ops[o].kind != K_WRITE && get(res + i * sz, sz) != get(init + i * sz, sz))
            OP_FAIL("%s %s: fetched element %zu is 0x%llx, the word was 0x%llx",
                    ref_type_name(vs), ops[o].name, i, (unsigned long long)get(res + i * sz, sz),
                    (unsigned long long)get(init + i * sz, sz));
    }
}

/* Every (type, operation): valid ones work, the others are refused. */
static int sc_ops(op_side_t *s, void *arg)
{
    (void)arg;
    uint64_t *buf = calloc(NWORDS, 8);
    OP_CHECK(buf);
    struct fid_mr *mr;
    OP_CALL(fi_mr_reg(s->domain, buf, NWORDS * 8, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr,
                      NULL));
    rinfo_t p = swap_mr(s, mr, buf);
    if (s->rank == 0) {
        int done = 0;
        for (size_t t = 0; t < NTYPES; t++)
            for (size_t o = 0; o < NOPS; o++) {
                int ok = !(ops[o].int_only && (types[t].vsize & VMMC_ATOMIC_FLOAT));
                size_t cnt = 0;
                enum fi_datatype dt = types[t].dt;
                int r = ops[o].kind == K_WRITE   ? fi_atomicvalid(s->ep, dt, ops[o].op, &cnt)
                        : ops[o].kind == K_FETCH ? fi_fetch_atomicvalid(s->ep, dt, ops[o].op, &cnt)
                                                 : fi_compare_atomicvalid(s->ep, dt, ops[o].op,
                                                                          &cnt);
                if (!ok) {
                    if (r != -FI_EOPNOTSUPP)
                        OP_FAIL("%s on %s: valid says %d", ops[o].name,
                                ref_type_name(types[t].vsize), r);
                    char ctx;
                    OP_EXPECT(-FI_EOPNOTSUPP,
                              fi_atomic(s->ep, buf, 1, NULL, s->peer, p.addr, p.key, types[t].dt,
                                        ops[o].op == FI_MSWAP ? FI_BOR : ops[o].op, &ctx));
                    continue;
                }
                if (r != 0 || cnt < NWORDS)
                    OP_FAIL("%s on %s: valid says %d, count %zu", ops[o].name,
                            ref_type_name(types[t].vsize), r, cnt);
                one(s, p, t, o, 1);
                one(s, p, t, o, 24);
                done++;
            }
        OP_CHECK(done == 19 * 4 + 12 * 2);
    }
    op_barrier(s);
    OP_CALL(fi_close(&mr->fid));
    free(buf);
    return 0;
}

/* The fetch forms of the write operations, with results. */
static int sc_fetch(op_side_t *s, void *arg)
{
    (void)arg;
    uint64_t *buf = calloc(NWORDS, 8);
    OP_CHECK(buf);
    struct fid_mr *mr;
    OP_CALL(fi_mr_reg(s->domain, buf, NWORDS * 8, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr,
                      NULL));
    rinfo_t p = swap_mr(s, mr, buf);
    if (s->rank == 0) {
        for (size_t t = 0; t < NTYPES; t++)
            for (size_t o = 0; o < NOPS; o++) {
                if (ops[o].kind != K_WRITE ||
                    (ops[o].int_only && (types[t].vsize & VMMC_ATOMIC_FLOAT)))
                    continue;
                /* Same operation through fi_fetch_atomic. */
                size_t sz = types[t].size;
                uint8_t init[8], opnd[8], res[8], after[8];
                uint64_t vals[16];
                int nv = ref_values(types[t].vsize, vals);
                uint64_t w = vals[o % (size_t)nv], a = vals[(o + t + 1) % (size_t)nv];
                put(init, sz, w);
                put(opnd, sz, a);
                char ctx;
                OP_POST(s, "fi_write", fi_write(s->ep, init, sz, NULL, s->peer, p.addr + 8,
                                                p.key, &ctx));
                op_wait_ok(s, s->txcq, &ctx, "initial word");
                OP_POST(s, "fi_fetch_atomic",
                        fi_fetch_atomic(s->ep, opnd, 1, NULL, res, NULL, s->peer, p.addr + 8,
                                        p.key, types[t].dt, ops[o].op, &ctx));
                op_wait_ok(s, s->txcq, &ctx, "fetch atomic");
                OP_POST(s, "fi_read", fi_read(s->ep, after, sz, NULL, s->peer, p.addr + 8,
                                              p.key, &ctx));
                op_wait_ok(s, s->txcq, &ctx, "word after");
                OP_CHECK(get(res, sz) == w);
                OP_CHECK(get(after, sz) == ref_apply(ops[o].vop, types[t].vsize, w, a, 0));
            }
    }
    op_barrier(s);
    OP_CALL(fi_close(&mr->fid));
    free(buf);
    return 0;
}

/* Query, limits, errors and inject. */
static int sc_limits(op_side_t *s, void *arg)
{
    (void)arg;
    uint64_t *buf = calloc(NWORDS, 8), *ro = calloc(NWORDS, 8), *wo = calloc(NWORDS, 8);
    OP_CHECK(buf && ro && wo);
    struct fid_mr *mr, *mro, *mwo;
    OP_CALL(fi_mr_reg(s->domain, buf, NWORDS * 8, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr,
                      NULL));
    OP_CALL(fi_mr_reg(s->domain, ro, NWORDS * 8, FI_REMOTE_READ, 0, 0, 0, &mro, NULL));
    OP_CALL(fi_mr_reg(s->domain, wo, NWORDS * 8, FI_REMOTE_WRITE, 0, 0, 0, &mwo, NULL));
    rinfo_t p = swap_mr(s, mr, buf), pro = swap_mr(s, mro, ro), pwo = swap_mr(s, mwo, wo);
    if (s->rank == 0) {
        struct fi_atomic_attr a;
        OP_CALL(fi_query_atomic(s->domain, FI_DOUBLE, FI_SUM, &a, 0));
        OP_CHECK(a.size == 8 && a.count >= 1);
        OP_CALL(fi_query_atomic(s->domain, FI_INT32, FI_CSWAP_GT, &a, FI_COMPARE_ATOMIC));
        OP_CHECK(a.size == 4);
        OP_EXPECT(-FI_EOPNOTSUPP, fi_query_atomic(s->domain, FI_INT8, FI_SUM, &a, 0));
        OP_EXPECT(-FI_EOPNOTSUPP, fi_query_atomic(s->domain, FI_UINT16, FI_BOR, &a, 0));
        OP_EXPECT(-FI_EOPNOTSUPP, fi_query_atomic(s->domain, FI_LONG_DOUBLE, FI_SUM, &a, 0));
        OP_EXPECT(-FI_EOPNOTSUPP, fi_query_atomic(s->domain, FI_FLOAT, FI_BXOR, &a, 0));
        OP_EXPECT(-FI_EOPNOTSUPP, fi_query_atomic(s->domain, FI_UINT64, FI_CSWAP, &a, 0));
        OP_EXPECT(-FI_EOPNOTSUPP, fi_query_atomic(s->domain, FI_UINT64, FI_SUM, &a,
                                                  FI_COMPARE_ATOMIC));
        OP_EXPECT(-FI_EOPNOTSUPP, fi_query_atomic(s->domain, FI_UINT64, FI_ATOMIC_READ, &a, 0));
        OP_CALL(fi_query_atomic(s->domain, FI_UINT64, FI_ATOMIC_READ, &a, FI_FETCH_ATOMIC));
        size_t max = 0;
        OP_CALL(fi_atomicvalid(s->ep, FI_UINT64, FI_SUM, &max));
        uint64_t *big = calloc(max + 1, 8);
        OP_CHECK(big);
        char ctx;
        OP_EXPECT(-FI_EINVAL, fi_atomic(s->ep, big, max + 1, NULL, s->peer, p.addr, p.key,
                                        FI_UINT64, FI_SUM, &ctx));
        free(big);
        uint64_t one = 1, res;
        OP_EXPECT(-FI_EINVAL, fi_atomic(s->ep, &one, 1, NULL, s->peer, p.addr + 4, p.key,
                                        FI_UINT64, FI_SUM, &ctx));
        OP_EXPECT(-FI_EINVAL, fi_atomic(s->ep, &one, 2, NULL, s->peer, p.addr + NWORDS * 8 - 8,
                                        p.key, FI_UINT64, FI_SUM, &ctx));
        OP_EXPECT(-FI_EINVAL, fi_atomic(s->ep, &one, 0, NULL, s->peer, p.addr, p.key, FI_UINT64,
                                        FI_SUM, &ctx));
        /* Access: no write into a read-only region, no fetch from a
         * write-only one; a plain write into the latter works. */
        OP_POST(s, "atomic ro", fi_atomic(s->ep, &one, 1, NULL, s->peer, pro.addr, pro.key,
                                          FI_UINT64, FI_SUM, &ctx));
        op_wait_err(s, s->txcq, &ctx, FI_EACCES, "atomic into a read-only region");
        OP_POST(s, "fetch wo", fi_fetch_atomic(s->ep, &one, 1, NULL, &res, NULL, s->peer,
                                               pwo.addr, pwo.key, FI_UINT64, FI_SUM, &ctx));
        op_wait_err(s, s->txcq, &ctx, FI_EACCES, "fetch from a write-only region");
        OP_POST(s, "atomic wo", fi_atomic(s->ep, &one, 1, NULL, s->peer, pwo.addr, pwo.key,
                                          FI_UINT64, FI_SUM, &ctx));
        op_wait_ok(s, s->txcq, &ctx, "atomic into a write-only region");
        OP_POST(s, "forged", fi_atomic(s->ep, &one, 1, NULL, s->peer, p.addr, p.key ^ 0x8000,
                                       FI_UINT64, FI_SUM, &ctx));
        op_wait_err(s, s->txcq, &ctx, FI_EACCES, "atomic with a forged key");
        /* Inject: no completion; 10 adds of 3 to word 5. */
        for (int i = 0; i < 10; i++) {
            uint64_t three = 3;
            OP_POST(s, "fi_inject_atomic", fi_inject_atomic(s->ep, &three, 1, s->peer,
                                                           p.addr + 40, p.key, FI_UINT64, FI_SUM));
        }
        op_expect_none(s, s->txcq, 0.1, "inject atomics");
        OP_POST(s, "fetch", fi_fetch_atomic(s->ep, NULL, 1, NULL, &res, NULL, s->peer, p.addr + 40,
                                            p.key, FI_UINT64, FI_ATOMIC_READ, &ctx));
        op_wait_ok(s, s->txcq, &ctx, "atomic read");
        OP_CHECK(res == 30);
    }
    op_barrier(s);
    if (s->rank == 1) {
        OP_CHECK(buf[5] == 30 && wo[0] == 1);
        for (int i = 0; i < NWORDS; i++)
            OP_CHECK(ro[i] == 0 && (i == 5 || buf[i] == 0) && (i == 0 || wo[i] == 0));
    }
    OP_CALL(fi_close(&mr->fid));
    OP_CALL(fi_close(&mro->fid));
    OP_CALL(fi_close(&mwo->fid));
    free(buf);
    free(ro);
    free(wo);
    return 0;
}

int main(int argc, char **argv)
{
    op_tally_t t = {0};
    op_cfg_t c = cfg_atomic();
    if (op_want(argc, argv, "ops"))
        op_tally(&t, op_run("ops", &c, sc_ops, NULL));
    if (op_want(argc, argv, "fetch"))
        op_tally(&t, op_run("fetch", &c, sc_fetch, NULL));
    if (op_want(argc, argv, "limits"))
        op_tally(&t, op_run("limits", &c, sc_limits, NULL));
    return op_tally_exit(&t);
}
