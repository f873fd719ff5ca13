/* vRPC against hostile peers.
 *
 * Client side: a fake server (a forked process on a kernel socket) answers
 * the native client's null call with a malformed record mark, an oversized
 * record, a reply in several fragments, a stale reply before the right one,
 * a truncated reply, a reply that is not RPC, or nothing at all. Each call
 * must end with the libtirpc status that says what happened, never hang.
 *
 * Server side: the native server (forked, svc_vmmc_run) meets raw clients
 * that send an oversized mark, an empty fragment, a record that is not a
 * call, or half a record and then nothing; each bad connection is closed,
 * the stalled one does not stop the server from serving a good client. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vmmc/rpc.h"
#include "vtest.h"

void vtest_prog_1(struct svc_req *rq, SVCXPRT *x);

static int failures;
#define CHECK(cond, ...)                                                                \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                        \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
            failures++;                                                                 \
        }                                                                               \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int listener(struct sockaddr_in *sin)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(sin, 0, sizeof *sin);
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof *sin;
    if (fd < 0 || bind(fd, (struct sockaddr *)sin, sizeof *sin) || listen(fd, 16) ||
        getsockname(fd, (struct sockaddr *)sin, &l)) {
        perror("listener");
        exit(1);
    }
    return fd;
}

/* Read exactly n bytes (5 s at most); 0 or -1. */
static int read_n(int fd, void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 5000) <= 0)
            return -1;
        ssize_t r = recv(fd, (char *)p + got, n - got, 0);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static void put32(unsigned char *p, uint32_t v)
{
    v = htonl(v);
    memcpy(p, &v, 4);
}

/* A null call's accepted reply to @xid: 24 bytes. */
static void null_reply(unsigned char *r, uint32_t xid)
{
    uint32_t w[6] = {xid, 1 /* REPLY */, 0 /* MSG_ACCEPTED */, 0, 0 /* verf none */,
                     0 /* SUCCESS */};
    for (int i = 0; i < 6; i++)
        put32(r + 4 * i, w[i]);
}

enum fake { HUGE, EMPTY, STALE, FRAGS, TRUNC, GARBAGE, SILENT, NFAKE };
static const char *fake_name[] = {"huge mark", "empty fragment", "stale reply first",
                                  "reply in fragments", "truncated reply", "not a reply",
                                  "no reply"};

static void fake_server(int lfd, enum fake how)
{
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
        _exit(1);
    unsigned char mark[4], body[4096], out[256];
    if (read_n(fd, mark, 4))
        _exit(1);
    uint32_t len = ntohl(*(uint32_t *)mark) & 0x7fffffffu;
    if (len > sizeof body || read_n(fd, body, len))
        _exit(1);
    uint32_t xid = ntohl(*(uint32_t *)body);
    size_t n = 0;
    switch (how) {
    case HUGE:
        put32(out, 0x7fffffffu);
        n = 4;
        break;
    case EMPTY:
        put32(out, 0);
        n = 4;
        break;
    case STALE:
        put32(out, 0x80000000u | 24);
        null_reply(out + 4, xid - 1);
        put32(out + 28, 0x80000000u | 24);
        null_reply(out + 32, xid);
        n = 56;
        break;
    case FRAGS: {
        unsigned char r[24];
        null_reply(r, xid);
        put32(out, 5);
        memcpy(out + 4, r, 5);
        put32(out + 9, 11);
        memcpy(out + 13, r + 5, 11);
        put32(out + 24, 0x80000000u | 8);
        memcpy(out + 28, r + 16, 8);
        n = 36;
        break;
    }
    case TRUNC:
        put32(out, 0x80000000u | 24);
        null_reply(out + 4, xid);
        n = 14;
        break;
    case GARBAGE:
        put32(out, 0x80000000u | 24);
        null_reply(out + 4, xid);
        put32(out + 8, 7); /* neither CALL nor REPLY */
        n = 28;
        break;
    default:
        break;
    }
    if (n && send(fd, out, n, MSG_NOSIGNAL) != (ssize_t)n)
        _exit(1);
    if (how == TRUNC)
        _exit(0); /* the connection closes mid-record */
    char c;
    struct pollfd pf = {fd, POLLIN, 0};
    poll(&pf, 1, 10000); /* until the client goes */
    (void)recv(fd, &c, 1, 0);
    _exit(0);
}

static void client_side(void)
{
    static const enum clnt_stat want[NFAKE] = {RPC_CANTRECV, RPC_CANTRECV, RPC_SUCCESS,
                                               RPC_SUCCESS, RPC_CANTRECV, RPC_CANTDECODERES,
                                               RPC_TIMEDOUT};
    static const int want_errno[NFAKE] = {EMSGSIZE, EPROTO, 0, 0, ECONNRESET, -1, 0};
    for (int how = 0; how < NFAKE; how++) {
        struct sockaddr_in sin;
        int lfd = listener(&sin);
        pid_t pid = fork();
        if (pid == 0)
            fake_server(lfd, (enum fake)how);
        close(lfd);
        CLIENT *cl = clnt_vmmc_addr_create((struct sockaddr *)&sin, sizeof sin, VTEST_PROG,
                                           VTEST_VERS, 0, 0);
        CHECK(cl, "%s: client: %s", fake_name[how], vmmc_rpc_last_error());
        if (cl) {
            struct timeval t = {how == SILENT ? 0 : 10, how == SILENT ? 300000 : 0};
            clnt_control(cl, CLSET_TIMEOUT, (char *)&t);
            double t0 = now_s();
            enum clnt_stat st = vtest_null_1(NULL, NULL, cl);
            double dt = now_s() - t0;
            struct rpc_err e;
            clnt_geterr(cl, &e);
            printf("%-20s -> %s (errno %d) in %.3f s; %s\n", fake_name[how], clnt_sperrno(st),
                   e.re_errno, dt, vmmc_rpc_last_error());
            CHECK(st == want[how], "%s: %s, expected %s", fake_name[how], clnt_sperrno(st),
                  clnt_sperrno(want[how]));
            if (want_errno[how] > 0)
                CHECK(e.re_errno == want_errno[how], "%s: errno %d, expected %d",
                      fake_name[how], e.re_errno, want_errno[how]);
            CHECK(dt < (how == SILENT ? 3.0 : 8.0), "%s: took %.1f s", fake_name[how], dt);
            clnt_destroy(cl);
        }
        int status;
        waitpid(pid, &status, 0);
    }
}

/* A raw kernel connection to the server. */
static int raw_connect(const struct sockaddr_in *sin)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (const struct sockaddr *)sin, sizeof *sin)) {
        perror("raw connect");
        exit(1);
    }
    return fd;
}

/* Does the server close @fd within 5 s? */
static int closed_by_server(int fd)
{
    double end = now_s() + 5;
    char buf[256];
    while (now_s() < end) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 200) > 0) {
            ssize_t r = recv(fd, buf, sizeof buf, 0);
            if (r == 0 || (r < 0 && errno == ECONNRESET))
                return 1;
        }
    }
    return 0;
}

static void good_calls(const struct sockaddr_in *sin, const char *when)
{
    CLIENT *cl = clnt_vmmc_addr_create((const struct sockaddr *)sin, sizeof *sin, VTEST_PROG,
                                       VTEST_VERS, 0, 0);
    CHECK(cl, "%s: client: %s", when, vmmc_rpc_last_error());
    if (!cl)
        return;
    struct timeval t = {10, 0};
    clnt_control(cl, CLSET_TIMEOUT, (char *)&t);
    enum clnt_stat st = vtest_null_1(NULL, NULL, cl);
    CHECK(st == RPC_SUCCESS, "%s: null call: %s", when, clnt_sperrno(st));
    vpair p = {20, 22};
    int r = 0;
    st = vtest_add_1(&p, &r, cl);
    CHECK(st == RPC_SUCCESS && r == 42, "%s: add: %s, %d", when, clnt_sperrno(st), r);
    clnt_destroy(cl);
}

static void server_side(void)
{
    struct sockaddr_in sin;
    int lfd = listener(&sin);
    pid_t pid = fork();
    if (pid == 0) {
        SVCXPRT *x = svc_vmmc_create(lfd, 0, 0);
        if (!x || !svc_register(x, VTEST_PROG, VTEST_VERS, vtest_prog_1, 0)) {
            fprintf(stderr, "server: %s\n", vmmc_rpc_last_error());
            _exit(1);
        }
        svc_vmmc_run();
        _exit(1);
    }
    close(lfd);
    good_calls(&sin, "before");

    unsigned char m[64];
    int fd = raw_connect(&sin);
    put32(m, 0x7fffffffu);
    send(fd, m, 4, MSG_NOSIGNAL);
    CHECK(closed_by_server(fd), "a client announcing a 2 GiB record was not disconnected");
    close(fd);

    fd = raw_connect(&sin);
    put32(m, 0);
    send(fd, m, 4, MSG_NOSIGNAL);
    CHECK(closed_by_server(fd), "a client sending an empty fragment was not disconnected");
    close(fd);

    fd = raw_connect(&sin);
    put32(m, 0x80000000u | 12);
    memset(m + 4, 0xee, 12);
    send(fd, m, 16, MSG_NOSIGNAL);
    CHECK(closed_by_server(fd), "a client sending a record that is no call was not "
                                "disconnected");
    close(fd);

    /* half a record, then silence: the others are served meanwhile */
    int stall = raw_connect(&sin);
    put32(m, 0x80000000u | 100);
    memset(m + 4, 0, 10);
    send(stall, m, 14, MSG_NOSIGNAL);
    good_calls(&sin, "while a client stalls mid-record");
    close(stall);
    good_calls(&sin, "after");

    /* a kernel socket connected by the caller, adopted; destroy leaves it open */
    fd = raw_connect(&sin);
    CLIENT *cl = clnt_vmmc_fd_create(fd, VTEST_PROG, VTEST_VERS, 0, 0);
    CHECK(cl, "clnt_vmmc_fd_create: %s", vmmc_rpc_last_error());
    if (cl) {
        struct timeval t = {10, 0};
        clnt_control(cl, CLSET_TIMEOUT, (char *)&t);
        enum clnt_stat st = vtest_null_1(NULL, NULL, cl);
        CHECK(st == RPC_SUCCESS, "null call on an adopted socket: %s", clnt_sperrno(st));
        int got = -1;
        CHECK(clnt_control(cl, CLGET_FD, (char *)&got) && got == fd, "CLGET_FD: %d", got);
        clnt_destroy(cl);
        CHECK(fcntl(fd, F_GETFD) >= 0, "clnt_destroy closed a descriptor it did not own");
    }
    close(fd);
    CHECK(clnt_vmmc_fd_create(-1, VTEST_PROG, VTEST_VERS, 0, 0) == NULL &&
              rpc_createerr.cf_stat == RPC_SYSTEMERROR,
          "clnt_vmmc_fd_create(-1) did not fail with RPC_SYSTEMERROR");
    CHECK(svc_vmmc_create(-5, 0, 0) == NULL, "svc_vmmc_create(-5) did not fail");
    CHECK(clnt_vmmc_create("", VTEST_PROG, VTEST_VERS, "tcp") == NULL &&
              rpc_createerr.cf_stat == RPC_UNKNOWNHOST,
          "clnt_vmmc_create(\"\") did not fail with RPC_UNKNOWNHOST");
    CHECK(clnt_vmmc_create("127.0.0.1", VTEST_PROG, VTEST_VERS, "udp") == NULL &&
              rpc_createerr.cf_stat == RPC_UNKNOWNPROTO,
          "clnt_vmmc_create over udp did not fail with RPC_UNKNOWNPROTO");

    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Run with VMMC_RPC_MAXREC=16K: both ends refuse records over it. */
static void maxrec_side(void)
{
    struct sockaddr_in sin;
    int lfd = listener(&sin);
    pid_t pid = fork();
    if (pid == 0) {
        SVCXPRT *x = svc_vmmc_create(lfd, 0, 0);
        if (!x || !svc_register(x, VTEST_PROG, VTEST_VERS, vtest_prog_1, 0))
            _exit(1);
        svc_vmmc_run();
        _exit(1);
    }
    close(lfd);
    CLIENT *cl = clnt_vmmc_addr_create((struct sockaddr *)&sin, sizeof sin, VTEST_PROG,
                                       VTEST_VERS, 0, 0);
    CHECK(cl, "client: %s", vmmc_rpc_last_error());
    if (cl) {
        static char buf[32768];
        memset(buf, 'x', sizeof buf);
        vbytes in = {8192, buf}, out = {0, NULL};
        enum clnt_stat st = vtest_echo_1(&in, &out, cl);
        CHECK(st == RPC_SUCCESS && out.vbytes_len == 8192, "echo of 8K under a 16K limit: %s",
              clnt_sperrno(st));
        clnt_freeres(cl, (xdrproc_t)xdr_vbytes, (char *)&out);
        in.vbytes_len = sizeof buf;
        st = vtest_echo_1(&in, &out, cl);
        struct rpc_err e;
        clnt_geterr(cl, &e);
        printf("echo of 32K under a 16K limit -> %s (errno %d); %s\n", clnt_sperrno(st),
               e.re_errno, vmmc_rpc_last_error());
        CHECK(st == RPC_CANTENCODEARGS && e.re_errno == EMSGSIZE,
              "echo of 32K under a 16K limit: %s errno %d", clnt_sperrno(st), e.re_errno);
        st = vtest_null_1(NULL, NULL, cl);
        CHECK(st == RPC_SUCCESS, "a call after a refused one: %s", clnt_sperrno(st));
        clnt_destroy(cl);
    }
    /* a raw client announcing 20K: the server closes the connection */
    int fd = raw_connect(&sin);
    unsigned char m[4];
    put32(m, 0x80000000u | 20480);
    send(fd, m, 4, MSG_NOSIGNAL);
    CHECK(closed_by_server(fd), "a 20K record under a 16K limit was not refused");
    close(fd);
    good_calls(&sin, "after the limit's refusals");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && !strcmp(argv[1], "maxrec")) {
        maxrec_side();
        if (failures)
            return 1;
        printf("the record limit holds on both ends\n");
        return 0;
    }
    client_side();
    server_side();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all hostile-peer checks passed\n");
    return 0;
}
