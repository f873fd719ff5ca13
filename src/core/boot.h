/* Job bootstrap: how a process learns its rank, the size of the job, and the
 * other ranks' pids and "business cards" (opaque strings each rank publishes
 * at start: host id, addresses). Also the job-wide barrier and the launcher's
 * death notices.
 *
 * Sources, in order of precedence:
 *  - VMMC_BOOTSTRAP=host:port with VMMC_RANK/VMMC_SIZE: TCP rendezvous (rank 0
 *    serves it), for processes started by any means on several hosts;
 *  - VMMC_LAUNCHER=<abstract unix socket name> (set by `vmmc run`);
 *  - PMIx, when built with it and started by mpirun/prterun/srun;
 *  - nothing: a job of size 1 (rank 0), no launcher connection.
 *
 * Threading: vmmc_boot_init() runs once before any other thread uses @b. After
 * that the core's control thread owns reading b->fd (vmmc_boot_dispatch);
 * vmmc_boot_barrier_send() may be called from any thread (it serialises its
 * writes internally). */
#ifndef VMMC_CORE_BOOT_H
#define VMMC_CORE_BOOT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct vmmc_boot_peer {
    pid_t pid;
    char *card; /* NUL-terminated, owned by the boot module */
} vmmc_boot_peer_t;

typedef struct vmmc_boot {
    int rank;
    int size;
    char job[64];           /* job id: unique per job, used in socket names */
    int fd;                 /* launcher/rendezvous connection, -1 if none */
    vmmc_boot_peer_t *peers;/* size entries, filled by vmmc_boot_init */
    pthread_mutex_t wlock;  /* serialises writes to fd */
    void *priv;             /* module-private state (server thread, PMIx, ...) */
} vmmc_boot_t;

typedef enum {
    VMMC_BOOT_EV_BARRIER = 1, /* barrier epoch @a completed */
    VMMC_BOOT_EV_DEAD = 2,    /* rank @a died; @b = wait status (as waitpid) or -1 */
    VMMC_BOOT_EV_CLOSED = 3   /* the launcher connection closed */
} vmmc_boot_event_t;

typedef void (*vmmc_boot_event_fn)(void *arg, vmmc_boot_event_t ev, int64_t a, int64_t b);

/* Join the job: find rank/size, connect, publish @card, receive every rank's
 * pid and card. Blocks at most @timeout_ms. Returns a vmmc status. */
int vmmc_boot_init(vmmc_boot_t *b, const char *card, int timeout_ms);

/* Ask for barrier @epoch; completion arrives as VMMC_BOOT_EV_BARRIER through
 * vmmc_boot_dispatch(). For a job of size 1 the event is not needed: returns
 * VMMC_OK and the caller treats the barrier as complete (b->fd < 0). */
int vmmc_boot_barrier_send(vmmc_boot_t *b, uint64_t epoch);

/* Read and handle whatever is available on b->fd without blocking; calls @fn
 * for each event. Returns a vmmc status (VMMC_OK when nothing is left). */
int vmmc_boot_dispatch(vmmc_boot_t *b, vmmc_boot_event_fn fn, void *arg);

/* The rank whose process serves the bootstrap connection (0 for the TCP
 * rendezvous), or -1 when no rank does (launcher, PMIx, singleton): when
 * that connection closes while this rank is in the job, that rank is gone. */
int vmmc_boot_host_rank(const vmmc_boot_t *b);

/* Tell the launcher this rank leaves cleanly (finalize), then close. */
void vmmc_boot_fini(vmmc_boot_t *b);

#endif
