/* UDP link: its peers. A peer is registered by index (the layer above's
 * handle) with its wire id (the source id its datagrams carry), address and
 * link secret; the keys of both directions are derived then. Each peer is
 * allocated when registered and never moved (the progress thread walks them
 * without a lock), and a table maps wire ids to indexes (link_impl.h). */
#include "transport/udp/link_impl.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <string.h>

#include "util/log.h"
#include "vmmc/vmmc.h"

/* An unregistered peer of index @id, published in its chunk (made on
 * first use). Caller holds add_lock. */
static peer_t *peer_new(vmmc_udp_link_t *l, uint32_t id)
{
    peer_t *_Atomic *c = atomic_load_explicit(&l->chunks[id / LINK_CHUNK], memory_order_relaxed);
    if (!c) {
        if (!(c = calloc(LINK_CHUNK, sizeof *c)))
            return NULL;
        atomic_store_explicit(&l->chunks[id / LINK_CHUNK], c, memory_order_release);
    }
    peer_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->idx = id;
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_store_explicit(&c[id % LINK_CHUNK], p, memory_order_release);
    return p;
}

/* Room in the wire id table for one more (a larger table if it would be
 * more than half full). Caller holds add_lock. 0, or -1 without memory. */
static int rid_reserve(vmmc_udp_link_t *l)
{
    rid_tab_t *t = atomic_load_explicit(&l->rids, memory_order_relaxed);
    if ((l->nrids + 1) * 2 > t->cap) {
        uint32_t cap = t->cap * 2;
        rid_tab_t *n = calloc(1, sizeof *n + cap * sizeof n->e[0]);
        if (!n)
            return -1;
        n->cap = cap;
        n->old = t;
        for (uint32_t i = 0; i < t->cap; i++) {
            uint64_t e = atomic_load_explicit(&t->e[i], memory_order_relaxed);
            uint32_t k = ((uint32_t)(e >> 32) * 0x9E3779B1u) & (cap - 1);
            if (!e)
                continue;
            while (atomic_load_explicit(&n->e[k], memory_order_relaxed))
                k = (k + 1) & (cap - 1);
            atomic_store_explicit(&n->e[k], e, memory_order_relaxed);
        }
        atomic_store_explicit(&l->rids, n, memory_order_release);
    }
    return 0;
}

/* Map wire id @rid (not in the table) to index @id, after rid_reserve.
 * Caller holds add_lock. */
static void rid_insert(vmmc_udp_link_t *l, uint32_t rid, uint32_t id)
{
    rid_tab_t *t = atomic_load_explicit(&l->rids, memory_order_relaxed);
    uint32_t m = t->cap - 1, k = (rid * 0x9E3779B1u) & m;
    while (atomic_load_explicit(&t->e[k], memory_order_relaxed))
        k = (k + 1) & m; /* never full: at most half */
    atomic_store_explicit(&t->e[k], ((uint64_t)rid << 32) | (id + 1), memory_order_release);
    l->nrids++;
}

/* ---- peers -------------------------------------------------------------- */

int vmmc_udp_link_add_peer(vmmc_udp_link_t *l, uint32_t id, const struct sockaddr *addr,
                           socklen_t alen, const uint8_t token[VMMC_UDP_TOKEN_SIZE])
{
    return vmmc_udp_link_add_peer_id(l, id, id, addr, alen, token);
}

int vmmc_udp_link_auth_from(const vmmc_udp_link_t *l, const uint8_t *dgram,
                            const vmmc_udp_hdr_t *h, const uint8_t token[VMMC_UDP_TOKEN_SIZE])
{
    vmmc_udp_key_t k;
    vmmc_udp_key_derive(&k, token, h->src, l->p.token, l->p.self);
    return vmmc_udp_auth(dgram, h, &k) == VMMC_UDP_OK ? VMMC_OK : VMMC_ERR_PERMISSION;
}

void vmmc_udp_link_refuse(vmmc_udp_link_t *l, const vmmc_udp_hdr_t *h,
                          const struct sockaddr *from, socklen_t fromlen,
                          const uint8_t token[VMMC_UDP_TOKEN_SIZE])
{
    vmmc_udp_key_t k;
    vmmc_udp_key_derive(&k, l->p.token, l->p.self, token, h->src);
    vmmc_udp_hdr_t r;
    memset(&r, 0, sizeof r);
    r.type = VMMC_UDP_T_REFUSE;
    r.src = l->p.self;
    r.offset = 1; /* its control counter: the first thing it gets from us */
    uint8_t buf[VMMC_UDP_HDR_SIZE];
    struct iovec iov = {buf, vmmc_udp_encode(buf, &r, 0, &k)};
    struct mmsghdr m;
    memset(&m, 0, sizeof m);
    m.msg_hdr.msg_iov = &iov;
    m.msg_hdr.msg_iovlen = 1;
    m.msg_hdr.msg_name = (void *)from;
    m.msg_hdr.msg_namelen = fromlen;
    /* Not retried: a lost refusal is answered again when the handshake is
     * retransmitted. */
    if (l->b.sendmmsg(l->b.ctx, l->fd, &m, 1) == 1)
        CNT(l, refusals_sent, 1);
}

int vmmc_udp_link_add_peer_id(vmmc_udp_link_t *l, uint32_t id, uint32_t rid,
                              const struct sockaddr *addr, socklen_t alen,
                              const uint8_t token[VMMC_UDP_TOKEN_SIZE])
{
    if (id >= l->p.max_peers)
        return vmmc_error(VMMC_ERR_NOT_FOUND, "udp link: peer %u out of range (max %u)", id,
                          l->p.max_peers);
    if (!addr || alen > sizeof(struct sockaddr_storage) ||
        (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
        return vmmc_error(VMMC_ERR_INVALID, "udp link: bad address for peer %u", id);
    const vmmc_udp_settings_t *s = vmmc_udp_settings();
    pthread_mutex_lock(&l->add_lock);
    peer_t *p = vmmc_udp__peer(l, id);
    if (!p && !(p = peer_new(l, id))) {
        pthread_mutex_unlock(&l->add_lock);
        return vmmc_error(VMMC_ERR_NOMEM, "udp link: out of memory for peer %u", id);
    }
    uint32_t other;
    int rid_taken = vmmc_udp__rid_find(l, rid, &other);
    pthread_mutex_lock(&p->lock);
    if (p->state != PEER_NONE || rid_taken) {
        int same = p->state != PEER_NONE && p->rid == rid && rid_taken && other == id &&
                   p->alen == alen && !memcmp(&p->addr, addr, alen);
        pthread_mutex_unlock(&p->lock);
        pthread_mutex_unlock(&l->add_lock);
        if (same)
            return VMMC_OK;
        return vmmc_error(VMMC_ERR_EXISTS, "udp link: peer %u (wire id %08x) already registered",
                          id, rid);
    }
    txslot_t *tx = calloc(l->window, sizeof *tx);
    rxslot_t *rx = calloc(l->ring, sizeof *rx);
    if (!tx || !rx || rid_reserve(l) != 0) {
        pthread_mutex_unlock(&p->lock);
        pthread_mutex_unlock(&l->add_lock);
        free(tx);
        free(rx);
        return vmmc_error(VMMC_ERR_NOMEM, "udp link: out of memory for peer %u", id);
    }
    memcpy(&p->addr, addr, alen);
    p->alen = alen;
    p->rid = rid;
    vmmc_udp_key_derive(&p->txk, l->p.token, l->p.self, token, rid);
    vmmc_udp_key_derive(&p->rxk, token, rid, l->p.token, l->p.self);
    p->ctl_tx = p->ctl_rx = 0;
    p->tx = tx;
    p->rx = rx;
    p->snd_una = p->snd_nxt = 1;
    p->rack_ns = p->progress_ns = p->min_rtt = p->rto_ns = p->sacked_ns = 0;
    p->probed = p->acked_since_rto = 0;
    p->backoff = 0;
    p->peer_wnd = l->window;
    p->rto = s->rto_init_ns;
    p->rcv_nxt = p->dlv_nxt = 1;
    uint64_t now = vmmc_udp_now();
    p->last_tx_ns = now;
    atomic_store(&p->last_rx_ns, now);
    /* Publish last: the progress thread reads state without the lock. */
    __atomic_store_n(&p->state, PEER_ALIVE, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&p->lock);
    rid_insert(l, rid, id);
    uint32_t hi = (id / LINK_CHUNK + 1) * LINK_CHUNK;
    if (hi > l->p.max_peers)
        hi = l->p.max_peers;
    if (hi > atomic_load(&l->hi))
        atomic_store_explicit(&l->hi, hi, memory_order_release);
    pthread_mutex_unlock(&l->add_lock);
    vmmc_udp_link_wake(l); /* recompute timers */
    return VMMC_OK;
}

uint32_t vmmc_udp_link_sent(vmmc_udp_link_t *l, uint32_t id)
{
    peer_t *p = vmmc_udp__peer(l, id);
    if (!p)
        return 0;
    /* An open batch will take the next number: what was posted to it counts
     * as queued (it leaves before anything sent after it). */
    uint32_t n = __atomic_load_n(&p->snd_nxt, __ATOMIC_ACQUIRE);
    return n + (__atomic_load_n(&p->bat_n, __ATOMIC_ACQUIRE) ? 1u : 0u);
}

int vmmc_udp_link_peer_alive(vmmc_udp_link_t *l, uint32_t id)
{
    peer_t *p = vmmc_udp__peer(l, id);
    int s = p ? __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) : PEER_NONE;
    if (s == PEER_NONE)
        return vmmc_error(VMMC_ERR_NOT_FOUND, "udp link: no peer %u", id);
    return s == PEER_ALIVE;
}

/* Mark a peer dead or gone (called without p->lock). The owner is told
 * first, so that by the time blocked senders wake up with
 * VMMC_ERR_PEER_DEAD the layer above already knows (its own checks then
 * agree). The owner may call vmmc_udp_link_peer_kill() from the callback. */
void vmmc_udp__peer_down(vmmc_udp_link_t *l, uint32_t id, int state, int why)
{
    peer_t *p = vmmc_udp__peer(l, id);
    pthread_mutex_lock(&p->lock);
    int proceed = p->state == PEER_ALIVE && !p->going_down;
    if (proceed)
        p->going_down = 1;
    pthread_mutex_unlock(&p->lock);
    if (!proceed)
        return;
    vmmc_debug("udp link: peer %u %s", id, state == PEER_GONE ? "left" : "declared dead");
    if (l->p.dead)
        l->p.dead(l->p.arg, id, why == DOWN_REFUSED ? VMMC_UDP_DOWN_REFUSED : state == PEER_GONE);
    /* Counted before the state changes: whoever sees the peer down sees
     * it counted. */
    CNT(l, peers_dead, 1);
    pthread_mutex_lock(&p->lock);
    p->down_why = why;
    __atomic_store_n(&p->state, state, __ATOMIC_RELEASE);
    /* Its open batch will never leave (nothing is sent to it any more),
     * and must not keep the progress thread's sleeps short. */
    if (p->bat_n) {
        __atomic_store_n(&p->bat_n, 0, __ATOMIC_RELAXED);
        atomic_fetch_sub_explicit(&l->batches_open, 1, memory_order_relaxed);
    }
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void vmmc_udp_link_peer_kill(vmmc_udp_link_t *l, uint32_t id)
{
    if (vmmc_udp__peer(l, id))
        vmmc_udp__peer_down(l, id, PEER_DEAD, DOWN_KILLED);
}

