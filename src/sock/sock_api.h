/* What sock_fd.c, sock_api.c, sock_io.c and sock_poll.c share (private to
 * the layer's public-call side; the layer's contract is sock.h). */
#ifndef VMMC_SOCK_SOCK_API_H
#define VMMC_SOCK_SOCK_API_H

#include <errno.h>

#include "sock/sock.h"
#include "util/log.h"

/* Fail a public call: the message for vmmc_last_error(), errno @p err;
 * returns -1. */
int sock_fail(int err, const char *fmt, ...) VMMC_PRINTF(2, 3) VMMC_COLD;
#define SOCK_FAIL(err, ...) sock_fail((err), __VA_ARGS__)

/* A kernel call failed with errno set: a message naming it and errno's
 * text; errno kept; returns -1. */
int sock_sysfail(const char *fmt, ...) VMMC_PRINTF(1, 2) VMMC_COLD;
#define SOCK_SYSFAIL(...) sock_sysfail(__VA_ARGS__)

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
