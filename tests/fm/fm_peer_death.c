/* A rank killed with SIGKILL: the survivors get VMMC_ERR_PEER_DEAD, never a
 * hang. Rank 2 opens a 1 MiB message to rank 0, sends part of it, then kills
 * itself. Rank 0 is waiting in fm_extract_wait(): its handler, suspended in
 * that message, must see fm_receive() fail with VMMC_ERR_PEER_DEAD, and the
 * wait must return it. Rank 1 keeps sending to rank 2 (blocking) until its
 * send fails with VMMC_ERR_PEER_DEAD.
 *
 * With "zcopy", rank 0 receives into communication memory, so rank 2 places
 * the bytes straight there and dies before announcing them.
 *
 * `vmmc run` fails a job whose rank died, so this program is its own driver:
 * started plainly, it runs `vmmc run -n 3 -- <itself> --child <dir>` and
 * checks what the survivors wrote into <dir>. */
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fm_test.h"
#include "vspawn.h"

static const char *dir;
static int me;
static int big_rc = 1;
static size_t big_got;
static int zcopy;
static uint8_t *zbuf; /* 1 MiB of communication memory (zcopy) */

static void report(const char *what)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%d", dir, me);
    FILE *f = fopen(path, "w");
    VT_CHECK(f);
    fprintf(f, "%s\n", what);
    fclose(f);
    printf("rank %d: %s\n", me, what);
    fflush(stdout);
}

static void h_big(fm_stream_t *s, int sender, void *arg)
{
    if (zcopy) {
        ssize_t n = fm_receive(zbuf, s, 1 << 20);
        big_rc = n < 0 ? (int)n : 0;
        return;
    }
    uint8_t buf[4096];
    for (;;) {
        ssize_t n = fm_receive(buf, s, sizeof buf);
        if (n < 0) {
            big_rc = (int)n;
            return;
        }
        VT_CHECK(ft_check(buf, (size_t)n, sender, 1, big_got) == (size_t)-1);
        big_got += (size_t)n;
        if (n < (ssize_t)sizeof buf) {
            big_rc = 0;
            return;
        }
    }
}

static void h_sink(fm_stream_t *s, int sender, void *arg) {}

/* zcopy: warm-up messages into the same buffer, so that rank 2 has it
 * mapped (its first placement into an allocation maps it in the background
 * while the bytes travel in packets). */
static void h_warm(fm_stream_t *s, int sender, void *arg)
{
    VT_CHECK(fm_receive(zbuf, s, 1 << 20) == 64 * 1024);
}

static int child(void)
{
    vmmc_ep_t *ep;
    fm_t *fm;
    ft_open(&ep, &fm, NULL);
    me = fm_nodeid(fm);
    VT_CHECK(fm_numnodes(fm) == 3);
    VT_CHECK(fm_register_handler(fm, 1, h_big, NULL) == 1);
    VT_CHECK(fm_register_handler(fm, 2, h_sink, NULL) == 2);
    VT_CHECK(fm_register_handler(fm, 3, h_warm, NULL) == 3);
    if (zcopy)
        VT_OK(vmmc_mem_alloc(ep, 1 << 20, (void **)&zbuf));
    VT_OK(vmmc_barrier(ep));
    if (me == 2) {
        static uint8_t part[300 * 1024];
        fm_stream_t *s;
        double end = vt_now() + 20;
        while (zcopy && fm_counter(fm, "zcopy_bytes_sent") == 0) {
            VT_OK(fm_send(fm, 0, 3, part, 64 * 1024));
            if (vt_now() > end)
                VT_FAIL("rank 2: nothing was placed in 20 s of warm-up messages");
        }
        uint64_t placed = fm_counter(fm, "zcopy_bytes_sent");
        ft_fill(part, sizeof part, 2, 1);
        VT_OK(fm_begin_message(fm, 0, 1 << 20, 1, &s));
        VT_OK(fm_send_piece(s, part, sizeof part));
        /* Let rank 0 start the handler on what arrived, then die. */
        end = vt_now() + 20;
        while (zcopy ? fm_counter(fm, "zcopy_bytes_sent") == placed : fm_counter(fm, "pkt_sent") < 10)
            if (vt_now() > end)
                VT_FAIL("rank 2: the message did not get under way");
        usleep(50000);
        report("DYING with the message under way");
        raise(SIGKILL);
    } else if (me == 0) {
        int rc;
        while ((rc = fm_extract_wait(fm, FM_EXTRACT_ALL, -1)) >= 0)
            ;
        if (rc != VMMC_ERR_PEER_DEAD)
            VT_FAIL("fm_extract_wait returned %d (%s)", rc, vmmc_strerror(rc));
        if (big_rc != VMMC_ERR_PEER_DEAD)
            VT_FAIL("the suspended handler saw %d after %zu bytes", big_rc, big_got);
        VT_STATUS(VMMC_ERR_PEER_DEAD, fm_send_4(fm, 2, 2, 1, 2, 3, 4));
        report("PEER_DEAD in wait and in the suspended handler");
    } else {
        static uint8_t buf[8192];
        int rc;
        uint64_t n = 0;
        while ((rc = fm_send(fm, 2, 2, buf, sizeof buf)) == VMMC_OK)
            n++;
        if (rc != VMMC_ERR_PEER_DEAD)
            VT_FAIL("fm_send returned %d (%s)", rc, vmmc_strerror(rc));
        report("PEER_DEAD in a blocked send");
        pause(); /* stay up until the launcher ends the job: rank 0 is still checking */
    }
    _exit(0); /* the job is broken: no finalize barrier */
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--child")) {
        dir = argv[2];
        zcopy = argc >= 4 && !strcmp(argv[3], "zcopy");
        return child();
    }
    if (argc < 2)
        VT_SKIP("usage: fm_peer_death <path of the vmmc tool>");
    char tmpl[] = "/tmp/fm_peer_death.XXXXXX";
    VT_CHECK(mkdtemp(tmpl) != NULL);
    spawn_result_t *job = spawn_job(
        argv[1], 3, (const char *[]){"--child", tmpl, argc >= 3 ? argv[2] : "", NULL}, 50);
    printf("job exit status %d (a rank was killed, so non-zero is expected)\n",
           exit_code(job->status));
    int ok = 1;
    for (int r = 0; r < 3; r++) {
        /* Ranks 0 and 1 saw the death; rank 2 got as far as dying on purpose
         * (not failing a check of its own first, which would kill it too). */
        const char *want = r < 2 ? "PEER_DEAD" : "DYING";
        char path[512], line[256] = "";
        snprintf(path, sizeof path, "%s/%d", tmpl, r);
        FILE *f = fopen(path, "r");
        if (!f || !fgets(line, sizeof line, f) || !strstr(line, want)) {
            fprintf(stderr, "FAIL: rank %d did not report %s\n", r, want);
            ok = 0;
        }
        if (f)
            fclose(f);
        unlink(path);
    }
    rmdir(tmpl);
    VT_CHECK(ok);
    printf("fm_peer_death: ok\n");
    return 0;
}
