/* Setup and queries: shmem_init (twice), my_pe/n_pes and their deprecated
 * names, thread level, version and name, pe/addr_accessible, shmem_ptr
 * (the peer's own memory on this host, NULL across hosts), shmem_finalize
 * (twice). Run with 2 and 4 PEs, on one host and on two. */
#include <stdint.h>
#include <string.h>

#include "shmem/shmem_int.h"
#include "shmem_test.h"

static long counter;       /* static data: symmetric */
static long table[16] = {1}; /* .data: symmetric */

/* PEs of the udp variant run on hosts r % 2 (tests/multihost/netns_job.sh). */
static int same_host(int a, int b)
{
    const char *tr = getenv("VMMC_TRANSPORT");
    if (a != b && tr && strcmp(tr, "udp") == 0)
        return 0; /* every peer reached through udp: nothing mapped */
    return getenv("VMMC_BOOTSTRAP") ? (a % 2) == (b % 2) : 1;
}

int main(void)
{
    shmem_init();
    shmem_init(); /* a second call changes nothing */
    int me = shmem_my_pe(), n = shmem_n_pes();
    ST_CHECK(n >= 1);
    ST_CHECK(me >= 0 && me < n);
    ST_EQ(_my_pe(), me);
    ST_EQ(my_pe(), me);
    ST_EQ(_num_pes(), n);
    ST_EQ(num_pes(), n);
    ST_OK("my_pe, n_pes and the deprecated names agree");

    int level = -1;
    shmem_query_thread(&level);
    ST_EQ(level, SHMEM_THREAD_MULTIPLE);
    int major = 0, minor = 0;
    shmem_info_get_version(&major, &minor);
    ST_EQ(major, SHMEM_MAJOR_VERSION);
    ST_EQ(minor, SHMEM_MINOR_VERSION);
    char name[SHMEM_MAX_NAME_LEN];
    shmem_info_get_name(name);
    ST_CHECK(strcmp(name, SHMEM_VENDOR_STRING) == 0);
    ST_OK("thread level, version and name");

    long *h = shmem_malloc(64 * sizeof(long));
    long local = 0;
    ST_CHECK(h != NULL);
    for (int pe = 0; pe < n; pe++) {
        ST_EQ(shmem_pe_accessible(pe), 1);
        ST_EQ(shmem_addr_accessible(h, pe), 1);
        ST_EQ(shmem_addr_accessible(&counter, pe), 1);
        ST_EQ(shmem_addr_accessible(&table[3], pe), 1);
        ST_EQ(shmem_addr_accessible(&local, pe), 0);
    }
    ST_EQ(shmem_pe_accessible(-1), 0);
    ST_EQ(shmem_pe_accessible(n), 0);
    ST_OK("pe_accessible and addr_accessible");

    /* shmem_ptr: this PE's own address; a peer's heap on this host (a
     * store through it is what the peer reads); NULL across hosts and for
     * memory that is not symmetric */
    ST_CHECK(shmem_ptr(h, me) == (void *)h);
    ST_CHECK(shmem_ptr(&counter, me) == (void *)&counter);
    ST_CHECK(shmem_ptr(&local, me) == NULL);
    for (int i = 0; i < 64; i++)
        h[i] = -1;
    shmem_barrier_all();
    for (int pe = 0; pe < n; pe++) {
        long *p = shmem_ptr(&h[me], pe);
        if (same_host(me, pe)) {
            ST_CHECK(p != NULL);
            *p = 1000 + me;
        } else {
            ST_CHECK(p == NULL);
        }
    }
    shmem_barrier_all();
    for (int pe = 0; pe < n; pe++)
        ST_EQ(h[pe], same_host(me, pe) ? 1000 + pe : -1);
    ST_OK("shmem_ptr: the peer's memory on this host, NULL across hosts");

    shmem_free(h);
    shmem_finalize();
    shmem_finalize(); /* idempotent */
    if (me == 0)
        printf("ok   finalize twice\n");
    return 0;
}
