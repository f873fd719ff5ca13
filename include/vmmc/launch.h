/**
 * @file launch.h
 * @brief The job rendezvous server, for launchers.
 *
 * A launcher (`vmmc run`, or one of your own) starts the ranks of a job and
 * serves their rendezvous: it collects every rank's HELLO (pid, contact
 * card), sends the table to all, serves the barrier and broadcasts death
 * notices. The ranks find it through the VMMC_LAUNCHER variable (see
 * docs/launcher.md); the same server runs in rank 0 for the TCP bootstrap
 * (VMMC_BOOTSTRAP=host:port).
 *
 * The server is driven by its owner's poll loop and never blocks longer than
 * VMMC_BSRV_SEND_TIMEOUT_MS on a slow client. It is single-threaded: every
 * call on one server must come from the same thread. Every byte a client
 * sends is checked; a client that breaks the protocol is disconnected.
 */
#ifndef VMMC_LAUNCH_H
#define VMMC_LAUNCH_H

#include <poll.h>

#include "vmmc/vmmc.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief An opaque rendezvous server. */
typedef struct vmmc_boot_server vmmc_boot_server_t;

enum {
    /** A rank whose connection drops without FINI is dead: broadcast
     *  DEAD(rank, -1) at once (TCP bootstrap). Without this flag the owner
     *  reports the exit through vmmc_boot_server_rank_exited() (launcher). */
    VMMC_BSRV_DEAD_ON_DISCONNECT = 1
};

/** Longest a send to one client may block before the client is dropped. */
#define VMMC_BSRV_SEND_TIMEOUT_MS 2000

/** @brief Serve a job of @p size ranks named @p job on the listening socket
 *  @p lfd (a stream socket; the server takes it and makes it non-blocking).
 *  @return 0, or a negative errno; on failure @p lfd is not closed. */
VMMC_API int vmmc_boot_server_create(vmmc_boot_server_t **out, int lfd, int size,
                                     const char *job, unsigned flags);

/** @brief Number of pollfd slots the server may need (upper bound). */
VMMC_API int vmmc_boot_server_maxfds(const vmmc_boot_server_t *s);
/** @brief Fill @p fds with the descriptors to poll; returns how many. */
VMMC_API int vmmc_boot_server_pollfds(vmmc_boot_server_t *s, struct pollfd *fds);
/** @brief Handle the results of poll() on the descriptors from the last
 *  vmmc_boot_server_pollfds(). */
VMMC_API void vmmc_boot_server_handle(vmmc_boot_server_t *s, const struct pollfd *fds, int n);

/** @brief The launcher saw rank @p rank exit with wait status @p status;
 *  @p failed says whether that is a failure (signal or non-zero exit). A
 *  failure is broadcast as DEAD(rank, status). A clean exit before the table
 *  was sent is broadcast too (the rendezvous can no longer complete). */
VMMC_API void vmmc_boot_server_rank_exited(vmmc_boot_server_t *s, int rank, int status,
                                           int failed);

/** @brief Broadcast DEAD(rank, status) for a rank the owner knows to be gone. */
VMMC_API void vmmc_boot_server_dead(vmmc_boot_server_t *s, int rank, int status);

/** @brief Ranks that joined or may still join and have not left or died. */
VMMC_API int vmmc_boot_server_live(const vmmc_boot_server_t *s);

/** @brief Close every connection and the listening socket, and free. */
VMMC_API void vmmc_boot_server_destroy(vmmc_boot_server_t *s);

#ifdef __cplusplus
}
#endif
#endif /* VMMC_LAUNCH_H */
