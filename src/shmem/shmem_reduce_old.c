/* The deprecated active-set reductions, shmem_TYPE_OP_to_all(dest, source,
 * nreduce, PE_start, logPE_stride, PE_size, pWrk, pSync), onto the
 * reduction engine. pWrk and pSync are not used (the engine needs no
 * symmetric work space), so their contents stay as the caller left them. */
#include "shmem_coll.h"

#define SHM_TOALL(T, N, OP)                                                                    \
    void shmem_##N##_##OP##_to_all(T *dest, const T *source, int nreduce, int PE_start,        \
                                   int logPE_stride, int PE_size, T *pWrk, long *pSync)        \
    {                                                                                          \
        static const char fn[] = "shmem_" #N "_" #OP "_to_all";                                \
        struct shmem_team_s t;                                                                 \
        (void)pWrk;                                                                            \
        (void)pSync;                                                                           \
        shm_check_init(fn);                                                                    \
        if (nreduce < 0)                                                                       \
            shm_fatal(fn, "nreduce is negative (%d)", nreduce);                                \
        shm_aset(fn, PE_start, logPE_stride, PE_size, &t);                                     \
        shm_coll_reduce(fn, &t, dest, source, sizeof(T), (size_t)nreduce, shm_red_##N##_##OP); \
    }

#define SHM_OLD_BIT(T, N)                                                                      \
    SHM_RED_AND(T, N)                                                                          \
    SHM_RED_OR(T, N)                                                                           \
    SHM_RED_XOR(T, N)                                                                          \
    SHM_TOALL(T, N, and) SHM_TOALL(T, N, or) SHM_TOALL(T, N, xor)
#define SHM_OLD_CMP(T, N)                                                                      \
    SHM_RED_MAX(T, N)                                                                          \
    SHM_RED_MIN(T, N)                                                                          \
    SHM_TOALL(T, N, max) SHM_TOALL(T, N, min)
#define SHM_OLD_ARITH(T, N)                                                                    \
    SHM_RED_SUM(T, N)                                                                          \
    SHM_RED_PROD(T, N)                                                                         \
    SHM_TOALL(T, N, sum) SHM_TOALL(T, N, prod)

VSHMEM_OLD_REDUCE_BIT_TYPES(SHM_OLD_BIT)
VSHMEM_OLD_REDUCE_CMP_TYPES(SHM_OLD_CMP)
VSHMEM_OLD_REDUCE_ARITH_TYPES(SHM_OLD_ARITH)
