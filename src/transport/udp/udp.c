/* The udp transport (vmmc_tl_udp): the transport contract on the reliable
 * link (link.h), for peers on other hosts (or every peer with
 * VMMC_TRANSPORT=udp).
 *
 * Each endpoint binds one UDP socket before the bootstrap and publishes
 * "udp=ADDR:PORT;utok=HEX;" in its business card (utok: the link token that
 * authenticates control datagrams). After the bootstrap the link starts and
 * every peer that will be reached over udp is registered.
 *
 * Messages on the link (rec.kind):
 *   WRITE    region = export id + 1, gen, token = export capability: the
 *            receiver's progress thread applies it with vmmc_deliver_write()
 *            in order, and after the last fragment of a notifying send
 *            queues the notification (vmmc_deliver_notify), so data lands
 *            before its flag and before its notification, as on a NIC with
 *            DMA. A write the core cannot take now (a redirectable export's
 *            arrival log is full) is offered again later (link "busy").
 *   CTL      one vmmc_ctl_msg_t, handed to vmmc_ctl_recv();
 *   GET_REQ  remote read request; answered with GET_REP fragments or GET_ERR;
 *   SIGNAL   wake the endpoint (vmmc_signal).
 *   ATOMIC_REQ  remote atomic: the receiver's progress thread executes it
 *            (vmmc_deliver_atomic) and answers with GET_REP (the 8-byte old
 *            value) or GET_ERR, like a read: the link delivers the request
 *            exactly once and in order after earlier writes, and a lost
 *            reply is retransmitted by the link, never re-executed.
 * Byte order: capability tokens travel as the exporter's 16 bytes; hosts of
 * one job must share endianness (all supported hosts are little-endian). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/core.h"
#include "core/ctl.h"
#include "core/deliver.h"
#include "transport/udp/link.h"
#include "util/config.h"

enum { K_WRITE = 1, K_CTL = 2, K_GET_REQ = 3, K_GET_REP = 4, K_GET_ERR = 5, K_SIGNAL = 6,
       K_ATOMIC_REQ = 7 };

#define GET_CHUNK (1u << 20) /* remote reads are answered 1 MiB at a time */

static const char *cfg_addr;
static int64_t cfg_port;
static int cfg_sync;
static const vmmc_cfg_entry_t udp_tl_entries[] = {
    {"UDP_ADDR", "", "address the udp transport binds and publishes (IPv4 or IPv6); empty: "
     "the first non-loopback IPv4 interface that is up, else 127.0.0.1", VMMC_CFG_STRING,
     &cfg_addr},
    {"UDP_PORT", "0", "UDP port to bind (0: any free port)", VMMC_CFG_INT, &cfg_port, 0, 65535},
    {"UDP_SYNC", "no", "vmmc_send over udp returns once the data is in the receiver's memory "
     "(yes: one round trip per send), or once the link holds it (no: the source is reusable "
     "at once; order and notifications hold, and vmmc_barrier waits until every send landed)",
     VMMC_CFG_BOOL, &cfg_sync},
};
VMMC_CONFIG_TABLE(udp_tl_cfg, "udp transport", udp_tl_entries);

typedef struct get_req {
    uint64_t id;
    int rank;
    uint8_t *dst;
    size_t len, got;
    int status;      /* VMMC_INPROGRESS until done */
    struct get_req *next;
} get_req_t;

typedef struct get_wire {
    uint64_t id, off, len;
    uint32_t export_id, gen;
    uint64_t token[2];
} get_wire_t;

typedef struct atomic_wire {
    uint64_t id, off, operand, compare;
    uint32_t export_id, gen;
    uint64_t token[2];
    uint8_t op, size, fetch, pad[5];
} atomic_wire_t;

typedef struct udp_rx {
    uint64_t msg_off;  /* offset of the current write's first fragment */
    int msg_ok;        /* every fragment of it was applied */
    size_t ctl_len;
    union {
        vmmc_ctl_msg_t m;
        uint8_t b[sizeof(vmmc_ctl_msg_t)];
    } ctl;
} udp_rx_t;

/* Control messages wait here until the window has room: ctl_send is called
 * with core locks held (ep->lock), so it must never wait for the progress
 * thread, which may itself need those locks to apply incoming data. */
typedef struct ctl_q {
    vmmc_ctl_msg_t m;
    int rank;
    struct ctl_q *next;
} ctl_q_t;
#define CTL_QUEUE_MAX 4096

typedef struct udp_ep {
    vmmc_ep_t *ep;
    vmmc_udp_link_t *link;
    int fd;                          /* bound socket until the link adopts it */
    int lo_fd;                       /* the same port on 127.0.0.1 (see loopback_job) */
    uint8_t token[VMMC_UDP_TOKEN_SIZE];
    udp_rx_t *rx;                    /* per rank: progress thread only */
    pthread_mutex_t lock;            /* gets */
    pthread_cond_t cond;
    get_req_t *gets;
    uint64_t next_get;
    /* Authenticated writes the core refused, by reason (stale export or
     * generation, wrong capability token, out of bounds, other), and
     * malformed control messages: progress thread only writes them. */
    _Atomic uint64_t refused[4], ctl_bad;
    pthread_mutex_t qlock;           /* control queue */
    ctl_q_t *qhead, **qtail;
    int qlen;
    int hooked;                      /* udp_arm is a progress hook of ep */
    /* Per rank: the link's datagram count right after our last write to it
     * (a signal right behind a write rides on it, see udp_signal). */
    _Atomic uint32_t *wrote_at;
} udp_ep_t;

static udp_ep_t *U(vmmc_ep_t *ep)
{
    return ep->udp;
}

/* ---- addresses and cards ------------------------------------------------ */

static int pick_addr(struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    const char *want = cfg_addr ? cfg_addr : "";
    if (want[0]) {
        if (inet_pton(AF_INET, want, &a4->sin_addr) == 1) {
            a4->sin_family = AF_INET;
            *len = sizeof *a4;
        } else if (inet_pton(AF_INET6, want, &a6->sin6_addr) == 1) {
            a6->sin6_family = AF_INET6;
            *len = sizeof *a6;
        } else {
            return vmmc_error(VMMC_ERR_INVALID, "VMMC_UDP_ADDR=%s is not an IPv4/IPv6 address",
                              want);
        }
        return VMMC_OK;
    }
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *len = sizeof *a4;
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
                !(i->ifa_flags & IFF_LOOPBACK)) {
                a4->sin_addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
                break;
            }
        }
        freeifaddrs(ifs);
    }
    return VMMC_OK;
}

static int parse_card(const char *card, struct sockaddr_storage *ss, socklen_t *len,
                      uint8_t tok[VMMC_UDP_TOKEN_SIZE])
{
    char addr[96], hex[40];
    if (!card || !vmmc_card_get(card, "udp", addr, sizeof addr) ||
        !vmmc_card_get(card, "utok", hex, sizeof hex) || strlen(hex) != 2 * VMMC_UDP_TOKEN_SIZE)
        return -1;
    for (unsigned i = 0; i < VMMC_UDP_TOKEN_SIZE; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        tok[i] = (uint8_t)v;
    }
    char *colon = strrchr(addr, ':');
    if (!colon)
        return -1;
    *colon = 0;
    int port = atoi(colon + 1);
    if (port <= 0 || port > 65535)
        return -1;
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (addr[0] == '[') {
        size_t n = strlen(addr);
        if (n < 3 || addr[n - 1] != ']')
            return -1;
        addr[n - 1] = 0;
        if (inet_pton(AF_INET6, addr + 1, &a6->sin6_addr) != 1)
            return -1;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *len = sizeof *a6;
    } else {
        if (inet_pton(AF_INET, addr, &a4->sin_addr) != 1)
            return -1;
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *len = sizeof *a4;
    }
    return 0;
}

/* Will the core reach @rank over udp? (The same rule as vmmc_peer_get.) */
static int uses_udp(vmmc_ep_t *ep, int rank)
{
    if (!strcmp(vmmc_core_cfg.transport, "udp"))
        return 1; /* every peer, this rank too (the link loops back to itself) */
    if (rank == ep->rank)
        return 0;
    char other[96];
    const char *card = ep->boot.peers ? ep->boot.peers[rank].card : NULL;
    return !(card && vmmc_card_get(card, "host", other, sizeof other) && !strcmp(other, ep->host_id));
}

/* ---- receive side (link progress thread) -------------------------------- */

static void get_finish(udp_ep_t *u, get_req_t *g, int status)
{
    g->status = status;
    pthread_cond_broadcast(&u->cond);
}

static get_req_t *get_find(udp_ep_t *u, int rank, uint64_t id)
{
    for (get_req_t *g = u->gets; g; g = g->next)
        if (g->id == id && g->rank == rank)
            return g;
    return NULL;
}

static void serve_get(udp_ep_t *u, uint32_t peer, const void *data, size_t len)
{
    get_wire_t w;
    if (len != sizeof w)
        return;
    memcpy(&w, data, sizeof w);
    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.imm = w.id;
    uint8_t *buf = w.len ? malloc(w.len < GET_CHUNK ? w.len : GET_CHUNK) : NULL;
    int st = w.len && !buf ? VMMC_ERR_NOMEM : VMMC_OK;
    for (uint64_t pos = 0; st == VMMC_OK && pos < w.len;) {
        size_t n = w.len - pos < GET_CHUNK ? (size_t)(w.len - pos) : GET_CHUNK;
        st = vmmc_deliver_read(u->ep, w.export_id, w.gen, w.token, w.off + pos, buf, n);
        if (st != VMMC_OK)
            break;
        rec.kind = K_GET_REP;
        rec.offset = pos;
        if (vmmc_udp_link_send(u->link, peer, &rec, buf, n) != VMMC_OK) {
            free(buf);
            return; /* the requester is gone */
        }
        pos += n;
    }
    free(buf);
    if (st != VMMC_OK) {
        int32_t s32 = st;
        rec.kind = K_GET_ERR;
        rec.offset = 0;
        (void)vmmc_udp_link_send(u->link, peer, &rec, &s32, sizeof s32);
    }
}

static void serve_atomic(udp_ep_t *u, uint32_t peer, const void *data, size_t len)
{
    atomic_wire_t w;
    if (len != sizeof w)
        return;
    memcpy(&w, data, sizeof w);
    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.imm = w.id;
    uint64_t old = 0;
    int32_t st = vmmc_deliver_atomic(u->ep, (int)peer, w.export_id, w.gen, w.token, w.off, w.op,
                                     w.size, w.fetch, w.operand, w.compare, &old);
    rec.kind = st == VMMC_OK ? K_GET_REP : K_GET_ERR;
    if (st == VMMC_OK)
        (void)vmmc_udp_link_send(u->link, peer, &rec, &old, sizeof old);
    else
        (void)vmmc_udp_link_send(u->link, peer, &rec, &st, sizeof st);
}

static int udp_deliver(void *arg, uint32_t peer, const vmmc_udp_rec_t *rec, const void *data,
                       size_t len)
{
    udp_ep_t *u = arg;
    vmmc_ep_t *ep = u->ep;
    udp_rx_t *r = &u->rx[peer];
    switch (rec->kind) {
    case K_WRITE: {
        /* Bounded notification queue: while VMMC_NOTIFY_QUEUE notifications
         * wait for the application, a notifying write waits in the link
         * (which then holds back this sender, as a full ring does on shm). */
        if ((rec->flags & VMMC_UDP_F_NOTIFY) && (rec->flags & VMMC_UDP_F_LAST) &&
            atomic_load_explicit(&ep->remote_count, memory_order_acquire) >=
                (size_t)vmmc_core_cfg.notify_queue)
            return 1;
        if (rec->flags & VMMC_UDP_F_FIRST) {
            r->msg_off = rec->offset;
            r->msg_ok = 1;
        }
        uint64_t tok[2];
        memcpy(tok, rec->token, sizeof tok);
        int head_last = (rec->flags & VMMC_UDP_F_HEADLAST) && (rec->flags & VMMC_UDP_F_FIRST) &&
                        (rec->flags & VMMC_UDP_F_LAST);
        int st = rec->region ? vmmc_deliver_write(ep, rec->region - 1, rec->gen, tok, rec->offset,
                                                  data, len, head_last)
                             : VMMC_ERR_PROTOCOL;
        if (st == VMMC_ERR_AGAIN)
            return 1; /* no room now: the link offers it again later */
        if (st != VMMC_OK) {
            r->msg_ok = 0;
            int why = st == VMMC_ERR_STALE ? 0 : st == VMMC_ERR_PERMISSION ? 1
                    : st == VMMC_ERR_BOUNDS ? 2 : 3;
            atomic_fetch_add_explicit(&u->refused[why], 1, memory_order_relaxed);
            vmmc_debug("udp: write from rank %u to export %u refused: %s", peer,
                       rec->region - 1, vmmc_strerror(st));
        }
        if ((rec->flags & VMMC_UDP_F_LAST) && (rec->flags & VMMC_UDP_F_NOTIFY) && r->msg_ok)
            vmmc_deliver_notify(ep, (int)peer, rec->region - 1, rec->gen, r->msg_off,
                                rec->offset + len - r->msg_off, rec->imm);
        /* A complete write wakes a sleeping endpoint (a fence and a load
         * when nobody sleeps): the sender's vmmc_signal right behind it
         * then needs no datagram of its own (udp_signal). */
        if (rec->flags & VMMC_UDP_F_LAST)
            vmmc_deliver_wake(ep);
        return 0;
    }
    case K_CTL:
        if (rec->flags & VMMC_UDP_F_FIRST)
            r->ctl_len = 0;
        if (rec->offset != r->ctl_len || len > sizeof r->ctl.b - r->ctl_len) {
            if (r->ctl_len <= sizeof r->ctl.b)
                atomic_fetch_add_explicit(&u->ctl_bad, 1, memory_order_relaxed);
            r->ctl_len = sizeof r->ctl.b + 1; /* malformed: drop the whole message */
            return 0;
        }
        memcpy(r->ctl.b + r->ctl_len, data, len);
        r->ctl_len += len;
        if (rec->flags & VMMC_UDP_F_LAST) {
            /* Make sure the core knows the peer first: the core answers an
             * import while holding ep->lock and looks the peer up then, which
             * must not need ep->lock to create it. */
            int st;
            (void)vmmc_peer_get(ep, (int)peer, &st);
            vmmc_ctl_recv(ep, (int)peer, &r->ctl.m, r->ctl_len, NULL, 0);
        }
        return 0;
    case K_GET_REQ:
        serve_get(u, peer, data, len);
        return 0;
    case K_ATOMIC_REQ:
        serve_atomic(u, peer, data, len);
        return 0;
    case K_GET_REP:
    case K_GET_ERR: {
        pthread_mutex_lock(&u->lock);
        get_req_t *g = get_find(u, (int)peer, rec->imm);
        if (g && g->status == VMMC_INPROGRESS) {
            if (rec->kind == K_GET_ERR) {
                int32_t s32 = VMMC_ERR_PROTOCOL;
                if (len == sizeof s32)
                    memcpy(&s32, data, sizeof s32);
                get_finish(u, g, s32 < 0 ? s32 : VMMC_ERR_PROTOCOL);
            } else if (rec->offset > g->len || len > g->len - rec->offset) {
                get_finish(u, g, VMMC_ERR_PROTOCOL);
            } else {
                memcpy(g->dst + rec->offset, data, len);
                g->got += len;
                if (g->got >= g->len)
                    get_finish(u, g, VMMC_OK);
            }
        }
        pthread_mutex_unlock(&u->lock);
        return 0;
    }
    case K_SIGNAL:
        vmmc_deliver_wake(ep);
        return 0;
    default:
        return 0;
    }
}

/* Progress thread: send queued control messages while windows have room
 * (in order per peer; a peer with a full window keeps its messages). */
static void udp_tick(void *arg)
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

static void udp_link_dead(void *arg, uint32_t peer, int clean)
{
    udp_ep_t *u = arg;
    vmmc_peer_mark_dead(u->ep, (int)peer, -1,
                        clean ? "left the job (udp goodbye)"
                              : "no answer over udp within VMMC_UDP_PEER_TIMEOUT");
}

/* ---- endpoint ----------------------------------------------------------- */

static int udp_ep_open(vmmc_ep_t *ep, char *card, size_t cap)
{
    udp_ep_t *u = calloc(1, sizeof *u);
    if (!u)
        return vmmc_error(VMMC_ERR_NOMEM, "udp: out of memory");
    u->ep = ep;
    u->fd = u->lo_fd = -1;
    pthread_mutex_init(&u->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&u->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&u->qlock, NULL);
    u->qtail = &u->qhead;
    int rc;
    struct sockaddr_storage ss;
    socklen_t len;
    if ((rc = pick_addr(&ss, &len)) != VMMC_OK)
        goto fail;
    if (cfg_port < 0 || cfg_port > 65535) {
        rc = vmmc_error(VMMC_ERR_INVALID, "VMMC_UDP_PORT=%lld is not a port", (long long)cfg_port);
        goto fail;
    }
    ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)cfg_port); /* same offset in v6 */
    u->fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (u->fd < 0) {
        rc = vmmc_error_sys("udp: socket");
        goto fail;
    }
    if (bind(u->fd, (struct sockaddr *)&ss, len) != 0) {
        char a[64];
        inet_ntop(ss.ss_family, ss.ss_family == AF_INET ? (void *)&((struct sockaddr_in *)&ss)->sin_addr
                                                        : (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr,
                  a, sizeof a);
        rc = vmmc_error_sys("udp: cannot bind %s port %lld (VMMC_UDP_ADDR/VMMC_UDP_PORT)", a,
                            (long long)cfg_port);
        goto fail;
    }
    len = sizeof ss;
    getsockname(u->fd, (struct sockaddr *)&ss, &len);
    /* An interface address picked automatically: hold the same port on
     * 127.0.0.1 too, for a job whose ranks all turn out to share this host
     * (the loopback path is cheaper than a local interface address's). */
    if (!(cfg_addr && cfg_addr[0]) && ss.ss_family == AF_INET &&
        ((struct sockaddr_in *)&ss)->sin_addr.s_addr != htonl(INADDR_LOOPBACK)) {
        struct sockaddr_in lo = *(struct sockaddr_in *)&ss;
        lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        u->lo_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (u->lo_fd >= 0 && bind(u->lo_fd, (struct sockaddr *)&lo, sizeof lo) != 0) {
            vmmc_debug("udp: port %u is taken on 127.0.0.1: no loopback path", ntohs(lo.sin_port));
            close(u->lo_fd);
            u->lo_fd = -1;
        }
    }
    if (getrandom(u->token, sizeof u->token, 0) != (ssize_t)sizeof u->token) {
        rc = vmmc_error_sys("udp: getrandom for the link token");
        goto fail;
    }
    char a[64], hex[2 * VMMC_UDP_TOKEN_SIZE + 1];
    for (unsigned i = 0; i < VMMC_UDP_TOKEN_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", u->token[i]);
    int n;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a4->sin_addr, a, sizeof a);
        n = snprintf(card, cap, "udp=%s:%u;utok=%s;%s", a, ntohs(a4->sin_port), hex,
                     u->lo_fd >= 0 ? "ulo=1;" : "");
    } else {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a6->sin6_addr, a, sizeof a);
        n = snprintf(card, cap, "udp=[%s]:%u;utok=%s;", a, ntohs(a6->sin6_port), hex);
    }
    if (n < 0 || (size_t)n >= cap) {
        rc = vmmc_error(VMMC_ERR_OVERFLOW, "udp: business card full");
        goto fail;
    }
    ep->udp = u;
    return VMMC_OK;
fail:
    if (u->fd >= 0)
        close(u->fd);
    if (u->lo_fd >= 0)
        close(u->lo_fd);
    free(u);
    return rc;
}

/* Does every rank of the job share this host and hold its port on
 * 127.0.0.1 ("ulo" in its card)? Then the whole job talks over the
 * loopback interface. Every rank sees the same cards, so all decide alike. */
static int loopback_job(vmmc_ep_t *ep)
{
    udp_ep_t *u = U(ep);
    if (u->lo_fd < 0 || !ep->boot.peers)
        return 0;
    for (int r = 0; r < ep->size; r++) {
        const char *card = ep->boot.peers[r].card;
        char v[96];
        if (!card || !vmmc_card_get(card, "host", v, sizeof v) || strcmp(v, ep->host_id) ||
            !vmmc_card_get(card, "ulo", v, sizeof v) || strcmp(v, "1"))
            return 0;
    }
    return 1;
}

/* Progress hook "arm": the endpoint is about to sleep in vmmc_wait(), so
 * nobody polls the socket until it wakes: hand it back to the progress
 * thread now (it delivers, and the delivery wakes the sleeper). */
static int udp_arm(void *arg)
{
    udp_ep_t *u = arg;
    vmmc_udp_link_idle(u->link);
    return 0;
}

static int udp_ep_start(vmmc_ep_t *ep)
{
    udp_ep_t *u = U(ep);
    int any = 0;
    for (int r = 0; r < ep->size; r++)
        any |= uses_udp(ep, r);
    if (!any) {
        /* Every peer is on this host: no socket, no thread. */
        close(u->fd);
        u->fd = -1;
        if (u->lo_fd >= 0)
            close(u->lo_fd);
        u->lo_fd = -1;
        return VMMC_OK;
    }
    int lo = loopback_job(ep);
    if (lo) {
        close(u->fd);
        u->fd = u->lo_fd;
    } else if (u->lo_fd >= 0) {
        close(u->lo_fd);
    }
    u->lo_fd = -1;
    u->rx = calloc((size_t)ep->size, sizeof *u->rx);
    u->wrote_at = calloc((size_t)ep->size, sizeof *u->wrote_at);
    if (!u->rx || !u->wrote_at)
        return vmmc_error(VMMC_ERR_NOMEM, "udp: out of memory for %d peers", ep->size);
    vmmc_udp_link_params_t p;
    memset(&p, 0, sizeof p);
    p.self = (uint32_t)ep->rank;
    p.max_peers = (uint32_t)ep->size;
    p.adopt_fd = 1;
    p.fd = u->fd;
    memcpy(p.token, u->token, sizeof p.token);
    p.deliver = udp_deliver;
    p.accept = NULL; /* every datagram is authenticated; bad writes are refused when applied */
    p.dead = udp_link_dead;
    p.tick = udp_tick;
    p.arg = u;
    int rc = vmmc_udp_link_open(&p, &u->link);
    if (rc != VMMC_OK)
        return rc;
    u->fd = -1; /* the link owns it */
    if ((rc = vmmc_progress_hook_add(ep, NULL, udp_arm, u)) != VMMC_OK)
        return rc;
    u->hooked = 1;
    for (int r = 0; r < ep->size; r++) {
        if (!uses_udp(ep, r))
            continue;
        struct sockaddr_storage ss;
        socklen_t len;
        uint8_t tok[VMMC_UDP_TOKEN_SIZE];
        if (parse_card(ep->boot.peers ? ep->boot.peers[r].card : NULL, &ss, &len, tok) != 0) {
            vmmc_debug("udp: rank %d published no usable udp address", r);
            continue; /* peer_connect reports it */
        }
        if (lo)
            ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if ((rc = vmmc_udp_link_add_peer(u->link, (uint32_t)r, (struct sockaddr *)&ss, len, tok)) !=
            VMMC_OK)
            return rc;
    }
    return VMMC_OK;
}

static void udp_ep_close(vmmc_ep_t *ep)
{
    udp_ep_t *u = U(ep);
    if (!u)
        return;
    if (u->hooked)
        (void)vmmc_progress_hook_remove(ep, NULL, u);
    if (u->link) {
        /* Let queued control messages (revocations, unimports) go first. */
        for (int i = 0; i < 1000; i++) {
            pthread_mutex_lock(&u->qlock);
            int left = u->qlen;
            pthread_mutex_unlock(&u->qlock);
            if (!left)
                break;
            vmmc_udp_link_wake(u->link);
            usleep(1000);
        }
        vmmc_udp_link_close(u->link, 2000);
    }
    if (u->fd >= 0)
        close(u->fd);
    if (u->lo_fd >= 0)
        close(u->lo_fd);
    for (ctl_q_t *q = u->qhead, *n; q; q = n) {
        n = q->next;
        free(q);
    }
    pthread_mutex_destroy(&u->qlock);
    pthread_mutex_destroy(&u->lock);
    pthread_cond_destroy(&u->cond);
    free(u->rx);
    free((void *)u->wrote_at);
    free(u);
    ep->udp = NULL;
}

/* ---- peers and control -------------------------------------------------- */

static int udp_peer_connect(vmmc_ep_t *ep, vmmc_peer_t *peer, int timeout_ms)
{
    udp_ep_t *u = U(ep);
    if (!u || !u->link)
        return vmmc_error(VMMC_ERR_ENDPOINT, "udp transport not started");
    int a = vmmc_udp_link_peer_alive(u->link, (uint32_t)peer->rank);
    if (a == 1)
        return VMMC_OK;
    if (a == 0)
        return vmmc_error(VMMC_ERR_PEER_DEAD, "rank %d is dead or left the job (udp)",
                          peer->rank);
    return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "rank %d published no usable udp address",
                      peer->rank);
}

static void udp_peer_dead(vmmc_ep_t *ep, vmmc_peer_t *peer)
{
    udp_ep_t *u = U(ep);
    if (!u || !u->link)
        return;
    vmmc_udp_link_peer_kill(u->link, (uint32_t)peer->rank);
    pthread_mutex_lock(&u->lock);
    for (get_req_t *g = u->gets; g; g = g->next)
        if (g->rank == peer->rank && g->status == VMMC_INPROGRESS)
            get_finish(u, g, VMMC_ERR_PEER_DEAD);
    pthread_mutex_unlock(&u->lock);
}

static int udp_ctl_send(vmmc_ep_t *ep, vmmc_peer_t *peer, const vmmc_ctl_msg_t *msg, const int *fds,
                        int nfds)
{
    if (nfds)
        return vmmc_error(VMMC_ERR_UNSUPPORTED, "udp cannot pass file descriptors");
    udp_ep_t *u = U(ep);
    int alive = u->link ? vmmc_udp_link_peer_alive(u->link, (uint32_t)peer->rank) : 0;
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


static int udp_put(vmmc_proxy_t *px, size_t off, const void *src, size_t len, int flags,
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
    rec.kind = K_WRITE;
    rec.flags = ((flags & VMMC_SEND_NOTIFY) ? VMMC_UDP_F_NOTIFY : 0) |
                ((flags & VMMC_SEND_HEAD_LAST) ? VMMC_UDP_F_HEADLAST : 0);
    rec.region = px->export_id + 1;
    rec.gen = px->gen;
    memcpy(rec.token, px->token, sizeof rec.token);
    rec.offset = off;
    rec.imm = imm;
    int st = vmmc_udp_link_send_ex(l, (uint32_t)px->rank, &rec, src, len,
                                   flags & VMMC_SEND_NONBLOCK);
    if (st == VMMC_OK) {
        atomic_store_explicit(&U(px->ep)->wrote_at[px->rank],
                              vmmc_udp_link_sent(l, (uint32_t)px->rank), memory_order_relaxed);
        if (flags & VMMC_SEND_NOTIFY) /* counted as shm counts it */
            VMMC_COUNT(px->ep, CNT_NOTIFY_SENT, 1);
    }
    /* Remote completion (VMMC_UDP_SYNC, and always to this very process):
     * return once the receiver applied it, so "send, then barrier" or a
     * write to oneself is visible as with shm. A non-blocking send stops
     * waiting when the receiver reports itself busy (its notification queue
     * is full): the data then lands when it takes data again, and the next
     * non-blocking send gets VMMC_ERR_AGAIN. */
    if (st == VMMC_OK && (cfg_sync || px->rank == px->ep->rank))
        st = vmmc_udp_link_sync(l, (uint32_t)px->rank, -1, flags & VMMC_SEND_NONBLOCK);
    return st;
}

/* A gather send: one message whose datagrams gather the pieces (no staging
 * copy), so the receiver applies it and notifies once, as for udp_put. */
static int udp_putv(vmmc_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt, int flags,
                    uint64_t imm)
{
    vmmc_udp_link_t *l = U(px->ep)->link;
    vmmc_udp_rec_t rec;
    rec.kind = K_WRITE;
    rec.flags = (flags & VMMC_SEND_NOTIFY) ? VMMC_UDP_F_NOTIFY : 0;
    rec.region = px->export_id + 1;
    rec.gen = px->gen;
    memcpy(rec.token, px->token, sizeof rec.token);
    rec.offset = off;
    rec.imm = imm;
    int st = vmmc_udp_link_sendv(l, (uint32_t)px->rank, &rec, iov, iovcnt,
                                 flags & VMMC_SEND_NONBLOCK);
    if (st == VMMC_OK) {
        atomic_store_explicit(&U(px->ep)->wrote_at[px->rank],
                              vmmc_udp_link_sent(l, (uint32_t)px->rank), memory_order_relaxed);
        if (flags & VMMC_SEND_NOTIFY)
            VMMC_COUNT(px->ep, CNT_NOTIFY_SENT, 1);
    }
    if (st == VMMC_OK && (cfg_sync || px->rank == px->ep->rank))
        st = vmmc_udp_link_sync(l, (uint32_t)px->rank, -1, flags & VMMC_SEND_NONBLOCK);
    return st;
}

/* One request that the peer answers with GET_REP fragments into @dst (or
 * GET_ERR): a remote read or an atomic. */
static int udp_rpc(vmmc_proxy_t *px, int kind, void *wire, size_t wlen, uint64_t *wid, void *dst,
                   size_t len)
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
    vmmc_udp_link_idle(u->link); /* the reply comes through the progress thread */
    pthread_mutex_lock(&u->lock);
    if (st != VMMC_OK)
        g.status = st;
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
    if (g.status != VMMC_OK && st == VMMC_OK && g.status == VMMC_ERR_PEER_DEAD)
        return vmmc_error(g.status, "rank %d is dead (udp)", px->rank);
    return g.status;
}

static int udp_get(vmmc_proxy_t *px, size_t off, void *dst, size_t len)
{
    get_wire_t w = {0, off, len, px->export_id, px->gen, {px->token[0], px->token[1]}};
    int st = udp_rpc(px, K_GET_REQ, &w, sizeof w, &w.id, dst, len);
    if (st == VMMC_OK || st == VMMC_ERR_PEER_DEAD)
        return st;
    return vmmc_error(st, "fetch of %zu bytes at offset %zu from rank %d refused: %s", len, off,
                      px->rank, vmmc_strerror(st));
}

static int udp_atomic(vmmc_proxy_t *px, size_t off, int op, int size, uint64_t operand,
                      uint64_t compare, int fetch, uint64_t *old)
{
    atomic_wire_t w = {.off = off, .operand = operand, .compare = compare,
                       .export_id = px->export_id, .gen = px->gen,
                       .token = {px->token[0], px->token[1]},
                       .op = (uint8_t)op, .size = (uint8_t)size, .fetch = (uint8_t)!!fetch};
    uint64_t v = 0;
    int st = udp_rpc(px, K_ATOMIC_REQ, &w, sizeof w, &w.id, &v, sizeof v);
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

static int udp_proxy_setup(vmmc_proxy_t *px, const vmmc_ctl_msg_t *m, const int *fds, int nfds)
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
    for (int r = 0; r < ep->size; r++) {
        vmmc_peer_t *p = ep->peers[r];
        if (!p || p->tl != &vmmc_tl_udp || atomic_load(&p->state) != PEER_UP)
            continue;
        int st = vmmc_udp_link_sync(u->link, (uint32_t)r, -1, 0);
        if (st != VMMC_OK && st != VMMC_ERR_NOT_FOUND)
            return st;
    }
    return VMMC_OK;
}

/* vmmc_fence to one peer: every put to it applied by its receiver. */
static int udp_flush_peer(vmmc_ep_t *ep, vmmc_peer_t *peer)
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
static int udp_signal(vmmc_ep_t *ep, vmmc_peer_t *peer)
{
    udp_ep_t *u = U(ep);
    uint32_t r = (uint32_t)peer->rank;
    if (atomic_load_explicit(&u->wrote_at[r], memory_order_relaxed) ==
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
        if (__atomic_load_n(&ep->evfd_mode, __ATOMIC_RELAXED))
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
                                      "udp.ctl_malformed"};
    static const char *link_names[64];
    udp_ep_t *u = U(ep);
    if (!u || !u->link || i < 0)
        return VMMC_ERR_NOT_FOUND;
    if (i < 5) {
        *name = own[i];
        *value = atomic_load(i < 4 ? &u->refused[i] : &u->ctl_bad);
        return VMMC_OK;
    }
    const char *ln;
    int st = vmmc_udp_link_counter_get(u->link, i - 5, &ln, value);
    if (st != VMMC_OK || i - 5 >= 64)
        return VMMC_ERR_NOT_FOUND;
    /* "udp." + the link's name, built once per index (the names are static). */
    static char names[64][40];
    if (!__atomic_load_n(&link_names[i - 5], __ATOMIC_ACQUIRE)) {
        snprintf(names[i - 5], sizeof names[0], "udp.%s", ln);
        __atomic_store_n(&link_names[i - 5], names[i - 5], __ATOMIC_RELEASE);
    }
    *name = link_names[i - 5];
    return VMMC_OK;
}

const vmmc_tl_ops_t vmmc_tl_udp = {
    .name = "udp",
    .ep_open = udp_ep_open,
    .ep_start = udp_ep_start,
    .ep_close = udp_ep_close,
    .peer_connect = udp_peer_connect,
    .peer_dead = udp_peer_dead,
    .ctl_send = udp_ctl_send,
    .can_map = 0,
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
};
