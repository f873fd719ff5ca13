/* Fast Messages: connecting to a peer on a channel.
 *
 * Everything this rank writes to peer B on a channel (packets, credits for
 * B's ring here, credit requests, descriptors) goes into one region B
 * exports for us: "fm.ring.<us>" on channel 0, "fm.<c>.ring.<us>" on
 * channel c, so no byte can land in another channel's ring. A channel
 * imports B's region when it first needs it (a send to B, or credits to
 * give back to B), without blocking; B makes the region when our request
 * arrives (fm_ring.c), or, if B has not opened the channel yet, when it
 * does. Until then the import waits at B
 * for the name to appear, as long as VMMC_IMPORT_TIMEOUT (a new request
 * follows if the channel is still wanted then): a blocking send gives up
 * after open_wait_ms, and the next send finds the same request waiting.
 * (Each request that times out stays queued at B until the name appears,
 * and B keeps only so many per importer: one per VMMC_IMPORT_TIMEOUT is
 * few, one per open_wait_ms could be many.)
 *
 * Closing: a closing rank writes FM_CLOSED_OFF into the region of every
 * peer it is connected to, so their sends to it fail with VMMC_ERR_STALE
 * (fm_peer_stale) instead of filling a ring nobody reads. A rank that reopens
 * the channel finds that word in the region of a peer that still has the old
 * channel open, whose ring state is the old one: it refuses to send there
 * (VMMC_ERR_STALE) rather than write packets the peer would never take. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fm/fm_int.h"

void fm_ring_name(const fm_t *fm, int importer, char *buf, size_t cap)
{
    if (fm->channel == 0)
        snprintf(buf, cap, "fm.ring.%d", importer);
    else
        snprintf(buf, cap, "fm.%d.ring.%d", fm->channel, importer);
}

/* The staging packet and the payload bound, once R and map are known. */
static int peer_buffers(fm_t *fm, fm_peer_t *p)
{
    /* Largest payload whose slot still leaves room for two in the ring. */
    uint64_t maxpay = p->R / 2 - FM_HDR;
    maxpay &= ~(uint64_t)(FM_LINE - 1);
    p->paymax = fm->packet_size < maxpay ? fm->packet_size : (size_t)maxpay;
    /* Staging packet: every packet when unmapped; short messages when
     * mapped (see fm_send.c). */
    size_t stage = p->map ? (p->paymax < FM_STAGE_MAX ? p->paymax : FM_STAGE_MAX) : p->paymax;
    p->staging = aligned_alloc(FM_LINE, fm_align64(FM_HDR + stage));
    if (!p->staging)
        return vmmc_error(VMMC_ERR_NOMEM, "fm: no memory for a staging packet");
    p->seq = 1;
    p->zc_ok = 1;
    return VMMC_OK;
}

int fm_peer_self(fm_t *fm, fm_peer_t *p)
{
    /* Loopback: our own region for ourselves, written directly. */
    p->map = p->ctrl;
    p->R = p->rR;
    int st = peer_buffers(fm, p);
    if (st == VMMC_OK)
        atomic_store_explicit(&p->conn, FM_PC_READY, memory_order_release);
    return st;
}

/* The import of @p's region is active: check it, map it. @fresh: refuse a
 * region whose owner still has the channel open from before we closed it. */
static int peer_setup(fm_t *fm, fm_peer_t *p, int fresh)
{
    char name[64];
    fm_import_name(fm, p, name, sizeof name);
    size_t len = vmmc_proxy_length(p->px);
    if (len < FM_CTRL + 2 * 128 || ((len - FM_CTRL) & (len - FM_CTRL - 1)))
        return vmmc_error(VMMC_ERR_PROTOCOL, "fm: rank %d's ring '%s' has a bad length %zu",
                          p->rank, name, len);
    p->R = len - FM_CTRL;
    void *m = NULL;
    if (!(fm->flags & FM_NO_MAP)) {
        int st = vmmc_proxy_map(p->px, &m);
        if (st != VMMC_OK && st != VMMC_ERR_UNSUPPORTED)
            return st;
    }
    if (fresh) {
        uint64_t closed = 0;
        if (m)
            closed = atomic_load_explicit((_Atomic uint64_t *)((char *)m + FM_CLOSED_OFF),
                                          memory_order_acquire);
        else if (vmmc_fetch(p->px, FM_CLOSED_OFF, &closed, sizeof closed) != VMMC_OK)
            closed = 0; /* (no remote read on this transport: cannot tell) */
        if (closed)
            return vmmc_error(VMMC_ERR_STALE, "fm: rank %d still has FM channel %d open from "
                              "before this rank closed it; it must close the channel too before "
                              "the two can use it again", p->rank, fm->channel);
    }
    p->map = m;
    if (m)
        FM_CNT(fm, FM_C_MAPPED, 1);
    else
        __atomic_fetch_add(&fm->unmapped, 1, __ATOMIC_RELAXED);
    return peer_buffers(fm, p);
}

VMMC_COLD int fm_peer_stale(fm_t *fm, fm_peer_t *p)
{
    return vmmc_error(VMMC_ERR_STALE, "fm: rank %d closed FM channel %d; cannot send to it",
                      p->rank, fm->channel);
}

/* One step towards a connection, never blocking: VMMC_OK once connected,
 * VMMC_INPROGRESS while the peer has not answered (it may not have opened
 * the channel yet), or the error that ended the attempt (the next call
 * starts a new one). Called by senders and by the receive side (to give
 * credits back), the progress hook included. */
int fm_peer_step(fm_t *fm, fm_peer_t *p)
{
    if (fm_peer_ready(p))
        return VMMC_OK;
    if (VMMC_UNLIKELY(atomic_load_explicit(&p->conn, memory_order_relaxed) == FM_PC_FORKED))
        return fm_forked_error(fm, "fm");
    int z = 0;
    if (!atomic_compare_exchange_strong_explicit(&p->cbusy, &z, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return VMMC_INPROGRESS; /* another thread is at it */
    int st;
    if (atomic_load_explicit(&p->conn, memory_order_relaxed) == FM_PC_READY) {
        st = VMMC_OK;
        goto out;
    }
    /* Our ring for it first: its credits for what we send come back there. */
    if ((st = fm_peer_ring(fm, p)) != VMMC_OK)
        goto out;
    if (p->rank == fm->rank) {
        st = fm_peer_self(fm, p);
        goto out;
    }
    if (fm_peer_closed(p)) {
        st = fm_peer_stale(fm, p); /* a new import would wait for nothing */
        goto out;
    }
    if (atomic_load_explicit(&p->conn, memory_order_relaxed) == FM_PC_NONE) {
        char name[64];
        fm_import_name(fm, p, name, sizeof name);
        st = vmmc_import_start(fm->ep, p->rank, name, -1, &p->px);
        if (st < 0) {
            p->px = NULL;
            goto out;
        }
        atomic_store_explicit(&p->conn, FM_PC_PENDING, memory_order_relaxed);
    }
    st = vmmc_import_test(p->px);
    if (st == VMMC_INPROGRESS)
        goto out;
    if (st == VMMC_OK)
        st = peer_setup(fm, p, 1);
    if (st == VMMC_OK) {
        atomic_store_explicit(&p->conn, FM_PC_READY, memory_order_release);
    } else {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", vmmc_last_error());
        vmmc_unimport(p->px);
        p->px = NULL;
        p->map = NULL;
        free(p->staging);
        p->staging = NULL;
        atomic_store_explicit(&p->conn, FM_PC_NONE, memory_order_relaxed);
        st = vmmc_error(st, "%s", msg);
    }
out:
    atomic_store_explicit(&p->cbusy, 0, memory_order_release);
    return st;
}

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* A send needs the connection: in non-blocking mode one step (VMMC_ERR_AGAIN
 * while the peer has not answered), else wait for it, at most open_wait_ms,
 * serving this channel's own receive side meanwhile, as a sender waiting for
 * credits does. */
int fm_peer_connect(fm_t *fm, fm_peer_t *p, int nb) /* FM_CONNECT_* */
{
    uint64_t t0 = now_ms();
    for (;;) {
        int st = fm_peer_step(fm, p);
        if (st == VMMC_ERR_TIMEOUT)
            st = VMMC_INPROGRESS; /* the import's own deadline: a new one starts */
        if (st != VMMC_INPROGRESS)
            return st;
        if (nb == FM_CONNECT_NB) {
            FM_CNT(fm, FM_C_AGAIN, 1);
            return VMMC_ERR_AGAIN;
        }
        if (now_ms() - t0 >= (uint64_t)fm->open_wait_ms)
            return vmmc_error(VMMC_ERR_TIMEOUT, "fm: rank %d did not open FM channel %d within "
                              "%d ms", p->rank, fm->channel, fm->open_wait_ms);
        if (nb == FM_CONNECT_QUIET || fm_busy(fm)) {
            /* A non-blocking send or a handler on fm_init()'s channel: no
             * handler runs meanwhile; the core's control thread (or the
             * transport's receive thread) completes the import. */
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
            continue;
        }
        fm_rlock(fm);
        fm->in_extract = 1;
        int n = fm_extract_locked(fm, fm->packet_size);
        fm->in_extract = 0;
        fm_runlock(fm);
        if (n <= 0) {
            int w = vmmc_wait(fm->ep, 2);
            if (w < 0 && w != VMMC_ERR_PEER_DEAD)
                return w;
        }
    }
}

/* Closing: tell a connected peer, so its sends to us fail at once. */
void fm_peer_tell_closed(fm_t *fm, fm_peer_t *p)
{
    if (!p->px || !fm_peer_ready(p))
        return;
    uint64_t one = 1;
    if (p->map)
        atomic_store_explicit((_Atomic uint64_t *)(p->map + FM_CLOSED_OFF), one,
                              memory_order_release);
    else if (vmmc_send(p->px, FM_CLOSED_OFF, &one, sizeof one, 0) != VMMC_OK)
        return;
    vmmc_signal(fm->ep, p->rank);
}
