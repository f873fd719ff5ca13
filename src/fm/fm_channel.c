/* Fast Messages: channels. An fm_t is one channel of FM on an endpoint; its
 * rings, credits, handler table, handler stacks and counters are its own,
 * and its exports carry its id in their names (fm_peer.c), so several
 * clients share an endpoint without reaching into each other's state.
 *
 * The endpoint's table (fm_ep_t, one per endpoint that has a channel open)
 * holds the ids in use, so a second open of an id is refused, and the open
 * channels, which one progress hook per endpoint serves (the core has room
 * for few hooks, and a hook per channel would spend them). The hook reads
 * the table under a read lock it only tries to take; opening and closing
 * change it under the write lock, so once a channel is out of the table no
 * hook call is inside it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fm/fm_int.h"

typedef struct fm_ep {
    vmmc_ep_t *ep;
    struct fm_ep *next;
    pthread_rwlock_t lock;        /* ch[] and n, against the hook */
    int n;                        /* channels in ch[] (fully open) */
    int nres;                     /* ids reserved (open or opening) */
    fm_t *ch[FM_CHANNEL_MAX];
    unsigned char used[FM_CHANNEL_MAX];
} fm_ep_t;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static fm_ep_t *reg_head;

/* The endpoint's progress hook: every open channel's, in turn. */
static int ep_poll(void *arg)
{
    fm_ep_t *e = arg;
    if (pthread_rwlock_tryrdlock(&e->lock) != 0)
        return 0; /* a channel opens or closes: next time */
    int ev = 0;
    for (int i = 0; i < e->n; i++)
        ev += fm_hook_poll(e->ch[i]);
    pthread_rwlock_unlock(&e->lock);
    return ev;
}

static int ep_arm(void *arg)
{
    fm_ep_t *e = arg;
    if (pthread_rwlock_tryrdlock(&e->lock) != 0)
        return 1; /* do not sleep past a change we did not look at */
    int pending = 0;
    for (int i = 0; i < e->n && !pending; i++)
        pending = fm_hook_arm(e->ch[i]);
    pthread_rwlock_unlock(&e->lock);
    return pending;
}

/* Reserve @fm's id on its endpoint (before anything is exported, so a
 * duplicate open changes nothing). */
int fm_channel_reserve(fm_t *fm)
{
    int st = VMMC_OK, max = fm_cfg_channels();
    pthread_mutex_lock(&reg_lock);
    fm_ep_t *e = reg_head;
    while (e && e->ep != fm->ep)
        e = e->next;
    if (e && e->used[fm->channel]) {
        st = vmmc_error(VMMC_ERR_EXISTS, "fm: channel %d is already open on this endpoint",
                        fm->channel);
        goto out;
    }
    if (e && e->nres >= max) {
        st = vmmc_error(VMMC_ERR_AGAIN, "fm: %d channels are open on this endpoint already "
                        "(VMMC_FM_CHANNELS)", e->nres);
        goto out;
    }
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            st = vmmc_error(VMMC_ERR_NOMEM, "fm: no memory for the endpoint's channel table");
            goto out;
        }
        e->ep = fm->ep;
        pthread_rwlock_init(&e->lock, NULL);
        if ((st = vmmc_progress_hook_add(fm->ep, ep_poll, ep_arm, e)) != VMMC_OK) {
            pthread_rwlock_destroy(&e->lock);
            free(e);
            goto out;
        }
        e->next = reg_head;
        reg_head = e;
    }
    e->used[fm->channel] = 1;
    e->nres++;
    fm->fep = e;
out:
    pthread_mutex_unlock(&reg_lock);
    return st;
}

/* The channel is ready: let the endpoint's hook serve it. */
void fm_channel_list(fm_t *fm)
{
    fm_ep_t *e = fm->fep;
    pthread_rwlock_wrlock(&e->lock);
    e->ch[e->n++] = fm;
    pthread_rwlock_unlock(&e->lock);
    fm->listed = 1;
}

/* Take @fm out of the hook's table and give its id back; the last channel
 * of an endpoint takes the hook away. */
void fm_channel_release(fm_t *fm)
{
    fm_ep_t *e = fm->fep;
    if (!e)
        return;
    pthread_mutex_lock(&reg_lock);
    if (fm->listed) {
        pthread_rwlock_wrlock(&e->lock);
        for (int i = 0; i < e->n; i++)
            if (e->ch[i] == fm) {
                e->ch[i] = e->ch[--e->n];
                break;
            }
        pthread_rwlock_unlock(&e->lock);
        fm->listed = 0;
    }
    e->used[fm->channel] = 0;
    fm->fep = NULL;
    if (--e->nres == 0) {
        fm_ep_t **pp = &reg_head;
        while (*pp != e)
            pp = &(*pp)->next;
        *pp = e->next;
        /* Under the core's locks: no hook call is left inside it after. */
        vmmc_progress_hook_remove(e->ep, ep_poll, e);
        pthread_rwlock_destroy(&e->lock);
        free(e);
    }
    pthread_mutex_unlock(&reg_lock);
}

/* Open channel @channel: the rings (one allocation per sender, exported to
 * it alone), then, for fm_init() (@collective), a barrier and every peer's
 * region imported at once. */
static int channel_open(vmmc_ep_t *ep, int channel, const fm_params_t *params, int collective,
                        fm_t **out, const char *who)
{
    if (!ep || !out)
        return vmmc_error(VMMC_ERR_INVALID, "%s: NULL %s", who, ep ? "output" : "endpoint");
    if (channel < 0 || channel >= FM_CHANNEL_MAX)
        return vmmc_error(VMMC_ERR_INVALID, "%s: channel %d outside 0..%d", who, channel,
                          FM_CHANNEL_MAX - 1);
    int st;
    fm_t *fm = calloc(1, sizeof *fm);
    if (!fm)
        return vmmc_error(VMMC_ERR_NOMEM, "%s: no memory", who);
    fm->ep = ep;
    fm->channel = channel;
    fm->rank = vmmc_rank(ep);
    fm->size = vmmc_size(ep);
    atomic_init(&fm->rx_owner, 0);
    atomic_init(&fm->rlock, 0);
    if ((st = fm_setup_params(fm, params)) != VMMC_OK)
        goto fail;
    if (fm->rank < 0 || fm->size < 1) {
        st = vmmc_error(VMMC_ERR_ENDPOINT, "%s: endpoint has no rank", who);
        goto fail;
    }
    if ((st = fm_channel_reserve(fm)) != VMMC_OK)
        goto fail;
    fm->handlers = calloc((size_t)fm->max_handlers, sizeof *fm->handlers);
    fm->peers = calloc((size_t)fm->size, sizeof *fm->peers);
    fm->exports = calloc((size_t)fm->size, sizeof *fm->exports);
    if (!fm->handlers || !fm->peers || !fm->exports) {
        st = vmmc_error(VMMC_ERR_NOMEM, "%s: no memory for %d peers", who, fm->size);
        goto fail;
    }
    /* Each sender's ring and control lines are an allocation of their own,
     * exported whole to that sender alone: the core maps only a whole
     * allocation, and a mapping of one allocation reaches nothing of the
     * other senders' rings. Reads are granted too (a writable page is
     * readable anyway): the sender sees only what it wrote and what we
     * write back to it (credits, descriptors, the offer word). */
    size_t region = FM_CTRL + fm->ring_size;
    for (int r = 0; r < fm->size; r++) {
        fm_peer_t *p = &fm->peers[r];
        void *mem;
        if ((st = vmmc_mem_alloc(ep, region, &mem)) != VMMC_OK)
            goto fail;
        p->fm = fm;
        p->rank = r;
        p->ctrl = mem;
        p->ring = p->ctrl + FM_CTRL;
        p->rR = fm->ring_size;
        p->rseq = 1;
        p->seen_seq = 1;
        p->credit_word = (_Atomic uint64_t *)(p->ctrl + FM_CREDIT_OFF);
        p->ss.fm = p->rs.fm = fm;
        p->ss.peer = p->rs.peer = p;
        p->ss.kind = FM_SEND;
        p->rs.kind = FM_RECV;
        if (r == fm->rank)
            continue;
        char name[64];
        fm_ring_name(fm, r, name, sizeof name);
        vmmc_export_params_t ep_params = {
            .field_mask = VMMC_EXPORT_PARAM_IMPORTERS | VMMC_EXPORT_PARAM_FLAGS,
            .name = name,
            .addr = p->ctrl,
            .length = region,
            .flags = VMMC_EXPORT_READ,
            .importers = &p->rank,
            .num_importers = 1,
        };
        if ((st = vmmc_export(ep, &ep_params, &fm->exports[r])) != VMMC_OK)
            goto fail;
    }
    if ((st = fm_peer_self(fm, &fm->peers[fm->rank])) != VMMC_OK)
        goto fail;
    if (collective) {
        if (fm->size > 1 && (st = vmmc_barrier(ep)) != VMMC_OK)
            goto fail;
        for (int r = 0; r < fm->size; r++)
            if (r != fm->rank && (st = fm_peer_connect_now(fm, &fm->peers[r])) != VMMC_OK)
                goto fail;
    }
    fm_channel_list(fm);
    *out = fm;
    return VMMC_OK;
fail:
    fm->in_handler = 0;
    fm_finalize(fm);
    return st;
}

int fm_init(vmmc_ep_t *ep, const fm_params_t *params, fm_t **out)
{
    return channel_open(ep, 0, params, 1, out, "fm_init");
}

int fm_channel_open(vmmc_ep_t *ep, int channel, const fm_params_t *params, fm_t **out)
{
    return channel_open(ep, channel, params, 0, out, "fm_channel_open");
}

int fm_channel_id(const fm_t *fm) { return fm ? fm->channel : VMMC_ERR_INVALID; }

int fm_channel_close(fm_t *fm) { return fm_finalize(fm); }

int fm_finalize(fm_t *fm)
{
    if (!fm)
        return vmmc_error(VMMC_ERR_INVALID, "fm_finalize: NULL fm");
    if (fm_in_handler(fm))
        return vmmc_error(VMMC_ERR_INVALID, "fm_finalize called from a handler");
    if (fm->peers) {
        for (int r = 0; r < fm->size; r++) {
            if (fm->peers[r].ctx)
                return vmmc_error(VMMC_ERR_BUSY, "fm_finalize: a handler for a message from rank "
                                  "%d is suspended", r);
            if (fm->peers[r].ss.open)
                return vmmc_error(VMMC_ERR_BUSY, "fm_finalize: a message to rank %d is open", r);
        }
        /* Peers we talk to learn it now: their sends to us fail. */
        for (int r = 0; r < fm->size; r++)
            if (r != fm->rank)
                fm_peer_tell_closed(fm, &fm->peers[r]);
    }
    fm_channel_release(fm);
    if (fm->peers) {
        for (int r = 0; r < fm->size; r++) {
            fm_peer_t *p = &fm->peers[r];
            if (p->px)
                vmmc_unimport(p->px);
            free(p->staging);
            if (fm->exports && fm->exports[r])
                vmmc_unexport(fm->exports[r]);
            if (p->ctrl)
                vmmc_mem_free(fm->ep, p->ctrl);
        }
    }
    fm_ctx_free_all(fm);
    free(fm->exports);
    free(fm->peers);
    free(fm->handlers);
    free(fm);
    return VMMC_OK;
}
