/* Open-world endpoints over the fabric transport (VMMC_TRANSPORT=fabric):
 *   - an endpoint that does not listen refuses a connector in another
 *     process: its import fails with VMMC_ERR_PEER_DEAD and "refused: not
 *     listening (fabric)" (answered, not waited out: the import's deadline
 *     is far), every later operation at once; both sides count it;
 *   - messages made by hand on a raw libfabric endpoint the listener does
 *     not know (too short, not a HELLO, HELLOs with a malformed address, a
 *     wrong secret, another provider, a later sequence number, a forged
 *     refusal, a write claiming a handle with a wrong secret) are dropped
 *     and counted in fabric.from_unknown / fabric.malformed, no peer is
 *     made, and the endpoint stays well: a real connector is accepted and
 *     its data lands;
 *   - what was meant for another endpoint at the same fabric address (one
 *     that had it before and closed): a HELLO naming another secret is
 *     refused, its connector fails at once with VMMC_ERR_PEER_DEAD
 *     ("another endpoint has this address now"), other messages are
 *     dropped (fabric.not_ours);
 *   - a connector that is killed after it connected (no goodbye) is
 *     reported dead to the listener; one that closes is reported left.
 * Skips (77) where the fabric transport cannot open. */
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "transport/fabric/fab_int.h"
#include "vtest.h"

extern char **environ;

/* Wait (bounded) until counter @name of @ep exceeds @was. */
static void counted(vmmc_ep_t *ep, const char *name, uint64_t was)
{
    double t0 = vt_now();
    while (vt_counter(ep, name) <= was) {
        if (vt_now() - t0 > 20)
            VT_FAIL("%s was not counted", name);
        usleep(1000);
    }
}

/* Re-executed as "child MODE ADDR": an unrelated process that imports "x"
 * from ADDR. MODE refused: the import must be refused; send: it sends
 * "child" and closes; kill: it sends "child" and is killed. */
static int child(const char *mode, const char *text)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_ep_open(NULL, &ep));
    int peer = vt_connect_text(ep, text);
    vmmc_proxy_t *px;
    int rc = vmmc_import(ep, peer, "x", 60000, &px);
    printf("child (%s): import: %s (%s)\n", mode, vmmc_strerror(rc), rc ? vmmc_last_error() : "");
    if (!strcmp(mode, "refused") || !strcmp(mode, "stale")) {
        VT_CHECK(rc == VMMC_ERR_PEER_DEAD);
        VT_CHECK(strstr(vmmc_last_error(), !strcmp(mode, "refused")
                                               ? "refused: not listening (fabric)"
                                               : "another endpoint has this address now") != NULL);
        VT_CHECK(vt_counter(ep, "fabric.refused_by_peer") == 1);
        /* and every later operation, at once */
        VT_CHECK(vmmc_signal(ep, peer) == VMMC_ERR_PEER_DEAD);
        VT_CHECK(vmmc_import(ep, peer, "x", 60000, &px) == VMMC_ERR_PEER_DEAD);
        VT_OK(vmmc_ep_close(ep));
        return 3;
    }
    VT_OK(rc);
    VT_OK(vmmc_send(px, 0, "child", 6, 0));
    VT_OK(vmmc_fence(ep, peer));
    if (!strcmp(mode, "kill"))
        raise(SIGKILL);
    VT_OK(vmmc_unimport(px));
    VT_OK(vmmc_ep_close(ep));
    return 0;
}

static pid_t spawn_child(const char *self, const char *mode, const char *addr)
{
    pid_t pid;
    char *argv[] = {(char *)self, "child", (char *)mode, (char *)addr, NULL};
    VT_CHECK(posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0);
    return pid;
}

static int child_status(pid_t pid)
{
    int st;
    VT_CHECK(waitpid(pid, &st, 0) == pid);
    return st;
}

/* Wait (bounded) until @what is at @region. */
static void landed(vmmc_ep_t *ep, const char *region, const char *what)
{
    double t0 = vt_now();
    while (memcmp(region, what, strlen(what) + 1) != 0) {
        if (vt_now() - t0 > 20)
            VT_FAIL("'%s' did not land", what);
        vmmc_wait(ep, 10);
    }
}

/* ---- a raw libfabric endpoint that nobody knows ------------------------- */

typedef struct raw {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    fi_addr_t to;
} raw_t;

/* The provider the target uses, as an address card spells it ('+' for ';'). */
static const char *fabp(void)
{
    static char p[64];
    const char *env = getenv("VMMC_FABRIC_PROVIDER");
    snprintf(p, sizeof p, "%s", env && *env ? env : "tcp+ofi_rxm");
    for (char *c = p; *c; c++)
        if (*c == ';')
            *c = '+';
    return p;
}

static void raw_open(raw_t *r, vmmc_ep_t *target)
{
    VT_OK(vmmc_fab__dl_load());
    struct fi_info h;
    struct fi_ep_attr ea = {.type = FI_EP_RDM};
    /* no FI_MR_LOCAL: the raw sends' buffers are not registered */
    struct fi_domain_attr da = {.mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY};
    char prov[64];
    snprintf(prov, sizeof prov, "%s", fabp());
    for (char *c = prov; *c; c++)
        if (*c == '+')
            *c = ';';
    struct fi_fabric_attr fa = {.prov_name = prov};
    memset(&h, 0, sizeof h);
    h.caps = FI_MSG;
    h.ep_attr = &ea;
    h.domain_attr = &da;
    h.fabric_attr = &fa;
    VT_CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, &h, &r->info) == 0);
    VT_CHECK(fi_fabric(r->info->fabric_attr, &r->fabric, NULL) == 0);
    VT_CHECK(fi_domain(r->fabric, r->info, &r->domain, NULL) == 0);
    struct fi_av_attr av = {.type = FI_AV_TABLE};
    VT_CHECK(fi_av_open(r->domain, &av, &r->av, NULL) == 0);
    struct fi_cq_attr cq = {.format = FI_CQ_FORMAT_CONTEXT};
    VT_CHECK(fi_cq_open(r->domain, &cq, &r->cq, NULL) == 0);
    VT_CHECK(fi_endpoint(r->domain, r->info, &r->ep, NULL) == 0);
    VT_CHECK(fi_ep_bind(r->ep, &r->av->fid, 0) == 0);
    VT_CHECK(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV) == 0);
    VT_CHECK(fi_enable(r->ep) == 0);
    char card[VMMC_ADDR_MAX + 1], hex[256];
    vt_ep_addr(target, card);
    VT_CHECK(vmmc_card_get(card, "fab", hex, sizeof hex));
    unsigned char a[128];
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++)
        VT_CHECK(sscanf(hex + 2 * i, "%2hhx", &a[i]) == 1);
    VT_CHECK(fi_av_insert(r->av, a, 1, &r->to, 0, NULL) == 1);
}

/* Our own fabric address, as the target's card would spell it. */
static void raw_name(raw_t *r, char *hex, size_t cap)
{
    unsigned char a[128];
    size_t n = sizeof a;
    VT_CHECK(fi_getname(&r->ep->fid, a, &n) == 0);
    VT_CHECK(2 * n < cap);
    for (size_t i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", a[i]);
}

static void raw_send(raw_t *r, const void *buf, size_t len)
{
    static unsigned char copy[4096];
    struct fi_context2 ctx;
    VT_CHECK(len <= sizeof copy);
    memcpy(copy, buf, len);
    double t0 = vt_now();
    ssize_t rc;
    while ((rc = fi_send(r->ep, copy, len, NULL, r->to, &ctx)) == -FI_EAGAIN) {
        struct fi_cq_entry e;
        (void)fi_cq_read(r->cq, &e, 1);
        if (vt_now() - t0 > 20)
            VT_FAIL("the raw endpoint cannot send");
    }
    VT_CHECK(rc == 0);
    struct fi_cq_entry e;
    t0 = vt_now();
    while ((rc = fi_cq_read(r->cq, &e, 1)) == -FI_EAGAIN) {
        if (vt_now() - t0 > 20)
            VT_FAIL("the raw send did not complete");
        usleep(100);
    }
    VT_CHECK(rc == 1);
}

static void raw_close(raw_t *r)
{
    fi_close(&r->ep->fid);
    fi_close(&r->cq->fid);
    fi_close(&r->av->fid);
    fi_close(&r->domain->fid);
    fi_close(&r->fabric->fid);
    fi_freeinfo(r->info);
}

/* The secret (fsec=) of @ep's address. */
static uint64_t sec_of(vmmc_ep_t *ep)
{
    char card[VMMC_ADDR_MAX + 1], v[32];
    vt_ep_addr(ep, card);
    VT_CHECK(vmmc_card_get(card, "fsec", v, sizeof v));
    return strtoull(v, NULL, 16);
}

/* A HELLO to the endpoint whose secret is @to, whose header says @sec and
 * @seq, with the address @card. */
static void hello(raw_t *r, uint64_t to, uint64_t sec, uint32_t seq, const char *card)
{
    unsigned char m[sizeof(fab_hdr_t) + VMMC_ADDR_MAX];
    fab_hdr_t h = {.kind = F_HELLO, .seq = seq, .sec = sec, .imm = to, .dst = (uint32_t)to};
    size_t n = strlen(card);
    VT_CHECK(n <= VMMC_ADDR_MAX);
    memcpy(m, &h, sizeof h);
    memcpy(m + sizeof h, card, n);
    raw_send(r, m, sizeof h + n);
}

static void forged(vmmc_ep_t *b)
{
    raw_t r;
    raw_open(&r, b);
    char me[256], card[VMMC_ADDR_MAX + 1], bc[VMMC_ADDR_MAX + 1], host[128];
    raw_name(&r, me, sizeof me);
    vt_ep_addr(b, bc);
    VT_CHECK(vmmc_card_get(bc, "host", host, sizeof host));
    const uint64_t sec = 0x0123456789abcdefull;
    const uint64_t bsec = sec_of(b);
    int peers = vmmc_peer_count(b);
    uint64_t acc0 = vt_counter(b, "peers_accepted");
    uint64_t refusals0 = vt_counter(b, "fabric.refusals_sent");

    uint64_t u0 = vt_counter(b, "fabric.from_unknown");
    raw_send(&r, "garbage", 7); /* shorter than a header */
    counted(b, "fabric.from_unknown", u0);
    u0 = vt_counter(b, "fabric.from_unknown");
    /* not a HELLO, claims a handle */
    fab_hdr_t h = {.kind = F_CTL, .src = 0, .sec = sec, .dst = (uint32_t)bsec};
    raw_send(&r, &h, sizeof h);
    counted(b, "fabric.from_unknown", u0);
    u0 = vt_counter(b, "fabric.from_unknown");
    h = (fab_hdr_t){.kind = F_REFUSE, .dst = (uint32_t)bsec}; /* a refusal from nobody */
    raw_send(&r, &h, sizeof h);
    counted(b, "fabric.from_unknown", u0);
    u0 = vt_counter(b, "fabric.from_unknown");
    unsigned char junk[sizeof(fab_hdr_t) + 100];
    unsigned long long s = 42;
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)vt_rand(&s);
    junk[0] = 200;                                       /* no such kind */
    uint32_t to = (uint32_t)bsec;                        /* meant for b */
    memcpy(junk + offsetof(fab_hdr_t, dst), &to, sizeof to);
    raw_send(&r, junk, sizeof junk);
    counted(b, "fabric.from_unknown", u0);

    /* HELLOs that fail a check */
    snprintf(card, sizeof card, "host=%s;pid=77;fab=%s;fabp=%s;fsec=%016llx;", host, me, fabp(),
             (unsigned long long)sec);
    struct {
        uint64_t sec;
        uint32_t seq;
        const char *card;
    } bad[] = {
        {sec, 0, "this is not an address"},
        {sec, 0, ""},
        {sec + 1, 0, card},                                  /* wrong secret */
        {sec, 5, card},                                      /* not its first message */
        {sec, 0, "host=abc;pid=77;fab=0011;fabp=tcp+ofi_rxm;fsec=0123456789abcdef;"}, /* size */
        {sec, 0, "host=abc;pid=77;fab=00112233;fabp=verbs+ofi_rxm;fsec=0123456789abcdef;"},
        {sec, 0, "host=abc;pid=77;fabp=tcp+ofi_rxm;fsec=0123456789abcdef;"}, /* no fab */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t m0 = vt_counter(b, "fabric.malformed");
        hello(&r, bsec, bad[i].sec, bad[i].seq, bad[i].card);
        counted(b, "fabric.malformed", m0);
    }
    VT_CHECK(vmmc_peer_count(b) == peers);
    VT_CHECK(vt_counter(b, "peers_accepted") == acc0);
    VT_CHECK(vt_counter(b, "fabric.refusals_sent") == refusals0); /* none answered */

    /* Meant for another endpoint that had b's address: a message is
     * dropped, a HELLO refused (answered), neither makes a peer. */
    uint64_t n0 = vt_counter(b, "fabric.not_ours");
    h = (fab_hdr_t){.kind = F_CTL, .src = 0, .sec = sec, .dst = (uint32_t)bsec ^ 1};
    raw_send(&r, &h, sizeof h);
    counted(b, "fabric.not_ours", n0);
    n0 = vt_counter(b, "fabric.not_ours");
    hello(&r, bsec ^ (1ull << 40), sec, 0, card); /* the same low half: the whole secret counts */
    counted(b, "fabric.not_ours", n0);
    counted(b, "fabric.refusals_sent", refusals0);
    VT_CHECK(vmmc_peer_count(b) == peers);
    VT_CHECK(vt_counter(b, "peers_accepted") == acc0);

    /* A good HELLO is taken (b listens). */
    uint64_t a0 = vt_counter(b, "peers_accepted");
    hello(&r, bsec, sec, 0, card);
    counted(b, "peers_accepted", a0);
    VT_CHECK(vmmc_peer_count(b) == peers + 1);
    raw_close(&r);
    printf("forged messages from an unknown fabric address: dropped and counted "
           "(from_unknown %llu, malformed %llu); a well-formed HELLO accepted\n",
           (unsigned long long)vt_counter(b, "fabric.from_unknown"),
           (unsigned long long)vt_counter(b, "fabric.malformed"));
}

static int accepted;
static void on_accept(vmmc_ep_t *ep, int peer, void *arg)
{
    (void)ep;
    (void)arg;
    (void)peer;
    __atomic_add_fetch(&accepted, 1, __ATOMIC_RELEASE);
}

int main(int argc, char **argv)
{
    static const char *vars[] = {"VMMC_LAUNCHER", "VMMC_BOOTSTRAP", "VMMC_RANK", "VMMC_SIZE",
                                 "PMIX_RANK", "PMIX_NAMESPACE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    if (argc == 4 && !strcmp(argv[1], "child"))
        return child(argv[2], argv[3]);
    vmmc_ep_t *b;
    int rc = vmmc_ep_open(NULL, &b);
    if (rc != VMMC_OK)
        VT_SKIP("no fabric endpoint here: %s", vmmc_last_error());
    const char *k;
    uint64_t v;
    int fab = 0;
    for (int i = 0; vmmc_counter_get(b, i, &k, &v) == VMMC_OK; i++)
        fab |= !strcmp(k, "fabric.msgs_sent");
    if (!fab)
        VT_SKIP("the fabric transport is not open (VMMC_TRANSPORT=fabric and a provider needed)");
    char *region;
    VT_OK(vmmc_mem_alloc(b, 4096, (void **)&region));
    memset(region, 0, 4096);
    vmmc_export_params_t p = {.name = "x", .addr = region, .length = 4096};
    vmmc_export_t *ex;
    VT_OK(vmmc_export(b, &p, &ex));
    char ba[VMMC_ADDR_MAX + 1], text[2 * VMMC_ADDR_MAX + 1];
    size_t bl = vt_ep_addr(b, ba);
    VT_OK(vmmc_addr_format(ba, bl, text, sizeof text));

    /* Not listening: refused, answered. */
    uint64_t ref0 = vt_counter(b, "connections_refused");
    int st = child_status(spawn_child(argv[0], "refused", text));
    VT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    VT_CHECK(vt_counter(b, "connections_refused") > ref0);
    VT_CHECK(vt_counter(b, "fabric.refusals_sent") >= 1);
    VT_CHECK(vmmc_peer_count(b) == 1);
    printf("a connector to an endpoint that does not listen: refused at once\n");

    VT_OK(vmmc_listen(b, on_accept, NULL));
    forged(b);

    /* A connector whose address of b names another secret, as if b had
     * taken the fabric address of an endpoint that closed: refused at
     * once, not taken as b's peer. */
    char stale[VMMC_ADDR_MAX + 1], stext[2 * VMMC_ADDR_MAX + 1], sv[32];
    VT_CHECK(vmmc_card_get(ba, "fsec", sv, sizeof sv));
    const char *at = strstr(ba, sv);
    VT_CHECK(at != NULL);
    snprintf(stale, sizeof stale, "%s", ba);
    stale[at - ba] = sv[0] == '0' ? '1' : '0';
    VT_OK(vmmc_addr_format(stale, bl, stext, sizeof stext));
    int sp0 = vmmc_peer_count(b);
    uint64_t no0 = vt_counter(b, "fabric.not_ours");
    st = child_status(spawn_child(argv[0], "stale", stext));
    VT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    VT_CHECK(vt_counter(b, "fabric.not_ours") > no0);
    VT_CHECK(vmmc_peer_count(b) == sp0);
    printf("a connector to an endpoint that closed, whose address another one has now: "
           "refused at once\n");

    /* A connector that closes: accepted, its data lands, it has left. */
    int n0 = vmmc_peer_count(b);
    pid_t pid = spawn_child(argv[0], "send", text);
    landed(b, region, "child");
    st = child_status(pid);
    VT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    VT_CHECK(vmmc_peer_count(b) == n0 + 1);
    double t0 = vt_now();
    while (vmmc_peer_alive(b, n0) == 1) {
        if (vt_now() - t0 > 20)
            VT_FAIL("the peer that closed is still alive");
        vmmc_wait(b, 10);
    }
    printf("a connector that closed: accepted, its data landed, reported left\n");

    /* A connector that is killed: reported dead once we talk to it. */
    memset(region, 0, 4096);
    pid = spawn_child(argv[0], "kill", text);
    landed(b, region, "child");
    st = child_status(pid);
    VT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    VT_CHECK(vmmc_peer_count(b) == n0 + 2);
    t0 = vt_now();
    while ((rc = vmmc_signal(b, n0 + 1)) == VMMC_OK) {
        if (vt_now() - t0 > 60)
            VT_FAIL("the killed peer is not reported dead");
        usleep(10000);
    }
    VT_CHECK(rc == VMMC_ERR_PEER_DEAD || rc == VMMC_ERR_PEER_UNREACHABLE);
    /* a send that timed out fails the peer through the progress thread */
    t0 = vt_now();
    while (vmmc_peer_alive(b, n0 + 1) != 0) {
        if (vt_now() - t0 > 20)
            VT_FAIL("the killed peer failed a send but is not reported dead");
        vmmc_wait(b, 10);
    }
    printf("a connector that was killed: reported dead (%s)\n", vmmc_last_error());
    t0 = vt_now();
    while (__atomic_load_n(&accepted, __ATOMIC_ACQUIRE) < 3 && vt_now() - t0 < 20)
        usleep(1000);
    VT_CHECK(accepted == 3); /* the hand-made one, and the two children */
    VT_OK(vmmc_ep_close(b));
    printf("t_fab_listen: ok\n");
    return 0;
}
