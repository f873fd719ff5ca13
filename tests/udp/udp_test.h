/* Helpers shared by the UDP link tests: link set-up on loopback, and a
 * verifiable byte stream (every byte is a function of its position, so the
 * receiver checks content, order and exactly-once delivery without state). */
#ifndef VMMC_TESTS_UDP_TEST_H
#define VMMC_TESTS_UDP_TEST_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "transport/udp/link.h"
#include "vtest.h"

#define UT_REGION 7u

static inline void ut_token(uint8_t tok[16], uint32_t who, uint32_t what)
{
    for (int i = 0; i < 16; i++)
        tok[i] = (uint8_t)(0xA5 ^ (who * 31 + what * 7 + (uint32_t)i * 13));
}

static inline uint64_t ut_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Fill @buf with the stream bytes at [pos, pos+len) of stream @seed. */
static inline void ut_fill(uint64_t seed, uint64_t pos, uint8_t *buf, size_t len)
{
    size_t i = 0;
    while (i < len) {
        uint64_t p = pos + i, w = ut_mix(seed ^ (p >> 3));
        unsigned k = (unsigned)(p & 7);
        for (; k < 8 && i < len; k++, i++)
            buf[i] = (uint8_t)(w >> (8 * k));
    }
}

/* Message sizes: mostly small and medium, some multi-datagram. */
static inline size_t ut_msg_size(unsigned long long *rng)
{
    unsigned long long r = vt_rand(rng);
    switch (r % 8) {
    case 0: case 1: return 1 + (size_t)(r >> 8) % 256;
    case 2: case 3: return 1 + (size_t)(r >> 8) % 16384;
    case 4: case 5: return 1 + (size_t)(r >> 8) % (256 * 1024);
    default: return 1 + (size_t)(r >> 8) % (1024 * 1024);
    }
}

/* Receiver state for one incoming stream. */
typedef struct ut_rx {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t seed;
    uint64_t expect;      /* next stream offset */
    uint64_t total;       /* bytes to expect in all */
    uint64_t msgs;        /* messages completed (LAST seen) */
    uint64_t frags;
    int in_msg;           /* between FIRST and LAST */
    int errors;
    char err[256];
    int peer_dead;
    uint8_t scratch[VMMC_UDP_MAX_DGRAM];
} ut_rx_t;

static inline void ut_rx_init(ut_rx_t *r, uint64_t seed, uint64_t total)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->seed = seed;
    r->total = total;
}

/* Check one delivered fragment of the stream. */
static inline void ut_rx_frag(ut_rx_t *r, const vmmc_udp_rec_t *rec, const void *data, size_t len)
{
    pthread_mutex_lock(&r->lock);
    r->frags++;
    if (!r->errors) {
        if (rec->region != UT_REGION) {
            r->errors++;
            snprintf(r->err, sizeof r->err, "region %u delivered", rec->region);
        } else if (rec->offset != r->expect) {
            r->errors++;
            snprintf(r->err, sizeof r->err, "offset %llu delivered, expected %llu (duplicate, "
                     "loss or reordering)", (unsigned long long)rec->offset,
                     (unsigned long long)r->expect);
        } else if (!!(rec->flags & VMMC_UDP_F_FIRST) == r->in_msg) {
            r->errors++;
            snprintf(r->err, sizeof r->err, "FIRST flag %d inside message %llu",
                     !!(rec->flags & VMMC_UDP_F_FIRST), (unsigned long long)r->msgs);
        } else if (rec->imm != r->msgs) {
            r->errors++;
            snprintf(r->err, sizeof r->err, "imm %llu, expected message %llu",
                     (unsigned long long)rec->imm, (unsigned long long)r->msgs);
        } else {
            ut_fill(r->seed, rec->offset, r->scratch, len);
            if (memcmp(r->scratch, data, len)) {
                r->errors++;
                snprintf(r->err, sizeof r->err, "corrupt bytes in [%llu, +%zu)",
                         (unsigned long long)rec->offset, len);
            }
            r->expect += len;
            r->in_msg = !(rec->flags & VMMC_UDP_F_LAST);
            if (rec->flags & VMMC_UDP_F_LAST)
                r->msgs++;
        }
    }
    if (r->errors || r->expect >= r->total)
        pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

/* Wait until the whole stream arrived, an error, or the peer died. */
static inline int ut_rx_wait(ut_rx_t *r, double timeout_s)
{
    double end = vt_now() + timeout_s;
    pthread_mutex_lock(&r->lock);
    while (!r->errors && r->expect < r->total && !r->peer_dead && vt_now() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&r->cond, &r->lock, &ts);
    }
    int ok = !r->errors && r->expect == r->total;
    pthread_mutex_unlock(&r->lock);
    return ok;
}

/* Send @total bytes of stream @seed to @peer in random-sized messages. */
static inline int ut_tx_stream(vmmc_udp_link_t *l, uint32_t peer, uint64_t seed, uint64_t total,
                               unsigned long long rng)
{
    size_t cap = 1024 * 1024;
    uint8_t *buf = malloc(cap);
    uint64_t pos = 0, msg = 0;
    int st = VMMC_OK;
    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.region = UT_REGION;
    ut_token(rec.token, peer, UT_REGION);
    while (pos < total) {
        size_t n = ut_msg_size(&rng);
        if (n > total - pos)
            n = (size_t)(total - pos);
        ut_fill(seed, pos, buf, n);
        rec.offset = pos;
        rec.imm = msg++;
        st = vmmc_udp_link_send(l, peer, &rec, buf, n);
        if (st != VMMC_OK)
            break;
        pos += n;
    }
    free(buf);
    return st;
}

/* Accept callback for tests: region UT_REGION with this endpoint's token. */
static inline int ut_accept(void *arg, uint32_t peer, uint32_t region, uint32_t gen,
                            const uint8_t tok[16])
{
    uint32_t self = *(const uint32_t *)arg;
    uint8_t want[16];
    ut_token(want, self, UT_REGION);
    return region != UT_REGION || memcmp(tok, want, 16) != 0;
}

static inline void ut_loopback(struct sockaddr_in *a, uint16_t port)
{
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

static inline void ut_print_counters(const char *who, vmmc_udp_link_t *l)
{
    const char *name;
    uint64_t v;
    printf("%s:", who);
    for (int i = 0; vmmc_udp_link_counter_get(l, i, &name, &v) == VMMC_OK; i++)
        if (v)
            printf(" %s=%llu", name, (unsigned long long)v);
    printf("\n");
    fflush(stdout);
}


/* One test endpoint: its link and the stream it receives. */
typedef struct ut_ep {
    uint32_t self; /* first: ut_accept reads it */
    ut_rx_t rx;
    vmmc_udp_link_t *l;
    unsigned busy_pct;          /* refuse this % of deliveries ("busy") */
    unsigned long long busy_rng;
    uint64_t busy_count;
} ut_ep_t;

static inline int ut_deliver(void *arg, uint32_t peer, const vmmc_udp_rec_t *rec,
                             const void *data, size_t len)
{
    ut_ep_t *e = arg;
    if (e->busy_pct && vt_rand(&e->busy_rng) % 100 < e->busy_pct) {
        e->busy_count++;
        return 1;
    }
    ut_rx_frag(&e->rx, rec, data, len);
    return 0;
}

static inline void ut_dead(void *arg, uint32_t peer, int clean)
{
    ut_ep_t *e = arg;
    pthread_mutex_lock(&e->rx.lock);
    e->rx.peer_dead = clean ? 2 : 1;
    pthread_cond_broadcast(&e->rx.cond);
    pthread_mutex_unlock(&e->rx.lock);
}

/* Open @e's link bound to @addr, with optional bindings. */
static inline int ut_open_addr(ut_ep_t *e, uint32_t self, uint32_t max_peers,
                               const struct sockaddr *addr, socklen_t addr_len,
                               const vmmc_udp_bindings_t *b)
{
    vmmc_udp_link_params_t p;
    memset(&p, 0, sizeof p);
    e->self = self;
    p.self = self;
    p.max_peers = max_peers;
    p.bind_addr = addr;
    p.bind_len = addr_len;
    ut_token(p.token, self, 0);
    p.deliver = ut_deliver;
    p.accept = ut_accept;
    p.dead = ut_dead;
    p.arg = e;
    p.bindings = b;
    return vmmc_udp_link_open(&p, &e->l);
}

/* Open @e's link on 127.0.0.1:@port (0: any), with optional bindings. */
static inline int ut_open(ut_ep_t *e, uint32_t self, uint32_t max_peers, uint16_t port,
                          const vmmc_udp_bindings_t *b)
{
    struct sockaddr_in a;
    ut_loopback(&a, port);
    return ut_open_addr(e, self, max_peers, (struct sockaddr *)&a, sizeof a, b);
}

/* Register @b as a peer of @a (both in this process). */
static inline int ut_connect(ut_ep_t *a, ut_ep_t *b)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int st = vmmc_udp_link_local_addr(b->l, &ss, &len);
    if (st)
        return st;
    uint8_t tok[16];
    ut_token(tok, b->self, 0);
    return vmmc_udp_link_add_peer(a->l, b->self, (struct sockaddr *)&ss, len, tok);
}

/* One direction of a two-way stream test: send @total bytes of the stream
 * seeded @seed from @from to peer @to, then wait until all was delivered.
 * Run one in a thread and the other in the caller. */
typedef struct ut_txarg {
    ut_ep_t *from;
    uint32_t to;
    uint64_t seed, total;
    int st;
} ut_txarg_t;

static inline void *ut_tx_thread(void *arg)
{
    ut_txarg_t *t = arg;
    t->st = ut_tx_stream(t->from->l, t->to, t->seed, t->total, t->seed * 3 + 1);
    if (t->st == VMMC_OK)
        t->st = vmmc_udp_link_flush(t->from->l, t->to, 60000);
    return NULL;
}

/* Both directions at once between e[0] and e[1]: @total bytes of the
 * stream seeded @seed from 0 to 1 and of @seed + 1 from 1 to 0 (each
 * receiver set up with ut_rx_init(&e[i].rx, seed + 1 - i, total)); fails the
 * test unless both arrive whole, in order and once within @timeout_s. */
static inline void ut_stream_pair(ut_ep_t e[2], uint64_t seed, uint64_t total, double timeout_s)
{
    ut_txarg_t t[2] = {{&e[0], 1, seed, total, 0}, {&e[1], 0, seed + 1, total, 0}};
    pthread_t th;
    VT_CHECK(pthread_create(&th, NULL, ut_tx_thread, &t[1]) == 0);
    ut_tx_thread(&t[0]);
    pthread_join(th, NULL);
    VT_OK(t[0].st);
    VT_OK(t[1].st);
    for (int i = 0; i < 2; i++)
        if (!ut_rx_wait(&e[i].rx, timeout_s))
            VT_FAIL("endpoint %d: stream incomplete or wrong: %s (%llu of %llu bytes)", i,
                    e[i].rx.err, (unsigned long long)e[i].rx.expect, (unsigned long long)total);
}

#endif
