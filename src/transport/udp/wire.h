/* The UDP link's datagram format.
 *
 * Every datagram starts with a header of 64 to 80 bytes, all fields
 * little-endian:
 *
 *   0  u16 magic 0x4D56 ("VM")   2  u8 version (3)   3  u8 type
 *   4  u8 flags   5  u8 kind (opaque to the link)   6  u16 wnd (receive window, datagrams)
 *   8  u32 src endpoint id      12  u32 region
 *  16  u8[16] token: capability for the region (zero for region 0 and control)
 *  32  u32 length of the payload that follows    36  u32 gen (region generation)
 *  40  u64 offset in the region (DATA); control counter (ACK, KEEPALIVE, BYE, REFUSE)
 *  48  u32 seq (DATA only)     52  u32 cumulative ack (last in-order seq received)
 *  56  u64 sack, only with flag SACK: bit i set = seq ack+2+i received out of order
 *      u64 imm, only with flag IMM: carried to the receiver with the message
 *      u64 tag (the header's last 8 bytes)
 *
 * The tag authenticates the datagram: SipHash-2-4, under the key of the
 * link from src to the receiver (vmmc_udp_key_derive), of the header bytes
 * before it followed by the CRC32C of the payload (4 bytes). So a corrupted
 * payload or header, and a datagram made without the key, fail the same
 * check; the destination is implied by the key (each direction of each pair
 * of endpoints has its own).
 *
 * A field that is zero is left out (its flag says when it is there), so a
 * 64-byte message without an immediate travels in 128 bytes: on this
 * kernel's loopback path a datagram of up to 128 bytes costs measurably less
 * than a larger one. The payload's CRC is computed once (while the sender
 * copies the payload), so a retransmission re-stamps the header (fresh acks)
 * and its tag without re-reading the payload. Decoding checks everything
 * that can be checked without a key: size, magic, version, type, flags,
 * length; vmmc_udp_auth() then checks the tag. */
#ifndef VMMC_UDP_WIRE_H
#define VMMC_UDP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define VMMC_UDP_MAGIC 0x4D56u
#define VMMC_UDP_VERSION 3u
#define VMMC_UDP_HDR_MIN 64u  /* header without sack and imm */
#define VMMC_UDP_HDR_SIZE 80u /* largest header (both present) */
#define VMMC_UDP_TOKEN_SIZE 16u
/* Largest UDP payload over IPv4 (65535 - 20 - 8). */
#define VMMC_UDP_MAX_DGRAM 65507u

enum vmmc_udp_type {
    VMMC_UDP_T_DATA = 1,      /* sequenced, carries a payload for a region */
    VMMC_UDP_T_ACK = 2,       /* acknowledgement only */
    VMMC_UDP_T_KEEPALIVE = 3, /* liveness, carries acks too */
    VMMC_UDP_T_BYE = 4,       /* the sender closed its link cleanly */
    /* The answer to a handshake the sender will not take (it does not
     * listen): tagged with the key of the link from the sender to the one
     * refused, whose handshake gave it that one's secret. */
    VMMC_UDP_T_REFUSE = 5
};

enum vmmc_udp_flags {
    VMMC_UDP_F_FIRST = 1u << 0,  /* first fragment of a message */
    VMMC_UDP_F_LAST = 1u << 1,   /* last fragment of a message */
    VMMC_UDP_F_NOTIFY = 1u << 2, /* the message asks for a notification */
    /* DATA only: every datagram the ack field acknowledges has also been
     * delivered to the sender's receive callback, so the datagram carries
     * the delivery report an ACK would (the ACK owed is not needed). */
    VMMC_UDP_F_DLV = 1u << 3,
    /* DATA, a whole message in one datagram: apply all but its first 16
     * bytes, then word 0, then word 1 with release (VMMC_SEND_HEAD_LAST). */
    VMMC_UDP_F_HEADLAST = 1u << 6,
    /* DATA, FIRST|LAST: the payload is a sequence of records (several small
     * messages, see below), applied in order; offset holds their count, and
     * kind, region, gen, token and imm are zero. */
    VMMC_UDP_F_MULTI = 1u << 7,
    VMMC_UDP_F_ALL = 0xCFu,
    /* On the wire only (set by encode, removed by decode): the optional
     * sack / imm field is present. */
    VMMC_UDP_F_SACK = 1u << 4,
    VMMC_UDP_F_IMM = 1u << 5
};

typedef struct vmmc_udp_hdr {
    uint8_t type, flags, kind;
    uint16_t wnd;
    uint32_t src;
    uint8_t token[VMMC_UDP_TOKEN_SIZE];
    uint32_t region;
    uint32_t gen;
    uint32_t length;
    uint64_t offset; /* control datagrams: the sender's control counter */
    uint32_t seq, ack;
    uint64_t sack;
    uint64_t imm;
    uint8_t hlen;   /* set by decode: header length, the payload starts there */
} vmmc_udp_hdr_t;

/* Why a datagram was refused by vmmc_udp_decode(). */
typedef enum vmmc_udp_verdict {
    VMMC_UDP_OK = 0,
    VMMC_UDP_BAD_TRUNCATED,  /* shorter than a header, or than header + length */
    VMMC_UDP_BAD_MAGIC,
    VMMC_UDP_BAD_VERSION,
    VMMC_UDP_BAD_HEADER,     /* unknown type/flags, length mismatch, offset overflow */
    VMMC_UDP_BAD_AUTH,       /* vmmc_udp_auth(): wrong tag (corrupted, or made without the key) */
    VMMC_UDP_BAD_RECORDS     /* F_MULTI: a record count or record that does not fit the payload */
} vmmc_udp_verdict_t;

/* A record of a multi-record (F_MULTI) datagram: one whole message. On the
 * wire, little-endian, 20 to 44 bytes then the message's bytes:
 *   0 u8 kind   1 u8 flags (NOTIFY; IMM and TOKEN: the optional fields that
 *   follow)     2 u16 length of the message   4 u32 region   8 u32 gen
 *  12 u64 offset, then u64 imm (only with IMM: not zero), then u8[16] token
 *  (only with TOKEN, which is set exactly when region is not zero).
 * The records fill the payload exactly, and their number is the header's
 * offset field. */
#define VMMC_UDP_REC_MIN 20u
#define VMMC_UDP_REC_MAX 44u
#define VMMC_UDP_RF_TOKEN (1u << 4)
#define VMMC_UDP_RF_IMM (1u << 5)
typedef struct vmmc_udp_wrec {
    uint8_t kind, flags; /* flags: VMMC_UDP_F_NOTIFY or 0 (wire-only bits removed) */
    uint16_t length;
    uint32_t region, gen;
    uint64_t offset, imm;
    uint8_t token[VMMC_UDP_TOKEN_SIZE];
} vmmc_udp_wrec_t;

/* Length of @r's record header on the wire. */
static inline unsigned vmmc_udp_rec_hlen(const vmmc_udp_wrec_t *r)
{
    return VMMC_UDP_REC_MIN + (r->imm ? 8u : 0u) + (r->region ? VMMC_UDP_TOKEN_SIZE : 0u);
}
/* Write @r's record header into @b; returns its length. */
unsigned vmmc_udp_rec_encode(uint8_t *b, const vmmc_udp_wrec_t *r);
/* Read the record at *@pos of the @len-byte payload @b into @r; its message
 * is at b + *pos (after the call), r->length bytes, and *pos then moves past
 * it. 0, or -1 if it is malformed or does not fit. */
int vmmc_udp_rec_decode(const uint8_t *b, size_t len, size_t *pos, vmmc_udp_wrec_t *r);

/* The key of one direction of a link (SipHash-2-4 key). */
typedef struct vmmc_udp_key {
    uint64_t k[2];
} vmmc_udp_key_t;

/* The key for datagrams from endpoint @from (secret @from_secret) to
 * endpoint @to (secret @to_secret): a pseudo-random function of both
 * secrets and both ids, so each direction of each pair has its own, and
 * whoever knows neither secret cannot compute it. */
void vmmc_udp_key_derive(vmmc_udp_key_t *k, const uint8_t from_secret[16], uint32_t from,
                         const uint8_t to_secret[16], uint32_t to);

/* Length of @h's header on the wire (VMMC_UDP_HDR_MIN .. VMMC_UDP_HDR_SIZE). */
static inline unsigned vmmc_udp_hdr_len(const vmmc_udp_hdr_t *h)
{
    return VMMC_UDP_HDR_MIN + (h->sack ? 8u : 0u) + (h->imm ? 8u : 0u);
}

/* Write the header (vmmc_udp_hdr_len(h) bytes, at most VMMC_UDP_HDR_SIZE)
 * into @buf, tag included (under @key), given payload_crc =
 * vmmc_crc32c(0, payload, h->length); the payload goes right after it.
 * Returns the header length. h->flags must not hold the wire-only flags
 * (SACK, IMM). */
unsigned vmmc_udp_encode(uint8_t *buf, const vmmc_udp_hdr_t *h, uint32_t payload_crc,
                         const vmmc_udp_key_t *key);

/* Parse and check a received datagram of @len bytes, all but the tag. On
 * VMMC_UDP_OK fills @h (flags without the wire-only ones); the payload is at
 * buf + h->hlen, h->length bytes. */
vmmc_udp_verdict_t vmmc_udp_decode(const uint8_t *buf, size_t len, vmmc_udp_hdr_t *h);

/* Check the tag of a datagram that vmmc_udp_decode() accepted into @h,
 * under the key of the link it claims to come from: VMMC_UDP_OK or
 * VMMC_UDP_BAD_AUTH. Constant time in the tag's value. */
vmmc_udp_verdict_t vmmc_udp_auth(const uint8_t *buf, const vmmc_udp_hdr_t *h,
                                 const vmmc_udp_key_t *key);

const char *vmmc_udp_verdict_str(vmmc_udp_verdict_t v);

#endif
