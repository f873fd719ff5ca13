/* What the fabric transport's progress thread sleeps on, and how long.
 *
 * The completion queues' wait object, as a file descriptor poll() takes:
 * - where the provider answers FI_GETWAIT on a queue (tcp;ofi_rxm, most
 *   providers), each queue has its own (FI_WAIT_FD);
 * - where it does not (udp;ofi_rxd: its queues have no fi_control at all),
 *   both queues are opened on one wait set of ours (FI_WAIT_SET over an
 *   FI_WAIT_FD set), whose FI_GETWAIT gives the set's epoll fd. Binding the
 *   queues to the endpoint adds the core udp endpoint's queue fd (its
 *   socket) to that set, and a completion written to either queue signals
 *   it: a datagram that arrives wakes the thread.
 *
 * How long: a provider with manual progress that retransmits on its own
 * timers (rxd resends an unacknowledged packet after 1, 2, 4 ... 4000 ms)
 * does so only when its queues are read: a lost datagram would wait for
 * the next one to arrive. After activity the thread therefore sleeps on
 * the fd at most 1 ms, then 2, 4 ... up to FAB_NAP_MAX_MS, doubling while
 * nothing comes, which follows the provider's back-off (a resend is late
 * by at most its own delay) and costs about ten wakes in the second after
 * a burst; idle, one a second. A send posted while the thread sleeps
 * untimed wakes it once (the datagram may be lost).
 *
 * How much at once: rxd 1.17 loses messages when thousands wait in it (a
 * sender that posts 20000 notified writes at once: the peer receives a few
 * thousand, no error anywhere). One cause is in its fi_send: with no free
 * transmit entry (tx_attr.size of them per endpoint) it answers 0 and
 * drops the message, which then never completes (fixed upstream in 2025:
 * "fix return of EAGAIN when not enough tx entries"). So on such a
 * provider at most FAB_TX_WINDOW operations with a completion are under
 * way to each peer, and at most tx_attr.size on the endpoint: the next one
 * waits as when the provider has no room (driving the queues,
 * VMMC_FABRIC_SEND_TIMEOUT, a dead peer ends the wait). */
#include "transport/fabric/fab_int.h"

#include <limits.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#define FAB_NAP_MAX_MS 1000

static int cq_open(fab_ep_t *f, struct fid_cq **cq)
{
    struct fi_cq_attr a = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_FD, .size = 4096};
    if (f->ws) {
        a.wait_obj = FI_WAIT_SET;
        a.wait_set = f->ws;
    }
    return fi_cq_open(f->domain, &a, cq, NULL);
}

int vmmc_fab__cq_open(fab_ep_t *f)
{
    f->resends = f->nosrc = f->info->ep_attr->protocol == FI_PROTO_RXD;
    size_t txq = f->info->tx_attr->size;
    f->tx_cap = txq && txq < INT_MAX ? (int)txq : INT_MAX;
    int rc = cq_open(f, &f->txcq);
    if (rc)
        return rc;
    int fd = -1;
    if (fi_control(&f->txcq->fid, FI_GETWAIT, &fd) == -FI_ENOSYS) {
        /* no wait object of its own to give: a wait set of ours */
        fi_close(&f->txcq->fid);
        f->txcq = NULL;
        struct fi_wait_attr wa = {.wait_obj = FI_WAIT_FD};
        if ((rc = fi_wait_open(f->fabric, &wa, &f->ws)) != 0) {
            f->ws = NULL;
            return rc;
        }
        if ((rc = cq_open(f, &f->txcq)) != 0)
            return rc;
    }
    return cq_open(f, &f->rxcq);
}

int vmmc_fab__cq_fds(fab_ep_t *f)
{
    if (f->ws)
        return fi_control(&f->ws->fid, FI_GETWAIT, &f->txfd);
    int rc = fi_control(&f->txcq->fid, FI_GETWAIT, &f->txfd);
    return rc ? rc : fi_control(&f->rxcq->fid, FI_GETWAIT, &f->rxfd);
}

void vmmc_fab__cq_close(fab_ep_t *f)
{
    if (f->rxcq)
        fi_close(&f->rxcq->fid);
    if (f->txcq)
        fi_close(&f->txcq->fid);
    if (f->ws)
        fi_close(&f->ws->fid);
    f->rxcq = f->txcq = NULL;
    f->ws = NULL;
}

void vmmc_fab__active(fab_ep_t *f)
{
    if (f->resends)
        atomic_store_explicit(&f->nap_ms, 1, memory_order_relaxed);
}

/* A datagram that goes out may be lost: if the progress thread sleeps
 * untimed, it is woken to sleep timed (once per quiet spell: a thread that
 * sleeps timed, or spins, is left alone). */
void vmmc_fab__posted(fab_ep_t *f)
{
    if (f->resends && atomic_load_explicit(&f->nap_ms, memory_order_relaxed) == 0 &&
        atomic_exchange_explicit(&f->nap_ms, 1, memory_order_relaxed) == 0)
        vmmc_fab__kick(f);
}

void vmmc_fab__completed(fab_ep_t *f, int h)
{
    if (!f->resends)
        return;
    atomic_fetch_sub_explicit(&f->tx_out_all, 1, memory_order_relaxed);
    fab_peer_t *p = fab_peer_of(f, h); /* NULL for a refusal (h -1) */
    if (p)
        atomic_fetch_sub_explicit(&p->tx_out, 1, memory_order_relaxed);
}

/* Taken before the post, not counted after it: threads that post to
 * different peers at once must not pass the endpoint's cap together.
 * @p NULL: the endpoint's window only (a refusal to an address that is no
 * peer: a flood of forged HELLOs must not use up the provider's queue). */
int vmmc_fab__window_take(fab_ep_t *f, fab_peer_t *p)
{
    if (!f->resends)
        return 1;
    if (p && atomic_fetch_add_explicit(&p->tx_out, 1, memory_order_relaxed) >= FAB_TX_WINDOW) {
        atomic_fetch_sub_explicit(&p->tx_out, 1, memory_order_relaxed);
        return 0;
    }
    if (atomic_fetch_add_explicit(&f->tx_out_all, 1, memory_order_relaxed) >= f->tx_cap) {
        atomic_fetch_sub_explicit(&f->tx_out_all, 1, memory_order_relaxed);
        if (p)
            atomic_fetch_sub_explicit(&p->tx_out, 1, memory_order_relaxed);
        return 0;
    }
    return 1;
}

void vmmc_fab__window_give(fab_ep_t *f, fab_peer_t *p)
{
    if (!f->resends)
        return;
    atomic_fetch_sub_explicit(&f->tx_out_all, 1, memory_order_relaxed);
    if (p)
        atomic_fetch_sub_explicit(&p->tx_out, 1, memory_order_relaxed);
}

int vmmc_fab__sleep(fab_ep_t *f, int started)
{
    int woken = 0;
    struct fid *fids[2] = {&f->txcq->fid, &f->rxcq->fid};
    int nfids = 2;
    if (f->ws) {
        fids[0] = &f->ws->fid;
        nfids = 1;
    }
    int ms = f->busy ? 10 : FAB_NAP_MAX_MS;
    int nap = atomic_load_explicit(&f->nap_ms, memory_order_relaxed);
    if (started && !f->busy && nap && nap < ms)
        ms = nap;
    struct pollfd pf[3] = {{f->wakefd, POLLIN, 0}, {f->txfd, POLLIN, 0}, {f->rxfd, POLLIN, 0}};
    /* With the queue full, a drain (the wake fd) matters most. */
    if (!started || f->busy || fi_trywait(f->fabric, fids, nfids) == FI_SUCCESS) {
        if (poll(pf, 3, ms) == 0) {
            atomic_fetch_add_explicit(&f->c_naps, 1, memory_order_relaxed);
            /* nothing came: the next sleep twice as long; after about a
             * second of quiet, untimed (a send makes it timed again) */
            if (nap && started && !f->busy)
                (void)atomic_compare_exchange_strong(&f->nap_ms, &nap,
                                                     nap * 2 > FAB_NAP_MAX_MS ? 0 : nap * 2);
        } else {
            atomic_fetch_add_explicit(&f->c_wakes, 1, memory_order_relaxed);
            woken = 1;
        }
    }
    if (pf[0].revents & POLLIN) {
        uint64_t v;
        ssize_t r = read(f->wakefd, &v, sizeof v);
        (void)r;
    }
    return woken;
}
