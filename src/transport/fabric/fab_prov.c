/* The fabric transport's settings and its choice of provider: which one
 * (VMMC_FABRIC_PROVIDER, else FI_PROVIDER, else the first reliable-datagram
 * provider libfabric offers that is not vmmc's own, which would recurse, nor
 * udp;ofi_rxd on a libfabric whose udp provider loses completions),
 * with an ordered RMA path where it has one, and whether to open at all
 * (VMMC_FABRIC: only where RDMA hardware is found, unless forced). */
#include "transport/fabric/fab_int.h"

#include <dirent.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/config.h"

const char *vmmc_fab_cfg_mode;
static const char *cfg_provider;
int vmmc_fab_cfg_mr_local;
int vmmc_fab_cfg_rma;
int vmmc_fab_cfg_cq_data;
const char *vmmc_fab_cfg_atomic;
uint64_t vmmc_fab_cfg_send_timeout;
uint64_t vmmc_fab_cfg_spin;
uint64_t vmmc_fab_cfg_zcopy;
int64_t vmmc_fab_cfg_tx_size;
static int cfg_rxd_anyway;
static const vmmc_cfg_entry_t fab_entries[] = {
    {"FABRIC", "auto", "open the libfabric transport: auto (only where RDMA hardware and a "
     "provider offloading to it are found, or VMMC_TRANSPORT=fabric), yes, no",
     VMMC_CFG_STRING, &vmmc_fab_cfg_mode},
    {"FABRIC_PROVIDER", "", "libfabric provider for the fabric transport (e.g. tcp;ofi_rxm, "
     "verbs;ofi_rxm, efa; '+' may stand for ';'); empty: FI_PROVIDER, else the first FI_EP_RDM "
     "provider with FI_MSG, ordered",
     VMMC_CFG_STRING, &cfg_provider},
    {"FABRIC_MR_LOCAL", "no", "register local buffers (sends, receives) through the "
     "translation cache even where the provider does not need it (FI_MR_LOCAL): tests that path "
     "on software providers", VMMC_CFG_BOOL, &vmmc_fab_cfg_mr_local},
    {"FABRIC_RMA", "yes", "write and read imported regions with the provider's RMA (fi_write, "
     "fi_read into the exporter's registered region) where the provider orders RMA and "
     "messages (not on udp;ofi_rxd, whose RMA fails under load); no: every put and get is a "
     "message the receiver applies",
     VMMC_CFG_BOOL, &vmmc_fab_cfg_rma},
    {"FABRIC_CQ_DATA", "no", "on the RMA path, a notifying put whose notification fits 64 bits "
     "(offset below 16 KiB, length up to 16 KiB, immediate below 256) is one fi_writedata "
     "carrying it as remote CQ data, where the provider offers 8 bytes of it; no: the data, "
     "then a NOTE message (both ends must allow it). Off by default: the provider names no "
     "sender of CQ data, so a peer that imported something of ours could guess another "
     "importer's slot check, one in 256 per guess (the first wrong guess retires the slot, "
     "which leaves it about a round trip of guesses)",
     VMMC_CFG_BOOL, &vmmc_fab_cfg_cq_data},
    {"FABRIC_ATOMIC", "auto", "remote atomics on the RMA path as the provider's (fi_atomic, "
     "fi_fetch_atomic, fi_compare_atomic), where it offers FI_ATOMIC together with the RMA "
     "path's ordering and the operation and type: auto (software providers only: they run "
     "atomics on the target's processor, atomic with the exporter's own; tcp;ofi_rxm 1.17 "
     "withdraws the ordering when asked for atomics, so there it never applies), yes (also "
     "offloading providers, whose network card's atomics are atomic only with each other: "
     "then touch such words with nothing but the fabric's atomics), no (the target's vmmc "
     "executes every atomic, sent as a control message)",
     VMMC_CFG_STRING, &vmmc_fab_cfg_atomic},
    {"FABRIC_SEND_TIMEOUT", "10s", "a send that finds no room in the provider for this long "
     "fails its peer (it stopped taking messages)", VMMC_CFG_TIME, &vmmc_fab_cfg_send_timeout,
     1000000ull, 86400000000000ull},
    {"FABRIC_ZCOPY", "0", "a blocking write sent as messages sends pieces of at least this many "
     "bytes from the caller's buffer itself (registered through the translation cache where "
     "the provider needs it) and waits for them, instead of copying them into a buffer of its "
     "own; 0: always copy (on tcp;ofi_rxm the two measured the same: docs/performance.md)",
     VMMC_CFG_SIZE, &vmmc_fab_cfg_zcopy, 0, 1ull << 40},
    {"FABRIC_TX_SIZE", "0", "the depth of the provider's transmit queue to ask for (tx_attr.size); "
     "0: the provider's own. On providers that make datagrams reliable themselves "
     "(udp;ofi_rxd), at most this many sends are under way on the endpoint, and at most 64 to "
     "one peer: rxd 1.17 drops a send past its queue without a word",
     VMMC_CFG_INT, &vmmc_fab_cfg_tx_size, 0, 1 << 20},
    {"FABRIC_RXD_ANYWAY", "no", "use udp;ofi_rxd even on a libfabric before 2.4, whose udp "
     "provider writes past a full completion queue: under load rxd then loses send "
     "completions (a peer's window shrinks until its sends stop) and may hand on a packet it "
     "already freed. Without it vmmc passes over that provider, and refuses it when named",
     VMMC_CFG_BOOL, &cfg_rxd_anyway},
    {"FABRIC_SPIN", "50us", "how long the progress thread, and a thread waiting for a get, a "
     "flush or an RMA completion, keep reading the provider's queues (yielding the cpu between "
     "reads) before they sleep: a wake through the provider's wait fd costs tens of us",
     VMMC_CFG_TIME, &vmmc_fab_cfg_spin, 0, 10000000000ull},
};
VMMC_CONFIG_TABLE(fab_cfg, "fabric transport", fab_entries);

/* Providers that run over the host's network stack: no offload. */
int vmmc_fab__soft_provider(const char *name)
{
    static const char *const soft[] = {"tcp", "udp", "sockets", "shm", "sm2", "net", "vmmc", NULL};
    size_t n = strcspn(name, ";");
    for (int i = 0; soft[i]; i++)
        if (strlen(soft[i]) == n && !strncmp(name, soft[i], n))
            return 1;
    return 0;
}

int vmmc_fab__rdma_hardware(void)
{
    DIR *d = opendir("/sys/class/infiniband");
    if (d) {
        struct dirent *e;
        int any = 0;
        while ((e = readdir(d)))
            any |= e->d_name[0] != '.';
        closedir(d);
        if (any)
            return 1;
    }
    glob_t g;
    int found = glob("/dev/cxi*", 0, NULL, &g) == 0 || glob("/dev/hfi1*", 0, NULL, &g) == 0;
    if (found)
        globfree(&g);
    return found;
}

int vmmc_fab__forced(void)
{
    const char *t = getenv("VMMC_TRANSPORT");
    return (t && !strcmp(t, "fabric")) || (vmmc_fab_cfg_mode && !strcmp(vmmc_fab_cfg_mode, "yes"));
}

int vmmc_fab__atomic_wanted(const char *prov_name)
{
    const char *m = vmmc_fab_cfg_atomic ? vmmc_fab_cfg_atomic : "auto";
    if (!strcmp(m, "no"))
        return 0;
    if (!strcmp(m, "yes"))
        return 1;
    /* auto: a software provider executes a peer's atomic in the target's
     * progress with the processor's atomic instructions (libfabric's
     * ofi_atomic handlers, __atomic builtins): atomic with the exporter's
     * own vmmc_atomic, with mapped peers' and with the core's execution of
     * other peers' requests. A network card's atomics are atomic only with
     * each other. */
    return vmmc_fab__soft_provider(prov_name);
}

static struct fi_info *pick_with(int rma, int atomic, const struct fi_info *like);

/* rxd over libfabric's udp provider before 2.4: udp writes a receive
 * completion into its queue even when the queue is full (fixed upstream in
 * "prov/udp: fix CQ overflow case", 2.4.0), and rxd's queue of udp
 * completions fills under load (its sends' completions wait there behind
 * the packets still arriving). The entry overwritten is lost and the new
 * one read twice: a lost send completion keeps that packet counted as
 * unacknowledged for good, so the peer's window shrinks until its sends
 * stop ("its queue stayed full"), and a packet handled twice is freed
 * while rxd still holds it as part of an unexpected message, whose bytes
 * the next datagram then overwrites. */
static int rxd_over_old_udp(const struct fi_info *i)
{
    return !strcmp(i->fabric_attr->prov_name, "udp;ofi_rxd") &&
           FI_VERSION_LT(fi_version(), FI_VERSION(2, 4));
}

/* The provider to use (fi_freeinfo it), or NULL with the error set: with
 * an ordered RMA path if it has one (and VMMC_FABRIC_RMA), else messages;
 * with FI_ATOMIC on the RMA path where that provider offers it and
 * VMMC_FABRIC_ATOMIC wants it (asked of the chosen provider only, so the
 * choice does not change). */
struct fi_info *vmmc_fab__pick(void)
{
    struct fi_info *i = vmmc_fab_cfg_rma ? pick_with(1, 0, NULL) : NULL;
    if (!i || i->ep_attr->protocol == FI_PROTO_RXD) {
        if (i)
            fi_freeinfo(i);
        i = pick_with(0, 0, NULL);
    }
    if (i && (i->caps & FI_RMA) && i->ep_attr->protocol != FI_PROTO_RXD &&
        vmmc_fab__atomic_wanted(i->fabric_attr->prov_name)) {
        struct fi_info *a = pick_with(1, 1, i);
        if (a) {
            fi_freeinfo(i);
            i = a;
        } else {
            vmmc_debug("fabric: %s offers no FI_ATOMIC with the RMA path's ordering: atomics "
                       "by the target's vmmc",
                       i->fabric_attr->prov_name);
        }
    }
    /* rxd (1.17) offers ordered RMA, but under load its writes complete at
     * the target with truncation errors and notifications go missing
     * (docs/fabric.md): messages only. */
    if (i && i->ep_attr->protocol == FI_PROTO_RXD) {
        i->caps &= ~(uint64_t)FAB_RMA_CAPS;
        i->tx_attr->caps &= ~(uint64_t)FAB_RMA_CAPS;
        i->rx_attr->caps &= ~(uint64_t)FAB_RMA_CAPS;
    }
    return i;
}

static struct fi_info *pick_with(int rma, int atomic, const struct fi_info *like)
{
    struct fi_info *hints = fi_dupinfo(NULL), *list = NULL, *best = NULL;
    if (!hints) {
        vmmc_error(VMMC_ERR_NOMEM, "fabric: out of memory");
        return NULL;
    }
    hints->caps = FI_MSG | FI_SOURCE | (rma ? FAB_RMA_CAPS : 0) | (atomic ? FI_ATOMIC : 0);
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->threading = FI_THREAD_SAFE;
    /* Local buffers are registered through the cache where the provider
     * needs it (FI_MR_LOCAL). */
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                                  FI_MR_PROV_KEY;
    hints->tx_attr->msg_order = FI_ORDER_SAS | (rma ? FAB_RMA_ORDER : 0);
    hints->rx_attr->msg_order = FI_ORDER_SAS | (rma ? FAB_RMA_ORDER : 0);
    if (vmmc_fab_cfg_tx_size > 0)
        hints->tx_attr->size = (size_t)vmmc_fab_cfg_tx_size;
    if (like) {
        /* the same provider, fabric and domain (network interface) */
        hints->fabric_attr->prov_name = strdup(like->fabric_attr->prov_name);
        if (like->fabric_attr->name)
            hints->fabric_attr->name = strdup(like->fabric_attr->name);
        if (like->domain_attr->name)
            hints->domain_attr->name = strdup(like->domain_attr->name);
    } else if (cfg_provider && cfg_provider[0]) {
        /* '+' for ';' (a ';' is awkward in lists of settings) */
        char *name = strdup(cfg_provider);
        for (char *c = name; c && *c; c++)
            if (*c == '+')
                *c = ';';
        hints->fabric_attr->prov_name = name;
    }
    int rc = fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &list);
    fi_freeinfo(hints);
    if (rc && atomic)
        return NULL; /* the caller goes on without */
    if (rc) {
        vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric: no libfabric provider with reliable datagrams "
                   "and ordered messages%s%s: %s", cfg_provider && cfg_provider[0] ? " named " : "",
                   cfg_provider ? cfg_provider : "", fi_strerror(-rc));
        return NULL;
    }
    int unsafe = 0;
    for (struct fi_info *i = list; i && !best; i = i->next) {
        if (strstr(i->fabric_attr->prov_name, "vmmc")) /* ours: would recurse */
            continue;
        if (!cfg_rxd_anyway && rxd_over_old_udp(i)) {
            unsafe = 1;
            continue;
        }
        best = i;
    }
    if (!best) {
        uint32_t v = fi_version();
        fi_freeinfo(list);
        if (unsafe)
            vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric: udp;ofi_rxd is not used on libfabric "
                       "%u.%u: its udp provider overruns a full completion queue, and under "
                       "load rxd then loses completions and stalls (fixed in libfabric 2.4); "
                       "use tcp;ofi_rxm or vmmc's udp transport (VMMC_FABRIC_RXD_ANYWAY=yes "
                       "uses it all the same)", FI_MAJOR(v), FI_MINOR(v));
        else
            vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric: libfabric offers only vmmc's own provider");
        return NULL;
    }
    struct fi_info *one = fi_dupinfo(best);
    fi_freeinfo(list);
    if (!one)
        vmmc_error(VMMC_ERR_NOMEM, "fabric: out of memory");
    return one;
}

void vmmc_fab__prov_word(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s", name);
    for (char *p = out; *p; p++)
        if (*p == ';')
            *p = '+';
}
