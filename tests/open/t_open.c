/* Open-world endpoints: addresses, connect, listen, and every refusal.
 *   - an address round-trips through vmmc_ep_addr/format/parse, short
 *     buffers say how much is needed;
 *   - malformed addresses (a list, then 20000 mutations of a good one) are
 *     refused by vmmc_connect and vmmc_addr_parse with VMMC_ERR_INVALID and
 *     never crash; what is accepted formats back unchanged;
 *   - connecting twice (or to oneself) gives the same handle; handles out of
 *     range are refused by every call that takes one;
 *   - an endpoint that does not listen refuses endpoints it does not know,
 *     from this process and from another one (this program re-executed),
 *     and counts them; once it listens it accepts them, with new handles
 *     announced to the accept callback;
 *   - an endpoint that closed: the first operation fails, it does not hang;
 *   - on shm, a control connection that says garbage, or HELLO with an
 *     address of another process, is closed and counted;
 *   - over udp, a refused handshake is answered with an authenticated
 *     refusal: the connector fails within half its peer timeout (not after
 *     it) with "refused: not listening"; a refusal with a bad tag, from
 *     another address, or after the peer took us, is ignored and counted.
 * Runs over shm, and over udp with VMMC_TRANSPORT=udp. */
#include <errno.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "core/core.h"
#include "core/ctl.h"
#include "transport/udp/crc32c.h"
#include "transport/udp/udp_int.h"
#include "transport/udp/wire.h"
#include "vtest.h"

extern char **environ;

/* Over udp, a refused connect must fail well within the peer timeout (it
 * is answered, not waited out): half of it, a generous bound. */
static double refusal_bound(void)
{
    return (double)vmmc_udp_settings()->peer_timeout_ns / 2e9;
}

/* A refused operation over udp: fast, and says why. */
static void udp_refused(int rc, double secs)
{
    VT_CHECK(rc == VMMC_ERR_PEER_DEAD);
    VT_CHECK(strstr(vmmc_last_error(), "refused: not listening") != NULL);
    if (secs >= refusal_bound())
        VT_FAIL("refused after %.2f s: the peer timeout was waited out", secs);
}

/* Re-executed as "child ADDR": an unrelated process that tries to import
 * "x" from ADDR. Exit 0: imported; 3: refused (unreachable or dead). */
static int child(const char *text)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_ep_open(NULL, &ep));
    int peer = vt_connect_text(ep, text);
    VT_CHECK(peer == 1);
    vmmc_proxy_t *px;
    double t0 = vt_now();
    int rc = vmmc_import(ep, peer, "x", 5000, &px);
    printf("child: import: %s (%s)\n", vmmc_strerror(rc), rc ? vmmc_last_error() : "");
    VT_CHECK(rc == VMMC_OK || rc == VMMC_ERR_PEER_UNREACHABLE || rc == VMMC_ERR_PEER_DEAD);
    if (rc != VMMC_OK && vt_remote())
        udp_refused(rc, vt_now() - t0);
    if (rc == VMMC_OK) {
        char probe[8] = "child";
        VT_OK(vmmc_send(px, 0, probe, sizeof probe, 0));
        VT_OK(vmmc_unimport(px));
    }
    VT_OK(vmmc_ep_close(ep));
    return rc == VMMC_OK ? 0 : 3;
}

static int run_child(const char *self, const char *addr)
{
    pid_t pid;
    char *argv[] = {(char *)self, "child", (char *)addr, NULL};
    VT_CHECK(posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0);
    int st;
    VT_CHECK(waitpid(pid, &st, 0) == pid);
    VT_CHECK(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Wait (bounded) until @what is at @region of @ep's memory. */
static void landed(vmmc_ep_t *ep, const char *region, const char *what)
{
    double t0 = vt_now();
    while (memcmp((const void *)region, what, strlen(what) + 1) != 0) {
        if (vt_now() - t0 > 10)
            VT_FAIL("'%s' did not land", what);
        vmmc_wait(ep, 10);
    }
}

static int accepted[8], naccepted;
static void on_accept(vmmc_ep_t *ep, int peer, void *arg)
{
    VT_CHECK(arg == (void *)ep);
    if (naccepted < 8)
        accepted[naccepted] = peer;
    __atomic_add_fetch(&naccepted, 1, __ATOMIC_RELEASE);
}

static void addresses(vmmc_ep_t *a)
{
    char addr[VMMC_ADDR_MAX + 1], text[2 * VMMC_ADDR_MAX + 1], back[VMMC_ADDR_MAX];
    size_t len = vt_ep_addr(a, addr);
    printf("address (%zu bytes): %s\n", len, addr);
    size_t small = 4;
    VT_STATUS(VMMC_ERR_TRUNCATED, vmmc_ep_addr(a, addr, &small));
    VT_CHECK(small == len);
    VT_OK(vmmc_addr_format(addr, len, text, sizeof text));
    VT_STATUS(VMMC_ERR_TRUNCATED, vmmc_addr_format(addr, len, text, len));
    size_t blen = sizeof back;
    VT_OK(vmmc_addr_parse(text, back, &blen));
    VT_CHECK(blen == len && !memcmp(back, addr, len));
    blen = 3;
    VT_STATUS(VMMC_ERR_TRUNCATED, vmmc_addr_parse(text, back, &blen));
    VT_CHECK(blen == len);
    VT_STATUS(VMMC_ERR_INVALID, vmmc_addr_parse(NULL, back, &blen));
}

static void malformed(vmmc_ep_t *f)
{
    static const char *bad[] = {
        "", ";", "host=abc;", "host=abc;pid=12;", "host=ab c;pid=1;shm=vmmc.1.a;",
        "host=abc;pid=0;shm=vmmc.1.a;", "host=abc;pid=1;shm=vmmc.1.a",
        "host=abc;host=abd;pid=1;shm=vmmc.1.a;", "host=abc;pid=1;shm=/etc/passwd;",
        "host=abc;pid=1;shm=vmmc..a;", "host=abc;pid=99999999;shm=vmmc.1.a;",
        "host=abc;pid=1;udp=1.2.3.4:99999;utok=00112233445566778899aabbccddeeff;uid=01234567;",
        "host=abc;pid=1;udp=1.2.3.4:80;", "host=abc;pid=1;udp=1.2.3.4:80;utok=00;uid=01234567;",
        "host=abc;pid=1;udp=300.2.3.4:80;utok=00112233445566778899aabbccddeeff;uid=01234567;",
        "host=abc;pid=1;udp=[::1:80;utok=00112233445566778899aabbccddeeff;uid=01234567;",
        "evil=1;host=abc;pid=1;shm=vmmc.1.a;", "host=abc;pid=1;shm=vmmc.1.a;\xff",
        "host=ABC;pid=1;shm=vmmc.1.a;", "=x;host=abc;pid=1;shm=vmmc.1.a;", "host=abc;pid=1;;shm=vmmc.1.a;",
    };
    int before = vmmc_peer_count(f), h;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char out[VMMC_ADDR_MAX];
        size_t len = sizeof out;
        VT_STATUS(VMMC_ERR_INVALID, vmmc_connect(f, bad[i], strlen(bad[i]), &h));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_addr_parse(bad[i], out, &len));
    }
    char longer[700];
    memset(longer, 'a', sizeof longer);
    memcpy(longer, "host=", 5);
    longer[sizeof longer - 1] = ';';
    VT_STATUS(VMMC_ERR_INVALID, vmmc_connect(f, longer, sizeof longer, &h));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_connect(f, NULL, 10, &h));
    VT_CHECK(vmmc_peer_count(f) == before);
    /* Mutations of a good address: each is refused, or is a well-formed
     * address that formats back to itself. */
    char good[VMMC_ADDR_MAX + 1];
    size_t glen = vt_ep_addr(f, good);
    unsigned long long seed = 0x5eed;
    int refused = 0, taken = 0;
    for (int i = 0; i < 20000; i++) {
        char m[VMMC_ADDR_MAX];
        size_t len = glen;
        memcpy(m, good, glen);
        int edits = 1 + (int)(vt_rand(&seed) % 3);
        for (int e = 0; e < edits; e++) {
            unsigned long long r = vt_rand(&seed);
            size_t at = (size_t)(r >> 8) % len;
            switch (r % 4) {
            case 0: m[at] = (char)(vt_rand(&seed) & 0xff); break;
            case 1: len = at ? at : 1; break;
            case 2: m[at] = ";=.:0a"[vt_rand(&seed) % 6]; break;
            default: /* duplicate a prefix at the end */
                if (len + at < sizeof m) {
                    memcpy(m + len, m, at);
                    len += at;
                }
            }
        }
        int rc = vmmc_connect(f, m, len, &h);
        if (rc == VMMC_OK) {
            char text[2 * VMMC_ADDR_MAX + 1];
            VT_OK(vmmc_addr_format(m, len, text, sizeof text));
            VT_CHECK(strlen(text) == len && !memcmp(text, m, len));
            taken++;
        } else {
            VT_CHECK(rc == VMMC_ERR_INVALID);
            refused++;
        }
    }
    printf("mutated addresses: %d refused, %d well formed (handles never used)\n", refused, taken);
    VT_CHECK(refused > 10000);
}

static void handles(vmmc_ep_t *a, vmmc_ep_t *b)
{
    char aa[VMMC_ADDR_MAX + 1], ba[VMMC_ADDR_MAX + 1], got[VMMC_ADDR_MAX];
    size_t al = vt_ep_addr(a, aa), bl = vt_ep_addr(b, ba);
    int h;
    VT_CHECK(vmmc_peer_count(a) == 1 && vmmc_rank(a) == 0 && vmmc_size(a) == 1);
    VT_OK(vmmc_connect(a, aa, al, &h));
    VT_CHECK(h == 0); /* itself */
    VT_OK(vmmc_connect(a, ba, bl, &h));
    VT_CHECK(h == 1);
    VT_OK(vmmc_connect(a, ba, bl, &h));
    VT_CHECK(h == 1);
    VT_CHECK(vmmc_peer_count(a) == 2);
    size_t gl = sizeof got;
    VT_OK(vmmc_peer_addr(a, 1, got, &gl));
    VT_CHECK(gl == bl && !memcmp(got, ba, bl));
    gl = 2;
    VT_STATUS(VMMC_ERR_TRUNCATED, vmmc_peer_addr(a, 1, got, &gl));
    VT_CHECK(gl == bl);
    /* Out of range, in every call that takes a handle. */
    vmmc_proxy_t *px;
    gl = sizeof got;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_peer_addr(a, 2, got, &gl));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_peer_addr(a, -1, got, &gl));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_import(a, 2, "x", 10, &px));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_import(a, -5, "x", 10, &px));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_signal(a, 1000));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_peer_alive(a, 7));
    static char buf[64];
    int imp = 3;
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_IMPORTERS, .name = "bad.importers",
                              .addr = buf, .length = sizeof buf, .importers = &imp,
                              .num_importers = 1};
    vmmc_export_t *ex;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_export(a, &p, &ex));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_peer_count(NULL));
}

/* b does not listen: a stranger (@r here, then another process) is refused
 * and counted; after vmmc_listen both are accepted and announced. */
static void listening(const char *self, vmmc_ep_t *a, vmmc_ep_t *b, vmmc_ep_t *r)
{
    char *region;
    VT_OK(vmmc_mem_alloc(b, 4096, (void **)&region));
    vmmc_export_params_t p = {.name = "x", .addr = region, .length = 4096};
    vmmc_export_t *ex;
    VT_OK(vmmc_export(b, &p, &ex));
    char ba[VMMC_ADDR_MAX + 1];
    size_t bl = vt_ep_addr(b, ba);
    uint64_t refused0 = vt_counter(b, "connections_refused");
    int h;
    VT_OK(vmmc_connect(r, ba, bl, &h));
    vmmc_proxy_t *px;
    double t0 = vt_now();
    int rc = vmmc_import(r, h, "x", 5000, &px);
    printf("stranger in this process: %s after %.3f s (%s)\n", vmmc_strerror(rc), vt_now() - t0,
           vmmc_last_error());
    VT_CHECK(rc == VMMC_ERR_PEER_UNREACHABLE || rc == VMMC_ERR_PEER_DEAD);
    if (vt_remote()) {
        udp_refused(rc, vt_now() - t0);
        VT_CHECK(vt_counter(b, "udp.refusals_sent") > 0);
        VT_CHECK(vt_counter(r, "udp.refused_by_peer") == 1);
        /* And every later operation to it, at once. */
        VT_CHECK(vmmc_signal(r, h) == VMMC_ERR_PEER_DEAD);
        VT_CHECK(vmmc_import(r, h, "x", 5000, &px) == VMMC_ERR_PEER_DEAD);
        VT_CHECK(strstr(vmmc_last_error(), "refused: not listening") != NULL);
    }
    VT_CHECK(vt_counter(b, "connections_refused") > refused0);
    uint64_t refused1 = vt_counter(b, "connections_refused");
    VT_CHECK(run_child(self, ba) == 3);
    VT_CHECK(vt_counter(b, "connections_refused") > refused1);
    VT_CHECK(vmmc_peer_count(b) == 1 && naccepted == 0);

    VT_OK(vmmc_listen(b, on_accept, b));
    VT_OK(vmmc_connect(a, ba, bl, &h));
    VT_OK(vmmc_import(a, h, "x", 5000, &px));
    VT_OK(vmmc_send(px, 0, "from a", 7, 0));
    landed(b, region, "from a");
    VT_CHECK(vmmc_peer_count(b) == 2);
    char aa[VMMC_ADDR_MAX + 1], got[VMMC_ADDR_MAX];
    size_t al = vt_ep_addr(a, aa), gl = sizeof got;
    VT_OK(vmmc_peer_addr(b, 1, got, &gl));
    VT_CHECK(gl == al && !memcmp(got, aa, al));
    VT_CHECK(run_child(self, ba) == 0);
    landed(b, region, "child");
    t0 = vt_now();
    while (__atomic_load_n(&naccepted, __ATOMIC_ACQUIRE) < 2 && vt_now() - t0 < 10)
        usleep(1000);
    VT_CHECK(naccepted == 2 && accepted[0] == 1 && accepted[1] == 2);
    VT_CHECK(vmmc_peer_count(b) == 3);
    VT_OK(vmmc_unimport(px));
}

/* An endpoint that closed: connecting is lazy (fine), the first operation
 * fails with the peer's error instead of hanging. Over a fabric provider
 * without connections (udp;ofi_rxd) nothing tells a datagram's sender that
 * nobody listens: the import ends at its deadline (docs/fabric.md). */
static void dead_endpoint(vmmc_ep_t *a)
{
    const char *prov = getenv("VMMC_FABRIC_PROVIDER");
    const char *tr = getenv("VMMC_TRANSPORT");
    int conless = prov && strstr(prov, "rxd") && tr && !strcmp(tr, "fabric");
    vmmc_ep_t *d;
    VT_OK(vmmc_ep_open(NULL, &d));
    char da[VMMC_ADDR_MAX + 1];
    size_t dl = vt_ep_addr(d, da);
    VT_OK(vmmc_ep_close(d));
    int h;
    VT_OK(vmmc_connect(a, da, dl, &h));
    vmmc_proxy_t *px;
    double t0 = vt_now();
    int rc = vmmc_import(a, h, "x", 5000, &px);
    printf("import from a closed endpoint: %s after %.2f s (%s)\n", vmmc_strerror(rc),
           vt_now() - t0, vmmc_last_error());
    VT_CHECK(rc == VMMC_ERR_PEER_DEAD || rc == VMMC_ERR_PEER_UNREACHABLE ||
             (conless && rc == VMMC_ERR_TIMEOUT));
    rc = vmmc_import(a, h, "x", 5000, &px); /* and again: still an error */
    VT_CHECK(rc == VMMC_ERR_PEER_DEAD || rc == VMMC_ERR_PEER_UNREACHABLE ||
             (conless && rc == VMMC_ERR_TIMEOUT));
}

/* Raw connections to @b's control socket: garbage, then HELLO with an
 * address of another process. Each is closed and counted. */
static void hostile_hello(vmmc_ep_t *b)
{
    char ba[VMMC_ADDR_MAX + 1], name[96];
    vt_ep_addr(b, ba);
    VT_CHECK(vmmc_card_get(ba, "shm", name, sizeof name));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "%s", name);
    socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    struct {
        vmmc_ctl_msg_t m;
        char addr[VMMC_ADDR_MAX];
    } hello;
    for (int round = 0; round < 3; round++) {
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        VT_CHECK(fd >= 0);
        VT_CHECK(connect(fd, (struct sockaddr *)&sa, sl) == 0);
        uint64_t bad0 = vt_counter(b, "control_messages_dropped");
        uint64_t ref0 = vt_counter(b, "connections_refused");
        size_t len;
        memset(&hello, 0, sizeof hello);
        hello.m.magic = VMMC_CTL_MAGIC;
        hello.m.type = CTL_HELLO;
        if (round == 0) { /* garbage */
            memset(&hello, 0xA5, 40);
            len = 40;
        } else if (round == 1) { /* a well-formed address of pid 1 */
            len = sizeof hello.m + (size_t)snprintf(hello.addr, sizeof hello.addr,
                                                    "host=%s;pid=1;shm=vmmc.1.abc;", b->host_id);
        } else { /* our pid, but a malformed address */
            len = sizeof hello.m + (size_t)snprintf(hello.addr, sizeof hello.addr,
                                                    "host=%s;pid=%d;shm=../x;", b->host_id,
                                                    (int)getpid());
        }
        VT_CHECK(send(fd, &hello, len, 0) == (ssize_t)len);
        struct pollfd pf = {fd, POLLIN, 0};
        VT_CHECK(poll(&pf, 1, 10000) == 1);
        char c;
        VT_CHECK(recv(fd, &c, 1, 0) == 0); /* closed on us, nothing answered */
        close(fd);
        if (round == 1)
            VT_CHECK(vt_counter(b, "connections_refused") > ref0);
        else
            VT_CHECK(vt_counter(b, "control_messages_dropped") > bad0);
    }
    printf("hostile HELLOs: closed and counted\n");
}

/* Handshakes made by hand over udp to @b (a stranger that knows b's
 * address, as anyone given it does). @mode: 0 good, 1 tag made with another
 * secret, 2 its address names another port, 3 a malformed address. Returns
 * the socket (the stranger's source address stays bound). */
static int udp_hello(vmmc_ep_t *b, int mode, int fd)
{
    char ba[VMMC_ADDR_MAX + 1], v[96], ip[96];
    vt_ep_addr(b, ba);
    VT_CHECK(vmmc_card_get(ba, "udp", v, sizeof v));
    char *colon = strrchr(v, ':');
    *colon = 0;
    snprintf(ip, sizeof ip, "%s", v);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    VT_CHECK(inet_pton(AF_INET, ip, &to.sin_addr) == 1);
    uint8_t bsec[16], sec[16];
    VT_CHECK(vmmc_card_get(ba, "utok", v, sizeof v));
    for (int i = 0; i < 16; i++) {
        unsigned x;
        VT_CHECK(sscanf(v + 2 * i, "%2x", &x) == 1);
        bsec[i] = (uint8_t)x;
    }
    VT_CHECK(vmmc_card_get(ba, "uid", v, sizeof v));
    uint32_t buid = (uint32_t)strtoul(v, NULL, 16), uid = 0x5eed0000u + (uint32_t)mode;
    if (fd < 0) {
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr = to.sin_addr};
        VT_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&me, sizeof me) == 0);
    }
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    VT_CHECK(getsockname(fd, (struct sockaddr *)&me, &ml) == 0);
    unsigned long long seed = 0xfeed + (unsigned long long)mode;
    for (int i = 0; i < 16; i++)
        sec[i] = (uint8_t)vt_rand(&seed);
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", sec[i]);
    char addr[VMMC_ADDR_MAX];
    int n = snprintf(addr, sizeof addr, "host=abc;pid=%d;udp=%s:%u;utok=%s;uid=%08x;%s",
                     (int)getpid(), ip, ntohs(me.sin_port) + (mode == 2), hex, uid,
                     mode == 3 ? "evil=1;" : "");
    vmmc_udp_hdr_t h;
    memset(&h, 0, sizeof h);
    h.type = VMMC_UDP_T_DATA;
    h.flags = VMMC_UDP_F_FIRST | VMMC_UDP_F_LAST;
    h.kind = K_HELLO;
    h.wnd = 64;
    h.src = uid;
    h.length = (uint32_t)n;
    h.seq = 1;
    vmmc_udp_key_t k;
    if (mode == 1)
        sec[0] ^= 1; /* the tag is made with a secret its address does not give */
    vmmc_udp_key_derive(&k, sec, uid, bsec, buid);
    uint8_t dg[VMMC_UDP_HDR_SIZE + VMMC_ADDR_MAX];
    unsigned hl = vmmc_udp_encode(dg, &h, vmmc_crc32c(0, addr, (size_t)n), &k);
    memcpy(dg + hl, addr, (size_t)n);
    VT_CHECK(sendto(fd, dg, hl + (size_t)n, 0, (struct sockaddr *)&to, sizeof to) ==
             (ssize_t)(hl + (size_t)n));
    return fd;
}

/* Wait (bounded) until counter @name of @ep exceeds @was. */
static void counted(vmmc_ep_t *ep, const char *name, uint64_t was)
{
    double t0 = vt_now();
    while (vt_counter(ep, name) <= was) {
        if (vt_now() - t0 > 10)
            VT_FAIL("%s stayed at %llu", name, (unsigned long long)was);
        usleep(1000);
    }
}

/* b does not listen: a good handshake is refused (counted by the core),
 * forged ones by the transport; later (listening) a good one is accepted. */
static void udp_strangers(vmmc_ep_t *b, int listening_now)
{
    int fds[4];
    if (!listening_now) {
        uint64_t r0 = vt_counter(b, "connections_refused");
        fds[0] = udp_hello(b, 0, -1);
        counted(b, "connections_refused", r0);
        for (int mode = 1; mode <= 3; mode++) {
            uint64_t h0 = vt_counter(b, "udp.hello_refused");
            fds[mode] = udp_hello(b, mode, -1);
            counted(b, "udp.hello_refused", h0);
        }
        for (int i = 0; i < 4; i++)
            close(fds[i]);
        printf("udp handshakes by hand: refused (not listening), and forged ones counted\n");
        return;
    }
    int before = vmmc_peer_count(b), acc = __atomic_load_n(&naccepted, __ATOMIC_ACQUIRE);
    /* Forged ones are refused even by a listening endpoint, and add no peer. */
    for (int mode = 1; mode <= 3; mode++) {
        uint64_t h0 = vt_counter(b, "udp.hello_refused");
        close(udp_hello(b, mode, -1));
        counted(b, "udp.hello_refused", h0);
    }
    VT_CHECK(vmmc_peer_count(b) == before);
    int fd = udp_hello(b, 0, -1);
    double t0 = vt_now();
    while (vmmc_peer_count(b) == before && vt_now() - t0 < 10)
        usleep(1000);
    VT_CHECK(vmmc_peer_count(b) == before + 1);
    while (__atomic_load_n(&naccepted, __ATOMIC_ACQUIRE) == acc && vt_now() - t0 < 10)
        usleep(1000);
    VT_CHECK(naccepted == acc + 1);
    udp_hello(b, 0, fd); /* the same again: a duplicate, no new peer */
    usleep(200000);
    VT_CHECK(vmmc_peer_count(b) == before + 1);
    close(fd);
    printf("udp handshake by hand: accepted once listening (peer %d)\n", before);
}

/* A fake udp endpoint: a plain socket on @a's address, with a secret of its
 * own, that @a connects to. It reads @a's handshake (a's wire id and secret,
 * from the address it carries) to answer with what only a peer holding the
 * keys can make. */
typedef struct fake {
    int fd, h;
    struct sockaddr_in me, to; /* its address; a's */
    uint8_t sec[16], asec[16];
    uint32_t uid, auid;
} fake_t;

static void fake_open(vmmc_ep_t *a, fake_t *f, uint32_t uid)
{
    char aa[VMMC_ADDR_MAX + 1], v[96], hex[33], card[VMMC_ADDR_MAX];
    vt_ep_addr(a, aa);
    VT_CHECK(vmmc_card_get(aa, "udp", v, sizeof v));
    *strrchr(v, ':') = 0;
    memset(f, 0, sizeof *f);
    f->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    f->me.sin_family = AF_INET;
    VT_CHECK(inet_pton(AF_INET, v, &f->me.sin_addr) == 1);
    VT_CHECK(f->fd >= 0 && bind(f->fd, (struct sockaddr *)&f->me, sizeof f->me) == 0);
    socklen_t ml = sizeof f->me;
    VT_CHECK(getsockname(f->fd, (struct sockaddr *)&f->me, &ml) == 0);
    unsigned long long seed = uid;
    for (int i = 0; i < 16; i++) {
        f->sec[i] = (uint8_t)vt_rand(&seed);
        snprintf(hex + 2 * i, 3, "%02x", f->sec[i]);
    }
    f->uid = uid;
    int n = snprintf(card, sizeof card, "host=abc;pid=%d;udp=%s:%u;utok=%s;uid=%08x;",
                     (int)getpid(), v, ntohs(f->me.sin_port), hex, uid);
    VT_OK(vmmc_connect(a, card, (size_t)n, &f->h));
    VT_OK(vmmc_signal(a, f->h)); /* the first operation connects: a's handshake comes */
    struct pollfd pf = {f->fd, POLLIN, 0};
    VT_CHECK(poll(&pf, 1, 10000) == 1);
    static uint8_t dg[VMMC_UDP_MAX_DGRAM];
    socklen_t fl = sizeof f->to;
    ssize_t r = recvfrom(f->fd, dg, sizeof dg, 0, (struct sockaddr *)&f->to, &fl);
    vmmc_udp_hdr_t h;
    VT_CHECK(r > 0 && vmmc_udp_decode(dg, (size_t)r, &h) == VMMC_UDP_OK);
    VT_CHECK(h.type == VMMC_UDP_T_DATA && h.kind == K_HELLO && h.seq == 1 &&
             h.length < VMMC_ADDR_MAX);
    char hello[VMMC_ADDR_MAX + 1];
    memcpy(hello, dg + h.hlen, h.length);
    hello[h.length] = 0;
    struct sockaddr_storage ss;
    socklen_t sl;
    VT_CHECK(vmmc_udp__parse_card(hello, &ss, &sl, f->asec, &f->auid) == 0 && h.src == f->auid);
}

/* A control datagram of @type from the fake to a, sent from @fd, its tag
 * made with the right key or (@bad_key) with a secret a does not know. */
static void fake_send(const fake_t *f, int fd, uint8_t type, uint64_t counter, int bad_key)
{
    vmmc_udp_hdr_t h;
    memset(&h, 0, sizeof h);
    h.type = type;
    h.wnd = 64;
    h.src = f->uid;
    h.offset = counter;
    uint8_t sec[16], dg[VMMC_UDP_HDR_SIZE];
    memcpy(sec, f->sec, sizeof sec);
    sec[0] ^= (uint8_t)!!bad_key;
    vmmc_udp_key_t k;
    vmmc_udp_key_derive(&k, sec, f->uid, f->asec, f->auid);
    unsigned hl = vmmc_udp_encode(dg, &h, 0, &k);
    VT_CHECK(sendto(fd, dg, hl, 0, (const struct sockaddr *)&f->to, sizeof f->to) ==
             (ssize_t)hl);
}

/* Refusals made by hand: only one made with the key, from the peer's
 * address, before the peer took anything of us, ends the peer. */
static void udp_refusals(vmmc_ep_t *a)
{
    fake_t f, g;
    fake_open(a, &f, 0x5eedf00du);
    int other = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in oa = {.sin_family = AF_INET, .sin_addr = f.me.sin_addr};
    VT_CHECK(other >= 0 && bind(other, (struct sockaddr *)&oa, sizeof oa) == 0);
    uint64_t auth0 = vt_counter(a, "udp.drop_auth"), unk0 = vt_counter(a, "udp.drop_unknown_peer");
    uint64_t ref0 = vt_counter(a, "udp.refused_by_peer");
    fake_send(&f, f.fd, VMMC_UDP_T_REFUSE, 1, 1); /* forged: not made with the key */
    counted(a, "udp.drop_auth", auth0);
    fake_send(&f, other, VMMC_UDP_T_REFUSE, 1, 0); /* from another address */
    counted(a, "udp.drop_unknown_peer", unk0);
    VT_CHECK(vmmc_peer_alive(a, f.h) == 1);
    VT_CHECK(vt_counter(a, "udp.refused_by_peer") == ref0);
    double t0 = vt_now();
    fake_send(&f, f.fd, VMMC_UDP_T_REFUSE, 1, 0); /* the peer's own */
    while (vmmc_peer_alive(a, f.h) == 1 && vt_now() - t0 < 10)
        usleep(1000);
    VT_CHECK(vmmc_peer_alive(a, f.h) == 0);
    VT_CHECK(vt_counter(a, "udp.refused_by_peer") == ref0 + 1);
    vmmc_proxy_t *px;
    udp_refused(vmmc_import(a, f.h, "x", 5000, &px), 0);
    /* A peer that answered us (an ACK) took our handshake: a refusal after
     * that is old news (a replay), ignored. */
    fake_open(a, &g, 0x5eedf00eu);
    uint64_t rep0 = vt_counter(a, "udp.drop_replay");
    fake_send(&g, g.fd, VMMC_UDP_T_ACK, 1, 0);
    fake_send(&g, g.fd, VMMC_UDP_T_REFUSE, 2, 0);
    counted(a, "udp.drop_replay", rep0);
    VT_CHECK(vmmc_peer_alive(a, g.h) == 1);
    VT_CHECK(vt_counter(a, "udp.refused_by_peer") == ref0 + 1);
    close(other);
    close(f.fd);
    close(g.fd);
    printf("udp refusals by hand: forged, misplaced and late ones ignored; the real one "
           "ends the peer\n");
}

int main(int argc, char **argv)
{
    static const char *vars[] = {"VMMC_LAUNCHER", "VMMC_BOOTSTRAP", "VMMC_RANK", "VMMC_SIZE",
                                 "PMIX_RANK", "PMIX_NAMESPACE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    if (argc == 3 && !strcmp(argv[1], "child"))
        return child(argv[2]);
    int udp = vt_remote();
    vmmc_ep_t *a, *b, *r, *f;
    VT_OK(vmmc_ep_open(NULL, &a));
    VT_OK(vmmc_ep_open(NULL, &b));
    VT_OK(vmmc_ep_open(NULL, &r));
    VT_OK(vmmc_ep_open(NULL, &f));
    addresses(a);
    malformed(f);
    handles(a, b);
    if (!udp)
        hostile_hello(b);
    else
        udp_strangers(b, 0);
    listening(argv[0], a, b, r);
    if (udp) {
        udp_strangers(b, 1);
        udp_refusals(a);
    }
    dead_endpoint(a);
    VT_OK(vmmc_ep_close(f));
    VT_OK(vmmc_ep_close(r));
    VT_OK(vmmc_ep_close(b));
    VT_OK(vmmc_ep_close(a));
    printf("t_open (%s): ok\n", udp ? "udp" : "shm");
    return 0;
}
