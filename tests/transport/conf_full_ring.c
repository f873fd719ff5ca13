/* A send that waits for room in a full notification queue runs no handler:
 * both ranks send N notified writes to each other at once with a queue of
 * 4 records per sender (VMMC_NOTIFY_QUEUE=4, set here) and call nothing
 * else until their sends are done, so each fills the other's queue and
 * waits. Neither may deadlock (a waiting sender empties its own queues into
 * its endpoint, where the peer's records wait for a later progress), and no
 * handler may run inside vmmc_send_imm: the handler fails if it does. Then
 * each rank serves its notifications: all N arrive, once, in order.
 *
 * Over udp the bound is on notifications not yet run: a receiver whose queue
 * is full holds notifying writes back in its link, which holds their sender
 * back; a sender waiting for the link moves its own queue into the core's,
 * so that its link takes the peer's writes again.
 *
 * usage: conf_full_ring [N [Q [L]]]   (default 20000 notifications, a queue
 * of Q = 4 records; a Q that is not a power of two takes the rings' other
 * slot arithmetic; writes of L bytes, default 1: large ones are several
 * pieces, or go from the sender's buffer and wait for their receiver) */
#include <stdlib.h>
#include <string.h>

#include "conf.h"

static long nmsg = 20000;
static int in_send;
static long got;

static void on_msg(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    if (in_send)
        VT_FAIL("[%s] a handler ran inside vmmc_send_imm", conf_transport());
    if (n->imm != (uint64_t)got + 1)
        VT_FAIL("[%s] notification %llu where %ld was due", conf_transport(),
                (unsigned long long)n->imm, got + 1);
    got++;
}

int main(int argc, char **argv)
{
    setenv("VMMC_NOTIFY_QUEUE", argc > 2 ? argv[2] : "4", 1);
    vmmc_ep_t *ep = conf_init(2);
    if (argc > 1)
        nmsg = atol(argv[1]);
    size_t len = argc > 3 ? (size_t)atol(argv[3]) : 1;
    if (len < 1)
        len = 1;
    int me = vmmc_rank(ep), peer = 1 - me;
    conf_region_t r;
    conf_region_alloc(ep, &r, CONF_MEM, len > 4096 ? len : 4096);
    unsigned char *src = malloc(len);
    VT_CHECK(src != NULL);
    vmmc_export_t *ex = conf_export(ep, &r, "ring", VMMC_EXPORT_READ, on_msg, NULL);
    VT_OK(vmmc_barrier(ep));
    vmmc_proxy_t *px = conf_import(ep, peer, "ring");
    VT_OK(vmmc_barrier(ep));
    in_send = 1;
    for (long i = 0; i < nmsg; i++) {
        memset(src, (unsigned char)i, len);
        VT_OK(vmmc_send_imm(px, len == 1 ? (size_t)(i % 4096) : 0, src, len, VMMC_SEND_NOTIFY,
                            (uint64_t)i + 1));
    }
    in_send = 0;
    CONF_WAIT(ep, got == nmsg, "the notifications");
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_unimport(px));
    VT_OK(vmmc_unexport(ex));
    conf_region_free(ep, &r);
    free(src);
    VT_OK(vmmc_finalize(ep));
    printf("conf_full_ring [%s] rank %d: %ld notifications each way, writes of %zu bytes: OK\n",
           conf_transport(), me, nmsg, len);
    return 0;
}
