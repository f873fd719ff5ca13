/* The endpoints bound to a CQ or a counter, and the epoll set their
 * waiters sleep on (see ofi_bound.h). */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "ofi/ofi_bound.h"

int vofi_bound_add(vofi_bound_t b, vofi_ep_t *ep)
{
    pthread_mutex_lock(b.lock);
    int n = *b.neps;
    if (n >= VOFI_MAX_CNTR_EPS) {
        pthread_mutex_unlock(b.lock);
        vofi_warn("%s: %d endpoint bindings already, the most one %s serves", b.what,
                  VOFI_MAX_CNTR_EPS, b.what);
        return -FI_ENOSPC;
    }
    int fd = -1;
    for (int i = 0; i < n; i++)
        if (b.eps[i] == ep)
            fd = b.ep_fd[i]; /* bound before (transmit and receive) */
    b.eps[n] = ep;
    b.ep_fd[n] = fd;
    *b.neps = n + 1;
    atomic_fetch_add(b.ref, 1);
    pthread_mutex_unlock(b.lock);
    return 0;
}

void vofi_bound_remove(vofi_bound_t b, vofi_ep_t *ep)
{
    pthread_mutex_lock(b.lock);
    int n = *b.neps, i = n - 1, others = 0;
    while (i >= 0 && b.eps[i] != ep)
        i--;
    if (i < 0) {
        pthread_mutex_unlock(b.lock);
        vofi_warn("%s: unbinding an endpoint that is not bound", b.what);
        return;
    }
    int fd = b.ep_fd[i];
    n--;
    b.eps[i] = b.eps[n];
    b.ep_fd[i] = b.ep_fd[n];
    *b.neps = n;
    for (int k = 0; k < n; k++)
        others += b.eps[k] == ep;
    if (!others && fd >= 0 && epoll_ctl(b.epfd, EPOLL_CTL_DEL, fd, NULL) && errno != ENOENT &&
        errno != EBADF)
        vofi_warn("%s: removing an endpoint's wait fd %d from its epoll set: %m", b.what, fd);
    atomic_fetch_sub(b.ref, 1);
    pthread_mutex_unlock(b.lock);
}

void vofi_bound_sync(vofi_bound_t b)
{
    vofi_ep_t *want[VOFI_MAX_CNTR_EPS];
    int n = 0;
    if (b.epfd < 0)
        return;
    pthread_mutex_lock(b.lock);
    for (int i = 0; i < *b.neps; i++)
        if (b.ep_fd[i] < 0)
            want[n++] = b.eps[i];
    pthread_mutex_unlock(b.lock);
    for (int k = 0; k < n; k++) {
        int fd = vofi_ep_wait_fd(want[k]);
        if (fd < 0)
            continue;
        pthread_mutex_lock(b.lock);
        for (int i = 0; i < *b.neps; i++) {
            if (b.eps[i] != want[k] || b.ep_fd[i] >= 0)
                continue;
            struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
            if (epoll_ctl(b.epfd, EPOLL_CTL_ADD, fd, &ev) == 0 || errno == EEXIST)
                b.ep_fd[i] = fd;
            else
                vofi_warn("%s: adding an endpoint's wait fd %d to its epoll set: %m", b.what,
                          fd);
        }
        pthread_mutex_unlock(b.lock);
    }
}

void vofi_bound_progress(vofi_bound_t b, int wait)
{
    vofi_ep_t *eps[VOFI_MAX_CNTR_EPS];
    int (*pass)(vofi_ep_t *) = wait ? vofi_ep_progress_wait : vofi_ep_progress;
    /* One endpoint (the usual case): no lock, since binding and unbinding
     * must not run while another thread reads the queue. */
    if (__atomic_load_n(b.neps, __ATOMIC_ACQUIRE) == 1) {
        pass(b.eps[0]);
        return;
    }
    pthread_mutex_lock(b.lock);
    int n = *b.neps;
    memcpy(eps, b.eps, (size_t)n * sizeof eps[0]);
    pthread_mutex_unlock(b.lock);
    for (int i = 0; i < n; i++) {
        int dup = 0;
        for (int k = 0; k < i && !dup; k++)
            dup = eps[k] == eps[i];
        if (!dup)
            pass(eps[i]);
    }
}

int64_t vofi_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int vofi_ms_left(int64_t deadline, int timeout)
{
    if (timeout < 0)
        return -1;
    int64_t left = deadline - vofi_now_ms();
    return left > 0 ? (int)(left < 0x7fffffff ? left : 0x7fffffff) : 0;
}
