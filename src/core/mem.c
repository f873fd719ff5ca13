/* Communication memory: every vmmc_mem_alloc() region is its own memfd, so an
 * importer maps exactly that allocation and nothing else of the process.
 * The list doubles as the translation table from an address to (memfd,
 * offset) used when a region inside it is exported. */
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

int vmmc_mem_alloc(vmmc_ep_t *ep, size_t size, void **ptr)
{
    if (!ep || !ptr)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_alloc: NULL %s", !ep ? "endpoint" : "result");
    if (size == 0 || size > ((size_t)1 << 46))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_mem_alloc: size %zu out of range", size);
    size_t len = page_round(size);
    vmmc_mem_t *m = calloc(1, sizeof *m);
    if (!m)
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory");
    m->fd = memfd_create("vmmc-mem", MFD_CLOEXEC);
    if (m->fd < 0) {
        free(m);
        return vmmc_error_sys("memfd_create for %zu bytes", size);
    }
    if (ftruncate(m->fd, (off_t)len) != 0) {
        int rc = vmmc_error_sys("ftruncate memfd to %zu bytes", len);
        close(m->fd);
        free(m);
        return rc;
    }
    m->base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (m->base == MAP_FAILED) {
        int rc = vmmc_error_sys("mmap %zu bytes of communication memory", len);
        close(m->fd);
        free(m);
        return rc;
    }
    m->len = len;
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

vmmc_mem_t *vmmc_mem_find(vmmc_ep_t *ep, const void *addr, size_t len)
{
    const char *a = addr;
    pthread_mutex_lock(&ep->mem_lock);
    vmmc_mem_t *m = ep->mem;
    while (m && !(a >= m->base && a + len <= m->base + m->len))
        m = m->next;
    pthread_mutex_unlock(&ep->mem_lock);
    return m;
}
