/* Global locks, the barrier and the pointer broadcast. The manager (rank 0)
 * keeps each lock's holder and a FIFO of waiting ranks, and counts barrier
 * arrivals; the memory is sequentially consistent, so neither needs any
 * consistency action: a lock only orders the ranks. Waiting ranks sleep on
 * the condition variable until the service thread takes the answer. */
#include <string.h>

#include "dsm/dsm_int.h"

static struct {
    int holder[VMMC_DSM_LOCKS];
    int q[VMMC_DSM_LOCKS][DSM_MAX_RANKS];
    int qh[VMMC_DSM_LOCKS], qn[VMMC_DSM_LOCKS];
    int bar_count;
    uint64_t bar_seen;
} g;

void dsm_sync_reset(void)
{
    memset(&g, 0, sizeof g);
    for (int i = 0; i < VMMC_DSM_LOCKS; i++)
        g.holder[i] = -1;
}

static void on_lock(int src, int id)
{
    if (g.holder[id] == src) {
        dsm_bad_msg(src, dsm_imm(M_LOCK, (unsigned)src, 0, (uint32_t)id),
                    "asks for a lock it holds");
        return;
    }
    if (g.holder[id] < 0) {
        g.holder[id] = src;
        dsm_post(src, dsm_imm(M_LOCK_GRANT, (unsigned)dsm.me, 0, (uint32_t)id));
        return;
    }
    for (int k = 0; k < g.qn[id]; k++)
        if (g.q[id][(g.qh[id] + k) % DSM_MAX_RANKS] == src) {
            dsm_bad_msg(src, dsm_imm(M_LOCK, (unsigned)src, 0, (uint32_t)id),
                        "asks for a lock twice");
            return;
        }
    g.q[id][(g.qh[id] + g.qn[id]) % DSM_MAX_RANKS] = src;
    g.qn[id]++;
}

static void on_unlock(int src, int id)
{
    if (g.holder[id] != src) {
        dsm_bad_msg(src, dsm_imm(M_UNLOCK, (unsigned)src, 0, (uint32_t)id),
                    "releases a lock it does not hold");
        return;
    }
    if (!g.qn[id]) {
        g.holder[id] = -1;
        return;
    }
    int next = g.q[id][g.qh[id]];
    g.qh[id] = (g.qh[id] + 1) % DSM_MAX_RANKS;
    g.qn[id]--;
    g.holder[id] = next;
    dsm_post(next, dsm_imm(M_LOCK_GRANT, (unsigned)dsm.me, 0, (uint32_t)id));
}

static void on_bar(int src)
{
    if (g.bar_seen & (1ull << src)) {
        dsm_bad_msg(src, dsm_imm(M_BAR, (unsigned)src, 0, 0), "arrives twice");
        return;
    }
    g.bar_seen |= 1ull << src;
    if (++g.bar_count < dsm.n)
        return;
    g.bar_count = 0;
    g.bar_seen = 0;
    /* the others first: this rank's own release (handled in order by the
     * flushing thread) lets its application thread go on, maybe computing
     * on the core the flushing thread needs */
    for (int r = 0; r < dsm.n; r++)
        if (r != dsm.me)
            dsm_post(r, dsm_imm(M_BAR_GO, (unsigned)dsm.me, 0, 0));
    dsm_post(dsm.me, dsm_imm(M_BAR_GO, (unsigned)dsm.me, 0, 0));
}

void dsm_sync_on_msg(int src, uint64_t imm)
{
    unsigned t = IMM_TYPE(imm);
    uint32_t id = IMM_AUX(imm);
    if ((t == M_LOCK || t == M_UNLOCK || t == M_LOCK_GRANT) && id >= VMMC_DSM_LOCKS) {
        dsm_bad_msg(src, imm, "no such lock");
        return;
    }
    switch (t) {
    case M_LOCK:
        on_lock(src, (int)id);
        break;
    case M_UNLOCK:
        on_unlock(src, (int)id);
        break;
    case M_LOCK_GRANT:
        dsm.lock_granted[id] = 1;
        dsm_wake();
        break;
    case M_BAR:
        on_bar(src);
        break;
    case M_BAR_GO:
        dsm.bar_epoch++;
        dsm_wake();
        break;
    case M_BCAST:
        if ((imm >> 6) > (uint64_t)dsm.views * dsm.size) {
            dsm_bad_msg(src, imm, "a pointer outside the shared area");
            return;
        }
        dsm.bcast_val = imm >> 6;
        dsm.bcast_have = 1;
        dsm_wake();
        break;
    default:
        dsm_bad_msg(src, imm, "unknown type");
    }
}

static int check(const char *fn)
{
    if (!dsm.active)
        return dsm_error(VMMC_ERR_ENDPOINT, "%s: the DSM is not initialised", fn);
    return VMMC_OK;
}

int vmmc_dsm_lock(int id)
{
    int st = check("vmmc_dsm_lock");
    if (st)
        return st;
    if (id < 0 || id >= VMMC_DSM_LOCKS)
        return dsm_error(VMMC_ERR_INVALID, "vmmc_dsm_lock: no lock %d (0..%d)", id,
                         VMMC_DSM_LOCKS - 1);
    pthread_mutex_lock(&dsm.lock);
    if (dsm.lock_held[id]) {
        dsm_unlock();
        return dsm_error(VMMC_ERR_BUSY, "vmmc_dsm_lock: this rank holds lock %d already", id);
    }
    dsm.lock_granted[id] = 0;
    dsm_post(dsm_manager(), dsm_imm(M_LOCK, (unsigned)dsm.me, 0, (uint32_t)id));
    dsm_unlock_flush();
    pthread_mutex_lock(&dsm.lock);
    while (!dsm.lock_granted[id] && st == VMMC_OK)
        st = dsm_wait_locked(1);
    if (st == VMMC_OK)
        dsm.lock_held[id] = 1;
    dsm_unlock();
    return st;
}

int vmmc_dsm_unlock(int id)
{
    int st = check("vmmc_dsm_unlock");
    if (st)
        return st;
    if (id < 0 || id >= VMMC_DSM_LOCKS)
        return dsm_error(VMMC_ERR_INVALID, "vmmc_dsm_unlock: no lock %d (0..%d)", id,
                         VMMC_DSM_LOCKS - 1);
    pthread_mutex_lock(&dsm.lock);
    if (!dsm.lock_held[id]) {
        dsm_unlock();
        return dsm_error(VMMC_ERR_INVALID, "vmmc_dsm_unlock: this rank does not hold lock %d", id);
    }
    dsm.lock_held[id] = 0;
    dsm_post(dsm_manager(), dsm_imm(M_UNLOCK, (unsigned)dsm.me, 0, (uint32_t)id));
    dsm_unlock_flush();
    return dsm.broken ? dsm_error(VMMC_ERR_PEER_DEAD, "%s", dsm.broken_why) : VMMC_OK;
}

int dsm_barrier_internal(void)
{
    int st = VMMC_OK;
    pthread_mutex_lock(&dsm.lock);
    uint64_t e = dsm.bar_epoch;
    dsm_post(dsm_manager(), dsm_imm(M_BAR, (unsigned)dsm.me, 0, 0));
    dsm_unlock_flush();
    pthread_mutex_lock(&dsm.lock);
    while (dsm.bar_epoch == e && st == VMMC_OK)
        st = dsm_wait_locked(1);
    dsm_unlock();
    return st;
}

int vmmc_dsm_barrier(void)
{
    int st = check("vmmc_dsm_barrier");
    return st ? st : dsm_barrier_internal();
}

/* The value travels as 1 + its offset in the application views (0: NULL),
 * in the 58 bits above the type. */
int vmmc_dsm_bcast_ptr(void **p, int root)
{
    int st = check("vmmc_dsm_bcast_ptr");
    if (st)
        return st;
    if (!p || root < 0 || root >= dsm.n)
        return dsm_error(VMMC_ERR_INVALID, "vmmc_dsm_bcast_ptr: %s",
                         !p ? "NULL" : "no such root rank");
    if (dsm.me == root) {
        uint64_t v = 0;
        if (*p) {
            uint32_t id;
            if (dsm_addr_id(*p, &id, NULL) != 0)
                return dsm_error(VMMC_ERR_INVALID,
                                 "vmmc_dsm_bcast_ptr: %p is not in the shared area", *p);
            v = (uint64_t)((char *)*p - dsm.base) + 1;
        }
        pthread_mutex_lock(&dsm.lock);
        for (int r = 0; r < dsm.n; r++)
            if (r != root)
                dsm_post(r, (uint64_t)M_BCAST | v << 6);
        dsm_unlock_flush();
    } else {
        pthread_mutex_lock(&dsm.lock);
        while (!dsm.bcast_have && st == VMMC_OK)
            st = dsm_wait_locked(1);
        if (st == VMMC_OK) {
            *p = dsm.bcast_val ? dsm.base + (dsm.bcast_val - 1) : NULL;
            dsm.bcast_have = 0;
        }
        dsm_unlock();
        if (st)
            return st;
    }
    /* nobody broadcasts again before everyone took this value */
    return dsm_barrier_internal();
}
