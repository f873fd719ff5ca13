/* Bounds: every edge of a region is accepted or refused exactly as vmmc.h
 * says, by every operation, and nothing lands outside an export.
 *
 * Rank 0 exports three regions between guard bytes: heap memory (copy path),
 * a whole allocation with VMMC_EXPORT_READ (mapped on shm; its guard is the
 * rest of its page) and a write-only one. Rank 1 tries each edge case with
 * vmmc_send, vmmc_send_imm + VMMC_SEND_NOTIFY, vmmc_send_async and
 * vmmc_fetch: length 0 at 0, at the end and past it; the last byte; the whole
 * region and one more; offset + length overflowing size_t. Both ranks apply
 * the accepted writes to a model of the region; rank 0 checks its memory,
 * its guards and its notifications against the model, rank 1 checks every
 * fetch against it (a fetch sees the sends issued before it) and that a
 * refused fetch writes nothing.
 *
 * usage: conf_bounds [null]   (null: only sends and fetches of length 0
 *                              with a NULL buffer) */
#include <stdint.h>

#include "conf.h"

static vmmc_ep_t *ep;

typedef struct {
    size_t off, len;
    int ok;
} edge_t;

static int edges(size_t L, edge_t *e)
{
    const size_t M = SIZE_MAX;
    edge_t t[] = {
        {0, L, 1},         {0, 0, 1},          {L, 0, 1},         {L + 1, 0, 0},
        {M, 0, 0},         {L - 1, 1, 1},      {L, 1, 0},         {0, L + 1, 0},
        {1, L, 0},         {L - 8, 8, 1},      {L - 7, 8, 0},     {L / 2, 7, 1},
        {M, 1, 0},         {1, M, 0},          {M, M, 0},         {L / 2, M - L / 2 + 1, 0},
        {M - 10, 11, 0},   {2, M - 1, 0},      {L + 4096, 1, 0},  {0, 1, 1},
    };
    memcpy(e, t, sizeof t);
    return (int)(sizeof t / sizeof t[0]);
}

#define NREG 3
static const size_t reg_len[NREG] = {1000, 4000, 4096};
static const int reg_kind[NREG] = {CONF_HEAP, CONF_MEM, CONF_HEAP};
static const unsigned reg_flags[NREG] = {VMMC_EXPORT_READ, VMMC_EXPORT_READ, 0};
enum { OP_SEND, OP_NOTIFY, OP_ASYNC, NOPS };

/* Notifications rank 0 got, per region. */
static struct note {
    size_t off, len;
    uint64_t imm;
    int sender;
} notes[NREG][64];
static int nnotes[NREG];

static void on_note(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    int k = (int)(intptr_t)arg;
    if (nnotes[k] >= 64)
        VT_FAIL("[%s] more notifications than notified sends", conf_transport());
    notes[k][nnotes[k]++] = (struct note){n->offset, n->length, n->imm, n->sender};
}

static uint64_t seed_of(int k, int op, int c) { return (uint64_t)k * 1000 + op * 100 + c + 1; }

/* The region's content after every accepted send of every op. */
static void model(unsigned char *img, int k)
{
    edge_t e[32];
    int ne = edges(reg_len[k], e);
    memset(img, 0, reg_len[k]);
    for (int op = 0; op < NOPS; op++)
        for (int c = 0; c < ne; c++)
            if (e[c].ok)
                conf_fill(img + e[c].off, e[c].len, seed_of(k, op, c), e[c].off);
}

static void importer(int k)
{
    char name[16];
    snprintf(name, sizeof name, "b%d", k);
    vmmc_proxy_t *px = conf_import(ep, 0, name);
    size_t L = reg_len[k];
    VT_CHECK(vmmc_proxy_length(px) == L);
    edge_t e[32];
    int ne = edges(L, e);
    unsigned char *img = calloc(1, L), *src = malloc(L + 1);
    unsigned char *dst = malloc(L + 2 * CONF_GUARD);
    for (int op = 0; op < NOPS; op++) {
        for (int c = 0; c < ne; c++) {
            uint64_t seed = seed_of(k, op, c);
            size_t n = e[c].ok ? e[c].len : 1;
            conf_fill(src, n, seed, e[c].ok ? e[c].off : 0);
            int want = e[c].ok ? VMMC_OK : VMMC_ERR_BOUNDS, rc;
            if (op == OP_SEND) {
                rc = vmmc_send(px, e[c].off, src, e[c].len, 0);
            } else if (op == OP_NOTIFY) {
                rc = vmmc_send_imm(px, e[c].off, src, e[c].len, VMMC_SEND_NOTIFY, seed);
            } else {
                vmmc_request_t rq;
                rc = vmmc_send_async(px, e[c].off, src, e[c].len, 0, &rq);
                if (rc == VMMC_INPROGRESS)
                    rc = vmmc_request_wait(&rq, (int)(conf_timeout() * 1000));
            }
            if (rc != want)
                VT_FAIL("[%s] region %d op %d: %zu bytes at %zu returned %d (%s), expected %s",
                        conf_transport(), k, op, e[c].len, e[c].off, rc, vmmc_strerror(rc),
                        vmmc_strerror(want));
            if (e[c].ok)
                memcpy(img + e[c].off, src, e[c].len);
            /* Read back the same range. */
            memset(dst, CONF_GUARD_BYTE, L + 2 * CONF_GUARD);
            rc = vmmc_fetch(px, e[c].off, dst + CONF_GUARD, e[c].len);
            if (!(reg_flags[k] & VMMC_EXPORT_READ)) {
                if (rc != VMMC_ERR_PERMISSION && !(rc == VMMC_ERR_BOUNDS && !e[c].ok))
                    VT_FAIL("[%s] fetch of %zu bytes at %zu from a write-only export: %d (%s)",
                            conf_transport(), e[c].len, e[c].off, rc, vmmc_strerror(rc));
            } else if (rc != want) {
                VT_FAIL("[%s] fetch of %zu bytes at %zu of %zu returned %d (%s), expected %s",
                        conf_transport(), e[c].len, e[c].off, L, rc, vmmc_strerror(rc),
                        vmmc_strerror(want));
            } else if (rc == VMMC_OK && memcmp(dst + CONF_GUARD, img + e[c].off, e[c].len)) {
                VT_FAIL("[%s] fetch of %zu bytes at %zu does not see the send before it",
                        conf_transport(), e[c].len, e[c].off);
            }
            size_t wrote = rc == VMMC_OK ? e[c].len : 0;
            for (size_t i = 0; i < L + 2 * CONF_GUARD; i++)
                if ((i < CONF_GUARD || i >= CONF_GUARD + wrote) && dst[i] != CONF_GUARD_BYTE)
                    VT_FAIL("[%s] fetch of %zu bytes at %zu (status %d) wrote byte %zd of its "
                            "buffer", conf_transport(), e[c].len, e[c].off, rc,
                            (ssize_t)i - CONF_GUARD);
        }
    }
    VT_OK(vmmc_unimport(px));
    VT_STATUS(VMMC_ERR_STALE, vmmc_send(px, 0, src, 1, 0));
    free(img);
    free(src);
    free(dst);
}

/* Length 0 with no source (or destination) at all, documented as allowed,
 * at the start and the end of each region ("conf_bounds null"). */
static void null_sources(int me, conf_region_t *r)
{
    if (me == 1) {
        for (int k = 0; k < NREG; k++) {
            char name[16];
            snprintf(name, sizeof name, "b%d", k);
            vmmc_proxy_t *px = conf_import(ep, 0, name);
            size_t L = reg_len[k];
            VT_OK(vmmc_send(px, 0, NULL, 0, 0));
            VT_OK(vmmc_send(px, L, NULL, 0, 0));
            VT_OK(vmmc_send_imm(px, L, NULL, 0, VMMC_SEND_NOTIFY, 1));
            vmmc_request_t rq;
            int rc = vmmc_send_async(px, L, NULL, 0, 0, &rq);
            if (rc == VMMC_INPROGRESS)
                rc = vmmc_request_wait(&rq, (int)(conf_timeout() * 1000));
            VT_OK(rc);
            VT_STATUS(reg_flags[k] & VMMC_EXPORT_READ ? VMMC_OK : VMMC_ERR_PERMISSION,
                      vmmc_fetch(px, L, NULL, 0));
            VT_OK(vmmc_unimport(px));
        }
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0)
        for (int k = 0; k < NREG; k++) {
            CONF_WAIT(ep, nnotes[k] == 1, "the notification of a send of nothing");
            VT_CHECK(notes[k][0].off == reg_len[k] && notes[k][0].len == 0);
            for (size_t i = 0; i < reg_len[k]; i++)
                VT_CHECK(r[k].p[i] == 0);
            conf_guard_check(&r[k]);
        }
}

int main(int argc, char **argv)
{
    ep = conf_init(2);
    int me = vmmc_rank(ep);
    int null = argc > 1 && !strcmp(argv[1], "null");
    conf_region_t r[NREG];
    if (me == 0) {
        for (int k = 0; k < NREG; k++) {
            char name[16];
            snprintf(name, sizeof name, "b%d", k);
            conf_region_alloc(ep, &r[k], reg_kind[k], reg_len[k]);
            conf_export(ep, &r[k], name, reg_flags[k], on_note, (void *)(intptr_t)k);
        }
        /* Only rank 0 itself may import this one. */
        static char priv[64];
        int self = 0;
        vmmc_export_params_t p = {0};
        p.field_mask = VMMC_EXPORT_PARAM_IMPORTERS;
        p.name = "private";
        p.addr = priv;
        p.length = sizeof priv;
        p.importers = &self;
        p.num_importers = 1;
        vmmc_export_t *ex;
        VT_OK(vmmc_export(ep, &p, &ex));
    }
    VT_OK(vmmc_barrier(ep));
    if (null) {
        null_sources(me, r);
    } else if (me == 1) {
        vmmc_proxy_t *px;
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_import(ep, 0, "private", 10000, &px));
        VT_STATUS(VMMC_ERR_TIMEOUT, vmmc_import(ep, 0, "never.exported", 200, &px));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_import(ep, 7, "b0", 200, &px)); /* no such rank */
        for (int k = 0; k < NREG; k++)
            importer(k);
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0 && !null) {
        for (int k = 0; k < NREG; k++) {
            edge_t e[32];
            int ne = edges(reg_len[k], e), want = 0;
            for (int c = 0; c < ne; c++)
                want += e[c].ok;
            CONF_WAIT(ep, nnotes[k] >= want, "the notifications of accepted sends");
            for (int c = 0, j = 0; c < ne; c++) {
                if (!e[c].ok)
                    continue;
                struct note *n = &notes[k][j++];
                if (n->off != e[c].off || n->len != e[c].len ||
                    n->imm != seed_of(k, OP_NOTIFY, c) || n->sender != 1)
                    VT_FAIL("[%s] region %d notification %d: %zu bytes at %zu imm %llu from %d;"
                            " expected %zu at %zu", conf_transport(), k, j - 1, n->len, n->off,
                            (unsigned long long)n->imm, n->sender, e[c].len, e[c].off);
            }
            unsigned char *img = malloc(reg_len[k]);
            model(img, k);
            for (size_t i = 0; i < reg_len[k]; i++)
                if (r[k].p[i] != img[i])
                    VT_FAIL("[%s] region %d byte %zu is 0x%02x, expected 0x%02x",
                            conf_transport(), k, i, r[k].p[i], img[i]);
            free(img);
            conf_guard_check(&r[k]);
        }
    }
    VT_OK(vmmc_barrier(ep));
    /* No late notification of a refused send. */
    VT_CHECK(vmmc_progress(ep) >= 0);
    if (me == 0 && !null)
        for (int k = 0; k < NREG; k++) {
            edge_t e[32];
            int ne = edges(reg_len[k], e), want = 0;
            for (int c = 0; c < ne; c++)
                want += e[c].ok;
            VT_CHECK(nnotes[k] == want);
        }
    conf_ok(me, "every edge as documented, nothing outside the regions");
    VT_OK(vmmc_finalize(ep));
    if (me == 0)
        for (int k = 0; k < NREG; k++)
            conf_region_release(&r[k]);
    return 0;
}
