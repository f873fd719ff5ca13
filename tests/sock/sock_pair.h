/* Loopback TCP pairs for the sockets tests: through the vmmc_sock_ calls and
 * through the plain kernel calls, to compare the two. */
#ifndef VMMC_TESTS_SOCK_PAIR_H
#define VMMC_TESTS_SOCK_PAIR_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vmmc/sock.h"
#include "vtest.h"

/* A vmmc listener on 127.0.0.1 (or ::1), any port; *addr gets its address. */
static inline int sp_listen(int domain, struct sockaddr_storage *addr, socklen_t *alen)
{
    int l = vmmc_sock_socket(domain, SOCK_STREAM, 0);
    VT_CHECK(l >= 0);
    int one = 1;
    VT_CHECK(vmmc_sock_setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
    struct sockaddr_storage a = {0};
    socklen_t len;
    if (domain == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&a;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *in;
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_loopback;
        len = sizeof *in6;
    }
    VT_CHECK(vmmc_sock_bind(l, (struct sockaddr *)&a, len) == 0);
    VT_CHECK(vmmc_sock_listen(l, 128) == 0);
    *alen = sizeof *addr;
    VT_CHECK(getsockname(l, (struct sockaddr *)addr, alen) == 0);
    return l;
}

/* A connected pair through vmmc: *c the client, *s the accepted server. */
static inline void sp_pair(int domain, int *c, int *s)
{
    struct sockaddr_storage a;
    socklen_t alen;
    int l = sp_listen(domain, &a, &alen);
    *c = vmmc_sock_socket(domain, SOCK_STREAM, 0);
    VT_CHECK(*c >= 0);
    VT_CHECK(vmmc_sock_connect(*c, (struct sockaddr *)&a, alen) == 0);
    *s = vmmc_sock_accept(l, NULL, NULL, 0);
    VT_CHECK(*s >= 0);
    /* let the accepted socket settle while its listener is there (the
     * client's hello came before connect returned) */
    vmmc_sock_info_t info;
    for (int i = 0; i < 10000; i++) {
        VT_CHECK(vmmc_sock_ready(*s, POLLIN) >= 0 && vmmc_sock_info(*s, &info) == 0);
        if (info.mode != VMMC_SOCK_PENDING)
            break;
        usleep(1000);
    }
    VT_CHECK(vmmc_sock_close(l) == 0);
}

/* The same with the plain kernel calls. */
static inline void sp_raw_pair(int *c, int *s)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    VT_CHECK(l >= 0 && bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 8) == 0);
    VT_CHECK(getsockname(l, (struct sockaddr *)&a, &alen) == 0);
    *c = socket(AF_INET, SOCK_STREAM, 0);
    VT_CHECK(*c >= 0 && connect(*c, (struct sockaddr *)&a, alen) == 0);
    *s = accept(l, NULL, NULL);
    VT_CHECK(*s >= 0);
    close(l);
}

/* A port nobody listens on (bound then closed). */
static inline struct sockaddr_in sp_dead_port(void)
{
    int t = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    VT_CHECK(bind(t, (struct sockaddr *)&a, sizeof a) == 0);
    VT_CHECK(getsockname(t, (struct sockaddr *)&a, &alen) == 0);
    close(t);
    return a;
}

#endif
