/* The arithmetic of one atomic on one word: which (operation, type) pairs
 * exist, and the one place that applies an atomic to memory.
 *
 * The size argument carries the word's width (4 or 8) and its type
 * (VMMC_ATOMIC_SIGNED, VMMC_ATOMIC_FLOAT, neither: unsigned), so it fits in
 * the one byte the transports' requests have for it. Validation is a pure
 * function of (op, size): the initiator calls it before anything moves, the
 * target again on whatever arrived.
 *
 * Integer ADD, AND, OR, XOR, SWAP, CSWAP and READ, and SWAP/READ of floats,
 * are the processor's own instructions (inline, atomic_word.h). Everything
 * else computes the new word from the old one and installs it with a compare-and-swap, retried
 * until no other atomic came in between: atomic with respect to every other
 * atomic on the word, the exporter's own included. Floats are compared and
 * combined by C's operators in their own precision (so NaN and signed zero
 * behave as in C); integers wrap around (the arithmetic is done unsigned,
 * which gives the two's complement result for signed words too). */
#include <string.h>

#include "core/core.h"
#include "core/atomic_word.h"

enum { K_UNSIGNED, K_SIGNED, K_FLOAT };

static const char *const op_names[] = {
    "?",   "add",  "and",  "or",       "xor",      "swap",     "cswap",    "read",
    "min", "max",  "prod", "land",     "lor",      "lxor",     "mswap",    "cswap_ne",
    "cswap_le",    "cswap_lt",         "cswap_ge", "cswap_gt"};

const char *vmmc_atomic_op_name(int op)
{
    return op >= VMMC_ATOMIC_ADD && op <= VMMC_ATOMIC_CSWAP_GT ? op_names[op] : "?";
}

static const char *type_name(int size)
{
    int w = vmmc_atomic_width(size);
    if (size & VMMC_ATOMIC_FLOAT)
        return w == 4 ? "float" : "double";
    if (size & VMMC_ATOMIC_SIGNED)
        return w == 4 ? "int32" : "int64";
    return w == 4 ? "uint32" : "uint64";
}

int vmmc_atomic_valid_slow(int op, int size)
{
    if (op < VMMC_ATOMIC_ADD || op > VMMC_ATOMIC_CSWAP_GT)
        return vmmc_error(VMMC_ERR_INVALID, "atomic: unknown operation %d", op);
    int w = vmmc_atomic_width(size);
    int types = size & (VMMC_ATOMIC_SIGNED | VMMC_ATOMIC_FLOAT);
    if ((w != 4 && w != 8) || types == (VMMC_ATOMIC_SIGNED | VMMC_ATOMIC_FLOAT))
        return vmmc_error(VMMC_ERR_INVALID,
                          "atomic %s: size 0x%x (4 or 8 bytes, or'ed with at most one of "
                          "VMMC_ATOMIC_SIGNED 0x%x, VMMC_ATOMIC_FLOAT 0x%x)",
                          vmmc_atomic_op_name(op), (unsigned)size, VMMC_ATOMIC_SIGNED,
                          VMMC_ATOMIC_FLOAT);
    if (types == VMMC_ATOMIC_FLOAT) {
        switch (op) {
        case VMMC_ATOMIC_AND: case VMMC_ATOMIC_OR: case VMMC_ATOMIC_XOR: case VMMC_ATOMIC_MSWAP:
            return vmmc_error(VMMC_ERR_INVALID, "atomic %s on a %s: bitwise operations take "
                              "integers only", vmmc_atomic_op_name(op), type_name(size));
        case VMMC_ATOMIC_LAND: case VMMC_ATOMIC_LOR: case VMMC_ATOMIC_LXOR:
            return vmmc_error(VMMC_ERR_INVALID, "atomic %s on a %s: logical operations take "
                              "integers only", vmmc_atomic_op_name(op), type_name(size));
        default: break;
        }
    }
    return VMMC_OK;
}

/* C's comparison of a with b: -1, 0, 1, or 2 when unordered (a NaN). */
#define ORDER(a, b) ((a) < (b) ? -1 : (a) > (b) ? 1 : (a) == (b) ? 0 : 2)

/* The word after @op on @old (operand @v, compare @c), all as bits of
 * width U; returns 0 when the operation writes nothing. */
#define DEFINE_NEXT(name, U, S, F)                                                                \
    static int name(int op, int kind, U old, U v, U c, U *out)                                    \
    {                                                                                             \
        F fo, fv, fc;                                                                             \
        memcpy(&fo, &old, sizeof fo);                                                             \
        memcpy(&fv, &v, sizeof fv);                                                               \
        memcpy(&fc, &c, sizeof fc);                                                               \
        U n = old;                                                                                \
        int r; /* how the operand (MIN, MAX) or compare (CSWAP_*) orders against the word */     \
        U x = op == VMMC_ATOMIC_MIN || op == VMMC_ATOMIC_MAX ? v : c;                             \
        F fx = op == VMMC_ATOMIC_MIN || op == VMMC_ATOMIC_MAX ? fv : fc;                          \
        if (kind == K_FLOAT)                                                                      \
            r = ORDER(fx, fo);                                                                    \
        else if (kind == K_SIGNED)                                                                \
            r = ORDER((S)x, (S)old);                                                              \
        else                                                                                      \
            r = ORDER(x, old);                                                                    \
        switch (op) {                                                                             \
        case VMMC_ATOMIC_ADD:                                                                     \
            if (kind == K_FLOAT) {                                                                \
                F f = fo + fv;                                                                    \
                memcpy(&n, &f, sizeof n);                                                         \
            } else {                                                                              \
                n = (U)(old + v);                                                                 \
            }                                                                                     \
            break;                                                                                \
        case VMMC_ATOMIC_PROD:                                                                    \
            if (kind == K_FLOAT) {                                                                \
                F f = fo * fv;                                                                    \
                memcpy(&n, &f, sizeof n);                                                         \
            } else {                                                                              \
                n = (U)(old * v);                                                                 \
            }                                                                                     \
            break;                                                                                \
        case VMMC_ATOMIC_AND: n = old & v; break;                                                 \
        case VMMC_ATOMIC_OR: n = old | v; break;                                                  \
        case VMMC_ATOMIC_XOR: n = old ^ v; break;                                                 \
        case VMMC_ATOMIC_MSWAP: n = (U)((v & c) | (old & ~c)); break;                             \
        case VMMC_ATOMIC_LAND: n = old != 0 && v != 0; break;                                     \
        case VMMC_ATOMIC_LOR: n = old != 0 || v != 0; break;                                      \
        case VMMC_ATOMIC_LXOR: n = (old != 0) != (v != 0); break;                                 \
        case VMMC_ATOMIC_SWAP: n = v; break;                                                      \
        case VMMC_ATOMIC_MIN: if (r == -1) n = v; break;                                          \
        case VMMC_ATOMIC_MAX: if (r == 1) n = v; break;                                           \
        case VMMC_ATOMIC_CSWAP: if (r == 0) n = v; break;                                         \
        case VMMC_ATOMIC_CSWAP_NE: if (r != 0) n = v; break;                                      \
        case VMMC_ATOMIC_CSWAP_LE: if (r == -1 || r == 0) n = v; break;                           \
        case VMMC_ATOMIC_CSWAP_LT: if (r == -1) n = v; break;                                     \
        case VMMC_ATOMIC_CSWAP_GE: if (r == 1 || r == 0) n = v; break;                            \
        case VMMC_ATOMIC_CSWAP_GT: if (r == 1) n = v; break;                                      \
        default: return 0; /* READ */                                                             \
        }                                                                                         \
        *out = n;                                                                                 \
        return n != old;                                                                          \
    }

DEFINE_NEXT(next32, uint32_t, int32_t, float)
DEFINE_NEXT(next64, uint64_t, int64_t, double)

_Static_assert(sizeof(float) == 4 && sizeof(double) == 8, "IEEE 754 binary32 and binary64");

uint64_t vmmc_atomic_apply_cas(void *p, int op, int size, uint64_t v, uint64_t c)
{
    int w = vmmc_atomic_width(size);
    int kind = size & VMMC_ATOMIC_FLOAT ? K_FLOAT : size & VMMC_ATOMIC_SIGNED ? K_SIGNED
                                                                               : K_UNSIGNED;
    /* Compute the new word from the old one; install it unless another
     * atomic changed the word meanwhile (then the CAS gives the new old). */
    if (w == 4) {
        uint32_t *wp = p, old = __atomic_load_n(wp, __ATOMIC_SEQ_CST), n;
        while (next32(op, kind, old, (uint32_t)v, (uint32_t)c, &n) &&
               !__atomic_compare_exchange_n(wp, &old, n, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
        return old;
    }
    uint64_t *wp = p, old = __atomic_load_n(wp, __ATOMIC_SEQ_CST), n;
    while (next64(op, kind, old, v, c, &n) &&
           !__atomic_compare_exchange_n(wp, &old, n, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    return old;
}
