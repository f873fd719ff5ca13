/* shm transport: entry points the core calls besides the ops table. */
#ifndef VMMC_TRANSPORT_SHM_H
#define VMMC_TRANSPORT_SHM_H

#include "transport/transport.h"

struct vmmc_ctl_msg;

/* Fill an imported proxy from the exporter's reply (maps memory). */
int vmmc_shm_proxy_setup(vmmc_tl_proxy_t *px, const struct vmmc_ctl_msg *m, const int *fds, int nfds);

/* Queue a notification record for the exporter of @px (after the data). */
int vmmc_shm_notify(vmmc_tl_proxy_t *px, size_t off, size_t len, uint64_t imm, int nonblock);

/* Drain every sender ring of this endpoint, calling @fn per record in order. */
typedef void (*vmmc_shm_rec_fn)(vmmc_ep_t *ep, const vmmc_nrec_t *rec);
int vmmc_shm_drain(vmmc_ep_t *ep, vmmc_shm_rec_fn fn);

#endif
