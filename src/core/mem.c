/* Communication memory: every vmmc_mem_alloc() region is its own memfd, so an
 * importer maps exactly that allocation and nothing else of the process.
 * The list doubles as the translation table from an address to (memfd,
 * offset) used when a region inside it is exported.
 *
 * The memfd is sealed against shrinking and growing: a peer that keeps the
 * descriptor cannot truncate it under the owner (whose next access would
 * fault). When the export whose importers hold the descriptor is withdrawn,
 * the allocation moves to a fresh memfd at the same address (re-backing):
 * the old descriptor then reaches only a copy nobody reads. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"

static size_t page_round(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) & ~(pg - 1);
}

/* A memfd of @len bytes that nobody can shrink or grow. */
static int sealed_memfd(size_t len, int *out)
{
    int fd = memfd_create("vmmc-mem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return vmmc_error_sys("memfd_create for %zu bytes", len);
    if (ftruncate(fd, (off_t)len) != 0) {
        int rc = vmmc_error_sys("ftruncate memfd to %zu bytes", len);
        close(fd);
        return rc;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int rc = vmmc_error_sys("sealing the memfd of %zu bytes", len);
        close(fd);
        return rc;
    }
    *out = fd;
    return VMMC_OK;
}

int vmmc_mem_reback(vmmc_mem_t *m)
{
    int fd, rc = sealed_memfd(m->len, &fd);
    if (rc != VMMC_OK)
        return rc;
    /* Copy through the kernel, then put the new pages where the old ones
     * were: stores that importers make to the old memfd from now on land
     * in pages this process no longer maps. */
    for (size_t done = 0; done < m->len;) {
        ssize_t w = pwrite(fd, m->base + done, m->len - done, (off_t)done);
        if (w <= 0) {
            rc = vmmc_error_sys("copying %zu bytes of communication memory", m->len);
            close(fd);
            return rc;
        }
        done += (size_t)w;
    }
    if (mmap(m->base, m->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
        rc = vmmc_error_sys("re-mapping %zu bytes of communication memory", m->len);
        close(fd);
        return rc;
    }
    vmmc_fork_exclude(m->base, m->len); /* a new mapping: peers reach it, children must not */
    close(m->fd);
    m->fd = fd;
    return VMMC_OK;
}

int vmmc_mem_alloc(vmmc_ep_t *ep, size_t size, void **ptr)
{
    VMMC_FORK_CHECK(ep);
    if (!ep || !ptr)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_alloc: NULL %s", !ep ? "endpoint" : "result");
    if (size == 0 || size > ((size_t)1 << 46))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_alloc: size %zu out of range", size);
    size_t len = page_round(size);
    vmmc_mem_t *m = calloc(1, sizeof *m);
    if (!m)
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory");
    int rc = sealed_memfd(len, &m->fd);
    if (rc != VMMC_OK) {
        free(m);
        return rc;
    }
    m->base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (m->base == MAP_FAILED) {
        rc = vmmc_error_sys("mmap %zu bytes of communication memory", len);
        close(m->fd);
        free(m);
        return rc;
    }
    vmmc_fork_exclude(m->base, len); /* peers reach it: a child of fork() must not */
    m->len = len;
    m->req = size;
    pthread_mutex_lock(&ep->mem_lock);
    m->next = ep->mem;
    ep->mem = m;
    pthread_mutex_unlock(&ep->mem_lock);
    *ptr = m->base;
    return VMMC_OK;
}

void vmmc_mem_release(vmmc_mem_t *m)
{
    munmap(m->base, m->len);
    close(m->fd);
    free(m);
}

int vmmc_mem_free(vmmc_ep_t *ep, void *ptr)
{
    VMMC_FORK_CHECK(ep);
    if (!ep || !ptr)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_free: NULL %s", !ep ? "endpoint" : "pointer");
    pthread_mutex_lock(&ep->mem_lock);
    vmmc_mem_t **pm = &ep->mem;
    while (*pm && (*pm)->base != ptr)
        pm = &(*pm)->next;
    vmmc_mem_t *m = *pm;
    if (m && m->kex) {
        /* Withdraw the key export (vmmc_mem_key): peers that attached it
         * keep the pages they mapped until they drop them, and can reach
         * nothing else. */
        vmmc_export_t *kex = m->kex;
        m->kex = NULL;
        kex->no_reback = 1; /* the pages go away anyway */
        pthread_mutex_unlock(&ep->mem_lock);
        vmmc_unexport(kex);
        pthread_mutex_lock(&ep->mem_lock);
        for (pm = &ep->mem; *pm && (*pm)->base != ptr;)
            pm = &(*pm)->next;
        m = *pm;
    }
    if (!m) {
        pthread_mutex_unlock(&ep->mem_lock);
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_free: %p was not returned by vmmc_mem_alloc", ptr);
    }
    pthread_mutex_lock(&ep->lock);
    for (uint32_t i = 0; i < ep->max_exports; i++) {
        vmmc_export_t *ex = ep->exports[i];
        if (ex && ex->addr >= m->base && ex->addr < m->base + m->len) {
            pthread_mutex_unlock(&ep->lock);
            pthread_mutex_unlock(&ep->mem_lock);
            return vmmc_error(VMMC_ERR_BUSY, "vmmc_mem_free: export '%s' is still inside this memory",
                              ex->name);
        }
    }
    pthread_mutex_unlock(&ep->lock);
    *pm = m->next;
    pthread_mutex_unlock(&ep->mem_lock);
    vmmc_mem_release(m);
    return VMMC_OK;
}

vmmc_mem_t *vmmc_mem_at(vmmc_ep_t *ep, const void *addr)
{
    const char *a = addr;
    vmmc_mem_t *m = ep->mem;
    while (m && !(a >= m->base && a < m->base + m->len))
        m = m->next;
    return m;
}
