/* Dead peer: a rank killed with SIGKILL (by itself, or by another rank) while
 * one survivor streams sends into it and the other reads from it. Both
 * survivors must get VMMC_ERR_PEER_DEAD within a bounded time (never hang),
 * every later send, notified send, asynchronous send, fetch, import and
 * barrier must fail the same way, and the survivors must keep working with
 * each other (1 MiB each way, sent and read back, every byte checked).
 *
 * usage: conf_dead <path to vmmc> <ranks> self|peer   (the driver: runs the
 *        job with a long VMMC_RUN_GRACE so the launcher does not end the
 *        survivors, and checks its output)
 *        conf_dead rank self|peer                      (a rank of the job) */
#include <signal.h>
#include <unistd.h>

#include "conf.h"
#include "vspawn.h"

#define BIG ((size_t)1 << 20)
#define DETECT_S 10.0 /* generous: the launcher's notice takes milliseconds */

/* flag region: [0] pid of rank 2, [1] time of the kill, [2 + r] rank r saw
 * that time, [8] survivor data landed, [16] survivor verified its peer's data */
static volatile uint64_t *flag;
static vmmc_proxy_t *ph[3], *pm[3], *pf[3];
static vmmc_ep_t *ep;

static double tkill(void)
{
    double t;
    uint64_t v = conf_load((const void *)&flag[1]);
    memcpy(&t, &v, sizeof t);
    return t;
}

static void put_word(int peer, int idx, uint64_t v)
{
    VT_OK(vmmc_send(pf[peer], (size_t)idx * 8, &v, sizeof v, 0));
}

static int stream_until_error(unsigned char *src)
{
    for (unsigned i = 0;; i++) {
        vmmc_proxy_t *px = i % 2 ? ph[2] : pm[2];
        int rc;
        if (i % 3 == 0) {
            vmmc_request_t rq;
            rc = vmmc_send_async(px, 0, src, BIG, i % 2 ? VMMC_SEND_NOTIFY : 0, &rq);
            if (rc == VMMC_INPROGRESS)
                rc = vmmc_request_wait(&rq, -1);
        } else {
            rc = vmmc_send(px, 0, src, BIG, i % 5 == 0 ? VMMC_SEND_NOTIFY : 0);
        }
        if (rc != VMMC_OK)
            return rc;
    }
}

static int fetch_until_error(unsigned char *dst)
{
    for (unsigned i = 0;; i++) {
        int rc = vmmc_fetch(pm[2], 0, dst, i % 2 ? BIG : 64);
        if (rc != VMMC_OK)
            return rc;
    }
}

static int worker(const char *mode)
{
    ep = conf_init(3);
    int me = vmmc_rank(ep), other = 1 - me;
    unsigned char *heap = calloc(1, BIG), *mem, *src = malloc(BIG), *dst = malloc(BIG);
    VT_CHECK(heap && src && dst);
    VT_OK(vmmc_mem_alloc(ep, BIG, (void **)&mem));
    VT_OK(vmmc_mem_alloc(ep, 4096, (void **)&flag));
    vmmc_export_params_t p = {0};
    vmmc_export_t *ex;
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS;
    p.flags = VMMC_EXPORT_READ;
    p.name = "heap", p.addr = heap, p.length = BIG;
    VT_OK(vmmc_export(ep, &p, &ex));
    p.name = "mem", p.addr = mem;
    VT_OK(vmmc_export(ep, &p, &ex));
    p.name = "flag", p.addr = (void *)flag, p.length = 4096;
    VT_OK(vmmc_export(ep, &p, &ex));
    for (int r = 0; r < 3; r++)
        if (r != me) {
            ph[r] = conf_import(ep, r, "heap");
            pm[r] = conf_import(ep, r, "mem");
            pf[r] = conf_import(ep, r, "flag");
        }
    if (me == 2)
        put_word(0, 0, (uint64_t)getpid());
    VT_OK(vmmc_barrier(ep));
    /* The killer announces when it will kill, and waits until the others
     * have seen it (a word sent over udp may still travel when the sender
     * dies). */
    int killer = !strcmp(mode, "self") ? 2 : 0;
    if (me == killer) {
        double t = vt_now() + 0.2;
        uint64_t v;
        memcpy(&v, &t, sizeof v);
        flag[1] = v;
        for (int r = 0; r < 3; r++)
            if (r != me)
                put_word(r, 1, v);
        for (int r = 0; r < 3; r++)
            if (r != me)
                CONF_POLL(ep, conf_load((const void *)&flag[2 + r]) == 1, "the others to see the time");
        while (vt_now() < t)
            usleep(1000);
        if (me == 2)
            raise(SIGKILL);
        VT_CHECK(kill((pid_t)flag[0], SIGKILL) == 0);
    } else {
        CONF_POLL(ep, conf_load((const void *)&flag[1]) != 0, "the time of the kill");
        put_word(killer, 2 + me, 1);
    }
    if (me == 2) {
        double w0 = vt_now();
        while (vt_now() - w0 < conf_timeout())
            vmmc_wait(ep, 100);
        VT_FAIL("rank 2 was not killed");
    }
    conf_fill(src, BIG, (uint64_t)me + 1, 0);
    int rc = me == 0 ? stream_until_error(src) : fetch_until_error(dst);
    double dt = vt_now() - tkill();
    printf("[%s] rank %d: rank 2 found dead after %.3f s: %s (%s)\n", conf_transport(), me, dt,
           vmmc_strerror(rc), vmmc_last_error());
    fflush(stdout);
    VT_STATUS(VMMC_ERR_PEER_DEAD, rc);
    if (dt > DETECT_S)
        VT_FAIL("[%s] death found after %.1f s", conf_transport(), dt);
    /* Every later operation to rank 2 fails the same way; none hangs. */
    vmmc_request_t rq;
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_send(pm[2], 0, src, 8, 0));
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_send(ph[2], 0, src, BIG, 0));
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_send_imm(ph[2], 0, src, 8, VMMC_SEND_NOTIFY, 1));
    rc = vmmc_send_async(ph[2], 0, src, BIG, 0, &rq);
    if (rc == VMMC_INPROGRESS)
        rc = vmmc_request_wait(&rq, (int)(conf_timeout() * 1000));
    VT_STATUS(VMMC_ERR_PEER_DEAD, rc);
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_fetch(pm[2], 0, dst, 8));
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_fetch(ph[2], 0, dst, BIG));
    vmmc_proxy_t *px;
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_import(ep, 2, "heap", 1000, &px));
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_import(ep, 2, "never", 1000, &px));
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_barrier(ep));
    int a2 = vmmc_peer_alive(ep, 2), ao = vmmc_peer_alive(ep, other);
    if (a2 != 0 || ao != 1)
        VT_FAIL("[%s] vmmc_peer_alive: rank 2 %d, rank %d %d", conf_transport(), a2, other, ao);
    /* The survivors still work with each other. */
    VT_OK(vmmc_send(ph[other], 0, src, BIG, 0));
    put_word(other, 8, 1);
    CONF_POLL(ep, flag[8] == 1, "the other survivor's data");
    conf_check(heap, BIG, (uint64_t)other + 1, 0, "survivor %d's data", other);
    VT_OK(vmmc_fetch(ph[other], 0, dst, BIG));
    conf_check(dst, BIG, (uint64_t)me + 1, 0, "read back from survivor %d", other);
    printf("[%s] rank %d: conf ok\n", conf_transport(), me);
    fflush(stdout);
    /* Leave once the other has checked too. The last word is fenced (a
     * send returning means its source may be reused, not that it landed;
     * over udp it may still wait in a batch). The other may leave as soon
     * as it has our word, before its delivery report reaches us: only that
     * fence may fail, and then with the peer's departure. */
    rc = vmmc_send(pf[other], 16 * 8, &(uint64_t){1}, 8, 0);
    if (rc == VMMC_OK)
        rc = vmmc_fence(ep, other);
    if (rc != VMMC_OK && rc != VMMC_ERR_PEER_DEAD)
        VT_FAIL("[%s] last word to rank %d: %s", conf_transport(), other, vmmc_strerror(rc));
    if (rc != VMMC_OK)
        printf("[%s] rank %d: last word to rank %d: %s (%s)\n", conf_transport(), me, other,
               vmmc_strerror(rc), vmmc_last_error());
    fflush(stdout);
    CONF_POLL(ep, flag[16] == 1, "the other survivor's checks");
    VT_OK(vmmc_finalize(ep));
    _exit(0);
}

/* Run the job, bounded in time; check each survivor's report. */
static int driver(const char *vmmc, const char *np, const char *mode)
{
    setenv("VMMC_RUN_GRACE", "120s", 1); /* the survivors end on their own */
    spawn_result_t *r =
        spawn_job(vmmc, atoi(np), (const char *[]){"rank", mode, NULL}, conf_timeout() + 20);
    if (strstr(r->out, "SKIP:"))
        return 77;
    VT_CHECK(exit_code(r->status) == 128 + SIGKILL);
    for (int k = 0; k < 2; k++) {
        char key[64];
        snprintf(key, sizeof key, "rank %d: conf ok", k);
        if (!strstr(r->out, key))
            VT_FAIL("survivor %d did not finish its checks", k);
    }
    /* Nor may one fail after that (its wait for the other's last word). */
    if (strstr(r->err, "FAIL "))
        VT_FAIL("a survivor failed after its checks");
    printf("conf_dead %s: ok\n", mode);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "rank"))
        return worker(argv[2]);
    if (argc != 4 || (strcmp(argv[3], "self") && strcmp(argv[3], "peer")))
        VT_FAIL("usage: conf_dead <path to vmmc> <ranks> self|peer");
    return driver(argv[1], argv[2], argv[3]);
}
