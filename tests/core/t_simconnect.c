/* Simultaneous connect: two processes, each with an endpoint of its own,
 * connect to each other and import each other's export at the same moment
 * (released together by a barrier, with a little jitter that changes from
 * round to round so that every interleaving of the two handshakes comes up),
 * many rounds, each with fresh endpoints. Every round must end with one
 * handle per peer (the same on both sides of the race between vmmc_connect
 * and an accepted handshake), both imports made, and notifications going
 * both ways twice: a live peer is never taken for dead (a second handshake
 * from the same peer must not close the first one's connection).
 *
 * Modes, by round: both listen and connect before the barrier; both listen
 * and connect only after it (the other's handshake may come first: connect
 * and accept race for the handle); neither listens, both connect before;
 * both listen and each first tries an import whose handshake answer it
 * does not see in time (an interposed recvmsg finds nothing meanwhile), so
 * that attempt ends at its deadline after the peer took the connection:
 * the next import must go on from there, and nobody is taken for dead.
 * Runs over shm, and over udp with VMMC_TRANSPORT=udp.
 * usage: t_simconnect [ROUNDS] (default 150). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vtest.h"

typedef struct side {
    vmmc_ep_t *ep;
    volatile uint64_t *buf;
    volatile int got;
    int sk;     /* the socketpair to the other process */
    int who;    /* 0 parent, 1 child */
} side_t;

/* While set, this thread's recvmsg() finds nothing: a handshake answer
 * "comes late" however fast the peer is (the library's calls bind to this
 * definition; the control thread's are not affected). */
static __thread int deaf;

ssize_t recvmsg(int fd, struct msghdr *mh, int flags)
{
    if (deaf) {
        errno = EAGAIN;
        return -1;
    }
    return syscall(SYS_recvmsg, fd, mh, flags);
}

static void on_note(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    (void)n;
    side_t *s = arg;
    __atomic_add_fetch(&s->got, 1, __ATOMIC_RELEASE);
}

/* Bounded read/write of exactly @len bytes on the socketpair. */
static void xfer(int sk, void *buf, size_t len, int out)
{
    size_t done = 0;
    double t0 = vt_now();
    while (done < len) {
        struct pollfd p = {sk, out ? POLLOUT : POLLIN, 0};
        if (vt_now() - t0 > 60)
            VT_FAIL("the other process did not answer in 60 s");
        if (poll(&p, 1, 1000) <= 0)
            continue;
        ssize_t r = out ? write(sk, (char *)buf + done, len - done)
                        : read(sk, (char *)buf + done, len - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            VT_FAIL("the other process went away (%s)", r < 0 ? strerror(errno) : "EOF");
        done += (size_t)r;
    }
}

static void barrier(side_t *s)
{
    char c = 'b';
    xfer(s->sk, &c, 1, 1);
    xfer(s->sk, &c, 1, 0);
    VT_CHECK(c == 'b');
}

/* Wait (bounded) until @n notifications arrived. */
static void wait_notes(side_t *s, int n, int round)
{
    double t0 = vt_now();
    while (__atomic_load_n(&s->got, __ATOMIC_ACQUIRE) < n) {
        if (vt_now() - t0 > 30)
            VT_FAIL("round %d, side %d: %d of %d notifications in 30 s", round, s->who,
                    s->got, n);
        int r = vmmc_wait(s->ep, 500);
        if (r < 0 && r != VMMC_ERR_TIMEOUT)
            VT_FAIL("round %d, side %d: vmmc_wait: %s", round, s->who, vmmc_strerror(r));
    }
}

static void round_run(side_t *s, int round, unsigned long long *rnd)
{
    int mode = round % 4;
    s->got = 0;
    VT_OK(vmmc_ep_open(NULL, &s->ep));
    void *mem;
    VT_OK(vmmc_mem_alloc(s->ep, 4096, &mem));
    s->buf = mem;
    vmmc_export_params_t ep = {.field_mask = VMMC_EXPORT_PARAM_HANDLER, .name = "x",
                               .addr = mem, .length = 4096, .handler = on_note,
                               .handler_arg = s};
    vmmc_export_t *ex;
    VT_OK(vmmc_export(s->ep, &ep, &ex));
    if (mode != 2)
        VT_OK(vmmc_listen(s->ep, NULL, NULL));
    char mine[VMMC_ADDR_MAX], theirs[VMMC_ADDR_MAX];
    size_t ml = sizeof mine;
    VT_OK(vmmc_ep_addr(s->ep, mine, &ml));
    uint32_t l32 = (uint32_t)ml, tl32;
    xfer(s->sk, &l32, sizeof l32, 1);
    xfer(s->sk, mine, ml, 1);
    xfer(s->sk, &tl32, sizeof tl32, 0);
    VT_CHECK(tl32 > 0 && tl32 <= sizeof theirs);
    xfer(s->sk, theirs, tl32, 0);
    int h = -1;
    if (mode != 1)
        VT_OK(vmmc_connect(s->ep, theirs, tl32, &h));
    barrier(s);
    /* a few microseconds of jitter on one side or the other */
    unsigned long long r = vt_rand(rnd);
    if ((int)(r & 1) == s->who) {
        double until = vt_now() + (double)((r >> 8) % 300) * 1e-6;
        while (vt_now() < until)
            ;
    }
    if (mode == 1)
        VT_OK(vmmc_connect(s->ep, theirs, tl32, &h));
    vmmc_proxy_t *px;
    int rc;
    if (mode == 3) {
        /* impatient: an attempt whose handshake answer comes too late (it
         * is there, but this thread does not see it in time) gives up; that
         * must not cost the connection (nor make the peer take us for
         * dead), and the next attempt must succeed */
        deaf = 1;
        rc = vmmc_import(s->ep, h, "x", 20, &px);
        deaf = 0;
        if (rc == VMMC_OK)
            VT_OK(vmmc_unimport(px));
        else if (rc != VMMC_ERR_TIMEOUT)
            VT_FAIL("round %d, side %d: an import that ran out of time: %s", round, s->who,
                    vmmc_last_error());
    }
    rc = vmmc_import(s->ep, h, "x", 20000, &px);
    if (rc != VMMC_OK)
        VT_FAIL("round %d (mode %d), side %d: import from handle %d: %s", round, mode, s->who, h,
                vmmc_strerror(rc));
    /* one handle for the peer, whoever created it */
    VT_CHECK(h == 1 && vmmc_peer_count(s->ep) == 2);
    uint64_t v = ((uint64_t)round << 8) | (uint64_t)s->who;
    VT_OK(vmmc_send(px, 8 * (size_t)s->who, &v, sizeof v, VMMC_SEND_NOTIFY));
    wait_notes(s, 1, round);
    VT_CHECK(s->buf[1 - s->who] == (((uint64_t)round << 8) | (uint64_t)(1 - s->who)));
    barrier(s);
    /* both handshakes are over: the peer is still alive, both ways */
    v |= 1ull << 63;
    rc = vmmc_send(px, 8 * (size_t)s->who, &v, sizeof v, VMMC_SEND_NOTIFY);
    if (rc != VMMC_OK)
        VT_FAIL("round %d (mode %d), side %d: second send: %s", round, mode, s->who,
                vmmc_last_error());
    wait_notes(s, 2, round);
    VT_CHECK(s->buf[1 - s->who] ==
             ((1ull << 63) | ((uint64_t)round << 8) | (uint64_t)(1 - s->who)));
    VT_CHECK(vmmc_peer_count(s->ep) == 2);
    barrier(s);
    VT_OK(vmmc_unimport(px));
    barrier(s);
    VT_OK(vmmc_ep_close(s->ep));
}

int main(int argc, char **argv)
{
    static const char *vars[] = {"VMMC_LAUNCHER", "VMMC_BOOTSTRAP", "VMMC_RANK", "VMMC_SIZE",
                                 "PMIX_RANK", "PMIX_NAMESPACE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    vt_require_transport();
    int rounds = argc > 1 ? atoi(argv[1]) : 150;
    VT_CHECK(rounds > 0);
    int sv[2];
    VT_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    pid_t pid = fork();
    VT_CHECK(pid >= 0);
    side_t s = {.who = pid == 0, .sk = sv[pid == 0 ? 1 : 0]};
    close(sv[pid == 0 ? 0 : 1]);
    unsigned long long rnd = 0x5eed0000ull + (unsigned long long)s.who;
    double t0 = vt_now();
    for (int r = 0; r < rounds; r++)
        round_run(&s, r, &rnd);
    if (pid == 0)
        _exit(0);
    int st = 0;
    VT_CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        VT_FAIL("the child failed (status %#x)", st);
    printf("t_simconnect: %d rounds of simultaneous connects in %.1f s: ok\n", rounds,
           vt_now() - t0);
    return 0;
}
