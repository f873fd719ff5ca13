/* A server of the vRPC test program (vtest.x).
 *
 * Built twice from this file: vtest_server links libtirpc only (rpcgen's
 * dispatch on libtirpc's own TCP transport, as any rpcgen program), and
 * vtest_server_native (VTEST_NATIVE) serves on vRPC's transport.
 *
 *   vtest_server PORT       listen on 127.0.0.1:PORT (0: the kernel picks),
 *                           no rpcbind
 *   vtest_server rpcbind    register with rpcbind (netid tcp), any port
 *
 * Prints "port N" on stdout once it serves, then serves until killed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rpc/pmap_clnt.h>

#include "vtest.h"
#ifdef VTEST_NATIVE
#include "vmmc/rpc.h"
#endif

void vtest_prog_1(struct svc_req *rq, SVCXPRT *x);

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PORT|rpcbind\n", argv[0]);
        return 2;
    }
    SVCXPRT *x;
    if (!strcmp(argv[1], "rpcbind")) {
        struct netconfig *nc = getnetconfigent("tcp");
        if (!nc) {
            fprintf(stderr, "vtest_server: no netid tcp\n");
            return 1;
        }
#ifdef VTEST_NATIVE
        x = svc_vmmc_tp_create(vtest_prog_1, VTEST_PROG, VTEST_VERS, nc);
        if (!x) {
            fprintf(stderr, "vtest_server: svc_vmmc_tp_create: %s\n", vmmc_rpc_last_error());
            return 1;
        }
#else
        x = svc_tp_create(vtest_prog_1, VTEST_PROG, VTEST_VERS, nc);
        if (!x) {
            fprintf(stderr, "vtest_server: svc_tp_create failed\n");
            return 1;
        }
#endif
        freenetconfigent(nc);
    } else {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof sin) || listen(fd, 128)) {
            perror("vtest_server: bind/listen");
            return 1;
        }
#ifdef VTEST_NATIVE
        x = svc_vmmc_create(fd, 0, 0);
        if (!x) {
            fprintf(stderr, "vtest_server: svc_vmmc_create: %s\n", vmmc_rpc_last_error());
            return 1;
        }
#else
        x = svctcp_create(fd, 0, 0);
        if (!x) {
            fprintf(stderr, "vtest_server: svctcp_create failed\n");
            return 1;
        }
#endif
        if (!svc_register(x, VTEST_PROG, VTEST_VERS, vtest_prog_1, 0)) {
            fprintf(stderr, "vtest_server: svc_register failed\n");
            return 1;
        }
    }
    printf("port %u\n", (unsigned)x->xp_port);
    fflush(stdout);
#ifdef VTEST_NATIVE
    svc_vmmc_run();
    fprintf(stderr, "vtest_server: svc_vmmc_run returned: %s\n", vmmc_rpc_last_error());
#else
    svc_run();
    fprintf(stderr, "vtest_server: svc_run returned\n");
#endif
    return 1;
}
