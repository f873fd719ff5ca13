/* Memory hooks by patching the C library's functions (fab_hooks.h).
 *
 * The first bytes of each hooked function are overwritten with a jump to
 * ours (x86-64: movabs $hook, %r11; jmp *%r11: 13 bytes), as UCX (ucm
 * "bistro"), Open MPI (patcher "overwrite") and libfabric ("memhooks") do.
 * Patching the function's body, not a symbol or a PLT slot, also catches the
 * calls the C library makes to itself (free() to munmap, malloc_trim() to
 * brk), which go through no relocation. Our function tells the caches, then
 * makes the system call itself (the original's body is gone).
 *
 * The patches are never undone: a thread may be inside a hook at any time.
 * The object holding the hooks is pinned (RTLD_NODELETE) so that they stay
 * mapped. Installing writes code while other threads may run: a thread
 * that enters a function while it is patched spins on a two-byte jump to
 * itself until the patch is whole; one that is inside the function's system
 * call at that moment returns into the new bytes (the window every patcher
 * has): the transport installs the hooks when it opens, before it moves
 * data. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "transport/fabric/fab_hooks.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/log.h"
#include "vmmc/vmmc.h"

#define MAX_CACHES 64

static pthread_rwlock_t caches_lock = PTHREAD_RWLOCK_INITIALIZER; /* readers first: hooks nest */
static fab_cache_t *caches[MAX_CACHES];
static atomic_ulong events;
static void **curbrk; /* the C library's __curbrk, which sbrk() reads */

static void notify(const void *addr, size_t len)
{
    if (len == 0)
        return;
    atomic_fetch_add_explicit(&events, 1, memory_order_relaxed);
    pthread_rwlock_rdlock(&caches_lock);
    for (int i = 0; i < MAX_CACHES; i++)
        if (caches[i])
            fab_cache_invalidate_deferred(caches[i], addr, len);
    pthread_rwlock_unlock(&caches_lock);
}

static int hook_munmap(void *addr, size_t len)
{
    notify(addr, len);
    return (int)syscall(SYS_munmap, addr, len);
}

static void *hook_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if ((flags & MAP_FIXED) && addr)
        notify(addr, len);
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static void *hook_mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *new_addr = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
        notify(new_addr, new_len); /* what was mapped there goes */
    }
    notify(old, old_len);
    return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}

static int hook_madvise(void *addr, size_t len, int advice)
{
    if (advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE)
        notify(addr, len);
    return (int)syscall(SYS_madvise, addr, len, advice);
}

static int hook_brk(void *addr)
{
    void *old = *curbrk;
    void *now = (void *)syscall(SYS_brk, addr);
    *curbrk = now;
    if ((uintptr_t)now < (uintptr_t)addr) {
        errno = ENOMEM;
        return -1;
    }
    if ((uintptr_t)now < (uintptr_t)old)
        notify(now, (uintptr_t)old - (uintptr_t)now);
    return 0;
}

#if defined(__x86_64__)
enum { PATCH_LEN = 13 };
static void make_patch(unsigned char *p, void *to)
{
    uint64_t a = (uintptr_t)to;
    p[0] = 0x49; p[1] = 0xbb; /* movabs $a, %r11 */
    memcpy(p + 2, &a, 8);
    p[10] = 0x41; p[11] = 0xff; p[12] = 0xe3; /* jmp *%r11 */
}
#endif

#if defined(__x86_64__)
static int patch(void *lib, const char *name, void *hook)
{
    void *fn = dlsym(lib, name);
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!fn || !dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym)
        return vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric memory hooks: %s not found in the C library", name);
    if (sym->st_size < PATCH_LEN)
        return vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric memory hooks: %s is %zu bytes, too short to patch",
                          name, (size_t)sym->st_size);
    unsigned char code[PATCH_LEN];
    make_patch(code, hook);
    if (memcmp(fn, code, PATCH_LEN) == 0)
        return 0;
    if ((uintptr_t)fn % 2)
        return vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric memory hooks: %s is not aligned", name);
    uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)fn & ~(ps - 1), hi = ((uintptr_t)fn + PATCH_LEN + ps - 1) & ~(ps - 1);
    if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
        return vmmc_error_sys("fabric memory hooks: cannot make %s writable", name);
    /* A thread entering the function meanwhile must never run half a
     * patch: first a jump to itself over the first two bytes (one aligned
     * store: functions start 16-byte aligned), then the tail, then the
     * head; a thread that arrives spins on the first until it is done. */
    uint16_t head, spin = 0xfeeb; /* jmp . */
    memcpy(&head, code, 2);
    __atomic_store_n((uint16_t *)fn, spin, __ATOMIC_SEQ_CST);
    memcpy((char *)fn + 2, code + 2, PATCH_LEN - 2);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n((uint16_t *)fn, head, __ATOMIC_SEQ_CST);
    __builtin___clear_cache((char *)fn, (char *)fn + PATCH_LEN);
    if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_EXEC) != 0)
        return vmmc_error_sys("fabric memory hooks: cannot protect %s again", name);
    return 0;
}
#endif

static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
static int installed; /* 0: not tried, 1: yes, < 0: the status it failed with */

static int install(void)
{
#if defined(__x86_64__)
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!libc)
        return vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric memory hooks: libc.so.6 is not loaded");
    curbrk = dlsym(libc, "__curbrk");
    if (!curbrk) {
        dlclose(libc);
        return vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric memory hooks: the C library has no __curbrk");
    }
    /* Keep the code the patches jump to mapped for good. */
    Dl_info self;
    if (dladdr((void *)hook_munmap, &self) && self.dli_fname)
        (void)dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    int rc = 0;
    /* Check every function first, so that a failure patches none. */
    static const char *const names[] = {"munmap", "mmap", "mremap", "madvise", "brk"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && rc == 0; i++) {
        Dl_info info;
        const ElfW(Sym) *sym = NULL;
        void *fn = dlsym(libc, names[i]);
        if (!fn || !dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || sym->st_size < PATCH_LEN)
            rc = vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric memory hooks: cannot patch %s of the C library",
                            names[i]);
    }
    if (rc == 0)
        rc = patch(libc, "munmap", (void *)hook_munmap);
    if (rc == 0)
        rc = patch(libc, "mmap", (void *)hook_mmap);
    if (rc == 0)
        rc = patch(libc, "mremap", (void *)hook_mremap);
    if (rc == 0)
        rc = patch(libc, "madvise", (void *)hook_madvise);
    if (rc == 0)
        rc = patch(libc, "brk", (void *)hook_brk);
    dlclose(libc);
    return rc;
#else
    return vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric memory hooks: not available on this architecture");
#endif
}

int fab_hooks_add(fab_cache_t *c)
{
    pthread_mutex_lock(&install_lock);
    if (installed == 0) {
        int rc = install();
        installed = rc == 0 ? 1 : rc;
    }
    int rc = installed < 0 ? installed : 0;
    pthread_mutex_unlock(&install_lock);
    if (rc < 0)
        return vmmc_error(rc, "fabric memory hooks are not installed here: registrations are not cached");
    pthread_rwlock_wrlock(&caches_lock);
    for (int i = 0; i < MAX_CACHES; i++)
        if (!caches[i]) {
            caches[i] = c;
            pthread_rwlock_unlock(&caches_lock);
            return 0;
        }
    pthread_rwlock_unlock(&caches_lock);
    return vmmc_error(VMMC_ERR_AGAIN, "fabric memory hooks: more than %d registration caches", MAX_CACHES);
}

void fab_hooks_remove(fab_cache_t *c)
{
    pthread_rwlock_wrlock(&caches_lock);
    for (int i = 0; i < MAX_CACHES; i++)
        if (caches[i] == c)
            caches[i] = NULL;
    pthread_rwlock_unlock(&caches_lock);
}

unsigned long fab_hooks_events(void)
{
    return atomic_load_explicit(&events, memory_order_relaxed);
}
