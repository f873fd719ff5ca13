/* Memory keys and the translation cache (VMMC-2's user-managed TLB).
 *
 * A key names a range of one vmmc_mem_alloc() allocation. Issuing the first
 * key for an allocation exports the whole allocation (VMMC_EXPORT_READ, so
 * that its importers may map it: export.c) under the name
 * "vmmc.mem.<id>.<gen>", importable only by the ranks a key was issued to.
 * The key carries (export id, generation, offset, length) and a 64-bit MAC
 * of them (SipHash-2-4) under a secret per (allocation, rank): the exporter
 * derives it from the export's random token and hands it only to that rank,
 * in its import reply. The holder attaches the key: the first time, an
 * import of that name and a mapping of the memfd; later, a lookup in a
 * bounded cache of mappings; every attach checks the MAC, so a key altered
 * in any field, or issued to another rank, is refused (VMMC_ERR_PERMISSION).
 *
 * The unit of protection is the allocation, as an RDMA memory region is: a
 * rank that was issued any key for an allocation has the allocation's
 * descriptor and could reach all of it with its own loads and stores. The
 * key range is what the library lets honest code touch; allocate separately
 * what you grant separately.
 *
 * Cache entries are pinned while attached (vmmc_mem_attach ..
 * vmmc_mem_detach) and evicted least recently used otherwise; an eviction
 * unimports, which unmaps. An entry whose proxy went stale (the owner freed
 * the allocation) is dropped at its next lookup. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/export.h"
#include "util/config.h"
#include "util/siphash.h"

static struct {
    int64_t entries;
} mkey_cfg;

static const vmmc_cfg_entry_t mkey_entries[] = {
    {"MKEY_CACHE", "64", "translation cache: peer allocations kept attached (vmmc_mem_attach)",
     VMMC_CFG_INT, &mkey_cfg.entries, 1, 1 << 20},
};
VMMC_CONFIG_TABLE(mkey_cfg_table, "core", mkey_entries);

/* Key layout (opaque to users): id | gen << 32, offset, length, MAC. */
enum { K_ID = 0, K_OFF, K_LEN, K_MAC };

void vmmc_mkey_grant_secret(const vmmc_export_t *ex, int rank, uint64_t out[2])
{
    uint64_t w0[2] = {(uint64_t)(uint32_t)rank, 0}, w1[2] = {(uint64_t)(uint32_t)rank, 1};
    out[0] = vmmc_siphash(ex->token, w0, sizeof w0);
    out[1] = vmmc_siphash(ex->token, w1, sizeof w1);
}

static uint64_t key_mac(const uint64_t secret[2], const vmmc_mkey_t *key)
{
    return vmmc_siphash(secret, key->opaque, 3 * sizeof key->opaque[0]);
}

typedef struct mkey_ent {
    int rank;                /* -1: free */
    uint32_t id, gen;
    vmmc_proxy_t *px;        /* its token is this rank's key secret */
    char *base;              /* the allocation, mapped here */
    size_t len;
    int pins;
    int pending;             /* import started, not answered yet */
    uint64_t used;           /* LRU clock */
} mkey_ent_t;

struct vmmc_mkey_cache {
    pthread_mutex_t lock;    /* the entries */
    pthread_mutex_t klock;   /* issuing keys */
    int n;
    int last;                /* entry of the last attach */
    uint64_t clock;
    mkey_ent_t e[];
};

static struct vmmc_mkey_cache *cache_of(vmmc_ep_t *ep, int *rc)
{
    struct vmmc_mkey_cache *c = atomic_load_explicit(&ep->mkeys, memory_order_acquire);
    if (c)
        return c;
    int n = mkey_cfg.entries > 0 ? (int)mkey_cfg.entries : 64;
    if (n > 65536)
        n = 65536;
    c = calloc(1, sizeof *c + sizeof(mkey_ent_t) * (size_t)n);
    if (!c) {
        *rc = vmmc_error(VMMC_ERR_NOMEM, "no memory for the translation cache");
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->klock, NULL);
    c->n = n;
    for (int i = 0; i < n; i++)
        c->e[i].rank = -1;
    struct vmmc_mkey_cache *expect = NULL;
    if (!atomic_compare_exchange_strong(&ep->mkeys, &expect, c)) {
        pthread_mutex_destroy(&c->lock);
        pthread_mutex_destroy(&c->klock);
        free(c);
        c = expect;
    }
    return c;
}

static void mkey_name(char *buf, size_t cap, uint32_t id, uint32_t gen)
{
    snprintf(buf, cap, VMMC_MKEY_PREFIX "%u.%u", id, gen);
}

/* With ep->mem_lock held; m->ksec is the secret of m->klast. */
static void key_fill(vmmc_mkey_t *key, const vmmc_mem_t *m, const char *a, size_t len)
{
    key->opaque[K_ID] = (uint64_t)m->kex->id | (uint64_t)m->kex->gen << 32;
    key->opaque[K_OFF] = (uint64_t)(a - m->base);
    key->opaque[K_LEN] = (uint64_t)len;
    key->opaque[K_MAC] = key_mac(m->ksec, key);
}

int vmmc_mem_key(vmmc_ep_t *ep, const void *addr, size_t len, int rank, vmmc_mkey_t *key)
{
    VMMC_FORK_CHECK(ep);
    if (!ep || !addr || !key)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_key: NULL %s",
                          !ep ? "endpoint" : !addr ? "address" : "key");
    if (len == 0)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_key: length is 0");
    if (rank < 0 || rank >= vmmc_peer_count_int(ep))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_key: peer %d is not a handle (0..%d)",
                          rank, vmmc_peer_count_int(ep) - 1);
    int rc = VMMC_OK;
    struct vmmc_mkey_cache *c = cache_of(ep, &rc);
    if (!c)
        return rc;
    const char *a = addr;
    /* Fast path: the allocation has its export and @rank was the last
     * grantee (a receiver posting buffers to one sender after another). */
    pthread_mutex_lock(&ep->mem_lock);
    for (vmmc_mem_t *m = ep->mem; m; m = m->next) {
        if (a >= m->base && a + len >= a && a + len <= m->base + m->req) {
            if (m->kex && m->klast == rank) {
                key_fill(key, m, a, len);
                pthread_mutex_unlock(&ep->mem_lock);
                return VMMC_OK;
            }
            break;
        }
    }
    pthread_mutex_unlock(&ep->mem_lock);
    /* Creating the key export goes through vmmc_export(), which looks the
     * allocation up itself: done outside mem_lock, one creator at a time. */
    pthread_mutex_lock(&c->klock);
    pthread_mutex_lock(&ep->mem_lock);
    vmmc_mem_t *m = ep->mem;
    while (m && !(a >= m->base && a + len >= a && a + len <= m->base + m->req))
        m = m->next;
    if (!m) {
        pthread_mutex_unlock(&ep->mem_lock);
        pthread_mutex_unlock(&c->klock);
        return vmmc_error(VMMC_ERR_UNSUPPORTED, "vmmc_mem_key: [%p, +%zu) is not inside one "
                          "vmmc_mem_alloc() allocation", addr, len);
    }
    if (!m->kex) {
        char *base = m->base;
        size_t mlen = m->req;
        pthread_mutex_unlock(&ep->mem_lock);
        vmmc_export_params_t pa = {
            .field_mask = VMMC_EXPORT_PARAM_IMPORTERS | VMMC_EXPORT_PARAM_FLAGS,
            .name = VMMC_MKEY_PREFIX "new", /* named vmmc.mem.<id>.<gen> when registered */
            .addr = base,
            .length = mlen,
            .flags = VMMC_EXPORT_READ,
            .importers = &rank,
            .num_importers = 1,
        };
        vmmc_export_t *ex;
        if ((rc = vmmc_export_mkey(ep, &pa, &ex)) != VMMC_OK) {
            pthread_mutex_unlock(&c->klock);
            return rc;
        }
        if (ex->memfd < 0) {
            /* Another export of this allocation gives its importers the
             * descriptor: a key could not be attached. */
            pthread_mutex_unlock(&c->klock);
            vmmc_unexport(ex);
            return vmmc_error(VMMC_ERR_UNSUPPORTED, "vmmc_mem_key: the allocation at %p is "
                              "exported whole to other importers already", (void *)base);
        }
        pthread_mutex_lock(&ep->mem_lock);
        for (m = ep->mem; m && m->base != base; m = m->next)
            ;
        if (!m) { /* freed meanwhile by another thread */
            pthread_mutex_unlock(&ep->mem_lock);
            pthread_mutex_unlock(&c->klock);
            vmmc_unexport(ex);
            return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_key: the allocation at %p was freed",
                              (void *)base);
        }
        m->kex = ex;
    } else {
        /* Grant @rank too if it is new. */
        vmmc_export_t *ex = m->kex;
        pthread_mutex_lock(&ep->lock);
        int have = 0;
        for (int i = 0; i < ex->num_importers && !have; i++)
            have = ex->importers[i] == rank;
        if (!have) {
            int *ni = realloc(ex->importers, sizeof(int) * (size_t)(ex->num_importers + 1));
            if (!ni) {
                pthread_mutex_unlock(&ep->lock);
                pthread_mutex_unlock(&ep->mem_lock);
                pthread_mutex_unlock(&c->klock);
                return vmmc_error(VMMC_ERR_NOMEM, "vmmc_mem_key: out of memory");
            }
            ni[ex->num_importers++] = rank;
            ex->importers = ni;
        }
        pthread_mutex_unlock(&ep->lock);
    }
    vmmc_mkey_grant_secret(m->kex, rank, m->ksec);
    m->klast = rank;
    key_fill(key, m, a, len);
    pthread_mutex_unlock(&ep->mem_lock);
    pthread_mutex_unlock(&c->klock);
    return VMMC_OK;
}

/* With c->lock held: the entry for (rank, id, gen), or NULL. */
static mkey_ent_t *lookup(struct vmmc_mkey_cache *c, int rank, uint32_t id, uint32_t gen)
{
    for (int i = 0; i < c->n; i++) {
        mkey_ent_t *e = &c->e[i];
        if (e->rank == rank && e->id == id && e->gen == gen)
            return e;
    }
    return NULL;
}

static void ent_drop(mkey_ent_t *e)
{
    vmmc_unimport(e->px);
    memset(e, 0, sizeof *e);
    e->rank = -1;
}

/* With c->lock held: the pending import of @e was answered (or timed out).
 * Map it, or drop the entry and return the error. */
static int ent_finish(mkey_ent_t *e, int rc)
{
    void *base;
    if (rc == VMMC_OK && (e->px->export_id != e->id || e->px->gen != e->gen))
        rc = vmmc_error(VMMC_ERR_STALE, "vmmc_mem_attach: rank %d no longer has the allocation "
                        "this key names", e->rank);
    if (rc == VMMC_OK)
        rc = vmmc_proxy_map(e->px, &base);
    if (rc != VMMC_OK) {
        ent_drop(e);
        return rc;
    }
    e->base = base;
    e->len = vmmc_proxy_length(e->px);
    e->pending = 0;
    return VMMC_OK;
}

/* With c->lock held: wait for @e's import up to @timeout_ms (0: not at all,
 * -1: its own deadline). */
static int ent_wait(mkey_ent_t *e, int timeout_ms)
{
    uint64_t end = timeout_ms > 0 ? vmmc_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
    int rc;
    while ((rc = vmmc_import_test(e->px)) == VMMC_INPROGRESS) {
        if (timeout_ms == 0)
            return vmmc_error(VMMC_ERR_AGAIN, "vmmc_mem_attach: still mapping rank %d's memory",
                              e->rank);
        if (end && vmmc_now_ns() > end) {
            ent_drop(e);
            return vmmc_error(VMMC_ERR_TIMEOUT, "vmmc_mem_attach: rank %d did not answer within "
                              "%d ms", e->rank, timeout_ms);
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return ent_finish(e, rc);
}

int vmmc_mem_attach(vmmc_ep_t *ep, int rank, const vmmc_mkey_t *key, int timeout_ms, void **ptr)
{
    VMMC_FORK_CHECK(ep);
    if (!ep || !key || !ptr)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_attach: NULL %s",
                          !ep ? "endpoint" : !key ? "key" : "result pointer");
    if (rank < 0 || rank >= vmmc_peer_count_int(ep))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_attach: peer %d is not a handle (0..%d)",
                          rank, vmmc_peer_count_int(ep) - 1);
    int rc = VMMC_OK;
    struct vmmc_mkey_cache *c = cache_of(ep, &rc);
    if (!c)
        return rc;
    uint32_t id = (uint32_t)key->opaque[K_ID], gen = (uint32_t)(key->opaque[K_ID] >> 32);
    uint64_t off = key->opaque[K_OFF];
    uint64_t klen = key->opaque[K_LEN];
    pthread_mutex_lock(&c->lock);
    mkey_ent_t *e = &c->e[c->last];
    if (e->rank != rank || e->id != id || e->gen != gen)
        e = lookup(c, rank, id, gen);
    if (e && !e->pending && atomic_load(&e->px->state) != PX_ACTIVE && e->pins == 0) {
        ent_drop(e); /* the owner freed that allocation */
        e = NULL;
    }
    if (e && e->pending && (rc = ent_wait(e, timeout_ms)) != VMMC_OK) {
        pthread_mutex_unlock(&c->lock);
        return rc;
    }
    if (!e) {
        mkey_ent_t *victim = NULL;
        for (int i = 0; i < c->n; i++) {
            mkey_ent_t *x = &c->e[i];
            if (x->rank < 0) {
                victim = x;
                break;
            }
            if (x->pins == 0 && (!victim || x->used < victim->used))
                victim = x;
        }
        if (!victim) {
            pthread_mutex_unlock(&c->lock);
            return vmmc_error(VMMC_ERR_AGAIN, "vmmc_mem_attach: all %d translation cache entries "
                              "are attached (VMMC_MKEY_CACHE)", c->n);
        }
        if (victim->rank >= 0)
            ent_drop(victim);
        char name[VMMC_NAME_MAX];
        mkey_name(name, sizeof name, id, gen);
        vmmc_proxy_t *px;
        /* The import needs only the owner's control thread, never this
         * cache: holding the lock while waiting keeps one import per entry.
         * With timeout 0 the import goes on in the background and a later
         * attach finds it done. */
        int deadline = timeout_ms > 0 ? timeout_ms
                                      : (int)(vmmc_core_cfg.connect_timeout_ns / 1000000);
        if ((rc = vmmc_import_start(ep, rank, name, deadline, &px)) < 0) {
            pthread_mutex_unlock(&c->lock);
            return rc;
        }
        e = victim;
        e->rank = rank;
        e->id = id;
        e->gen = gen;
        e->px = px;
        e->base = NULL;
        e->len = 0;
        e->pins = 0;
        e->pending = 1;
        e->used = ++c->clock;
        if ((rc = ent_wait(e, timeout_ms)) != VMMC_OK) {
            pthread_mutex_unlock(&c->lock);
            return rc;
        }
    }
    if (key_mac(e->px->token, key) != key->opaque[K_MAC]) {
        pthread_mutex_unlock(&c->lock);
        return vmmc_error(VMMC_ERR_PERMISSION, "vmmc_mem_attach: the key was not issued to this "
                          "rank by rank %d, or was altered", rank);
    }
    if (off > e->len || klen > e->len - off) {
        pthread_mutex_unlock(&c->lock);
        return vmmc_error(VMMC_ERR_BOUNDS, "vmmc_mem_attach: key range [%" PRIu64 ", +%" PRIu64
                          ") lies outside rank %d's allocation of %zu bytes", off, klen, rank,
                          e->len);
    }
    e->pins++;
    e->used = ++c->clock;
    c->last = (int)(e - c->e);
    *ptr = e->base + off;
    pthread_mutex_unlock(&c->lock);
    return VMMC_OK;
}

size_t vmmc_mkey_len(const vmmc_mkey_t *key) { return key ? (size_t)key->opaque[K_LEN] : 0; }

int vmmc_mem_detach(vmmc_ep_t *ep, void *ptr)
{
    VMMC_FORK_CHECK(ep);
    if (!ep || !ptr)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_detach: NULL %s", !ep ? "endpoint" : "pointer");
    struct vmmc_mkey_cache *c = atomic_load_explicit(&ep->mkeys, memory_order_acquire);
    if (c) {
        const char *p = ptr;
        pthread_mutex_lock(&c->lock);
        for (int k = -1; k < c->n; k++) {
            mkey_ent_t *e = &c->e[k < 0 ? c->last : k]; /* the last attached first */
            if (e->rank >= 0 && e->pins > 0 && p >= e->base && p < e->base + e->len) {
                e->pins--;
                pthread_mutex_unlock(&c->lock);
                return VMMC_OK;
            }
        }
        pthread_mutex_unlock(&c->lock);
    }
    return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_detach: %p is not an attached pointer", ptr);
}

void vmmc_mkey_cache_destroy(vmmc_ep_t *ep)
{
    struct vmmc_mkey_cache *c = atomic_exchange(&ep->mkeys, NULL);
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->klock);
    free(c); /* the proxies go with the endpoint's import list */
}
