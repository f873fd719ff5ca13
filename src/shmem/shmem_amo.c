/* OpenSHMEM 1.5 atomics on the standard and extended types: fetch, set,
 * swap (every type of VSHMEM_AMO_TYPES and VSHMEM_AMO_EXT_TYPES), and
 * compare_swap, fetch_inc, inc, fetch_add, add (VSHMEM_AMO_TYPES), each with
 * its context form and the _nbi forms of the fetching ones.
 *
 * Every call is one shm_amo() (shmem_amo.h): on a PE whose heap is mapped
 * here an atomic instruction, elsewhere a vmmc_atomic() that the target
 * executes. An _nbi fetch stores its result before it returns, which is
 * "by the next quiet" at the earliest; nothing is left pending on the
 * context.
 */
#include "shmem_amo.h"

#define ONE(T) ((T)1)

/* fetch, set, swap and their _nbi forms. */
#define AMO_EXT(T, N)                                                                          \
    T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t ctx, const T *source, int pe)                   \
    {                                                                                          \
        return shm_amo_##N(__func__, ctx, source, pe, VMMC_ATOMIC_READ, 0, 0, 1);              \
    }                                                                                          \
    T shmem_##N##_atomic_fetch(const T *source, int pe)                                        \
    {                                                                                          \
        return shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, source, pe, VMMC_ATOMIC_READ, 0, 0,    \
                           1);                                                                 \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_set(shmem_ctx_t ctx, T *dest, T value, int pe)                 \
    {                                                                                          \
        shm_amo_##N(__func__, ctx, dest, pe, VMMC_ATOMIC_SWAP, value, 0, 0);                   \
    }                                                                                          \
    void shmem_##N##_atomic_set(T *dest, T value, int pe)                                      \
    {                                                                                          \
        shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_SWAP, value, 0, 0);     \
    }                                                                                          \
    T shmem_ctx_##N##_atomic_swap(shmem_ctx_t ctx, T *dest, T value, int pe)                   \
    {                                                                                          \
        return shm_amo_##N(__func__, ctx, dest, pe, VMMC_ATOMIC_SWAP, value, 0, 1);            \
    }                                                                                          \
    T shmem_##N##_atomic_swap(T *dest, T value, int pe)                                        \
    {                                                                                          \
        return shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_SWAP, value, 0,  \
                           1);                                                                 \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t ctx, T *fetch, const T *source, int pe)  \
    {                                                                                          \
        shm_amo_check_fetch(__func__, fetch);                                                  \
        T v_ = shm_amo_##N(__func__, ctx, source, pe, VMMC_ATOMIC_READ, 0, 0, 1);              \
        if (ctx != SHMEM_CTX_INVALID)                                                          \
            *fetch = v_;                                                                       \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_nbi(T *fetch, const T *source, int pe)                       \
    {                                                                                          \
        shm_amo_check_fetch(__func__, fetch);                                                  \
        *fetch = shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, source, pe, VMMC_ATOMIC_READ, 0, 0,  \
                             1);                                                               \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value, int pe)  \
    {                                                                                          \
        shm_amo_check_fetch(__func__, fetch);                                                  \
        T v_ = shm_amo_##N(__func__, ctx, dest, pe, VMMC_ATOMIC_SWAP, value, 0, 1);            \
        if (ctx != SHMEM_CTX_INVALID)                                                          \
            *fetch = v_;                                                                       \
    }                                                                                          \
    void shmem_##N##_atomic_swap_nbi(T *fetch, T *dest, T value, int pe)                       \
    {                                                                                          \
        shm_amo_check_fetch(__func__, fetch);                                                  \
        *fetch = shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_SWAP, value,   \
                             0, 1);                                                            \
    }
VSHMEM_AMO_TYPES(AMO_EXT)
VSHMEM_AMO_EXT_TYPES(AMO_EXT)

/* compare_swap, fetch_inc, inc, fetch_add, add and the fetching _nbi forms. */
#define AMO_STD(T, N)                                                                          \
    T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t ctx, T *dest, T cond, T value, int pe)   \
    {                                                                                          \
        return shm_amo_##N(__func__, ctx, dest, pe, VMMC_ATOMIC_CSWAP, value, cond, 1);        \
    }                                                                                          \
    T shmem_##N##_atomic_compare_swap(T *dest, T cond, T value, int pe)                        \
    {                                                                                          \
        return shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_CSWAP, value,    \
                           cond, 1);                                                           \
    }                                                                                          \
    T shmem_ctx_##N##_atomic_fetch_inc(shmem_ctx_t ctx, T *dest, int pe)                       \
    {                                                                                          \
        return shm_amo_##N(__func__, ctx, dest, pe, VMMC_ATOMIC_ADD, ONE(T), 0, 1);            \
    }                                                                                          \
    T shmem_##N##_atomic_fetch_inc(T *dest, int pe)                                            \
    {                                                                                          \
        return shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_ADD, ONE(T), 0,  \
                           1);                                                                 \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_inc(shmem_ctx_t ctx, T *dest, int pe)                          \
    {                                                                                          \
        shm_amo_##N(__func__, ctx, dest, pe, VMMC_ATOMIC_ADD, ONE(T), 0, 0);                   \
    }                                                                                          \
    void shmem_##N##_atomic_inc(T *dest, int pe)                                               \
    {                                                                                          \
        shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_ADD, ONE(T), 0, 0);     \
    }                                                                                          \
    T shmem_ctx_##N##_atomic_fetch_add(shmem_ctx_t ctx, T *dest, T value, int pe)              \
    {                                                                                          \
        return shm_amo_##N(__func__, ctx, dest, pe, VMMC_ATOMIC_ADD, value, 0, 1);             \
    }                                                                                          \
    T shmem_##N##_atomic_fetch_add(T *dest, T value, int pe)                                   \
    {                                                                                          \
        return shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_ADD, value, 0,   \
                           1);                                                                 \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_add(shmem_ctx_t ctx, T *dest, T value, int pe)                 \
    {                                                                                          \
        shm_amo_##N(__func__, ctx, dest, pe, VMMC_ATOMIC_ADD, value, 0, 0);                    \
    }                                                                                          \
    void shmem_##N##_atomic_add(T *dest, T value, int pe)                                      \
    {                                                                                          \
        shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_ADD, value, 0, 0);      \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T cond,   \
                                                 T value, int pe)                              \
    {                                                                                          \
        shm_amo_check_fetch(__func__, fetch);                                                  \
        T v_ = shm_amo_##N(__func__, ctx, dest, pe, VMMC_ATOMIC_CSWAP, value, cond, 1);        \
        if (ctx != SHMEM_CTX_INVALID)                                                          \
            *fetch = v_;                                                                       \
    }                                                                                          \
    void shmem_##N##_atomic_compare_swap_nbi(T *fetch, T *dest, T cond, T value, int pe)       \
    {                                                                                          \
        shm_amo_check_fetch(__func__, fetch);                                                  \
        *fetch = shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_CSWAP, value,  \
                             cond, 1);                                                         \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_inc_nbi(shmem_ctx_t ctx, T *fetch, T *dest, int pe)      \
    {                                                                                          \
        shm_amo_check_fetch(__func__, fetch);                                                  \
        T v_ = shm_amo_##N(__func__, ctx, dest, pe, VMMC_ATOMIC_ADD, ONE(T), 0, 1);            \
        if (ctx != SHMEM_CTX_INVALID)                                                          \
            *fetch = v_;                                                                       \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_inc_nbi(T *fetch, T *dest, int pe)                           \
    {                                                                                          \
        shm_amo_check_fetch(__func__, fetch);                                                  \
        *fetch = shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_ADD, ONE(T),   \
                             0, 1);                                                            \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_add_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,     \
                                              int pe)                                          \
    {                                                                                          \
        shm_amo_check_fetch(__func__, fetch);                                                  \
        T v_ = shm_amo_##N(__func__, ctx, dest, pe, VMMC_ATOMIC_ADD, value, 0, 1);             \
        if (ctx != SHMEM_CTX_INVALID)                                                          \
            *fetch = v_;                                                                       \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_add_nbi(T *fetch, T *dest, T value, int pe)                  \
    {                                                                                          \
        shm_amo_check_fetch(__func__, fetch);                                                  \
        *fetch = shm_amo_##N(__func__, SHMEM_CTX_DEFAULT, dest, pe, VMMC_ATOMIC_ADD, value, 0, \
                             1);                                                               \
    }
VSHMEM_AMO_TYPES(AMO_STD)
