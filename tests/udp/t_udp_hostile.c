/* A udp job under attack while it transfers (VMMC_TRANSPORT=udp, 2 ranks).
 * Rank 1 starts the hostile process (udp_hostile.c: it watches the job's
 * datagrams and sends forged ones with the job's own addresses; argv[2]
 * picks the attacks: "data" writes to no live export, with a stale
 * generation, with a wrong token and with the real one, ahead of the real
 * sequence; "ctl" a forged revoke and a forged goodbye; "replay" replays and
 * corrupted copies). Meanwhile rank 0 writes ROUNDS rounds of a 1 MiB pattern into
 * rank 1's export in pieces of mixed sizes, the last with a notification.
 * The job must survive (every call succeeds, both peers stay alive), every
 * byte of every round must be the pattern's (no stale or forged byte, no
 * piece missing), each round notified exactly once, and the counters must
 * show the forgeries refused. Skipped (77) without raw sockets. */
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include "vtest.h"

#define LEN (1u << 20)
#define ROUNDS 40

extern char **environ;
static volatile uint64_t notified, last_imm;

static void handler(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e, (void)arg;
    last_imm = n->imm;
    notified++;
}

static unsigned char pat(unsigned round, size_t i)
{
    return (unsigned char)((i * 131 + (i >> 11) + round * 29 + 1) % 251 + 1);
}

static uint64_t counter(vmmc_ep_t *ep, const char *want)
{
    const char *name;
    uint64_t v;
    for (int i = 0; vmmc_counter_get(ep, i, &name, &v) == VMMC_OK; i++)
        if (!strcmp(name, want))
            return v;
    return 0;
}

static void print_counters(vmmc_ep_t *ep, int me)
{
    const char *name;
    uint64_t v;
    printf("rank %d:", me);
    for (int i = 0; vmmc_counter_get(ep, i, &name, &v) == VMMC_OK; i++)
        if (v && !strncmp(name, "udp.", 4))
            printf(" %s=%llu", name + 4, (unsigned long long)v);
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    VT_CHECK(argc > 1);
    /* Both ranks decide alike whether the attacker can run here. */
    int probe = socket(AF_INET, SOCK_RAW, IPPROTO_UDP);
    if (probe < 0) {
        printf("SKIP: no raw sockets (CAP_NET_RAW): the attacker cannot run\n");
        return 77;
    }
    close(probe);
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 2);
    unsigned char *buf = calloc(1, LEN);
    VT_CHECK(buf);
    vmmc_export_t *ex;
    pid_t hostile = -1;
    FILE *hout = NULL;
    if (me == 1) {
        vmmc_export_params_t p = {0};
        p.field_mask = VMMC_EXPORT_PARAM_HANDLER;
        p.handler = handler;
        p.name = "target";
        p.addr = buf;
        p.length = LEN;
        VT_OK(vmmc_export(ep, &p, &ex));
        int pfd[2];
        VT_CHECK(pipe(pfd) == 0);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
        posix_spawn_file_actions_addclose(&fa, pfd[0]);
        char *args[] = {argv[1], "100", argc > 2 ? argv[2] : "data,ctl,replay", NULL};
        VT_CHECK(posix_spawn(&hostile, argv[1], &fa, NULL, args, environ) == 0);
        posix_spawn_file_actions_destroy(&fa);
        close(pfd[1]);
        hout = fdopen(pfd[0], "r");
        char line[256];
        VT_CHECK(fgets(line, sizeof line, hout) && !strncmp(line, "READY", 5));
    }
    VT_OK(vmmc_barrier(ep));
    vmmc_proxy_t *px = NULL;
    if (me == 0)
        VT_OK(vmmc_import(ep, 1, "target", 5000, &px));
    VT_OK(vmmc_barrier(ep));
    unsigned long long rng = 12345;
    for (unsigned round = 0; round < ROUNDS; round++) {
        if (me == 0) {
            for (size_t i = 0; i < LEN; i++)
                buf[i] = pat(round, i);
            size_t off = 0;
            while (off < LEN) {
                size_t n = 1 + vt_rand(&rng) % (96 * 1024);
                if (n > LEN - off)
                    n = LEN - off;
                int last = off + n == LEN;
                VT_OK(vmmc_send(px, off, buf + off, n, last ? VMMC_SEND_NOTIFY : 0));
                (void)last;
                off += n;
            }
        } else {
            double end = vt_now() + 60;
            while (notified <= round && vt_now() < end)
                vmmc_wait(ep, 100);
            if (notified != round + 1)
                VT_FAIL("round %u: %llu notifications, expected %u", round,
                        (unsigned long long)notified, round + 1);
            size_t bad = 0, first = LEN;
            for (size_t i = 0; i < LEN; i++)
                if (buf[i] != pat(round, i)) {
                    bad++;
                    if (first == LEN)
                        first = i;
                }
            if (bad)
                VT_FAIL("round %u: %zu wrong bytes, the first at %zu (0x%02x, expected 0x%02x)",
                        round, bad, first, buf[first], pat(round, first));
        }
        VT_OK(vmmc_barrier(ep));
    }
    VT_CHECK(vmmc_peer_alive(ep, 1 - me) == 1);
    print_counters(ep, me);
    uint64_t seen = counter(ep, "udp.rx_dgrams");
    if (me == 1) {
        kill(hostile, SIGTERM);
        char line[512];
        while (fgets(line, sizeof line, hout))
            fputs(line, stdout);
        int ws;
        waitpid(hostile, &ws, 0);
        VT_CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    }
    /* The forgeries aimed at this rank reached it and were refused as
     * such: writes go to rank 1, revokes and goodbyes to rank 0 (the
     * importer), replays both ways (corrupted copies of data to rank 1,
     * replayed acknowledgements to rank 0). */
    VT_CHECK(seen > 0);
    const char *mode = argc > 2 ? argv[2] : "data,ctl,replay";
    const char *want = NULL;
    if (me == 1 && (strstr(mode, "data") || strstr(mode, "replay")))
        want = "udp.drop_auth";
    else if (me == 0 && strstr(mode, "ctl"))
        want = "udp.drop_auth";
    else if (me == 0 && strstr(mode, "replay"))
        want = "udp.drop_replay";
    if (want && counter(ep, want) == 0)
        VT_FAIL("rank %d: no forged datagram was refused (%s = 0)", me, want);
    if (px)
        VT_OK(vmmc_unimport(px));
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        VT_OK(vmmc_unexport(ex));
        fclose(hout);
    }
    VT_OK(vmmc_finalize(ep));
    free(buf);
    printf("PASS\n");
    return 0;
}
