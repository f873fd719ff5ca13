/* The udp transport (vmmc_tl_udp): the transport contract on the reliable
 * link (link.h), for peers on other hosts (or every peer with
 * VMMC_TRANSPORT=udp).
 *
 * Each endpoint binds one UDP socket when it opens and publishes
 * "udp=ADDR:PORT;utok=HEX;uid=HEX;" in its address (utok: its link secret;
 * uid: its wire id). udp_peer.c starts the link and registers peers; this
 * file is the data path.
 *
 * Messages on the link (rec.kind):
 *   WRITE    region = export id + 1, gen, token = export capability: the
 *            receiver's progress thread applies it with vmmc_tl_deliver_write()
 *            in order, and after the last fragment of a notifying send
 *            queues the notification for the core (udp_drain), so data lands
 *            before its flag and before its notification, as on a NIC with
 *            DMA. A write the core cannot take now (a redirectable export's
 *            arrival log is full) is offered again later (link "busy").
 *   CTL      one vmmc_ctl_msg_t, handed to vmmc_tl_ctl_recv();
 *   GET_REQ  remote read request; answered with GET_REP fragments or GET_ERR;
 *   SIGNAL   wake the endpoint (vmmc_signal).
 *   ATOMIC_REQ  remote atomic: the receiver's progress thread executes it
 *            (vmmc_tl_deliver_atomic) and answers with GET_REP (the 8-byte old
 *            value) or GET_ERR, like a read: the link delivers the request
 *            exactly once and in order after earlier writes, and a lost
 *            reply is retransmitted by the link, never re-executed.
 * Byte order: capability tokens travel as the exporter's 16 bytes; hosts of
 * one job must share endianness (all supported hosts are little-endian).
 *
 * The receive side (what the link hands us, and the notifications it
 * queues for the core) is udp_rx.c. */
#include "transport/udp/udp_int.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Progress thread: send queued control messages while windows have room
 * (in order per peer; a peer with a full window keeps its messages). */
void vmmc_udp__tick(void *arg)
{
    udp_ep_t *u = arg;
    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = K_CTL;
    pthread_mutex_lock(&u->qlock);
    uint64_t blocked[4] = {0, 0, 0, 0}; /* ranks < 256 whose window is full, for order */
    for (ctl_q_t **pp = &u->qhead; *pp;) {
        ctl_q_t *q = *pp;
        int r = q->rank, bit = r < 256;
        if (bit && (blocked[r / 64] >> (r % 64) & 1)) {
            pp = &q->next;
            continue;
        }
        int st = vmmc_udp_link_send_ex(u->link, (uint32_t)r, &rec, &q->m, sizeof q->m, 1);
        if (st == VMMC_ERR_AGAIN) {
            if (bit)
                blocked[r / 64] |= 1ull << (r % 64);
            else
                break; /* keep the order for large ranks simply */
            pp = &q->next;
            continue;
        }
        if (st != VMMC_OK)
            vmmc_debug("udp: control message to rank %d dropped: %s", r, vmmc_last_error());
        *pp = q->next;
        if (u->qtail == &q->next)
            u->qtail = pp;
        u->qlen--;
        free(q);
    }
    pthread_mutex_unlock(&u->qlock);
}

static int udp_ctl_send(vmmc_ep_t *ep, vmmc_tl_peer_t *peer, const vmmc_ctl_msg_t *msg, const int *fds,
                        int nfds)
{
    if (nfds)
        return vmmc_error(VMMC_ERR_UNSUPPORTED, "udp cannot pass file descriptors");
    udp_ep_t *u = U(ep);
    int alive = u->link ? vmmc_udp_link_peer_alive(u->link, (uint32_t)peer->rank) : 0;
    if (alive == 0 && vmmc_tl_peer_error(peer) != VMMC_OK)
        return VMMC_ERR_PEER_DEAD; /* with the core's reason */
    if (alive != 1)
        return alive == 0 ? vmmc_error(VMMC_ERR_PEER_DEAD, "rank %d is dead (udp)", peer->rank)
                          : vmmc_error(VMMC_ERR_PEER_UNREACHABLE,
                                       "rank %d is not reachable over udp", peer->rank);
    ctl_q_t *q = malloc(sizeof *q);
    if (!q)
        return vmmc_error(VMMC_ERR_NOMEM, "udp: out of memory for a control message");
    q->m = *msg;
    q->rank = peer->rank;
    q->next = NULL;
    pthread_mutex_lock(&u->qlock);
    if (u->qlen >= CTL_QUEUE_MAX) {
        pthread_mutex_unlock(&u->qlock);
        free(q);
        return vmmc_error(VMMC_ERR_AGAIN, "udp: %d control messages already wait for the network",
                          CTL_QUEUE_MAX);
    }
    *u->qtail = q;
    u->qtail = &q->next;
    u->qlen++;
    pthread_mutex_unlock(&u->qlock);
    vmmc_udp_link_wake(u->link); /* the progress thread sends it */
    return VMMC_OK;
}

/* ---- data path ---------------------------------------------------------- */

/* The record of a write into @px's region at @off (notifying with @flags). */
static inline void write_rec(const vmmc_tl_proxy_t *px, size_t off, int flags, uint64_t imm,
                             vmmc_udp_rec_t *rec)
{
    rec->kind = K_WRITE;
    rec->flags = (flags & VMMC_SEND_NOTIFY) ? VMMC_UDP_F_NOTIFY : 0;
    rec->region = px->export_id + 1;
    rec->gen = px->gen;
    memcpy(rec->token, px->token, sizeof rec->token);
    rec->offset = off;
    rec->imm = imm;
}

/* After a write went to the link (status @st): note where it stands (a
 * signal right behind it rides on it) and count a notification as shm does. */
static inline void wrote(vmmc_tl_proxy_t *px, vmmc_udp_link_t *l, int st, int flags)
{
    if (st != VMMC_OK)
        return;
    atomic_store_explicit(&udp_peer_of(U(px->ep), (uint32_t)px->rank)->wrote_at,
                          vmmc_udp_link_sent(l, (uint32_t)px->rank), memory_order_relaxed);
    if (flags & VMMC_SEND_NOTIFY)
        VMMC_COUNT(px->ep, CNT_NOTIFY_SENT, 1);
}

/* Hold the peer's write lock (txlock) for one write; a non-blocking send
 * does not wait for another thread's write. */
static inline int tx_lock(udp_peer_t *up, const vmmc_tl_proxy_t *px, int flags)
{
    if (!(flags & VMMC_SEND_NONBLOCK)) {
        pthread_mutex_lock(&up->txlock);
        return VMMC_OK;
    }
    if (pthread_mutex_trylock(&up->txlock) == 0)
        return VMMC_OK;
    return vmmc_error(VMMC_ERR_AGAIN, "udp: another thread is writing to rank %d", px->rank);
}

static int udp_put(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len, int flags,
                   uint64_t imm)
{
    vmmc_udp_link_t *l = U(px->ep)->link;
    if ((flags & VMMC_SEND_HEAD_LAST) && len > vmmc_udp_link_payload_max(l)) {
        /* More than one datagram: the rest, then the head as a write of its
         * own, in order on the link. */
        int st = udp_put(px, off + 16, (const char *)src + 16, len - 16,
                         flags & VMMC_SEND_NONBLOCK, 0);
        if (st != VMMC_OK)
            return st;
        return udp_put(px, off, src, 16, flags & ~VMMC_SEND_HEAD_LAST, imm);
    }
    vmmc_udp_rec_t rec;
    write_rec(px, off, flags, imm, &rec);
    rec.flags |= (flags & VMMC_SEND_HEAD_LAST) ? VMMC_UDP_F_HEADLAST : 0;
    udp_peer_t *up = udp_peer_of(U(px->ep), (uint32_t)px->rank);
    int st = tx_lock(up, px, flags);
    if (st != VMMC_OK)
        return st;
    /* A short write that asks for no notification nor remote completion
     * may leave with the next ones in one datagram (vmmc_udp_link_post):
     * its source is reusable on return all the same, and whatever the
     * caller does next to this peer or to wait sends it first. */
    if (!(flags & (VMMC_SEND_HEAD_LAST | VMMC_SEND_NOTIFY)) && !vmmc_udp_cfg_sync &&
        px->rank != VMMC_TL_EP(px->ep)->rank)
        st = vmmc_udp_link_post(l, (uint32_t)px->rank, &rec, src, len, flags & VMMC_SEND_NONBLOCK);
    else
        st = vmmc_udp_link_send_ex(l, (uint32_t)px->rank, &rec, src, len,
                                   flags & VMMC_SEND_NONBLOCK);
    wrote(px, l, st, flags);
    pthread_mutex_unlock(&up->txlock);
    /* Remote completion (VMMC_UDP_SYNC, and always to this very process):
     * return once the receiver applied it, so "send, then barrier" or a
     * write to oneself is visible as with shm. A non-blocking send stops
     * waiting when the receiver reports itself busy (its notification queue
     * is full): the data then lands when it takes data again, and the next
     * non-blocking send gets VMMC_ERR_AGAIN. */
    if (st == VMMC_OK && (vmmc_udp_cfg_sync || px->rank == VMMC_TL_EP(px->ep)->rank))
        st = vmmc_udp_link_sync(l, (uint32_t)px->rank, -1, flags & VMMC_SEND_NONBLOCK);
    return st;
}

/* A gather send: one message whose datagrams gather the pieces (no staging
 * copy), so the receiver applies it and notifies once, as for udp_put. */
static int udp_putv(vmmc_tl_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt, int flags,
                    uint64_t imm)
{
    vmmc_udp_link_t *l = U(px->ep)->link;
    vmmc_udp_rec_t rec;
    write_rec(px, off, flags, imm, &rec);
    udp_peer_t *up = udp_peer_of(U(px->ep), (uint32_t)px->rank);
    int st = tx_lock(up, px, flags);
    if (st != VMMC_OK)
        return st;
    st = vmmc_udp_link_sendv(l, (uint32_t)px->rank, &rec, iov, iovcnt, flags & VMMC_SEND_NONBLOCK);
    wrote(px, l, st, flags);
    pthread_mutex_unlock(&up->txlock);
    if (st == VMMC_OK && (vmmc_udp_cfg_sync || px->rank == VMMC_TL_EP(px->ep)->rank))
        st = vmmc_udp_link_sync(l, (uint32_t)px->rank, -1, flags & VMMC_SEND_NONBLOCK);
    return st;
}

/* One request that the peer answers with GET_REP fragments into @dst (or
 * GET_ERR): a remote read or an atomic. */
static int udp_rpc(vmmc_tl_proxy_t *px, int kind, void *wire, size_t wlen, uint64_t *wid, void *dst,
                   size_t len, uint32_t *sent_at)
{
    udp_ep_t *u = U(px->ep);
    get_req_t g = {.rank = px->rank, .dst = dst, .len = len, .status = VMMC_INPROGRESS};
    pthread_mutex_lock(&u->lock);
    g.id = *wid = ++u->next_get;
    g.next = u->gets;
    u->gets = &g;
    pthread_mutex_unlock(&u->lock);

    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = (uint8_t)kind;
    int st = vmmc_udp_link_send(u->link, (uint32_t)px->rank, &rec, wire, wlen);
    if (sent_at)
        *sent_at = vmmc_udp_link_sent(u->link, (uint32_t)px->rank);
    /* The reply comes in order behind the peer's writes, which our link may
     * hold back for room: make room while waiting (vmmc_udp__waiting). */
    vmmc_udp__waiting(u, 1);
    /* Receive the answer here for a while (UDP_RPC_SPIN): sleeping at once
     * hands it to the progress thread, and its wake-up and then ours cost
     * two cross-thread wake-ups (~60 us a read on this machine, against a
     * round trip of ~5 us). Yield now and then: on a machine with fewer
     * cores than busy threads the peer's or our progress thread needs one. */
    if (st == VMMC_OK && vmmc_udp_cfg_rpc_spin) {
        uint64_t end = vmmc_udp_now() + vmmc_udp_cfg_rpc_spin;
        for (unsigned i = 1; __atomic_load_n(&g.status, __ATOMIC_ACQUIRE) == VMMC_INPROGRESS; i++) {
            (void)vmmc_udp_link_poll(u->link);
            if ((i & 63) == 0) {
                if (vmmc_udp_now() >= end)
                    break;
                sched_yield();
            }
        }
    }
    pthread_mutex_lock(&u->lock);
    if (st != VMMC_OK)
        g.status = st;
    /* Hand the socket back to the progress thread only to sleep: after an
     * answer received here this thread is still the one that polls (the
     * next call, a wait), and handing it back would wake that thread on
     * this core after every read (a context switch per operation). */
    if (g.status == VMMC_INPROGRESS) {
        pthread_mutex_unlock(&u->lock);
        vmmc_udp_link_idle(u->link); /* the reply comes through the progress thread */
        pthread_mutex_lock(&u->lock);
    }
    while (g.status == VMMC_INPROGRESS) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&u->cond, &u->lock, &ts);
        if (g.status == VMMC_INPROGRESS && vmmc_udp_link_peer_alive(u->link, (uint32_t)px->rank) != 1)
            g.status = VMMC_ERR_PEER_DEAD;
    }
    for (get_req_t **pp = &u->gets; *pp; pp = &(*pp)->next)
        if (*pp == &g) {
            *pp = g.next;
            break;
        }
    pthread_mutex_unlock(&u->lock);
    vmmc_udp__waiting(u, 0);
    if (g.status != VMMC_OK && st == VMMC_OK && g.status == VMMC_ERR_PEER_DEAD)
        return vmmc_error(g.status, "rank %d is dead (udp)", px->rank);
    return g.status;
}

static int udp_get(vmmc_tl_proxy_t *px, size_t off, void *dst, size_t len)
{
    get_wire_t w = {0, off, len, px->export_id, px->gen, {px->token[0], px->token[1]}};
    int st = udp_rpc(px, K_GET_REQ, &w, sizeof w, &w.id, dst, len, NULL);
    if (st == VMMC_OK || st == VMMC_ERR_PEER_DEAD)
        return st;
    return vmmc_error(st, "fetch of %zu bytes at offset %zu from rank %d refused: %s", len, off,
                      px->rank, vmmc_strerror(st));
}

static int udp_atomic(vmmc_tl_proxy_t *px, size_t off, int op, int size, uint64_t operand,
                      uint64_t compare, int fetch, uint64_t *old)
{
    atomic_wire_t w = {.off = off, .operand = operand, .compare = compare,
                       .export_id = px->export_id, .gen = px->gen,
                       .token = {px->token[0], px->token[1]},
                       .op = (uint8_t)op, .size = (uint8_t)size, .fetch = (uint8_t)!!fetch};
    uint64_t v = 0;
    uint32_t w_sent = 0;
    int st = udp_rpc(px, K_ATOMIC_REQ, &w, sizeof w, &w.id, &v, sizeof v, &w_sent);
    if (st == VMMC_OK && op != VMMC_ATOMIC_READ) {
        /* The target woke its endpoint after executing it (serve_atomic),
         * as for a write: a vmmc_signal right behind it needs no datagram
         * (udp_signal), unless something else went to the peer since. */
        udp_peer_t *up = udp_peer_of(U(px->ep), (uint32_t)px->rank);
        uint32_t at = vmmc_udp_link_sent(U(px->ep)->link, (uint32_t)px->rank);
        if (up && at == w_sent)
            atomic_store_explicit(&up->wrote_at, at, memory_order_relaxed);
    }
    if (st == VMMC_OK) {
        if (old)
            *old = v;
        return VMMC_OK;
    }
    if (st == VMMC_ERR_PEER_DEAD)
        return st;
    return vmmc_error(st, "atomic at offset %zu of '%s' refused by rank %d: %s", off, px->name,
                      px->rank, vmmc_strerror(st));
}


static int udp_proxy_setup(vmmc_tl_proxy_t *px, const vmmc_ctl_msg_t *m, const int *fds, int nfds)
{
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    if (m->kind != PX_KIND_REMOTE)
        return vmmc_error(VMMC_ERR_PROTOCOL, "udp: import reply of kind %u", m->kind);
    px->kind = PX_KIND_REMOTE;
    px->base = NULL;
    px->put = udp_put;
    px->get = udp_get;
    return VMMC_OK;
}

/* Before a barrier: every put to every udp peer applied by its receiver, so
 * that "send, then barrier" works as on shm without a round trip per send. */
static int udp_flush(vmmc_ep_t *ep)
{
    udp_ep_t *u = U(ep);
    if (!u || !u->link)
        return VMMC_OK;
    int n = vmmc_tl_peer_count(ep);
    for (int r = 0; r < n; r++) {
        vmmc_tl_peer_t *p = vmmc_tl_peer_at(ep, r);
        if ( p->tl != &vmmc_tl_udp || atomic_load(&p->state) != PEER_UP)
            continue;
        int st = vmmc_udp_link_sync(u->link, (uint32_t)r, -1, 0);
        if (st != VMMC_OK && st != VMMC_ERR_NOT_FOUND)
            return st;
    }
    return VMMC_OK;
}

/* vmmc_fence to one peer: every put to it applied by its receiver. */
static int udp_flush_peer(vmmc_ep_t *ep, vmmc_tl_peer_t *peer)
{
    udp_ep_t *u = U(ep);
    if (!u || !u->link)
        return VMMC_OK;
    int st = vmmc_udp_link_sync(u->link, (uint32_t)peer->rank, -1, 0);
    if (st == VMMC_ERR_NOT_FOUND)
        return VMMC_OK;
    if (st == VMMC_ERR_PEER_DEAD || st == VMMC_ERR_PEER_UNREACHABLE)
        return vmmc_error(st, "fence: rank %d is dead or unreachable (udp)", peer->rank);
    return st;
}

/* Wake the peer. When the last thing sent to it was a write, its delivery
 * wakes the peer (udp_deliver) at the moment this signal would: no
 * datagram is needed (FM signals after every packet). */
static int udp_signal(vmmc_ep_t *ep, vmmc_tl_peer_t *peer)
{
    udp_ep_t *u = U(ep);
    uint32_t r = (uint32_t)peer->rank;
    udp_peer_t *up = udp_peer_of(u, r);
    vmmc_udp_link_push(u->link, r); /* the write it rides on leaves now */
    if (up && atomic_load_explicit(&up->wrote_at, memory_order_relaxed) ==
            vmmc_udp_link_sent(u->link, r) &&
        vmmc_udp_link_peer_alive(u->link, r) == 1)
        return VMMC_OK;
    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = K_SIGNAL;
    return vmmc_udp_link_send(U(ep)->link, (uint32_t)peer->rank, &rec, NULL, 0);
}

/* From vmmc_progress()/vmmc_wait() in the application's thread: receive
 * what arrived right here, without waiting for the progress thread to be
 * woken and scheduled (it keeps receiving whenever nobody else does). */
static int udp_progress(vmmc_ep_t *ep)
{
    udp_ep_t *u = U(ep);
    if (u && u->link) {
        (void)vmmc_udp_link_poll(u->link);
        /* With the event fd armed the application sleeps in its own poll
         * between calls: the progress thread must keep the socket. */
        if (__atomic_load_n(&VMMC_TL_EP(ep)->evfd_mode, __ATOMIC_RELAXED))
            vmmc_udp_link_idle(u->link);
    }
    /* Not events by themselves: data lands silently (as with shm), and the
     * notifications it queued are counted when the core runs them. */
    return 0;
}

static int udp_counter_get(vmmc_ep_t *ep, int i, const char **name, uint64_t *value)
{
    static const char *const own[] = {"udp.write_refused_stale", "udp.write_refused_token",
                                      "udp.write_refused_bounds", "udp.write_refused_other",
                                      "udp.ctl_malformed", "udp.hello_refused"};
    static const char *link_names[64];
    udp_ep_t *u = U(ep);
    if (!u || !u->link || i < 0)
        return VMMC_ERR_NOT_FOUND;
    enum { OWN = sizeof own / sizeof own[0] };
    /* Either may be NULL, as for the core's counters (vmmc_counter_get). */
    const char *name_tmp;
    uint64_t value_tmp;
    if (!name)
        name = &name_tmp;
    if (!value)
        value = &value_tmp;
    if (i < OWN) {
        *name = own[i];
        *value = atomic_load(i < 4 ? &u->refused[i] : i == 4 ? &u->ctl_bad : &u->hello_refused);
        return VMMC_OK;
    }
    const char *ln;
    int st = vmmc_udp_link_counter_get(u->link, i - OWN, &ln, value);
    if (st != VMMC_OK || i - OWN >= 64)
        return VMMC_ERR_NOT_FOUND;
    /* "udp." + the link's name, built once per index (the names are static). */
    static char names[64][40];
    if (!__atomic_load_n(&link_names[i - OWN], __ATOMIC_ACQUIRE)) {
        snprintf(names[i - OWN], sizeof names[0], "udp.%s", ln);
        __atomic_store_n(&link_names[i - OWN], names[i - OWN], __ATOMIC_RELEASE);
    }
    *name = link_names[i - OWN];
    return VMMC_OK;
}

VMMC_TRANSPORT(udp) = {
    .size = sizeof(vmmc_tl_ops_t),
    .version = VMMC_TL_VERSION,
    .name = "udp",
    .about = "yes (reliable link over UDP datagrams)",
    .caps = VMMC_TL_CAP_LOCAL | VMMC_TL_CAP_REMOTE,
    .reach = vmmc_udp__reach,
    .addr_field = vmmc_udp__addr_field,
    .addr_whole = vmmc_udp__addr_whole,
    .ep_open = vmmc_udp__ep_open,
    .ep_start = vmmc_udp__ep_start,
    .ep_stop = vmmc_udp__ep_close, /* its threads deliver into exports: gone before them */
    .listen = vmmc_udp__listen,
    .peer_connect = vmmc_udp__peer_connect,
    .peer_dead = vmmc_udp__peer_dead,
    .ctl_send = udp_ctl_send,
    .proxy_setup = udp_proxy_setup,
    .proxy_release = NULL,
    .put = udp_put,
    .get = udp_get,
    .signal = udp_signal,
    .progress = udp_progress,
    .flush = udp_flush,
    .flush_peer = udp_flush_peer,
    .atomic = udp_atomic,
    .putv = udp_putv,
    .counter_get = udp_counter_get,
    .drain = vmmc_udp__drain,
    .arm = vmmc_udp__arm,
};
