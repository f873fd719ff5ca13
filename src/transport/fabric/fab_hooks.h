/* Memory hooks: tell the registration caches when memory goes away.
 *
 * A registration names physical pages; once its virtual range is unmapped,
 * remapped or has its pages dropped, the same addresses may come back with
 * other pages (free() then malloc() returning the same address), and a
 * cached registration of them would send or receive the wrong bytes. The
 * hooks patch the C library's munmap, mremap, madvise (the advice that drop
 * pages), mmap (MAP_FIXED over a range) and brk (the heap shrinking) so that
 * every call, the C library's own from free() included, first invalidates
 * the range in every cache added here. docs/fabric_cache.md says why this
 * mechanism and what it does not see. */
#ifndef VMMC_TRANSPORT_FABRIC_FAB_HOOKS_H
#define VMMC_TRANSPORT_FABRIC_FAB_HOOKS_H

#include "transport/fabric/fab_cache.h"

/* What the hooks call (fab_cache.c): the regions overlapping the range
 * leave the index at once (no lookup returns them again); their
 * deregistration waits for the cache's next get, put, stats or free, since
 * a hook may run inside free() or inside the provider, where deregistering
 * (and freeing) could deadlock. */
void fab_cache_invalidate_deferred(fab_cache_t *c, const void *addr, size_t len);

/* Install the hooks (once per process, kept for its lifetime) and have
 * them invalidate @p c. 0, or a negative vmmc status with vmmc_error set
 * when they cannot be installed here (another architecture, a C library
 * whose functions are too short to patch, W^X text). */
int fab_hooks_add(fab_cache_t *c);
/* @p c is no longer told (before it is freed). */
void fab_hooks_remove(fab_cache_t *c);
/* Ranges invalidated by the hooks since the process started (every cache). */
unsigned long fab_hooks_events(void);

#endif
