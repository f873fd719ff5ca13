/* The provider "vmmc" seen through libfabric: fi_getinfo against the hints
 * real users pass (Open MPI's mtl ofi, fi_pingpong) and against what the
 * provider cannot do; fabric, domain and EQ objects; close order.
 *
 * Usage: t_ofi_getinfo [default|settings|manual|bad]; the modes other than
 * default run with VMMC_OFI_* set by the test's registration:
 *   settings: VMMC_OFI_EAGER=512 VMMC_OFI_INJECT=1K VMMC_OFI_PROGRESS=auto
 *   manual:   VMMC_OFI_PROGRESS=manual
 *   bad:      VMMC_OFI_EAGER=10 (out of range: the provider offers nothing)
 * Exit 77 when the provider library cannot be loaded at all. */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define FAIL(...)                                               \
    do {                                                        \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);    \
        fprintf(stderr, __VA_ARGS__);                           \
        fprintf(stderr, "\n");                                  \
        exit(1);                                                \
    } while (0)
#define CHECK(c)                                                \
    do {                                                        \
        if (!(c))                                               \
            FAIL("check failed: %s", #c);                       \
    } while (0)
#define EXPECT(want, expr)                                                              \
    do {                                                                                \
        long r_ = (long)(expr);                                                         \
        if (r_ != (long)(want))                                                         \
            FAIL("%s returned %ld (%s), expected %ld", #expr, r_, fi_strerror((int)-r_), \
                 (long)(want));                                                         \
    } while (0)

#define V_NOW FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)
#define V_1_0 FI_VERSION(1, 0)

/* Hints that name this provider, so that a refusal is its own. */
static struct fi_info *base_hints(void)
{
    struct fi_info *h = fi_allocinfo();
    CHECK(h);
    h->fabric_attr->prov_name = strdup("vmmc");
    h->ep_attr->type = FI_EP_RDM;
    return h;
}

/* Open MPI 4.1's mtl ofi (ompi_mtl_ofi_component_init). */
static struct fi_info *mtl_hints(void)
{
    struct fi_info *h = base_hints();
    h->mode = FI_CONTEXT;
    h->caps = FI_TAGGED;
    h->tx_attr->msg_order = FI_ORDER_SAS;
    h->rx_attr->msg_order = FI_ORDER_SAS;
    h->tx_attr->op_flags = FI_COMPLETION;
    h->rx_attr->op_flags = FI_COMPLETION;
    h->domain_attr->threading = FI_THREAD_UNSPEC;
    h->domain_attr->control_progress = FI_PROGRESS_UNSPEC;
    h->domain_attr->data_progress = FI_PROGRESS_UNSPEC;
    h->domain_attr->av_type = FI_AV_MAP;
    h->domain_attr->resource_mgmt = FI_RM_ENABLED;
    return h;
}

static struct fi_info *get(uint32_t v, const char *node, uint64_t flags, const struct fi_info *h)
{
    struct fi_info *fi = NULL;
    int rc = fi_getinfo(v, node, NULL, flags, h, &fi);
    if (rc)
        FAIL("fi_getinfo: %d (%s), expected an fi_info", rc, fi_strerror(-rc));
    CHECK(fi && !fi->next);
    CHECK(!strcmp(fi->fabric_attr->prov_name, "vmmc"));
    return fi;
}

static void refused(const char *what, uint32_t v, const char *node, uint64_t flags,
                    struct fi_info *h)
{
    struct fi_info *fi = NULL;
    int rc = fi_getinfo(v, node, NULL, flags, h, &fi);
    if (rc != -FI_ENODATA)
        FAIL("%s: fi_getinfo returned %d (%s), expected -FI_ENODATA", what, rc,
             fi_strerror(-rc));
    CHECK(!fi);
    fi_freeinfo(h);
}

static void check_defaults(const struct fi_info *fi, uint64_t inject, int progress)
{
    uint64_t want = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND |
                    FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV |
                    FI_DIRECTED_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
    CHECK((fi->caps & want) == want);
    CHECK(!(fi->caps & (FI_COLLECTIVE | FI_HMEM | FI_MULTICAST | FI_TRIGGER)));
    CHECK(fi->mode == 0);
    CHECK(fi->addr_format == FI_FORMAT_UNSPEC);
    CHECK(fi->ep_attr->type == FI_EP_RDM);
    CHECK(fi->ep_attr->max_msg_size >= (1ull << 32));
    CHECK(fi->ep_attr->mem_tag_format >> 63); /* Open MPI needs the top bit */
    CHECK(fi->tx_attr->inject_size == inject);
    CHECK(fi->tx_attr->iov_limit == 8 && fi->rx_attr->iov_limit == 8);
    CHECK(fi->tx_attr->rma_iov_limit == 1);
    CHECK(fi->tx_attr->msg_order & FI_ORDER_SAS);
    CHECK(fi->domain_attr->threading == FI_THREAD_SAFE);
    CHECK((int)fi->domain_attr->data_progress == progress);
    CHECK(fi->domain_attr->resource_mgmt == FI_RM_ENABLED);
    CHECK(fi->domain_attr->av_type == FI_AV_MAP);
    CHECK(fi->domain_attr->cq_data_size == 8);
    CHECK(fi->domain_attr->mr_key_size == 8);
    CHECK(fi->domain_attr->mr_mode == (FI_MR_PROV_KEY | FI_MR_VIRT_ADDR));
    CHECK(!strcmp(fi->domain_attr->name, "vmmc") && !strcmp(fi->fabric_attr->name, "vmmc"));
}

static void test_no_hints(void)
{
    struct fi_info *all = NULL, *fi;
    EXPECT(0, fi_getinfo(V_NOW, NULL, NULL, 0, NULL, &all));
    for (fi = all; fi; fi = fi->next)
        if (!strcmp(fi->fabric_attr->prov_name, "vmmc"))
            break;
    if (!fi)
        FAIL("fi_getinfo without hints does not list the provider vmmc");
    check_defaults(fi, 4096, FI_PROGRESS_MANUAL);
    fi_freeinfo(all);
}

static void test_mtl(void)
{
    for (int k = 0; k < 2; k++) {
        uint32_t v = k ? V_1_0 : V_NOW;
        struct fi_info *h = mtl_hints();
        struct fi_info *fi = get(v, NULL, 0, h);
        CHECK(fi->mode == 0); /* FI_CONTEXT accepted, not needed */
        CHECK((fi->caps & (FI_TAGGED | FI_SEND | FI_RECV)) == (FI_TAGGED | FI_SEND | FI_RECV));
        CHECK(!(fi->caps & (FI_RMA | FI_ATOMIC | FI_MSG))); /* primary caps: only those asked */
        CHECK(fi->tx_attr->op_flags == FI_COMPLETION && fi->rx_attr->op_flags == FI_COMPLETION);
        CHECK(fi->domain_attr->threading == FI_THREAD_SAFE);
        CHECK(fi->domain_attr->av_type == FI_AV_MAP);
        /* pre-1.5 callers get a legacy mode */
        CHECK(fi->domain_attr->mr_mode == (k ? FI_MR_BASIC : 0));
        /* and the objects open with what they got, as the mtl does next */
        struct fid_fabric *fab;
        struct fid_domain *dom;
        EXPECT(0, fi_fabric(fi->fabric_attr, &fab, NULL));
        EXPECT(0, fi_domain(fab, fi, &dom, NULL));
        EXPECT(0, fi_close(&dom->fid));
        EXPECT(0, fi_close(&fab->fid));
        fi_freeinfo(fi);
        /* the second call: remote CQ data and directed receives */
        h->caps |= FI_DIRECTED_RECV;
        h->domain_attr->cq_data_size = 4;
        fi = get(v, NULL, 0, h);
        CHECK(fi->caps & FI_DIRECTED_RECV);
        CHECK(fi->domain_attr->cq_data_size >= 4);
        fi_freeinfo(fi);
        fi_freeinfo(h);
    }
    /* choices the provider follows */
    struct fi_info *h = mtl_hints();
    h->domain_attr->av_type = FI_AV_TABLE;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->domain_attr->data_progress = FI_PROGRESS_AUTO;
    struct fi_info *fi = get(V_NOW, NULL, 0, h);
    CHECK(fi->domain_attr->av_type == FI_AV_TABLE);
    CHECK(fi->domain_attr->threading == FI_THREAD_DOMAIN);
    CHECK(fi->domain_attr->data_progress == FI_PROGRESS_AUTO);
    fi_freeinfo(fi);
    /* tag fields: the application's layout is met (every mask is matched) */
    h->ep_attr->mem_tag_format = 0x0000ffff0000ffffull;
    fi = get(V_NOW, NULL, 0, h);
    CHECK(fi->ep_attr->mem_tag_format == 0x0000ffff0000ffffull);
    fi_freeinfo(fi);
    fi_freeinfo(h);
}

static void test_mr_modes(void)
{
    struct fi_info *h = base_hints(), *fi;
    h->caps = FI_RMA | FI_ATOMIC;
    /* what btl ofi and fi_pingpong accept: keys and addressing the provider's way */
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
    fi = get(V_NOW, NULL, 0, h);
    CHECK(fi->domain_attr->mr_mode == (FI_MR_PROV_KEY | FI_MR_VIRT_ADDR));
    CHECK(fi->caps & FI_REMOTE_WRITE);
    fi_freeinfo(fi);
    h->domain_attr->mr_mode = 0; /* the application's keys, offsets */
    fi = get(V_NOW, NULL, 0, h);
    CHECK(fi->domain_attr->mr_mode == 0);
    CHECK(fi->caps & FI_REMOTE_READ);
    fi_freeinfo(fi);
    h->domain_attr->mr_mode = FI_MR_SCALABLE;
    fi = get(V_1_0, NULL, 0, h);
    CHECK(fi->domain_attr->mr_mode == FI_MR_SCALABLE);
    fi_freeinfo(fi);
    h->domain_attr->mr_mode = FI_MR_BASIC;
    fi = get(V_NOW, NULL, 0, h);
    CHECK(fi->domain_attr->mr_mode == FI_MR_BASIC);
    fi_freeinfo(fi);
    h->domain_attr->mr_mode = FI_MR_BASIC | FI_MR_PROV_KEY;
    refused("FI_MR_BASIC with other bits", V_NOW, NULL, 0, h);
}

static void test_pingpong(void)
{
    /* fi_pingpong -p vmmc -e rdm: then the client again with the server's name */
    struct fi_info *h = base_hints();
    h->caps = FI_MSG;
    h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
    h->ep_attr->max_msg_size = 1 << 20;
    struct fi_info *fi = get(V_NOW, NULL, 0, h);
    CHECK(fi->mode == 0); /* no prefix, no context space */
    h->addr_format = fi->addr_format;
    h->dest_addr = malloc(24);
    memset(h->dest_addr, 0x5a, 24);
    h->dest_addrlen = 24;
    fi_freeinfo(fi);
    fi = get(V_NOW, NULL, 0, h);
    CHECK(fi->dest_addrlen == 24 && fi->dest_addr && ((uint8_t *)fi->dest_addr)[23] == 0x5a);
    fi_freeinfo(fi);
    fi_freeinfo(h);
    /* node/service: nothing to resolve as a source; no host to resolve as a destination */
    fi = get(V_NOW, "localhost", FI_SOURCE, h = base_hints());
    fi_freeinfo(fi);
    refused("a destination node", V_NOW, "localhost", 0, h);
}

static void test_refusals(void)
{
    struct fi_info *h;
    h = base_hints(), h->caps = FI_TAGGED | FI_COLLECTIVE;
    refused("FI_COLLECTIVE", V_NOW, NULL, 0, h);
    h = base_hints(), h->caps = FI_MSG | FI_HMEM;
    refused("FI_HMEM", V_NOW, NULL, 0, h);
    h = base_hints(), h->caps = FI_MSG | FI_MULTICAST;
    refused("FI_MULTICAST", V_NOW, NULL, 0, h);
    h = base_hints(), h->ep_attr->type = FI_EP_MSG;
    refused("FI_EP_MSG", V_NOW, NULL, 0, h);
    h = base_hints(), h->ep_attr->type = FI_EP_DGRAM;
    refused("FI_EP_DGRAM", V_NOW, NULL, 0, h);
    h = base_hints(), h->ep_attr->max_msg_size = (1ull << 40) + 1;
    refused("max_msg_size", V_NOW, NULL, 0, h);
    h = base_hints(), h->tx_attr->inject_size = 4097;
    refused("inject_size", V_NOW, NULL, 0, h);
    h = base_hints(), h->tx_attr->size = 65537;
    refused("tx size", V_NOW, NULL, 0, h);
    h = base_hints(), h->rx_attr->size = 65537;
    refused("rx size", V_NOW, NULL, 0, h);
    h = base_hints(), h->tx_attr->iov_limit = 9;
    refused("iov_limit", V_NOW, NULL, 0, h);
    h = base_hints(), h->tx_attr->rma_iov_limit = 2;
    refused("rma_iov_limit", V_NOW, NULL, 0, h);
    h = base_hints(), h->domain_attr->cq_data_size = 9;
    refused("cq_data_size", V_NOW, NULL, 0, h);
    h = base_hints(), h->domain_attr->mr_iov_limit = 2;
    refused("mr_iov_limit", V_NOW, NULL, 0, h);
    h = base_hints(), h->domain_attr->mr_key_size = 16;
    refused("mr_key_size", V_NOW, NULL, 0, h);
    h = base_hints(), h->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_RAW;
    refused("FI_ORDER_RAW", V_NOW, NULL, 0, h);
    h = base_hints(), h->rx_attr->comp_order = FI_ORDER_STRICT;
    refused("comp_order", V_NOW, NULL, 0, h);
    h = base_hints(), h->tx_attr->op_flags = FI_COMMIT_COMPLETE;
    refused("FI_COMMIT_COMPLETE", V_NOW, NULL, 0, h);
    /* Open MPI's btl ofi: RMA and atomics, completions on delivery. */
    h = base_hints(), h->caps = FI_RMA | FI_ATOMIC, h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
    h->domain_attr->mr_mode = FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
    struct fi_info *btl = get(V_NOW, NULL, 0, h);
    CHECK(btl->tx_attr->op_flags & FI_DELIVERY_COMPLETE);
    fi_freeinfo(btl);
    fi_freeinfo(h);
    h = base_hints(), h->addr_format = FI_SOCKADDR_IN;
    refused("FI_SOCKADDR_IN", V_NOW, NULL, 0, h);
    h = base_hints(), h->src_addr = calloc(1, 16), h->src_addrlen = 16;
    refused("a source address", V_NOW, NULL, 0, h);
    h = base_hints(), h->dest_addr = calloc(1, 65), h->dest_addrlen = 65;
    refused("a 65-byte address", V_NOW, NULL, 0, h);
    h = base_hints(), h->ep_attr->tx_ctx_cnt = 2;
    refused("two tx contexts", V_NOW, NULL, 0, h);
    h = base_hints(), h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
    refused("a shared rx context", V_NOW, NULL, 0, h);
    h = base_hints(), h->caps = FI_RMA, h->ep_attr->max_order_waw_size = 8;
    refused("ordered RMA", V_NOW, NULL, 0, h);
    h = base_hints(), h->fabric_attr->name = strdup("ib0");
    refused("another fabric", V_NOW, NULL, 0, h);
    h = base_hints(), h->domain_attr->name = strdup("mlx5_0");
    refused("another domain", V_NOW, NULL, 0, h);
    h = base_hints(), h->fabric_attr->prov_version = FI_VERSION(9, 0);
    refused("a newer provider", V_NOW, NULL, 0, h);
    h = base_hints(), h->domain_attr->threading = (enum fi_threading)99;
    refused("an unknown threading model", V_NOW, NULL, 0, h);
    h = base_hints(), h->domain_attr->av_type = (enum fi_av_type)7;
    refused("an unknown AV type", V_NOW, NULL, 0, h);
}

static void *late_write(void *arg)
{
    usleep(20000);
    uint64_t v = 77;
    EXPECT(sizeof v, fi_eq_write((struct fid_eq *)arg, FI_NOTIFY, &v, sizeof v, 0));
    return NULL;
}

static int readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

static void test_objects(void)
{
    struct fi_info *h = mtl_hints(), *fi = get(V_NOW, NULL, 0, h);
    struct fid_fabric *fab;
    struct fid_domain *dom;
    struct fid_eq *eq, *eq2;
    EXPECT(0, fi_fabric(fi->fabric_attr, &fab, NULL));
    EXPECT(-FI_ENOSYS, fi_passive_ep(fab, fi, &(struct fid_pep *){0}, NULL));
    EXPECT(-FI_ENOSYS, fi_wait_open(fab, &(struct fi_wait_attr){.wait_obj = FI_WAIT_FD},
                                    &(struct fid_wait *){0}));
    EXPECT(0, fi_domain(fab, fi, &dom, NULL));
    EXPECT(-FI_EBUSY, fi_close(&fab->fid)); /* a domain is open */
    EXPECT(-FI_ENOSYS, fi_scalable_ep(dom, fi, &(struct fid_ep *){0}, NULL));
    EXPECT(-FI_ENOSYS, fi_query_collective(dom, FI_BARRIER, NULL, 0));

    /* fi_domain refuses an fi_info the provider did not make */
    struct fi_info *bad = fi_dupinfo(fi);
    struct fid_domain *dom2;
    bad->ep_attr->type = FI_EP_MSG;
    EXPECT(-FI_ENODATA, fi_domain(fab, bad, &dom2, NULL));
    bad->ep_attr->type = FI_EP_RDM;
    bad->caps |= FI_COLLECTIVE;
    EXPECT(-FI_ENODATA, fi_domain(fab, bad, &dom2, NULL));
    fi_freeinfo(bad);

    /* an EQ: the application's events, in order, whole */
    struct fi_eq_attr ea = {.size = 2, .flags = FI_WRITE, .wait_obj = FI_WAIT_FD};
    EXPECT(0, fi_eq_open(fab, &ea, &eq, NULL));
    int fd = -1;
    EXPECT(0, fi_control(&eq->fid, FI_GETWAIT, &fd));
    CHECK(fd >= 0 && !readable(fd));
    struct fid *fids[1] = {&eq->fid};
    EXPECT(0, fi_trywait(fab, fids, 1));
    struct fi_eq_entry in = {.fid = &dom->fid, .context = (void *)0x1234, .data = 42}, out;
    uint32_t ev = 0;
    EXPECT(-FI_EAGAIN, fi_eq_read(eq, &ev, &out, sizeof out, 0));
    EXPECT(sizeof in, fi_eq_write(eq, FI_MR_COMPLETE, &in, sizeof in, 0));
    in.data = 43;
    EXPECT(sizeof in, fi_eq_write(eq, FI_AV_COMPLETE, &in, sizeof in, 0));
    EXPECT(-FI_EAGAIN, fi_eq_write(eq, FI_AV_COMPLETE, &in, sizeof in, 0)); /* size 2 */
    CHECK(readable(fd));
    EXPECT(-FI_EAGAIN, fi_trywait(fab, fids, 1));
    EXPECT(-FI_ETOOSMALL, fi_eq_read(eq, &ev, &out, sizeof out - 1, 0)); /* it stays */
    EXPECT(sizeof out, fi_eq_read(eq, &ev, &out, sizeof out, FI_PEEK));
    CHECK(ev == FI_MR_COMPLETE && out.data == 42);
    EXPECT(sizeof out, fi_eq_read(eq, &ev, &out, sizeof out, 0));
    CHECK(ev == FI_MR_COMPLETE && out.data == 42 && out.context == (void *)0x1234);
    CHECK(readable(fd));
    EXPECT(sizeof out, fi_eq_read(eq, &ev, &out, sizeof out, 0));
    CHECK(ev == FI_AV_COMPLETE && out.data == 43 && out.fid == &dom->fid);
    CHECK(!readable(fd)); /* empty: the fd is quiet again */
    EXPECT(0, fi_trywait(fab, fids, 1));
    struct fi_eq_err_entry err = {0};
    EXPECT(-FI_EAGAIN, fi_eq_readerr(eq, &err, 0));
    EXPECT(-FI_EAGAIN, fi_eq_sread(eq, &ev, &out, sizeof out, 30, 0)); /* times out */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, late_write, eq) == 0);
    uint64_t got = 0;
    EXPECT(sizeof got, fi_eq_sread(eq, &ev, &got, sizeof got, 10000, 0));
    CHECK(ev == FI_NOTIFY && got == 77);
    pthread_join(t, NULL);

    /* objects bound to an EQ hold it */
    EXPECT(0, fi_domain_bind(dom, &eq->fid, 0));
    EXPECT(-FI_EBUSY, fi_close(&eq->fid));
    EXPECT(-FI_EBUSY, fi_domain_bind(dom, &eq->fid, 0));
    EXPECT(-FI_EINVAL, fi_domain_bind(dom, &fab->fid, 0));

    /* no FI_WRITE, no wait object, wait objects that do not exist here */
    ea = (struct fi_eq_attr){.wait_obj = FI_WAIT_NONE};
    EXPECT(0, fi_eq_open(fab, &ea, &eq2, NULL));
    EXPECT(-FI_EINVAL, fi_eq_write(eq2, FI_NOTIFY, &in, sizeof in, 0));
    EXPECT(-FI_EINVAL, fi_eq_sread(eq2, &ev, &out, sizeof out, 0, 0));
    CHECK(fi_control(&eq2->fid, FI_GETWAIT, &fd) < 0);
    EXPECT(0, fi_close(&eq2->fid));
    ea = (struct fi_eq_attr){.wait_obj = FI_WAIT_MUTEX_COND};
    EXPECT(-FI_ENOSYS, fi_eq_open(fab, &ea, &eq2, NULL));
    ea = (struct fi_eq_attr){.wait_obj = FI_WAIT_UNSPEC, .flags = FI_WRITE};
    EXPECT(0, fi_eq_open(fab, &ea, &eq2, NULL));
    EXPECT(sizeof in, fi_eq_write(eq2, FI_NOTIFY, &in, sizeof in, 0));
    EXPECT(sizeof out, fi_eq_sread(eq2, &ev, &out, sizeof out, -1, 0));
    EXPECT(0, fi_close(&eq2->fid)); /* events left would be dropped; none */

    /* fi_trywait on a CQ, where completion queues exist */
    struct fid_cq *cq;
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD};
    if (fi_cq_open(dom, &ca, &cq, NULL) == 0) {
        struct fid *cf[2] = {&cq->fid, &eq->fid};
        EXPECT(0, fi_trywait(fab, cf, 2));
        EXPECT(-FI_EBUSY, fi_close(&dom->fid));
        EXPECT(0, fi_close(&cq->fid));
    } else {
        printf("note: fi_cq_open unavailable, fi_trywait on a CQ not checked\n");
    }
    EXPECT(-FI_EINVAL, fi_trywait(fab, (struct fid *[]){&dom->fid}, 1));

    EXPECT(-FI_EBUSY, fi_close(&fab->fid)); /* domain and EQ */
    EXPECT(0, fi_close(&dom->fid));
    EXPECT(0, fi_close(&eq->fid));
    EXPECT(0, fi_close(&fab->fid));
    fi_freeinfo(fi);
    fi_freeinfo(h);
}

static void provider_loads(void)
{
    const char *dir = getenv("FI_PROVIDER_PATH");
    char path[4096];
    if (!dir) {
        printf("SKIP: FI_PROVIDER_PATH is not set\n");
        exit(77);
    }
    snprintf(path, sizeof path, "%s/libvmmc-fi.so", dir);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("SKIP: the provider does not load: %s\n", dlerror());
        exit(77);
    }
    dlclose(h);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "default";
    provider_loads();
    /* the settings modes: hints that accept the provider's memory keys */
    struct fi_info *kh = base_hints();
    kh->domain_attr->mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED;
    if (!strcmp(mode, "bad")) {
        /* a refused VMMC_OFI_* value: the provider offers nothing */
        struct fi_info *fi = NULL, *h = base_hints();
        int rc = fi_getinfo(V_NOW, NULL, NULL, 0, h, &fi);
        if (rc != -FI_ENODATA)
            FAIL("fi_getinfo with VMMC_OFI_EAGER=10: %d, expected -FI_ENODATA", rc);
        fi_freeinfo(h);
        fi_freeinfo(kh);
    } else if (!strcmp(mode, "settings")) {
        /* VMMC_OFI_EAGER=512, VMMC_OFI_INJECT=1K (clamped), VMMC_OFI_PROGRESS=auto */
        struct fi_info *h = kh, *fi = get(V_NOW, NULL, 0, h);
        check_defaults(fi, 512, FI_PROGRESS_AUTO);
        fi_freeinfo(fi);
        h->tx_attr->inject_size = 513;
        refused("inject_size above VMMC_OFI_EAGER", V_NOW, NULL, 0, h);
        h = base_hints(), h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
        fi = get(V_NOW, NULL, 0, h);
        CHECK(fi->domain_attr->data_progress == FI_PROGRESS_MANUAL);
        fi_freeinfo(fi);
        fi_freeinfo(h);
    } else if (!strcmp(mode, "manual")) {
        struct fi_info *h = kh, *fi = get(V_NOW, NULL, 0, h);
        check_defaults(fi, 4096, FI_PROGRESS_MANUAL);
        fi_freeinfo(fi);
        h->domain_attr->data_progress = FI_PROGRESS_AUTO;
        refused("FI_PROGRESS_AUTO with VMMC_OFI_PROGRESS=manual", V_NOW, NULL, 0, h);
    } else {
        test_no_hints();
        test_mtl();
        test_mr_modes();
        test_pingpong();
        test_refusals();
        test_objects();
        fi_freeinfo(kh);
    }
    printf("t_ofi_getinfo %s: ok\n", mode);
    return 0;
}
