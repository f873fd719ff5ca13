/* Link-level measurements on loopback (not a test: prints figures).
 *
 *   udp_bench [ITERS [MiB LOSS...]]
 *
 * - 64-byte one-way latency: half the round trip of a ping-pong in which the
 *   other endpoint's progress thread echoes from its receive callback;
 * - 4 MiB bandwidth: a stream of 4 MiB messages, timed until the last byte
 *   is delivered;
 * - goodput of that stream with 5 % of datagrams dropped (fault injector)
 *   against the lossless figure; or, with LOSS arguments (fractions), with
 *   each of those loss rates (MiB per stream; ITERS 0 skips the latency). */
#include "udp_test.h"

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t bytes, msgs;
    ut_ep_t *echo_to; /* non-NULL: echo every message back */
} sink_t;

static ut_ep_t E[2];
static sink_t S[2];

static int deliver(void *arg, uint32_t peer, const vmmc_udp_rec_t *rec, const void *data,
                   size_t len)
{
    ut_ep_t *e = arg;
    sink_t *s = &S[e->self];
    if (s->echo_to && (rec->flags & VMMC_UDP_F_LAST)) {
        vmmc_udp_rec_t r = *rec;
        r.flags = 0;
        vmmc_udp_link_send(e->l, peer, &r, data, len);
        return 0;
    }
    pthread_mutex_lock(&s->lock);
    s->bytes += len;
    if (rec->flags & VMMC_UDP_F_LAST)
        s->msgs++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static void wait_msgs(sink_t *s, uint64_t n)
{
    pthread_mutex_lock(&s->lock);
    while (s->msgs < n)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static void open_pair(const vmmc_udp_bindings_t *b0, const vmmc_udp_bindings_t *b1)
{
    for (int i = 0; i < 2; i++) {
        struct sockaddr_in a;
        ut_loopback(&a, 0);
        vmmc_udp_link_params_t p;
        memset(&p, 0, sizeof p);
        E[i].self = (uint32_t)i;
        p.self = (uint32_t)i;
        p.max_peers = 2;
        p.bind_addr = (struct sockaddr *)&a;
        p.bind_len = sizeof a;
        ut_token(p.token, (uint32_t)i, 0);
        p.deliver = deliver;
        p.arg = &E[i];
        p.bindings = i ? b1 : b0;
        VT_OK(vmmc_udp_link_open(&p, &E[i].l));
        memset(&S[i], 0, sizeof S[i]);
        pthread_mutex_init(&S[i].lock, NULL);
        pthread_cond_init(&S[i].cond, NULL);
    }
    VT_OK(ut_connect(&E[0], &E[1]));
    VT_OK(ut_connect(&E[1], &E[0]));
}

static void close_pair(void)
{
    vmmc_udp_link_close(E[0].l, 1000);
    vmmc_udp_link_close(E[1].l, 1000);
}

static double stream(size_t msg, uint64_t total)
{
    uint8_t *buf = calloc(1, msg);
    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.region = 1;
    uint64_t n = total / msg;
    double t0 = vt_now();
    for (uint64_t i = 0; i < n; i++)
        VT_OK(vmmc_udp_link_send(E[0].l, 1, &rec, buf, msg));
    wait_msgs(&S[1], n);
    double dt = vt_now() - t0;
    free(buf);
    return (double)(n * msg) / dt / 1048576.0;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 20000;
    if (argc > 3) {
        uint64_t total = (uint64_t)atoi(argv[2]) << 20;
        open_pair(NULL, NULL);
        double bw0 = stream(4u << 20, total);
        close_pair();
        printf("lossless: %.0f MiB/s\n", bw0);
        for (int i = 3; i < argc; i++) {
            char spec[64];
            snprintf(spec, sizeof spec, "drop=%s,seed=3", argv[i]);
            vmmc_udp_fault_spec_t fs;
            vmmc_udp_bindings_t b0, b1;
            VT_OK(vmmc_udp_fault_parse(spec, &fs));
            VT_OK(vmmc_udp_bindings_fault(&b0, &fs, VMMC_UDP_MAX_DGRAM));
            fs.seed = 4;
            VT_OK(vmmc_udp_bindings_fault(&b1, &fs, VMMC_UDP_MAX_DGRAM));
            open_pair(&b0, &b1);
            double bw = stream(4u << 20, total);
            vmmc_udp_counters_t c;
            vmmc_udp_link_counters(E[0].l, &c);
            printf("drop %s: %.0f MiB/s (%.3fx lossless; %llu retransmissions for %llu "
                   "datagrams, %llu fast, %llu timeouts)\n", argv[i], bw, bw / bw0,
                   (unsigned long long)c.retransmits, (unsigned long long)c.tx_data,
                   (unsigned long long)c.fast_retransmits, (unsigned long long)c.rto_expiries);
            if (getenv("UDP_BENCH_VERBOSE")) {
                ut_print_counters("sender", E[0].l);
                ut_print_counters("receiver", E[1].l);
            }
            close_pair();
        }
        return 0;
    }
    /* Latency. */
    open_pair(NULL, NULL);
    S[1].echo_to = &E[0];
    uint8_t msg[64] = {0};
    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.region = 1;
    for (int i = 0; i < 1000; i++) { /* warm up */
        VT_OK(vmmc_udp_link_send(E[0].l, 1, &rec, msg, sizeof msg));
        wait_msgs(&S[0], (uint64_t)i + 1);
    }
    double t0 = vt_now();
    for (int i = 0; i < iters; i++) {
        VT_OK(vmmc_udp_link_send(E[0].l, 1, &rec, msg, sizeof msg));
        wait_msgs(&S[0], 1000 + (uint64_t)i + 1);
    }
    double rtt = (vt_now() - t0) / iters;
    printf("64 B one-way latency (half round trip, link on loopback): %.1f us\n", rtt / 2 * 1e6);
    close_pair();

    /* Bandwidth, lossless, then with 5 % loss. */
    open_pair(NULL, NULL);
    double bw = stream(4u << 20, 1024ull << 20);
    printf("4 MiB messages, lossless: %.0f MiB/s\n", bw);
    close_pair();
    vmmc_udp_fault_spec_t fs;
    vmmc_udp_bindings_t b0, b1;
    VT_OK(vmmc_udp_fault_parse("drop=0.05,seed=3", &fs));
    VT_OK(vmmc_udp_bindings_fault(&b0, &fs, VMMC_UDP_MAX_DGRAM));
    fs.seed = 4;
    VT_OK(vmmc_udp_bindings_fault(&b1, &fs, VMMC_UDP_MAX_DGRAM));
    open_pair(&b0, &b1);
    double bw5 = stream(4u << 20, 1024ull << 20);
    vmmc_udp_counters_t c;
    vmmc_udp_link_counters(E[0].l, &c);
    printf("4 MiB messages, 5%% of datagrams dropped (both directions): %.0f MiB/s "
           "(%.0f%% of lossless; %llu retransmissions for %llu datagrams, %llu fast, "
           "%llu timeouts)\n",
           bw5, 100 * bw5 / bw, (unsigned long long)c.retransmits, (unsigned long long)c.tx_data,
           (unsigned long long)c.fast_retransmits, (unsigned long long)c.rto_expiries);
    close_pair();
    return 0;
}
