/* An upgraded connection: its life (open, attach, abandon, shutdown, close),
 * the TCP side's records and end, and the shared helpers of sock_conn_io.c
 * and sock_revert.c. The byte path itself is in sock_conn_io.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sock/sock_conn_priv.h"
#include "sock/sock_sys.h"
#include "sock/sock_up.h"
#include "util/log.h"

/* ------------------------------------------------------------------------ */
/* helpers */

int sock_conn_fail(sock_conn_t *c, int bits, int err, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    atomic_fetch_or(&c->st, bits);
    vmmc_error(err == ECONNRESET ? VMMC_ERR_PROTOCOL : VMMC_ERR_PEER_DEAD,
               "sock: fd %d: %s", c->s->fd, msg);
    sock_conn_wake_local(c);
    errno = err;
    return -1;
}

void sock_conn_wake_local(sock_conn_t *c)
{
    (void)vmmc_signal(c->ep, vmmc_rank(c->ep));
}

int sock_conn_tcp_fd(sock_conn_t *c)
{
    return c->s->fd;
}

int sock_conn_tcp_pending(sock_conn_t *c)
{
    struct pollfd p = {.fd = c->s->fd, .events = POLLIN | POLLRDHUP};
    return sys_poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR));
}

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

int sock_conn_tcp_write(sock_conn_t *c, const void *buf, size_t len, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = sys_sendto(c->s->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT, NULL, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        int left = -1;
        if (timeout_ms >= 0) {
            uint64_t now = now_ms();
            if (now >= deadline) {
                errno = ETIMEDOUT;
                return -1;
            }
            left = (int)(deadline - now);
        }
        struct pollfd pf = {.fd = c->s->fd, .events = POLLOUT};
        if (sys_poll(&pf, 1, left) < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

/* Reverted and abandoned conns are kept a while before they are freed: a
 * poll in another thread may still be looking at one (sock_conn_ready runs
 * without the socket's locks). */
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
static sock_conn_t *retired;
enum { RETIRE_GRACE_MS = 2000 };

static void free_conn(sock_conn_t *c)
{
    sock_zc_free(c);
    sock_tx_close(&c->tx);
    sock_rx_close(&c->rx);
    free(c->lbuf);
    pthread_mutex_destroy(&c->tcp_lock);
    free(c);
}

static void reap_retired(int all)
{
    uint64_t now = now_ms();
    pthread_mutex_lock(&retired_lock);
    sock_conn_t **pp = &retired;
    while (*pp) {
        sock_conn_t *c = *pp;
        if (all || now - c->fin_at >= RETIRE_GRACE_MS) {
            *pp = c->next_retired;
            free_conn(c);
        } else {
            pp = &c->next_retired;
        }
    }
    pthread_mutex_unlock(&retired_lock);
}

static void unwatch(sock_conn_t *c)
{
    if (atomic_fetch_and(&c->st, ~C_WATCHED) & C_WATCHED)
        sock_ctx_unwatch(c->s->fd, c);
}

/* Leave vmmc for good: the socket goes back to the kernel (mode KERNEL). */
static void retire(sock_conn_t *c, const char *why)
{
    if (atomic_fetch_or(&c->st, C_RETIRED) & C_RETIRED)
        return;
    unwatch(c);
    sock_t *s = c->s;
    pthread_mutex_lock(&s->lock);
    if (s->conn == c)
        s->conn = NULL;
    pthread_mutex_unlock(&s->lock);
    /* The socket is the kernel's from here: say so before the teardown,
     * which may take a while (a remote unexport), so that no caller sees
     * an upgraded mode without its conn meanwhile. */
    sock_set_mode(s, VMMC_SOCK_KERNEL);
    sock_tx_close(&c->tx);
    sock_zc_unexport(c);
    if (c->rx.ex)
        vmmc_unexport(c->rx.ex);
    c->rx.ex = NULL;
    if (sock_cfg()->debug && why)
        fprintf(stderr, "vmmc-sock[%d]: fd %d reverted to tcp (%s)\n", (int)getpid(), s->fd, why);
    c->fin_at = now_ms(); /* reused: when it retired */
    pthread_mutex_lock(&retired_lock);
    c->next_retired = retired;
    retired = c;
    pthread_mutex_unlock(&retired_lock);
}

void sock_conn_retire(sock_conn_t *c)
{
    retire(c, "peer");
}

void sock_conn_retire_why(sock_conn_t *c, const char *why)
{
    retire(c, why);
}

/* ------------------------------------------------------------------------ */
/* open, attach, abandon */

static void tcp_cb(int fd, short revents, void *arg)
{
    (void)fd;
    (void)revents;
    sock_conn_on_tcp(arg);
}

int sock_conn_open(sock_ctx_t *ctx, sock_t *s, int peer, sock_conn_t **out,
                   sock_ring_ref_t *mine)
{
    reap_retired(0);
    sock_conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        vmmc_error(VMMC_ERR_NOMEM, "sock: no memory for a connection");
        errno = ENOMEM;
        return -1;
    }
    c->s = s;
    c->ctx = ctx;
    c->ep = sock_ctx_ep(ctx);
    c->peer = peer;
    pthread_mutex_init(&c->tcp_lock, NULL);
    int rc = sock_rx_open(&c->rx, c->ep, sock_cfg()->ring, peer);
    if (rc != VMMC_OK) {
        pthread_mutex_destroy(&c->tcp_lock);
        free(c);
        errno = rc == VMMC_ERR_NOMEM ? ENOMEM : EIO;
        return -1;
    }
    memset(mine, 0, sizeof *mine);
    size_t alen = sizeof mine->addr;
    rc = vmmc_ep_addr(c->ep, mine->addr, &alen);
    if (rc != VMMC_OK) {
        free_conn(c);
        errno = EIO;
        return -1;
    }
    mine->addr_len = (uint16_t)alen;
    memcpy(mine->name, c->rx.name, sizeof mine->name);
    mine->size = c->rx.size;
    if (sock_ctx_watch(s->fd, POLLIN | POLLRDHUP, tcp_cb, c) != 0) {
        int e = errno;
        free_conn(c);
        errno = e;
        return -1;
    }
    atomic_fetch_or(&c->st, C_WATCHED);
    *out = c;
    return 0;
}

static int send_fin(sock_conn_t *c, uint64_t flags);

/* A FIN that shutdown() deferred until the ACK (C_FIN_WANT): it follows the
 * last byte of the local buffer (tx_lock held). On TCP (the upgrade was
 * refused) it is the kernel's FIN. */
static int deferred_fin(sock_conn_t *c)
{
    int st = atomic_load(&c->st);
    if ((st & (C_FIN_WANT | C_FIN_SENT)) != C_FIN_WANT)
        return 0;
    if (st & C_TX_TCP) {
        int rc = 0;
        if (c->llen && sock_conn_tcp_write(c, c->lbuf, c->llen, -1) != 0)
            rc = -1;
        c->llen = 0;
        if (sys_shutdown(c->s->fd, SHUT_WR) != 0)
            rc = -1;
        atomic_fetch_or(&c->st, C_FIN_SENT);
        return rc;
    }
    if (!(st & C_ATTACHED) || c->llen)
        return 0;
    if (send_fin(c, SOCK_RING_FIN) != 0)
        return sock_conn_fail(c, C_EPIPE, EPIPE, "cannot write FIN to the peer");
    return 0;
}

/* Move the local buffer into the peer's ring, as much as fits (tx side). */
int sock_conn_flush_local(sock_conn_t *c)
{
    if (!c->llen)
        return deferred_fin(c);
    uint64_t credit = sock_rx_word(&c->rx, SOCK_HDR_CREDIT);
    uint64_t sent = atomic_load(&c->sent);
    if (credit < c->credit || credit > sent)
        return sock_conn_fail(c, C_RESET, ECONNRESET, "the peer's credit %" PRIu64
                              " is not within [%" PRIu64 ", %" PRIu64 "]",
                              credit, c->credit, sent);
    c->credit = credit;
    uint64_t room = c->tx.size - (sent - credit);
    size_t n = c->llen < room ? c->llen : (size_t)room;
    if (!n)
        return 0;
    struct iovec v = {c->lbuf, n};
    if (sock_tx_put(&c->tx, sent, &v, 1, 0, n) != VMMC_OK ||
        sock_tx_word(&c->tx, SOCK_HDR_TAIL, sent + n) != VMMC_OK)
        return sock_conn_fail(c, C_EPIPE, EPIPE, "the peer's ring cannot be written");
    atomic_store(&c->sent, sent + n);
    atomic_fetch_add(&c->nsent, n);
    memmove(c->lbuf, c->lbuf + n, c->llen - n);
    c->llen -= n;
    (void)vmmc_signal(c->ep, c->peer);
    return deferred_fin(c);
}

int sock_conn_tx_owed(sock_conn_t *c)
{
    return c->llen != 0;
}

void sock_conn_tx_after(sock_t *s)
{
    /* s->lock keeps the conn from being freed (close clears s->conn under
     * it first); tx_lock is only tried under it (order: tx_lock first). A
     * writer that holds tx_lock now does this check itself when it is done. */
    pthread_mutex_lock(&s->lock);
    sock_conn_t *c = s->conn;
    if (c && (atomic_load(&c->st) & (C_ATTACHED | C_TX_TCP)) &&
        pthread_mutex_trylock(&s->tx_lock) == 0) {
        int st = atomic_load(&c->st);
        if (!(st & (C_RETIRED | C_RESET | C_DEAD | C_EPIPE)) && c->llen) {
            if (st & C_TX_TCP) {
                if (sock_conn_tcp_write(c, c->lbuf, c->llen, -1) == 0)
                    c->llen = 0;
            } else {
                (void)sock_conn_flush_local(c);
            }
        }
        pthread_mutex_unlock(&s->tx_lock);
    }
    pthread_mutex_unlock(&s->lock);
}

int sock_conn_attach(sock_conn_t *c, const sock_ring_ref_t *theirs, int timeout_ms)
{
    if (theirs->addr_len == 0 || theirs->addr_len > VMMC_ADDR_MAX ||
        memchr(theirs->name, 0, sizeof theirs->name) == NULL || theirs->name[0] == 0) {
        vmmc_error(VMMC_ERR_PROTOCOL, "sock: fd %d: the peer's ring description is malformed",
                   c->s->fd);
        errno = EPROTO;
        return -1;
    }
    if (c->peer < 0 && sock_ctx_connect(c->ctx, theirs->addr, theirs->addr_len, &c->peer) != 0)
        return -1;
    int rc = sock_tx_open(&c->tx, c->ep, c->peer, theirs->name, theirs->size, timeout_ms);
    if (rc != VMMC_OK) {
        errno = rc == VMMC_ERR_TIMEOUT ? ETIMEDOUT : rc == VMMC_ERR_PROTOCOL ? EPROTO : ECONNREFUSED;
        return -1;
    }
    snprintf(c->zname, sizeof c->zname, "%.61s.z", theirs->name); /* its window */
    atomic_fetch_or(&c->st, C_ATTACHED);
    /* Bytes read meanwhile owe their credit; a reader that holds rx_lock
     * publishes it itself before it sleeps. */
    if (pthread_mutex_trylock(&c->s->rx_lock) == 0) {
        if (c->head != c->credit_pub)
            sock_conn_publish_credit(c);
        pthread_mutex_unlock(&c->s->rx_lock);
    }
    /* A sender (or shutdown) that holds tx_lock flushes the local buffer
     * (and a deferred FIN) itself. */
    if ((c->llen || (atomic_load(&c->st) & C_FIN_WANT)) &&
        pthread_mutex_trylock(&c->s->tx_lock) == 0) {
        (void)sock_conn_flush_local(c);
        pthread_mutex_unlock(&c->s->tx_lock);
    }
    sock_conn_wake_local(c);
    return 0;
}

int sock_conn_abandon(sock_conn_t *c)
{
    sock_t *s = c->s;
    int rc = 0;
    /* The local buffer is the writer's (tx_lock): a sender that holds the
     * lock sees C_TX_TCP, writes what waits there first, then retires the
     * conn; else that is done here. */
    atomic_fetch_or(&c->st, C_TX_TCP | C_RX_TCP | C_REV_ACKED);
    if (pthread_mutex_trylock(&s->tx_lock) == 0) {
        if (deferred_fin(c) != 0)
            rc = -1;
        if (c->llen && sock_conn_tcp_write(c, c->lbuf, c->llen, -1) != 0)
            rc = -1;
        c->llen = 0;
        sock_conn_maybe_retire(c, 1, 0);
        pthread_mutex_unlock(&s->tx_lock);
    }
    sock_conn_wake_local(c);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* the TCP side */

/* Does the stream from the peer still carry records? */
static int expects_records(int st)
{
    /* every revert ends with the peer's REVERT_ACK; data follows it */
    return !(st & (C_RETIRED | C_DEAD | C_REV_ACKED | C_RX_TCP));
}

void sock_conn_on_tcp(sock_conn_t *c)
{
    if (pthread_mutex_trylock(&c->tcp_lock) != 0)
        return; /* another thread is at it */
    for (;;) {
        int st = atomic_load(&c->st);
        if (!expects_records(st)) {
            if (!(st & (C_RETIRED)))
                unwatch(c); /* data now, for the reader */
            break;
        }
        sock_rec_t r;
        ssize_t n = sys_recvfrom(c->s->fd, &r, sizeof r, MSG_PEEK | MSG_DONTWAIT, NULL, NULL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            break;
        if (n <= 0) {
            /* The peer's end: a FIN in the ring says it closed; without
             * one, it died (its kernel closed the stream). */
            uint64_t fl = sock_rx_word(&c->rx, SOCK_HDR_FLAGS);
            if (!(fl & (SOCK_RING_FIN | SOCK_RING_RST)))
                atomic_fetch_or(&c->st, C_DEAD | C_EPIPE);
            else
                atomic_fetch_or(&c->st, C_DEAD);
            unwatch(c);
            sock_conn_wake_local(c);
            break;
        }
        if ((size_t)n < sizeof r)
            break; /* the rest of the record is on its way */
        if (sock_rec_read(c->s->fd, &r, 0) != 0) {
            sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                           "the TCP stream carries no valid record: %s", vmmc_last_error());
            unwatch(c);
            break;
        }
        if (r.type == SOCK_REC_ACK && !(st & C_ATTACHED)) {
            if (r.status != 0) {
                pthread_mutex_unlock(&c->tcp_lock);
                sock_up_acked(c->s, r.status, NULL);
                (void)sock_conn_abandon(c);
                return;
            }
            if (sock_conn_attach(c, &r.ring, (int)(sock_cfg()->hello_timeout_ns / 1000000)) != 0) {
                sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                               "cannot reach the peer's ring: %s", vmmc_last_error());
                sock_up_say(c->s, "reset", "server ring unreachable", "client");
            } else {
                vmmc_sock_info_t info;
                sock_conn_info(c, &info);
                sock_up_acked(c->s, 0, info.transport);
            }
        } else if (r.type == SOCK_REC_REVERT && (st & C_ATTACHED) && !(st & C_REV_PEER)) {
            sock_revert_on_peer(c, &r);
        } else if (r.type == SOCK_REC_REVERT_ACK && (st & C_REV_SENT)) {
            sock_revert_on_ack(c);
        } else {
            sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                           "record %u is not expected on an upgraded connection", r.type);
            unwatch(c);
            break;
        }
    }
    pthread_mutex_unlock(&c->tcp_lock);
}

/* ------------------------------------------------------------------------ */
/* shutdown, close, info */

/* Put FIN (and RST) in the peer's ring after my last byte (tx_lock held). */
static int send_fin(sock_conn_t *c, uint64_t flags)
{
    int st = atomic_load(&c->st);
    if (!(st & C_ATTACHED) || (st & (C_TX_TCP | C_RETIRED)))
        return 0;
    if (sock_tx_word(&c->tx, SOCK_HDR_FIN_AT, atomic_load(&c->sent)) != VMMC_OK ||
        sock_tx_word(&c->tx, SOCK_HDR_FLAGS, flags) != VMMC_OK)
        return -1;
    atomic_fetch_or(&c->st, C_FIN_SENT);
    (void)sock_tx_fence(&c->tx);
    (void)vmmc_signal(c->ep, c->peer);
    return 0;
}

/* A client that closes before the ACK came waits (bounded) for it, so that
 * what it wrote reaches the peer. */
static int attached_check(void *arg)
{
    sock_conn_t *c = arg;
    if (sock_conn_tcp_pending(c))
        sock_conn_on_tcp(c);
    return (atomic_load(&c->st) & (C_ATTACHED | C_RESET | C_DEAD | C_TX_TCP | C_RETIRED)) != 0;
}

static void wait_attached(sock_conn_t *c)
{
    uint64_t deadline = now_ms() + sock_cfg()->hello_timeout_ns / 1000000;
    while (!attached_check(c)) {
        uint64_t now = now_ms();
        if (now >= deadline)
            break;
        if (sock_wait(c->ctx, c->s->fd, (int)(deadline - now), attached_check, c) < 0 &&
            errno != EINTR)
            break;
    }
}

int sock_conn_shutdown(sock_conn_t *c, int how)
{
    sock_t *s = c->s;
    int rc = 0;
    if (how == SHUT_RD || how == SHUT_RDWR)
        atomic_fetch_or(&c->st, C_SHUT_RD);
    if (how == SHUT_WR || how == SHUT_RDWR) {
        pthread_mutex_lock(&s->tx_lock);
        int st = atomic_load(&c->st);
        if (st & C_TX_TCP) {
            rc = sys_shutdown(s->fd, SHUT_WR);
        } else if (!(st & C_ATTACHED)) {
            /* Before the ACK: the FIN follows the local buffer at attach.
             * Waiting for the ACK here could wait for good: the peer
             * answers the HELLO at its first call, maybe after this one. */
            atomic_fetch_or(&c->st, C_FIN_WANT);
        } else if (!(st & (C_FIN_SENT | C_FIN_WANT))) {
            while (c->llen && (atomic_load(&c->st) & C_ATTACHED) &&
                   !(atomic_load(&c->st) & (C_RESET | C_DEAD | C_EPIPE))) {
                if (sock_conn_flush_local(c) != 0)
                    break;
                if (c->llen)
                    (void)sock_wait(c->ctx, s->fd, 100, NULL, NULL);
            }
            if (send_fin(c, SOCK_RING_FIN) != 0)
                rc = sock_conn_fail(c, C_EPIPE, EPIPE, "cannot write FIN to the peer");
            else
                atomic_fetch_or(&c->st, C_FIN_SENT);
        }
        pthread_mutex_unlock(&s->tx_lock);
        /* An ACK handled while tx_lock was held here could not flush (its
         * trylock failed): the deferred FIN is sent now. */
        st = atomic_load(&c->st);
        if ((st & (C_FIN_WANT | C_FIN_SENT)) == C_FIN_WANT && (st & (C_ATTACHED | C_TX_TCP))) {
            pthread_mutex_lock(&s->tx_lock);
            if (st & C_TX_TCP) {
                if (deferred_fin(c) != 0)
                    rc = -1;
                sock_conn_maybe_retire(c, 1, 0);
            } else {
                while (sock_conn_flush_local(c) == 0 && c->llen &&
                       !(atomic_load(&c->st) & (C_RESET | C_DEAD | C_EPIPE)))
                    (void)sock_wait(c->ctx, s->fd, 100, NULL, NULL);
            }
            pthread_mutex_unlock(&s->tx_lock);
        }
    }
    sock_conn_wake_local(c);
    return rc;
}

int sock_conn_close(sock_conn_t *c)
{
    sock_t *s = c->s;
    int st = atomic_load(&c->st);
    if (!(st & C_ATTACHED) && c->llen && !(st & (C_RESET | C_DEAD | C_TX_TCP)))
        wait_attached(c);
    pthread_mutex_lock(&s->tx_lock);
    pthread_mutex_lock(&s->rx_lock);
    st = atomic_load(&c->st);
    if (st & C_RETIRED) {
        pthread_mutex_unlock(&s->rx_lock);
        pthread_mutex_unlock(&s->tx_lock);
        return 0; /* on the kernel already: the retired list frees it */
    }
    unwatch(c);
    if ((st & C_ATTACHED) && !(st & (C_RESET | C_TX_TCP))) {
        while (c->llen && sock_conn_flush_local(c) == 0 && c->llen)
            (void)sock_wait(c->ctx, -1, 100, NULL, NULL);
        uint64_t tail = sock_rx_word(&c->rx, SOCK_HDR_TAIL);
        /* unread bytes make it a reset, as TCP does */
        (void)send_fin(c, SOCK_RING_FIN |
                              (tail != c->head || sock_zc_pending(c) ? SOCK_RING_RST : 0));
    }
    pthread_mutex_lock(&s->lock);
    if (s->conn == c)
        s->conn = NULL;
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&s->rx_lock);
    pthread_mutex_unlock(&s->tx_lock);
    free_conn(c);
    return 0;
}

void sock_conn_info(sock_conn_t *c, vmmc_sock_info_t *info)
{
    info->mode = VMMC_SOCK_VMMC;
    snprintf(info->transport, sizeof info->transport, "%s",
             (atomic_load(&c->st) & C_ATTACHED) && !c->tx.map ? "udp" : "shm");
    info->bytes_sent = atomic_load(&c->nsent);
    info->bytes_received = atomic_load(&c->nrecv);
    info->ring_size = (size_t)c->rx.size;
}
