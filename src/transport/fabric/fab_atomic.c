/* The fabric transport's remote atomics: on an import with direct access
 * (fab_rdma.c), vmmc_atomic is the provider's fi_atomic, fi_fetch_atomic or
 * fi_compare_atomic on the exporter's registered region, where the provider
 * offers FI_ATOMIC (fab_prov.c asks for it where VMMC_FABRIC_ATOMIC wants
 * it) and that form for that operation and type (fi_query_atomic, asked
 * once when the endpoint opens). Everything else is declined and goes as
 * the core's control message, executed by the target's vmmc:
 *   - a float or double CSWAP: the provider compares the bits
 *     (__atomic_compare_exchange), vmmc compares as C does (-0.0 == +0.0,
 *     a NaN equals nothing);
 *   - a compare form (CSWAP_*, MSWAP) without a result on an export without
 *     VMMC_EXPORT_READ: the provider's compare atomics need the region's
 *     FI_REMOTE_READ, the core lets a write-only export take them;
 *   - imports without direct access, providers without FI_ATOMIC.
 * On ofi_rxm (and ofi_rxd) the target's provider executes the atomic in
 * its progress (our progress thread reading its queues) with libfabric's
 * handlers, the processor's atomic instructions (__atomic builtins, a
 * compare-and-swap loop where there is none): atomic with the exporter's
 * own vmmc_atomic on the word, with mapped peers' and with the core's
 * execution of other peers' requests. It checks the key, the range and the
 * region's access (a fetch needs FI_REMOTE_READ: as vmmc's rights) and
 * answers every atomic, so a waited one has been applied when it completes.
 * Order: after the writes and sends posted before it (the RMA path
 * requires FI_ORDER_WAW/RAW/SAW, which libfabric defines for RMA and atomic
 * operations alike); writes that went as messages are flushed first. */
#include "transport/fabric/fab_int.h"

#include <string.h>

/* The provider's datatype of vmmc's word type (width 4 or 8 | SIGNED | FLOAT). */
static int type_index(int size)
{
    int w = size & 0xf;
    int t = size & VMMC_ATOMIC_FLOAT ? 2 : size & VMMC_ATOMIC_SIGNED ? 1 : 0;
    if (w != 4 && w != 8)
        return -1;
    return (w == 8 ? 3 : 0) + t;
}

static const enum fi_datatype fi_types[FAB_AT_TYPES] = {FI_UINT32, FI_INT32, FI_FLOAT,
                                                        FI_UINT64, FI_INT64, FI_DOUBLE};

/* vmmc_atomic_op_t -> the provider's operation, and its form: compare ops
 * take a compare operand and always fetch. -1: none. */
static int fi_op_of(int op, int *compare)
{
    *compare = 0;
    switch (op) {
    case VMMC_ATOMIC_ADD: return FI_SUM;
    case VMMC_ATOMIC_AND: return FI_BAND;
    case VMMC_ATOMIC_OR: return FI_BOR;
    case VMMC_ATOMIC_XOR: return FI_BXOR;
    case VMMC_ATOMIC_SWAP: return FI_ATOMIC_WRITE;
    case VMMC_ATOMIC_READ: return FI_ATOMIC_READ;
    case VMMC_ATOMIC_MIN: return FI_MIN;
    case VMMC_ATOMIC_MAX: return FI_MAX;
    case VMMC_ATOMIC_PROD: return FI_PROD;
    case VMMC_ATOMIC_LAND: return FI_LAND;
    case VMMC_ATOMIC_LOR: return FI_LOR;
    case VMMC_ATOMIC_LXOR: return FI_LXOR;
    }
    *compare = 1;
    switch (op) {
    case VMMC_ATOMIC_CSWAP: return FI_CSWAP;
    case VMMC_ATOMIC_MSWAP: return FI_MSWAP;
    case VMMC_ATOMIC_CSWAP_NE: return FI_CSWAP_NE;
    case VMMC_ATOMIC_CSWAP_LE: return FI_CSWAP_LE;
    case VMMC_ATOMIC_CSWAP_LT: return FI_CSWAP_LT;
    case VMMC_ATOMIC_CSWAP_GE: return FI_CSWAP_GE;
    case VMMC_ATOMIC_CSWAP_GT: return FI_CSWAP_GT;
    }
    return -1;
}

void vmmc_fab__atomic_setup(fab_ep_t *f)
{
    memset(f->at_valid, 0, sizeof f->at_valid);
    f->atomics = f->rma && (f->info->caps & FI_ATOMIC) &&
                 vmmc_fab__atomic_wanted(f->info->fabric_attr->prov_name);
    if (!f->atomics)
        return;
    int any = 0;
    for (int op = 1; op < FAB_AT_OPS; op++) {
        int cmp;
        int fo = fi_op_of(op, &cmp);
        if (fo < 0)
            continue;
        for (int t = 0; t < FAB_AT_TYPES; t++) {
            size_t want = t < 3 ? 4 : 8;
            static const uint64_t forms[3][2] = {{FAB_AT_WRITE, 0},
                                                 {FAB_AT_FETCH, FI_FETCH_ATOMIC},
                                                 {FAB_AT_COMPARE, FI_COMPARE_ATOMIC}};
            for (int k = 0; k < 3; k++) {
                if ((k == 2) != cmp || (op == VMMC_ATOMIC_READ && k != 1))
                    continue;
                struct fi_atomic_attr a = {0};
                if (fi_query_atomic(f->domain, fi_types[t], (enum fi_op)fo, &a, forms[k][1]) ==
                        0 && a.size == want && a.count >= 1) {
                    f->at_valid[op][t] |= (uint8_t)forms[k][0];
                    any = 1;
                }
            }
        }
    }
    f->atomics = any;
}

typedef struct {
    int kind; /* FAB_AT_* */
    enum fi_op op;
    enum fi_datatype dt;
    uint64_t raddr;
    void *desc;
} fab_at_t;

static ssize_t issue_atomic(fab_ep_t *f, fab_peer_t *p, const fab_rpx_t *r, fab_tx_t *tx,
                            void *arg)
{
    const fab_at_t *o = arg;
    uint64_t *w = (uint64_t *)tx->buf; /* operand, compare, result */
    if (o->kind == FAB_AT_WRITE)
        return fi_atomic(f->fep, &w[0], 1, o->desc, p->fa, o->raddr, r->key, o->dt, o->op,
                         &tx->ctx);
    if (o->kind == FAB_AT_FETCH)
        return fi_fetch_atomic(f->fep, &w[0], 1, o->desc, &w[2], o->desc, p->fa, o->raddr,
                               r->key, o->dt, o->op, &tx->ctx);
    return fi_compare_atomic(f->fep, &w[0], 1, o->desc, &w[1], o->desc, &w[2], o->desc, p->fa,
                             o->raddr, r->key, o->dt, o->op, &tx->ctx);
}

static int atomic_post(vmmc_tl_proxy_t *px, fab_at_t *o, size_t off, int size, uint64_t operand,
                       uint64_t compare, uint64_t *old);

int vmmc_fab__atomic(vmmc_tl_proxy_t *px, size_t off, int op, int size, uint64_t operand,
                     uint64_t compare, int fetch, uint64_t *old)
{
    fab_ep_t *f = F(px->ep);
    const fab_rpx_t *r = px->tl_priv;
    if (!f || !f->atomics || !r)
        return VMMC_TL_DECLINED;
    int cmp, t = type_index(size);
    int fo = fi_op_of(op, &cmp);
    if (fo < 0 || t < 0 || op >= FAB_AT_OPS)
        return VMMC_TL_DECLINED;
    if (op == VMMC_ATOMIC_CSWAP && (size & VMMC_ATOMIC_FLOAT))
        return VMMC_TL_DECLINED; /* bits against C's == */
    if (cmp && !r->readable)
        return VMMC_TL_DECLINED; /* FI_REMOTE_READ, which a write-only export lacks */
    fab_at_t o = {.kind = cmp ? FAB_AT_COMPARE
                         : fetch || op == VMMC_ATOMIC_READ ? FAB_AT_FETCH
                                                           : FAB_AT_WRITE,
                  .op = (enum fi_op)fo,
                  .dt = fi_types[t],
                  .raddr = r->base + off};
    if (!(f->at_valid[op][t] & o.kind))
        return VMMC_TL_DECLINED;
    /* (the flush waits for our progress thread, which a revocation holds
     * while operations are under way: before entering) */
    int st = vmmc_fab__after_messages(px);
    if (st != VMMC_OK || (st = vmmc_tl_px_enter(px)) != VMMC_OK)
        return st;
    st = atomic_post(px, &o, off, size, operand, compare, old);
    vmmc_tl_px_leave(px);
    return st;
}

static int atomic_post(vmmc_tl_proxy_t *px, fab_at_t *o, size_t off, int size, uint64_t operand,
                       uint64_t compare, uint64_t *old)
{
    fab_ep_t *f = F(px->ep);
    int st = VMMC_OK;
    fab_peer_t *p = vmmc_fab__peer_live(f, px->rank, &st);
    if (!p)
        return st;
    fab_tx_t *tx = vmmc_fab__tx_new(f, px->rank, 3 * sizeof(uint64_t), 1);
    if (!tx)
        return VMMC_ERR_NOMEM;
    uint64_t *w = (uint64_t *)tx->buf;
    /* a 4-byte word's value is the low half: the first 4 bytes here */
    w[0] = (size & 0xf) == 4 ? (uint32_t)operand : operand;
    w[1] = (size & 0xf) == 4 ? (uint32_t)compare : compare;
    w[2] = 0;
    if ((st = vmmc_fab__local_reg(f, tx, tx->buf, tx->len, FI_READ | FI_WRITE, &o->desc)) ==
        VMMC_OK)
        st = vmmc_fab__post_op(f, px, p, tx, 0, issue_atomic, o, &f->c_rma_atomics,
                               "fi_atomic", (size_t)(size & 0xf));
    if (st != VMMC_OK) {
        vmmc_fab__tx_free(f, tx);
        return st;
    }
    uint64_t v = 0;
    st = vmmc_fab__wait_tx(f, tx, px->rank, &w[2], &v, sizeof v);
    if (st == VMMC_OK && old)
        *old = v;
    if (st == VMMC_ERR_PERMISSION)
        st = vmmc_error(VMMC_ERR_PERMISSION, "fabric: rank %d's provider refused an atomic of "
                        "%d bytes at offset %zu of '%s' (the export ended?)", px->rank,
                        size & 0xf, off, px->name);
    return st;
}
