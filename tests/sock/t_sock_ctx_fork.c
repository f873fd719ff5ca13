/* fork() and the process context, through the public calls: a client with
 * an upgraded connection forks; before the fork the connection goes back to
 * TCP (parent and child then both see it on the kernel, and it still carries
 * every byte), the child starts with no context and its own new connection
 * upgrades on a fresh one, and the parent's next connection upgrades on the
 * parent's context, which lived on. The server is another process (forked
 * before any socket, so it has its own context) that echoes on each
 * connection.
 * usage: t_sock_ctx_fork [shm|udp] (the transport the upgrades must use) */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sock/sock.h"
#include "vmmc/sock.h"
#include "vtest.h"

static const char *want = "shm";

static void send_all(int fd, const void *b, size_t n)
{
    for (size_t d = 0; d < n;) {
        ssize_t r = vmmc_sock_send(fd, (const char *)b + d, n - d, MSG_NOSIGNAL);
        if (r <= 0)
            VT_FAIL("send: %zd (%s)", r, strerror(errno));
        d += (size_t)r;
    }
}

static int recv_all(int fd, void *b, size_t n)
{
    for (size_t d = 0; d < n;) {
        ssize_t r = vmmc_sock_recv(fd, (char *)b + d, n - d, 0);
        if (r == 0 && d == 0)
            return 0;
        if (r <= 0)
            VT_FAIL("recv: %zd (%s)", r, strerror(errno));
        d += (size_t)r;
    }
    return 1;
}

/* ---- the server: echo each request {n, n bytes} ---- */

static void *serve_conn(void *p)
{
    int fd = (int)(long)p;
    uint64_t n;
    char *buf = malloc(1 << 20);
    while (recv_all(fd, &n, sizeof n)) {
        VT_CHECK(n <= (1 << 20));
        VT_CHECK(recv_all(fd, buf, n));
        send_all(fd, buf, n);
    }
    free(buf);
    vmmc_sock_close(fd);
    return NULL;
}

static void server(int l)
{
    alarm(120);
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        int fd = vmmc_sock_accept(l, NULL, NULL, 0);
        VT_CHECK(fd >= 0);
        VT_CHECK(pthread_create(&t[i], NULL, serve_conn, (void *)(long)fd) == 0);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    _exit(0);
}

/* ---- the client ---- */

static void echo(int fd, size_t n, unsigned seed)
{
    char *out = malloc(n), *in = malloc(n);
    for (size_t i = 0; i < n; i++)
        out[i] = (char)(i * 13 + seed);
    uint64_t h = n;
    send_all(fd, &h, sizeof h);
    send_all(fd, out, n);
    VT_CHECK(recv_all(fd, in, n));
    VT_CHECK(memcmp(in, out, n) == 0);
    free(out);
    free(in);
}

static int mode_of(int fd, char *transport)
{
    vmmc_sock_info_t info;
    VT_CHECK(vmmc_sock_info(fd, &info) == 0);
    if (transport)
        strcpy(transport, info.transport);
    return info.mode;
}

static int dial(const struct sockaddr_in *a)
{
    int fd = vmmc_sock_socket(AF_INET, SOCK_STREAM, 0);
    VT_CHECK(fd >= 0);
    VT_CHECK(vmmc_sock_connect(fd, (const struct sockaddr *)a, sizeof *a) == 0);
    return fd;
}

static void expect_upgraded(int fd, const char *who)
{
    char tr[16];
    echo(fd, 1000, 3); /* the ACK has come by the end of a round trip */
    int m = mode_of(fd, tr);
    if (m != VMMC_SOCK_VMMC || strcmp(tr, want) != 0)
        VT_FAIL("%s: mode %d over %s, expected upgraded over %s", who, m, tr, want);
}

int main(int argc, char **argv)
{
    alarm(120);
    if (argc > 1)
        want = argv[1];
    int l = vmmc_sock_socket(AF_INET, SOCK_STREAM, 0);
    VT_CHECK(l >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    VT_CHECK(vmmc_sock_bind(l, (struct sockaddr *)&a, sizeof a) == 0);
    VT_CHECK(getsockname(l, (struct sockaddr *)&a, &alen) == 0);
    pid_t srv = fork(); /* before listen: the server's context is its own */
    VT_CHECK(srv >= 0);
    if (srv == 0) {
        VT_CHECK(vmmc_sock_listen(l, 16) == 0);
        server(l);
    }
    vmmc_sock_close(l);
    /* Connect once the server listens (a refused connect is retried). */
    int c1 = -1;
    for (int i = 0; i < 2000 && c1 < 0; i++) {
        int fd = vmmc_sock_socket(AF_INET, SOCK_STREAM, 0);
        if (vmmc_sock_connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            c1 = fd;
        } else {
            VT_CHECK(errno == ECONNREFUSED);
            vmmc_sock_close(fd);
            usleep(5000);
        }
    }
    VT_CHECK(c1 >= 0);
    expect_upgraded(c1, "first connection");
    echo(c1, 300000, 1);
    VT_CHECK(sock_ctx_peek() != NULL);

    pid_t child = fork();
    VT_CHECK(child >= 0);
    if (child == 0) {
        alarm(60);
        /* Reverted before the fork; the context is the parent's, not ours. */
        VT_CHECK(mode_of(c1, NULL) == VMMC_SOCK_KERNEL);
        VT_CHECK(sock_ctx_peek() == NULL);
        vmmc_sock_close(c1);
        int c2 = dial(&a);
        expect_upgraded(c2, "the child's connection");
        echo(c2, 300000, 2);
        VT_CHECK(sock_ctx_peek() != NULL);
        vmmc_sock_close(c2);
        _exit(0);
    }
    VT_CHECK(mode_of(c1, NULL) == VMMC_SOCK_KERNEL);
    echo(c1, 300000, 4); /* on TCP now, still every byte */
    int st;
    VT_CHECK(waitpid(child, &st, 0) == child);
    VT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    int c3 = dial(&a);
    expect_upgraded(c3, "the parent's next connection");
    echo(c3, 300000, 5);
    vmmc_sock_close(c3);
    /* listen() on a connected socket fails, and the probe port it opened
     * before the kernel's listen is closed again */
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    VT_CHECK(getsockname(c1, (struct sockaddr *)&me, &ml) == 0);
    /* Whether the UDP port of that number is free before: another process
     * (a udp link of a test running beside this one) may hold it. */
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    VT_CHECK(u >= 0);
    int free_before = bind(u, (struct sockaddr *)&me, ml) == 0;
    close(u);
    errno = 0;
    VT_CHECK(vmmc_sock_listen(c1, 4) == -1 && errno == EINVAL);
    u = socket(AF_INET, SOCK_DGRAM, 0);
    VT_CHECK(u >= 0);
    if (!free_before)
        printf("UDP port %d was taken by another process before the listen: not checked\n",
               ntohs(me.sin_port));
    else if (bind(u, (struct sockaddr *)&me, ml) != 0)
        VT_FAIL("the failed listen kept UDP port %d: %s", ntohs(me.sin_port), strerror(errno));
    close(u);
    echo(c1, 1000, 6); /* still the connection it was */
    vmmc_sock_close(c1);
    VT_CHECK(waitpid(srv, &st, 0) == srv);
    VT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    printf("t_sock_ctx_fork: ok\n");
    return 0;
}
