/* An upgraded connection's byte path, the receive side: recv, FIONREAD, and
 * the helpers both directions share (retire, rx_poll, credit). The send side
 * is in sock_conn_tx.c, posted receives in sock_zcopy.c.
 *
 * The hot path of a small send is: read the credit word (local), copy into
 * the peer's mapped ring, store the tail (release), a fence and a load of the
 * want_data word, and vmmc_signal() only when the peer's reader announced
 * that it sleeps. A small recv: load the tail (local), copy out, store the
 * credit into the peer's ring, a fence and a load of want_credit. No system
 * call, no allocation, no lock beyond the caller's rx_lock/tx_lock.
 *
 * Over udp (no mapping) the words travel as 8-byte sends after the data
 * (sends to one peer land in order), the reader publishes its credit in
 * batches (a quarter of the ring, or when the writer asked), and each side
 * signals after each publication: a word in flight cannot be ordered with a
 * flag the other side reads. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include "sock/sock_conn_priv.h"
#include "sock/sock_sys.h"
#include "util/log.h"


/* Both directions on TCP (REVERT answered both ways): back to the kernel.
 * Called with the direction locks @p have_tx / @p have_rx held; the others
 * are tried, never waited for (their holder looks again when it is done).
 * A conn that never attached (an abandoned upgrade: the ACK said no) had no
 * writer in its ring, so its reader has nothing there to finish: the
 * sender's lock alone retires it. Otherwise a reader that finished while the
 * sender still held its lock, and a sender that finished while the reader
 * still held its own, would each leave it to the other, and the socket would
 * stay upgraded in name over a TCP stream. */
void sock_conn_maybe_retire(sock_conn_t *c, int have_tx, int have_rx)
{
    int st = atomic_load(&c->st);
    if ((st & (C_TX_TCP | C_REV_ACKED)) != (C_TX_TCP | C_REV_ACKED) || (st & C_RETIRED))
        return;
    if (!(st & C_ATTACHED))
        have_rx = 1;
    sock_t *s = c->s;
    int got_tx = 0, got_rx = 0;
    if (!have_tx) {
        if (pthread_mutex_trylock(&s->tx_lock) != 0)
            return;
        got_tx = 1;
    }
    if (!have_rx) {
        if (pthread_mutex_trylock(&s->rx_lock) != 0)
            goto out;
        got_rx = 1;
    }
    if (!sock_zc_pending(c)) /* direct bytes still to read: the reader retires it */
        sock_conn_retire_why(c, c->rev_why);
    if (got_rx)
        pthread_mutex_unlock(&s->rx_lock);
out:
    if (got_tx)
        pthread_mutex_unlock(&s->tx_lock);
}

/* ------------------------------------------------------------------------ */
/* receive */

int sock_conn_rx_poll(sock_conn_t *c, uint64_t *tailp)
{
    uint64_t tail = sock_rx_word(&c->rx, SOCK_HDR_TAIL), last = atomic_load(&c->tail);
    if (VMMC_UNLIKELY(tail < last || tail - c->head > c->rx.size))
        return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                              "the peer's tail %" PRIu64 " is not within [%" PRIu64
                              ", %" PRIu64 "]",
                              tail, last, c->head + c->rx.size);
    atomic_store(&c->tail, tail);
    int st = atomic_load(&c->st);
    if (VMMC_UNLIKELY(!(st & C_PEER_FIN))) {
        uint64_t fl = sock_rx_word(&c->rx, SOCK_HDR_FLAGS);
        if (fl & (SOCK_RING_FIN | SOCK_RING_RST)) {
            uint64_t fin = sock_rx_word(&c->rx, SOCK_HDR_FIN_AT);
            uint64_t t2 = sock_rx_word(&c->rx, SOCK_HDR_TAIL);
            if (fin != t2 || fin < tail || fin - c->head > c->rx.size)
                return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                                      "the peer's FIN at %" PRIu64 " does not match its tail %"
                                      PRIu64, fin, t2);
            c->fin_at = fin;
            atomic_store(&c->tail, fin);
            tail = fin;
            atomic_fetch_or(&c->st, C_PEER_FIN);
            st |= C_PEER_FIN;
        }
    }
    if (VMMC_UNLIKELY((st & C_PEER_FIN) && !(st & C_RESET)) &&
        (sock_rx_word(&c->rx, SOCK_HDR_FLAGS) & SOCK_RING_RST)) {
        /* a reset after the FIN: the peer closed with bytes unread */
        atomic_fetch_or(&c->st, C_RESET | C_EPIPE);
        vmmc_error(VMMC_ERR_PEER_DEAD, "sock: fd %d: the peer reset the connection", c->s->fd);
    }
    *tailp = tail;
    return 0;
}

/* Tell the writer what I consumed. */
void sock_conn_publish_credit(sock_conn_t *c)
{
    int st = atomic_load(&c->st);
    if (!(st & C_ATTACHED) || (st & (C_TX_TCP | C_RETIRED)))
        return;
    uint64_t wc = sock_rx_word(&c->rx, SOCK_HDR_WANT_CREDIT);
    if (c->tx.map) {
        sock_tx_word(&c->tx, SOCK_HDR_CREDIT, c->head);
        c->credit_pub = c->head;
        atomic_thread_fence(memory_order_seq_cst);
        wc = sock_rx_word(&c->rx, SOCK_HDR_WANT_CREDIT);
        if (wc != c->want_credit_seen) {
            c->want_credit_seen = wc;
            (void)vmmc_signal(c->ep, c->peer);
        }
        return;
    }
    if (c->head - c->credit_pub >= c->rx.size / 4 || wc != c->want_credit_seen ||
        c->head == atomic_load(&c->tail)) {
        c->want_credit_seen = wc;
        if (sock_tx_word(&c->tx, SOCK_HDR_CREDIT, c->head) == VMMC_OK)
            c->credit_pub = c->head;
        (void)vmmc_signal(c->ep, c->peer);
    }
}

/* A reader about to sleep: announce it (the writer signals), then look. */
static int rx_recheck(void *arg)
{
    sock_conn_t *c = arg;
    int st = atomic_load(&c->st);
    /* bytes read before the conn was attached (the server writes as soon
     * as it sent ACK) still owe the writer their credit */
    if ((st & C_ATTACHED) && c->credit_pub != c->head)
        sock_conn_publish_credit(c);
    if ((st & C_ATTACHED) && c->tx.map && !(st & (C_TX_TCP | C_RETIRED))) {
        sock_tx_word(&c->tx, SOCK_HDR_WANT_DATA, atomic_fetch_add(&c->want_data_seq, 1) + 1);
        atomic_thread_fence(memory_order_seq_cst);
    }
    if (sock_conn_tcp_pending(c))
        return 1;
    st = atomic_load(&c->st);
    if (st & (C_RESET | C_DEAD | C_PEER_FIN | C_RETIRED | C_REV_ACKED) ||
        (st & (C_REV_PEER | C_TX_TCP)) == C_REV_PEER)
        return 1;
    if (st & C_REV_SENT)
        return 0; /* the ring is dropped: only the TCP side can bring news */
    return sock_rx_word(&c->rx, SOCK_HDR_TAIL) != c->head || sock_zc_pending(c) ||
           sock_rx_word(&c->rx, SOCK_HDR_FLAGS) != 0;
}

/* Read from the TCP side (after a revert), as the kernel would. */
static ssize_t tcp_recv(sock_conn_t *c, const struct iovec *iov, int iovcnt, int flags,
                        uint64_t deadline)
{
    for (;;) {
        struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
        ssize_t n = sys_recvmsg(c->s->fd, &m, flags | MSG_DONTWAIT);
        if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return n;
        int left = sock_left_ms(deadline);
        if (left == 0 || (flags & MSG_DONTWAIT)) {
            errno = EAGAIN;
            return -1;
        }
        if (sock_wait(NULL, c->s->fd, left, NULL, NULL) < 0)
            return -1;
    }
}

/* Direct bytes first (sock_zcopy.c): a record or spilled bytes wait, or
 * a posting must be withdrawn because the ring (or a record) has news.
 * ZC_NONE: nothing to do; ZC_AGAIN: *got may have moved, read on;
 * ZC_RETURN: the call returns *out (what it got, or -1 with errno set). */
enum { ZC_NONE, ZC_AGAIN, ZC_RETURN };
static int zc_step(sock_conn_t *c, const struct iovec *dst, int iovcnt, size_t *got,
                   size_t total, int flags, uint64_t tail, ssize_t *out)
{
    if (c->zposted ? !sock_zc_pending(c) && tail == c->head : !sock_zc_pending(c))
        return ZC_NONE;
    ssize_t k = sock_zc_read(c, dst, iovcnt, *got, total - *got, flags & MSG_PEEK, tail);
    if (k < 0) {
        *out = *got ? (ssize_t)*got : -1;
        return ZC_RETURN;
    }
    if (k && (flags & MSG_PEEK)) {
        *out = k;
        return ZC_RETURN;
    }
    *got += (size_t)k;
    if (*got == total || (*got && !(flags & MSG_WAITALL))) {
        *out = (ssize_t)*got;
        return ZC_RETURN;
    }
    return ZC_AGAIN;
}

static ssize_t recv_loop(sock_conn_t *c, const struct iovec *iov, int iovcnt, int flags,
                         int timeout_ms);

/* A peer's kernel closes its stream when the process dies, and that end can
 * overtake the last bytes the process wrote into our ring: they left before
 * it died, but over udp (or a fabric) they are still in our socket or on
 * the wire, applied by a progress thread later. Before the reader takes the
 * end without a FIN as the end of the stream, it receives what arrived
 * itself (vmmc_progress) and waits, once per connection and at most
 * SOCK_DEAD_GRACE_MS (one pass when it must not block), for the ring to
 * move. 1: it moved (read on), 0: nothing came. Under s->rx_lock. */
static int dead_settle(sock_conn_t *c, int ms)
{
    uint64_t end = vmmc_now_ns() + (uint64_t)ms * 1000000ull;
    c->dead_settled = 1;
    for (;;) {
        (void)vmmc_progress(c->ep);
        if (sock_rx_word(&c->rx, SOCK_HDR_TAIL) != c->head ||
            (sock_rx_word(&c->rx, SOCK_HDR_FLAGS) & (SOCK_RING_FIN | SOCK_RING_RST)))
            return 1;
        if (vmmc_now_ns() >= end)
            return 0;
        usleep(500);
    }
}

ssize_t sock_conn_recv(sock_conn_t *c, const struct iovec *iov, int iovcnt, int flags,
                       int timeout_ms)
{
    ssize_t r = recv_loop(c, iov, iovcnt, flags, timeout_ms);
    if (VMMC_UNLIKELY(c->zposted)) {
        /* every way out withdraws the posting; bytes placed meanwhile
         * (right after the r returned) are counted, whatever ended the wait */
        int e = errno;
        ssize_t k = sock_zc_cancel(c);
        if (k > 0)
            return (r > 0 ? r : 0) + k;
        errno = e;
    }
    return r;
}

static ssize_t recv_loop(sock_conn_t *c, const struct iovec *iov, int iovcnt, int flags,
                         int timeout_ms)
{
    size_t total = sock_iov_total(iov, iovcnt), got = 0;
    if (!total)
        return 0;
    const struct iovec *dst = (flags & MSG_TRUNC) ? NULL : iov;
    uint64_t deadline = timeout_ms > 0 ? vmmc_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
    uint64_t spin_end = 0;
    for (;;) {
        int st = atomic_load(&c->st);
        if (st & C_SHUT_RD)
            return (ssize_t)got;
        if (VMMC_UNLIKELY(st & (C_REV_SENT | C_REV_PEER | C_REV_ACKED | C_RX_TCP | C_RETIRED))) {
            /* going back to TCP: answer the peer's REVERT, then read TCP
             * once its REVERT_ACK came (the bytes it resends follow it);
             * direct bytes placed before it come first (the peer made its
             * vmmc writes land before its REVERT): withdraw, then take them */
            if (VMMC_UNLIKELY(c->zposted)) {
                ssize_t k = sock_zc_cancel(c);
                if (k < 0)
                    return got ? (ssize_t)got : -1;
                got += (size_t)k;
                if (k && (got == total || !(flags & MSG_WAITALL)))
                    return (ssize_t)got;
            }
            ssize_t zr = 0;
            int z = zc_step(c, dst, iovcnt, &got, total, flags, atomic_load(&c->tail), &zr);
            if (z == ZC_RETURN)
                return zr;
            if (z == ZC_AGAIN)
                continue;
            if ((st & (C_REV_PEER | C_TX_TCP)) == C_REV_PEER)
                sock_revert_answer_rx(c);
            sock_conn_maybe_retire(c, 0, 1);
            st = atomic_load(&c->st);
            if (st & C_RETIRED) {
                if (got)
                    return (ssize_t)got;
                errno = EAGAIN; /* the caller asks the kernel now */
                return -1;
            }
            if (st & (C_RESET | C_DEAD)) {
                errno = ECONNRESET;
                return got ? (ssize_t)got : -1;
            }
            if (sock_zc_pending(c))
                continue; /* a record that came meanwhile: before the TCP bytes */
            if (st & C_REV_ACKED)
                return got ? (ssize_t)got
                           : tcp_recv(c, iov, iovcnt, flags | (timeout_ms == 0 ? MSG_DONTWAIT : 0),
                                      deadline);
            if (st & C_REV_SENT) {
                if (got || timeout_ms == 0) {
                    if (got)
                        return (ssize_t)got;
                    errno = EAGAIN;
                    return -1;
                }
                int r = sock_wait(c->ctx, c->s->fd, sock_left_ms(deadline), rx_recheck, c);
                if (r < 0)
                    return -1;
                if (r == 0) {
                    errno = EAGAIN;
                    return -1;
                }
                if (sock_conn_tcp_pending(c))
                    sock_conn_on_tcp(c);
                continue;
            }
        }
        uint64_t tail;
        if (sock_conn_rx_poll(c, &tail) != 0)
            return got ? (ssize_t)got : -1;
        st = atomic_load(&c->st);
        if ((st & C_RESET) && (st & C_PEER_FIN)) {
            errno = ECONNRESET; /* the peer reset: its bytes are void, as TCP's */
            return got ? (ssize_t)got : -1;
        }
        if (VMMC_UNLIKELY(c->zposted) || VMMC_UNLIKELY(sock_zc_pending(c))) {
            ssize_t zr = 0;
            int z = zc_step(c, dst, iovcnt, &got, total, flags, tail, &zr);
            if (z == ZC_RETURN)
                return zr;
            if (z == ZC_AGAIN)
                continue;
        }
        uint64_t avail = tail - c->head;
        if (avail) {
            size_t n = avail < total - got ? (size_t)avail : total - got;
            /* A large read hands credit back piece by piece, so the writer
             * refills the ring while this copy goes on (both cores copy). */
            if (!(flags & MSG_PEEK) && n > sock_io_chunk(c->rx.size))
                n = sock_io_chunk(c->rx.size);
            sock_rx_copy(&c->rx, c->head, n, dst, iovcnt, got);
            if (flags & MSG_PEEK)
                return (ssize_t)n;
            c->head += n;
            got += n;
            atomic_fetch_add(&c->nrecv, n);
            sock_conn_publish_credit(c);
            if (got == total || (!(flags & MSG_WAITALL) && n == avail))
                return (ssize_t)got;
            continue;
        }
        if ((st & C_PEER_FIN) && c->head == c->fin_at)
            return (ssize_t)got; /* EOF */
        if (st & C_DEAD) {
            /* its end came without a FIN: the peer died; what it wrote was
             * read, now the end, as TCP gives when a process is killed */
            if (sock_rx_word(&c->rx, SOCK_HDR_TAIL) != c->head)
                continue;
            if (!c->dead_settled && dead_settle(c, timeout_ms == 0 ? 0 : SOCK_DEAD_GRACE_MS))
                continue;
            return (ssize_t)got;
        }
        if (st & C_RESET) {
            errno = ECONNRESET;
            return got ? (ssize_t)got : -1;
        }
        if (got && !(flags & MSG_WAITALL))
            return (ssize_t)got;
        if (timeout_ms == 0) {
            errno = EAGAIN;
            return -1;
        }
        if (sock_conn_tcp_pending(c))
            sock_conn_on_tcp(c);
        /* a large read: have the writer place the bytes straight here */
        if (!c->zposted && dst && !(flags & MSG_PEEK) && sock_cfg()->zcopy &&
            total - got >= sock_cfg()->zcopy && sock_zc_post(c, dst, iovcnt, got, total - got))
            continue; /* look at the ring again: bytes may have come first */
        /* spin a while, then sleep */
        int left = sock_spin_left(&spin_end, deadline);
        if (left == SOCK_SPIN_MORE)
            continue;
        if (left == 0)
            return sock_moved_or_again(got);
        int r = sock_wait(c->ctx, c->s->fd, left, rx_recheck, c);
        if (r < 0)
            return got ? (ssize_t)got : -1;
        if (sock_conn_tcp_pending(c))
            sock_conn_on_tcp(c);
    }
}

size_t sock_conn_unread(sock_conn_t *c)
{
    int st = atomic_load(&c->st);
    if (st & (C_RETIRED | C_REV_SENT)) {
        int q = 0;
        if ((st & C_REV_ACKED) && sys_ioctl(c->s->fd, FIONREAD, &q) == 0 && q > 0)
            return (size_t)q;
        return 0;
    }
    uint64_t tail = sock_rx_word(&c->rx, SOCK_HDR_TAIL), head = c->head;
    return (tail > head && tail - head <= c->rx.size ? (size_t)(tail - head) : 0) +
           sock_zc_unread(c);
}
