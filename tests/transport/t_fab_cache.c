/* The fabric registration cache (src/transport/fabric/fab_cache.c) with a
 * fake registrar that records every call: no fabric needed. One topic per
 * run: t_fab_cache <topic>. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transport/fabric/fab_cache.h"
#include "util/log.h"
#include "vtest.h"

#define MAXREG 100000
enum { RD = 1, WR = 2 };

/* The fake registrar: key = index of the registration; live[key] while
 * registered. */
static pthread_mutex_t fk_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uintptr_t addr; size_t len; uint64_t access; int live; } fk[MAXREG];
static int fk_n, fk_dereg, fk_fail;
/* Set: the registrar invalidates this cache's range while it registers, as
 * a munmap in another thread would. */
static fab_cache_t *fk_race;
static char *fk_race_at; /* set: invalidate one page there instead */

static int fake_reg(void *ctx, void *addr, size_t len, uint64_t access, fab_reg_t *out)
{
    (void)ctx;
    pthread_mutex_lock(&fk_lock);
    if (fk_fail || fk_n == MAXREG) {
        pthread_mutex_unlock(&fk_lock);
        return vmmc_error(VMMC_ERR_NOMEM, "fake registrar refuses");
    }
    int k = fk_n++;
    fk[k].addr = (uintptr_t)addr;
    fk[k].len = len;
    fk[k].access = access;
    fk[k].live = 1;
    pthread_mutex_unlock(&fk_lock);
    if (fk_race)
        fab_cache_invalidate(fk_race, fk_race_at ? fk_race_at : addr, fk_race_at ? 1 : len);
    out->key = (uint64_t)k;
    out->desc = &fk[k];
    out->handle = &fk[k];
    return 0;
}

static void fake_dereg(void *ctx, fab_reg_t *r)
{
    (void)ctx;
    pthread_mutex_lock(&fk_lock);
    if (r->key >= (uint64_t)fk_n || !fk[r->key].live) {
        fprintf(stderr, "FAIL: deregistration of key %llu that is not registered\n", (unsigned long long)r->key);
        exit(1);
    }
    if ((uintptr_t)r->addr != fk[r->key].addr || r->len != fk[r->key].len) {
        fprintf(stderr, "FAIL: deregistration of key %llu with another range\n", (unsigned long long)r->key);
        exit(1);
    }
    fk[r->key].live = 0;
    fk_dereg++;
    pthread_mutex_unlock(&fk_lock);
}

static int nreg(void) { pthread_mutex_lock(&fk_lock); int n = fk_n; pthread_mutex_unlock(&fk_lock); return n; }
static int live(uint64_t k) { pthread_mutex_lock(&fk_lock); int l = fk[k].live; pthread_mutex_unlock(&fk_lock); return l; }

static size_t PS;

/* A held registration must cover the range, have the access, be live. */
static const fab_reg_t *get_ok(fab_cache_t *c, const void *p, size_t len, uint64_t acc)
{
    const fab_reg_t *r = fab_cache_get(c, p, len, acc);
    VT_CHECK(r != NULL);
    VT_CHECK((uintptr_t)r->addr <= (uintptr_t)p && (uintptr_t)r->addr + r->len >= (uintptr_t)p + len);
    VT_CHECK((uintptr_t)r->addr % PS == 0 && r->len % PS == 0);
    VT_CHECK(r->key < (uint64_t)nreg() && live(r->key));
    VT_CHECK((fk[r->key].access & acc) == acc);
    VT_CHECK(fk[r->key].addr == (uintptr_t)r->addr && fk[r->key].len == r->len);
    return r;
}

static fab_cache_stats_t st(fab_cache_t *c) { fab_cache_stats_t s; fab_cache_stats(c, &s); return s; }

/* After a hook dropped a region: it is out of the index at once, and
 * deregistered by the cache's next call (here stats). */
static int gone(fab_cache_t *c, uint64_t k)
{
    VT_CHECK(live(k)); /* the hook itself deregisters nothing */
    (void)st(c);
    return !live(k);
}

static void *pages(size_t n)
{
    void *p = mmap(NULL, n * PS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    VT_CHECK(p != MAP_FAILED);
    return p;
}

static fab_cache_t *cache(size_t bytes, size_t entries)
{
    fab_cache_t *c = fab_cache_new(bytes, entries, fake_reg, fake_dereg, NULL);
    VT_CHECK(c != NULL);
    return c;
}

static void end(fab_cache_t *c)
{
    fab_cache_free(c);
    VT_CHECK(fk_dereg == fk_n); /* everything deregistered, exactly once */
}

static void t_hit(void)
{
    fab_cache_t *c = cache(0, 0);
    char *b = pages(4);
    const fab_reg_t *r = get_ok(c, b + 100, 200, RD);
    VT_CHECK(nreg() == 1 && r->len == PS);
    uint64_t k = r->key;
    fab_cache_put(c, r);
    VT_CHECK(live(k)); /* kept */
    r = get_ok(c, b + 10, 50, RD);
    VT_CHECK(r->key == k && nreg() == 1);
    const fab_reg_t *r2 = get_ok(c, b + 20, 60, RD); /* two holders */
    VT_CHECK(r2 == r);
    fab_cache_put(c, r);
    fab_cache_put(c, r2);
    fab_cache_stats_t s = st(c);
    VT_CHECK(s.hits == 2 && s.misses == 1 && s.entries == 1 && s.bytes == PS);
    const char *name;
    uint64_t v;
    VT_OK(fab_cache_counter_get(c, 0, &name, &v));
    VT_CHECK(!strcmp(name, "fabric.cache_hits") && v == 2);
    VT_OK(fab_cache_counter_get(c, 5, &name, &v));
    VT_CHECK(!strcmp(name, "fabric.cache_bytes") && v == PS);
    VT_STATUS(VMMC_ERR_NOT_FOUND, fab_cache_counter_get(c, 6, &name, &v));
    /* A range past the region misses; the new one covers both (no overlap kept). */
    r = get_ok(c, b + PS - 8, 16, RD);
    VT_CHECK(nreg() == 2 && !live(k) && r->len == 2 * PS);
    fab_cache_put(c, r);
    /* More access than cached: registered again with both. */
    r = get_ok(c, b, 8, RD | WR);
    VT_CHECK(nreg() == 3 && fk[r->key].access == (RD | WR));
    fab_cache_put(c, r);
    s = st(c);
    VT_CHECK(s.entries == 1 && s.misses == 3);
    end(c);
}

static void t_evict(void)
{
    /* By count: two unused at most, least recently used first. */
    fab_cache_t *c = cache(0, 2);
    char *b = pages(8);
    char *A = b, *B = b + 2 * PS, *C = b + 4 * PS;
    const fab_reg_t *r;
    r = get_ok(c, A, 8, RD); uint64_t ka = r->key; fab_cache_put(c, r);
    r = get_ok(c, B, 8, RD); uint64_t kb = r->key; fab_cache_put(c, r);
    r = get_ok(c, A, 8, RD); VT_CHECK(r->key == ka); fab_cache_put(c, r); /* A is now recent */
    r = get_ok(c, C, 8, RD); uint64_t kc = r->key; fab_cache_put(c, r);
    VT_CHECK(live(ka) && !live(kb) && live(kc));
    VT_CHECK(st(c).evictions == 1 && st(c).entries == 2);
    /* A region in use is never evicted, even over the bound. */
    const fab_reg_t *held = get_ok(c, A, 8, RD);
    r = get_ok(c, B, 8, RD); fab_cache_put(c, r);
    r = get_ok(c, b + 6 * PS, 8, RD); fab_cache_put(c, r);
    VT_CHECK(live(held->key));
    fab_cache_put(c, held);
    VT_CHECK(st(c).entries == 2);
    end(c);
    /* By bytes: 3 pages at most. */
    c = cache(3 * PS, 0);
    r = get_ok(c, A, 2 * PS, RD); ka = r->key; fab_cache_put(c, r);
    r = get_ok(c, C, 2 * PS, RD); kc = r->key; fab_cache_put(c, r);
    VT_CHECK(!live(ka) && live(kc) && st(c).bytes == 2 * PS && st(c).evictions == 1);
    end(c);
}

static void t_invalidate(void)
{
    fab_cache_t *c = cache(0, 0);
    char *b = pages(4);
    const fab_reg_t *r = get_ok(c, b, 8, RD);
    uint64_t k = r->key;
    fab_cache_invalidate(c, b + PS - 1, 1);
    VT_CHECK(live(k)); /* in use: kept until its put */
    const fab_reg_t *r2 = get_ok(c, b, 8, RD); /* not returned again */
    VT_CHECK(r2->key != k);
    fab_cache_put(c, r);
    VT_CHECK(!live(k));
    uint64_t k2 = r2->key; /* r2 is the cache's: not to be read once dropped */
    fab_cache_put(c, r2);
    fab_cache_invalidate(c, b + PS, PS); /* next to it: untouched */
    VT_CHECK(live(k2) && st(c).invalidations == 1);
    fab_cache_invalidate(c, b, 1);
    VT_CHECK(!live(k2) && st(c).invalidations == 2 && st(c).entries == 0 && st(c).bytes == 0);
    /* Memory that went away while it was being registered: the
     * registration serves its caller once and is not kept. */
    fk_race = c;
    r = get_ok(c, b, 8, RD);
    fk_race = NULL;
    k = r->key;
    fab_cache_put(c, r);
    VT_CHECK(!live(k));
    r = get_ok(c, b, 8, RD);
    VT_CHECK(r->key != k);
    k = r->key;
    fab_cache_put(c, r);
    /* An invalidation elsewhere meanwhile does not keep it out. */
    fab_cache_invalidate(c, b, PS);
    fk_race = c;
    fk_race_at = b + 2 * PS;
    r = get_ok(c, b, 8, RD);
    fk_race = NULL;
    fk_race_at = NULL;
    k = r->key;
    fab_cache_put(c, r);
    VT_CHECK(live(k));
    r = get_ok(c, b, 8, RD);
    VT_CHECK(r->key == k);
    fab_cache_put(c, r);
    end(c);
}

static void t_munmap(void)
{
    fab_cache_t *c = cache(0, 0);
    char *b = pages(4);
    const fab_reg_t *r = get_ok(c, b + PS, PS, RD);
    uint64_t k = r->key;
    fab_cache_put(c, r);
    VT_CHECK(munmap(b + PS, PS) == 0);
    VT_CHECK(gone(c, k) && st(c).invalidations == 1);
    char *again = mmap(b + PS, PS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    VT_CHECK(again == b + PS);
    r = get_ok(c, again, PS, RD);
    VT_CHECK(r->key != k && st(c).misses == 2);
    fab_cache_put(c, r);
    /* MAP_FIXED over a registered range replaces its memory as well. */
    k = r->key;
    VT_CHECK(mmap(b, 4 * PS, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == b);
    VT_CHECK(gone(c, k));
    munmap(b, 4 * PS);
    end(c);
}

static void t_free(void)
{
    fab_cache_t *c = cache(0, 0);
    /* Past the allocator's mmap threshold, fixed (not raised by a free):
     * free() unmaps the block and the next malloc() of its size maps it
     * again, usually at the same address. */
    size_t n = 8u << 20;
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    char *p = malloc(n);
    VT_CHECK(p != NULL);
    memset(p, 1, n);
    const fab_reg_t *r = get_ok(c, p, n, RD | WR);
    uint64_t k = r->key;
    fab_cache_put(c, r);
    free(p);
    char *q = malloc(n);
    VT_CHECK(q != NULL);
    memset(q, 2, n);
    printf("free + malloc: address %s\n", q == p ? "reused" : "not reused");
#ifndef __SANITIZE_ADDRESS__
    VT_CHECK(gone(c, k)); /* free() gave the memory back: invalidated */
#endif
    r = get_ok(c, q, n, RD | WR);
    VT_CHECK(r->key != k); /* never the stale registration */
    fab_cache_put(c, r);
    free(q);
    end(c);
}

static void t_madvise(void)
{
    fab_cache_t *c = cache(0, 0);
    char *b = pages(4);
    const fab_reg_t *r = get_ok(c, b, 4 * PS, RD); uint64_t k = r->key; fab_cache_put(c, r);
    VT_CHECK(madvise(b, PS, MADV_WILLNEED) == 0); /* keeps the pages */
    VT_CHECK(live(k));
    VT_CHECK(madvise(b + 2 * PS, PS, MADV_DONTNEED) == 0);
    VT_CHECK(gone(c, k));
    /* mremap moves the pages: the old range is invalid. */
    r = get_ok(c, b, 2 * PS, RD); k = r->key; fab_cache_put(c, r);
    char *m = mremap(b, 2 * PS, 64 * PS, MREMAP_MAYMOVE);
    VT_CHECK(m != MAP_FAILED);
    VT_CHECK(gone(c, k));
    munmap(m, 64 * PS);
    munmap(b + 2 * PS, 2 * PS);
    /* The heap shrinking through brk. */
    char *top = sbrk(0);
    char *h = sbrk((intptr_t)(4 * PS));
    if (h != (void *)-1 && h == top) {
        char *a = (char *)(((uintptr_t)h + PS - 1) & ~(PS - 1));
        r = get_ok(c, a, PS, RD); k = r->key; fab_cache_put(c, r);
        VT_CHECK(sbrk(-(intptr_t)(4 * PS)) != (void *)-1);
        VT_CHECK(gone(c, k));
        VT_CHECK(sbrk(0) == top); /* sbrk still knows where the break is */
    }
    end(c);
}

static void t_errors(void)
{
    fab_cache_t *c = cache(0, 0);
    char *b = pages(1);
    VT_CHECK(fab_cache_get(c, b, 0, RD) == NULL);
    VT_CHECK(strstr(vmmc_last_error(), "empty") != NULL);
    VT_CHECK(fab_cache_get(c, (void *)(UINTPTR_MAX - 10), 100, RD) == NULL);
    fk_fail = 1;
    VT_CHECK(fab_cache_get(c, b, 8, RD) == NULL);
    VT_CHECK(strstr(vmmc_last_error(), "fake registrar") != NULL);
    fk_fail = 0;
    VT_CHECK(st(c).entries == 0);
    const fab_reg_t *r = get_ok(c, b, 8, RD);
    fab_cache_put(c, r);
    VT_CHECK(fab_cache_new(0, 0, NULL, fake_dereg, NULL) == NULL);
    end(c);
}

/* Threads get, check and put regions of a few buffers through a cache
 * smaller than their working set while another invalidates them. */
static char *thr_buf;
static fab_cache_t *thr_c;
static atomic_int thr_stop;
static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (int i = 0; i < 20000; i++) {
        size_t off = (size_t)(rand_r(&seed) % (16 * PS)), len = 1 + (size_t)(rand_r(&seed) % (2 * PS));
        uint64_t acc = 1 + (uint64_t)(rand_r(&seed) % 3);
        const fab_reg_t *r = get_ok(thr_c, thr_buf + off, len, acc);
        VT_CHECK(live(r->key));
        if (i % 7 == 0)
            sched_yield();
        VT_CHECK(live(r->key)); /* still registered while held */
        fab_cache_put(thr_c, r);
    }
    return NULL;
}
static void *invalidator(void *arg)
{
    (void)arg;
    unsigned seed = 5;
    while (!atomic_load(&thr_stop)) {
        fab_cache_invalidate(thr_c, thr_buf + (size_t)(rand_r(&seed) % (18 * PS)), PS);
        sched_yield();
    }
    return NULL;
}
static void t_threads(void)
{
    thr_c = cache(8 * PS, 4);
    thr_buf = pages(20);
    pthread_t w[4], inv;
    VT_CHECK(pthread_create(&inv, NULL, invalidator, NULL) == 0);
    for (int i = 0; i < 4; i++)
        VT_CHECK(pthread_create(&w[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0);
    for (int i = 0; i < 4; i++)
        pthread_join(w[i], NULL);
    atomic_store(&thr_stop, 1);
    pthread_join(inv, NULL);
    fab_cache_stats_t s = st(thr_c);
    printf("threads: hits %llu misses %llu evictions %llu invalidations %llu\n", (unsigned long long)s.hits,
           (unsigned long long)s.misses, (unsigned long long)s.evictions, (unsigned long long)s.invalidations);
    VT_CHECK(s.hits + s.misses == 4 * 20000);
    VT_CHECK(s.entries <= 4 && s.bytes <= 8 * PS);
    end(thr_c);
}

int main(int argc, char **argv)
{
    PS = (size_t)sysconf(_SC_PAGESIZE);
    const char *t = argc > 1 ? argv[1] : "";
    if (!strcmp(t, "hit")) t_hit();
    else if (!strcmp(t, "evict")) t_evict();
    else if (!strcmp(t, "invalidate")) t_invalidate();
    else if (!strcmp(t, "munmap")) t_munmap();
    else if (!strcmp(t, "free")) t_free();
    else if (!strcmp(t, "madvise")) t_madvise();
    else if (!strcmp(t, "errors")) t_errors();
    else if (!strcmp(t, "threads")) t_threads();
    else {
        fprintf(stderr, "usage: t_fab_cache hit|evict|invalidate|munmap|free|madvise|errors|threads\n");
        return 2;
    }
    printf("PASS %s\n", t);
    return 0;
}
