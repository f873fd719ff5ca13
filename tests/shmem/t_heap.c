/* The symmetric heap: the same sequence of calls gives the same offsets on
 * every PE (malloc, align, calloc, free, realloc in place and moved, the
 * deprecated names), first fit reuses freed room and free neighbours merge,
 * calloc zeroes, realloc keeps the contents, a request beyond the heap
 * returns NULL with a message naming SHMEM_SYMMETRIC_SIZE. */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "shmem/shmem_int.h"
#include "shmem_test.h"

#define NOFF 32
static uint64_t offs[NOFF];
static int noff;
static char *base;

static void note(void *p)
{
    if (noff < NOFF)
        offs[noff++] = p ? (uint64_t)((char *)p - base) : ~0ull;
}

/* Run @fn with stderr going to a file; return what it wrote (static buffer). */
static const char *captured(void *(*fn)(size_t), size_t arg, void **out)
{
    static char buf[1024];
    char path[] = "/tmp/t_heap_XXXXXX";
    int fd = mkstemp(path);
    ST_CHECK(fd >= 0);
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    *out = fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    return buf;
}

static void *align3(size_t size)
{
    return shmem_align(3, size);
}

int main(void)
{
    setenv("SHMEM_SYMMETRIC_SIZE", "4m", 1); /* k/m/g suffixes, either case */
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    base = shm_g.heap;
    ST_EQ(shm_g.heap_size - SHM_RESERVED, 4u << 20);

    char *a = shmem_malloc(100);
    char *b = shmem_align(4096, 1000);
    long *c = shmem_calloc(10, sizeof(long));
    ST_CHECK(a && b && c);
    ST_EQ((uintptr_t)b % 4096, 0);
    for (int i = 0; i < 10; i++)
        ST_EQ(c[i], 0);
    note(a), note(b), note(c);
    shmem_free(a);
    char *d = shmem_malloc(50);
    ST_CHECK(d == a); /* first fit: the freed block */
    note(d);
    for (int i = 0; i < 10; i++)
        c[i] = me * 100 + i;
    long *c2 = shmem_realloc(c, 20000); /* no room after c: moves */
    ST_CHECK(c2 != NULL);
    for (int i = 0; i < 10; i++)
        ST_EQ(c2[i], me * 100 + i);
    note(c2);
    long *c3 = shmem_realloc(c2, 30000); /* room after it: in place */
    ST_CHECK(c3 == c2);
    long *c4 = shmem_realloc(c3, 64); /* shrinks in place */
    ST_CHECK(c4 == c2);
    for (int i = 0; i < 8; i++)
        ST_EQ(c4[i], me * 100 + i);
    char *e = shmalloc(5000); /* takes the room c4 gave back */
    ST_CHECK(e != NULL);
    note(e);
    char *f = shmemalign(256, 10);
    ST_EQ((uintptr_t)f % 256, 0);
    note(f);
    char *g = shmem_malloc_with_hints(100, SHMEM_MALLOC_ATOMICS_REMOTE);
    note(g);
    g = shrealloc(g, 200);
    note(g);
    ST_CHECK(shmem_malloc(0) == NULL);
    ST_CHECK(shmem_realloc(NULL, 0) == NULL);
    shmem_free(NULL);
    ST_OK("malloc, align, calloc, free, realloc (moved, in place, shrunk) and old names");

    /* every PE got the same offsets */
    uint64_t *all = shmem_calloc((size_t)n * NOFF, sizeof(uint64_t));
    for (int pe = 0; pe < n; pe++)
        shm_put_bytes("t", SHMEM_CTX_DEFAULT, all + me * NOFF, offs, sizeof offs, pe);
    shmem_barrier_all();
    for (int pe = 0; pe < n; pe++)
        for (int i = 0; i < noff; i++)
            ST_EQ(all[pe * NOFF + i], offs[i]);
    ST_OK("every PE got the same offsets");

    /* fill the heap with 64K blocks, free every other one, then all: the
     * free neighbours merge back into one block */
    char *blk[128];
    int nb = 0;
    while (nb < 128 && (blk[nb] = shmem_malloc(65536)) != NULL)
        nb++;
    ST_CHECK(nb > 32 && nb < 64);
    for (int i = 0; i < nb; i += 2)
        shmem_free(blk[i]);
    void *big;
    const char *msg = captured(shmem_malloc, 3u << 20, &big);
    ST_CHECK(big == NULL);
    ST_CHECK(strstr(msg, "shmem_malloc") && strstr(msg, "SHMEM_SYMMETRIC_SIZE"));
    for (int i = 1; i < nb; i += 2)
        shmem_free(blk[i]);
    shfree(e), shfree(f), shfree(g), shfree(d), shfree(b), shfree(c4), shmem_free(all);
    big = shmem_malloc((4u << 20) - 64);
    ST_CHECK(big == base + SHM_RESERVED);
    shmem_free(big);
    ST_OK("heap full: NULL with a message naming SHMEM_SYMMETRIC_SIZE; freed room merges");

    void *odd;
    msg = captured(align3, 64, &odd);
    ST_CHECK(odd == NULL);
    ST_CHECK(strstr(msg, "shmem_align") && strstr(msg, "power of two"));
    ST_OK("shmem_align with an alignment that is not a power of two: NULL and a message");
    shmem_finalize();
    return 0;
}
