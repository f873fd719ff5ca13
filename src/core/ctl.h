/* Control-plane messages between endpoints (import, revoke, hello).
 *
 * Fixed-size, versioned, little-endian host structs: same-host peers exchange
 * them over SOCK_SEQPACKET Unix sockets with SCM_RIGHTS descriptors; remote
 * peers over the udp transport's reliable link. Every field is validated by
 * vmmc_ctl_recv(): a malformed message is counted and dropped. */
#ifndef VMMC_CORE_CTL_H
#define VMMC_CORE_CTL_H

#include <stdint.h>

#include "core/core.h"
#include "transport/ctl_msg.h"

/* Import requests of one peer for names not exported yet, kept at most. */
#define VMMC_PENDING_IMPORTS_MAX 256

/* Hand an incoming control message from @peer_rank to the core. @fds are
 * owned by the core from then on (closed if unused). Called from the control
 * thread or a transport's progress thread. */
void vmmc_ctl_recv(vmmc_ep_t *ep, int peer_rank, const vmmc_ctl_msg_t *msg, size_t len,
                   const int *fds, int nfds);

/* Initialise a message of @type with magic, rank and pid. */
void vmmc_ctl_init(vmmc_ep_t *ep, vmmc_ctl_msg_t *m, uint32_t type);

#endif
