/* "old": a transport table built for another interface version (a stale
 * plugin). Every endpoint of a program that links it must refuse to open,
 * naming it, before any of its operations runs (t_tl_old.c). */
#include <stdatomic.h>

#include "transport/transport.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

_Atomic int vmmc_old_calls;

static int old_reach(vmmc_ep_t *ep, const char *card, int same_host)
{
    atomic_fetch_add(&vmmc_old_calls, 1);
    return -1;
}

static int old_addr_field(const char *k, size_t kl, const char *v, size_t vl, const char **why)
{
    return -1; /* no keys of its own */
}

static int old_ep_open(vmmc_ep_t *ep, char *card, size_t cap)
{
    atomic_fetch_add(&vmmc_old_calls, 1);
    return VMMC_OK;
}

VMMC_TRANSPORT(old) = {
    .size = sizeof(vmmc_tl_ops_t),
    .version = VMMC_TL_VERSION + 1,
    .name = "old",
    .caps = VMMC_TL_CAP_LOCAL,
    .reach = old_reach,
    .addr_field = old_addr_field,
    .ep_open = old_ep_open,
};
