/* One link endpoint as a program, for tests across processes or network
 * namespaces: sends MIB of the verifiable stream to its peer, checks the
 * peer's stream, waits for its own data to be acknowledged, then closes.
 *
 *   udp_peer SELF BIND_IP BIND_PORT PEER_IP PEER_PORT MIB
 *
 * SELF is 0 or 1 (the peer is the other). IPv4 or IPv6 addresses. Exit 0 on
 * success, 1 with a message on failure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include "udp_test.h"

static int parse(const char *ip, const char *port, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)atoi(port));
        *len = sizeof *a4;
        return 0;
    }
    if (inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)atoi(port));
        *len = sizeof *a6;
        return 0;
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 7)
        VT_FAIL("usage: %s SELF BIND_IP BIND_PORT PEER_IP PEER_PORT MIB", argv[0]);
    uint32_t self = (uint32_t)atoi(argv[1]) & 1, peer = self ^ 1;
    struct sockaddr_storage me, them;
    socklen_t ml, tl;
    if (parse(argv[2], argv[3], &me, &ml) || parse(argv[4], argv[5], &them, &tl))
        VT_FAIL("bad address");
    uint64_t total = (uint64_t)(atof(argv[6]) * 1048576);

    ut_ep_t e;
    ut_rx_init(&e.rx, 700 + peer, total);
    vmmc_udp_link_params_t p;
    memset(&p, 0, sizeof p);
    e.self = self;
    p.self = self;
    p.max_peers = 2;
    p.bind_addr = (struct sockaddr *)&me;
    p.bind_len = ml;
    ut_token(p.token, self, 0);
    p.deliver = ut_deliver;
    p.accept = ut_accept;
    p.dead = ut_dead;
    p.arg = &e;
    VT_OK(vmmc_udp_link_open(&p, &e.l));
    uint8_t tok[16];
    ut_token(tok, peer, 0);
    VT_OK(vmmc_udp_link_add_peer(e.l, peer, (struct sockaddr *)&them, tl, tok));
    double t0 = vt_now();
    VT_OK(ut_tx_stream(e.l, peer, 700 + self, total, 17 + self));
    VT_OK(vmmc_udp_link_flush(e.l, peer, 60000));
    if (!ut_rx_wait(&e.rx, 60))
        VT_FAIL("stream from peer %u: %s (%llu of %llu bytes%s)", peer, e.rx.err,
                (unsigned long long)e.rx.expect, (unsigned long long)total,
                e.rx.peer_dead ? ", peer dead" : "");
    double dt = vt_now() - t0;
    char name[16];
    snprintf(name, sizeof name, "ep%u", self);
    ut_print_counters(name, e.l);
    printf("ep%u: %.1f MiB each way in %.2f s, all bytes verified\n", self,
           (double)total / 1048576, dt);
    vmmc_udp_link_close(e.l, 2000);
    return 0;
}
