/* The fabric transport's registration cache: VMMC-2's user-managed
 * translation cache (UTLB) over libfabric memory regions.
 *
 * A provider that needs local memory regions (FI_MR_LOCAL) wants a
 * descriptor for every buffer it reads or writes. Registering is a system
 * call that pins pages, so registrations are kept and reused: the cache holds
 * registered regions keyed by [addr, addr+len) and access, finds the one
 * that covers a buffer, registers (page-aligned) on a miss, and deregisters
 * the least recently used unused region when it holds more than its bounds
 * in bytes or in count. A region in use (between fab_cache_get and
 * fab_cache_put) is never deregistered: an invalidation marks it stale, so
 * that no later lookup returns it, and the last put deregisters it.
 *
 * The cache does not know libfabric: it calls a register/deregister pair
 * given at creation (the transport's wraps fi_mr_reg/fi_close; the unit
 * tests' records the calls). Every function is thread-safe. Memory that is
 * unmapped or freed back to the system is invalidated by the memory hooks
 * (fab_hooks.c, docs/fabric_cache.md) through fab_cache_invalidate. */
#ifndef VMMC_TRANSPORT_FABRIC_FAB_CACHE_H
#define VMMC_TRANSPORT_FABRIC_FAB_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct fab_cache fab_cache_t;

/* One registration. addr/len: the registered (page-aligned) range, which
 * covers the range asked for; desc: the local descriptor (fi_mr_desc) to
 * pass to data transfers; key: the remote key; handle: the registrar's own
 * (the struct fid_mr *). */
typedef struct fab_reg {
    void *addr;
    size_t len;
    void *desc;
    uint64_t key;
    void *handle;
} fab_reg_t;

/* Register [addr, addr+len) with @p access (FI_READ|FI_WRITE|...), filling
 * @p out's desc, key and handle (the cache fills addr and len). Returns 0, or
 * a negative vmmc status with vmmc_error set. Called without the cache's
 * lock held, possibly from several threads at once; may block. */
typedef int (*fab_reg_fn)(void *ctx, void *addr, size_t len, uint64_t access, fab_reg_t *out);
/* Deregister @p r (registered by the fab_reg_fn). Must not fail. Called
 * without the cache's lock held, from inside fab_cache_get, fab_cache_put,
 * fab_cache_invalidate, fab_cache_stats and fab_cache_free, never from a
 * memory hook (the hooks leave deregistration to the cache's next call);
 * it may allocate, free and block. */
typedef void (*fab_dereg_fn)(void *ctx, fab_reg_t *r);

/* A cache holding at most @p max_bytes registered bytes and @p max_entries
 * regions (0: no bound) in regions nobody uses; regions in use may exceed
 * the bounds. NULL + vmmc_error on failure. */
fab_cache_t *fab_cache_new(size_t max_bytes, size_t max_entries, fab_reg_fn, fab_dereg_fn, void *ctx);
/* Deregister everything and free the cache. No region may be in use. */
void fab_cache_free(fab_cache_t *);

/* The registration covering [addr, addr+len) with @p access, registering
 * (page-aligned) on a miss; held until fab_cache_put. NULL + vmmc_error on
 * failure. */
const fab_reg_t *fab_cache_get(fab_cache_t *, const void *addr, size_t len, uint64_t access);
/* Release a registration returned by fab_cache_get. */
void fab_cache_put(fab_cache_t *, const fab_reg_t *);
/* [addr, addr+len) no longer holds the memory it held (unmapped, freed to
 * the system, remapped): no region overlapping it is returned again.
 * Unused ones are deregistered now, used ones at their last put. The
 * memory hooks do the same through fab_cache_invalidate_deferred
 * (fab_hooks.h), which leaves the deregistration to the next call. */
void fab_cache_invalidate(fab_cache_t *, const void *addr, size_t len);

typedef struct fab_cache_stats {
    uint64_t hits, misses, evictions, invalidations, entries, bytes;
} fab_cache_stats_t;
/* Counters since creation (hits, misses, evictions, invalidations: regions
 * dropped because their memory went away) and current contents (entries,
 * bytes registered). */
void fab_cache_stats(fab_cache_t *, fab_cache_stats_t *);

/* VMMC_FABRIC_CACHE_BYTES, VMMC_FABRIC_CACHE_ENTRIES: the bounds the
 * transport gives fab_cache_new; VMMC_FABRIC_STATS: print the counters when
 * an endpoint closes (fab_cache_print). */
extern uint64_t vmmc_fab_cfg_cache_bytes, vmmc_fab_cfg_cache_entries;
extern int vmmc_fab_cfg_stats;
/* The counters one by one, for the transport's counter_get (shown by
 * `vmmc info --counters` as fabric.cache_hits ...): VMMC_OK, or
 * VMMC_ERR_NOT_FOUND past the last (i >= 6). */
int fab_cache_counter_get(fab_cache_t *, int i, const char **name, uint64_t *value);
/* One line of counters to stderr, "fabric cache <what>: hits ...". */
void fab_cache_print(fab_cache_t *, const char *what);

#endif
