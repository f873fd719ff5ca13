/* Address vectors (ofi_av.c) through libfabric's public calls: a stand-in
 * domain whose av_open is vofi_av_open, then fi_av_insert, lookup, remove,
 * straddr and fi_close as an application makes them. */
#include <pthread.h>
#include <stdatomic.h>

#include "t_ofi_addr.h"

static vofi_domain_t dom;
static struct fi_ops_domain dom_ops = {.size = sizeof(struct fi_ops_domain),
                                       .av_open = vofi_av_open};

static struct fid_av *av_open(enum fi_av_type type, size_t count)
{
    struct fi_av_attr attr = {.type = type, .count = count};
    struct fid_av *av = NULL;
    int rc = fi_av_open(&dom.fid, &attr, &av, &dom);
    if (rc)
        VT_FAIL("fi_av_open(type %d): %d", (int)type, rc);
    VT_CHECK(attr.type == (type == FI_AV_UNSPEC ? FI_AV_MAP : type));
    VT_CHECK(av->fid.fclass == FI_CLASS_AV && av->fid.context == &dom);
    return av;
}

/* A distinct valid name: @p base with another pid. */
static void name_with_pid(const uint8_t *base, uint32_t pid, uint8_t *out)
{
    memcpy(out, base, PK);
    for (int i = 0; i < 4; i++)
        out[O_PID + i] = (uint8_t)(pid >> (8 * i));
    out[O_FLAGS] &= (uint8_t)~F_SHM; /* shm names carry the pid: drop it */
    memset(out + O_SHM, 0, 8);
    reseal(out);
}

static void test_open(void)
{
    struct fid_av *av;
    struct fi_av_attr attr = {.type = FI_AV_MAP};
    VT_CHECK(fi_av_open(&dom.fid, NULL, &av, NULL) == -FI_EINVAL);
    attr.type = (enum fi_av_type)7;
    VT_CHECK(fi_av_open(&dom.fid, &attr, &av, NULL) == -FI_EINVAL);
    attr.type = FI_AV_MAP;
    attr.flags = FI_EVENT;
    VT_CHECK(fi_av_open(&dom.fid, &attr, &av, NULL) == -FI_ENOSYS);
    attr.flags = FI_READ;
    VT_CHECK(fi_av_open(&dom.fid, &attr, &av, NULL) == -FI_ENOSYS);
    attr.flags = 0;
    attr.name = "shared";
    VT_CHECK(fi_av_open(&dom.fid, &attr, &av, NULL) == -FI_ENOSYS);
    attr.name = NULL;
    attr.rx_ctx_bits = 4;
    VT_CHECK(fi_av_open(&dom.fid, &attr, &av, NULL) == -FI_ENOSYS);
    attr.rx_ctx_bits = 0;
    attr.flags = 1ull << 3;
    VT_CHECK(fi_av_open(&dom.fid, &attr, &av, NULL) == -FI_EBADFLAGS);
    VT_CHECK(atomic_load(&dom.ref) == 0);
    attr.flags = FI_SYMMETRIC; /* a hint */
    attr.count = (size_t)1 << 40; /* a hint too: clamped */
    VT_CHECK(fi_av_open(&dom.fid, &attr, &av, NULL) == 0);
    VT_CHECK(atomic_load(&dom.ref) == 1);
    VT_CHECK(fi_close(&av->fid) == 0);
    VT_CHECK(atomic_load(&dom.ref) == 0);
}

static void test_insert(enum fi_av_type type, const uint8_t *pa, const uint8_t *pb)
{
    struct fid_av *av = av_open(type, 0);
    vofi_av_t *v = (vofi_av_t *)av;
    uint8_t list[3 * PK], out[VOFI_MAX_EP_ADDR];
    fi_addr_t fa[4];
    int err[4];
    uint8_t pc[PK];
    name_with_pid(pa, 4242, pc);
    memcpy(list, pa, PK);
    memcpy(list + PK, pb, PK);
    memcpy(list + 2 * PK, pc, PK);
    VT_CHECK(fi_av_insert(av, list, 3, fa, 0, NULL) == 3);
    VT_CHECK(fa[0] == 0 && fa[1] == 1 && fa[2] == 2);
    VT_CHECK(vofi_av_get(v, 1, out) == PK && !memcmp(out, pb, PK));
    VT_CHECK(vofi_av_find(v, pc, PK) == 2 && vofi_av_find(v, pa, PK) == 0);
    VT_CHECK(vofi_av_find(v, pa, PK - 1) == FI_ADDR_NOTAVAIL);

    /* the same again: a map gives the same fi_addr_t, a table new indices */
    VT_CHECK(fi_av_insert(av, list, 2, fa, FI_MORE, NULL) == 2);
    if (type == FI_AV_MAP)
        VT_CHECK(fa[0] == 0 && fa[1] == 1);
    else
        VT_CHECK(fa[0] == 3 && fa[1] == 4);
    fi_addr_t next = type == FI_AV_MAP ? 3 : 5;

    /* a damaged name in the middle: refused, the others inserted */
    uint8_t pd[PK], pe[PK];
    name_with_pid(pa, 5000, pd);
    name_with_pid(pa, 5001, pe);
    memcpy(list, pd, PK);
    memcpy(list + PK, pb, PK);
    list[PK + O_UTOK] ^= 1;
    memcpy(list + 2 * PK, pe, PK);
    VT_CHECK(fi_av_insert(av, list, 3, fa, FI_SYNC_ERR, err) == 2);
    VT_CHECK(err[0] == 0 && err[1] == FI_EINVAL && err[2] == 0);
    VT_CHECK(fa[0] == next && fa[1] == FI_ADDR_NOTAVAIL && fa[2] == next + 1);
    /* a length byte that cannot be: it and everything after are refused */
    name_with_pid(pa, 6000, pd);
    memcpy(list, pd, PK);
    memcpy(list + PK, pb, PK);
    list[PK] = 200;
    VT_CHECK(fi_av_insert(av, list, 3, fa, FI_SYNC_ERR, err) == 1);
    VT_CHECK(err[0] == 0 && err[1] == FI_EINVAL && err[2] == FI_EINVAL);
    VT_CHECK(fa[0] == next + 2 && fa[1] == FI_ADDR_NOTAVAIL && fa[2] == FI_ADDR_NOTAVAIL);
    fi_addr_t last = next + 2;
    /* NULL fi_addr (table) and unsupported flags */
    name_with_pid(pa, 7000, pd);
    VT_CHECK(fi_av_insert(av, pd, 1, NULL, 0, NULL) == 1);
    VT_CHECK(vofi_av_find(v, pd, PK) == last + 1);
    last++;
    VT_CHECK(fi_av_insert(av, pd, 1, fa, FI_AV_USER_ID, NULL) == -FI_EBADFLAGS);
    VT_CHECK(fi_av_insert(av, NULL, 1, fa, 0, NULL) == -FI_EINVAL);
    VT_CHECK(fi_av_insert(av, pd, 1, fa, FI_SYNC_ERR, NULL) == -FI_EINVAL);
    VT_CHECK(fi_av_insert(av, NULL, 0, NULL, 0, NULL) == 0);
    VT_CHECK(fi_av_insertsvc(av, "localhost", "7000", fa, 0, NULL) == -FI_ENOSYS);
    VT_CHECK(fi_av_insertsym(av, "10.0.0.1", 2, "7000", 2, fa, 0, NULL) == -FI_ENOSYS);

    /* lookup: the name, its true length, truncation */
    uint8_t buf[VOFI_MAX_EP_ADDR + 8];
    size_t len = sizeof buf;
    VT_CHECK(fi_av_lookup(av, 1, buf, &len) == 0 && len == PK && !memcmp(buf, pb, PK));
    memset(buf, 0xee, sizeof buf);
    len = 10;
    VT_CHECK(fi_av_lookup(av, 1, buf, &len) == 0 && len == PK && !memcmp(buf, pb, 10) &&
             buf[10] == 0xee);
    len = 0;
    VT_CHECK(fi_av_lookup(av, 1, NULL, &len) == 0 && len == PK);
    len = sizeof buf;
    VT_CHECK(fi_av_lookup(av, last + 1, buf, &len) == -FI_EINVAL);
    VT_CHECK(fi_av_lookup(av, FI_ADDR_NOTAVAIL, buf, &len) == -FI_EINVAL);

    /* straddr of a stored name */
    char s[200];
    len = sizeof s;
    VT_CHECK(fi_av_straddr(av, pb, s, &len) == s && len == 7 + 2 * PK + 1);
    VT_CHECK(!strncmp(s, "vmmc://", 7) && strlen(s) == 7 + 2 * PK);
    len = 12;
    VT_CHECK(fi_av_straddr(av, pb, s, &len) == s && len == 7 + 2 * PK + 1 && strlen(s) == 11);

    /* remove: gone, generation bumped, the slot reused */
    uint64_t gen = atomic_load(&v->gen);
    fi_addr_t rm[2] = {1, 0};
    VT_CHECK(fi_av_remove(av, rm, 2, 0) == 0);
    VT_CHECK(atomic_load(&v->gen) == gen + 1);
    len = sizeof buf;
    VT_CHECK(fi_av_lookup(av, 1, buf, &len) == -FI_EINVAL);
    VT_CHECK(vofi_av_get(v, 0, out) == -FI_EINVAL);
    if (type == FI_AV_MAP) {
        VT_CHECK(vofi_av_find(v, pb, PK) == FI_ADDR_NOTAVAIL);
    } else { /* the table still has the second copies */
        VT_CHECK(vofi_av_find(v, pb, PK) == 4);
    }
    fi_addr_t bad[2] = {2, last + 5};
    VT_CHECK(fi_av_remove(av, bad, 2, 0) == -FI_EINVAL); /* all or nothing */
    VT_CHECK(vofi_av_get(v, 2, out) == PK);
    VT_CHECK(fi_av_remove(av, rm, 1, 0) == -FI_EINVAL); /* twice */
    VT_CHECK(fi_av_remove(av, bad, 1, FI_MORE) == -FI_EBADFLAGS);
    VT_CHECK(atomic_load(&v->gen) == gen + 1);
    VT_CHECK(fi_av_insert(av, pb, 1, fa, 0, NULL) == 1 && fa[0] == 0); /* lowest free */
    VT_CHECK(fi_av_insert(av, pa, 1, fa, 0, NULL) == 1 && fa[0] == 1);
    VT_CHECK(vofi_av_get(v, 1, out) == PK && !memcmp(out, pa, PK));
    fa[0] = vofi_av_find(v, pb, PK); /* a table has two copies: either */
    VT_CHECK(fa[0] == 0 || (type == FI_AV_TABLE && fa[0] == 4));

    /* close: refused while an endpoint is bound */
    VT_CHECK(fi_av_bind(av, &dom.fid.fid, 0) == -FI_ENOSYS);
    atomic_fetch_add(&v->ref, 1);
    VT_CHECK(fi_close(&av->fid) == -FI_EBUSY);
    atomic_fetch_sub(&v->ref, 1);
    VT_CHECK(fi_close(&av->fid) == 0);
    VT_CHECK(atomic_load(&dom.ref) == 0);
}

/* Many names: growth of the table and of the hash, found again. */
static void test_many(enum fi_av_type type, const uint8_t *pa)
{
    enum { N = 3000 };
    struct fid_av *av = av_open(type, 10);
    vofi_av_t *v = (vofi_av_t *)av;
    static uint8_t names[N][PK];
    fi_addr_t fa;
    for (uint32_t i = 0; i < N; i++) {
        name_with_pid(pa, 100 + i, names[i]);
        VT_CHECK(fi_av_insert(av, names[i], 1, &fa, 0, NULL) == 1 && fa == i);
    }
    for (uint32_t i = 0; i < N; i++)
        VT_CHECK(vofi_av_find(v, names[i], PK) == i);
    fi_addr_t odd[N / 2];
    for (uint32_t i = 0; i < N / 2; i++)
        odd[i] = 2 * i + 1;
    VT_CHECK(fi_av_remove(av, odd, N / 2, 0) == 0);
    for (uint32_t i = 0; i < N; i++)
        VT_CHECK(vofi_av_find(v, names[i], PK) == (i % 2 ? FI_ADDR_NOTAVAIL : i));
    for (uint32_t i = 1; i < N; i += 2) /* back into the holes, lowest first */
        VT_CHECK(fi_av_insert(av, names[i], 1, &fa, 0, NULL) == 1 && fa == i);
    VT_CHECK(fi_close(&av->fid) == 0);
}

/* Inserts from two threads while a third looks names up. */
struct thr {
    struct fid_av *av;
    const uint8_t *base;
    uint32_t first;
    fi_addr_t fa[500];
    _Atomic int *stop;
};

static void *inserter(void *arg)
{
    struct thr *t = arg;
    uint8_t n[PK];
    for (uint32_t i = 0; i < 500; i++) {
        name_with_pid(t->base, t->first + i, n);
        if (fi_av_insert(t->av, n, 1, &t->fa[i], 0, NULL) != 1)
            t->fa[i] = FI_ADDR_NOTAVAIL;
    }
    return NULL;
}

static void *finder(void *arg)
{
    struct thr *t = arg;
    uint8_t n[PK], out[VOFI_MAX_EP_ADDR];
    long bad = 0;
    while (!atomic_load(t->stop))
        for (uint32_t i = 0; i < 500; i += 7) {
            name_with_pid(t->base, t->first + i, n);
            fi_addr_t a = vofi_av_find((vofi_av_t *)t->av, n, PK);
            if (a != FI_ADDR_NOTAVAIL &&
                (vofi_av_get((vofi_av_t *)t->av, a, out) != PK || memcmp(out, n, PK)))
                bad++;
        }
    return (void *)bad;
}

static void test_threads(const uint8_t *pa)
{
    struct fid_av *av = av_open(FI_AV_MAP, 0);
    _Atomic int stop = 0;
    static struct thr t[3];
    for (int i = 0; i < 3; i++)
        t[i] = (struct thr){.av = av, .base = pa, .first = 20000 + 1000 * (uint32_t)(i % 2),
                            .stop = &stop};
    pthread_t th[3];
    pthread_create(&th[2], NULL, finder, &t[2]);
    pthread_create(&th[0], NULL, inserter, &t[0]);
    pthread_create(&th[1], NULL, inserter, &t[1]);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    atomic_store(&stop, 1);
    void *bad;
    pthread_join(th[2], &bad);
    VT_CHECK(bad == NULL);
    uint8_t n[PK];
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; i < 500; i++) {
            name_with_pid(pa, t[k].first + i, n);
            VT_CHECK(t[k].fa[i] != FI_ADDR_NOTAVAIL &&
                     vofi_av_find((vofi_av_t *)av, n, PK) == t[k].fa[i]);
        }
    VT_CHECK(fi_close(&av->fid) == 0);
}

void test_av(const uint8_t *pa, const uint8_t *pb, const char *own)
{
    dom.fid.fid.fclass = FI_CLASS_DOMAIN;
    dom.fid.ops = &dom_ops;
    atomic_init(&dom.ref, 0);
    test_open();
    test_insert(FI_AV_MAP, pa, pb);
    test_insert(FI_AV_TABLE, pa, pb);
    test_many(FI_AV_MAP, pa);
    test_many(FI_AV_TABLE, pa);
    test_threads(pa);
    /* A name from the AV unpacks to the endpoint's own address. */
    struct fid_av *av = av_open(FI_AV_UNSPEC, 0);
    fi_addr_t fa;
    VT_CHECK(fi_av_insert(av, pa, 1, &fa, 0, NULL) == 1);
    uint8_t out[VOFI_MAX_EP_ADDR];
    char text[VMMC_ADDR_MAX];
    size_t tl = sizeof text - 1;
    int n = vofi_av_get((vofi_av_t *)av, fa, out);
    VT_CHECK(n == PK && vofi_addr_unpack(out, (size_t)n, own, strlen(own), text, &tl) == 0);
    VT_CHECK(tl == strlen(own) && !memcmp(text, own, tl));
    VT_CHECK(fi_close(&av->fid) == 0);
    VT_CHECK(atomic_load(&dom.ref) == 0);
}
