/* The PE table: this PE's exports of its heap and static data, every other
 * PE's imports of them, and the translation of a symmetric address into
 * where it lies on another PE (shm_locate). */
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shmem/shmem_core.h"

static char *data_lo, *data_hi; /* exact symmetric static range */

#define PAGE 4096u

/* The executable's .data and .bss: its writable PT_LOAD segment, from the
 * end of the part the loader makes read-only after relocation (RELRO) to
 * the end of .bss. (Symbols like _end would name this library's own.) */
static int find_data(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t lo = 0, hi = 0, relro = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W) && ph->p_memsz > hi - lo) {
            lo = a;
            hi = a + ph->p_memsz;
        } else if (ph->p_type == PT_GNU_RELRO) {
            relro = a + ph->p_memsz;
        }
    }
    if (relro > lo && relro < hi)
        lo = relro;
    ((uintptr_t *)arg)[0] = lo;
    ((uintptr_t *)arg)[1] = hi;
    return 1; /* the first object is the program itself */
}

static void export_memory(void)
{
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS;
    p.name = "shmem.heap";
    p.addr = shm_g.heap;
    p.length = shm_g.heap_size;
    p.flags = VMMC_EXPORT_READ;
    int st = vmmc_export(shm_g.ep, &p, &shm_g.heap_ex);
    if (st != VMMC_OK)
        shm_fatal_vmmc("shmem_init", "export of the symmetric heap", st);

    uintptr_t r[2] = {0, 0};
    dl_iterate_phdr(find_data, r);
    data_lo = (char *)r[0];
    data_hi = (char *)r[1];
    if (!data_lo || data_hi <= data_lo)
        shm_fatal("shmem_init", "cannot find the program's writable segment (%p)",
                  (void *)data_lo);
    uintptr_t lo = (uintptr_t)data_lo & ~(uintptr_t)(PAGE - 1);
    uintptr_t hi = ((uintptr_t)data_hi + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
    shm_g.data_start = (char *)lo;
    shm_g.data_len = hi - lo;
    /* On its own memfd (shmem_data.c), PEs of this host map it; else
     * importers reach it with process_vm_writev/readv on this host, and
     * across hosts by deliberate update (READ grants shmem_get). */
    vmmc_export_params_t d = {0};
    d.field_mask = VMMC_EXPORT_PARAM_FLAGS;
    int fd;
    if (shm_cfg.map_data && shm_data_share(shm_g.data_start, shm_g.data_len, &fd) == 0) {
        d.field_mask |= VMMC_EXPORT_PARAM_FD;
        d.fd = fd;
        d.fd_offset = 0;
    }
    d.name = "shmem.data";
    d.addr = shm_g.data_start;
    d.length = shm_g.data_len;
    d.flags = VMMC_EXPORT_READ;
    st = vmmc_export(shm_g.ep, &d, &shm_g.data_ex);
    if (st != VMMC_OK)
        shm_fatal_vmmc("shmem_init", "export of the static data", st);
}

/* Start every import at once, then wait for them all: the PEs answer each
 * other in parallel instead of one round trip after another. */
static void import_all(void)
{
    int n = shm_g.npes, me = shm_g.me;
    for (int i = 0; i < n; i++) {
        if (i == me)
            continue;
        int st = vmmc_import_start(shm_g.ep, i, "shmem.heap", -1, &shm_g.pe[i].heap_px);
        if (st != VMMC_OK && st != VMMC_INPROGRESS)
            shm_fatal_vmmc("shmem_init", "import of a symmetric heap", st);
        st = vmmc_import_start(shm_g.ep, i, "shmem.data", -1, &shm_g.pe[i].data_px);
        if (st != VMMC_OK && st != VMMC_INPROGRESS)
            shm_fatal_vmmc("shmem_init", "import of a PE's static data", st);
    }
    for (int i = 0; i < n; i++) {
        if (i == me)
            continue;
        vmmc_proxy_t *px[2] = {shm_g.pe[i].heap_px, shm_g.pe[i].data_px};
        for (int k = 0; k < 2; k++) {
            int st;
            while ((st = vmmc_import_test(px[k])) == VMMC_INPROGRESS)
                (void)vmmc_wait(shm_g.ep, 1);
            if (st != VMMC_OK) {
                char what[96];
                snprintf(what, sizeof what, "import of PE %d's %s", i,
                         k ? "static data" : "symmetric heap");
                shm_fatal_vmmc("shmem_init", what, st);
            }
        }
    }
}

static void check_and_map(void)
{
    for (int i = 0; i < shm_g.npes; i++) {
        shm_pe_t *p = &shm_g.pe[i];
        if (i == shm_g.me) {
            p->heap = shm_g.heap;
            p->same_host = 1;
            continue;
        }
        size_t hl = vmmc_proxy_length(p->heap_px), dl = vmmc_proxy_length(p->data_px);
        if (hl != shm_g.heap_size)
            shm_fatal("shmem_init",
                      "PE %d has a symmetric heap of %zu bytes, this PE %zu: give every PE the "
                      "same SHMEM_SYMMETRIC_SIZE (%s)",
                      i, hl - SHM_RESERVED, shm_g.heap_size - SHM_RESERVED,
                      getenv("SHMEM_SYMMETRIC_SIZE") ? getenv("SHMEM_SYMMETRIC_SIZE")
                                                     : "unset: 256M");
        if (dl != shm_g.data_len)
            shm_fatal("shmem_init",
                      "PE %d has %zu bytes of static data, this PE %zu: every PE must run the "
                      "same program (%zu)",
                      i, dl, shm_g.data_len, shm_g.data_len);
        void *ptr = NULL;
        int st = vmmc_proxy_map(p->heap_px, &ptr);
        if (st == VMMC_OK) {
            p->heap = ptr;
            p->same_host = 1;
        } else if (st == VMMC_ERR_UNSUPPORTED) {
            p->heap = NULL; /* another host: deliberate update and remote reads */
            p->same_host = 0;
            shm_g.any_remote = 1;
        } else {
            shm_fatal_vmmc("shmem_init", "mapping of a symmetric heap", st);
        }
        /* Its static data maps where it moved it onto a memfd too. */
        ptr = NULL;
        st = p->same_host ? vmmc_proxy_map(p->data_px, &ptr) : VMMC_ERR_UNSUPPORTED;
        if (st == VMMC_OK)
            p->data = ptr;
        else if (st == VMMC_ERR_UNSUPPORTED)
            p->data = NULL; /* process_vm_writev/readv, or deliberate update */
        else
            shm_fatal_vmmc("shmem_init", "mapping of a PE's static data", st);
    }
}

void shm_xlate_init(void)
{
    export_memory();
    import_all();
    check_and_map();
}

/* [p, p+len) inside [lo, lo+size)? Written so that no sum can wrap. */
static inline int inside(const char *p, size_t len, const char *lo, size_t size)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)lo;
    return a >= b && a - b <= size && len <= size - (a - b);
}

int shm_is_symmetric(const void *p, size_t len)
{
    if (inside(p, len, shm_g.heap, shm_g.heap_size))
        return 1;
    return data_lo && inside(p, len, data_lo, (size_t)(data_hi - data_lo));
}

void shm_locate(const char *fn, const void *sym, size_t len, int pe, shm_loc_t *loc)
{
    shm_check_pe(fn, pe);
    const char *p = sym;
    if (inside(p, len, shm_g.heap, shm_g.heap_size)) {
        loc->in_heap = 1;
        loc->off = (size_t)(p - shm_g.heap);
        char *base = shm_g.pe[pe].heap;
        if (base) {
            loc->ptr = base + loc->off;
            loc->px = NULL;
        } else {
            loc->ptr = NULL;
            loc->px = shm_g.pe[pe].heap_px;
        }
        return;
    }
    if (data_lo && inside(p, len, data_lo, (size_t)(data_hi - data_lo))) {
        loc->in_heap = 0;
        loc->off = (size_t)(p - shm_g.data_start);
        if (pe == shm_g.me) {
            loc->ptr = (char *)p;
            loc->px = NULL;
        } else if (shm_g.pe[pe].data) {
            loc->ptr = shm_g.pe[pe].data + loc->off;
            loc->px = NULL;
        } else {
            loc->ptr = NULL;
            loc->px = shm_g.pe[pe].data_px;
        }
        return;
    }
    shm_fatal(fn, "address not symmetric: not in the symmetric heap or static data (%p, %zu "
                  "bytes)", sym, len);
}

void *shmem_ptr(const void *dest, int pe)
{
    shm_check_init("shmem_ptr");
    shm_check_pe("shmem_ptr", pe);
    const char *p = dest;
    if (pe == shm_g.me && shm_is_symmetric(p, 1))
        return (void *)p;
    if (inside(p, 1, shm_g.heap, shm_g.heap_size))
        return shm_g.pe[pe].heap ? shm_g.pe[pe].heap + (p - shm_g.heap) : NULL;
    /* static data of another PE has an address here where it is mapped */
    if (data_lo && inside(p, 1, data_lo, (size_t)(data_hi - data_lo)) && shm_g.pe[pe].data)
        return shm_g.pe[pe].data + (p - shm_g.data_start);
    return NULL;
}

int shmem_pe_accessible(int pe)
{
    shm_check_init("shmem_pe_accessible");
    if (pe < 0 || pe >= shm_g.npes)
        return 0;
    if (pe == shm_g.me)
        return 1;
    return vmmc_peer_alive(shm_g.ep, pe) == 1;
}

int shmem_addr_accessible(const void *addr, int pe)
{
    shm_check_init("shmem_addr_accessible");
    return shmem_pe_accessible(pe) && shm_is_symmetric(addr, 1);
}
