/* The fabric transport (vmmc_tl_fabric): vmmc over a libfabric provider with
 * reliable datagram endpoints (FI_EP_RDM with FI_MSG): `verbs;ofi_rxm`,
 * `efa`, `cxi`, and without RDMA hardware `tcp;ofi_rxm`.
 *
 * This file is the endpoint (its settings and the choice of provider are
 * fab_prov.c's): its objects, the address it publishes
 * ("fab=<hex of fi_getname>;fabp=<provider, ';' as '+'>;"), which peers it
 * reaches (those that publish the same provider), and the peers' entries in
 * the address vector.
 *
 * When it opens: with VMMC_TRANSPORT=fabric, or VMMC_FABRIC=yes; with
 * VMMC_FABRIC=auto (the default) only when the host has RDMA hardware
 * (/sys/class/infiniband, /dev/cxi*, /dev/hfi1*) and libfabric offers a
 * provider that offloads to it: then reach() scores it above udp across
 * hosts. Software providers (tcp, udp, sockets, shm) never win on their own:
 * they are what udp already is, with more copies. */
#include "transport/fabric/fab_int.h"

#include <errno.h>
#include <sys/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/config.h"
#include "util/str.h"

static void fab_ep_close(vmmc_ep_t *ep);

/* The translation cache's registrar: local buffers, for sends and receives. */
static int fab_reg(void *ctx, void *addr, size_t len, uint64_t access, fab_reg_t *out)
{
    fab_ep_t *f = ctx;
    struct fid_mr *mr = NULL;
    /* a key of our own where the provider does not choose them */
    static _Atomic uint64_t next_key = 1;
    uint64_t key = (f->info->domain_attr->mr_mode & FI_MR_PROV_KEY)
                       ? 0 : atomic_fetch_add_explicit(&next_key, 1, memory_order_relaxed);
    int rc = fi_mr_reg(f->domain, addr, len, access, 0, key, 0, &mr, NULL);
    if (rc)
        return vmmc_error(VMMC_ERR_SYSTEM, "fabric: fi_mr_reg of %zu bytes: %s", len,
                          fi_strerror(-rc));
    out->addr = addr;
    out->len = len;
    out->desc = fi_mr_desc(mr);
    out->key = fi_mr_key(mr);
    out->handle = mr;
    return VMMC_OK;
}

static void fab_dereg(void *ctx, fab_reg_t *r)
{
    (void)ctx;
    if (r->handle)
        fi_close(&((struct fid_mr *)r->handle)->fid);
}

static int fab_ep_open(vmmc_ep_t *ep, char *card, size_t cap)
{
    int force = vmmc_fab__forced();
    if (!force && (!vmmc_fab_cfg_mode || strcmp(vmmc_fab_cfg_mode, "auto") ||
                   !vmmc_fab__rdma_hardware()))
        return VMMC_OK; /* not used here: not opened, reaches nobody */
    if (vmmc_fab__dl_load() != VMMC_OK)
        return force ? VMMC_ERR_UNSUPPORTED : VMMC_OK;
    struct fi_info *info = vmmc_fab__pick();
    if (!info)
        return force ? VMMC_ERR_UNSUPPORTED : VMMC_OK;
    int hw = !vmmc_fab__soft_provider(info->fabric_attr->prov_name);
    if (!force && !hw) {
        fi_freeinfo(info);
        return VMMC_OK;
    }
    fab_ep_t *f = calloc(1, sizeof *f);
    if (!f) {
        fi_freeinfo(info);
        return vmmc_error(VMMC_ERR_NOMEM, "fabric: out of memory");
    }
    f->ep = ep;
    f->info = info;
    f->hw = hw;
    f->rma = vmmc_fab_cfg_rma && (info->caps & FI_RMA) &&
             (info->tx_attr->msg_order & FAB_RMA_ORDER) == FAB_RMA_ORDER;
    f->virt_addr = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
    f->inject = info->tx_attr->inject_size;
    f->max_msg = info->ep_attr->max_msg_size ? info->ep_attr->max_msg_size : SIZE_MAX;
    f->iov_limit = info->tx_attr->iov_limit;
    pthread_mutex_init(&f->mrlock, NULL);
    pthread_mutex_init(&f->nslock, NULL);
    /* notifications as remote CQ data: 8 bytes of it, on the RMA path */
    f->cq_data = f->rma && vmmc_fab_cfg_cq_data && info->domain_attr->cq_data_size >= 8;
    f->txfd = f->rxfd = f->wakefd = f->ann_fd = -1;
    pthread_mutex_init(&f->lock, NULL);
    pthread_mutex_init(&f->nlock, NULL);
    pthread_mutex_init(&f->rxlock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->cond, &ca);
    pthread_condattr_destroy(&ca);
    VMMC_TL_STATE(ep, fabric) = f;

    const char *what = "fi_fabric";
    int rc = fi_fabric(info->fabric_attr, &f->fabric, NULL);
    if (!rc && (what = "fi_domain", rc = fi_domain(f->fabric, info, &f->domain, NULL)) == 0) {
        struct fi_av_attr av = {.type = FI_AV_TABLE};
        what = "fi_av_open";
        rc = fi_av_open(f->domain, &av, &f->av, NULL);
    }
    if (!rc)
        what = "fi_cq_open", rc = vmmc_fab__cq_open(f);
    if (!rc && (what = "fi_endpoint", rc = fi_endpoint(f->domain, info, &f->fep, NULL)) == 0) {
        what = "fi_ep_bind";
        rc = fi_ep_bind(f->fep, &f->av->fid, 0);
        if (!rc)
            rc = fi_ep_bind(f->fep, &f->txcq->fid, FI_TRANSMIT);
        if (!rc)
            rc = fi_ep_bind(f->fep, &f->rxcq->fid, FI_RECV);
        if (!rc && (what = "fi_enable", 1))
            rc = fi_enable(f->fep);
    }
    if (!rc)
        what = "FI_GETWAIT", rc = vmmc_fab__cq_fds(f);
    if (!rc)
        vmmc_fab__atomic_setup(f);
    unsigned char name[128];
    size_t nl = sizeof name;
    if (!rc && (what = "fi_getname", rc = fi_getname(&f->fep->fid, name, &nl)) == 0 &&
        nl > 100)
        rc = -FI_ETOOSMALL;
    if (rc) {
        int st = vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric: %s on provider %s: %s", what,
                            info->fabric_attr->prov_name, fi_strerror(rc < 0 ? -rc : rc));
        if (force)
            return st; /* the core's ep_close frees what was made */
        vmmc_debug("%s", vmmc_last_error());
        fab_ep_close(ep);
        return VMMC_OK;
    }
    f->addrlen = nl;
    if ((info->domain_attr->mr_mode & FI_MR_LOCAL) || vmmc_fab_cfg_mr_local) {
        f->cache = fab_cache_new(vmmc_fab_cfg_cache_bytes, vmmc_fab_cfg_cache_entries, fab_reg,
                                 fab_dereg, f);
        if (!f->cache)
            return VMMC_ERR_NOMEM; /* fab_cache_new said why */
    }
    char hex[256], prov[80];
    for (size_t i = 0; i < nl; i++)
        snprintf(hex + 2 * i, 3, "%02x", name[i]);
    vmmc_fab__prov_word(info->fabric_attr->prov_name, prov, sizeof prov);
    if (getrandom(&f->sec, sizeof f->sec, 0) != (ssize_t)sizeof f->sec)
        return vmmc_error(VMMC_ERR_SYSTEM, "fabric: getrandom failed");
    int n = snprintf(card, cap, "fab=%s;fabp=%s;fsec=%016llx;", hex, prov,
                     (unsigned long long)f->sec);
    if (n < 0 || (size_t)n >= cap)
        return vmmc_error(VMMC_ERR_INVALID, "fabric: no room for the address");
    if ((rc = vmmc_fab__start(f)) != VMMC_OK)
        return rc;
    vmmc_debug("fabric: endpoint open on %s (%s, %s%s%s)", info->fabric_attr->prov_name,
               hw ? "offloaded" : "software", f->rma ? "RMA" : "messages only",
               f->cq_data ? ", notifications as CQ data" : "",
               f->atomics ? ", the provider's atomics" : "");
    return VMMC_OK;
}

/* A thread that drives the endpoint (polling, or spinning in a wait) reads
 * the provider's queues itself: what arrives for it is taken without a
 * hand-over to the progress thread, which may be asleep or, on a shared
 * cpu, waiting for its turn. Returns 0 as udp does: data lands silently,
 * and the notifications it queued count when the core runs them. */
static int fab_progress(vmmc_ep_t *ep)
{
    fab_ep_t *f = F(ep);
    if (f)
        vmmc_fab__poll(f);
    return 0;
}

/* Finalize: the progress thread delivers into exports, so it ends first. */
static void fab_ep_stop(vmmc_ep_t *ep)
{
    fab_ep_t *f = F(ep);
    if (f) {
        if (f->thread_up)
            vmmc_fab__goodbye(f);
        vmmc_fab__stop(f);
    }
}

static void fab_ep_close(vmmc_ep_t *ep)
{
    fab_ep_t *f = F(ep);
    if (!f)
        return;
    vmmc_fab__stop(f);
    if (f->fep)
        fi_close(&f->fep->fid);
    vmmc_fab__mrs_close(f);
    if (f->cache) {
        if (vmmc_fab_cfg_stats)
            fab_cache_print(f->cache, "fabric transport");
        if (f->rx_reg)
            fab_cache_put(f->cache, f->rx_reg);
        fab_cache_free(f->cache); /* deregisters: before the domain closes */
    }
    vmmc_fab__cq_close(f);
    if (f->av)
        fi_close(&f->av->fid);
    if (f->domain)
        fi_close(&f->domain->fid);
    if (f->fabric)
        fi_close(&f->fabric->fid);
    if (f->info)
        fi_freeinfo(f->info);
    for (int c = 0; c < FAB_PEER_CHUNKS; c++) {
        fab_peer_t **ch = f->peers[c];
        if (!ch)
            continue;
        for (int i = 0; i < FAB_PEER_CHUNK; i++)
            if (ch[i]) {
                pthread_mutex_destroy(&ch[i]->txlock);
                pthread_mutex_destroy(&ch[i]->seqlock);
                free(ch[i]);
            }
        free(ch);
    }
    free(f->by_fa);
    free(f->nq);
    free(f->rx);
    free(f->held);
    free(f->held_peer);
    vmmc_fab__accept_close(f);
    pthread_mutex_destroy(&f->lock);
    pthread_mutex_destroy(&f->nlock);
    pthread_mutex_destroy(&f->rxlock);
    pthread_mutex_destroy(&f->mrlock);
    pthread_mutex_destroy(&f->nslock);
    pthread_cond_destroy(&f->cond);
    free(f);
    VMMC_TL_STATE(ep, fabric) = NULL;
}

/* ---- addresses ------------------------------------------------------------ */

static int fab_addr_field(const char *k, size_t kl, const char *v, size_t vl, const char **why)
{
#define KEY(s) (kl == sizeof(s) - 1 && !memcmp(k, s, kl))
    if (KEY("fab")) {
        *why = "fab must be 2 to 200 lower-case hex digits, an even number";
        return vl >= 2 && vl <= 200 && vl % 2 == 0 && vmmc_all_of(v, vl, VMMC_HEX_DIGITS);
    }
    if (KEY("fsec")) {
        *why = "fsec must be 16 lower-case hex digits";
        return vl == 16 && vmmc_all_of(v, vl, VMMC_HEX_DIGITS);
    }
    if (KEY("fabp")) {
        *why = "fabp must be 1 to 64 of [A-Za-z0-9_+.-]";
        return vl >= 1 && vl <= 64 &&
               vmmc_all_of(v, vl, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+.-");
    }
    return -1;
#undef KEY
}

static int fab_addr_whole(const char *card, size_t len)
{
    (void)len;
    char v[256];
    int a = vmmc_card_get(card, "fab", v, sizeof v) != NULL;
    int b = vmmc_card_get(card, "fabp", v, sizeof v) != NULL;
    if (a != b)
        return vmmc_error(VMMC_ERR_INVALID, "address has %s without %s", a ? "fab" : "fabp",
                          a ? "fabp" : "fab");
    return VMMC_OK;
}

/* Peers that publish an address of our provider: above udp (1) only when
 * the provider offloads, below it otherwise (VMMC_TRANSPORT=fabric keeps
 * only this one anyway); shm (10) stays first on this host. */
int vmmc_fab__reach(vmmc_ep_t *ep, const char *card, int same_host)
{
    (void)same_host;
    fab_ep_t *f = F(ep);
    char v[256], mine[80];
    if (!f || !f->thread_up || !vmmc_card_get(card, "fab", v, sizeof v) ||
        !vmmc_card_get(card, "fabp", v, sizeof v))
        return -1;
    vmmc_fab__prov_word(f->info->fabric_attr->prov_name, mine, sizeof mine);
    if (strcmp(v, mine))
        return -1;
    return f->hw ? 2 : 0;
}

/* ---- peers ---------------------------------------------------------------- */

/* The transport's state for handle @h, made on first use. */
static fab_peer_t *peer_slot(fab_ep_t *f, int h)
{
    fab_peer_t *p = fab_peer_of(f, h);
    if (p || h < 0 || h >= VMMC_PEERS_MAX)
        return p;
    pthread_mutex_lock(&f->lock);
    fab_peer_t **c = f->peers[h / FAB_PEER_CHUNK];
    if (!c && (c = calloc(FAB_PEER_CHUNK, sizeof *c)))
        atomic_store_explicit(&f->peers[h / FAB_PEER_CHUNK], c, memory_order_release);
    p = c ? c[h % FAB_PEER_CHUNK] : NULL;
    if (c && !p && (p = calloc(1, sizeof *p))) {
        p->fa = FI_ADDR_NOTAVAIL;
        pthread_mutex_init(&p->txlock, NULL);
        pthread_mutex_init(&p->seqlock, NULL);
        __atomic_store_n(&c[h % FAB_PEER_CHUNK], p, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&f->lock);
    return p;
}

/* Put handle @h (address @card) into the address vector. */
static int insert(fab_ep_t *f, int h, const char *card)
{
    fab_peer_t *p = peer_slot(f, h);
    if (!p)
        return vmmc_error(VMMC_ERR_NOMEM, "fabric: out of memory for peer %d", h);
    if (__atomic_load_n(&p->fa, __ATOMIC_ACQUIRE) != FI_ADDR_NOTAVAIL)
        return VMMC_OK;
    char hex[256];
    unsigned char raw[128];
    if (!vmmc_card_get(card, "fab", hex, sizeof hex))
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "%s %d has no fabric address",
                          VMMC_PEER_WORD(f->ep, h), h);
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++)
        sscanf(hex + 2 * i, "%2hhx", &raw[i]);
    if (n != f->addrlen)
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "%s %d's fabric address has %zu bytes, "
                          "not %zu", VMMC_PEER_WORD(f->ep, h), h, n, f->addrlen);
    uint64_t sec = 0;
    uint32_t dsec = vmmc_fab__card_sec(card, &sec) ? (uint32_t)sec : 0;
    pthread_mutex_lock(&f->lock);
    int st = VMMC_OK;
    if (p->fa == FI_ADDR_NOTAVAIL) {
        p->dsec = dsec; /* before fa: whoever sees fa set finds it */
        fi_addr_t fa = FI_ADDR_NOTAVAIL;
        int rc = fi_av_insert(f->av, raw, 1, &fa, 0, NULL);
        if (rc != 1) {
            st = vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "fabric: fi_av_insert of %s %d (address "
                            "%s): %s", VMMC_PEER_WORD(f->ep, h), h, hex,
                            rc < 0 ? fi_strerror(-rc) : "refused by the provider");
        } else {
            if (fa >= f->by_fa_cap) {
                size_t cap = f->by_fa_cap ? f->by_fa_cap : 64;
                while (cap <= fa)
                    cap *= 2;
                int *nb = realloc(f->by_fa, cap * sizeof *nb);
                if (!nb) {
                    pthread_mutex_unlock(&f->lock);
                    return vmmc_error(VMMC_ERR_NOMEM, "fabric: out of memory");
                }
                for (size_t i = f->by_fa_cap; i < cap; i++)
                    nb[i] = -1;
                f->by_fa = nb;
                f->by_fa_cap = cap;
            }
            f->by_fa[fa] = h;
            __atomic_store_n(&p->fa, fa, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&f->lock);
    return st;
}

int vmmc_fab__card_sec(const char *card, uint64_t *sec)
{
    char v[32];
    if (!card || !vmmc_card_get(card, "fsec", v, sizeof v))
        return 0;
    *sec = strtoull(v, NULL, 16);
    return 1;
}

/* A message from a connection the provider does not name yet: the handle
 * it claims, if that peer's address holds the secret it carries (and the
 * peer goes into the address vector now, for what follows); else -1. */
int vmmc_fab__handle_claimed(fab_ep_t *f, int h, uint64_t sec)
{
    if (h < 0 || h >= vmmc_tl_peer_count(f->ep))
        return -1;
    vmmc_tl_peer_t *tp = vmmc_tl_peer_at(f->ep, h);
    uint64_t s;
    if (!tp || tp->tl != &vmmc_tl_fabric || !vmmc_fab__card_sec(tp->addr, &s) || s != sec ||
        insert(f, h, tp->addr) != VMMC_OK)
        return -1;
    return h;
}

int vmmc_fab__handle_of(fab_ep_t *f, fi_addr_t fa)
{
    pthread_mutex_lock(&f->lock);
    int h = fa != FI_ADDR_NOTAVAIL && fa < f->by_fa_cap ? f->by_fa[fa] : -1;
    pthread_mutex_unlock(&f->lock);
    return h;
}

/* Handle @h's state, with its address inserted; NULL and *@status if it
 * cannot be reached. */
fab_peer_t *vmmc_fab__peer(fab_ep_t *f, int h, int *status)
{
    fab_peer_t *p = fab_peer_of(f, h);
    if (p && __atomic_load_n(&p->fa, __ATOMIC_ACQUIRE) != FI_ADDR_NOTAVAIL)
        return p;
    vmmc_tl_peer_t *tp = vmmc_tl_peer_get(f->ep, h, status);
    if (!tp)
        return NULL;
    if (!tp->addr) {
        *status = vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "fabric: %s %d has no address",
                             VMMC_PEER_WORD(f->ep, h), h);
        return NULL;
    }
    if ((*status = insert(f, h, tp->addr)) != VMMC_OK)
        return NULL;
    return fab_peer_of(f, h);
}

/* A job: every rank reached over the fabric goes into the address vector
 * now, so that what it sends first is known by its source. */
static int fab_ep_start(vmmc_ep_t *ep)
{
    fab_ep_t *f = F(ep);
    if (!f)
        return VMMC_OK;
    int n = vmmc_tl_peer_count(ep);
    for (int h = 0; h < n; h++) {
        vmmc_tl_peer_t *p = vmmc_tl_peer_at(ep, h);
        if (p && p->tl == &vmmc_tl_fabric && p->addr) {
            int st = insert(f, h, p->addr);
            if (st != VMMC_OK)
                return st;
        }
    }
    atomic_store_explicit(&f->started, 1, memory_order_release);
    vmmc_fab__kick(f);
    return VMMC_OK;
}

static int fab_peer_connect(vmmc_ep_t *ep, vmmc_tl_peer_t *peer, int timeout_ms)
{
    (void)timeout_ms;
    fab_ep_t *f = F(ep);
    if (!f)
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "fabric transport not open");
    int st = VMMC_OK;
    if (!vmmc_fab__peer(f, peer->rank, &st))
        return st;
    /* Not a rank of our job: it may not know us. Our HELLO (our address)
     * goes first, so that it can take what follows (fab_accept.c). */
    vmmc_tl_ep_t *v = VMMC_TL_EP(ep);
    if (peer->rank != v->rank && !(v->in_job && peer->rank < v->size))
        return vmmc_fab__hello(f, peer->rank);
    return VMMC_OK;
}

static void fab_peer_dead(vmmc_ep_t *ep, vmmc_tl_peer_t *peer)
{
    fab_ep_t *f = F(ep);
    if (f)
        vmmc_fab__waits_fail(f, peer->rank, VMMC_ERR_PEER_DEAD);
}

static int fab_counter_get(vmmc_ep_t *ep, int i, const char **name, uint64_t *value)
{
    static const char *const names[] = {"fabric.msgs_sent", "fabric.msgs_received",
                                        "fabric.send_again", "fabric.write_refused",
                                        "fabric.from_unknown", "fabric.malformed",
                                        "fabric.send_errors", "fabric.rma_writes",
                                        "fabric.rma_reads", "fabric.rma_refused",
                                        "fabric.rma_regions", "fabric.refusals_sent",
                                        "fabric.refused_by_peer", "fabric.naps", "fabric.wakes",
                                        "fabric.notes_cq_data", "fabric.bad_cq_data",
                                        "fabric.rma_regions_closed", "fabric.rma_atomics",
                                        "fabric.zcopy_sends", "fabric.cqd_slots_retired",
                                        "fabric.cqd_retire_msgs", "fabric.not_ours",
                                        "fabric.rx_polled"};
    fab_ep_t *f = F(ep);
    enum { OWN = sizeof names / sizeof names[0] };
    if (f && f->cache && i >= OWN)
        return fab_cache_counter_get(f->cache, i - OWN, name, value);
    if (!f || i < 0 || i >= OWN)
        return VMMC_ERR_NOT_FOUND;
    _Atomic uint64_t *c[] = {&f->c_tx, &f->c_rx, &f->c_tx_again, &f->c_refused, &f->c_unknown,
                             &f->c_bad, &f->c_tx_err, &f->c_rma_writes, &f->c_rma_reads,
                             &f->c_rma_refused, &f->c_rma_regions, &f->c_refusals_sent,
                             &f->c_refused_by_peer, &f->c_naps, &f->c_wakes, &f->c_notes_cqd,
                             &f->c_bad_cqd, &f->c_rma_regions_closed, &f->c_rma_atomics,
                             &f->c_zcopy, &f->c_ns_retired, &f->c_ns_told, &f->c_not_ours,
                             &f->c_rx_polled};
    *name = names[i];
    *value = atomic_load(c[i]);
    return VMMC_OK;
}

VMMC_TRANSPORT(fabric) = {
    .size = sizeof(vmmc_tl_ops_t),
    .version = VMMC_TL_VERSION,
    .name = "fabric",
    .about = "yes (libfabric: reliable datagram endpoints of any provider)",
    .caps = VMMC_TL_CAP_LOCAL | VMMC_TL_CAP_REMOTE,
    .reach = vmmc_fab__reach,
    .addr_field = fab_addr_field,
    .addr_whole = fab_addr_whole,
    .ep_open = fab_ep_open,
    .ep_start = fab_ep_start,
    .ep_stop = fab_ep_stop,
    .ep_close = fab_ep_close,
    .listen = vmmc_fab__listen,
    .peer_connect = fab_peer_connect,
    .peer_dead = fab_peer_dead,
    .ctl_send = vmmc_fab__ctl_send,
    .proxy_setup = vmmc_fab__proxy_setup,
    .proxy_release = vmmc_fab__proxy_release,
    .put = vmmc_fab__put,
    .get = vmmc_fab__get,
    .putv = vmmc_fab__putv,
    .atomic = vmmc_fab__atomic,
    .signal = vmmc_fab__signal,
    .progress = fab_progress,
    .flush = vmmc_fab__flush,
    .flush_peer = vmmc_fab__flush_peer,
    .counter_get = fab_counter_get,
    .drain = vmmc_fab__drain,
    .export_grant = vmmc_fab__export_grant,
    .export_release = vmmc_fab__export_release,
    .export_end = vmmc_fab__export_end,
};
