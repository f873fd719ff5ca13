/* Teams: the predefined world and shared teams, queries, and the world
 * barrier and min/max the rest of the layer uses. Splitting and destroying
 * teams is in shmem_team_split.c. */
#include "shmem_coll.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct shmem_team_s world_s = {.slot = 0, .my_pe = -1};
static struct shmem_team_s shared_s = {.slot = 1, .my_pe = -1};
shmem_team_t SHMEM_TEAM_WORLD = &world_s;
shmem_team_t SHMEM_TEAM_SHARED = &shared_s;

void shm_coll_error(const char *fn, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "shmem: %s: %s\n", fn, msg);
    fflush(stderr);
}

/* The world team is usable from the moment the heaps are exchanged, before
 * shm_teams_init (init's own barriers). */
static void world_setup(void)
{
    if (world_s.my_pe == shm_g.me && world_s.size == shm_g.npes)
        return;
    world_s.start = 0;
    world_s.stride = 1;
    world_s.size = shm_g.npes;
    world_s.my_pe = shm_g.me;
    world_s.slot = 0;
}

/* SHMEM_TEAM_SHARED: the PEs on this host, if they form a strided set of
 * the world. If they do not, the team is this PE alone, as Sandia
 * OpenSHMEM does (a team must be a (start, stride, size) set). */
void shm_team_shared_set(const int *same_host, int npes, int me, int *start, int *stride,
                         int *size)
{
    int st = -1, sd = -1, n = 0;
    for (int pe = 0; pe < npes; pe++) {
        if (pe != me && !same_host[pe])
            continue;
        if (st < 0) {
            st = pe;
        } else if (sd < 0) {
            sd = pe - st;
        } else if (pe != st + n * sd) {
            st = me; /* not strided */
            sd = 1;
            n = 1;
            break;
        }
        n++;
    }
    *start = st;
    *stride = sd > 0 ? sd : 1;
    *size = n;
}

static void shared_setup(void)
{
    int *same = malloc((size_t)shm_g.npes * sizeof(int));
    if (!same)
        shm_fatal("shmem_init", "out of memory for the shared team (%d PEs)", shm_g.npes);
    for (int pe = 0; pe < shm_g.npes; pe++)
        same[pe] = shm_g.pe[pe].same_host;
    shm_team_shared_set(same, shm_g.npes, shm_g.me, &shared_s.start, &shared_s.stride,
                        &shared_s.size);
    free(same);
    shared_s.my_pe = (shm_g.me - shared_s.start) / shared_s.stride;
    shared_s.slot = 1;
    shared_s.seq = 0;
}

void shm_teams_init(void)
{
    world_setup();
    shared_setup();
    pthread_mutex_lock(&shm_g.lock);
    shm_team_slots_used = 3; /* world, shared */
    pthread_mutex_unlock(&shm_g.lock);
    if (shm_aset_init())
        shm_fatal("shmem_init", "out of memory for the collectives' state (%d PEs)", shm_g.npes);
}

void shm_teams_fini(void)
{
    shm_aset_fini();
}

/* The library's own world barrier (init, finalize, the allocator). It
 * also completes its own signals to other hosts before returning: after
 * the one in shmem_finalize this PE leaves the job, and a signal still in
 * flight then would never reach a PE that waits for it. */
void shm_barrier_world(void)
{
    world_setup();
    shm_quiet(SHMEM_CTX_DEFAULT);
    shm_coll_sync("shmem_barrier_all", &world_s);
    if (shm_g.any_remote)
        shm_quiet(SHMEM_CTX_DEFAULT);
}

void shm_world_minmax(uint64_t v, uint64_t *min, uint64_t *max)
{
    uint64_t in[2] = {v, ~v}, out[2];
    world_setup();
    /* min(v) and max(v) = ~min(~v) in one allreduce */
    shm_coll_allreduce_u64("shmem_malloc", &world_s, SHM_W_MINMAX, 'm', in, out, 2);
    *min = out[0];
    *max = ~out[1];
}

int shm_team_check(const char *fn, const struct shmem_team_s *t)
{
    if (t == SHMEM_TEAM_INVALID) {
        shm_coll_error(fn, "the team is SHMEM_TEAM_INVALID");
        return -1;
    }
    if (t->my_pe < 0 || t->my_pe >= t->size || t->size < 1) {
        shm_coll_error(fn, "this PE (%d) is not a member of the team", shm_g.me);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Queries */

int shmem_team_my_pe(shmem_team_t team)
{
    shm_check_init("shmem_team_my_pe");
    return team == SHMEM_TEAM_INVALID ? -1 : team->my_pe;
}

int shmem_team_n_pes(shmem_team_t team)
{
    shm_check_init("shmem_team_n_pes");
    return team == SHMEM_TEAM_INVALID ? -1 : team->size;
}

int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config)
{
    shm_check_init("shmem_team_get_config");
    if (team == SHMEM_TEAM_INVALID || !config) {
        shm_coll_error("shmem_team_get_config", "%s", !config ? "config is NULL"
                                                              : "the team is SHMEM_TEAM_INVALID");
        return -1;
    }
    if (config_mask & ~SHMEM_TEAM_NUM_CONTEXTS) {
        shm_coll_error("shmem_team_get_config", "unknown bits in config_mask (0x%lx)",
                       config_mask);
        return -1;
    }
    if (config_mask & SHMEM_TEAM_NUM_CONTEXTS)
        config->num_contexts =
            (team->config_mask & SHMEM_TEAM_NUM_CONTEXTS) ? team->config.num_contexts : 0;
    return 0;
}

int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team)
{
    shm_check_init("shmem_team_translate_pe");
    if (src_team == SHMEM_TEAM_INVALID || dest_team == SHMEM_TEAM_INVALID)
        return -1;
    if (src_pe < 0 || src_pe >= src_team->size)
        return -1;
    long long w = (long long)src_team->start + (long long)src_pe * src_team->stride;
    long long d = w - dest_team->start;
    if (d < 0)
        return -1;
    if (dest_team->size == 1)
        return d == 0 ? 0 : -1;
    if (d % dest_team->stride != 0 || d / dest_team->stride >= dest_team->size)
        return -1;
    return (int)(d / dest_team->stride);
}
