/* An upgraded connection's readiness (what poll() would report) and its
 * arming: what it cannot report yet, it asks the peer to signal. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>

#include "sock/sock_conn_priv.h"
#include "sock/sock_sys.h"
#include "util/log.h"

short sock_conn_ready(sock_conn_t *c, short events)
{
    if (sock_conn_tcp_pending(c))
        sock_conn_on_tcp(c);
    int st = atomic_load(&c->st);
    short rev = 0;
    if ((st & (C_TX_TCP | C_REV_ACKED)) == (C_TX_TCP | C_REV_ACKED) && !(st & C_RETIRED)) {
        /* Both directions are on TCP, the retirement not done yet: done
         * here if the locks are free; the kernel tells either way. */
        sock_conn_maybe_retire(c, 0, 0);
        st = atomic_load(&c->st) | C_RETIRED;
    }
    if (st & C_RETIRED) {
        struct pollfd p = {.fd = c->s->fd, .events = events};
        return sys_poll(&p, 1, 0) == 1 ? p.revents : 0;
    }
    /* reading */
    if (st & C_RESET)
        rev |= POLLIN | POLLERR | POLLHUP | POLLRDHUP;
    if (st & (C_SHUT_RD | C_PEER_FIN | C_DEAD))
        rev |= POLLIN | POLLRDHUP;
    if (VMMC_UNLIKELY(st & (C_REV_SENT | C_REV_PEER))) {
        sock_conn_maybe_retire(c, 0, 0);
        if ((st & (C_REV_PEER | C_TX_TCP)) == C_REV_PEER)
            return (short)(POLLIN | POLLOUT); /* a call must answer it */
        if (sock_zc_pending(c)) /* direct bytes are read before the TCP side */
            return (short)(events & POLLIN);
        if (st & C_REV_ACKED) { /* the TCP side tells */
            struct pollfd p = {.fd = c->s->fd, .events = events};
            return sys_poll(&p, 1, 0) == 1 ? p.revents : 0;
        }
        return 0; /* waiting for the peer's REVERT_ACK */
    }
    uint64_t tail = sock_rx_word(&c->rx, SOCK_HDR_TAIL);
    uint64_t fl = sock_rx_word(&c->rx, SOCK_HDR_FLAGS);
    if (tail != c->head || fl || sock_zc_pending(c))
        rev |= POLLIN;
    /* The peer's FIN is there, maybe behind unread bytes: the kernel says
     * POLLRDHUP as soon as the FIN came, not when it is read. (A FIN that
     * does not check out is found by the read, which then resets.) */
    if (fl & (SOCK_RING_FIN | SOCK_RING_RST))
        rev |= POLLRDHUP;
    /* writing */
    if (st & (C_EPIPE | C_DEAD))
        rev |= POLLOUT | ((st & C_DEAD) ? POLLHUP : 0);
    else if (st & C_TX_TCP)
        rev |= POLLOUT;
    else if (!(st & C_ATTACHED))
        rev |= c->llen < c->rx.size ? POLLOUT : 0;
    else if (!(st & C_FIN_SENT)) {
        uint64_t credit = sock_rx_word(&c->rx, SOCK_HDR_CREDIT);
        if (c->tx.size - (atomic_load(&c->sent) - credit) > 0 || credit > atomic_load(&c->sent))
            rev |= POLLOUT;
    } else {
        rev |= POLLOUT; /* a send fails at once with EPIPE */
    }
    if ((st & C_FIN_SENT) && (st & C_PEER_FIN))
        rev |= POLLHUP;
    /* arm: the peer signals when bytes or room come (shm announces it; udp
     * signals every publication anyway) */
    if ((st & C_ATTACHED) && c->tx.map && !(st & (C_TX_TCP | C_RETIRED))) {
        int arm = 0;
        if ((events & POLLIN) && !(rev & POLLIN)) {
            sock_tx_word(&c->tx, SOCK_HDR_WANT_DATA, atomic_fetch_add(&c->want_data_seq, 1) + 1);
            arm = 1;
        }
        if ((events & POLLOUT) && !(rev & POLLOUT)) {
            sock_tx_word(&c->tx, SOCK_HDR_WANT_CREDIT, atomic_fetch_add(&c->want_credit_seq, 1) + 1);
            arm = 1;
        }
        if (arm) {
            atomic_thread_fence(memory_order_seq_cst);
            if (sock_rx_word(&c->rx, SOCK_HDR_TAIL) != c->head)
                rev |= POLLIN;
            uint64_t credit = sock_rx_word(&c->rx, SOCK_HDR_CREDIT);
            if (c->tx.size - (atomic_load(&c->sent) - credit) > 0)
                rev |= POLLOUT;
        }
    }
    return rev;
}
