/* The UDP link's datagram format.
 *
 * Every datagram starts with a header of 64 to 80 bytes, all fields
 * little-endian:
 *
 *   0  u16 magic 0x4D56 ("VM")   2  u8 version (2)   3  u8 type
 *   4  u8 flags   5  u8 kind (opaque to the link)   6  u16 wnd (receive window, datagrams)
 *   8  u32 src endpoint id      12  u32 dst endpoint id
 *  16  u8[16] token: capability for the region (region 0: the receiving link's token)
 *  32  u32 region              36  u32 length of the payload that follows
 *  40  u64 offset in the region
 *  48  u32 seq (DATA only)     52  u32 cumulative ack (last in-order seq received)
 *  56  u32 gen (region generation)
 *  60  u64 sack, only with flag SACK: bit i set = seq ack+2+i received out of order
 *      u64 imm, only with flag IMM: carried to the receiver with the message
 *      u32 CRC32C (the header's last 4 bytes)
 *
 * A field that is zero is left out (its flag says when it is there), so a
 * 64-byte message without an immediate travels in 128 bytes: on this
 * kernel's loopback path a datagram of up to 128 bytes costs measurably less
 * than a larger one. The CRC covers the payload first, then the header bytes
 * before it, so a sender can compute the payload part once and re-stamp the
 * header (acks) on every retransmission cheaply. Decoding checks everything
 * that can be checked without state: size, magic, version, type, flags,
 * length, CRC. */
#ifndef VMMC_UDP_WIRE_H
#define VMMC_UDP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define VMMC_UDP_MAGIC 0x4D56u
#define VMMC_UDP_VERSION 2u
#define VMMC_UDP_HDR_MIN 64u  /* header without sack and imm */
#define VMMC_UDP_HDR_SIZE 80u /* largest header (both present) */
#define VMMC_UDP_TOKEN_SIZE 16u
/* Largest UDP payload over IPv4 (65535 - 20 - 8). */
#define VMMC_UDP_MAX_DGRAM 65507u

enum vmmc_udp_type {
    VMMC_UDP_T_DATA = 1,      /* sequenced, carries a payload for a region */
    VMMC_UDP_T_ACK = 2,       /* acknowledgement only */
    VMMC_UDP_T_KEEPALIVE = 3, /* liveness, carries acks too */
    VMMC_UDP_T_BYE = 4        /* the sender closed its link cleanly */
};

enum vmmc_udp_flags {
    VMMC_UDP_F_FIRST = 1u << 0,  /* first fragment of a message */
    VMMC_UDP_F_LAST = 1u << 1,   /* last fragment of a message */
    VMMC_UDP_F_NOTIFY = 1u << 2, /* the message asks for a notification */
    /* DATA only: every datagram the ack field acknowledges has also been
     * delivered to the sender's receive callback, so the datagram carries
     * the delivery report an ACK would (the ACK owed is not needed). */
    VMMC_UDP_F_DLV = 1u << 3,
    VMMC_UDP_F_ALL = 0xFu,
    /* On the wire only (set by encode, removed by decode): the optional
     * sack / imm field is present. */
    VMMC_UDP_F_SACK = 1u << 4,
    VMMC_UDP_F_IMM = 1u << 5
};

typedef struct vmmc_udp_hdr {
    uint8_t type, flags, kind;
    uint16_t wnd;
    uint32_t src, dst;
    uint8_t token[VMMC_UDP_TOKEN_SIZE];
    uint32_t region;
    uint32_t gen;
    uint32_t length;
    uint64_t offset;
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
    VMMC_UDP_BAD_CRC
} vmmc_udp_verdict_t;

/* Length of @h's header on the wire (VMMC_UDP_HDR_MIN .. VMMC_UDP_HDR_SIZE). */
static inline unsigned vmmc_udp_hdr_len(const vmmc_udp_hdr_t *h)
{
    return VMMC_UDP_HDR_MIN + (h->sack ? 8u : 0u) + (h->imm ? 8u : 0u);
}

/* Write the header (vmmc_udp_hdr_len(h) bytes, at most VMMC_UDP_HDR_SIZE)
 * into @buf, CRC included, given payload_crc = vmmc_crc32c(0, payload,
 * h->length); the payload goes right after it. Returns the header length.
 * h->flags must not hold the wire-only flags (SACK, IMM). */
unsigned vmmc_udp_encode(uint8_t *buf, const vmmc_udp_hdr_t *h, uint32_t payload_crc);

/* Parse and check a received datagram of @len bytes. On VMMC_UDP_OK fills
 * @h (flags without the wire-only ones); the payload is at buf + h->hlen,
 * h->length bytes. */
vmmc_udp_verdict_t vmmc_udp_decode(const uint8_t *buf, size_t len, vmmc_udp_hdr_t *h);

const char *vmmc_udp_verdict_str(vmmc_udp_verdict_t v);

#endif
