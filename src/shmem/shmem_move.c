/* Data movement under every RMA and atomic call: a copy or a processor
 * atomic where the target's memory is mapped here (this PE, a PE on this
 * host), deliberate update, remote read and vmmc_atomic otherwise.
 *
 * Non-blocking operations to unmapped memory are posted on one completion
 * queue per PE; each carries its context, whose nbi_pending counts what it
 * still has in flight, so shm_quiet(ctx) waits for that context's own
 * operations. A plain put rings no bell (a put is a store): fence and quiet
 * ring the PEs written since the last one. */
#include <stdio.h>
#include <string.h>

#include "shmem/shmem_amo_local.h"
#include "shmem/shmem_core.h"

uint8_t *shm_dirty;           /* [npes]: written since the last fence/quiet */
static int remote_dirty;      /* something went to another host since the last quiet */
static vmmc_cq_t *nbi_cq;

void shm_move_init(void)
{
    if (!shm_g.any_remote)
        return;
    int st = vmmc_cq_open(shm_g.ep, shm_cfg.nbi_depth, &nbi_cq);
    if (st != VMMC_OK)
        shm_fatal_vmmc("shmem_init", "completion queue for non-blocking operations", st);
}

void shm_move_fini(void)
{
    if (nbi_cq)
        (void)vmmc_cq_close(nbi_cq);
    nbi_cq = NULL;
}

static inline void set_remote_dirty(void)
{
    if (!__atomic_load_n(&remote_dirty, __ATOMIC_RELAXED))
        __atomic_store_n(&remote_dirty, 1, __ATOMIC_RELAXED);
}

/* Take what completed (waiting up to @timeout_ms for the first one). */
static void nbi_drain(int timeout_ms)
{
    vmmc_completion_t c[32];
    int n = timeout_ms ? vmmc_cq_wait(nbi_cq, c, 32, timeout_ms) : vmmc_cq_poll(nbi_cq, c, 32);
    if (n < 0)
        shm_fatal_vmmc("shmem_quiet", "completion of non-blocking operations", n);
    for (int i = 0; i < n; i++) {
        if (c[i].status != VMMC_OK) {
            shm_exit_check();
            shm_fatal("shmem_quiet", "a non-blocking %s to PE %d failed: %s: %s",
                      c[i].op == VMMC_OP_FETCH ? "get" : "put", c[i].peer,
                      vmmc_strerror(c[i].status), c[i].error ? c[i].error : "");
        }
        __atomic_sub_fetch(&((struct shmem_ctx_s *)c[i].context)->nbi_pending, 1,
                           __ATOMIC_RELEASE);
    }
}

/* Post one operation on @ctx's behalf; 1 = fetch. */
static void nbi_post(const char *fn, struct shmem_ctx_s *ctx, int fetch, vmmc_proxy_t *px,
                     size_t off, void *buf, size_t len)
{
    __atomic_add_fetch(&ctx->nbi_pending, 1, __ATOMIC_RELAXED);
    for (;;) {
        int st = fetch ? vmmc_fetch_cq(px, off, buf, len, nbi_cq, ctx)
                       : vmmc_send_cq(px, off, buf, len, 0, 0, nbi_cq, ctx);
        if (st == VMMC_OK)
            return;
        if (st != VMMC_ERR_AGAIN)
            shm_fatal_vmmc(fn, fetch ? "remote read" : "deliberate update", st);
        nbi_drain(1); /* the queue is full: make room */
    }
}

static void ctx_wait(struct shmem_ctx_s *ctx)
{
    while (__atomic_load_n(&ctx->nbi_pending, __ATOMIC_ACQUIRE) > 0) {
        shm_exit_check();
        nbi_drain(10);
    }
}

void shm_put_bytes(const char *fn, shmem_ctx_t ctx, void *dst_sym, const void *src, size_t len,
                   int pe)
{
    if (ctx == SHMEM_CTX_INVALID)
        return;
    shm_loc_t loc;
    shm_locate(fn, dst_sym, len, pe, &loc);
    if (__builtin_expect(loc.ptr != NULL, 1)) {
        memmove(loc.ptr, src, len);
        shm_mark(pe);
        return;
    }
    int st = vmmc_send(loc.px, loc.off, src, len, 0);
    if (st != VMMC_OK)
        shm_fatal_vmmc(fn, "deliberate update", st);
    shm_mark(pe);
    if (!shm_g.pe[pe].same_host)
        set_remote_dirty();
}

void shm_get_bytes(const char *fn, shmem_ctx_t ctx, void *dst, const void *src_sym, size_t len,
                   int pe)
{
    if (ctx == SHMEM_CTX_INVALID)
        return;
    shm_loc_t loc;
    shm_locate(fn, src_sym, len, pe, &loc);
    if (__builtin_expect(loc.ptr != NULL, 1)) {
        memmove(dst, loc.ptr, len);
        return;
    }
    int st = vmmc_fetch(loc.px, loc.off, dst, len);
    if (st != VMMC_OK)
        shm_fatal_vmmc(fn, "remote read", st);
}

void shm_put_nbi_bytes(const char *fn, shmem_ctx_t ctx, void *dst_sym, const void *src,
                       size_t len, int pe)
{
    if (ctx == SHMEM_CTX_INVALID)
        return;
    shm_loc_t loc;
    shm_locate(fn, dst_sym, len, pe, &loc);
    if (loc.ptr) {
        memmove(loc.ptr, src, len); /* complete at once */
        shm_mark(pe);
        return;
    }
    if (!nbi_cq || len == 0) {
        shm_put_bytes(fn, ctx, dst_sym, src, len, pe);
        return;
    }
    nbi_post(fn, ctx, 0, loc.px, loc.off, (void *)src, len);
    shm_mark(pe);
    set_remote_dirty();
}

void shm_get_nbi_bytes(const char *fn, shmem_ctx_t ctx, void *dst, const void *src_sym,
                       size_t len, int pe)
{
    if (ctx == SHMEM_CTX_INVALID)
        return;
    shm_loc_t loc;
    shm_locate(fn, src_sym, len, pe, &loc);
    if (loc.ptr) {
        memmove(dst, loc.ptr, len);
        return;
    }
    if (!nbi_cq || len == 0) {
        shm_get_bytes(fn, ctx, dst, src_sym, len, pe);
        return;
    }
    nbi_post(fn, ctx, 1, loc.px, loc.off, dst, len);
}

/* Strided transfers: the whole target range is checked first, then each
 * element moves; to another host every element is posted and all are
 * waited for together. */
static void strided(const char *fn, int get, void *dst, const void *src, ptrdiff_t dst_stride,
                    ptrdiff_t src_stride, size_t elem, size_t nelems, int pe)
{
    if (nelems == 0)
        return;
    ptrdiff_t sym_stride = get ? src_stride : dst_stride;
    const char *sym = get ? src : dst;
    if (sym_stride <= 0 || (get ? dst_stride : src_stride) <= 0)
        shm_fatal(fn, "strides must be positive (%td, %td)", dst_stride, src_stride);
    size_t span;
    if (__builtin_mul_overflow((size_t)sym_stride, nelems - 1, &span) ||
        __builtin_add_overflow(span, elem, &span))
        shm_fatal(fn, "strided range overflows (%zu elements)", nelems);
    shm_loc_t loc;
    shm_locate(fn, sym, span, pe, &loc);
    struct shmem_ctx_s local = {0};
    for (size_t i = 0; i < nelems; i++) {
        char *d = (char *)dst + (ptrdiff_t)i * dst_stride * (ptrdiff_t)elem;
        const char *s = (const char *)src + (ptrdiff_t)i * src_stride * (ptrdiff_t)elem;
        size_t soff = loc.off + i * (size_t)sym_stride * elem;
        if (loc.ptr) {
            char *t = loc.ptr + i * (size_t)sym_stride * elem;
            memmove(get ? d : t, get ? t : s, elem);
        } else if (nbi_cq) {
            nbi_post(fn, &local, get, loc.px, soff, get ? d : (void *)s, elem);
        } else {
            int st = get ? vmmc_fetch(loc.px, soff, d, elem) : vmmc_send(loc.px, soff, s, elem, 0);
            if (st != VMMC_OK)
                shm_fatal_vmmc(fn, get ? "remote read" : "deliberate update", st);
        }
    }
    if (nbi_cq)
        ctx_wait(&local);
    if (!get) {
        shm_mark(pe);
        if (!shm_g.pe[pe].same_host)
            set_remote_dirty();
    }
}

void shm_iput_bytes(const char *fn, shmem_ctx_t ctx, void *dst_sym, const void *src,
                    ptrdiff_t dst_stride, ptrdiff_t src_stride, size_t elem, size_t nelems,
                    int pe)
{
    if (ctx == SHMEM_CTX_INVALID)
        return;
    /* strides are in elements; the range is checked in bytes */
    strided(fn, 0, dst_sym, src, dst_stride, src_stride, elem, nelems, pe);
}

void shm_iget_bytes(const char *fn, shmem_ctx_t ctx, void *dst, const void *src_sym,
                    ptrdiff_t dst_stride, ptrdiff_t src_stride, size_t elem, size_t nelems,
                    int pe)
{
    if (ctx == SHMEM_CTX_INVALID)
        return;
    strided(fn, 1, dst, src_sym, dst_stride, src_stride, elem, nelems, pe);
}

static uint64_t local_amo(void *p, vmmc_atomic_op_t op, int size, uint64_t opd, uint64_t cmp)
{
    int w = size & 0xf, flt = size & VMMC_ATOMIC_FLOAT, sgn = size & VMMC_ATOMIC_SIGNED;
    if (w == 4) {
        uint32_t *q = p, o = (uint32_t)opd, c = (uint32_t)cmp;
        if (!flt) {
            switch (op) { /* the processor's own instructions */
            case VMMC_ATOMIC_ADD: return __atomic_fetch_add(q, o, __ATOMIC_ACQ_REL);
            case VMMC_ATOMIC_AND: return __atomic_fetch_and(q, o, __ATOMIC_ACQ_REL);
            case VMMC_ATOMIC_OR: return __atomic_fetch_or(q, o, __ATOMIC_ACQ_REL);
            case VMMC_ATOMIC_XOR: return __atomic_fetch_xor(q, o, __ATOMIC_ACQ_REL);
            case VMMC_ATOMIC_SWAP: return __atomic_exchange_n(q, o, __ATOMIC_ACQ_REL);
            case VMMC_ATOMIC_READ: return __atomic_load_n(q, __ATOMIC_ACQUIRE);
            case VMMC_ATOMIC_CSWAP:
                __atomic_compare_exchange_n(q, &c, o, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
                return c;
            default: break;
            }
        }
        return flt ? shm_amo_f32(q, op, o, c) : sgn ? shm_amo_s32(q, op, o, c)
                                                    : shm_amo_u32(q, op, o, c);
    }
    uint64_t *q = p;
    if (!flt) {
        switch (op) {
        case VMMC_ATOMIC_ADD: return __atomic_fetch_add(q, opd, __ATOMIC_ACQ_REL);
        case VMMC_ATOMIC_AND: return __atomic_fetch_and(q, opd, __ATOMIC_ACQ_REL);
        case VMMC_ATOMIC_OR: return __atomic_fetch_or(q, opd, __ATOMIC_ACQ_REL);
        case VMMC_ATOMIC_XOR: return __atomic_fetch_xor(q, opd, __ATOMIC_ACQ_REL);
        case VMMC_ATOMIC_SWAP: return __atomic_exchange_n(q, opd, __ATOMIC_ACQ_REL);
        case VMMC_ATOMIC_READ: return __atomic_load_n(q, __ATOMIC_ACQUIRE);
        case VMMC_ATOMIC_CSWAP:
            __atomic_compare_exchange_n(q, &cmp, opd, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
            return cmp;
        default: break;
        }
    }
    return flt ? shm_amo_f64(q, op, opd, cmp) : sgn ? shm_amo_s64(q, op, opd, cmp)
                                                    : shm_amo_u64(q, op, opd, cmp);
}

uint64_t shm_amo(const char *fn, shmem_ctx_t ctx, void *sym, int pe, vmmc_atomic_op_t op,
                 int size, uint64_t operand, uint64_t compare, int fetch)
{
    if (ctx == SHMEM_CTX_INVALID)
        return 0;
    int w = size & ~(VMMC_ATOMIC_SIGNED | VMMC_ATOMIC_FLOAT);
    int flt = size & VMMC_ATOMIC_FLOAT;
    if ((w != 4 && w != 8) || (flt && (size & VMMC_ATOMIC_SIGNED)) ||
        op < VMMC_ATOMIC_ADD || op > VMMC_ATOMIC_CSWAP_GT || (flt && shm_amo_is_bits(op)))
        shm_fatal(fn, "atomic operation %d not defined on this type (size flags %#x)", (int)op,
                  (unsigned)size);
    if ((uintptr_t)sym % (uintptr_t)w)
        shm_fatal(fn, "atomic on an address not aligned to its %d bytes (%p)", w, sym);
    shm_loc_t loc;
    shm_locate(fn, sym, (size_t)w, pe, &loc);
    uint64_t old = 0;
    if (__builtin_expect(loc.ptr != NULL, 1)) {
        old = local_amo(loc.ptr, op, size, operand, compare);
    } else {
        int st = vmmc_atomic(loc.px, loc.off, op, size, operand, compare,
                             fetch || op == VMMC_ATOMIC_READ ? &old : NULL);
        if (st != VMMC_OK)
            shm_fatal_vmmc(fn, "remote atomic", st);
        if (!shm_g.pe[pe].same_host)
            set_remote_dirty();
    }
    if (op != VMMC_ATOMIC_READ)
        shm_ring(pe);
    return old;
}

/* Ring every PE written since the last fence or quiet. */
static void ring_dirty(void)
{
    for (int i = 0; i < shm_g.npes; i++)
        if (__atomic_load_n(&shm_dirty[i], __ATOMIC_RELAXED) &&
            __atomic_exchange_n(&shm_dirty[i], 0, __ATOMIC_RELAXED))
            shm_ring(i);
}

void shm_fence(shmem_ctx_t ctx)
{
    if (ctx == SHMEM_CTX_INVALID)
        return;
    /* Stores to mapped memory become visible in program order (x86 TSO,
     * and glibc ends its non-temporal copies with sfence); sends to one
     * peer land in the order they were issued. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    ring_dirty();
}

void shm_quiet(shmem_ctx_t ctx)
{
    if (ctx == SHMEM_CTX_INVALID)
        return;
    if (nbi_cq)
        ctx_wait(ctx);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&remote_dirty, __ATOMIC_RELAXED)) {
        __atomic_store_n(&remote_dirty, 0, __ATOMIC_RELAXED);
        int st = vmmc_fence(shm_g.ep, -1);
        if (st != VMMC_OK)
            shm_fatal_vmmc("shmem_quiet", "remote completion", st);
    }
    ring_dirty();
}

void shmem_fence(void)
{
    shm_check_init("shmem_fence");
    shm_fence(SHMEM_CTX_DEFAULT);
}

void shmem_ctx_fence(shmem_ctx_t ctx)
{
    shm_check_init("shmem_ctx_fence");
    shm_fence(ctx);
}

void shmem_quiet(void)
{
    shm_check_init("shmem_quiet");
    shm_quiet(SHMEM_CTX_DEFAULT);
}

void shmem_ctx_quiet(shmem_ctx_t ctx)
{
    shm_check_init("shmem_ctx_quiet");
    shm_quiet(ctx);
}
