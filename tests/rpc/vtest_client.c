/* A client of the vRPC test program (vtest.x), through rpcgen's stubs.
 *
 * Built twice from this file: vtest_client links libtirpc only (clnttcp_create
 * or clnt_create), vtest_client_native (VTEST_NATIVE) calls through vRPC
 * (clnt_vmmc_addr_create or clnt_vmmc_create).
 *
 *   vtest_client HOST PORT|rpcbind MODE [ARGS]
 *   MODE  basic            null call, add, echo of 1 B .. 1 MiB checked byte
 *                          for byte
 *         many NPROC NCALLS  NPROC processes, each its own client making
 *                          NCALLS calls (null, add, echo of up to 4 KiB)
 *         die [again]      the server dies mid-call: RPC_CANTRECV, no hang;
 *                          "again": then one more call, which must fail
 *         timeout          the server is slow: RPC_TIMEDOUT after
 *                          CLSET_TIMEOUT (300 ms), then the next call works
 *         bench REPS SIZE  REPS round trips (null if SIZE is 0, else echo
 *                          of SIZE bytes): prints "rtt SIZE median min max"
 *                          in microseconds
 * Exits 0 when every check passed; each failure names the check. With
 * VTEST_NATIVE, "mode MODE transport T" on stderr tells how the connection
 * moves bytes (vmmc_sock_info). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vtest.h"
#ifdef VTEST_NATIVE
#include "vmmc/rpc.h"
#include "vmmc/sock.h"
#endif

static const char *host, *port;

#define FAIL(...)                                                                       \
    do {                                                                                \
        fprintf(stderr, "vtest_client[%d]: ", (int)getpid());                           \
        fprintf(stderr, __VA_ARGS__);                                                   \
        fputc('\n', stderr);                                                            \
        exit(1);                                                                        \
    } while (0)

static CLIENT *make_client(void)
{
    CLIENT *cl;
    if (!strcmp(port, "rpcbind")) {
#ifdef VTEST_NATIVE
        cl = clnt_vmmc_create(host, VTEST_PROG, VTEST_VERS, "tcp");
#else
        cl = clnt_create(host, VTEST_PROG, VTEST_VERS, "tcp");
#endif
    } else {
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(atoi(port))};
        if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
            FAIL("host %s: give a numeric IPv4 address with a port", host);
#ifdef VTEST_NATIVE
        cl = clnt_vmmc_addr_create((struct sockaddr *)&sin, sizeof sin, VTEST_PROG, VTEST_VERS,
                                   0, 0);
#else
        int sock = RPC_ANYSOCK;
        cl = clnttcp_create(&sin, VTEST_PROG, VTEST_VERS, &sock, 0, 0);
#endif
    }
    if (!cl) {
#ifdef VTEST_NATIVE
        fprintf(stderr, "vtest_client: %s\n", vmmc_rpc_last_error());
#endif
        FAIL("cannot create the client: %s", clnt_spcreateerror(host));
    }
    return cl;
}

static void show_mode(CLIENT *cl)
{
#ifdef VTEST_NATIVE
    int fd = -1;
    vmmc_sock_info_t info;
    if (!clnt_control(cl, CLGET_FD, (char *)&fd) || vmmc_sock_info(fd, &info))
        FAIL("vmmc_sock_info on the client's fd %d: %s", fd, strerror(errno));
    fprintf(stderr, "mode %d transport %s\n", (int)info.mode, info.transport);
#else
    (void)cl;
#endif
}

static void null_call(CLIENT *cl)
{
    enum clnt_stat st = vtest_null_1(NULL, NULL, cl);
    if (st != RPC_SUCCESS)
        FAIL("null call: %s", clnt_sperror(cl, "null"));
}

static void add_call(CLIENT *cl, int a, int b)
{
    vpair p = {a, b};
    int r = 0;
    if (vtest_add_1(&p, &r, cl) != RPC_SUCCESS)
        FAIL("add: %s", clnt_sperror(cl, "add"));
    if (r != (int)((unsigned)a + (unsigned)b))
        FAIL("add(%d, %d) = %d", a, b, r);
}

static void fill(char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (char)((i * 131u + seed * 7u + (i >> 8)) & 0xff);
}

static void echo_call(CLIENT *cl, char *buf, size_t n, unsigned seed)
{
    fill(buf, n, seed);
    vbytes in = {(u_int)n, buf}, out = {0, NULL};
    if (vtest_echo_1(&in, &out, cl) != RPC_SUCCESS)
        FAIL("echo of %zu bytes: %s", n, clnt_sperror(cl, "echo"));
    if (out.vbytes_len != n)
        FAIL("echo of %zu bytes came back with %u", n, out.vbytes_len);
    for (size_t i = 0; i < n; i++)
        if (out.vbytes_val[i] != buf[i])
            FAIL("echo of %zu bytes: byte %zu is 0x%02x, not 0x%02x", n, i,
                 (unsigned char)out.vbytes_val[i], (unsigned char)buf[i]);
    clnt_freeres(cl, (xdrproc_t)xdr_vbytes, (char *)&out);
}

static void basic(void)
{
    CLIENT *cl = make_client();
    show_mode(cl);
    null_call(cl);
    add_call(cl, 40, 2);
    add_call(cl, -7, 0x7fffffff);
    size_t max = 1 << 20;
    char *buf = malloc(max);
    if (!buf)
        FAIL("out of memory");
    size_t sizes[] = {0, 1, 3, 4, 5, 100, 4095, 4096, 65535, 65536, 65537, 300000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        echo_call(cl, buf, sizes[i], (unsigned)i);
    /* a second client on its own connection, interleaved with the first */
    CLIENT *c2 = make_client();
    for (int i = 0; i < 50; i++) {
        echo_call(cl, buf, 1000 + i, (unsigned)i);
        echo_call(c2, buf, 2000 + i, (unsigned)i + 1);
    }
    show_mode(cl);
    clnt_destroy(c2);
    clnt_destroy(cl);
    free(buf);
    printf("basic: ok\n");
}

static void many(int nproc, int ncalls)
{
    pid_t *kids = calloc((size_t)nproc, sizeof *kids);
    for (int k = 0; k < nproc; k++) {
        kids[k] = fork();
        if (kids[k] < 0)
            FAIL("fork: %s", strerror(errno));
        if (kids[k] == 0) {
            CLIENT *cl = make_client();
            char buf[4096];
            for (int i = 0; i < ncalls; i++) {
                switch (i % 3) {
                case 0: null_call(cl); break;
                case 1: add_call(cl, k, i); break;
                default: echo_call(cl, buf, (size_t)(i * 37 + k) % sizeof buf, (unsigned)(i + k));
                }
            }
            clnt_destroy(cl);
            _exit(0);
        }
    }
    int bad = 0;
    for (int k = 0; k < nproc; k++) {
        int status;
        if (waitpid(kids[k], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
            fprintf(stderr, "vtest_client: process %d of %d failed (status 0x%x)\n", k, nproc,
                    status);
            bad++;
        }
    }
    free(kids);
    if (bad)
        FAIL("%d of %d processes failed", bad, nproc);
    printf("many: %d x %d calls ok\n", nproc, ncalls);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(int again)
{
    CLIENT *cl = make_client();
    null_call(cl);
    char msg[] = "vtest:die";
    vbytes in = {(u_int)strlen(msg), msg}, out = {0, NULL};
    double t0 = now_us();
    enum clnt_stat st = vtest_echo_1(&in, &out, cl);
    double dt = (now_us() - t0) / 1e6;
    if (st != RPC_CANTRECV)
        FAIL("a server that died mid-call gave %s, not RPC_CANTRECV", clnt_sperrno(st));
    if (dt > 20)
        FAIL("the failure took %.1f s (the call's timeout is 25 s)", dt);
    fprintf(stderr, "%s\n", clnt_sperror(cl, "die"));
    if (again) {
        st = vtest_null_1(NULL, NULL, cl);
        if (st == RPC_SUCCESS)
            FAIL("a call to a dead server succeeded");
    }
    clnt_destroy(cl);
    printf("die: ok\n");
}

static void timeout(void)
{
    CLIENT *cl = make_client();
    struct timeval t = {0, 300000};
    if (!clnt_control(cl, CLSET_TIMEOUT, (char *)&t))
        FAIL("CLSET_TIMEOUT refused");
    char msg[] = "vtest:sleep";
    vbytes in = {(u_int)strlen(msg), msg}, out = {0, NULL};
    double t0 = now_us();
    enum clnt_stat st = vtest_echo_1(&in, &out, cl);
    double dt = (now_us() - t0) / 1e6;
    if (st != RPC_TIMEDOUT)
        FAIL("a slow server gave %s, not RPC_TIMEDOUT", clnt_sperrno(st));
    if (dt > 2.5)
        FAIL("RPC_TIMEDOUT after %.1f s, not near the 0.3 s asked", dt);
    /* the late reply is dropped by xid, the next call gets its own */
    t.tv_sec = 20;
    t.tv_usec = 0;
    clnt_control(cl, CLSET_TIMEOUT, (char *)&t);
    add_call(cl, 5, 6);
    null_call(cl);
    clnt_destroy(cl);
    printf("timeout: ok\n");
}

static void bench(int reps, size_t size)
{
    CLIENT *cl = make_client();
    char *buf = malloc(size ? size : 1);
    double *t = malloc(sizeof *t * (size_t)reps);
    fill(buf, size, 1);
    vbytes in = {(u_int)size, buf};
    int warm = reps / 10 + 10;
    for (int i = -warm; i < reps; i++) {
        double t0 = now_us();
        if (size == 0) {
            if (vtest_null_1(NULL, NULL, cl) != RPC_SUCCESS)
                FAIL("null: %s", clnt_sperror(cl, "bench"));
        } else {
            vbytes out = {0, NULL};
            if (vtest_echo_1(&in, &out, cl) != RPC_SUCCESS || out.vbytes_len != size)
                FAIL("echo: %s", clnt_sperror(cl, "bench"));
            clnt_freeres(cl, (xdrproc_t)xdr_vbytes, (char *)&out);
        }
        if (i >= 0)
            t[i] = now_us() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    printf("rtt %zu %.3f %.3f %.3f\n", size, t[reps / 2], t[0], t[reps - 1]);
    show_mode(cl);
    clnt_destroy(cl);
    free(buf);
    free(t);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s HOST PORT|rpcbind basic|many N M|die [again]|timeout|bench R S\n",
                argv[0]);
        return 2;
    }
    host = argv[1];
    port = argv[2];
    const char *mode = argv[3];
    if (!strcmp(mode, "basic"))
        basic();
    else if (!strcmp(mode, "many") && argc == 6)
        many(atoi(argv[4]), atoi(argv[5]));
    else if (!strcmp(mode, "die"))
        die(argc > 4 && !strcmp(argv[4], "again"));
    else if (!strcmp(mode, "timeout"))
        timeout();
    else if (!strcmp(mode, "bench") && argc == 6)
        bench(atoi(argv[4]), (size_t)atol(argv[5]));
    else
        FAIL("unknown mode %s", mode);
    return 0;
}
