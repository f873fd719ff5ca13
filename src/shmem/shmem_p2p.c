/* OpenSHMEM point-to-point synchronisation on VSHMEM_P2P_TYPES:
 * wait_until, _all, _any, _some and their _vector forms, test and
 * test_all/_any/_some (+ _vector), shmem_signal_wait_until, and the
 * deprecated shmem_wait and shmem_<T>_wait (wait while *ivar == value).
 *
 * One engine serves every type: an ivar is described by its size and
 * signedness, read with an acquire load of that size (the writer is
 * another process's store, atomic or deliberate update) and widened to 64
 * bits, and compared as its type compares. Waiting goes through shm_wait()
 * (spin, then sleep on this PE's doorbell), never a bare spin loop.
 *
 * The standard's results: _any returns the index of a satisfying ivar or
 * SIZE_MAX when nelems is 0 or status excludes every ivar; _some stores the
 * indices of all the satisfying ivars it saw in one pass and returns their
 * count (0 when nothing is left to wait for); an ivar whose status entry is
 * non-zero is skipped, and a NULL status skips nothing.
 */
#include <stdint.h>

#include "shmem_int.h"

enum { P2P_ALL, P2P_ANY, P2P_SOME };

typedef struct p2p {
    const char *ivars;  /* first ivar */
    size_t elem;        /* bytes of one: 2, 4 or 8 */
    int sgn;            /* signed type */
    size_t n;           /* ivars */
    const int *status;  /* NULL, or n entries: non-zero skips that ivar */
    int cmp;            /* SHMEM_CMP_* */
    uint64_t value;     /* the one comparison value (widened), ... */
    const char *values; /* ... or n of them (the _vector forms) */
    size_t *indices;    /* P2P_SOME: where the satisfying indices go */
    int mode;
    size_t found; /* P2P_ANY: the index; P2P_SOME: the count */
    uint64_t last; /* P2P_ANY: the satisfying ivar's value (widened) */
} p2p_t;

/* The @elem-byte value at @p widened to 64 bits (sign-extended if @sgn);
 * @atomic: an acquire load (an ivar), else a plain one (a cmp value). */
static inline uint64_t p2p_load(const void *p, size_t elem, int sgn, int atomic)
{
    switch (elem) {
    case 2: {
        uint16_t v = atomic ? __atomic_load_n((const uint16_t *)p, __ATOMIC_ACQUIRE)
                            : *(const uint16_t *)p;
        return sgn ? (uint64_t)(int64_t)(int16_t)v : v;
    }
    case 4: {
        uint32_t v = atomic ? __atomic_load_n((const uint32_t *)p, __ATOMIC_ACQUIRE)
                            : *(const uint32_t *)p;
        return sgn ? (uint64_t)(int64_t)(int32_t)v : v;
    }
    default:
        return atomic ? __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE)
                      : *(const uint64_t *)p;
    }
}

static inline int p2p_true(uint64_t a, uint64_t b, int sgn, int cmp)
{
    if (sgn) {
        int64_t x = (int64_t)a, y = (int64_t)b;
        switch (cmp) {
        case SHMEM_CMP_EQ: return x == y;
        case SHMEM_CMP_NE: return x != y;
        case SHMEM_CMP_GT: return x > y;
        case SHMEM_CMP_LE: return x <= y;
        case SHMEM_CMP_LT: return x < y;
        default: return x >= y;
        }
    }
    switch (cmp) {
    case SHMEM_CMP_EQ: return a == b;
    case SHMEM_CMP_NE: return a != b;
    case SHMEM_CMP_GT: return a > b;
    case SHMEM_CMP_LE: return a <= b;
    case SHMEM_CMP_LT: return a < b;
    default: return a >= b;
    }
}

static inline int p2p_skip(const p2p_t *q, size_t i)
{
    return q->status != NULL && q->status[i] != 0;
}

/* Does ivar @i satisfy the condition? Its value goes to *@v. */
static inline int p2p_sat(const p2p_t *q, size_t i, uint64_t *v)
{
    *v = p2p_load(q->ivars + i * q->elem, q->elem, q->sgn, 1);
    uint64_t c = q->values ? p2p_load(q->values + i * q->elem, q->elem, q->sgn, 0) : q->value;
    return p2p_true(*v, c, q->sgn, q->cmp);
}

/* One pass over the ivars: 1 when the wait is over (shm_wait's ready). */
static int p2p_ready(void *arg)
{
    p2p_t *q = arg;
    uint64_t v;
    size_t count = 0;
    for (size_t i = 0; i < q->n; i++) {
        if (p2p_skip(q, i))
            continue;
        if (!p2p_sat(q, i, &v)) {
            if (q->mode == P2P_ALL)
                return 0;
            continue;
        }
        if (q->mode == P2P_ANY) {
            q->found = i;
            q->last = v;
            return 1;
        }
        if (q->mode == P2P_SOME)
            q->indices[count++] = i;
    }
    if (q->mode == P2P_SOME) {
        q->found = count;
        return count > 0;
    }
    return q->mode == P2P_ALL;
}

__attribute__((cold, noreturn)) static void p2p_bad_cmp(const char *fn, int cmp)
{
    shm_fatal(fn, "unknown comparison (%d): SHMEM_CMP_EQ, _NE, _GT, _LE, _LT or _GE", cmp);
}

/* shm_fatal naming what is wrong with @n ivars of @elem bytes at @ivars. */
__attribute__((cold, noreturn)) static void p2p_bad_ivars(const char *fn, const void *ivars,
                                                          size_t n, size_t elem)
{
    if (ivars == NULL)
        shm_fatal(fn, "ivars is NULL with nelems %zu", n);
    if (n > SIZE_MAX / elem || !shm_is_symmetric(ivars, n * elem))
        shm_fatal(fn, "ivars is not symmetric memory (%p, %zu elements)", ivars, n);
    shm_fatal(fn, "ivars is not aligned to its type (%p)", ivars);
}

/* The checks every call makes: initialised, a known comparison, and
 * @n > 0 ivars that lie in symmetric memory (nobody could write others: a
 * wait would never end) aligned to their type. The usual case, ivars in
 * this PE's heap, costs two compares. */
static inline void p2p_check(const char *fn, const void *ivars, size_t n, size_t elem, int cmp)
{
    if (__builtin_expect(!shm_g.initialized, 0))
        shm_check_init(fn);
    if (__builtin_expect((unsigned)cmp > SHMEM_CMP_GE, 0))
        p2p_bad_cmp(fn, cmp);
    if (n == 0)
        return;
    const char *p = ivars;
    size_t off = (size_t)(p - shm_g.heap);
    int in_heap = p >= shm_g.heap && off < shm_g.heap_size && n <= (shm_g.heap_size - off) / elem;
    if (__builtin_expect(!in_heap, 0) &&
        (ivars == NULL || n > SIZE_MAX / elem || !shm_is_symmetric(ivars, n * elem)))
        p2p_bad_ivars(fn, ivars, n, elem);
    if (__builtin_expect((uintptr_t)ivars % elem != 0, 0))
        p2p_bad_ivars(fn, ivars, n, elem);
}

/* Checks the call and fills @q. Returns 0 when nothing is left to wait
 * for (nelems 0 or every ivar skipped): the caller returns at once. */
static int p2p_setup(p2p_t *q, const char *fn, const void *ivars, size_t elem, int sgn,
                     size_t n, const int *status, int cmp, const void *value, const void *values,
                     int vector, size_t *indices, int mode)
{
    p2p_check(fn, ivars, n, elem, cmp);
    *q = (p2p_t){.ivars = ivars, .elem = elem, .sgn = sgn, .n = n, .status = status,
                 .cmp = cmp, .indices = indices, .mode = mode, .found = SIZE_MAX};
    if (n == 0)
        return 0;
    if (vector && values == NULL)
        shm_fatal(fn, "cmp_values is NULL (%p)", values);
    if (mode == P2P_SOME && indices == NULL)
        shm_fatal(fn, "indices is NULL (%p)", (void *)indices);
    if (vector)
        q->values = values;
    else
        q->value = p2p_load(value, elem, sgn, 0);
    size_t active = 0;
    for (size_t i = 0; i < n && active == 0; i++)
        active += !p2p_skip(q, i);
    if (active == 0) {
        q->found = mode == P2P_ANY ? SIZE_MAX : 0;
        return 0;
    }
    return 1;
}

static void p2p_wait(p2p_t *q)
{
    if (!p2p_ready(q))
        shm_wait(p2p_ready, q);
}

/* One ivar (wait_until, test, the deprecated waits): checked, then one
 * load and compare inline; only a wait that must wait builds a p2p_t. */
static inline int p2p_test1(const char *fn, const void *ivar, size_t elem, int sgn, int cmp,
                            const void *value, uint64_t *v)
{
    p2p_check(fn, ivar, 1, elem, cmp);
    *v = p2p_load(ivar, elem, sgn, 1);
    return p2p_true(*v, p2p_load(value, elem, sgn, 0), sgn, cmp);
}

static inline uint64_t p2p_wait1(const char *fn, const void *ivar, size_t elem, int sgn, int cmp,
                                 const void *value)
{
    uint64_t v;
    if (__builtin_expect(p2p_test1(fn, ivar, elem, sgn, cmp, value, &v), 1))
        return v;
    p2p_t q = {.ivars = ivar, .elem = elem, .sgn = sgn, .n = 1, .cmp = cmp, .mode = P2P_ANY,
               .value = p2p_load(value, elem, sgn, 0)};
    shm_wait(p2p_ready, &q);
    return q.last;
}

#define P2P_SGN(T) ((T)-1 < (T)1)

#define P2P(T, N)                                                                              \
    void shmem_##N##_wait_until(T *ivar, int cmp, T cmp_value)                                 \
    {                                                                                          \
        p2p_wait1(__func__, ivar, sizeof(T), P2P_SGN(T), cmp, &cmp_value);                     \
    }                                                                                          \
    void shmem_##N##_wait_until_all(T *ivars, size_t nelems, const int *status, int cmp,       \
                                    T cmp_value)                                               \
    {                                                                                          \
        p2p_t q;                                                                               \
        if (p2p_setup(&q, __func__, ivars, sizeof(T), P2P_SGN(T), nelems, status, cmp,         \
                      &cmp_value, NULL, 0, NULL, P2P_ALL))                                     \
            p2p_wait(&q);                                                                      \
    }                                                                                          \
    size_t shmem_##N##_wait_until_any(T *ivars, size_t nelems, const int *status, int cmp,     \
                                      T cmp_value)                                             \
    {                                                                                          \
        p2p_t q;                                                                               \
        if (p2p_setup(&q, __func__, ivars, sizeof(T), P2P_SGN(T), nelems, status, cmp,         \
                      &cmp_value, NULL, 0, NULL, P2P_ANY))                                     \
            p2p_wait(&q);                                                                      \
        return q.found;                                                                        \
    }                                                                                          \
    size_t shmem_##N##_wait_until_some(T *ivars, size_t nelems, size_t *indices,               \
                                       const int *status, int cmp, T cmp_value)                \
    {                                                                                          \
        p2p_t q;                                                                               \
        if (!p2p_setup(&q, __func__, ivars, sizeof(T), P2P_SGN(T), nelems, status, cmp,        \
                       &cmp_value, NULL, 0, indices, P2P_SOME))                                \
            return 0;                                                                          \
        p2p_wait(&q);                                                                          \
        return q.found;                                                                        \
    }                                                                                          \
    void shmem_##N##_wait_until_all_vector(T *ivars, size_t nelems, const int *status,         \
                                           int cmp, T *cmp_values)                             \
    {                                                                                          \
        p2p_t q;                                                                               \
        if (p2p_setup(&q, __func__, ivars, sizeof(T), P2P_SGN(T), nelems, status, cmp, NULL,   \
                      cmp_values, 1, NULL, P2P_ALL))                                           \
            p2p_wait(&q);                                                                      \
    }                                                                                          \
    size_t shmem_##N##_wait_until_any_vector(T *ivars, size_t nelems, const int *status,       \
                                             int cmp, T *cmp_values)                           \
    {                                                                                          \
        p2p_t q;                                                                               \
        if (p2p_setup(&q, __func__, ivars, sizeof(T), P2P_SGN(T), nelems, status, cmp, NULL,   \
                      cmp_values, 1, NULL, P2P_ANY))                                           \
            p2p_wait(&q);                                                                      \
        return q.found;                                                                        \
    }                                                                                          \
    size_t shmem_##N##_wait_until_some_vector(T *ivars, size_t nelems, size_t *indices,        \
                                              const int *status, int cmp, T *cmp_values)       \
    {                                                                                          \
        p2p_t q;                                                                               \
        if (!p2p_setup(&q, __func__, ivars, sizeof(T), P2P_SGN(T), nelems, status, cmp, NULL,  \
                       cmp_values, 1, indices, P2P_SOME))                                      \
            return 0;                                                                          \
        p2p_wait(&q);                                                                          \
        return q.found;                                                                        \
    }                                                                                          \
    int shmem_##N##_test(T *ivar, int cmp, T cmp_value)                                        \
    {                                                                                          \
        uint64_t v_;                                                                           \
        return p2p_test1(__func__, ivar, sizeof(T), P2P_SGN(T), cmp, &cmp_value, &v_);         \
    }                                                                                          \
    int shmem_##N##_test_all(T *ivars, size_t nelems, const int *status, int cmp,              \
                             T cmp_value)                                                      \
    {                                                                                          \
        p2p_t q;                                                                               \
        if (!p2p_setup(&q, __func__, ivars, sizeof(T), P2P_SGN(T), nelems, status, cmp,        \
                       &cmp_value, NULL, 0, NULL, P2P_ALL))                                    \
            return 1;                                                                          \
        return p2p_ready(&q);                                                                  \
    }                                                                                          \
    size_t shmem_##N##_test_any(T *ivars, size_t nelems, const int *status, int cmp,           \
                                T cmp_value)                                                   \
    {                                                                                          \
        p2p_t q;                                                                               \
        if (p2p_setup(&q, __func__, ivars, sizeof(T), P2P_SGN(T), nelems, status, cmp,         \
                      &cmp_value, NULL, 0, NULL, P2P_ANY))                                     \
            p2p_ready(&q);                                                                     \
        return q.found;                                                                        \
    }                                                                                          \
    size_t shmem_##N##_test_some(T *ivars, size_t nelems, size_t *indices, const int *status,  \
                                 int cmp, T cmp_value)                                         \
    {                                                                                          \
        p2p_t q;                                                                               \
        if (!p2p_setup(&q, __func__, ivars, sizeof(T), P2P_SGN(T), nelems, status, cmp,        \
                       &cmp_value, NULL, 0, indices, P2P_SOME))                                \
            return 0;                                                                          \
        p2p_ready(&q);                                                                         \
        return q.found;                                                                        \
    }                                                                                          \
    int shmem_##N##_test_all_vector(T *ivars, size_t nelems, const int *status, int cmp,       \
                                    T *cmp_values)                                             \
    {                                                                                          \
        p2p_t q;                                                                               \
        if (!p2p_setup(&q, __func__, ivars, sizeof(T), P2P_SGN(T), nelems, status, cmp, NULL,  \
                       cmp_values, 1, NULL, P2P_ALL))                                          \
            return 1;                                                                          \
        return p2p_ready(&q);                                                                  \
    }                                                                                          \
    size_t shmem_##N##_test_any_vector(T *ivars, size_t nelems, const int *status, int cmp,    \
                                       T *cmp_values)                                          \
    {                                                                                          \
        p2p_t q;                                                                               \
        if (p2p_setup(&q, __func__, ivars, sizeof(T), P2P_SGN(T), nelems, status, cmp, NULL,   \
                      cmp_values, 1, NULL, P2P_ANY))                                           \
            p2p_ready(&q);                                                                     \
        return q.found;                                                                        \
    }                                                                                          \
    size_t shmem_##N##_test_some_vector(T *ivars, size_t nelems, size_t *indices,              \
                                        const int *status, int cmp, T *cmp_values)             \
    {                                                                                          \
        p2p_t q;                                                                               \
        if (!p2p_setup(&q, __func__, ivars, sizeof(T), P2P_SGN(T), nelems, status, cmp, NULL,  \
                       cmp_values, 1, indices, P2P_SOME))                                      \
            return 0;                                                                          \
        p2p_ready(&q);                                                                         \
        return q.found;                                                                        \
    }
VSHMEM_P2P_TYPES(P2P)

uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value)
{
    return p2p_wait1(__func__, sig_addr, sizeof *sig_addr, 0, cmp, &cmp_value);
}

void shmem_wait(long *ivar, long cmp_value)
{
    p2p_wait1(__func__, ivar, sizeof *ivar, 1, SHMEM_CMP_NE, &cmp_value);
}

#define P2P_OLD(T, N)                                                                          \
    void shmem_##N##_wait(T *ivar, T cmp_value)                                                \
    {                                                                                          \
        p2p_wait1(__func__, ivar, sizeof(T), P2P_SGN(T), SHMEM_CMP_NE, &cmp_value);            \
    }
VSHMEM_OLD_REDUCE_BIT_TYPES(P2P_OLD)
