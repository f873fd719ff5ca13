/* The rendezvous: messages above VMMC_OFI_EAGER land in the receiver's
 * buffer by VMMC deliberate update, redirected (VMMC-2's transfer
 * redirection) from a window of an export into the posted buffer.
 *
 * Each endpoint exports, for every peer that sends it a large message, up
 * to VOFI_WINS *windows* (more as more chunks from it are in flight): each
 * VOFI_WIN_SLOTS slots of VMMC_OFI_RDV_CHUNK bytes of address
 * space (never touched: anonymous, MAP_NORESERVE), redirectable, importable
 * by that peer only. Once the RTS is matched, the receiver posts
 * vmmc_redirect(window, slot, user buffer, chunk) and sends a CTS naming the
 * window and slot; the sender (which imports the window once) writes the
 * chunk with vmmc_sendv() at that slot, and the bytes go straight into the
 * user's buffer: process_vm_writev on one host (one copy, no staging), the
 * udp link across hosts. The redirect request completes when every byte is
 * in; the receiver then posts the next chunk, or completes. The sender
 * completes after writing the chunk the CTS marked last.
 *
 * A peer that dies while a rendezvous is in flight fails it on this side
 * with FI_EIO, as it fails receives posted for that peer alone (checked
 * every VOFI_LIVE_CHECK_NS while any is pending). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ofi/ofi.h"

#define VOFI_WIN_SLOTS 8 /* vmmc keeps up to 8 posted redirects per export */
#define VOFI_WINS 4      /* windows per sending peer: chunks in flight from it <= 32 */
#define VOFI_LIVE_CHECK_NS 50000000ull

struct vofi_window {
    struct vofi_window *next;
    int peer;
    vmmc_export_t *ex;
    void *mem;
    size_t slot_len;
    unsigned used; /* slot bitmap */
    char name[48];
};

struct vofi_wproxy {
    struct vofi_wproxy *next;
    int peer;
    char name[48];
    vmmc_proxy_t *px;
};

/* Work the rendezvous does outside FM handlers. */
enum { W_RX_CHUNK = 1, W_TX_CTS = 2 };
typedef struct vofi_work {
    struct vofi_work *next, *prev;
    int kind;
    int peer;
    vofi_xfer_t *x;
    vofi_cts_t cts;
} vofi_work_t;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* a few ns: called per progress */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A window of @p peer's with a free slot, made if needed (at most
 * VOFI_WINS): NULL with *full set when all are busy, NULL alone when one
 * cannot be made. */
static struct vofi_window *window_get(vofi_ep_t *ep, int peer, int *full)
{
    int have = 0;
    *full = 0;
    for (struct vofi_window *w = ep->windows; w; w = w->next)
        if (w->peer == peer) {
            if (w->used != (1u << VOFI_WIN_SLOTS) - 1)
                return w;
            have++;
        }
    if (have >= VOFI_WINS) {
        *full = 1;
        return NULL;
    }
    struct vofi_window *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->peer = peer;
    w->slot_len = vofi_set.rdv_chunk;
    size_t len = w->slot_len * VOFI_WIN_SLOTS;
    w->mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                  -1, 0);
    if (w->mem == MAP_FAILED) {
        vofi_warn("rendezvous window for peer %d: mmap of %zu bytes failed", peer, len);
        free(w);
        return NULL;
    }
    static _Atomic unsigned gen;
    snprintf(w->name, sizeof w->name, "ofi.w.%d.%u", peer, atomic_fetch_add(&gen, 1));
    vmmc_export_params_t p = {
        .field_mask = VMMC_EXPORT_PARAM_IMPORTERS | VMMC_EXPORT_PARAM_FLAGS,
        .name = w->name, .addr = w->mem, .length = len,
        .flags = VMMC_EXPORT_REDIRECTABLE, .importers = &w->peer, .num_importers = 1,
    };
    int st = vmmc_export(ep->vep, &p, &w->ex);
    if (st) {
        vofi_warn("rendezvous window for peer %d: %s", peer, vmmc_last_error());
        munmap(w->mem, len);
        free(w);
        return NULL;
    }
    w->next = ep->windows;
    ep->windows = w;
    return w;
}

static vmmc_proxy_t *wproxy_get(vofi_ep_t *ep, int peer, const char *name, int *err)
{
    struct vofi_wproxy *p;
    for (p = ep->wproxies; p; p = p->next)
        if (p->peer == peer && !strcmp(p->name, name))
            return p->px;
    p = calloc(1, sizeof *p);
    if (!p) {
        *err = VMMC_ERR_NOMEM;
        return NULL;
    }
    p->peer = peer;
    snprintf(p->name, sizeof p->name, "%s", name);
    int st = vmmc_import(ep->vep, peer, name, (int)vofi_set.import_ms, &p->px);
    if (st) {
        vofi_warn("rendezvous: import of peer %d's window %s: %s", peer, name, vmmc_last_error());
        free(p);
        *err = st;
        return NULL;
    }
    p->next = ep->wproxies;
    ep->wproxies = p;
    return p->px;
}

static void work_add(vofi_ep_t *ep, int kind, int peer, vofi_xfer_t *x, const vofi_cts_t *c)
{
    vofi_work_t *w = calloc(1, sizeof *w);
    if (!w) {
        vofi_warn("rendezvous: out of memory");
        return;
    }
    w->kind = kind;
    w->peer = peer;
    w->x = x;
    if (c)
        w->cts = *c;
    vofi_queue_push(&ep->work, w);
}

void vofi_rdv_start(vofi_ep_t *ep, vofi_xfer_t *x)
{
    x->want = x->msg_len < x->len ? x->msg_len : x->len;
    x->done = 0;
    work_add(ep, W_RX_CHUNK, x->peer, x, NULL);
}

static void rx_finish(vofi_ep_t *ep, vofi_xfer_t *x, int err, int vst)
{
    if (x->flags & FI_DISCARD) {
        free(x);
        return;
    }
    vofi_cqe_t e = {
        .op_context = x->context,
        .flags = FI_RECV | ((x->msg_flags & VOFI_F_TAGGED) ? FI_TAGGED : FI_MSG) |
                 ((x->msg_flags & VOFI_F_DATA) ? FI_REMOTE_CQ_DATA : 0) |
                 (x->flags & (FI_COMPLETION | FI_MULTI_RECV)),
        .len = x->done,
        .buf = x->iov_count ? x->iov[0].iov_base : NULL,
        .data = x->msg_data,
        .tag = x->msg_tag,
        .src = (ep->caps & FI_SOURCE) ? vofi_ep_addr_of(ep, x->peer) : FI_ADDR_NOTAVAIL,
    };
    if (!err && x->msg_len > x->done) {
        err = FI_ETRUNC;
        e.olen = x->msg_len - x->done;
    }
    if (err) {
        e.err = err;
        e.prov_errno = vst;
        vofi_fail_rx(ep, &e, ep->cntr_recv);
    } else {
        vofi_complete_rx(ep, &e, ep->cntr_recv);
    }
    free(x);
}

/* Post the next chunk of receive @p x and send its CTS. 1: done (or
 * failed), 0: posted, -1: try again later (no free slot, or no credit). */
static int rx_chunk(vofi_ep_t *ep, vofi_xfer_t *x)
{
    vofi_cts_t c = {.op = VOFI_OP_CTS, .id = x->id, .msg_off = x->done};
    if (x->want == 0 || x->done >= x->want) {
        /* Nothing (more) wanted: tell the sender it may finish. */
        c.flags = VOFI_F_LAST;
        if (vofi_proto_send_cts(ep, x->peer, &c) == -FI_EAGAIN)
            return -1;
        rx_finish(ep, x, 0, 0);
        return 1;
    }
    int full;
    struct vofi_window *w = window_get(ep, x->peer, &full);
    if (!w && full)
        return -1; /* every slot busy: later */
    if (!w) {
        c.op = VOFI_OP_NAK;
        if (vofi_proto_send_cts(ep, x->peer, &c) == -FI_EAGAIN)
            return -1;
        rx_finish(ep, x, FI_ENOMEM, VMMC_ERR_NOMEM);
        return 1;
    }
    int slot = -1;
    for (int i = 0; i < VOFI_WIN_SLOTS; i++)
        if (!(w->used & (1u << i))) {
            slot = i;
            break;
        }
    if (slot < 0)
        return -1;
    /* The chunk: within one piece of the iov, at most one slot. */
    size_t off = x->done, i = 0;
    while (i < x->iov_count && off >= x->iov[i].iov_len)
        off -= x->iov[i++].iov_len;
    size_t len = x->iov[i].iov_len - off;
    if (len > x->want - x->done)
        len = x->want - x->done;
    if (len > w->slot_len)
        len = w->slot_len;
    char *dst = (char *)x->iov[i].iov_base + off;
    size_t woff = (size_t)slot * w->slot_len;
    int st = vmmc_redirect(w->ex, woff, dst, len, &x->req);
    if (st != VMMC_OK && st != VMMC_INPROGRESS) {
        vofi_warn("rendezvous: redirect: %s", vmmc_last_error());
        c.op = VOFI_OP_NAK;
        if (vofi_proto_send_cts(ep, x->peer, &c) == -FI_EAGAIN)
            return -1;
        rx_finish(ep, x, -vofi_err(st), st);
        return 1;
    }
    c.len = len;
    c.win_off = woff;
    if (x->done + len >= x->want)
        c.flags |= VOFI_F_LAST;
    snprintf(c.window, sizeof c.window, "%s", w->name);
    if (vofi_proto_send_cts(ep, x->peer, &c) == -FI_EAGAIN) {
        vmmc_redirect_cancel(&x->req);
        return -1;
    }
    w->used |= 1u << slot;
    x->chunk_live = slot + 1;
    x->win = w;
    x->mr_used = len; /* the chunk in flight */
    vofi_queue_push(&ep->rdv_rx, x);
    return 0;
}

void vofi_rdv_cts(vofi_ep_t *ep, int peer, const vofi_cts_t *cts)
{
    work_add(ep, W_TX_CTS, peer, NULL, cts);
}

static vofi_xfer_t *tx_find(vofi_ep_t *ep, int peer, uint64_t id)
{
    for (vofi_xfer_t *x = ep->rdv_tx.head; x; x = x->next)
        if (x->id == id && x->peer == peer)
            return x;
    return NULL;
}

static void tx_finish(vofi_ep_t *ep, vofi_xfer_t *x, int vst)
{
    if (!vst && x->msg_flags) /* FI_DELIVERY_COMPLETE: landed, not only sent */
        vst = vmmc_fence(ep->vep, x->peer);
    vofi_queue_remove(&ep->rdv_tx, x);
    ep->tx_live--;
    if (vst)
        vofi_fail_tx(ep, x->flags & (FI_SEND | FI_TAGGED | FI_MSG), x->context, -vofi_err(vst),
                     vst, ep->cntr_send);
    else
        vofi_complete_tx(ep, x->flags, x->context, ep->cntr_send);
    free(x);
}

/* The sender's side of a CTS: write the chunk where the receiver said. */
static void tx_cts(vofi_ep_t *ep, int peer, const vofi_cts_t *c)
{
    vofi_xfer_t *x = tx_find(ep, peer, c->id);
    if (!x || c->msg_off > x->len || c->len > x->len - c->msg_off) {
        ep->counters[VOFI_C_PROTOCOL]++; /* stale or forged: nothing of ours */
        return;
    }
    if (c->op == VOFI_OP_NAK) {
        tx_finish(ep, x, VMMC_ERR_NOMEM);
        return;
    }
    if (c->len) {
        int err = 0;
        vmmc_proxy_t *px = wproxy_get(ep, peer, c->window, &err);
        if (!px) {
            tx_finish(ep, x, err);
            return;
        }
        vmmc_iov_t v[VOFI_IOV_LIMIT];
        int n = 0;
        size_t off = c->msg_off, left = c->len;
        for (size_t i = 0; i < x->iov_count && left; i++) {
            if (off >= x->iov[i].iov_len) {
                off -= x->iov[i].iov_len;
                continue;
            }
            size_t k = x->iov[i].iov_len - off;
            if (k > left)
                k = left;
            v[n].base = (char *)x->iov[i].iov_base + off;
            v[n].len = k;
            n++;
            left -= k;
            off = 0;
        }
        int st = vmmc_sendv(px, c->win_off, v, n, 0, 0);
        if (st) {
            vofi_warn("rendezvous: writing %llu bytes to peer %d: %s",
                      (unsigned long long)c->len, peer, vmmc_last_error());
            tx_finish(ep, x, st);
            return;
        }
        x->done += c->len;
    }
    if (c->flags & VOFI_F_LAST)
        tx_finish(ep, x, 0);
}

/* Redirects that completed: next chunk, or the receive is done. */
static int rx_poll(vofi_ep_t *ep, int check_live)
{
    int n = 0;
    vofi_xfer_t *next;
    for (vofi_xfer_t *x = ep->rdv_rx.head; x; x = next) {
        next = x->next;
        int st = vmmc_test(&x->req);
        if (st == VMMC_INPROGRESS) {
            if (!check_live || vmmc_peer_alive(ep->vep, x->peer) != 0)
                continue;
            vmmc_redirect_cancel(&x->req);
            st = VMMC_ERR_PEER_DEAD;
        }
        vofi_queue_remove(&ep->rdv_rx, x);
        x->win->used &= ~(1u << (x->chunk_live - 1));
        x->chunk_live = 0;
        x->win = NULL;
        n++;
        if (st) {
            rx_finish(ep, x, FI_EIO, st);
            continue;
        }
        x->done += x->mr_used;
        x->mr_used = 0;
        if (x->done >= x->want)
            rx_finish(ep, x, 0, 0);
        else
            work_add(ep, W_RX_CHUNK, x->peer, x, NULL);
    }
    return n;
}

/* Receives directed at a peer that died can never complete: fail them. */
static void rx_check_live(vofi_ep_t *ep, vofi_queue_t *q)
{
    vofi_xfer_t *next;
    for (vofi_xfer_t *x = q->head; x; x = next) {
        next = x->next;
        if (x->peer < 0 || vmmc_peer_alive(ep->vep, x->peer) != 0)
            continue;
        vofi_queue_remove(q, x);
        ep->rx_posted--;
        vofi_cqe_t e = {.op_context = x->context,
                        .flags = x->flags & (FI_RECV | FI_TAGGED | FI_MSG | FI_MULTI_RECV),
                        .tag = x->tag, .err = FI_EIO, .prov_errno = VMMC_ERR_PEER_DEAD,
                        .src = FI_ADDR_NOTAVAIL};
        vofi_fail_rx(ep, &e, ep->cntr_recv);
        free(x);
    }
}

static void tx_check_live(vofi_ep_t *ep)
{
    vofi_xfer_t *next;
    for (vofi_xfer_t *x = ep->rdv_tx.head; x; x = next) {
        next = x->next;
        if (vmmc_peer_alive(ep->vep, x->peer) == 0)
            tx_finish(ep, x, VMMC_ERR_PEER_DEAD);
    }
}

int vofi_rdv_progress(vofi_ep_t *ep)
{
    int n = 0;
    /* Work queued by the handlers, in order; what cannot go on now stays. */
    vofi_work_t *next;
    for (vofi_work_t *w = ep->work.head; w; w = next) {
        next = w->next;
        if (w->kind == W_RX_CHUNK) {
            if (rx_chunk(ep, w->x) < 0)
                continue;
        } else {
            tx_cts(ep, w->peer, &w->cts);
        }
        vofi_queue_remove(&ep->work, w);
        free(w);
        n++;
    }
    int check = 0;
    /* The clock is read one pass in 64: MPI keeps receives posted. */
    if ((ep->rdv_rx.head || ep->rdv_tx.head || ep->rx_posted) && (++ep->live_passes & 63) == 0) {
        uint64_t t = now_ns();
        if (t - ep->live_check_ns > VOFI_LIVE_CHECK_NS) {
            ep->live_check_ns = t;
            check = 1;
        }
    }
    if (ep->rdv_rx.head)
        n += rx_poll(ep, check);
    if (check) {
        tx_check_live(ep);
        rx_check_live(ep, &ep->posted_tag);
        rx_check_live(ep, &ep->posted_msg);
    }
    return n;
}

void vofi_rdv_close(vofi_ep_t *ep)
{
    vofi_work_t *w;
    while ((w = ep->work.head)) {
        vofi_queue_remove(&ep->work, w);
        if (w->kind == W_RX_CHUNK)
            free(w->x);
        free(w);
    }
    vofi_xfer_t *x;
    while ((x = ep->rdv_rx.head)) {
        vofi_queue_remove(&ep->rdv_rx, x);
        vmmc_redirect_cancel(&x->req);
        free(x);
    }
    while ((x = ep->rdv_tx.head)) {
        vofi_queue_remove(&ep->rdv_tx, x);
        free(x);
    }
    while (ep->wproxies) {
        struct vofi_wproxy *p = ep->wproxies;
        ep->wproxies = p->next;
        vmmc_unimport(p->px);
        free(p);
    }
    while (ep->windows) {
        struct vofi_window *win = ep->windows;
        ep->windows = win->next;
        vmmc_unexport(win->ex);
        munmap(win->mem, win->slot_len * VOFI_WIN_SLOTS);
        free(win);
    }
}
