/* `vmmc run` failure handling: a rank killed by SIGKILL makes the launcher
 * name it and exit 137, the survivors get the DEAD event (with the wait
 * status) before the launcher stops them; SIGTERM or SIGINT to the launcher
 * stops the whole job; malformed input on the launcher's socket is refused without
 * harming the job; a launcher killed by SIGKILL takes its ranks with it.
 * Arguments: vmmc tool, boot_peer. */
#include <sys/prctl.h>

#include "vspawn.h"

static int ready_pids[2];
static int term_sent;
static int stop_signal;

static void on_ready(spawn_result_t *r, void *arg)
{
    (void)arg;
    if (term_sent || count_substr(r->out, "ready ") < 2)
        return;
    for (int k = 0; k < 2; k++) {
        char want[32];
        snprintf(want, sizeof want, "ready %d ", k);
        const char *p = strstr(r->out, want);
        VT_CHECK(p && sscanf(p + strlen(want), "%d", &ready_pids[k]) == 1);
    }
    VT_CHECK(kill(r->pid, stop_signal) == 0);
    term_sent = 1;
}

int main(int argc, char **argv)
{
    VT_CHECK(argc == 3);
    char *vmmc = argv[1], *peer = argv[2];

    /* SIGKILL of rank 1. */
    double t0 = vt_now();
    spawn_result_t *r = spawn_run((char *[]){vmmc, "run", "-n", "3", "--", peer, "dead", NULL},
                                  NULL, 20, NULL, NULL);
    printf("launcher ended %.3f s after start\n", vt_now() - t0);
    if (exit_code(r->status) != 128 + SIGKILL)
        VT_FAIL("status %d; stderr:\n%s\nstdout:\n%s", exit_code(r->status), r->err, r->out);
    VT_CHECK(strstr(r->err, "rank 1 (pid ") && strstr(r->err, "killed by signal 9"));
    VT_CHECK(strstr(r->out, "rank 0 saw DEAD 1 signal 9"));
    VT_CHECK(strstr(r->out, "rank 2 saw DEAD 1 signal 9"));

    /* SIGTERM or SIGINT to the launcher stops every rank. */
    int sigs[] = {SIGTERM, SIGINT};
    for (int i = 0; i < 2; i++) {
        stop_signal = sigs[i];
        term_sent = 0;
        r = spawn_run((char *[]){vmmc, "run", "-n", "2", "--", peer, "block", NULL}, NULL, 20,
                      on_ready, NULL);
        VT_CHECK(term_sent);
        if (exit_code(r->status) != 128 + stop_signal)
            VT_FAIL("status %d; stderr:\n%s", exit_code(r->status), r->err);
        VT_CHECK(strstr(r->err, "forwarding it to the ranks"));
        for (int k = 0; k < 2; k++)
            VT_CHECK(kill(ready_pids[k], 0) == -1 && errno == ESRCH);
    }

    /* Malformed connections are dropped; the job still runs. */
    r = spawn_run((char *[]){vmmc, "run", "-n", "2", "--", peer, "garbage", NULL}, NULL, 30,
                  NULL, NULL);
    if (exit_code(r->status) != 0)
        VT_FAIL("status %d; stderr:\n%s\nstdout:\n%s", exit_code(r->status), r->err, r->out);
    VT_CHECK(strstr(r->out, "garbage refused"));
    VT_CHECK(strstr(r->out, "rank 0 of 2 ok") && strstr(r->out, "rank 1 of 2 ok"));
    /* A launcher killed outright takes its ranks with it. This process
     * adopts the orphans (subreaper) so it can see how they ended. */
    VT_CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
    stop_signal = SIGKILL;
    term_sent = 0;
    r = spawn_run((char *[]){vmmc, "run", "-n", "2", "--", peer, "block", NULL}, NULL, 20,
                  on_ready, NULL);
    VT_CHECK(term_sent);
    VT_CHECK(WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGKILL);
    for (int k = 0; k < 2; k++) {
        int st;
        VT_CHECK(waitpid(ready_pids[k], &st, 0) == ready_pids[k]);
        VT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    }
    printf("run_kill ok\n");
    return 0;
}
