/* MultiView: one memfd holding this rank's copy of the shared area, mapped
 * views + 1 times back to back at the same address in every rank:
 *
 *   base + v * size   application view v (0 .. views-1), PROT_NONE until the
 *                     protocol opens a minipage in it (page by page)
 *   base + views*size the privileged view, always read-write: the library
 *                     reads and receives minipages through it, and it is
 *                     the region exported to the other ranks
 *
 * A page's minipages are reached through different views, so each has its
 * own protection. Rank 0 finds a free range (a PROT_NONE reservation the
 * kernel places); the others reserve the same range with
 * MAP_FIXED_NOREPLACE, so nothing of theirs is ever replaced. */
#include <errno.h>
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

int dsm_view_reserve(size_t size, unsigned views, void **base)
{
    size_t len = span(size, views);
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    void *want = *base;
    if (want)
        flags |= MAP_FIXED_NOREPLACE;
    void *p = mmap(want, len, PROT_NONE, flags, -1, 0);
    if (p == MAP_FAILED) {
        if (want && errno == EEXIST)
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
    if (want && p != want) { /* a kernel without MAP_FIXED_NOREPLACE */
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
    int fd = memfd_create("vmmc-dsm", MFD_CLOEXEC);
    if (fd < 0)
        return dsm_error(VMMC_ERR_SYSTEM, "vmmc_dsm_init: memfd_create: %s", strerror(errno));
    if (ftruncate(fd, (off_t)size) != 0) {
        int e = errno;
        close(fd);
        return dsm_error(VMMC_ERR_NOMEM, "vmmc_dsm_init: a memfd of %zu bytes: %s", size,
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

/* Open or close pages [page, page+npg) of application view @view. The
 * kernel splits mappings at protection boundaries; past vm.max_map_count
 * areas mprotect fails with ENOMEM, which nothing can repair. */
void dsm_protect(unsigned view, size_t page, size_t npg, int acc)
{
    int prot = acc == ACC_W ? PROT_READ | PROT_WRITE : acc == ACC_R ? PROT_READ : PROT_NONE;
    if (mprotect(dsm_app_addr(view, page * DSM_PAGE), npg * DSM_PAGE, prot) != 0)
        dsm_fatal("mprotect of view %u, pages %zu..%zu: %s%s", view, page, page + npg - 1,
                  strerror(errno),
                  errno == ENOMEM ? " (the process has too many mappings: raise "
                                    "vm.max_map_count or lower VMMC_DSM_VIEWS)"
                                  : "");
}
