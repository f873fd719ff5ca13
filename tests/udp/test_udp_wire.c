/* Datagram header: encode/decode round trip, every malformation refused with
 * the right verdict, and the tag: SipHash-2-4 against the reference vectors,
 * every bit of header and payload covered, and each direction of each pair
 * of endpoints with its own key. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include "transport/udp/crc32c.h"
#include "util/siphash.h"
#include "transport/udp/wire.h"
#include "vtest.h"

static const vmmc_udp_key_t key = {{0x1111111111111111ull, 0x2222222222222222ull}};

static size_t build(uint8_t *buf, const vmmc_udp_hdr_t *h, const void *payload)
{
    unsigned hl = vmmc_udp_encode(buf, h, vmmc_crc32c(0, payload, h->length), &key);
    VT_CHECK(hl == vmmc_udp_hdr_len(h));
    memcpy(buf + hl, payload, h->length);
    return hl + h->length;
}

/* Decode, then (if that passed) authenticate. */
static void expect(const uint8_t *buf, size_t n, vmmc_udp_verdict_t want, const char *what)
{
    vmmc_udp_hdr_t h;
    vmmc_udp_verdict_t v = vmmc_udp_decode(buf, n, &h);
    if (v == VMMC_UDP_OK)
        v = vmmc_udp_auth(buf, &h, &key);
    if (v != want)
        VT_FAIL("%s: verdict '%s', expected '%s'", what, vmmc_udp_verdict_str(v),
                vmmc_udp_verdict_str(want));
}

static void siphash_vectors(void)
{
    /* The paper's key 00..0f; messages 00..(n-1). */
    const uint64_t k[2] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
    uint8_t m[64];
    for (int i = 0; i < 64; i++)
        m[i] = (uint8_t)i;
    VT_CHECK(vmmc_siphash(k, m, 0) == 0x726fdb47dd0e0e31ull);
    VT_CHECK(vmmc_siphash(k, m, 1) == 0x74f839c593dc67fdull);
    VT_CHECK(vmmc_siphash(k, m, 8) == 0x93f5f5799a932462ull);
    VT_CHECK(vmmc_siphash(k, m, 15) == 0xa129ca6149be45e5ull);
    VT_CHECK(vmmc_siphash(k, m, 63) == 0x958a324ceb064572ull);
}

/* Multi-record datagrams (F_MULTI): a round trip, then every malformation
 * an authenticated but hostile peer could send (the tag is right, so the
 * record check is what refuses it). */
static void mk_multi(vmmc_udp_hdr_t *h, uint32_t len, uint64_t count)
{
    memset(h, 0, sizeof *h);
    h->type = VMMC_UDP_T_DATA;
    h->flags = VMMC_UDP_F_FIRST | VMMC_UDP_F_LAST | VMMC_UDP_F_MULTI;
    h->src = 5;
    h->seq = 9;
    h->length = len;
    h->offset = count;
}

static void multi_records(void)
{
    static uint8_t pl[2048], buf[4096];
    vmmc_udp_wrec_t r[3], got;
    memset(r, 0, sizeof r);
    r[0] = (vmmc_udp_wrec_t){.kind = 1, .flags = VMMC_UDP_F_NOTIFY, .length = 8, .region = 3,
                             .gen = 4, .offset = 4096, .imm = 77};
    memset(r[0].token, 0xAB, sizeof r[0].token);
    r[1] = (vmmc_udp_wrec_t){.kind = 2, .length = 0, .region = 0, .offset = 0};
    r[2] = (vmmc_udp_wrec_t){.kind = 1, .length = 256, .region = 1, .gen = 0, .offset = 8};
    memset(r[2].token, 0x11, sizeof r[2].token);
    uint32_t len = 0, at[3];
    for (int i = 0; i < 3; i++) {
        at[i] = len;
        unsigned hl = vmmc_udp_rec_encode(pl + len, &r[i]);
        VT_CHECK(hl == vmmc_udp_rec_hlen(&r[i]));
        for (unsigned k = 0; k < r[i].length; k++)
            pl[len + hl + k] = (uint8_t)(i * 40 + k);
        len += hl + r[i].length;
    }
    VT_CHECK(vmmc_udp_rec_hlen(&r[0]) == VMMC_UDP_REC_MAX);
    VT_CHECK(vmmc_udp_rec_hlen(&r[1]) == VMMC_UDP_REC_MIN);
    vmmc_udp_hdr_t h, d;
    mk_multi(&h, len, 3);
    size_t n = build(buf, &h, pl);
    expect(buf, n, VMMC_UDP_OK, "three records");
    VT_CHECK(vmmc_udp_decode(buf, n, &d) == VMMC_UDP_OK && (d.flags & VMMC_UDP_F_MULTI) &&
             d.offset == 3 && d.length == len);
    size_t pos = 0;
    for (int i = 0; i < 3; i++) {
        VT_CHECK(vmmc_udp_rec_decode(buf + d.hlen, d.length, &pos, &got) == 0);
        VT_CHECK(got.kind == r[i].kind && got.flags == r[i].flags && got.length == r[i].length &&
                 got.region == r[i].region && got.gen == r[i].gen &&
                 got.offset == r[i].offset && got.imm == r[i].imm &&
                 !memcmp(got.token, r[i].token, sizeof got.token));
        for (unsigned k = 0; k < got.length; k++)
            VT_CHECK(buf[d.hlen + pos - got.length + k] == (uint8_t)(i * 40 + k));
    }
    VT_CHECK(pos == len && vmmc_udp_rec_decode(buf + d.hlen, d.length, &pos, &got) != 0);

    /* The count: zero, more records than there are, fewer (bytes left
     * over), absurd. */
    const uint64_t counts[] = {0, 4, 2, 1ull << 40, UINT64_MAX};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        mk_multi(&h, len, counts[i]);
        expect(buf, build(buf, &h, pl), VMMC_UDP_BAD_RECORDS, "record count");
    }
    /* A record whose length, or optional fields, overrun the payload; an
     * unknown record flag; a token without a region or a region without
     * one; an imm field that is zero; a record cut short. */
    static uint8_t bad[2048];
    struct { uint32_t off; uint8_t val; const char *what; } m[] = {
        {at[0] + 2, 0xFF, "length overruns"}, {at[0] + 3, 0xFF, "length overruns (high)"},
        {at[2] + 3, 0x7F, "last record overruns"}, {at[1] + 1, 0x80, "unknown record flag"},
        {at[1] + 1, VMMC_UDP_RF_TOKEN, "token without region"},
        {at[0] + 1, VMMC_UDP_F_NOTIFY | VMMC_UDP_RF_IMM, "region without token"},
        {at[1] + 1, VMMC_UDP_RF_IMM, "imm field past the record"},
        {at[0] + 20, 0, "imm present but zero"},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        memcpy(bad, pl, len);
        if (m[i].off == at[0] + 20)
            memset(bad + at[0] + 20, 0, 8);
        else
            bad[m[i].off] = m[i].val;
        mk_multi(&h, len, 3);
        expect(buf, build(buf, &h, bad), VMMC_UDP_BAD_RECORDS, m[i].what);
    }
    for (uint32_t cut = 1; cut < 20; cut++) {
        mk_multi(&h, len - cut, 3);
        expect(buf, build(buf, &h, pl), VMMC_UDP_BAD_RECORDS, "payload cut short");
    }
    /* The header's per-message fields are zero, and the datagram is whole. */
    mk_multi(&h, len, 3);
    h.region = 1;
    expect(buf, build(buf, &h, pl), VMMC_UDP_BAD_HEADER, "multi with a region");
    mk_multi(&h, len, 3);
    h.kind = 1;
    expect(buf, build(buf, &h, pl), VMMC_UDP_BAD_HEADER, "multi with a kind");
    mk_multi(&h, len, 3);
    h.imm = 5;
    expect(buf, build(buf, &h, pl), VMMC_UDP_BAD_HEADER, "multi with an imm");
    mk_multi(&h, len, 3);
    h.token[3] = 1;
    expect(buf, build(buf, &h, pl), VMMC_UDP_BAD_HEADER, "multi with a token");
    mk_multi(&h, len, 3);
    h.flags &= (uint8_t)~VMMC_UDP_F_LAST;
    expect(buf, build(buf, &h, pl), VMMC_UDP_BAD_HEADER, "multi without LAST");
    mk_multi(&h, len, 3);
    h.flags |= VMMC_UDP_F_NOTIFY;
    expect(buf, build(buf, &h, pl), VMMC_UDP_BAD_HEADER, "multi with NOTIFY");
    /* Random payloads and counts: refused or well formed, never a crash
     * (run under ASan in check-asan). */
    unsigned long long rng = 99;
    for (int it = 0; it < 20000; it++) {
        uint32_t l2 = (uint32_t)(vt_rand(&rng) % 300);
        for (uint32_t k = 0; k < l2; k++)
            bad[k] = (uint8_t)vt_rand(&rng);
        if (l2 > 1)
            bad[1] &= (uint8_t)(vt_rand(&rng) & 0x34);
        mk_multi(&h, l2, 1 + vt_rand(&rng) % 4);
        size_t bn = build(buf, &h, bad);
        vmmc_udp_verdict_t v = vmmc_udp_decode(buf, bn, &d);
        VT_CHECK(v == VMMC_UDP_OK || v == VMMC_UDP_BAD_RECORDS);
        if (v == VMMC_UDP_OK) {
            size_t p2 = 0;
            for (uint64_t c = 0; c < d.offset; c++)
                VT_CHECK(vmmc_udp_rec_decode(buf + d.hlen, d.length, &p2, &got) == 0);
            VT_CHECK(p2 == d.length);
        }
    }
}

int main(void)
{
    static uint8_t buf[VMMC_UDP_MAX_DGRAM], copy[VMMC_UDP_MAX_DGRAM];
    siphash_vectors();
    multi_records();
    uint8_t payload[1000];
    for (int i = 0; i < 1000; i++)
        payload[i] = (uint8_t)(i * 7);
    vmmc_udp_hdr_t h, d;
    memset(&h, 0, sizeof h);
    h.type = VMMC_UDP_T_DATA;
    h.flags = VMMC_UDP_F_FIRST | VMMC_UDP_F_NOTIFY;
    h.kind = 9;
    h.wnd = 64;
    h.src = 3;
    for (int i = 0; i < 16; i++)
        h.token[i] = (uint8_t)(0xF0 + i);
    h.region = 0xDEADBEEF;
    h.length = 1000;
    h.offset = 0x1122334455667788ull;
    h.seq = 0xFFFFFFF0u;
    h.ack = 77;
    h.sack = 0x8000000000000001ull;
    h.imm = 0xCAFEBABE12345678ull;
    h.gen = 0x0BADF00Du;
    size_t n = build(buf, &h, payload);

    /* Round trip, and the documented byte layout (little-endian): with sack
     * and imm, the largest header. */
    memset(&d, 0, sizeof d);
    VT_CHECK(n == VMMC_UDP_HDR_SIZE + 1000);
    VT_CHECK(vmmc_udp_decode(buf, n, &d) == VMMC_UDP_OK);
    VT_CHECK(vmmc_udp_auth(buf, &d, &key) == VMMC_UDP_OK);
    VT_CHECK(!memcmp(&d.token, &h.token, 16));
    VT_CHECK(d.type == h.type && d.flags == h.flags && d.kind == h.kind && d.wnd == h.wnd);
    VT_CHECK(d.src == h.src && d.region == h.region && d.length == h.length);
    VT_CHECK(d.offset == h.offset && d.seq == h.seq && d.ack == h.ack && d.sack == h.sack);
    VT_CHECK(d.imm == h.imm && d.gen == h.gen && d.hlen == VMMC_UDP_HDR_SIZE);
    VT_CHECK(buf[0] == 0x56 && buf[1] == 0x4D && buf[2] == VMMC_UDP_VERSION &&
             buf[3] == VMMC_UDP_T_DATA);
    VT_CHECK(buf[4] == (VMMC_UDP_F_FIRST | VMMC_UDP_F_NOTIFY | VMMC_UDP_F_SACK | VMMC_UDP_F_IMM));
    VT_CHECK(buf[8] == 3 && buf[12] == 0xEF && buf[15] == 0xDE && buf[16] == 0xF0);
    VT_CHECK(buf[32] == 0xE8 && buf[33] == 0x03 && buf[36] == 0x0D && buf[39] == 0x0B);
    VT_CHECK(buf[40] == 0x88 && buf[47] == 0x11 && buf[48] == 0xF0 && buf[52] == 77);
    VT_CHECK(buf[56] == 0x01 && buf[63] == 0x80 && buf[64] == 0x78 && buf[71] == 0xCA);
    VT_CHECK(!memcmp(buf + VMMC_UDP_HDR_SIZE, payload, 1000));

    /* Zero sack and imm are left out: 64-byte header, 128 bytes for 64 of
     * payload; either alone takes 8 bytes. */
    vmmc_udp_hdr_t z = h;
    z.sack = 0;
    z.imm = 0;
    z.length = 64;
    size_t zn = build(copy, &z, payload);
    VT_CHECK(zn == 128 && copy[4] == (VMMC_UDP_F_FIRST | VMMC_UDP_F_NOTIFY));
    VT_CHECK(vmmc_udp_decode(copy, zn, &d) == VMMC_UDP_OK);
    VT_CHECK(d.hlen == VMMC_UDP_HDR_MIN && d.sack == 0 && d.imm == 0 && d.gen == h.gen &&
             d.flags == z.flags && !memcmp(copy + VMMC_UDP_HDR_MIN, payload, 64));
    z.imm = 7;
    zn = build(copy, &z, payload);
    VT_CHECK(zn == 136 && vmmc_udp_decode(copy, zn, &d) == VMMC_UDP_OK && d.imm == 7 &&
             d.sack == 0 && d.hlen == 72 && copy[56] == 7);
    z.imm = 0;
    z.sack = 9;
    zn = build(copy, &z, payload);
    VT_CHECK(zn == 136 && vmmc_udp_decode(copy, zn, &d) == VMMC_UDP_OK && d.sack == 9 &&
             d.imm == 0 && d.hlen == 72);
    /* A field flagged present must not be zero (one encoding per header). */
    z.sack = 0;
    z.imm = 1;
    zn = build(copy, &z, payload);
    memset(copy + 56, 0, 8);
    expect(copy, zn, VMMC_UDP_BAD_HEADER, "imm flagged but zero");

    /* Header-only datagrams. */
    vmmc_udp_hdr_t a;
    memset(&a, 0, sizeof a);
    a.type = VMMC_UDP_T_ACK;
    a.ack = 5;
    a.offset = 1; /* control counter */
    size_t an = build(copy, &a, "");
    VT_CHECK(an == VMMC_UDP_HDR_MIN);
    expect(copy, an, VMMC_UDP_OK, "ack");
    a.sack = 3;
    a.imm = 4; /* an ACK's delivery report */
    an = build(copy, &a, "");
    VT_CHECK(an == VMMC_UDP_HDR_SIZE);
    expect(copy, an, VMMC_UDP_OK, "ack with sack and delivery report");
    a.sack = 0;
    a.imm = 0;

    /* Truncation at every length below the full datagram. */
    for (size_t k = 0; k < n; k += (k < 100 ? 1 : 37))
        expect(buf, k, VMMC_UDP_BAD_TRUNCATED, "truncated");
    /* Longer than the header says. */
    memcpy(copy, buf, n);
    copy[n] = 0;
    expect(copy, n + 1, VMMC_UDP_BAD_HEADER, "trailing byte");

#define MUTATE(stmt, verdict, what)                                                 \
    do {                                                                            \
        memcpy(copy, buf, n);                                                       \
        stmt;                                                                       \
        expect(copy, n, verdict, what);                                             \
    } while (0)
    MUTATE(copy[0] ^= 1, VMMC_UDP_BAD_MAGIC, "magic");
    MUTATE(copy[2] = 2, VMMC_UDP_BAD_VERSION, "version 2");
    MUTATE(copy[2] = 4, VMMC_UDP_BAD_VERSION, "version 4");
    MUTATE(copy[3] = 0, VMMC_UDP_BAD_HEADER, "type 0");
    MUTATE(copy[3] = 6, VMMC_UDP_BAD_HEADER, "type 6");
    MUTATE(copy[4] |= 0x80, VMMC_UDP_BAD_HEADER, "unknown flag");
    MUTATE(copy[4] &= ~VMMC_UDP_F_IMM, VMMC_UDP_BAD_HEADER, "imm flag cleared (length)");
    MUTATE(copy[37] ^= 1, VMMC_UDP_BAD_AUTH, "generation");
    MUTATE(copy[32] = 0xE7 /* 999 */, VMMC_UDP_BAD_HEADER, "length short of datagram");
    MUTATE(copy[33] = 0xff, VMMC_UDP_BAD_TRUNCATED, "length beyond datagram");
    MUTATE(copy[75] ^= 1, VMMC_UDP_BAD_AUTH, "tag field");
    /* Any single bit flip in the authenticated bytes is caught. */
    for (size_t bit = 0; bit < n * 8; bit += 5) {
        size_t byte = bit / 8;
        if (byte < 8 || (byte >= 32 && byte < 36))
            continue; /* fields with their own verdicts (flags, length) */
        MUTATE(copy[byte] ^= (uint8_t)(1u << (bit % 8)), VMMC_UDP_BAD_AUTH, "bit flip");
    }
    /* Another key (another link, or a forger's guess) does not verify. */
    vmmc_udp_key_t other = key;
    other.k[1] ^= 1ull << 40;
    VT_CHECK(vmmc_udp_decode(buf, n, &d) == VMMC_UDP_OK && vmmc_udp_auth(buf, &d, &other) ==
                                                               VMMC_UDP_BAD_AUTH);
    /* Keys: both ends derive the same one per direction; the two directions,
     * another pair, and another secret each give a different key. */
    uint8_t sa[16], sb[16], sc[16];
    for (int i = 0; i < 16; i++)
        sa[i] = (uint8_t)i, sb[i] = (uint8_t)(100 + i), sc[i] = (uint8_t)(200 + i);
    vmmc_udp_key_t ab, ab2, ba, ac, ab_other;
    vmmc_udp_key_derive(&ab, sa, 0, sb, 1);
    vmmc_udp_key_derive(&ab2, sa, 0, sb, 1);
    vmmc_udp_key_derive(&ba, sb, 1, sa, 0);
    vmmc_udp_key_derive(&ac, sa, 0, sc, 2);
    sb[15] ^= 1;
    vmmc_udp_key_derive(&ab_other, sa, 0, sb, 1);
    VT_CHECK(!memcmp(&ab, &ab2, sizeof ab));
    VT_CHECK(memcmp(&ab, &ba, sizeof ab) && memcmp(&ab, &ac, sizeof ab) &&
             memcmp(&ab, &ab_other, sizeof ab));

    /* A control datagram must not carry a payload or flags. */
    vmmc_udp_hdr_t k = a;
    k.type = VMMC_UDP_T_KEEPALIVE;
    k.length = 4;
    size_t kn = build(copy, &k, "abcd");
    expect(copy, kn, VMMC_UDP_BAD_HEADER, "keepalive with payload");
    k.length = 0;
    k.flags = VMMC_UDP_F_LAST;
    kn = build(copy, &k, "");
    expect(copy, kn, VMMC_UDP_BAD_HEADER, "keepalive with flags");
    /* The delivery-report flag is for DATA only. */
    k.type = VMMC_UDP_T_ACK;
    k.flags = VMMC_UDP_F_DLV;
    kn = build(copy, &k, "");
    expect(copy, kn, VMMC_UDP_BAD_HEADER, "ack with the delivery flag");
    vmmc_udp_hdr_t dl = h;
    dl.flags = VMMC_UDP_F_LAST | VMMC_UDP_F_DLV;
    size_t dn = build(copy, &dl, payload);
    VT_CHECK(vmmc_udp_decode(copy, dn, &d) == VMMC_UDP_OK);
    VT_CHECK(d.flags == (VMMC_UDP_F_LAST | VMMC_UDP_F_DLV));
    /* Offset + length wrapping around. */
    vmmc_udp_hdr_t w = h;
    w.offset = UINT64_MAX - 10;
    size_t wn = build(copy, &w, payload);
    expect(copy, wn, VMMC_UDP_BAD_HEADER, "offset wraps");
    printf("PASS\n");
    return 0;
}
