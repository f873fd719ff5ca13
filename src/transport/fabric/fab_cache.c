/* The fabric transport's registration cache (fab_cache.h).
 *
 * The index is an array of the cached regions sorted by start address, and
 * the regions in it never overlap: a registration that would overlap others
 * is made to cover them (their union, their access bits together) and
 * replaces them. So the only region that can cover an address is the one
 * with the greatest start at or below it: a binary search. The array stays
 * small (it holds at most max_entries unused regions plus those in use).
 *
 * Each region is in one of three states:
 *   cached + unused   in the index and on the LRU list (evictable);
 *   cached + used     in the index, refs > 0, off the LRU list;
 *   stale             out of the index (invalidated, replaced, or made while
 *                     an invalidation ran), refs > 0: deregistered at its
 *                     last put, never returned again.
 *
 * Lock discipline: one mutex guards everything; the registrar's callbacks,
 * malloc and free are never called with it held. A memory hook runs inside
 * munmap/madvise/brk, which the allocator (or a deregistration) may call
 * from anywhere, and it takes this mutex: nothing under the mutex may call
 * into the allocator or the registrar, or such a hook could deadlock.
 * The hooks themselves deregister and free nothing (the allocator may be
 * inside free() with its arena locked, a provider inside a call holding its
 * own locks): they take the regions out of the index, so that no lookup
 * finds them again, and leave them on a deferred list that the next get,
 * put, stats or free of the cache deregisters. */
#include "transport/fabric/fab_cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/fabric/fab_hooks.h"
#include "util/config.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

uint64_t vmmc_fab_cfg_cache_bytes, vmmc_fab_cfg_cache_entries;
int vmmc_fab_cfg_stats;
static const vmmc_cfg_entry_t fab_cache_entries[] = {
    {"FABRIC_CACHE_BYTES", "256M", "the fabric transport keeps at most this many bytes registered "
     "in regions no operation uses (least recently used ones are deregistered first; 0: no bound)",
     VMMC_CFG_SIZE, &vmmc_fab_cfg_cache_bytes},
    {"FABRIC_CACHE_ENTRIES", "1024", "the fabric transport keeps at most this many registered "
     "regions that no operation uses (0: no bound)", VMMC_CFG_SIZE, &vmmc_fab_cfg_cache_entries},
    {"FABRIC_STATS", "no", "the fabric transport prints its registration cache's counters to "
     "stderr when an endpoint closes", VMMC_CFG_BOOL, &vmmc_fab_cfg_stats},
};
VMMC_CONFIG_TABLE(fab_cache_cfg, "fabric cache", fab_cache_entries);

/* A registration under way: an invalidation that overlaps it marks it. */
typedef struct pend {
    uintptr_t start, end;
    int hit;
    struct pend *next;
} pend_t;

typedef struct fab_ent {
    fab_reg_t reg;              /* first: a const fab_reg_t * is an entry */
    uintptr_t start, end;       /* registered range [start, end) */
    uint64_t access;
    unsigned refs;
    int stale;
    struct fab_ent *lru_prev, *lru_next;
} fab_ent_t;

struct fab_cache {
    pthread_mutex_t lock;
    fab_ent_t **idx;            /* sorted by start, disjoint */
    size_t n, cap;
    fab_ent_t lru;              /* sentinel: next = least recently used */
    size_t max_bytes, max_entries;
    size_t lru_n, lru_bytes;    /* what is evictable */
    struct pend *pending;       /* registrations under way (outside the lock) */
    int uncached;               /* no memory hooks: keep nothing unused */
    fab_ent_t *deferred;        /* dropped by a hook, not yet deregistered */
    fab_reg_fn reg;
    fab_dereg_fn dereg;
    void *ctx;
    fab_cache_stats_t st;
};

static void drain(fab_cache_t *c);

static size_t page_size(void)
{
    static size_t ps;
    if (!ps) {
        long v = sysconf(_SC_PAGESIZE);
        ps = v > 0 ? (size_t)v : 4096;
    }
    return ps;
}

static void lru_del(fab_cache_t *c, fab_ent_t *e)
{
    e->lru_prev->lru_next = e->lru_next;
    e->lru_next->lru_prev = e->lru_prev;
    e->lru_prev = e->lru_next = NULL;
    c->lru_n--;
    c->lru_bytes -= e->end - e->start;
}

static void lru_add(fab_cache_t *c, fab_ent_t *e) /* most recently used */
{
    e->lru_next = &c->lru;
    e->lru_prev = c->lru.lru_prev;
    c->lru.lru_prev->lru_next = e;
    c->lru.lru_prev = e;
    c->lru_n++;
    c->lru_bytes += e->end - e->start;
}

/* Index of the first region whose start is > a. */
static size_t idx_upper(const fab_cache_t *c, uintptr_t a)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->idx[mid]->start <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t idx_find(const fab_cache_t *c, const fab_ent_t *e)
{
    size_t i = idx_upper(c, e->start);
    return i - 1; /* e is in the index: idx[i-1] == e */
}

/* Take @p e out of the index (and the LRU list if unused). Returns e if it
 * is unused and must be deregistered by the caller, else NULL (marked stale:
 * its last put deregisters it). Accounting of entries/bytes follows. */
static fab_ent_t *idx_drop(fab_cache_t *c, size_t i)
{
    fab_ent_t *e = c->idx[i];
    memmove(&c->idx[i], &c->idx[i + 1], (c->n - i - 1) * sizeof(*c->idx));
    c->n--;
    if (e->refs == 0) {
        lru_del(c, e);
        c->st.entries--;
        c->st.bytes -= e->end - e->start;
        return e;
    }
    e->stale = 1;
    return NULL;
}

/* Unused regions to deregister, chained through lru_next (off every list). */
static void push_dead(fab_ent_t **dead, fab_ent_t *e)
{
    if (e) {
        e->lru_next = *dead;
        *dead = e;
    }
}

static void evict_over_bounds(fab_cache_t *c, fab_ent_t **dead)
{
    while (c->lru_n && ((c->max_entries && c->lru_n > c->max_entries) ||
                        (c->max_bytes && c->lru_bytes > c->max_bytes))) {
        fab_ent_t *e = c->lru.lru_next;
        push_dead(dead, idx_drop(c, idx_find(c, e)));
        c->st.evictions++;
    }
}

static void release(fab_cache_t *c, fab_ent_t *dead)
{
    while (dead) {
        fab_ent_t *next = dead->lru_next;
        c->dereg(c->ctx, &dead->reg);
        free(dead);
        dead = next;
    }
}

fab_cache_t *fab_cache_new(size_t max_bytes, size_t max_entries, fab_reg_fn reg, fab_dereg_fn dereg, void *ctx)
{
    if (!reg || !dereg) {
        vmmc_error(VMMC_ERR_INVALID, "fab_cache_new: a register and a deregister function are needed");
        return NULL;
    }
    fab_cache_t *c = calloc(1, sizeof(*c));
    if (!c) {
        vmmc_error(VMMC_ERR_NOMEM, "fab_cache_new: out of memory");
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    c->lru.lru_next = c->lru.lru_prev = &c->lru;
    c->max_bytes = max_bytes;
    c->max_entries = max_entries;
    c->reg = reg;
    c->dereg = dereg;
    c->ctx = ctx;
    if (fab_hooks_add(c) != 0) {
        /* Without hooks a kept registration could outlive its memory:
         * deregister each one at its last put instead. */
        static atomic_int warned;
        if (!atomic_exchange(&warned, 1))
            vmmc_warn("%s", vmmc_last_error());
        c->uncached = 1;
    }
    return c;
}

void fab_cache_free(fab_cache_t *c)
{
    if (!c)
        return;
    fab_ent_t *dead = NULL;
    fab_hooks_remove(c);
    drain(c);
    pthread_mutex_lock(&c->lock);
    while (c->n) {
        fab_ent_t *e = idx_drop(c, c->n - 1);
        if (!e)
            vmmc_warn("fabric cache freed while a region is in use: left registered");
        push_dead(&dead, e);
    }
    fab_ent_t **idx = c->idx;
    c->idx = NULL;
    pthread_mutex_unlock(&c->lock);
    release(c, dead);
    free(idx);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Room for one more index slot; called and returning with the lock held,
 * drops it to allocate. Returns 0 or -1 (out of memory). */
static int idx_reserve(fab_cache_t *c)
{
    while (c->n == c->cap) {
        size_t want = c->cap ? 2 * c->cap : 64;
        pthread_mutex_unlock(&c->lock);
        fab_ent_t **nidx = malloc(want * sizeof(*nidx));
        pthread_mutex_lock(&c->lock);
        if (!nidx)
            return -1;
        fab_ent_t **old = NULL;
        if (c->cap < want) {
            if (c->n)
                memcpy(nidx, c->idx, c->n * sizeof(*nidx));
            old = c->idx;
            c->idx = nidx;
            c->cap = want;
        } else {
            old = nidx; /* another thread grew it meanwhile */
        }
        pthread_mutex_unlock(&c->lock);
        free(old);
        pthread_mutex_lock(&c->lock);
    }
    return 0;
}

/* The region covering [a, b) with @p access in the index, taken; or NULL. */
static fab_ent_t *lookup_take(fab_cache_t *c, uintptr_t a, uintptr_t b, uint64_t access)
{
    size_t i = idx_upper(c, a);
    if (i == 0)
        return NULL;
    fab_ent_t *e = c->idx[i - 1];
    if (e->end < b || (e->access & access) != access)
        return NULL;
    if (e->refs++ == 0)
        lru_del(c, e);
    return e;
}

static void unlink_pend(fab_cache_t *c, pend_t *p)
{
    for (pend_t **pp = &c->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            return;
        }
}

const fab_reg_t *fab_cache_get(fab_cache_t *c, const void *addr, size_t len, uint64_t access)
{
    uintptr_t a = (uintptr_t)addr, ps = page_size();
    if (!c || len == 0 || a + len < a || a + len > UINTPTR_MAX - ps) {
        vmmc_error(VMMC_ERR_INVALID, "fabric registration of [%p, +%zu): empty or past the end of the address space",
                   addr, len);
        return NULL;
    }
    uintptr_t b = a + len;
    drain(c);
    pthread_mutex_lock(&c->lock);
    fab_ent_t *e = lookup_take(c, a, b, access);
    if (e) {
        c->st.hits++;
        pthread_mutex_unlock(&c->lock);
        return &e->reg;
    }
    c->st.misses++;
    /* Register the page-aligned range, grown to cover the cached regions it
     * overlaps (they are replaced by it). */
    uintptr_t s = a & ~(ps - 1), t = (b + ps - 1) & ~(ps - 1);
    uint64_t acc = access;
    for (size_t i = idx_upper(c, s); i > 0 && c->idx[i - 1]->end > s; i--) {
        s = c->idx[i - 1]->start;
        acc |= c->idx[i - 1]->access;
    }
    for (size_t i = idx_upper(c, s); i < c->n && c->idx[i]->start < t; i++) {
        if (c->idx[i]->end > t)
            t = c->idx[i]->end;
        acc |= c->idx[i]->access;
    }
    pend_t pend = {s, t, 0, c->pending};
    c->pending = &pend;
    pthread_mutex_unlock(&c->lock);

    fab_ent_t *ne = calloc(1, sizeof(*ne));
    if (!ne) {
        pthread_mutex_lock(&c->lock);
        unlink_pend(c, &pend);
        pthread_mutex_unlock(&c->lock);
        vmmc_error(VMMC_ERR_NOMEM, "fabric registration cache: out of memory");
        return NULL;
    }
    ne->start = s;
    ne->end = t;
    ne->access = acc;
    ne->refs = 1;
    ne->reg.addr = (void *)s;
    ne->reg.len = t - s;
    int rc = c->reg(c->ctx, (void *)s, t - s, acc, &ne->reg);
    ne->reg.addr = (void *)s;
    ne->reg.len = t - s;

    fab_ent_t *dead = NULL;
    pthread_mutex_lock(&c->lock);
    if (rc != 0) {
        unlink_pend(c, &pend);
        pthread_mutex_unlock(&c->lock);
        free(ne);
        return NULL; /* the registrar set the error */
    }
    c->st.entries++;
    c->st.bytes += t - s;
    if (pend.hit || c->uncached) {
        /* Memory went away while we registered: this registration may name
         * pages that are no longer there (or, without hooks, nothing
         * would tell us when they go). Use it once, never cache it. */
        ne->stale = 1;
    } else if ((e = lookup_take(c, a, b, access)) != NULL) {
        /* Another thread cached a covering region meanwhile: use it. */
        c->st.entries--;
        c->st.bytes -= t - s;
        push_dead(&dead, ne);
        ne = e;
    } else if (idx_reserve(c) != 0) {
        ne->stale = 1; /* no room to index it: still usable once */
    } else {
        /* idx_reserve may have dropped the lock: recompute the overlaps,
         * and the region may have been invalidated meanwhile. */
        if (pend.hit) {
            ne->stale = 1;
        } else {
            size_t i = idx_upper(c, s);
            while (i > 0 && c->idx[i - 1]->end > s)
                push_dead(&dead, idx_drop(c, --i));
            while (i < c->n && c->idx[i]->start < t)
                push_dead(&dead, idx_drop(c, i));
            memmove(&c->idx[i + 1], &c->idx[i], (c->n - i) * sizeof(*c->idx));
            c->idx[i] = ne;
            c->n++;
        }
    }
    unlink_pend(c, &pend);
    pthread_mutex_unlock(&c->lock);
    release(c, dead);
    return &ne->reg;
}

void fab_cache_put(fab_cache_t *c, const fab_reg_t *r)
{
    if (!c || !r)
        return;
    fab_ent_t *e = (fab_ent_t *)r, *dead = NULL;
    pthread_mutex_lock(&c->lock);
    if (e->refs == 0) {
        pthread_mutex_unlock(&c->lock);
        vmmc_warn("fabric registration cache: put of a region not held (ignored)");
        return;
    }
    if (--e->refs == 0) {
        if (e->stale) {
            c->st.entries--;
            c->st.bytes -= e->end - e->start;
            push_dead(&dead, e);
        } else {
            lru_add(c, e);
            evict_over_bounds(c, &dead);
        }
    }
    pthread_mutex_unlock(&c->lock);
    release(c, dead);
    drain(c);
}

/* Drop the regions overlapping [addr, addr+len): unused ones onto @p dead. */
static void invalidate_locked(fab_cache_t *c, const void *addr, size_t len, fab_ent_t **dead)
{
    uintptr_t a = (uintptr_t)addr, b = a + len;
    if (b < a)
        b = UINTPTR_MAX;
    for (pend_t *p = c->pending; p; p = p->next)
        if (p->start < b && a < p->end)
            p->hit = 1;
    size_t i = idx_upper(c, a);
    if (i > 0 && c->idx[i - 1]->end > a)
        i--;
    while (i < c->n && c->idx[i]->start < b) {
        push_dead(dead, idx_drop(c, i));
        c->st.invalidations++;
    }
}

void fab_cache_invalidate(fab_cache_t *c, const void *addr, size_t len)
{
    if (!c || len == 0)
        return;
    fab_ent_t *dead = NULL;
    pthread_mutex_lock(&c->lock);
    invalidate_locked(c, addr, len, &dead);
    pthread_mutex_unlock(&c->lock);
    release(c, dead);
}

void fab_cache_invalidate_deferred(fab_cache_t *c, const void *addr, size_t len)
{
    if (!c || len == 0)
        return;
    pthread_mutex_lock(&c->lock);
    fab_ent_t *dead = NULL;
    invalidate_locked(c, addr, len, &dead);
    while (dead) { /* onto the deferred list, deregistered by drain() */
        fab_ent_t *next = dead->lru_next;
        dead->lru_next = c->deferred;
        c->deferred = dead;
        dead = next;
    }
    pthread_mutex_unlock(&c->lock);
}

/* Deregister what the hooks dropped (from an ordinary caller's context). */
static void drain(fab_cache_t *c)
{
    if (!__atomic_load_n(&c->deferred, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&c->lock);
    fab_ent_t *dead = c->deferred;
    c->deferred = NULL;
    pthread_mutex_unlock(&c->lock);
    release(c, dead);
}

void fab_cache_stats(fab_cache_t *c, fab_cache_stats_t *out)
{
    drain(c);
    pthread_mutex_lock(&c->lock);
    *out = c->st;
    pthread_mutex_unlock(&c->lock);
}

void fab_cache_print(fab_cache_t *c, const char *what)
{
    fab_cache_stats_t s;
    fab_cache_stats(c, &s);
    fprintf(stderr,
            "vmmc fabric cache %s: hits %llu misses %llu evictions %llu invalidations %llu "
            "entries %llu bytes %llu%s\n",
            what ? what : "", (unsigned long long)s.hits, (unsigned long long)s.misses,
            (unsigned long long)s.evictions, (unsigned long long)s.invalidations,
            (unsigned long long)s.entries, (unsigned long long)s.bytes,
            c->uncached ? " (no memory hooks: nothing kept)" : "");
}

int fab_cache_counter_get(fab_cache_t *c, int i, const char **name, uint64_t *value)
{
    static const char *const names[] = {"fabric.cache_hits", "fabric.cache_misses",
                                        "fabric.cache_evictions", "fabric.cache_invalidations",
                                        "fabric.cache_entries", "fabric.cache_bytes"};
    if (!c || i < 0 || i >= (int)(sizeof names / sizeof names[0]))
        return VMMC_ERR_NOT_FOUND;
    fab_cache_stats_t s;
    fab_cache_stats(c, &s);
    const uint64_t v[] = {s.hits, s.misses, s.evictions, s.invalidations, s.entries, s.bytes};
    *name = names[i];
    *value = v[i];
    return VMMC_OK;
}
