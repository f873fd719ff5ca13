/* Completion queues.
 *
 * A queue has @depth slots, allocated at vmmc_cq_open: an operation posted
 * to it takes a free slot (none free: VMMC_ERR_AGAIN, nothing posted), keeps
 * it while it runs and while its completion waits to be polled, and gives it
 * back when polled. So posting allocates nothing and a queue never
 * overflows. Operations that complete at once (into mapped memory, or small
 * enough: VMMC_ASYNC_INLINE) are completed before the post returns; the
 * others run in the endpoint's copy engine (dma.c), in order with the
 * endpoint's other asynchronous operations to that peer, and complete from
 * there. Notifications of an export given this queue take a slot too, in
 * the progress engine. When none is free they wait in the queue's own
 * backlog, in arrival order, and take the slots the application frees as
 * it polls, before any new operation can: only the exports of this queue
 * wait, never the endpoint's other notifications. The backlog grows as
 * needed (every record that waited is counted: notifications_waited) and is
 * empty whenever a slot is free.
 *
 * Waiting: completions are counted in `nready`; an eventfd is readable while
 * it is not zero (vmmc_cq_fd() puts it and the endpoint's event fd in one
 * epoll set), and vmmc_cq_wait() waits with the endpoint's one wait
 * machinery (spin, then sleep), which the copy engine wakes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/atomic_word.h"
#include "core/core.h"

#define CQ_ERR_MAX 160
#define CQ_NONE UINT32_MAX

typedef struct cq_slot {
    vmmc_req_int_t req;        /* first: what the copy engine sees (type REQ_CQ) */
    struct vmmc_cq *cq;
    void *context;
    vmmc_op_t op;
    int status, peer;
    size_t offset, length;
    uint64_t value;
    vmmc_export_t *export_;
    int aop, asize;            /* atomic */
    uint64_t compare;
    uint32_t next_free;
    char err[CQ_ERR_MAX];
} cq_slot_t;

/* A notification that found no free slot. */
typedef struct cq_wait {
    vmmc_export_t *ex;
    void *context;
    vmmc_nrec_t rec;
} cq_wait_t;

struct vmmc_cq {
    vmmc_ep_t *ep;
    pthread_mutex_t lock;      /* slots' free list and the ready FIFO */
    uint32_t depth;
    cq_slot_t *slots;
    uint32_t free_head;
    uint32_t *ready;           /* FIFO of completed slots (depth entries) */
    uint32_t rhead, rtail;     /* counters; index % depth */
    _Atomic uint32_t nready;
    _Atomic uint32_t running;  /* in the copy engine */
    _Atomic int users;         /* exports that notify into this queue */
    cq_wait_t *backlog;        /* notifications waiting for a slot (ring) */
    size_t bcap, bhead, btail; /* capacity; counters, index % bcap */
    int evfd, epfd;
    char (*errs)[CQ_ERR_MAX];  /* error texts handed out by the last poll */
};

/* Queue the completion of slot @s; cq->lock held. */
static void ready_push_locked(vmmc_cq_t *cq, cq_slot_t *s)
{
    cq->ready[cq->rtail++ % cq->depth] = (uint32_t)(s - cq->slots);
    if (atomic_fetch_add_explicit(&cq->nready, 1, memory_order_release) == 0) {
        uint64_t one = 1;
        ssize_t w = write(cq->evfd, &one, sizeof one);
        (void)w;
    }
}

/* Slot @s holds a notification of @ex: queue it; cq->lock held. */
static void notify_fill_locked(vmmc_cq_t *cq, cq_slot_t *s, vmmc_export_t *ex, void *context,
                               const vmmc_nrec_t *rec)
{
    memset(&s->req, 0, sizeof s->req);
    s->cq = cq;
    s->context = context;
    s->op = VMMC_OP_NOTIFY;
    s->status = VMMC_OK;
    s->err[0] = 0;
    s->peer = rec->sender;
    s->offset = rec->offset;
    s->length = rec->length;
    s->value = rec->imm;
    s->export_ = ex;
    ready_push_locked(cq, s);
}

/* Give slot @s back; a notification waiting in the backlog takes it at
 * once, so the backlog is empty whenever a slot is free. */
static void slot_free_locked(vmmc_cq_t *cq, cq_slot_t *s)
{
    if (cq->bhead != cq->btail) {
        cq_wait_t *w = &cq->backlog[cq->bhead++ % cq->bcap];
        notify_fill_locked(cq, s, w->ex, w->context, &w->rec);
        return;
    }
    s->next_free = cq->free_head;
    cq->free_head = (uint32_t)(s - cq->slots);
}

static cq_slot_t *slot_take(vmmc_cq_t *cq)
{
    pthread_mutex_lock(&cq->lock);
    cq_slot_t *s = NULL;
    if (cq->free_head != CQ_NONE) {
        s = &cq->slots[cq->free_head];
        cq->free_head = s->next_free;
    }
    pthread_mutex_unlock(&cq->lock);
    return s;
}

/* The slot's operation is over: queue its completion. */
static void complete(cq_slot_t *s, int status)
{
    vmmc_cq_t *cq = s->cq;
    s->status = status;
    if (status != VMMC_OK)
        snprintf(s->err, sizeof s->err, "%s", vmmc_last_error());
    else
        s->err[0] = 0;
    pthread_mutex_lock(&cq->lock);
    ready_push_locked(cq, s);
    pthread_mutex_unlock(&cq->lock);
}

int vmmc_cq_open(vmmc_ep_t *ep, size_t depth, vmmc_cq_t **out)
{
    if (!ep || !out)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_cq_open: NULL %s", !ep ? "endpoint" : "result");
    if (depth == 0 || depth > (1u << 20))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_cq_open: depth %zu (1..%u)", depth, 1u << 20);
    vmmc_cq_t *cq = calloc(1, sizeof *cq);
    if (!cq)
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for a completion queue");
    cq->ep = ep;
    cq->depth = (uint32_t)depth;
    cq->evfd = cq->epfd = -1;
    cq->slots = calloc(depth, sizeof *cq->slots);
    cq->ready = calloc(depth, sizeof *cq->ready);
    cq->errs = calloc(depth, sizeof *cq->errs);
    if (!cq->slots || !cq->ready || !cq->errs) {
        free(cq->slots);
        free(cq->ready);
        free(cq->errs);
        free(cq);
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for a completion queue of %zu", depth);
    }
    cq->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (cq->evfd < 0) {
        int rc = vmmc_error_sys("eventfd for a completion queue");
        free(cq->slots);
        free(cq->ready);
        free(cq->errs);
        free(cq);
        return rc;
    }
    pthread_mutex_init(&cq->lock, NULL);
    cq->free_head = CQ_NONE;
    for (uint32_t i = cq->depth; i-- > 0;)
        slot_free_locked(cq, &cq->slots[i]);
    *out = cq;
    return VMMC_OK;
}

static int cq_idle(void *arg)
{
    return atomic_load_explicit(&((vmmc_cq_t *)arg)->running, memory_order_acquire) == 0;
}

int vmmc_cq_close(vmmc_cq_t *cq)
{
    if (!cq)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_cq_close: NULL queue");
    if (atomic_load(&cq->users))
        return vmmc_error(VMMC_ERR_BUSY, "vmmc_cq_close: %d export(s) still notify into the queue",
                          atomic_load(&cq->users));
    if (!cq_idle(cq)) {
        int ms = (int)(vmmc_core_cfg.connect_timeout_ns / 1000000);
        int rc = vmmc_wait_until(cq->ep, cq_idle, cq, ms);
        if (rc != VMMC_OK)
            return vmmc_error(VMMC_ERR_BUSY, "vmmc_cq_close: %u operation(s) still running after "
                              "%d ms", atomic_load(&cq->running), ms);
    }
    if (cq->epfd >= 0)
        close(cq->epfd);
    close(cq->evfd);
    pthread_mutex_destroy(&cq->lock);
    free(cq->slots);
    free(cq->ready);
    free(cq->errs);
    free(cq->backlog);
    free(cq);
    return VMMC_OK;
}

/* Take up to @max completions (no progress). Each slot freed goes to the
 * backlog's next notification first, which this call may then take too. */
static int take(vmmc_cq_t *cq, vmmc_completion_t *out, int max)
{
    if (!atomic_load_explicit(&cq->nready, memory_order_acquire))
        return 0;
    int n = 0;
    pthread_mutex_lock(&cq->lock);
    uint64_t moved = cq->bhead;
    while (n < max && cq->rhead != cq->rtail) {
        cq_slot_t *s = &cq->slots[cq->ready[cq->rhead++ % cq->depth]];
        vmmc_completion_t *c = &out[n];
        c->context = s->context;
        c->status = s->status;
        c->peer = s->peer;
        c->op = s->op;
        c->offset = s->offset;
        c->length = s->length;
        c->value = s->value;
        c->export_ = s->export_;
        c->error = NULL;
        if (s->status != VMMC_OK) {
            memcpy(cq->errs[n], s->err, sizeof cq->errs[n]);
            c->error = cq->errs[n];
        }
        slot_free_locked(cq, s);
        n++;
    }
    uint32_t left = atomic_fetch_sub_explicit(&cq->nready, (uint32_t)n, memory_order_acq_rel) -
                    (uint32_t)n;
    if (left == 0) {
        uint64_t v;
        ssize_t r = read(cq->evfd, &v, sizeof v);
        (void)r;
    }
    moved = cq->bhead - moved;
    pthread_mutex_unlock(&cq->lock);
    /* Notifications came in from the backlog and some are still there to
     * take: another thread may sleep waiting for them. */
    if (moved && left)
        vmmc_ep_wake(cq->ep);
    return n;
}

int vmmc_cq_poll(vmmc_cq_t *cq, vmmc_completion_t *out, int max)
{
    if (!cq || !out || max < 1)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_cq_poll: %s", !cq ? "NULL queue"
                          : !out ? "NULL output" : "max < 1");
    int rc = vmmc_progress(cq->ep);
    if (rc < 0)
        return rc;
    return take(cq, out, max);
}

static int cq_ready(void *arg)
{
    return atomic_load_explicit(&((vmmc_cq_t *)arg)->nready, memory_order_acquire) != 0;
}

int vmmc_cq_wait(vmmc_cq_t *cq, vmmc_completion_t *out, int max, int timeout_ms)
{
    if (!cq || !out || max < 1 || timeout_ms < -1)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_cq_wait: %s", !cq ? "NULL queue"
                          : !out ? "NULL output" : max < 1 ? "max < 1" : "timeout < -1");
    if (vmmc_in_progress(cq->ep))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_cq_wait called from inside a handler");
    int n = vmmc_cq_poll(cq, out, max);
    if (n != 0 || timeout_ms == 0)
        return n;
    int rc = vmmc_wait_until(cq->ep, cq_ready, cq, timeout_ms);
    if (rc == VMMC_ERR_TIMEOUT)
        return 0;
    if (rc != VMMC_OK)
        return rc;
    return take(cq, out, max);
}

int vmmc_cq_fd(vmmc_cq_t *cq)
{
    if (!cq)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_cq_fd: NULL queue");
    pthread_mutex_lock(&cq->lock);
    if (cq->epfd < 0) {
        int efd = vmmc_event_fd(cq->ep);
        int fd = efd < 0 ? -1 : epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN};
        if (efd < 0 || fd < 0 || epoll_ctl(fd, EPOLL_CTL_ADD, cq->evfd, &ev) != 0 ||
            epoll_ctl(fd, EPOLL_CTL_ADD, efd, &ev) != 0) {
            int rc = efd < 0 ? efd : vmmc_error_sys("vmmc_cq_fd: epoll");
            if (fd >= 0)
                close(fd);
            pthread_mutex_unlock(&cq->lock);
            return rc;
        }
        cq->epfd = fd;
    }
    int fd = cq->epfd;
    pthread_mutex_unlock(&cq->lock);
    return fd;
}

void vmmc_cq_ref(vmmc_cq_t *cq, int delta)
{
    atomic_fetch_add(&cq->users, delta);
}

/* ---- posting ---- */

static cq_slot_t *post_begin(vmmc_cq_t *cq, vmmc_proxy_t *px, vmmc_op_t op, size_t off,
                             size_t len, void *context, int *rc)
{
    cq_slot_t *s = slot_take(cq);
    if (!s) {
        *rc = vmmc_error(VMMC_ERR_AGAIN, "completion queue full (%u operations outstanding or "
                         "not polled)", cq->depth);
        return NULL;
    }
    memset(&s->req, 0, sizeof s->req);
    s->req.type = REQ_CQ;
    s->req.px = px;
    s->cq = cq;
    s->context = context;
    s->op = op;
    s->peer = px->rank;
    s->offset = off;
    s->length = len;
    s->value = 0;
    s->export_ = NULL;
    return s;
}

/* Carry out the slot's operation; its status. */
static int exec(cq_slot_t *s)
{
    vmmc_req_int_t *r = &s->req;
    vmmc_proxy_t *px = r->px;
    int rc;
    if (atomic_load(&px->state) != PX_ACTIVE) {
        rc = vmmc_proxy_state_error(px);
    } else if (s->op == VMMC_OP_SEND) {
        if (r->len == 0 && !(r->flags & VMMC_SEND_NOTIFY)) {
            rc = VMMC_OK;
        } else if (px->base && !(r->flags & VMMC_SEND_NOTIFY)) {
            memcpy(px->base + r->off, r->src, r->len);
            rc = VMMC_OK;
        } else {
            rc = px->put(&px->view, r->off, r->src, r->len, (int)r->flags, r->imm);
        }
    } else if (s->op == VMMC_OP_FETCH) {
        rc = r->len ? px->get(&px->view, r->off, (void *)r->src, r->len) : VMMC_OK;
    } else {
        uint64_t old = 0;
        rc = vmmc_atomic_exec(px, r->off, s->aop, s->asize, r->imm, s->compare,
                              (px->flags & VMMC_EXPORT_READ) ? &old : NULL);
        s->value = old;
    }
    return rc;
}

/* Run now (after the peer's asynchronous operations, to keep their order),
 * or hand to the copy engine, which runs operations in the order posted. */
static int post_run(cq_slot_t *s, int now)
{
    vmmc_cq_t *cq = s->cq;
    vmmc_proxy_t *px = s->req.px;
    if (now) {
        if (atomic_load_explicit(&px->peer->async_inflight, memory_order_acquire))
            (void)vmmc_send_wait_async(px->peer);
        int rc = exec(s);
        if (rc == VMMC_ERR_AGAIN) { /* VMMC_SEND_NONBLOCK: nothing posted, as it says */
            pthread_mutex_lock(&cq->lock);
            slot_free_locked(cq, s);
            pthread_mutex_unlock(&cq->lock);
            return rc;
        }
        complete(s, rc);
        return VMMC_OK;
    }
    atomic_fetch_add(&cq->running, 1);
    int rc = vmmc_dma_post(px, &s->req);
    if (rc != VMMC_OK) {
        atomic_fetch_sub(&cq->running, 1);
        pthread_mutex_lock(&cq->lock);
        slot_free_locked(cq, s);
        pthread_mutex_unlock(&cq->lock);
    }
    return rc;
}

void vmmc_cq_run(vmmc_req_int_t *r)
{
    cq_slot_t *s = (cq_slot_t *)r;
    vmmc_cq_t *cq = s->cq;
    complete(s, exec(s)); /* from here the slot belongs to the queue's owner */
    atomic_fetch_sub_explicit(&cq->running, 1, memory_order_release);
}

int vmmc_send_cq(vmmc_proxy_t *px, size_t off, const void *src, size_t len, unsigned flags,
                 uint64_t imm, vmmc_cq_t *cq, void *context)
{
    if (!cq)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_send_cq: NULL queue");
    if (flags & VMMC_SEND_HEAD_LAST)
        return vmmc_error(VMMC_ERR_INVALID, "VMMC_SEND_HEAD_LAST is for synchronous sends");
    int rc = vmmc_send_check(px, off, src, len, flags);
    if (rc != VMMC_OK)
        return rc;
    if (px->ep != cq->ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_send_cq: queue of another endpoint");
    if ((rc = vmmc_send_fence_first(px, &flags)) != VMMC_OK)
        return rc;
    cq_slot_t *s = post_begin(cq, px, VMMC_OP_SEND, off, len, context, &rc);
    if (!s)
        return rc;
    s->req.off = off;
    s->req.src = src;
    s->req.len = len;
    s->req.flags = flags;
    s->req.imm = imm;
    return post_run(s, px->base != NULL || len <= vmmc_core_cfg.async_inline_max);
}

int vmmc_fetch_cq(vmmc_proxy_t *px, size_t off, void *dst, size_t len, vmmc_cq_t *cq,
                  void *context)
{
    if (!cq)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_fetch_cq: NULL queue");
    int rc = vmmc_fetch_check(px, off, dst, len);
    if (rc != VMMC_OK)
        return rc;
    if (px->ep != cq->ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_fetch_cq: queue of another endpoint");
    cq_slot_t *s = post_begin(cq, px, VMMC_OP_FETCH, off, len, context, &rc);
    if (!s)
        return rc;
    s->req.off = off;
    s->req.src = dst;
    s->req.len = len;
    return post_run(s, px->base != NULL || len <= vmmc_core_cfg.async_inline_max);
}

int vmmc_atomic_cq(vmmc_proxy_t *px, size_t off, vmmc_atomic_op_t op, int size, uint64_t operand,
                   uint64_t compare, vmmc_cq_t *cq, void *context)
{
    if (!cq)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_atomic_cq: NULL queue");
    /* The old value comes back when the export allows reads. */
    int rc = vmmc_atomic_check(px, off, (int)op, size, 0);
    if (rc != VMMC_OK)
        return rc;
    if (px->ep != cq->ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_atomic_cq: queue of another endpoint");
    cq_slot_t *s = post_begin(cq, px, VMMC_OP_ATOMIC, off, (size_t)vmmc_atomic_width(size),
                              context, &rc);
    if (!s)
        return rc;
    s->req.off = off;
    s->req.imm = operand;
    s->aop = (int)op;
    s->asize = size;
    s->compare = compare;
    /* Into a mapping it is one instruction; elsewhere a round trip, which
     * the copy engine waits for instead of the caller. */
    return post_run(s, px->base != NULL);
}

/* ---- notifications ---- */

int vmmc_cq_notify(vmmc_export_t *ex, const vmmc_nrec_t *rec)
{
    vmmc_cq_t *cq = ex->cq;
    pthread_mutex_lock(&cq->lock);
    if (cq->bhead == cq->btail && cq->free_head != CQ_NONE) {
        cq_slot_t *s = &cq->slots[cq->free_head];
        cq->free_head = s->next_free;
        notify_fill_locked(cq, s, ex, ex->cq_context, rec);
        pthread_mutex_unlock(&cq->lock);
        return VMMC_OK;
    }
    /* No slot: wait in the backlog, behind the ones already there. */
    if (cq->btail - cq->bhead == cq->bcap) {
        size_t cap = cq->bcap ? cq->bcap * 2 : 64;
        cq_wait_t *b = malloc(cap * sizeof *b);
        if (!b) {
            pthread_mutex_unlock(&cq->lock);
            return vmmc_error(VMMC_ERR_NOMEM, "out of memory for the backlog of a full "
                              "completion queue (%zu notifications wait)", cq->bcap);
        }
        for (size_t i = 0; i < cq->bcap; i++)
            b[i] = cq->backlog[(cq->bhead + i) % cq->bcap];
        free(cq->backlog);
        cq->backlog = b;
        cq->btail -= cq->bhead;
        cq->bhead = 0;
        cq->bcap = cap;
    }
    cq->backlog[cq->btail++ % cq->bcap] = (cq_wait_t){ex, ex->cq_context, *rec};
    pthread_mutex_unlock(&cq->lock);
    VMMC_COUNT(cq->ep, CNT_NOTIFY_WAITED, 1);
    return VMMC_OK;
}
