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

#endif
