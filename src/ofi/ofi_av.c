/* Address vectors: fi_av_open and fi_ops_av, for FI_AV_MAP and FI_AV_TABLE.
 *
 * Both types keep the packed names (ofi_addr.c) in one array; an fi_addr_t
 * is an index into it. A table hands out the lowest unused index, so
 * indices are consecutive until something is removed, as fi_av(3) asks; a
 * map gives an address that is already in it its old fi_addr_t again. A
 * hash of the names (chained through next[]) finds an address without a
 * scan: the map's duplicate check, and vofi_av_find() for FI_SOURCE.
 *
 * Inserts are synchronous: FI_EVENT (asynchronous inserts reported to an
 * EQ) and shared (named, FI_READ) AVs are refused with -FI_ENOSYS, and so is
 * binding an EQ, which only FI_EVENT would use. Names are opaque bytes, so
 * fi_av_insertsvc/insertsym (host and service strings) are -FI_ENOSYS too.
 *
 * fi_av_remove() frees the slots and bumps av->gen: endpoints compare it
 * with the generation they cached their vmmc peer handles at and drop them.
 *
 * Locking: av->lock (a rwlock) is taken last, after any endpoint's lock:
 * insert and remove write, everything else reads. */
#include <stdlib.h>
#include <string.h>

#include "ofi/ofi.h"

#define AV_MAX_SLOTS ((size_t)1 << 24) /* fi_addr_t values 0 .. 16M-1 */
#define NONE UINT32_MAX

typedef struct av_priv {
    vofi_av_t av;     /* first: the fid_av the application holds */
    uint32_t *next;   /* per slot: next slot in its hash chain */
    uint32_t *bucket; /* nbucket heads (a power of 2) */
    size_t nbucket;
    size_t holes;     /* unused slots below av.count */
} av_priv_t;

static uint64_t name_hash(const uint8_t *a, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ a[i]) * 0x100000001b3ull;
    return h;
}

static size_t bucket_of(const av_priv_t *p, const uint8_t *a, size_t n)
{
    return (size_t)(name_hash(a, n) & (p->nbucket - 1));
}

/* A slot holding @p a (a table may hold it twice: either), or NONE.
 * Lock held. */
static uint32_t lookup_slot(const av_priv_t *p, const uint8_t *a, size_t n)
{
    if (n == 0 || n > VOFI_MAX_EP_ADDR || !p->nbucket)
        return NONE;
    for (uint32_t s = p->bucket[bucket_of(p, a, n)]; s != NONE; s = p->next[s])
        if (p->av.tab[s].len == n && !memcmp(p->av.tab[s].addr, a, n))
            return s;
    return NONE;
}

static void link_slot(av_priv_t *p, uint32_t s)
{
    size_t b = bucket_of(p, p->av.tab[s].addr, p->av.tab[s].len);
    p->next[s] = p->bucket[b];
    p->bucket[b] = s;
}

static void unlink_slot(av_priv_t *p, uint32_t s)
{
    uint32_t *q = &p->bucket[bucket_of(p, p->av.tab[s].addr, p->av.tab[s].len)];
    while (*q != NONE && *q != s)
        q = &p->next[*q];
    if (*q == s)
        *q = p->next[s];
}

/* Room for @p want slots, and a bucket per slot. Lock held. */
static int grow(av_priv_t *p, size_t want)
{
    vofi_av_t *av = &p->av;
    if (want > AV_MAX_SLOTS)
        return -FI_ENOSPC;
    if (want > av->cap) {
        size_t cap = av->cap ? av->cap : 16;
        while (cap < want)
            cap *= 2;
        vofi_av_entry_t *tab = realloc(av->tab, cap * sizeof *tab);
        if (!tab)
            return -FI_ENOMEM;
        av->tab = tab;
        memset(tab + av->cap, 0, (cap - av->cap) * sizeof *tab);
        uint32_t *next = realloc(p->next, cap * sizeof *next);
        if (!next)
            return -FI_ENOMEM;
        p->next = next;
        av->cap = cap;
    }
    if (p->nbucket >= av->cap)
        return 0;
    size_t nb = p->nbucket ? p->nbucket : 16;
    while (nb < av->cap)
        nb *= 2;
    uint32_t *bucket = malloc(nb * sizeof *bucket);
    if (!bucket)
        return -FI_ENOMEM;
    free(p->bucket);
    p->bucket = bucket;
    p->nbucket = nb;
    memset(bucket, 0xff, nb * sizeof *bucket); /* NONE */
    for (size_t s = 0; s < av->count; s++)
        if (av->tab[s].len)
            link_slot(p, (uint32_t)s);
    return 0;
}

/* Insert one checked name; its fi_addr_t in *out. Lock held. */
static int insert_one(av_priv_t *p, const uint8_t *a, size_t n, fi_addr_t *out)
{
    vofi_av_t *av = &p->av;
    uint32_t s = av->type == FI_AV_MAP ? lookup_slot(p, a, n) : NONE;
    if (s == NONE) {
        if (p->holes) { /* the lowest unused slot */
            for (s = 0; av->tab[s].len; s++)
                ;
            p->holes--;
        } else {
            int rc = grow(p, av->count + 1);
            if (rc)
                return rc;
            s = (uint32_t)av->count++;
        }
        av->tab[s].len = (uint8_t)n;
        memcpy(av->tab[s].addr, a, n);
        link_slot(p, s);
    }
    *out = s;
    return 0;
}

static int av_insert(struct fid_av *fav, const void *addr, size_t count, fi_addr_t *fi_addr,
                     uint64_t flags, void *context)
{
    av_priv_t *p = (av_priv_t *)fav;
    int *sync_err = flags & FI_SYNC_ERR ? context : NULL;
    if (flags & ~(uint64_t)(FI_MORE | FI_SYNC_ERR)) {
        vofi_warn("fi_av_insert: flags 0x%llx not supported (FI_MORE, FI_SYNC_ERR are)",
                  (unsigned long long)(flags & ~(uint64_t)(FI_MORE | FI_SYNC_ERR)));
        return -FI_EBADFLAGS;
    }
    if (count && (!addr || (flags & FI_SYNC_ERR && !sync_err))) {
        vofi_warn("fi_av_insert: NULL %s", !addr ? "address list" : "FI_SYNC_ERR array");
        return -FI_EINVAL;
    }
    const uint8_t *a = addr;
    int done = 0, walkable = 1;
    pthread_rwlock_wrlock(&p->av.lock);
    for (size_t i = 0; i < count; i++) {
        fi_addr_t fa = FI_ADDR_NOTAVAIL;
        int err = FI_EINVAL;
        size_t n = walkable ? a[0] : 0; /* a name starts with its length */
        if (n < 1 || n > VOFI_MAX_EP_ADDR) {
            if (walkable)
                vofi_warn("fi_av_insert: address %zu has length %zu (1..%d): it and the %zu "
                          "after it are not inserted",
                          i, n, VOFI_MAX_EP_ADDR, count - i - 1);
            walkable = 0; /* where the next name starts is unknown */
        } else {
            uint8_t text[VMMC_ADDR_MAX];
            size_t tl = sizeof text;
            if (vofi_addr_unpack(a, n, NULL, 0, text, &tl) == 0) {
                int rc = insert_one(p, a, n, &fa);
                err = -rc;
                done += rc == 0;
            }
            a += n;
        }
        if (err && err != FI_EINVAL)
            vofi_warn("fi_av_insert: address %zu: %s", i, fi_strerror(err));
        if (fi_addr)
            fi_addr[i] = fa;
        if (sync_err)
            sync_err[i] = err;
    }
    pthread_rwlock_unlock(&p->av.lock);
    return done;
}

static int av_insertsvc(struct fid_av *fav, const char *node, const char *service,
                        fi_addr_t *fi_addr, uint64_t flags, void *context)
{
    vofi_warn("fi_av_insertsvc: vmmc addresses are opaque (insert what fi_getname gives)");
    return -FI_ENOSYS;
}

static int av_insertsym(struct fid_av *fav, const char *node, size_t nodecnt, const char *service,
                        size_t svccnt, fi_addr_t *fi_addr, uint64_t flags, void *context)
{
    vofi_warn("fi_av_insertsym: vmmc addresses are opaque (insert what fi_getname gives)");
    return -FI_ENOSYS;
}

static int av_remove(struct fid_av *fav, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
    av_priv_t *p = (av_priv_t *)fav;
    if (flags) {
        vofi_warn("fi_av_remove: flags must be 0");
        return -FI_EBADFLAGS;
    }
    if (count && !fi_addr) {
        vofi_warn("fi_av_remove: NULL fi_addr list");
        return -FI_EINVAL;
    }
    pthread_rwlock_wrlock(&p->av.lock);
    for (size_t i = 0; i < count; i++) /* all or nothing */
        if (fi_addr[i] >= p->av.count || !p->av.tab[fi_addr[i]].len) {
            pthread_rwlock_unlock(&p->av.lock);
            vofi_warn("fi_av_remove: fi_addr %llu (entry %zu) is not in the AV: none removed",
                      (unsigned long long)fi_addr[i], i);
            return -FI_EINVAL;
        }
    for (size_t i = 0; i < count; i++) {
        uint32_t s = (uint32_t)fi_addr[i];
        if (!p->av.tab[s].len) /* listed twice */
            continue;
        unlink_slot(p, s);
        p->av.tab[s].len = 0;
        p->holes++;
    }
    while (p->av.count && !p->av.tab[p->av.count - 1].len) { /* trailing holes: gone */
        p->av.count--;
        p->holes--;
    }
    if (count)
        atomic_fetch_add(&p->av.gen, 1);
    pthread_rwlock_unlock(&p->av.lock);
    return 0;
}

static int av_lookup(struct fid_av *fav, fi_addr_t fa, void *addr, size_t *addrlen)
{
    vofi_av_t *av = (vofi_av_t *)fav;
    if (!addrlen || (!addr && *addrlen)) {
        vofi_warn("fi_av_lookup: NULL %s", !addrlen ? "addrlen" : "address buffer");
        return -FI_EINVAL;
    }
    uint8_t a[VOFI_MAX_EP_ADDR];
    int n = vofi_av_get(av, fa, a);
    if (n < 0) {
        vofi_warn("fi_av_lookup: fi_addr %llu is not in the AV", (unsigned long long)fa);
        return n;
    }
    size_t cap = *addrlen;
    if (cap) /* truncated, as fi_av(3) says */
        memcpy(addr, a, cap < (size_t)n ? cap : (size_t)n);
    *addrlen = (size_t)n;
    return 0;
}

static const char *av_straddr(struct fid_av *fav, const void *addr, char *buf, size_t *len)
{
    const uint8_t *a = addr;
    /* The name's length byte says how much to print; a bad one: just it. */
    size_t n = !a ? 0 : a[0] >= 1 && a[0] <= VOFI_MAX_EP_ADDR ? a[0] : 1;
    vofi_addr_str(a, n, buf, len);
    return buf;
}

static int av_close(struct fid *fid)
{
    av_priv_t *p = (av_priv_t *)fid;
    if (atomic_load(&p->av.ref) > 0) {
        vofi_warn("fi_close(av): %d endpoints are still bound to it", atomic_load(&p->av.ref));
        return -FI_EBUSY;
    }
    atomic_fetch_sub(&p->av.dom->ref, 1);
    pthread_rwlock_destroy(&p->av.lock);
    free(p->av.tab);
    free(p->next);
    free(p->bucket);
    free(p);
    return 0;
}

static int av_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    vofi_warn("fi_av_bind: inserts are synchronous (no FI_EVENT): no EQ to bind");
    return -FI_ENOSYS;
}

static int av_control(struct fid *fid, int command, void *arg)
{
    return -FI_ENOSYS;
}

static struct fi_ops av_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = av_close,
    .bind = av_bind,
    .control = av_control,
    .ops_open = vofi_no_ops_open,
};

static struct fi_ops_av av_ops = {
    .size = sizeof(struct fi_ops_av),
    .insert = av_insert,
    .insertsvc = av_insertsvc,
    .insertsym = av_insertsym,
    .remove = av_remove,
    .lookup = av_lookup,
    .straddr = av_straddr,
};

int vofi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **avp,
                 void *context)
{
    if (!domain || !attr || !avp) {
        vofi_warn("fi_av_open: NULL %s", !domain ? "domain" : !attr ? "attributes" : "result");
        return -FI_EINVAL;
    }
    if (attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE && attr->type != FI_AV_UNSPEC) {
        vofi_warn("fi_av_open: unknown AV type %d", (int)attr->type);
        return -FI_EINVAL;
    }
    if (attr->flags & FI_EVENT) {
        vofi_warn("fi_av_open: FI_EVENT: inserts are synchronous only");
        return -FI_ENOSYS;
    }
    if (attr->name || (attr->flags & FI_READ)) {
        vofi_warn("fi_av_open: shared (named) AVs are not supported");
        return -FI_ENOSYS;
    }
    if (attr->rx_ctx_bits) {
        vofi_warn("fi_av_open: rx_ctx_bits %d: no scalable endpoints", attr->rx_ctx_bits);
        return -FI_ENOSYS;
    }
    if (attr->flags & ~(uint64_t)FI_SYMMETRIC) { /* FI_SYMMETRIC: a hint */
        vofi_warn("fi_av_open: flags 0x%llx not supported",
                  (unsigned long long)(attr->flags & ~(uint64_t)FI_SYMMETRIC));
        return -FI_EBADFLAGS;
    }
    av_priv_t *p = calloc(1, sizeof *p);
    if (!p)
        return -FI_ENOMEM;
    if (attr->type == FI_AV_UNSPEC)
        attr->type = FI_AV_MAP;
    p->av.type = attr->type;
    p->av.dom = (vofi_domain_t *)domain;
    pthread_rwlock_init(&p->av.lock, NULL);
    atomic_init(&p->av.gen, 0);
    atomic_init(&p->av.ref, 0);
    size_t hint = attr->count < AV_MAX_SLOTS ? attr->count : AV_MAX_SLOTS;
    int rc = grow(p, hint ? hint : 16);
    if (rc) {
        pthread_rwlock_destroy(&p->av.lock);
        free(p->av.tab);
        free(p->next);
        free(p);
        return rc;
    }
    p->av.fid.fid.fclass = FI_CLASS_AV;
    p->av.fid.fid.context = context;
    p->av.fid.fid.ops = &av_fi_ops;
    p->av.fid.ops = &av_ops;
    atomic_fetch_add(&p->av.dom->ref, 1);
    *avp = &p->av.fid;
    return 0;
}

int vofi_av_get(vofi_av_t *av, fi_addr_t a, uint8_t *out)
{
    int n = -FI_EINVAL;
    pthread_rwlock_rdlock(&av->lock);
    if (a < av->count && av->tab[a].len) {
        n = av->tab[a].len;
        memcpy(out, av->tab[a].addr, (size_t)n);
    }
    pthread_rwlock_unlock(&av->lock);
    return n;
}

fi_addr_t vofi_av_find(vofi_av_t *av, const uint8_t *addr, size_t len)
{
    av_priv_t *p = (av_priv_t *)av;
    if (!addr)
        return FI_ADDR_NOTAVAIL;
    pthread_rwlock_rdlock(&av->lock);
    uint32_t s = lookup_slot(p, addr, len);
    pthread_rwlock_unlock(&av->lock);
    return s == NONE ? FI_ADDR_NOTAVAIL : s;
}
