/* C11 type-generic OpenSHMEM interfaces (OpenSHMEM 1.5): shmem_put(dest,
 * source, nelems, pe) calls shmem_TYPENAME_put for the type dest points
 * to, and shmem_put(ctx, dest, source, nelems, pe) its shmem_ctx_ form.
 * Included by shmem.h when the compiler is C11 or later (not C++).
 *
 * Selection is by the first argument: a shmem_ctx_t picks the ctx form,
 * chosen by the type of the second argument; otherwise the first
 * argument's type picks the routine. The fixed-width and size types
 * (int8_t ... uint64_t, size_t, ptrdiff_t) are typedefs of the standard
 * types listed here, so a generic call on them reaches the routine of the
 * type they alias (same size, same representation); call the typed routine
 * to name them. An argument type that has no routine is a compile error
 * (GCC, Clang) or a link error (others) naming vshmem_generic_no_match.
 */
#ifndef VMMC_SHMEM_GENERIC_H
#define VMMC_SHMEM_GENERIC_H

#if defined(__GNUC__) || defined(__clang__)
__attribute__((error("no OpenSHMEM routine for these argument types")))
#endif
void vshmem_generic_no_match(const void *arg, ...);

/* Arguments by position; the padding lets the last one be the only one. */
#define VSHMEM_G_ARG0(...) VSHMEM_G_ARG0_(__VA_ARGS__, 0)
#define VSHMEM_G_ARG0_(a, ...) a
#define VSHMEM_G_ARG1(...) VSHMEM_G_ARG1_(__VA_ARGS__, 0, 0)
#define VSHMEM_G_ARG1_(a, b, ...) b

/* The selectors: &*(p) is a pointer (an array decays, an incomplete
 * struct such as a context or team is fine); (p) + 0 also accepts the
 * scalar that the second argument is in a form without ctx (shmem_p). */
#define VSHMEM_G_SEL_PTR(p) &*(p)
#define VSHMEM_G_SEL_ANY(p) (p) + 0

/* ------------------------------------------------------------------------- */
/* Type lists of the generic selections: X(C type, TYPENAME, OP) */

#define VSHMEM_G_RMA(X, OP)                                                                    \
    X(float, float, OP)                                                                        \
    X(double, double, OP)                                                                      \
    X(long double, longdouble, OP)                                                             \
    X(char, char, OP)                                                                          \
    X(signed char, schar, OP)                                                                  \
    X(short, short, OP)                                                                        \
    X(int, int, OP)                                                                            \
    X(long, long, OP)                                                                          \
    X(long long, longlong, OP)                                                                 \
    X(unsigned char, uchar, OP)                                                                \
    X(unsigned short, ushort, OP)                                                              \
    X(unsigned int, uint, OP)                                                                  \
    X(unsigned long, ulong, OP)                                                                \
    X(unsigned long long, ulonglong, OP)

#define VSHMEM_G_AMO(X, OP)                                                                    \
    X(int, int, OP)                                                                            \
    X(long, long, OP)                                                                          \
    X(long long, longlong, OP)                                                                 \
    X(unsigned int, uint, OP)                                                                  \
    X(unsigned long, ulong, OP)                                                                \
    X(unsigned long long, ulonglong, OP)

#define VSHMEM_G_AMO_EXT(X, OP) VSHMEM_G_AMO(X, OP) X(float, float, OP) X(double, double, OP)

/* int32_t and int64_t alias int and long (or long long): their routines
 * serve the signed types here, as the standard's bitwise table has no
 * int, long. */
#define VSHMEM_G_AMO_BIT(X, OP)                                                                \
    X(unsigned int, uint, OP)                                                                  \
    X(unsigned long, ulong, OP)                                                                \
    X(unsigned long long, ulonglong, OP)                                                       \
    X(int32_t, int32, OP)                                                                      \
    X(int64_t, int64, OP)

#define VSHMEM_G_P2P(X, OP)                                                                    \
    X(short, short, OP)                                                                        \
    X(int, int, OP)                                                                            \
    X(long, long, OP)                                                                          \
    X(long long, longlong, OP)                                                                 \
    X(unsigned short, ushort, OP)                                                              \
    X(unsigned int, uint, OP)                                                                  \
    X(unsigned long, ulong, OP)                                                                \
    X(unsigned long long, ulonglong, OP)

#define VSHMEM_G_RED_BIT(X, OP)                                                                \
    X(unsigned char, uchar, OP)                                                                \
    X(unsigned short, ushort, OP)                                                              \
    X(unsigned int, uint, OP)                                                                  \
    X(unsigned long, ulong, OP)                                                                \
    X(unsigned long long, ulonglong, OP)                                                       \
    X(int8_t, int8, OP)                                                                        \
    X(int16_t, int16, OP)                                                                      \
    X(int32_t, int32, OP)                                                                      \
    X(int64_t, int64, OP)

#define VSHMEM_G_RED_CMP(X, OP)                                                                \
    X(char, char, OP)                                                                          \
    X(signed char, schar, OP)                                                                  \
    X(short, short, OP)                                                                        \
    X(int, int, OP)                                                                            \
    X(long, long, OP)                                                                          \
    X(long long, longlong, OP)                                                                 \
    X(unsigned char, uchar, OP)                                                                \
    X(unsigned short, ushort, OP)                                                              \
    X(unsigned int, uint, OP)                                                                  \
    X(unsigned long, ulong, OP)                                                                \
    X(unsigned long long, ulonglong, OP)                                                       \
    X(float, float, OP)                                                                        \
    X(double, double, OP)                                                                      \
    X(long double, longdouble, OP)

#define VSHMEM_G_RED_ARITH(X, OP)                                                              \
    VSHMEM_G_RED_CMP(X, OP) X(double _Complex, complexd, OP) X(float _Complex, complexf, OP)

/* ------------------------------------------------------------------------- */
/* Associations: T * selects shmem_TYPENAME_OP (C), shmem_ctx_TYPENAME_OP
 * (CC); the K forms also take a const T * (a source that is read only). */

#define VSHMEM_G_C(T, N, OP) T * : shmem_##N##_##OP,
#define VSHMEM_G_CC(T, N, OP) T * : shmem_ctx_##N##_##OP,
#define VSHMEM_G_CK(T, N, OP) T * : shmem_##N##_##OP, const T * : shmem_##N##_##OP,
#define VSHMEM_G_CCK(T, N, OP) T * : shmem_ctx_##N##_##OP, const T * : shmem_ctx_##N##_##OP,

/* A routine with a ctx form, selected by the type of its first pointer. */
#define VSHMEM_G_CTX(LIST, OP, ...)                                                            \
    _Generic(VSHMEM_G_SEL_PTR(VSHMEM_G_ARG0(__VA_ARGS__)),                                     \
        shmem_ctx_t: _Generic(VSHMEM_G_SEL_ANY(VSHMEM_G_ARG1(__VA_ARGS__)),                   \
                              LIST(VSHMEM_G_CC, OP) default: vshmem_generic_no_match),         \
        LIST(VSHMEM_G_C, OP) default: vshmem_generic_no_match)(__VA_ARGS__)

/* The same where that pointer may point to const (g, atomic_fetch). */
#define VSHMEM_G_CTX_K(LIST, OP, ...)                                                          \
    _Generic(VSHMEM_G_SEL_PTR(VSHMEM_G_ARG0(__VA_ARGS__)),                                     \
        shmem_ctx_t: _Generic(VSHMEM_G_SEL_ANY(VSHMEM_G_ARG1(__VA_ARGS__)),                   \
                              LIST(VSHMEM_G_CCK, OP) default: vshmem_generic_no_match),        \
        LIST(VSHMEM_G_CK, OP) default: vshmem_generic_no_match)(__VA_ARGS__)

/* A routine without a ctx form, selected by its first argument (p2p) ... */
#define VSHMEM_G_FIRST(LIST, OP, ...)                                                          \
    _Generic(VSHMEM_G_SEL_PTR(VSHMEM_G_ARG0(__VA_ARGS__)),                                     \
        LIST(VSHMEM_G_C, OP) default: vshmem_generic_no_match)(__VA_ARGS__)

/* ... or by its second, after the team (collectives, reductions). */
#define VSHMEM_G_TEAM(LIST, OP, ...)                                                           \
    _Generic(VSHMEM_G_SEL_PTR(VSHMEM_G_ARG1(__VA_ARGS__)),                                     \
        LIST(VSHMEM_G_C, OP) default: vshmem_generic_no_match)(__VA_ARGS__)

/* ------------------------------------------------------------------------- */
/* RMA */

#define shmem_put(...) VSHMEM_G_CTX(VSHMEM_G_RMA, put, __VA_ARGS__)
#define shmem_get(...) VSHMEM_G_CTX(VSHMEM_G_RMA, get, __VA_ARGS__)
#define shmem_put_nbi(...) VSHMEM_G_CTX(VSHMEM_G_RMA, put_nbi, __VA_ARGS__)
#define shmem_get_nbi(...) VSHMEM_G_CTX(VSHMEM_G_RMA, get_nbi, __VA_ARGS__)
#define shmem_p(...) VSHMEM_G_CTX(VSHMEM_G_RMA, p, __VA_ARGS__)
#define shmem_g(...) VSHMEM_G_CTX_K(VSHMEM_G_RMA, g, __VA_ARGS__)
#define shmem_iput(...) VSHMEM_G_CTX(VSHMEM_G_RMA, iput, __VA_ARGS__)
#define shmem_iget(...) VSHMEM_G_CTX(VSHMEM_G_RMA, iget, __VA_ARGS__)
#define shmem_put_signal(...) VSHMEM_G_CTX(VSHMEM_G_RMA, put_signal, __VA_ARGS__)
#define shmem_put_signal_nbi(...) VSHMEM_G_CTX(VSHMEM_G_RMA, put_signal_nbi, __VA_ARGS__)

/* ------------------------------------------------------------------------- */
/* Atomics */

#define shmem_atomic_fetch(...) VSHMEM_G_CTX_K(VSHMEM_G_AMO_EXT, atomic_fetch, __VA_ARGS__)
#define shmem_atomic_set(...) VSHMEM_G_CTX(VSHMEM_G_AMO_EXT, atomic_set, __VA_ARGS__)
#define shmem_atomic_swap(...) VSHMEM_G_CTX(VSHMEM_G_AMO_EXT, atomic_swap, __VA_ARGS__)
#define shmem_atomic_fetch_nbi(...) VSHMEM_G_CTX(VSHMEM_G_AMO_EXT, atomic_fetch_nbi, __VA_ARGS__)
#define shmem_atomic_swap_nbi(...) VSHMEM_G_CTX(VSHMEM_G_AMO_EXT, atomic_swap_nbi, __VA_ARGS__)
#define shmem_atomic_compare_swap(...)                                                         \
    VSHMEM_G_CTX(VSHMEM_G_AMO, atomic_compare_swap, __VA_ARGS__)
#define shmem_atomic_fetch_inc(...) VSHMEM_G_CTX(VSHMEM_G_AMO, atomic_fetch_inc, __VA_ARGS__)
#define shmem_atomic_inc(...) VSHMEM_G_CTX(VSHMEM_G_AMO, atomic_inc, __VA_ARGS__)
#define shmem_atomic_fetch_add(...) VSHMEM_G_CTX(VSHMEM_G_AMO, atomic_fetch_add, __VA_ARGS__)
#define shmem_atomic_add(...) VSHMEM_G_CTX(VSHMEM_G_AMO, atomic_add, __VA_ARGS__)
#define shmem_atomic_compare_swap_nbi(...)                                                     \
    VSHMEM_G_CTX(VSHMEM_G_AMO, atomic_compare_swap_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_inc_nbi(...)                                                        \
    VSHMEM_G_CTX(VSHMEM_G_AMO, atomic_fetch_inc_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_add_nbi(...)                                                        \
    VSHMEM_G_CTX(VSHMEM_G_AMO, atomic_fetch_add_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_and(...) VSHMEM_G_CTX(VSHMEM_G_AMO_BIT, atomic_fetch_and, __VA_ARGS__)
#define shmem_atomic_and(...) VSHMEM_G_CTX(VSHMEM_G_AMO_BIT, atomic_and, __VA_ARGS__)
#define shmem_atomic_fetch_or(...) VSHMEM_G_CTX(VSHMEM_G_AMO_BIT, atomic_fetch_or, __VA_ARGS__)
#define shmem_atomic_or(...) VSHMEM_G_CTX(VSHMEM_G_AMO_BIT, atomic_or, __VA_ARGS__)
#define shmem_atomic_fetch_xor(...) VSHMEM_G_CTX(VSHMEM_G_AMO_BIT, atomic_fetch_xor, __VA_ARGS__)
#define shmem_atomic_xor(...) VSHMEM_G_CTX(VSHMEM_G_AMO_BIT, atomic_xor, __VA_ARGS__)
#define shmem_atomic_fetch_and_nbi(...)                                                        \
    VSHMEM_G_CTX(VSHMEM_G_AMO_BIT, atomic_fetch_and_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_or_nbi(...)                                                         \
    VSHMEM_G_CTX(VSHMEM_G_AMO_BIT, atomic_fetch_or_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_xor_nbi(...)                                                        \
    VSHMEM_G_CTX(VSHMEM_G_AMO_BIT, atomic_fetch_xor_nbi, __VA_ARGS__)

/* ------------------------------------------------------------------------- */
/* Point-to-point synchronisation */

#define shmem_wait_until(...) VSHMEM_G_FIRST(VSHMEM_G_P2P, wait_until, __VA_ARGS__)
#define shmem_wait_until_all(...) VSHMEM_G_FIRST(VSHMEM_G_P2P, wait_until_all, __VA_ARGS__)
#define shmem_wait_until_any(...) VSHMEM_G_FIRST(VSHMEM_G_P2P, wait_until_any, __VA_ARGS__)
#define shmem_wait_until_some(...) VSHMEM_G_FIRST(VSHMEM_G_P2P, wait_until_some, __VA_ARGS__)
#define shmem_wait_until_all_vector(...)                                                       \
    VSHMEM_G_FIRST(VSHMEM_G_P2P, wait_until_all_vector, __VA_ARGS__)
#define shmem_wait_until_any_vector(...)                                                       \
    VSHMEM_G_FIRST(VSHMEM_G_P2P, wait_until_any_vector, __VA_ARGS__)
#define shmem_wait_until_some_vector(...)                                                      \
    VSHMEM_G_FIRST(VSHMEM_G_P2P, wait_until_some_vector, __VA_ARGS__)
#define shmem_test(...) VSHMEM_G_FIRST(VSHMEM_G_P2P, test, __VA_ARGS__)
#define shmem_test_all(...) VSHMEM_G_FIRST(VSHMEM_G_P2P, test_all, __VA_ARGS__)
#define shmem_test_any(...) VSHMEM_G_FIRST(VSHMEM_G_P2P, test_any, __VA_ARGS__)
#define shmem_test_some(...) VSHMEM_G_FIRST(VSHMEM_G_P2P, test_some, __VA_ARGS__)
#define shmem_test_all_vector(...) VSHMEM_G_FIRST(VSHMEM_G_P2P, test_all_vector, __VA_ARGS__)
#define shmem_test_any_vector(...) VSHMEM_G_FIRST(VSHMEM_G_P2P, test_any_vector, __VA_ARGS__)
#define shmem_test_some_vector(...) VSHMEM_G_FIRST(VSHMEM_G_P2P, test_some_vector, __VA_ARGS__)

/* ------------------------------------------------------------------------- */
/* Collectives on teams */

#define shmem_broadcast(...) VSHMEM_G_TEAM(VSHMEM_G_RMA, broadcast, __VA_ARGS__)
#define shmem_collect(...) VSHMEM_G_TEAM(VSHMEM_G_RMA, collect, __VA_ARGS__)
#define shmem_fcollect(...) VSHMEM_G_TEAM(VSHMEM_G_RMA, fcollect, __VA_ARGS__)
#define shmem_alltoall(...) VSHMEM_G_TEAM(VSHMEM_G_RMA, alltoall, __VA_ARGS__)
#define shmem_alltoalls(...) VSHMEM_G_TEAM(VSHMEM_G_RMA, alltoalls, __VA_ARGS__)
#define shmem_and_reduce(...) VSHMEM_G_TEAM(VSHMEM_G_RED_BIT, and_reduce, __VA_ARGS__)
#define shmem_or_reduce(...) VSHMEM_G_TEAM(VSHMEM_G_RED_BIT, or_reduce, __VA_ARGS__)
#define shmem_xor_reduce(...) VSHMEM_G_TEAM(VSHMEM_G_RED_BIT, xor_reduce, __VA_ARGS__)
#define shmem_max_reduce(...) VSHMEM_G_TEAM(VSHMEM_G_RED_CMP, max_reduce, __VA_ARGS__)
#define shmem_min_reduce(...) VSHMEM_G_TEAM(VSHMEM_G_RED_CMP, min_reduce, __VA_ARGS__)
#define shmem_sum_reduce(...) VSHMEM_G_TEAM(VSHMEM_G_RED_ARITH, sum_reduce, __VA_ARGS__)
#define shmem_prod_reduce(...) VSHMEM_G_TEAM(VSHMEM_G_RED_ARITH, prod_reduce, __VA_ARGS__)

#endif /* VMMC_SHMEM_GENERIC_H */
