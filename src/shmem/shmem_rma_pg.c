/* OpenSHMEM single-element RMA: shmem_TYPENAME_p and shmem_TYPENAME_g with
 * their ctx forms. A p is often a flag that another PE waits on, so it
 * rings the target's doorbell (shm_ring) after the store: a PE asleep in
 * shm_wait sees it at once. On a mapping the store is a swap (a locked
 * instruction, which orders it before the load of the target's sleepers
 * word as shm_ring's fence would), and the bell is rung only if a thread
 * sleeps there.
 */
#include "shmem/shmem_rma.h"

/* Not mapped, or not a plain case: the core puts, then the bell. */
static __attribute__((noinline, cold)) void shm_rma_p_slow(const char *fn, shmem_ctx_t ctx,
                                                           void *dest, const void *value,
                                                           size_t len, int pe)
{
    shm_check_init(fn);
    shm_put_bytes(fn, ctx, dest, value, len, pe);
    if (ctx != SHMEM_CTX_INVALID)
        shm_ring(pe);
}

/* Store @value whole and make it visible before the target's sleepers
 * word is read (the waiter announces itself, then checks its condition):
 * an aligned word is swapped in (a locked instruction, a full barrier),
 * anything else is copied and followed by a fence. */
#define SHM_RMA_XCHG(U, p, value)                                                              \
    do {                                                                                       \
        U v_;                                                                                  \
        memcpy(&v_, value, sizeof v_);                                                         \
        (void)__atomic_exchange_n((U *)(void *)(p), v_, __ATOMIC_SEQ_CST);                     \
    } while (0)

SHM_RMA_INLINE void shm_rma_p(const char *fn, shmem_ctx_t ctx, void *dest, const void *value,
                              size_t len, int pe)
{
    char *p = shm_rma_direct(dest, len, pe);
    if (__builtin_expect(p == NULL || ctx == SHMEM_CTX_INVALID, 0)) {
        shm_rma_p_slow(fn, ctx, dest, value, len, pe);
        return;
    }
    if (len == 8 && (uintptr_t)p % 8 == 0)
        SHM_RMA_XCHG(uint64_t, p, value);
    else if (len == 4 && (uintptr_t)p % 4 == 0)
        SHM_RMA_XCHG(uint32_t, p, value);
    else if (len == 2 && (uintptr_t)p % 2 == 0)
        SHM_RMA_XCHG(uint16_t, p, value);
    else if (len == 1)
        SHM_RMA_XCHG(uint8_t, p, value);
    else {
        memcpy(p, value, len);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    }
    /* shm_ring's own check, without its second fence */
    const shm_hdr_t *h = (const shm_hdr_t *)(const void *)shm_g.pe[pe].heap;
    if (__builtin_expect(atomic_load_explicit(&h->sleepers, memory_order_seq_cst) != 0, 0))
        shm_ring(pe);
}

#define VSHMEM_RMA_PG(T, N)                                                                    \
    void shmem_ctx_##N##_p(shmem_ctx_t ctx, T *dest, T value, int pe)                          \
    {                                                                                          \
        shm_rma_p("shmem_ctx_" #N "_p", ctx, dest, &value, sizeof(T), pe);                     \
    }                                                                                          \
    void shmem_##N##_p(T *dest, T value, int pe)                                               \
    {                                                                                          \
        shm_rma_p("shmem_" #N "_p", SHMEM_CTX_DEFAULT, dest, &value, sizeof(T), pe);           \
    }                                                                                          \
    T shmem_ctx_##N##_g(shmem_ctx_t ctx, const T *source, int pe)                              \
    {                                                                                          \
        T v;                                                                                   \
        memset(&v, 0, sizeof v);                                                               \
        shm_rma_get("shmem_ctx_" #N "_g", ctx, &v, source, sizeof(T), pe);                     \
        return v;                                                                              \
    }                                                                                          \
    T shmem_##N##_g(const T *source, int pe)                                                   \
    {                                                                                          \
        T v;                                                                                   \
        shm_rma_get("shmem_" #N "_g", SHMEM_CTX_DEFAULT, &v, source, sizeof(T), pe);           \
        return v;                                                                              \
    }
VSHMEM_RMA_TYPES(VSHMEM_RMA_PG)
