/* A hostile peer on the provider's wire. The victim is a libfabric program
 * (the provider, loaded through FI_PROVIDER_PATH) with a tagged receive
 * posted for tag 1 from anyone. The attacker is a raw vmmc endpoint that
 * speaks the provider's FM channels itself and sends, with tag 1 wherever a
 * tag goes: a message shorter than a header, an unknown op, unknown flags,
 * an eager message claiming more than the eager limit, a CTS for a send
 * that does not exist, a CTS whose window name is not terminated, and a
 * NAK. None of it may complete the receive or disturb the endpoint: the
 * valid message sent last must be what the receive gets, byte for byte,
 * and nothing else may come out of the CQ. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ofi/ofi.h"

void vofi_warn(const char *fmt, ...) { (void)fmt; } /* ofi_addr.c's log */

#define FAIL(...)                                                                          \
    do {                                                                                   \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                               \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fputc('\n', stderr);                                                               \
        exit(1);                                                                           \
    } while (0)
#define CK(x)                                                                              \
    do {                                                                                   \
        long _r = (long)(x);                                                               \
        if (_r)                                                                            \
            FAIL("%s = %ld", #x, _r);                                                      \
    } while (0)

static const char good[] = "the one valid message";

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int victim(int out, int in)
{
    struct fi_info *h = fi_allocinfo(), *info;
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_TAGGED | FI_MSG;
    h->fabric_attr->prov_name = strdup("vmmc");
    if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info)) {
        printf("SKIP: the provider does not load (FI_PROVIDER_PATH)\n");
        char z = 0;
        (void)!write(out, &z, 1);
        return 77;
    }
    struct fid_fabric *fab;
    struct fid_domain *dom;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED};
    struct fi_av_attr aa = {.type = FI_AV_MAP};
    CK(fi_fabric(info->fabric_attr, &fab, NULL));
    CK(fi_domain(fab, info, &dom, NULL));
    CK(fi_cq_open(dom, &ca, &cq, NULL));
    CK(fi_av_open(dom, &aa, &av, NULL));
    CK(fi_endpoint(dom, info, &ep, NULL));
    CK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    CK(fi_ep_bind(ep, &av->fid, 0));
    CK(fi_enable(ep));
    char buf[256], big[4096];
    memset(buf, 0x55, sizeof buf);
    struct fi_context c1, c2, c3;
    CK(fi_trecv(ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, 1, 0, &c1));
    CK(fi_recv(ep, big, sizeof big, NULL, FI_ADDR_UNSPEC, &c2));
    uint8_t name[VOFI_MAX_EP_ADDR + 1];
    size_t nl = VOFI_MAX_EP_ADDR;
    CK(fi_getname(&ep->fid, name + 1, &nl));
    name[0] = (uint8_t)nl;
    if (write(out, name, nl + 1) != (ssize_t)nl + 1)
        FAIL("pipe");
    /* Until the attacker says it is done, nothing may complete. */
    char done;
    double t0 = now();
    for (;;) {
        struct fi_cq_tagged_entry e;
        ssize_t r = fi_cq_read(cq, &e, 1);
        if (r == 1)
            FAIL("a completion (context %p, len %zu, tag %llu) came from hostile bytes",
                 e.op_context, e.len, (unsigned long long)e.tag);
        if (r == -FI_EAVAIL)
            FAIL("an error completion came from hostile bytes");
        struct timespec ts = {0, 1000000};
        if (read(in, &done, 1) == 1)
            break;
        nanosleep(&ts, NULL);
        if (now() - t0 > 60)
            FAIL("the attacker never finished");
    }
    /* The valid message: the tagged receive gets it, exactly. */
    t0 = now();
    struct fi_cq_tagged_entry e;
    ssize_t r;
    while ((r = fi_cq_read(cq, &e, 1)) == -FI_EAGAIN)
        if (now() - t0 > 30)
            FAIL("the valid message never arrived");
    if (r != 1)
        FAIL("fi_cq_read: %zd (%s)", r, fi_strerror((int)-r));
    if (e.op_context != &c1 || e.len != sizeof good || e.tag != 1 ||
        memcmp(buf, good, sizeof good) || buf[sizeof good] != 0x55)
        FAIL("the valid message arrived wrong (len %zu, tag %llu)", e.len,
             (unsigned long long)e.tag);
    /* And the endpoint still works: a message to itself. */
    fi_addr_t self;
    if (fi_av_insert(av, name + 1, 1, &self, 0, NULL) != 1)
        FAIL("fi_av_insert of its own name");
    CK(fi_trecv(ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, 9, 0, &c3));
    CK(fi_tsend(ep, good, sizeof good, NULL, self, 9, NULL));
    int got = 0;
    t0 = now();
    while (got < 2 && now() - t0 < 30)
        if (fi_cq_read(cq, &e, 1) == 1)
            got++;
    if (got != 2)
        FAIL("the endpoint no longer sends to itself");
    CK(fi_close(&ep->fid));
    CK(fi_close(&av->fid));
    CK(fi_close(&cq->fid));
    CK(fi_close(&dom->fid));
    CK(fi_close(&fab->fid));
    fi_freeinfo(info);
    fi_freeinfo(h);
    (void)c2;
    return 0;
}

/* Send @p n bytes on channel @p ch to @p peer, retrying while the victim's
 * ring is being set up. */
static void raw(fm_t *ch, int peer, const void *b, size_t n)
{
    double t0 = now();
    int st;
    while ((st = fm_send(ch, peer, VOFI_H_MSG, b, n)) == VMMC_ERR_AGAIN) {
        fm_extract(ch, FM_EXTRACT_ALL);
        if (now() - t0 > 30)
            FAIL("fm_send: no credit for 30 s");
    }
    if (st)
        FAIL("fm_send: %s", vmmc_last_error());
}

static void attacker(int in, int out)
{
    uint8_t name[VOFI_MAX_EP_ADDR + 1];
    if (read(in, name, 1) != 1)
        FAIL("pipe");
    if (!name[0]) /* the victim skips */
        return;
    if (read(in, name + 1, name[0]) != name[0])
        FAIL("pipe");
    vmmc_ep_t *ep;
    CK(vmmc_ep_open(NULL, &ep));
    uint8_t own[VMMC_ADDR_MAX], va[VMMC_ADDR_MAX];
    size_t ol = sizeof own, vl = sizeof va;
    CK(vmmc_ep_addr(ep, own, &ol));
    CK(vofi_addr_unpack(name + 1, name[0], own, ol, va, &vl));
    int peer;
    CK(vmmc_connect(ep, va, vl, &peer));
    fm_params_t p = {.field_mask = FM_PARAM_FLAGS, .flags = FM_NONBLOCK};
    fm_t *data, *ctrl;
    CK(fm_channel_open(ep, VOFI_CH_DATA, &p, &data));
    CK(fm_channel_open(ep, VOFI_CH_CTRL, &p, &ctrl));

    vofi_hdr_t h = {.op = VOFI_OP_EAGER, .flags = VOFI_F_TAGGED, .tag = 1, .len = 8};
    raw(data, peer, &h, 5); /* shorter than a header */
    h.op = 9;
    raw(data, peer, &h, sizeof h); /* unknown op */
    h.op = VOFI_OP_EAGER;
    h.flags = VOFI_F_TAGGED | 0x80; /* unknown flag */
    raw(data, peer, &h, sizeof h);
    h.flags = VOFI_F_TAGGED;
    h.len = (uint64_t)1 << 40; /* beyond the eager limit, nothing behind it */
    raw(data, peer, &h, sizeof h);
    h.op = VOFI_OP_RTS;
    h.len = UINT64_MAX; /* beyond any message */
    raw(data, peer, &h, sizeof h);
    vofi_cts_t c = {.op = VOFI_OP_CTS, .id = 12345, .len = 4096, .win_off = 0};
    snprintf(c.window, sizeof c.window, "ofi.w.0.0");
    raw(ctrl, peer, &c, sizeof c); /* a CTS for no send */
    memset(c.window, 'A', sizeof c.window); /* no terminating NUL */
    raw(ctrl, peer, &c, sizeof c);
    c.op = VOFI_OP_NAK;
    c.window[0] = 0;
    raw(ctrl, peer, &c, sizeof c); /* a NAK for no send */
    raw(ctrl, peer, &c, 3); /* a short control message */
    /* Give the victim time to have read all of it (it extracts while
     * polling), then say so and send the one valid message. */
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    char d = 1;
    if (write(out, &d, 1) != 1)
        FAIL("pipe");
    nanosleep(&ts, NULL);
    struct {
        vofi_hdr_t h;
        char b[sizeof good];
    } m = {.h = {.op = VOFI_OP_EAGER, .flags = VOFI_F_TAGGED, .tag = 1, .len = sizeof good}};
    memcpy(m.b, good, sizeof good);
    raw(data, peer, &m, sizeof m);
    /* Stay until the victim is done with the channel. */
    for (int i = 0; i < 200; i++) {
        fm_extract(data, FM_EXTRACT_ALL);
        fm_extract(ctrl, FM_EXTRACT_ALL);
        struct timespec t = {0, 10000000};
        nanosleep(&t, NULL);
    }
    fm_channel_close(data);
    fm_channel_close(ctrl);
    vmmc_ep_close(ep);
}

int main(void)
{
    int v2a[2], a2v[2];
    if (pipe(v2a) || pipe(a2v))
        FAIL("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        fcntl(a2v[0], F_SETFL, O_NONBLOCK);
        _exit(victim(v2a[1], a2v[0]));
    }
    close(v2a[1]);
    close(a2v[0]);
    attacker(v2a[0], a2v[1]);
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st))
        FAIL("the victim died (status %d)", st);
    if (WEXITSTATUS(st) == 77)
        return 77;
    if (WEXITSTATUS(st))
        return 1;
    printf("ok: hostile wire messages changed nothing\n");
    return 0;
}
