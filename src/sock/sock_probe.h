/* The upgrade probe's private parts: the probe datagram, the key of a
 * connection, the shared probe table (sock_probe_tab.c) and the listener
 * (sock_probe.c). */
#ifndef VMMC_SOCK_SOCK_PROBE_H
#define VMMC_SOCK_SOCK_PROBE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sock/sock.h"

/* A connection's client side: port (network order) and IPv6 address (IPv4
 * as ::ffff:a.b.c.d), so an IPv4 client of a dual-stack listener has one
 * key whichever way it is seen. */
#define SOCK_KEY_LEN 18
int sock_key_of(const struct sockaddr *sa, socklen_t len, uint8_t key[SOCK_KEY_LEN]);

/* ---- the datagram ---- */

#define SOCK_PROBE_MAGIC 0x424f5250434d4d56ull /* "VMMCPROB" */
enum { SOCK_PROBE = 1, SOCK_PROBE_YES = 2, SOCK_PROBE_NO = 3 };

typedef struct sock_probe_msg {
    uint64_t magic;
    uint16_t version;                /* SOCK_WIRE_VERSION */
    uint16_t type;                   /* SOCK_PROBE* */
    uint16_t addr_len;               /* YES: bytes of addr (the server's endpoint) */
    uint16_t pad;
    uint64_t nonce;                  /* the client's, echoed */
    uint64_t token;                  /* YES: what the HELLO must bring */
    uint8_t client[SOCK_KEY_LEN];    /* PROBE: the TCP connection's client side */
    uint8_t server[SOCK_KEY_LEN];    /* and server side */
    uint8_t pad2[4];
    uint8_t addr[VMMC_ADDR_MAX];
} sock_probe_msg_t;
#define SOCK_PROBE_HDR offsetof(sock_probe_msg_t, addr)

/* ---- the shared table ---- */

typedef struct sock_tab sock_tab_t;
typedef struct sock_tab_stats {
    _Atomic uint64_t probes;    /* PROBE datagrams taken */
    _Atomic uint64_t yes, no;   /* answers */
    _Atomic uint64_t refused;   /* datagrams dropped: size, magic, version, type, source */
    _Atomic uint64_t full;      /* NO: the connection's slot held another one */
    _Atomic uint64_t blocked;   /* NO: an acceptor had decided plain on that slot */
} sock_tab_stats_t;

enum { SOCK_TAB_NO = 0, SOCK_TAB_YES = 1, SOCK_TAB_NONE = 2, SOCK_TAB_PLAIN = 3,
       SOCK_TAB_CLAIMED = 4 };

sock_tab_t *sock_tab_new(uint64_t nslots, uint64_t ttl_ms);
void sock_tab_free(sock_tab_t *t);
sock_tab_stats_t *sock_tab_stats(sock_tab_t *t);
/* Responder: a probe for @p key: SOCK_TAB_YES (*token) or SOCK_TAB_NO. */
int sock_tab_probe(sock_tab_t *t, const uint8_t *key, uint64_t *token);
/* Acceptor: take the PROBED entry of @p key: SOCK_TAB_CLAIMED (*token),
 * SOCK_TAB_PLAIN (decided plain before) or SOCK_TAB_NONE. */
int sock_tab_claim(sock_tab_t *t, const uint8_t *key, uint64_t *token);
/* Acceptor: decide plain unless a probe came first: SOCK_TAB_PLAIN, or
 * SOCK_TAB_CLAIMED (*token: the probe's entry, now taken). */
int sock_tab_plain(sock_tab_t *t, const uint8_t *key, uint64_t *token);
/* Is there a live entry for @p key? */
int sock_tab_has(sock_tab_t *t, const uint8_t *key);
/* Acceptor: done with a CLAIMED entry. */
void sock_tab_release(sock_tab_t *t, const uint8_t *key);

/* ---- the listener (s->lst) ---- */

struct sock_listener {
    int udp;                  /* the responder's socket, -1: none (never upgrades) */
    int port;                 /* host order */
    int family;
    uint8_t bound[SOCK_KEY_LEN]; /* the listener's address (all zero: any) */
    int any;
    sock_tab_t *tab;
    int refs;                 /* the registry's, and acceptors' (under the registry lock) */
    uint64_t closed_ns;       /* 0: listening; else when its last descriptor closed */
    uint64_t ttl_ns;          /* how long its table's entries live */
    sock_listener_t *next;    /* the process's listeners */
};

/* The listener whose table decides a connection accepted on local address
 * @p local with client key @p key, with a reference (sock_probe_put()), or
 * NULL: the one of that port (in this process, or inherited through fork)
 * whose table holds an entry for @p key, else the one listening now. A
 * listener closed after accept() stays findable while its table's entries
 * live, so a connection accepted before the close is still decided by it. */
sock_listener_t *sock_probe_find(const struct sockaddr *local, socklen_t len,
                                 const uint8_t key[SOCK_KEY_LEN]);
void sock_probe_put(sock_listener_t *l);

/* Client: probe the listener @p s is connected to. 1: YES (*token, the
 * server's endpoint address in @p addr/@p alen), 0: no upgrade (@p why says
 * why, for the debug line). */
int sock_probe_client(sock_t *s, uint64_t *token, void *addr, size_t *alen, const char **why);

#endif
