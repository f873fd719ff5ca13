/* Barriers: the dissemination barrier every collective starts and ends
 * with (shmem_coll.h), and the public barrier/sync calls. */
#include "shmem_coll.h"
#include "shmem/shmem_core.h" /* shm_fatal_vmmc */

#include <stdlib.h>

/* Active sets: signals this PE expects from each world PE (cumulative). */
static uint32_t *aset_expect;

int shm_aset_init(void)
{
    if (aset_expect)
        return 0;
    aset_expect = calloc((size_t)shm_g.npes, sizeof(*aset_expect));
    return aset_expect ? 0 : -1;
}

void shm_aset_fini(void)
{
    free(aset_expect);
    aset_expect = NULL;
}

typedef struct {
    _Atomic uint64_t *flag;
    uint64_t want;
} flag_wait_t;

static int flag_ready(void *arg)
{
    flag_wait_t *w = arg;
    return atomic_load_explicit(w->flag, memory_order_acquire) >= w->want;
}

typedef struct {
    _Atomic uint32_t *cnt;
    uint32_t want;
} cnt_wait_t;

static int cnt_ready(void *arg)
{
    cnt_wait_t *w = arg;
    return (int32_t)(atomic_load_explicit(w->cnt, memory_order_acquire) - w->want) >= 0;
}

/* Tell world PE @to that this PE finished round @r of barrier @seq of @t. */
static void signal_peer(const char *fn, const struct shmem_team_s *t, int r, int to,
                        uint64_t seq)
{
    char *peer = shm_g.pe[to].heap;
    if (t->slot >= 0) {
        size_t off = SHM_TEAM_OFF(t->slot) + offsetof(shm_team_scratch_t, flag) + 8u * (size_t)r;
        if (peer) {
            atomic_store_explicit((_Atomic uint64_t *)(void *)(peer + off), seq,
                                  memory_order_release);
            shm_ring(to);
        } else {
            /* Another host: one deliberate update of the flag word. Its
             * link delivers it after everything this PE sent before (the
             * quiet that starts a barrier waited for those), applies the
             * aligned word with one store and wakes the PE if it sleeps:
             * no round trip and no signal of its own, where an atomic
             * waited for its answer and then rang. The flag only grows,
             * and only this PE writes it, so nothing needs the old value. */
            shm_loc_t loc;
            shm_locate(fn, shm_g.heap + off, 8, to, &loc);
            int st = loc.ptr ? VMMC_OK : vmmc_send(loc.px, loc.off, &seq, 8, 0);
            if (loc.ptr)
                atomic_store_explicit((_Atomic uint64_t *)(void *)loc.ptr, seq,
                                      memory_order_release);
            if (st != VMMC_OK)
                shm_fatal_vmmc(fn, "barrier signal", st);
        }
    } else {
        size_t off = offsetof(shm_hdr_t, coll) + offsetof(shm_coll_hdr_t, cnt) +
                     4u * (size_t)shm_g.me;
        if (peer) {
            atomic_fetch_add_explicit((_Atomic uint32_t *)(void *)(peer + off), 1,
                                      memory_order_release);
            shm_ring(to);
        } else {
            shm_amo(fn, SHMEM_CTX_DEFAULT, shm_g.heap + off, to, VMMC_ATOMIC_ADD, 4, 1, 0, 0);
        }
    }
}

/* Wait for the signal of round @r of barrier @seq from world PE @from. */
static void wait_peer(const struct shmem_team_s *t, int r, int from, uint64_t seq)
{
    if (t->slot >= 0) {
        shm_team_scratch_t *s = (shm_team_scratch_t *)(void *)(shm_g.heap +
                                                               SHM_TEAM_OFF(t->slot));
        flag_wait_t w = {&s->flag[r], seq};
        if (!flag_ready(&w))
            shm_wait(flag_ready, &w);
    } else {
        cnt_wait_t w = {&shm_coll_hdr()->cnt[from], ++aset_expect[from]};
        if (!cnt_ready(&w))
            shm_wait(cnt_ready, &w);
    }
}

void shm_coll_sync(const char *fn, struct shmem_team_s *t)
{
    int n = t->size;
    if (n <= 1)
        return;
    uint64_t seq = __atomic_add_fetch(&t->seq, 1, __ATOMIC_RELAXED);
    for (int r = 0, d = 1; d < n; r++, d <<= 1) {
        int to = shm_team_pe(t, (t->my_pe + d) % n);
        int from = shm_team_pe(t, (t->my_pe - d + n) % n);
        signal_peer(fn, t, r, to, seq);
        wait_peer(t, r, from, seq);
        if (d > n / 2) /* d <<= 1 would overflow for n near INT_MAX */
            break;
    }
}

/* ------------------------------------------------------------------------- */
/* Public calls */

void shmem_barrier_all(void)
{
    shm_check_init("shmem_barrier_all");
    shm_quiet(SHMEM_CTX_DEFAULT);
    shm_coll_sync("shmem_barrier_all", SHMEM_TEAM_WORLD);
}

void shmem_sync_all(void)
{
    shm_check_init("shmem_sync_all");
    shm_coll_sync("shmem_sync_all", SHMEM_TEAM_WORLD);
}

int shmem_team_sync(shmem_team_t team)
{
    shm_check_init("shmem_team_sync");
    if (shm_team_check("shmem_team_sync", team))
        return -1;
    shm_coll_sync("shmem_team_sync", team);
    return 0;
}

void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync)
{
    struct shmem_team_s t;
    (void)pSync; /* the set's signals live in the library's own words */
    shm_check_init("shmem_barrier");
    shm_aset("shmem_barrier", PE_start, logPE_stride, PE_size, &t);
    shm_quiet(SHMEM_CTX_DEFAULT);
    shm_coll_sync("shmem_barrier", &t);
}

void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync)
{
    struct shmem_team_s t;
    (void)pSync;
    shm_check_init("shmem_sync");
    shm_aset("shmem_sync", PE_start, logPE_stride, PE_size, &t);
    shm_coll_sync("shmem_sync", &t);
}
