/* A reference for typed remote atomics, written plainly in C on each type,
 * apart from the library's code (src/core/atomic_word.c): what a word holds
 * after one operation, and which (operation, type) pairs exist. Shared by
 * the core's unit test and the transport conformance test. */
#ifndef VMMC_TESTS_ATOMIC_REF_H
#define VMMC_TESTS_ATOMIC_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <vmmc/vmmc.h>

#define REF_OP_LAST VMMC_ATOMIC_CSWAP_GT

/* The six types, as the size argument of vmmc_atomic() gives them. */
static const int ref_types[] = {4, 8, 4 | VMMC_ATOMIC_SIGNED, 8 | VMMC_ATOMIC_SIGNED,
                                4 | VMMC_ATOMIC_FLOAT, 8 | VMMC_ATOMIC_FLOAT};
#define REF_NTYPES 6

static inline const char *ref_type_name(int size)
{
    switch (size) {
    case 4: return "uint32";
    case 8: return "uint64";
    case 4 | VMMC_ATOMIC_SIGNED: return "int32";
    case 8 | VMMC_ATOMIC_SIGNED: return "int64";
    case 4 | VMMC_ATOMIC_FLOAT: return "float";
    case 8 | VMMC_ATOMIC_FLOAT: return "double";
    default: return "?";
    }
}

static inline const char *ref_op_name(int op)
{
    static const char *const n[] = {"?", "add", "and", "or", "xor", "swap", "cswap", "read",
                                    "min", "max", "prod", "land", "lor", "lxor", "mswap",
                                    "cswap_ne", "cswap_le", "cswap_lt", "cswap_ge", "cswap_gt"};
    return op >= 1 && op <= REF_OP_LAST ? n[op] : "?";
}

/* Bitwise and logical operations take integers only. */
static inline int ref_valid(int op, int size)
{
    if (op < VMMC_ATOMIC_ADD || op > REF_OP_LAST)
        return 0;
    if (!(size & VMMC_ATOMIC_FLOAT))
        return 1;
    return op != VMMC_ATOMIC_AND && op != VMMC_ATOMIC_OR && op != VMMC_ATOMIC_XOR &&
           op != VMMC_ATOMIC_MSWAP && op != VMMC_ATOMIC_LAND && op != VMMC_ATOMIC_LOR &&
           op != VMMC_ATOMIC_LXOR;
}

/* Values worth trying, as bits of each type. */
static inline int ref_values(int size, uint64_t *out)
{
    int n = 0;
    if (size & VMMC_ATOMIC_FLOAT) {
        static const double d[] = {0.0, -0.0, 1.0, -1.5, 3.25, 1e300, -1e-300, INFINITY,
                                   -INFINITY, NAN};
        for (unsigned i = 0; i < sizeof d / sizeof d[0]; i++)
            out[n++] = (size & 8) ? vmmc_atomic_from_double(d[i])
                                  : vmmc_atomic_from_float((float)d[i]);
        return n;
    }
    static const uint64_t v[] = {0, 1, 2, 7, 0x7fffffffull, 0x80000000ull, 0xffffffffull,
                                 0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull,
                                 0x0123456789abcdefull, 0xfedcba9876543210ull};
    for (unsigned i = 0; i < sizeof v / sizeof v[0]; i++)
        out[n++] = (size & 8) ? v[i] : v[i] & 0xffffffffu;
    return n;
}

#define REF_CMP(T, a, b)                                                                         \
    (op == VMMC_ATOMIC_MIN     ? (b) < (a)                                                       \
     : op == VMMC_ATOMIC_MAX   ? (b) > (a)                                                       \
     : op == VMMC_ATOMIC_CSWAP ? c_ == (a)                                                       \
     : op == VMMC_ATOMIC_CSWAP_NE ? c_ != (a)                                                    \
     : op == VMMC_ATOMIC_CSWAP_LE ? c_ <= (a)                                                    \
     : op == VMMC_ATOMIC_CSWAP_LT ? c_ < (a)                                                     \
     : op == VMMC_ATOMIC_CSWAP_GE ? c_ >= (a)                                                    \
                                  : c_ > (a))

/* The word after (@op, @size) on @word with @operand and @compare (bits). */
static inline uint64_t ref_apply(int op, int size, uint64_t word, uint64_t operand,
                                 uint64_t compare)
{
#define REF_INT(T)                                                                               \
    do {                                                                                         \
        T a = (T)word, b = (T)operand, c_ = (T)compare;                                          \
        uint64_t ua = (uint64_t)a, ub = (uint64_t)b, mask = sizeof(T) == 4 ? 0xffffffffu : ~0ull; \
        switch (op) {                                                                            \
        case VMMC_ATOMIC_ADD: return (ua + ub) & mask;                                           \
        case VMMC_ATOMIC_PROD: return (ua * ub) & mask;                                          \
        case VMMC_ATOMIC_AND: return (ua & ub) & mask;                                           \
        case VMMC_ATOMIC_OR: return (ua | ub) & mask;                                            \
        case VMMC_ATOMIC_XOR: return (ua ^ ub) & mask;                                           \
        case VMMC_ATOMIC_MSWAP: return ((ub & (uint64_t)c_) | (ua & ~(uint64_t)c_)) & mask;      \
        case VMMC_ATOMIC_LAND: return a && b;                                                    \
        case VMMC_ATOMIC_LOR: return a || b;                                                     \
        case VMMC_ATOMIC_LXOR: return (a && !b) || (!a && b);                                    \
        case VMMC_ATOMIC_SWAP: return ub & mask;                                                 \
        case VMMC_ATOMIC_READ: return ua & mask;                                                 \
        default: return (REF_CMP(T, a, b) ? ub : ua) & mask;                                     \
        }                                                                                        \
    } while (0)
#define REF_FP(T, U, from, to)                                                                   \
    do {                                                                                         \
        T a = (T)to(word), b = (T)to(operand), c_ = (T)to(compare), r;                           \
        switch (op) {                                                                            \
        case VMMC_ATOMIC_ADD: r = a + b; return from(r);                                         \
        case VMMC_ATOMIC_PROD: r = a * b; return from(r);                                        \
        case VMMC_ATOMIC_SWAP: return operand & (U)~(U)0;                                        \
        case VMMC_ATOMIC_READ: return word & (U)~(U)0;                                           \
        default: return REF_CMP(T, a, b) ? operand & (U)~(U)0 : word & (U)~(U)0;                 \
        }                                                                                        \
    } while (0)
    switch (size) {
    case 4: REF_INT(uint32_t);
    case 8: REF_INT(uint64_t);
    case 4 | VMMC_ATOMIC_SIGNED: REF_INT(int32_t);
    case 8 | VMMC_ATOMIC_SIGNED: REF_INT(int64_t);
    case 4 | VMMC_ATOMIC_FLOAT: REF_FP(float, uint32_t, vmmc_atomic_from_float, vmmc_atomic_to_float);
    default: REF_FP(double, uint64_t, vmmc_atomic_from_double, vmmc_atomic_to_double);
    }
#undef REF_INT
#undef REF_FP
}

#endif
