/* OpenSHMEM single-element RMA: shmem_TYPENAME_p and shmem_TYPENAME_g with
 * their ctx forms. A p is often a flag that another PE waits on, so it
 * rings the target's doorbell (shm_ring) after the store: a PE asleep in
 * shm_wait sees it at once.
 */
#include "shmem/shmem_rma.h"

static inline void shm_rma_p(const char *fn, shmem_ctx_t ctx, void *dest, const void *value,
                             size_t len, int pe)
{
    char *p = shm_rma_direct(dest, len, pe);
    if (__builtin_expect(p != NULL && ctx != SHMEM_CTX_INVALID, 1)) {
        memcpy(p, value, len);
    } else {
        shm_check_init(fn);
        shm_put_bytes(fn, ctx, dest, value, len, pe);
        if (ctx == SHMEM_CTX_INVALID)
            return;
    }
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
