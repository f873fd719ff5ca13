/* Exports of a caller's memfd (VMMC_EXPORT_PARAM_FD): the checks that make
 * handing the descriptor to importers safe for this process, and the
 * library's own duplicate of it.
 *
 * Importers map the descriptor as they map a vmmc_mem_alloc() allocation's,
 * so it must be a memfd nobody can shrink (a truncated memfd makes every
 * mapping of the lost pages fault, this process's included), as long as the
 * region, and the region must sit at page boundaries in memory and in the
 * memfd (importers map whole pages). Unlike library memory it cannot be
 * re-backed at unexport: its mappings are the caller's. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/export.h"

int vmmc_export_fd_take(vmmc_ep_t *ep, const vmmc_export_params_t *pa, unsigned flags,
                        int *out)
{
    const char *name = pa->name;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    if (!(flags & VMMC_EXPORT_READ))
        return vmmc_error(VMMC_ERR_INVALID,
                          "export '%s': VMMC_EXPORT_PARAM_FD needs VMMC_EXPORT_READ (importers "
                          "map the descriptor, and a mapping grants reading and writing)",
                          name);
    if ((uintptr_t)pa->addr % pg || pa->fd_offset % pg)
        return vmmc_error(VMMC_ERR_INVALID,
                          "export '%s': with VMMC_EXPORT_PARAM_FD the address (%p) and fd_offset "
                          "(%llu) must be multiples of the page size (%zu)",
                          name, pa->addr, (unsigned long long)pa->fd_offset, pg);
    if (pa->fd < 0)
        return vmmc_error(VMMC_ERR_INVALID, "export '%s': VMMC_EXPORT_PARAM_FD with fd %d", name,
                          pa->fd);
    int fl = fcntl(pa->fd, F_GETFL);
    if (fl < 0)
        return vmmc_error(VMMC_ERR_INVALID, "export '%s': fd %d is not an open descriptor (%s)",
                          name, pa->fd, strerror(errno));
    if ((fl & O_ACCMODE) != O_RDWR)
        return vmmc_error(VMMC_ERR_INVALID,
                          "export '%s': fd %d is not open for reading and writing (importers map "
                          "it read-write)", name, pa->fd);
    int seals = fcntl(pa->fd, F_GET_SEALS);
    if (seals < 0)
        return vmmc_error(VMMC_ERR_INVALID,
                          "export '%s': fd %d has no seals (%s): it must be a memfd made with "
                          "MFD_ALLOW_SEALING and sealed with F_SEAL_SHRINK",
                          name, pa->fd, strerror(errno));
    if (!(seals & F_SEAL_SHRINK))
        return vmmc_error(VMMC_ERR_INVALID,
                          "export '%s': fd %d is not sealed with F_SEAL_SHRINK (an importer "
                          "holding it could truncate it and make this process fault)",
                          name, pa->fd);
#ifdef F_SEAL_FUTURE_WRITE
    seals &= F_SEAL_WRITE | F_SEAL_FUTURE_WRITE;
#else
    seals &= F_SEAL_WRITE;
#endif
    if (seals)
        return vmmc_error(VMMC_ERR_INVALID,
                          "export '%s': fd %d is sealed against writing (importers could not map "
                          "it)", name, pa->fd);
    struct stat st;
    if (fstat(pa->fd, &st) != 0)
        return vmmc_error(VMMC_ERR_INVALID, "export '%s': fstat of fd %d: %s", name, pa->fd,
                          strerror(errno));
    if (pa->fd_offset > (uint64_t)st.st_size ||
        pa->length > (uint64_t)st.st_size - pa->fd_offset)
        return vmmc_error(VMMC_ERR_INVALID,
                          "export '%s': fd %d holds %lld bytes, fewer than fd_offset %llu + "
                          "length %zu", name, pa->fd, (long long)st.st_size,
                          (unsigned long long)pa->fd_offset, pa->length);
    pthread_mutex_lock(&ep->mem_lock);
    int in_mem = 0; /* (any overlap, the start inside one included) */
    for (vmmc_mem_t *m = ep->mem; m && !in_mem; m = m->next)
        in_mem = m->base < (char *)pa->addr + pa->length && (char *)pa->addr < m->base + m->len;
    pthread_mutex_unlock(&ep->mem_lock);
    if (in_mem)
        return vmmc_error(VMMC_ERR_INVALID,
                          "export '%s': VMMC_EXPORT_PARAM_FD on vmmc_mem_alloc() memory (export "
                          "the allocation itself)", name);
    int fd = fcntl(pa->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return vmmc_error_sys("export '%s': duplicating fd %d", name, pa->fd);
    *out = fd;
    return VMMC_OK;
}
