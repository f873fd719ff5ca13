/* Export and import bookkeeping shared between core files. */
#ifndef VMMC_CORE_EXPORT_H
#define VMMC_CORE_EXPORT_H

#include "core/core.h"
#include "core/ctl.h"

/* An import request waiting for its name to be exported (export.c). */
typedef struct pending_import {
    int rank;
    uint64_t id;
    char name[VMMC_NAME_MAX];
    struct pending_import *next;
} pending_import_t;

/* demand.c: exports made on a peer's first request (vmmc_export_on_demand).
 * Under ep->lock: the registration whose prefix @name starts with, marked
 * busy (NULL if none). Then, without ep->lock: hand the request (just queued
 * as pending, rank @rank, id @id) to it; this ends the busy mark and refuses
 * the request if the function declined it. */
struct vmmc_demand;
struct vmmc_demand *vmmc_demand_match(vmmc_ep_t *ep, const char *name);
void vmmc_demand_call(vmmc_ep_t *ep, struct vmmc_demand *d, int rank, uint64_t id,
                      const char *name);
void vmmc_demand_destroy(vmmc_ep_t *ep);
/* export.c: answer @rank's request @id with a refusal. Caller holds ep->lock. */
void vmmc_export_refuse(vmmc_ep_t *ep, int rank, uint64_t id, int status, const char *text);

/* export_fd.c: check a VMMC_EXPORT_PARAM_FD export's descriptor (rights
 * @flags) and duplicate it into *@out (the export's to close). */
int vmmc_export_fd_take(vmmc_ep_t *ep, const vmmc_export_params_t *pa, unsigned flags, int *out);

/* Control-thread handlers for incoming control messages. */
void vmmc_export_serve_import(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m);
void vmmc_export_revoke_acked(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m);
int vmmc_import_complete(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m, const int *fds, int nfds);
void vmmc_import_revoked(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m);

/* vmmc_export() for the export behind memory keys (mkey.c): named
 * VMMC_MKEY_PREFIX "<id>.<gen>", importers get per-rank key secrets. */
int vmmc_export_mkey(vmmc_ep_t *ep, const vmmc_export_params_t *pa, vmmc_export_t **out);

/* Look up an export for an incoming write/notification; NULL if it is gone
 * or @gen does not match. Caller holds ep->lock or the progress lock. */
vmmc_export_t *vmmc_export_by_id(vmmc_ep_t *ep, uint32_t id, uint32_t gen);

/* Mark every proxy to @rank dead (peer death). Takes ep->lock. */
void vmmc_import_peer_dead(vmmc_ep_t *ep, int rank);
/* Forget pending imports from @rank (peer death). Takes ep->lock. */
void vmmc_export_peer_dead(vmmc_ep_t *ep, int rank);
/* CTL_UNIMPORT: @rank dropped one import of an export (ctl.c). */
void vmmc_export_unimported(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m);

/* Withdraw every export as vmmc_unexport() does (at finalize, while the
 * control thread still answers). */
void vmmc_export_all_revoke(vmmc_ep_t *ep);

/* Tear down at finalize. */
void vmmc_export_all_destroy(vmmc_ep_t *ep);
void vmmc_import_all_destroy(vmmc_ep_t *ep);

int vmmc_ctl_run(vmmc_ep_t *ep);

/* Is the calling thread inside this endpoint's progress (a handler)? */
int vmmc_in_progress(const vmmc_ep_t *ep);

#endif
