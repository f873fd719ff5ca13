/* Endpoint addresses.
 *
 * An address is the endpoint's business card: "key=value;" pairs in
 * printable ASCII, e.g.
 *   host=<boot id>-<netns>;pid=1234;shm=vmmc.1234.5f3a…;udp=10.0.0.1:40000;utok=<32 hex>;uid=<8 hex>;
 * host and pid say where it lives; shm names its control socket (same host);
 * udp, utok (the link secret) and uid (its link id) say how to reach it over
 * the network. The printable form is the same text, so vmmc_addr_format()
 * and vmmc_addr_parse() only check and copy.
 *
 * An address comes from outside (a command line, a peer's HELLO, a udp
 * handshake): vmmc_addr_check() looks at every byte before any of it is
 * used: only known keys, each at most once, each value in its own syntax,
 * and enough of them to reach the endpoint. host and pid are the core's;
 * every other key belongs to a registered transport, which checks its value
 * (addr_field) and whether its keys come together (addr_whole). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/str.h"

const char *vmmc_card_get(const char *card, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *p = card; p && *p;) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > kl && !strncmp(p, key, kl) && p[kl] == '=') {
            size_t vl = len - kl - 1;
            if (vl >= cap)
                vl = cap - 1;
            memcpy(out, p + kl + 1, vl);
            out[vl] = 0;
            return out;
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

#define HEX VMMC_HEX_DIGITS
#define DEC VMMC_DEC_DIGITS

static int value_ok(const char *k, size_t kl, const char *v, size_t vl, const char **why)
{
#define KEY(s) (kl == sizeof(s) - 1 && !memcmp(k, s, kl))
    if (KEY("host")) {
        *why = "host must be 1..95 characters of [0-9a-f-]";
        return vl >= 1 && vl <= 95 && vmmc_all_of(v, vl, HEX "-");
    }
    if (KEY("pid")) {
        *why = "pid must be a process id (1..4194304)";
        if (vl < 1 || vl > 7 || !vmmc_all_of(v, vl, DEC) || v[0] == '0')
            return 0;
        long pid = strtol(v, NULL, 10); /* v is followed by ';': strtol stops there */
        return pid >= 1 && pid <= 4194304;
    }
    return vmmc_tl_addr_field(k, kl, v, vl, why) == 1; /* a transport's key, or unknown */
#undef KEY
}

int vmmc_addr_check(const void *addr, size_t len)
{
    const char *a = addr;
    if (!addr || len == 0 || len >= VMMC_ADDR_MAX)
        return vmmc_error(VMMC_ERR_INVALID, "address of %zu bytes (1..%d)", len, VMMC_ADDR_MAX - 1);
    if (a[len - 1] != ';')
        return vmmc_error(VMMC_ERR_INVALID, "address does not end with ';'");
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)a[i] <= ' ' || (unsigned char)a[i] >= 127)
            return vmmc_error(VMMC_ERR_INVALID, "address byte %zu is 0x%02x (not printable)", i,
                              (unsigned char)a[i]);
    int host = 0, pid = 0, transport = 0;
    for (size_t pos = 0; pos < len;) {
        const char *e = memchr(a + pos, ';', len - pos); /* never NULL: a[len-1] == ';' */
        const char *eq = memchr(a + pos, '=', (size_t)(e - a - (ptrdiff_t)pos));
        if (!eq || eq == a + pos)
            return vmmc_error(VMMC_ERR_INVALID, "address field at byte %zu is not key=value", pos);
        size_t kl = (size_t)(eq - a - (ptrdiff_t)pos), vl = (size_t)(e - eq - 1);
        const char *why = "unknown key";
        if (!value_ok(a + pos, kl, eq + 1, vl, &why))
            return vmmc_error(VMMC_ERR_INVALID, "address field '%.*s' at byte %zu: %s",
                              (int)(kl < 16 ? kl : 16), a + pos, pos, why);
        /* each key at most once: look for it in the fields before */
        for (size_t q = 0; q < pos;) {
            const char *qe = memchr(a + q, ';', pos - q);
            if ((size_t)(qe - a) - q > kl && a[q + kl] == '=' && !memcmp(a + q, a + pos, kl))
                return vmmc_error(VMMC_ERR_INVALID, "address has '%.*s' twice", (int)kl, a + pos);
            q = (size_t)(qe - a) + 1;
        }
        if (kl == 4 && !memcmp(a + pos, "host", 4))
            host = 1;
        else if (kl == 3 && !memcmp(a + pos, "pid", 3))
            pid = 1;
        else
            transport = 1;
        pos = (size_t)(e - a) + 1;
    }
    if (!host || !pid)
        return vmmc_error(VMMC_ERR_INVALID, "address lacks %s", host ? "pid" : "host");
    if (!transport)
        return vmmc_error(VMMC_ERR_INVALID, "address names no transport");
    char card[VMMC_ADDR_MAX]; /* NUL-terminated for the transports */
    memcpy(card, a, len);
    card[len] = 0;
    return vmmc_tl_addr_whole(card, len);
}

uint64_t vmmc_addr_hash(const void *addr, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a: only to skip unequal addresses fast */
    for (size_t i = 0; i < len; i++)
        h = (h ^ ((const unsigned char *)addr)[i]) * 0x100000001b3ull;
    return h;
}

int vmmc_ep_addr(vmmc_ep_t *ep, void *addr, size_t *len)
{
    if (!ep || !len || (!addr && *len))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_ep_addr: NULL %s", !ep ? "endpoint" : "buffer");
    size_t cap = *len;
    *len = ep->addr_len;
    if (cap < ep->addr_len)
        return vmmc_error(VMMC_ERR_TRUNCATED, "vmmc_ep_addr: the address needs %zu bytes, not %zu",
                          ep->addr_len, cap);
    memcpy(addr, ep->addr, ep->addr_len);
    return VMMC_OK;
}

int vmmc_addr_format(const void *addr, size_t len, char *buf, size_t cap)
{
    if (!buf)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_addr_format: NULL buffer");
    int rc = vmmc_addr_check(addr, len);
    if (rc != VMMC_OK)
        return rc;
    if (cap < len + 1)
        return vmmc_error(VMMC_ERR_TRUNCATED, "vmmc_addr_format: %zu bytes needed, %zu given",
                          len + 1, cap);
    memcpy(buf, addr, len);
    buf[len] = 0;
    return VMMC_OK;
}

int vmmc_addr_parse(const char *str, void *addr, size_t *len)
{
    if (!str || !len || (!addr && *len))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_addr_parse: NULL argument");
    size_t n = strnlen(str, VMMC_ADDR_MAX);
    int rc = vmmc_addr_check(str, n);
    if (rc != VMMC_OK)
        return rc;
    size_t cap = *len;
    *len = n;
    if (cap < n)
        return vmmc_error(VMMC_ERR_TRUNCATED, "vmmc_addr_parse: the address needs %zu bytes, not %zu",
                          n, cap);
    memcpy(addr, str, n);
    return VMMC_OK;
}
