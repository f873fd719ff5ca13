#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include "transport/udp/wire.h"

#include <string.h>

#include "transport/udp/crc32c.h"

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

unsigned vmmc_udp_encode(uint8_t *b, const vmmc_udp_hdr_t *h, uint32_t payload_crc)
{
    put16(b + 0, VMMC_UDP_MAGIC);
    b[2] = VMMC_UDP_VERSION;
    b[3] = h->type;
    b[4] = (uint8_t)(h->flags | (h->sack ? VMMC_UDP_F_SACK : 0) | (h->imm ? VMMC_UDP_F_IMM : 0));
    b[5] = h->kind;
    put16(b + 6, h->wnd);
    put32(b + 8, h->src);
    put32(b + 12, h->dst);
    memcpy(b + 16, h->token, VMMC_UDP_TOKEN_SIZE);
    put32(b + 32, h->region);
    put32(b + 36, h->length);
    put64(b + 40, h->offset);
    put32(b + 48, h->seq);
    put32(b + 52, h->ack);
    put32(b + 56, h->gen);
    unsigned pos = 60;
    if (h->sack) {
        put64(b + pos, h->sack);
        pos += 8;
    }
    if (h->imm) {
        put64(b + pos, h->imm);
        pos += 8;
    }
    put32(b + pos, vmmc_crc32c(payload_crc, b, pos));
    return pos + 4;
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
    if (type < VMMC_UDP_T_DATA || type > VMMC_UDP_T_BYE || (flags & ~(VMMC_UDP_F_ALL | wire_only)))
        return VMMC_UDP_BAD_HEADER;
    unsigned hlen = VMMC_UDP_HDR_MIN + (flags & VMMC_UDP_F_SACK ? 8u : 0u) +
                    (flags & VMMC_UDP_F_IMM ? 8u : 0u);
    if (len < hlen)
        return VMMC_UDP_BAD_TRUNCATED;
    uint32_t length = get32(b + 36);
    if (length > len - hlen)
        return VMMC_UDP_BAD_TRUNCATED;
    if (length != len - hlen)
        return VMMC_UDP_BAD_HEADER;
    if (type != VMMC_UDP_T_DATA && (length != 0 || (flags & ~wire_only)))
        return VMMC_UDP_BAD_HEADER;
    uint64_t offset = get64(b + 40);
    if (offset + length < offset)
        return VMMC_UDP_BAD_HEADER;
    uint32_t crc = vmmc_crc32c(vmmc_crc32c(0, b + hlen, length), b, hlen - 4);
    if (crc != get32(b + hlen - 4))
        return VMMC_UDP_BAD_CRC;
    h->type = type;
    h->flags = (uint8_t)(flags & ~wire_only);
    h->kind = b[5];
    h->wnd = get16(b + 6);
    h->src = get32(b + 8);
    h->dst = get32(b + 12);
    memcpy(h->token, b + 16, VMMC_UDP_TOKEN_SIZE);
    h->region = get32(b + 32);
    h->gen = get32(b + 56);
    h->length = length;
    h->offset = offset;
    h->seq = get32(b + 48);
    h->ack = get32(b + 52);
    unsigned pos = 60;
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
    return VMMC_UDP_OK;
}

const char *vmmc_udp_verdict_str(vmmc_udp_verdict_t v)
{
    switch (v) {
    case VMMC_UDP_OK: return "ok";
    case VMMC_UDP_BAD_TRUNCATED: return "truncated";
    case VMMC_UDP_BAD_MAGIC: return "bad magic";
    case VMMC_UDP_BAD_VERSION: return "bad version";
    case VMMC_UDP_BAD_HEADER: return "malformed header";
    case VMMC_UDP_BAD_CRC: return "bad CRC32C";
    }
    return "unknown";
}
