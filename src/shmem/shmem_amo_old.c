/* The atomic names OpenSHMEM 1.3 used and 1.4 deprecated, as SOS keeps them
 * for the codes and benchmarks that still call them: shmem_<T>_fadd, finc,
 * add, inc, cswap (int, long, long long), shmem_<T>_swap, fetch, set (those
 * and float, double), and the untyped shmem_swap on a long. Each is the
 * 1.5 operation on the default context (shmem_amo.h). */
#include "shmem_amo.h"

#define AMO_OLD(T, N)                                                                          \
    T shmem_##N##_fadd(T *dest, T value, int pe)                                               \
    {                                                                                          \
        return shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_ADD, value, 0,   \
                           1);                                                                 \
    }                                                                                          \
    T shmem_##N##_finc(T *dest, int pe)                                                        \
    {                                                                                          \
        return shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_ADD, 1, 0, 1);   \
    }                                                                                          \
    void shmem_##N##_add(T *dest, T value, int pe)                                             \
    {                                                                                          \
        shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_ADD, value, 0, 0);      \
    }                                                                                          \
    void shmem_##N##_inc(T *dest, int pe)                                                      \
    {                                                                                          \
        shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_ADD, 1, 0, 0);          \
    }                                                                                          \
    T shmem_##N##_cswap(T *dest, T cond, T value, int pe)                                      \
    {                                                                                          \
        return shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_CSWAP, value,    \
                           cond, 1);                                                           \
    }
VSHMEM_OLD_AMO_TYPES(AMO_OLD)

#define AMO_OLD_EXT(T, N)                                                                      \
    T shmem_##N##_swap(T *dest, T value, int pe)                                               \
    {                                                                                          \
        return shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_SWAP, value, 0,  \
                           1);                                                                 \
    }                                                                                          \
    T shmem_##N##_fetch(const T *source, int pe)                                               \
    {                                                                                          \
        return shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, source, pe, VMMC_ATOMIC_READ, 0, 0,    \
                           1);                                                                 \
    }                                                                                          \
    void shmem_##N##_set(T *dest, T value, int pe)                                             \
    {                                                                                          \
        shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_SWAP, value, 0, 0);     \
    }
VSHMEM_OLD_AMO_TYPES(AMO_OLD_EXT)
VSHMEM_AMO_EXT_TYPES(AMO_OLD_EXT)

long shmem_swap(long *dest, long value, int pe)
{
    return shm_amo_long(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_SWAP, value, 0, 1);
}
