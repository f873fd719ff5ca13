/* An upgraded connection's byte path, the send side: send, sendfile (see
 * sock_conn_io.c for the hot path's description). */
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

/* Tell the reader the new tail (the caller stored it). */
void sock_conn_notify_data(sock_conn_t *c)
{
    if (c->tx.map) {
        atomic_thread_fence(memory_order_seq_cst);
        uint64_t wd = sock_rx_word(&c->rx, SOCK_HDR_WANT_DATA);
        if (wd == c->want_data_seen)
            return;
        c->want_data_seen = wd;
    }
    (void)vmmc_signal(c->ep, c->peer);
}

/* Room in the peer's ring now, or -1 (reset: bad credit). */
static int64_t tx_room(sock_conn_t *c)
{
    uint64_t credit = sock_rx_word(&c->rx, SOCK_HDR_CREDIT), sent = atomic_load(&c->sent);
    if (VMMC_UNLIKELY(credit < c->credit || credit > sent))
        return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                              "the peer's credit %" PRIu64 " is not within [%" PRIu64
                              ", %" PRIu64 "]",
                              credit, c->credit, sent);
    c->credit = credit;
    return (int64_t)(c->tx.size - (sent - credit));
}

static int tx_recheck(void *arg)
{
    sock_conn_t *c = arg;
    if (sock_conn_tcp_pending(c))
        return 1;
    int st = atomic_load(&c->st);
    if (st & (C_RESET | C_DEAD | C_EPIPE | C_REV_PEER | C_TX_TCP | C_RETIRED))
        return 1;
    if (!(st & C_ATTACHED))
        return 0;
    uint64_t credit = sock_rx_word(&c->rx, SOCK_HDR_CREDIT);
    return credit != c->credit || c->llen;
}

static ssize_t tcp_send(sock_conn_t *c, const struct iovec *iov, int iovcnt, size_t skip,
                        uint64_t deadline, int nonblock)
{
    struct iovec v[64];
    int n = 0;
    for (int i = 0; i < iovcnt && n < 64; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        v[n].iov_base = (uint8_t *)iov[i].iov_base + skip;
        v[n].iov_len = iov[i].iov_len - skip;
        skip = 0;
        n++;
    }
    for (;;) {
        struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)n};
        ssize_t r = sys_sendmsg(c->s->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return r;
        int left = sock_left_ms(deadline);
        if (left == 0 || nonblock) {
            errno = EAGAIN;
            return -1;
        }
        struct pollfd p = {.fd = c->s->fd, .events = POLLOUT};
        if (sys_poll(&p, 1, left) < 0 && errno == EINTR)
            return -1;
    }
}

/* Put @p len bytes of the iovec from @p skip into the local buffer (detached). */
static size_t to_local(sock_conn_t *c, const struct iovec *iov, int iovcnt, size_t skip,
                       size_t len)
{
    if (!c->lbuf) {
        c->lbuf = malloc((size_t)c->rx.size);
        if (!c->lbuf)
            return 0;
    }
    size_t room = (size_t)c->rx.size - c->llen, n = len < room ? len : room, done = 0;
    for (int i = 0; i < iovcnt && done < n; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        size_t k = iov[i].iov_len - skip;
        if (k > n - done)
            k = n - done;
        memcpy(c->lbuf + c->llen + done, (uint8_t *)iov[i].iov_base + skip, k);
        done += k;
        skip = 0;
    }
    c->llen += done;
    return done;
}

ssize_t sock_conn_send(sock_conn_t *c, const struct iovec *iov, int iovcnt, int flags,
                       int timeout_ms)
{
    (void)flags;
    size_t total = sock_iov_total(iov, iovcnt), done = 0;
    uint64_t deadline = timeout_ms > 0 ? vmmc_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
    uint64_t spin_end = 0;
    for (;;) {
        int st = atomic_load(&c->st);
        if (VMMC_UNLIKELY(st & (C_REV_PEER | C_TX_TCP | C_RETIRED | C_FIN_SENT | C_FIN_WANT |
                                C_RESET | C_DEAD | C_EPIPE))) {
            if ((st & (C_REV_PEER | C_TX_TCP)) == C_REV_PEER) {
                pthread_mutex_lock(&c->s->rx_lock); /* order: tx_lock, then rx_lock */
                int r = sock_revert_answer(c);
                sock_conn_maybe_retire(c, 1, 1);
                pthread_mutex_unlock(&c->s->rx_lock);
                if (r != 0)
                    return done ? (ssize_t)done : -1;
            }
            st = atomic_load(&c->st);
            if ((st & C_TX_TCP) && c->llen) { /* an abandoned upgrade: what waited first */
                if (sock_conn_tcp_write(c, c->lbuf, c->llen, -1) != 0)
                    return -1;
                c->llen = 0;
            }
            if (st & C_TX_TCP)
                sock_conn_maybe_retire(c, 1, 0);
            st = atomic_load(&c->st);
            if (st & C_RETIRED) {
                if (done)
                    return (ssize_t)done;
                errno = EAGAIN; /* the caller asks the kernel now */
                return -1;
            }
            if (st & C_TX_TCP) {
                ssize_t r = tcp_send(c, iov, iovcnt, done, deadline, timeout_ms == 0);
                if (r < 0)
                    return done ? (ssize_t)done : -1;
                return (ssize_t)(done + (size_t)r);
            }
            if (st & (C_FIN_SENT | C_FIN_WANT)) {
                errno = EPIPE;
                return done ? (ssize_t)done : -1;
            }
            if (st & C_RESET) {
                errno = ECONNRESET;
                return done ? (ssize_t)done : -1;
            }
            if ((st & (C_DEAD | C_VOID_SENT)) == C_DEAD && !done) {
                /* The peer's end came (it closed or died). TCP lets the
                 * first write after the peer's FIN through (the peer's
                 * kernel answers it with a reset) and fails the next ones
                 * with EPIPE: the same here, the bytes go nowhere. */
                atomic_fetch_or(&c->st, C_VOID_SENT);
                return (ssize_t)total;
            }
            if (st & (C_DEAD | C_EPIPE)) {
                errno = EPIPE;
                return done ? (ssize_t)done : -1;
            }
        }
        if (done == total) {
            /* the ACK may have come while this call filled the local
             * buffer (its attach could not take tx_lock): flush now */
            if (VMMC_UNLIKELY(c->llen) && (st & C_ATTACHED))
                (void)sock_conn_flush_local(c);
            return (ssize_t)done;
        }
        int64_t room = 0;
        if (VMMC_UNLIKELY(!(st & C_ATTACHED))) {
            size_t n = to_local(c, iov, iovcnt, done, total - done);
            done += n;
            if (n) {
                atomic_fetch_add(&c->nsent, 0);
                continue;
            }
        } else {
            if (VMMC_UNLIKELY(c->llen) && sock_conn_flush_local(c) != 0)
                return done ? (ssize_t)done : -1;
            if (VMMC_UNLIKELY(sock_zc_posted(c)) && !c->llen) {
                /* the reader posted a large read: straight into its buffer */
                ssize_t z = sock_zc_send(c, iov, iovcnt, done, total - done);
                if (z < 0)
                    return done ? (ssize_t)done : -1;
                if (z > 0) {
                    done += (size_t)z;
                    spin_end = 0;
                    continue;
                }
            }
            room = c->llen ? 0 : tx_room(c);
            if (room < 0)
                return done ? (ssize_t)done : -1;
        }
        if (room > 0) {
            size_t n = (uint64_t)room < total - done ? (size_t)room : total - done;
            /* A large write publishes its bytes piece by piece, so the reader
             * copies them out while the rest is copied in. */
            if (n > sock_io_chunk(c->tx.size))
                n = sock_io_chunk(c->tx.size);
            uint64_t sent = atomic_load(&c->sent);
            if (sock_tx_put(&c->tx, sent, iov, iovcnt, done, n) != VMMC_OK ||
                sock_tx_word(&c->tx, SOCK_HDR_TAIL, sent + n) != VMMC_OK) {
                sock_conn_fail(c, C_EPIPE, EPIPE, "the peer's ring cannot be written: %s",
                               vmmc_last_error());
                return done ? (ssize_t)done : -1;
            }
            atomic_store(&c->sent, sent + n);
            atomic_fetch_add(&c->nsent, n);
            done += n;
            sock_conn_notify_data(c);
            spin_end = 0;
            continue;
        }
        /* no room */
        if (done && timeout_ms == 0)
            return (ssize_t)done;
        if (timeout_ms == 0) {
            errno = EAGAIN;
            return -1;
        }
        if (sock_conn_tcp_pending(c))
            sock_conn_on_tcp(c);
        int left = sock_spin_left(&spin_end, deadline);
        if (left == SOCK_SPIN_MORE)
            continue;
        if (left == 0)
            return sock_moved_or_again(done);
        if ((st & C_ATTACHED) && c->tx.map) {
            sock_tx_word(&c->tx, SOCK_HDR_WANT_CREDIT, atomic_fetch_add(&c->want_credit_seq, 1) + 1);
            atomic_thread_fence(memory_order_seq_cst);
        } else if (st & C_ATTACHED) {
            sock_tx_word(&c->tx, SOCK_HDR_WANT_CREDIT, atomic_fetch_add(&c->want_credit_seq, 1) + 1);
            (void)vmmc_signal(c->ep, c->peer);
        }
        int r = sock_wait(c->ctx, c->s->fd, left, tx_recheck, c);
        if (r < 0)
            return done ? (ssize_t)done : -1;
        if (sock_conn_tcp_pending(c))
            sock_conn_on_tcp(c);
    }
}

ssize_t sock_conn_sendfile(sock_conn_t *c, int in_fd, off_t *offset, size_t count,
                           int timeout_ms)
{
    off_t off;
    if (offset) {
        off = *offset;
    } else {
        off = lseek(in_fd, 0, SEEK_CUR);
        if (off < 0)
            return -1;
    }
    size_t done = 0;
    while (done < count) {
        int st = atomic_load(&c->st);
        int64_t room = 0;
        if ((st & C_ATTACHED) && !c->llen &&
            !(st & (C_REV_PEER | C_TX_TCP | C_RETIRED | C_FIN_SENT | C_RESET | C_DEAD | C_EPIPE))) {
            room = tx_room(c);
            if (room < 0)
                break;
        }
        ssize_t n;
        if (room > 0) {
            /* straight into the peer's ring */
            size_t k = (uint64_t)room < count - done ? (size_t)room : count - done;
            uint64_t sent = atomic_load(&c->sent);
            n = sock_tx_put_file(&c->tx, sent, in_fd, off + (off_t)done, k);
            if (n <= 0)
                break;
            if (sock_tx_word(&c->tx, SOCK_HDR_TAIL, sent + (uint64_t)n) != VMMC_OK) {
                sock_conn_fail(c, C_EPIPE, EPIPE, "the peer's ring cannot be written");
                break;
            }
            atomic_store(&c->sent, sent + (uint64_t)n);
            atomic_fetch_add(&c->nsent, (uint64_t)n);
            sock_conn_notify_data(c);
        } else {
            /* no room, detached or on TCP: through a bounce buffer and send */
            uint8_t b[16384];
            size_t k = count - done < sizeof b ? count - done : sizeof b;
            ssize_t got = sys_pread(in_fd, b, k, off + (off_t)done);
            if (got <= 0)
                break;
            struct iovec v = {b, (size_t)got};
            n = sock_conn_send(c, &v, 1, 0, timeout_ms);
            if (n <= 0)
                break;
        }
        done += (size_t)n;
        if (timeout_ms == 0 && room == 0)
            break;
    }
    if (offset)
        *offset = off + (off_t)done;
    else if (done)
        lseek(in_fd, off + (off_t)done, SEEK_SET);
    if (!done && count)
        return -1;
    return (ssize_t)done;
}
