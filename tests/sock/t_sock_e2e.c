/* The layer end to end between two processes over the native API: the
 * upgrade (vmmc_sock_info says shm), echo of 1 byte to 16 MiB with every
 * byte checked, blocking and non-blocking with vmmc_sock_poll, many
 * connections at once, half-close, a killed peer, fork with a live
 * connection, EINTR. The parent serves; a forked child is the client (the
 * fork comes before any socket, so each process has its own endpoint). */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "sock_pair.h"

#define MIB (1u << 20)
static const size_t sizes[] = {1, 2, 100, 4095, 4096, 65536, 262145, MIB, 16 * MIB};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static uint8_t pat(uint64_t seed, size_t i)
{
    uint64_t x = (seed + i) * 0x9e3779b97f4a7c15ull;
    return (uint8_t)(x >> 56);
}

static void guard(int fd)
{
    struct timeval tv = {60, 0};
    VT_CHECK(vmmc_sock_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    VT_CHECK(vmmc_sock_setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
}

static void send_all(int fd, const void *b, size_t n)
{
    const uint8_t *p = b;
    while (n) {
        ssize_t r = vmmc_sock_send(fd, p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            VT_FAIL("send of %zu: %zd (%s)", n, r, strerror(errno));
        p += r;
        n -= (size_t)r;
    }
}

static void recv_all(int fd, void *b, size_t n)
{
    uint8_t *p = b;
    while (n) {
        ssize_t r = vmmc_sock_recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            VT_FAIL("recv of %zu: %zd (%s)", n, r, strerror(errno));
        p += r;
        n -= (size_t)r;
    }
}

static void expect_upgraded(int fd)
{
    vmmc_sock_info_t info;
    VT_CHECK(vmmc_sock_info(fd, &info) == 0);
    if (info.mode != VMMC_SOCK_VMMC || strcmp(info.transport, "shm") != 0)
        VT_FAIL("fd %d: mode %d transport %s, expected upgraded on shm", fd, info.mode,
                info.transport);
}

/* ---------------------------------------------------------------- client */

static int client_connect(const struct sockaddr_storage *a, socklen_t alen, int nonblock)
{
    int fd = vmmc_sock_socket(a->ss_family, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
    VT_CHECK(fd >= 0);
    int r = vmmc_sock_connect(fd, (const struct sockaddr *)a, alen);
    if (nonblock) {
        VT_CHECK(r == 0 || errno == EINPROGRESS);
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        VT_CHECK(vmmc_sock_poll(&p, 1, 60000) == 1 && p.revents == POLLOUT);
    } else {
        VT_CHECK(r == 0);
    }
    guard(fd);
    return fd;
}

/* Non-blocking echo of @p n bytes: send and receive interleaved by poll. */
static void echo_nonblock(int fd, size_t n, uint64_t seed)
{
    uint8_t *out = malloc(n), *in = malloc(n);
    for (size_t i = 0; i < n; i++)
        out[i] = pat(seed, i);
    uint64_t hdr = n;
    send_all(fd, &hdr, sizeof hdr); /* eight bytes fit in any ring */
    size_t sent = 0, got = 0;
    while (got < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN | (sent < n ? POLLOUT : 0)};
        int r = vmmc_sock_poll(&p, 1, 60000);
        VT_CHECK(r == 1);
        if ((p.revents & POLLOUT) && sent < n) {
            ssize_t w = vmmc_sock_send(fd, out + sent, n - sent, MSG_DONTWAIT);
            VT_CHECK(w > 0 || (w < 0 && errno == EAGAIN));
            if (w > 0)
                sent += (size_t)w;
        }
        if (p.revents & POLLIN) {
            ssize_t g = vmmc_sock_recv(fd, in + got, n - got, MSG_DONTWAIT);
            VT_CHECK(g > 0 || (g < 0 && errno == EAGAIN));
            if (g > 0)
                got += (size_t)g;
        }
        VT_CHECK(!(p.revents & (POLLERR | POLLHUP)));
    }
    for (size_t i = 0; i < n; i++)
        if (in[i] != out[i])
            VT_FAIL("echo of %zu: byte %zu is %#x, sent %#x", n, i, in[i], out[i]);
    free(out);
    free(in);
}

typedef struct {
    int fd;
    size_t n;
    uint64_t seed;
} tx_arg_t;

static void *tx_thread(void *arg)
{
    tx_arg_t *a = arg;
    uint8_t *out = malloc(a->n);
    for (size_t i = 0; i < a->n; i++)
        out[i] = pat(a->seed, i);
    send_all(a->fd, out, a->n);
    free(out);
    return NULL;
}

/* Blocking echo: a thread sends while this one receives. */
static void echo_block(int fd, size_t n, uint64_t seed)
{
    uint64_t hdr = n;
    send_all(fd, &hdr, sizeof hdr);
    tx_arg_t a = {fd, n, seed};
    pthread_t th;
    VT_CHECK(pthread_create(&th, NULL, tx_thread, &a) == 0);
    uint8_t *in = malloc(n);
    ssize_t got = vmmc_sock_recv(fd, in, n, MSG_WAITALL);
    if (got != (ssize_t)n)
        VT_FAIL("blocking echo of %zu: MSG_WAITALL read %zd (%s)", n, got,
                got < 0 ? strerror(errno) : "short");
    pthread_join(th, NULL);
    for (size_t i = 0; i < n; i++)
        if (in[i] != pat(seed, i))
            VT_FAIL("blocking echo of %zu: byte %zu differs", n, i);
    free(in);
}

/* ---------------------------------------------------------------- server */

/* Echo one connection until its client closes (a length, then the bytes). */
static void serve_echo(int fd)
{
    guard(fd);
    size_t cap = 64 * 1024;
    uint8_t *b = malloc(cap);
    for (;;) {
        uint64_t n;
        ssize_t r = vmmc_sock_recv(fd, &n, sizeof n, MSG_WAITALL);
        if (r == 0)
            break;
        VT_CHECK(r == sizeof n && n <= 16 * MIB);
        while (n) {
            size_t c = n < cap ? (size_t)n : cap;
            r = vmmc_sock_recv(fd, b, c, 0);
            VT_CHECK(r > 0);
            send_all(fd, b, (size_t)r);
            n -= (uint64_t)r;
        }
    }
    free(b);
}

static pid_t spawn(void (*fn)(const struct sockaddr_storage *, socklen_t), int *lfd,
                   struct sockaddr_storage *a, socklen_t *alen)
{
    *lfd = sp_listen(AF_INET, a, alen);
    pid_t pid = fork();
    VT_CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failing server leaves no client behind */
        /* the child leaves the listener to the parent without closing it
         * through the layer (its probe answers are the parent's) */
        fn(a, *alen);
        _exit(0);
    }
    return pid;
}

static void reap(pid_t pid)
{
    int st;
    VT_CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        VT_FAIL("client %d ended with status %#x", (int)pid, st);
}

/* ------------------------------------------------------------ the cases */

static int hook_fd = -1, hook_up = -1, hook_calls;
static void mode_hook(int fd, int up, void *arg)
{
    VT_CHECK(arg == &hook_calls);
    hook_fd = fd;
    hook_up = up;
    hook_calls++;
}

static void client_echo(const struct sockaddr_storage *a, socklen_t alen)
{
    vmmc_sock_set_mode_hook(mode_hook, &hook_calls);
    int fd = client_connect(a, alen, 0);
    expect_upgraded(fd);
    VT_CHECK(hook_calls == 1 && hook_fd == fd && hook_up == 1); /* told, from connect */
    vmmc_sock_set_mode_hook(NULL, NULL);
    for (unsigned i = 0; i < NSIZES; i++)
        echo_block(fd, sizes[i], i);
    VT_CHECK(vmmc_sock_close(fd) == 0);
    fd = client_connect(a, alen, 1);
    expect_upgraded(fd);
    for (unsigned i = 0; i < NSIZES; i++)
        echo_nonblock(fd, sizes[i], 100 + i);
    VT_CHECK(vmmc_sock_close(fd) == 0);
}

static void t_echo(void)
{
    int l;
    struct sockaddr_storage a;
    socklen_t alen;
    pid_t pid = spawn(client_echo, &l, &a, &alen);
    for (int k = 0; k < 2; k++) {
        int s = vmmc_sock_accept(l, NULL, NULL, 0);
        VT_CHECK(s >= 0);
        uint64_t n;
        guard(s);
        /* the first read takes the hello: then it is upgraded */
        VT_CHECK(vmmc_sock_recv(s, &n, sizeof n, MSG_PEEK) > 0);
        expect_upgraded(s);
        serve_echo(s);
        VT_CHECK(vmmc_sock_close(s) == 0);
    }
    reap(pid);
    vmmc_sock_close(l);
    printf("echo: 1 B .. 16 MiB, blocking and non-blocking, every byte checked\n");
}

#define NCONN 24
static void client_many(const struct sockaddr_storage *a, socklen_t alen)
{
    int fds[NCONN];
    for (int i = 0; i < NCONN; i++)
        fds[i] = client_connect(a, alen, i & 1);
    for (int i = 0; i < NCONN; i++) {
        uint64_t n = 1000 + (uint64_t)i * 333;
        uint8_t b[9000];
        for (size_t j = 0; j < n; j++)
            b[j] = pat((uint64_t)i, j);
        send_all(fds[i], &n, sizeof n);
        send_all(fds[i], b, (size_t)n);
    }
    for (int i = NCONN - 1; i >= 0; i--) {
        size_t n = 1000 + (size_t)i * 333;
        uint8_t b[9000];
        int fl = vmmc_sock_fcntl(fds[i], F_GETFL, 0);
        VT_CHECK(vmmc_sock_fcntl(fds[i], F_SETFL, fl & ~O_NONBLOCK) == 0);
        recv_all(fds[i], b, n);
        for (size_t j = 0; j < n; j++)
            VT_CHECK(b[j] == pat((uint64_t)i, j));
        expect_upgraded(fds[i]);
        VT_CHECK(vmmc_sock_close(fds[i]) == 0);
    }
}

/* The server multiplexes every connection with vmmc_sock_poll. */
static void t_many(void)
{
    int l;
    struct sockaddr_storage a;
    socklen_t alen;
    pid_t pid = spawn(client_many, &l, &a, &alen);
    VT_CHECK(vmmc_sock_fcntl(l, F_SETFL, O_NONBLOCK) == 0);
    struct pollfd p[NCONN + 1];
    struct {
        uint64_t n, need, got;
        uint8_t hdr_got, echoed;
        uint8_t buf[9000];
    } st[NCONN];
    memset(st, 0, sizeof st);
    int n = 0, done = 0;
    p[0].fd = l;
    p[0].events = POLLIN;
    while (done < NCONN) {
        int r = vmmc_sock_poll(p, (nfds_t)n + 1, 60000);
        VT_CHECK(r > 0);
        if (p[0].revents & POLLIN) {
            int s;
            while ((s = vmmc_sock_accept(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                VT_CHECK(n < NCONN);
                n++;
                p[n].fd = s;
                p[n].events = POLLIN;
            }
            VT_CHECK(errno == EAGAIN);
        }
        for (int i = 1; i <= n; i++) {
            if (p[i].fd < 0 || !(p[i].revents & POLLIN))
                continue;
            int k = i - 1;
            ssize_t g;
            if (st[k].echoed) {
                char e;
                VT_CHECK(vmmc_sock_recv(p[i].fd, &e, 1, 0) == 0); /* the client's close */
                VT_CHECK(vmmc_sock_close(p[i].fd) == 0);
                p[i].fd = -1;
                done++;
                continue;
            }
            if (st[k].hdr_got < 8) {
                g = vmmc_sock_recv(p[i].fd, (uint8_t *)&st[k].n + st[k].hdr_got,
                                   8 - st[k].hdr_got, 0);
                if (g > 0)
                    st[k].hdr_got = (uint8_t)(st[k].hdr_got + g);
            } else {
                g = vmmc_sock_recv(p[i].fd, st[k].buf + st[k].got, st[k].n - st[k].got, 0);
                if (g > 0)
                    st[k].got += (uint64_t)g;
            }
            VT_CHECK(g > 0 || (g < 0 && errno == EAGAIN));
            if (st[k].hdr_got == 8 && st[k].n && st[k].got == st[k].n) {
                VT_CHECK(st[k].n <= sizeof st[k].buf);
                expect_upgraded(p[i].fd);
                int fl = vmmc_sock_fcntl(p[i].fd, F_GETFL, 0);
                VT_CHECK(vmmc_sock_fcntl(p[i].fd, F_SETFL, fl & ~O_NONBLOCK) == 0);
                send_all(p[i].fd, st[k].buf, (size_t)st[k].n);
                st[k].echoed = 1; /* its close comes when the client has read it */
            }
        }
    }
    reap(pid);
    vmmc_sock_close(l);
    printf("many: %d connections at once through one poll loop\n", NCONN);
}

static void client_halfclose(const struct sockaddr_storage *a, socklen_t alen)
{
    int fd = client_connect(a, alen, 0);
    expect_upgraded(fd);
    send_all(fd, "request", 7);
    VT_CHECK(vmmc_sock_shutdown(fd, SHUT_WR) == 0);
    VT_CHECK(vmmc_sock_send(fd, "x", 1, MSG_NOSIGNAL) == -1 && errno == EPIPE);
    char b[16];
    recv_all(fd, b, 5);
    VT_CHECK(!memcmp(b, "reply", 5));
    VT_CHECK(vmmc_sock_recv(fd, b, sizeof b, 0) == 0);
    VT_CHECK(vmmc_sock_close(fd) == 0);
}

static void t_halfclose(void)
{
    int l;
    struct sockaddr_storage a;
    socklen_t alen;
    pid_t pid = spawn(client_halfclose, &l, &a, &alen);
    int s = vmmc_sock_accept(l, NULL, NULL, 0);
    guard(s);
    char b[16];
    recv_all(s, b, 7);
    VT_CHECK(!memcmp(b, "request", 7));
    expect_upgraded(s);
    VT_CHECK(vmmc_sock_recv(s, b, sizeof b, 0) == 0); /* the client's half-close */
    struct pollfd p = {.fd = s, .events = POLLIN | POLLRDHUP};
    VT_CHECK(vmmc_sock_poll(&p, 1, 1000) == 1 && (p.revents & POLLRDHUP));
    send_all(s, "reply", 5); /* the other direction still works */
    VT_CHECK(vmmc_sock_close(s) == 0);
    reap(pid);
    vmmc_sock_close(l);
    printf("half-close: end of stream one way, bytes the other\n");
}

static void client_sleep(const struct sockaddr_storage *a, socklen_t alen)
{
    int fd = client_connect(a, alen, 0);
    send_all(fd, "hi", 2);
    pause(); /* until killed */
}

static void t_killed(void)
{
    int l;
    struct sockaddr_storage a;
    socklen_t alen;
    pid_t pid = spawn(client_sleep, &l, &a, &alen);
    int s = vmmc_sock_accept(l, NULL, NULL, 0);
    guard(s);
    char b[4];
    recv_all(s, b, 2);
    expect_upgraded(s);
    VT_CHECK(kill(pid, SIGKILL) == 0);
    int st;
    VT_CHECK(waitpid(pid, &st, 0) == pid);
    ssize_t r = vmmc_sock_recv(s, b, sizeof b, 0); /* SO_RCVTIMEO bounds it: EAGAIN fails */
    VT_CHECK(r == 0 || (r < 0 && errno == ECONNRESET));
    /* as TCP: the first write after the peer's end may go through (the
     * peer's kernel answers it with a reset); the next one fails */
    r = vmmc_sock_send(s, "x", 1, MSG_NOSIGNAL);
    if (r == 1)
        r = vmmc_sock_send(s, "x", 1, MSG_NOSIGNAL);
    VT_CHECK(r < 0 && (errno == EPIPE || errno == ECONNRESET));
    VT_CHECK(vmmc_sock_close(s) == 0);
    vmmc_sock_close(l);
    printf("killed peer: read %zd, then the write fails\n", r);
}

/* After the upgrade the client forks: both processes then write and read
 * the connection, in turns, and every byte arrives once and in order. */
static void client_fork(const struct sockaddr_storage *a, socklen_t alen)
{
    int fd = client_connect(a, alen, 0);
    expect_upgraded(fd);
    send_all(fd, "P1", 2);
    char b[8];
    recv_all(fd, b, 2);
    VT_CHECK(!memcmp(b, "S1", 2));
    pid_t c = fork();
    VT_CHECK(c >= 0);
    if (c == 0) {
        send_all(fd, "C1", 2);
        recv_all(fd, b, 2);
        VT_CHECK(!memcmp(b, "S2", 2));
        _exit(0);
    }
    int st;
    VT_CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    send_all(fd, "P2", 2);
    recv_all(fd, b, 2);
    VT_CHECK(!memcmp(b, "S3", 2));
    VT_CHECK(vmmc_sock_close(fd) == 0);
}

static void t_fork(void)
{
    int l;
    struct sockaddr_storage a;
    socklen_t alen;
    pid_t pid = spawn(client_fork, &l, &a, &alen);
    int s = vmmc_sock_accept(l, NULL, NULL, 0);
    guard(s);
    char b[8];
    recv_all(s, b, 2);
    VT_CHECK(!memcmp(b, "P1", 2));
    send_all(s, "S1", 2);
    recv_all(s, b, 2);
    VT_CHECK(!memcmp(b, "C1", 2));
    send_all(s, "S2", 2);
    recv_all(s, b, 2);
    VT_CHECK(!memcmp(b, "P2", 2));
    send_all(s, "S3", 2);
    VT_CHECK(vmmc_sock_recv(s, b, sizeof b, 0) == 0);
    VT_CHECK(vmmc_sock_close(s) == 0);
    reap(pid);
    vmmc_sock_close(l);
    printf("fork: parent and child both used the connection\n");
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

/* A blocked read on an upgraded socket: a signal without SA_RESTART ends
 * it with EINTR; with SA_RESTART it goes on and gets the bytes. */
static void client_eintr(const struct sockaddr_storage *a, socklen_t alen)
{
    int fd = client_connect(a, alen, 0);
    expect_upgraded(fd);
    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 0}, {0, 100000}};
    setitimer(ITIMER_REAL, &it, NULL);
    char b[4];
    VT_CHECK(vmmc_sock_recv(fd, b, 1, 0) == -1 && errno == EINTR && alarms == 1);
    send_all(fd, "go", 2); /* the server answers 300 ms after this */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    setitimer(ITIMER_REAL, &it, NULL);
    VT_CHECK(vmmc_sock_recv(fd, b, 2, MSG_WAITALL) == 2 && !memcmp(b, "ok", 2));
    VT_CHECK(alarms == 2);
    VT_CHECK(vmmc_sock_close(fd) == 0);
}

static void t_eintr(void)
{
    int l;
    struct sockaddr_storage a;
    socklen_t alen;
    pid_t pid = spawn(client_eintr, &l, &a, &alen);
    int s = vmmc_sock_accept(l, NULL, NULL, 0);
    guard(s);
    char b[4];
    recv_all(s, b, 2);
    usleep(300000);
    send_all(s, "ok", 2);
    VT_CHECK(vmmc_sock_recv(s, b, sizeof b, 0) == 0);
    vmmc_sock_close(s);
    reap(pid);
    vmmc_sock_close(l);
    printf("EINTR: without SA_RESTART interrupted, with it restarted\n");
}

/* A one-shot server closes its listener right after accept(), before
 * the first read: the first bytes it reads are the client's, never the
 * upgrade's records, and both ends agree on the mode (upgraded when the
 * client's probe was answered before the close). */
static void client_oneshot(const struct sockaddr_storage *a, socklen_t alen)
{
    int fd = client_connect(a, alen, 0);
    /* the listener may close before this client's probe gets there: then
     * both ends stay on the kernel, and they must agree */
    vmmc_sock_info_t info;
    VT_CHECK(vmmc_sock_info(fd, &info) == 0);
    char m = (char)('0' + info.mode);
    send_all(fd, "first", 5);
    send_all(fd, &m, 1);
    char b[8];
    recv_all(fd, b, 4);
    VT_CHECK(!memcmp(b, "done", 4));
    VT_CHECK(vmmc_sock_close(fd) == 0);
}

static void t_oneshot(void)
{
    int l;
    struct sockaddr_storage a;
    socklen_t alen;
    pid_t pid = spawn(client_oneshot, &l, &a, &alen);
    int s = vmmc_sock_accept(l, NULL, NULL, 0);
    VT_CHECK(s >= 0);
    /* wait (in the kernel, without a call on the socket) for the client's
     * first bytes: its probe has then been answered, its hello is there */
    struct pollfd p = {.fd = s, .events = POLLIN};
    VT_CHECK(poll(&p, 1, 60000) == 1);
    VT_CHECK(vmmc_sock_close(l) == 0);
    guard(s);
    char b[8];
    recv_all(s, b, 5);
    if (memcmp(b, "first", 5) != 0)
        VT_FAIL("the first bytes read are not the client's: %02x %02x %02x", b[0] & 0xff,
                b[1] & 0xff, b[2] & 0xff);
    recv_all(s, b, 1);
    vmmc_sock_info_t info;
    VT_CHECK(vmmc_sock_info(s, &info) == 0);
    if (b[0] != '0' + (char)info.mode)
        VT_FAIL("the client is in mode %c, the server in mode %d", b[0], info.mode);
    if (info.mode == VMMC_SOCK_VMMC)
        expect_upgraded(s);
    else
        VT_CHECK(info.mode == VMMC_SOCK_KERNEL);
    send_all(s, "done", 4);
    VT_CHECK(vmmc_sock_recv(s, b, sizeof b, 0) == 0);
    VT_CHECK(vmmc_sock_close(s) == 0);
    reap(pid);
    printf("one-shot: the listener closed before the first read; %s\n",
           info.mode == VMMC_SOCK_VMMC ? "upgraded" : "both on the kernel");
}

/* exec: the client reverts the connection (vmmc_sock_before_exec) and
 * execs this program, which goes on with the same descriptor as a kernel
 * socket: the bytes before and after the exec arrive once, in order. */
static char *self_exe;

static void client_exec(const struct sockaddr_storage *a, socklen_t alen)
{
    int fd = client_connect(a, alen, 0);
    expect_upgraded(fd);
    send_all(fd, "before", 6);
    char b[8];
    recv_all(fd, b, 2);
    VT_CHECK(!memcmp(b, "S1", 2));
    int keep = vmmc_sock_socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); /* exec closes it */
    VT_CHECK(vmmc_sock_before_exec() == 0);
    vmmc_sock_info_t info;
    VT_CHECK(vmmc_sock_info(fd, &info) == 0 && info.mode == VMMC_SOCK_KERNEL);
    char arg[16];
    snprintf(arg, sizeof arg, "%d", fd);
    execl(self_exe, self_exe, "exec-child", arg, (char *)NULL);
    (void)keep;
    VT_FAIL("exec: %s", strerror(errno));
}

static int exec_child(int fd)
{
    VT_CHECK(vmmc_sock_adopt(fd) == 0);
    vmmc_sock_info_t info;
    VT_CHECK(vmmc_sock_info(fd, &info) == 0 && info.mode == VMMC_SOCK_KERNEL);
    guard(fd);
    char b[8];
    recv_all(fd, b, 2);
    VT_CHECK(!memcmp(b, "S2", 2));
    send_all(fd, "after", 5);
    VT_CHECK(vmmc_sock_close(fd) == 0);
    return 0;
}

static void t_exec(void)
{
    int l;
    struct sockaddr_storage a;
    socklen_t alen;
    pid_t pid = spawn(client_exec, &l, &a, &alen);
    int s = vmmc_sock_accept(l, NULL, NULL, 0);
    guard(s);
    char b[8];
    recv_all(s, b, 6);
    VT_CHECK(!memcmp(b, "before", 6));
    expect_upgraded(s);
    send_all(s, "S1", 2);
    send_all(s, "S2", 2); /* may cross the revert */
    recv_all(s, b, 5);
    VT_CHECK(!memcmp(b, "after", 5));
    VT_CHECK(vmmc_sock_recv(s, b, sizeof b, 0) == 0);
    VT_CHECK(vmmc_sock_close(s) == 0);
    reap(pid);
    vmmc_sock_close(l);
    printf("exec: the connection went back to TCP and the new program kept it\n");
}

int main(int argc, char **argv)
{
    self_exe = argv[0];
    if (argc > 2 && !strcmp(argv[1], "exec-child"))
        return exec_child(atoi(argv[2]));
    signal(SIGPIPE, SIG_IGN);
    const char *only = argc > 1 ? argv[1] : NULL;
    struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {{"echo", t_echo},       {"many", t_many}, {"halfclose", t_halfclose},
                 {"killed", t_killed},   {"fork", t_fork}, {"eintr", t_eintr},
                 {"exec", t_exec},       {"oneshot", t_oneshot}};
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!only || !strcmp(only, cases[i].name))
            cases[i].fn();
    printf("ok\n");
    return 0;
}
