/* A barrier with a dead rank must fail. One rank of a 3-rank job dies by
 * SIGKILL right after vmmc_init (after 0-20 ms), before it reaches the
 * barrier; the two others call vmmc_barrier and must get VMMC_ERR_PEER_DEAD
 * with a message naming the dead rank, never VMMC_OK and never a hang.
 * Repeated, because whether the death notice arrives before, with or after
 * the barrier's completion is a race; under `vmmc run` (every rank in turn
 * is the victim) and with a TCP rendezvous outside the launcher (ranks 1
 * and 2 are victims; rank 0 serves the rendezvous).
 *
 * usage: t_live_barrier <path to vmmc> [rounds]   (driver)
 *        t_live_barrier worker <victim>           (a rank of the job) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include "vspawn.h"

static int worker(int victim)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 3);
    if (me == victim) {
        unsigned long long seed = (unsigned long long)getpid() * 2654435761ull;
        usleep((useconds_t)(vt_rand(&seed) % 20000));
        raise(SIGKILL);
    }
    int rc = vmmc_barrier(ep);
    printf("rank %d: barrier %d (%s): %s\n", me, rc, vmmc_strerror(rc),
           rc == VMMC_OK ? "-" : vmmc_last_error());
    fflush(stdout);
    /* A second barrier fails the same way. */
    if (rc != VMMC_OK) {
        int rc2 = vmmc_barrier(ep);
        printf("rank %d: again %d: %s\n", me, rc2, rc2 == VMMC_OK ? "-" : vmmc_last_error());
        fflush(stdout);
    }
    vmmc_finalize(ep);
    return 0;
}

/* Each survivor printed a failed barrier naming the victim, twice. */
static void check_survivors(const char *out, int victim, const char *how, int round)
{
    for (int r = 0; r < 3; r++) {
        if (r == victim)
            continue;
        char key[64], dead[32], want[96];
        snprintf(key, sizeof key, "rank %d: barrier ", r);
        snprintf(dead, sizeof dead, "rank %d", victim);
        const char *s = strstr(out, key);
        if (!s)
            VT_FAIL("%s round %d: rank %d never returned from the barrier:\n%s", how, round, r,
                    out);
        int rc = atoi(s + strlen(key));
        const char *eol = strchr(s, '\n');
        size_t ll = eol ? (size_t)(eol - s) : strlen(s);
        snprintf(want, sizeof want, "%.*s", (int)(ll < sizeof want - 1 ? ll : sizeof want - 1), s);
        if (rc != VMMC_ERR_PEER_DEAD || !strstr(want, dead))
            VT_FAIL("%s round %d: rank %d's barrier with rank %d dead gave: %s", how, round, r,
                    victim, want);
        snprintf(key, sizeof key, "rank %d: again %d: ", r, VMMC_ERR_PEER_DEAD);
        s = strstr(out, key);
        if (!s || strncmp(s + strlen(key), "barrier", 7))
            VT_FAIL("%s round %d: rank %d's second barrier did not fail the same way:\n%s", how,
                    round, r, out);
    }
}

static void tcp_round(const char *self, int victim, int round)
{
    char boot[64], vic[16];
    snprintf(boot, sizeof boot, "VMMC_BOOTSTRAP=127.0.0.1:%d", free_port());
    snprintf(vic, sizeof vic, "%d", victim);
    spawn_result_t res[3];
    int fds[3][2];
    for (int r = 2; r >= 0; r--) {
        char rank[32];
        snprintf(rank, sizeof rank, "VMMC_RANK=%d", r);
        char *env[] = {boot, "VMMC_SIZE=3", rank, "VMMC_BOOT_TIMEOUT=20s", NULL};
        memset(&res[r], 0, sizeof res[r]);
        res[r].pid = spawn_start((char *[]){(char *)self, "worker", vic, NULL}, env, &fds[r][0],
                                 &fds[r][1]);
    }
    static char all[3 * 65536];
    all[0] = 0;
    for (int r = 0; r < 3; r++) {
        spawn_collect(&res[r], fds[r][0], fds[r][1], 60, NULL, NULL);
        strcat(all, res[r].out);
        if (r != victim && exit_code(res[r].status) != 0)
            VT_FAIL("tcp round %d: rank %d exited with %d\nstdout: %s\nstderr: %s", round, r,
                    exit_code(res[r].status), res[r].out, res[r].err);
    }
    VT_CHECK(WIFSIGNALED(res[victim].status) && WTERMSIG(res[victim].status) == SIGKILL);
    check_survivors(all, victim, "tcp", round);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 2 && !strcmp(argv[1], "worker"))
        return worker(atoi(argv[2]));
    if (argc < 2)
        VT_FAIL("usage: t_live_barrier <path to vmmc> [rounds]");
    int rounds = argc > 2 ? atoi(argv[2]) : 12;
    char *self = (char *)spawn_self();
    for (int i = 0; i < rounds; i++) {
        int victim = i % 3;
        char vic[16];
        snprintf(vic, sizeof vic, "%d", victim);
        spawn_result_t *r = spawn_run((char *[]){argv[1], "run", "-n", "3", "--", self, "worker",
                                                 vic, NULL},
                                      NULL, 60, NULL, NULL);
        if (exit_code(r->status) != 128 + SIGKILL)
            VT_FAIL("launcher round %d: status %d\nstdout: %s\nstderr: %s", i,
                    exit_code(r->status), r->out, r->err);
        check_survivors(r->out, victim, "launcher", i);
    }
    printf("launcher: %d rounds ok\n", rounds);
    for (int i = 0; i < rounds; i++)
        tcp_round(self, 1 + i % 2, i);
    printf("tcp: %d rounds ok\n", rounds);
    return 0;
}
