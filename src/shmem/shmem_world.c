/* World-wide operations the core needs before the collectives exist:
 * weak definitions over the vmmc core (its job barrier), replaced by the
 * collectives' own (strong) ones when those are linked into the library.
 * They are correct on their own, so a library without them still works. */
#include <string.h>

#include "shmem/shmem_core.h"

static struct shmem_team_s world_fallback, shared_fallback;
__attribute__((weak)) shmem_team_t SHMEM_TEAM_WORLD = &world_fallback;
__attribute__((weak)) shmem_team_t SHMEM_TEAM_SHARED = &shared_fallback;

__attribute__((weak)) void shm_teams_init(void)
{
    world_fallback = (struct shmem_team_s){0, 1, shm_g.npes, shm_g.me, 0, {0}, 0, 0};
    shared_fallback = (struct shmem_team_s){shm_g.me, 1, 1, 0, 1, {0}, 0, 0};
}

__attribute__((weak)) void shm_teams_fini(void)
{
}

void shm_world_fallback_barrier(void)
{
    int st = vmmc_barrier(shm_g.ep);
    if (st != VMMC_OK)
        shm_fatal_vmmc("shmem_barrier_all", "barrier", st);
}

__attribute__((weak)) void shm_barrier_world(void)
{
    shm_quiet(SHMEM_CTX_DEFAULT);
    shm_world_fallback_barrier();
}

__attribute__((weak)) void shmem_barrier_all(void)
{
    shm_check_init("shmem_barrier_all");
    shm_barrier_world();
}

/* Every PE writes its value into slot [me] of every PE, then reads all of
 * its own slots; the second barrier keeps the next call's writes out until
 * everybody has read. */
__attribute__((weak)) void shm_world_minmax(uint64_t v, uint64_t *min, uint64_t *max)
{
    int n = shm_g.npes, me = shm_g.me;
    if ((size_t)n > SHM_MINMAX_MAX_PES)
        shm_fatal("shmem", "too many PEs for the allocation check (%d)", n);
    uint64_t *slots = (uint64_t *)(void *)(shm_g.heap + SHM_MINMAX_OFF);
    for (int i = 0; i < n; i++)
        shm_put_bytes("shmem_malloc", SHMEM_CTX_DEFAULT, &slots[me], &v, sizeof v, i);
    shm_quiet(SHMEM_CTX_DEFAULT);
    shm_world_fallback_barrier();
    uint64_t mn = UINT64_MAX, mx = 0;
    for (int i = 0; i < n; i++) {
        uint64_t x = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
        mn = x < mn ? x : mn;
        mx = x > mx ? x : mx;
    }
    shm_world_fallback_barrier();
    *min = mn;
    *max = mx;
}
