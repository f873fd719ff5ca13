/* Hostile requests for FM ring names: rank 0 opens channel 5 (and listens);
 * rank 2 asks it, through the core's plain vmmc_import(), for ring names it
 * has no right to or that FM never gives out: another rank's ring, rank 0's
 * own, malformed numbers, an open-world name with a wrong hash; and from an
 * endpoint of its own that is not in the job, a rank's ring. Each import is
 * refused at once (VMMC_ERR_PERMISSION, well before its 20 s deadline), rank
 * 0 counts each (ring_refused) and holds no ring afterwards. Then the
 * requests FM does answer: that outside endpoint's own ring name (the hash
 * of its address) and rank 1's first message make exactly one ring each. */
#include <stdio.h>
#include <string.h>

#include "fm/fm_int.h"
#include "fm_test.h"

static int got;
static void h(fm_stream_t *s, int sender, void *arg)
{
    (void)arg;
    uint32_t v = 0;
    VT_CHECK(sender == 1 && fm_receive(&v, s, sizeof v) == sizeof v && v == 0xfeed);
    got++;
}

static void refused(vmmc_ep_t *ep, int peer, const char *name)
{
    vmmc_proxy_t *px;
    double t0 = vt_now();
    int st = vmmc_import(ep, peer, name, 20000, &px);
    if (st != VMMC_ERR_PERMISSION)
        VT_FAIL("import of '%s' returned %d (%s), not VMMC_ERR_PERMISSION", name, st,
                vmmc_strerror(st));
    VT_CHECK(strstr(vmmc_last_error(), "may not import") != NULL);
    VT_CHECK(vt_now() - t0 < 15);
}

static const char *bad[] = {
    "fm.5.ring.1",             /* rank 1's */
    "fm.5.ring.0",             /* rank 0's own (never exported) */
    "fm.5.ring.02",            /* not FM's spelling of 2 */
    "fm.5.ring.2x",
    "fm.5.ring.-2",
    "fm.5.ring.",
    "fm.5.ring.2 ",
    "fm.5.x.0123456789abcdef", /* an outside peer's form, from a rank */
    "fm.5.",
};
#define NBAD (int)(sizeof bad / sizeof bad[0])

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    if (vmmc_size(ep) != 3)
        VT_SKIP("needs 3 ranks");
    int me = vmmc_rank(ep);
    /* (The outside endpoint runs on shm only: over udp, this job's endpoint
     * does not answer it here.) */
    int outside = !vt_remote(), nref = NBAD + (outside ? 2 : 0);
    fm_t *fm;
    if (me == 0)
        VT_OK(vmmc_listen(ep, NULL, NULL));
    VT_OK(fm_channel_open(ep, 5, NULL, &fm));
    VT_CHECK(fm_register_handler(fm, 1, h, NULL) == 1);
    VT_OK(vmmc_barrier(ep));
    vmmc_ep_t *out = NULL;
    int h0 = -1;
    if (me == 2) {
        for (int i = 0; i < NBAD; i++)
            refused(ep, 0, bad[i]);
    }
    if (me == 2 && outside) {
        /* An endpoint outside the job asks for ranks' rings. */
        char a[VMMC_ADDR_MAX];
        size_t alen = sizeof a;
        VT_OK(vmmc_peer_addr(ep, 0, a, &alen));
        VT_OK(vmmc_ep_open(NULL, &out));
        VT_OK(vmmc_connect(out, a, alen, &h0));
        refused(out, h0, "fm.5.ring.2");
        refused(out, h0, "fm.5.ring.3");
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        VT_CHECK(fm_counter(fm, "ring_refused") == (uint64_t)nref);
        /* Only the channel's own ring, made at open. */
        uint64_t own = fm_counter(fm, "ring_bytes");
        VT_CHECK(fm_counter(fm, "rings") == 1 && own > 0);
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 2 && outside) {
        /* Its own name: FM makes that ring for it. */
        char a[VMMC_ADDR_MAX], name[64];
        size_t alen = sizeof a;
        VT_OK(vmmc_ep_addr(out, a, &alen));
        snprintf(name, sizeof name, "fm.5.x.%016llx", (unsigned long long)fm_addr_hash(a, alen));
        vmmc_proxy_t *px;
        VT_OK(vmmc_import(out, h0, name, 20000, &px));
        VT_CHECK(vmmc_proxy_length(px) > FM_CTRL);
        VT_OK(vmmc_unimport(px));
    }
    if (me == 1)
        VT_OK(fm_send(fm, 0, 1, &(uint32_t){0xfeed}, sizeof(uint32_t)));
    if (me == 0) {
        double t0 = vt_now();
        while (got < 1) {
            VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, 100) >= 0);
            VT_CHECK(vt_now() - t0 < 30);
        }
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        VT_CHECK(fm_counter(fm, "ring_refused") == (uint64_t)nref);
        VT_CHECK(fm_counter(fm, "rings") == (uint64_t)(outside ? 3 : 2)); /* + its own */
        printf("rank 0: %d requests refused, %d rings made (rank 1's%s)\n", nref,
               outside ? 2 : 1, outside ? " and the outside endpoint's" : "");
        fflush(stdout);
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(fm_channel_close(fm));
    if (out)
        VT_OK(vmmc_ep_close(out));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
