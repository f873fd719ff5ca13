/* Event queues of the provider "vmmc" (fi_eq(3)).
 *
 * Nothing in the provider completes asynchronously (memory registration,
 * AV insertion and endpoint set-up finish in the call), so the only events
 * are the application's own, written with fi_eq_write (which needs FI_WRITE
 * in the attributes); applications such as fabtests open an EQ and bind
 * objects to it all the same. Events are kept whole, in order, up to the
 * queue's size (a write to a full queue is -FI_EAGAIN and changes nothing);
 * a read into a buffer too small for the next event is -FI_ETOOSMALL and
 * leaves it queued, so no byte is lost. No error event is ever queued, so
 * fi_eq_readerr finds none.
 *
 * Wait objects: FI_WAIT_NONE (no fi_eq_sread), FI_WAIT_UNSPEC and FI_WAIT_FD
 * (an eventfd, FI_GETWAIT). The fd is readable exactly while an event is
 * queued: the write that makes the queue non-empty signals it, the read
 * that empties it drains it. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "ofi/ofi.h"

#define EQ_DEFAULT_SIZE 1024
#define EQ_MAX_SIZE (1u << 20)
#define EQ_MAX_EVENT 65536 /* bytes of one event */

typedef struct eq_event {
    struct eq_event *next;
    uint32_t event;
    size_t len;
    uint8_t data[];
} eq_event_t;

typedef struct vofi_eq {
    struct fid_eq fid;
    vofi_fabric_t *fab;
    pthread_mutex_t lock;
    eq_event_t *head, *tail;
    size_t count, size;
    uint64_t flags;
    enum fi_wait_obj wait_obj;
    int efd; /* -1 with FI_WAIT_NONE */
    _Atomic int ref;
} vofi_eq_t;

#define EQ_OF(f) ((vofi_eq_t *)(void *)(f))

void vofi_eq_hold(struct fid_eq *eq, int delta)
{
    atomic_fetch_add(&EQ_OF(eq)->ref, delta);
}

/* Lock held. */
static void eq_signal(vofi_eq_t *eq)
{
    uint64_t one = 1;
    if (eq->efd >= 0 && write(eq->efd, &one, sizeof one) != (ssize_t)sizeof one)
        vofi_warn("fi_eq_write: signalling the EQ's eventfd: %m");
}

/* Lock held: the queue became empty. */
static void eq_drain(vofi_eq_t *eq)
{
    uint64_t v;
    if (eq->efd >= 0 && read(eq->efd, &v, sizeof v) < 0 && errno != EAGAIN)
        vofi_warn("fi_eq_read: draining the EQ's eventfd: %m");
}

static ssize_t eq_read(struct fid_eq *fid, uint32_t *event, void *buf, size_t len,
                       uint64_t flags)
{
    vofi_eq_t *eq = EQ_OF(fid);
    if (flags & ~(uint64_t)FI_PEEK) {
        vofi_warn("fi_eq_read: unknown flags 0x%llx", (unsigned long long)flags);
        return -FI_EBADFLAGS;
    }
    if (!buf && len) {
        vofi_warn("fi_eq_read: a NULL buffer of %zu bytes", len);
        return -FI_EINVAL;
    }
    pthread_mutex_lock(&eq->lock);
    eq_event_t *e = eq->head;
    ssize_t rc;
    size_t need = 0;
    if (!e) {
        rc = -FI_EAGAIN;
    } else if (buf && len < e->len) {
        rc = -FI_ETOOSMALL; /* the event stays */
        need = e->len;
    } else {
        if (event)
            *event = e->event;
        if (buf)
            memcpy(buf, e->data, e->len);
        rc = buf ? (ssize_t)e->len : 0;
        if (!(flags & FI_PEEK)) {
            eq->head = e->next;
            if (!eq->head)
                eq->tail = NULL;
            if (--eq->count == 0)
                eq_drain(eq);
            free(e);
        }
    }
    pthread_mutex_unlock(&eq->lock);
    if (rc == -FI_ETOOSMALL)
        vofi_warn("fi_eq_read: the next event has %zu bytes, the buffer %zu", need, len);
    return rc;
}

static ssize_t eq_readerr(struct fid_eq *fid, struct fi_eq_err_entry *buf, uint64_t flags)
{
    (void)fid;
    if (!buf)
        return -FI_EINVAL;
    if (flags & ~(uint64_t)FI_PEEK)
        return -FI_EBADFLAGS;
    return -FI_EAGAIN; /* no error event is ever queued */
}

static ssize_t eq_write(struct fid_eq *fid, uint32_t event, const void *buf, size_t len,
                        uint64_t flags)
{
    vofi_eq_t *eq = EQ_OF(fid);
    if (!(eq->flags & FI_WRITE)) {
        vofi_warn("fi_eq_write: the EQ was opened without FI_WRITE");
        return -FI_EINVAL;
    }
    if (flags) {
        vofi_warn("fi_eq_write: unknown flags 0x%llx", (unsigned long long)flags);
        return -FI_EBADFLAGS;
    }
    if ((!buf && len) || len > EQ_MAX_EVENT) {
        vofi_warn("fi_eq_write: %zu bytes at %p (an event has at most %d)", len, buf,
                  EQ_MAX_EVENT);
        return -FI_EINVAL;
    }
    eq_event_t *e = malloc(sizeof *e + len);
    if (!e)
        return -FI_ENOMEM;
    e->next = NULL;
    e->event = event;
    e->len = len;
    if (len)
        memcpy(e->data, buf, len);
    pthread_mutex_lock(&eq->lock);
    if (eq->count == eq->size) {
        pthread_mutex_unlock(&eq->lock);
        free(e);
        return -FI_EAGAIN;
    }
    if (eq->tail)
        eq->tail->next = e;
    else
        eq->head = e;
    eq->tail = e;
    if (eq->count++ == 0)
        eq_signal(eq);
    pthread_mutex_unlock(&eq->lock);
    return (ssize_t)len;
}

static ssize_t eq_sread(struct fid_eq *fid, uint32_t *event, void *buf, size_t len, int timeout,
                        uint64_t flags)
{
    vofi_eq_t *eq = EQ_OF(fid);
    if (eq->efd < 0) {
        vofi_warn("fi_eq_sread: the EQ has no wait object (FI_WAIT_NONE)");
        return -FI_EINVAL;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        ssize_t rc = eq_read(fid, event, buf, len, flags);
        if (rc != -FI_EAGAIN)
            return rc;
        int ms = -1;
        if (timeout >= 0) {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            long long gone = (t.tv_sec - t0.tv_sec) * 1000ll + (t.tv_nsec - t0.tv_nsec) / 1000000;
            if (gone >= timeout)
                return -FI_EAGAIN;
            ms = (int)(timeout - gone);
        }
        struct pollfd p = {.fd = eq->efd, .events = POLLIN};
        int n = poll(&p, 1, ms);
        if (n < 0 && errno != EINTR) {
            vofi_warn("fi_eq_sread: poll: %m");
            return -FI_EOTHER;
        }
        if (n < 0)
            return -FI_EAGAIN; /* a signal ends the wait (fi_eq(3)) */
    }
}

static const char *eq_strerror(struct fid_eq *fid, int prov_errno, const void *err_data,
                               char *buf, size_t len)
{
    (void)fid, (void)err_data;
    /* prov_errno is a vmmc status (negative) in this provider. */
    const char *s = prov_errno < 0 ? vmmc_strerror(prov_errno) : fi_strerror(prov_errno);
    if (buf && len) {
        strncpy(buf, s, len - 1);
        buf[len - 1] = 0;
        return buf;
    }
    return s;
}

static struct fi_ops_eq eq_ops = {
    .size = sizeof(struct fi_ops_eq),
    .read = eq_read,
    .readerr = eq_readerr,
    .write = eq_write,
    .sread = eq_sread,
    .strerror = eq_strerror,
};

static int eq_close(struct fid *fid)
{
    vofi_eq_t *eq = EQ_OF(fid);
    int n = atomic_load(&eq->ref);
    if (n) {
        vofi_warn("fi_close(eq): %d object(s) are bound to it", n);
        return -FI_EBUSY;
    }
    while (eq->head) {
        eq_event_t *e = eq->head;
        eq->head = e->next;
        free(e);
    }
    if (eq->efd >= 0)
        close(eq->efd);
    pthread_mutex_destroy(&eq->lock);
    atomic_fetch_sub(&eq->fab->ref, 1);
    free(eq);
    return 0;
}

static int eq_control(struct fid *fid, int command, void *arg)
{
    vofi_eq_t *eq = EQ_OF(fid);
    switch (command) {
    case FI_GETWAIT:
        if (!arg)
            return -FI_EINVAL;
        if (eq->efd < 0)
            return -FI_ENODATA; /* FI_WAIT_NONE */
        *(int *)arg = eq->efd;
        return 0;
    case FI_GETWAITOBJ:
        if (!arg)
            return -FI_EINVAL;
        *(enum fi_wait_obj *)arg = eq->efd >= 0 ? FI_WAIT_FD : FI_WAIT_NONE;
        return 0;
    default:
        return -FI_ENOSYS;
    }
}

static struct fi_ops eq_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = eq_close,
    .bind = vofi_no_bind,
    .control = eq_control,
    .ops_open = vofi_no_ops_open,
};

int vofi_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **out,
                 void *context)
{
    if (!fabric || !attr || !out)
        return -FI_EINVAL;
    if (fabric->fid.fclass != FI_CLASS_FABRIC || fabric->ops->eq_open != vofi_eq_open) {
        vofi_warn("fi_eq_open: the fabric is not this provider's");
        return -FI_EINVAL;
    }
    if (attr->flags & ~(uint64_t)(FI_WRITE | FI_AFFINITY)) {
        vofi_warn("fi_eq_open: unknown flags 0x%llx", (unsigned long long)attr->flags);
        return -FI_EBADFLAGS;
    }
    if (attr->size > EQ_MAX_SIZE) {
        vofi_warn("fi_eq_open: size %zu > %u", attr->size, EQ_MAX_SIZE);
        return -FI_EINVAL;
    }
    switch (attr->wait_obj) {
    case FI_WAIT_NONE:
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD:
        break;
    default:
        vofi_warn("fi_eq_open: wait object %d: only FI_WAIT_NONE, FI_WAIT_UNSPEC and FI_WAIT_FD",
                  (int)attr->wait_obj);
        return -FI_ENOSYS;
    }
    vofi_eq_t *eq = calloc(1, sizeof *eq);
    if (!eq)
        return -FI_ENOMEM;
    eq->efd = -1;
    if (attr->wait_obj != FI_WAIT_NONE) {
        eq->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (eq->efd < 0) {
            vofi_warn("fi_eq_open: eventfd: %m");
            free(eq);
            return -FI_EMFILE;
        }
    }
    if (pthread_mutex_init(&eq->lock, NULL)) {
        if (eq->efd >= 0)
            close(eq->efd);
        free(eq);
        return -FI_ENOMEM;
    }
    eq->fab = (vofi_fabric_t *)(void *)fabric;
    eq->size = attr->size ? attr->size : EQ_DEFAULT_SIZE;
    eq->flags = attr->flags;
    eq->wait_obj = attr->wait_obj;
    atomic_init(&eq->ref, 0);
    eq->fid.fid.fclass = FI_CLASS_EQ;
    eq->fid.fid.context = context;
    eq->fid.fid.ops = &eq_fi_ops;
    eq->fid.ops = &eq_ops;
    atomic_fetch_add(&eq->fab->ref, 1);
    *out = &eq->fid;
    return 0;
}
