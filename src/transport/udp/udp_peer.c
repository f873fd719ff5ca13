/* The udp transport's endpoint and peers: its socket and address, the
 * link (started when the first peer needs it, or at the start of a job with
 * peers on other hosts), and how peers get into the link.
 *
 * Wire ids: each endpoint draws a random 32-bit id (uid= in its address)
 * that its datagrams carry as their source; the keys of a link are derived
 * from both ends' secrets and ids (wire.h). A job registers every rank
 * reached over udp at its start. An endpoint that connects registers the
 * peer from its address and sends a HELLO (its own address) first. A
 * datagram from an unknown wire id is taken only if it is that HELLO (the
 * first datagram of its sender, sequence 1): its address must be well
 * formed, name the wire id and the source address the datagram came from,
 * and give the secret its tag checks with; then the core finds the peer by
 * address (a rank, or a peer this endpoint connected to) or, if the
 * endpoint listens, accepts it as a new peer. Anything else is dropped and
 * counted, without any state change. Who the peer is comes from the link
 * (its key and source address) from then on. */
#include "transport/udp/udp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "util/config.h"

static const char *cfg_addr;
static int64_t cfg_port;
int vmmc_udp_cfg_sync;
static const vmmc_cfg_entry_t udp_tl_entries[] = {
    {"UDP_ADDR", "", "address the udp transport binds and publishes (IPv4 or IPv6); empty: "
     "the first non-loopback IPv4 interface that is up, else 127.0.0.1", VMMC_CFG_STRING,
     &cfg_addr},
    {"UDP_PORT", "0", "UDP port to bind (0: any free port)", VMMC_CFG_INT, &cfg_port, 0, 65535},
    {"UDP_SYNC", "no", "vmmc_send over udp returns once the data is in the receiver's memory "
     "(yes: one round trip per send), or once the link holds it (no: the source is reusable "
     "at once; order and notifications hold, and vmmc_barrier waits until every send landed)",
     VMMC_CFG_BOOL, &vmmc_udp_cfg_sync},
};
VMMC_CONFIG_TABLE(udp_tl_cfg, "udp transport", udp_tl_entries);

/* Will the core reach @rank over udp? (Its transport, chosen from the
 * registry when the job's table was filled.) */
static int uses_udp(vmmc_ep_t *ep, int rank)
{
    vmmc_tl_peer_t *p = vmmc_tl_peer_at(ep, rank);
    return p && p->tl == &vmmc_tl_udp;
}

/* ---- the link's peers ---------------------------------------------------- */

/* The transport's state for handle @h, made on first use. */
static udp_peer_t *peer_slot(udp_ep_t *u, int h)
{
    udp_peer_t *up = udp_peer_of(u, (uint32_t)h);
    if (up)
        return up;
    pthread_mutex_lock(&u->lock);
    udp_peer_t **c = u->peers[h / UDP_PEER_CHUNK];
    if (!c) {
        c = calloc(UDP_PEER_CHUNK, sizeof *c);
        if (c)
            atomic_store_explicit(&u->peers[h / UDP_PEER_CHUNK], c, memory_order_release);
    }
    up = c ? c[h % UDP_PEER_CHUNK] : NULL;
    if (c && !up && (up = calloc(1, sizeof *up))) {
        pthread_mutex_init(&up->txlock, NULL);
        __atomic_store_n(&c[h % UDP_PEER_CHUNK], up, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&u->lock);
    return up;
}

/* Register peer @h (address @card) in the link. */
static int register_peer(udp_ep_t *u, int h, const char *card)
{
    struct sockaddr_storage ss;
    socklen_t len;
    uint8_t tok[VMMC_UDP_TOKEN_SIZE];
    uint32_t uid;
    if (vmmc_udp__parse_card(card, &ss, &len, tok, &uid) != 0)
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "%s %d's address has no usable udp part",
                          VMMC_PEER_WORD(u->ep, h), h);
    if (u->lo)
        ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!peer_slot(u, h))
        return vmmc_error(VMMC_ERR_NOMEM, "udp: out of memory for peer %d", h);
    return vmmc_udp_link_add_peer_id(u->link, (uint32_t)h, uid, (struct sockaddr *)&ss, len, tok);
}

/* Register peer @h that reached us from @from (its handshake checked). */
static int register_peer_from(udp_ep_t *u, int h, const char *card, const struct sockaddr *from,
                              socklen_t fromlen, const uint8_t tok[VMMC_UDP_TOKEN_SIZE],
                              uint32_t uid)
{
    (void)card;
    if (!peer_slot(u, h))
        return vmmc_error(VMMC_ERR_NOMEM, "udp: out of memory for peer %d", h);
    return vmmc_udp_link_add_peer_id(u->link, (uint32_t)h, uid, from, fromlen, tok);
}

static void link_dead(void *arg, uint32_t peer, int clean)
{
    udp_ep_t *u = arg;
    vmmc_tl_peer_failed(u->ep, (int)peer, -1,
                        clean == VMMC_UDP_DOWN_REFUSED ? "refused: not listening (udp)"
                        : clean ? "left (udp goodbye)"
                                : "no answer over udp within VMMC_UDP_PEER_TIMEOUT");
}

static void announce_ready(vmmc_ep_t *ep, int fd, uint32_t events, void *arg)
{
    udp_ep_t *u = arg;
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof v);
    (void)r;
    (void)events;
    for (;;) {
        pthread_mutex_lock(&u->qlock);
        ann_q_t *a = u->ann;
        if (a)
            u->ann = a->next;
        pthread_mutex_unlock(&u->qlock);
        if (!a)
            break;
        vmmc_tl_peer_announce(ep, a->peer);
        free(a);
    }
}

/* A datagram from a wire id the link does not know (receive owner): take
 * it only if it is the HELLO of an endpoint the core knows or accepts. */
static int on_unknown(void *arg, const vmmc_udp_hdr_t *h, const uint8_t *dgram,
                      const struct sockaddr *from, socklen_t fromlen, uint32_t *id)
{
    udp_ep_t *u = arg;
    vmmc_ep_t *ep = u->ep;
    if (h->type != VMMC_UDP_T_DATA || h->seq != 1 || h->kind != K_HELLO || h->region ||
        (h->flags & (VMMC_UDP_F_FIRST | VMMC_UDP_F_LAST)) != (VMMC_UDP_F_FIRST | VMMC_UDP_F_LAST) ||
        h->length == 0 || h->length >= VMMC_ADDR_MAX)
        return -1; /* not a handshake: counted by the link */
    char addr[VMMC_ADDR_MAX];
    size_t len = h->length;
    memcpy(addr, dgram + h->hlen, len);
    struct sockaddr_storage ss;
    socklen_t sl;
    uint8_t tok[VMMC_UDP_TOKEN_SIZE];
    uint32_t uid;
    const char *why = NULL;
    if (vmmc_tl_addr_check(ep, addr, len) != VMMC_OK)
        why = "malformed address";
    if (!why) {
        addr[len] = 0;
        if (vmmc_udp__parse_card(addr, &ss, &sl, tok, &uid) != 0 || uid != h->src)
            why = "its address does not name its wire id";
        else if (!vmmc_udp__same_sockaddr(&ss, sl, from, fromlen))
            why = "it came from another address than the one it names";
        else if (vmmc_udp_link_auth_from(u->link, dgram, h, tok) != VMMC_OK)
            why = "its tag does not check with the secret of the address it names";
    }
    if (why) {
        atomic_fetch_add_explicit(&u->hello_refused, 1, memory_order_relaxed);
        vmmc_debug("udp: refused a handshake from wire id %08x: %s", h->src, why);
        return -1;
    }
    /* A good handshake: the core knows the peer, accepts it, or refuses
     * it (and counts that: connections_refused). */
    int is_new = 0, hd = vmmc_tl_peer_accept(ep, &vmmc_tl_udp, addr, len, 0, &is_new);
    if (hd == VMMC_ERR_PERMISSION) {
        /* It does not listen (or is closing): say so, so that the peer
         * fails at once. It proved it holds the secret its address gives,
         * and the answer goes to that address only, authenticated under
         * the link key from us to it. */
        vmmc_udp_link_refuse(u->link, h, from, fromlen, tok);
        vmmc_debug("udp: handshake from wire id %08x refused: %s", h->src, vmmc_last_error());
        return -1;
    }
    if (hd < 0 || register_peer_from(u, hd, addr, from, fromlen, tok, uid) != VMMC_OK) {
        vmmc_debug("udp: handshake from wire id %08x: %s", h->src, vmmc_last_error());
        return -1;
    }
    if (is_new) {
        ann_q_t *a = malloc(sizeof *a);
        if (a) {
            a->peer = hd;
            pthread_mutex_lock(&u->qlock);
            ann_q_t **pp = &u->ann;
            while (*pp)
                pp = &(*pp)->next;
            a->next = NULL;
            *pp = a;
            pthread_mutex_unlock(&u->qlock);
            uint64_t one = 1;
            ssize_t w = write(u->ann_fd, &one, sizeof one);
            (void)w;
        }
    }
    *id = (uint32_t)hd;
    return 0;
}

/* Open the link on our socket (once). */
static int link_start(udp_ep_t *u)
{
    if (__atomic_load_n(&u->link, __ATOMIC_ACQUIRE))
        return VMMC_OK;
    pthread_mutex_lock(&u->start_lock);
    int rc = VMMC_OK;
    if (u->link)
        goto out;
    if (u->fd < 0) {
        rc = vmmc_error(VMMC_ERR_PEER_UNREACHABLE,
                        "udp: this endpoint closed its socket (its job had no peer on another host)");
        goto out;
    }
    u->ann_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (u->ann_fd < 0) {
        rc = vmmc_error_sys("udp: eventfd");
        goto out;
    }
    if ((rc = vmmc_tl_ctl_watch(u->ep, u->ann_fd, announce_ready, u)) != VMMC_OK)
        goto out;
    vmmc_udp_link_params_t p;
    memset(&p, 0, sizeof p);
    p.self = u->uid;
    p.max_peers = VMMC_PEERS_MAX;
    p.adopt_fd = 1;
    p.fd = u->fd;
    memcpy(p.token, u->token, sizeof p.token);
    p.deliver = vmmc_udp__deliver;
    p.accept = NULL; /* every datagram is authenticated; bad writes are refused when applied */
    p.dead = link_dead;
    p.unknown = on_unknown;
    p.tick = vmmc_udp__tick;
    p.waiting = vmmc_udp__waiting;
    p.arg = u;
    vmmc_udp_link_t *l;
    if ((rc = vmmc_udp_link_open(&p, &l)) != VMMC_OK)
        goto out;
    u->fd = -1; /* the link owns it */
    __atomic_store_n(&u->link, l, __ATOMIC_RELEASE);
out:
    pthread_mutex_unlock(&u->start_lock);
    return rc;
}

/* ---- endpoint ----------------------------------------------------------- */

int vmmc_udp__ep_open(vmmc_ep_t *ep, char *card, size_t cap)
{
    udp_ep_t *u = calloc(1, sizeof *u);
    if (!u)
        return vmmc_error(VMMC_ERR_NOMEM, "udp: out of memory");
    u->ep = ep;
    u->fd = u->lo_fd = u->ann_fd = -1;
    pthread_mutex_init(&u->lock, NULL);
    pthread_mutex_init(&u->start_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&u->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&u->qlock, NULL);
    pthread_mutex_init(&u->nlock, NULL);
    u->qtail = &u->qhead;
    int rc;
    struct sockaddr_storage ss;
    socklen_t len;
    if ((rc = vmmc_udp__pick_addr(cfg_addr, &ss, &len)) != VMMC_OK)
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
    if (getrandom(u->token, sizeof u->token, 0) != (ssize_t)sizeof u->token ||
        getrandom(&u->uid, sizeof u->uid, 0) != (ssize_t)sizeof u->uid) {
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
        n = snprintf(card, cap, "udp=%s:%u;utok=%s;uid=%08x;%s", a, ntohs(a4->sin_port), hex,
                     u->uid, u->lo_fd >= 0 ? "ulo=1;" : "");
    } else {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a6->sin6_addr, a, sizeof a);
        n = snprintf(card, cap, "udp=[%s]:%u;utok=%s;uid=%08x;", a, ntohs(a6->sin6_port), hex,
                     u->uid);
    }
    if (n < 0 || (size_t)n >= cap) {
        rc = vmmc_error(VMMC_ERR_OVERFLOW, "udp: business card full");
        goto fail;
    }
    VMMC_TL_STATE(ep, udp) = u;
    return VMMC_OK;
fail:
    if (u->fd >= 0)
        close(u->fd);
    if (u->lo_fd >= 0)
        close(u->lo_fd);
    pthread_mutex_destroy(&u->start_lock);
    pthread_mutex_destroy(&u->qlock);
    pthread_mutex_destroy(&u->nlock);
    pthread_mutex_destroy(&u->lock);
    pthread_cond_destroy(&u->cond);
    free(u->nq);
    free(u);
    return rc;
}

/* Does every rank of the job share this host and hold its port on
 * 127.0.0.1 ("ulo" in its card)? Then the whole job talks over the
 * loopback interface. Every rank sees the same cards, so all decide alike. */
static int loopback_job(vmmc_ep_t *ep)
{
    udp_ep_t *u = U(ep);
    if (u->lo_fd < 0 || !VMMC_TL_EP(ep)->in_job)
        return 0;
    for (int r = 0; r < VMMC_TL_EP(ep)->size; r++) {
        const char *card = vmmc_tl_peer_at(ep, r)->addr;
        char v[96];
        if (!card || !vmmc_card_get(card, "host", v, sizeof v) || strcmp(v, VMMC_TL_EP(ep)->host_id) ||
            !vmmc_card_get(card, "ulo", v, sizeof v) || strcmp(v, "1"))
            return 0;
    }
    return 1;
}

int vmmc_udp__ep_start(vmmc_ep_t *ep)
{
    udp_ep_t *u = U(ep);
    if (!VMMC_TL_EP(ep)->in_job) {
        /* An endpoint of its own: its link runs from the start, so that an
         * endpoint that connects is answered (accepted, or refused and
         * counted); no loopback shortcut (peers come from anywhere). */
        if (u->lo_fd >= 0)
            close(u->lo_fd);
        u->lo_fd = -1;
        return link_start(u);
    }
    int any = 0;
    for (int r = 0; r < VMMC_TL_EP(ep)->size; r++)
        any |= uses_udp(ep, r);
    if (!any) {
        /* Every rank is on this host: no thread for now. The socket of our
         * address stays, so the link can start when the endpoint listens or
         * connects to a peer on another host (link_start). */
        if (u->lo_fd >= 0)
            close(u->lo_fd);
        u->lo_fd = -1;
        return VMMC_OK;
    }
    u->lo = loopback_job(ep);
    if (u->lo) {
        close(u->fd);
        u->fd = u->lo_fd;
    } else if (u->lo_fd >= 0) {
        close(u->lo_fd);
    }
    u->lo_fd = -1;
    int rc = link_start(u);
    if (rc != VMMC_OK)
        return rc;
    for (int r = 0; r < VMMC_TL_EP(ep)->size; r++) {
        if (!uses_udp(ep, r))
            continue;
        if (register_peer(u, r, vmmc_tl_peer_at(ep, r)->addr) != VMMC_OK)
            vmmc_debug("udp: rank %d: %s", r, vmmc_last_error()); /* peer_connect reports it */
    }
    return VMMC_OK;
}

void vmmc_udp__ep_close(vmmc_ep_t *ep)
{
    udp_ep_t *u = U(ep);
    if (!u)
        return;
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
    if (u->ann_fd >= 0)
        close(u->ann_fd); /* the control thread has stopped */
    for (ctl_q_t *q = u->qhead, *n; q; q = n) {
        n = q->next;
        free(q);
    }
    for (ann_q_t *a = u->ann, *n; a; a = n) {
        n = a->next;
        free(a);
    }
    for (int c = 0; c < UDP_PEER_CHUNKS; c++) {
        if (!u->peers[c])
            continue;
        for (int i = 0; i < UDP_PEER_CHUNK; i++) {
            if (!u->peers[c][i])
                continue;
            pthread_mutex_destroy(&u->peers[c][i]->txlock);
            free(u->peers[c][i]);
        }
        free(u->peers[c]);
    }
    pthread_mutex_destroy(&u->start_lock);
    pthread_mutex_destroy(&u->qlock);
    pthread_mutex_destroy(&u->nlock);
    pthread_mutex_destroy(&u->lock);
    pthread_cond_destroy(&u->cond);
    free(u->nq);
    free(u);
    VMMC_TL_STATE(ep, udp) = NULL;
}

int vmmc_udp__listen(vmmc_ep_t *ep)
{
    udp_ep_t *u = U(ep);
    if (!u || (u->fd < 0 && !u->link))
        return VMMC_OK; /* no socket: peers on other hosts cannot reach us anyway */
    return link_start(u);
}

/* ---- peers -------------------------------------------------------------- */

int vmmc_udp__peer_connect(vmmc_ep_t *ep, vmmc_tl_peer_t *peer, int timeout_ms)
{
    (void)timeout_ms;
    udp_ep_t *u = U(ep);
    if (!u)
        return vmmc_error(VMMC_ERR_ENDPOINT, "udp transport not open");
    int rc = link_start(u);
    if (rc != VMMC_OK)
        return rc;
    int a = vmmc_udp_link_peer_alive(u->link, (uint32_t)peer->rank);
    if (a == VMMC_ERR_NOT_FOUND) {
        /* Not registered yet: register it from its address, then say who we
         * are, first thing on the link (it may not know us). */
        if ((rc = register_peer(u, peer->rank, peer->addr)) != VMMC_OK)
            return rc;
        vmmc_udp_rec_t rec;
        memset(&rec, 0, sizeof rec);
        rec.kind = K_HELLO;
        if ((rc = vmmc_udp_link_send(u->link, (uint32_t)peer->rank, &rec, VMMC_TL_EP(ep)->addr, VMMC_TL_EP(ep)->addr_len)) !=
            VMMC_OK)
            return rc;
        a = vmmc_udp_link_peer_alive(u->link, (uint32_t)peer->rank);
    }
    if (a == 1)
        return VMMC_OK;
    if (a == 0) {
        /* The link told the core why (e.g. the peer refused our handshake
         * before this line): that reason, if it is there yet. */
        if ((rc = vmmc_tl_peer_error(peer)) != VMMC_OK)
            return rc;
        return vmmc_error(VMMC_ERR_PEER_DEAD, "%s %d is dead or left (udp)",
                          VMMC_PEER_WORD(ep, peer->rank), peer->rank);
    }
    return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "%s %d published no usable udp address",
                      VMMC_PEER_WORD(ep, peer->rank), peer->rank);
}

void vmmc_udp__peer_dead(vmmc_ep_t *ep, vmmc_tl_peer_t *peer)
{
    udp_ep_t *u = U(ep);
    if (!u || !u->link)
        return;
    vmmc_udp_link_peer_kill(u->link, (uint32_t)peer->rank);
    vmmc_udp__gets_fail(u, peer->rank, VMMC_ERR_PEER_DEAD);
}
