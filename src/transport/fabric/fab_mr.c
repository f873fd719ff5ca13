/* The fabric transport's exports registered for direct access (the RMA
 * path, fab_rma.c).
 *
 * When a peer imports an export over the fabric, the core asks us
 * (export_grant) whether to give it direct access: the export is
 * registered once (fi_mr_reg, FI_REMOTE_WRITE, plus FI_REMOTE_READ when
 * importers may fetch), and its key (with FI_MR_VIRT_ADDR, the export's
 * address) travels in the import reply. The region closes when the export
 * ends (export_end: unexport, revocation, endpoint close), or when no rank
 * it was granted to imports it any more (export_release: the last
 * unimport of each, or its death): from then on the provider refuses every
 * RMA operation with that key, so a revoked importer's writes, or those of
 * a process that kept a key after it unimported, fail at the provider and
 * nothing lands.
 *
 * Not granted (the importer stays on the message path, where the core
 * checks every write): redirectable exports (the receiver decides where
 * each write goes), imports by this very process, and providers without
 * an ordered RMA path. Where the provider lets us choose keys (no
 * FI_MR_PROV_KEY) they are random 64-bit numbers: a peer that was never
 * given one cannot guess it. A peer that was given one keeps it, but the
 * region it names closes with the export or once nobody imports it.
 *
 * Each grant also gets a notification slot (fab_nslot.c), whose number
 * travels in the reply (nslot): notifications that fit go as remote CQ
 * data of the write itself. */
#include "transport/fabric/fab_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static fab_xmr_t *find(fab_ep_t *f, uint32_t id, uint32_t gen)
{
    for (fab_xmr_t *x = f->mrs; x; x = x->next)
        if (x->export_id == id && x->gen == gen)
            return x;
    return NULL;
}

void vmmc_fab__export_grant(vmmc_ep_t *ep, vmmc_tl_peer_t *peer, vmmc_ctl_msg_t *rep)
{
    fab_ep_t *f = F(ep);
    rep->rkey = 0;
    rep->rkey_ok = 0;
    rep->nslot = 0;
    if (!f || !f->rma || (rep->flags & VMMC_EXPORT_REDIRECTABLE) || !rep->length ||
        peer->pid == VMMC_TL_EP(ep)->pid)
        return;
    pthread_mutex_lock(&f->mrlock);
    fab_xmr_t *x = find(f, rep->export_id, rep->gen);
    if (!x) {
        x = calloc(1, sizeof *x);
        uint64_t key = 0;
        if (x && !(f->info->domain_attr->mr_mode & FI_MR_PROV_KEY) &&
            getrandom(&key, sizeof key, 0) != (ssize_t)sizeof key) {
            free(x);
            x = NULL;
        }
        if (x && f->info->domain_attr->mr_key_size && f->info->domain_attr->mr_key_size < 8)
            key &= (1ull << (8 * f->info->domain_attr->mr_key_size)) - 1;
        uint64_t access = FI_REMOTE_WRITE;
        if (rep->flags & VMMC_EXPORT_READ)
            access |= FI_REMOTE_READ;
        int rc = x ? fi_mr_reg(f->domain, (void *)(uintptr_t)rep->addr, rep->length, access, 0,
                               key, 0, &x->mr, NULL)
                   : -FI_ENOMEM;
        if (rc) {
            vmmc_debug("fabric: export '%s' stays on the message path: fi_mr_reg: %s", rep->name,
                       fi_strerror(-rc));
            free(x);
            pthread_mutex_unlock(&f->mrlock);
            return;
        }
        x->export_id = rep->export_id;
        x->gen = rep->gen;
        x->key = fi_mr_key(x->mr);
        x->next = f->mrs;
        f->mrs = x;
        atomic_fetch_add_explicit(&f->c_rma_regions, 1, memory_order_relaxed);
    }
    int known = 0;
    for (int i = 0; i < x->nranks && !known; i++)
        known = x->ranks[i] == peer->rank;
    if (!known && x->nranks == x->cap) {
        int cap = x->cap ? x->cap * 2 : 4;
        int *r = realloc(x->ranks, sizeof(int) * (size_t)cap);
        if (r) {
            x->ranks = r;
            x->cap = cap;
        }
    }
    if (!known && x->nranks == x->cap) { /* out of memory: no grant we could not release */
        pthread_mutex_unlock(&f->mrlock);
        return;
    }
    if (!known)
        x->ranks[x->nranks++] = peer->rank;
    rep->rkey = x->key;
    rep->rkey_ok = 1;
    pthread_mutex_unlock(&f->mrlock);
    /* its notifications as remote CQ data, where they fit (fab_nslot.c) */
    rep->nslot = vmmc_fab__nslot_grant(f, peer->rank, rep);
}

static void xmr_free(fab_xmr_t *x)
{
    fi_close(&x->mr->fid);
    free(x->ranks);
    free(x);
}

/* @peer's last import of the export ended (it unimported, or died): its
 * notification slot goes, and the region closes once no importer it was
 * granted to is left, so a key that no importer holds reaches nothing.
 * A later import registers it again, under a new key. */
void vmmc_fab__export_release(vmmc_ep_t *ep, vmmc_tl_peer_t *peer, uint32_t export_id,
                              uint32_t gen)
{
    fab_ep_t *f = F(ep);
    if (!f)
        return;
    vmmc_fab__nslot_release(f, export_id, gen, peer->rank);
    pthread_mutex_lock(&f->mrlock);
    fab_xmr_t *x = NULL;
    for (fab_xmr_t **pp = &f->mrs; *pp; pp = &(*pp)->next) {
        fab_xmr_t *c = *pp;
        if (c->export_id != export_id || c->gen != gen)
            continue;
        for (int i = 0; i < c->nranks; i++)
            if (c->ranks[i] == peer->rank) {
                c->ranks[i] = c->ranks[--c->nranks];
                break;
            }
        if (c->nranks == 0) {
            x = c;
            *pp = c->next;
        }
        break;
    }
    pthread_mutex_unlock(&f->mrlock);
    if (x) {
        xmr_free(x);
        atomic_fetch_add_explicit(&f->c_rma_regions_closed, 1, memory_order_relaxed);
    }
}

void vmmc_fab__export_end(vmmc_ep_t *ep, uint32_t export_id, uint32_t gen)
{
    fab_ep_t *f = F(ep);
    if (!f)
        return;
    vmmc_fab__nslot_end(f, export_id, gen);
    pthread_mutex_lock(&f->mrlock);
    fab_xmr_t *x = NULL;
    for (fab_xmr_t **pp = &f->mrs; *pp; pp = &(*pp)->next)
        if ((*pp)->export_id == export_id && (*pp)->gen == gen) {
            x = *pp;
            *pp = x->next;
            break;
        }
    pthread_mutex_unlock(&f->mrlock);
    if (x)
        xmr_free(x);
}

/* The endpoint closes: every region still registered (before the domain). */
void vmmc_fab__mrs_close(fab_ep_t *f)
{
    pthread_mutex_lock(&f->mrlock);
    fab_xmr_t *x = f->mrs;
    f->mrs = NULL;
    pthread_mutex_unlock(&f->mrlock);
    while (x) {
        fab_xmr_t *n = x->next;
        xmr_free(x);
        x = n;
    }
    vmmc_fab__nslots_close(f);
}
