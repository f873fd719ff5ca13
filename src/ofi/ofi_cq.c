/* Completion queues of the provider "vmmc" (fi_cq_open(3)).
 *
 * Successful completions go to a ring of the queue's size; beyond it they
 * wait in an overflow list, so nothing is ever lost (FI_RM_ENABLED). Errors
 * have a list of their own; while one is there fi_cq_read returns
 * -FI_EAVAIL before any success. Completions that find no memory for the
 * lists are counted and reported as one FI_EOVERRUN error whose len says
 * how many.
 *
 * Waiting: a queue with a wait object owns an eventfd and an epoll set that
 * holds it and each bound endpoint's wait fd. A writer writes the eventfd
 * only when someone may sleep on it (a thread in fi_cq_sread, or the epoll
 * fd was handed out by FI_GETWAIT) and only once until a read empties the
 * queue again, which drains it: so the fd is readable exactly while there is
 * something to read or a signal, and polling readers pay no system call.
 *
 * Locking (see ofi.h): writers call in with their endpoint's lock held and
 * take cq->lock; a read progresses the endpoints first, holding no lock of
 * ours. An endpoint must be unbound (vofi_cq_unbind_ep) before it is freed,
 * and not while another thread reads this queue.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ofi/ofi_bound.h"

/* Entries kept in the ring; a larger requested size is honoured by the
 * overflow list, allocated only when used. */
#define VOFI_CQ_RING_MAX 65536

struct vofi_cqe_node {
    struct vofi_cqe_node *next;
    vofi_cqe_t e;
};

#define CQ_OF(f) ((vofi_cq_t *)(void *)(f))

static int cq_has(const vofi_cq_t *cq)
{
    return cq->count || cq->over_head || cq->nerr || cq->lost;
}

/* Lock held: wake whoever may sleep on the eventfd, once. */
static void cq_kick(vofi_cq_t *cq)
{
    if (cq->efd < 0 || cq->armed || !(cq->waiters || cq->fd_given))
        return;
    uint64_t one = 1;
    if (write(cq->efd, &one, sizeof one) == (ssize_t)sizeof one)
        cq->armed = 1;
}

/* Lock held: the queue is empty, so its eventfd must not stay readable. */
static void cq_drain(vofi_cq_t *cq)
{
    uint64_t v;
    if (cq->armed && !cq_has(cq) && !atomic_load(&cq->signaled)) {
        if (read(cq->efd, &v, sizeof v) < 0 && errno != EAGAIN)
            vofi_warn("cq: reading its eventfd: %m");
        cq->armed = 0;
    }
}

static void cq_push(struct vofi_cqe_node **head, struct vofi_cqe_node **tail,
                    struct vofi_cqe_node *n)
{
    n->next = NULL;
    if (*tail)
        (*tail)->next = n;
    else
        *head = n;
    *tail = n;
}

static struct vofi_cqe_node *cq_pop(struct vofi_cqe_node **head, struct vofi_cqe_node **tail)
{
    struct vofi_cqe_node *n = *head;
    if (n) {
        *head = n->next;
        if (!*head)
            *tail = NULL;
    }
    return n;
}

void vofi_cq_write(vofi_cq_t *cq, const vofi_cqe_t *e)
{
    pthread_mutex_lock(&cq->lock);
    if (!cq->over_head && cq->count < cq->size) {
        size_t i = cq->head + cq->count;
        if (i >= cq->size)
            i -= cq->size;
        cq->ring[i] = *e;
        cq->count++;
    } else {
        struct vofi_cqe_node *n = malloc(sizeof *n);
        if (n) {
            n->e = *e;
            cq_push(&cq->over_head, &cq->over_tail, n);
        } else {
            cq->lost++;
        }
    }
    cq_kick(cq);
    pthread_mutex_unlock(&cq->lock);
}

void vofi_cq_write_err(vofi_cq_t *cq, const vofi_cqe_t *e)
{
    struct vofi_cqe_node *n = malloc(sizeof *n);
    pthread_mutex_lock(&cq->lock);
    if (n) {
        n->e = *e;
        cq_push(&cq->err_head, &cq->err_tail, n);
        cq->nerr++;
    } else {
        cq->lost++;
    }
    cq_kick(cq);
    pthread_mutex_unlock(&cq->lock);
}

int vofi_cq_bind_ep(vofi_cq_t *cq, vofi_ep_t *ep)
{
    return vofi_bound_add(VOFI_BOUND(cq, "cq"), ep);
}

void vofi_cq_unbind_ep(vofi_cq_t *cq, vofi_ep_t *ep)
{
    vofi_bound_remove(VOFI_BOUND(cq, "cq"), ep);
}

int vofi_cq_ready(vofi_cq_t *cq)
{
    vofi_bound_sync(VOFI_BOUND(cq, "cq"));
    pthread_mutex_lock(&cq->lock);
    int r = cq_has(cq) || atomic_load(&cq->signaled);
    if (!r)
        cq_drain(cq);
    pthread_mutex_unlock(&cq->lock);
    return r;
}

static void cq_out(const vofi_cq_t *cq, void *buf, size_t i, const vofi_cqe_t *e)
{
    char *p = (char *)buf + i * cq->entry_size;
    switch (cq->format) {
    case FI_CQ_FORMAT_MSG: {
        struct fi_cq_msg_entry *m = (void *)p;
        m->op_context = e->op_context;
        m->flags = e->flags;
        m->len = e->len;
        break;
    }
    case FI_CQ_FORMAT_DATA: {
        struct fi_cq_data_entry *d = (void *)p;
        d->op_context = e->op_context;
        d->flags = e->flags;
        d->len = e->len;
        d->buf = e->buf;
        d->data = e->data;
        break;
    }
    case FI_CQ_FORMAT_TAGGED: {
        struct fi_cq_tagged_entry *t = (void *)p;
        t->op_context = e->op_context;
        t->flags = e->flags;
        t->len = e->len;
        t->buf = e->buf;
        t->data = e->data;
        t->tag = e->tag;
        break;
    }
    default: {
        struct fi_cq_entry *c = (void *)p;
        c->op_context = e->op_context;
        break;
    }
    }
}

/* A read that finds nothing takes a pending fi_cq_signal when
 * @p take_signal (fi_cq_read: whoever sleeps on the fd was woken and
 * looked), so that the fd is not left readable; sread takes it itself,
 * and sleeps next (so its pass leaves the endpoints' fds quiet). */
static ssize_t cq_take(vofi_cq_t *cq, void *buf, size_t count, fi_addr_t *src, int take_signal)
{
    if (!buf && count) {
        vofi_warn("cq: read into a NULL buffer");
        return -FI_EINVAL;
    }
    vofi_bound_progress(VOFI_BOUND(cq, "cq"), !take_signal);
    /* The polling loop's common case, an empty queue nobody sleeps on, is
     * seen without the lock (a completion written meanwhile is read next
     * time; the lock orders everything else). */
#define PEEK(f) __atomic_load_n(&cq->f, __ATOMIC_RELAXED)
    if (count && !PEEK(count) && !PEEK(nerr) && !PEEK(lost) && !PEEK(over_head) &&
        !PEEK(armed) && !atomic_load_explicit(&cq->signaled, memory_order_relaxed))
        return -FI_EAGAIN;
#undef PEEK
    pthread_mutex_lock(&cq->lock);
    ssize_t ret;
    if (cq->nerr || cq->lost) {
        ret = -FI_EAVAIL;
        goto out;
    }
    size_t n = 0;
    for (; n < count && cq->count; n++) {
        cq_out(cq, buf, n, &cq->ring[cq->head]);
        if (src)
            src[n] = cq->ring[cq->head].src;
        if (++cq->head == cq->size)
            cq->head = 0;
        cq->count--;
    }
    for (; n < count && cq->over_head; n++) {
        struct vofi_cqe_node *o = cq_pop(&cq->over_head, &cq->over_tail);
        cq_out(cq, buf, n, &o->e);
        if (src)
            src[n] = o->e.src;
        free(o);
    }
    /* What waited beyond the ring takes the room the read made, in order. */
    while (cq->over_head && cq->count < cq->size) {
        struct vofi_cqe_node *o = cq_pop(&cq->over_head, &cq->over_tail);
        size_t i = cq->head + cq->count;
        if (i >= cq->size)
            i -= cq->size;
        cq->ring[i] = o->e;
        cq->count++;
        free(o);
    }
    ret = n ? (ssize_t)n : (count ? -FI_EAGAIN : (cq_has(cq) ? 0 : -FI_EAGAIN));
    if (ret == -FI_EAGAIN && take_signal)
        atomic_store(&cq->signaled, 0);
    cq_drain(cq);
out:
    pthread_mutex_unlock(&cq->lock);
    return ret;
}

static ssize_t cq_readfrom(struct fid_cq *fid, void *buf, size_t count, fi_addr_t *src)
{
    return cq_take(CQ_OF(fid), buf, count, src, 1);
}

static ssize_t cq_read(struct fid_cq *fid, void *buf, size_t count)
{
    return cq_take(CQ_OF(fid), buf, count, NULL, 1);
}

static const char *cq_op_name(uint64_t flags)
{
    if (flags & FI_ATOMIC)
        return "atomic";
    if (flags & FI_READ)
        return "RMA read";
    if (flags & FI_WRITE)
        return "RMA write";
    if (flags & FI_RECV)
        return (flags & FI_TAGGED) ? "tagged receive" : "receive";
    if (flags & FI_SEND)
        return (flags & FI_TAGGED) ? "tagged send" : "send";
    return "operation";
}

static ssize_t cq_readerr(struct fid_cq *fid, struct fi_cq_err_entry *buf, uint64_t flags)
{
    vofi_cq_t *cq = CQ_OF(fid);
    if (!buf) {
        vofi_warn("cq: readerr into a NULL entry");
        return -FI_EINVAL;
    }
    struct vofi_cqe_node *n = NULL;
    vofi_cqe_t e;
    pthread_mutex_lock(&cq->lock);
    if (cq->err_head) {
        n = cq_pop(&cq->err_head, &cq->err_tail);
        cq->nerr--;
        e = n->e;
        int k = snprintf(cq->err_str, sizeof cq->err_str, "vmmc: %s failed: %s (%s)",
                         cq_op_name(e.flags), fi_strerror(e.err), vmmc_strerror(e.prov_errno));
        if (e.err == FI_ETRUNC && k > 0 && (size_t)k < sizeof cq->err_str)
            snprintf(cq->err_str + k, sizeof cq->err_str - (size_t)k,
                     ": %zu bytes did not fit", e.olen);
    } else if (cq->lost) {
        memset(&e, 0, sizeof e);
        e.err = FI_EOVERRUN;
        e.prov_errno = VMMC_ERR_NOMEM;
        e.len = cq->lost;
        snprintf(cq->err_str, sizeof cq->err_str,
                 "vmmc: %zu completion(s) lost: no memory to queue them", cq->lost);
        cq->lost = 0;
    } else {
        pthread_mutex_unlock(&cq->lock);
        return -FI_EAGAIN;
    }
    struct fi_cq_err_entry out = {
        .op_context = e.op_context, .flags = e.flags, .len = e.len, .buf = e.buf,
        .data = e.data, .tag = e.tag, .olen = e.olen, .err = e.err,
        .prov_errno = e.prov_errno, .err_data = cq->err_str,
        .err_data_size = strlen(cq->err_str) + 1,
    };
    uint32_t api = cq->dom && cq->dom->fab ? cq->dom->fab->fid.api_version : VOFI_FI_VERSION;
    if (FI_VERSION_GE(api, FI_VERSION(1, 5))) {
        /* The caller's own buffer, if it gave one: copy the message in. */
        if (buf->err_data && buf->err_data_size) {
            size_t k = buf->err_data_size < out.err_data_size ? buf->err_data_size
                                                               : out.err_data_size;
            memcpy(buf->err_data, cq->err_str, k);
            out.err_data = buf->err_data;
            out.err_data_size = k;
        }
        *buf = out;
    } else {
        /* Callers of API 1.0-1.4 know the entry without err_data_size. */
        memcpy(buf, &out, offsetof(struct fi_cq_err_entry, err_data_size));
    }
    cq_drain(cq);
    pthread_mutex_unlock(&cq->lock);
    free(n);
    return 1;
}

static ssize_t cq_sreadfrom(struct fid_cq *fid, void *buf, size_t count, fi_addr_t *src,
                            const void *cond, int timeout)
{
    vofi_cq_t *cq = CQ_OF(fid);
    if (cq->epfd < 0) {
        vofi_warn("cq: sread on a queue opened with FI_WAIT_NONE");
        return -FI_ENOSYS;
    }
    int64_t deadline = timeout >= 0 ? vofi_now_ms() + timeout : 0;
    for (;;) {
        /* The endpoints' fds join the set (and peers start waking us)
         * before the progress pass that looks for work: whatever arrives
         * after that pass makes the set readable. */
        vofi_bound_sync(VOFI_BOUND(cq, "cq"));
        ssize_t ret = cq_take(cq, buf, count, src, 0);
        if (ret != -FI_EAGAIN)
            return ret;
        int ms = vofi_ms_left(deadline, timeout);
        pthread_mutex_lock(&cq->lock);
        if (atomic_exchange(&cq->signaled, 0)) {
            cq_drain(cq);
            pthread_mutex_unlock(&cq->lock);
            return -FI_EAGAIN;
        }
        if (cq_has(cq)) { /* came after our read */
            pthread_mutex_unlock(&cq->lock);
            continue;
        }
        if (ms == 0) {
            pthread_mutex_unlock(&cq->lock);
            return -FI_EAGAIN;
        }
        cq->waiters++;
        pthread_mutex_unlock(&cq->lock);
        struct epoll_event ev[4];
        int r = epoll_wait(cq->epfd, ev, 4, ms);
        int e = errno;
        pthread_mutex_lock(&cq->lock);
        cq->waiters--;
        pthread_mutex_unlock(&cq->lock);
        if (r < 0 && e != EINTR) {
            errno = e;
            vofi_warn("cq: waiting on its epoll set: %m");
            return -FI_EIO;
        }
    }
}

static ssize_t cq_sread(struct fid_cq *fid, void *buf, size_t count, const void *cond, int timeout)
{
    return cq_sreadfrom(fid, buf, count, NULL, cond, timeout);
}

static int cq_signal(struct fid_cq *fid)
{
    vofi_cq_t *cq = CQ_OF(fid);
    pthread_mutex_lock(&cq->lock);
    atomic_store(&cq->signaled, 1);
    cq_kick(cq);
    pthread_mutex_unlock(&cq->lock);
    return 0;
}

static const char *cq_strerror(struct fid_cq *fid, int prov_errno, const void *err_data, char *buf,
                               size_t len)
{
    const char *s = vmmc_strerror(prov_errno);
    if (buf && len) {
        snprintf(buf, len, "%s", s);
        return buf;
    }
    return s;
}

static int cq_close(struct fid *fid)
{
    vofi_cq_t *cq = CQ_OF(fid);
    if (atomic_load(&cq->ref) > 0) {
        vofi_info("cq: close refused: %d endpoint binding(s) left", atomic_load(&cq->ref));
        return -FI_EBUSY;
    }
    struct vofi_cqe_node *n;
    while ((n = cq_pop(&cq->over_head, &cq->over_tail)))
        free(n);
    while ((n = cq_pop(&cq->err_head, &cq->err_tail)))
        free(n);
    if (cq->epfd >= 0)
        close(cq->epfd);
    if (cq->efd >= 0)
        close(cq->efd);
    pthread_mutex_destroy(&cq->lock);
    if (cq->dom)
        atomic_fetch_sub(&cq->dom->ref, 1);
    free(cq->ring);
    free(cq);
    return 0;
}

static int cq_control(struct fid *fid, int command, void *arg)
{
    vofi_cq_t *cq = CQ_OF(fid);
    switch (command) {
    case FI_GETWAIT:
        if (!arg)
            return -FI_EINVAL;
        if (cq->epfd < 0)
            return -FI_ENODATA;
        vofi_bound_sync(VOFI_BOUND(cq, "cq"));
        pthread_mutex_lock(&cq->lock);
        cq->fd_given = 1;
        if (cq_has(cq) || atomic_load(&cq->signaled))
            cq_kick(cq); /* the fd tells the truth from now on */
        pthread_mutex_unlock(&cq->lock);
        *(int *)arg = cq->epfd;
        return 0;
    case FI_GETWAITOBJ:
        if (!arg)
            return -FI_EINVAL;
        *(enum fi_wait_obj *)arg = cq->epfd >= 0 ? FI_WAIT_FD : FI_WAIT_NONE;
        return 0;
    default:
        return -FI_ENOSYS;
    }
}

static struct fi_ops vofi_cq_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = cq_close,
    .bind = vofi_no_bind,
    .control = cq_control,
    .ops_open = vofi_no_ops_open,
};

static struct fi_ops_cq vofi_cq_ops = {
    .size = sizeof(struct fi_ops_cq),
    .read = cq_read,
    .readfrom = cq_readfrom,
    .readerr = cq_readerr,
    .sread = cq_sread,
    .sreadfrom = cq_sreadfrom,
    .signal = cq_signal,
    .strerror = cq_strerror,
};

static int cq_check_attr(const struct fi_cq_attr *a, enum fi_cq_format *fmt, size_t *esize)
{
    switch (a->format) {
    case FI_CQ_FORMAT_UNSPEC:
    case FI_CQ_FORMAT_CONTEXT:
        *fmt = FI_CQ_FORMAT_CONTEXT;
        *esize = sizeof(struct fi_cq_entry);
        break;
    case FI_CQ_FORMAT_MSG:
        *fmt = a->format;
        *esize = sizeof(struct fi_cq_msg_entry);
        break;
    case FI_CQ_FORMAT_DATA:
        *fmt = a->format;
        *esize = sizeof(struct fi_cq_data_entry);
        break;
    case FI_CQ_FORMAT_TAGGED:
        *fmt = a->format;
        *esize = sizeof(struct fi_cq_tagged_entry);
        break;
    default:
        vofi_warn("cq: format %d is not one of context, msg, data, tagged", (int)a->format);
        return -FI_ENOSYS;
    }
    if (a->wait_obj != FI_WAIT_NONE && a->wait_obj != FI_WAIT_UNSPEC &&
        a->wait_obj != FI_WAIT_FD) {
        vofi_warn("cq: wait object %d: only none, unspec and fd are offered", (int)a->wait_obj);
        return -FI_ENOSYS;
    }
    if (a->flags) {
        vofi_warn("cq: flags 0x%llx: none is offered (FI_AFFINITY included)",
                  (unsigned long long)a->flags);
        return -FI_ENOSYS;
    }
    if (a->wait_cond != FI_CQ_COND_NONE) {
        vofi_warn("cq: wait condition %d: only FI_CQ_COND_NONE is offered", (int)a->wait_cond);
        return -FI_ENOSYS;
    }
    return 0;
}

int vofi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq_fid,
                 void *context)
{
    static const struct fi_cq_attr none = {0};
    const struct fi_cq_attr *a = attr ? attr : &none;
    enum fi_cq_format fmt;
    size_t esize;
    if (!domain || domain->fid.fclass != FI_CLASS_DOMAIN || !cq_fid) {
        vofi_warn("cq: open needs a vmmc domain and a place for the queue");
        return -FI_EINVAL;
    }
    int ret = cq_check_attr(a, &fmt, &esize);
    if (ret)
        return ret;
    size_t size = a->size ? a->size : (size_t)vofi_set.cq_size;
    if (!size)
        size = 1;
    if (size > VOFI_CQ_RING_MAX)
        size = VOFI_CQ_RING_MAX;
    vofi_cq_t *cq = calloc(1, sizeof *cq);
    if (!cq || !(cq->ring = calloc(size, sizeof *cq->ring))) {
        free(cq);
        vofi_warn("cq: no memory for a queue of %zu entries", size);
        return -FI_ENOMEM;
    }
    cq->efd = cq->epfd = -1;
    if (a->wait_obj != FI_WAIT_NONE) {
        struct epoll_event ev = {.events = EPOLLIN};
        cq->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        cq->epfd = epoll_create1(EPOLL_CLOEXEC);
        ev.data.fd = cq->efd;
        if (cq->efd < 0 || cq->epfd < 0 || epoll_ctl(cq->epfd, EPOLL_CTL_ADD, cq->efd, &ev)) {
            vofi_warn("cq: making its wait fd: %m");
            if (cq->efd >= 0)
                close(cq->efd);
            if (cq->epfd >= 0)
                close(cq->epfd);
            free(cq->ring);
            free(cq);
            return -FI_EMFILE;
        }
    }
    pthread_mutex_init(&cq->lock, NULL);
    cq->dom = (vofi_domain_t *)(void *)domain;
    cq->format = fmt;
    cq->entry_size = esize;
    cq->size = size;
    cq->wait_obj = a->wait_obj == FI_WAIT_NONE ? FI_WAIT_NONE : FI_WAIT_FD;
    cq->fid.fid.fclass = FI_CLASS_CQ;
    cq->fid.fid.context = context;
    cq->fid.fid.ops = &vofi_cq_fi_ops;
    cq->fid.ops = &vofi_cq_ops;
    atomic_fetch_add(&cq->dom->ref, 1);
    *cq_fid = &cq->fid;
    return 0;
}
