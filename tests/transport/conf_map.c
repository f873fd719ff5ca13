/* Automatic update (vmmc_proxy_map), where the transport can map: stores
 * through the mapping land in the exporter's memory in program order (data,
 * then a release-stored flag), and the exporter's own stores are seen
 * through it. An export that is not one whole allocation granting
 * VMMC_EXPORT_READ is refused with VMMC_ERR_UNSUPPORTED on every transport;
 * a transport that cannot map at all (udp) refuses the other one too, and
 * the test is skipped there, after checking that sends to it still work.
 * vmmc_peer_local() says 1 exactly where the mapping works. */
#include "conf.h"

#define L ((size_t)64 << 10)
#define ROUNDS 300
/* Words at the end of the region: the round's flag (importer), the
 * exporter's acknowledgement, the importer's verdict on mapping. */
#define FLAG (L - 24)
#define ACK (L - 16)
#define MODE (L - 8)

int main(void)
{
    vmmc_ep_t *ep = conf_init(2);
    int me = vmmc_rank(ep);
    conf_region_t mem, heap;
    unsigned char *m = NULL;
    if (me == 1) {
        conf_region_alloc(ep, &mem, CONF_MEM, L);
        conf_region_alloc(ep, &heap, CONF_HEAP, L);
        conf_export(ep, &mem, "map.mem", VMMC_EXPORT_READ, NULL, NULL);
        conf_export(ep, &heap, "map.heap", VMMC_EXPORT_READ, NULL, NULL);
        m = mem.p;
    } else {
        vmmc_proxy_t *pm = conf_import(ep, 1, "map.mem"), *ph = conf_import(ep, 1, "map.heap");
        void *p = NULL;
        VT_STATUS(VMMC_ERR_UNSUPPORTED, vmmc_proxy_map(ph, &p));
        int rc = vmmc_proxy_map(pm, &p);
        VT_CHECK(rc == VMMC_OK || rc == VMMC_ERR_UNSUPPORTED);
        uint64_t mode = rc == VMMC_OK ? 1 : 2;
        if (rc == VMMC_OK)
            printf("[%s] mapped\n", conf_transport());
        else
            printf("[%s] not mapped: %s\n", conf_transport(), vmmc_last_error());
        /* vmmc_peer_local: a peer is local exactly where its memory maps */
        VT_CHECK(vmmc_peer_local(ep, 1) == (rc == VMMC_OK));
        VT_CHECK(vmmc_peer_local(ep, 99) < 0);
        VT_STATUS(VMMC_ERR_INVALID, vmmc_peer_local(NULL, 1));
        VT_OK(vmmc_send(pm, MODE, &mode, 8, 0));
        m = p;
    }
    VT_OK(vmmc_barrier(ep)); /* the verdict has landed */
    if (me == 1 && conf_load(m + MODE) == 2)
        VT_SKIP("[%s] the transport cannot map an export (sends to it work)", conf_transport());
    if (me == 0 && !m)
        VT_SKIP("[%s] the transport cannot map an export (sends to it work)", conf_transport());
    VT_CHECK(conf_load(m + MODE) == 1);
    for (uint64_t r = 1; r <= ROUNDS; r++) {
        if (me == 0) {
            conf_fill(m, FLAG, r, 0);
            __atomic_store_n((uint64_t *)(m + FLAG), r, __ATOMIC_RELEASE);
            CONF_POLL(ep, conf_load(m + ACK) == r, "the exporter's acknowledgement");
        } else {
            CONF_POLL(ep, conf_load(m + FLAG) == r, "the round's flag");
            conf_check(m, FLAG, r, 0, "round %llu, stored through the mapping",
                       (unsigned long long)r);
            __atomic_store_n((uint64_t *)(m + ACK), r, __ATOMIC_RELEASE);
        }
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1)
        conf_guard_check(&mem);
    conf_ok(me, "%d rounds of data then flag through the mapping", ROUNDS);
    VT_OK(vmmc_finalize(ep));
    if (me == 1)
        conf_region_release(&heap);
    return 0;
}
