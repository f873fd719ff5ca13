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

#include "shmem/shmem_core.h" /* shm_mark */

#include <string.h>

#define SHM_RMA_INLINE static inline __attribute__((always_inline))

/* Where [sym, sym+len) of the symmetric heap is on @pe when it can be
 * loaded and stored directly, else NULL. One test for "initialised and PE
 * in range", one for "inside the heap". */
SHM_RMA_INLINE char *shm_rma_direct(const void *sym, size_t len, int pe)
{
    if (__builtin_expect(!shm_g.initialized || (unsigned)pe >= (unsigned)shm_g.npes, 0))
        return NULL;
    char *base = shm_g.pe[pe].heap;
    size_t off = (size_t)((uintptr_t)sym - (uintptr_t)shm_g.heap);
    if (__builtin_expect(base == NULL || off >= shm_g.heap_size || len > shm_g.heap_size - off, 0))
        return NULL;
    return base + off;
}

/* nelems elements of @elem bytes, or shm_fatal when that overflows. */
SHM_RMA_INLINE size_t shm_rma_len(const char *fn, size_t nelems, size_t elem)
{
    if (__builtin_expect(nelems > SIZE_MAX / elem, 0))
        shm_fatal(fn, "nelems too large for elements of %zu bytes (%zu)", elem, nelems);
    return nelems * elem;
}

/* Everything but the mapped heap: checked and moved by the core. Out of
 * line, so that the short path saves no registers and calls nothing for a
 * few bytes (shmem_rma.c). */
typedef void (*shm_rma_move_fn)(const char *fn, shmem_ctx_t ctx, void *dst, const void *src,
                                size_t len, int pe);
__attribute__((noinline, cold, visibility("hidden"))) void
shm_rma_slow(shm_rma_move_fn move, const char *fn, shmem_ctx_t ctx, void *dst, const void *src,
             size_t len, int pe);

/* memmove (on this PE the ranges may overlap) that does up to 16 bytes
 * itself: two loads, then two stores that may overlap, as the C library's
 * small copies do, without its call and dispatch. */
SHM_RMA_INLINE void shm_rma_move(void *dst, const void *src, size_t len)
{
    char *d = dst;
    const char *s = src;
    if (len - 8 <= 8) { /* 8..16 */
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + len - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + len - 8, &b, 8);
    } else if (len - 4 < 4) { /* 4..7 */
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + len - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + len - 4, &b, 4);
    } else if (len - 1 < 3) { /* 1..3 */
        char a = s[0], b = s[len / 2], c = s[len - 1];
        d[0] = a;
        d[len / 2] = b;
        d[len - 1] = c;
    } else if (len != 0) {
        memmove(d, s, len);
    }
}

/* The copy of a put into a mapping. Marking @pe makes the next fence or
 * quiet ring its doorbell, as the core's puts do, so a PE asleep in a wait
 * sees the data at once. */
SHM_RMA_INLINE void shm_rma_copy_to(char *p, const void *src, size_t len, int pe)
{
    shm_mark(pe); /* read at the next fence or quiet, after this copy */
    shm_rma_move(p, src, len);
}

SHM_RMA_INLINE void shm_rma_put(const char *fn, shmem_ctx_t ctx, void *dst, const void *src,
                                size_t len, int pe)
{
    char *p = shm_rma_direct(dst, len, pe);
    if (__builtin_expect(p != NULL && ctx != SHMEM_CTX_INVALID, 1))
        shm_rma_copy_to(p, src, len, pe);
    else
        shm_rma_slow(shm_put_bytes, fn, ctx, dst, src, len, pe);
}

SHM_RMA_INLINE void shm_rma_get(const char *fn, shmem_ctx_t ctx, void *dst, const void *src,
                                size_t len, int pe)
{
    const char *p = shm_rma_direct(src, len, pe);
    if (__builtin_expect(p != NULL && ctx != SHMEM_CTX_INVALID, 1))
        shm_rma_move(dst, p, len);
    else
        shm_rma_slow(shm_get_bytes, fn, ctx, dst, src, len, pe);
}

/* Non-blocking: a copy into a mapping is complete when it returns. */
SHM_RMA_INLINE void shm_rma_put_nbi(const char *fn, shmem_ctx_t ctx, void *dst, const void *src,
                                    size_t len, int pe)
{
    char *p = shm_rma_direct(dst, len, pe);
    if (__builtin_expect(p != NULL && ctx != SHMEM_CTX_INVALID, 1))
        shm_rma_copy_to(p, src, len, pe);
    else
        shm_rma_slow(shm_put_nbi_bytes, fn, ctx, dst, src, len, pe);
}

SHM_RMA_INLINE void shm_rma_get_nbi(const char *fn, shmem_ctx_t ctx, void *dst, const void *src,
                                    size_t len, int pe)
{
    const char *p = shm_rma_direct(src, len, pe);
    if (__builtin_expect(p != NULL && ctx != SHMEM_CTX_INVALID, 1))
        shm_rma_move(dst, p, len);
    else
        shm_rma_slow(shm_get_nbi_bytes, fn, ctx, dst, src, len, pe);
}

/* put_signal and its nbi, sized and mem forms (shmem_rma_signal.c). */
void shm_rma_put_signal(const char *fn, shmem_ctx_t ctx, void *dst, const void *src, size_t len,
                        uint64_t *sig_addr, uint64_t signal, int sig_op, int pe, int nbi);

#endif /* VMMC_SHMEM_RMA_H */
