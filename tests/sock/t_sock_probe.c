/* The upgrade probe (src/sock/sock_probe.c, sock_probe_tab.c): a listener's
 * responder answers YES with a token and its endpoint's address, the same
 * again for a probe sent twice, NO once the acceptor decided plain; a port
 * with no responder is known at once (ECONNREFUSED), a silent one after the
 * probe timeout; forged datagrams (wrong source, sizes, magic, version,
 * type, port) are counted and refused and change nothing; a flood that
 * fills the table is harmless and forgotten when it stops; the responder
 * and an acceptor racing on one connection never disagree; an IPv6
 * listener on :: answers IPv4 clients.
 * Run with VMMC_SOCK_PROBE_SLOTS=16, VMMC_SOCK_HELLO_TIMEOUT=100ms. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock/sock.h"
#include "sock/sock_probe.h"
#include "vtest.h"

typedef struct lst {
    sock_t s;
    struct sockaddr_storage a;
    socklen_t alen;
} lst_t;

static void make_listener(lst_t *l, int family, int probe)
{
    memset(l, 0, sizeof *l);
    int fd = socket(family, SOCK_STREAM, 0);
    VT_CHECK(fd >= 0);
    if (family == AF_INET) {
        struct sockaddr_in *in = (void *)&l->a;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        l->alen = sizeof *in;
    } else {
        struct sockaddr_in6 *in6 = (void *)&l->a;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_any;
        l->alen = sizeof *in6;
    }
    VT_CHECK(bind(fd, (struct sockaddr *)&l->a, l->alen) == 0);
    VT_CHECK(listen(fd, 64) == 0);
    VT_CHECK(getsockname(fd, (struct sockaddr *)&l->a, &l->alen) == 0);
    l->s.fd = fd;
    l->s.domain = family;
    if (probe) {
        VT_CHECK(sock_probe_listen(&l->s) == 0);
        VT_CHECK(l->s.lst != NULL);
    }
}

static void close_listener(lst_t *l)
{
    sock_probe_unlisten(&l->s);
    close(l->s.fd);
}

/* A connected client (its sock_t) and the accepted fd. */
static void connect_to(lst_t *l, int family, sock_t *c, int *acc)
{
    memset(c, 0, sizeof *c);
    c->fd = socket(family, SOCK_STREAM, 0);
    VT_CHECK(c->fd >= 0);
    struct sockaddr_storage to = l->a;
    socklen_t tolen = l->alen;
    if (family == AF_INET && l->a.ss_family == AF_INET6) {
        struct sockaddr_in *in = (void *)&to;
        uint16_t port = ((struct sockaddr_in6 *)&l->a)->sin6_port;
        memset(&to, 0, sizeof to);
        in->sin_family = AF_INET;
        in->sin_port = port;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        tolen = sizeof *in;
    }
    VT_CHECK(connect(c->fd, (struct sockaddr *)&to, tolen) == 0);
    *acc = accept(l->s.fd, NULL, NULL);
    VT_CHECK(*acc >= 0);
}

static sock_tab_t *table_of(int acc, uint8_t key[SOCK_KEY_LEN])
{
    struct sockaddr_storage loc, peer;
    socklen_t ll = sizeof loc, pl = sizeof peer;
    VT_CHECK(getsockname(acc, (struct sockaddr *)&loc, &ll) == 0);
    VT_CHECK(getpeername(acc, (struct sockaddr *)&peer, &pl) == 0);
    VT_CHECK(sock_key_of((struct sockaddr *)&peer, pl, key) == 0);
    sock_listener_t *l = sock_probe_find((struct sockaddr *)&loc, ll, key);
    if (!l)
        return NULL;
    sock_tab_t *t = l->tab;
    sock_probe_put(l); /* the listener stays open in these tests */
    return t;
}

static int probe(sock_t *c, uint64_t *token, const char **why)
{
    char addr[VMMC_ADDR_MAX];
    size_t alen = sizeof addr;
    int r = sock_probe_client(c, token, addr, &alen, why);
    if (r == 1) {
        char mine[VMMC_ADDR_MAX];
        size_t mlen = sizeof mine;
        VT_OK(vmmc_ep_addr(sock_ctx_ep(sock_ctx_peek()), mine, &mlen));
        VT_CHECK(alen == mlen && !memcmp(addr, mine, mlen));
    }
    return r;
}

static void test_yes_no(int family, int client_family)
{
    lst_t l;
    make_listener(&l, family, 1);
    sock_t c;
    int acc;
    connect_to(&l, client_family, &c, &acc);
    uint64_t t1 = 0, t2 = 0, tc = 0;
    const char *why;
    VT_CHECK(probe(&c, &t1, &why) == 1 && t1 != 0);
    VT_CHECK(probe(&c, &t2, &why) == 1 && t2 == t1); /* sent again: same answer */
    uint8_t key[SOCK_KEY_LEN];
    sock_tab_t *t = table_of(acc, key);
    VT_CHECK(t != NULL);
    VT_CHECK(sock_tab_claim(t, key, &tc) == SOCK_TAB_CLAIMED && tc == t1);
    sock_tab_release(t, key);
    close(acc);
    close(c.fd);

    /* The acceptor decided plain first: the probe is answered NO. */
    connect_to(&l, client_family, &c, &acc);
    t = table_of(acc, key);
    VT_CHECK(sock_tab_plain(t, key, &tc) == SOCK_TAB_PLAIN);
    VT_CHECK(probe(&c, &t1, &why) == 0 && !strcmp(why, "listener said no"));
    close(acc);
    close(c.fd);
    close_listener(&l);
}

static void test_refused_and_silent(void)
{
    lst_t l;
    make_listener(&l, AF_INET, 0); /* a plain listener: nothing on its UDP port */
    sock_t c;
    int acc;
    uint64_t tok;
    const char *why;
    connect_to(&l, AF_INET, &c, &acc);
    VT_CHECK(probe(&c, &tok, &why) == 0 && !strcmp(why, "no vmmc listener"));
    close(acc);
    close(c.fd);
    /* Something silent holds the UDP port: no answer within the timeout. */
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    VT_CHECK(bind(u, (struct sockaddr *)&l.a, l.alen) == 0);
    connect_to(&l, AF_INET, &c, &acc);
    VT_CHECK(probe(&c, &tok, &why) == 0 && !strcmp(why, "no answer"));
    close(u);
    close(acc);
    close(c.fd);
    close(l.s.fd);
}

/* Send @p len bytes of @p m to the listener from @p u; 1 if answered. */
static int forged(int u, lst_t *l, const void *m, size_t len)
{
    VT_CHECK(sendto(u, m, len, 0, (struct sockaddr *)&l->a, l->alen) == (ssize_t)len);
    struct pollfd p = {.fd = u, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0)
        return 0;
    char buf[2048];
    return recv(u, buf, sizeof buf, MSG_DONTWAIT) > 0;
}

static sock_tab_stats_t *cur_st;

/* Send a datagram the responder must refuse: it counts it, answers nothing. */
static int refused(int u, lst_t *l, const void *m, size_t len)
{
    uint64_t before = cur_st->refused;
    VT_CHECK(sendto(u, m, len, 0, (struct sockaddr *)&l->a, l->alen) == (ssize_t)len);
    double end = vt_now() + 20;
    while (cur_st->refused == before) {
        VT_CHECK(vt_now() < end);
        usleep(200);
    }
    struct pollfd p = {.fd = u, .events = POLLIN};
    return poll(&p, 1, 0) == 0;
}

static void test_forged(void)
{
    lst_t l;
    make_listener(&l, AF_INET, 1);
    sock_tab_stats_t *st = sock_tab_stats(((sock_listener_t *)l.s.lst)->tab);
    cur_st = st;
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    VT_CHECK(bind(u, (struct sockaddr *)&me, sizeof me) == 0);
    socklen_t ml = sizeof me;
    VT_CHECK(getsockname(u, (struct sockaddr *)&me, &ml) == 0);

    sock_probe_msg_t good, m;
    memset(&good, 0, sizeof good);
    good.magic = SOCK_PROBE_MAGIC;
    good.version = SOCK_WIRE_VERSION;
    good.type = SOCK_PROBE;
    good.nonce = 99;
    VT_CHECK(sock_key_of((struct sockaddr *)&me, ml, good.client) == 0);
    VT_CHECK(sock_key_of((struct sockaddr *)&l.a, l.alen, good.server) == 0);

    uint64_t refused0 = st->refused;
    int n = 0;
    m = good; m.client[17] ^= 1;            /* claims another client address */
    VT_CHECK(refused(u, &l, &m, sizeof m)); n++;
    m = good; m.client[0] ^= 1;             /* another client port */
    VT_CHECK(refused(u, &l, &m, sizeof m)); n++;
    m = good; m.magic ^= 1;
    VT_CHECK(refused(u, &l, &m, sizeof m)); n++;
    m = good; m.version = 7;
    VT_CHECK(refused(u, &l, &m, sizeof m)); n++;
    m = good; m.type = SOCK_PROBE_YES;
    VT_CHECK(refused(u, &l, &m, sizeof m)); n++;
    m = good; m.server[1] ^= 1;             /* another listener's port */
    VT_CHECK(refused(u, &l, &m, sizeof m)); n++;
    m = good; m.server[17] ^= 1;            /* another address than the one bound */
    VT_CHECK(refused(u, &l, &m, sizeof m)); n++;
    size_t sizes[] = {0, 1, 8, SOCK_PROBE_HDR, sizeof m - 1};
    for (int i = 0; i < 5; i++) {
        VT_CHECK(refused(u, &l, &good, sizes[i]));
        n++;
    }
    char big[sizeof m + 100];
    memset(big, 0, sizeof big);
    memcpy(big, &good, sizeof good);
    VT_CHECK(refused(u, &l, big, sizeof big)); n++;
    unsigned long long seed = 5;
    for (int i = 0; i < 300; i++) { /* garbage */
        char g[sizeof m];
        for (size_t k = 0; k < sizeof g; k++)
            g[k] = (char)vt_rand(&seed);
        VT_CHECK(refused(u, &l, g, 1 + vt_rand(&seed) % sizeof g));
        n++;
    }
    VT_CHECK(st->refused - refused0 == (uint64_t)n);
    /* Still answers a good one (the source is its own client address). */
    VT_CHECK(forged(u, &l, &good, sizeof good));
    close(u);

    /* Flood: many clients fill the 16 slots; then it is over. */
    int fl[200];
    for (int i = 0; i < 200; i++) {
        fl[i] = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t al = sizeof a;
        VT_CHECK(bind(fl[i], (struct sockaddr *)&a, sizeof a) == 0);
        VT_CHECK(getsockname(fl[i], (struct sockaddr *)&a, &al) == 0);
        m = good;
        VT_CHECK(sock_key_of((struct sockaddr *)&a, al, m.client) == 0);
        VT_CHECK(forged(fl[i], &l, &m, sizeof m)); /* answered, YES or NO */
    }
    VT_CHECK(st->probes == 200 + 1);
    VT_CHECK(st->yes <= 16 + 1 && st->full > 0);
    for (int i = 0; i < 200; i++)
        close(fl[i]);
    /* Entries expire (2 x 100 ms + the 2 s probe timeout): a real client gets
     * its YES again. */
    sock_t c;
    int acc;
    uint64_t tok;
    const char *why;
    usleep(2500000);
    connect_to(&l, AF_INET, &c, &acc);
    VT_CHECK(probe(&c, &tok, &why) == 1);
    close(acc);
    close(c.fd);
    close_listener(&l);
}

/* ---- the table alone: the responder and an acceptor race ---- */

static sock_tab_t *race_t_;
static uint8_t race_key[SOCK_KEY_LEN];
static int race_rc, race_n;
static pthread_barrier_t race_go, race_done;

static void *prober(void *p)
{
    (void)p;
    for (int i = 0; i < race_n; i++) {
        pthread_barrier_wait(&race_go);
        for (unsigned k = (i & 1) ? (unsigned)(i % 17) * 40 : 0; k; k--)
            __asm__ volatile("" ::: "memory");
        uint64_t tok;
        race_rc = sock_tab_probe(race_t_, race_key, &tok);
        pthread_barrier_wait(&race_done);
    }
    return NULL;
}

static void test_table_race(void)
{
    int yes = 0, plain = 0;
    race_n = 500;
    pthread_barrier_init(&race_go, NULL, 2);
    pthread_barrier_init(&race_done, NULL, 2);
    pthread_t th;
    VT_CHECK(pthread_create(&th, NULL, prober, NULL) == 0);
    for (int i = 0; i < race_n; i++) {
        sock_tab_t *t = sock_tab_new(64, 60000);
        VT_CHECK(t);
        race_t_ = t;
        memset(race_key, 0, sizeof race_key);
        memcpy(race_key, &i, sizeof i);
        pthread_barrier_wait(&race_go);
        for (unsigned k = (i & 1) ? 0 : (unsigned)(i % 17) * 40; k; k--)
            __asm__ volatile("" ::: "memory");
        uint64_t tok;
        int plain_rc = sock_tab_plain(t, race_key, &tok);
        pthread_barrier_wait(&race_done);
        /* Never both: a YES is a claim for the acceptor, a plain a NO. */
        if (race_rc == SOCK_TAB_YES) {
            VT_CHECK(plain_rc == SOCK_TAB_CLAIMED);
            yes++;
        } else {
            VT_CHECK(race_rc == SOCK_TAB_NO && plain_rc == SOCK_TAB_PLAIN);
            plain++;
        }
        sock_tab_free(t);
    }
    pthread_join(th, NULL);
    printf("race: %d upgraded, %d plain\n", yes, plain);
    sock_tab_t *t;

    /* One slot, held by another connection: plain for X blocks the slot,
     * so X's late probe is NO even after the other one is gone. */
    t = sock_tab_new(1, 60000);
    uint8_t x[SOCK_KEY_LEN] = {1}, y[SOCK_KEY_LEN] = {2};
    uint64_t tok;
    VT_CHECK(sock_tab_probe(t, y, &tok) == SOCK_TAB_YES);
    VT_CHECK(sock_tab_probe(t, x, &tok) == SOCK_TAB_NO);     /* no room */
    VT_CHECK(sock_tab_plain(t, x, &tok) == SOCK_TAB_PLAIN);  /* no room: blocks */
    VT_CHECK(sock_tab_claim(t, y, &tok) == SOCK_TAB_CLAIMED);
    sock_tab_release(t, y);
    VT_CHECK(sock_tab_probe(t, x, &tok) == SOCK_TAB_NO);     /* blocked */
    VT_CHECK(sock_tab_claim(t, x, &tok) == SOCK_TAB_NONE);
    sock_tab_free(t);

    /* A burst: as many connections as a key's window has slots all get a
     * YES in a table that small, whatever their hashes (one slot per key
     * would collide), each keeps its own token, and one more finds no room. */
    t = sock_tab_new(8, 60000);
    uint64_t toks[8];
    for (int i = 0; i < 8; i++) {
        uint8_t k[SOCK_KEY_LEN] = {0x10, (uint8_t)i};
        VT_CHECK(sock_tab_probe(t, k, &toks[i]) == SOCK_TAB_YES);
        VT_CHECK(sock_tab_probe(t, k, &tok) == SOCK_TAB_YES && tok == toks[i]);
    }
    VT_CHECK(sock_tab_probe(t, x, &tok) == SOCK_TAB_NO);
    VT_CHECK(sock_tab_stats(t)->full == 1);
    for (int i = 0; i < 8; i++) {
        uint8_t k[SOCK_KEY_LEN] = {0x10, (uint8_t)i};
        VT_CHECK(sock_tab_has(t, k));
        VT_CHECK(sock_tab_claim(t, k, &tok) == SOCK_TAB_CLAIMED && tok == toks[i]);
    }
    for (int i = 0; i < 8; i += 2) {
        uint8_t k[SOCK_KEY_LEN] = {0x10, (uint8_t)i};
        sock_tab_release(t, k);
        VT_CHECK(!sock_tab_has(t, k));
    }
    /* Freed slots are taken again, by a plain decision as by a probe. */
    VT_CHECK(sock_tab_plain(t, x, &tok) == SOCK_TAB_PLAIN);
    VT_CHECK(sock_tab_probe(t, x, &tok) == SOCK_TAB_NO);
    VT_CHECK(sock_tab_claim(t, x, &tok) == SOCK_TAB_PLAIN);
    VT_CHECK(sock_tab_probe(t, y, &tok) == SOCK_TAB_YES);
    sock_tab_free(t);

    /* Expiry: a 1 ms table forgets. */
    t = sock_tab_new(1, 1);
    VT_CHECK(sock_tab_probe(t, y, &tok) == SOCK_TAB_YES);
    usleep(5000);
    VT_CHECK(sock_tab_claim(t, y, &tok) == SOCK_TAB_NONE);
    VT_CHECK(sock_tab_probe(t, x, &tok) == SOCK_TAB_YES);
    sock_tab_free(t);
}

int main(void)
{
    alarm(120);
    double t0 = vt_now();
    test_table_race();
    printf("table %.1fs\n", vt_now() - t0);
    test_yes_no(AF_INET, AF_INET);
    test_yes_no(AF_INET6, AF_INET6);
    test_yes_no(AF_INET6, AF_INET); /* dual-stack listener, IPv4 client */
    test_refused_and_silent();
    test_forged();
    printf("t_sock_probe: ok\n");
    return 0;
}
