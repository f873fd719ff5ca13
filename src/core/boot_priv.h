/* Private state of the bootstrap module, shared by boot.c (launcher and TCP
 * rendezvous client) and boot_pmix.c. */
#ifndef VMMC_CORE_BOOT_PRIV_H
#define VMMC_CORE_BOOT_PRIV_H

#include <pthread.h>

#include "core/boot.h"
#include "core/boot_server.h"
#include "core/boot_wire.h"

enum { BOOT_SINGLETON = 0, BOOT_LAUNCHER, BOOT_TCP, BOOT_PMIX };

typedef struct boot_priv {
    int mode;
    vmmc_bw_rx_t rx;          /* events not yet complete on b->fd */
    int timeout_ms;           /* VMMC_BOOT_TIMEOUT in ms */
    /* TCP bootstrap, rank 0: the rendezvous server thread. */
    vmmc_boot_server_t *srv;
    pthread_t srv_thread;
    int srv_running;
    int srv_ctl[2];           /* pipe: 'f' = finish when all left, 'q' = quit now */
    /* PMIx: events are written by PMIx callbacks into ev_wr, read on b->fd. */
    int ev_wr;
    void *pmix;
} boot_priv_t;

/* boot.c */
/* Parse the server's TABLE body for a job of b->size ranks: on success fills
 * b->job and b->peers (owned by @b); a malformed table is VMMC_ERR_PROTOCOL
 * and leaves @b unchanged. */
int vmmc_boot_parse_table(vmmc_boot_t *b, const uint8_t *body, uint32_t len);
int vmmc_boot_parse_int_env(const char *name, int lo, int hi, int *out);
void vmmc_boot_random_job(char *job, size_t n);

/* boot_conn.c: connect within @deadline (vmmc_bw deadlines), retrying. */
int vmmc_boot_connect_launcher(const char *name, int64_t deadline, int *out);
/* Split "host:port" or "[v6addr]:port". */
int vmmc_boot_split_hostport(const char *spec, char *host, size_t hn, char *port, size_t pn);
int vmmc_boot_connect_tcp(const char *host, const char *port, int64_t deadline, int *out);

/* boot_pmix.c: only does something when built with PMIx. */
int vmmc_boot_pmix_available(void);
int vmmc_boot_pmix_init(vmmc_boot_t *b, boot_priv_t *p, const char *card, int timeout_ms);
int vmmc_boot_pmix_barrier(vmmc_boot_t *b, boot_priv_t *p, uint64_t epoch);
void vmmc_boot_pmix_fini(vmmc_boot_t *b, boot_priv_t *p);

#endif
