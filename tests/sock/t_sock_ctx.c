/* The sockets layer's process context (src/sock/sock_ctx.c): made once,
 * from any number of threads at once; the sock thread runs watch callbacks
 * with every signal blocked, and after sock_ctx_unwatch() returns the
 * callback is not running and never runs again; a descriptor closed while
 * watched does not make the thread spin; a fork child gets a fresh context
 * of its own while the parent's goes on. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sock/sock.h"
#include "vtest.h"

static pid_t gettid_(void)
{
    return (pid_t)syscall(SYS_gettid);
}

/* ---- made once ---------------------------------------------------------- */

static sock_ctx_t *got[8];

static void *getter(void *p)
{
    got[(long)p] = sock_ctx_get();
    return NULL;
}

static void test_once(void)
{
    VT_CHECK(sock_ctx_peek() == NULL);
    pthread_t t[8];
    for (long i = 0; i < 8; i++)
        VT_CHECK(pthread_create(&t[i], NULL, getter, (void *)i) == 0);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    VT_CHECK(got[0] != NULL);
    for (int i = 1; i < 8; i++)
        VT_CHECK(got[i] == got[0]);
    VT_CHECK(sock_ctx_peek() == got[0]);
    VT_CHECK(sock_ctx_get() == got[0]);
    VT_CHECK(sock_ctx_event_fd(got[0]) >= 0);
    char addr[VMMC_ADDR_MAX];
    size_t len = sizeof addr;
    VT_OK(vmmc_ep_addr(sock_ctx_ep(got[0]), addr, &len));
    /* Its own address gives its own handle (the endpoint is usable). */
    int peer = -1;
    VT_CHECK(sock_ctx_connect(got[0], addr, len, &peer) == 0 && peer == 0);
    errno = 0;
    VT_CHECK(sock_ctx_connect(got[0], "garbage", 7, &peer) == -1 && errno == EINVAL);
    sock_ctx_drain(got[0]);
    errno = 0;
    VT_CHECK(sock_ctx_watch(-1, POLLIN, NULL, NULL) == -1 && errno == EINVAL);
}

/* ---- the callback's thread: signals blocked ------------------------------ */

static _Atomic pid_t sock_tid;
static _Atomic int mask_ok = -1;
static _Atomic int hits;
static _Atomic int sig_in_sock_thread;
static _Atomic int sigs;

static void on_pipe(int fd, short rev, void *arg)
{
    (void)arg;
    char c;
    if (rev & POLLIN)
        VT_CHECK(read(fd, &c, 1) == 1);
    sigset_t m;
    pthread_sigmask(SIG_BLOCK, NULL, &m);
    mask_ok = sigismember(&m, SIGUSR1) && sigismember(&m, SIGINT) && sigismember(&m, SIGTERM) &&
              sigismember(&m, SIGALRM) && sigismember(&m, SIGCHLD);
    sock_tid = gettid_();
    hits++;
}

static void on_usr1(int sig)
{
    (void)sig;
    if (gettid_() == sock_tid)
        sig_in_sock_thread = 1;
    sigs++;
}

static void wait_hits(int n)
{
    double end = vt_now() + 20;
    while (hits < n) {
        VT_CHECK(vt_now() < end);
        usleep(1000);
    }
}

static void test_signals(void)
{
    int p[2];
    VT_CHECK(pipe(p) == 0);
    VT_CHECK(sock_ctx_watch(p[0], POLLIN, on_pipe, NULL) == 0);
    hits = 0;
    VT_CHECK(write(p[1], "x", 1) == 1);
    wait_hits(1);
    VT_CHECK(mask_ok == 1);
    VT_CHECK(sock_tid != gettid_());
    signal(SIGUSR1, on_usr1);
    for (int i = 0; i < 50; i++) {
        kill(getpid(), SIGUSR1);
        VT_CHECK(write(p[1], "x", 1) == 1); /* keep the sock thread busy too */
    }
    wait_hits(51);
    double end = vt_now() + 20;
    while (sigs < 1) {
        VT_CHECK(vt_now() < end);
        usleep(1000);
    }
    VT_CHECK(sig_in_sock_thread == 0);
    sock_ctx_unwatch(p[0], NULL);
    close(p[0]);
    close(p[1]);
    signal(SIGUSR1, SIG_DFL);
}

/* ---- unwatch: not running after it returns ------------------------------- */

typedef struct target {
    _Atomic int alive;
    _Atomic int runs;
    _Atomic int started;
    _Atomic int bad;
    int self_unwatch;
} target_t;

static void on_target(int fd, short rev, void *arg)
{
    target_t *t = arg;
    t->started++;
    if (!t->alive)
        t->bad = 1;
    if (t->self_unwatch) {
        t->runs++;
        sock_ctx_unwatch(fd, arg); /* from the callback: must not wait for itself */
        return;
    }
    /* Linger so an unwatch from another thread often meets a running call. */
    for (volatile int i = 0; i < 200000; i++)
        ;
    (void)rev;
    if (!t->alive)
        t->bad = 1;
    t->runs++;
}

static void test_unwatch_race(void)
{
    int p[2];
    VT_CHECK(pipe(p) == 0);
    target_t t = {.alive = 1};
    VT_CHECK(write(p[1], "x", 1) == 1); /* readable for good: it fires again and again */
    unsigned long long seed = 42;
    for (int i = 0; i < 400; i++) {
        t.alive = 1;
        int before = t.started;
        VT_CHECK(sock_ctx_watch(p[0], POLLIN, on_target, &t) == 0);
        if (i & 1) {
            /* Unwatch while the callback runs (it lingers). */
            double end = vt_now() + 20;
            while (t.started == before) {
                VT_CHECK(vt_now() < end);
                sched_yield();
            }
        } else {
            for (unsigned k = (unsigned)(vt_rand(&seed) % 2000); k; k--)
                __asm__ volatile("" ::: "memory");
        }
        sock_ctx_unwatch(p[0], &t);
        t.alive = 0;
        VT_CHECK(t.bad == 0);
    }
    usleep(20000);
    VT_CHECK(t.bad == 0);
    VT_CHECK(t.runs > 0);

    /* A callback that unwatches itself runs once. */
    target_t s = {.alive = 1, .self_unwatch = 1};
    VT_CHECK(sock_ctx_watch(p[0], POLLIN, on_target, &s) == 0);
    double end = vt_now() + 20;
    while (s.runs == 0) {
        VT_CHECK(vt_now() < end);
        usleep(1000);
    }
    usleep(50000);
    VT_CHECK(s.runs == 1);
    close(p[0]);
    close(p[1]);
}

/* ---- a descriptor closed while watched ---------------------------------- */

static _Atomic int nval;

static void on_nval(int fd, short rev, void *arg)
{
    (void)fd;
    (void)arg;
    if (rev & POLLNVAL)
        nval++;
}

static void test_nval(void)
{
    int p[2], q[2];
    VT_CHECK(pipe(q) == 0); /* before: its numbers are not p's */
    VT_CHECK(pipe(p) == 0);
    VT_CHECK(sock_ctx_watch(p[0], POLLIN, on_nval, NULL) == 0);
    close(p[0]);
    close(p[1]);
    /* Wake the thread (the set changes) so it polls the closed number. */
    VT_CHECK(sock_ctx_watch(q[0], POLLIN, on_nval, &q) == 0);
    double end = vt_now() + 20;
    while (nval == 0) {
        VT_CHECK(vt_now() < end);
        usleep(1000);
    }
    usleep(100000);
    /* Reported once, then left out of the poll set (no spinning). */
    VT_CHECK(nval == 1);
    sock_ctx_unwatch(q[0], &q);
    close(q[0]);
    close(q[1]);
}

/* ---- fork ---------------------------------------------------------------- */

static void test_fork(void)
{
    sock_ctx_t *parent = sock_ctx_get();
    char pa[VMMC_ADDR_MAX], ca[VMMC_ADDR_MAX];
    size_t plen = sizeof pa, clen = sizeof ca;
    VT_OK(vmmc_ep_addr(sock_ctx_ep(parent), pa, &plen));
    int ap[2];
    VT_CHECK(pipe(ap) == 0);
    pid_t pid = fork();
    VT_CHECK(pid >= 0);
    if (pid == 0) {
        alarm(30);
        close(ap[0]);
        VT_CHECK(sock_ctx_peek() == NULL);
        sock_ctx_t *c = sock_ctx_get();
        VT_CHECK(c != NULL && c != parent);
        VT_OK(vmmc_ep_addr(sock_ctx_ep(c), ca, &clen));
        VT_CHECK(write(ap[1], &clen, sizeof clen) == sizeof clen);
        VT_CHECK(write(ap[1], ca, clen) == (ssize_t)clen);
        /* The child's own thread runs its callbacks. */
        int p[2];
        VT_CHECK(pipe(p) == 0);
        hits = 0;
        VT_CHECK(sock_ctx_watch(p[0], POLLIN, on_pipe, NULL) == 0);
        VT_CHECK(write(p[1], "x", 1) == 1);
        wait_hits(1);
        sock_ctx_unwatch(p[0], NULL);
        _exit(0);
    }
    close(ap[1]);
    VT_CHECK(read(ap[0], &clen, sizeof clen) == sizeof clen && clen <= sizeof ca);
    VT_CHECK(read(ap[0], ca, clen) == (ssize_t)clen);
    close(ap[0]);
    VT_CHECK(clen != plen || memcmp(ca, pa, plen) != 0);
    int st;
    VT_CHECK(waitpid(pid, &st, 0) == pid);
    VT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* The parent's context goes on. */
    VT_CHECK(sock_ctx_peek() == parent);
    int p[2];
    VT_CHECK(pipe(p) == 0);
    hits = 0;
    VT_CHECK(sock_ctx_watch(p[0], POLLIN, on_pipe, NULL) == 0);
    VT_CHECK(write(p[1], "x", 1) == 1);
    wait_hits(1);
    sock_ctx_unwatch(p[0], NULL);
    close(p[0]);
    close(p[1]);
}

/* ---- a watch follows its socket to a dup (sock_ctx_move) ----------------- */

static _Atomic int moved_fd = -1;
static _Atomic int unwatched;
static _Atomic int late_calls;

static void on_moved(int fd, short rev, void *arg)
{
    (void)arg;
    if (unwatched)
        late_calls++;
    moved_fd = fd;
    on_pipe(fd, rev, NULL);
}

static void test_move(void)
{
    int p[2], tag;
    VT_CHECK(pipe(p) == 0);
    hits = 0;
    VT_CHECK(sock_ctx_watch(p[0], POLLIN, on_moved, &tag) == 0);
    int d = dup(p[0]);
    VT_CHECK(d >= 0);
    sock_ctx_move(&tag, d);
    sock_ctx_move(&tag, -1); /* no descriptor: nothing */
    sock_ctx_move(&d, d);    /* not watched: nothing */
    VT_CHECK(close(p[0]) == 0); /* the number the watch began on */
    /* polled through the dup, not paused by the closed number */
    VT_CHECK(write(p[1], "x", 1) == 1);
    wait_hits(1);
    VT_CHECK(moved_fd == d);
    VT_CHECK(write(p[1], "y", 1) == 1);
    wait_hits(2);
    VT_CHECK(moved_fd == d);
    /* unwatched by its argument, whatever number the caller still knows */
    sock_ctx_unwatch(p[0], &tag);
    unwatched = 1;
    VT_CHECK(write(p[1], "z", 1) == 1);
    usleep(100000);
    VT_CHECK(late_calls == 0);
    close(d);
    close(p[1]);
}

int main(void)
{
    alarm(120);
    test_once();
    test_signals();
    test_unwatch_race();
    test_nval();
    test_move();
    test_fork();
    printf("t_sock_ctx: ok\n");
    return 0;
}
