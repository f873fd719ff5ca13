/* The way back to TCP (fork, exec): records on the TCP stream.
 *
 * Both sides do the same, whoever begins: a side that reverts stops its ring
 * I/O (it holds both direction locks), makes its vmmc writes land (fence)
 * and sends REVERT{a = bytes it sent through vmmc, b = bytes of the peer's
 * it consumed}; its ring is dropped from then on (what the peer put there
 * past b comes again on TCP). A side that receives REVERT{a, b} and has not
 * sent its own sends it first, then (both) reads back its own bytes
 * [b, sent) from the peer's ring (mapped, or vmmc_fetch) and sends
 * REVERT_ACK followed by those bytes; it writes TCP from then on. So each
 * stream carries REVERT, REVERT_ACK, the resent bytes, then new bytes:
 * every byte once and in order, with no ring left to drain (a ring's unread
 * bytes would stay in this process's memory, which a fork does not share).
 * Each side keeps its export until the peer's REVERT_ACK (the peer reads back
 * from it until then); then both directions are on TCP and the socket goes
 * back to mode KERNEL. The one that began waits for that at most
 * VMMC_SOCK_REVERT_TIMEOUT; the other finishes from whichever thread holds
 * the socket's locks (the sock thread, a reader, a writer). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sock/sock_conn_priv.h"
#include "sock/sock_sys.h"
#include "util/log.h"

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

void sock_revert_on_peer(sock_conn_t *c, const sock_rec_t *r)
{
    uint64_t sent = atomic_load(&c->sent);
    /* a: the peer's total into my ring; b: what it consumed of mine.
     * Hostile values reset the connection. */
    if (r->a < c->head || r->a - c->head > c->rx.size || r->b > sent || r->b < c->credit ||
        sent - r->b > c->tx.size) {
        sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                       "the peer's REVERT{%" PRIu64 ", %" PRIu64 "} does not match: consumed %"
                       PRIu64 ", sent %" PRIu64, r->a, r->b, c->head, sent);
        return;
    }
    c->rev_a = r->a;
    c->rev_b = r->b;
    if (!c->rev_why)
        c->rev_why = "peer";
    atomic_fetch_or(&c->st, C_REV_PEER);
    /* Answer here if no call holds the socket; else its holder answers. */
    if (pthread_mutex_trylock(&c->s->tx_lock) == 0) {
        if (pthread_mutex_trylock(&c->s->rx_lock) == 0) {
            (void)sock_revert_answer(c);
            sock_conn_maybe_retire(c, 1, 1);
            pthread_mutex_unlock(&c->s->rx_lock);
        }
        pthread_mutex_unlock(&c->s->tx_lock);
    }
    sock_conn_wake_local(c);
}

void sock_revert_on_ack(sock_conn_t *c)
{
    atomic_fetch_or(&c->st, C_REV_ACKED);
    sock_conn_maybe_retire(c, 0, 0);
    sock_conn_wake_local(c);
}

static sock_rec_t rec_of(int type, uint64_t a, uint64_t b)
{
    sock_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.magic = SOCK_REC_MAGIC;
    rec.version = SOCK_WIRE_VERSION;
    rec.type = (uint16_t)type;
    rec.a = a;
    rec.b = b;
    return rec;
}

/* Stop the ring and say so (both locks held). */
static int send_revert(sock_conn_t *c)
{
    (void)sock_tx_fence(&c->tx);
    sock_rec_t rec = rec_of(SOCK_REC_REVERT, atomic_load(&c->sent), c->head);
    atomic_fetch_or(&c->st, C_REV_SENT);
    if (sock_rec_write(c->s->fd, &rec) != 0)
        return sock_conn_fail(c, C_RESET | C_EPIPE, errno ? errno : EPIPE,
                              "cannot send REVERT on TCP");
    return 0;
}

int sock_revert_answer(sock_conn_t *c)
{
    int st = atomic_load(&c->st);
    if ((st & (C_REV_PEER | C_TX_TCP)) != C_REV_PEER || (st & (C_RESET | C_DEAD)))
        return 0;
    if (!(st & C_REV_SENT) && send_revert(c) != 0)
        return -1;
    int tmo = (int)(sock_cfg()->revert_timeout_ns / 1000000);
    uint64_t sent = atomic_load(&c->sent);
    size_t n = (size_t)(sent - c->rev_b);
    uint8_t *back = n ? malloc(n) : NULL;
    if (n && !back)
        return sock_conn_fail(c, C_RESET | C_EPIPE, ENOMEM, "no memory to resend %zu bytes", n);
    if (n && sock_tx_fetch(&c->tx, c->rev_b, back, n) != VMMC_OK) {
        free(back);
        return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                              "cannot read back %zu bytes from the peer's ring: %s", n,
                              vmmc_last_error());
    }
    sock_rec_t rec = rec_of(SOCK_REC_REVERT_ACK, sent, c->head);
    if (sock_rec_write(c->s->fd, &rec) != 0 ||
        (n && sock_conn_tcp_write(c, back, n, tmo) != 0)) {
        int e = errno;
        free(back);
        return sock_conn_fail(c, C_RESET | C_EPIPE, e ? e : EPIPE,
                              "cannot answer the peer's REVERT on TCP");
    }
    free(back);
    atomic_fetch_or(&c->st, C_TX_TCP);
    sock_conn_wake_local(c);
    return 0;
}

void sock_revert_answer_rx(sock_conn_t *c)
{
    sock_t *s = c->s;
    pthread_mutex_unlock(&s->rx_lock);
    pthread_mutex_lock(&s->tx_lock);
    pthread_mutex_lock(&s->rx_lock);
    (void)sock_revert_answer(c);
    sock_conn_maybe_retire(c, 1, 1);
    pthread_mutex_unlock(&s->tx_lock);
}

/* Read and handle one record while reverting (tcp_lock held): 1 handled, 0
 * none yet, -1 the stream ended or broke. */
static int revert_step(sock_conn_t *c, int wait_ms)
{
    struct pollfd p = {.fd = c->s->fd, .events = POLLIN | POLLRDHUP};
    int r = sys_poll(&p, 1, wait_ms);
    if (r <= 0)
        return 0;
    sock_rec_t rec;
    ssize_t n = sys_recvfrom(c->s->fd, &rec, sizeof rec, MSG_PEEK | MSG_DONTWAIT, NULL, NULL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0)
        return sock_conn_fail(c, C_DEAD | C_EPIPE, ECONNRESET,
                              "the peer's end came while reverting to TCP");
    if ((size_t)n < sizeof rec)
        return 0;
    if (sock_rec_read(c->s->fd, &rec, 0) != 0)
        return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                              "no valid record while reverting: %s", vmmc_last_error());
    if (rec.type == SOCK_REC_REVERT && !(atomic_load(&c->st) & C_REV_PEER))
        sock_revert_on_peer(c, &rec);
    else if (rec.type == SOCK_REC_REVERT_ACK)
        atomic_fetch_or(&c->st, C_REV_ACKED);
    else
        return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                              "record %u is not expected while reverting", rec.type);
    return 1;
}

int sock_conn_revert(sock_conn_t *c)
{
    sock_t *s = c->s;
    const sock_cfg_t *cfg = sock_cfg();
    uint64_t deadline = now_ms() + cfg->revert_timeout_ns / 1000000;
    pthread_mutex_lock(&s->tx_lock);
    pthread_mutex_lock(&s->rx_lock);
    int st = atomic_load(&c->st);
    int rc = 0;
    if (st & C_RETIRED)
        goto out;
    if (!c->rev_why)
        c->rev_why = "fork";
    if (!(st & C_ATTACHED) || (st & (C_RESET | C_DEAD))) {
        /* nothing went through vmmc that the peer could miss, or it is
         * over: the connection is the kernel's again, reset if broken */
        if (!(st & C_ATTACHED) && c->llen)
            rc = sock_conn_tcp_write(c, c->lbuf, c->llen, -1);
        c->llen = 0;
        if (st & (C_RESET | C_DEAD))
            (void)sys_shutdown(s->fd, SHUT_RDWR);
        atomic_fetch_or(&c->st, C_TX_TCP | C_REV_ACKED);
        sock_conn_retire_why(c, c->rev_why);
        goto out;
    }
    pthread_mutex_lock(&c->tcp_lock);
    if (!(st & C_REV_SENT))
        (void)send_revert(c);
    for (;;) {
        st = atomic_load(&c->st);
        if ((st & (C_REV_PEER | C_TX_TCP)) == C_REV_PEER)
            (void)sock_revert_answer(c);
        st = atomic_load(&c->st);
        if (st & (C_RESET | C_DEAD))
            break;
        if ((st & (C_REV_ACKED | C_TX_TCP)) == (C_REV_ACKED | C_TX_TCP))
            break;
        uint64_t now = now_ms();
        if (now >= deadline) {
            sock_conn_fail(c, C_RESET | C_EPIPE, ETIMEDOUT,
                           "the peer did not answer REVERT within VMMC_SOCK_REVERT_TIMEOUT");
            break;
        }
        uint64_t w = deadline - now;
        (void)revert_step(c, w > 100 ? 100 : (int)w);
    }
    pthread_mutex_unlock(&c->tcp_lock);
    st = atomic_load(&c->st);
    if (st & (C_RESET | C_DEAD)) {
        /* broken: both ends see it reset */
        int e = errno ? errno : ECONNRESET;
        (void)sys_shutdown(s->fd, SHUT_RDWR);
        atomic_fetch_or(&c->st, C_TX_TCP | C_REV_ACKED);
        sock_conn_retire_why(c, c->rev_why);
        errno = e;
        rc = -1;
        goto out;
    }
    sock_conn_retire_why(c, c->rev_why);
out:
    pthread_mutex_unlock(&s->rx_lock);
    pthread_mutex_unlock(&s->tx_lock);
    return rc;
}
