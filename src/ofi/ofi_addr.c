/* The compact address: what fi_getname() gives and fi_av_insert() takes.
 *
 * A vmmc address (vmmc_ep_addr()) is ~170 bytes of "key=value;" text, but
 * Open MPI reads a name into FI_NAME_MAX (64) bytes, so the provider packs
 * it into VOFI_ADDR_PACKED bytes at fixed offsets (little-endian numbers):
 *
 *   0  length (VOFI_ADDR_PACKED: a list of names is walked by it)
 *   1  version (1)
 *   2  flags: which optional keys are present (F_*)
 *   3  host: 64-bit FNV-1a hash of the host string
 *  11  pid (4)
 *  15  shm: the random part of vmmc.<pid>.<hex> (8)
 *  23  udp address: IPv4 (first 4 bytes) or IPv6 (16)
 *  39  udp port (2)
 *  41  utok: the udp link secret (16)
 *  57  uid: the udp link id (4)
 *  61  CRC-16/CCITT of bytes 0..60 (big-endian)
 *  63
 *
 * Every name has the same size whatever keys it has (absent fields are zero,
 * and checked to be), so a list of names packed by processes with different
 * transports can be walked at any stride. The host string does not fit: the
 * hash stands for it. Unpacking restores this host's own string when the
 * hash is its own; any other host becomes the 16 hex digits of its hash,
 * valid syntax that never equals a real host string (those contain '-').
 * Packing such a synthetic host takes its digits as the hash again, so
 * pack(unpack(name)) == name for every name: an endpoint that packs the
 * address vmmc keeps for a peer (FI_SOURCE) finds the name it was given.
 *
 * Only addresses whose text can be rebuilt byte for byte are packed: keys in
 * the order the core writes them, values in the form the transports write
 * them. Anything else means the address format changed: pack refuses it
 * (-FI_EINVAL, and a warning) rather than lose a field.
 *
 * A name comes from another process (Open MPI's modex, fabtests' exchange):
 * unpack checks every byte, never reads past inlen, and the text it builds
 * must pass vmmc_addr_parse(). The CRC makes any change of up to 16
 * consecutive bits (a torn or mangled copy) a refusal rather than another
 * valid address; against a hostile writer, who can compute it, the checks
 * of every field's range are what count. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ofi/ofi.h"

#define PK_VERSION 1
#define VOFI_ADDR_PACKED 63
enum {
    O_LEN = 0, O_VER = 1, O_FLAGS = 2, O_HOST = 3, O_PID = 11, O_SHM = 15,
    O_UDP = 23, O_PORT = 39, O_UTOK = 41, O_UID = 57, O_SUM = 61, O_END = 63
};
_Static_assert(O_END == VOFI_ADDR_PACKED && O_END <= VOFI_MAX_EP_ADDR, "packed layout");
enum {
    F_SHM = 1u << 0, F_UDP4 = 1u << 1, F_UDP6 = 1u << 2, F_UTOK = 1u << 3, F_UID = 1u << 4,
    F_ULO = 1u << 5, F_ALL = 0x3f
};
/* The keys, in the order the core writes them: host, pid, then the
 * transports' (shm, then udp). */
static const char *const key_order[] = {"host", "pid", "shm", "udp", "utok", "uid", "ulo"};
#define NKEYS (sizeof key_order / sizeof key_order[0])

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static uint16_t crc16(const uint8_t *p, size_t n)
{
    uint16_t c = 0xffff;
    for (size_t i = 0; i < n; i++) {
        c ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            c = (uint16_t)(c & 0x8000 ? (c << 1) ^ 0x1021 : c << 1);
    }
    return c;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

/* Digits of @p s[0..n) in base 10 or 16 (lower case), the canonical way
 * ("%u" / "%x": no leading zero unless the value is 0); -1 if not. */
static int num_of(const char *s, size_t n, int base, size_t maxd, uint64_t *out)
{
    if (n < 1 || n > maxd || (n > 1 && s[0] == '0'))
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = s[i] >= '0' && s[i] <= '9'               ? s[i] - '0'
                : base == 16 && s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
                                                           : -1;
        if (d < 0)
            return -1;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    *out = v;
    return 0;
}

static int hex_bytes(const char *s, size_t n, uint8_t *out)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        out[i / 2] = (uint8_t)(i % 2 ? (out[i / 2] | d) : d << 4);
    }
    return 0;
}

/* "a.b.c.d:port" or "[v6]:port", exactly as inet_ntop and "%u" write it. */
static int pack_udp(const char *v, size_t vl, uint8_t *out, unsigned *flag)
{
    const char *colon = NULL;
    for (size_t i = vl; i-- > 0;)
        if (v[i] == ':') {
            colon = v + i;
            break;
        }
    uint64_t port;
    if (!colon || num_of(colon + 1, vl - (size_t)(colon - v) - 1, 10, 5, &port) || port < 1 ||
        port > 65535)
        return -1;
    char a[64], back[INET6_ADDRSTRLEN];
    size_t al = (size_t)(colon - v);
    int v6 = al >= 2 && v[0] == '[' && v[al - 1] == ']';
    if (v6)
        v++, al -= 2;
    if (al < 1 || al >= sizeof a)
        return -1;
    memcpy(a, v, al);
    a[al] = 0;
    int fam = v6 ? AF_INET6 : AF_INET;
    if (inet_pton(fam, a, out + O_UDP) != 1 || !inet_ntop(fam, out + O_UDP, back, sizeof back) ||
        strcmp(back, a))
        return -1;
    put_le(out + O_PORT, port, 2);
    *flag = v6 ? F_UDP6 : F_UDP4;
    return 0;
}

static int changed(const char *what, size_t n, const char *why)
{
    vofi_warn("vmmc address field '%.*s' %s: the address format changed, the provider cannot "
              "pack it into %d bytes",
              (int)(n < 48 ? n : 48), what, why, VOFI_ADDR_PACKED);
    return -FI_EINVAL;
}

int vofi_addr_pack(const void *vaddr, size_t vlen, uint8_t *out, size_t *outlen)
{
    if (!vaddr || !outlen || (!out && *outlen)) {
        vofi_warn("vofi_addr_pack: NULL argument");
        return -FI_EINVAL;
    }
    char card[VMMC_ADDR_MAX + 1];
    uint8_t chk[VMMC_ADDR_MAX];
    size_t chk_len = sizeof chk;
    if (vlen == 0 || vlen >= VMMC_ADDR_MAX || memchr(vaddr, 0, vlen)) {
        vofi_warn("vofi_addr_pack: an address of %zu bytes (1..%d, no NUL)", vlen,
                  VMMC_ADDR_MAX - 1);
        return -FI_EINVAL;
    }
    memcpy(card, vaddr, vlen);
    card[vlen] = 0;
    if (vmmc_addr_parse(card, chk, &chk_len) != VMMC_OK) {
        vofi_warn("vofi_addr_pack: not a vmmc address: %s", vmmc_last_error());
        return -FI_EINVAL;
    }
    size_t cap = *outlen;
    *outlen = VOFI_ADDR_PACKED;
    if (cap < VOFI_ADDR_PACKED)
        return -FI_ETOOSMALL;
    uint8_t pk[VOFI_ADDR_PACKED] = {0};
    unsigned flags = 0;
    uint64_t pid = 0;
    size_t next_key = 0;
    for (const char *p = card; *p;) {
        const char *end = strchr(p, ';'), *eq = memchr(p, '=', (size_t)(end - p));
        const char *v = eq + 1; /* vmmc_addr_parse: every field is key=value; */
        size_t kl = (size_t)(eq - p), vl = (size_t)(end - v), k = next_key;
        while (k < NKEYS && (strlen(key_order[k]) != kl || memcmp(key_order[k], p, kl)))
            k++;
        if (k == NKEYS)
            return changed(p, (size_t)(end - p), "is unknown or out of order");
        next_key = k + 1;
        uint64_t x;
        switch (k) {
        case 0: { /* host: its hash, or the hash a synthetic host spells */
            uint8_t h[8];
            x = fnv1a(v, vl);
            if (vl == 16 && !hex_bytes(v, vl, h)) /* "%016llx" of a hash */
                for (int i = 0; i < 8; i++)
                    x = i ? x << 8 | h[i] : h[i];
            put_le(pk + O_HOST, x, 8);
            break;
        }
        case 1: /* pid: checked 1..4194304 by vmmc_addr_parse */
            if (num_of(v, vl, 10, 7, &pid))
                return changed(p, (size_t)(end - p), "is not canonical");
            put_le(pk + O_PID, pid, 4);
            break;
        case 2: { /* shm=vmmc.<pid>.<hex> (the pid's own) */
            char pre[32];
            int pl = snprintf(pre, sizeof pre, "vmmc.%llu.", (unsigned long long)pid);
            if (!pid || vl <= (size_t)pl || memcmp(v, pre, (size_t)pl) ||
                num_of(v + pl, vl - (size_t)pl, 16, 16, &x))
                return changed(p, (size_t)(end - p), "is not vmmc.<pid>.<hex>");
            put_le(pk + O_SHM, x, 8);
            flags |= F_SHM;
            break;
        }
        case 3: { /* udp */
            unsigned f = 0;
            if (pack_udp(v, vl, pk, &f))
                return changed(p, (size_t)(end - p), "is not ADDR:PORT as inet_ntop writes it");
            flags |= f;
            break;
        }
        case 4: /* utok: 32 hex (checked by vmmc_addr_parse) */
            if (vl != 32 || hex_bytes(v, vl, pk + O_UTOK))
                return changed(p, (size_t)(end - p), "is not 32 hex digits");
            flags |= F_UTOK;
            break;
        case 5: /* uid: 8 hex, leading zeros kept ("%08x") */
            if (vl != 8 || hex_bytes(v, vl, pk + O_UID))
                return changed(p, (size_t)(end - p), "is not 8 hex digits");
            flags |= F_UID;
            break;
        default: /* ulo=1 */
            flags |= F_ULO;
            break;
        }
        p = end + 1;
    }
    /* The combinations the transports write; unpack accepts only these. */
    int udp = !!(flags & (F_UDP4 | F_UDP6));
    if (udp != !!(flags & F_UTOK) || udp != !!(flags & F_UID) ||
        ((flags & F_ULO) && !(flags & F_UDP4)) || !(flags & (F_SHM | F_UDP4 | F_UDP6)))
        return changed(card, vlen, "(its udp keys) come in a new combination");
    pk[O_LEN] = VOFI_ADDR_PACKED;
    pk[O_VER] = PK_VERSION;
    pk[O_FLAGS] = (uint8_t)flags;
    uint16_t sum = crc16(pk, O_SUM);
    pk[O_SUM] = (uint8_t)(sum >> 8);
    pk[O_SUM + 1] = (uint8_t)sum;
    memcpy(out, pk, sizeof pk);
    return 0;
}

static int bad(const char *why)
{
    vofi_warn("malformed vmmc name: %s", why);
    return -FI_EINVAL;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

int vofi_addr_unpack(const uint8_t *in, size_t inlen, const void *own_vaddr, size_t own_vlen,
                     void *vaddr, size_t *vlen)
{
    if (!in || !vlen || (!vaddr && *vlen))
        return bad("NULL argument");
    if (inlen < O_FLAGS + 1 || in[O_LEN] != VOFI_ADDR_PACKED || in[O_VER] != PK_VERSION)
        return bad(inlen < O_FLAGS + 1 ? "shorter than its header"
                   : in[O_VER] != PK_VERSION ? "unknown version"
                                             : "wrong length byte");
    if (inlen != VOFI_ADDR_PACKED)
        return bad("its length is not its length byte");
    if (crc16(in, O_SUM) != (uint16_t)(in[O_SUM] << 8 | in[O_SUM + 1]))
        return bad("checksum mismatch (a damaged copy)");
    unsigned f = in[O_FLAGS];
    int udp = !!(f & (F_UDP4 | F_UDP6));
    if ((f & ~F_ALL) || (f & F_UDP4 && f & F_UDP6) || udp != !!(f & F_UTOK) ||
        udp != !!(f & F_UID) || ((f & F_ULO) && !(f & F_UDP4)) || !(f & (F_SHM | F_UDP4 | F_UDP6)))
        return bad("impossible key flags");
    uint64_t pid = get_le(in + O_PID, 4), port = get_le(in + O_PORT, 2);
    if (pid < 1 || pid > 4194304)
        return bad("pid out of range (1..4194304)");
    if ((!(f & F_SHM) && !all_zero(in + O_SHM, 8)) ||
        (!udp && !all_zero(in + O_UDP, O_SUM - O_UDP)) ||
        ((f & F_UDP4) && !all_zero(in + O_UDP + 4, 12)))
        return bad("bytes set in an absent field");
    if (udp && port == 0)
        return bad("udp port 0");

    char card[VMMC_ADDR_MAX + 1], host[128];
    uint64_t hh = get_le(in + O_HOST, 8);
    snprintf(host, sizeof host, "%016llx", (unsigned long long)hh);
    const char *own = own_vaddr;
    for (size_t i = 0; own && i + 5 < own_vlen; i++) { /* the own address's host= value */
        if ((i == 0 || own[i - 1] == ';') && !memcmp(own + i, "host=", 5)) {
            const char *v = own + i + 5, *e = memchr(v, ';', own_vlen - i - 5);
            size_t n = e ? (size_t)(e - v) : 0;
            if (n && n < sizeof host && fnv1a(v, n) == hh) {
                memcpy(host, v, n);
                host[n] = 0;
            }
            break;
        }
    }
    size_t n = (size_t)snprintf(card, sizeof card, "host=%s;pid=%llu;", host,
                                (unsigned long long)pid);
    if (f & F_SHM)
        n += (size_t)snprintf(card + n, sizeof card - n, "shm=vmmc.%llu.%llx;",
                              (unsigned long long)pid,
                              (unsigned long long)get_le(in + O_SHM, 8));
    if (udp) {
        char a[INET6_ADDRSTRLEN], tok[33];
        inet_ntop(f & F_UDP6 ? AF_INET6 : AF_INET, in + O_UDP, a, sizeof a);
        for (int i = 0; i < 16; i++)
            snprintf(tok + 2 * i, 3, "%02x", in[O_UTOK + i]);
        n += (size_t)snprintf(card + n, sizeof card - n, f & F_UDP6 ? "udp=[%s]:%u;" : "udp=%s:%u;",
                              a, (unsigned)port);
        n += (size_t)snprintf(card + n, sizeof card - n, "utok=%s;uid=", tok);
        for (int i = 0; i < 4; i++)
            n += (size_t)snprintf(card + n, sizeof card - n, "%02x", in[O_UID + i]);
        n += (size_t)snprintf(card + n, sizeof card - n, ";%s", f & F_ULO ? "ulo=1;" : "");
    }
    size_t cap = *vlen, len = cap;
    uint8_t chk[VMMC_ADDR_MAX];
    size_t chk_len = sizeof chk;
    if (n >= sizeof card || vmmc_addr_parse(card, chk, &chk_len) != VMMC_OK) {
        vofi_warn("unpacked vmmc name is no vmmc address: %s", vmmc_last_error());
        return -FI_EINVAL;
    }
    *vlen = n;
    if (cap < n || vmmc_addr_parse(card, vaddr, &len) != VMMC_OK)
        return -FI_ETOOSMALL;
    return 0;
}

void vofi_addr_str(const uint8_t *in, size_t inlen, char *buf, size_t *len)
{
    static const char hex[] = "0123456789abcdef";
    static const char pre[] = "vmmc://";
    if (!len)
        return;
    size_t cap = buf ? *len : 0, need = sizeof pre + 2 * (in ? inlen : 0), o = 0;
    *len = need; /* with the NUL */
    if (cap == 0)
        return;
    for (size_t i = 0; i < sizeof pre - 1 && o + 1 < cap; i++)
        buf[o++] = pre[i];
    for (size_t i = 0; in && i < inlen && o + 1 < cap; i++) {
        buf[o++] = hex[in[i] >> 4];
        if (o + 1 < cap)
            buf[o++] = hex[in[i] & 15];
    }
    buf[o] = 0;
}
