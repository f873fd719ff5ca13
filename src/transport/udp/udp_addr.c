/* The udp transport's part of an endpoint address: its keys and their
 * syntax (udp=ADDR:PORT, utok=<link secret>, uid=<link id>, ulo=1), which
 * peers it reaches (any that has them), what it binds and publishes, and
 * reading a peer's back into a socket address, secret and wire id. */
#include "transport/udp/udp_int.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

#define HEX VMMC_HEX_DIGITS
#define DEC VMMC_DEC_DIGITS

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
    if (pl < 1 || pl > 5 || !vmmc_all_of(colon + 1, pl, DEC))
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
        return vl == 32 && vmmc_all_of(v, vl, HEX);
    }
    if (KEY("uid")) {
        *why = "uid must be 8 lower-case hex digits";
        return vl == 8 && vmmc_all_of(v, vl, HEX);
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

/* What to bind: @want (VMMC_UDP_ADDR), else the first IPv4 interface that
 * is up and not loopback, else 127.0.0.1. */
int vmmc_udp__pick_addr(const char *want, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    want = want ? want : "";
    if (want[0]) {
        if (inet_pton(AF_INET, want, &a4->sin_addr) == 1) {
            a4->sin_family = AF_INET;
            *len = sizeof *a4;
        } else if (inet_pton(AF_INET6, want, &a6->sin6_addr) == 1) {
            a6->sin6_family = AF_INET6;
            *len = sizeof *a6;
        } else {
            return vmmc_error(VMMC_ERR_INVALID, "VMMC_UDP_ADDR=%s is not an IPv4/IPv6 address",
                              want);
        }
        return VMMC_OK;
    }
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *len = sizeof *a4;
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
                !(i->ifa_flags & IFF_LOOPBACK)) {
                a4->sin_addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
                break;
            }
        }
        freeifaddrs(ifs);
    }
    return VMMC_OK;
}

/* The udp part of a (checked) address: where, the link secret, the wire id. */
int vmmc_udp__parse_card(const char *card, struct sockaddr_storage *ss, socklen_t *len,
                         uint8_t tok[VMMC_UDP_TOKEN_SIZE], uint32_t *uid)
{
    char addr[96], hex[40], id[16];
    if (!card || !vmmc_card_get(card, "udp", addr, sizeof addr) ||
        !vmmc_card_get(card, "utok", hex, sizeof hex) || strlen(hex) != 2 * VMMC_UDP_TOKEN_SIZE ||
        !vmmc_card_get(card, "uid", id, sizeof id) || strlen(id) != 8)
        return -1;
    char *end;
    unsigned long idv = strtoul(id, &end, 16);
    if (*end || idv > 0xffffffffu)
        return -1;
    *uid = (uint32_t)idv;
    for (unsigned i = 0; i < VMMC_UDP_TOKEN_SIZE; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        tok[i] = (uint8_t)v;
    }
    char *colon = strrchr(addr, ':');
    if (!colon)
        return -1;
    *colon = 0;
    int port = atoi(colon + 1);
    if (port <= 0 || port > 65535)
        return -1;
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (addr[0] == '[') {
        size_t n = strlen(addr);
        if (n < 3 || addr[n - 1] != ']')
            return -1;
        addr[n - 1] = 0;
        if (inet_pton(AF_INET6, addr + 1, &a6->sin6_addr) != 1)
            return -1;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *len = sizeof *a6;
    } else {
        if (inet_pton(AF_INET, addr, &a4->sin_addr) != 1)
            return -1;
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *len = sizeof *a4;
    }
    return 0;
}

int vmmc_udp__same_sockaddr(const struct sockaddr_storage *a, socklen_t al,
                            const struct sockaddr *b, socklen_t bl)
{
    if (a->ss_family != b->sa_family)
        return 0;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return bl >= sizeof *y && x->sin_port == y->sin_port &&
               x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
    (void)al;
    return bl >= sizeof *y && x->sin6_port == y->sin6_port &&
           !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr);
}
