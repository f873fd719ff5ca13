/* Fast Messages: rings made on demand. A channel holds no ring at open. Our
 * ring for peer B (its control lines and the ring B writes packets into,
 * one vmmc_mem_alloc() allocation exported to B alone) is made the first
 * time it is needed:
 *
 *  - B imports it: B's request reaches the core, which hands names with this
 *    channel's prefix to fm_demand() (vmmc_export_on_demand(), in the thread
 *    that received the request); fm_demand() checks that the name is the one
 *    FM gives that requester, makes the ring and exports it, and the core
 *    answers B's import;
 *  - we first send to B (fm_peer.c): B writes its credits for our packets
 *    into our ring for B, so ours exists before we ask for B's.
 *
 * So two ranks that never talk hold nothing for each other on the channel
 * but an fm_peer_t (for the job's ranks) or a NULL pointer (peers beyond).
 * Job ranks and peers beyond the job take the same path; rings are kept
 * until the channel closes. Each peer with a ring is appended to the
 * channel's active list, which extract and the progress hook walk without a
 * lock. */
#include <stdio.h>
#include <stdlib.h>

#include "fm/fm_int.h"

void fm_peer_base(fm_t *fm, fm_peer_t *p, int h)
{
    p->fm = fm;
    p->rank = h;
    p->ss.fm = p->rs.fm = fm;
    p->ss.peer = p->rs.peer = p;
    p->ss.kind = FM_SEND;
    p->rs.kind = FM_RECV;
}

/* Room for one more peer in the active list (under xlock): grown before
 * the export, so that nothing fails once the ring is exported. */
static int act_reserve(fm_t *fm)
{
    int n = atomic_load_explicit(&fm->nact, memory_order_relaxed);
    fm_act_t *a = atomic_load_explicit(&fm->act, memory_order_relaxed);
    if (a && n < a->cap)
        return VMMC_OK;
    int cap = a ? a->cap * 2 : 8;
    fm_act_t *b = malloc(sizeof *b + (size_t)cap * sizeof b->p[0]);
    if (!b)
        return vmmc_error(VMMC_ERR_NOMEM, "fm: no memory for the list of rings");
    b->prev = a;
    b->cap = cap;
    for (int i = 0; i < n; i++)
        b->p[i] = a->p[i];
    atomic_store_explicit(&fm->act, b, memory_order_release);
    return VMMC_OK;
}

/* Append @p (room reserved): readers that see the new count see it. */
static void act_push(fm_t *fm, fm_peer_t *p)
{
    int n = atomic_load_explicit(&fm->nact, memory_order_relaxed);
    atomic_load_explicit(&fm->act, memory_order_relaxed)->p[n] = p;
    atomic_store_explicit(&fm->nact, n + 1, memory_order_release);
}

void fm_act_free_all(fm_t *fm)
{
    fm_act_t *a = atomic_load_explicit(&fm->act, memory_order_relaxed);
    while (a) {
        fm_act_t *prev = a->prev;
        free(a);
        a = prev;
    }
    atomic_store_explicit(&fm->act, NULL, memory_order_relaxed);
    atomic_store_explicit(&fm->nact, 0, memory_order_relaxed);
}

int fm_ring_make_locked(fm_t *fm, fm_peer_t *p)
{
    if (atomic_load_explicit(&p->has_ring, memory_order_relaxed))
        return VMMC_OK;
    size_t region = FM_CTRL + fm->ring_size;
    void *mem;
    int st = act_reserve(fm);
    if (st != VMMC_OK || (st = vmmc_mem_alloc(fm->ep, region, &mem)) != VMMC_OK)
        return st;
    p->ctrl = mem;
    p->ring = p->ctrl + FM_CTRL;
    p->rR = fm->ring_size;
    p->rseq = 1;
    p->seen_seq = 1;
    p->credit_word = (_Atomic uint64_t *)(p->ctrl + FM_CREDIT_OFF);
    /* An allocation of its own, exported whole to that peer alone: the core
     * maps only a whole allocation, and a mapping of one reaches nothing of
     * the other senders' rings. Reads are granted too (a writable page is
     * readable anyway): the peer sees only what it wrote and what we write
     * back to it (credits, descriptors, the offer word). */
    char name[64];
    fm_export_name(fm, p->rank, name, sizeof name);
    vmmc_export_params_t pa = {
        .field_mask = VMMC_EXPORT_PARAM_IMPORTERS | VMMC_EXPORT_PARAM_FLAGS,
        .name = name,
        .addr = p->ctrl,
        .length = region,
        .flags = VMMC_EXPORT_READ,
        .importers = &p->rank,
        .num_importers = 1,
    };
    if (p->rank != fm->rank && (st = vmmc_export(fm->ep, &pa, &p->xexp)) != VMMC_OK) {
        p->xexp = NULL;
        vmmc_mem_free(fm->ep, p->ctrl);
        p->ctrl = p->ring = NULL;
        p->credit_word = NULL;
        return st;
    }
    act_push(fm, p);
    __atomic_fetch_add(&fm->cnt[FM_C_RINGS], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&fm->cnt[FM_C_RING_BYTES], (uint64_t)region, __ATOMIC_RELAXED);
    atomic_store_explicit(&p->has_ring, 1, memory_order_release);
    /* The export answered the peer's waiting import at once, so the peer
     * may have written packets and signalled us before the push above: a
     * pass of progress that ran meanwhile consumed that signal without
     * seeing the ring. Wake this endpoint again now that extract walks it,
     * or a receiver sleeping on its event fd sleeps past those packets. */
    if (p->rank != fm->rank)
        (void)vmmc_signal(fm->ep, fm->rank);
    return VMMC_OK;
}

int fm_peer_ring(fm_t *fm, fm_peer_t *p)
{
    pthread_mutex_lock(&fm->xlock);
    int st = fm_ring_make_locked(fm, p);
    pthread_mutex_unlock(&fm->xlock);
    return st;
}

void fm_ring_free(fm_t *fm, fm_peer_t *p)
{
    if (p->xexp)
        vmmc_unexport(p->xexp);
    p->xexp = NULL;
    if (p->ctrl)
        vmmc_mem_free(fm->ep, p->ctrl);
    p->ctrl = p->ring = NULL;
}

static VMMC_COLD int refuse(fm_t *fm, int peer, const char *name, const char *why)
{
    __atomic_fetch_add(&fm->cnt[FM_C_RING_REFUSED], 1, __ATOMIC_RELAXED);
    return vmmc_error(VMMC_ERR_PERMISSION, "fm: peer %d may not import '%s' from FM channel %d "
                      "of rank %d: %s", peer, name, fm->channel, fm->rank, why);
}

/* The core's call for an import of a name with this channel's prefix that
 * is not exported (a thread of the core, no lock of ours held). The peer
 * handle is the one the transport authenticated; the name is whatever the
 * peer sent: it must be exactly the name FM gives that peer's ring. */
static int fm_demand(vmmc_ep_t *ep, const char *name, int peer, void *arg)
{
    fm_t *fm = arg;
    (void)ep;
    char want[64];
    if (peer < 0)
        return refuse(fm, peer, name, "no such peer");
    fm_export_name(fm, peer, want, sizeof want);
    if (strcmp(name, want))
        return refuse(fm, peer, name, peer < fm->size ? "a rank of the job imports only the ring "
                      "named after it" : "a peer beyond the job imports only the ring named after "
                      "the hash of its address");
    if (peer == fm->rank)
        return refuse(fm, peer, name, "this rank writes its own ring directly");
    if (peer < fm->size)
        return fm_peer_ring(fm, &fm->peers[peer]);
    fm_peer_t *p;
    return fm_xpeer_get(fm, peer, &p, "fm");
}

/* The prefixes of this channel's ring names (fm_ring_name, fm_export_name). */
static int prefixes(const fm_t *fm, char pre[2][24])
{
    snprintf(pre[0], sizeof pre[0], "fm.%d.", fm->channel);
    if (fm->channel != 0)
        return 1;
    snprintf(pre[1], sizeof pre[1], "fm.ring.");
    return 2;
}

int fm_demand_register(fm_t *fm)
{
    char pre[2][24];
    int n = prefixes(fm, pre);
    for (int i = 0; i < n; i++) {
        int st = vmmc_export_on_demand(fm->ep, pre[i], fm_demand, fm);
        if (st != VMMC_OK) {
            if (i)
                vmmc_export_on_demand_remove(fm->ep, pre[0]);
            return st;
        }
    }
    fm->demand = 1;
    return VMMC_OK;
}

void fm_demand_remove(fm_t *fm)
{
    if (!fm->demand)
        return;
    char pre[2][24];
    int n = prefixes(fm, pre);
    for (int i = 0; i < n; i++)
        vmmc_export_on_demand_remove(fm->ep, pre[i]);
    fm->demand = 0;
}
