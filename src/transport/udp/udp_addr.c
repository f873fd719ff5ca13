/* The udp transport's part of an endpoint address: its keys and their
 * syntax (udp=ADDR:PORT, utok=<link secret>, uid=<link id>, ulo=1), and
 * which peers it reaches (any that has them). */
#include "transport/udp/udp_int.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

static int all_of(const char *v, size_t n, const char *set)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr(set, v[i]))
            return 0;
    return 1;
}

#define HEX "0123456789abcdef"
#define DEC "0123456789"

/* "1.2.3.4:port" or "[v6]:port". */
static int udp_value_ok(const char *v, size_t n)
{
    char a[64];
    const char *colon = NULL;
    for (size_t i = n; i-- > 0;)
        if (v[i] == ':') {
            colon = v + i;
            break;
        }
    if (!colon || colon == v)
        return 0;
    size_t al = (size_t)(colon - v), pl = n - al - 1;
    if (pl < 1 || pl > 5 || !all_of(colon + 1, pl, DEC))
        return 0;
    long port = strtol(colon + 1, NULL, 10);
    if (port < 1 || port > 65535)
        return 0;
    unsigned char buf[16];
    if (v[0] == '[') {
        if (al < 3 || v[al - 1] != ']' || al - 2 >= sizeof a)
            return 0;
        memcpy(a, v + 1, al - 2);
        a[al - 2] = 0;
        return inet_pton(AF_INET6, a, buf) == 1;
    }
    if (al >= sizeof a)
        return 0;
    memcpy(a, v, al);
    a[al] = 0;
    return inet_pton(AF_INET, a, buf) == 1;
}

int vmmc_udp__addr_field(const char *k, size_t kl, const char *v, size_t vl, const char **why)
{
#define KEY(s) (kl == sizeof(s) - 1 && !memcmp(k, s, kl))
    if (KEY("udp")) {
        *why = "udp must be ADDR:PORT (IPv4, or [IPv6])";
        return vl <= 60 && udp_value_ok(v, vl);
    }
    if (KEY("utok")) {
        *why = "utok must be 32 lower-case hex digits";
        return vl == 32 && all_of(v, vl, HEX);
    }
    if (KEY("uid")) {
        *why = "uid must be 8 lower-case hex digits";
        return vl == 8 && all_of(v, vl, HEX);
    }
    if (KEY("ulo")) {
        *why = "ulo must be 1";
        return vl == 1 && v[0] == '1';
    }
    return -1;
#undef KEY
}

int vmmc_udp__addr_whole(const char *card, size_t len)
{
    char v[64];
    if (vmmc_card_get(card, "udp", v, sizeof v) &&
        (!vmmc_card_get(card, "utok", v, sizeof v) || !vmmc_card_get(card, "uid", v, sizeof v)))
        return vmmc_error(VMMC_ERR_INVALID, "address has udp but lacks utok or uid");
    return VMMC_OK;
}

/* Any peer with a udp address; a transport made for this host scores more. */
int vmmc_udp__reach(vmmc_ep_t *ep, const char *card, int same_host)
{
    char v[64];
    return vmmc_card_get(card, "udp", v, sizeof v) ? 1 : -1;
}
