/* The transport conformance suite's harness: one job per test, run once per
 * transport configuration (tests/transport/CMakeLists.txt sets
 * CONF_TRANSPORT to its name and its VMMC_* settings), written against the
 * public API only.
 *
 * - conf_init(): join the job, skip unless it has the ranks the test needs;
 * - regions with guard bytes on both sides (heap: copy path; a whole
 *   vmmc_mem_alloc() allocation with VMMC_EXPORT_READ: mapped on shm), so a
 *   test can prove nothing was written outside an export;
 * - a position-dependent pattern (fill/check), so a byte that lands at the
 *   wrong offset, twice, torn or not at all is found;
 * - bounded waits: every wait ends in a failure naming what was awaited
 *   after CONF_TIMEOUT seconds (default 60), never a hang. */
#ifndef VMMC_TESTS_CONF_H
#define VMMC_TESTS_CONF_H

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vtest.h"

#define CONF_GUARD 64          /* guard bytes on each side of a heap region */
#define CONF_GUARD_BYTE 0xA5

/* Name of the transport configuration under test ("shm", "udp", ...). */
static inline const char *conf_transport(void)
{
    const char *t = getenv("CONF_TRANSPORT");
    return t && *t ? t : "default";
}

/* Does this configuration inject loss, duplication or reordering? */
static inline int conf_lossy(void)
{
    const char *f = getenv("VMMC_UDP_FAULT");
    return f && *f;
}

/* Seconds a test waits for anything before it fails. */
static inline double conf_timeout(void)
{
    const char *t = getenv("CONF_TIMEOUT");
    double v = t ? atof(t) : 0;
    return v > 0 ? v : 60;
}

/* Join the job; skip (exit 77) when it does not have @p np ranks (0: any
 * number of at least 2). */
static inline vmmc_ep_t *conf_init(int np)
{
    vt_require_transport();
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int n = vmmc_size(ep);
    if ((np && n != np) || n < 2)
        VT_SKIP("needs %d ranks (vmmc run -n %d), has %d", np ? np : 2, np ? np : 2, n);
    return ep;
}

/* ---- regions with guard bytes -------------------------------------------- */

enum { CONF_HEAP = 0, CONF_MEM = 1 };

typedef struct conf_region {
    unsigned char *p;      /* the exported bytes */
    size_t len;
    unsigned char *lo, *hi; /* guard bytes before p and after p + len */
    size_t nlo, nhi;
    int kind;
    void *base;            /* what to free */
} conf_region_t;

/* CONF_HEAP: malloc'd, CONF_GUARD guard bytes on both sides (copy path).
 * CONF_MEM: one vmmc_mem_alloc() allocation of exactly @p len bytes (mapped by
 * importers on shm when exported whole with VMMC_EXPORT_READ); its guard is
 * the rest of its last page (none when @p len is a multiple of the page).
 * The region is zeroed, the guards hold CONF_GUARD_BYTE. */
static inline void conf_region_alloc(vmmc_ep_t *ep, conf_region_t *r, int kind, size_t len)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->len = len;
    if (kind == CONF_HEAP) {
        unsigned char *b = malloc(len + 2 * CONF_GUARD);
        VT_CHECK(b != NULL);
        r->base = b;
        r->lo = b;
        r->nlo = CONF_GUARD;
        r->p = b + CONF_GUARD;
        r->hi = r->p + len;
        r->nhi = CONF_GUARD;
    } else {
        void *m;
        VT_OK(vmmc_mem_alloc(ep, len, &m));
        r->base = m;
        r->p = m;
        r->hi = r->p + len;
        r->nhi = (4096 - len % 4096) % 4096;
    }
    if (r->nlo)
        memset(r->lo, CONF_GUARD_BYTE, r->nlo);
    memset(r->p, 0, len);
    if (r->nhi)
        memset(r->hi, CONF_GUARD_BYTE, r->nhi);
}

static inline void conf_region_free(vmmc_ep_t *ep, conf_region_t *r)
{
    if (r->kind == CONF_HEAP)
        free(r->base);
    else
        VT_OK(vmmc_mem_free(ep, r->base));
    memset(r, 0, sizeof *r);
}

/* After vmmc_finalize(): free a heap region (allocations go with the
 * endpoint). */
static inline void conf_region_release(conf_region_t *r)
{
    if (r->kind == CONF_HEAP)
        free(r->base);
    memset(r, 0, sizeof *r);
}

/* Every guard byte still holds CONF_GUARD_BYTE, else fail naming the first
 * byte written outside the region. */
#define conf_guard_check(r) conf_guard_check_at((r), __FILE__, __LINE__)
static inline void conf_guard_check_at(const conf_region_t *r, const char *file, int line)
{
    for (size_t i = 0; i < r->nlo; i++)
        if (r->lo[i] != CONF_GUARD_BYTE)
            VT_FAIL("(%s:%d) byte %zu before the region was written (0x%02x)", file, line,
                    r->nlo - i, r->lo[i]);
    for (size_t i = 0; i < r->nhi; i++)
        if (r->hi[i] != CONF_GUARD_BYTE)
            VT_FAIL("(%s:%d) byte %zu past the end of the %zu-byte region was written (0x%02x)",
                    file, line, i, r->len, r->hi[i]);
}

/* Export @p r under @p name with @p flags (VMMC_EXPORT_*), an optional
 * handler, any importer. */
static inline vmmc_export_t *conf_export(vmmc_ep_t *ep, conf_region_t *r, const char *name,
                                         unsigned flags, vmmc_notify_fn_t fn, void *arg)
{
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS | (fn ? VMMC_EXPORT_PARAM_HANDLER : 0);
    p.name = name;
    p.addr = r->p;
    p.length = r->len;
    p.flags = flags;
    p.handler = fn;
    p.handler_arg = arg;
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &p, &ex));
    return ex;
}

static inline vmmc_proxy_t *conf_import(vmmc_ep_t *ep, int rank, const char *name)
{
    vmmc_proxy_t *px;
    VT_OK(vmmc_import(ep, rank, name, (int)(conf_timeout() * 1000), &px));
    return px;
}

/* ---- patterns ----------------------------------------------------------- */

/* The byte a pattern with @p seed has at absolute position @p pos: depends
 * on both, so a shifted, repeated or stale copy does not match. */
static inline unsigned char conf_byte(uint64_t seed, uint64_t pos)
{
    uint64_t x = (pos + 1) * 0x9E3779B97F4A7C15ULL ^ (seed + 1) * 0xD6E8FEB86659FD93ULL;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ULL;
    return (unsigned char)(x >> 56);
}

/* Bytes pos .. pos + len of pattern @p seed into @p dst. */
static inline void conf_fill(void *dst, size_t len, uint64_t seed, uint64_t pos)
{
    unsigned char *d = dst;
    for (size_t i = 0; i < len; i++)
        d[i] = conf_byte(seed, pos + i);
}

/* Index of the first byte of @p src that is not pattern @p seed at
 * pos .. pos + len, or -1 when all match. */
static inline long conf_mismatch(const void *src, size_t len, uint64_t seed, uint64_t pos)
{
    const volatile unsigned char *s = src;
    for (size_t i = 0; i < len; i++)
        if (s[i] != conf_byte(seed, pos + i))
            return (long)i;
    return -1;
}

#define conf_check(src, len, seed, pos, ...)                                           \
    do {                                                                               \
        long cm_ = conf_mismatch((src), (len), (seed), (pos));                         \
        if (cm_ >= 0) {                                                                \
            fprintf(stderr, "[%s] byte %ld of %zu (pattern %llu at %llu) is 0x%02x, "  \
                    "expected 0x%02x: ", conf_transport(), cm_, (size_t)(len),         \
                    (unsigned long long)(seed), (unsigned long long)(pos),             \
                    ((const volatile unsigned char *)(src))[cm_],                      \
                    conf_byte((seed), (pos) + (uint64_t)cm_));                         \
            VT_FAIL(__VA_ARGS__);                                                      \
        }                                                                              \
    } while (0)

/* Deterministic pseudo-random value for @p i (sizes, offsets). */
static inline uint64_t conf_hash(uint64_t i)
{
    uint64_t x = i + 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* ---- bounded waits -------------------------------------------------------- */

/* Wait until @p cond holds, serving notifications (vmmc_wait: spin, then
 * sleep); fail after conf_timeout() seconds naming @p what. For conditions
 * that a notification handler makes true. */
#define CONF_WAIT(ep, cond, ...)                                                       \
    do {                                                                               \
        double cw0_ = vt_now();                                                        \
        while (!(cond)) {                                                              \
            if (vt_now() - cw0_ > conf_timeout())                                      \
                VT_FAIL("[%s] timed out waiting for %s: " __VA_ARGS__ "", conf_transport(), \
                        #cond);                                                        \
            int cwr_ = vmmc_wait((ep), 20);                                            \
            if (cwr_ < 0)                                                              \
                VT_FAIL("vmmc_wait: %s", vmmc_strerror(cwr_));                         \
        }                                                                              \
    } while (0)

/* Wait until @p cond holds for memory a peer writes without notification:
 * poll with progress, yield the CPU, then sleep briefly (ranks may
 * outnumber cores). */
#define CONF_POLL(ep, cond, ...)                                                       \
    do {                                                                               \
        double cp0_ = vt_now();                                                        \
        for (unsigned cpn_ = 0; !(cond); cpn_++) {                                     \
            if (vt_now() - cp0_ > conf_timeout())                                      \
                VT_FAIL("[%s] timed out polling for %s: " __VA_ARGS__ "", conf_transport(), \
                        #cond);                                                        \
            int cpr_ = vmmc_progress(ep);                                              \
            if (cpr_ < 0)                                                              \
                VT_FAIL("vmmc_progress: %s", vmmc_strerror(cpr_));                     \
            if (cpn_ < 64)                                                             \
                sched_yield();                                                         \
            else {                                                                     \
                struct timespec cpt_ = {0, 50000};                                     \
                nanosleep(&cpt_, NULL);                                                \
            }                                                                          \
        }                                                                              \
    } while (0)

/* A word another rank writes: read it once, fresh. */
static inline uint64_t conf_load(const void *p)
{
    return __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE);
}

/* The endpoint's non-zero counters to stderr (for a failure's report). */
static inline void conf_dump_counters(vmmc_ep_t *ep)
{
    const char *name;
    uint64_t v;
    fprintf(stderr, "[%s] rank %d counters:", conf_transport(), vmmc_rank(ep));
    for (int i = 0; vmmc_counter_get(ep, i, &name, &v) == VMMC_OK; i++)
        if (v)
            fprintf(stderr, " %s=%llu", name, (unsigned long long)v);
    fprintf(stderr, "\n");
}

#define conf_ok(rank, ...)                                                             \
    do {                                                                               \
        printf("[%s] rank %d: ", conf_transport(), (rank));                            \
        printf(__VA_ARGS__);                                                           \
        printf("\n");                                                                  \
        fflush(stdout);                                                                \
    } while (0)

#endif
