/* Fast Messages: channels. An fm_t is one channel of FM on an endpoint; its
 * rings, credits, handler table, handler stacks and counters are its own,
 * and its exports carry its id in their names (fm_peer.c), so several
 * clients share an endpoint without reaching into each other's state.
 *
 * The endpoint's record (fm_ep_t, one per endpoint that has a channel open)
 * holds the ids in use, so a second open of an id is refused, and the table
 * of open channels that the endpoint's progress hook serves (one hook per
 * endpoint: the core has room for few, and a hook per channel would spend
 * them). A table is never changed once the hook has it: opening or closing
 * a channel registers a new table as a new hook, then removes the old one,
 * and the core's removal returns only once no poll or arm call is inside
 * it, so once a channel is out, no hook call can reach it. The hook itself
 * takes no lock and pays nothing for this while it polls. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fm/fm_int.h"

typedef struct fm_tab {
    int n;
    fm_t *ch[];
} fm_tab_t;

typedef struct fm_ep {
    vmmc_ep_t *ep;
    struct fm_ep *next;
    fm_tab_t *tab;                /* what the hook serves now (NULL: no hook) */
    int nres;                     /* ids reserved (open or opening) */
    int forked;                   /* a copy inherited through fork(): the parent's */
    fm_t *chan[FM_CHANNEL_MAX];   /* by id: the channels reserved (open or opening) */
} fm_ep_t;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static fm_ep_t *reg_head;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* fork(): the child's copy of every channel belongs to the parent. The
 * registry's lock is held across fork(), so the child finds it consistent;
 * the child handler marks every channel (fm_fork.c) and every record, which
 * lookups then skip (a new endpoint of the child may get an old one's
 * address once the child drops its copy). */
static void fork_prepare(void) { pthread_mutex_lock(&reg_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&reg_lock); }
static void fork_child(void)
{
    for (fm_ep_t *e = reg_head; e; e = e->next) {
        e->forked = 1;
        for (int c = 0; c < FM_CHANNEL_MAX; c++)
            if (e->chan[c])
                fm_fork_mark(e->chan[c]);
    }
    pthread_mutex_unlock(&reg_lock);
}
static void fork_register(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* The endpoint's progress hook: every channel of its table, in turn. */
static int ep_poll(void *arg)
{
    const fm_tab_t *tab = arg;
    int ev = 0;
    for (int i = 0; i < tab->n; i++)
        ev += fm_hook_poll(tab->ch[i]);
    return ev;
}

static int ep_arm(void *arg)
{
    const fm_tab_t *tab = arg;
    int pending = 0;
    for (int i = 0; i < tab->n && !pending; i++)
        pending = fm_hook_arm(tab->ch[i]);
    return pending;
}

/* Reserve @fm's id on its endpoint (before anything is exported, so a
 * duplicate open changes nothing). */
int fm_channel_reserve(fm_t *fm)
{
    int st = VMMC_OK, max = fm_cfg_channels();
    pthread_once(&fork_once, fork_register);
    pthread_mutex_lock(&reg_lock);
    fm_ep_t *e = reg_head;
    while (e && (e->ep != fm->ep || e->forked))
        e = e->next;
    if (e && e->chan[fm->channel]) {
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
        e->next = reg_head;
        reg_head = e;
    }
    e->chan[fm->channel] = fm;
    e->nres++;
    fm->fep = e;
out:
    pthread_mutex_unlock(&reg_lock);
    return st;
}

/* Hand the hook the table with @add in it, or without @drop (under
 * reg_lock): the new table's hook first, so that no pass of the core misses
 * FM, then the old one away (which waits for calls inside it to leave). */
static int tab_swap(fm_ep_t *e, fm_t *add, fm_t *drop)
{
    fm_tab_t *old = e->tab;
    int n = (old ? old->n : 0) + (add ? 1 : 0), k = 0;
    fm_tab_t *tab = NULL;
    if (n - (drop ? 1 : 0) > 0) {
        tab = malloc(sizeof *tab + (size_t)n * sizeof tab->ch[0]);
        if (!tab)
            return vmmc_error(VMMC_ERR_NOMEM, "fm: no memory for the channel table");
        for (int i = 0; old && i < old->n; i++)
            if (old->ch[i] != drop)
                tab->ch[k++] = old->ch[i];
        if (add)
            tab->ch[k++] = add;
        tab->n = k;
        int st = vmmc_progress_hook_add(e->ep, ep_poll, ep_arm, tab);
        if (st == VMMC_ERR_AGAIN && old) {
            /* No room for both: a moment without FM's hook (a sleeper is
             * still woken by the senders' signals). */
            vmmc_progress_hook_remove(e->ep, ep_poll, old);
            free(old);
            old = e->tab = NULL;
            st = vmmc_progress_hook_add(e->ep, ep_poll, ep_arm, tab);
        }
        if (st != VMMC_OK) {
            free(tab);
            return st;
        }
    }
    if (old) {
        vmmc_progress_hook_remove(e->ep, ep_poll, old);
        free(old);
    }
    e->tab = tab;
    return VMMC_OK;
}

/* The channel is ready: let the endpoint's hook serve it. */
int fm_channel_list(fm_t *fm)
{
    pthread_mutex_lock(&reg_lock);
    int st = tab_swap(fm->fep, fm, NULL);
    pthread_mutex_unlock(&reg_lock);
    if (st == VMMC_OK)
        fm->listed = 1;
    return st;
}

/* Take @fm out of the hook's table and give its id back; the last channel
 * of an endpoint takes its record away. */
void fm_channel_release(fm_t *fm)
{
    fm_ep_t *e = fm->fep;
    if (!e)
        return;
    pthread_mutex_lock(&reg_lock);
    if (e->forked) {
        /* The parent's hook: the core never calls it in this process. */
        fm->listed = 0;
        if (e->nres == 1) {
            free(e->tab);
            e->tab = NULL;
        }
    }
    if (fm->listed) {
        /* Only NOMEM can fail here: then the hook keeps serving the channel
         * and it cannot be freed; wait for memory rather than leave a
         * dangling pointer in the hook. */
        while (tab_swap(e, NULL, fm) != VMMC_OK)
            sched_yield();
        fm->listed = 0;
    }
    e->chan[fm->channel] = NULL;
    fm->fep = NULL;
    if (--e->nres == 0) {
        fm_ep_t **pp = &reg_head;
        while (*pp != e)
            pp = &(*pp)->next;
        *pp = e->next;
        free(e);
    }
    pthread_mutex_unlock(&reg_lock);
}

/* Open channel @channel: no ring yet (fm_ring.c makes each when its peer
 * first imports it or we first send to it); for fm_init() (@collective), a
 * barrier, so that every rank has the channel open when it returns. */
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
    atomic_init(&fm->nslots, fm->size > 0 ? fm->size : 0);
    pthread_mutex_init(&fm->xlock, NULL);
    {
        char a[VMMC_ADDR_MAX];
        size_t alen = sizeof a;
        if (vmmc_ep_addr(ep, a, &alen) == VMMC_OK)
            fm->self_hash = fm_addr_hash(a, alen);
    }
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
    if (!fm->handlers || !fm->peers) {
        st = vmmc_error(VMMC_ERR_NOMEM, "%s: no memory for %d peers", who, fm->size);
        goto fail;
    }
    for (int r = 0; r < fm->size; r++)
        fm_peer_base(fm, &fm->peers[r], r);
    /* From here on a peer's first import makes its ring (requests that came
     * before the channel was open are served now). */
    if ((st = fm_demand_register(fm)) != VMMC_OK)
        goto fail;
    /* Our own ring (sends to ourselves) at once: no peer's, no export. */
    if ((st = fm_peer_ring(fm, &fm->peers[fm->rank])) != VMMC_OK)
        goto fail;
    if (collective && fm->size > 1 && (st = vmmc_barrier(ep)) != VMMC_OK)
        goto fail;
    fm->collective = collective;
    if ((st = fm_channel_list(fm)) != VMMC_OK)
        goto fail;
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

int fm_channel_id(const fm_t *fm)
{
    if (!fm)
        return vmmc_error(VMMC_ERR_INVALID, "fm_channel_id: NULL fm");
    return fm->forked ? fm_forked_error(fm, "fm_channel_id") : fm->channel;
}

int fm_channel_close(fm_t *fm) { return fm_finalize(fm); }

int fm_finalize(fm_t *fm)
{
    if (!fm)
        return vmmc_error(VMMC_ERR_INVALID, "fm_finalize: NULL fm");
    if (VMMC_UNLIKELY(fm->forked)) {
        /* The child's copy: drop it, tell nobody (fm_fork.c). */
        fm_channel_release(fm);
        for (int r = 0; fm->peers && r < fm->size; r++)
            free(fm->peers[r].staging);
        fm_xpeer_free_all(fm, 1);
        fm_act_free_all(fm);
        fm_ctx_free_all(fm);
        free(fm->peers);
        free(fm->handlers);
        free(fm);
        return VMMC_OK;
    }
    if (fm_in_handler(fm))
        return vmmc_error(VMMC_ERR_INVALID, "fm_finalize called from a handler");
    if (fm->peers) {
        int n = fm_nslots(fm);
        for (int r = 0; r < n; r++) {
            fm_peer_t *p = fm_peer_at(fm, r);
            if (p && p->ctx)
                return vmmc_error(VMMC_ERR_BUSY, "fm_finalize: a handler for a message from rank "
                                  "%d is suspended", r);
            if (p && p->ss.open)
                return vmmc_error(VMMC_ERR_BUSY, "fm_finalize: a message to rank %d is open", r);
        }
        /* No ring is made from now on (this waits for one being made). */
        fm_demand_remove(fm);
        /* Peers we talk to learn it now: their sends to us fail. */
        for (int r = 0; r < n; r++) {
            fm_peer_t *p = fm_peer_at(fm, r);
            if (p && r != fm->rank)
                fm_peer_tell_closed(fm, p);
        }
    }
    fm_channel_release(fm);
    if (fm->peers) {
        for (int r = 0; r < fm->size; r++) {
            fm_peer_t *p = &fm->peers[r];
            if (p->px)
                vmmc_unimport(p->px);
            free(p->staging);
            fm_ring_free(fm, p);
        }
    }
    fm_demand_remove(fm); /* (an open that failed before the peers' table) */
    fm_xpeer_free_all(fm, 0);
    fm_act_free_all(fm);
    fm_ctx_free_all(fm);
    pthread_mutex_destroy(&fm->xlock);
    free(fm->peers);
    free(fm->handlers);
    free(fm);
    return VMMC_OK;
}
