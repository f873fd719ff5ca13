/* The descriptor table (sock_fd.c): registration, dups, the close of one
 * dup, descriptor reuse, thousands of descriptors, the mode hook, the
 * upgraded list and the exec rule, and lookups racing closes in threads. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sock/sock.h"
#include "sock/sock_api.h"
#include "sock/sock_sys.h"
#include "vtest.h"

static int tcp(void)
{
    int fd = sys_socket(AF_INET, SOCK_STREAM, 0);
    VT_CHECK(fd >= 0);
    return fd;
}

/* close through the table as vmmc_sock_close does, without a connection */
static void drop_close(int fd)
{
    sock_t *s = sock_get(fd);
    VT_CHECK(s != NULL);
    VT_CHECK(sock_fd_drop(fd, s) >= 0);
    sock_put(s);
    VT_CHECK(sys_close(fd) == 0);
}

static void t_basic(void)
{
    int base = sock_fd_live();
    VT_CHECK(!vmmc_sock_is(-1) && !vmmc_sock_is(1 << 30) && sock_get(-5) == NULL);
    int fd = tcp();
    VT_CHECK(!vmmc_sock_is(fd) && sock_get(fd) == NULL);
    sock_t *s = sock_fd_new(fd, AF_INET);
    VT_CHECK(s && s->fd == fd && s->nfds == 1 && s->mode == VMMC_SOCK_KERNEL);
    VT_CHECK(s->rcvtimeo_ms == -1 && s->sndtimeo_ms == -1 && !s->nonblock);
    VT_CHECK(vmmc_sock_is(fd) && sock_fd_live() == base + 1);
    VT_CHECK(sock_get(fd) == s);
    VT_CHECK(atomic_load(&s->refs) == 3);
    sock_put(s);

    /* dups: one socket, two descriptors; closing one keeps the other */
    int d = sys_dup(fd);
    VT_CHECK(d >= 0 && sock_fd_add(s, d) == 0);
    VT_CHECK(sock_get(d) == s && s->nfds == 2);
    sock_put(s);
    VT_CHECK(sock_fd_drop(fd, s) == 0); /* not the last */
    VT_CHECK(sys_close(fd) == 0);
    VT_CHECK(!vmmc_sock_is(fd) && vmmc_sock_is(d));
    VT_CHECK(s->fd == d); /* the layer's kernel calls move to the dup */
    VT_CHECK(sock_fd_drop(fd, s) == -1 && errno == EBADF); /* twice */
    VT_CHECK(sock_fd_drop(d, s) == 1);                      /* the last */
    VT_CHECK(s->fd == d); /* kept for the caller's closing */
    sock_put(s);
    VT_CHECK(sys_close(d) == 0);
    VT_CHECK(!vmmc_sock_is(d) && sock_fd_live() == base);

    /* the number comes back for another socket: a new object */
    int fd2 = tcp();
    VT_CHECK(fd2 == fd || fd2 == d);
    VT_CHECK(!vmmc_sock_is(fd2));
    sock_t *s2 = sock_fd_new(fd2, AF_INET6);
    VT_CHECK(s2 && s2->domain == AF_INET6 && s2->nfds == 1 && s2->fd == fd2);
    sock_put(s2);
    /* closed behind the layer's back, then reused: the old socket forgets it */
    VT_CHECK(sys_close(fd2) == 0);
    int fd3 = sys_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    VT_CHECK(fd3 == fd2);
    sock_t *s3 = sock_fd_new(fd3, AF_INET);
    VT_CHECK(s3 && s3 != NULL && s3->nonblock == 1);
    VT_CHECK(sock_get(fd3) == s3);
    sock_put(s3);
    sock_put(s3);
    drop_close(fd3);
    VT_CHECK(sock_fd_live() == base);
}

static int hook_calls, hook_up, hook_fds[8];
static void hook(int fd, int up, void *arg)
{
    VT_CHECK(arg == &hook_calls);
    if (hook_calls < 8)
        hook_fds[hook_calls] = fd;
    hook_calls++;
    hook_up = up;
}

static void t_modes(void)
{
    int base = sock_fd_live();
    int fd = tcp();
    sock_t *s = sock_fd_new(fd, AF_INET);
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    VT_CHECK(d >= 0 && sock_fd_add(s, d) == 0);
    vmmc_sock_set_mode_hook(hook, &hook_calls);
    sock_set_mode(s, VMMC_SOCK_PENDING);
    VT_CHECK(hook_calls == 0); /* still on the kernel */
    sock_set_mode(s, VMMC_SOCK_VMMC);
    VT_CHECK(hook_calls == 2 && hook_up == 1); /* once per descriptor */
    VT_CHECK((hook_fds[0] == fd && hook_fds[1] == d) || (hook_fds[0] == d && hook_fds[1] == fd));
    sock_set_mode(s, VMMC_SOCK_VMMC);
    VT_CHECK(hook_calls == 2);

    /* the upgraded list names each socket once, with a reference */
    int other = tcp();
    sock_t *o = sock_fd_new(other, AF_INET);
    sock_t *list[4];
    VT_CHECK(sock_fd_upgraded(list, 4) == 1 && list[0] == s);
    sock_put(list[0]);
    sock_set_mode(o, VMMC_SOCK_VMMC);
    VT_CHECK(hook_calls == 3 && hook_fds[2] == other);
    VT_CHECK(sock_fd_upgraded(list, 1) == 2); /* counts both, fills one */
    sock_put(list[0]);
    VT_CHECK(sock_fd_upgraded(list, 4) == 2);
    sock_put(list[0]);
    sock_put(list[1]);

    /* exec: fd has no FD_CLOEXEC, d has */
    VT_CHECK(sock_fd_survives_exec(s) == 1);
    VT_CHECK(fcntl(fd, F_SETFD, FD_CLOEXEC) == 0);
    VT_CHECK(sock_fd_survives_exec(s) == 0);
    VT_CHECK(fcntl(d, F_SETFD, 0) == 0);
    VT_CHECK(sock_fd_survives_exec(s) == 1);

    sock_set_mode(s, VMMC_SOCK_KERNEL);
    VT_CHECK(hook_calls == 5 && hook_up == 0);
    vmmc_sock_set_mode_hook(NULL, NULL);
    sock_set_mode(o, VMMC_SOCK_KERNEL);
    VT_CHECK(hook_calls == 5);
    sock_put(s);
    sock_put(o);
    drop_close(fd);
    drop_close(d);
    drop_close(other);
    VT_CHECK(sock_fd_live() == base);
}

/* Thousands of descriptors, sparse numbers across several chunks. */
static void t_many(void)
{
    int base = sock_fd_live();
    struct rlimit rl;
    VT_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    if (rl.rlim_cur < rl.rlim_max && rl.rlim_cur < 8192) {
        rl.rlim_cur = rl.rlim_max < 8192 ? rl.rlim_max : 8192;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        VT_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    }
    int n = (int)(rl.rlim_cur > 5000 ? 4000 : rl.rlim_cur - 64);
    int *fds = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) {
        fds[i] = tcp();
        sock_t *s = sock_fd_new(fds[i], AF_INET);
        VT_CHECK(s);
        sock_put(s);
    }
    VT_CHECK(sock_fd_live() == base + n);
    for (int i = 0; i < n; i++) {
        sock_t *s = sock_get(fds[i]);
        VT_CHECK(s && s->fd == fds[i]);
        sock_put(s);
    }
    for (int i = 0; i < n; i += 2)
        drop_close(fds[i]);
    for (int i = 0; i < n; i++)
        VT_CHECK(vmmc_sock_is(fds[i]) == (i & 1));
    for (int i = 1; i < n; i += 2)
        drop_close(fds[i]);
    VT_CHECK(sock_fd_live() == base);
    /* a high number: dup2 far up */
    int hi = (int)(rl.rlim_cur - 1);
    int fd = tcp();
    VT_CHECK(sys_dup3(fd, hi, 0) == hi);
    VT_CHECK(sys_close(fd) == 0);
    sock_t *s = sock_fd_new(hi, AF_INET);
    VT_CHECK(s && vmmc_sock_is(hi));
    sock_put(s);
    drop_close(hi);
    free(fds);
    printf("%d descriptors and descriptor %d\n", n, hi);
}

/* Threads: readers look up descriptors that writers close and reopen;
 * every reference is given back and nothing is freed under a holder. */
#define NSLOT 16
static int slots[NSLOT];
static _Atomic int stop;
static pthread_mutex_t slot_lock[NSLOT];

static void *reader(void *arg)
{
    (void)arg;
    unsigned long long seed = (unsigned long long)(uintptr_t)pthread_self() | 1, hits = 0;
    while (!atomic_load(&stop)) {
        int fd = slots[vt_rand(&seed) % NSLOT];
        sock_t *s = sock_get(fd);
        if (s) {
            /* the object is live while held: its refs count is positive */
            VT_CHECK(atomic_load(&s->refs) > 0);
            VT_CHECK(s->domain == AF_INET);
            hits++;
            sock_put(s);
        }
    }
    return (void *)(uintptr_t)hits;
}

static void *writer(void *arg)
{
    int id = (int)(uintptr_t)arg;
    unsigned long long seed = (unsigned long long)id * 7919 + 1;
    for (int it = 0; it < 3000; it++) {
        int k = (int)(vt_rand(&seed) % NSLOT);
        pthread_mutex_lock(&slot_lock[k]);
        int fd = slots[k];
        sock_t *s = sock_get(fd);
        if (s) {
            VT_CHECK(sock_fd_drop(fd, s) == 1);
            sock_put(s);
            VT_CHECK(sys_close(fd) == 0);
        }
        int nfd = tcp();
        s = sock_fd_new(nfd, AF_INET);
        VT_CHECK(s);
        sock_put(s);
        slots[k] = nfd;
        pthread_mutex_unlock(&slot_lock[k]);
    }
    return NULL;
}

static void t_threads(void)
{
    int base = sock_fd_live();
    for (int i = 0; i < NSLOT; i++) {
        pthread_mutex_init(&slot_lock[i], NULL);
        slots[i] = tcp();
        sock_t *s = sock_fd_new(slots[i], AF_INET);
        sock_put(s);
    }
    pthread_t r[2], w[2];
    for (int i = 0; i < 2; i++)
        VT_CHECK(pthread_create(&r[i], NULL, reader, NULL) == 0);
    for (int i = 0; i < 2; i++)
        VT_CHECK(pthread_create(&w[i], NULL, writer, (void *)(uintptr_t)i) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(w[i], NULL);
    atomic_store(&stop, 1);
    unsigned long long hits = 0;
    for (int i = 0; i < 2; i++) {
        void *h;
        pthread_join(r[i], &h);
        hits += (uintptr_t)h;
    }
    VT_CHECK(sock_fd_live() == base + NSLOT);
    for (int i = 0; i < NSLOT; i++)
        drop_close(slots[i]);
    VT_CHECK(sock_fd_live() == base);
    printf("threads: %llu lookups found a socket\n", hits);
}

int main(void)
{
    t_basic();
    t_modes();
    t_many();
    t_threads();
    printf("ok\n");
    return 0;
}
