/* Remote atomics (vmmc_atomic).
 *
 * Three ways, decided by what the importer holds:
 *  - a mapped region (shm, whole vmmc_mem_alloc allocation): the processor's
 *    own atomic instruction on the mapping; no software runs at the target;
 *  - a transport with an atomic op (udp): the transport carries the request
 *    to the target, whose progress thread executes it (vmmc_deliver_atomic)
 *    and answers;
 *  - otherwise (shm, region written with process_vm_writev): a control
 *    message (CTL_ATOMIC_REQ) that the target's control thread executes
 *    with the same instructions, so atomics of all three kinds on one word
 *    are atomic together.
 * At the target every request is checked like any incoming write: the
 * operation and the word's type (atomic_word.c: the size byte carries both
 * width and type, so the transports' requests carry them unchanged), the
 * export by id and generation, the capability token, the importer list, the
 * bounds, the alignment of the real address, and VMMC_EXPORT_READ when the
 * old value is asked for. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/atomic_word.h"
#include "core/ctl.h"
#include "core/deliver.h"
#include "core/export.h"

#define ATOMIC_FETCH_FLAG 0x100u

int vmmc_atomic_check(const vmmc_proxy_t *px, size_t off, int op, int size, int fetch)
{
    if (!px)
        return vmmc_error(VMMC_ERR_INVALID, "atomic: NULL proxy");
    if (atomic_load_explicit(&px->state, memory_order_acquire) != PX_ACTIVE)
        return vmmc_proxy_state_error(px);
    int rc = vmmc_atomic_valid(op, size);
    if (rc != VMMC_OK)
        return rc;
    int w = vmmc_atomic_width(size);
    if (off & (size_t)(w - 1)) /* w is 4 or 8 */
        return vmmc_error(VMMC_ERR_INVALID,
                          "atomic %s of %d bytes at offset %zu of '%s': not a multiple of %d",
                          vmmc_atomic_op_name(op), w, off, px->name, w);
    if (off > px->len || (size_t)w > px->len - off)
        return vmmc_error(VMMC_ERR_BOUNDS,
                          "atomic %s of %d bytes at offset %zu is outside '%s' at rank %d "
                          "(%zu bytes); nothing was written",
                          vmmc_atomic_op_name(op), w, off, px->name, px->rank, px->len);
    if ((fetch || op == VMMC_ATOMIC_READ) && !(px->flags & VMMC_EXPORT_READ))
        return vmmc_error(VMMC_ERR_PERMISSION,
                          "atomic %s fetching from rank %d's '%s', which does not allow reads "
                          "(VMMC_EXPORT_READ)",
                          vmmc_atomic_op_name(op), px->rank, px->name);
    if (px->flags & VMMC_EXPORT_REDIRECTABLE)
        return vmmc_error(VMMC_ERR_UNSUPPORTED,
                          "atomic on rank %d's '%s': a redirectable export has no fixed place "
                          "for a word",
                          px->rank, px->name);
    if (atomic_load_explicit(&px->peer->state, memory_order_acquire) == PEER_DEAD)
        return vmmc_peer_error(px->peer);
    return VMMC_OK;
}

/* ---- the control-message path (regions the importer cannot map) ---- */

typedef struct atomic_waiter {
    vmmc_ep_t *ep;
    int rank;
    uint64_t id;
    int done, status;
    uint64_t value;
    char text[128];
    struct atomic_waiter *next;
} atomic_waiter_t;

static pthread_mutex_t waiters_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t waiters_cond;
static pthread_once_t waiters_once = PTHREAD_ONCE_INIT;
static atomic_waiter_t *waiters;
static uint64_t next_id;

static void waiters_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&waiters_cond, &a);
    pthread_condattr_destroy(&a);
}

static int atomic_by_ctl(vmmc_proxy_t *px, size_t off, int op, int size, uint64_t operand,
                         uint64_t compare, uint64_t *old)
{
    vmmc_ep_t *ep = px->ep;
    vmmc_peer_t *p = px->peer;
    pthread_once(&waiters_once, waiters_init);
    atomic_waiter_t w = {.ep = ep, .rank = px->rank};
    vmmc_ctl_msg_t m;
    vmmc_ctl_init(ep, &m, CTL_ATOMIC_REQ);
    m.export_id = px->export_id;
    m.gen = px->gen;
    m.token[0] = px->token[0];
    m.token[1] = px->token[1];
    m.map_off = off;
    m.kind = (uint32_t)op;
    m.flags = (uint32_t)size | (old ? ATOMIC_FETCH_FLAG : 0);
    m.addr = operand;
    m.length = compare;
    pthread_mutex_lock(&waiters_lock);
    w.id = m.id = ++next_id;
    w.next = waiters;
    waiters = &w;
    pthread_mutex_unlock(&waiters_lock);

    int rc = p->tl->ctl_send(ep, &p->view, &m, NULL, 0);

    pthread_mutex_lock(&waiters_lock);
    while (rc == VMMC_OK && !w.done) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&waiters_cond, &waiters_lock, &ts);
        if (!w.done && atomic_load_explicit(&p->state, memory_order_acquire) == PEER_DEAD)
            rc = VMMC_ERR_PEER_DEAD;
    }
    for (atomic_waiter_t **pp = &waiters; *pp; pp = &(*pp)->next)
        if (*pp == &w) {
            *pp = w.next;
            break;
        }
    pthread_mutex_unlock(&waiters_lock);
    if (rc == VMMC_ERR_PEER_DEAD)
        return vmmc_peer_error(p);
    if (rc != VMMC_OK)
        return rc;
    if (w.status != VMMC_OK)
        return vmmc_error(w.status, "atomic %s at offset %zu of '%s' refused by rank %d: %s",
                          vmmc_atomic_op_name(op), off, px->name, px->rank,
                          w.text[0] ? w.text : vmmc_strerror(w.status));
    if (old)
        *old = w.value;
    return VMMC_OK;
}

void vmmc_atomic_replied(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m)
{
    pthread_once(&waiters_once, waiters_init);
    pthread_mutex_lock(&waiters_lock);
    for (atomic_waiter_t *w = waiters; w; w = w->next) {
        if (w->ep == ep && w->rank == rank && w->id == m->id && !w->done) {
            w->status = m->status > 0 ? VMMC_ERR_PROTOCOL : m->status;
            w->value = m->addr;
            snprintf(w->text, sizeof w->text, "%s", m->text);
            w->done = 1;
            pthread_cond_broadcast(&waiters_cond);
            break;
        }
    }
    pthread_mutex_unlock(&waiters_lock);
}

void vmmc_atomic_serve(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m)
{
    int st;
    vmmc_peer_t *p = vmmc_peer_get(ep, rank, &st);
    if (!p || !p->tl)
        return;
    vmmc_ctl_msg_t r;
    vmmc_ctl_init(ep, &r, CTL_ATOMIC_REP);
    r.id = m->id;
    uint64_t old = 0;
    r.status = vmmc_deliver_atomic(ep, rank, m->export_id, m->gen, m->token, m->map_off,
                                   (int)m->kind, (int)(m->flags & 0xff),
                                   !!(m->flags & ATOMIC_FETCH_FLAG), m->addr, m->length, &old);
    r.addr = old;
    if (r.status != VMMC_OK)
        snprintf(r.text, sizeof r.text, "%s", vmmc_last_error());
    if (p->tl->ctl_send(ep, &p->view, &r, NULL, 0) != VMMC_OK)
        vmmc_debug("could not answer rank %d's atomic: %s", rank, vmmc_last_error());
}

/* ---- the target's side, for every transport ---- */

static int importer_ok(const vmmc_export_t *ex, int rank)
{
    if (ex->num_importers == 0)
        return 1;
    for (int i = 0; i < ex->num_importers; i++)
        if (ex->importers[i] == rank)
            return 1;
    return 0;
}

int vmmc_deliver_atomic(vmmc_ep_t *ep, int sender, uint32_t export_id, uint32_t gen,
                        const uint64_t token[2], uint64_t off, int op, int size, int fetch,
                        uint64_t operand, uint64_t compare, uint64_t *old)
{
    int rc = VMMC_OK;
    *old = 0;
    /* What the wire said the operation and type are: never trusted. */
    if (vmmc_atomic_valid(op, size) != VMMC_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", vmmc_last_error());
        VMMC_COUNT(ep, CNT_ATOMICS_REFUSED, 1);
        return vmmc_error(VMMC_ERR_INVALID, "atomic request from rank %d refused: %s", sender,
                          why);
    }
    int w = vmmc_atomic_width(size);
    pthread_mutex_lock(&ep->lock);
    vmmc_export_t *ex = vmmc_export_by_id(ep, export_id, gen);
    uint64_t want[2] = {0, 0};
    if (ex && ex->mkey)
        vmmc_mkey_grant_secret(ex, sender, want);
    else if (ex)
        memcpy(want, ex->token, sizeof want);
    if (!ex)
        rc = vmmc_error(VMMC_ERR_STALE, "atomic request for export %u.%u, which is gone",
                        export_id, gen);
    else if (token[0] != want[0] || token[1] != want[1] || !importer_ok(ex, sender))
        rc = vmmc_error(VMMC_ERR_PERMISSION, "rank %d may not use '%s' at rank %d", sender,
                        ex->name, ep->rank);
    else if (off > ex->len || (uint64_t)w > ex->len - off)
        rc = vmmc_error(VMMC_ERR_BOUNDS, "atomic of %d bytes at offset %llu is outside '%s' "
                        "(%zu bytes)", w, (unsigned long long)off, ex->name, ex->len);
    else if ((uintptr_t)(ex->addr + off) & (uintptr_t)(w - 1))
        rc = vmmc_error(VMMC_ERR_INVALID, "atomic of %d bytes at offset %llu of '%s': the word "
                        "is not aligned in memory (the export starts at %p)", w,
                        (unsigned long long)off, ex->name, (void *)ex->addr);
    else if ((fetch || op == VMMC_ATOMIC_READ) && !(ex->flags & VMMC_EXPORT_READ))
        rc = vmmc_error(VMMC_ERR_PERMISSION, "'%s' does not allow reads (VMMC_EXPORT_READ)",
                        ex->name);
    else if (ex->rctl)
        rc = vmmc_error(VMMC_ERR_UNSUPPORTED, "atomic on redirectable export '%s'", ex->name);
    else {
        uint64_t v = vmmc_atomic_apply(ex->addr + off, op, size, operand, compare);
        if (fetch || op == VMMC_ATOMIC_READ)
            *old = v;
    }
    pthread_mutex_unlock(&ep->lock);
    VMMC_COUNT(ep, rc == VMMC_OK ? CNT_ATOMICS_SERVED : CNT_ATOMICS_REFUSED, 1);
    return rc;
}

/* ---- the initiator ---- */

int vmmc_atomic_now(vmmc_proxy_t *px, size_t off, int op, int size, uint64_t operand,
                    uint64_t compare, uint64_t *old)
{
    /* Ordered after asynchronous sends still in the copy engine. */
    if (atomic_load_explicit(&px->peer->async_inflight, memory_order_acquire)) {
        int rc = vmmc_send_wait_async(px->peer);
        if (rc != VMMC_OK)
            return rc;
    }
    return vmmc_atomic_exec(px, off, op, size, operand, compare, old);
}

int vmmc_atomic_exec(vmmc_proxy_t *px, size_t off, int op, int size, uint64_t operand,
                     uint64_t compare, uint64_t *old)
{
    char *base = px->base ? px->base
                 : px->map_base ? (char *)px->map_base + (px->raddr & 4095)
                                : NULL;
    if (base) {
        int w = vmmc_atomic_width(size);
        if ((uintptr_t)(base + off) & (uintptr_t)(w - 1))
            return vmmc_error(VMMC_ERR_INVALID,
                              "atomic %s of %d bytes at offset %zu of '%s': the word is not "
                              "aligned in memory",
                              vmmc_atomic_op_name(op), w, off, px->name);
        uint64_t v = vmmc_atomic_apply(base + off, op, size, operand, compare);
        if (old)
            *old = v;
        return VMMC_OK;
    }
    const vmmc_tl_ops_t *tl = px->peer->tl;
    if (tl && tl->atomic) {
        int rc = tl->atomic(&px->view, off, op, size, operand, compare, old != NULL, old);
        if (rc != VMMC_TL_DECLINED)
            return rc;
    }
    return atomic_by_ctl(px, off, op, size, operand, compare, old);
}

int vmmc_atomic(vmmc_proxy_t *px, size_t off, vmmc_atomic_op_t op, int size, uint64_t operand,
                uint64_t compare, uint64_t *result)
{
    int rc = vmmc_atomic_check(px, off, (int)op, size, result != NULL);
    if (rc != VMMC_OK)
        return rc;
    uint64_t v = 0;
    rc = vmmc_atomic_now(px, off, (int)op, size, operand, compare,
                         result || op == VMMC_ATOMIC_READ ? &v : NULL);
    if (rc == VMMC_OK && result)
        *result = v;
    return rc;
}
