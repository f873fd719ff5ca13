/* A hostile process on the path of a udp job (for t_udp_hostile.c): it
 * watches the job's datagrams with a raw socket (needs CAP_NET_RAW, like an
 * attacker on the LAN or root on a host; an unprivileged co-tenant can do
 * neither) and sends forged ones with the job's own source addresses:
 *   data:   writes to a region that has no live export, with a stale
 *           generation, with a wrong capability token, and with the right
 *           one (it travels in clear), each with sequence numbers just
 *           ahead of the real ones;
 *   ctl:    a forged revoke (control message) of the export being written,
 *           and a forged goodbye;
 *   replay: replays of datagrams it saw, verbatim (data and control), and
 *           with one payload byte changed (bad checksum).
 * It speaks both the previous wire format (version 2: CRC32C only, the link
 * token in clear) and the current one (version 3: keyed tag), so the test
 * shows what the authentication changed. The bytes it writes are 0xEE, so a
 * victim that took them finds them in its memory.
 * It sees every UDP datagram on the host, but touches only the traffic of
 * its parent (the victim rank: the UDP ports its sockets are bound to) and
 * of that traffic's other ends, so that other programs on the machine are
 * left alone.
 * Usage: udp_hostile SECONDS [data,ctl,replay]. Prints READY once listening, then a summary
 * when SIGTERM'd or after SECONDS. Exit 77: no raw sockets here. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/ctl.h"
#include "transport/udp/crc32c.h"

static volatile sig_atomic_t stop;

/* The UDP ports that process @pid's sockets are bound to (/proc). */
static int ports_of(pid_t pid, uint16_t *ports, int max)
{
    char path[64], link[64];
    unsigned long inodes[64];
    int ni = 0, np = 0;
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && ni < 64) {
        char fp[400];
        snprintf(fp, sizeof fp, "%s/%s", path, e->d_name);
        ssize_t n = readlink(fp, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        unsigned long ino;
        if (sscanf(link, "socket:[%lu]", &ino) == 1)
            inodes[ni++] = ino;
    }
    closedir(d);
    const char *files[] = {"/proc/net/udp", "/proc/net/udp6"};
    for (int f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "r");
        if (!fp)
            continue;
        char line[512];
        while (fgets(line, sizeof line, fp) && np < max) {
            char local[80];
            unsigned long ino;
            if (sscanf(line, " %*d: %79s %*s %*x %*s %*s %*s %*s %*s %lu", local, &ino) != 2)
                continue;
            char *colon = strrchr(local, ':');
            if (!colon)
                continue;
            for (int i = 0; i < ni; i++)
                if (inodes[i] == ino)
                    ports[np++] = (uint16_t)strtoul(colon + 1, NULL, 16);
        }
        fclose(fp);
    }
    return np;
}
static void on_term(int s)
{
    (void)s;
    stop = 1;
}

static uint32_t g32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void p16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}
static void p32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void p64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static unsigned long long rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* What was seen of one endpoint (by port). */
typedef struct {
    uint16_t port;
    uint32_t ip;
    int64_t rank;            /* its src field (its wire id), -1 until seen */
    uint8_t link_tok[16];    /* v2: its link token, seen in datagrams sent to it */
    int have_tok;
    uint32_t ack_from;       /* last ack it sent (its peer's next seq - 1) */
} ep_seen_t;
static ep_seen_t eps[16];
static int neps;

static ep_seen_t *ep_of(uint16_t port, uint32_t ip)
{
    for (int i = 0; i < neps; i++)
        if (eps[i].port == port)
            return &eps[i];
    if (neps == 16)
        return NULL;
    ep_seen_t *e = &eps[neps++];
    memset(e, 0, sizeof *e);
    e->port = port;
    e->ip = ip;
    e->rank = -1;
    return e;
}

typedef struct {
    uint8_t type, flags, kind;
    uint32_t src, region, gen, len, seq, ack;
    uint64_t offset;
    uint8_t token[16];
} fields_t;

static int tx = -1;
static int do_data = 1, do_ctl = 1, do_replay = 1;
static unsigned long long sent[8];

/* Send @d (n bytes) as a UDP datagram from @from to @to (raw IP). */
static void spoof(const ep_seen_t *from, const ep_seen_t *to, const uint8_t *d, size_t n)
{
    static uint8_t pkt[70000];
    if (n + 28 > sizeof pkt)
        return;
    memset(pkt, 0, 28);
    pkt[0] = 0x45;
    p16(pkt + 2, 0); /* total length: filled in by the kernel */
    pkt[8] = 64;
    pkt[9] = IPPROTO_UDP;
    memcpy(pkt + 12, &from->ip, 4);
    memcpy(pkt + 16, &to->ip, 4);
    uint8_t *u = pkt + 20;
    uint16_t sp = htons(from->port), dp = htons(to->port), ul = htons((uint16_t)(n + 8));
    memcpy(u, &sp, 2);
    memcpy(u + 2, &dp, 2);
    memcpy(u + 4, &ul, 2); /* checksum 0: none (and how we know our own) */
    memcpy(pkt + 28, d, n);
    uint16_t tl = htons((uint16_t)(n + 28));
    memcpy(pkt + 2, &tl, 2);
    struct sockaddr_in a = {.sin_family = AF_INET};
    memcpy(&a.sin_addr, &to->ip, 4);
    (void)sendto(tx, pkt, n + 28, 0, (struct sockaddr *)&a, sizeof a);
}

/* Build a datagram in the wire format @ver (64-byte header, no sack/imm). */
static size_t build(int ver, uint8_t *b, const fields_t *f, uint32_t dst, const void *pay)
{
    memset(b, 0, 64);
    b[0] = 0x56, b[1] = 0x4D, b[2] = (uint8_t)ver, b[3] = f->type, b[4] = f->flags, b[5] = f->kind;
    p16(b + 6, 64);
    p32(b + 8, f->src);
    if (ver == 2) {
        p32(b + 12, dst);
        memcpy(b + 16, f->token, 16);
        p32(b + 32, f->region);
        p32(b + 36, f->len);
        p64(b + 40, f->offset);
        p32(b + 48, f->seq);
        p32(b + 52, f->ack);
        p32(b + 56, f->gen);
        memcpy(b + 64, pay, f->len);
        p32(b + 60, vmmc_crc32c(vmmc_crc32c(0, b + 64, f->len), b, 60));
    } else {
        p32(b + 12, f->region);
        memcpy(b + 16, f->token, 16);
        p32(b + 32, f->len);
        p32(b + 36, f->gen);
        p64(b + 40, f->offset);
        p32(b + 48, f->seq);
        p32(b + 52, f->ack);
        p64(b + 56, rnd()); /* the tag: without the key, a guess */
        memcpy(b + 64, pay, f->len);
    }
    return 64 + f->len;
}

static int parse(const uint8_t *p, size_t n, fields_t *f)
{
    if (n < 64 || p[0] != 0x56 || p[1] != 0x4D || (p[2] != 2 && p[2] != 3))
        return 0;
    f->type = p[3], f->flags = p[4] & 0xF, f->kind = p[5];
    f->src = g32(p + 8);
    if (p[2] == 2) {
        memcpy(f->token, p + 16, 16);
        f->region = g32(p + 32), f->len = g32(p + 36), f->gen = g32(p + 56);
    } else {
        f->region = g32(p + 12);
        memcpy(f->token, p + 16, 16);
        f->len = g32(p + 32), f->gen = g32(p + 36);
    }
    f->offset = (uint64_t)g32(p + 40) | (uint64_t)g32(p + 44) << 32;
    f->seq = g32(p + 48), f->ack = g32(p + 52);
    return p[2];
}

static void attack(int ver, const uint8_t *orig, size_t n, const fields_t *c, ep_seen_t *from,
                   ep_seen_t *to)
{
    static uint8_t b[70000], junk[1024];
    memset(junk, 0xEE, sizeof junk);
    fields_t f;
    uint32_t plen = c->len < sizeof junk ? c->len : (uint32_t)sizeof junk;
    if (c->type == 1 && c->region && do_data) {
        /* Writes ahead of the real sequence: no live export, stale
         * generation, wrong capability token. */
        f = *c;
        f.flags = 3;
        f.len = plen;
        f.seq = c->seq + 1 + (uint32_t)(rnd() % 8);
        f.region = c->region + 100;
        f.gen = 1;
        for (int i = 0; i < 16; i++)
            f.token[i] = (uint8_t)rnd();
        spoof(from, to, b, build(ver, b, &f, (uint32_t)to->rank, junk));
        sent[0]++;
        f = *c;
        f.len = plen;
        f.seq = c->seq + 1 + (uint32_t)(rnd() % 8);
        f.gen = c->gen + 1;
        spoof(from, to, b, build(ver, b, &f, (uint32_t)to->rank, junk));
        f.gen = c->gen;
        f.token[rnd() % 16] ^= 0x5A;
        spoof(from, to, b, build(ver, b, &f, (uint32_t)to->rank, junk));
        f = *c; /* the real capability, seen in clear */
        f.len = plen;
        f.seq = c->seq + 1 + (uint32_t)(rnd() % 8);
        spoof(from, to, b, build(ver, b, &f, (uint32_t)to->rank, junk));
        sent[1] += 3;
    }
    if (c->type == 1 && c->region && do_ctl) {
        /* The exporter revokes the export, and says goodbye: forged in the
         * other direction, at the sequence number that comes next. */
        if (to->rank >= 0 && (ver == 3 || from->have_tok)) {
            vmmc_ctl_msg_t m;
            memset(&m, 0, sizeof m);
            m.magic = VMMC_CTL_MAGIC;
            m.type = CTL_REVOKE;
            m.src_rank = (int32_t)to->rank;
            m.export_id = c->region - 1;
            m.gen = c->gen;
            memset(&f, 0, sizeof f);
            f.type = 1;
            f.flags = 3;
            f.kind = 2; /* the transport's control message */
            f.src = (uint32_t)to->rank;
            f.len = sizeof m;
            f.seq = from->ack_from + 1;
            f.ack = c->seq;
            if (ver == 2)
                memcpy(f.token, from->link_tok, 16);
            spoof(to, from, b, build(ver, b, &f, c->src, &m));
            f.type = 4; /* BYE */
            f.flags = f.kind = 0;
            f.len = 0;
            f.offset = 1ull << 40; /* v3: a control counter far ahead */
            spoof(to, from, b, build(ver, b, &f, c->src, ""));
            sent[2] += 2;
        }
    }
    if (!do_replay)
        return;
    /* Replay what was seen, verbatim, and once with a byte changed. */
    spoof(from, to, orig, n);
    sent[3]++;
    if (c->len) {
        memcpy(b, orig, n);
        b[n - 1] ^= 0x40;
        spoof(from, to, b, n);
        sent[4]++;
    }
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 60;
    if (argc > 2) {
        do_data = strstr(argv[2], "data") != NULL;
        do_ctl = strstr(argv[2], "ctl") != NULL;
        do_replay = strstr(argv[2], "replay") != NULL;
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* the victim's death ends the attack */
    if (getppid() == 1)
        return 1;
    int rx = socket(AF_INET, SOCK_RAW, IPPROTO_UDP);
    tx = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
    if (rx < 0 || tx < 0) {
        printf("SKIP: no raw sockets (CAP_NET_RAW) here\n");
        return 77;
    }
    signal(SIGTERM, on_term);
    struct timeval tv = {0, 100000};
    setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int big = 8 << 20;
    setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    uint16_t victim[16];
    int nvictim = ports_of(getppid(), victim, 16);
    if (nvictim == 0) {
        printf("no UDP socket found in the parent\n");
        return 1;
    }
    printf("READY\n");
    fflush(stdout);
    static uint8_t pkt[70000];
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long long seen = 0, n_attacks = 0;
    while (!stop) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) * 1e-9 > secs)
            break;
        ssize_t r = recv(rx, pkt, sizeof pkt, 0);
        if (r < 28 || (pkt[0] >> 4) != 4)
            continue;
        size_t ihl = (size_t)(pkt[0] & 15) * 4;
        if ((size_t)r < ihl + 8)
            continue;
        const uint8_t *u = pkt + ihl;
        if (u[6] == 0 && u[7] == 0)
            continue; /* ours */
        uint16_t sp = (uint16_t)(u[0] << 8 | u[1]), dp = (uint16_t)(u[2] << 8 | u[3]);
        int ours = 0;
        for (int i = 0; i < nvictim; i++)
            ours |= sp == victim[i] || dp == victim[i];
        if (!ours)
            continue; /* not the victim's traffic: leave it alone */
        uint32_t sip, dip;
        memcpy(&sip, pkt + 12, 4);
        memcpy(&dip, pkt + 16, 4);
        const uint8_t *d = u + 8;
        size_t n = (size_t)r - ihl - 8;
        fields_t f;
        int ver = parse(d, n, &f);
        if (!ver)
            continue;
        seen++;
        ep_seen_t *from = ep_of(sp, sip), *to = ep_of(dp, dip);
        if (!from || !to)
            continue;
        from->rank = (int64_t)f.src;
        from->ack_from = f.ack;
        if (ver == 2 && (f.type != 1 || f.region == 0)) {
            memcpy(to->link_tok, f.token, 16); /* v2 sends the receiver's link token */
            to->have_tok = 1;
        }
        /* Attack often, but not on every datagram: the job must make
         * progress for the forgeries to have something to hit. */
        if (rnd() % 3 == 0) {
            attack(ver, d, n, &f, from, to);
            n_attacks++;
        }
    }
    printf("hostile: saw %llu datagrams, %llu attacks: %llu no-export, %llu stale/wrong/right-token, "
           "%llu revoke/bye, %llu replays, %llu corrupted\n",
           seen, n_attacks, sent[0], sent[1], sent[2], sent[3], sent[4]);
    return 0;
}
