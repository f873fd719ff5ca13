/* The endpoints bound to a CQ or a counter (ofi_bound.c), private to
 * ofi_cq.c and ofi_cntr.c.
 *
 * Both keep, under their own lock, eps[] (one slot per binding: an endpoint
 * bound for transmit and receive holds two), ep_fd[] (each slot's wait fd
 * once it is in the epoll set, else -1), neps, a reference per binding, and
 * an epoll set (-1 without a wait object) that also holds their eventfd. */
#ifndef VMMC_OFI_BOUND_H
#define VMMC_OFI_BOUND_H

#include "ofi/ofi.h"

typedef struct vofi_bound {
    pthread_mutex_t *lock;
    vofi_ep_t **eps;
    int *ep_fd;
    int *neps;
    int epfd;
    _Atomic int *ref;
    const char *what; /* "cq", "cntr": for messages */
} vofi_bound_t;

#define VOFI_BOUND(o, name)                                                               \
    ((vofi_bound_t){&(o)->lock, (o)->eps, (o)->ep_fd, &(o)->neps, (o)->epfd, &(o)->ref, name})

/* One more binding of @p ep: 0, or -FI_ENOSPC beyond VOFI_MAX_CNTR_EPS.
 * Does not ask the endpoint for its wait fd: it may bind under its own
 * lock, and may have no fd before it is enabled. */
int vofi_bound_add(vofi_bound_t b, vofi_ep_t *ep);
/* One binding less; its fd leaves the epoll set with the last. */
void vofi_bound_remove(vofi_bound_t b, vofi_ep_t *ep);
/* Add to the epoll set the wait fds endpoints have by now. Called, without
 * our lock, before anyone sleeps on the set. */
void vofi_bound_sync(vofi_bound_t b);
/* Progress each bound endpoint once (under its own lock; ours not held);
 * @p wait: the caller may sleep on the epoll set next (vofi_ep_progress_wait,
 * which leaves the endpoints' fds quiet). */
void vofi_bound_progress(vofi_bound_t b, int wait);

/* Milliseconds of CLOCK_MONOTONIC; what is left of a wait that ends at
 * @p deadline (-1: forever when @p timeout < 0, 0: over). */
int64_t vofi_now_ms(void);
int vofi_ms_left(int64_t deadline, int timeout);

#endif /* VMMC_OFI_BOUND_H */
