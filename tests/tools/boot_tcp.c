/* TCP bootstrap (VMMC_BOOTSTRAP=host:port): three processes started here
 * with their own environment join one job, exchange cards and run barriers;
 * then a job where rank 2 dies and the others get DEAD(2); then bad
 * settings and an unreachable server. An IPv6 server address too, when the
 * machine has IPv6 loopback. Argument: boot_peer. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "vspawn.h"

/* Start @n ranks of `peer mode arg` (rank 0 last, so the others retry). */
/* Is IPv6 loopback usable here? */
static int have_ipv6(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

static const char *host = "127.0.0.1";

static void job(const char *peer, const char *mode, const char *arg, int n, spawn_result_t *res)
{
    char boot[64], size[32];
    snprintf(boot, sizeof boot, "VMMC_BOOTSTRAP=%s:%d", host, free_port());
    snprintf(size, sizeof size, "VMMC_SIZE=%d", n);
    int fds[8][2];
    for (int r = n - 1; r >= 0; r--) {
        char rank[32];
        snprintf(rank, sizeof rank, "VMMC_RANK=%d", r);
        char *env[] = {boot, size, rank, "VMMC_BOOT_TIMEOUT=20s", NULL};
        memset(&res[r], 0, sizeof res[r]);
        res[r].pid = spawn_start((char *[]){(char *)peer, (char *)mode, (char *)arg, NULL}, env,
                                 &fds[r][0], &fds[r][1]);
        if (r == 1)
            usleep(100000); /* let the others find nobody listening at first */
    }
    for (int r = 0; r < n; r++)
        spawn_collect(&res[r], fds[r][0], fds[r][1], 60, NULL, NULL);
}

static spawn_result_t res[3];

int main(int argc, char **argv)
{
    VT_CHECK(argc == 2);
    const char *peer = argv[1];

    job(peer, "ranks", "50", 3, res);
    for (int r = 0; r < 3; r++) {
        char want[64];
        snprintf(want, sizeof want, "rank %d of 3 ok (50 barriers)", r);
        if (exit_code(res[r].status) != 0 || !strstr(res[r].out, want))
            VT_FAIL("rank %d: status %d\nstdout: %s\nstderr: %s", r, exit_code(res[r].status),
                    res[r].out, res[r].err);
    }

    if (have_ipv6()) { /* an IPv6 address for the server */
        host = "[::1]";
        job(peer, "ranks", "5", 2, res);
        for (int r = 0; r < 2; r++)
            if (exit_code(res[r].status) != 0)
                VT_FAIL("IPv6 rank %d: status %d\nstderr: %s", r, exit_code(res[r].status),
                        res[r].err);
        host = "127.0.0.1";
    } else {
        printf("no IPv6 loopback: the IPv6 case is not run\n");
    }

    job(peer, "tcpdead", "", 3, res);
    VT_CHECK(WIFSIGNALED(res[2].status) && WTERMSIG(res[2].status) == SIGKILL);
    for (int r = 0; r < 2; r++) {
        char want[64];
        snprintf(want, sizeof want, "rank %d saw DEAD 2", r);
        if (exit_code(res[r].status) != 0 || !strstr(res[r].out, want))
            VT_FAIL("rank %d: status %d\nstdout: %s\nstderr: %s", r, exit_code(res[r].status),
                    res[r].out, res[r].err);
    }

    /* Bad settings fail cleanly with a message. */
    spawn_result_t *r;
    r = spawn_run((char *[]){(char *)peer, "ranks", "1", NULL},
                  (char *[]){"VMMC_BOOTSTRAP=no-port-here", "VMMC_RANK=0", "VMMC_SIZE=2", NULL},
                  30, NULL, NULL);
    VT_CHECK(exit_code(r->status) == 1 && strstr(r->err, "host:port"));
    r = spawn_run((char *[]){(char *)peer, "ranks", "1", NULL},
                  (char *[]){"VMMC_BOOTSTRAP=127.0.0.1:1", "VMMC_RANK=3", "VMMC_SIZE=2", NULL},
                  30, NULL, NULL);
    VT_CHECK(exit_code(r->status) == 1 && strstr(r->err, "VMMC_RANK"));
    /* Nobody serves the port: give up after VMMC_BOOT_TIMEOUT. */
    char boot[64];
    snprintf(boot, sizeof boot, "VMMC_BOOTSTRAP=127.0.0.1:%d", free_port());
    r = spawn_run((char *[]){(char *)peer, "ranks", "1", NULL},
                  (char *[]){boot, "VMMC_RANK=1", "VMMC_SIZE=2", "VMMC_BOOT_TIMEOUT=500ms", NULL},
                  30, NULL, NULL);
    VT_CHECK(exit_code(r->status) == 1 && strstr(r->err, "cannot reach the bootstrap server"));
    printf("boot_tcp ok\n");
    return 0;
}
