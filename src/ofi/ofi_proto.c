/* The wire between two endpoints of the provider: two FM channels on each
 * endpoint's vmmc endpoint.
 *
 * VOFI_CH_DATA carries messages in matching order: an EAGER message is a
 * vofi_hdr_t followed by the payload, in one FM stream; an RTS is the header
 * alone, for messages above VMMC_OFI_EAGER. FM gives per-sender order, so a
 * sender's messages are matched in the order it sent them, whatever their
 * size. The handler runs when the first packet arrives: if a receive is
 * posted it fm_receive()s the payload straight into the user's buffer (no
 * staging copy); if not, the message waits in the unexpected queue.
 * While the unexpected queue holds VMMC_OFI_UNEXPECTED bytes the channel is
 * not extracted, so FM's credits hold the senders back and memory stays
 * bounded (MPI-FM's receiver pacing).
 *
 * VOFI_CH_CTRL carries the rendezvous answers (CTS, NAK). It is always
 * extracted, so an answer never waits behind unread messages.
 *
 * Both channels are FM_NONBLOCK: a send that finds no credit returns
 * -FI_EAGAIN to the application, as libfabric expects (FI_RM_ENABLED), and
 * the application progresses and retries. */
#include <stdlib.h>
#include <string.h>

#include "ofi/ofi.h"


static void unexp_free(vofi_ep_t *ep, vofi_unexp_t *u)
{
    ep->unexp_bytes -= sizeof *u + u->have;
    free(u);
}

static uint64_t rx_flags(uint8_t wflags)
{
    uint64_t f = FI_RECV | ((wflags & VOFI_F_TAGGED) ? FI_TAGGED : FI_MSG);
    if (wflags & VOFI_F_DATA)
        f |= FI_REMOTE_CQ_DATA;
    return f;
}

/* Report a finished receive: success, or FI_ETRUNC when the message was
 * longer than the buffer (the prefix is there). */
static void finish_rx(vofi_ep_t *ep, vofi_xfer_t *x, void *buf, size_t got, size_t msg_len,
                      uint64_t extra)
{
    vofi_cqe_t e = {
        .op_context = x->context,
        .flags = rx_flags(x->msg_flags) | extra | (x->flags & (FI_COMPLETION | FI_MULTI_RECV)),
        .len = got,
        .buf = buf,
        .data = x->msg_data,
        .tag = x->msg_tag,
        .src = (ep->caps & FI_SOURCE) ? vofi_ep_addr_of(ep, x->peer) : FI_ADDR_NOTAVAIL,
    };
    if (msg_len > got) {
        e.err = FI_ETRUNC;
        e.olen = msg_len - got;
        vofi_fail_rx(ep, &e, ep->cntr_recv);
    } else {
        vofi_complete_rx(ep, &e, ep->cntr_recv);
    }
}

/* A multi-receive buffer: place the message at its current offset. Returns
 * the child transfer describing that slice (the buffer itself stays posted
 * until less than min_multi_recv bytes are left). */
static vofi_xfer_t *multi_slice(vofi_ep_t *ep, vofi_xfer_t *m, size_t len, int *released)
{
    vofi_xfer_t *c = vofi_xfer_get(ep);
    if (!c)
        return NULL;
    size_t room = m->len - m->mr_used;
    size_t take = len < room ? len : room;
    c->iov[0].iov_base = (char *)m->iov[0].iov_base + m->mr_used;
    c->iov[0].iov_len = take;
    c->iov_count = 1;
    c->len = take;
    c->context = m->context;
    c->flags = m->flags & ~(uint64_t)FI_MULTI_RECV;
    m->mr_used += take;
    if (m->len - m->mr_used < ep->min_multi_recv) {
        /* Released: the completion of this message says so. */
        vofi_queue_remove(&ep->posted_msg, m);
        ep->rx_posted--;
        c->flags |= FI_MULTI_RECV;
        free(m);
        if (released)
            *released = 1;
    }
    return c;
}

/* Receive @p n bytes of the open stream into the transfer's iov. */
static size_t stream_into(fm_stream_t *s, vofi_xfer_t *x, size_t n)
{
    size_t got = 0;
    for (size_t i = 0; i < x->iov_count && got < n; i++) {
        size_t k = x->iov[i].iov_len;
        if (k > n - got)
            k = n - got;
        if (!k)
            continue;
        ssize_t r = fm_receive(x->iov[i].iov_base, s, k);
        if (r <= 0)
            break;
        got += (size_t)r;
        if ((size_t)r < k)
            break; /* the message ended early */
    }
    return got;
}

static void deliver(vofi_ep_t *ep, vofi_xfer_t *x, vofi_unexp_t *u);

static void on_data(fm_stream_t *s, int sender, void *arg)
{
    vofi_ep_t *ep = arg;
    vofi_hdr_t h;
    if (fm_receive(&h, s, sizeof h) != (ssize_t)sizeof h ||
        (h.op != VOFI_OP_EAGER && h.op != VOFI_OP_RTS) ||
        (h.op == VOFI_OP_EAGER && h.len > vofi_set.eager) || h.len > VOFI_MAX_MSG ||
        (h.flags & ~(VOFI_F_TAGGED | VOFI_F_DATA))) {
        ep->counters[VOFI_C_PROTOCOL]++; /* malformed: dropped whole, nothing changes */
        return;
    }
    int tagged = (h.flags & VOFI_F_TAGGED) != 0;
    vofi_xfer_t *x = vofi_match_posted(ep, tagged, sender, h.tag);
    if (x && (x->flags & FI_MULTI_RECV)) {
        x = multi_slice(ep, x, h.len, NULL);
        if (!x) {
            ep->counters[VOFI_C_PROTOCOL]++;
            return;
        }
    }
    if (x) {
        x->peer = sender;
        x->msg_len = h.len;
        x->msg_tag = h.tag;
        x->msg_data = h.data;
        x->msg_flags = h.flags;
        x->id = h.id;
        if (h.op == VOFI_OP_RTS) {
            ep->counters[VOFI_C_RTS]++;
            vofi_rdv_start(ep, x);
            return;
        }
        ep->counters[VOFI_C_EAGER]++;
        size_t want = h.len < x->len ? h.len : x->len;
        size_t got = stream_into(s, x, want);
        size_t msg_len = got < want ? got : h.len; /* a short stream: what came */
        finish_rx(ep, x, x->iov_count ? x->iov[0].iov_base : NULL, got, msg_len, 0);
        vofi_xfer_put(ep, x);
        return;
    }
    /* Unexpected: keep the header, and an eager payload. */
    size_t keep = h.op == VOFI_OP_EAGER ? h.len : 0;
    vofi_unexp_t *u = malloc(sizeof *u + keep);
    if (!u) {
        ep->counters[VOFI_C_PROTOCOL]++;
        return;
    }
    *u = (vofi_unexp_t){.peer = sender, .op = h.op, .flags = h.flags, .tag = h.tag,
                        .data = h.data, .len = h.len, .id = h.id};
    ep->counters[VOFI_C_UNEXP]++;
    ep->unexp_bytes += sizeof *u; /* headers count too: RTS floods are paced as well */
    /* Queued before its payload is read: fm_receive() may suspend this
     * handler, and a receive posted meanwhile must match this message, not
     * one behind it. A receive that matches it now waits for the rest. */
    vofi_queue_push(tagged ? &ep->unexp_tag : &ep->unexp_msg, u);
    if (keep) {
        u->arriving = 1;
        ssize_t r = fm_receive(u->payload, s, keep);
        u->have = r > 0 ? (size_t)r : 0;
        u->len = u->have;
        ep->unexp_bytes += u->have;
        int orphan = u->arriving == 2;
        u->arriving = 0;
        if (u->waiter)
            deliver(ep, u->waiter, u);
        else if (orphan)
            unexp_free(ep, u);
    }
}

static void on_ctrl(fm_stream_t *s, int sender, void *arg)
{
    vofi_ep_t *ep = arg;
    vofi_cts_t c;
    if (fm_receive(&c, s, sizeof c) != (ssize_t)sizeof c ||
        (c.op != VOFI_OP_CTS && c.op != VOFI_OP_NAK) || c.window[sizeof c.window - 1] != 0) {
        ep->counters[VOFI_C_PROTOCOL]++;
        return;
    }
    vofi_rdv_cts(ep, sender, &c);
}

/* Deliver unexpected message @p u (off its queue, arrived whole) into @p x. */
static void deliver(vofi_ep_t *ep, vofi_xfer_t *x, vofi_unexp_t *u)
{
    x->peer = u->peer;
    x->msg_len = u->len;
    x->msg_tag = u->tag;
    x->msg_data = u->data;
    x->msg_flags = u->flags;
    x->id = u->id;
    if (x->flags & FI_DISCARD) {
        /* Nothing is delivered; a rendezvous sender is told to finish. */
        if (u->op == VOFI_OP_RTS) {
            vofi_xfer_t *d = calloc(1, sizeof *d);
            if (d) {
                *d = *x;
                d->len = 0;
                d->iov_count = 0;
                d->flags = (d->flags & ~(uint64_t)FI_COMPLETION) | FI_DISCARD;
                vofi_rdv_start(ep, d);
            }
        }
        unexp_free(ep, u);
        if (x->flags & FI_CLAIM) {
            vofi_cqe_t e = {.op_context = x->context,
                            .flags = rx_flags(x->msg_flags) | (x->flags & FI_COMPLETION),
                            .tag = x->msg_tag, .data = x->msg_data, .src = FI_ADDR_NOTAVAIL};
            vofi_complete_rx(ep, &e, ep->cntr_recv);
        }
        free(x);
        return;
    }
    if (u->op == VOFI_OP_RTS) {
        unexp_free(ep, u);
        vofi_rdv_start(ep, x);
        return;
    }
    size_t got = u->have < x->len ? u->have : x->len;
    vofi_iov_copy_in(x->iov, x->iov_count, 0, u->payload, got);
    finish_rx(ep, x, x->iov_count ? x->iov[0].iov_base : NULL, got, u->have, 0);
    unexp_free(ep, u);
    vofi_xfer_put(ep, x);
}

int vofi_proto_take(vofi_ep_t *ep, vofi_xfer_t *x, vofi_unexp_t *u)
{
    int released = 0;
    if (x->flags & FI_MULTI_RECV) {
        vofi_xfer_t *c = multi_slice(ep, x, u->len, &released);
        if (!c) {
            if (u->arriving)
                u->arriving = 2; /* off its queue: dropped when it has arrived */
            else
                unexp_free(ep, u);
            return released;
        }
        x = c;
    }
    if (u->arriving)
        u->waiter = x;
    else
        deliver(ep, x, u);
    return released;
}

int vofi_proto_send_cts(vofi_ep_t *ep, int peer, const vofi_cts_t *cts)
{
    int st = fm_send(ep->fmc, peer, VOFI_H_MSG, cts, sizeof *cts);
    if (st == VMMC_ERR_AGAIN || st == VMMC_ERR_BUSY)
        return -FI_EAGAIN;
    return st ? vofi_err(st) : 0;
}

/* A rendezvous send: the RTS goes in matching order, the data once the
 * receiver posted its buffer (ofi_rdv.c). */
static ssize_t send_rts(vofi_ep_t *ep, const struct iovec *iov, size_t count, int peer,
                        vofi_hdr_t *h, uint64_t flags, uint64_t cflags, void *context)
{
    if (ep->tx_live >= VOFI_TX_SIZE)
        return -FI_EAGAIN;
    vofi_xfer_t *x = calloc(1, sizeof *x);
    if (!x)
        return -FI_ENOMEM;
    if (count)
        memcpy(x->iov, iov, count * sizeof *iov);
    x->iov_count = count;
    x->len = h->len;
    x->context = context;
    x->flags = cflags | (flags & FI_COMPLETION);
    x->msg_flags = (flags & FI_DELIVERY_COMPLETE) ? 1 : 0; /* fence before completing */
    x->peer = peer;
    x->id = ++ep->next_id;
    h->op = VOFI_OP_RTS;
    h->id = x->id;
    int st = fm_send(ep->fm, peer, VOFI_H_MSG, h, sizeof *h);
    if (st) {
        free(x);
        return (st == VMMC_ERR_AGAIN || st == VMMC_ERR_BUSY) ? -FI_EAGAIN : vofi_err(st);
    }
    vofi_queue_push(&ep->rdv_tx, x);
    ep->tx_live++;
    return 0;
}

static ssize_t send_now(vofi_ep_t *ep, const struct iovec *iov, size_t count, int peer,
                        uint64_t tag, uint64_t data, uint64_t flags, void *context)
{
    size_t len = vofi_iov_len(iov, count);
    vofi_hdr_t h = {.op = VOFI_OP_EAGER, .tag = tag, .data = data, .len = len};
    if (flags & FI_TAGGED)
        h.flags |= VOFI_F_TAGGED;
    if (flags & FI_REMOTE_CQ_DATA)
        h.flags |= VOFI_F_DATA;
    uint64_t cflags = FI_SEND | ((flags & FI_TAGGED) ? FI_TAGGED : FI_MSG);

    if (len > vofi_set.eager) {
        if (flags & FI_INJECT)
            return -FI_EMSGSIZE;
        return send_rts(ep, iov, count, peer, &h, flags, cflags, context);
    }

    fm_stream_t *s;
    int st = fm_begin_message(ep->fm, peer, sizeof h + len, VOFI_H_MSG, &s);
    if (st == VMMC_ERR_INVALID && !(flags & FI_INJECT) && len)
        /* Larger than this peer's ring (a large job's rings are small). */
        return send_rts(ep, iov, count, peer, &h, flags, cflags, context);
    if (st)
        return (st == VMMC_ERR_AGAIN || st == VMMC_ERR_BUSY) ? -FI_EAGAIN : vofi_err(st);
    st = fm_send_piece(s, &h, sizeof h);
    for (size_t i = 0; i < count && !st; i++)
        if (iov[i].iov_len)
            st = fm_send_piece(s, iov[i].iov_base, iov[i].iov_len);
    int st2 = fm_end_message(s);
    if (!st)
        st = st2;
    if (!st && (flags & FI_DELIVERY_COMPLETE))
        st = vmmc_fence(ep->vep, peer); /* in the target's ring, not only on its way */
    if (st) {
        /* Part of it may be gone: the receiver sees a short message. */
        vofi_fail_tx(ep, cflags, context, -vofi_err(st), st, ep->cntr_send);
        return 0;
    }
    if (!(flags & FI_INJECT))
        vofi_complete_tx(ep, cflags | (flags & FI_COMPLETION), context, ep->cntr_send);
    else if (ep->cntr_send)
        vofi_cntr_inc(ep->cntr_send);
    return 0;
}

/* Sends that found no credit wait here, in order, and go out from
 * progress: an application that posts many sends before its receives (as
 * MPI allows) gets them accepted and reaches its receives, whose posting
 * lets the peers' rings be read (a -FI_EAGAIN loop there would deadlock two
 * such peers once the unexpected bound holds their rings). Once one send
 * waits, every later one waits behind it, so order holds. An inject's bytes
 * are copied (at most VMMC_OFI_INJECT); other sends keep the user's buffer,
 * which stays untouched until their completion. */
static ssize_t backlog_push(vofi_ep_t *ep, const struct iovec *iov, size_t count, int peer,
                            uint64_t tag, uint64_t data, uint64_t flags, void *context)
{
    if (ep->tx_live >= VOFI_TX_SIZE)
        return -FI_EAGAIN;
    size_t len = vofi_iov_len(iov, count);
    size_t extra = (flags & FI_INJECT) ? len : 0;
    vofi_xfer_t *x = calloc(1, sizeof *x + extra);
    if (!x)
        return -FI_ENOMEM;
    if (extra) {
        char *copy = (char *)(x + 1);
        size_t off = 0;
        for (size_t i = 0; i < count; i++) {
            if (iov[i].iov_len)
                memcpy(copy + off, iov[i].iov_base, iov[i].iov_len);
            off += iov[i].iov_len;
        }
        x->iov[0] = (struct iovec){.iov_base = copy, .iov_len = len};
        x->iov_count = 1;
    } else {
        if (count)
            memcpy(x->iov, iov, count * sizeof *iov);
        x->iov_count = count;
    }
    x->len = len;
    x->peer = peer;
    x->tag = tag;
    x->data = data;
    x->flags = flags;
    x->context = context;
    vofi_queue_push(&ep->tx_wait, x);
    ep->tx_live++;
    return 0;
}

static int backlog_drain(vofi_ep_t *ep)
{
    int n = 0;
    vofi_xfer_t *x;
    while ((x = ep->tx_wait.head)) {
        ssize_t r = send_now(ep, x->iov, x->iov_count, x->peer, x->tag, x->data, x->flags,
                             x->context);
        if (r == -FI_EAGAIN)
            break;
        vofi_queue_remove(&ep->tx_wait, x);
        ep->tx_live--;
        if (r < 0) /* refused now that it could go: the operation fails */
            vofi_fail_tx(ep, FI_SEND | ((x->flags & FI_TAGGED) ? FI_TAGGED : FI_MSG), x->context,
                         (int)-r, 0, ep->cntr_send);
        free(x);
        n++;
    }
    return n;
}

ssize_t vofi_proto_send(vofi_ep_t *ep, const struct iovec *iov, size_t count, int peer,
                        uint64_t tag, uint64_t data, uint64_t flags, void *context)
{
    if (!ep->tx_wait.head) {
        ssize_t r = send_now(ep, iov, count, peer, tag, data, flags, context);
        if (r != -FI_EAGAIN)
            return r;
        /* Credits may come back with a pass of progress. */
        vofi_ep_progress_locked(ep);
        if (!ep->tx_wait.head) {
            r = send_now(ep, iov, count, peer, tag, data, flags, context);
            if (r != -FI_EAGAIN)
                return r;
        }
    }
    return backlog_push(ep, iov, count, peer, tag, data, flags, context);
}

int vofi_proto_progress(vofi_ep_t *ep)
{
    int n = 0, r;
    if (ep->tx_wait.head)
        n += backlog_drain(ep);
    /* The control channel carries only answers to our rendezvous sends. */
    if (ep->rdv_tx.head) {
        r = fm_extract(ep->fmc, FM_EXTRACT_ALL);
        if (r > 0)
            n += r;
    }
    /* Over the bound the rings are left alone and FM's credits hold the
     * senders back, unless a posted receive waits for a message that may
     * be behind the unexpected ones in a ring: then reading on is the only
     * way forward (counted: VOFI_C_OVER). */
    int over = ep->unexp_bytes >= vofi_set.unexp_max;
    if (over && (ep->posted_tag.head || ep->posted_msg.head))
        ep->counters[VOFI_C_OVER]++, over = 0;
    if (!over) {
        r = fm_extract(ep->fm, 256 * 1024);
        if (r > 0)
            n += r;
    }
    n += vofi_rdv_progress(ep);
    return n;
}

int vofi_proto_open(vofi_ep_t *ep)
{
    fm_params_t p = {.field_mask = FM_PARAM_FLAGS, .flags = FM_NONBLOCK};
    int st = fm_channel_open(ep->vep, VOFI_CH_DATA, &p, &ep->fm);
    if (st) {
        vofi_warn("fm_channel_open(data): %s", vmmc_last_error());
        return vofi_err(st);
    }
    fm_params_t pc = {.field_mask = FM_PARAM_FLAGS | FM_PARAM_RING_SIZE, .flags = FM_NONBLOCK,
                      .ring_size = 64 * 1024};
    st = fm_channel_open(ep->vep, VOFI_CH_CTRL, &pc, &ep->fmc);
    if (st) {
        vofi_warn("fm_channel_open(ctrl): %s", vmmc_last_error());
        fm_channel_close(ep->fm);
        ep->fm = NULL;
        return vofi_err(st);
    }
    fm_register_handler(ep->fm, VOFI_H_MSG, on_data, ep);
    fm_register_handler(ep->fmc, VOFI_H_MSG, on_ctrl, ep);
    return 0;
}

static void drain_queue(vofi_ep_t *ep, vofi_queue_t *q, int posted)
{
    void *e;
    while ((e = q->head)) {
        vofi_queue_remove(q, e);
        if (posted)
            free(e);
        else
            unexp_free(ep, e);
    }
}

void vofi_proto_close(vofi_ep_t *ep)
{
    drain_queue(ep, &ep->tx_wait, 1);
    vofi_rdv_close(ep);
    for (int i = 0; i < 2; i++) {
        fm_t **f = i ? &ep->fmc : &ep->fm;
        if (!*f)
            continue;
        /* A handler suspended mid-message holds the channel: let it end. */
        for (int tries = 0; fm_channel_close(*f) == VMMC_ERR_BUSY && tries < 1000; tries++)
            fm_extract(*f, FM_EXTRACT_ALL);
        *f = NULL;
    }
    drain_queue(ep, &ep->posted_tag, 1);
    drain_queue(ep, &ep->posted_msg, 1);
    drain_queue(ep, &ep->unexp_tag, 0);
    drain_queue(ep, &ep->unexp_msg, 0);
}
