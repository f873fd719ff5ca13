/* Two endpoints on loopback exchange a random byte stream in both directions
 * through the fault injector (drop, duplicate, reorder, delay); every byte is
 * checked: content, order, exactly once.
 * Usage: test_udp_loss DROP DUP REORDER MBYTES [DELAY] */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include "udp_test.h"

int main(int argc, char **argv)
{
    if (argc < 5)
        VT_FAIL("usage: %s DROP DUP REORDER MBYTES [DELAY]", argv[0]);
    if (getenv("UDP_LONG_TEST") == NULL && argc > 6 && !strcmp(argv[6], "long"))
        VT_SKIP("long test: run with UDP_LONG_TEST=1 (ctest -L long)");
    char spec[2][160];
    for (int i = 0; i < 2; i++)
        snprintf(spec[i], sizeof spec[i], "drop=%s,dup=%s,reorder=%s,delay=%s,seed=%d", argv[1],
                 argv[2], argv[3], argc > 5 ? argv[5] : "0", 11 + i);
    uint64_t total = (uint64_t)(atof(argv[4]) * 1024 * 1024);

    vmmc_udp_fault_spec_t fs[2];
    vmmc_udp_bindings_t b[2];
    ut_ep_t *e = calloc(2, sizeof *e);
    for (int i = 0; i < 2; i++) {
        VT_OK(vmmc_udp_fault_parse(spec[i], &fs[i]));
        VT_OK(vmmc_udp_bindings_fault(&b[i], &fs[i], VMMC_UDP_MAX_DGRAM));
        ut_rx_init(&e[i].rx, 1000 + (uint64_t)(1 - i), total);
        VT_OK(ut_open(&e[i], (uint32_t)i, 2, 0, &b[i]));
    }
    VT_OK(ut_connect(&e[0], &e[1]));
    VT_OK(ut_connect(&e[1], &e[0]));

    double t0 = vt_now();
    ut_stream_pair(e, 1000, total, 60);
    double dt = vt_now() - t0;

    for (int i = 0; i < 2; i++) {
        vmmc_udp_fault_stats_t st;
        vmmc_udp_fault_stats(vmmc_udp_link_bindings(e[i].l), &st);
        vmmc_udp_counters_t c;
        vmmc_udp_link_counters(e[i].l, &c);
        printf("ep%d: faults seen=%llu dropped=%llu dup=%llu reordered=%llu delayed=%llu; "
               "%llu messages\n", i, (unsigned long long)st.seen, (unsigned long long)st.dropped,
               (unsigned long long)st.duplicated, (unsigned long long)st.reordered,
               (unsigned long long)st.delayed, (unsigned long long)e[i].rx.msgs);
        ut_print_counters(i ? "ep1" : "ep0", e[i].l);
        /* The injector must really have acted, and the link recovered. */
        if (fs[i].drop > 0) {
            VT_CHECK(st.dropped > 0);
            VT_CHECK(c.retransmits > 0 || i == 1);
        }
        if (fs[i].dup > 0)
            VT_CHECK(st.duplicated > 0 && c.drop_duplicate > 0);
        VT_CHECK(c.drop_auth == 0 && c.drop_bad_ack == 0 && c.drop_unknown_peer == 0);
    }
    printf("%.1f MiB each way in %.2f s: %.1f MiB/s per direction\n", (double)total / 1048576.0,
           dt, (double)total / 1048576.0 / dt);
    vmmc_udp_link_close(e[0].l, 1000);
    vmmc_udp_link_close(e[1].l, 1000);
    free(e);
    printf("PASS\n");
    return 0;
}
