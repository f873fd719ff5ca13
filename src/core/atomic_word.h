/* The arithmetic of one atomic on one word (atomic_word.c): which
 * (operation, type) pairs exist, and applying one to memory. @size is always
 * the word's width (4, 8) or'ed with its type (VMMC_ATOMIC_SIGNED,
 * VMMC_ATOMIC_FLOAT), as in vmmc_atomic(). The common case (an integer
 * word, an operation the processor has an instruction for) is inline; the
 * rest is out of line. */
#ifndef VMMC_CORE_ATOMIC_WORD_H
#define VMMC_CORE_ATOMIC_WORD_H

#include <stdint.h>

#include "util/log.h"
#include "vmmc/vmmc.h"

static inline int vmmc_atomic_width(int size)
{
    return size & ~(VMMC_ATOMIC_SIGNED | VMMC_ATOMIC_FLOAT);
}

/* Does (@op, @size) exist? VMMC_OK, or VMMC_ERR_INVALID with the reason. */
int vmmc_atomic_valid_slow(int op, int size);
static inline int vmmc_atomic_valid(int op, int size)
{
    /* Unsigned and signed integers take every operation. */
    if (VMMC_LIKELY((size & ~VMMC_ATOMIC_SIGNED) == 8 || (size & ~VMMC_ATOMIC_SIGNED) == 4) &&
        op >= VMMC_ATOMIC_ADD && op <= VMMC_ATOMIC_CSWAP_GT)
        return VMMC_OK;
    return vmmc_atomic_valid_slow(op, size);
}

const char *vmmc_atomic_op_name(int op);

/* What vmmc_atomic_apply() cannot do with one instruction: a
 * compare-and-swap loop on the word. */
uint64_t vmmc_atomic_apply_cas(void *p, int op, int size, uint64_t operand, uint64_t compare);

/* The one place that applies an atomic to memory (sequentially consistent):
 * the processor's own __atomic instructions for integer ADD, AND, OR, XOR,
 * SWAP, CSWAP, READ and for SWAP and READ of any type, else
 * vmmc_atomic_apply_cas(). @p must be aligned and (@op, @size) valid;
 * returns the word before. */
static inline uint64_t vmmc_atomic_apply(void *p, int op, int size, uint64_t v, uint64_t c)
{
    if (VMMC_UNLIKELY((size & VMMC_ATOMIC_FLOAT) && op != VMMC_ATOMIC_SWAP &&
                      op != VMMC_ATOMIC_READ) || op > VMMC_ATOMIC_READ)
        return vmmc_atomic_apply_cas(p, op, size, v, c);
#define VMMC_ATOMIC_NATIVE(T)                                                                     \
    do {                                                                                          \
        T *wp = p, x = (T)v;                                                                      \
        switch (op) {                                                                             \
        case VMMC_ATOMIC_ADD: return __atomic_fetch_add(wp, x, __ATOMIC_SEQ_CST);                 \
        case VMMC_ATOMIC_AND: return __atomic_fetch_and(wp, x, __ATOMIC_SEQ_CST);                 \
        case VMMC_ATOMIC_OR: return __atomic_fetch_or(wp, x, __ATOMIC_SEQ_CST);                   \
        case VMMC_ATOMIC_XOR: return __atomic_fetch_xor(wp, x, __ATOMIC_SEQ_CST);                 \
        case VMMC_ATOMIC_SWAP: return __atomic_exchange_n(wp, x, __ATOMIC_SEQ_CST);               \
        case VMMC_ATOMIC_CSWAP: {                                                                 \
            T e = (T)c;                                                                           \
            __atomic_compare_exchange_n(wp, &e, x, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);        \
            return e;                                                                             \
        }                                                                                         \
        default: return __atomic_load_n(wp, __ATOMIC_SEQ_CST);                                    \
        }                                                                                         \
    } while (0)
    if (vmmc_atomic_width(size) == 4)
        VMMC_ATOMIC_NATIVE(uint32_t);
    VMMC_ATOMIC_NATIVE(uint64_t);
#undef VMMC_ATOMIC_NATIVE
}

#endif
