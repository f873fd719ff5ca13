/* The bootstrap rendezvous server: collects every rank's HELLO (pid, card),
 * sends the table to all, serves the barrier, and broadcasts death notices.
 *
 * One implementation serves both the `vmmc run` launcher (abstract Unix
 * socket, driven by the launcher's own poll loop) and the TCP bootstrap (a
 * thread in rank 0). It is single-threaded: all calls on one server come
 * from the same thread. It uses libc only (the tool compiles it in) and
 * never blocks longer than VMMC_BSRV_SEND_TIMEOUT_MS on a slow client. */
#ifndef VMMC_CORE_BOOT_SERVER_H
#define VMMC_CORE_BOOT_SERVER_H

#include <poll.h>

typedef struct vmmc_boot_server vmmc_boot_server_t;

enum {
    /* A rank whose connection drops without FINI is dead: broadcast
     * DEAD(rank, -1) at once (TCP bootstrap). Without this flag the owner
     * reports the exit through vmmc_boot_server_rank_exited (launcher). */
    VMMC_BSRV_DEAD_ON_DISCONNECT = 1
};

#define VMMC_BSRV_SEND_TIMEOUT_MS 2000

/* Take ownership of the listening socket @lfd (set non-blocking here).
 * Returns 0 or a negative errno; on failure @lfd is not closed. */
int vmmc_boot_server_create(vmmc_boot_server_t **out, int lfd, int size, const char *job,
                            unsigned flags);

/* Number of pollfd slots the server may need (upper bound). */
int vmmc_boot_server_maxfds(const vmmc_boot_server_t *s);
/* Fill @fds with the descriptors to poll; returns how many. */
int vmmc_boot_server_pollfds(vmmc_boot_server_t *s, struct pollfd *fds);
/* Handle the results of poll() on the descriptors from the last pollfds. */
void vmmc_boot_server_handle(vmmc_boot_server_t *s, const struct pollfd *fds, int n);

/* The launcher saw rank @rank exit with wait status @status; @failed says
 * whether that is a failure (signal or non-zero exit). A failure is
 * broadcast as DEAD(rank, status). A clean exit before the table was sent
 * is broadcast too (the rendezvous can no longer complete). */
void vmmc_boot_server_rank_exited(vmmc_boot_server_t *s, int rank, int status, int failed);

/* Broadcast DEAD(rank, status) for a rank the owner knows to be gone. */
void vmmc_boot_server_dead(vmmc_boot_server_t *s, int rank, int status);

/* Ranks that joined or may still join and have not left or died. */
int vmmc_boot_server_live(const vmmc_boot_server_t *s);

/* Close every connection and the listening socket, free. */
void vmmc_boot_server_destroy(vmmc_boot_server_t *s);

#endif
