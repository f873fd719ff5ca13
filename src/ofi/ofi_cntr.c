/* Counters of the provider "vmmc" (fi_cntr_open(3)).
 *
 * A counter is two atomic words (completions, errors) bumped by endpoints
 * with their lock held. Waiting works as for CQs (ofi_cq.c): an eventfd and
 * an epoll set holding it and each bound endpoint's wait fd; the eventfd is
 * written only while a thread waits in fi_cntr_wait or the fd was handed out
 * by FI_GETWAIT (for the latter once until fi_cntr_read). So an increment
 * nobody waits for is one atomic add and two atomic loads.
 *
 * fi_cntr_wait is offered with every wait object, FI_WAIT_NONE included
 * (it sleeps on the counter's own epoll set); FI_GETWAIT only with an fd.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ofi/ofi_bound.h"

#define CNTR_OF(f) ((vofi_cntr_t *)(void *)(f))

/* The eventfd counts wake-ups (EFD_SEMAPHORE), each taken by the one it
 * is for, so that no waiter eats another's: one for each thread in
 * fi_cntr_wait not woken yet (it takes it when it leaves), one for the
 * holder of the fd (FI_GETWAIT) until the counter is read. */
static void cntr_kick(vofi_cntr_t *c)
{
    if (!atomic_load(&c->waiters) && !atomic_load(&c->fd_given))
        return;
    pthread_mutex_lock(&c->lock);
    uint64_t n = (uint64_t)atomic_exchange(&c->waiters, 0);
    if (n)
        c->kicks++;
    if (atomic_load(&c->fd_given) && !atomic_load(&c->armed)) {
        n++;
        atomic_store(&c->armed, 1);
    }
    if (n && write(c->efd, &n, sizeof n) != (ssize_t)sizeof n)
        vofi_warn("cntr: writing its eventfd: %m");
    pthread_mutex_unlock(&c->lock);
}

static void cntr_take(vofi_cntr_t *c)
{
    uint64_t v;
    if (read(c->efd, &v, sizeof v) < 0 && errno != EAGAIN)
        vofi_warn("cntr: reading its eventfd: %m");
}

/* The holder of the fd has seen the counter: take its wake-up. */
static void cntr_drain(vofi_cntr_t *c)
{
    if (!atomic_load(&c->armed))
        return;
    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->armed)) {
        cntr_take(c);
        atomic_store(&c->armed, 0);
    }
    pthread_mutex_unlock(&c->lock);
}

void vofi_cntr_inc(vofi_cntr_t *c)
{
    atomic_fetch_add(&c->value, 1);
    cntr_kick(c);
}

void vofi_cntr_err(vofi_cntr_t *c)
{
    atomic_fetch_add(&c->err, 1);
    cntr_kick(c);
}

int vofi_cntr_bind_ep(vofi_cntr_t *c, vofi_ep_t *ep)
{
    return vofi_bound_add(VOFI_BOUND(c, "cntr"), ep);
}

void vofi_cntr_unbind_ep(vofi_cntr_t *c, vofi_ep_t *ep)
{
    vofi_bound_remove(VOFI_BOUND(c, "cntr"), ep);
}

/* 1 if the counter changed since it was last read (fd users: fi_trywait). */
int vofi_cntr_ready(vofi_cntr_t *c)
{
    vofi_bound_sync(VOFI_BOUND(c, "cntr"));
    return atomic_load(&c->armed);
}

static uint64_t cntr_read(struct fid_cntr *fid)
{
    vofi_cntr_t *c = CNTR_OF(fid);
    vofi_bound_progress(VOFI_BOUND(c, "cntr"), 0);
    cntr_drain(c);
    return atomic_load(&c->value);
}

static uint64_t cntr_readerr(struct fid_cntr *fid)
{
    vofi_cntr_t *c = CNTR_OF(fid);
    cntr_drain(c);
    return atomic_load(&c->err);
}

static int cntr_add(struct fid_cntr *fid, uint64_t value)
{
    vofi_cntr_t *c = CNTR_OF(fid);
    atomic_fetch_add(&c->value, value);
    cntr_kick(c);
    return 0;
}

static int cntr_set(struct fid_cntr *fid, uint64_t value)
{
    vofi_cntr_t *c = CNTR_OF(fid);
    atomic_store(&c->value, value);
    cntr_kick(c);
    return 0;
}

static int cntr_adderr(struct fid_cntr *fid, uint64_t value)
{
    vofi_cntr_t *c = CNTR_OF(fid);
    atomic_fetch_add(&c->err, value);
    cntr_kick(c);
    return 0;
}

static int cntr_seterr(struct fid_cntr *fid, uint64_t value)
{
    vofi_cntr_t *c = CNTR_OF(fid);
    atomic_store(&c->err, value);
    cntr_kick(c);
    return 0;
}

/* Until value >= threshold (0), the error count changes (-FI_EAVAIL), or
 * timeout ms pass (-FI_ETIMEDOUT; negative: forever). */
static int cntr_wait(struct fid_cntr *fid, uint64_t threshold, int timeout)
{
    vofi_cntr_t *c = CNTR_OF(fid);
    uint64_t err0 = atomic_load(&c->err);
    int64_t deadline = timeout >= 0 ? vofi_now_ms() + timeout : 0;
    for (;;) {
        vofi_bound_sync(VOFI_BOUND(c, "cntr")); /* before the pass: see ofi_cq.c sread */
        vofi_bound_progress(VOFI_BOUND(c, "cntr"), 1); /* it may sleep next */
        cntr_drain(c); /* this thread looks at the counter now */
        if (atomic_load(&c->value) >= threshold)
            return 0;
        if (atomic_load(&c->err) != err0)
            return -FI_EAVAIL;
        int ms = vofi_ms_left(deadline, timeout);
        if (ms == 0)
            return -FI_ETIMEDOUT;
        pthread_mutex_lock(&c->lock);
        atomic_fetch_add(&c->waiters, 1);
        uint64_t kicks = c->kicks;
        pthread_mutex_unlock(&c->lock);
        /* A change from now on sees a waiter and leaves it a wake-up. */
        int r = 0;
        struct epoll_event ev[4];
        if (atomic_load(&c->value) < threshold && atomic_load(&c->err) == err0)
            r = epoll_wait(c->epfd, ev, 4, ms);
        int e = errno;
        pthread_mutex_lock(&c->lock);
        if (c->kicks != kicks)
            cntr_take(c); /* ours */
        else
            atomic_fetch_sub(&c->waiters, 1);
        pthread_mutex_unlock(&c->lock);
        if (r < 0 && e != EINTR) {
            errno = e;
            vofi_warn("cntr: waiting on its epoll set: %m");
            return -FI_EIO;
        }
    }
}

static int cntr_close(struct fid *fid)
{
    vofi_cntr_t *c = CNTR_OF(fid);
    if (atomic_load(&c->ref) > 0) {
        vofi_info("cntr: close refused: %d binding(s) left", atomic_load(&c->ref));
        return -FI_EBUSY;
    }
    close(c->epfd);
    close(c->efd);
    pthread_mutex_destroy(&c->lock);
    if (c->dom)
        atomic_fetch_sub(&c->dom->ref, 1);
    free(c);
    return 0;
}

static int cntr_control(struct fid *fid, int command, void *arg)
{
    vofi_cntr_t *c = CNTR_OF(fid);
    switch (command) {
    case FI_GETWAIT:
        if (!arg)
            return -FI_EINVAL;
        if (c->wait_obj == FI_WAIT_NONE)
            return -FI_ENODATA;
        vofi_bound_sync(VOFI_BOUND(c, "cntr"));
        atomic_store(&c->fd_given, 1);
        cntr_kick(c); /* the state before is unknown to the caller: one wake-up */
        *(int *)arg = c->epfd;
        return 0;
    case FI_GETWAITOBJ:
        if (!arg)
            return -FI_EINVAL;
        *(enum fi_wait_obj *)arg = c->wait_obj;
        return 0;
    default:
        return -FI_ENOSYS;
    }
}

static int cntr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    vofi_warn("cntr: binding a counter to anything (wait sets) is not offered");
    return -FI_ENOSYS;
}

static struct fi_ops vofi_cntr_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = cntr_close,
    .bind = cntr_bind,
    .control = cntr_control,
    .ops_open = vofi_no_ops_open,
};

static struct fi_ops_cntr vofi_cntr_ops = {
    .size = sizeof(struct fi_ops_cntr),
    .read = cntr_read,
    .readerr = cntr_readerr,
    .add = cntr_add,
    .set = cntr_set,
    .wait = cntr_wait,
    .adderr = cntr_adderr,
    .seterr = cntr_seterr,
};

int vofi_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr,
                   void *context)
{
    static const struct fi_cntr_attr none = {0};
    const struct fi_cntr_attr *a = attr ? attr : &none;
    if (!domain || domain->fid.fclass != FI_CLASS_DOMAIN || !cntr) {
        vofi_warn("cntr: open needs a vmmc domain and a place for the counter");
        return -FI_EINVAL;
    }
    if (a->events != FI_CNTR_EVENTS_COMP) {
        vofi_warn("cntr: events %d: only FI_CNTR_EVENTS_COMP is offered", (int)a->events);
        return -FI_ENOSYS;
    }
    if (a->wait_obj != FI_WAIT_NONE && a->wait_obj != FI_WAIT_UNSPEC &&
        a->wait_obj != FI_WAIT_FD) {
        vofi_warn("cntr: wait object %d: only none, unspec and fd are offered",
                  (int)a->wait_obj);
        return -FI_ENOSYS;
    }
    if (a->flags) {
        vofi_warn("cntr: flags 0x%llx: none is offered", (unsigned long long)a->flags);
        return -FI_ENOSYS;
    }
    vofi_cntr_t *c = calloc(1, sizeof *c);
    if (!c) {
        vofi_warn("cntr: no memory for a counter");
        return -FI_ENOMEM;
    }
    struct epoll_event ev = {.events = EPOLLIN};
    c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC | EFD_SEMAPHORE);
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    ev.data.fd = c->efd;
    if (c->efd < 0 || c->epfd < 0 || epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->efd, &ev)) {
        vofi_warn("cntr: making its wait fd: %m");
        if (c->efd >= 0)
            close(c->efd);
        if (c->epfd >= 0)
            close(c->epfd);
        free(c);
        return -FI_EMFILE;
    }
    pthread_mutex_init(&c->lock, NULL);
    c->dom = (vofi_domain_t *)(void *)domain;
    c->wait_obj = a->wait_obj == FI_WAIT_NONE ? FI_WAIT_NONE : FI_WAIT_FD;
    c->fid.fid.fclass = FI_CLASS_CNTR;
    c->fid.fid.context = context;
    c->fid.fid.ops = &vofi_cntr_fi_ops;
    c->fid.ops = &vofi_cntr_ops;
    atomic_fetch_add(&c->dom->ref, 1);
    *cntr = &c->fid;
    return 0;
}
