/* Fast Messages: peers beyond the job's ranks. An endpoint from
 * vmmc_ep_open() is "rank 0 of 1"; its peers are the handles vmmc_connect()
 * and vmmc_listen()'s accepts add after the job's ranks. A channel reaches
 * them too: their state is created on first use, in chunks that are added
 * but never moved (as the core's peer table), so readers (senders, extract,
 * the progress hook) look a peer up without a lock. An idle handle costs a
 * NULL pointer per channel until it is used.
 *
 * Names. In a job both sides number each other alike (rank r is handle r
 * everywhere), so a ring is named after its importer's rank. Beyond the job
 * the two sides' handles for each other are unrelated, so a ring is named
 * after a hash of its importer's address ("fm.<c>.x.<hash>"), which both
 * sides know: the importer from vmmc_ep_addr(), the exporter from
 * vmmc_peer_addr(). The export admits that one handle only, so a stranger
 * whose address hashed alike would still be refused.
 *
 * When rings appear. A sender creates its state for a peer, and its ring
 * for that peer, on its first send; the receiving side when the peer's first
 * import of its ring arrives (fm_ring.c: the core hands the request to FM,
 * which checks the name against the hash of that peer's address). So a peer
 * that never uses the channel costs a NULL pointer here, and a peer that
 * uses it R + 256 bytes plus its fm_peer_t.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fm/fm_int.h"

uint64_t fm_addr_hash(const void *a, size_t n)
{
    const unsigned char *b = a;
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

static void xname(const fm_t *fm, uint64_t hash, char *buf, size_t cap)
{
    snprintf(buf, cap, "fm.%d.x.%016llx", fm->channel, (unsigned long long)hash);
}

/* The name of our ring for handle @h. */
void fm_export_name(const fm_t *fm, int h, char *buf, size_t cap)
{
    if (h < fm->size) {
        fm_ring_name(fm, h, buf, cap);
        return;
    }
    char a[VMMC_ADDR_MAX];
    size_t len = sizeof a;
    uint64_t hash = 0;
    if (vmmc_peer_addr(fm->ep, h, a, &len) == VMMC_OK)
        hash = fm_addr_hash(a, len);
    xname(fm, hash, buf, cap);
}

/* The name of @p's ring for us. */
void fm_import_name(const fm_t *fm, const fm_peer_t *p, char *buf, size_t cap)
{
    if (p->rank < fm->size)
        fm_ring_name(fm, fm->rank, buf, cap);
    else
        xname(fm, fm->self_hash, buf, cap);
}

static void xpeer_free(fm_t *fm, fm_peer_t *p, int local)
{
    if (local) { /* a child's copy after fork(): the core's objects are the parent's */
        free(p->staging);
        free(p);
        return;
    }
    if (p->px)
        vmmc_unimport(p->px);
    free(p->staging);
    fm_ring_free(fm, p);
    free(p);
}

/* Peer @h (>= size): its state, created with its ring on first use. */
int fm_xpeer_get(fm_t *fm, int h, fm_peer_t **out, const char *who)
{
    fm_peer_t *p = fm_peer_at(fm, h);
    if (VMMC_LIKELY(p != NULL)) {
        *out = p;
        return VMMC_OK;
    }
    int n = vmmc_peer_count(fm->ep);
    if (n < 0)
        return n;
    if (h < fm->size || h >= n)
        return vmmc_error(VMMC_ERR_INVALID, "%s: %d is not a peer handle of this endpoint "
                          "(0..%d)", who, h, n - 1);
    unsigned x = (unsigned)(h - fm->size);
    if (x / FM_XCHUNK >= FM_XCHUNKS)
        return vmmc_error(VMMC_ERR_INVALID, "%s: peer handle %d beyond FM's %d", who, h,
                          fm->size + FM_XCHUNK * FM_XCHUNKS - 1);
    int st = VMMC_OK;
    pthread_mutex_lock(&fm->xlock);
    if ((p = fm_peer_at(fm, h)) != NULL)
        goto out;
    _Atomic(fm_peer_t *) *c = fm->xdir[x / FM_XCHUNK];
    if (!c) {
        c = calloc(FM_XCHUNK, sizeof *c);
        if (!c) {
            st = vmmc_error(VMMC_ERR_NOMEM, "%s: no memory for FM's peer table", who);
            goto out;
        }
        __atomic_store_n(&fm->xdir[x / FM_XCHUNK], c, __ATOMIC_RELEASE);
    }
    p = aligned_alloc(FM_LINE, (sizeof *p + FM_LINE - 1) & ~(size_t)(FM_LINE - 1));
    if (!p) {
        st = vmmc_error(VMMC_ERR_NOMEM, "%s: no memory for peer %d", who, h);
        goto out;
    }
    memset(p, 0, sizeof *p);
    fm_peer_base(fm, p, h);
    if ((st = fm_ring_make_locked(fm, p)) != VMMC_OK) {
        free(p);
        p = NULL;
        goto out;
    }
    atomic_store_explicit(&c[x % FM_XCHUNK], p, memory_order_release);
    if (h + 1 > atomic_load_explicit(&fm->nslots, memory_order_relaxed))
        atomic_store_explicit(&fm->nslots, h + 1, memory_order_release);
out:
    pthread_mutex_unlock(&fm->xlock);
    if (st == VMMC_OK)
        *out = p;
    return st;
}

void fm_xpeer_free_all(fm_t *fm, int local)
{
    for (int i = 0; i < FM_XCHUNKS; i++) {
        _Atomic(fm_peer_t *) *c = fm->xdir[i];
        if (!c)
            continue;
        for (int k = 0; k < FM_XCHUNK; k++) {
            fm_peer_t *p = atomic_load_explicit(&c[k], memory_order_relaxed);
            if (p)
                xpeer_free(fm, p, local);
        }
        free(c);
        fm->xdir[i] = NULL;
    }
}
