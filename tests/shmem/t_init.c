/* Setup and queries: shmem_init (twice), my_pe/n_pes and their deprecated
 * names, thread level, version and name, pe/addr_accessible, shmem_ptr
 * (the peer's own memory on this host, heap and static data, NULL across
 * hosts), static data kept through shmem_init and private to a fork()ed
 * child, shmem_finalize (twice). Run with 2 and 4 PEs, on one host and on
 * two, and with VMMC_SHMEM_MAP_DATA=n (static data not mapped). */
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shmem/shmem_int.h"
#include "shmem_test.h"

static long counter;       /* static data: symmetric */
static long table[16] = {1, [15] = 0x5eed}; /* .data: symmetric */
static char big[8 << 20];    /* .bss of whole pages never touched before shmem_init */

/* PEs of the udp variant run on hosts r % 2 (tests/multihost/netns_job.sh). */
static int same_host(int a, int b)
{
    const char *tr = getenv("VMMC_TRANSPORT");
    if (a != b && tr && strcmp(tr, "udp") == 0)
        return 0; /* every peer reached through udp: nothing mapped */
    return getenv("VMMC_BOOTSTRAP") ? (a % 2) == (b % 2) : 1;
}

/* Static data of other PEs is mapped on this host unless the setting says no. */
static int data_mapped(int a, int b)
{
    const char *v = getenv("VMMC_SHMEM_MAP_DATA");
    if (v && (*v == 'n' || *v == '0'))
        return a == b;
    return same_host(a, b);
}

int main(void)
{
    table[1] = 42; /* stores before shmem_init stay */
    shmem_init();
    ST_EQ(table[0], 1);
    ST_EQ(table[1], 42);
    ST_EQ(table[15], 0x5eed);
    ST_EQ(big[0], 0);
    ST_EQ(big[sizeof big - 1], 0);
    ST_OK("static data holds what it held before shmem_init");
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

    /* Static data: a peer's global through shmem_ptr where it is mapped; a
     * put, a get and atomics on it from every PE whichever way it goes. */
    shmem_barrier_all();
    for (int pe = 0; pe < n; pe++) {
        char *b = shmem_ptr(&big[(size_t)me * 4096 + 7], pe);
        ST_CHECK((b != NULL) == data_mapped(me, pe));
        if (b)
            *b = (char)(1 + me);
        else
            shmem_char_p(&big[(size_t)me * 4096 + 7], (char)(1 + me), pe);
        shmem_long_atomic_add(&counter, me + 1, pe);
        shmem_putmem(&big[sizeof big - 64 + (size_t)me], &(char){(char)(50 + me)}, 1, pe);
    }
    shmem_barrier_all();
    ST_EQ(counter, (long)n * (n + 1) / 2);
    for (int pe = 0; pe < n; pe++) {
        ST_EQ(big[(size_t)pe * 4096 + 7], 1 + pe);
        ST_EQ(big[sizeof big - 64 + (size_t)pe], 50 + pe);
        long t = 0;
        shmem_getmem(&t, &table[15], sizeof t, pe);
        ST_EQ(t, 0x5eed);
    }
    ST_OK("static data: shmem_ptr where mapped, puts, gets and atomics from every PE");

    /* A fork()ed child's stores to globals are its own. */
    shmem_barrier_all();
    pid_t child = fork();
    ST_CHECK(child >= 0);
    if (child == 0) {
        counter = -7;
        table[1] = -7;
        _exit(counter == -7 && table[1] == -7 ? 0 : 3);
    }
    int ws = 0;
    ST_CHECK(waitpid(child, &ws, 0) == child);
    ST_CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    ST_EQ(counter, (long)n * (n + 1) / 2);
    ST_EQ(table[1], 42);
    shmem_barrier_all();
    for (int pe = 0; pe < n; pe++)
        ST_EQ(shmem_long_g(&counter, pe), (long)n * (n + 1) / 2);
    ST_OK("a fork()ed child's stores to static data stay in the child");

    shmem_free(h);
    shmem_finalize();
    shmem_finalize(); /* idempotent */
    if (me == 0)
        printf("ok   finalize twice\n");
    return 0;
}
