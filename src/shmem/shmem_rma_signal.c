/* OpenSHMEM put-with-signal: put_signal and put_signal_nbi, typed, sized
 * and mem, with their ctx forms; shmem_signal_fetch.
 *
 * The signal must never be seen before the data. On a mapped heap the data
 * is copied, then the signal is written with a release store (SET) or an
 * atomic add (ADD, a full barrier), and the target's doorbell rung. Through
 * a proxy (static data, another host) the data goes first and the signal
 * follows as a vmmc atomic (shm_amo: SWAP for SET, ADD for ADD): vmmc
 * applies an atomic after the issuer's earlier sends to that peer, queued
 * asynchronous ones included (docs/core.md), so the order holds on udp
 * too. The signal word is written as one 64-bit word in every case, so a
 * waiter never sees half of it.
 */
#include "shmem/shmem_rma.h"

void shm_rma_put_signal(const char *fn, shmem_ctx_t ctx, void *dst, const void *src, size_t len,
                        uint64_t *sig_addr, uint64_t signal, int sig_op, int pe, int nbi)
{
    shm_check_init(fn);
    if (sig_op != SHMEM_SIGNAL_SET && sig_op != SHMEM_SIGNAL_ADD)
        shm_fatal(fn, "sig_op is neither SHMEM_SIGNAL_SET nor SHMEM_SIGNAL_ADD (%d)", sig_op);
    if ((uintptr_t)sig_addr % sizeof(uint64_t) != 0)
        shm_fatal(fn, "sig_addr is not aligned to 8 bytes (%p)", (void *)sig_addr);
    shm_loc_t sig;
    shm_locate(fn, sig_addr, sizeof(uint64_t), pe, &sig);
    if (ctx == SHMEM_CTX_INVALID)
        return;

    /* A queued non-blocking put could still be in flight when a direct
     * store of the signal lands, so it is taken only when the signal too
     * goes through vmmc (which orders the two). */
    char *p = shm_rma_direct(dst, len, pe);
    if (p != NULL)
        memmove(p, src, len);
    else if (nbi && sig.ptr == NULL)
        shm_put_nbi_bytes(fn, ctx, dst, src, len, pe);
    else
        shm_put_bytes(fn, ctx, dst, src, len, pe);

    if (sig.ptr != NULL && sig_op == SHMEM_SIGNAL_SET) {
        __atomic_store_n((uint64_t *)(void *)sig.ptr, signal, __ATOMIC_RELEASE);
        shm_ring(pe);
    } else {
        /* shm_amo applies ADD as one sequentially consistent atomic on a
         * mapping, so the copy above is visible first, and rings itself. */
        shm_amo(fn, ctx, sig_addr, pe,
                sig_op == SHMEM_SIGNAL_SET ? VMMC_ATOMIC_SWAP : VMMC_ATOMIC_ADD, 8, signal, 0,
                0);
    }
}

#define VSHMEM_SIGNAL_DEF(T, NAME, ELEM, NBI)                                                  \
    void shmem_ctx_##NAME(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,           \
                          uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)             \
    {                                                                                          \
        static const char fn[] = "shmem_ctx_" #NAME;                                           \
        shm_rma_put_signal(fn, ctx, dest, source, shm_rma_len(fn, nelems, ELEM), sig_addr,     \
                           signal, sig_op, pe, NBI);                                           \
    }                                                                                          \
    void shmem_##NAME(T *dest, const T *source, size_t nelems, uint64_t *sig_addr,             \
                      uint64_t signal, int sig_op, int pe)                                     \
    {                                                                                          \
        static const char fn[] = "shmem_" #NAME;                                               \
        shm_rma_put_signal(fn, SHMEM_CTX_DEFAULT, dest, source,                                \
                           shm_rma_len(fn, nelems, ELEM), sig_addr, signal, sig_op, pe, NBI);  \
    }

#define VSHMEM_SIGNAL_TYPED(T, N)                                                              \
    VSHMEM_SIGNAL_DEF(T, N##_put_signal, sizeof(T), 0)                                         \
    VSHMEM_SIGNAL_DEF(T, N##_put_signal_nbi, sizeof(T), 1)
VSHMEM_RMA_TYPES(VSHMEM_SIGNAL_TYPED)

#define VSHMEM_SIGNAL_SIZED(B)                                                                 \
    VSHMEM_SIGNAL_DEF(void, put##B##_signal, (B) / 8, 0)                                       \
    VSHMEM_SIGNAL_DEF(void, put##B##_signal_nbi, (B) / 8, 1)
VSHMEM_SIZES(VSHMEM_SIGNAL_SIZED)
VSHMEM_SIGNAL_DEF(void, putmem_signal, 1, 0)
VSHMEM_SIGNAL_DEF(void, putmem_signal_nbi, 1, 1)

uint64_t shmem_signal_fetch(const uint64_t *sig_addr)
{
    static const char fn[] = "shmem_signal_fetch";
    shm_check_init(fn);
    if ((uintptr_t)sig_addr % sizeof(uint64_t) != 0 ||
        !shm_is_symmetric(sig_addr, sizeof(uint64_t)))
        shm_fatal(fn, "sig_addr is not an aligned symmetric word (%p)", (const void *)sig_addr);
    return __atomic_load_n(sig_addr, __ATOMIC_ACQUIRE);
}
