/* kill -9 of a rank mid-transfer. Rank 2 is killed while rank 0 streams
 * large sends into it and rank 1 sleeps in vmmc_wait(-1). Both survivors must
 * get VMMC_ERR_PEER_DEAD (within 10 s: a generous bound on a shared machine;
 * what it rules out is a hang), every later operation to rank 2 must fail
 * the same way, and nothing may be left in /dev/shm.
 *
 * usage: t_kill <path to vmmc>   (driver: runs the job and checks it)
 *        t_kill worker           (a rank of the job) */
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vspawn.h"
#include "vtest.h"

#define BIG (1 << 20)

static int worker(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 3);
    char *heap = calloc(1, BIG), *mem;
    VT_OK(vmmc_mem_alloc(ep, BIG, (void **)&mem));
    volatile double *tkill;
    VT_OK(vmmc_mem_alloc(ep, 4096, (void **)&tkill));
    vmmc_export_params_t p = {0};
    vmmc_export_t *ex;
    p.name = "heap", p.addr = heap, p.length = BIG;
    VT_OK(vmmc_export(ep, &p, &ex));
    p.name = "mem", p.addr = mem;
    VT_OK(vmmc_export(ep, &p, &ex));
    p.name = "t", p.addr = (void *)tkill, p.length = 4096;
    VT_OK(vmmc_export(ep, &p, &ex));
    vmmc_proxy_t *ph[3] = {0}, *pm[3] = {0}, *pt[3] = {0};
    for (int r = 0; r < 3; r++) {
        if (r == me)
            continue;
        VT_OK(vmmc_import(ep, r, "heap", 5000, &ph[r]));
        VT_OK(vmmc_import(ep, r, "mem", 5000, &pm[r]));
        VT_OK(vmmc_import(ep, r, "t", 5000, &pt[r]));
    }
    VT_OK(vmmc_barrier(ep));
    printf("rank %d pid %d\n", me, (int)getpid());
    fflush(stdout);
    if (me == 2) {
        usleep(300000);
        double t = vt_now();
        VT_OK(vmmc_send(pt[0], 0, &t, sizeof t, 0));
        VT_OK(vmmc_send(pt[1], 0, &t, sizeof t, 0));
        /* Over udp a send that returned may still travel: the time must
         * have landed before the kill, or the survivors measure from 0. */
        VT_OK(vmmc_fence(ep, -1));
        raise(SIGKILL);
    }
    char *src = malloc(BIG);
    memset(src, me, BIG);
    int rc = VMMC_OK;
    if (me == 0) {
        /* Stream into rank 2 (both paths, sync and async) until it fails. */
        vmmc_request_t rq;
        for (unsigned i = 0; rc == VMMC_OK; i++) {
            vmmc_proxy_t *px = i % 2 ? ph[2] : pm[2];
            if (i % 3 == 0) {
                rc = vmmc_send_async(px, 0, src, BIG, 0, &rq);
                if (rc == VMMC_INPROGRESS)
                    rc = vmmc_request_wait(&rq, -1);
            } else {
                rc = vmmc_send(px, 0, src, BIG, i % 5 == 0 ? VMMC_SEND_NOTIFY : 0);
            }
        }
    } else {
        /* Sleep until something happens: the death must wake us. */
        while ((rc = vmmc_wait(ep, -1)) >= 0)
            ;
    }
    double dt = (vt_now() - *tkill) * 1000;
    printf("rank %d: detected rank 2 dead after %.1f ms: %s (%s)\n", me, dt, vmmc_strerror(rc),
           vmmc_last_error());
    fflush(stdout);
    VT_STATUS(VMMC_ERR_PEER_DEAD, rc);
    /* Every later operation to rank 2 fails the same way, none hangs. */
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_send(pm[2], 0, src, 8, 0));
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_send(ph[2], 0, src, 8, VMMC_SEND_NOTIFY));
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_fetch(pm[2], 0, src, 8));
    vmmc_proxy_t *px;
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_import(ep, 2, "heap", 1000, &px));
    VT_CHECK(vmmc_peer_alive(ep, 2) == 0 && vmmc_peer_alive(ep, 1 - me) == 1);
    /* The survivors still talk to each other; neither leaves before the
     * other has checked all of the above. */
    VT_OK(vmmc_send(pm[1 - me], 0, src, BIG, 0));
    double one = 1;
    VT_OK(vmmc_send(pt[1 - me], 64, &one, sizeof one, 0));
    double w0 = vt_now();
    /* Progress, at once and while waiting: over udp our last word may wait
     * in a batch until this endpoint next polls, waits or fences (a send
     * returning says the source is reusable, not that the data left), and
     * the other survivor's word may be here already. */
    (void)vmmc_progress(ep);
    while (tkill[8] != 1 && vt_now() - w0 < 5) {
        usleep(100);
        (void)vmmc_progress(ep);
    }
    VT_CHECK(tkill[8] == 1);
    printf("rank %d: ok\n", me);
    fflush(stdout);
    _exit(0);
}

/* Anything of ours in /dev/shm (the library uses memfds only). */
static int count_dev_shm(void)
{
    DIR *d = opendir("/dev/shm");
    int n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, "vmmc") != NULL;
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "worker"))
        return worker();
    if (argc < 2)
        VT_FAIL("usage: t_kill <path to vmmc>");
    int shm_before = count_dev_shm();
    spawn_result_t *r = spawn_job(argv[1], 3, (const char *[]){"worker", NULL}, vt_remote() ? 80 : 50);
    VT_CHECK(exit_code(r->status) == 128 + SIGKILL);
    VT_CHECK(strstr(r->err, "rank 2") && strstr(r->err, "signal 9"));
    for (int k = 0; k < 2; k++) {
        char key[64];
        snprintf(key, sizeof key, "rank %d: detected rank 2 dead after ", k);
        const char *s = strstr(r->out, key);
        if (!s)
            VT_FAIL("rank %d did not report the death", k);
        double ms = atof(s + strlen(key));
        VT_CHECK(ms >= 0 && ms < 10000);
        snprintf(key, sizeof key, "rank %d: ok", k);
        VT_CHECK(strstr(r->out, key) != NULL);
    }
    /* No rank left running, nothing left behind. */
    for (const char *s = r->out; (s = strstr(s, " pid ")); s += 5) {
        int p = atoi(s + 5);
        VT_CHECK(p > 0 && kill(p, 0) != 0);
    }
    VT_CHECK(count_dev_shm() == 0 && shm_before == 0);
    printf("t_kill: ok\n");
    return 0;
}
