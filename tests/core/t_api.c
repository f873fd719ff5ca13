/* Every core API call's success and failure cases, between two ranks.
 * Rank 1 exports; rank 0 imports and exercises the calls. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "vtest.h"

#define LEN 8192
#define GUARD 256

static vmmc_ep_t *ep;
static int me;
static vmmc_export_t *heap_ex;

static void handler(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (*(int *)arg)++;
    (void)n;
}

static void test_export_errors(void)
{
    static char region[64];
    vmmc_export_params_t p = {0};
    vmmc_export_t *ex;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_export(NULL, &p, &ex));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_export(ep, NULL, &ex));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_export(ep, &p, &ex)); /* no name */
    p.name = "x";
    VT_STATUS(VMMC_ERR_INVALID, vmmc_export(ep, &p, &ex)); /* no address */
    p.addr = region;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_export(ep, &p, &ex)); /* length 0 */
    p.length = sizeof region;
    char longname[100];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    p.name = longname;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_export(ep, &p, &ex));
    p.name = "x";
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS;
    p.flags = 0x80;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_export(ep, &p, &ex));
    p.flags = 0;
    int bad[] = {5};
    p.field_mask = VMMC_EXPORT_PARAM_IMPORTERS;
    p.importers = bad;
    p.num_importers = 1;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_export(ep, &p, &ex)); /* rank 5 not in job */
    p.field_mask = 0;
    VT_OK(vmmc_export(ep, &p, &ex));
    vmmc_export_t *ex2;
    VT_STATUS(VMMC_ERR_EXISTS, vmmc_export(ep, &p, &ex2));
    VT_CHECK(vmmc_export_addr(ex) == region && vmmc_export_length(ex) == sizeof region);
    VT_OK(vmmc_unexport(ex));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_unexport(NULL));
    /* The name is free again. */
    VT_OK(vmmc_export(ep, &p, &ex));
    VT_OK(vmmc_unexport(ex));
}

static void test_mem(void)
{
    void *m;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_mem_alloc(ep, 0, &m));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_mem_alloc(ep, 16, NULL));
    VT_OK(vmmc_mem_alloc(ep, 100, &m));
    VT_CHECK(((uintptr_t)m & 4095) == 0);
    VT_CHECK(((char *)m)[99] == 0);
    int x;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_mem_free(ep, &x));
    vmmc_export_params_t p = {0};
    p.name = "inmem";
    p.addr = m;
    p.length = 100;
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &p, &ex));
    VT_STATUS(VMMC_ERR_BUSY, vmmc_mem_free(ep, m)); /* export still inside */
    VT_OK(vmmc_unexport(ex));
    VT_OK(vmmc_mem_free(ep, m));
}

int main(void)
{
    vt_require_transport();
    VT_OK(vmmc_init(NULL, &ep));
    me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 2);
    VT_STATUS(VMMC_ERR_INVALID, vmmc_rank(NULL));
    test_export_errors();
    test_mem();

    /* Rank 1 exports: a library region (mapped path) with a guard on each
     * side, a malloc region (process_vm_writev path), a readable one, and a
     * private one only rank 1 itself may import. */
    char *mem = NULL, *heap = NULL;
    int notes = 0;
    if (me == 1) {
        VT_OK(vmmc_mem_alloc(ep, LEN + 2 * GUARD, (void **)&mem));
        heap = malloc(LEN + 2 * GUARD);
        memset(mem, 0xEE, LEN + 2 * GUARD);
        memset(heap, 0xEE, LEN + 2 * GUARD);
        vmmc_export_params_t p = {0};
        p.field_mask = VMMC_EXPORT_PARAM_HANDLER | VMMC_EXPORT_PARAM_FLAGS;
        p.handler = handler;
        p.handler_arg = &notes;
        p.name = "mem";
        p.addr = mem + GUARD;
        p.length = LEN;
        p.flags = VMMC_EXPORT_READ;
        vmmc_export_t *e1, *e2, *e3;
        VT_OK(vmmc_export(ep, &p, &e1));
        p.name = "heap";
        p.addr = heap + GUARD;
        p.flags = 0;
        VT_OK(vmmc_export(ep, &p, &e2));
        heap_ex = e2;
        int only1[] = {1};
        p.field_mask = VMMC_EXPORT_PARAM_IMPORTERS;
        p.importers = only1;
        p.num_importers = 1;
        p.name = "private";
        VT_OK(vmmc_export(ep, &p, &e3));
        /* Self import of a permitted export works like any other. */
        vmmc_proxy_t *self;
        VT_OK(vmmc_import(ep, 1, "private", 2000, &self));
        VT_CHECK(vmmc_proxy_length(self) == LEN);
        VT_OK(vmmc_send(self, 0, "self", 4, 0));
        VT_CHECK(memcmp(heap + GUARD, "self", 4) == 0);
        VT_OK(vmmc_unimport(self));
    }
    VT_OK(vmmc_barrier(ep));

    if (me == 0) {
        vmmc_proxy_t *pm, *ph, *pp;
        VT_STATUS(VMMC_ERR_INVALID, vmmc_import(ep, 7, "mem", 100, &pm));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_import(ep, 1, "", 100, &pm));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_import(ep, 1, NULL, 100, &pm));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_import(ep, 1, "mem", -5, &pm));
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_import(ep, 1, "private", 2000, &pp));
        VT_CHECK(strstr(vmmc_last_error(), "may not import") != NULL);
        double t0 = vt_now();
        VT_STATUS(VMMC_ERR_TIMEOUT, vmmc_import(ep, 1, "nosuch", 300, &pp));
        VT_CHECK(vt_now() - t0 >= 0.25);
        VT_OK(vmmc_import(ep, 1, "mem", 2000, &pm));
        VT_OK(vmmc_import(ep, 1, "heap", 2000, &ph));
        VT_CHECK(vmmc_proxy_length(pm) == LEN && vmmc_proxy_rank(pm) == 1);
        VT_CHECK(vmmc_proxy_flags(pm) == VMMC_EXPORT_READ);

        /* Non-blocking import: pending, then decided. */
        vmmc_proxy_t *pn;
        VT_STATUS(VMMC_INPROGRESS, vmmc_import_start(ep, 1, "mem", 2000, &pn));
        int rc;
        while ((rc = vmmc_import_test(pn)) == VMMC_INPROGRESS)
            usleep(100);
        VT_OK(rc);
        VT_OK(vmmc_unimport(pn));
        VT_STATUS(VMMC_INPROGRESS, vmmc_import_start(ep, 1, "later", 200, &pn));
        while ((rc = vmmc_import_test(pn)) == VMMC_INPROGRESS)
            usleep(1000);
        VT_STATUS(VMMC_ERR_TIMEOUT, rc);
        VT_OK(vmmc_unimport(pn));

        /* Sends: 1 byte up to the whole region, both paths. */
        char *src = malloc(LEN);
        for (int i = 0; i < LEN; i++)
            src[i] = (char)(i * 7 + 1);
        VT_OK(vmmc_send(pm, 0, src, 1, 0));
        VT_OK(vmmc_send(pm, LEN - 1, src, 1, 0));
        VT_OK(vmmc_send(pm, 0, src, LEN, 0));
        VT_OK(vmmc_send(ph, 0, src, LEN, 0));
        VT_OK(vmmc_send(pm, 10, src, 0, 0)); /* empty send is a no-op */
        /* Argument errors. */
        VT_STATUS(VMMC_ERR_INVALID, vmmc_send(NULL, 0, src, 1, 0));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_send(pm, 0, NULL, 1, 0));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_send(pm, 0, src, 1, 0x100));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send(pm, LEN, src, 1, 0));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send(pm, LEN - 3, src, 4, 0));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send(pm, SIZE_MAX - 2, src, 8, 0));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send(ph, 1, src, LEN, 0));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send(pm, 0, src, LEN + 1, 0));

        /* Fetch: allowed on "mem" (READ), refused on "heap". */
        char back[64];
        VT_OK(vmmc_fetch(pm, 100, back, sizeof back));
        VT_CHECK(memcmp(back, src + 100, sizeof back) == 0);
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_fetch(ph, 0, back, 8));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_fetch(pm, LEN - 4, back, 8));

        /* Automatic update: "mem" is only part of its allocation (guards
         * around it), which a mapping of whole pages would expose: refused,
         * the copy path stays (t_hostile maps whole allocations). */
        void *map;
        VT_STATUS(VMMC_ERR_UNSUPPORTED, vmmc_proxy_map(pm, &map));
        VT_OK(vmmc_send(pm, 5000, "Z", 1, 0));
        VT_STATUS(VMMC_ERR_UNSUPPORTED, vmmc_proxy_map(ph, &map));

        /* Notifications: the handler runs at rank 1. */
        VT_OK(vmmc_send(pm, 0, src, 16, VMMC_SEND_NOTIFY));
        VT_OK(vmmc_send_imm(ph, 0, src, 16, VMMC_SEND_NOTIFY, 7));
        VT_OK(vmmc_barrier(ep)); /* rank 1 checks data and notifications */
        VT_OK(vmmc_barrier(ep)); /* rank 1 unexported "heap" */
        /* Unexported: the proxy goes stale once the revocation arrives. */
        double t1 = vt_now();
        while ((rc = vmmc_send(ph, 0, src, 8, 0)) == VMMC_OK && vt_now() - t1 < 5)
            usleep(1000);
        VT_STATUS(VMMC_ERR_STALE, rc);
        VT_CHECK(strstr(vmmc_last_error(), "unexported") != NULL);
        VT_OK(vmmc_unimport(ph));
        VT_OK(vmmc_unimport(pm));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_unimport(NULL));
        /* Use after unimport: an error, not a crash. */
        VT_STATUS(VMMC_ERR_STALE, vmmc_send(pm, 0, src, 8, 0));
        VT_STATUS(VMMC_ERR_STALE, vmmc_fetch(pm, 0, back, 8));
        VT_STATUS(VMMC_ERR_STALE, vmmc_proxy_map(pm, &map));
        (void)map;
        VT_STATUS(VMMC_ERR_STALE, vmmc_unimport(pm));
        VT_CHECK(vmmc_proxy_length(pm) == 0);
        free(src);
    } else {
        VT_OK(vmmc_barrier(ep));
        /* Data landed, guards intact, both notifications ran once each. */
        for (int i = 0; i < LEN; i++) {
            char want = (char)(i * 7 + 1);
            if (i == 5000)
                want = 'Z';
            if (mem[GUARD + i] != want || heap[GUARD + i] != (char)(i * 7 + 1))
                VT_FAIL("byte %d differs", i);
        }
        for (int i = 0; i < GUARD; i++)
            VT_CHECK((unsigned char)mem[i] == 0xEE && (unsigned char)mem[GUARD + LEN + i] == 0xEE &&
                     (unsigned char)heap[i] == 0xEE && (unsigned char)heap[GUARD + LEN + i] == 0xEE);
        double t0 = vt_now();
        while (notes < 2 && vt_now() - t0 < 10)
            VT_CHECK(vmmc_wait(ep, 1000) >= 0);
        VT_CHECK(notes == 2);
        VT_OK(vmmc_unexport(heap_ex));
        VT_STATUS(VMMC_ERR_STALE, vmmc_unexport(heap_ex)); /* use after unexport */
        VT_CHECK(vmmc_export_addr(heap_ex) == NULL);
        VT_OK(vmmc_barrier(ep));
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    free(heap);
    printf("t_api rank %d: ok\n", me);
    return 0;
}
