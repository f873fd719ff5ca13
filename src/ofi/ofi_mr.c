/* Memory regions: registration, keys, the domain's key table.
 *
 * Registering exports nothing: an endpoint exports a region to a peer the
 * first time that peer asks for it by key (ofi_rma.c, vmmc_export_on_demand),
 * so a region never used remotely costs a table slot only.
 *
 * Keys. With FI_MR_PROV_KEY the provider picks the key:
 * [slot 24 bits | generation 24 bits | 16 random bits], so a key of a closed
 * region (its slot reused under a new generation) or a forged one names
 * nothing: a lookup takes the slot from the key and compares the whole key.
 * Without it the application's requested_key is the key; it must be unique in
 * the domain (-FI_ENOKEY otherwise), and a lookup scans the table.
 *
 * Locking: dom->mr_lock guards dom->mrs, each region's exports list and its
 * closed flag. A region's memory stays valid while a reference is held
 * (vofi_mr_get()/vofi_mr_put()); fi_close() drops the registration's own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "ofi/ofi.h"

#define MR_SLOT_BITS 24
#define MR_GEN_BITS 24
#define MR_RAND_BITS 16
#define MR_SLOT_MAX ((uint32_t)1 << MR_SLOT_BITS)

static int prov_keys(const vofi_domain_t *dom)
{
    return (dom->mr_mode & (FI_MR_PROV_KEY | FI_MR_BASIC)) != 0;
}

static uint64_t mr_random16(void)
{
    uint16_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        /* No entropy yet (early boot): the address of a stack word and the
         * clock are still not a constant. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = (uint16_t)(((uintptr_t)&r >> 4) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_nsec >> 16));
    }
    return r;
}

vofi_mr_t *vofi_mr_find_locked(vofi_domain_t *dom, uint64_t key)
{
    if (prov_keys(dom)) {
        uint64_t slot = key >> (MR_GEN_BITS + MR_RAND_BITS);
        if (slot >= dom->mr_cap)
            return NULL;
        vofi_mr_t *m = dom->mrs[slot];
        return m && !m->closed && m->mr.key == key ? m : NULL;
    }
    for (size_t i = 0; i < dom->mr_cap; i++) {
        vofi_mr_t *m = dom->mrs[i];
        if (m && !m->closed && m->mr.key == key)
            return m;
    }
    return NULL;
}

vofi_mr_t *vofi_mr_get(vofi_domain_t *dom, uint64_t key)
{
    pthread_mutex_lock(&dom->mr_lock);
    vofi_mr_t *m = vofi_mr_find_locked(dom, key);
    if (m)
        atomic_fetch_add(&m->ref, 1);
    pthread_mutex_unlock(&dom->mr_lock);
    return m;
}

void vofi_mr_put(vofi_mr_t *mr)
{
    if (!mr || atomic_fetch_sub(&mr->ref, 1) != 1)
        return;
    if (mr->rcntr)
        atomic_fetch_sub(&mr->rcntr->ref, 1);
    atomic_fetch_sub(&mr->dom->ref, 1);
    free(mr);
}

/* A free slot (growing the table), under mr_lock: its index or -FI_ENOMEM. */
static int64_t mr_slot(vofi_domain_t *dom)
{
    for (size_t i = 0; i < dom->mr_cap; i++)
        if (!dom->mrs[i])
            return (int64_t)i;
    if (dom->mr_cap >= MR_SLOT_MAX)
        return -FI_ENOMEM;
    size_t cap = dom->mr_cap ? dom->mr_cap * 2 : 64;
    if (cap > MR_SLOT_MAX)
        cap = MR_SLOT_MAX;
    vofi_mr_t **t = realloc(dom->mrs, cap * sizeof *t);
    if (!t)
        return -FI_ENOMEM;
    memset(t + dom->mr_cap, 0, (cap - dom->mr_cap) * sizeof *t);
    int64_t slot = (int64_t)dom->mr_cap;
    dom->mrs = t;
    dom->mr_cap = cap;
    return slot;
}

static int mr_close(struct fid *fid)
{
    vofi_mr_t *m = container_of(fid, vofi_mr_t, mr.fid);
    vofi_domain_t *dom = m->dom;
    pthread_mutex_lock(&dom->mr_lock);
    if (m->closed) {
        pthread_mutex_unlock(&dom->mr_lock);
        return -FI_EINVAL;
    }
    m->closed = 1;
    if (m->slot < dom->mr_cap && dom->mrs[m->slot] == m)
        dom->mrs[m->slot] = NULL;
    struct vofi_mr_exp *exps = m->exps;
    m->exps = NULL;
    pthread_mutex_unlock(&dom->mr_lock);
    /* After this no peer reaches the memory: each endpoint's export of it
     * is withdrawn (vmmc_unexport waits for importers on this host). */
    vofi_rma_mr_unexport(exps);
    vofi_mr_put(m);
    return 0;
}

static int mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    vofi_mr_t *m = container_of(fid, vofi_mr_t, mr.fid);
    if (!bfid)
        return -FI_EINVAL;
    if (bfid->fclass == FI_CLASS_CNTR) {
        if (flags & ~(uint64_t)FI_REMOTE_WRITE) {
            vofi_warn("fi_mr_bind: a region's counter counts FI_REMOTE_WRITE only (flags 0x%llx)",
                      (unsigned long long)flags);
            return -FI_EINVAL;
        }
        vofi_cntr_t *c = container_of(bfid, vofi_cntr_t, fid.fid);
        if (c->dom != m->dom) {
            vofi_warn("fi_mr_bind: the counter belongs to another domain");
            return -FI_EINVAL;
        }
        pthread_mutex_lock(&m->dom->mr_lock);
        if (m->rcntr) {
            pthread_mutex_unlock(&m->dom->mr_lock);
            vofi_warn("fi_mr_bind: the region has a counter already");
            return -FI_EBUSY;
        }
        atomic_fetch_add(&c->ref, 1);
        m->rcntr = c;
        pthread_mutex_unlock(&m->dom->mr_lock);
        return 0;
    }
    if (bfid->fclass == FI_CLASS_EP) {
        /* FI_MR_ENDPOINT is never asked of applications: a region belongs
         * to the domain and every endpoint of it may be reached through it. */
        vofi_warn("fi_mr_bind: regions are not bound to endpoints (no FI_MR_ENDPOINT)");
        return -FI_EINVAL;
    }
    vofi_warn("fi_mr_bind: cannot bind a region to an object of class %zu", bfid->fclass);
    return -FI_EINVAL;
}

static int mr_control(struct fid *fid, int command, void *arg)
{
    (void)fid;
    (void)arg;
    if (command == FI_ENABLE)
        return 0; /* usable from registration on */
    return -FI_ENOSYS;
}

static struct fi_ops vofi_mr_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = mr_close,
    .bind = mr_bind,
    .control = mr_control,
    .ops_open = vofi_no_ops_open,
};

static int mr_register(vofi_domain_t *dom, const void *buf, size_t len, uint64_t access,
                       uint64_t offset, uint64_t requested_key, void *context,
                       struct fid_mr **out)
{
    if (!out)
        return -FI_EINVAL;
    if (!buf && len) {
        vofi_warn("fi_mr_reg: NULL buffer of %zu bytes", len);
        return -FI_EINVAL;
    }
    const uint64_t known = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
                           FI_REMOTE_WRITE;
    if (access & ~known) {
        vofi_warn("fi_mr_reg: unknown access bits 0x%llx",
                  (unsigned long long)(access & ~known));
        return -FI_EINVAL;
    }
    if ((uintptr_t)buf + len < (uintptr_t)buf) {
        vofi_warn("fi_mr_reg: %zu bytes at %p wrap around the address space", len, buf);
        return -FI_EINVAL;
    }
    vofi_mr_t *m = calloc(1, sizeof *m);
    if (!m)
        return -FI_ENOMEM;
    m->mr.fid.fclass = FI_CLASS_MR;
    m->mr.fid.context = context;
    m->mr.fid.ops = &vofi_mr_fi_ops;
    m->mr.mem_desc = m;
    m->dom = dom;
    m->addr = (void *)buf;
    m->len = len;
    m->access = access;
    m->offset = offset;
    atomic_init(&m->ref, 1);

    pthread_mutex_lock(&dom->mr_lock);
    int64_t slot = mr_slot(dom);
    if (slot < 0) {
        pthread_mutex_unlock(&dom->mr_lock);
        free(m);
        vofi_warn("fi_mr_reg: no free region slot (%u in use at most)", MR_SLOT_MAX);
        return (int)slot;
    }
    if (prov_keys(dom)) {
        uint64_t gen = ++dom->mr_gen & (((uint64_t)1 << MR_GEN_BITS) - 1);
        m->mr.key = ((uint64_t)slot << (MR_GEN_BITS + MR_RAND_BITS)) | (gen << MR_RAND_BITS) |
                    mr_random16();
    } else {
        if (vofi_mr_find_locked(dom, requested_key)) {
            pthread_mutex_unlock(&dom->mr_lock);
            free(m);
            vofi_warn("fi_mr_reg: key 0x%llx is in use in this domain",
                      (unsigned long long)requested_key);
            return -FI_ENOKEY;
        }
        m->mr.key = requested_key;
    }
    m->slot = (uint32_t)slot;
    dom->mrs[slot] = m;
    atomic_fetch_add(&dom->ref, 1);
    pthread_mutex_unlock(&dom->mr_lock);
    *out = &m->mr;
    return 0;
}

static vofi_domain_t *mr_domain(struct fid *fid)
{
    if (!fid || fid->fclass != FI_CLASS_DOMAIN) {
        vofi_warn("fi_mr_reg: regions are registered with a domain");
        return NULL;
    }
    return container_of(fid, vofi_domain_t, fid.fid);
}

int vofi_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
                uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context)
{
    vofi_domain_t *dom = mr_domain(fid);
    if (!dom)
        return -FI_EINVAL;
    if (flags) {
        vofi_warn("fi_mr_reg: flags 0x%llx are not supported", (unsigned long long)flags);
        return -FI_EBADFLAGS;
    }
    return mr_register(dom, buf, len, access, offset, requested_key, context, mr);
}

int vofi_mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
                 uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
                 void *context)
{
    if (count > 1) {
        vofi_warn("fi_mr_regv: %zu pieces; one contiguous region at a time (mr_iov_limit 1)",
                  count);
        return -FI_EINVAL;
    }
    if (count == 1 && !iov)
        return -FI_EINVAL;
    return vofi_mr_reg(fid, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0, access,
                       offset, requested_key, flags, mr, context);
}

int vofi_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
                    struct fid_mr **mr)
{
    if (!attr)
        return -FI_EINVAL;
    if (attr->iface != FI_HMEM_SYSTEM) {
        vofi_warn("fi_mr_regattr: only host memory can be registered (iface %d)",
                  (int)attr->iface);
        return -FI_ENOSYS;
    }
    if (attr->auth_key_size) {
        vofi_warn("fi_mr_regattr: authorization keys are not supported");
        return -FI_EINVAL;
    }
    return vofi_mr_regv(fid, attr->mr_iov, attr->iov_count, attr->access, attr->offset,
                        attr->requested_key, flags, mr, attr->context);
}
