/* Private helpers of the upgrade (sock_ctx.c, sock_rec.c, sock_probe.c,
 * sock_hello.c): what these files share beyond the contract of sock.h. */
#ifndef VMMC_SOCK_SOCK_UP_H
#define VMMC_SOCK_SOCK_UP_H

#include <stddef.h>
#include <stdint.h>

#include "sock/sock.h"

/* The errno that stands for a vmmc status (VMMC_ERR_*). */
int sock_errno_of(int status);

/* Check a record read from outside: 0, or -1/EPROTO with the reason in
 * vmmc_last_error(). */
int sock_rec_check(const sock_rec_t *r);
/* Look at up to @p len bytes waiting on @p fd without taking them (MSG_PEEK,
 * non-blocking): bytes seen, 0 at EOF, -1/errno (EAGAIN: none yet). */
ssize_t sock_rec_peek(int fd, void *buf, size_t len);

/* The debug line of a decision (VMMC_SOCK_DEBUG=y):
 *   vmmc-sock[<pid>]: fd <n> <what> (<detail>, <side>) */
void sock_up_say(sock_t *s, const char *what, const char *detail, const char *side);
/* The client's line once the server's ACK is handled (sock_conn_on_tcp):
 * @p status 0: "upgraded (<transport>, client)"; else "stays on tcp (ack:
 * <reason>, client)". */
void sock_up_acked(sock_t *s, int status, const char *transport);

#endif
