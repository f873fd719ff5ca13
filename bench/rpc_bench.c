/* The program `vmmc bench rpc` runs: a SunRPC server and client of a
 * two-procedure program (0: null, 1: echo of opaque<> data), with
 * libtirpc's TCP transport ("plain") or vRPC's ("native").
 *
 *   vmmc-rpc-bench server plain|native PORT
 *       serve on 127.0.0.1:PORT until killed
 *   vmmc-rpc-bench client plain|native PORT REPS SIZE...
 *       REPS round trips per size after a warm-up (SIZE 0: the null call,
 *       else an echo of SIZE bytes, checked); one line per size:
 *       "rtt SIZE median min max" in microseconds
 *
 * Under `vmmc preload`, plain runs libtirpc unmodified over vmmc sockets. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rpc/rpc.h>

#include "vmmc/rpc.h"

#define PROG 0x20076d64u
#define VERS 1u

typedef struct {
    u_int len;
    char *val;
} bytes_t;

static bool_t xdr_bytes_t(XDR *x, bytes_t *b)
{
    return xdr_bytes(x, &b->val, &b->len, ~0u);
}

static bool_t xdr_nothing(XDR *x, void *p)
{
    (void)x, (void)p;
    return TRUE;
}

static void dispatch(struct svc_req *rq, SVCXPRT *x)
{
    switch (rq->rq_proc) {
    case 0:
        svc_sendreply(x, (xdrproc_t)xdr_nothing, NULL);
        return;
    case 1: {
        bytes_t b = {0, NULL};
        if (!svc_getargs(x, (xdrproc_t)xdr_bytes_t, (caddr_t)&b)) {
            svcerr_decode(x);
            return;
        }
        svc_sendreply(x, (xdrproc_t)xdr_bytes_t, (caddr_t)&b);
        svc_freeargs(x, (xdrproc_t)xdr_bytes_t, (caddr_t)&b);
        return;
    }
    default:
        svcerr_noproc(x);
    }
}

static int server(int native, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof sin) || listen(fd, 64)) {
        perror("rpc_bench server: bind");
        return 1;
    }
    SVCXPRT *x = native ? svc_vmmc_create(fd, 0, 0) : svctcp_create(fd, 0, 0);
    if (!x || !svc_register(x, PROG, VERS, dispatch, 0)) {
        fprintf(stderr, "rpc_bench server: cannot serve: %s\n",
                native ? vmmc_rpc_last_error() : "svctcp_create/svc_register failed");
        return 1;
    }
    if (native)
        svc_vmmc_run();
    else
        svc_run();
    return 1;
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

static int client(int native, int port, int reps, int nsizes, char **sizes)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CLIENT *cl;
    if (native) {
        cl = clnt_vmmc_addr_create((struct sockaddr *)&sin, sizeof sin, PROG, VERS, 0, 0);
    } else {
        int sock = RPC_ANYSOCK;
        cl = clnttcp_create(&sin, PROG, VERS, &sock, 0, 0);
    }
    if (!cl) {
        fprintf(stderr, "rpc_bench client: %s %s\n", clnt_spcreateerror("127.0.0.1"),
                native ? vmmc_rpc_last_error() : "");
        return 1;
    }
    struct timeval tmo = {30, 0};
    double *t = malloc(sizeof *t * (size_t)reps);
    for (int s = 0; s < nsizes; s++) {
        size_t size = (size_t)atol(sizes[s]);
        char *buf = malloc(size ? size : 1);
        for (size_t i = 0; i < size; i++)
            buf[i] = (char)(i * 7 + 1);
        bytes_t in = {(u_int)size, buf};
        for (int i = -(reps / 10 + 20); i < reps; i++) {
            double t0 = now_us();
            enum clnt_stat st;
            if (size == 0) {
                st = clnt_call(cl, 0, (xdrproc_t)xdr_nothing, NULL, (xdrproc_t)xdr_nothing, NULL,
                               tmo);
            } else {
                bytes_t out = {0, NULL};
                st = clnt_call(cl, 1, (xdrproc_t)xdr_bytes_t, (caddr_t)&in,
                               (xdrproc_t)xdr_bytes_t, (caddr_t)&out, tmo);
                if (st == RPC_SUCCESS && (out.len != size || memcmp(out.val, buf, size))) {
                    fprintf(stderr, "rpc_bench client: echo of %zu bytes came back wrong\n",
                            size);
                    return 1;
                }
                clnt_freeres(cl, (xdrproc_t)xdr_bytes_t, (caddr_t)&out);
            }
            if (st != RPC_SUCCESS) {
                fprintf(stderr, "rpc_bench client: %s\n", clnt_sperror(cl, "call"));
                return 1;
            }
            if (i >= 0)
                t[i] = now_us() - t0;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        printf("rtt %zu %.3f %.3f %.3f\n", size, t[reps / 2], t[0], t[reps - 1]);
        fflush(stdout);
        free(buf);
    }
    free(t);
    clnt_destroy(cl);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "server"))
        return server(!strcmp(argv[2], "native"), atoi(argv[3]));
    if (argc >= 6 && !strcmp(argv[1], "client") && atoi(argv[4]) > 0)
        return client(!strcmp(argv[2], "native"), atoi(argv[3]), atoi(argv[4]), argc - 5,
                      argv + 5);
    fprintf(stderr, "usage: %s server plain|native PORT\n"
                    "       %s client plain|native PORT REPS SIZE...\n", argv[0], argv[0]);
    return 2;
}
