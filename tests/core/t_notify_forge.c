/* Notifications cannot be forged: a hostile sender that scribbles on every
 * notification segment it can reach (found through /proc/self/maps, the way
 * an attacker that knows the layout would) cannot invent notifications "from"
 * another rank, erase another rank's notifications, or notify an export it
 * may not import; the status page it is given is read-only.
 *
 * Rank 0 exports "v" (only rank 1 may import it) and "w" (only rank 2).
 * Rank 1 sends N notifications on "v"; rank 2 sends a few on "w", then forges. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vtest.h"

#define N 300
#define FORGED 0xf0f0f0f0f0f0f0f0ull

static vmmc_ep_t *ep;
static int v_count, v_bad, w_count, w_bad;
static uint64_t v_next;

static void on_v(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    if (n->sender != 1 || n->imm != v_next)
        v_bad++;
    v_next = n->imm + 1;
    v_count++;
}

static void on_w(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    if (n->sender != 2)
        w_bad++;
    w_count++;
}

/* Record layout of a notification ring (what an attacker reads in the code). */
typedef struct {
    uint32_t export_id, gen;
    int32_t sender;
    uint32_t pad;
    uint64_t offset, length, imm, pad1;
    uint64_t seq, pad2;
} rec_t;

/* Write forged records at the consumer's position of the ring at @ring. */
static int forge_ring(char *ring, uint32_t nrec, int32_t claim_sender)
{
    uint64_t tail = *(volatile uint64_t *)ring;
    rec_t *rec = (rec_t *)(ring + 64);
    int n = 0;
    for (uint32_t id = 0; id < 4; id++) {
        for (uint32_t gen = 1; gen <= 4; gen++, n++) {
            rec_t *r = &rec[(tail + (uint64_t)n) % nrec];
            r->export_id = id;
            r->gen = gen;
            r->sender = claim_sender;
            r->offset = 0;
            r->length = 8;
            r->imm = FORGED;
            __atomic_store_n(&r->seq, tail + (uint64_t)n + 1, __ATOMIC_RELEASE);
        }
    }
    return n;
}

/* Every writable vmmc notification mapping in this process. */
static void forge_all(int *forged, int *status_ro)
{
    FILE *f = fopen("/proc/self/maps", "r");
    VT_CHECK(f != NULL);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
            continue;
        char *p = (char *)lo;
        size_t len = hi - lo;
        if (strstr(line, "memfd:vmmc-status")) {
            /* A peer's status page (not our own): read-only, and it must stay so. */
            if (((volatile int32_t *)p)[1] == (int32_t)getpid())
                continue;
            if (perms[1] == 'w' || mprotect(p, len, PROT_READ | PROT_WRITE) == 0)
                *status_ro = 0;
            continue;
        }
        if (perms[1] != 'w')
            continue;
        if (strstr(line, "memfd:vmmc-inbox")) {
            /* One segment with every sender's ring: header, then rings. */
            uint32_t nrec = ((uint32_t *)p)[2], nranks = ((uint32_t *)p)[3];
            uint64_t ring_bytes = ((uint64_t *)p)[2];
            for (uint32_t r = 0; r < nranks && nrec >= 2; r++)
                if (4096 + (r + 1) * ring_bytes <= len)
                    *forged += forge_ring(p + 4096 + r * ring_bytes, nrec, 1);
        } else if (strstr(line, "memfd:vmmc-ring")) {
            uint32_t nrec = (uint32_t)((len - 64) / 64);
            *forged += forge_ring(p, nrec < 256 ? nrec : 256, 1);
        }
    }
    fclose(f);
}

static uint64_t counter(const char *name)
{
    const char *n;
    uint64_t v;
    for (int i = 0; vmmc_counter_get(ep, i, &n, &v) == VMMC_OK; i++)
        if (!strcmp(n, name))
            return v;
    return UINT64_MAX;
}

int main(void)
{
    if (vt_remote())
        VT_SKIP("the shm notification segments are what this test attacks");
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 3);
    char *mem = NULL;
    vmmc_proxy_t *px = NULL;
    if (me == 0) {
        VT_OK(vmmc_mem_alloc(ep, 8192, (void **)&mem));
        int one = 1, two = 2;
        vmmc_export_t *ev, *ew;
        vmmc_export_params_t p = {
            .field_mask = VMMC_EXPORT_PARAM_HANDLER | VMMC_EXPORT_PARAM_IMPORTERS,
            .name = "v", .addr = mem, .length = 4096, .handler = on_v,
            .importers = &one, .num_importers = 1};
        VT_OK(vmmc_export(ep, &p, &ev));
        p.name = "w";
        p.addr = mem + 4096;
        p.handler = on_w;
        p.importers = &two;
        VT_OK(vmmc_export(ep, &p, &ew));
    } else {
        VT_OK(vmmc_import(ep, 0, me == 1 ? "v" : "w", 10000, &px));
        /* The other name is not ours to import. */
        vmmc_proxy_t *other;
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_import(ep, 0, me == 1 ? "w" : "v", 10000, &other));
    }
    VT_OK(vmmc_barrier(ep));

    uint64_t word = 0;
    if (me == 1)
        for (uint64_t i = 0; i < N; i++)
            VT_OK(vmmc_send_imm(px, 0, &word, sizeof word, VMMC_SEND_NOTIFY, i));
    if (me == 2)
        for (uint64_t i = 0; i < 5; i++)
            VT_OK(vmmc_send_imm(px, 0, &word, sizeof word, VMMC_SEND_NOTIFY, i));
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        double t0 = vt_now();
        while (v_count + w_count < N + 5 && vt_now() - t0 < 30)
            vmmc_wait(ep, 100);
        VT_CHECK(v_count == N && w_count == 5 && !v_bad && !w_bad);
    }
    VT_OK(vmmc_barrier(ep));

    int forged = 0, status_ro = 1;
    if (me == 2) {
        forge_all(&forged, &status_ro);
        printf("rank 2 wrote %d forged records; status page %s\n", forged,
               status_ro ? "read-only" : "WRITABLE");
        VT_CHECK(status_ro);
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        double t0 = vt_now();
        while (vt_now() - t0 < 0.3)
            vmmc_wait(ep, 50);
        printf("v: %d notifications (%d bad), w: %d (%d bad), refused %llu\n", v_count, v_bad,
               w_count, w_bad, (unsigned long long)counter("notifications_refused"));
        /* Nothing invented on "v", nothing of rank 1's lost; what rank 2
         * wrote in its own ring reaches only "w", as rank 2. */
        VT_CHECK(v_count == N && !v_bad);
        VT_CHECK(!w_bad);
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
