/* OpenSHMEM strided RMA: iput and iget, typed (shmem_TYPENAME_iput), sized
 * (shmem_iput32) and their ctx forms. Strides are in elements, as the
 * standard counts them; the core checks every element's address
 * (shm_iput_bytes / shm_iget_bytes).
 */
#include "shmem/shmem_rma.h"

/* NAME: the part after "shmem_" (and "shmem_ctx_"); T: the element type as
 * the prototype spells it; ELEM: its size; MOVE: the core call. */
#define VSHMEM_RMA_STRIDED_DEF(T, NAME, ELEM, MOVE)                                            \
    void shmem_ctx_##NAME(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst,           \
                          ptrdiff_t sst, size_t nelems, int pe)                                \
    {                                                                                          \
        static const char fn[] = "shmem_ctx_" #NAME;                                           \
        shm_check_init(fn);                                                                    \
        MOVE(fn, ctx, dest, source, dst, sst, ELEM, nelems, pe);                               \
    }                                                                                          \
    void shmem_##NAME(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,   \
                      int pe)                                                                  \
    {                                                                                          \
        static const char fn[] = "shmem_" #NAME;                                               \
        shm_check_init(fn);                                                                    \
        MOVE(fn, SHMEM_CTX_DEFAULT, dest, source, dst, sst, ELEM, nelems, pe);                 \
    }

#define VSHMEM_RMA_STRIDED(T, N)                                                               \
    VSHMEM_RMA_STRIDED_DEF(T, N##_iput, sizeof(T), shm_iput_bytes)                             \
    VSHMEM_RMA_STRIDED_DEF(T, N##_iget, sizeof(T), shm_iget_bytes)
VSHMEM_RMA_TYPES(VSHMEM_RMA_STRIDED)

#define VSHMEM_RMA_STRIDED_SIZED(B)                                                            \
    VSHMEM_RMA_STRIDED_DEF(void, iput##B, (B) / 8, shm_iput_bytes)                             \
    VSHMEM_RMA_STRIDED_DEF(void, iget##B, (B) / 8, shm_iget_bytes)
VSHMEM_SIZES(VSHMEM_RMA_STRIDED_SIZED)
