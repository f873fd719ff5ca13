/* The fabric transport's open world: peers that reach an endpoint first
 * (vmmc_connect on their side, vmmc_listen on ours), not ranks of a job.
 *
 * A connector knows the listener's fabric address from its vmmc address,
 * puts it into its address vector and sends, first thing, a HELLO carrying
 * its own vmmc address (which holds its fabric address, fab=, and secret,
 * fsec=). The listener's provider names no source for it (the connector is
 * not in its address vector): the HELLO is checked here (a well-formed
 * address of our provider, whose secret is the one the header carries,
 * with a fabric address of the right size), then handed to the core
 * (vmmc_tl_peer_accept), which finds the peer by its address or, if the
 * endpoint listens, accepts it as a new handle. Its address then goes into
 * the address vector, replies flow as to any peer, and the new handle is
 * announced from the control thread (the application's callback may call
 * anything, including operations that wait for this transport's thread).
 * A HELLO the core refuses (the endpoint does not listen) is answered with
 * a REFUSE sent to the address it names: the connector takes it only from
 * the address it connected to, as the first thing it hears from it, and
 * fails the peer at once ("refused: not listening (fabric)").
 *
 * A fabric address may be another endpoint's by now (the one a card names
 * closed, a new one bound its port): a HELLO names the whole secret of the
 * card its sender used, every message the low half of it (dst). A HELLO
 * for another secret is refused as such, anything else for another is
 * dropped (fabric.not_ours).
 *
 * Everything else from an address the provider does not name is taken only
 * if its header carries the secret of a peer that reached us by HELLO (or of
 * the rank it claims, fabric.c): messages the connector sent right behind
 * its HELLO may come before the provider names it. The rest is dropped and
 * counted (fabric.from_unknown, fabric.malformed). */
#include "transport/fabric/fab_int.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef struct fab_ann {
    int peer;
    struct fab_ann *next;
} fab_ann_t;

typedef struct fab_known {
    uint64_t sec;
    int h;
} fab_known_t;

/* Addresses put into the address vector only to refuse them, at most: a
 * stream of forged HELLOs must not grow it without bound (beyond, a HELLO
 * is refused without an answer: its sender fails when its wait ends). */
#define FAB_REFUSE_MAX 64

/* ---- announcing new peers (the control thread) ------------------------------ */

static void announce_ready(vmmc_ep_t *ep, int fd, uint32_t events, void *arg)
{
    fab_ep_t *f = arg;
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof v);
    (void)r;
    (void)events;
    for (;;) {
        pthread_mutex_lock(&f->lock);
        fab_ann_t *a = f->ann;
        if (a)
            f->ann = a->next;
        pthread_mutex_unlock(&f->lock);
        if (!a)
            break;
        vmmc_tl_peer_announce(ep, a->peer);
        free(a);
    }
}

static void announce(fab_ep_t *f, int h)
{
    fab_ann_t *a = malloc(sizeof *a);
    if (!a) {
        vmmc_log(VMMC_LOG_ERROR, "fabric: out of memory announcing peer %d", h);
        return;
    }
    a->peer = h;
    a->next = NULL;
    pthread_mutex_lock(&f->lock);
    fab_ann_t **pp = &f->ann;
    while (*pp)
        pp = &(*pp)->next;
    *pp = a;
    pthread_mutex_unlock(&f->lock);
    uint64_t one = 1;
    ssize_t w = write(f->ann_fd, &one, sizeof one);
    (void)w;
}

int vmmc_fab__listen(vmmc_ep_t *ep)
{
    fab_ep_t *f = F(ep);
    if (!f || !f->thread_up)
        return VMMC_OK; /* not open here: nobody reaches us over the fabric */
    pthread_mutex_lock(&f->lock);
    int rc = VMMC_OK;
    if (f->ann_fd < 0) {
        int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0)
            rc = vmmc_error_sys("fabric: eventfd");
        else if ((rc = vmmc_tl_ctl_watch(ep, fd, announce_ready, f)) != VMMC_OK)
            close(fd);
        else
            f->ann_fd = fd;
    }
    pthread_mutex_unlock(&f->lock);
    return rc;
}

void vmmc_fab__accept_close(fab_ep_t *f)
{
    if (f->ann_fd >= 0)
        close(f->ann_fd); /* the control thread has stopped */
    f->ann_fd = -1;
    for (fab_ann_t *a = f->ann, *n; a; a = n) {
        n = a->next;
        free(a);
    }
    f->ann = NULL;
    free(f->known);
    f->known = NULL;
    f->nknown = f->known_cap = 0;
}

/* ---- the connector's side ------------------------------------------------------ */

int vmmc_fab__hello(fab_ep_t *f, int h)
{
    int st = VMMC_OK;
    fab_peer_t *p = vmmc_fab__peer(f, h, &st);
    if (!p)
        return st;
    int was = 0;
    if (!atomic_compare_exchange_strong(&p->hello, &was, 1))
        return VMMC_OK; /* sent already, or it reached us with its own */
    vmmc_tl_ep_t *v = VMMC_TL_EP(f->ep);
    vmmc_tl_peer_t *tp = vmmc_tl_peer_at(f->ep, h);
    /* the endpoint we mean: one that has its address now refuses us */
    fab_hdr_t hd = {.kind = F_HELLO};
    if (tp)
        (void)vmmc_fab__card_sec(tp->addr, &hd.imm);
    /* numbered 0 like the first message to any peer: the listener takes
     * the peer's later messages in order behind it */
    if ((st = vmmc_fab__send(f, h, &hd, v->addr, v->addr_len, 0)) != VMMC_OK)
        atomic_store(&p->hello, 0);
    return st;
}

/* A REFUSE from @h (for @why, FAB_REFUSE_*): taken only from a peer we
 * sent our HELLO to and before anything else of it was handled (a refusal
 * after it took us would be old); then the peer fails at once. */
static void refused_by(fab_ep_t *f, int h, uint64_t why)
{
    fab_peer_t *p = fab_peer_of(f, h);
    if (!p || !atomic_load(&p->hello) || p->rx_seq != 0 ||
        (h < VMMC_TL_EP(f->ep)->size && VMMC_TL_EP(f->ep)->in_job)) {
        atomic_fetch_add_explicit(&f->c_bad, 1, memory_order_relaxed);
        vmmc_debug("fabric: a refusal from peer %d that did not come first: ignored", h);
        return;
    }
    atomic_fetch_add_explicit(&f->c_refused_by_peer, 1, memory_order_relaxed);
    vmmc_tl_peer_failed(f->ep, h, -1,
                        why == FAB_REFUSE_NOT_OURS
                            ? "refused: another endpoint has this address now; the one "
                              "named is gone (fabric)"
                            : "refused: not listening (fabric)");
    vmmc_fab__waits_fail(f, h, VMMC_ERR_PEER_DEAD);
}

/* ---- the listener's side --------------------------------------------------------- */

/* Answer HELLO @hello, refused for @why (FAB_REFUSE_*), at the fabric
 * address @raw it gave (best effort). */
static void refuse(fab_ep_t *f, const unsigned char *raw, const fab_hdr_t *hello, int why)
{
    fi_addr_t fa = FI_ADDR_NOTAVAIL;
    pthread_mutex_lock(&f->lock);
    int room = f->nrefused < FAB_REFUSE_MAX;
    if (room && fi_av_insert(f->av, raw, 1, &fa, 0, NULL) == 1)
        f->nrefused++;
    else
        fa = FI_ADDR_NOTAVAIL;
    pthread_mutex_unlock(&f->lock);
    if (fa == FI_ADDR_NOTAVAIL) {
        vmmc_debug("fabric: refused a HELLO without answering it (%s)",
                   room ? "fi_av_insert failed" : "too many refused addresses");
        return;
    }
    fab_tx_t *tx = malloc(sizeof *tx + sizeof(fab_hdr_t));
    if (!tx)
        return;
    memset(tx, 0, sizeof *tx);
    tx->peer = -1; /* no handle: a failure fails nobody */
    tx->len = sizeof(fab_hdr_t);
    fab_hdr_t r = {.kind = F_REFUSE, .src = -1, .sec = f->sec, .imm = (uint64_t)why,
                   .dst = (uint32_t)hello->sec, .token = {hello->imm, 0}};
    memcpy(tx->buf, &r, sizeof r);
    void *desc = NULL;
    if (f->cache) {
        if (!(tx->reg = fab_cache_get(f->cache, tx->buf, tx->len, FI_SEND))) {
            free(tx);
            return;
        }
        desc = tx->reg->desc;
    }
    /* counted first: once posted, the refused one may act on it before
     * this thread runs again */
    atomic_fetch_add_explicit(&f->c_refusals_sent, 1, memory_order_relaxed);
    for (int i = 0; i < 1000; i++) {
        ssize_t rc = -FI_EAGAIN;
        if (vmmc_fab__window_take(f, NULL) &&
            (rc = fi_send(f->fep, tx->buf, tx->len, desc, fa, &tx->ctx)) != 0)
            vmmc_fab__window_give(f, NULL);
        if (rc == 0) {
            (void)vmmc_fab__tx_progress(f);
            return;
        }
        if (rc != -FI_EAGAIN)
            break;
        (void)vmmc_fab__tx_progress(f);
        sched_yield();
    }
    atomic_fetch_sub_explicit(&f->c_refusals_sent, 1, memory_order_relaxed);
    vmmc_fab__tx_free(f, tx);
}

static void known_add(fab_ep_t *f, uint64_t sec, int h)
{
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->nknown; i++)
        if (f->known[i].h == h) {
            pthread_mutex_unlock(&f->lock);
            return;
        }
    if (f->nknown == f->known_cap) {
        size_t cap = f->known_cap ? f->known_cap * 2 : 16;
        fab_known_t *n = realloc(f->known, cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&f->lock);
            return; /* its messages wait until the provider names it */
        }
        f->known = n;
        f->known_cap = cap;
    }
    f->known[f->nknown++] = (fab_known_t){sec, h};
    pthread_mutex_unlock(&f->lock);
}

static int known_find(fab_ep_t *f, uint64_t sec)
{
    int h = -1;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->nknown && h < 0; i++)
        if (f->known[i].sec == sec)
            h = f->known[i].h;
    pthread_mutex_unlock(&f->lock);
    return h;
}

/* A peer we sent a HELLO (we connected to it) whose address card has the
 * secret @sec, or -1; remembered as known, so that its next messages are
 * found at once. Where the provider names no source (rxd), this is how a
 * connector knows the answers of the endpoint it connected to. */
static int greeted_find(fab_ep_t *f, uint64_t sec)
{
    int n = vmmc_tl_peer_count(f->ep);
    for (int h = 0; h < n; h++) {
        fab_peer_t *p = fab_peer_of(f, h);
        vmmc_tl_peer_t *tp = vmmc_tl_peer_at(f->ep, h);
        uint64_t s;
        if (p && atomic_load(&p->hello) && tp && tp->tl == &vmmc_tl_fabric &&
            vmmc_fab__card_sec(tp->addr, &s) && s == sec) {
            known_add(f, sec, h);
            return h;
        }
    }
    return -1;
}

/* A HELLO from an address the provider does not name, or one meant for
 * another endpoint (refused): the handle of its sender (known, or accepted
 * now), or FAB_RX_DROP (counted). */
static int on_hello(fab_ep_t *f, const fab_hdr_t *hd, const char *data, size_t dlen)
{
    vmmc_ep_t *ep = f->ep;
    char card[VMMC_ADDR_MAX + 1], v[256];
    uint64_t sec = 0;
    const char *why = NULL;
    unsigned char raw[128];
    if (hd->seq != 0 || hd->flags || dlen == 0 || dlen >= VMMC_ADDR_MAX)
        why = "not a first message holding an address";
    else if (memcpy(card, data, dlen), card[dlen] = 0, vmmc_tl_addr_check(ep, card, dlen) != VMMC_OK)
        why = "malformed address";
    else if (vmmc_fab__reach(ep, card, 0) < 0)
        why = "its address names no fabric address of our provider";
    else if (!vmmc_fab__card_sec(card, &sec) || sec != hd->sec)
        why = "its secret is not the one its address gives";
    else if (!vmmc_card_get(card, "fab", v, sizeof v) || strlen(v) != 2 * f->addrlen)
        why = "its fabric address has the wrong size";
    if (why) {
        atomic_fetch_add_explicit(&f->c_bad, 1, memory_order_relaxed);
        vmmc_debug("fabric: dropped a HELLO from an unknown address: %s", why);
        return FAB_RX_DROP;
    }
    for (size_t i = 0; i < f->addrlen; i++)
        sscanf(v + 2 * i, "%2hhx", &raw[i]);
    if (hd->imm != f->sec) {
        /* meant for the endpoint that had our address before us (it
         * closed, the port was taken again): refused, so that its sender
         * fails at once instead of talking to us */
        atomic_fetch_add_explicit(&f->c_not_ours, 1, memory_order_relaxed);
        vmmc_debug("fabric: refused a HELLO meant for another endpoint");
        refuse(f, raw, hd, FAB_REFUSE_NOT_OURS);
        return FAB_RX_DROP;
    }
    int is_new = 0;
    int h = vmmc_tl_peer_accept(ep, &vmmc_tl_fabric, card, dlen, 0, &is_new);
    if (h == VMMC_ERR_PERMISSION) {
        /* it does not listen (or closes): say so at the address it gave,
         * so that it fails at once instead of waiting out its request */
        vmmc_debug("fabric: HELLO refused: %s", vmmc_last_error());
        refuse(f, raw, hd, FAB_REFUSE_NOT_LISTENING);
        return FAB_RX_DROP;
    }
    int st = VMMC_OK;
    fab_peer_t *p = h >= 0 ? vmmc_fab__peer(f, h, &st) : NULL;
    if (!p) {
        atomic_fetch_add_explicit(&f->c_bad, 1, memory_order_relaxed);
        vmmc_debug("fabric: HELLO not taken: %s", vmmc_last_error());
        return FAB_RX_DROP;
    }
    atomic_store(&p->hello, 1); /* it knows us: no HELLO of ours to send */
    known_add(f, hd->sec, h);
    if (is_new) {
        if (f->ann_fd >= 0)
            announce(f, h);
        vmmc_debug("fabric: accepted peer %d", h);
    }
    return h;
}

int vmmc_fab__rx_source(fab_ep_t *f, fi_addr_t src, const void *buf, size_t len)
{
    int h = vmmc_fab__handle_of(f, src);
    if (len < sizeof(fab_hdr_t)) {
        atomic_fetch_add_explicit(h < 0 ? &f->c_unknown : &f->c_bad, 1, memory_order_relaxed);
        return FAB_RX_DROP;
    }
    fab_hdr_t hd;
    memcpy(&hd, buf, sizeof hd);
    if (hd.kind == F_HELLO && (h < 0 || hd.imm != f->sec))
        return on_hello(f, &hd, (const char *)buf + sizeof hd, len - sizeof hd);
    if (hd.dst != (uint32_t)f->sec) {
        /* sent to the endpoint that had our address before us */
        atomic_fetch_add_explicit(&f->c_not_ours, 1, memory_order_relaxed);
        return FAB_RX_DROP;
    }
    if (hd.kind == F_REFUSE) {
        /* only the address we connected to may refuse us; where the
         * provider names no source (rxd), the peer we sent a HELLO whose
         * card has the refusal's secret (or, refused as another endpoint's
         * HELLO, the secret our HELLO named, echoed) */
        if (h < 0 && f->nosrc && src == FI_ADDR_NOTAVAIL)
            h = greeted_find(f, hd.imm == FAB_REFUSE_NOT_OURS ? hd.token[0] : hd.sec);
        if (h < 0)
            atomic_fetch_add_explicit(&f->c_unknown, 1, memory_order_relaxed);
        else
            refused_by(f, h, hd.imm);
        return FAB_RX_DROP;
    }
    if (h < 0 && src == FI_ADDR_NOTAVAIL) {
        h = vmmc_fab__handle_claimed(f, hd.src, hd.sec);
        if (h < 0)
            h = known_find(f, hd.sec);
        if (h < 0 && f->nosrc)
            h = greeted_find(f, hd.sec);
    }
    if (h < 0 || !fab_peer_of(f, h)) {
        atomic_fetch_add_explicit(h < 0 ? &f->c_unknown : &f->c_bad, 1, memory_order_relaxed);
        return FAB_RX_DROP;
    }
    return h;
}
