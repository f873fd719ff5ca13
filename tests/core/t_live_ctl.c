/* A peer that floods an exporter with import requests for names that are
 * not exported must not make it allocate without bound: each peer may keep
 * VMMC_PENDING_IMPORTS_MAX requests waiting, further ones are refused.
 * The control messages are handed to vmmc_ctl_recv() as the control thread
 * would (a job of one whose peer table is widened to 3 ranks that never
 * answer), and the heap in use is compared before and after. */
#include <malloc.h>

#include "core/ctl.h"
#include "vtest.h"

int main(void)
{
    static const char *vars[] = {"VMMC_LAUNCHER", "VMMC_BOOTSTRAP", "VMMC_RANK", "VMMC_SIZE",
                                 "PMIX_RANK", "PMIX_NAMESPACE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    setenv("VMMC_TRANSPORT", "shm", 1);
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int size = 3;
    for (int r = 1; r < size; r++) {
        char card[160];
        snprintf(card, sizeof card, "host=%s;pid=1;", ep->host_id);
        VT_CHECK(vmmc_peer_insert(ep, card, strlen(card), 1) == r);
    }

    vmmc_ctl_msg_t m;
    vmmc_ctl_init(ep, &m, CTL_IMPORT_REQ);
    m.src_rank = 1;
    /* warm up (first connect attempts, error strings) */
    for (int i = 0; i < 16; i++) {
        snprintf(m.name, sizeof m.name, "warm.%d", i);
        m.id = (uint64_t)i;
        vmmc_ctl_recv(ep, 1, &m, sizeof m, NULL, 0);
    }
    size_t before = mallinfo2().uordblks;
    int n = 50000;
    for (int i = 0; i < n; i++) {
        snprintf(m.name, sizeof m.name, "never.%d", i);
        m.id = (uint64_t)(1000 + i);
        vmmc_ctl_recv(ep, 1, &m, sizeof m, NULL, 0);
    }
    size_t after = mallinfo2().uordblks;
    double grown = ((double)after - (double)before) / 1024;
    printf("%d requests for names never exported: heap grew %.0f KiB\n", n, grown);
    VT_CHECK(grown < 1024);
    /* Another peer still gets its requests queued: it is refused only past
     * its own limit. */
    const char *k;
    uint64_t bad0 = 0, bad1 = 0;
    for (int i = 0; vmmc_counter_get(ep, i, &k, &bad0) == VMMC_OK; i++)
        if (!strcmp(k, "control_messages_dropped"))
            break;
    m.src_rank = 2;
    for (int i = 0; i < 10; i++) {
        snprintf(m.name, sizeof m.name, "other.%d", i);
        m.id = (uint64_t)i;
        vmmc_ctl_recv(ep, 2, &m, sizeof m, NULL, 0);
    }
    for (int i = 0; vmmc_counter_get(ep, i, &k, &bad1) == VMMC_OK; i++)
        if (!strcmp(k, "control_messages_dropped"))
            break;
    VT_CHECK(bad1 == bad0);
    VT_OK(vmmc_finalize(ep));
    printf("t_live_ctl: ok\n");
    return 0;
}
