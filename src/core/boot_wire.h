/* Bootstrap wire protocol, shared by the rendezvous server (boot_server.c,
 * also compiled into the `vmmc run` tool) and the client (boot.c).
 *
 * Every message is an 8-byte header followed by a body:
 *   u32 body length (little endian, at most VMMC_BW_MAX_BODY)
 *   u16 type (VMMC_BW_*)
 *   u16 protocol version (VMMC_BW_VERSION)
 * Integers in bodies are little endian; strings are a u32 length then bytes
 * (no NUL on the wire).
 *
 *   HELLO   client->server  u32 rank, u32 size, u32 pid, str job, str card
 *   TABLE   server->client  str job, u32 size, size x (u32 pid, str card)
 *   BARRIER both ways       u64 epoch (server: every epoch <= this completed)
 *   DEAD    server->client  u32 rank, i64 wait status (-1: unknown)
 *   FINI    client->server  (empty) the rank leaves cleanly
 *   ERROR   server->client  str reason; the server closes the connection
 *
 * This file holds no state; the helpers below report failures as negative
 * errno values so that both the library and the tool can use them. */
#ifndef VMMC_CORE_BOOT_WIRE_H
#define VMMC_CORE_BOOT_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define VMMC_BW_HDR 8u
#define VMMC_BW_VERSION 1u
#define VMMC_BW_MAX_BODY (64u << 20)
#define VMMC_BW_MAX_CARD (64u << 10)
#define VMMC_BW_MAX_JOB 63u
#define VMMC_BW_MAX_SIZE 65536

enum {
    VMMC_BW_HELLO = 1,
    VMMC_BW_TABLE = 2,
    VMMC_BW_BARRIER = 3,
    VMMC_BW_DEAD = 4,
    VMMC_BW_FINI = 5,
    VMMC_BW_ERROR = 6
};

/* Growing message builder. err is set (and stays set) on allocation failure. */
typedef struct vmmc_bw_out {
    uint8_t *p;
    size_t len, cap;
    int err;
} vmmc_bw_out_t;

/* Bounded reader over a received body. err is set on any overrun. */
typedef struct vmmc_bw_in {
    const uint8_t *p;
    size_t len, off;
    int err;
} vmmc_bw_in_t;

/* Receive buffer for one connection. */
typedef struct vmmc_bw_rx {
    uint8_t *buf;
    size_t len, cap;
    size_t consumed; /* length of the message returned by vmmc_bw_rx_next */
} vmmc_bw_rx_t;

void vmmc_bw_out_init(vmmc_bw_out_t *o, uint16_t type);
void vmmc_bw_put_u32(vmmc_bw_out_t *o, uint32_t v);
void vmmc_bw_put_u64(vmmc_bw_out_t *o, uint64_t v);
void vmmc_bw_put_str(vmmc_bw_out_t *o, const char *s, size_t n);
/* Patch the header's length; returns 0 or -ENOMEM/-EMSGSIZE. */
int vmmc_bw_out_finish(vmmc_bw_out_t *o);
void vmmc_bw_out_free(vmmc_bw_out_t *o);

uint32_t vmmc_bw_get_u32(vmmc_bw_in_t *in);
uint64_t vmmc_bw_get_u64(vmmc_bw_in_t *in);
/* Points *s at the string bytes inside the body (not NUL-terminated). */
uint32_t vmmc_bw_get_str(vmmc_bw_in_t *in, const char **s, uint32_t max);

/* Write all of buf on a non-blocking stream socket, waiting at most
 * timeout_ms (-1: forever) in total. Retries EINTR/EAGAIN, never raises
 * SIGPIPE. Returns 0 or a negative errno (-ETIMEDOUT, -EPIPE, ...). */
int vmmc_bw_write_all(int fd, const void *buf, size_t len, int timeout_ms);

/* Read what is available on a non-blocking fd into rx. Returns the number of
 * bytes read (>0), 0 at end of stream, -EAGAIN if nothing is available, or a
 * negative errno. */
long vmmc_bw_rx_fill(vmmc_bw_rx_t *rx, int fd);
/* If a whole message is buffered: returns 1 and its type/body. Returns 0 if
 * more bytes are needed, -EPROTO if the header is malformed. The message
 * stays valid until vmmc_bw_rx_consume(). */
int vmmc_bw_rx_next(vmmc_bw_rx_t *rx, uint16_t *type, const uint8_t **body, uint32_t *len);
void vmmc_bw_rx_consume(vmmc_bw_rx_t *rx);
void vmmc_bw_rx_free(vmmc_bw_rx_t *rx);

/* Milliseconds on the monotonic clock. */
int64_t vmmc_bw_now_ms(void);
/* Remaining ms until deadline (>=0), or -1 if deadline < 0 (forever). */
int vmmc_bw_left_ms(int64_t deadline);

#endif
