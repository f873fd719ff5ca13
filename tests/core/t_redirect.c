/* Transfer redirection: a buffer posted before, during and after arrival;
 * a write straddling a posted range; concurrent streaming with random posts,
 * every byte delivered exactly once. Run on a malloc'd default buffer
 * (process_vm_writev path) and on library memory (mapped path).
 * Rank 0 writes into rank 1's default buffers. */
#include <string.h>
#include <unistd.h>

#include "vtest.h"

#define DLEN (1 << 20)
#define CHUNK 4096

static vmmc_ep_t *ep;

static unsigned char pat(size_t pos)
{
    return (unsigned char)(pos * 131 + (pos >> 8) * 7 + 3);
}

static void fill(unsigned char *b, size_t pos, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pat(pos + i);
}

static void expect(const unsigned char *b, size_t pos, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat(pos + i))
            VT_FAIL("%s: byte %zu (stream position %zu) is %u, want %u", what, i, pos + i, b[i],
                    pat(pos + i));
}

static void send_range(vmmc_proxy_t *px, size_t off, size_t n)
{
    unsigned char *b = malloc(n);
    fill(b, off, n);
    VT_OK(vmmc_send(px, off, b, n, 0));
    free(b);
}

static void untouched(const unsigned char *dflt, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (dflt[off + i] != 0)
            VT_FAIL("default buffer byte %zu was written although a redirect was posted", off + i);
}

static void run(int use_mem)
{
    int me = vmmc_rank(ep);
    const char *name = use_mem ? "dflt_mem" : "dflt_heap";
    unsigned char *dflt = NULL;
    vmmc_export_t *ex = NULL;
    vmmc_proxy_t *px = NULL;
    if (me == 1) {
        if (use_mem)
            VT_OK(vmmc_mem_alloc(ep, DLEN, (void **)&dflt));
        else
            dflt = calloc(1, DLEN);
        vmmc_export_params_t p = {0};
        p.field_mask = VMMC_EXPORT_PARAM_FLAGS;
        p.flags = VMMC_EXPORT_REDIRECTABLE;
        p.name = name;
        p.addr = dflt;
        p.length = DLEN;
        VT_OK(vmmc_export(ep, &p, &ex));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        VT_OK(vmmc_import(ep, 1, name, 5000, &px));
        void *map;
        VT_STATUS(VMMC_ERR_UNSUPPORTED, vmmc_proxy_map(px, &map)); /* stores would bypass it */
    }

    unsigned char ubuf[3000];
    vmmc_request_t rq;
    /* (a) posted before arrival: lands directly, default buffer untouched. */
    if (me == 1)
        VT_STATUS(VMMC_INPROGRESS, vmmc_redirect(ex, 0, ubuf, 1000, &rq));
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        send_range(px, 0, 300);
        send_range(px, 300, 700);
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        VT_OK(vmmc_request_wait(&rq, 5000));
        expect(ubuf, 0, 1000, "posted before");
        untouched(dflt, 0, 1000);
    }
    /* (b) posted after arrival: copied, complete at once. */
    if (me == 0)
        send_range(px, 2000, 1000);
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        VT_OK(vmmc_redirect(ex, 2000, ubuf, 1000, &rq));
        VT_OK(vmmc_test(&rq));
        expect(ubuf, 2000, 1000, "posted after");
    }
    /* (c) posted during: the first half arrived before, the rest after. */
    if (me == 0)
        send_range(px, 4000, 500);
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        VT_STATUS(VMMC_INPROGRESS, vmmc_redirect(ex, 4000, ubuf, 1000, &rq));
        VT_STATUS(VMMC_INPROGRESS, vmmc_test(&rq));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0)
        send_range(px, 4500, 500);
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        VT_OK(vmmc_request_wait(&rq, 5000));
        expect(ubuf, 4000, 1000, "posted during");
        untouched(dflt, 4500, 500);
    }
    /* (d) one write straddling a posted range; the rest is copied later. */
    if (me == 1)
        VT_STATUS(VMMC_INPROGRESS, vmmc_redirect(ex, 6000, ubuf, 1000, &rq));
    VT_OK(vmmc_barrier(ep));
    if (me == 0)
        send_range(px, 5500, 2000);
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        VT_OK(vmmc_request_wait(&rq, 5000));
        expect(ubuf, 6000, 1000, "straddled");
        untouched(dflt, 6000, 1000);
        expect(dflt + 5500, 5500, 500, "default before the range");
        VT_OK(vmmc_redirect(ex, 7000, ubuf, 500, &rq));
        expect(ubuf, 7000, 500, "copied tail");
        /* Errors. */
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_redirect(ex, DLEN - 10, ubuf, 20, &rq));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_redirect(ex, 0, NULL, 20, &rq));
        vmmc_request_t r2;
        VT_STATUS(VMMC_INPROGRESS, vmmc_redirect(ex, 9000, ubuf, 100, &rq));
        VT_STATUS(VMMC_ERR_BUSY, vmmc_redirect(ex, 9050, ubuf + 100, 100, &r2));
        VT_CHECK(vmmc_redirect_cancel(&rq) == 0);
        VT_OK(vmmc_redirect(ex, 9050, ubuf + 100, 0 + 100, &r2) == VMMC_INPROGRESS ? VMMC_OK : -1);
        VT_CHECK(vmmc_redirect_cancel(&r2) == 0);
    }
    VT_OK(vmmc_barrier(ep));

    /* (e) streaming: the sender writes [16K, DLEN) sequentially in chunks
     * while the receiver posts consecutive random-size buffers covering it
     * and checks each; whatever wins each race, every byte arrives once. */
    size_t base = 16384;
    if (me == 0) {
        unsigned char chunk[CHUNK];
        for (size_t off = base; off < DLEN; off += CHUNK) {
            size_t n = DLEN - off < CHUNK ? DLEN - off : CHUNK;
            fill(chunk, off, n);
            VT_OK(vmmc_send(px, off, chunk, n, 0));
            if ((off / CHUNK) % 16 == 0)
                usleep(50);
        }
    } else {
        unsigned long long seed = 42;
        unsigned char *big = malloc(65536);
        size_t pos = base;
        int posted = 0;
        while (pos < DLEN) {
            size_t n = 1 + vt_rand(&seed) % 65536;
            if (n > DLEN - pos)
                n = DLEN - pos;
            memset(big, 0, n);
            int rc = vmmc_redirect(ex, pos, big, n, &rq);
            VT_CHECK(rc == VMMC_OK || rc == VMMC_INPROGRESS);
            VT_OK(vmmc_request_wait(&rq, 10000));
            expect(big, pos, n, "streamed");
            pos += n;
            posted++;
        }
        free(big);
        printf("%s: %d redirects over %d bytes\n", name, posted, (int)(DLEN - base));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0)
        VT_OK(vmmc_unimport(px));
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        VT_OK(vmmc_unexport(ex));
        if (use_mem)
            VT_OK(vmmc_mem_free(ep, dflt));
        else
            free(dflt);
    }
}

int main(void)
{
    vt_require_transport();
    VT_OK(vmmc_init(NULL, &ep));
    /* A non-redirectable export refuses vmmc_redirect. */
    static char plain[64];
    vmmc_export_params_t p = {0};
    p.name = "plain";
    p.addr = plain;
    p.length = sizeof plain;
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &p, &ex));
    vmmc_request_t rq;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_redirect(ex, 0, plain, 8, &rq));
    VT_OK(vmmc_unexport(ex));
    run(0);
    run(1);
    int me = vmmc_rank(ep);
    VT_OK(vmmc_finalize(ep));
    printf("t_redirect rank %d: ok\n", me);
    return 0;
}
