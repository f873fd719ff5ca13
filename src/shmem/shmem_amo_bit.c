/* OpenSHMEM 1.5 bitwise atomics (VSHMEM_AMO_BIT_TYPES): and, or, xor, their
 * fetch forms, the fetching _nbi forms and the context forms of all, each
 * one shm_amo() (shmem_amo.h). */
#include "shmem_amo.h"

#define AMO_BIT_OP(T, N, OP, VOP)                                                              \
    T shmem_ctx_##N##_atomic_fetch_##OP(shmem_ctx_t ctx, T *dest, T value, int pe)             \
    {                                                                                          \
        return shm_amo_##N(__func__, ctx, dest, pe, VOP, value, 0, 1);                         \
    }                                                                                          \
    T shmem_##N##_atomic_fetch_##OP(T *dest, T value, int pe)                                  \
    {                                                                                          \
        return shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VOP, value, 0, 1);           \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_##OP(shmem_ctx_t ctx, T *dest, T value, int pe)                \
    {                                                                                          \
        shm_amo_##N(__func__, ctx, dest, pe, VOP, value, 0, 0);                                \
    }                                                                                          \
    void shmem_##N##_atomic_##OP(T *dest, T value, int pe)                                     \
    {                                                                                          \
        shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VOP, value, 0, 0);                  \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_##OP##_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,  \
                                                 int pe)                                       \
    {                                                                                          \
        shm_amo_check_fetch(__func__, fetch);                                                  \
        T v_ = shm_amo_##N(__func__, ctx, dest, pe, VOP, value, 0, 1);                         \
        if (ctx != SHMEM_CTX_INVALID)                                                          \
            *fetch = v_;                                                                       \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_##OP##_nbi(T *fetch, T *dest, T value, int pe)               \
    {                                                                                          \
        shm_amo_check_fetch(__func__, fetch);                                                  \
        *fetch = shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VOP, value, 0, 1);         \
    }

#define AMO_BIT(T, N)                                                                          \
    AMO_BIT_OP(T, N, and, VMMC_ATOMIC_AND)                                                     \
    AMO_BIT_OP(T, N, or, VMMC_ATOMIC_OR)                                                       \
    AMO_BIT_OP(T, N, xor, VMMC_ATOMIC_XOR)
VSHMEM_AMO_BIT_TYPES(AMO_BIT)
