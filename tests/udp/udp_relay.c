/* A lossy UDP relay between two endpoints, for tests.
 *
 *   udp_relay A_PORT B_PORT [drop=P,dup=P,reorder=P,delay=T,seed=N]
 *
 * Binds two sockets on 127.0.0.1 (X faces the endpoint at A_PORT, Y faces
 * the one at B_PORT) and prints "X_PORT Y_PORT\n" on stdout. A datagram from
 * A arriving at X leaves from Y to B, and one from B arriving at Y leaves
 * from X to A; on the way it may be dropped, duplicated, held back (reorder)
 * or delayed. Datagrams from anyone else are ignored. Exits when its
 * standard input closes (the test that started it is gone) or on SIGTERM. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport/udp/fault.h"

#define MAXQ 1024
typedef struct {
    uint64_t due;
    int out;           /* socket to send from */
    struct sockaddr_in to;
    size_t len;
    uint8_t *data;
} pending_t;

static pending_t q[MAXQ];
static int nq;
static uint64_t rng;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static double unif(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

static void enqueue(int out, const struct sockaddr_in *to, const uint8_t *d, size_t n, uint64_t due)
{
    if (nq == MAXQ) { /* full: send now */
        (void)sendto(out, d, n, 0, (const struct sockaddr *)to, sizeof *to);
        return;
    }
    pending_t *p = &q[nq++];
    p->due = due;
    p->out = out;
    p->to = *to;
    p->len = n;
    p->data = malloc(n);
    memcpy(p->data, d, n);
}

static void flush_due(uint64_t now)
{
    for (int i = 0; i < nq;) {
        if (q[i].due <= now) {
            (void)sendto(q[i].out, q[i].data, q[i].len, 0, (struct sockaddr *)&q[i].to,
                         sizeof q[i].to);
            free(q[i].data);
            q[i] = q[--nq];
        } else {
            i++;
        }
    }
}

static int bind_any(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int big = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("udp_relay: bind");
        exit(1);
    }
    return fd;
}

static uint16_t port_of(int fd)
{
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    return ntohs(a.sin_port);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s A_PORT B_PORT [fault spec]\n", argv[0]);
        return 2;
    }
    vmmc_udp_fault_spec_t spec;
    if (vmmc_udp_fault_parse(argc > 3 ? argv[3] : "", &spec) != 0) {
        fprintf(stderr, "udp_relay: bad fault spec '%s'\n", argv[3]);
        return 2;
    }
    rng = spec.seed;
    struct sockaddr_in ea = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in eb = ea;
    ea.sin_port = htons((uint16_t)atoi(argv[1]));
    eb.sin_port = htons((uint16_t)atoi(argv[2]));
    int x = bind_any(), y = bind_any();
    printf("%u %u\n", port_of(x), port_of(y));
    fflush(stdout);

    static uint8_t buf[65536];
    uint64_t stats[4] = {0, 0, 0, 0}; /* forwarded, dropped, duplicated, held */
    for (;;) {
        uint64_t now = now_ns();
        flush_due(now);
        int timeout = -1;
        for (int i = 0; i < nq; i++) {
            int ms = q[i].due <= now ? 0 : (int)((q[i].due - now) / 1000000) + 1;
            if (timeout < 0 || ms < timeout)
                timeout = ms;
        }
        struct pollfd pf[3] = {{x, POLLIN, 0}, {y, POLLIN, 0}, {0, POLLIN, 0}};
        if (poll(pf, 3, timeout) < 0 && errno != EINTR)
            break;
        if (pf[2].revents) {
            ssize_t r = read(0, buf, sizeof buf);
            if (r <= 0)
                break;
        }
        for (int s = 0; s < 2; s++) {
            int in = s ? y : x, out = s ? x : y;
            const struct sockaddr_in *want = s ? &eb : &ea, *to = s ? &ea : &eb;
            for (int k = 0; k < 64; k++) {
                struct sockaddr_in from;
                socklen_t fl = sizeof from;
                ssize_t n = recvfrom(in, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
                if (n < 0)
                    break;
                if (from.sin_port != want->sin_port || from.sin_addr.s_addr != want->sin_addr.s_addr)
                    continue;
                now = now_ns();
                if (unif() < spec.drop) {
                    stats[1]++;
                    continue;
                }
                if (unif() < spec.dup) {
                    stats[2]++;
                    enqueue(out, to, buf, (size_t)n, now + 20000);
                }
                uint64_t delay = 0;
                if (unif() < spec.reorder)
                    delay = 50000 + (uint64_t)(unif() * 950000);
                else if (spec.delay_ns)
                    delay = (uint64_t)(unif() * (double)spec.delay_ns);
                if (delay) {
                    stats[3]++;
                    enqueue(out, to, buf, (size_t)n, now + delay);
                } else {
                    (void)sendto(out, buf, (size_t)n, 0, (const struct sockaddr *)to, sizeof *to);
                }
                stats[0]++;
            }
        }
    }
    fprintf(stderr, "udp_relay: forwarded %llu dropped %llu duplicated %llu held %llu\n",
            (unsigned long long)stats[0], (unsigned long long)stats[1],
            (unsigned long long)stats[2], (unsigned long long)stats[3]);
    return 0;
}
