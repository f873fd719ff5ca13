#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
/* UDP link: set-up, peers, and the send side. The receive side and the
 * progress thread are in link_rx.c. */
#include "transport/udp/link_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "transport/udp/crc32c.h"
#include "util/config.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

/* ---- settings ----------------------------------------------------------- */

static uint64_t cfg_dgram, cfg_sockbuf, cfg_rto_min, cfg_rto_max, cfg_rto_init;
static uint64_t cfg_keepalive, cfg_peer_timeout, cfg_busy_retry;
uint64_t vmmc_udp_cfg_poll_quiet, vmmc_udp_cfg_poll_recheck, vmmc_udp_cfg_ack_delay;
static int64_t cfg_window;
static const char *cfg_fault;
static const vmmc_cfg_entry_t udp_entries[] = {
    {"UDP_DGRAM_SIZE", "63K", "largest UDP datagram the link sends (header included; "
     "256 .. 65507; use 1472 on paths with a 1500-byte MTU)", VMMC_CFG_SIZE, &cfg_dgram, 256, 65507},
    {"UDP_WINDOW", "64", "datagrams in flight per peer and direction (2 .. 1024); also the "
     "receive reorder buffer", VMMC_CFG_INT, &cfg_window, 2, 1024},
    {"UDP_SOCKBUF", "8M", "socket send/receive buffer size requested", VMMC_CFG_SIZE,
     &cfg_sockbuf, 65536, 1ull << 30},
    {"UDP_RTO_MIN", "200us", "floor of the retransmission timeout (above it, the timeout "
     "follows the measured round trip)", VMMC_CFG_TIME, &cfg_rto_min, 10000, 10000000000ull},
    {"UDP_RTO_MAX", "20ms", "ceiling of the retransmission timeout (after backoff; while the "
     "peer stays silent, one datagram is resent per timeout)",
     VMMC_CFG_TIME, &cfg_rto_max, 10000, 60000000000ull},
    {"UDP_RTO_INIT", "20ms", "retransmission timeout before the first RTT sample",
     VMMC_CFG_TIME, &cfg_rto_init, 10000, 60000000000ull},
    {"UDP_KEEPALIVE", "250ms", "send a keep-alive to a peer after this long without sending",
     VMMC_CFG_TIME, &cfg_keepalive, 1000000, 60000000000ull},
    {"UDP_PEER_TIMEOUT", "3s", "declare a peer dead after this long without a datagram from "
     "it, or with a datagram unacknowledged", VMMC_CFG_TIME, &cfg_peer_timeout, 2000000, 3600000000000ull},
    {"UDP_BUSY_RETRY", "200us", "when the receiver cannot take data (e.g. a redirectable "
     "export's arrival log is full), offer it again after this long", VMMC_CFG_TIME,
     &cfg_busy_retry, 1000, 1000000000ull},
    {"UDP_ACK_DELAY", "50us", "a standalone ACK waits this long for data going back to carry "
     "it (sent at once after a quarter window); 0 acknowledges every receive at once",
     VMMC_CFG_TIME, &vmmc_udp_cfg_ack_delay},
    {"UDP_POLL_QUIET", "200us", "while the application polls (vmmc_progress) more often than "
     "this, the progress thread leaves the socket to it and only runs the timers (0: never)",
     VMMC_CFG_TIME, &vmmc_udp_cfg_poll_quiet},
    {"UDP_POLL_RECHECK", "1ms", "longest the progress thread leaves the socket to a polling "
     "application before it looks again (it starts at UDP_POLL_QUIET and doubles while the "
     "application keeps polling; a vmmc_wait() that goes to sleep hands the socket back at once)",
     VMMC_CFG_TIME, &vmmc_udp_cfg_poll_recheck},
    {"UDP_FAULT", "", "TEST FACILITY: inject faults on received datagrams, e.g. "
     "drop=0.05,dup=0.01,reorder=0.02,delay=200us,seed=7", VMMC_CFG_STRING, &cfg_fault},
};
VMMC_CONFIG_TABLE(udp_cfg, "udp", udp_entries);

static vmmc_udp_settings_t settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static uint64_t clampu(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void settings_load(void)
{
    vmmc_config_load();
    settings.dgram_size = clampu(cfg_dgram, 256, VMMC_UDP_MAX_DGRAM);
    settings.window = (uint64_t)(cfg_window < 2 ? 2 : cfg_window > 1024 ? 1024 : cfg_window);
    settings.sockbuf = clampu(cfg_sockbuf, 64 * 1024, 1ull << 30);
    settings.rto_min_ns = clampu(cfg_rto_min, 10000, 10000000000ull);
    settings.rto_max_ns = clampu(cfg_rto_max, settings.rto_min_ns, 60000000000ull);
    settings.rto_init_ns = clampu(cfg_rto_init, settings.rto_min_ns, settings.rto_max_ns);
    settings.keepalive_ns = clampu(cfg_keepalive, 1000000, 60000000000ull);
    settings.peer_timeout_ns = clampu(cfg_peer_timeout, 2 * settings.keepalive_ns,
                                      3600000000000ull);
    settings.busy_retry_ns = clampu(cfg_busy_retry, 1000, 1000000000ull);
    settings.fault = cfg_fault ? cfg_fault : "";
    if (vmmc_udp_cfg_poll_recheck < vmmc_udp_cfg_poll_quiet)
        vmmc_udp_cfg_poll_recheck = vmmc_udp_cfg_poll_quiet;
}

const vmmc_udp_settings_t *vmmc_udp_settings(void)
{
    pthread_once(&settings_once, settings_load);
    return &settings;
}

/* ---- helpers ------------------------------------------------------------ */

static peer_t *peer_get(vmmc_udp_link_t *l, uint32_t id)
{
    return vmmc_udp__peer(l, id);
}

static void abs_deadline(struct timespec *ts, uint64_t ns_from_now)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    uint64_t ns = (uint64_t)ts->tv_nsec + ns_from_now;
    ts->tv_sec += (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

static void sockbuf(int fd, int opt_force, int opt, uint64_t size)
{
    int v = (int)size;
    if (setsockopt(fd, SOL_SOCKET, opt_force, &v, sizeof v) != 0)
        (void)setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v);
}

/* ---- open / close ------------------------------------------------------- */

int vmmc_udp_link_open(const vmmc_udp_link_params_t *p, vmmc_udp_link_t **out)
{
    const vmmc_udp_settings_t *s = vmmc_udp_settings();
    if (!p || !out || !p->deliver || (!p->bind_addr && !p->adopt_fd) || p->max_peers == 0 ||
        p->max_peers > (1u << 20))
        return vmmc_error(VMMC_ERR_INVALID, "udp link: bad parameters");
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (p->adopt_fd && getsockname(p->fd, (struct sockaddr *)&bound, &blen) != 0)
        return vmmc_error_sys("udp link: socket %d to adopt", p->fd);
    int fam = p->adopt_fd ? bound.ss_family : p->bind_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6)
        return vmmc_error(VMMC_ERR_INVALID, "udp link: address family %d is not IPv4/IPv6", fam);

    vmmc_udp_link_t *l = calloc(1, sizeof *l);
    if (!l)
        return vmmc_error(VMMC_ERR_NOMEM, "udp link: out of memory");
    int st;
    l->p = *p;
    l->fd = l->evfd = -1;
    l->window = (uint32_t)s->window;
    l->ring = l->window + 1;
    l->dgram = (uint32_t)s->dgram_size;
    if (fam == AF_INET6 && l->dgram > 65527)
        l->dgram = 65527;
    l->payload = l->dgram - VMMC_UDP_HDR_SIZE;
    l->recheck_ns = vmmc_udp_cfg_poll_quiet;

    if (p->bindings) {
        l->b = *p->bindings;
    } else if (s->fault[0]) {
        vmmc_udp_fault_spec_t spec;
        if ((st = vmmc_udp_fault_parse(s->fault, &spec)) != VMMC_OK)
            goto fail;
        if ((st = vmmc_udp_bindings_fault(&l->b, &spec, l->dgram)) != VMMC_OK)
            goto fail;
        vmmc_warn("udp link: fault injection on (VMMC_UDP_FAULT=%s): a test facility", s->fault);
    } else {
        vmmc_udp_bindings_plain(&l->b);
    }

    pthread_mutex_init(&l->rx_lock, NULL);
    pthread_mutex_init(&l->add_lock, NULL);
    l->nchunks = (p->max_peers + LINK_CHUNK - 1) / LINK_CHUNK;
    l->rid_cap = 16;
    while (l->rid_cap < 2 * p->max_peers)
        l->rid_cap *= 2;
    l->chunks = calloc(l->nchunks, sizeof *l->chunks);
    l->rid_map = calloc(l->rid_cap, sizeof *l->rid_map);
    l->rxbuf = malloc((size_t)(RX_BATCH + RX_BATCH_NESTED) * l->dgram);
    if (!l->chunks || !l->rid_map || !l->rxbuf) {
        st = vmmc_error(VMMC_ERR_NOMEM, "udp link: out of memory for %u peers", p->max_peers);
        goto fail;
    }

    if (p->adopt_fd) {
        l->fd = p->fd;
        int fl = fcntl(l->fd, F_GETFL);
        if (fl < 0 || fcntl(l->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
            st = vmmc_error_sys("udp link: fcntl");
            goto fail;
        }
    } else {
        l->fd = socket(fam, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (l->fd < 0) {
            st = vmmc_error_sys("udp link: socket");
            goto fail;
        }
        if (fam == AF_INET6) {
            int on = 1;
            (void)setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
        }
    }
    sockbuf(l->fd, SO_RCVBUFFORCE, SO_RCVBUF, s->sockbuf);
    sockbuf(l->fd, SO_SNDBUFFORCE, SO_SNDBUF, s->sockbuf);
    if (!p->adopt_fd && bind(l->fd, p->bind_addr, p->bind_len) != 0) {
        st = vmmc_error_sys("udp link: bind");
        goto fail;
    }
    l->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->evfd < 0) {
        st = vmmc_error_sys("udp link: eventfd");
        goto fail;
    }
    if ((errno = pthread_create(&l->thread, NULL, vmmc_udp__progress_main, l)) != 0) {
        st = vmmc_error_sys("udp link: cannot start the progress thread");
        goto fail;
    }
    l->thread_started = 1;
    *out = l;
    return VMMC_OK;

fail:
    if (l->evfd >= 0)
        close(l->evfd);
    if (l->fd >= 0 && !p->adopt_fd)
        close(l->fd); /* an adopted socket stays the caller's on failure */
    if (l->b.destroy)
        l->b.destroy(l->b.ctx);
    free(l->rxbuf);
    free(l->chunks);
    free((void *)l->rid_map);
    free(l);
    return st;
}

static void wake_thread(vmmc_udp_link_t *l)
{
    uint64_t one = 1;
    ssize_t w = write(l->evfd, &one, sizeof one);
    (void)w;
}

void vmmc_udp_link_wake(vmmc_udp_link_t *l)
{
    wake_thread(l);
}

void vmmc_udp_link_close(vmmc_udp_link_t *l, int timeout_ms)
{
    if (!l)
        return;
    /* Let what was sent arrive, then say goodbye so peers do not wait for
     * the timeout to learn we left. */
    uint64_t deadline = vmmc_udp_now() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
    FOR_PEERS(l, i, p) {
        uint64_t now = vmmc_udp_now();
        int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ull);
        if (p->state == PEER_ALIVE)
            (void)vmmc_udp_link_flush(l, i, left);
    }
    atomic_store(&l->closing, 1);
    FOR_PEERS(l, i, p) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
    }
    /* The progress thread says goodbye as it stops: it owns the receive
     * state, so its goodbye carries the final acknowledgements. */
    atomic_store(&l->stop, 1);
    wake_thread(l);
    if (l->thread_started && !pthread_equal(pthread_self(), l->thread))
        pthread_join(l->thread, NULL);
    close(l->fd);
    close(l->evfd);
    FOR_PEERS(l, i, p) {
        if (p->tx)
            for (uint32_t k = 0; k < l->window; k++)
                free(p->tx[k].buf);
        if (p->rx)
            for (uint32_t k = 0; k < l->ring; k++)
                free(p->rx[k].buf);
        free(p->tx);
        free(p->rx);
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
    }
    l->b.destroy(l->b.ctx);
    pthread_mutex_destroy(&l->rx_lock);
    pthread_mutex_destroy(&l->add_lock);
    for (uint32_t c = 0; c < l->nchunks; c++)
        free(l->chunks[c]);
    free(l->chunks);
    free((void *)l->rid_map);
    free(l->rxbuf);
    free(l);
}

int vmmc_udp_link_local_addr(vmmc_udp_link_t *l, struct sockaddr_storage *ss, socklen_t *len)
{
    *len = sizeof *ss;
    if (getsockname(l->fd, (struct sockaddr *)ss, len) != 0)
        return vmmc_error_sys("udp link: getsockname");
    return VMMC_OK;
}

size_t vmmc_udp_link_payload_max(const vmmc_udp_link_t *l)
{
    return l->payload;
}

const vmmc_udp_bindings_t *vmmc_udp_link_bindings(const vmmc_udp_link_t *l)
{
    return &l->b;
}

/* ---- send side ---------------------------------------------------------- */

/* Stamp the current acks into the slots' headers and hand them to the socket.
 * Caller holds p->lock. */
int vmmc_udp__xmit(vmmc_udp_link_t *l, peer_t *p, txslot_t **slots, unsigned n, uint64_t now)
{
    struct mmsghdr msg[TX_BATCH];
    struct iovec iov[TX_BATCH];
    memset(msg, 0, sizeof(msg[0]) * n);
    for (unsigned i = 0; i < n; i++) {
        txslot_t *t = slots[i];
        t->hdr.ack = p->ack_pub;
        t->hdr.sack = p->sack_pub;
        t->hdr.wnd = p->busy_pub ? 0 : (uint16_t)l->window;
        t->hdr.flags = (uint8_t)((t->hdr.flags & ~VMMC_UDP_F_DLV) |
                                 (p->dlv_pub == p->ack_pub ? VMMC_UDP_F_DLV : 0));
        /* The header ends where the payload starts: its length varies
         * with the fields present (sack, imm). */
        uint8_t *start = t->buf + VMMC_UDP_HDR_SIZE - vmmc_udp_hdr_len(&t->hdr);
        unsigned hl = vmmc_udp_encode(start, &t->hdr, t->pcrc, &p->txk);
        t->sent_ns = now;
        iov[i].iov_base = start;
        iov[i].iov_len = hl + t->plen;
        msg[i].msg_hdr.msg_iov = &iov[i];
        msg[i].msg_hdr.msg_iovlen = 1;
        msg[i].msg_hdr.msg_name = &p->addr;
        msg[i].msg_hdr.msg_namelen = p->alen;
    }
    unsigned done = 0;
    int tries = 0;
    while (done < n) {
        int r = l->b.sendmmsg(l->b.ctx, l->fd, msg + done, n - done);
        if (r > 0) {
            for (unsigned i = done; i < done + (unsigned)r; i++) {
                CNT_TX(p, tx_dgrams, 1);
                CNT_TX(p, tx_bytes, iov[i].iov_len);
            }
            done += (unsigned)r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == ENOBUFS) && tries++ < 100) {
            /* Socket buffer full: wait briefly for room. A datagram that
             * still cannot go is simply retransmitted later. */
            struct pollfd pf = {.fd = l->fd, .events = POLLOUT};
            (void)poll(&pf, 1, 1);
            continue;
        }
        /* Anything else (unreachable, ...) is treated as loss: the
         * retransmission timer and the peer timeout take over. */
        CNT_TX(p, send_errors, n - done);
        break;
    }
    p->last_tx_ns = now;
    /* Data going back carried everything a delayed ACK would (acks, window,
     * and with F_DLV the delivery report): that ACK is no longer owed. */
    if (done && p->ack_owed_ns && p->dlv_pub == p->ack_pub) {
        vmmc_udp__ack_paid(l, p);
        p->ack_sent = p->ack_pub;
    }
    return VMMC_OK;
}

/* Send an unsequenced control datagram (ACK, KEEPALIVE, BYE). Caller holds
 * p->lock. */
void vmmc_udp__send_ctl(vmmc_udp_link_t *l, uint32_t id, peer_t *p, uint8_t type)
{
    uint8_t buf[VMMC_UDP_HDR_SIZE];
    vmmc_udp_hdr_t h;
    memset(&h, 0, sizeof h);
    h.type = type;
    h.wnd = p->busy_pub ? 0 : (uint16_t)l->window;
    h.src = l->p.self;
    /* Each control datagram has a fresh counter: a replayed one is refused. */
    h.offset = ++p->ctl_tx;
    h.seq = p->snd_nxt;
    h.ack = p->ack_pub;
    h.sack = p->sack_pub;
    h.imm = p->dlv_pub;
    struct iovec iov = {buf, vmmc_udp_encode(buf, &h, 0, &p->txk)};
    struct mmsghdr m;
    memset(&m, 0, sizeof m);
    m.msg_hdr.msg_iov = &iov;
    m.msg_hdr.msg_iovlen = 1;
    m.msg_hdr.msg_name = &p->addr;
    m.msg_hdr.msg_namelen = p->alen;
    int r;
    do
        r = l->b.sendmmsg(l->b.ctx, l->fd, &m, 1);
    while (r < 0 && errno == EINTR);
    if (r == 1) {
        CNT_TX(p, tx_dgrams, 1);
        CNT_TX(p, tx_bytes, iov.iov_len);
        if (type == VMMC_UDP_T_ACK)
            CNT_TX(p, acks_sent, 1);
        else if (type == VMMC_UDP_T_KEEPALIVE)
            CNT_TX(p, keepalives_sent, 1);
    } else {
        CNT_TX(p, send_errors, 1);
    }
    p->last_tx_ns = vmmc_udp_now();
}

static int peer_status(vmmc_udp_link_t *l, peer_t *p, uint32_t id)
{
    if (atomic_load(&l->closing))
        return vmmc_error(VMMC_ERR_ENDPOINT, "udp link: closing");
    if (p->state == PEER_DEAD)
        return vmmc_error(VMMC_ERR_PEER_DEAD, "udp link: peer %u is dead (%s)", id,
                          p->down_why == DOWN_KILLED ? "reported dead"
                                                     : "no answer within the peer timeout");
    if (p->state == PEER_GONE)
        return vmmc_error(VMMC_ERR_PEER_DEAD, "udp link: peer %u has left", id);
    return VMMC_OK;
}

/* Wait for window space (or death). Caller holds p->lock. */
static int wait_window(vmmc_udp_link_t *l, peer_t *p, uint32_t id)
{
    int in_progress_thread = vmmc_udp__rx_owner(l);
    while (p->state == PEER_ALIVE && !atomic_load(&l->closing)) {
        uint32_t wnd = p->peer_wnd < l->window ? p->peer_wnd : l->window;
        if (p->snd_nxt - p->snd_una < wnd)
            return VMMC_OK;
        CNT_TX(p, window_waits, 1);
        if (in_progress_thread) {
            pthread_mutex_unlock(&p->lock);
            vmmc_udp__progress_nested(l, 1000000);
            pthread_mutex_lock(&p->lock);
        } else {
            /* This thread stops polling while it waits: the acks come
             * through the progress thread. */
            vmmc_udp_link_idle(l);
            struct timespec ts;
            abs_deadline(&ts, 100000000); /* re-check at least every 100 ms */
            pthread_cond_timedwait(&p->cond, &p->lock, &ts);
        }
    }
    return peer_status(l, p, id);
}

int vmmc_udp_link_send(vmmc_udp_link_t *l, uint32_t id, const vmmc_udp_rec_t *rec,
                       const void *data, size_t len)
{
    return vmmc_udp_link_send_ex(l, id, rec, data, len, 0);
}

/* One message from the pieces @iov (@len bytes in all), fragmented into
 * datagrams; each datagram's payload is gathered from the pieces while its
 * CRC is computed, so pieces cost no staging copy. */
static inline int link_sendv(vmmc_udp_link_t *l, uint32_t id, const vmmc_udp_rec_t *rec,
                             const struct iovec *iov, size_t len, int nonblock)
{
    peer_t *p = peer_get(l, id);
    if (VMMC_UNLIKELY(!p))
        return vmmc_error(VMMC_ERR_NOT_FOUND, "udp link: no peer %u", id);
    pthread_mutex_lock(&p->lock);
    if (VMMC_UNLIKELY(p->state != PEER_ALIVE)) {
        int st = p->state == PEER_NONE
                     ? vmmc_error(VMMC_ERR_NOT_FOUND, "udp link: peer %u not registered", id)
                     : peer_status(l, p, id);
        pthread_mutex_unlock(&p->lock);
        return st;
    }
    if (nonblock) {
        uint32_t wnd = p->peer_wnd < l->window ? p->peer_wnd : l->window;
        size_t frags = len ? (len + l->payload - 1) / l->payload : 1;
        if (p->peer_busy || (size_t)(p->snd_nxt - p->snd_una) + frags > wnd) {
            pthread_mutex_unlock(&p->lock);
            return VMMC_ERR_AGAIN; /* transient, no message: the caller retries */
        }
    }
    size_t left = len, poff = 0; /* position: piece iov, byte poff in it */
    uint64_t off = rec->offset;
    int first = 1, st = VMMC_OK;
    txslot_t *batch[TX_BATCH];
    unsigned nb = 0;
    /* One clock reading per batch: the send times only feed RTT samples
     * and timers, for which the time a batch was started is close enough. */
    uint64_t now = vmmc_udp_now();
    do {
        if (p->snd_nxt - p->snd_una >= (p->peer_wnd < l->window ? p->peer_wnd : l->window)) {
            if (nb) {
                vmmc_udp__xmit(l, p, batch, nb, now);
                nb = 0;
            }
            if ((st = wait_window(l, p, id)) != VMMC_OK)
                break;
            now = vmmc_udp_now();
        }
        size_t n = left < l->payload ? left : l->payload;
        txslot_t *t = &p->tx[p->snd_nxt % l->window];
        if (VMMC_UNLIKELY(!t->buf) && !(t->buf = malloc(l->dgram))) {
            st = vmmc_error(VMMC_ERR_NOMEM, "udp link: out of memory for the send window");
            break;
        }
        vmmc_udp_hdr_t *h = &t->hdr;
        h->type = VMMC_UDP_T_DATA;
        h->flags = (uint8_t)((rec->flags & VMMC_UDP_F_NOTIFY) | (first ? VMMC_UDP_F_FIRST : 0) |
                             (n == left ? VMMC_UDP_F_LAST : 0) |
                             (first && n == left ? rec->flags & VMMC_UDP_F_HEADLAST : 0));
        h->kind = rec->kind;
        h->src = l->p.self;
        if (rec->region)
            memcpy(h->token, rec->token, VMMC_UDP_TOKEN_SIZE);
        else
            memset(h->token, 0, VMMC_UDP_TOKEN_SIZE);
        h->region = rec->region;
        h->gen = rec->gen;
        h->length = (uint32_t)n;
        h->offset = off;
        h->seq = p->snd_nxt;
        h->imm = rec->imm;
        uint32_t crc = 0;
        for (size_t k = 0; k < n;) {
            size_t m = iov->iov_len - poff < n - k ? iov->iov_len - poff : n - k;
            crc = vmmc_crc32c_copy(crc, t->buf + VMMC_UDP_HDR_SIZE + k,
                                   (const uint8_t *)iov->iov_base + poff, m);
            k += m;
            poff += m;
            if (poff == iov->iov_len) {
                iov++;
                poff = 0;
            }
        }
        t->pcrc = crc;
        t->plen = (uint32_t)n;
        t->retx = 0;
        t->sacked = 0;
        t->first_ns = now;
        if (p->snd_nxt == p->snd_una) {
            p->unacked_since = now;
            p->progress_ns = now;
        }
        p->snd_nxt++;
        CNT_TX(p, tx_data, 1);
        batch[nb++] = t;
        if (nb == TX_BATCH) {
            vmmc_udp__xmit(l, p, batch, nb, now);
            nb = 0;
            now = vmmc_udp_now();
        }
        off += n;
        left -= n;
        first = 0;
    } while (left);
    if (nb)
        vmmc_udp__xmit(l, p, batch, nb, now);
    pthread_mutex_unlock(&p->lock);
    return st;
}

int vmmc_udp_link_send_ex(vmmc_udp_link_t *l, uint32_t id, const vmmc_udp_rec_t *rec,
                          const void *data, size_t len, int nonblock)
{
    if (VMMC_UNLIKELY(len && !data))
        return vmmc_error(VMMC_ERR_INVALID, "udp link: NULL data");
    struct iovec one = {(void *)data, len};
    return link_sendv(l, id, rec, &one, len, nonblock);
}

int vmmc_udp_link_sendv(vmmc_udp_link_t *l, uint32_t id, const vmmc_udp_rec_t *rec,
                        const struct iovec *iov, int iovcnt, int nonblock)
{
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (VMMC_UNLIKELY(iov[i].iov_len && !iov[i].iov_base))
            return vmmc_error(VMMC_ERR_INVALID, "udp link: NULL piece %d", i);
        if (VMMC_UNLIKELY(iov[i].iov_len > SIZE_MAX - len))
            return vmmc_error(VMMC_ERR_INVALID, "udp link: pieces overflow");
        len += iov[i].iov_len;
    }
    struct iovec none = {NULL, 0};
    return link_sendv(l, id, rec, iovcnt ? iov : &none, len, nonblock);
}

static int vmmc_udp__wait(vmmc_udp_link_t *l, uint32_t id, int timeout_ms, int delivered);

int vmmc_udp_link_flush(vmmc_udp_link_t *l, uint32_t id, int timeout_ms)
{
    return vmmc_udp__wait(l, id, timeout_ms, 0);
}

int vmmc_udp_link_sync(vmmc_udp_link_t *l, uint32_t id, int timeout_ms, int unless_busy)
{
    return vmmc_udp__wait(l, id, timeout_ms, unless_busy ? 2 : 1);
}

/* @delivered: 0 wait for acks, 1 for delivery, 2 for delivery unless the
 * peer's receiver says it is busy. */
static int outstanding(const peer_t *p, int delivered)
{
    if (delivered == 2 && p->peer_busy && p->snd_una == p->snd_nxt)
        return 0;
    return delivered ? p->peer_dlv != p->snd_nxt - 1 : p->snd_una != p->snd_nxt;
}

/* Wait until everything sent to @id is acknowledged (@delivered: handed to
 * the peer's receive callback). */
static int vmmc_udp__wait(vmmc_udp_link_t *l, uint32_t id, int timeout_ms, int delivered)
{
    peer_t *p = peer_get(l, id);
    if (!p || p->state == PEER_NONE)
        return vmmc_error(VMMC_ERR_NOT_FOUND, "udp link: no peer %u", id);
    struct timespec ts;
    if (timeout_ms >= 0)
        abs_deadline(&ts, (uint64_t)timeout_ms * 1000000ull);
    int in_progress_thread = vmmc_udp__rx_owner(l);
    int st = VMMC_OK;
    pthread_mutex_lock(&p->lock);
    if (!in_progress_thread && outstanding(p, delivered))
        vmmc_udp_link_idle(l); /* the reports come through the progress thread */
    while (outstanding(p, delivered)) {
        if (p->state != PEER_ALIVE) {
            st = peer_status(l, p, id);
            break;
        }
        if (in_progress_thread) {
            pthread_mutex_unlock(&p->lock);
            vmmc_udp__progress_nested(l, 1000000);
            pthread_mutex_lock(&p->lock);
            if (timeout_ms >= 0) {
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (now.tv_sec > ts.tv_sec || (now.tv_sec == ts.tv_sec && now.tv_nsec >= ts.tv_nsec)) {
                    st = vmmc_error(VMMC_ERR_TIMEOUT, "udp link: flush to peer %u timed out", id);
                    break;
                }
            }
        } else if (timeout_ms >= 0) {
            if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT &&
                outstanding(p, delivered)) {
                st = vmmc_error(VMMC_ERR_TIMEOUT, "udp link: flush to peer %u timed out "
                                "(%u datagrams unacknowledged)", id, p->snd_nxt - p->snd_una);
                break;
            }
        } else {
            struct timespec t2;
            abs_deadline(&t2, 100000000);
            pthread_cond_timedwait(&p->cond, &p->lock, &t2);
        }
    }
    pthread_mutex_unlock(&p->lock);
    return st;
}

/* ---- counters ----------------------------------------------------------- */

#define C(f) {#f, offsetof(vmmc_udp_counters_t, f)}
static const struct {
    const char *name;
    size_t off;
} counter_names[] = {
    C(tx_dgrams), C(tx_bytes), C(rx_dgrams), C(rx_bytes), C(tx_data), C(retransmits),
    C(fast_retransmits), C(rto_expiries), C(acks_sent), C(keepalives_sent),
    C(delivered_frags), C(delivered_bytes), C(drop_truncated), C(drop_magic),
    C(drop_version), C(drop_header), C(drop_auth), C(drop_unknown_peer), C(drop_bad_token),
    C(drop_window), C(drop_duplicate), C(drop_bad_ack), C(drop_replay), C(drop_dead_peer),
    C(peers_dead), C(loss_probes),
    C(send_errors), C(window_waits), C(deliver_busy),
};
#undef C

static uint64_t counter_sum(vmmc_udp_link_t *l, size_t off)
{
    uint64_t v = __atomic_load_n((uint64_t *)((char *)&l->c + off), __ATOMIC_RELAXED);
    FOR_PEERS(l, i, p)
        v += __atomic_load_n((uint64_t *)((char *)&p->c + off), __ATOMIC_RELAXED);
    return v;
}

void vmmc_udp_link_counters(vmmc_udp_link_t *l, vmmc_udp_counters_t *c)
{
    for (size_t i = 0; i < sizeof counter_names / sizeof counter_names[0]; i++)
        *(uint64_t *)((char *)c + counter_names[i].off) = counter_sum(l, counter_names[i].off);
}

int vmmc_udp_link_counter_get(vmmc_udp_link_t *l, int i, const char **name, uint64_t *value)
{
    if (i < 0 || (size_t)i >= sizeof counter_names / sizeof counter_names[0])
        return VMMC_ERR_NOT_FOUND;
    *name = counter_names[i].name;
    *value = counter_sum(l, counter_names[i].off);
    return VMMC_OK;
}
