/* The program's static data (.data and .bss) made mappable by the other PEs
 * of this host, so that a put, get or atomic on a global variable of
 * another PE is a store, load or atomic instruction, as on the heap, and
 * shmem_ptr() returns its address.
 *
 * The segment is private memory of the process, which no other process can
 * map. shm_data_share() moves it, whole pages at the same addresses, onto a
 * memfd of its own: copy the pages into the memfd (pages of zeros are left
 * as holes), then map the memfd MAP_SHARED|MAP_FIXED over them, which
 * replaces the private pages in one system call. The memfd is sealed
 * against shrinking and growing and exported with VMMC_EXPORT_PARAM_FD, so
 * PEs of this host map it as they map a heap. A store another thread of
 * this process makes to static data between the copy and the mapping would
 * be lost: shmem_init must come before the program starts threads that
 * write global variables (as OpenSHMEM asks of it anyway).
 *
 * fork(): a child would share its parent's globals through the memfd. A
 * handler of pthread_atfork gives the child private pages again, with the
 * contents they had at the fork, before fork() returns in it.
 *
 * VMMC_SHMEM_MAP_DATA=n keeps the private pages: other PEs then reach static
 * data with process_vm_writev/readv and their atomics are executed by this
 * PE's progress, and shmem_ptr() on a global variable returns NULL. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shmem/shmem_core.h"

static int data_fd = -1;        /* the memfd under static data, or -1 */
static char *shared_lo;         /* [shared_lo, shared_lo + shared_len) is on it */
static size_t shared_len;
static int atfork_set;

/* Whole pages of static data hold AddressSanitizer's red zones between
 * globals: these two read them without its checks (and without the
 * checked memcpy, which volatile keeps the compiler from calling). */
#if defined(__SANITIZE_ADDRESS__) || defined(__clang__)
#define NO_ASAN __attribute__((no_sanitize_address))
#else
#define NO_ASAN
#endif

NO_ASAN static int page_is_zero(const char *p, size_t page)
{
    const volatile uint64_t *w = (const volatile uint64_t *)(const volatile void *)p;
    for (size_t i = 0; i < page / sizeof *w; i++)
        if (w[i])
            return 0;
    return 1;
}

NO_ASAN static void copy_words(char *dst, const char *src, size_t len)
{
    volatile uint64_t *d = (volatile uint64_t *)(volatile void *)dst;
    const volatile uint64_t *s = (const volatile uint64_t *)(const volatile void *)src;
    for (size_t i = 0; i < len / sizeof *d; i++)
        d[i] = s[i];
}

/* In a child of fork(): private pages with the same contents, so that the
 * child's stores to globals stay its own. Runs before fork() returns in the
 * child, which has one thread. */
static void child_unshare(void)
{
    if (data_fd < 0)
        return;
    void *tmp = mmap(NULL, shared_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                     0);
    if (tmp == MAP_FAILED)
        goto fail;
    copy_words(tmp, shared_lo, shared_len);
    /* the private copy takes the place of the shared pages at their address */
    if (mremap(tmp, shared_len, shared_len, MREMAP_MAYMOVE | MREMAP_FIXED, shared_lo) ==
        MAP_FAILED)
        goto fail;
    (void)close(data_fd);
    data_fd = -1;
    return;
fail:
    /* Leave it shared, and say so: the child would write into its parent. */
    fprintf(stderr,
            "shmem: fork: cannot give the child private static data (%s); it shares its "
            "parent's global variables (VMMC_SHMEM_MAP_DATA=n avoids this)\n",
            strerror(errno));
}

int shm_data_share(char *lo, size_t len, int *fd_out)
{
    if (data_fd >= 0 && lo == shared_lo && len == shared_len) {
        *fd_out = data_fd; /* shmem_init after shmem_finalize: moved already */
        return 0;
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if ((uintptr_t)lo % page || len % page || !len)
        return -1;
    int fd = memfd_create("vmmc-shmem-data", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    char *tmp = MAP_FAILED;
    /* Peers map it; none may resize it under this process. Sealed before
     * anything moves, so that a memfd that could not be is never used. */
    if (ftruncate(fd, (off_t)len) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        goto fail;
    /* A child must not share the pages: no handler, no move. */
    if (!atfork_set && pthread_atfork(NULL, NULL, child_unshare) != 0)
        goto fail;
    atfork_set = 1;
    tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (tmp == MAP_FAILED)
        goto fail;
    for (size_t off = 0; off < len; off += page)
        if (!page_is_zero(lo + off, page)) /* a hole reads as zeros, and costs nothing */
            copy_words(tmp + off, lo + off, page);
    /* A failed MAP_FIXED may have unmapped the private pages already: the
     * program's globals could be gone, so it cannot go on. */
    if (mmap(lo, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != lo)
        shm_fatal("shmem_init",
                  "cannot map the program's static data onto shared memory (%p, %zu bytes): "
                  "%s (VMMC_SHMEM_MAP_DATA=n leaves it private)",
                  (void *)lo, len, strerror(errno));
    (void)munmap(tmp, len);
    shared_lo = lo;
    shared_len = len;
    data_fd = fd;
    *fd_out = fd;
    return 0;
fail:
    if (tmp != MAP_FAILED)
        (void)munmap(tmp, len);
    (void)close(fd);
    return -1;
}
