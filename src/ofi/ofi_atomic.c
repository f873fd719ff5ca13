/* fi_ops_atomic and query_atomic: libfabric's atomics on vmmc's typed ones.
 *
 * Types: INT32, UINT32, INT64, UINT64, FLOAT, DOUBLE (vmmc atomics work on
 * 4- and 8-byte words; 8- and 16-bit, complex and long double types are
 * -FI_EOPNOTSUPP). Operations as vmmc has them per type: the bitwise and
 * logical ones and MSWAP on integers only. An operation on count elements
 * posts one vmmc atomic per element (each atomic by itself, as libfabric
 * asks), all into the endpoint's vmmc completion queue; the fi completion
 * follows the last. Inject forms are synchronous and report nothing.
 *
 * Cost: into a mapped region (shm, a whole vmmc_mem_alloc() allocation) an
 * atomic is one processor instruction; into other memory on the same host
 * (user buffers, the usual case for MPI windows) it is executed by the
 * target's vmmc control thread (two wake-ups per element); over udp by the
 * target's link thread, one round trip.
 */
#include <string.h>

#include "ofi/ofi_rma_priv.h"

enum { K_WRITE, K_FETCH, K_COMPARE };

/* Width in bytes and vmmc's size argument of a datatype; 0: not supported. */
static size_t dt_size(enum fi_datatype dt, int *vsize)
{
    switch (dt) {
    case FI_INT32:
        *vsize = 4 | VMMC_ATOMIC_SIGNED;
        return 4;
    case FI_UINT32:
        *vsize = 4;
        return 4;
    case FI_INT64:
        *vsize = 8 | VMMC_ATOMIC_SIGNED;
        return 8;
    case FI_UINT64:
        *vsize = 8;
        return 8;
    case FI_FLOAT:
        *vsize = 4 | VMMC_ATOMIC_FLOAT;
        return 4;
    case FI_DOUBLE:
        *vsize = 8 | VMMC_ATOMIC_FLOAT;
        return 8;
    default:
        return 0;
    }
}

/* The vmmc operation for @p op in calls of @p kind on a float or not; 0 if
 * there is none. */
static vmmc_atomic_op_t op_map(enum fi_op op, int kind, int flt)
{
    vmmc_atomic_op_t v = 0;
    int integer_only = 0;
    switch (op) {
    case FI_MIN: v = VMMC_ATOMIC_MIN; break;
    case FI_MAX: v = VMMC_ATOMIC_MAX; break;
    case FI_SUM: v = VMMC_ATOMIC_ADD; break;
    case FI_PROD: v = VMMC_ATOMIC_PROD; break;
    case FI_LOR: v = VMMC_ATOMIC_LOR; integer_only = 1; break;
    case FI_LAND: v = VMMC_ATOMIC_LAND; integer_only = 1; break;
    case FI_BOR: v = VMMC_ATOMIC_OR; integer_only = 1; break;
    case FI_BAND: v = VMMC_ATOMIC_AND; integer_only = 1; break;
    case FI_LXOR: v = VMMC_ATOMIC_LXOR; integer_only = 1; break;
    case FI_BXOR: v = VMMC_ATOMIC_XOR; integer_only = 1; break;
    case FI_ATOMIC_READ: v = VMMC_ATOMIC_READ; break;
    case FI_ATOMIC_WRITE: v = VMMC_ATOMIC_SWAP; break;
    case FI_CSWAP: v = VMMC_ATOMIC_CSWAP; break;
    case FI_CSWAP_NE: v = VMMC_ATOMIC_CSWAP_NE; break;
    case FI_CSWAP_LE: v = VMMC_ATOMIC_CSWAP_LE; break;
    case FI_CSWAP_LT: v = VMMC_ATOMIC_CSWAP_LT; break;
    case FI_CSWAP_GE: v = VMMC_ATOMIC_CSWAP_GE; break;
    case FI_CSWAP_GT: v = VMMC_ATOMIC_CSWAP_GT; break;
    case FI_MSWAP: v = VMMC_ATOMIC_MSWAP; integer_only = 1; break;
    default: return 0;
    }
    if (integer_only && flt)
        return 0;
    int compare = op >= FI_CSWAP && op <= FI_MSWAP;
    if (kind == K_COMPARE)
        return compare ? v : 0;
    if (compare)
        return 0;
    if (op == FI_ATOMIC_READ && kind != K_FETCH)
        return 0;
    return v;
}

/* 0 and the vmmc operation, width and size argument, or -FI_EOPNOTSUPP. */
static int check(int kind, enum fi_datatype dt, enum fi_op op, vmmc_atomic_op_t *vop,
                 size_t *esize, int *vsize)
{
    int vs = 0;
    size_t es = dt_size(dt, &vs);
    if (!es)
        return -FI_EOPNOTSUPP;
    vmmc_atomic_op_t v = op_map(op, kind, (vs & VMMC_ATOMIC_FLOAT) != 0);
    if (!v)
        return -FI_EOPNOTSUPP;
    if (vop)
        *vop = v;
    if (esize)
        *esize = es;
    if (vsize)
        *vsize = vs;
    return 0;
}

int vofi_query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
                      struct fi_atomic_attr *attr, uint64_t flags)
{
    (void)domain;
    if (!attr || (flags & ~(uint64_t)(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC)) ||
        ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC)))
        return -FI_EINVAL;
    int kind = (flags & FI_COMPARE_ATOMIC) ? K_COMPARE : (flags & FI_FETCH_ATOMIC) ? K_FETCH
                                                                                : K_WRITE;
    size_t es;
    int rc = check(kind, datatype, op, NULL, &es, NULL);
    if (rc)
        return rc;
    attr->size = es;
    attr->count = VOFI_MAX_ATOMIC_COUNT;
    return 0;
}

static int valid(int kind, enum fi_datatype dt, enum fi_op op, size_t *count)
{
    int rc = check(kind, dt, op, NULL, NULL, NULL);
    if (rc == 0 && count)
        *count = VOFI_MAX_ATOMIC_COUNT;
    return rc;
}

static int vofi_writevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op, size_t *count)
{
    (void)ep;
    return valid(K_WRITE, dt, op, count);
}

static int vofi_readwritevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
                               size_t *count)
{
    (void)ep;
    return valid(K_FETCH, dt, op, count);
}

static int vofi_compwritevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
                               size_t *count)
{
    (void)ep;
    return valid(K_COMPARE, dt, op, count);
}

/* ------------------------------------------------------------------------ */
/* posting */

/* Walks the elements of a vector of fi_ioc pieces. */
typedef struct cursor {
    const struct fi_ioc *v;
    size_t n, i, j;
} cursor_t;

static size_t ioc_total(const struct fi_ioc *v, size_t n, int *bad)
{
    size_t t = 0;
    *bad = n > VOFI_IOV_LIMIT || (n && !v);
    for (size_t i = 0; !*bad && i < n; i++) {
        if (v[i].count > VOFI_MAX_ATOMIC_COUNT)
            *bad = 1;
        t += v[i].count;
    }
    return t;
}

static void *cur_next(cursor_t *c, size_t esize)
{
    while (c->i < c->n && c->j >= c->v[c->i].count) {
        c->i++;
        c->j = 0;
    }
    if (c->i >= c->n)
        return NULL;
    char *p = c->v[c->i].addr;
    return p ? p + esize * c->j++ : (c->j++, NULL);
}

static uint64_t load(const void *p, size_t esize)
{
    if (!p)
        return 0;
    if (esize == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

#define ATOMIC_FLAGS                                                                       \
    (FI_COMPLETION | FI_INJECT | FI_FENCE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE |   \
     FI_COMMIT_COMPLETE | FI_INJECT_COMPLETE | FI_MORE)

typedef struct aop {
    int kind;
    const struct fi_ioc *iov;
    size_t count;
    const struct fi_ioc *cmp;
    size_t ccount;
    struct fi_ioc *res;
    size_t rcount;
    fi_addr_t dest;
    uint64_t addr, key;
    enum fi_datatype dt;
    enum fi_op op;
    void *context;
    uint64_t flags;
    int bare; /* fi_inject_atomic: synchronous, no completion */
} aop_t;

static ssize_t atomic_post(vofi_ep_t *ep, const aop_t *a)
{
    vmmc_atomic_op_t vop;
    size_t esize;
    int vsize;
    int rc = check(a->kind, a->dt, a->op, &vop, &esize, &vsize);
    if (rc) {
        vofi_warn("fi_atomic: datatype %d with operation %d is not supported here", (int)a->dt,
                  (int)a->op);
        return rc;
    }
    if (a->flags & ~(uint64_t)ATOMIC_FLAGS) {
        vofi_warn("fi_atomic: unsupported flags 0x%llx",
                  (unsigned long long)(a->flags & ~(uint64_t)ATOMIC_FLAGS));
        return -FI_EBADFLAGS;
    }
    int bad = 0, b2 = 0, b3 = 0;
    size_t n = ioc_total(a->iov, a->count, &bad);
    size_t nc = a->kind == K_COMPARE ? ioc_total(a->cmp, a->ccount, &b2) : n;
    size_t nr = a->kind != K_WRITE ? ioc_total(a->res, a->rcount, &b3) : n;
    if (bad || b2 || b3 || n == 0 || n > VOFI_MAX_ATOMIC_COUNT || nc != n || nr != n) {
        vofi_warn("fi_atomic: %zu elements (1..%d), %zu to compare, %zu results", n,
                  VOFI_MAX_ATOMIC_COUNT, nc, nr);
        return -FI_EINVAL;
    }
    if (a->addr % esize) {
        vofi_warn("fi_atomic: address 0x%llx is not aligned to its %zu-byte type",
                  (unsigned long long)a->addr, esize);
        return -FI_EINVAL;
    }
    if ((a->flags & FI_INJECT) && n * esize > vofi_set.inject) {
        vofi_warn("fi_inject_atomic: %zu bytes (inject size %llu)", n * esize,
                  (unsigned long long)vofi_set.inject);
        return -FI_EINVAL;
    }
    int fetch = a->kind != K_WRITE;
    int need = (vop == VMMC_ATOMIC_READ ? 0 : VOFI_NEED_WRITE) | (fetch ? VOFI_NEED_READ : 0);
    pthread_mutex_lock(&ep->lock);
    uint64_t cflags =
        a->bare ? 0 : vofi_rma_cflags(ep, FI_ATOMIC | (fetch ? FI_READ : FI_WRITE), a->flags);
    vofi_cntr_t *cntr = fetch ? ep->cntr_read : ep->cntr_write;
    int peer, late;
    struct vofi_rproxy *rp;
    size_t off;
    rc = vofi_rma_resolve(ep, a->dest, a->key, a->addr, n * esize, need, &peer, &rp, &off, &late);
    if (rc) {
        if (late && !a->bare) {
            vofi_rma_fail_now(ep, cflags, a->context, cntr, -rc, late);
            rc = 0;
        }
        goto out;
    }
    if (a->flags & FI_FENCE) {
        int vst = vmmc_fence(ep->vep, -1);
        if (vst != VMMC_OK) {
            if (a->bare)
                rc = -vofi_rma_err(vst);
            else
                vofi_rma_fail_now(ep, cflags, a->context, cntr, vofi_rma_err(vst), vst);
            goto out;
        }
    }
    cursor_t ci = {a->iov, a->count, 0, 0}, cc = {a->cmp, a->ccount, 0, 0};
    if (a->bare) {
        for (size_t i = 0; i < n; i++) {
            uint64_t operand = load(cur_next(&ci, esize), esize);
            int vst = vmmc_atomic(rp->px, off + i * esize, vop, vsize, operand, 0, NULL);
            if (vst != VMMC_OK) {
                if (vst == VMMC_ERR_STALE)
                    rp->stale = 1;
                rc = -vofi_rma_err(vst);
                goto out;
            }
        }
        if (cntr)
            vofi_cntr_inc(cntr);
        goto out;
    }
    vofi_rop_t *p = vofi_rop_get(ep, n);
    if (!p) {
        rc = -FI_EAGAIN;
        goto out;
    }
    p->peer = peer;
    p->context = a->context;
    p->flags = cflags;
    p->cntr = cntr;
    cursor_t cr = {a->res, a->rcount, 0, 0};
    for (size_t i = 0; i < n; i++) {
        vofi_rop_t *e = i ? vofi_rop_next(ep, p) : p;
        e->rp = rp;
        e->esize = (uint8_t)esize;
        uint64_t operand = load(cur_next(&ci, esize), esize);
        uint64_t compare = a->kind == K_COMPARE ? load(cur_next(&cc, esize), esize) : 0;
        e->result = fetch ? cur_next(&cr, esize) : NULL;
        int vst = vmmc_atomic_cq(rp->px, off + i * esize, vop, vsize, operand, compare, ep->vcq, e);
        if (vst == VMMC_ERR_AGAIN && i == 0) {
            vofi_rop_cancel(ep, p);
            rc = -FI_EAGAIN;
            break;
        }
        if (vst != VMMC_OK) {
            if (vst == VMMC_ERR_STALE)
                rp->stale = 1;
            vofi_rop_abort(ep, p, e, n - i, vst);
            break;
        }
    }
out:
    pthread_mutex_unlock(&ep->lock);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* the ops table */

static vofi_ep_t *ep_of(struct fid_ep *fep)
{
    return container_of(fep, vofi_ep_t, fid);
}

static uint64_t dflags(vofi_ep_t *ep)
{
    return ep->tx_op_flags & ~(uint64_t)(FI_INJECT | FI_REMOTE_CQ_DATA);
}

static ssize_t vofi_atomic_write(struct fid_ep *fep, const void *buf, size_t count, void *desc,
                                 fi_addr_t dest, uint64_t addr, uint64_t key,
                                 enum fi_datatype dt, enum fi_op op, void *context)
{
    (void)desc;
    vofi_ep_t *ep = ep_of(fep);
    struct fi_ioc v = {(void *)buf, count};
    aop_t a = {K_WRITE, &v, 1, NULL, 0, NULL, 0, dest, addr, key, dt, op, context, dflags(ep), 0};
    return atomic_post(ep, &a);
}

static ssize_t vofi_atomic_writev(struct fid_ep *fep, const struct fi_ioc *iov, void **desc,
                                  size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                                  enum fi_datatype dt, enum fi_op op, void *context)
{
    (void)desc;
    vofi_ep_t *ep = ep_of(fep);
    aop_t a = {K_WRITE, iov, count, NULL, 0, NULL, 0, dest, addr, key, dt, op, context,
               dflags(ep), 0};
    return atomic_post(ep, &a);
}

static int msg_ok(const struct fi_msg_atomic *msg)
{
    if (!msg || msg->rma_iov_count != VOFI_RMA_IOV_LIMIT || !msg->rma_iov) {
        vofi_warn("fi_atomicmsg: one remote piece per message (rma_iov_limit %d)",
                  VOFI_RMA_IOV_LIMIT);
        return -FI_EINVAL;
    }
    int bad;
    if (ioc_total(msg->msg_iov, msg->iov_count, &bad) != msg->rma_iov[0].count || bad) {
        vofi_warn("fi_atomicmsg: local elements do not match the remote piece's %zu",
                  msg->rma_iov[0].count);
        return -FI_EINVAL;
    }
    return 0;
}

static ssize_t vofi_atomic_writemsg(struct fid_ep *fep, const struct fi_msg_atomic *msg,
                                    uint64_t flags)
{
    int rc = msg_ok(msg);
    if (rc)
        return rc;
    aop_t a = {K_WRITE, msg->msg_iov, msg->iov_count, NULL, 0, NULL, 0, msg->addr,
               msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->datatype, msg->op, msg->context,
               flags, 0};
    return atomic_post(ep_of(fep), &a);
}

static ssize_t vofi_atomic_inject(struct fid_ep *fep, const void *buf, size_t count,
                                  fi_addr_t dest, uint64_t addr, uint64_t key,
                                  enum fi_datatype dt, enum fi_op op)
{
    struct fi_ioc v = {(void *)buf, count};
    aop_t a = {K_WRITE, &v, 1, NULL, 0, NULL, 0, dest, addr, key, dt, op, NULL, FI_INJECT, 1};
    return atomic_post(ep_of(fep), &a);
}

static ssize_t vofi_atomic_readwrite(struct fid_ep *fep, const void *buf, size_t count,
                                     void *desc, void *result, void *result_desc,
                                     fi_addr_t dest, uint64_t addr, uint64_t key,
                                     enum fi_datatype dt, enum fi_op op, void *context)
{
    (void)desc;
    (void)result_desc;
    vofi_ep_t *ep = ep_of(fep);
    struct fi_ioc v = {(void *)buf, count}, r = {result, count};
    aop_t a = {K_FETCH, &v, 1, NULL, 0, &r, 1, dest, addr, key, dt, op, context, dflags(ep), 0};
    return atomic_post(ep, &a);
}

static ssize_t vofi_atomic_readwritev(struct fid_ep *fep, const struct fi_ioc *iov, void **desc,
                                      size_t count, struct fi_ioc *resultv, void **result_desc,
                                      size_t result_count, fi_addr_t dest, uint64_t addr,
                                      uint64_t key, enum fi_datatype dt, enum fi_op op,
                                      void *context)
{
    (void)desc;
    (void)result_desc;
    vofi_ep_t *ep = ep_of(fep);
    aop_t a = {K_FETCH, iov, count, NULL, 0, resultv, result_count, dest, addr, key, dt, op,
               context, dflags(ep), 0};
    return atomic_post(ep, &a);
}

static ssize_t vofi_atomic_readwritemsg(struct fid_ep *fep, const struct fi_msg_atomic *msg,
                                        struct fi_ioc *resultv, void **result_desc,
                                        size_t result_count, uint64_t flags)
{
    (void)result_desc;
    int rc = msg_ok(msg);
    if (rc)
        return rc;
    aop_t a = {K_FETCH, msg->msg_iov, msg->iov_count, NULL, 0, resultv, result_count, msg->addr,
               msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->datatype, msg->op, msg->context,
               flags, 0};
    return atomic_post(ep_of(fep), &a);
}

static ssize_t vofi_atomic_compwrite(struct fid_ep *fep, const void *buf, size_t count,
                                     void *desc, const void *compare, void *compare_desc,
                                     void *result, void *result_desc, fi_addr_t dest,
                                     uint64_t addr, uint64_t key, enum fi_datatype dt,
                                     enum fi_op op, void *context)
{
    (void)desc;
    (void)compare_desc;
    (void)result_desc;
    vofi_ep_t *ep = ep_of(fep);
    struct fi_ioc v = {(void *)buf, count}, c = {(void *)compare, count}, r = {result, count};
    aop_t a = {K_COMPARE, &v, 1, &c, 1, &r, 1, dest, addr, key, dt, op, context, dflags(ep), 0};
    return atomic_post(ep, &a);
}

static ssize_t vofi_atomic_compwritev(struct fid_ep *fep, const struct fi_ioc *iov, void **desc,
                                      size_t count, const struct fi_ioc *comparev,
                                      void **compare_desc, size_t compare_count,
                                      struct fi_ioc *resultv, void **result_desc,
                                      size_t result_count, fi_addr_t dest, uint64_t addr,
                                      uint64_t key, enum fi_datatype dt, enum fi_op op,
                                      void *context)
{
    (void)desc;
    (void)compare_desc;
    (void)result_desc;
    vofi_ep_t *ep = ep_of(fep);
    aop_t a = {K_COMPARE, iov, count, comparev, compare_count, resultv, result_count, dest,
               addr, key, dt, op, context, dflags(ep), 0};
    return atomic_post(ep, &a);
}

static ssize_t vofi_atomic_compwritemsg(struct fid_ep *fep, const struct fi_msg_atomic *msg,
                                        const struct fi_ioc *comparev, void **compare_desc,
                                        size_t compare_count, struct fi_ioc *resultv,
                                        void **result_desc, size_t result_count, uint64_t flags)
{
    (void)compare_desc;
    (void)result_desc;
    int rc = msg_ok(msg);
    if (rc)
        return rc;
    aop_t a = {K_COMPARE, msg->msg_iov, msg->iov_count, comparev, compare_count, resultv,
               result_count, msg->addr, msg->rma_iov[0].addr, msg->rma_iov[0].key,
               msg->datatype, msg->op, msg->context, flags, 0};
    return atomic_post(ep_of(fep), &a);
}

struct fi_ops_atomic vofi_atomic_ops = {
    .size = sizeof(struct fi_ops_atomic),
    .write = vofi_atomic_write,
    .writev = vofi_atomic_writev,
    .writemsg = vofi_atomic_writemsg,
    .inject = vofi_atomic_inject,
    .readwrite = vofi_atomic_readwrite,
    .readwritev = vofi_atomic_readwritev,
    .readwritemsg = vofi_atomic_readwritemsg,
    .compwrite = vofi_atomic_compwrite,
    .compwritev = vofi_atomic_compwritev,
    .compwritemsg = vofi_atomic_compwritemsg,
    .writevalid = vofi_writevalid,
    .readwritevalid = vofi_readwritevalid,
    .compwritevalid = vofi_compwritevalid,
};
