/* What sock_fd.c, sock_api.c, sock_io.c and sock_poll.c share (private to
 * the layer's public-call side; the layer's contract is sock.h). */
#ifndef VMMC_SOCK_SOCK_API_H
#define VMMC_SOCK_SOCK_API_H

#include <errno.h>

#include "sock/sock.h"
#include "util/log.h"

/* Fail a public call: the message for vmmc_last_error(), errno @p err, -1.
 * vmmc_error() keeps errno, so it is set after. */
#define SOCK_FAIL(err, ...) (vmmc_error(VMMC_ERR_SYSTEM, __VA_ARGS__), errno = (err), -1)

/* A kernel call failed with errno already set: record a message naming it. */
#define SOCK_SYSFAIL(...) (vmmc_error_sys(__VA_ARGS__), -1)

/* The socket of @p fd with a reference, or NULL with EBADF (a descriptor
 * that is not a vmmc socket) and a message naming @p call. */
sock_t *sock_lookup(int fd, const char *call);

/* Sockets objects in use (tests: every one is released). */
int sock_fd_live(void);

/* The poll timeout (ms, -1 forever) of a call on @p s: 0 when the socket or
 * the call is non-blocking, else SO_RCVTIMEO/SO_SNDTIMEO. */
int sock_timeout(sock_t *s, int flags, int for_send);

/* A PENDING socket: run the upgrade step that @p why calls for (client: the
 * connect finished; server: sock_up_server). 0 when decided, -1/errno
 * (EAGAIN: not yet). */
int sock_settle(sock_t *s, int why, int timeout_ms);

/* A non-blocking connect() in flight: has it finished? 1 established (the
 * upgrade then runs), 0 not yet, -1/errno failed (errno the SO_ERROR). */
int sock_connect_done(sock_t *s);

#endif
