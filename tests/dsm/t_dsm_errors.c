/* Clear errors: calls before init, bad parameters, allocations beyond the
 * area (the message names the limit and VMMC_DSM_SIZE), frees of pointers
 * that are no allocation, and faults that are not the DSM's: an access to
 * an address of the area that holds no allocation, and one outside the
 * area, both reach the application's own SIGSEGV handler (installed before
 * vmmc_dsm_init) as ordinary segfaults. */
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#include "dsm_test.h"

static sigjmp_buf jb;
static volatile sig_atomic_t segvs;

static void on_segv(int sig)
{
    (void)sig;
    segvs++;
    siglongjmp(jb, 1);
}

static void want_msg(const char *what)
{
    if (!strstr(vmmc_dsm_last_error(), what))
        DT_FAIL("message \"%s\" lacks \"%s\"", vmmc_dsm_last_error(), what);
}

int main(void)
{
    /* before init */
    if (vmmc_dsm_rank() != -1 || vmmc_dsm_size() != -1 || vmmc_dsm_mode() != NULL)
        DT_FAIL("queries before init");
    if (vmmc_dsm_malloc(8) != NULL)
        DT_FAIL("malloc before init");
    DT_EQ(vmmc_dsm_barrier(), VMMC_ERR_ENDPOINT);
    want_msg("not initialised");
    vmmc_dsm_params_t bad = {0, 65};
    DT_EQ(vmmc_dsm_init(&bad), VMMC_ERR_INVALID);
    want_msg("views");

    signal(SIGSEGV, on_segv); /* the application's handler, chained to */
    vmmc_dsm_params_t p = {256 * 1024, 4};
    DT_OK(vmmc_dsm_init(&p));
    DT_EQ(vmmc_dsm_init(&p), VMMC_ERR_BUSY);
    int me = vmmc_dsm_rank();

    /* too big for the area */
    if (vmmc_dsm_malloc(512 * 1024) != NULL)
        DT_FAIL("a 512K allocation in a 256K area");
    want_msg("VMMC_DSM_SIZE");
    if (vmmc_dsm_malloc_chunk(8, -2) != NULL || vmmc_dsm_malloc_chunk(8, 70000) != NULL)
        DT_FAIL("bad chunk ids accepted");
    DT_OK(vmmc_dsm_barrier());

    /* rank 0 fills the area with pages, then one more fails */
    if (me == 0) {
        void *pg[64];
        int k = 0;
        while (k < 64 && (pg[k] = vmmc_dsm_malloc(4096 + 16)) != NULL)
            k++;
        if (k == 64 || k < 20)
            DT_FAIL("%d two-page allocations fit in 256K", k);
        want_msg("no room");
        want_msg("VMMC_DSM_SIZE");
        for (int i = 0; i < k; i++)
            vmmc_dsm_free(pg[i]);
        void *again = vmmc_dsm_malloc(100 * 1024);
        if (!again)
            DT_FAIL("space not reusable after free: %s", vmmc_dsm_last_error());
        vmmc_dsm_free(again);
        printf("ok out of space reported, space reused after free\n");
    }
    DT_OK(vmmc_dsm_barrier());

    /* frees of things that are no allocation: a message, nothing breaks */
    long *a = vmmc_dsm_malloc(64);
    if (!a)
        DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    vmmc_dsm_free(a + 1);
    want_msg("not an allocation");
    long local;
    vmmc_dsm_free(&local);
    want_msg("not in the shared area");
    vmmc_dsm_free(a);
    vmmc_dsm_free(a);
    want_msg("not an allocation");
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("bad frees reported");

    /* faults that are not the DSM's go to the application's handler */
    volatile long *nowhere = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if ((void *)nowhere == MAP_FAILED)
        DT_FAIL("mmap");
    if (sigsetjmp(jb, 1) == 0) {
        (void)*nowhere;
        DT_FAIL("read of a PROT_NONE page outside the area did not fault");
    }
    long *gone = a; /* freed above: no minipage there any more */
    if (sigsetjmp(jb, 1) == 0) {
        (void)*(volatile long *)gone;
        DT_FAIL("read of a freed allocation did not fault");
    }
    if (sigsetjmp(jb, 1) == 0) { /* again: its page was closed again after the answer */
        (void)*(volatile long *)gone;
        DT_FAIL("second read of a freed allocation did not fault");
    }
    DT_EQ(segvs, 3);
    /* and the DSM still works */
    long *b = vmmc_dsm_malloc(sizeof *b);
    if (!b)
        DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    *b = me;
    DT_EQ(*b, me);
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("faults outside allocations reach the application's handler");
    DT_OK(vmmc_dsm_finalize());
    DT_EQ(vmmc_dsm_finalize(), VMMC_ERR_ENDPOINT);
    return 0;
}
