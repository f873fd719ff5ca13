/* The shm transport's part of an endpoint address: shm=vmmc.<pid>.<hex>,
 * the name of its control socket, and which peers it reaches (those on this
 * host that have one). */
#include "transport/shm/shm_int.h"

#include <string.h>

static int all_of(const char *v, size_t n, const char *set)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr(set, v[i]))
            return 0;
    return 1;
}

int vmmc_shm_addr_field(const char *k, size_t kl, const char *v, size_t vl, const char **why)
{
    if (kl != 3 || memcmp(k, "shm", 3))
        return -1;
    *why = "shm must be vmmc.<pid>.<hex>";
    if (vl < 8 || vl > 60 || memcmp(v, "vmmc.", 5))
        return 0;
    const char *d = memchr(v + 5, '.', vl - 5);
    return d && d > v + 5 && all_of(v + 5, (size_t)(d - v - 5), "0123456789") &&
           (size_t)(v + vl - d - 1) >= 1 && all_of(d + 1, (size_t)(v + vl - d - 1), "0123456789abcdef");
}

/* Peers on this host: mappings and process_vm_writev beat any network path. */
int vmmc_shm_reach(vmmc_ep_t *ep, const char *card, int same_host)
{
    char v[64];
    return same_host && vmmc_card_get(card, "shm", v, sizeof v) ? 10 : -1;
}
