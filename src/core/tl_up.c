/* The core's upcall table: what a transport may ask of the core
 * (transport.h, vmmc_tl_up_t). Every endpoint's view points at it before
 * any transport opens on it. */
#include "core/core.h"
#include "core/ctl.h"
#include "core/deliver.h"

static int up_peer_count(const vmmc_ep_t *ep)
{
    return vmmc_peer_count_int(ep);
}

static vmmc_tl_peer_t *up_peer_at(const vmmc_ep_t *ep, int h)
{
    return &vmmc_peer_at(ep, h)->view;
}

static vmmc_tl_peer_t *up_peer_get(vmmc_ep_t *ep, int h, int *status)
{
    vmmc_peer_t *p = vmmc_peer_get(ep, h, status);
    return p ? &p->view : NULL;
}

static int up_peer_error(const vmmc_tl_peer_t *p)
{
    return vmmc_peer_error((const vmmc_peer_t *)p);
}

static int up_proxy_state_error(const vmmc_tl_proxy_t *px)
{
    return vmmc_proxy_state_error((const vmmc_proxy_t *)px);
}

const vmmc_tl_up_t vmmc_tl_up = {
    .size = sizeof(vmmc_tl_up_t),
    .version = VMMC_TL_VERSION,
    .deliver_write = vmmc_deliver_write,
    .deliver_read = vmmc_deliver_read,
    .deliver_atomic = vmmc_deliver_atomic,
    .wake = vmmc_ep_wake,
    .drain = vmmc_progress_drain,
    .ctl_recv = vmmc_ctl_recv,
    .ctl_init = vmmc_ctl_init,
    .ctl_watch = vmmc_ctl_watch,
    .ctl_unwatch = vmmc_ctl_unwatch,
    .peer_get = up_peer_get,
    .peer_count = up_peer_count,
    .peer_at = up_peer_at,
    .peer_accept = vmmc_peer_accept,
    .peer_announce = vmmc_peer_announce,
    .peer_failed = vmmc_peer_mark_dead,
    .peer_error = up_peer_error,
    .addr_check = vmmc_addr_check,
    .proxy_state_error = up_proxy_state_error,
    .redir_ctl_size = vmmc_redir_ctl_size,
    .redir_write = vmmc_redir_write,
};
