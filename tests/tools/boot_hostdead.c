/* TCP bootstrap: rank 0 serves the rendezvous; when it dies, the closed
 * rendezvous connection tells the other ranks at once. Two processes over
 * the udp transport (VMMC_TRANSPORT=udp) with a udp peer timeout of 30 s:
 * rank 1 sleeps in vmmc_wait(-1) with an import of rank 0's export; rank 0
 * dies by SIGKILL. Rank 1 must get VMMC_ERR_PEER_DEAD naming rank 0 long
 * before the udp timeout (the bound is 10 s: a loose bound on a lost
 * wake-up, not a speed test), and then every operation to rank 0 and the
 * barrier fail the same way.
 *
 * usage: boot_hostdead          (driver)
 *        boot_hostdead worker   (a rank of the job) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "vspawn.h"

static int worker(void)
{
    vt_require_transport();
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 2);
    static char buf[4096];
    vmmc_export_params_t p = {.name = "box", .addr = buf, .length = sizeof buf};
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &p, &ex));
    vmmc_proxy_t *px;
    VT_OK(vmmc_import(ep, 1 - me, "box", 10000, &px));
    VT_OK(vmmc_send(px, 0, "x", 1, 0));
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        usleep(200000);
        raise(SIGKILL);
    }
    double t0 = vt_now();
    int rc;
    while ((rc = vmmc_wait(ep, -1)) >= 0 && vt_now() - t0 < 60)
        ;
    double ms = (vt_now() - t0) * 1000;
    printf("rank 1: wait %d after %.0f ms: %s\n", rc, ms, vmmc_last_error());
    VT_STATUS(VMMC_ERR_PEER_DEAD, rc);
    VT_CHECK(vmmc_peer_alive(ep, 0) == 0);
    rc = vmmc_send(px, 0, "y", 1, 0);
    printf("rank 1: send %d: %s\n", rc, vmmc_last_error());
    VT_STATUS(VMMC_ERR_PEER_DEAD, rc);
    VT_CHECK(strstr(vmmc_last_error(), "rank 0") != NULL);
    rc = vmmc_barrier(ep);
    printf("rank 1: barrier %d: %s\n", rc, vmmc_last_error());
    VT_STATUS(VMMC_ERR_PEER_DEAD, rc);
    VT_CHECK(strstr(vmmc_last_error(), "rank 0") != NULL);
    vmmc_finalize(ep);
    printf("rank 1 ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1 && !strcmp(argv[1], "worker"))
        return worker();
    char *self = (char *)spawn_self();
    char boot[64];
    snprintf(boot, sizeof boot, "VMMC_BOOTSTRAP=127.0.0.1:%d", free_port());
    spawn_result_t res[2];
    int fds[2][2];
    for (int r = 1; r >= 0; r--) {
        char rank[32];
        snprintf(rank, sizeof rank, "VMMC_RANK=%d", r);
        char *env[] = {boot, "VMMC_SIZE=2", rank, "VMMC_BOOT_TIMEOUT=20s", "VMMC_TRANSPORT=udp",
                       "VMMC_UDP_PEER_TIMEOUT=30s", NULL};
        memset(&res[r], 0, sizeof res[r]);
        res[r].pid = spawn_start((char *[]){self, "worker", NULL}, env, &fds[r][0], &fds[r][1]);
    }
    for (int r = 0; r < 2; r++)
        spawn_collect(&res[r], fds[r][0], fds[r][1], 90, NULL, NULL);
    if (exit_code(res[1].status) == 77 || exit_code(res[0].status) == 77)
        VT_SKIP("%s", res[1].out);
    VT_CHECK(WIFSIGNALED(res[0].status) && WTERMSIG(res[0].status) == SIGKILL);
    if (exit_code(res[1].status) != 0)
        VT_FAIL("rank 1: status %d\nstdout: %s\nstderr: %s", exit_code(res[1].status), res[1].out,
                res[1].err);
    const char *s = strstr(res[1].out, "after ");
    VT_CHECK(s != NULL);
    double ms = atof(s + 6);
    printf("%s", res[1].out);
    if (ms > 10000)
        VT_FAIL("rank 1 learned of rank 0's death after %.0f ms (udp peer timeout 30 s)", ms);
    printf("boot_hostdead ok\n");
    return 0;
}
