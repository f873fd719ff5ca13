/* The link over IPv6 (::1): a verified stream each way, with loss injected,
 * and junk from another IPv6 socket refused.
 * Skipped when this machine has no IPv6 loopback. */
#include "udp_test.h"

int main(void)
{
    int probe = socket(AF_INET6, SOCK_DGRAM, 0);
    struct sockaddr_in6 a6;
    memset(&a6, 0, sizeof a6);
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_loopback;
    if (probe < 0 || bind(probe, (struct sockaddr *)&a6, sizeof a6) != 0)
        VT_SKIP("no IPv6 loopback here (::1 cannot be bound)");
    close(probe);

    uint64_t total = 32 << 20;
    ut_ep_t *e = calloc(2, sizeof *e);
    vmmc_udp_fault_spec_t fs;
    vmmc_udp_bindings_t b[2];
    for (int i = 0; i < 2; i++) {
        VT_OK(vmmc_udp_fault_parse(i ? "drop=0.03,reorder=0.02,seed=2" : "drop=0.03,seed=1", &fs));
        VT_OK(vmmc_udp_bindings_fault(&b[i], &fs, VMMC_UDP_MAX_DGRAM));
        ut_rx_init(&e[i].rx, 900 + (uint64_t)(1 - i), total);
        VT_OK(ut_open_addr(&e[i], (uint32_t)i, 2, (struct sockaddr *)&a6, sizeof a6, &b[i]));
    }
    VT_OK(ut_connect(&e[0], &e[1]));
    VT_OK(ut_connect(&e[1], &e[0]));
    VT_CHECK(vmmc_udp_link_payload_max(e[0].l) > 60000);

    ut_stream_pair(e, 900, total, 30);

    /* Junk from another IPv6 socket is refused. */
    int s6 = socket(AF_INET6, SOCK_DGRAM, 0);
    VT_CHECK(s6 >= 0 && bind(s6, (struct sockaddr *)&a6, sizeof a6) == 0);
    struct sockaddr_storage to;
    socklen_t tl;
    VT_OK(vmmc_udp_link_local_addr(e[0].l, &to, &tl));
    vmmc_udp_counters_t c0, c1;
    /* The streams are in, but the link may still hand over a last fragment
     * that waited behind a hole: start counting once deliveries are still. */
    vmmc_udp_link_counters(e[0].l, &c0);
    for (double still = vt_now() + 10; vt_now() < still;) {
        usleep(100000);
        vmmc_udp_link_counters(e[0].l, &c1);
        if (c1.delivered_frags == c0.delivered_frags)
            break;
        c0 = c1;
    }
    uint8_t junk[VMMC_UDP_HDR_MIN] = {0x56, 0x4D, VMMC_UDP_VERSION, VMMC_UDP_T_KEEPALIVE};
    /* Several: the injector drops some of what arrives. */
    for (int i = 0; i < 20; i++)
        VT_CHECK(sendto(s6, junk, sizeof junk, 0, (struct sockaddr *)&to, tl) ==
                 (ssize_t)sizeof junk);
    double end = vt_now() + 5;
    do {
        usleep(1000);
        vmmc_udp_link_counters(e[0].l, &c1);
    } while (c1.drop_unknown_peer == c0.drop_unknown_peer && vt_now() < end);
    VT_CHECK(c1.drop_unknown_peer > c0.drop_unknown_peer); /* seen, refused (not a peer's address) */
    VT_CHECK(c1.delivered_frags == c0.delivered_frags);
    close(s6);
    ut_print_counters("ep0", e[0].l);
    vmmc_udp_link_close(e[0].l, 1000);
    vmmc_udp_link_close(e[1].l, 1000);
    free(e);
    printf("PASS\n");
    return 0;
}
