/* The symmetric heap allocator: shmem_malloc and its family.
 *
 * Every PE runs the same sequence of collective calls, so a deterministic
 * allocator gives the same offsets everywhere: first fit over a list of
 * segments (used or free) that covers the user part of the heap in address
 * order, splitting on allocation and merging free neighbours on free. The
 * bookkeeping lives in this process's private memory, never in the heap,
 * so no other PE can corrupt it. Every call first checks, with one
 * allreduce (shm_world_minmax), that all PEs asked for the same thing, and
 * names the call if they did not. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmem/shmem_core.h"

typedef struct seg {
    size_t off, size; /* from the start of the heap */
    int used;
} seg_t;

static seg_t *segs;  /* sorted by off, covering [SHM_RESERVED, heap_size) */
static size_t nsegs, capsegs;

#define MIN_ALIGN 64 /* a cache line: no false sharing between allocations */

void shm_heap_init(void)
{
    capsegs = 64;
    segs = calloc(capsegs, sizeof *segs);
    if (!segs)
        shm_fatal("shmem_init", "out of memory for the heap's bookkeeping");
    segs[0] = (seg_t){SHM_RESERVED, shm_g.heap_size - SHM_RESERVED, 0};
    nsegs = 1;
}

void shm_heap_fini(void)
{
    free(segs);
    segs = NULL;
    nsegs = capsegs = 0;
}

static void insert_at(size_t i, seg_t s)
{
    if (nsegs == capsegs) {
        seg_t *n = realloc(segs, 2 * capsegs * sizeof *segs);
        if (!n)
            shm_fatal("shmem_malloc", "out of memory for the heap's bookkeeping");
        segs = n;
        capsegs *= 2;
    }
    memmove(&segs[i + 1], &segs[i], (nsegs - i) * sizeof *segs);
    segs[i] = s;
    nsegs++;
}

static void remove_at(size_t i)
{
    memmove(&segs[i], &segs[i + 1], (nsegs - i - 1) * sizeof *segs);
    nsegs--;
}

/* Merge segment i with free neighbours (it is free). */
static void coalesce(size_t i)
{
    if (i + 1 < nsegs && !segs[i + 1].used) {
        segs[i].size += segs[i + 1].size;
        remove_at(i + 1);
    }
    if (i > 0 && !segs[i - 1].used) {
        segs[i - 1].size += segs[i].size;
        remove_at(i);
    }
}

/* First fit: the offset of a new block, or 0 when none fits. */
static size_t alloc_block(size_t align, size_t size)
{
    for (size_t i = 0; i < nsegs; i++) {
        seg_t s = segs[i];
        if (s.used)
            continue;
        size_t start = (s.off + align - 1) & ~(align - 1);
        if (start < s.off || start - s.off > s.size || size > s.size - (start - s.off))
            continue;
        size_t lead = start - s.off, tail = s.size - lead - size;
        segs[i] = (seg_t){start, size, 1};
        if (tail)
            insert_at(i + 1, (seg_t){start + size, tail, 0});
        if (lead) {
            insert_at(i, (seg_t){s.off, lead, 0});
            if (i > 0 && !segs[i - 1].used) {
                segs[i - 1].size += lead;
                remove_at(i);
            }
        }
        return start;
    }
    return 0;
}

static long find_used(size_t off)
{
    size_t lo = 0, hi = nsegs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (segs[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nsegs && segs[lo].off == off && segs[lo].used ? (long)lo : -1;
}

/* The offset of @ptr, which must be a block this allocator handed out. */
static size_t block_of(const char *fn, const void *ptr, long *idx)
{
    const char *p = ptr;
    if (p < shm_g.heap + SHM_RESERVED || p >= shm_g.heap + shm_g.heap_size)
        shm_fatal(fn, "not an address of the symmetric heap (%p)", ptr);
    size_t off = (size_t)(p - shm_g.heap);
    *idx = find_used(off);
    if (*idx < 0)
        shm_fatal(fn, "not the start of a block shmem_malloc returned, or freed already (%p)",
                  ptr);
    return off;
}

enum { OP_MALLOC = 1, OP_CALLOC, OP_ALIGN, OP_REALLOC, OP_FREE, OP_HINTS };

static const char *const op_names[] = {"", "shmem_malloc", "shmem_calloc", "shmem_align",
                                       "shmem_realloc", "shmem_free", "shmem_malloc_with_hints"};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

/* Every PE must make the same call with the same arguments. */
static void check_symmetric(int op, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t h = mix(mix(mix(mix(0, (uint64_t)op), a), b), c), mn, mx;
    shm_world_minmax(h, &mn, &mx);
    if (mn != mx)
        shm_fatal(op_names[op],
                  "PEs disagree: every PE must make the same allocation calls with the same "
                  "arguments (this PE: size %" PRIu64 ", %s %" PRIu64 ")",
                  a, op == OP_REALLOC || op == OP_FREE ? "block offset" : "alignment", b);
}

static void *too_big(const char *fn, size_t size)
{
    if (shm_cfg.malloc_fatal)
        shm_fatal(fn, "no room for %zu bytes in the symmetric heap: raise SHMEM_SYMMETRIC_SIZE "
                      "(now %zu)", size, shm_g.heap_size - SHM_RESERVED);
    fprintf(stderr,
            "shmem: %s: no room for %zu bytes in the symmetric heap: raise "
            "SHMEM_SYMMETRIC_SIZE (now %zu)\n",
            fn, size, shm_g.heap_size - SHM_RESERVED);
    return NULL;
}

/* The collective allocation every entry point goes through. */
static void *sym_alloc(int op, size_t align, size_t size, int zero)
{
    const char *fn = op_names[op];
    shm_check_init(fn);
    check_symmetric(op, size, align, 0);
    void *r = NULL;
    if (align == 0 || (align & (align - 1)) != 0) {
        fprintf(stderr, "shmem: %s: alignment is not a power of two (%zu)\n", fn, align);
    } else if (size > 0) {
        if (align < MIN_ALIGN)
            align = MIN_ALIGN;
        size_t rounded = (size + MIN_ALIGN - 1) & ~(size_t)(MIN_ALIGN - 1);
        pthread_mutex_lock(&shm_g.lock);
        size_t off = rounded >= size ? alloc_block(align, rounded) : 0;
        pthread_mutex_unlock(&shm_g.lock);
        if (off) {
            r = shm_g.heap + off;
            if (zero)
                memset(r, 0, size);
        } else {
            r = too_big(fn, size);
        }
    }
    shm_barrier_world();
    return r;
}

void *shmem_malloc(size_t size)
{
    return sym_alloc(OP_MALLOC, MIN_ALIGN, size, 0);
}

void *shmem_malloc_with_hints(size_t size, long hints)
{
    /* Hints are about where atomics or signals happen; every block of
     * this heap already serves both at full speed. */
    (void)hints;
    return sym_alloc(OP_HINTS, MIN_ALIGN, size, 0);
}

void *shmem_calloc(size_t count, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) {
        shm_check_init("shmem_calloc");
        check_symmetric(OP_CALLOC, count, size, 0);
        fprintf(stderr, "shmem: shmem_calloc: %zu elements of %zu bytes overflow a size_t\n",
                count, size);
        shm_barrier_world();
        return NULL;
    }
    return sym_alloc(OP_CALLOC, MIN_ALIGN, total, 1);
}

void *shmem_align(size_t alignment, size_t size)
{
    return sym_alloc(OP_ALIGN, alignment, size, 0);
}

void shmem_free(void *ptr)
{
    shm_check_init("shmem_free");
    shm_quiet(SHMEM_CTX_DEFAULT);
    long idx = -1;
    size_t off = ptr ? block_of("shmem_free", ptr, &idx) : 0;
    check_symmetric(OP_FREE, 0, off, 0);
    /* Nobody may still write into the block: every PE has entered the
     * call (the allreduce) after completing its own operations. */
    if (ptr) {
        pthread_mutex_lock(&shm_g.lock);
        segs[idx].used = 0;
        coalesce((size_t)idx);
        pthread_mutex_unlock(&shm_g.lock);
    }
    shm_barrier_world();
}

/* Grow or shrink block @idx in place if the neighbours allow it. */
static int resize_in_place(long idx, size_t rounded)
{
    seg_t *s = &segs[idx];
    if (rounded <= s->size) {
        size_t tail = s->size - rounded;
        if (tail) {
            s->size = rounded;
            insert_at((size_t)idx + 1, (seg_t){s->off + rounded, tail, 0});
            coalesce((size_t)idx + 1);
        }
        return 1;
    }
    size_t need = rounded - s->size;
    if ((size_t)idx + 1 < nsegs && !segs[idx + 1].used && segs[idx + 1].size >= need) {
        seg_t *n = &segs[idx + 1];
        s->size = rounded;
        n->off += need;
        n->size -= need;
        if (n->size == 0)
            remove_at((size_t)idx + 1);
        return 1;
    }
    return 0;
}

void *shmem_realloc(void *ptr, size_t size)
{
    const char *fn = "shmem_realloc";
    shm_check_init(fn);
    if (!ptr)
        return sym_alloc(OP_REALLOC, MIN_ALIGN, size, 0);
    shm_quiet(SHMEM_CTX_DEFAULT);
    long idx;
    size_t off = block_of(fn, ptr, &idx);
    check_symmetric(OP_REALLOC, size, off, 1);
    void *r = NULL;
    pthread_mutex_lock(&shm_g.lock);
    if (size == 0) {
        segs[idx].used = 0;
        coalesce((size_t)idx);
    } else {
        size_t rounded = (size + MIN_ALIGN - 1) & ~(size_t)(MIN_ALIGN - 1);
        if (rounded < size) {
            r = NULL;
        } else if (resize_in_place(idx, rounded)) {
            r = ptr;
        } else {
            size_t old = segs[idx].size;
            size_t noff = alloc_block(MIN_ALIGN, rounded);
            if (noff) {
                memcpy(shm_g.heap + noff, ptr, old < size ? old : size);
                idx = find_used(off); /* the list moved */
                segs[idx].used = 0;
                coalesce((size_t)idx);
                r = shm_g.heap + noff;
            }
        }
    }
    pthread_mutex_unlock(&shm_g.lock);
    if (size > 0 && !r)
        (void)too_big(fn, size); /* the old block stays, as realloc's does */
    shm_barrier_world();
    return r;
}

void *shmalloc(size_t size)
{
    return shmem_malloc(size);
}

void *shmemalign(size_t alignment, size_t size)
{
    return shmem_align(alignment, size);
}

void *shrealloc(void *ptr, size_t size)
{
    return shmem_realloc(ptr, size);
}

void shfree(void *ptr)
{
    shmem_free(ptr);
}
