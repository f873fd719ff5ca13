/* Creating and destroying teams. A new team takes the lowest scratch slot
 * that is free on every member of the parent team (an AND-allreduce of the
 * members' free masks over the parent), so the slot is the same on all of
 * its members and used by no other team any of them belongs to. Each member
 * clears its own scratch of the slot (a previous team may have left its
 * sequence numbers there) and the parent synchronises once more before
 * anyone signals into it. */
#include "shmem_coll.h"

#include <stdlib.h>
#include <string.h>

uint64_t shm_team_slots_used; /* bit i: slot i holds a team of this PE (shm_g.lock) */

static uint64_t free_slots(void)
{
    pthread_mutex_lock(&shm_g.lock);
    uint64_t f = ~shm_team_slots_used;
    pthread_mutex_unlock(&shm_g.lock);
    return f;
}

/* The @k lowest slots free on every member of @parent into @slots.
 * Returns 0, or -1 when there are fewer (the same answer on every member). */
static int pick_slots(const char *fn, shmem_team_t parent, int *slots, int k)
{
    uint64_t mine = free_slots(), all;
    shm_coll_allreduce_u64(fn, parent, SHM_W_MASK, 'a', &mine, &all, 1);
    for (int i = 0; i < SHM_MAX_TEAMS && k > 0; i++) {
        if (all & (1ull << i)) {
            *slots++ = i;
            k--;
        }
    }
    return k == 0 ? 0 : -1;
}

static struct shmem_team_s *team_new(int start, int stride, int size, int my_pe, int slot,
                                     const shmem_team_config_t *config, long mask)
{
    struct shmem_team_s *t = calloc(1, sizeof(*t));
    if (!t)
        shm_fatal("shmem_team_split_strided", "out of memory");
    t->start = start;
    t->stride = size > 1 ? stride : 1;
    t->size = size;
    t->my_pe = my_pe;
    t->slot = slot;
    if (config && (mask & SHMEM_TEAM_NUM_CONTEXTS)) {
        t->config = *config;
        t->config_mask = SHMEM_TEAM_NUM_CONTEXTS;
    }
    memset(shm_g.heap + SHM_TEAM_OFF(slot), 0, sizeof(shm_team_scratch_t));
    pthread_mutex_lock(&shm_g.lock);
    shm_team_slots_used |= 1ull << slot;
    pthread_mutex_unlock(&shm_g.lock);
    return t;
}

/* Index of parent index @p in the set (start, stride, size) of parent
 * indices, or -1. */
static int index_in(int p, int start, int stride, int size)
{
    if (p < start)
        return -1;
    if (size == 1)
        return p == start ? 0 : -1;
    if ((p - start) % stride || (p - start) / stride >= size)
        return -1;
    return (p - start) / stride;
}

int shmem_team_split_strided(shmem_team_t parent, int start, int stride, int size,
                             const shmem_team_config_t *config, long config_mask,
                             shmem_team_t *new_team)
{
    static const char fn[] = "shmem_team_split_strided";
    shm_check_init(fn);
    if (!new_team) {
        shm_coll_error(fn, "new_team is NULL");
        return -1;
    }
    *new_team = SHMEM_TEAM_INVALID;
    if (shm_team_check(fn, parent))
        return -1;
    if (size == 1 && stride < 1)
        stride = 1; /* one PE: the stride does not matter */
    if (start < 0 || start >= parent->size || size < 1 || stride < 1 ||
        (long long)start + (long long)(size - 1) * stride >= parent->size) {
        shm_coll_error(fn, "invalid (start %d, stride %d, size %d) in a parent team of %d PEs",
                       start, stride, size, parent->size);
        return -1;
    }
    int slot;
    if (pick_slots(fn, parent, &slot, 1)) {
        shm_coll_error(fn, "no team slot free on every parent PE (at most %d teams)",
                       SHM_MAX_TEAMS);
        return -1;
    }
    int idx = index_in(parent->my_pe, start, stride, size);
    struct shmem_team_s *t = NULL;
    if (idx >= 0)
        t = team_new(shm_team_pe(parent, start), parent->stride * stride, size, idx, slot,
                     config, config_mask);
    shm_coll_sync(fn, parent); /* every member cleared the slot */
    *new_team = t ? t : SHMEM_TEAM_INVALID;
    return 0;
}

int shmem_team_split_2d(shmem_team_t parent, int xrange, const shmem_team_config_t *xaxis_config,
                        long xaxis_mask, shmem_team_t *xaxis_team,
                        const shmem_team_config_t *yaxis_config, long yaxis_mask,
                        shmem_team_t *yaxis_team)
{
    static const char fn[] = "shmem_team_split_2d";
    shm_check_init(fn);
    if (!xaxis_team || !yaxis_team) {
        shm_coll_error(fn, "xaxis_team or yaxis_team is NULL");
        return -1;
    }
    *xaxis_team = *yaxis_team = SHMEM_TEAM_INVALID;
    if (shm_team_check(fn, parent))
        return -1;
    if (xrange < 1) {
        shm_coll_error(fn, "xrange (%d) must be positive", xrange);
        return -1;
    }
    int n = parent->size;
    if (xrange > n)
        xrange = n;
    int slot[2];
    if (pick_slots(fn, parent, slot, 2)) {
        shm_coll_error(fn, "no two team slots free on every parent PE (at most %d teams)",
                       SHM_MAX_TEAMS);
        return -1;
    }
    int p = parent->my_pe;
    /* x: the row of consecutive parent indices holding p */
    int xs = p / xrange * xrange, xn = n - xs < xrange ? n - xs : xrange;
    /* y: the column p % xrange, every xrange-th index */
    int ys = p % xrange, yn = (n - ys + xrange - 1) / xrange;
    *xaxis_team = team_new(shm_team_pe(parent, xs), parent->stride, xn, p - xs, slot[0],
                           xaxis_config, xaxis_mask);
    *yaxis_team = team_new(shm_team_pe(parent, ys), parent->stride * xrange, yn, p / xrange,
                           slot[1], yaxis_config, yaxis_mask);
    shm_coll_sync(fn, parent);
    return 0;
}

void shmem_team_destroy(shmem_team_t team)
{
    shm_check_init("shmem_team_destroy");
    if (team == SHMEM_TEAM_INVALID)
        return;
    if (team == SHMEM_TEAM_WORLD || team == SHMEM_TEAM_SHARED) {
        shm_coll_error("shmem_team_destroy", "the predefined teams cannot be destroyed");
        return;
    }
    if (team->slot < 2 || team->slot >= SHM_MAX_TEAMS) {
        shm_coll_error("shmem_team_destroy", "not a team (slot %d)", team->slot);
        return;
    }
    pthread_mutex_lock(&shm_g.lock);
    shm_team_slots_used &= ~(1ull << team->slot);
    pthread_mutex_unlock(&shm_g.lock);
    team->slot = -1;
    team->size = 0;
    team->my_pe = -1;
    free(team);
}
