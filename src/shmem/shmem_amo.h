/* Typed atomics of src/shmem/ over shm_amo(): how each C type of the
 * OpenSHMEM tables travels to vmmc_atomic().
 *
 * A type is described to vmmc by its size (4 or 8) or'ed with
 * VMMC_ATOMIC_FLOAT for float and double and VMMC_ATOMIC_SIGNED for a
 * signed integer, derived from the type itself (long, size_t and ptrdiff_t
 * take whatever size and signedness this ABI gives them). Values travel as
 * their bits: a 4-byte value in the low half of the uint64_t.
 *
 * shm_amo_<N>() (one per type name N of VSHMEM_AMO_TYPES and
 * VSHMEM_AMO_EXT_TYPES) is the one path every public atomic of that type
 * takes; @fn is the public function's name for error messages.
 */
#ifndef VMMC_SHMEM_AMO_H
#define VMMC_SHMEM_AMO_H

#include <string.h>

#include "shmem_int.h"

/* vmmc's type word for the C type T. */
#define SHM_AMO_KIND(T)                                                                        \
    ((int)sizeof(T) | ((T)0.5 != (T)0   ? VMMC_ATOMIC_FLOAT                                    \
                       : (T)-1 < (T)1 ? VMMC_ATOMIC_SIGNED                                     \
                                        : 0))

/* The bits of the @size-byte value at @v, as vmmc_atomic() carries them. */
static inline uint64_t shm_amo_bits(const void *v, size_t size)
{
    if (size == 4) {
        uint32_t u;
        memcpy(&u, v, sizeof u);
        return u;
    }
    uint64_t u;
    memcpy(&u, v, sizeof u);
    return u;
}

/* The @size-byte value whose bits vmmc_atomic() returned, stored at @v. */
static inline void shm_amo_unbits(void *v, uint64_t bits, size_t size)
{
    if (size == 4) {
        uint32_t u = (uint32_t)bits;
        memcpy(v, &u, sizeof u);
        return;
    }
    memcpy(v, &bits, sizeof bits);
}

/* Where an _nbi fetch form stores its result: checked before anything is
 * done, so a NULL fetch is an error and not a lost value. */
static inline void shm_amo_check_fetch(const char *fn, const void *fetch)
{
    if (__builtin_expect(fetch == NULL, 0))
        shm_fatal(fn, "fetch is NULL (%p)", fetch);
}

#define SHM_AMO_OP(T, N)                                                                       \
    _Static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomic types are 4 or 8 bytes");        \
    static inline T shm_amo_##N(const char *fn, shmem_ctx_t ctx, const T *dest, int pe,        \
                                vmmc_atomic_op_t op, T value, T cond, int fetch)               \
    {                                                                                          \
        if (__builtin_expect(!shm_g.initialized, 0))                                           \
            shm_check_init(fn);                                                                \
        uint64_t r_ = shm_amo(fn, ctx, (void *)dest, pe, op, SHM_AMO_KIND(T),                  \
                              shm_amo_bits(&value, sizeof(T)), shm_amo_bits(&cond, sizeof(T)), \
                              fetch);                                                          \
        T out_;                                                                                \
        shm_amo_unbits(&out_, r_, sizeof(T));                                                  \
        return out_;                                                                           \
    }
VSHMEM_AMO_TYPES(SHM_AMO_OP)
VSHMEM_AMO_EXT_TYPES(SHM_AMO_OP)
#undef SHM_AMO_OP

#endif /* VMMC_SHMEM_AMO_H */
