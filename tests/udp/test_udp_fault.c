/* The fault injector (test facility): spec parsing with clear errors, and
 * its decisions on real datagrams (drop everything, drop nothing, seeded
 * runs reproducible). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "udp_test.h"

static int sock(struct sockaddr_in *a)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    ut_loopback(a, 0);
    VT_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)a, sizeof *a) == 0);
    socklen_t l = sizeof *a;
    VT_CHECK(getsockname(fd, (struct sockaddr *)a, &l) == 0);
    return fd;
}

/* Send @n numbered datagrams to @to, then read them back through @b until
 * nothing more comes; record the order in @seen. Returns how many came up. */
static int run(vmmc_udp_bindings_t *b, int tx, int rx, const struct sockaddr_in *to, int n,
               int *seen, int cap)
{
    for (int i = 0; i < n; i++)
        VT_CHECK(sendto(tx, &i, sizeof i, 0, (const struct sockaddr *)to, sizeof *to) == sizeof i);
    usleep(20000);
    int got = 0;
    double end = vt_now() + 0.5;
    while (vt_now() < end) {
        struct mmsghdr m[8];
        struct iovec iov[8];
        int buf[8][4];
        struct sockaddr_in from[8];
        for (int k = 0; k < 8; k++) {
            memset(&m[k], 0, sizeof m[k]);
            iov[k].iov_base = buf[k];
            iov[k].iov_len = sizeof buf[k];
            m[k].msg_hdr.msg_iov = &iov[k];
            m[k].msg_hdr.msg_iovlen = 1;
            m[k].msg_hdr.msg_name = &from[k];
            m[k].msg_hdr.msg_namelen = sizeof from[k];
        }
        int r = b->recvmmsg(b->ctx, rx, m, 8);
        for (int k = 0; k < r; k++)
            if (got < cap)
                memcpy(&seen[got++], m[k].msg_hdr.msg_iov[0].iov_base, sizeof(int));
        if (r <= 0)
            usleep(200);
    }
    return got;
}

int main(void)
{
    vmmc_udp_fault_spec_t s;
    VT_OK(vmmc_udp_fault_parse("drop=0.05,dup=0.01,reorder=0.02,delay=200us,seed=7", &s));
    VT_CHECK(s.drop == 0.05 && s.dup == 0.01 && s.reorder == 0.02 && s.delay_ns == 200000 &&
             s.seed == 7);
    VT_OK(vmmc_udp_fault_parse("", &s));
    VT_CHECK(s.drop == 0 && s.dup == 0 && s.reorder == 0 && s.delay_ns == 0);
    const char *bad[] = {"drop=2", "drop=-0.1", "drop=x", "loss=0.1", "drop", "delay=fast",
                         "seed=abc", "dup=0.5,,reorder"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        VT_STATUS(VMMC_ERR_INVALID, vmmc_udp_fault_parse(bad[i], &s));
        VT_CHECK(strstr(vmmc_last_error(), "fault spec") != NULL);
    }

    struct sockaddr_in ta, ra;
    int tx = sock(&ta), rx = sock(&ra);
    int seen[600], seen2[600];
    vmmc_udp_bindings_t b;
    vmmc_udp_fault_stats_t st;

    VT_OK(vmmc_udp_fault_parse("drop=1", &s));
    VT_OK(vmmc_udp_bindings_fault(&b, &s, 2048));
    VT_CHECK(run(&b, tx, rx, &ra, 100, seen, 600) == 0);
    vmmc_udp_fault_stats(&b, &st);
    VT_CHECK(st.seen == 100 && st.dropped == 100);
    b.destroy(b.ctx);

    VT_OK(vmmc_udp_fault_parse("dup=1", &s));
    VT_OK(vmmc_udp_bindings_fault(&b, &s, 2048));
    VT_CHECK(run(&b, tx, rx, &ra, 100, seen, 600) == 200); /* each one twice */
    b.destroy(b.ctx);

    /* Same seed, same datagrams: the same decisions. */
    VT_OK(vmmc_udp_fault_parse("drop=0.3,dup=0.1,seed=11", &s));
    VT_OK(vmmc_udp_bindings_fault(&b, &s, 2048));
    int n1 = run(&b, tx, rx, &ra, 200, seen, 600);
    b.destroy(b.ctx);
    VT_OK(vmmc_udp_bindings_fault(&b, &s, 2048));
    int n2 = run(&b, tx, rx, &ra, 200, seen2, 600);
    vmmc_udp_fault_stats(&b, &st);
    b.destroy(b.ctx);
    VT_CHECK(n1 == n2 && n1 > 100 && n1 < 200);
    VT_CHECK(st.dropped > 20 && st.duplicated > 5);
    /* The same set of datagrams came up (order may differ: copies are
     * released later). */
    int c1[200] = {0}, c2[200] = {0};
    for (int i = 0; i < n1; i++) {
        VT_CHECK(seen[i] >= 0 && seen[i] < 200 && seen2[i] >= 0 && seen2[i] < 200);
        c1[seen[i]]++;
        c2[seen2[i]]++;
    }
    VT_CHECK(!memcmp(c1, c2, sizeof c1));

    /* Reordering: something overtakes something. */
    VT_OK(vmmc_udp_fault_parse("reorder=0.5,seed=3", &s));
    VT_OK(vmmc_udp_bindings_fault(&b, &s, 2048));
    int n3 = run(&b, tx, rx, &ra, 200, seen, 600);
    b.destroy(b.ctx);
    VT_CHECK(n3 == 200);
    int inversions = 0;
    for (int i = 1; i < n3; i++)
        inversions += seen[i] < seen[i - 1];
    VT_CHECK(inversions > 0);
    close(tx);
    close(rx);
    printf("PASS\n");
    return 0;
}
