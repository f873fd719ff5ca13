/* OpenSHMEM RMA: the short path shared by the typed, sized and mem families
 * (shmem_rma*.c).
 *
 * On one host every other PE's heap is mapped here (shm_g.pe[pe].heap), so
 * a put of a few bytes is one range check and a memcpy into that mapping, a
 * get a memcpy out of it. Everything else (static data, another host, a bad
 * PE or address, a call before shmem_init) leaves for shm_put_bytes /
 * shm_get_bytes, which check and report it. Not part of the contract:
 * private to the RMA files.
 */
#ifndef VMMC_SHMEM_RMA_H
#define VMMC_SHMEM_RMA_H

#include "shmem/shmem_int.h"

#include <string.h>

/* Where [sym, sym+len) of the symmetric heap is on @pe when it can be
 * loaded and stored directly, else NULL. One test for "initialised and PE
 * in range", one for "inside the heap". */
static inline char *shm_rma_direct(const void *sym, size_t len, int pe)
{
    if (__builtin_expect(!shm_g.initialized || (unsigned)pe >= (unsigned)shm_g.npes, 0))
        return NULL;
    char *base = shm_g.pe[pe].heap;
    size_t off = (size_t)((uintptr_t)sym - (uintptr_t)shm_g.heap);
    if (__builtin_expect(base == NULL || off >= shm_g.heap_size || len > shm_g.heap_size - off,
                         0))
        return NULL;
    return base + off;
}

/* nelems elements of @elem bytes, or shm_fatal when that overflows. */
static inline size_t shm_rma_len(const char *fn, size_t nelems, size_t elem)
{
    if (__builtin_expect(nelems > SIZE_MAX / elem, 0))
        shm_fatal(fn, "nelems too large for elements of %zu bytes (%zu)", elem, nelems);
    return nelems * elem;
}

/* Everything but the mapped heap: checked and moved by the core. */
#define shm_rma_slow(fn, ctx, dst, src, len, pe, move)                                         \
    do {                                                                                       \
        shm_check_init(fn);                                                                    \
        move(fn, ctx, dst, src, len, pe);                                                      \
    } while (0)

static inline void shm_rma_put(const char *fn, shmem_ctx_t ctx, void *dst, const void *src,
                               size_t len, int pe)
{
    char *p = shm_rma_direct(dst, len, pe);
    if (__builtin_expect(p != NULL && ctx != SHMEM_CTX_INVALID, 1))
        memcpy(p, src, len);
    else
        shm_rma_slow(fn, ctx, dst, src, len, pe, shm_put_bytes);
}

static inline void shm_rma_get(const char *fn, shmem_ctx_t ctx, void *dst, const void *src,
                               size_t len, int pe)
{
    const char *p = shm_rma_direct(src, len, pe);
    if (__builtin_expect(p != NULL && ctx != SHMEM_CTX_INVALID, 1))
        memcpy(dst, p, len);
    else
        shm_rma_slow(fn, ctx, dst, src, len, pe, shm_get_bytes);
}

/* Non-blocking: a copy into a mapping is complete when it returns. */
static inline void shm_rma_put_nbi(const char *fn, shmem_ctx_t ctx, void *dst, const void *src,
                                   size_t len, int pe)
{
    char *p = shm_rma_direct(dst, len, pe);
    if (__builtin_expect(p != NULL && ctx != SHMEM_CTX_INVALID, 1))
        memcpy(p, src, len);
    else
        shm_rma_slow(fn, ctx, dst, src, len, pe, shm_put_nbi_bytes);
}

static inline void shm_rma_get_nbi(const char *fn, shmem_ctx_t ctx, void *dst, const void *src,
                                   size_t len, int pe)
{
    const char *p = shm_rma_direct(src, len, pe);
    if (__builtin_expect(p != NULL && ctx != SHMEM_CTX_INVALID, 1))
        memcpy(dst, p, len);
    else
        shm_rma_slow(fn, ctx, dst, src, len, pe, shm_get_nbi_bytes);
}

/* put_signal and its nbi, sized and mem forms (shmem_rma_signal.c). */
void shm_rma_put_signal(const char *fn, shmem_ctx_t ctx, void *dst, const void *src, size_t len,
                        uint64_t *sig_addr, uint64_t signal, int sig_op, int pe, int nbi);

#endif /* VMMC_SHMEM_RMA_H */
