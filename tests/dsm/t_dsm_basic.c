/* The first things a DSM program does: init, allocate in one rank, pass the
 * pointer, write in one rank and read in the other (read fault), write
 * where another rank wrote (write fault and invalidation), a large
 * allocation spanning pages, free and reuse, and the counters that show
 * the faults happened through the protocol. On one host, each rank maps
 * every other rank's area (data messages are copies, not system calls). */
#include <stdio.h>
#include <string.h>

#include "dsm_test.h"

/* How many memfds named vmmc-dsm this process maps (distinct inodes): its
 * own area, and each other rank's on this host (the area is exported with
 * its memfd, so that data messages between them are copies). */
static int dsm_memfds(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        DT_FAIL("cannot read /proc/self/maps");
    unsigned long inodes[64];
    int n = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        unsigned long ino = 0;
        if (!strstr(line, "/memfd:vmmc-dsm") || sscanf(line, "%*s %*s %*s %*s %lu", &ino) != 1)
            continue;
        int seen = 0;
        for (int i = 0; i < n && !seen; i++)
            seen = inodes[i] == ino;
        if (!seen && n < 64)
            inodes[n++] = ino;
    }
    fclose(f);
    return n;
}

int main(void)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    if (n < 2)
        DT_FAIL("needs at least 2 ranks, has %d", n);
    if (strcmp(vmmc_dsm_mode(),
               getenv("VMMC_DSM_PAGE") && atoi(getenv("VMMC_DSM_PAGE")) ? "page" : "minipage") != 0)
        DT_FAIL("mode %s", vmmc_dsm_mode());
    /* Every rank on one host (not a netns run with VMMC_BOOTSTRAP, where
     * some peers are across udp): every other rank's area is mapped. */
    if (!getenv("VMMC_BOOTSTRAP"))
        DT_EQ(dsm_memfds(), n);
    else if (dsm_memfds() < 1)
        DT_FAIL("this rank does not map its own area");

    /* rank 0 allocates and fills; everyone reads */
    long *a = NULL;
    if (me == 0) {
        a = vmmc_dsm_malloc(64 * sizeof *a);
        if (!a)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        for (int i = 0; i < 64; i++)
            a[i] = 1000 + i;
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&a, 0));
    if (!a)
        DT_FAIL("broadcast pointer is NULL");
    for (int i = 0; i < 64; i++)
        DT_EQ(a[i], 1000 + i);
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("read of another rank's writes");

    /* each rank in turn adds its rank to every element */
    for (int r = 0; r < n; r++) {
        if (r == me)
            for (int i = 0; i < 64; i++)
                a[i] += r + 1;
        DT_OK(vmmc_dsm_barrier());
    }
    long add = (long)n * (n + 1) / 2;
    for (int i = 0; i < 64; i++)
        DT_EQ(a[i], 1000 + i + add);
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("writes in turn");

    /* a large allocation (several pages) made by the last rank */
    size_t big = 5 * 4096 + 100;
    unsigned char *b = NULL;
    if (me == n - 1) {
        b = vmmc_dsm_malloc(big);
        if (!b)
            DT_FAIL("malloc big: %s", vmmc_dsm_last_error());
        for (size_t i = 0; i < big; i++)
            DT_EQ(b[i], 0); /* zero-filled */
        for (size_t i = 0; i < big; i++)
            b[i] = (unsigned char)(i * 7 + 3);
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&b, n - 1));
    /* touch the last page first: any page of a large minipage brings it all */
    DT_EQ(b[big - 1], (unsigned char)((big - 1) * 7 + 3));
    for (size_t i = 0; i < big; i++)
        DT_EQ(b[i], (unsigned char)(i * 7 + 3));
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("large allocation");

    vmmc_dsm_stats_t s;
    DT_OK(vmmc_dsm_stats(&s));
    if (me != 0 && s.read_faults == 0)
        DT_FAIL("rank %d read another rank's data without a read fault", me);
    if (s.write_faults == 0 && me != 0)
        DT_FAIL("no write fault counted");
    if (me != 0 && s.delay_count == 0)
        DT_FAIL("no request delay recorded");
    DT_OK(vmmc_dsm_barrier());

    /* free, then the space is handed out again and reads as zeros */
    if (me == n - 1)
        vmmc_dsm_free(b);
    DT_OK(vmmc_dsm_barrier());
    if (me == 0) {
        unsigned char *c = vmmc_dsm_malloc(big);
        if (!c)
            DT_FAIL("malloc after free: %s", vmmc_dsm_last_error());
        for (size_t i = 0; i < big; i++)
            DT_EQ(c[i], 0);
        vmmc_dsm_free(c);
    }
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("free and reuse");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
