/* "loop": a transport that lives in a test's folder only, to show that a
 * transport is added by adding its folder (the build lists its table; the
 * core is not touched). It claims every peer whose address has a loop key,
 * above any other transport, and then refuses to connect it: enough to see
 * registration, selection, addresses, counters and the endpoint's life
 * cycle, without a data path of its own. It is built against the include
 * root a transport gets (util/, transport/ and the public headers: no core/),
 * so it calls the core only through transport/transport.h. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tl_loop.h"
#include "transport/transport.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

extern const int vmmc_tl_slot_loop;

typedef struct {
    unsigned id;
} loop_ep_t;

_Atomic int vmmc_loop_opened, vmmc_loop_closed, vmmc_loop_connects;
char vmmc_loop_last_card[VMMC_ADDR_MAX];
static _Atomic unsigned next_id = 1;

static int loop_reach(vmmc_ep_t *ep, const char *card, int same_host)
{
    char v[16];
    return vmmc_card_get(card, "loop", v, sizeof v) ? 1000 : -1;
}

static int loop_addr_field(const char *k, size_t kl, const char *v, size_t vl, const char **why)
{
    if (kl != 4 || memcmp(k, "loop", 4))
        return -1;
    *why = "loop must be 1..8 decimal digits";
    if (vl < 1 || vl > 8)
        return 0;
    for (size_t i = 0; i < vl; i++)
        if (v[i] < '0' || v[i] > '9')
            return 0;
    return 1;
}

static int loop_ep_open(vmmc_ep_t *ep, char *card, size_t cap)
{
    loop_ep_t *l = calloc(1, sizeof *l);
    if (!l)
        return vmmc_error(VMMC_ERR_NOMEM, "loop: out of memory");
    l->id = atomic_fetch_add(&next_id, 1);
    VMMC_TL_STATE(ep, loop) = l;
    int n = snprintf(card, cap, "loop=%u;", l->id);
    if (n < 0 || (size_t)n >= cap)
        return vmmc_error(VMMC_ERR_OVERFLOW, "loop: business card full");
    atomic_fetch_add(&vmmc_loop_opened, 1);
    return VMMC_OK;
}

static void loop_ep_close(vmmc_ep_t *ep)
{
    free(VMMC_TL_STATE(ep, loop));
    VMMC_TL_STATE(ep, loop) = NULL;
    atomic_fetch_add(&vmmc_loop_closed, 1);
}

static int loop_peer_connect(vmmc_ep_t *ep, vmmc_tl_peer_t *p, int timeout_ms)
{
    atomic_fetch_add(&vmmc_loop_connects, 1);
    snprintf(vmmc_loop_last_card, sizeof vmmc_loop_last_card, "%s", p->addr);
    return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "loop: rank %d is not reached (a test transport)",
                      p->rank);
}

static int loop_ctl_send(vmmc_ep_t *ep, vmmc_tl_peer_t *p, const struct vmmc_ctl_msg *m,
                         const int *fds, int nfds)
{
    return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "loop: no control channel");
}

static int loop_proxy_setup(vmmc_tl_proxy_t *px, const struct vmmc_ctl_msg *m, const int *fds,
                            int nfds)
{
    return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "loop: no imports");
}

static int loop_put(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len, int notify,
                    uint64_t imm)
{
    return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "loop: no data path");
}

static int loop_get(vmmc_tl_proxy_t *px, size_t off, void *dst, size_t len)
{
    return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "loop: no data path");
}

static int loop_signal(vmmc_ep_t *ep, vmmc_tl_peer_t *p)
{
    return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "loop: no wake-ups");
}

static int loop_counter_get(vmmc_ep_t *ep, int i, const char **name, uint64_t *value)
{
    if (i != 0)
        return VMMC_ERR_NOT_FOUND;
    *name = "loop.connects";
    *value = (uint64_t)atomic_load(&vmmc_loop_connects);
    return VMMC_OK;
}

VMMC_TRANSPORT(loop) = {
    .size = sizeof(vmmc_tl_ops_t),
    .version = VMMC_TL_VERSION,
    .name = "loop",
    .about = "test transport (claims peers with a loop key, connects none)",
    .caps = VMMC_TL_CAP_LOCAL | VMMC_TL_CAP_REMOTE,
    .reach = loop_reach,
    .addr_field = loop_addr_field,
    .ep_open = loop_ep_open,
    .ep_close = loop_ep_close,
    .peer_connect = loop_peer_connect,
    .ctl_send = loop_ctl_send,
    .proxy_setup = loop_proxy_setup,
    .put = loop_put,
    .get = loop_get,
    .signal = loop_signal,
    .counter_get = loop_counter_get,
};
