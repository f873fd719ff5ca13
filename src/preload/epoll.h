/* The epoll emulation of libvmmc-preload.so, shared by epoll.c (instances,
 * epoll_create/epoll_ctl, the mode hook) and epoll_wait.c (waiting).
 *
 * An epoll instance stays the kernel's. A descriptor that is not a vmmc
 * socket, and a vmmc socket in kernel mode, sits in it with the
 * application's own events and data: the kernel reports it, at no cost
 * here. An upgraded socket cannot be reported by the kernel (its bytes do
 * not pass through the kernel), so it is filed with a cookie instead: its
 * own descriptor (EPOLLIN|EPOLLRDHUP|EPOLLET: its TCP side carries records
 * and the peer's EOF) and, once per instance, the layer's event descriptor
 * and a kick eventfd of ours; epoll_wait then computes the socket's
 * readiness with vmmc_sock_ready() and reports it with the application's
 * data. The mode hook re-files a socket when it upgrades or goes back.
 *
 * A cookie is the instance's random 32-bit tag in the high half of the
 * event's data and the socket's descriptor (or K_EVFD, K_KICK) in the low
 * half.
 *
 * Locks: g_lock (the table and the list of instances), then an instance's
 * lock. Neither is held while calling vmmc_sock_ready() (which may finish an
 * upgrade and so call the mode hook) nor while sleeping. */
#ifndef VMMC_PRELOAD_EPOLL_H
#define VMMC_PRELOAD_EPOLL_H

#include <pthread.h>
#include <stdatomic.h>

#include "preload/preload.h"

enum { FILED_NONE = 0, FILED_APP = 1, FILED_COOKIE = 2 };
#define K_EVFD 0xffffffffu
#define K_KICK 0xfffffffeu

typedef struct pl_ent {
    int fd;
    struct epoll_event ev;   /* the application's events and data */
    int filed;               /* FILED_*: how the kernel's instance holds it */
    int disabled;            /* EPOLLONESHOT fired, not re-armed */
    int woken;               /* something happened since the last report */
    uint32_t last;           /* EPOLLET: bits ready when last evaluated */
    uint64_t gen;            /* changes whenever the entry is (re)filed */
    int up_idx;              /* index in up[] while FILED_COOKIE, else -1 */
    uint64_t stamp;          /* the epoll_wait call that last reported it */
    uint32_t eag_in, eag_out; /* EAGAIN counts of the socket when last looked at */
} pl_ent_t;

typedef struct pl_ep {
    pthread_mutex_t lock;
    int refs;                /* under g_lock: descriptors + waiters */
    int nfds;                /* descriptors naming it, under g_lock */
    int fd;                  /* a live one, under g_lock and lock */
    uint64_t tag;            /* high half of cookies */
    pl_ent_t **by_fd;        /* vmmc sockets in the set, by descriptor */
    int by_fd_n;
    pl_ent_t **up;           /* entries FILED_COOKIE */
    int nup, up_cap;
    int evfd;                /* the layer's event fd, filed; -1 if not */
    int kick;                /* our eventfd, filed with K_KICK */
    _Atomic int wake_all;    /* the event fd or a kick fired */
    _Atomic int shared;      /* also in another process (fork) */
    struct pl_ep *next;
} pl_ep_t;

/* The instance of @p epfd with a reference (pl_ep_put), or NULL. */
pl_ep_t *pl_ep_ref(int epfd);
void pl_ep_put(pl_ep_t *ep);

/* How many reads (@p out 0) or writes (1) on @p fd failed with EAGAIN so
 * far (pl_ep_eagain); 0 for a descriptor never filed. */
uint32_t pl_ep_eagain_count(int fd, int out);

/* Wake the instance's waiters (a re-file, a re-arm). */
void pl_ep_kick(pl_ep_t *ep);

#endif
