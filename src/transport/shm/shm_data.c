/* The shm data path: puts into a mapping, with process_vm_writev, and into
 * a redirectable export; gets; and the import-time choice among them
 * (vmmc_shm_proxy_setup), so that the send path decides nothing. */
#include "transport/shm/shm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>


/* Mapping past the end of a memfd would fault on access: check the size a
 * peer's descriptor really has against what the peer claims. */
static int fd_covers(int fd, uint64_t off, uint64_t len)
{
    struct stat st;
    return fstat(fd, &st) == 0 && off + len >= off && (uint64_t)st.st_size >= off + len;
}

/* ... and that the peer cannot make it smaller afterwards (a memfd sealed
 * with F_SEAL_SHRINK): otherwise a hostile exporter could truncate it while
 * a copy into the mapping runs, and this process would fault. */
static int fd_unshrinkable(int fd)
{
    int seals = fcntl(fd, F_GET_SEALS);
    return seals >= 0 && (seals & F_SEAL_SHRINK);
}


static int pvw_write(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len);

/* Copy path: bracketed by vmmc_proxy_enter/leave so that a revocation waits
 * for it (the notification, after the data, is outside: the exporter drops
 * it by generation, and it may wait for the exporter's progress). */
int vmmc_shm_put_pvw(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len, int notify,
                       uint64_t imm)
{
    int rc;
    if (notify & VMMC_SEND_HEAD_LAST) { /* the rest, then the 16-byte head, in order */
        rc = pvw_write(px, off + 16, (const char *)src + 16, len - 16);
        if (rc == VMMC_OK)
            rc = pvw_write(px, off, src, 16);
    } else {
        rc = pvw_write(px, off, src, len);
    }
    if (rc != VMMC_OK)
        return rc;
    return (notify & VMMC_SEND_NOTIFY)
               ? vmmc_shm_notify(px, off, len, imm, notify & VMMC_SEND_NONBLOCK)
               : VMMC_OK;
}

static int pvw_write(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len)
{
    int rc = vmmc_tl_px_enter(px);
    if (rc != VMMC_OK)
        return rc;
    size_t done = 0;
    while (done < len) {
        struct iovec l = {(char *)src + done, len - done};
        struct iovec r = {(void *)(px->raddr + off + done), len - done};
        ssize_t w = process_vm_writev(px->pid, &l, 1, &r, 1, 0);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            vmmc_tl_px_leave(px);
            if (errno == ESRCH) {
                vmmc_tl_peer_failed(px->ep, px->rank, -1, "process_vm_writev found no such process");
                return vmmc_error(VMMC_ERR_PEER_DEAD, "rank %d (pid %d) is gone", px->rank,
                                  (int)px->pid);
            }
            return vmmc_error_sys("process_vm_writev of %zu bytes to rank %d", len, px->rank);
        }
        if (w == 0) {
            vmmc_tl_px_leave(px);
            return vmmc_error(VMMC_ERR_SYSTEM, "process_vm_writev to rank %d made no progress",
                              px->rank);
        }
        done += (size_t)w;
    }
    vmmc_tl_px_leave(px);
    return VMMC_OK;
}

static int shm_put_mapped(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len, int notify,
                          uint64_t imm)
{
    char *d = (char *)px->map_base + (px->raddr & 4095) + off;
    if (notify & VMMC_SEND_HEAD_LAST)
        vmmc_store_head_last(d, src, len);
    else
        memcpy(d, src, len);
    return (notify & VMMC_SEND_NOTIFY)
               ? vmmc_shm_notify(px, off, len, imm, notify & VMMC_SEND_NONBLOCK)
               : VMMC_OK;
}

/* Writes into a redirectable export go through its shared control block. */
typedef struct redir_ctx {
    vmmc_tl_proxy_t *px;
} redir_ctx_t;

static int redir_copy(void *ctx, int to_user, uint64_t addr, const void *src, size_t len)
{
    vmmc_tl_proxy_t *px = ((redir_ctx_t *)ctx)->px;
    if (!to_user && px->map_base) {
        memcpy((char *)px->map_base + (px->raddr & 4095) + addr, src, len);
        return VMMC_OK;
    }
    uint64_t target = to_user ? addr : px->raddr + addr;
    size_t done = 0;
    while (done < len) {
        struct iovec l = {(char *)src + done, len - done};
        struct iovec r = {(void *)(uintptr_t)(target + done), len - done};
        ssize_t w = process_vm_writev(px->pid, &l, 1, &r, 1, 0);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return vmmc_error_sys("process_vm_writev into rank %d's %s buffer", px->rank,
                                  to_user ? "redirected" : "default");
        }
        done += (size_t)w;
    }
    return VMMC_OK;
}


static int shm_put_redirect(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len, int notify,
                            uint64_t imm)
{
    redir_ctx_t ctx = {px};
    int rc = vmmc_tl_px_enter(px);
    if (rc != VMMC_OK)
        return rc;
    rc = VMMC_TL_UP(px->ep)->redir_write(px->rctl, off, src, len, redir_copy, &ctx);
    vmmc_tl_px_leave(px);
    if (rc < 0)
        return rc;
    if (rc > 0) /* bytes went straight to a posted buffer: the receiver may wait for them */
        shm_signal(px->ep, VMMC_TL_PEER(px->peer));
    return (notify & VMMC_SEND_NOTIFY)
               ? vmmc_shm_notify(px, off, len, imm, notify & VMMC_SEND_NONBLOCK)
               : VMMC_OK;
}

int vmmc_shm_get(vmmc_tl_proxy_t *px, size_t off, void *dst, size_t len)
{
    if (px->map_base) {
        memcpy(dst, (char *)px->map_base + (px->raddr & 4095) + off, len);
        return VMMC_OK;
    }
    int rc = vmmc_tl_px_enter(px);
    if (rc != VMMC_OK)
        return rc;
    size_t done = 0;
    while (done < len) {
        struct iovec l = {(char *)dst + done, len - done};
        struct iovec r = {(void *)(px->raddr + off + done), len - done};
        ssize_t w = process_vm_readv(px->pid, &l, 1, &r, 1, 0);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            vmmc_tl_px_leave(px);
            if (w < 0 && errno == ESRCH)
                return vmmc_error(VMMC_ERR_PEER_DEAD, "rank %d is gone", px->rank);
            return vmmc_error_sys("process_vm_readv of %zu bytes from rank %d", len, px->rank);
        }
        done += (size_t)w;
    }
    vmmc_tl_px_leave(px);
    return VMMC_OK;
}

int vmmc_shm_proxy_setup(vmmc_tl_proxy_t *px, const vmmc_ctl_msg_t *m, const int *fds, int nfds)
{
    int memfd = -1, rfd = -1, i = 0;
    if (m->kind == PX_KIND_MAPPED && i < nfds)
        memfd = fds[i++];
    if ((m->flags & VMMC_EXPORT_REDIRECTABLE) && i < nfds)
        rfd = fds[i++];
    int rc = VMMC_OK;
    px->raddr = m->addr;
    px->pid = VMMC_TL_PEER(px->peer)->pid; /* checked at connect, never taken from a reply */
    if (m->kind == PX_KIND_MAPPED) {
        if (memfd < 0) {
            rc = vmmc_error(VMMC_ERR_PROTOCOL, "import reply without memory descriptor");
            goto out;
        }
        size_t pg_off = m->map_off & ~(uint64_t)4095;
        size_t lead = m->map_off - pg_off;
        px->map_len = (lead + m->length + 4095) & ~(size_t)4095;
        if (!fd_covers(memfd, m->map_off, m->length)) {
            rc = vmmc_error(VMMC_ERR_PROTOCOL, "rank %d's descriptor for '%s' is smaller than %zu bytes",
                            px->rank, m->name, (size_t)m->length);
            goto out;
        }
        if (!fd_unshrinkable(memfd)) {
            rc = vmmc_error(VMMC_ERR_PROTOCOL, "rank %d's descriptor for '%s' is not a memfd "
                            "sealed against shrinking (it could fault this process): refused",
                            px->rank, m->name);
            goto out;
        }
        void *b = mmap(NULL, px->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, (off_t)pg_off);
        if (b == MAP_FAILED) {
            rc = vmmc_error_sys("mmap imported region '%s' (%zu bytes)", m->name, (size_t)m->length);
            goto out;
        }
        /* map_base + (raddr & 4095) is the region start: keep raddr's page
         * offset equal to the memfd offset's. */
        px->map_base = b;
        (void)madvise(b, px->map_len, MADV_DONTFORK); /* the exporter's memory: not in children */
        px->raddr = (m->addr & ~(uint64_t)4095) | lead;
        px->kind = PX_KIND_MAPPED;
        px->put = shm_put_mapped;
    } else {
        px->kind = PX_KIND_PVW;
        px->put = vmmc_shm_put_pvw;
    }
    px->get = vmmc_shm_get;
    px->notify = vmmc_shm_notify;
    if (m->flags & VMMC_EXPORT_REDIRECTABLE) {
        if (rfd < 0) {
            rc = vmmc_error(VMMC_ERR_PROTOCOL, "redirectable import without control block");
            goto out;
        }
        if (!fd_covers(rfd, 0, VMMC_TL_UP(px->ep)->redir_ctl_size())) {
            rc = vmmc_error(VMMC_ERR_PROTOCOL, "redirect control block of '%s' is too small", m->name);
            goto out;
        }
        if (!fd_unshrinkable(rfd)) {
            rc = vmmc_error(VMMC_ERR_PROTOCOL, "rank %d's redirect control block for '%s' is not "
                            "sealed against shrinking (it could fault this process): refused",
                            px->rank, m->name);
            goto out;
        }
        void *c = mmap(NULL, VMMC_TL_UP(px->ep)->redir_ctl_size(), PROT_READ | PROT_WRITE, MAP_SHARED, rfd, 0);
        if (c == MAP_FAILED) {
            rc = vmmc_error_sys("mmap redirect control block of '%s'", m->name);
            goto out;
        }
        px->rctl = c;
        px->put = shm_put_redirect;
    } else if (px->kind == PX_KIND_MAPPED) {
        px->base = (char *)px->map_base + (px->raddr & 4095);
    }
out:
    /* Mappings keep no descriptor; the reply's extra ones (a hostile or
     * confused exporter may send any) are closed too. */
    for (int k = 0; k < nfds; k++)
        close(fds[k]);
    return rc;
}

