/* MultiView: one memfd holding this rank's copy of the shared area, mapped
 * views + 1 times back to back at the same address in every rank:
 *
 *   base + v * size   application view v (0 .. views-1), PROT_NONE until the
 *                     protocol opens a minipage in it (page by page)
 *   base + views*size the privileged view, always read-write: the library
 *                     reads and receives minipages through it, and it is
 *                     the region exported to the other ranks (with the
 *                     memfd itself, sealed against resizing, so that ranks
 *                     on this host map it and a minipage sent to this rank
 *                     is a memcpy, not a system call)
 *
 * A page's minipages are reached through different views, so each has its
 * own protection. Rank 0 finds a free range (a PROT_NONE reservation the
 * kernel places); the others reserve the same range with
 * MAP_FIXED_NOREPLACE, so nothing of theirs is ever replaced. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dsm/dsm_int.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static size_t span(size_t size, unsigned views)
{
    return size * ((size_t)views + 1);
}

/* Rank 0 looks for room where the kernel puts nothing on its own: on
 * x86-64 the program and its heap sit near 0x55..., libraries, thread
 * stacks and other mappings grow down from near 0x7f..., and a sanitizer's
 * shadow lies below 16 TiB; so candidates go from 48 TiB up, 1 TiB apart.
 * Another process of the job then finds the same range free as surely as
 * rank 0 did (a range the kernel chose for rank 0 could hold a library or
 * a stack in another rank). The kernel's own choice is the last resort. */
#define DSM_HINT_FIRST 0x300000000000ull
#define DSM_HINT_STEP 0x10000000000ull
#define DSM_HINT_LAST 0x600000000000ull

static void *reserve_free(size_t len)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (sizeof(void *) == 8 && len <= DSM_HINT_STEP) {
        for (uint64_t a = DSM_HINT_FIRST; a < DSM_HINT_LAST; a += DSM_HINT_STEP) {
            void *want = (void *)(uintptr_t)a;
            void *p = mmap(want, len, PROT_NONE, flags | MAP_FIXED_NOREPLACE, -1, 0);
            if (p == want)
                return p;
            if (p != MAP_FAILED)
                munmap(p, len); /* a kernel that took it as a mere hint */
        }
    }
    return mmap(NULL, len, PROT_NONE, flags, -1, 0);
}

int dsm_view_reserve(size_t size, unsigned views, void **base)
{
    size_t len = span(size, views);
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    void *want = *base;
    if (!want) {
        void *p = reserve_free(len);
        if (p == MAP_FAILED)
            return dsm_error(VMMC_ERR_NOMEM,
                             "vmmc_dsm_init: cannot reserve %zu bytes of addresses for %u views "
                             "of %zu bytes (VMMC_DSM_SIZE, VMMC_DSM_VIEWS): %s",
                             len, views + 1, size, strerror(errno));
        *base = p;
        return VMMC_OK;
    }
    flags |= MAP_FIXED_NOREPLACE;
    void *p = mmap(want, len, PROT_NONE, flags, -1, 0);
    if (p == MAP_FAILED) {
        if (errno == EEXIST)
            return dsm_error(VMMC_ERR_NOMEM,
                             "vmmc_dsm_init: rank %d: the shared area's addresses %p..%p "
                             "(chosen by rank 0) are in use in this process; a smaller "
                             "VMMC_DSM_SIZE or VMMC_DSM_VIEWS may fit",
                             dsm.me, want, (void *)((char *)want + len));
        return dsm_error(VMMC_ERR_NOMEM,
                         "vmmc_dsm_init: cannot reserve %zu bytes of addresses for %u views "
                         "of %zu bytes (VMMC_DSM_SIZE, VMMC_DSM_VIEWS): %s",
                         len, views + 1, size, strerror(errno));
    }
    if (p != want) { /* a kernel without MAP_FIXED_NOREPLACE */
        munmap(p, len);
        return dsm_error(VMMC_ERR_NOMEM,
                         "vmmc_dsm_init: rank %d: the shared area's addresses %p.. (chosen by "
                         "rank 0) are in use in this process",
                         dsm.me, want);
    }
    *base = p;
    return VMMC_OK;
}

int dsm_view_map(void *base, size_t size, unsigned views, int page_mode, int me)
{
    int fd = memfd_create("vmmc-dsm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return dsm_error(VMMC_ERR_SYSTEM, "vmmc_dsm_init: memfd_create: %s", strerror(errno));
    if (ftruncate(fd, (off_t)size) != 0) {
        int e = errno;
        close(fd);
        return dsm_error(VMMC_ERR_NOMEM, "vmmc_dsm_init: a memfd of %zu bytes: %s", size,
                         strerror(e));
    }
    /* The other ranks on this host map it (the export of the privileged
     * view): none of them may shrink it under us, grow it or add seals. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int e = errno;
        close(fd);
        return dsm_error(VMMC_ERR_SYSTEM, "vmmc_dsm_init: sealing the area's memfd: %s",
                         strerror(e));
    }
    for (unsigned v = 0; v <= views; v++) {
        int prot = PROT_NONE;
        if (v == views || (page_mode && me == 0))
            prot = PROT_READ | PROT_WRITE; /* privileged; rank 0 owns every page at start */
        void *at = (char *)base + (size_t)v * size;
        void *p = mmap(at, size, prot, MAP_SHARED | MAP_FIXED, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return dsm_error(VMMC_ERR_NOMEM, "vmmc_dsm_init: mapping view %u: %s", v, strerror(e));
        }
    }
    dsm.memfd = fd;
    return VMMC_OK;
}

void dsm_view_unmap(void)
{
    if (dsm.base)
        munmap(dsm.base, span(dsm.size, dsm.views));
    if (dsm.memfd >= 0)
        close(dsm.memfd);
    dsm.base = dsm.priv = NULL;
    dsm.memfd = -1;
}

/* VMMC_DSM_THREADS=funneled: the faulting thread opens the page it
 * faulted on to the access it asked for while its request travels (it is
 * the only thread that touches the area, and it waits in its fault until
 * the bytes are in place), unless the answer has been handled already.
 * The answer's own dsm_protect() of that one page to that access then has
 * nothing left to do. */
void dsm_open_early(void)
{
    uint32_t id = dsm.early_id;
    if (!dsm.early_want)
        return;
    dsm.early_want = 0;
    if ((dsm.acc[id] & ACC_MASK) >= dsm.early_acc || !(dsm.acc[id] & ACC_INFLIGHT))
        return;
    dsm_protect(id % dsm.views, id / dsm.views, 1, dsm.early_acc);
    dsm.early_open = 1;
    atomic_fetch_add_explicit(&dsm.st_opened_early, 1, memory_order_relaxed);
}

/* Open or close pages [page, page+npg) of application view @view. The
 * kernel splits mappings at protection boundaries; past vm.max_map_count
 * areas mprotect fails with ENOMEM, which nothing can repair. */
void dsm_protect(unsigned view, size_t page, size_t npg, int acc)
{
    if (dsm.early_open && dsm.early_id % dsm.views == view && dsm.early_id / dsm.views >= page &&
        dsm.early_id / dsm.views < page + npg) {
        dsm.early_open = 0; /* set now, one way or the other */
        if (npg == 1 && acc == dsm.early_acc)
            return; /* opened so already, while the request travelled */
    }
    int prot = acc == ACC_W ? PROT_READ | PROT_WRITE : acc == ACC_R ? PROT_READ : PROT_NONE;
    if (mprotect(dsm_app_addr(view, page * DSM_PAGE), npg * DSM_PAGE, prot) != 0)
        dsm_fatal("mprotect of view %u, pages %zu..%zu: %s%s", view, page, page + npg - 1,
                  strerror(errno),
                  errno == ENOMEM ? " (the process has too many mappings: raise "
                                    "vm.max_map_count or lower VMMC_DSM_VIEWS)"
                                  : "");
}
