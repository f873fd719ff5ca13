/* Small messages posted (vmmc_udp_link_post) leave in multi-record
 * datagrams: two endpoints exchange a stream of mostly small messages, some
 * posted, some sent the ordinary way in between (which must not overtake
 * the posted ones), through the fault injector (drop, duplicate, reorder)
 * and a receiver that refuses some deliveries (busy, so a batch is taken in
 * several offers); every byte is checked: content, order, exactly once. The
 * counters must show that messages were coalesced, several per datagram.
 * Usage: test_udp_coalesce DROP DUP REORDER BUSY_PCT MESSAGES */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "udp_test.h"

typedef struct tx_arg {
    vmmc_udp_link_t *l;
    uint32_t peer;
    uint64_t seed, msgs, total;
    int st;
} tx_arg_t;

/* Message sizes of the stream: posted ones of 1..256 bytes, one in eight
 * of them up to 4 KiB (the largest record), with now and then an ordinary
 * send of up to 8 KiB; both from the same generator on each side, so the
 * receiver knows the total. */
static size_t msg_size(unsigned long long *rng, int *post)
{
    unsigned long long r = vt_rand(rng);
    *post = r % 16 != 0;
    if (!*post)
        return 1 + (size_t)(r >> 8) % 8192;
    return 1 + (size_t)(r >> 8) % ((r >> 4) % 8 == 0 ? 4096 : 256);
}

static void *tx_main(void *a)
{
    tx_arg_t *t = a;
    uint8_t buf[8192];
    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.region = UT_REGION;
    ut_token(rec.token, t->peer, UT_REGION);
    unsigned long long rng = t->seed;
    uint64_t pos = 0;
    for (uint64_t m = 0; m < t->msgs; m++) {
        int post;
        size_t n = msg_size(&rng, &post);
        ut_fill(t->seed, pos, buf, n);
        rec.offset = pos;
        rec.imm = m;
        t->st = post ? vmmc_udp_link_post(t->l, t->peer, &rec, buf, n, 0)
                     : vmmc_udp_link_send(t->l, t->peer, &rec, buf, n);
        memset(buf, 0xEE, n); /* the source is reusable on return */
        if (t->st != VMMC_OK)
            return NULL;
        pos += n;
    }
    /* Delivered, not just acknowledged: nothing may stay in a batch. */
    t->st = vmmc_udp_link_sync(t->l, t->peer, 60000, 0);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 6)
        VT_FAIL("usage: %s DROP DUP REORDER BUSY_PCT MESSAGES", argv[0]);
    uint64_t msgs = strtoull(argv[5], NULL, 10);
    ut_ep_t *e = calloc(2, sizeof *e);
    vmmc_udp_fault_spec_t fs[2];
    vmmc_udp_bindings_t b[2];
    tx_arg_t t[2];
    for (int i = 0; i < 2; i++) {
        char spec[160];
        snprintf(spec, sizeof spec, "drop=%s,dup=%s,reorder=%s,seed=%d", argv[1], argv[2],
                 argv[3], 21 + i);
        VT_OK(vmmc_udp_fault_parse(spec, &fs[i]));
        VT_OK(vmmc_udp_bindings_fault(&b[i], &fs[i], VMMC_UDP_MAX_DGRAM));
        /* The stream's length, from the sender's generator. */
        uint64_t seed = 3000 + (uint64_t)(1 - i), total = 0;
        unsigned long long rng = seed;
        for (uint64_t m = 0; m < msgs; m++) {
            int post;
            total += msg_size(&rng, &post);
        }
        ut_rx_init(&e[i].rx, seed, total);
        e[i].busy_pct = (unsigned)atoi(argv[4]);
        e[i].busy_rng = 77 + (unsigned long long)i;
        VT_OK(ut_open(&e[i], (uint32_t)i, 2, 0, &b[i]));
        t[1 - i] = (tx_arg_t){.peer = (uint32_t)i, .seed = seed, .msgs = msgs, .total = total};
    }
    VT_OK(ut_connect(&e[0], &e[1]));
    VT_OK(ut_connect(&e[1], &e[0]));
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        t[i].l = e[i].l;
        VT_CHECK(pthread_create(&th[i], NULL, tx_main, &t[i]) == 0);
    }
    for (int i = 0; i < 2; i++)
        VT_CHECK(pthread_join(th[i], NULL) == 0);
    for (int i = 0; i < 2; i++) {
        VT_OK(t[i].st);
        int ok = ut_rx_wait(&e[i].rx, 60);
        if (!ok)
            VT_FAIL("ep%d: stream incomplete or wrong: %s (%llu of %llu bytes)", i, e[i].rx.err,
                    (unsigned long long)e[i].rx.expect, (unsigned long long)e[i].rx.total);
        VT_CHECK(e[i].rx.msgs == msgs);
        vmmc_udp_counters_t c;
        vmmc_udp_link_counters(e[i].l, &c);
        ut_print_counters(i ? "ep1" : "ep0", e[i].l);
        /* Coalesced, several per datagram, and taken as records. */
        VT_CHECK(c.tx_coalesced > msgs / 2);
        VT_CHECK(c.tx_batches > 0 && c.tx_batches * 4 < c.tx_coalesced);
        VT_CHECK(c.rx_records > msgs / 2);
        VT_CHECK(c.drop_records == 0 && c.drop_auth == 0 && c.drop_bad_ack == 0);
        if (e[i].busy_pct)
            VT_CHECK(e[i].busy_count > 0 && c.deliver_busy > 0);
        vmmc_udp_fault_stats_t st;
        vmmc_udp_fault_stats(vmmc_udp_link_bindings(e[i].l), &st);
        if (fs[i].drop > 0)
            VT_CHECK(st.dropped > 0);
    }
    vmmc_udp_link_close(e[0].l, 1000);
    vmmc_udp_link_close(e[1].l, 1000);
    free(e);
    printf("PASS\n");
    return 0;
}
