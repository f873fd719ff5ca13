/* Atomics on a word this PE can reach with loads and stores (its own, or a
 * mapped peer heap): exactly vmmc_atomic()'s semantics (vmmc.h), done with
 * the processor's instructions, so that they are atomic with the vmmc
 * atomics other PEs issue on the same word. Included by shmem_move.c. */
#ifndef VMMC_SHMEM_AMO_LOCAL_H
#define VMMC_SHMEM_AMO_LOCAL_H

#include <stdint.h>
#include <string.h>

#include <vmmc/vmmc.h>

/* New value of the word for @op, or 0 in *write when nothing is written. */
#define SHM_AMO_APPLY(T, old, opd, cmp, op, isint, nv, write)                                  \
    do {                                                                                       \
        *(write) = 1;                                                                          \
        switch (op) {                                                                          \
        case VMMC_ATOMIC_ADD: nv = (T)(old + opd); break;                                      \
        case VMMC_ATOMIC_PROD: nv = (T)(old * opd); break;                                     \
        case VMMC_ATOMIC_SWAP: nv = opd; break;                                                \
        case VMMC_ATOMIC_CSWAP: *(write) = (cmp == old); nv = opd; break;                      \
        case VMMC_ATOMIC_CSWAP_NE: *(write) = (cmp != old); nv = opd; break;                   \
        case VMMC_ATOMIC_CSWAP_LE: *(write) = (cmp <= old); nv = opd; break;                   \
        case VMMC_ATOMIC_CSWAP_LT: *(write) = (cmp < old); nv = opd; break;                    \
        case VMMC_ATOMIC_CSWAP_GE: *(write) = (cmp >= old); nv = opd; break;                   \
        case VMMC_ATOMIC_CSWAP_GT: *(write) = (cmp > old); nv = opd; break;                    \
        case VMMC_ATOMIC_MIN: *(write) = (opd < old); nv = opd; break;                         \
        case VMMC_ATOMIC_MAX: *(write) = (opd > old); nv = opd; break;                         \
        case VMMC_ATOMIC_READ: *(write) = 0; nv = old; break;                                  \
        default: *(write) = 0; nv = old; break;                                                \
        }                                                                                      \
    } while (0)

/* Integer-only operations, on the unsigned bits. */
#define SHM_AMO_BITS(U, old, opd, cmp, op, nv)                                                 \
    do {                                                                                       \
        switch (op) {                                                                          \
        case VMMC_ATOMIC_AND: nv = old & opd; break;                                           \
        case VMMC_ATOMIC_OR: nv = old | opd; break;                                            \
        case VMMC_ATOMIC_XOR: nv = old ^ opd; break;                                           \
        case VMMC_ATOMIC_LAND: nv = (U)((old != 0) && (opd != 0)); break;                      \
        case VMMC_ATOMIC_LOR: nv = (U)((old != 0) || (opd != 0)); break;                       \
        case VMMC_ATOMIC_LXOR: nv = (U)(!old != !opd); break;                                  \
        case VMMC_ATOMIC_MSWAP: nv = (U)((opd & cmp) | (old & ~cmp)); break;                   \
        default: nv = old; break;                                                              \
        }                                                                                      \
    } while (0)

static inline int shm_amo_is_bits(vmmc_atomic_op_t op)
{
    return op == VMMC_ATOMIC_AND || op == VMMC_ATOMIC_OR || op == VMMC_ATOMIC_XOR ||
           op == VMMC_ATOMIC_LAND || op == VMMC_ATOMIC_LOR || op == VMMC_ATOMIC_LXOR ||
           op == VMMC_ATOMIC_MSWAP;
}

/* One compare-and-swap loop per word type T stored in unsigned U. */
#define SHM_AMO_LOOP(NAME, U, T, ISFLT)                                                        \
    static inline U NAME(U *w, vmmc_atomic_op_t op, U uo, U uc)                                \
    {                                                                                          \
        U cur = __atomic_load_n(w, __ATOMIC_ACQUIRE);                                          \
        for (;;) {                                                                             \
            T old, opd, cmp, nv;                                                               \
            memcpy(&old, &cur, sizeof old);                                                    \
            memcpy(&opd, &uo, sizeof opd);                                                     \
            memcpy(&cmp, &uc, sizeof cmp);                                                     \
            int write;                                                                         \
            U nb;                                                                              \
            if (shm_amo_is_bits(op)) {                                                         \
                SHM_AMO_BITS(U, cur, uo, uc, op, nb);                                          \
                write = 1;                                                                     \
            } else if (op == VMMC_ATOMIC_SWAP) {                                               \
                nb = uo; /* the bits, unchanged, for every type */                            \
                write = 1;                                                                     \
            } else if (!(ISFLT) && op == VMMC_ATOMIC_ADD) {                                    \
                nb = (U)(cur + uo); /* two's complement wraps, signed or not */               \
                write = 1;                                                                     \
            } else if (!(ISFLT) && op == VMMC_ATOMIC_PROD) {                                   \
                nb = (U)(cur * uo);                                                            \
                write = 1;                                                                     \
            } else {                                                                           \
                SHM_AMO_APPLY(T, old, opd, cmp, op, 1, nv, &write);                            \
                memcpy(&nb, &nv, sizeof nb);                                                   \
            }                                                                                  \
            if (!write)                                                                        \
                return cur;                                                                    \
            if (__atomic_compare_exchange_n(w, &cur, nb, 0, __ATOMIC_ACQ_REL,                  \
                                            __ATOMIC_ACQUIRE))                                 \
                return cur;                                                                    \
        }                                                                                      \
    }

SHM_AMO_LOOP(shm_amo_u32, uint32_t, uint32_t, 0)
SHM_AMO_LOOP(shm_amo_s32, uint32_t, int32_t, 0)
SHM_AMO_LOOP(shm_amo_f32, uint32_t, float, 1)
SHM_AMO_LOOP(shm_amo_u64, uint64_t, uint64_t, 0)
SHM_AMO_LOOP(shm_amo_s64, uint64_t, int64_t, 0)
SHM_AMO_LOOP(shm_amo_f64, uint64_t, double, 1)

#endif
