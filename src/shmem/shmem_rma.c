/* OpenSHMEM contiguous RMA: put, get and their _nbi forms, typed
 * (shmem_TYPENAME_put), sized (shmem_put32) and byte (shmem_putmem), each
 * with its shmem_ctx_ form. All of them are one shm_rma_* call
 * (shmem_rma.h): a memcpy into or out of a mapped heap on this host,
 * shm_put_bytes/shm_get_bytes (and _nbi) otherwise.
 */
#include "shmem/shmem_rma.h"

void shm_rma_slow(shm_rma_move_fn move, const char *fn, shmem_ctx_t ctx, void *dst,
                  const void *src, size_t len, int pe)
{
    shm_check_init(fn);
    move(fn, ctx, dst, src, len, pe);
}

/* One typed family: name, element type, the move. */
#define VSHMEM_RMA_DEF(T, N, OP, MOVE)                                                         \
    void shmem_ctx_##N##_##OP(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,       \
                              int pe)                                                          \
    {                                                                                          \
        static const char fn[] = "shmem_ctx_" #N "_" #OP;                                      \
        MOVE(fn, ctx, dest, source, shm_rma_len(fn, nelems, sizeof(T)), pe);                   \
    }                                                                                          \
    void shmem_##N##_##OP(T *dest, const T *source, size_t nelems, int pe)                     \
    {                                                                                          \
        static const char fn[] = "shmem_" #N "_" #OP;                                          \
        MOVE(fn, SHMEM_CTX_DEFAULT, dest, source, shm_rma_len(fn, nelems, sizeof(T)), pe);     \
    }

#define VSHMEM_RMA_TYPED(T, N)                                                                 \
    VSHMEM_RMA_DEF(T, N, put, shm_rma_put)                                                     \
    VSHMEM_RMA_DEF(T, N, get, shm_rma_get)                                                     \
    VSHMEM_RMA_DEF(T, N, put_nbi, shm_rma_put_nbi)                                             \
    VSHMEM_RMA_DEF(T, N, get_nbi, shm_rma_get_nbi)
VSHMEM_RMA_TYPES(VSHMEM_RMA_TYPED)

/* Sized: shmem_put32 moves nelems 4-byte elements. */
#define VSHMEM_RMA_SIZED_DEF(B, NAME, MOVE)                                                    \
    void shmem_ctx_##NAME(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,     \
                          int pe)                                                              \
    {                                                                                          \
        static const char fn[] = "shmem_ctx_" #NAME;                                           \
        MOVE(fn, ctx, dest, source, shm_rma_len(fn, nelems, (B) / 8), pe);                     \
    }                                                                                          \
    void shmem_##NAME(void *dest, const void *source, size_t nelems, int pe)                   \
    {                                                                                          \
        static const char fn[] = "shmem_" #NAME;                                               \
        MOVE(fn, SHMEM_CTX_DEFAULT, dest, source, shm_rma_len(fn, nelems, (B) / 8), pe);       \
    }

#define VSHMEM_RMA_SIZED(B)                                                                    \
    VSHMEM_RMA_SIZED_DEF(B, put##B, shm_rma_put)                                               \
    VSHMEM_RMA_SIZED_DEF(B, get##B, shm_rma_get)                                               \
    VSHMEM_RMA_SIZED_DEF(B, put##B##_nbi, shm_rma_put_nbi)                                     \
    VSHMEM_RMA_SIZED_DEF(B, get##B##_nbi, shm_rma_get_nbi)
VSHMEM_SIZES(VSHMEM_RMA_SIZED)

/* Bytes. */
VSHMEM_RMA_SIZED_DEF(8, putmem, shm_rma_put)
VSHMEM_RMA_SIZED_DEF(8, getmem, shm_rma_get)
VSHMEM_RMA_SIZED_DEF(8, putmem_nbi, shm_rma_put_nbi)
VSHMEM_RMA_SIZED_DEF(8, getmem_nbi, shm_rma_get_nbi)
