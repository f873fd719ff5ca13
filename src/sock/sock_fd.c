/* The descriptor table: fd -> sock_t, references, dups, modes.
 *
 * The table is indexed by the kernel's descriptor number. It has two levels:
 * a fixed array of chunk pointers (static, zero) and chunks of SOCK_CHUNK
 * slots made on first use of a descriptor in their range, never freed. So
 * the table grows with the highest descriptor registered, up to
 * SOCK_FD_LIMIT (far above any RLIMIT_NOFILE Linux allows by default), and a
 * lookup is two acquire loads with no lock: vmmc_sock_is() runs on every
 * read and write of a program under the preload.
 *
 * Lookups take no lock, so a socket may be released while a lookup holds
 * its pointer. sock_t objects are therefore type-stable: the last reference
 * returns one to a free list, never to malloc, and sock_get() takes its
 * reference only if the count is not zero, then checks that the slot still
 * names the same object (else it lets go and looks again). An object
 * recycled for another socket in the same slot in between is that slot's
 * socket now, which is the right answer.
 *
 * Writers (register, drop) change a slot with a CAS, under the table's
 * mutex for the chunk allocation only. A socket's descriptors are not
 * listed in it: the rare operations that need them all (the last dup
 * closed, a mode change of a dup'ed socket, exec) scan the table up to the
 * highest descriptor ever registered. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sock/sock.h"
#include "sock/sock_api.h"
#include "sock/sock_sys.h"
#include "util/log.h"

#define SOCK_CHUNK_BITS 10
#define SOCK_CHUNK (1 << SOCK_CHUNK_BITS)
#define SOCK_NCHUNKS (1 << 16)
#define SOCK_FD_LIMIT (SOCK_NCHUNKS * SOCK_CHUNK)

typedef _Atomic(sock_t *) sock_slot_t;

static _Atomic(sock_slot_t *) chunks[SOCK_NCHUNKS];
static _Atomic int fd_hwm = -1;      /* highest descriptor ever registered */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static sock_t *free_list;            /* recycled objects, linked through ->pend */
static _Atomic int live_socks;       /* for the tests: objects in use */

/* The mode hook: an immutable pair swapped as a whole (the old pair is kept:
 * a concurrent sock_set_mode() may be reading it; hooks change rarely). */
typedef struct mode_hook {
    vmmc_sock_mode_fn fn;
    void *arg;
    struct mode_hook *prev;
} mode_hook_t;
static _Atomic(mode_hook_t *) hook;

static inline sock_slot_t *slot_of(int fd, int make)
{
    if (VMMC_UNLIKELY(fd < 0 || fd >= SOCK_FD_LIMIT))
        return NULL;
    sock_slot_t *c = atomic_load_explicit(&chunks[fd >> SOCK_CHUNK_BITS], memory_order_acquire);
    if (VMMC_LIKELY(c != NULL) || !make)
        return c ? &c[fd & (SOCK_CHUNK - 1)] : NULL;
    pthread_mutex_lock(&table_lock);
    c = atomic_load_explicit(&chunks[fd >> SOCK_CHUNK_BITS], memory_order_acquire);
    if (!c) {
        c = calloc(SOCK_CHUNK, sizeof *c);
        if (c)
            atomic_store_explicit(&chunks[fd >> SOCK_CHUNK_BITS], c, memory_order_release);
    }
    pthread_mutex_unlock(&table_lock);
    return c ? &c[fd & (SOCK_CHUNK - 1)] : NULL;
}

static void raise_hwm(int fd)
{
    int h = atomic_load_explicit(&fd_hwm, memory_order_relaxed);
    while (fd > h && !atomic_compare_exchange_weak(&fd_hwm, &h, fd))
        ;
}

int vmmc_sock_is(int fd)
{
    sock_slot_t *sl = slot_of(fd, 0);
    return sl && atomic_load_explicit(sl, memory_order_acquire) != NULL;
}

sock_t *sock_get(int fd)
{
    sock_slot_t *sl = slot_of(fd, 0);
    if (!sl)
        return NULL;
    for (;;) {
        sock_t *s = atomic_load_explicit(sl, memory_order_acquire);
        if (!s)
            return NULL;
        int r = atomic_load_explicit(&s->refs, memory_order_relaxed);
        while (r > 0 && !atomic_compare_exchange_weak(&s->refs, &r, r + 1))
            ;
        if (r <= 0)
            continue; /* being released: the slot is about to change */
        if (atomic_load_explicit(sl, memory_order_acquire) == s)
            return s;
        sock_put(s); /* the slot moved on while we took the reference */
    }
}

void sock_hold(sock_t *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void sock_put(sock_t *s)
{
    int r = atomic_fetch_sub(&s->refs, 1);
    if (r > 1)
        return;
    if (VMMC_UNLIKELY(r < 1)) {
        vmmc_warn("sock: reference count of a socket went below zero");
        return;
    }
    pthread_mutex_lock(&table_lock);
    s->pend = free_list;
    free_list = s;
    pthread_mutex_unlock(&table_lock);
    atomic_fetch_sub(&live_socks, 1);
}

static sock_t *sock_alloc(void)
{
    pthread_mutex_lock(&table_lock);
    sock_t *s = free_list;
    if (s)
        free_list = s->pend;
    pthread_mutex_unlock(&table_lock);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return NULL;
        pthread_mutex_init(&s->lock, NULL);
        pthread_mutex_init(&s->rx_lock, NULL);
        pthread_mutex_init(&s->tx_lock, NULL);
    }
    /* refs stays 0 until the object is published: a stale sock_get() that
     * still holds this pointer from its previous life cannot revive it. */
    s->nfds = 0;
    s->fd = -1;
    s->domain = 0;
    atomic_store(&s->mode, VMMC_SOCK_KERNEL);
    atomic_store(&s->nonblock, 0);
    s->connecting = s->accepted = 0;
    s->rcvtimeo_ms = s->sndtimeo_ms = -1;
    s->shut_rd = s->shut_wr = 0;
    memset(&s->peer, 0, sizeof s->peer);
    memset(&s->local, 0, sizeof s->local);
    s->peer_len = s->local_len = 0;
    s->conn = NULL;
    s->lst = NULL;
    s->pend = NULL;
    atomic_fetch_add(&live_socks, 1);
    return s;
}

/* Put @p s in @p fd's slot. A slot that still names another socket means
 * that descriptor was closed behind the layer's back (the kernel has just
 * handed out the number again): that socket loses the descriptor. */
static int publish(int fd, sock_t *s)
{
    sock_slot_t *sl = slot_of(fd, 1);
    if (!sl) {
        errno = fd < 0 ? EBADF : fd >= SOCK_FD_LIMIT ? EMFILE : ENOMEM;
        vmmc_error(VMMC_ERR_NOMEM, "sock: cannot register descriptor %d in the socket table", fd);
        return -1;
    }
    sock_t *old = atomic_exchange_explicit(sl, s, memory_order_acq_rel);
    raise_hwm(fd);
    if (old && old != s) {
        vmmc_warn("sock: descriptor %d was closed without the socket layer; its old socket "
                  "forgets it",
                  fd);
        pthread_mutex_lock(&old->lock);
        old->nfds--;
        if (old->fd == fd)
            old->fd = -1;
        pthread_mutex_unlock(&old->lock);
        sock_put(old);
    }
    return 0;
}

sock_t *sock_fd_new(int fd, int domain)
{
    sock_t *s = sock_alloc();
    if (!s) {
        errno = ENOMEM;
        vmmc_error(VMMC_ERR_NOMEM, "sock: no memory for a socket");
        return NULL;
    }
    s->fd = fd;
    s->domain = domain;
    s->nfds = 1;
    int fl = sys_fcntl(fd, F_GETFL, 0);
    atomic_store(&s->nonblock, fl >= 0 && (fl & O_NONBLOCK));
    atomic_store(&s->refs, 2); /* the descriptor's and the caller's */
    if (publish(fd, s) < 0) {
        int e = errno;
        atomic_store(&s->refs, 1);
        sock_put(s);
        errno = e;
        return NULL;
    }
    return s;
}

int sock_fd_add(sock_t *s, int fd)
{
    pthread_mutex_lock(&s->lock);
    s->nfds++;
    if (s->fd < 0)
        s->fd = fd;
    pthread_mutex_unlock(&s->lock);
    sock_hold(s);
    if (publish(fd, s) < 0) {
        int e = errno;
        pthread_mutex_lock(&s->lock);
        s->nfds--;
        pthread_mutex_unlock(&s->lock);
        sock_put(s);
        errno = e;
        return -1;
    }
    return 0;
}

/* Another descriptor of @p s than @p not, or -1. */
static int other_fd(sock_t *s, int not)
{
    int h = atomic_load(&fd_hwm);
    for (int fd = 0; fd <= h; fd++) {
        if (fd == not)
            continue;
        sock_slot_t *sl = slot_of(fd, 0);
        if (!sl) {
            fd |= SOCK_CHUNK - 1;
            continue;
        }
        if (atomic_load_explicit(sl, memory_order_acquire) == s)
            return fd;
    }
    return -1;
}

int sock_fd_drop(int fd, sock_t *s)
{
    sock_slot_t *sl = slot_of(fd, 0);
    sock_t *expect = s;
    if (!sl || !atomic_compare_exchange_strong(sl, &expect, NULL)) {
        errno = EBADF;
        vmmc_error(VMMC_ERR_INVALID, "sock: descriptor %d is not a descriptor of this socket",
                   fd);
        return -1;
    }
    pthread_mutex_lock(&s->lock);
    int last = --s->nfds <= 0;
    if (!last && s->fd == fd) {
        s->fd = other_fd(s, fd);
        /* the connection's TCP side is polled through s->fd: follow it
         * before @p fd is closed (or its number reused by another file) */
        if (s->conn)
            sock_ctx_move(s->conn, s->fd);
    }
    /* the last one stays in s->fd: the caller closes the connection through
     * it before the descriptor itself goes */
    pthread_mutex_unlock(&s->lock);
    sock_put(s);
    return last;
}

void vmmc_sock_set_mode_hook(vmmc_sock_mode_fn fn, void *arg)
{
    mode_hook_t *h = malloc(sizeof *h);
    if (!h) {
        vmmc_error(VMMC_ERR_NOMEM, "sock: no memory for the mode hook");
        return;
    }
    h->fn = fn;
    h->arg = arg;
    h->prev = atomic_load(&hook);
    while (!atomic_compare_exchange_weak(&hook, &h->prev, h))
        ;
}

void sock_set_mode(sock_t *s, vmmc_sock_mode_t mode)
{
    int old = atomic_exchange(&s->mode, (int)mode);
    if ((old == VMMC_SOCK_VMMC) == (mode == VMMC_SOCK_VMMC))
        return;
    mode_hook_t *h = atomic_load_explicit(&hook, memory_order_acquire);
    if (!h || !h->fn)
        return;
    int up = mode == VMMC_SOCK_VMMC;
    pthread_mutex_lock(&s->lock);
    int fd = s->fd, n = s->nfds;
    pthread_mutex_unlock(&s->lock);
    if (n <= 1) {
        if (fd >= 0)
            h->fn(fd, up, h->arg);
        return;
    }
    /* every descriptor: each may sit in an event set of its own */
    int hw = atomic_load(&fd_hwm);
    for (int d = 0; d <= hw; d++) {
        sock_slot_t *sl = slot_of(d, 0);
        if (!sl) {
            d |= SOCK_CHUNK - 1;
            continue;
        }
        if (atomic_load_explicit(sl, memory_order_acquire) == s)
            h->fn(d, up, h->arg);
    }
}

int sock_fd_upgraded(sock_t **out, int max)
{
    int n = 0;
    int hw = atomic_load(&fd_hwm);
    for (int d = 0; d <= hw; d++) {
        sock_slot_t *sl = slot_of(d, 0);
        if (!sl) {
            d |= SOCK_CHUNK - 1;
            continue;
        }
        if (!atomic_load_explicit(sl, memory_order_acquire))
            continue;
        sock_t *s = sock_get(d);
        if (!s)
            continue;
        pthread_mutex_lock(&s->lock);
        int first = s->fd == d; /* one descriptor per socket counts it */
        pthread_mutex_unlock(&s->lock);
        if (first && atomic_load(&s->mode) == VMMC_SOCK_VMMC) {
            if (n < max) {
                out[n] = s;
                s = NULL;
            }
            n++;
        }
        if (s)
            sock_put(s);
    }
    return n;
}

int sock_fd_survives_exec(sock_t *s)
{
    int hw = atomic_load(&fd_hwm);
    for (int d = 0; d <= hw; d++) {
        sock_slot_t *sl = slot_of(d, 0);
        if (!sl) {
            d |= SOCK_CHUNK - 1;
            continue;
        }
        if (atomic_load_explicit(sl, memory_order_acquire) != s)
            continue;
        int fl = sys_fcntl(d, F_GETFD, 0);
        if (fl >= 0 && !(fl & FD_CLOEXEC))
            return 1;
    }
    return 0;
}

int sock_fd_live(void)
{
    return atomic_load(&live_socks);
}
