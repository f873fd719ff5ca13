#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include "transport/udp/wire.h"

#include <string.h>

#include "transport/udp/crc32c.h"
#include "util/siphash.h"

static inline void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static inline uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Tag of the header bytes [0, n) followed by the payload's CRC. */
static uint64_t tag_of(const uint8_t *b, unsigned n, uint32_t payload_crc, const vmmc_udp_key_t *k)
{
    uint8_t m[VMMC_UDP_HDR_SIZE - 8 + 4];
    memcpy(m, b, n);
    put32(m + n, payload_crc);
    return vmmc_siphash(k->k, m, n + 4);
}

void vmmc_udp_key_derive(vmmc_udp_key_t *k, const uint8_t from_secret[16], uint32_t from,
                         const uint8_t to_secret[16], uint32_t to)
{
    /* PRF under the receiver's secret of (label, ids, sender's secret, i). */
    uint64_t key[2] = {get64(to_secret), get64(to_secret + 8)};
    uint8_t m[16 + 4 + 4 + 16 + 1];
    memcpy(m, "vmmc-udp-link-v3", 16);
    put32(m + 16, from);
    put32(m + 20, to);
    memcpy(m + 24, from_secret, 16);
    for (int i = 0; i < 2; i++) {
        m[40] = (uint8_t)i;
        k->k[i] = vmmc_siphash(key, m, sizeof m);
    }
}

unsigned vmmc_udp_encode(uint8_t *b, const vmmc_udp_hdr_t *h, uint32_t payload_crc,
                         const vmmc_udp_key_t *key)
{
    put16(b + 0, VMMC_UDP_MAGIC);
    b[2] = VMMC_UDP_VERSION;
    b[3] = h->type;
    b[4] = (uint8_t)(h->flags | (h->sack ? VMMC_UDP_F_SACK : 0) | (h->imm ? VMMC_UDP_F_IMM : 0));
    b[5] = h->kind;
    put16(b + 6, h->wnd);
    put32(b + 8, h->src);
    put32(b + 12, h->region);
    memcpy(b + 16, h->token, VMMC_UDP_TOKEN_SIZE);
    put32(b + 32, h->length);
    put32(b + 36, h->gen);
    put64(b + 40, h->offset);
    put32(b + 48, h->seq);
    put32(b + 52, h->ack);
    unsigned pos = 56;
    if (h->sack) {
        put64(b + pos, h->sack);
        pos += 8;
    }
    if (h->imm) {
        put64(b + pos, h->imm);
        pos += 8;
    }
    put64(b + pos, tag_of(b, pos, payload_crc, key));
    return pos + 8;
}

vmmc_udp_verdict_t vmmc_udp_decode(const uint8_t *b, size_t len, vmmc_udp_hdr_t *h)
{
    if (len < VMMC_UDP_HDR_MIN)
        return VMMC_UDP_BAD_TRUNCATED;
    if (get16(b) != VMMC_UDP_MAGIC)
        return VMMC_UDP_BAD_MAGIC;
    if (b[2] != VMMC_UDP_VERSION)
        return VMMC_UDP_BAD_VERSION;
    uint8_t type = b[3], flags = b[4];
    const unsigned wire_only = VMMC_UDP_F_SACK | VMMC_UDP_F_IMM;
    if (type < VMMC_UDP_T_DATA || type > VMMC_UDP_T_REFUSE || (flags & ~(VMMC_UDP_F_ALL | wire_only)))
        return VMMC_UDP_BAD_HEADER;
    unsigned hlen = VMMC_UDP_HDR_MIN + (flags & VMMC_UDP_F_SACK ? 8u : 0u) +
                    (flags & VMMC_UDP_F_IMM ? 8u : 0u);
    if (len < hlen)
        return VMMC_UDP_BAD_TRUNCATED;
    uint32_t length = get32(b + 32);
    if (length > len - hlen)
        return VMMC_UDP_BAD_TRUNCATED;
    if (length != len - hlen)
        return VMMC_UDP_BAD_HEADER;
    if (type != VMMC_UDP_T_DATA && (length != 0 || (flags & ~wire_only)))
        return VMMC_UDP_BAD_HEADER;
    uint64_t offset = get64(b + 40);
    if (type == VMMC_UDP_T_DATA && !(flags & VMMC_UDP_F_MULTI) && offset + length < offset)
        return VMMC_UDP_BAD_HEADER;
    h->type = type;
    h->flags = (uint8_t)(flags & ~wire_only);
    h->kind = b[5];
    h->wnd = get16(b + 6);
    h->src = get32(b + 8);
    h->region = get32(b + 12);
    memcpy(h->token, b + 16, VMMC_UDP_TOKEN_SIZE);
    h->length = length;
    h->gen = get32(b + 36);
    h->offset = offset;
    h->seq = get32(b + 48);
    h->ack = get32(b + 52);
    unsigned pos = 56;
    h->sack = 0;
    h->imm = 0;
    if (flags & VMMC_UDP_F_SACK) {
        h->sack = get64(b + pos);
        pos += 8;
    }
    if (flags & VMMC_UDP_F_IMM)
        h->imm = get64(b + pos);
    /* One encoding per header: a field that is there is not zero. */
    if (((flags & VMMC_UDP_F_SACK) && !h->sack) || ((flags & VMMC_UDP_F_IMM) && !h->imm))
        return VMMC_UDP_BAD_HEADER;
    h->hlen = (uint8_t)hlen;
    if (h->flags & VMMC_UDP_F_MULTI) {
        /* Records: whole messages, so the datagram is one (FIRST|LAST); the
         * header's per-message fields are unused, hence zero. */
        static const uint8_t zero[VMMC_UDP_TOKEN_SIZE];
        uint8_t need = VMMC_UDP_F_FIRST | VMMC_UDP_F_LAST;
        if ((h->flags & need) != need || (h->flags & (VMMC_UDP_F_NOTIFY | VMMC_UDP_F_HEADLAST)) ||
            h->kind || h->region || h->gen || h->imm || memcmp(h->token, zero, sizeof zero))
            return VMMC_UDP_BAD_HEADER;
        /* The count, then every record, checked against the payload. */
        if (h->offset == 0 || h->offset > length / VMMC_UDP_REC_MIN)
            return VMMC_UDP_BAD_RECORDS;
        size_t p = 0;
        vmmc_udp_wrec_t r;
        for (uint64_t i = 0; i < h->offset; i++)
            if (vmmc_udp_rec_decode(b + hlen, length, &p, &r) != 0)
                return VMMC_UDP_BAD_RECORDS;
        if (p != length)
            return VMMC_UDP_BAD_RECORDS;
    }
    return VMMC_UDP_OK;
}

unsigned vmmc_udp_rec_encode(uint8_t *b, const vmmc_udp_wrec_t *r)
{
    b[0] = r->kind;
    b[1] = (uint8_t)((r->flags & VMMC_UDP_F_NOTIFY) | (r->imm ? VMMC_UDP_RF_IMM : 0) |
                     (r->region ? VMMC_UDP_RF_TOKEN : 0));
    put16(b + 2, r->length);
    put32(b + 4, r->region);
    put32(b + 8, r->gen);
    put64(b + 12, r->offset);
    unsigned pos = VMMC_UDP_REC_MIN;
    if (r->imm) {
        put64(b + pos, r->imm);
        pos += 8;
    }
    if (r->region) {
        memcpy(b + pos, r->token, VMMC_UDP_TOKEN_SIZE);
        pos += VMMC_UDP_TOKEN_SIZE;
    }
    return pos;
}

int vmmc_udp_rec_decode(const uint8_t *b, size_t len, size_t *pos, vmmc_udp_wrec_t *r)
{
    size_t p = *pos;
    if (p > len || len - p < VMMC_UDP_REC_MIN)
        return -1;
    const uint8_t *q = b + p;
    uint8_t f = q[1];
    if (f & ~(VMMC_UDP_F_NOTIFY | VMMC_UDP_RF_IMM | VMMC_UDP_RF_TOKEN))
        return -1;
    r->kind = q[0];
    r->flags = (uint8_t)(f & VMMC_UDP_F_NOTIFY);
    r->length = get16(q + 2);
    r->region = get32(q + 4);
    r->gen = get32(q + 8);
    r->offset = get64(q + 12);
    /* One encoding: the token is there exactly for a region. */
    if (!(f & VMMC_UDP_RF_TOKEN) != !r->region)
        return -1;
    unsigned hl = VMMC_UDP_REC_MIN + (f & VMMC_UDP_RF_IMM ? 8u : 0u) +
                  (f & VMMC_UDP_RF_TOKEN ? VMMC_UDP_TOKEN_SIZE : 0u);
    if (len - p < hl || len - p - hl < r->length)
        return -1;
    unsigned o = VMMC_UDP_REC_MIN;
    r->imm = 0;
    if (f & VMMC_UDP_RF_IMM) {
        r->imm = get64(q + o);
        o += 8;
        if (!r->imm)
            return -1;
    }
    if (f & VMMC_UDP_RF_TOKEN)
        memcpy(r->token, q + o, VMMC_UDP_TOKEN_SIZE);
    else
        memset(r->token, 0, VMMC_UDP_TOKEN_SIZE);
    if (r->offset + r->length < r->offset)
        return -1;
    *pos = p + hl + r->length;
    return 0;
}

vmmc_udp_verdict_t vmmc_udp_auth(const uint8_t *b, const vmmc_udp_hdr_t *h,
                                 const vmmc_udp_key_t *key)
{
    unsigned n = h->hlen - 8u;
    uint64_t want = tag_of(b, n, vmmc_crc32c(0, b + h->hlen, h->length), key);
    /* No early exit on the first differing byte. */
    return (want ^ get64(b + n)) ? VMMC_UDP_BAD_AUTH : VMMC_UDP_OK;
}

const char *vmmc_udp_verdict_str(vmmc_udp_verdict_t v)
{
    switch (v) {
    case VMMC_UDP_OK: return "ok";
    case VMMC_UDP_BAD_TRUNCATED: return "truncated";
    case VMMC_UDP_BAD_MAGIC: return "bad magic";
    case VMMC_UDP_BAD_VERSION: return "bad version";
    case VMMC_UDP_BAD_HEADER: return "malformed header";
    case VMMC_UDP_BAD_AUTH: return "bad tag (corrupted or forged)";
    case VMMC_UDP_BAD_RECORDS: return "malformed record in a multi-record datagram";
    }
    return "unknown";
}
