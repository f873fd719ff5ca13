/* The public calls on sockets that stay on the kernel behave as the
 * kernel's own calls: same results, same errno, same signals. Each check
 * makes the vmmc call and the plain call on a loopback pair of each kind. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/time.h>

#include "sock/sock_api.h"
#include "sock_pair.h"

/* Both calls give the same result and, on failure, the same errno. */
#define SAME(vcall, rcall)                                                                   \
    do {                                                                                     \
        errno = 0;                                                                           \
        long v_ = (long)(vcall);                                                             \
        int ve_ = errno;                                                                     \
        errno = 0;                                                                           \
        long r_ = (long)(rcall);                                                             \
        int re_ = errno;                                                                     \
        if (v_ != r_ || (r_ < 0 && ve_ != re_))                                              \
            VT_FAIL("%s -> %ld (%s) but %s -> %ld (%s)", #vcall, v_, strerror(ve_), #rcall,  \
                    r_, strerror(re_));                                                      \
    } while (0)

static _Atomic int sigpipes, sigalrms;
static int upgrade; /* VMMC_SOCK_UPGRADE is on: the pairs made here upgrade */
static void on_pipe(int sig)
{
    (void)sig;
    sigpipes++;
}
static void on_alrm(int sig)
{
    (void)sig;
    sigalrms++;
}

static void t_bad_fds(void)
{
    char b[4];
    int p[2];
    VT_CHECK(pipe(p) == 0);
    int closed = dup(p[0]);
    close(closed);
    int bad[] = {-1, closed, p[0], 1 << 29};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int fd = bad[i];
        SAME(vmmc_sock_recv(fd, b, 4, MSG_DONTWAIT), recv(fd, b, 4, MSG_DONTWAIT));
        SAME(vmmc_sock_send(fd, b, 4, MSG_DONTWAIT), send(fd, b, 4, MSG_DONTWAIT));
        SAME(vmmc_sock_shutdown(fd, SHUT_RDWR), shutdown(fd, SHUT_RDWR));
        SAME(vmmc_sock_listen(fd, 4), listen(fd, 4));
        SAME(vmmc_sock_accept(fd, NULL, NULL, 0), accept4(fd, NULL, NULL, 0));
        if (fd != p[0])
            SAME(vmmc_sock_dup(fd), dup(fd));
        int one = 1;
        SAME(vmmc_sock_setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one),
             setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one));
        VT_CHECK(vmmc_sock_info(fd, &(vmmc_sock_info_t){0}) == -1 && errno == EBADF);
        VT_CHECK(vmmc_sock_ready(fd, POLLIN) == -1 && errno == EBADF);
        VT_CHECK(strstr(vmmc_last_error(), "not a vmmc socket") != NULL);
    }
    /* adopt refuses what is not TCP, with the reason */
    VT_CHECK(vmmc_sock_adopt(p[0]) == -1 && errno == ENOTSOCK);
    VT_CHECK(vmmc_sock_adopt(closed) == -1 && errno == EBADF);
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    VT_CHECK(vmmc_sock_adopt(u) == -1 && errno == EPROTONOSUPPORT);
    VT_CHECK(strstr(vmmc_last_error(), "not a TCP socket") != NULL);
    close(u);
    /* a listener made elsewhere: adopted as listening, answered from now on */
    struct sockaddr_storage la;
    socklen_t lalen;
    int vl = sp_listen(AF_INET, &la, &lalen);
    vmmc_sock_close(vl);
    int rl = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    VT_CHECK(setsockopt(rl, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
    VT_CHECK(bind(rl, (struct sockaddr *)&la, lalen) == 0 && listen(rl, 4) == 0);
    VT_CHECK(vmmc_sock_adopt(rl) == 0 && vmmc_sock_adopt(rl) == 0);
    vmmc_sock_info_t li;
    VT_CHECK(vmmc_sock_info(rl, &li) == 0 && li.mode == VMMC_SOCK_LISTENING);
    int rc = vmmc_sock_socket(AF_INET, SOCK_STREAM, 0);
    VT_CHECK(vmmc_sock_connect(rc, (struct sockaddr *)&la, lalen) == 0);
    int ra = vmmc_sock_accept(rl, NULL, NULL, 0);
    VT_CHECK(ra >= 0 && vmmc_sock_is(ra));
    VT_CHECK(vmmc_sock_send(rc, "A", 1, 0) == 1);
    char a1;
    VT_CHECK(vmmc_sock_recv(ra, &a1, 1, 0) == 1 && a1 == 'A');
    VT_CHECK(vmmc_sock_info(rc, &li) == 0 && li.mode == (upgrade ? VMMC_SOCK_VMMC : VMMC_SOCK_KERNEL));
    vmmc_sock_close(ra);
    vmmc_sock_close(rc);
    vmmc_sock_close(rl);
    close(p[0]);
    close(p[1]);
    /* socket() of other kinds */
    VT_CHECK(vmmc_sock_socket(AF_UNIX, SOCK_STREAM, 0) == -1 && errno == EAFNOSUPPORT);
    VT_CHECK(vmmc_sock_socket(AF_INET, SOCK_DGRAM, 0) == -1 && errno == EPROTONOSUPPORT);
    VT_CHECK(vmmc_sock_socket(AF_INET, SOCK_STREAM, IPPROTO_UDP) == -1 &&
             errno == EPROTONOSUPPORT);
    VT_CHECK(vmmc_sock_socket(AF_INET, SOCK_STREAM | 0x40000000, 0) == -1 && errno == EINVAL);
    int fd = vmmc_sock_socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_TCP);
    VT_CHECK(fd >= 0 && vmmc_sock_is(fd));
    VT_CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    VT_CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
    /* a socket not connected: the kernel's errors */
    SAME(vmmc_sock_send(fd, "x", 1, MSG_NOSIGNAL), send(fd, "x", 1, MSG_NOSIGNAL));
    SAME(vmmc_sock_recv(fd, b, 1, 0), recv(fd, b, 1, 0));
    VT_CHECK(vmmc_sock_close(fd) == 0 && !vmmc_sock_is(fd));
    VT_CHECK(vmmc_sock_close(fd) == -1 && errno == EBADF);
}

static void t_connect(void)
{
    struct sockaddr_in dead = sp_dead_port();
    int v = vmmc_sock_socket(AF_INET, SOCK_STREAM, 0), r = socket(AF_INET, SOCK_STREAM, 0);
    SAME(vmmc_sock_connect(v, (struct sockaddr *)&dead, sizeof dead),
         connect(r, (struct sockaddr *)&dead, sizeof dead));
    VT_CHECK(errno == ECONNREFUSED);
    vmmc_sock_close(v);
    close(r);
    /* non-blocking: EINPROGRESS, then the refusal through poll and SO_ERROR */
    v = vmmc_sock_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    r = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int rv = vmmc_sock_connect(v, (struct sockaddr *)&dead, sizeof dead);
    VT_CHECK(rv == 0 || errno == EINPROGRESS || errno == ECONNREFUSED);
    struct pollfd p = {.fd = v, .events = POLLOUT};
    VT_CHECK(vmmc_sock_poll(&p, 1, 10000) == 1 && (p.revents & (POLLERR | POLLHUP)));
    int err = 0;
    socklen_t el = sizeof err;
    VT_CHECK(vmmc_sock_getsockopt(v, SOL_SOCKET, SO_ERROR, &err, &el) == 0);
    VT_CHECK(err == ECONNREFUSED);
    vmmc_sock_close(v);
    close(r);

    /* a non-blocking connect that succeeds: writable, then usable */
    struct sockaddr_storage a;
    socklen_t alen;
    int l = sp_listen(AF_INET, &a, &alen);
    v = vmmc_sock_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    rv = vmmc_sock_connect(v, (struct sockaddr *)&a, alen);
    VT_CHECK(rv == 0 || errno == EINPROGRESS);
    p.fd = v;
    p.events = POLLOUT;
    VT_CHECK(vmmc_sock_poll(&p, 1, 10000) == 1 && p.revents == POLLOUT);
    VT_CHECK(vmmc_sock_ready(v, POLLOUT) == POLLOUT);
    /* connect again: the kernel says it is connected */
    rv = vmmc_sock_connect(v, (struct sockaddr *)&a, alen);
    VT_CHECK(rv == 0 || errno == EISCONN);
    struct sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    int s = vmmc_sock_accept(l, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    VT_CHECK(s >= 0 && vmmc_sock_is(s) && plen == sizeof(struct sockaddr_in));
    VT_CHECK((fcntl(s, F_GETFD) & FD_CLOEXEC) && (fcntl(s, F_GETFL) & O_NONBLOCK));
    VT_CHECK(vmmc_sock_send(v, "hello", 5, 0) == 5);
    char b[8];
    p.fd = s;
    p.events = POLLIN;
    VT_CHECK(vmmc_sock_poll(&p, 1, 10000) == 1 && p.revents == POLLIN);
    VT_CHECK(vmmc_sock_recv(s, b, sizeof b, 0) == 5 && !memcmp(b, "hello", 5));
    /* nothing more: EAGAIN, as the kernel */
    VT_CHECK(vmmc_sock_recv(s, b, sizeof b, 0) == -1 && errno == EAGAIN);
    VT_CHECK(vmmc_sock_accept(l, NULL, NULL, 0x1234) == -1 && errno == EINVAL);
    VT_CHECK(vmmc_sock_fcntl(l, F_SETFL, O_NONBLOCK) == 0);
    VT_CHECK(vmmc_sock_accept(l, NULL, NULL, 0) == -1 && errno == EAGAIN);
    vmmc_sock_info_t info;
    VT_CHECK(vmmc_sock_info(l, &info) == 0 && info.mode == VMMC_SOCK_LISTENING);
    VT_CHECK(vmmc_sock_info(s, &info) == 0);
    if (upgrade) /* the same calls, on an upgraded pair */
        VT_CHECK(info.mode == VMMC_SOCK_VMMC && !strcmp(info.transport, "shm"));
    else
        VT_CHECK(info.mode == VMMC_SOCK_KERNEL && !strcmp(info.transport, "tcp"));
    vmmc_sock_close(v);
    vmmc_sock_close(s);
    vmmc_sock_close(l);
}

/* EOF, EPIPE and SIGPIPE, each beside the kernel's own pair */
static void t_eof_epipe(void)
{
    int vc, vs, rc, rs;
    sp_pair(AF_INET, &vc, &vs);
    sp_raw_pair(&rc, &rs);
    char b[16];
    SAME(vmmc_sock_shutdown(vc, 7), shutdown(rc, 7));
    SAME(vmmc_sock_shutdown(vc, SHUT_WR), shutdown(rc, SHUT_WR));
    SAME(vmmc_sock_recv(vs, b, sizeof b, 0), recv(rs, b, sizeof b, 0)); /* 0: EOF */
    SAME(vmmc_sock_recv(vs, b, sizeof b, 0), recv(rs, b, sizeof b, 0));
    /* the other direction still works after a half-close */
    SAME(vmmc_sock_send(vs, "back", 4, 0), send(rs, "back", 4, 0));
    SAME(vmmc_sock_recv(vc, b, sizeof b, 0), recv(rc, b, sizeof b, 0));
    /* the peer closes: a write fails with EPIPE (maybe after one that the
     * reset answers) and raises SIGPIPE unless MSG_NOSIGNAL */
    signal(SIGPIPE, on_pipe);
    vmmc_sock_close(vc);
    close(rc);
    usleep(20000);
    int n = 0, got = 0;
    for (n = 0; n < 100; n++) {
        if (vmmc_sock_send(vs, "x", 1, MSG_NOSIGNAL) < 0) {
            got = errno;
            break;
        }
        usleep(1000);
    }
    VT_CHECK(got == EPIPE || got == ECONNRESET);
    VT_CHECK(sigpipes == 0);
    VT_CHECK(vmmc_sock_send(vs, "x", 1, 0) == -1 && errno == EPIPE);
    VT_CHECK(sigpipes == 1);
    VT_CHECK(send(rs, "x", 1, MSG_NOSIGNAL) == 1 || errno == EPIPE || errno == ECONNRESET);
    signal(SIGPIPE, SIG_DFL);
    vmmc_sock_close(vs);
    close(rs);
}

/* dup, dup3, fcntl, ioctl and options keep the table right */
static void t_descriptors(void)
{
    int c, s;
    sp_pair(AF_INET, &c, &s);
    int d = vmmc_sock_dup(c);
    VT_CHECK(d >= 0 && vmmc_sock_is(d));
    int d2 = vmmc_sock_fcntl(c, F_DUPFD_CLOEXEC, 100);
    VT_CHECK(d2 >= 100 && vmmc_sock_is(d2) && (fcntl(d2, F_GETFD) & FD_CLOEXEC));
    /* dup3 onto another vmmc socket replaces it in the table */
    int other = vmmc_sock_socket(AF_INET, SOCK_STREAM, 0);
    VT_CHECK(vmmc_sock_dup3(c, other, O_CLOEXEC) == other && vmmc_sock_is(other));
    VT_CHECK(vmmc_sock_dup3(c, c, 0) == -1 && errno == EINVAL);
    VT_CHECK(vmmc_sock_dup3(c, other, 1) == -1 && errno == EINVAL);
    sock_t *so = sock_get(c);
    VT_CHECK(so && so->nfds == 4);
    VT_CHECK(sock_get(other) == so && sock_get(d) == so && sock_get(d2) == so);
    for (int i = 0; i < 3; i++)
        sock_put(so);
    /* closing one keeps the others */
    VT_CHECK(vmmc_sock_close(c) == 0 && !vmmc_sock_is(c) && so->nfds == 3);
    VT_CHECK(vmmc_sock_send(d, "ab", 2, 0) == 2);
    char b[8];
    VT_CHECK(vmmc_sock_recv(s, b, 1, MSG_WAITALL) == 1 && b[0] == 'a');
    int n = -1;
    VT_CHECK(vmmc_sock_ioctl(s, FIONREAD, &n) == 0 && n == 1);
    /* O_NONBLOCK, by fcntl and by FIONBIO, seen by every dup */
    sock_t *ss = sock_get(s);
    VT_CHECK(ss->nonblock == 0);
    VT_CHECK(vmmc_sock_fcntl(s, F_SETFL, vmmc_sock_fcntl(s, F_GETFL, 0) | O_NONBLOCK) == 0);
    VT_CHECK(ss->nonblock == 1);
    int zero = 0;
    VT_CHECK(vmmc_sock_ioctl(s, FIONBIO, &zero) == 0 && ss->nonblock == 0);
    VT_CHECK(!(fcntl(s, F_GETFL) & O_NONBLOCK));
    /* SO_RCVTIMEO: cached, and the kernel has it too */
    struct timeval tv = {0, 30000};
    VT_CHECK(vmmc_sock_setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    VT_CHECK(ss->rcvtimeo_ms == 30);
    struct timeval back;
    socklen_t bl = sizeof back;
    VT_CHECK(vmmc_sock_getsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &back, &bl) == 0);
    VT_CHECK(back.tv_sec == 0 && back.tv_usec >= 30000 - 4000);
    VT_CHECK(vmmc_sock_recv(s, b, 8, 0) == 1 && b[0] == 'b');
    VT_CHECK(vmmc_sock_recv(s, b, 8, 0) == -1 && errno == EAGAIN); /* after the timeout */
    tv.tv_usec = 0;
    VT_CHECK(vmmc_sock_setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    VT_CHECK(ss->rcvtimeo_ms == -1);
    VT_CHECK(vmmc_sock_setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, 3) == -1 && errno == EINVAL);
    sock_put(ss);
    /* the number of a closed socket is reused by a new one: a new socket */
    int fresh = vmmc_sock_socket(AF_INET, SOCK_STREAM, 0);
    VT_CHECK(fresh == c || upgrade); /* upgraded, the layer's own descriptors move numbers */
    sock_t *sf = sock_get(fresh);
    VT_CHECK(sf && sf != so && sf->nfds == 1);
    sock_put(sf);
    sock_put(so);
    vmmc_sock_close(fresh);
    vmmc_sock_close(d);
    vmmc_sock_close(d2);
    vmmc_sock_close(other);
    vmmc_sock_close(s);
}

/* every shape of send and receive, and sendfile */
static void t_shapes(void)
{
    int c, s;
    sp_pair(AF_INET6, &c, &s);
    char b[64];
    VT_CHECK(vmmc_sock_sendto(c, "to", 2, 0, NULL, 0) == 2);
    struct sockaddr_storage from;
    socklen_t fl = sizeof from;
    VT_CHECK(vmmc_sock_recvfrom(s, b, 2, MSG_WAITALL, (struct sockaddr *)&from, &fl) == 2);
    VT_CHECK(!memcmp(b, "to", 2));
    struct iovec iov[3] = {{"ab", 2}, {"", 0}, {"cde", 3}};
    VT_CHECK(vmmc_sock_writev(c, iov, 3) == 5);
    char x[2], y[3];
    struct iovec in[2] = {{x, 2}, {y, 3}};
    struct msghdr m = {.msg_iov = in, .msg_iovlen = 2};
    VT_CHECK(vmmc_sock_recvmsg(s, &m, MSG_WAITALL) == 5);
    VT_CHECK(!memcmp(x, "ab", 2) && !memcmp(y, "cde", 3));
    struct msghdr om = {.msg_iov = iov, .msg_iovlen = 3};
    VT_CHECK(vmmc_sock_sendmsg(c, &om, 0) == 5);
    struct iovec in2[1] = {{b, 5}};
    VT_CHECK(vmmc_sock_readv(s, in2, 1) == 5 && !memcmp(b, "abcde", 5));
    VT_CHECK(vmmc_sock_writev(c, iov, -1) == -1 && errno == EINVAL);
    VT_CHECK(vmmc_sock_recvmsg(s, NULL, 0) == -1 && errno == EFAULT);
    /* sendfile from a temporary file */
    char path[] = "/tmp/vmmc_sock_sendfileXXXXXX";
    int f = mkstemp(path);
    VT_CHECK(f >= 0);
    unlink(path);
    VT_CHECK(write(f, "0123456789", 10) == 10);
    off_t off = 2;
    VT_CHECK(vmmc_sock_sendfile(c, f, &off, 5) == 5 && off == 7);
    VT_CHECK(vmmc_sock_recv(s, b, 5, MSG_WAITALL) == 5 && !memcmp(b, "23456", 5));
    VT_CHECK(vmmc_sock_sendfile(c, -1, NULL, 5) == -1 && errno == EBADF);
    close(f);
    vmmc_sock_close(c);
    vmmc_sock_close(s);
}

static void *alarm_thread(void *arg)
{
    pthread_t *target = arg;
    usleep(100000);
    pthread_kill(*target, SIGALRM);
    return NULL;
}

/* poll over sockets and other descriptors; a signal interrupts */
static void t_poll(void)
{
    int c, s, p[2];
    sp_pair(AF_INET, &c, &s);
    VT_CHECK(pipe(p) == 0);
    struct pollfd f[4] = {{s, POLLIN, 0}, {p[0], POLLIN, 0}, {-1, POLLIN, 0}, {c, POLLOUT, 0}};
    VT_CHECK(vmmc_sock_poll(f, 3, 0) == 0);
    VT_CHECK(vmmc_sock_poll(f, 4, 0) == 1 && f[3].revents == POLLOUT);
    double t0 = vt_now();
    VT_CHECK(vmmc_sock_poll(f, 3, 60) == 0);
    VT_CHECK(vt_now() - t0 >= 0.059); /* never early */
    VT_CHECK(write(p[1], "z", 1) == 1);
    VT_CHECK(vmmc_sock_poll(f, 3, 5000) == 1 && f[1].revents == POLLIN && f[0].revents == 0);
    VT_CHECK(vmmc_sock_send(c, "q", 1, 0) == 1);
    VT_CHECK(vmmc_sock_poll(f, 3, 5000) == 2 && f[0].revents == POLLIN);
    VT_CHECK(vmmc_sock_ready(s, POLLIN | POLLOUT) == (POLLIN | POLLOUT));
    /* the peer's end: POLLRDHUP and POLLIN */
    vmmc_sock_shutdown(c, SHUT_WR);
    f[0].events = POLLIN | POLLRDHUP;
    VT_CHECK(vmmc_sock_poll(f, 1, 5000) == 1);
    if (!(f[0].revents & POLLRDHUP))
        VT_FAIL("revents %#x after the peer's shutdown", f[0].revents);
    /* a signal without SA_RESTART: EINTR from poll and from a blocking recv */
    struct sigaction sa = {.sa_handler = on_alrm};
    sigaction(SIGALRM, &sa, NULL);
    pthread_t self = pthread_self(), th;
    char b[4];
    VT_CHECK(vmmc_sock_recv(s, b, 4, 0) == 1);
    VT_CHECK(vmmc_sock_recv(s, b, 4, 0) == 0);
    int c2, s2;
    sp_pair(AF_INET, &c2, &s2);
    pthread_create(&th, NULL, alarm_thread, &self);
    f[0].fd = s2;
    f[0].events = POLLIN;
    VT_CHECK(vmmc_sock_poll(f, 1, 20000) == -1 && errno == EINTR);
    pthread_join(th, NULL);
    pthread_create(&th, NULL, alarm_thread, &self);
    VT_CHECK(vmmc_sock_recv(s2, b, 4, 0) == -1 && errno == EINTR);
    pthread_join(th, NULL);
    VT_CHECK(sigalrms == 2);
    VT_CHECK(vmmc_sock_poll(NULL, 1, 0) == -1 && errno == EFAULT);
    close(p[0]);
    close(p[1]);
    vmmc_sock_close(c);
    vmmc_sock_close(s);
    vmmc_sock_close(c2);
    vmmc_sock_close(s2);
}

int main(void)
{
    const char *u = getenv("VMMC_SOCK_UPGRADE");
    upgrade = !u || (u[0] != 'n' && u[0] != '0');
    int base = sock_fd_live();
    printf("t_bad_fds\n");
    fflush(stdout);
    t_bad_fds();
    printf("t_connect\n");
    fflush(stdout);
    t_connect();
    printf("t_eof_epipe\n");
    fflush(stdout);
    t_eof_epipe();
    printf("t_descriptors\n");
    fflush(stdout);
    t_descriptors();
    printf("t_shapes\n");
    fflush(stdout);
    t_shapes();
    printf("t_poll\n");
    fflush(stdout);
    t_poll();
    VT_CHECK(sock_fd_live() == base);
    printf("ok\n");
    return 0;
}
