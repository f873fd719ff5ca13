/* Transfer redirection (VMMC-2).
 *
 * A redirectable export has a control block in a small shared memfd that
 * every importer on this host maps. It holds a robust process-shared mutex,
 * the posted user buffers (slots), and the log of bytes that arrived in the
 * default buffer and were not consumed yet (merged intervals). A sender takes
 * the mutex for each write and splits it: bytes that fall into a posted slot
 * go straight to the user buffer (process_vm_writev into the receiver), the
 * rest go to the default buffer and into the log. Posting takes the same
 * mutex, copies the logged bytes of its range out of the default buffer, and
 * installs the slot. So each byte is delivered exactly once, whichever side
 * wins the race, including a write that straddles the posting. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"
#include "core/deliver.h"
#include "core/export.h"

#define REDIR_MAGIC 0x72656469u
#define REDIR_SLOTS 8
#define REDIR_LOG 480
#define REDIR_SIZE 8192

typedef struct redir_slot {
    uint64_t off, len, addr;
    _Atomic uint64_t delivered;
    uint32_t active;
    uint32_t seq;
} redir_slot_t;

struct vmmc_redir_ctl {
    uint32_t magic;
    int32_t receiver_pid;
    pthread_mutex_t lock;
    redir_slot_t slot[REDIR_SLOTS];
    uint32_t nlog;
    uint32_t pad;
    struct { uint64_t start, end; } log[REDIR_LOG];
};
_Static_assert(sizeof(struct vmmc_redir_ctl) <= REDIR_SIZE, "redirect control block too large");

size_t vmmc_redir_ctl_size(void)
{
    return REDIR_SIZE;
}

static int lock(struct vmmc_redir_ctl *rc)
{
    int e = pthread_mutex_lock(&rc->lock);
    if (e == EOWNERDEAD) {
        /* A sender died holding the lock mid-write: the log and counters are
         * still consistent (updated after each copy), so carry on. */
        pthread_mutex_consistent(&rc->lock);
        return 0;
    }
    return e;
}

int vmmc_redir_create(vmmc_export_t *ex)
{
    /* Sealed against resizing: importers map it, and one that truncated it
     * would make every other importer (and this process) fault. */
    ex->rctl_fd = memfd_create("vmmc-redirect", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (ex->rctl_fd < 0)
        return vmmc_error_sys("memfd_create for redirect control of '%s'", ex->name);
    if (ftruncate(ex->rctl_fd, REDIR_SIZE) != 0 ||
        fcntl(ex->rctl_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int rc = vmmc_error_sys("sizing and sealing the redirect control block");
        close(ex->rctl_fd);
        ex->rctl_fd = -1;
        return rc;
    }
    struct vmmc_redir_ctl *c = mmap(NULL, REDIR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, ex->rctl_fd, 0);
    if (c == MAP_FAILED) {
        int rc = vmmc_error_sys("mmap redirect control block");
        close(ex->rctl_fd);
        ex->rctl_fd = -1;
        return rc;
    }
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&c->lock, &a);
    pthread_mutexattr_destroy(&a);
    c->magic = REDIR_MAGIC;
    c->receiver_pid = (int32_t)getpid();
    ex->rctl = c;
    return VMMC_OK;
}

void vmmc_redir_destroy(vmmc_export_t *ex)
{
    if (ex->rctl)
        munmap(ex->rctl, REDIR_SIZE);
    if (ex->rctl_fd >= 0)
        close(ex->rctl_fd);
    ex->rctl = NULL;
    ex->rctl_fd = -1;
}

/* Add [s, e) to the arrival log, merging; returns -1 if the log is full. */
static int log_add(struct vmmc_redir_ctl *c, uint64_t s, uint64_t e)
{
    uint32_t i = 0;
    while (i < c->nlog && c->log[i].end < s)
        i++;
    /* i: first interval that ends at or after s */
    if (i < c->nlog && c->log[i].start <= e) {
        if (s < c->log[i].start)
            c->log[i].start = s;
        if (e > c->log[i].end)
            c->log[i].end = e;
        /* absorb following intervals now overlapping */
        uint32_t j = i + 1;
        while (j < c->nlog && c->log[j].start <= c->log[i].end) {
            if (c->log[j].end > c->log[i].end)
                c->log[i].end = c->log[j].end;
            j++;
        }
        if (j > i + 1) {
            memmove(&c->log[i + 1], &c->log[j], sizeof c->log[0] * (c->nlog - j));
            c->nlog -= j - i - 1;
        }
        return 0;
    }
    if (c->nlog == REDIR_LOG)
        return -1;
    memmove(&c->log[i + 1], &c->log[i], sizeof c->log[0] * (c->nlog - i));
    c->log[i].start = s;
    c->log[i].end = e;
    c->nlog++;
    return 0;
}

static const redir_slot_t *slot_at(const struct vmmc_redir_ctl *c, uint64_t p, uint64_t *next_start)
{
    *next_start = UINT64_MAX;
    for (int k = 0; k < REDIR_SLOTS; k++) {
        const redir_slot_t *sl = &c->slot[k];
        if (!sl->active)
            continue;
        if (p >= sl->off && p < sl->off + sl->len)
            return sl;
        if (sl->off > p && sl->off < *next_start)
            *next_start = sl->off;
    }
    return NULL;
}

int vmmc_redir_write(struct vmmc_redir_ctl *c, size_t off, const void *src, size_t len,
                     vmmc_redir_copy_fn copy, void *ctx)
{
    if (c->magic != REDIR_MAGIC)
        return vmmc_error(VMMC_ERR_PROTOCOL, "redirect control block is corrupt");
    if (lock(c) != 0)
        return vmmc_error(VMMC_ERR_SYSTEM, "cannot lock redirect control block");
    if (c->nlog > REDIR_LOG) {
        pthread_mutex_unlock(&c->lock);
        return vmmc_error(VMMC_ERR_PROTOCOL, "redirect control block is corrupt (%u log entries)",
                          c->nlog);
    }
    /* Check log space first, so a refused write writes nothing. */
    uint64_t end = (uint64_t)off + len, p = off, next;
    uint32_t pieces = 0;
    while (p < end) {
        const redir_slot_t *sl = slot_at(c, p, &next);
        if (sl) {
            p = sl->off + sl->len < end ? sl->off + sl->len : end;
        } else {
            pieces++;
            p = next < end ? next : end;
        }
    }
    if (c->nlog + pieces > REDIR_LOG) {
        pthread_mutex_unlock(&c->lock);
        return vmmc_error(VMMC_ERR_AGAIN,
                          "redirectable export has %u unconsumed arrival ranges: the receiver must "
                          "post redirects (vmmc_redirect) before more scattered writes land",
                          c->nlog);
    }
    int direct = 0, rc = VMMC_OK;
    p = off;
    while (p < end && rc == VMMC_OK) {
        redir_slot_t *sl = (redir_slot_t *)slot_at(c, p, &next);
        const char *from = (const char *)src + (p - off);
        if (sl) {
            uint64_t e = sl->off + sl->len < end ? sl->off + sl->len : end;
            rc = copy(ctx, 1, sl->addr + (p - sl->off), from, (size_t)(e - p));
            if (rc == VMMC_OK) {
                atomic_fetch_add_explicit(&sl->delivered, e - p, memory_order_release);
                direct += (int)((e - p) > 0);
            }
            p = e;
        } else {
            uint64_t e = next < end ? next : end;
            rc = copy(ctx, 0, p, from, (size_t)(e - p));
            if (rc == VMMC_OK)
                log_add(c, p, e);
            p = e;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return rc != VMMC_OK ? rc : direct;
}

int vmmc_redirect(vmmc_export_t *ex, size_t off, void *buf, size_t len, vmmc_request_t *req)
{
    VMMC_FORK_CHECK(ex ? ex->ep : NULL);
    if (!ex || !buf || !req)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_redirect: NULL %s",
                          !ex ? "export" : !buf ? "buffer" : "request");
    vmmc_req_int_t *r = (vmmc_req_int_t *)req;
    r->type = REQ_NONE;
    if (ex->dead)
        return vmmc_error(VMMC_ERR_STALE, "export '%s' was unexported", ex->name);
    if (!(ex->flags & VMMC_EXPORT_REDIRECTABLE) || !ex->rctl)
        return vmmc_error(VMMC_ERR_INVALID, "export '%s' is not redirectable", ex->name);
    if (len == 0 || off > ex->len || len > ex->len - off)
        return vmmc_error(VMMC_ERR_BOUNDS, "redirect of %zu bytes at offset %zu is outside '%s' (%zu bytes)",
                          len, off, ex->name, ex->len);
    struct vmmc_redir_ctl *c = ex->rctl;
    if (lock(c) != 0)
        return vmmc_error(VMMC_ERR_SYSTEM, "cannot lock redirect control block");
    /* Importers share this block: never index past it on their word. */
    if (c->nlog > REDIR_LOG) {
        pthread_mutex_unlock(&c->lock);
        return vmmc_error(VMMC_ERR_PROTOCOL, "redirect control block of '%s' was corrupted by an "
                          "importer (%u log entries)", ex->name, c->nlog);
    }
    int free_slot = -1;
    for (int k = 0; k < REDIR_SLOTS; k++) {
        redir_slot_t *sl = &c->slot[k];
        if (!sl->active) {
            if (free_slot < 0)
                free_slot = k;
            continue;
        }
        if (off < sl->off + sl->len && sl->off < off + len) {
            pthread_mutex_unlock(&c->lock);
            return vmmc_error(VMMC_ERR_BUSY, "redirect [%zu, %zu) overlaps a posted one", off, off + len);
        }
    }
    if (free_slot < 0) {
        pthread_mutex_unlock(&c->lock);
        return vmmc_error(VMMC_ERR_BUSY, "all %d redirect slots of '%s' are posted", REDIR_SLOTS,
                          ex->name);
    }
    /* Copy what already arrived in [off, off+len) and consume it from the log. */
    uint64_t s = off, e = (uint64_t)off + len, copied = 0;
    for (uint32_t i = 0; i < c->nlog;) {
        uint64_t a = c->log[i].start, b = c->log[i].end;
        if (b <= s || a >= e) {
            i++;
            continue;
        }
        uint64_t x = a > s ? a : s, y = b < e ? b : e;
        if (a < x && b > y && c->nlog == REDIR_LOG) {
            pthread_mutex_unlock(&c->lock);
            return vmmc_error(VMMC_ERR_BUSY, "arrival log of '%s' is full; post a larger range",
                              ex->name);
        }
        memcpy((char *)buf + (x - s), ex->addr + x, (size_t)(y - x));
        copied += y - x;
        if (a < x && b > y) { /* split */
            memmove(&c->log[i + 1], &c->log[i], sizeof c->log[0] * (c->nlog - i));
            c->nlog++;
            c->log[i].end = x;
            c->log[i + 1].start = y;
            i += 2;
        } else if (a < x) {
            c->log[i].end = x;
            i++;
        } else if (b > y) {
            c->log[i].start = y;
            i++;
        } else {
            memmove(&c->log[i], &c->log[i + 1], sizeof c->log[0] * (c->nlog - i - 1));
            c->nlog--;
        }
    }
    VMMC_COUNT(ex->ep, CNT_REDIRECT_COPIED, copied);
    redir_slot_t *sl = &c->slot[free_slot];
    sl->off = off;
    sl->len = len;
    sl->addr = (uintptr_t)buf;
    atomic_store(&sl->delivered, copied);
    sl->seq++;
    sl->active = copied < len;
    pthread_mutex_unlock(&c->lock);
    r->type = REQ_REDIRECT;
    r->px = (vmmc_proxy_t *)ex; /* a redirect request points at its export */
    r->slot = (uint32_t)free_slot;
    r->len = len;
    r->off = sl->seq;
    atomic_store(&r->status, copied == len ? VMMC_OK : VMMC_INPROGRESS);
    return copied == len ? VMMC_OK : VMMC_INPROGRESS;
}

static int vmmc_redirect_test_internal(vmmc_req_int_t *r)
{
    int st = atomic_load_explicit(&r->status, memory_order_acquire);
    if (st != VMMC_INPROGRESS)
        return st;
    vmmc_export_t *ex = (vmmc_export_t *)r->px;
    if (ex->dead) {
        atomic_store(&r->status, VMMC_ERR_STALE);
        return vmmc_error(VMMC_ERR_STALE, "export '%s' was unexported before the redirect completed",
                          ex->name);
    }
    redir_slot_t *sl = &ex->rctl->slot[r->slot];
    uint64_t d = atomic_load_explicit(&sl->delivered, memory_order_acquire);
    if (d < r->len)
        return VMMC_INPROGRESS;
    if (lock(ex->rctl) == 0) {
        if (sl->seq == (uint32_t)r->off)
            sl->active = 0;
        pthread_mutex_unlock(&ex->rctl->lock);
    }
    VMMC_COUNT(ex->ep, CNT_REDIRECT_DIRECT, d);
    atomic_store(&r->status, VMMC_OK);
    return VMMC_OK;
}

int vmmc_redirect_cancel(vmmc_request_t *req)
{
    vmmc_req_int_t *r = (vmmc_req_int_t *)req;
    if (!r || r->type != REQ_REDIRECT)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_redirect_cancel: not a redirect request");
    vmmc_export_t *ex = (vmmc_export_t *)r->px;
    VMMC_FORK_CHECK(ex->ep);
    if (ex->dead)
        return vmmc_error(VMMC_ERR_STALE, "export '%s' was unexported", ex->name);
    redir_slot_t *sl = &ex->rctl->slot[r->slot];
    if (lock(ex->rctl) != 0)
        return vmmc_error(VMMC_ERR_SYSTEM, "cannot lock redirect control block");
    uint64_t d = atomic_load(&sl->delivered);
    if (sl->seq == (uint32_t)r->off)
        sl->active = 0;
    pthread_mutex_unlock(&ex->rctl->lock);
    if (atomic_load(&r->status) == VMMC_INPROGRESS)
        atomic_store(&r->status, VMMC_ERR_STALE);
    return d > (uint64_t)INT32_MAX ? INT32_MAX : (int)d;
}

int vmmc_test(vmmc_request_t *req)
{
    vmmc_req_int_t *r = (vmmc_req_int_t *)req;
    if (VMMC_UNLIKELY(!r))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_test: NULL request");
    if (VMMC_LIKELY(r->type == REQ_SEND || r->type == REQ_FETCH)) {
        int st = atomic_load_explicit(&r->status, memory_order_acquire);
        if (st < 0 && st != VMMC_INPROGRESS)
            return vmmc_error(st, "asynchronous %s failed: %s",
                              r->type == REQ_SEND ? "send" : "fetch", vmmc_strerror(st));
        if (VMMC_UNLIKELY(st == VMMC_INPROGRESS))
            VMMC_FORK_CHECK(r->px->ep);
        return st;
    }
    if (r->type == REQ_REDIRECT) {
        VMMC_FORK_CHECK(((vmmc_export_t *)r->px)->ep);
        return vmmc_redirect_test_internal(r);
    }
    return vmmc_error(VMMC_ERR_INVALID, "vmmc_test: request was never started");
}

/* ---- receive-side delivery for transports without shared mappings ---- */

static int local_copy(void *ctx, int to_user, uint64_t addr, const void *src, size_t len)
{
    vmmc_export_t *ex = ctx;
    memcpy(to_user ? (char *)(uintptr_t)addr : ex->addr + addr, src, len);
    return VMMC_OK;
}

/* Resolve an incoming access: the export (id + generation), its capability
 * token and the bounds. Returns the export, or NULL with *rc set. Caller
 * holds ep->lock. */
static vmmc_export_t *deliver_lookup(vmmc_ep_t *ep, uint32_t export_id, uint32_t gen,
                                     const uint64_t token[2], uint64_t off, size_t len, int *rc)
{
    vmmc_export_t *ex = vmmc_export_by_id(ep, export_id, gen);
    if (!ex)
        *rc = VMMC_ERR_STALE;
    else if (token && (token[0] != ex->token[0] || token[1] != ex->token[1]))
        *rc = VMMC_ERR_PERMISSION;
    else if (off > ex->len || len > ex->len - off)
        *rc = VMMC_ERR_BOUNDS;
    else
        return ex;
    return NULL;
}

int vmmc_deliver_write(vmmc_ep_t *ep, uint32_t export_id, uint32_t gen, const uint64_t token[2],
                       uint64_t off, const void *src, size_t len, int head_last)
{
    int rc = VMMC_OK;
    pthread_mutex_lock(&ep->lock);
    vmmc_export_t *ex = deliver_lookup(ep, export_id, gen, token, off, len, &rc);
    if (ex && ex->rctl) {
        rc = vmmc_redir_write(ex->rctl, (size_t)off, src, len, local_copy, ex);
    } else if (ex && head_last && len >= 16 && (uintptr_t)(ex->addr + off) % 8 == 0) {
        vmmc_store_head_last(ex->addr + off, src, len);
    } else if (ex) {
        memcpy(ex->addr + off, src, len);
    }
    pthread_mutex_unlock(&ep->lock);
    if (rc > 0) {
        vmmc_ep_wake(ep);
        rc = VMMC_OK;
    }
    return rc;
}

int vmmc_deliver_read(vmmc_ep_t *ep, uint32_t export_id, uint32_t gen, const uint64_t token[2],
                      uint64_t off, void *dst, size_t len)
{
    int rc = VMMC_OK;
    pthread_mutex_lock(&ep->lock);
    vmmc_export_t *ex = deliver_lookup(ep, export_id, gen, token, off, len, &rc);
    if (ex && !(ex->flags & VMMC_EXPORT_READ))
        rc = VMMC_ERR_PERMISSION;
    else if (ex)
        memcpy(dst, ex->addr + off, len);
    pthread_mutex_unlock(&ep->lock);
    return rc;
}
