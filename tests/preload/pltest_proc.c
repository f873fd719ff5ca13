/* Preload scenarios across processes: fork (parent and child both use the
 * socket), exec (the socket survives it and still works), close with
 * unread data, a peer killed, and sockets the preload must leave alone
 * (UDP, AF_UNIX). */
#include "pltest.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static void wait_ok(pid_t p)
{
    int st;
    CHECK(waitpid(p, &st, 0) == p, "waitpid");
    errno = 0;
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status 0x%x", st);
}

/* fork: A from the parent, B from the child, C from the parent again; the
 * child reads the client's stream 3, the parent stream 5. */
static int fork_server(int fd)
{
    unsigned char c[10];
    read_all(fd, c, sizeof c);
    verify(c, sizeof c, 9, 0);
    expect_mode(fd);
    send_stream(fd, 100000, 1);
    pid_t p = fork();
    CHECK(p >= 0, "fork");
    if (p == 0) {
        send_stream(fd, 100000, 2);
        recv_stream(fd, 100000, 3);
        _exit(0);
    }
    wait_ok(p);
    send_stream(fd, 100000, 4);
    recv_stream(fd, 100000, 5);
    /* vfork + exec of a program that exits: the socket goes on */
    pid_t v = vfork();
    if (v == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    CHECK(v > 0, "vfork");
    wait_ok(v);
    send_stream(fd, 1000, 6);
    close(fd);
    return 0;
}

static int fork_client(int fd)
{
    unsigned char c[10];
    fill(c, sizeof c, 9, 0);
    write_all(fd, c, sizeof c);
    recv_stream(fd, 100000, 1);
    recv_stream(fd, 100000, 2);
    send_stream(fd, 100000, 3);
    recv_stream(fd, 100000, 4);
    send_stream(fd, 100000, 5);
    recv_stream(fd, 1000, 6);
    CHECK(read(fd, c, 1) == 0, "EOF");
    close(fd);
    return 0;
}

/* exec: the server exchanges a little, then exec's a new image of itself
 * that goes on on the same descriptor. */
static int exec_server(int fd)
{
    if (fd < 0) {   /* the new image */
        fd = -fd - 1;
        recv_stream(fd, 200000, 7);
        send_stream(fd, 200000, 8);
        close(fd);
        return 0;
    }
    unsigned char c[10];
    read_all(fd, c, sizeof c);
    verify(c, sizeof c, 9, 0);
    expect_mode(fd);
    write_all(fd, c, sizeof c);
    int fl = fcntl(fd, F_GETFD);
    CHECK(fl >= 0 && fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) == 0, "clear FD_CLOEXEC");
    char num[16];
    snprintf(num, sizeof num, "%d", fd);
    execl("/proc/self/exe", "pltest", "exec", "exec", num, (char *)NULL);
    die("execl");
}

static int exec_client(int fd)
{
    unsigned char c[10];
    fill(c, sizeof c, 9, 0);
    write_all(fd, c, sizeof c);
    read_all(fd, c, sizeof c);
    verify(c, sizeof c, 9, 0);
    send_stream(fd, 200000, 7);
    recv_stream(fd, 200000, 8);
    CHECK(read(fd, c, 1) == 0, "EOF");
    close(fd);
    return 0;
}

/* close with unread data: the client sees a reset or an EOF, never a hang */
static int unread_server(int fd)
{
    unsigned char c[10];
    read_all(fd, c, sizeof c);
    expect_mode(fd);
    /* wait (bounded) until the client's next 1000 bytes are here, unread */
    int unread = 0;
    for (int i = 0; i < 2000 && unread < 1000; i++) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 10);
        CHECK(ioctl(fd, FIONREAD, &unread) == 0, "FIONREAD");
    }
    CHECK(unread == 1000, "1000 bytes waiting, %d seen", unread);
    close(fd);
    return 0;
}

static int unread_client(int fd)
{
    unsigned char b[1000];
    fill(b, sizeof b, 1, 0);
    signal(SIGPIPE, SIG_IGN);
    write_all(fd, b, 10);
    write_all(fd, b, sizeof b);
    errno = 0;
    ssize_t r = read(fd, b, 1);
    CHECK(r == 0 || (r == -1 && errno == ECONNRESET), "read after the peer's close: %zd", r);
    /* writing on: EPIPE or ECONNRESET before long, never blocked */
    int failed = 0;
    for (int i = 0; i < 1000 && !failed; i++)
        failed = send(fd, b, sizeof b, MSG_NOSIGNAL) < 0;
    CHECK(failed && (errno == EPIPE || errno == ECONNRESET), "send after the reset");
    close(fd);
    return 0;
}

/* the peer killed: the client's read ends with 0 or ECONNRESET */
static int killed_server(int fd)
{
    unsigned char c[10];
    read_all(fd, c, sizeof c);
    expect_mode(fd);
    int pid = (int)getpid();
    write_all(fd, &pid, sizeof pid);
    for (;;)
        pause();
    return 0;
}

static int killed_client(int fd)
{
    unsigned char c[10];
    fill(c, sizeof c, 1, 0);
    write_all(fd, c, sizeof c);
    int pid;
    read_all(fd, &pid, sizeof pid);
    expect_mode(fd);
    CHECK(kill(pid, SIGKILL) == 0, "kill %d", pid);
    errno = 0;
    ssize_t r = read(fd, c, 1);
    CHECK(r == 0 || (r == -1 && errno == ECONNRESET), "read after the peer died: %zd", r);
    close(fd);
    return 0;
}

/* UDP and AF_UNIX sockets stay the kernel's, and work. */
static int untouched_client(int fd)
{
    int u[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, u) == 0, "socketpair");
    CHECK(!vmmc_owns(u[0]) && !vmmc_owns(u[1]), "AF_UNIX left alone");
    write_all(u[0], "unix", 4);
    char b[16];
    read_all(u[1], b, 4);
    CHECK(!memcmp(b, "unix", 4), "unix bytes");
    int us = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(us >= 0 && !vmmc_owns(us), "AF_UNIX socket() left alone");
    close(us);
    int d1 = socket(AF_INET, SOCK_DGRAM, 0), d2 = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(d1 >= 0 && d2 >= 0 && !vmmc_owns(d1) && !vmmc_owns(d2), "UDP left alone");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    CHECK(bind(d1, (struct sockaddr *)&a, sizeof a) == 0, "bind udp");
    CHECK(getsockname(d1, (struct sockaddr *)&a, &al) == 0, "getsockname");
    CHECK(sendto(d2, "udp!", 4, 0, (struct sockaddr *)&a, sizeof a) == 4, "sendto");
    CHECK(recvfrom(d1, b, sizeof b, 0, NULL, NULL) == 4 && !memcmp(b, "udp!", 4), "udp bytes");
    close(d1);
    close(d2);
    int raw = socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP);   /* not TCP: not ours */
    if (raw >= 0) {
        CHECK(!vmmc_owns(raw), "SCTP left alone");
        close(raw);
    }
    /* and the TCP connection is a vmmc socket when the preload is there */
    if (preloaded())
        CHECK(vmmc_owns(fd), "TCP is a vmmc socket under the preload");
    write_all(fd, "tcp", 3);
    read_all(fd, b, 3);
    CHECK(!memcmp(b, "tcp", 3), "tcp bytes");
    expect_mode(fd);
    close(fd);
    return 0;
}

static int untouched_server(int fd)
{
    char b[3];
    read_all(fd, b, 3);
    expect_mode(fd);
    write_all(fd, b, 3);
    CHECK(read(fd, b, 1) == 0, "EOF");
    close(fd);
    return 0;
}

const scenario_t pl_scen_proc[] = {
    {"fork", fork_server, fork_client, 0, 0, 0},
    {"exec", exec_server, exec_client, 0, 0, 0},
    {"closeunread", unread_server, unread_client, 0, 0, 0},
    {"killed", killed_server, killed_client, 0, 0, 0},
    {"untouched", untouched_server, untouched_client, 0, 0, 0},
    {NULL, NULL, NULL, 0, 0, 0},
};
