/* Reaching the bootstrap: the launcher's abstract Unix socket, or the TCP
 * rendezvous at host:port, each retried with growing pauses until the
 * deadline. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/boot_priv.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

/* Connect a non-blocking socket within the deadline. Returns 0, or a
 * negative errno (the attempt may be retried). */
static int connect_wait(int fd, const struct sockaddr *sa, socklen_t len, int64_t deadline)
{
    if (connect(fd, sa, len) == 0)
        return 0;
    if (errno != EINPROGRESS && errno != EINTR)
        return -errno;
    for (;;) {
        int left = vmmc_bw_left_ms(deadline);
        if (left == 0)
            return -ETIMEDOUT;
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int n = poll(&pf, 1, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            continue;
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
            return -errno;
        return -err;
    }
}

static void pause_ms(int ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) < 0 && errno == EINTR)
        ;
}

int vmmc_boot_connect_launcher(const char *name, int64_t deadline, int *out)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    if (n == 0 || n > sizeof sa.sun_path - 1)
        return vmmc_error(VMMC_ERR_INVALID, "VMMC_LAUNCHER=%s is not a valid socket name", name);
    memcpy(sa.sun_path + 1, name, n); /* abstract: sun_path[0] == 0 */
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    for (int delay = 5;; delay = delay < 200 ? delay * 2 : 200) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return vmmc_error_sys("socket(AF_UNIX)");
        int rc = connect_wait(fd, (struct sockaddr *)&sa, len, deadline);
        if (rc == 0) {
            *out = fd;
            return VMMC_OK;
        }
        close(fd);
        /* EAGAIN: the launcher's backlog is full; anything else: it is gone. */
        if (rc != -EAGAIN || vmmc_bw_left_ms(deadline) == 0)
            return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "cannot reach the launcher (%s): %s", name,
                              strerror(-rc));
        pause_ms(delay);
    }
}

/* Split "host:port" or "[v6addr]:port". */
int vmmc_boot_split_hostport(const char *spec, char *host, size_t hn, char *port, size_t pn)
{
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || !colon[1])
        return vmmc_error(VMMC_ERR_INVALID, "VMMC_BOOTSTRAP=%s is not host:port", spec);
    const char *h = spec;
    size_t hl = (size_t)(colon - spec);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 1 || p > 65535 || hl == 0 || hl >= hn)
        return vmmc_error(VMMC_ERR_INVALID, "VMMC_BOOTSTRAP=%s is not host:port", spec);
    memcpy(host, h, hl);
    host[hl] = 0;
    snprintf(port, pn, "%ld", p);
    return VMMC_OK;
}

int vmmc_boot_connect_tcp(const char *host, const char *port, int64_t deadline, int *out)
{
    int last = 0;
    for (int delay = 10;; delay = delay < 500 ? delay * 2 : 500) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *res = NULL;
        int g = getaddrinfo(host, port, &hints, &res);
        if (g == 0) {
            for (struct addrinfo *a = res; a; a = a->ai_next) {
                int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                                a->ai_protocol);
                if (fd < 0) {
                    last = errno;
                    continue;
                }
                int64_t step = vmmc_bw_now_ms() + 1000;
                int rc = connect_wait(fd, a->ai_addr, a->ai_addrlen,
                                      deadline < step ? deadline : step);
                if (rc == 0) {
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    freeaddrinfo(res);
                    *out = fd;
                    return VMMC_OK;
                }
                last = -rc;
                close(fd);
            }
            freeaddrinfo(res);
        } else if (g == EAI_NONAME || g == EAI_SERVICE) {
            return vmmc_error(VMMC_ERR_INVALID, "VMMC_BOOTSTRAP host %s port %s: %s", host, port,
                              gai_strerror(g));
        }
        if (vmmc_bw_left_ms(deadline) == 0)
            return vmmc_error(VMMC_ERR_PEER_UNREACHABLE,
                              "cannot reach the bootstrap server %s:%s: %s", host, port,
                              g ? gai_strerror(g) : strerror(last ? last : ETIMEDOUT));
        int left = vmmc_bw_left_ms(deadline);
        pause_ms(left >= 0 && left < delay ? left : delay);
    }
}
