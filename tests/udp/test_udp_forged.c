/* Forged and malformed datagrams are dropped and counted, never delivered,
 * and change no state: garbage, truncated, oversized, wrong magic/version,
 * corrupted payload or header, unknown peer, wrong source address, a tag
 * made without the link's key (a forger's), a tag for another destination,
 * wrong region token (the capability hook), out-of-window sequence,
 * impossible ack, replayed control datagrams. A plain socket plays peer 1
 * (it knows peer 1's secret, so it can also make valid datagrams);
 * afterwards a valid datagram still gets through, exactly once, and the
 * link's acknowledgement is made with the key of the link to peer 1. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include "transport/udp/crc32c.h"
#include "udp_test.h"

static int raw_socket(struct sockaddr_in *self)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    VT_CHECK(fd >= 0);
    ut_loopback(self, 0);
    VT_CHECK(bind(fd, (struct sockaddr *)self, sizeof *self) == 0);
    socklen_t len = sizeof *self;
    VT_CHECK(getsockname(fd, (struct sockaddr *)self, &len) == 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static uint8_t pkt[70000];
static vmmc_udp_key_t k10; /* the link from peer 1 to endpoint 0 */

static size_t make_k(const vmmc_udp_hdr_t *h, const void *payload, const vmmc_udp_key_t *k)
{
    unsigned hl = vmmc_udp_encode(pkt, h, vmmc_crc32c(0, payload, h->length), k);
    memcpy(pkt + hl, payload, h->length);
    return hl + h->length;
}

static size_t make(const vmmc_udp_hdr_t *h, const void *payload)
{
    unsigned hl = vmmc_udp_encode(pkt, h, vmmc_crc32c(0, payload, h->length), &k10);
    memcpy(pkt + hl, payload, h->length);
    return hl + h->length;
}

static vmmc_udp_link_t *target;
static struct sockaddr_storage target_addr;
static socklen_t target_len;
static uint64_t sent;

static void fire(int fd, const void *buf, size_t n)
{
    VT_CHECK(sendto(fd, buf, n, 0, (struct sockaddr *)&target_addr, target_len) == (ssize_t)n);
    sent++;
}

/* Wait until the link has looked at everything fired so far. */
static void settle(void)
{
    vmmc_udp_counters_t c;
    double end = vt_now() + 10;
    do {
        vmmc_udp_link_counters(target, &c);
        if (c.rx_dgrams >= sent)
            return;
        usleep(1000);
    } while (vt_now() < end);
    VT_FAIL("link saw %llu of %llu datagrams", (unsigned long long)c.rx_dgrams,
            (unsigned long long)sent);
}

#define EXPECT_COUNT(field, n)                                                          \
    do {                                                                                \
        settle();                                                                       \
        vmmc_udp_counters_t c_;                                                         \
        vmmc_udp_link_counters(target, &c_);                                            \
        if (c_.field != (uint64_t)(n))                                                  \
            VT_FAIL("%s = %llu, expected %llu", #field, (unsigned long long)c_.field,   \
                    (unsigned long long)(n));                                           \
        VT_CHECK(c_.delivered_frags == delivered_expect);                               \
    } while (0)

int main(void)
{
    ut_ep_t e;
    ut_rx_init(&e.rx, 5, 100);
    VT_OK(ut_open(&e, 0, 3, 0, NULL));
    target = e.l;
    VT_OK(vmmc_udp_link_local_addr(e.l, &target_addr, &target_len));

    struct sockaddr_in peer_addr, stranger_addr;
    int pfd = raw_socket(&peer_addr);     /* registered as peer 1 */
    int sfd = raw_socket(&stranger_addr); /* not registered */
    uint8_t peer_tok[16], link_tok[16], region_tok[16];
    ut_token(peer_tok, 1, 0);
    ut_token(link_tok, 0, 0);
    ut_token(region_tok, 0, UT_REGION);
    VT_OK(vmmc_udp_link_add_peer(e.l, 1, (struct sockaddr *)&peer_addr, sizeof peer_addr, peer_tok));
    vmmc_udp_key_derive(&k10, peer_tok, 1, link_tok, 0);
    uint64_t delivered_expect = 0;

    uint8_t payload[100];
    ut_fill(5, 0, payload, sizeof payload);
    vmmc_udp_hdr_t good;
    memset(&good, 0, sizeof good);
    good.type = VMMC_UDP_T_DATA;
    good.flags = VMMC_UDP_F_FIRST | VMMC_UDP_F_LAST;
    good.wnd = 64;
    good.src = 1;
    memcpy(good.token, region_tok, 16);
    good.region = UT_REGION;
    good.length = sizeof payload;
    good.seq = 1;

    /* Stateless checks. */
    fire(pfd, "x", 1);
    EXPECT_COUNT(drop_truncated, 1);
    size_t n = make(&good, payload);
    fire(pfd, pkt, n - 1);
    fire(pfd, pkt, VMMC_UDP_HDR_MIN - 1);
    EXPECT_COUNT(drop_truncated, 3);
    static uint8_t huge[65000];
    memcpy(huge, pkt, n);
    fire(pfd, huge, sizeof huge); /* larger than the link's datagram size: cut by the kernel */
    EXPECT_COUNT(drop_truncated, 4);
    n = make(&good, payload);
    pkt[0] ^= 0xff;
    fire(pfd, pkt, n);
    EXPECT_COUNT(drop_magic, 1);
    n = make(&good, payload);
    pkt[2] = 9;
    fire(pfd, pkt, n);
    EXPECT_COUNT(drop_version, 1);
    n = make(&good, payload);
    pkt[n - 10] ^= 4; /* in the payload */
    fire(pfd, pkt, n);
    n = make(&good, payload);
    pkt[50] ^= 1; /* in the header (the sequence number) */
    fire(pfd, pkt, n);
    EXPECT_COUNT(drop_auth, 2);

    /* Who sent it. */
    n = make(&good, payload);
    fire(sfd, pkt, n); /* right everything, wrong source address */
    EXPECT_COUNT(drop_unknown_peer, 1);
    vmmc_udp_hdr_t h = good;
    h.src = 2; /* never registered */
    fire(pfd, pkt, make(&h, payload));
    h.src = 99; /* out of range */
    fire(pfd, pkt, make(&h, payload));
    EXPECT_COUNT(drop_unknown_peer, 3);

    /* Authentication: everything right but the key. */
    uint8_t guess[16];
    ut_token(guess, 9, 9);
    vmmc_udp_key_t forger, other_dst, reverse;
    vmmc_udp_key_derive(&forger, peer_tok, 1, guess, 0); /* without endpoint 0's secret */
    vmmc_udp_key_derive(&other_dst, peer_tok, 1, link_tok, 2); /* for endpoint 2 */
    vmmc_udp_key_derive(&reverse, link_tok, 0, peer_tok, 1); /* 0's own direction, reflected */
    fire(pfd, pkt, make_k(&good, payload, &forger));
    fire(pfd, pkt, make_k(&good, payload, &other_dst));
    fire(pfd, pkt, make_k(&good, payload, &reverse));
    h = good;
    h.type = VMMC_UDP_T_BYE; /* a forged goodbye would end the peer */
    h.flags = 0;
    h.length = 0;
    h.region = 0;
    memset(h.token, 0, 16);
    h.offset = 1;
    fire(pfd, pkt, make_k(&h, payload, &forger));
    EXPECT_COUNT(drop_auth, 6);
    VT_CHECK(vmmc_udp_link_peer_alive(e.l, 1) == 1);

    /* Capabilities. */
    h = good;
    h.token[3] ^= 1; /* wrong token for the region */
    fire(pfd, pkt, make(&h, payload));
    h = good;
    h.region = UT_REGION + 1; /* right token, wrong region */
    fire(pfd, pkt, make(&h, payload));
    EXPECT_COUNT(drop_bad_token, 2);

    /* Multi-record datagrams from the authenticated peer: a record count
     * beyond the records, a record whose length overruns the datagram
     * (refused whole, counted, nothing applied, sequence unmoved), and one
     * well-formed record with a wrong capability (refused by the check). */
    {
        static uint8_t mp[600];
        vmmc_udp_wrec_t r;
        memset(&r, 0, sizeof r);
        r.kind = 0;
        r.length = 50;
        r.region = UT_REGION;
        memcpy(r.token, region_tok, 16);
        uint32_t ml = 0;
        for (int i = 0; i < 2; i++) {
            r.offset = (uint64_t)i * 50;
            ml += vmmc_udp_rec_encode(mp + ml, &r);
            memcpy(mp + ml, payload + i * 50, 50);
            ml += 50;
        }
        vmmc_udp_hdr_t mh;
        memset(&mh, 0, sizeof mh);
        mh.type = VMMC_UDP_T_DATA;
        mh.flags = VMMC_UDP_F_FIRST | VMMC_UDP_F_LAST | VMMC_UDP_F_MULTI;
        mh.wnd = 64;
        mh.src = 1;
        mh.seq = 1;
        mh.length = ml;
        mh.offset = 3; /* two records there */
        fire(pfd, pkt, make(&mh, mp));
        mh.offset = 2;
        mp[2] = 0xFF; /* the first record's length: 255 bytes */
        fire(pfd, pkt, make(&mh, mp));
        mp[2] = 50;
        mh.offset = 1000000;
        fire(pfd, pkt, make(&mh, mp));
        EXPECT_COUNT(drop_records, 3);
        mh.offset = 2;
        mp[20 + 3] ^= 1; /* a byte of the first record's token (after its 20-byte header) */
        fire(pfd, pkt, make(&mh, mp));
        EXPECT_COUNT(drop_bad_token, 3);
    }

    /* Control datagrams: a fresh counter is taken once; the same again
     * (a replay) or an older one is refused. */
    h = good;
    h.type = VMMC_UDP_T_KEEPALIVE;
    h.flags = 0;
    h.length = 0;
    h.region = 0;
    memset(h.token, 0, 16);
    h.offset = 5;
    n = make(&h, payload);
    fire(pfd, pkt, n);
    fire(pfd, pkt, n);
    h.offset = 4;
    fire(pfd, pkt, make(&h, payload));
    EXPECT_COUNT(drop_replay, 2);

    /* Sequence and ack sanity. */
    h = good;
    h.seq = 1 + 64; /* beyond the receive window */
    fire(pfd, pkt, make(&h, payload));
    h.seq = 0x80000000u;
    fire(pfd, pkt, make(&h, payload));
    EXPECT_COUNT(drop_window, 2);
    h = good;
    h.ack = 5; /* acknowledges data never sent */
    fire(pfd, pkt, make(&h, payload));
    EXPECT_COUNT(drop_bad_ack, 1);

    /* Nothing so far counted as received from the peer: still no delivery;
     * the valid datagram goes through once, its duplicate is refused. */
    n = make(&good, payload);
    fire(pfd, pkt, n);
    delivered_expect = 1;
    fire(pfd, pkt, n);
    EXPECT_COUNT(drop_duplicate, 1);
    VT_CHECK(ut_rx_wait(&e.rx, 5));
    VT_CHECK(e.rx.frags == 1 && e.rx.msgs == 1);

    /* The link acknowledged seq 1 to the peer's address. */
    uint8_t ackbuf[200];
    vmmc_udp_hdr_t a;
    int got = 0;
    for (int i = 0; i < 20 && !got; i++) {
        ssize_t r = recv(pfd, ackbuf, sizeof ackbuf, 0);
        VT_CHECK(r > 0);
        if (vmmc_udp_decode(ackbuf, (size_t)r, &a) == VMMC_UDP_OK && a.type == VMMC_UDP_T_ACK &&
            a.ack == 1)
            got = 1;
    }
    VT_CHECK(got);
    vmmc_udp_key_t k01;
    vmmc_udp_key_derive(&k01, link_tok, 0, peer_tok, 1);
    VT_CHECK(a.src == 0 && vmmc_udp_auth(ackbuf, &a, &k01) == VMMC_UDP_OK);
    VT_CHECK(a.offset > 0); /* a control counter */
    ut_print_counters("target", e.l);
    vmmc_udp_link_close(e.l, 0);
    printf("PASS\n");
    return 0;
}
