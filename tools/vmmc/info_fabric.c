/* The "fabric transport" section of `vmmc info`: the providers libfabric
 * offers with reliable datagram endpoints (FI_EP_RDM with FI_MSG), what each
 * can do, and which one the fabric transport would open. libfabric is opened
 * with dlopen (never linked), like info_fi.c, which has loaded it already
 * with vmmc's own provider on FI_PROVIDER_PATH: that one is listed and
 * marked, since the transport never opens it (it would run vmmc over vmmc).
 *
 * The choice mirrors the transport's (src/transport/fabric/fabric.c): the
 * same hints (FI_MSG and FI_SOURCE, thread safe, send-after-send order, the
 * memory registration modes it handles), the provider named by
 * VMMC_FABRIC_PROVIDER else FI_PROVIDER (which libfabric applies itself),
 * else the first that is not vmmc's; it is opened with VMMC_TRANSPORT=fabric
 * or VMMC_FABRIC=yes, or by default where RDMA hardware is present and the
 * chosen provider offloads to it. */
#include <dirent.h>
#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"

#ifdef VMMC_TOOL_FI
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>

typedef int (*getinfo_fn)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                          struct fi_info **);
typedef void (*freeinfo_fn)(struct fi_info *);
typedef struct fi_info *(*dupinfo_fn)(const struct fi_info *);
typedef const char *(*strerror_fn)(int);
typedef int (*fabric_fn)(struct fi_fabric_attr *, struct fid_fabric **, void *);
typedef uint32_t (*version_fn)(void);

static struct {
    getinfo_fn getinfo;
    freeinfo_fn freeinfo;
    dupinfo_fn dupinfo;
    strerror_fn fstrerror;
    fabric_fn fabric;
    version_fn version;
} F;

/* udp;ofi_rxd on a libfabric before 2.4 (fab_prov.c rxd_over_old_udp): its
 * udp provider overruns a full completion queue; the transport passes over
 * it unless VMMC_FABRIC_RXD_ANYWAY is set. */
static int rxd_old_udp(const char *prov)
{
    return !strcmp(prov, "udp;ofi_rxd") && F.version &&
           FI_VERSION_LT(F.version(), FI_VERSION(2, 4));
}

static int rxd_anyway(void)
{
    const char *v = getenv("VMMC_FABRIC_RXD_ANYWAY");
    return v && (!strcmp(v, "yes") || !strcmp(v, "y") || !strcmp(v, "1") || !strcmp(v, "on") ||
                 !strcmp(v, "true"));
}

static int soft_provider(const char *name)
{
    static const char *const soft[] = {"tcp", "udp", "sockets", "shm", "sm2", "net", "vmmc", NULL};
    size_t n = strcspn(name, ";");
    for (int i = 0; soft[i]; i++)
        if (strlen(soft[i]) == n && !strncmp(name, soft[i], n))
            return 1;
    return 0;
}

static int rdma_hardware(void)
{
    DIR *d = opendir("/sys/class/infiniband");
    int any = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            any |= e->d_name[0] != '.';
        closedir(d);
    }
    glob_t g;
    if (!any && (glob("/dev/cxi*", 0, NULL, &g) == 0 || glob("/dev/hfi1*", 0, NULL, &g) == 0)) {
        any = 1;
        globfree(&g);
    }
    return any;
}

/* The transport's hints (fabric.c pick()). */
static struct fi_info *transport_hints(const char *prov)
{
    struct fi_info *h = F.dupinfo(NULL);
    if (!h)
        return NULL;
    h->caps = FI_MSG | FI_SOURCE;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->threading = FI_THREAD_SAFE;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    h->tx_attr->msg_order = FI_ORDER_SAS;
    h->rx_attr->msg_order = FI_ORDER_SAS;
    if (prov && *prov) {
        /* '+' may stand for ';' (as the transport takes VMMC_FABRIC_PROVIDER) */
        h->fabric_attr->prov_name = strdup(prov);
        for (char *c = h->fabric_attr->prov_name; c && *c; c++)
            if (*c == '+')
                *c = ';';
    }
    return h;
}

static void print_list(void)
{
    struct fi_info *h = F.dupinfo(NULL), *list = NULL;
    if (!h) {
        printf("  out of memory\n");
        return;
    }
    h->ep_attr->type = FI_EP_RDM; /* no caps asked: each answer shows all of its own */
    int rc = F.getinfo(FI_VERSION(1, 9), NULL, NULL, 0, h, &list);
    F.freeinfo(h);
    if (rc) {
        printf("  providers  none with FI_EP_RDM and FI_MSG: %s\n", F.fstrerror(-rc));
        return;
    }
    printf("  providers with reliable datagrams (FI_EP_RDM, FI_MSG):\n");
    printf("    %-16s %-10s %-4s %-6s %-9s %-7s %s\n", "provider", "domain", "RMA", "atomic",
           "local MR", "inject", "");
    for (const struct fi_info *i = list; i; i = i->next) {
        const char *p = i->fabric_attr->prov_name, *d = i->domain_attr->name;
        if (!(i->caps & FI_MSG))
            continue;
        /* one line per provider and domain: the first answer for them */
        int dup = 0;
        for (const struct fi_info *j = list; j != i && !dup; j = j->next)
            dup = (j->caps & FI_MSG) && !strcmp(j->fabric_attr->prov_name, p) &&
                  !strcmp(j->domain_attr->name, d);
        if (dup)
            continue;
        printf("    %-16s %-10s %-4s %-6s %-9s %-7zu %s\n", p, d, (i->caps & FI_RMA) ? "yes" : "no",
               (i->caps & FI_ATOMIC) ? "yes" : "no",
               (i->domain_attr->mr_mode & FI_MR_LOCAL) ? "needed" : "no", i->tx_attr->inject_size,
               strstr(p, "vmmc") ? "vmmc's own: never opened by the transport"
               : rxd_old_udp(p) && !rxd_anyway() ? "software: not used on libfabric before 2.4 (its udp provider "
                                  "overruns a full completion queue; VMMC_FABRIC_RXD_ANYWAY=yes)"
               : i->ep_attr->protocol == FI_PROTO_RXD
                   ? "software: no offload; messages only (its RMA fails under load)"
               : soft_provider(p) ? "software: no offload"
                                  : "offloads to hardware");
    }
    F.freeinfo(list);
}

/* The transport's RMA path and atomics on @best (fab_prov.c pick()): asked
 * again of that provider, fabric and domain with what each needs. */
/* Whether the provider's domain takes a fetch-add of a uint64_t (the
 * transport asks every operation and type: fab_atomic.c). */
static int domain_atomics(const struct fi_info *i)
{
    struct fid_fabric *fab = NULL;
    struct fid_domain *dom = NULL;
    struct fi_atomic_attr a = {0};
    int ok = F.fabric && F.fabric(i->fabric_attr, &fab, NULL) == 0 &&
             fi_domain(fab, (struct fi_info *)i, &dom, NULL) == 0 &&
             fi_query_atomic(dom, FI_UINT64, FI_SUM, &a, FI_FETCH_ATOMIC) == 0 && a.count >= 1;
    if (dom)
        fi_close(&dom->fid);
    if (fab)
        fi_close(&fab->fid);
    return ok;
}

static int offers(const struct fi_info *best, uint64_t caps)
{
    struct fi_info *h = transport_hints(best->fabric_attr->prov_name), *list = NULL;
    if (!h)
        return 0;
    uint64_t order = FI_ORDER_SAS | FI_ORDER_WAW | FI_ORDER_WAS | FI_ORDER_SAW | FI_ORDER_RAW |
                     FI_ORDER_RAS;
    h->caps |= FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | caps;
    h->tx_attr->msg_order = h->rx_attr->msg_order = order;
    if (caps && best->fabric_attr->name)
        h->fabric_attr->name = strdup(best->fabric_attr->name);
    if (caps && best->domain_attr->name)
        h->domain_attr->name = strdup(best->domain_attr->name);
    int rc = F.getinfo(FI_VERSION(1, 9), NULL, NULL, 0, h, &list);
    F.freeinfo(h);
    int ok = rc == 0 && (!(caps & FI_ATOMIC) || domain_atomics(list));
    if (list)
        F.freeinfo(list);
    return ok;
}

static void print_paths(const struct fi_info *best)
{
    const char *rma = getenv("VMMC_FABRIC_RMA"), *at = getenv("VMMC_FABRIC_ATOMIC");
    int rma_off = rma && (!strcmp(rma, "no") || !strcmp(rma, "0"));
    int rxd = best->ep_attr->protocol == FI_PROTO_RXD;
    int has_rma = !rma_off && !rxd && offers(best, 0);
    printf("  data path  %s\n",
           has_rma ? "RMA: puts and gets are fi_write/fi_read into the exporter's region"
           : rma_off ? "messages only (VMMC_FABRIC_RMA=no)"
           : rxd     ? "messages only (rxd's RMA fails under load)"
                     : "messages only: no RMA with writes, reads and sends ordered");
    const char *why = NULL;
    int soft = soft_provider(best->fabric_attr->prov_name);
    if (!has_rma)
        why = "no RMA path";
    else if (at && !strcmp(at, "no"))
        why = "VMMC_FABRIC_ATOMIC=no";
    else if (!soft && !(at && !strcmp(at, "yes")))
        why = "its atomics would be the network card's (VMMC_FABRIC_ATOMIC=yes uses them)";
    else if (!offers(best, FI_ATOMIC))
        why = "no FI_ATOMIC together with the RMA path's ordering, or its domain takes none";
    if (why)
        printf("  atomics    executed by the target's vmmc (%s)\n", why);
    else
        printf("  atomics    the provider's (fi_atomic, fi_fetch_atomic, fi_compare_atomic)\n");
}

static void print_choice(void)
{
    const char *prov = getenv("VMMC_FABRIC_PROVIDER");
    struct fi_info *h = transport_hints(prov), *list = NULL, *best = NULL;
    if (!h) {
        printf("  out of memory\n");
        return;
    }
    int rc = F.getinfo(FI_VERSION(1, 9), NULL, NULL, 0, h, &list);
    F.freeinfo(h);
    int unsafe = 0;
    for (struct fi_info *i = rc ? NULL : list; i && !best; i = i->next) {
        if (strstr(i->fabric_attr->prov_name, "vmmc"))
            continue;
        if (!rxd_anyway() && rxd_old_udp(i->fabric_attr->prov_name)) {
            unsafe = 1;
            continue;
        }
        best = i;
    }
    const char *fp = getenv("FI_PROVIDER");
    if (!best) {
        printf("  would use  none: no provider meets the transport's needs%s%s%s%s%s\n",
               prov && *prov ? " named by VMMC_FABRIC_PROVIDER=" : "", prov && *prov ? prov : "",
               fp && *fp ? " among FI_PROVIDER=" : "", fp && *fp ? fp : "",
               unsafe ? " (udp;ofi_rxd is not used on this libfabric: VMMC_FABRIC_RXD_ANYWAY=yes)"
                      : "");
    } else {
        const char *t = getenv("VMMC_TRANSPORT"), *m = getenv("VMMC_FABRIC");
        int forced = (t && !strcmp(t, "fabric")) || (m && !strcmp(m, "yes"));
        int off = m && !strcmp(m, "no");
        int hw = rdma_hardware(), soft = soft_provider(best->fabric_attr->prov_name);
        printf("  would use  %s (domain %s, fabric %s)%s\n", best->fabric_attr->prov_name,
               best->domain_attr->name, best->fabric_attr->name,
               prov && *prov ? ", named by VMMC_FABRIC_PROVIDER"
               : fp && *fp   ? ", FI_PROVIDER applied"
                             : ", the first that fits");
        printf("  opened     %s\n",
               forced ? "yes (VMMC_TRANSPORT=fabric or VMMC_FABRIC=yes)"
               : off  ? "no (VMMC_FABRIC=no)"
               : (hw && !soft) ? "yes: RDMA hardware and a provider offloading to it "
                                 "(preferred to udp across hosts)"
               : hw ? "no by default: the provider does not offload (VMMC_TRANSPORT=fabric forces it)"
                    : "no by default: no RDMA hardware here (VMMC_TRANSPORT=fabric forces it)");
        print_paths(best);
    }
    if (list)
        F.freeinfo(list);
}
#endif

void vmmc_info_fabric_print(void)
{
    printf("\nfabric transport (docs/fabric.md; registration cache: docs/fabric_cache.md):\n");
#ifndef VMMC_TOOL_FI
    printf("  not built: libfabric's headers were not installed at build time "
           "(apt-get install -y libfabric-dev)\n");
#else
    /* RTLD_NOLOAD first: info_fi.c loaded it with vmmc's provider on the path. */
    void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("  libfabric  not loadable: %s\n", dlerror());
        return;
    }
    F.getinfo = (getinfo_fn)dlsym(h, "fi_getinfo");
    F.freeinfo = (freeinfo_fn)dlsym(h, "fi_freeinfo");
    F.dupinfo = (dupinfo_fn)dlsym(h, "fi_dupinfo");
    F.fstrerror = (strerror_fn)dlsym(h, "fi_strerror");
    F.fabric = (fabric_fn)dlsym(h, "fi_fabric");
    F.version = (version_fn)dlsym(h, "fi_version");
    if (!F.getinfo || !F.freeinfo || !F.dupinfo || !F.fstrerror) {
        printf("  libfabric  libfabric.so.1 lacks fi_getinfo and friends\n");
        return;
    }
    print_list();
    print_choice();
    printf("  cache      registrations are cached for providers that need local MRs "
           "(\"local MR: needed\" above)\n");
#endif
}
