/* VMMC_STATS: at vmmc_finalize each rank writes its counters where the
 * setting says. Rank 0 sends notified writes to rank 1; after finalize each
 * rank reads its own file back and checks the lines (over udp: the link's
 * datagram counters are there and moved). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vtest.h"

static int got;
static void on_note(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep, (void)n, (void)arg;
    got++;
}

/* The value of counter @name in @path for @rank, or -1. */
static long long counter_in(const char *path, int rank, const char *name)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256], want[128];
    snprintf(want, sizeof want, "vmmc.stats rank=%d ", rank);
    long long v = -1;
    while (fgets(line, sizeof line, f)) {
        char *eq, *sp = strrchr(line, ' ');
        if (strncmp(line, want, strlen(want)) || !sp || !(eq = strchr(sp, '=')))
            continue;
        if ((size_t)(eq - sp - 1) == strlen(name) && !strncmp(sp + 1, name, strlen(name)))
            v = atoll(eq + 1);
    }
    fclose(f);
    return v;
}

int main(void)
{
    char pat[256], path[256];
    snprintf(pat, sizeof pat, "/tmp/vmmc_t_stats.%d.%%r", (int)getppid());
    setenv("VMMC_STATS", pat, 1); /* before anything reads the settings */
    vt_require_transport();
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    snprintf(path, sizeof path, "/tmp/vmmc_t_stats.%d.%d", (int)getppid(), me);
    unlink(path);
    static char buf[4096];
    vmmc_export_t *ex;
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_HANDLER, .name = "s", .addr = buf,
                              .length = sizeof buf, .handler = on_note};
    VT_OK(vmmc_export(ep, &p, &ex));
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        vmmc_proxy_t *px;
        VT_OK(vmmc_import(ep, 1, "s", 10000, &px));
        for (int i = 0; i < 10; i++)
            VT_OK(vmmc_send(px, 0, &i, sizeof i, VMMC_SEND_NOTIFY));
    } else {
        double t0 = vt_now();
        while (got < 10 && vt_now() - t0 < 30)
            vmmc_wait(ep, 100);
        VT_CHECK(got == 10);
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    long long sent = counter_in(path, me, "notifications_sent");
    long long run = counter_in(path, me, "notifications_run");
    printf("rank %d: notifications sent %lld, run %lld\n", me, sent, run);
    VT_CHECK(me == 0 ? sent == 10 : run == 10);
    if (vt_remote()) {
        /* The link's own counters follow the core's, named udp.*. */
        FILE *f = fopen(path, "r");
        VT_CHECK(f != NULL);
        char line[256];
        int udp_lines = 0;
        while (fgets(line, sizeof line, f))
            udp_lines += strstr(line, " udp.") != NULL;
        fclose(f);
        printf("rank %d: %d udp counters\n", me, udp_lines);
        VT_CHECK(udp_lines > 0);
    }
    unlink(path);
    return 0;
}
