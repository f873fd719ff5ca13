/* libFuzzer target: the UDP link's whole receive path.
 *
 * Each input is a sequence of datagrams that arrive at a fresh link from its
 * registered peer (through socket bindings that read from the input instead
 * of a socket). Input format: byte 0 = mode bits, then records of
 * [u16 length][bytes]. Mode bit 0: fix up magic, version, type, length,
 * source and the tag (under the key of the link from the peer) of every
 * record, so that the fuzzer reaches the stateful checks (control counters
 * and their replays, region tokens, sequence window, duplicates, acks,
 * reorder buffer); bit 1: some records come from a stranger's address;
 * bit 2: some fixed-up records keep a wrong tag (forgeries: each must be
 * refused as such, and counted); bit 3: no capability hook (as the
 * transport runs the link). Anything is fine except a crash, a sanitizer
 * report, a hang, a delivery that did not come from the peer, or a forgery
 * that was not refused by the tag check. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/udp/crc32c.h"
#include "transport/udp/link.h"
#include "transport/udp/wire.h"

#define MAXD 64

typedef struct {
    pthread_mutex_t lock;
    int go, next, n, drained;
    const uint8_t *d[MAXD];
    size_t len[MAXD];
    int stranger[MAXD], forged[MAXD];
    struct sockaddr_in peer, other;
    uint8_t fixed[MAXD][VMMC_UDP_MAX_DGRAM < 4096 ? VMMC_UDP_MAX_DGRAM : 4096];
} feed_t;

static feed_t F = {.lock = PTHREAD_MUTEX_INITIALIZER};
static vmmc_udp_key_t K;
static uint64_t delivered;

static int b_send(void *ctx, int fd, struct mmsghdr *v, unsigned n)
{
    return (int)n;
}

static int b_recv(void *ctx, int fd, struct mmsghdr *v, unsigned n)
{
    feed_t *f = ctx;
    pthread_mutex_lock(&f->lock);
    unsigned out = 0;
    if (f->go) {
        while (out < n && f->next < f->n) {
            int i = f->next++;
            size_t cap = v[out].msg_hdr.msg_iov[0].iov_len;
            size_t len = f->len[i] < cap ? f->len[i] : cap;
            memcpy(v[out].msg_hdr.msg_iov[0].iov_base, f->d[i], len);
            v[out].msg_len = (unsigned)len;
            v[out].msg_hdr.msg_flags = 0;
            const struct sockaddr_in *a = f->stranger[i] ? &f->other : &f->peer;
            memcpy(v[out].msg_hdr.msg_name, a, sizeof *a);
            v[out].msg_hdr.msg_namelen = sizeof *a;
            out++;
        }
        if (out == 0)
            f->drained = 1;
    }
    pthread_mutex_unlock(&f->lock);
    return out ? (int)out : -1;
}

static uint64_t b_due(void *ctx)
{
    feed_t *f = ctx;
    pthread_mutex_lock(&f->lock);
    int pending = !f->drained;
    pthread_mutex_unlock(&f->lock);
    return pending ? vmmc_udp_now() + 50000 : UINT64_MAX;
}

static void b_destroy(void *ctx)
{
}

static int on_deliver(void *arg, uint32_t peer, const vmmc_udp_rec_t *rec, const void *data,
                      size_t len)
{
    const volatile uint8_t *p = data;
    uint8_t x = 0;
    for (size_t i = 0; i < len; i++)
        x ^= p[i]; /* touch every byte: the sanitizer checks the bounds */
    delivered += x + 1;
    if (peer != 1)
        abort();
    return (x & 0x1f) == 0x1f; /* sometimes busy: exercises the retry path */
}

static void tok(uint8_t t[16], int who)
{
    for (int i = 0; i < 16; i++)
        t[i] = (uint8_t)(who * 16 + i);
}

static int on_accept(void *arg, uint32_t peer, uint32_t region, uint32_t gen,
                     const uint8_t t[16])
{
    uint8_t want[16];
    tok(want, 5);
    return region != 5 || memcmp(t, want, 16) != 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0];
    size_t pos = 1;
    F.n = F.next = F.go = F.drained = 0;
    memset(F.forged, 0, sizeof F.forged);
    if (!K.k[0]) {
        uint8_t s0[16], s1[16];
        tok(s0, 0);
        tok(s1, 1);
        vmmc_udp_key_derive(&K, s1, 1, s0, 0); /* the link from the peer to us */
    }
    while (pos + 2 <= size && F.n < MAXD) {
        size_t len = (size_t)data[pos] | ((size_t)data[pos + 1] << 8);
        pos += 2;
        if (len > size - pos)
            len = size - pos;
        int i = F.n++;
        F.stranger[i] = (mode & 2) && (data[pos - 1] & 0x80);
        if ((mode & 1) && len >= VMMC_UDP_HDR_MIN && len <= sizeof F.fixed[i]) {
            uint8_t *b = F.fixed[i];
            memcpy(b, data + pos, len);
            b[3] = (uint8_t)(1 + b[3] % 5); /* a valid type (REFUSE included) */
            b[4] &= 7;                        /* no sack, no imm: the 64-byte header */
            if (b[3] != VMMC_UDP_T_DATA) {
                len = VMMC_UDP_HDR_MIN;       /* control: no payload, no flags */
                b[4] = 0;
            }
            uint32_t plen = (uint32_t)(len - VMMC_UDP_HDR_MIN);
            b[0] = 0x56, b[1] = 0x4D, b[2] = VMMC_UDP_VERSION;
            b[32] = (uint8_t)plen, b[33] = (uint8_t)(plen >> 8), b[34] = b[35] = 0;
            b[8] = 1, b[9] = b[10] = b[11] = 0; /* src: the peer */
            if (b[3] == VMMC_UDP_T_DATA && (b[47] & 0x80))
                b[47] &= 0x7f;                /* offset + length must not wrap */
            if (b[4] & 0x4) { /* use the right token for region 0 or 5 */
                int region = b[12] & 1 ? 5 : 0;
                b[12] = (uint8_t)region, b[13] = b[14] = b[15] = 0;
                if (region)
                    tok(b + 16, 5);
                else
                    memset(b + 16, 0, 16);
            }
            vmmc_udp_hdr_t h;
            if (vmmc_udp_decode(b, len, &h) != VMMC_UDP_OK)
                abort(); /* fixed up: only the tag is left to check */
            (void)vmmc_udp_encode(b, &h, vmmc_crc32c(0, b + VMMC_UDP_HDR_MIN, plen), &K);
            if ((mode & 4) && (data[pos - 2] & 1)) {
                b[VMMC_UDP_HDR_MIN - 1 - (data[pos - 2] >> 5)] ^= (uint8_t)(1u << (data[pos - 2] >> 1 & 7));
                F.forged[i] = 1;
            }
            F.d[i] = b;
        } else {
            F.d[i] = data + pos;
        }
        F.len[i] = len;
        pos += len;
    }

    vmmc_udp_bindings_t b = {b_send, b_recv, b_due, b_destroy, &F};
    struct sockaddr_in self = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    F.peer = self;
    F.peer.sin_port = htons(9);
    F.other = self;
    F.other.sin_port = htons(10);
    vmmc_udp_link_params_t p;
    memset(&p, 0, sizeof p);
    p.self = 0;
    p.max_peers = 3;
    p.bind_addr = (struct sockaddr *)&self;
    p.bind_len = sizeof self;
    tok(p.token, 0);
    p.deliver = on_deliver;
    p.accept = (mode & 8) ? NULL : on_accept;
    p.bindings = &b;
    vmmc_udp_link_t *l;
    if (vmmc_udp_link_open(&p, &l) != 0)
        abort();
    uint8_t pt[16];
    tok(pt, 1);
    if (vmmc_udp_link_add_peer(l, 1, (struct sockaddr *)&F.peer, sizeof F.peer, pt) != 0)
        abort();
    pthread_mutex_lock(&F.lock);
    F.go = 1;
    pthread_mutex_unlock(&F.lock);
    for (;;) {
        pthread_mutex_lock(&F.lock);
        int done = F.drained;
        pthread_mutex_unlock(&F.lock);
        if (done)
            break;
        usleep(20);
    }
    /* Every forgery that came from the peer's address was refused by the
     * tag check. */
    uint64_t forged = 0;
    for (int i = 0; i < F.n; i++)
        forged += F.forged[i] && !F.stranger[i];
    vmmc_udp_counters_t c;
    vmmc_udp_link_counters(l, &c);
    if (c.drop_auth < forged)
        abort();
    vmmc_udp_link_close(l, 0);
    return 0;
}
