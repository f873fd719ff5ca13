/* Control-plane messages between endpoints (import, revoke, atomics).
 *
 * Fixed-size, versioned, little-endian host structs. The core writes and
 * reads them (core/ctl.c); a transport carries them (ctl_send, and the
 * upcall ctl_recv on arrival) and reads the region fields of an
 * CTL_IMPORT_REP in proxy_setup. Same-host peers exchange them over
 * SOCK_SEQPACKET Unix sockets with SCM_RIGHTS descriptors; remote peers over
 * the udp transport's reliable link. Every field is validated by the core
 * on arrival: a malformed message is counted and dropped. */
#ifndef VMMC_TRANSPORT_CTL_MSG_H
#define VMMC_TRANSPORT_CTL_MSG_H

#include <stdint.h>

#define VMMC_NAME_MAX 64

#define VMMC_CTL_MAGIC 0x564d4d43u /* "VMMC" */
enum {
    CTL_HELLO = 1,      /* importer → exporter: I am rank r (pid p) */
    CTL_HELLO_ACK = 2,  /* exporter → importer: fds[0] inbox segment, fds[1] eventfd */
    CTL_IMPORT_REQ = 3, /* importer → exporter: name */
    CTL_IMPORT_REP = 4, /* exporter → importer: status and region; fds[0] memfd, fds[1] redirect ctl */
    CTL_REVOKE = 5,     /* exporter → importer: export id/gen withdrawn */
    CTL_UNIMPORT = 6,   /* importer → exporter: no longer imports id/gen */
    CTL_REVOKE_ACK = 7, /* importer → exporter: id/gen is stale here, no copy under way */
    /* importer → exporter: a remote atomic on a region the importer cannot
     * map (atomic.c): export_id, gen, token as in the import reply;
     * map_off = offset, kind = vmmc_atomic_op_t, flags = size (width or'ed
     * with the type, as in vmmc_atomic: below 0x100) | 0x100 when
     * the old value is wanted, addr = operand, length = compare. */
    CTL_ATOMIC_REQ = 8,
    /* exporter → importer: id echoed, status, addr = the old value, text = why not */
    CTL_ATOMIC_REP = 9
};

typedef struct vmmc_ctl_msg {
    uint32_t magic;
    uint32_t type;
    uint64_t id;        /* request id (replies echo it) */
    int32_t src_rank;
    int32_t status;     /* vmmc status in replies */
    int32_t pid;
    uint32_t export_id;
    uint32_t gen;
    uint32_t flags;     /* export flags */
    uint32_t kind;      /* PX_KIND_* offered */
    uint32_t nfds;
    uint64_t length;
    uint64_t addr;      /* exporter address (pvw) */
    uint64_t map_off;   /* offset of the region in the memfd */
    uint64_t token[2];
    char name[VMMC_NAME_MAX];
    char text[128];     /* error detail in replies */
    /* CTL_IMPORT_REP of PX_KIND_REMOTE, with rkey_ok: the transport's key
     * for direct access to the region (export_grant; addr is its address) */
    uint64_t rkey;
    uint32_t rkey_ok;
    uint32_t map_flags; /* CTL_IMPORT_REP of PX_KIND_MAPPED: CTL_MAP_* */
    /* with rkey_ok: a transport's word for the importer (fabric: its
     * notification slot, docs/fabric.md), 0 for none; other transports
     * leave it 0 and ignore it */
    uint32_t nslot;
    uint32_t pad;
} vmmc_ctl_msg_t;

/* map_flags: the memfd is the exporter's caller's (VMMC_EXPORT_PARAM_FD),
 * which the exporter cannot re-back at unexport: on CTL_REVOKE the importer
 * replaces its mapping by private memory before it acknowledges. */
#define CTL_MAP_CALLER_FD 1u

#endif
