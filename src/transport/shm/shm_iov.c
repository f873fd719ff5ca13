/* shm gather put: a region the importer cannot map is written with one
 * process_vm_writev whose local side is the caller's pieces (no staging
 * copy). Mapped regions never get here: the core copies into the mapping. */
#include "transport/shm/shm_int.h"

#include <errno.h>
#include <sys/uio.h>

int vmmc_shm_putv(vmmc_tl_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt, int notify,
                  uint64_t imm)
{
    struct iovec l[VMMC_IOV_MAX];
    size_t total = 0;
    int n = 0;
    for (int i = 0; i < iovcnt; i++)
        if (iov[i].iov_len) {
            l[n++] = iov[i];
            total += iov[i].iov_len;
        }
    int rc = vmmc_tl_px_enter(px);
    if (rc != VMMC_OK)
        return rc;
    size_t done = 0;
    int first = 0;
    while (done < total) {
        struct iovec r = {(void *)(px->raddr + off + done), total - done};
        ssize_t w = process_vm_writev(px->pid, l + first, (unsigned long)(n - first), &r, 1, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            vmmc_tl_px_leave(px);
            if (w < 0 && errno == ESRCH) {
                vmmc_tl_peer_failed(px->ep, px->rank, -1, "process_vm_writev found no such process");
                return vmmc_error(VMMC_ERR_PEER_DEAD, "rank %d (pid %d) is gone", px->rank,
                                  (int)px->pid);
            }
            if (w == 0)
                return vmmc_error(VMMC_ERR_SYSTEM, "process_vm_writev to rank %d made no progress",
                                  px->rank);
            return vmmc_error_sys("process_vm_writev of %zu bytes in %d pieces to rank %d", total,
                                  n, px->rank);
        }
        done += (size_t)w;
        /* A partial write: skip what went, resume inside the piece it stopped in. */
        while (first < n && (size_t)w >= l[first].iov_len) {
            w -= (ssize_t)l[first].iov_len;
            first++;
        }
        if (first < n) {
            l[first].iov_base = (char *)l[first].iov_base + w;
            l[first].iov_len -= (size_t)w;
        }
    }
    vmmc_tl_px_leave(px);
    return (notify & VMMC_SEND_NOTIFY)
               ? vmmc_shm_notify(px, off, total, imm, notify & VMMC_SEND_NONBLOCK)
               : VMMC_OK;
}
