/* The provider's compact address (ofi_addr.c) and address vectors
 * (ofi_av.c), built into this test with a stand-in domain whose av_open is
 * vofi_av_open, so the AV is driven through libfabric's public inline calls
 * (fi_av_open, fi_av_insert, ...) exactly as an application drives it.
 *
 * Names are packed from real endpoints (vmmc_ep_open: shm and udp keys; run
 * with VMMC_UDP_ADDR=::1 for IPv6) and from hand-made addresses. Every
 * change of a byte, every truncation and every hostile field (with the
 * checksum recomputed, as a hostile writer would) must be refused. */
#include <pthread.h>
#include <stdatomic.h>

#include "t_ofi_addr.h"

/* What the provider's ofi_init.c gives: the log. Quiet unless asked. */
static _Atomic int warnings;
void vofi_warn(const char *fmt, ...)
{
    atomic_fetch_add(&warnings, 1);
    if (getenv("T_OFI_VERBOSE")) {
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
}
void vofi_info(const char *fmt, ...) {}

void reseal(uint8_t *p) /* CRC-16/CCITT over bytes 0..60 */
{
    uint16_t c = 0xffff;
    for (int i = 0; i < O_SUM; i++) {
        c ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            c = (uint16_t)(c & 0x8000 ? (c << 1) ^ 0x1021 : c << 1);
    }
    p[O_SUM] = (uint8_t)(c >> 8);
    p[O_SUM + 1] = (uint8_t)c;
}

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static size_t pack_str(const char *text, uint8_t *out)
{
    size_t n = VOFI_MAX_EP_ADDR;
    int rc = vofi_addr_pack(text, strlen(text), out, &n);
    if (rc)
        VT_FAIL("pack of %s: %d", text, rc);
    VT_CHECK(n == PK && n <= VOFI_MAX_EP_ADDR && n <= FI_NAME_MAX);
    return n;
}

/* unpack into a NUL-terminated string; the status. */
static int unpack_str(const uint8_t *in, size_t inlen, const char *own, char *out)
{
    size_t n = VMMC_ADDR_MAX;
    int rc = vofi_addr_unpack(in, inlen, own, own ? strlen(own) : 0, out, &n);
    if (rc == 0) {
        VT_CHECK(n > 0 && n < VMMC_ADDR_MAX);
        out[n] = 0;
        uint8_t chk[VMMC_ADDR_MAX];
        size_t cl = sizeof chk;
        VT_OK(vmmc_addr_parse(out, chk, &cl)); /* always a valid vmmc address */
    }
    return rc;
}

static void ep_text(vmmc_ep_t *ep, char *out)
{
    size_t n = VMMC_ADDR_MAX - 1;
    VT_OK(vmmc_ep_addr(ep, out, &n));
    out[n] = 0;
}

/* ---- pack / unpack ---------------------------------------------------- */

static void round_trip(const char *a, const char *own)
{
    uint8_t pk[VOFI_MAX_EP_ADDR];
    char back[VMMC_ADDR_MAX];
    pack_str(a, pk);
    VT_CHECK(pk[O_LEN] == PK && pk[O_VER] == 1);
    VT_CHECK(unpack_str(pk, PK, own, back) == 0);
    if (strcmp(a, back))
        VT_FAIL("round trip\n  %s\n  %s", a, back);
}

/* Another host, or no own address: the host is the hash's 16 hex digits,
 * and everything after it is exact. */
static void synthetic_host(const char *a, const char *own)
{
    uint8_t pk[VOFI_MAX_EP_ADDR];
    char back[VMMC_ADDR_MAX], want[VMMC_ADDR_MAX];
    pack_str(a, pk);
    VT_CHECK(unpack_str(pk, PK, own, back) == 0);
    const char *semi = strchr(a, ';');
    snprintf(want, sizeof want, "host=%016llx%s", (unsigned long long)fnv(a + 5, (size_t)(semi - a - 5)),
             semi);
    if (strcmp(want, back))
        VT_FAIL("synthetic host\n  %s\n  %s", want, back);
    VT_CHECK(strncmp(back, a, (size_t)(semi - a + 1)) != 0);
    if (own) /* never this host's */
        VT_CHECK(strncmp(back, own, (size_t)(strchr(own, ';') - own + 1)) != 0);
    uint8_t again[VOFI_MAX_EP_ADDR]; /* packing it gives the same name */
    pack_str(back, again);
    VT_CHECK(!memcmp(again, pk, PK));
}

static void refuse_pack(const char *a, int want)
{
    uint8_t pk[VOFI_MAX_EP_ADDR];
    size_t n = sizeof pk;
    int rc = vofi_addr_pack(a, strlen(a), pk, &n);
    if (rc != want)
        VT_FAIL("pack of %s: %d, expected %d", a, rc, want);
}

static void refuse_unpack(const uint8_t *pk, size_t len, const char *own, const char *what)
{
    char back[VMMC_ADDR_MAX];
    int rc = unpack_str(pk, len, own, back);
    if (rc != -FI_EINVAL)
        VT_FAIL("%s: unpack gave %d (%s)", what, rc, rc ? "" : back);
}

static void test_pack(const char *own, const char *other_ep)
{
    const char *tok = "00112233445566778899aabbccddeeff";
    char a[VMMC_ADDR_MAX], host[128];
    snprintf(host, sizeof host, "%.*s", (int)(strchr(own, ';') - own - 5), own + 5);

    round_trip(own, own);
    round_trip(other_ep, own);
    synthetic_host(own, NULL);
    /* hand-made ones, on this host and on another */
    const char *forms[] = {
        "pid=77;shm=vmmc.77.1f;udp=[2001:db8::1]:50116;utok=%s;uid=0000abcd;",
        "pid=4194304;udp=10.0.0.1:1;utok=%s;uid=ffffffff;ulo=1;",
        "pid=1;shm=vmmc.1.ffffffffffffffff;",
        "pid=2;shm=vmmc.2.0;udp=[::]:65535;utok=%s;uid=00000000;",
        "pid=3;udp=[::ffff:1.2.3.4]:9;utok=%s;uid=12345678;",
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char rest[300];
        snprintf(rest, sizeof rest, forms[i], tok);
        snprintf(a, sizeof a, "host=%s;%s", host, rest);
        round_trip(a, own);
        snprintf(a, sizeof a, "host=0123abcd-42;%s", rest);
        synthetic_host(a, own);
        round_trip(a, a); /* that host's own view */
    }
    /* synthetic hosts whose hash starts with zero digits */
    snprintf(a, sizeof a, "host=000000000000abcd;pid=5;shm=vmmc.5.1;");
    round_trip(a, own);
    round_trip(a, NULL);
    snprintf(a, sizeof a, "host=0000000000000000;pid=5;shm=vmmc.5.1;");
    round_trip(a, own);
    /* Forms the packed layout cannot rebuild: refused, never changed. */
    snprintf(a, sizeof a, "host=%s;pid=77;shm=vmmc.77.0f;", host); /* leading zero */
    refuse_pack(a, -FI_EINVAL);
    snprintf(a, sizeof a, "host=%s;pid=77;shm=vmmc.78.1f;", host); /* another pid */
    refuse_pack(a, -FI_EINVAL);
    snprintf(a, sizeof a, "host=%s;pid=77;shm=vmmc.77.1ffffffffffffffff;", host); /* 17 digits */
    refuse_pack(a, -FI_EINVAL);
    snprintf(a, sizeof a, "pid=77;host=%s;shm=vmmc.77.1f;", host); /* order */
    refuse_pack(a, -FI_EINVAL);
    snprintf(a, sizeof a, "host=%s;pid=77;udp=10.0.0.1:080;utok=%s;uid=0000abcd;", host, tok);
    refuse_pack(a, -FI_EINVAL);
    snprintf(a, sizeof a, "host=%s;pid=77;udp=[2001:DB8::1]:80;utok=%s;uid=0000abcd;", host, tok);
    refuse_pack(a, -FI_EINVAL); /* not as inet_ntop writes it */
    snprintf(a, sizeof a, "host=%s;pid=77;udp=[::1]:80;utok=%s;uid=0000abcd;ulo=1;", host, tok);
    refuse_pack(a, -FI_EINVAL); /* ulo with IPv6: never written */
    snprintf(a, sizeof a, "host=%s;pid=77;shm=vmmc.77.1f;utok=%s;", host, tok);
    refuse_pack(a, -FI_EINVAL); /* utok without udp */
    snprintf(a, sizeof a, "host=%s;pid=77;shm=vmmc.77.1f;frob=1;", host);
    refuse_pack(a, -FI_EINVAL); /* a key no transport has */
    refuse_pack("host=ab;pid=1;", -FI_EINVAL);
    refuse_pack("", -FI_EINVAL);
    VT_CHECK(vofi_addr_pack(NULL, 5, (uint8_t[64]){0}, &(size_t){64}) == -FI_EINVAL);
    VT_CHECK(vofi_addr_pack("host=ab;pid=1;\0shm=", 19, (uint8_t[64]){0}, &(size_t){64}) ==
             -FI_EINVAL);
    size_t small = 10;
    uint8_t pk[VOFI_MAX_EP_ADDR];
    VT_CHECK(vofi_addr_pack(own, strlen(own), pk, &small) == -FI_ETOOSMALL && small == PK);
    small = 0;
    VT_CHECK(vofi_addr_pack(own, strlen(own), NULL, &small) == -FI_ETOOSMALL && small == PK);
    /* unpack: too small an output says the size */
    pack_str(own, pk);
    char back[VMMC_ADDR_MAX];
    size_t bl = 20;
    VT_CHECK(vofi_addr_unpack(pk, PK, own, strlen(own), back, &bl) == -FI_ETOOSMALL &&
             bl == strlen(own));
}

/* Every changed byte, truncation and extension of a real name; every
 * hostile field behind a valid checksum. */
static void test_hostile(const char *own)
{
    uint8_t pk[VOFI_MAX_EP_ADDR + 1], bad[VOFI_MAX_EP_ADDR + 1];
    char what[64];
    pack_str(own, pk);
    int flags = pk[O_FLAGS];
    VT_CHECK(flags & F_SHM && flags & F_UTOK && flags & F_UID);
    for (int i = 0; i < PK; i++)
        for (int v = 0; v < 256; v++) {
            if (v == pk[i])
                continue;
            memcpy(bad, pk, PK);
            bad[i] = (uint8_t)v;
            snprintf(what, sizeof what, "byte %d = 0x%02x", i, v);
            refuse_unpack(bad, PK, own, what);
        }
    for (size_t n = 0; n < PK; n++) {
        snprintf(what, sizeof what, "cut to %zu bytes", n);
        refuse_unpack(pk, n, own, what);
    }
    memcpy(bad, pk, PK);
    bad[PK] = 0;
    refuse_unpack(bad, PK + 1, own, "one byte more");
    VT_CHECK(vofi_addr_unpack(NULL, PK, own, strlen(own), (char[512]){0}, &(size_t){512}) ==
             -FI_EINVAL);

    /* hostile: each field out of its range, checksum made right */
    struct { int off, val; const char *what; } h[] = {
        {O_LEN, PK - 1, "length byte"},       {O_VER, 2, "version"},
        {O_PID, 0, "pid 0"},                  {O_FLAGS, flags | 0x40, "reserved flag"},
        {O_FLAGS, flags | F_UDP4 | F_UDP6, "udp4 and udp6"},
        {O_FLAGS, flags & ~F_UTOK, "udp without utok"},
        {O_FLAGS, flags & ~F_UID, "udp without uid"},
        {O_FLAGS, F_UTOK | F_UID, "no transport"},
        {O_FLAGS, (flags & ~(F_UDP4 | F_UDP6)) | F_ULO, "ulo without udp"},
        {O_FLAGS, F_SHM, "udp fields set, udp absent"},
    };
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
        memcpy(bad, pk, PK);
        bad[h[i].off] = (uint8_t)h[i].val;
        if (h[i].off == O_PID)
            memset(bad + O_PID, 0, 4);
        reseal(bad);
        refuse_unpack(bad, PK, own, h[i].what);
    }
    memcpy(bad, pk, PK); /* pid 4194305, then the largest good one */
    bad[O_PID] = 0x01, bad[O_PID + 1] = 0x00, bad[O_PID + 2] = 0x40, bad[O_PID + 3] = 0;
    reseal(bad);
    refuse_unpack(bad, PK, own, "pid 4194305");
    bad[O_PID] = 0x00;
    reseal(bad);
    char back[VMMC_ADDR_MAX];
    VT_CHECK(unpack_str(bad, PK, own, back) == 0 && strstr(back, ";pid=4194304;shm=vmmc.4194304."));
    memcpy(bad, pk, PK); /* shm bytes left behind its flag */
    bad[O_FLAGS] = (uint8_t)(flags & ~F_SHM);
    reseal(bad);
    refuse_unpack(bad, PK, own, "shm bytes without shm");
    memset(bad + O_SHM, 0, 8); /* without them: a valid udp-only name */
    reseal(bad);
    VT_CHECK(unpack_str(bad, PK, own, back) == 0 && !strstr(back, "shm="));
    if (flags & F_UDP4) {
        memcpy(bad, pk, PK);
        bad[O_UDP + 4] = 1; /* IPv4: the rest of the 16 bytes is zero */
        reseal(bad);
        refuse_unpack(bad, PK, own, "IPv4 with bytes after it");
    }
    memcpy(bad, pk, PK);
    bad[O_PORT] = bad[O_PORT + 1] = 0;
    reseal(bad);
    refuse_unpack(bad, PK, own, "port 0");
}

static void test_str(const uint8_t *pk)
{
    char buf[200], want[200];
    int o = snprintf(want, sizeof want, "vmmc://");
    for (int i = 0; i < PK; i++)
        o += snprintf(want + o, sizeof want - (size_t)o, "%02x", pk[i]);
    size_t len = sizeof buf;
    vofi_addr_str(pk, PK, buf, &len);
    VT_CHECK(len == strlen(want) + 1 && !strcmp(buf, want));
    for (size_t cap = 0; cap < 20; cap++) { /* truncated, NUL-terminated, size needed */
        memset(buf, 'x', sizeof buf);
        len = cap;
        vofi_addr_str(pk, PK, buf, &len);
        VT_CHECK(len == strlen(want) + 1);
        if (cap)
            VT_CHECK(strlen(buf) == cap - 1 && !strncmp(buf, want, cap - 1));
        VT_CHECK(buf[cap] == 'x');
    }
}

int main(void)
{
    vmmc_ep_t *a, *b;
    if (vmmc_ep_open(NULL, &a) != VMMC_OK) {
        const char *u = getenv("VMMC_UDP_ADDR");
        if (u && strchr(u, ':'))
            VT_SKIP("no IPv6 here (%s)", vmmc_last_error());
        VT_FAIL("vmmc_ep_open");
    }
    VT_OK(vmmc_ep_open(NULL, &b));
    char own[VMMC_ADDR_MAX], other[VMMC_ADDR_MAX];
    ep_text(a, own);
    ep_text(b, other);
    printf("address: %s (%zu bytes)\n", own, strlen(own));
    uint8_t pa[VOFI_MAX_EP_ADDR], pb[VOFI_MAX_EP_ADDR];
    pack_str(own, pa);
    pack_str(other, pb);
    VT_CHECK(memcmp(pa, pb, PK) != 0);
    const char *u = getenv("VMMC_UDP_ADDR");
    VT_CHECK(pa[O_FLAGS] & (u && strchr(u, ':') ? F_UDP6 : F_UDP4));
    printf("packed: %d bytes, udp %s\n", PK, pa[O_FLAGS] & F_UDP6 ? "IPv6" : "IPv4");

    test_pack(own, other);
    test_hostile(own);
    test_str(pa);
    /* The unpacked name is one vmmc connects to: the same peer as the text. */
    char back[VMMC_ADDR_MAX];
    VT_CHECK(unpack_str(pb, PK, own, back) == 0);
    int p1, p2;
    VT_OK(vmmc_connect(a, back, strlen(back), &p1));
    VT_OK(vmmc_connect(a, other, strlen(other), &p2));
    VT_CHECK(p1 == p2);

    test_av(pa, pb, own);
    VT_OK(vmmc_ep_close(b));
    VT_OK(vmmc_ep_close(a));
    printf("ok (%d warnings for refused input)\n", atomic_load(&warnings));
    return 0;
}
