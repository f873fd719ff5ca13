/* Exports of a caller's sealed memfd (VMMC_EXPORT_PARAM_FD), 2 ranks on
 * this host.
 *
 * 1. Refusals (rank 0): no VMMC_EXPORT_READ, unaligned address or offset,
 *    an unsealed memfd, one too small, -1, a closed number, a pipe, a
 *    socket, a read-only descriptor, vmmc_mem_alloc() memory: each
 *    VMMC_ERR_INVALID with a message naming the rule; so is a memfd sealed
 *    against writing.
 * 2. Rank 0 exports 2 pages (less 100 bytes) of a memfd at offset 4096 and
 *    closes its own descriptor; rank 1 imports it and maps it (the mapped
 *    kind), sends with notifications, fetches, stores through the mapping;
 *    rank 0 sees every byte through a second mapping of the memfd, and its
 *    handler sees every notification.
 * 3. Rank 0 unexports: the library's duplicate is closed; rank 1's sends
 *    are stale, and its stores through the old mapping no longer reach the
 *    memfd.
 * 4. A hostile exporter (rank 1 lies about seals through an interposed
 *    fcntl(), so its library sends what it should not): an unsealed memfd,
 *    an unsealed vmmc_mem_alloc() allocation, a memfd truncated after the
 *    export, a redirectable export with an unsealed control block. Rank 0's
 *    imports are refused (VMMC_ERR_PROTOCOL), never mapped, so it cannot
 *    take SIGBUS. */

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vtest.h"

#define PG 4096
#define XLEN (2 * PG - 100) /* the export: not a whole number of pages */

/* ---- the hostile exporter's fcntl(): seals it does not have ---- */

static _Atomic int lie_seals;

static int fcntl_hook(int fd, int cmd, unsigned long arg)
{
    if (atomic_load(&lie_seals)) {
        if (cmd == F_GET_SEALS)
            return F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
        if (cmd == F_ADD_SEALS)
            return 0;
    }
    return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    unsigned long arg = va_arg(ap, unsigned long);
    va_end(ap);
    return fcntl_hook(fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    unsigned long arg = va_arg(ap, unsigned long);
    va_end(ap);
    return fcntl_hook(fd, cmd, arg);
}

/* ---- helpers ---- */

static _Atomic int notes;
static _Atomic size_t note_off, note_len;
static _Atomic uint64_t note_imm;

static void on_note(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    (void)arg;
    atomic_store(&note_off, n->offset);
    atomic_store(&note_len, n->length);
    atomic_store(&note_imm, n->imm);
    atomic_fetch_add(&notes, 1);
}

static int sealed_memfd(const char *name, size_t len, unsigned seals)
{
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    VT_CHECK(fd >= 0);
    VT_CHECK(ftruncate(fd, (off_t)len) == 0);
    if (seals)
        VT_CHECK(fcntl(fd, F_ADD_SEALS, seals) == 0);
    return fd;
}

/* Descriptors of this process open on a memfd named @name. */
static int count_fds(const char *name)
{
    char want[64];
    snprintf(want, sizeof want, "/memfd:%s ", name);
    DIR *d = opendir("/proc/self/fd");
    VT_CHECK(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], link[128];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, link, sizeof link - 1);
        if (k > 0) {
            link[k] = 0;
            n += strncmp(link, want, strlen(want)) == 0;
        }
    }
    closedir(d);
    return n;
}

static vmmc_export_params_t fd_params(const char *name, void *addr, size_t len, int fd,
                                      uint64_t off)
{
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS | VMMC_EXPORT_PARAM_FD | VMMC_EXPORT_PARAM_HANDLER;
    p.name = name;
    p.addr = addr;
    p.length = len;
    p.flags = VMMC_EXPORT_READ;
    p.fd = fd;
    p.fd_offset = off;
    p.handler = on_note;
    return p;
}

/* vmmc_export(@p) must fail with VMMC_ERR_INVALID and a message holding @word. */
static void refused(vmmc_ep_t *ep, const vmmc_export_params_t *p, const char *word, int line)
{
    vmmc_export_t *x = NULL;
    int rc = vmmc_export(ep, p, &x);
    if (rc != VMMC_ERR_INVALID)
        VT_FAIL("line %d: export returned %d (%s), expected VMMC_ERR_INVALID", line, rc,
                vmmc_strerror(rc));
    if (!strstr(vmmc_last_error(), word))
        VT_FAIL("line %d: the message does not say '%s'", line, word);
}
#define REFUSED(p, word) refused(ep, &(p), word, __LINE__)

static void wait_notes(vmmc_ep_t *ep, int n)
{
    double t0 = vt_now();
    while (atomic_load(&notes) < n) {
        if (vt_now() - t0 > 20)
            VT_FAIL("%d notifications of %d after 20 s", atomic_load(&notes), n);
        vmmc_wait(ep, 10);
    }
}

/* ---- 1. refusals ---- */

static void refusals(vmmc_ep_t *ep)
{
    int fd = sealed_memfd("t-ref", 4 * PG, F_SEAL_SHRINK | F_SEAL_GROW);
    char *a = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    VT_CHECK(a != MAP_FAILED);
    vmmc_export_params_t p = fd_params("ref", a, 2 * PG, fd, 0);

    p.flags = 0;
    REFUSED(p, "VMMC_EXPORT_READ");
    p.field_mask &= ~(uint64_t)VMMC_EXPORT_PARAM_FLAGS;
    p.flags = VMMC_EXPORT_READ;
    REFUSED(p, "VMMC_EXPORT_READ"); /* flags not set at all */
    p = fd_params("ref", a + 8, 2 * PG, fd, 0);
    REFUSED(p, "page size");
    p = fd_params("ref", a, 2 * PG, fd, 8);
    REFUSED(p, "page size");
    p = fd_params("ref", a, 3 * PG + 1, fd, PG); /* past the memfd's end */
    REFUSED(p, "fewer than");
    p = fd_params("ref", a, PG, fd, (uint64_t)8 * PG);
    REFUSED(p, "fewer than");
    p = fd_params("ref", a, PG, fd, UINT64_MAX & ~(uint64_t)(PG - 1));
    REFUSED(p, "fewer than");

    int unsealed = sealed_memfd("t-ref-u", 4 * PG, F_SEAL_GROW);
    p = fd_params("ref", a, PG, unsealed, 0);
    REFUSED(p, "F_SEAL_SHRINK");
    int wsealed = sealed_memfd("t-ref-w", 4 * PG, F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE);
    p = fd_params("ref", a, PG, wsealed, 0);
    REFUSED(p, "sealed against writing");
    close(wsealed);
    int plain = memfd_create("t-ref-p", MFD_CLOEXEC); /* no sealing at all */
    VT_CHECK(plain >= 0 && ftruncate(plain, 4 * PG) == 0);
    p = fd_params("ref", a, PG, plain, 0);
    REFUSED(p, "F_SEAL_SHRINK");

    p = fd_params("ref", a, PG, -1, 0);
    REFUSED(p, "fd -1");
    int closed = dup(fd);
    VT_CHECK(closed >= 0 && close(closed) == 0);
    p = fd_params("ref", a, PG, closed, 0);
    REFUSED(p, "not an open descriptor");
    int pp[2];
    VT_CHECK(pipe(pp) == 0);
    p = fd_params("ref", a, PG, pp[0], 0);
    REFUSED(p, "reading and writing");
    p = fd_params("ref", a, PG, pp[1], 0);
    REFUSED(p, "reading and writing");
    int sp[2];
    VT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
    p = fd_params("ref", a, PG, sp[0], 0);
    REFUSED(p, "memfd");
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int ro = open(path, O_RDONLY | O_CLOEXEC);
    VT_CHECK(ro >= 0);
    p = fd_params("ref", a, PG, ro, 0);
    REFUSED(p, "reading and writing");

    void *lib;
    VT_OK(vmmc_mem_alloc(ep, 2 * PG, &lib));
    p = fd_params("ref", lib, PG, fd, 0);
    REFUSED(p, "vmmc_mem_alloc");
    VT_OK(vmmc_mem_free(ep, lib));

    /* Nothing refused kept a descriptor; the caller's are all still open. */
    VT_CHECK(count_fds("t-ref") == 2); /* fd and ro */
    VT_CHECK(fcntl(fd, F_GETFD) >= 0 && fcntl(unsealed, F_GETFD) >= 0);
    /* And the rules let a proper one through, at an offset, whose end is
     * not on a page boundary; its duplicate lives as long as the export. */
    p = fd_params("ref", a + PG, 2 * PG - 1, fd, PG);
    vmmc_export_t *x;
    VT_OK(vmmc_export(ep, &p, &x));
    VT_CHECK(count_fds("t-ref") == 3);
    VT_OK(vmmc_unexport(x));
    VT_CHECK(count_fds("t-ref") == 2);

    close(ro);
    close(sp[0]);
    close(sp[1]);
    close(pp[0]);
    close(pp[1]);
    close(plain);
    close(unsealed);
    munmap(a, 4 * PG);
    close(fd);
}

/* ---- 4. the hostile exporter's side ---- */

static void hostile_exports(vmmc_ep_t *ep, vmmc_export_t **xs)
{
    atomic_store(&lie_seals, 1);
    /* An unsealed memfd. */
    int u = memfd_create("t-hostile-u", MFD_CLOEXEC);
    VT_CHECK(u >= 0 && ftruncate(u, 2 * PG) == 0);
    void *ua = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, u, 0);
    VT_CHECK(ua != MAP_FAILED);
    vmmc_export_params_t p = fd_params("h_unsealed", ua, 2 * PG, u, 0);
    VT_OK(vmmc_export(ep, &p, &xs[0]));
    /* Library memory whose sealing this process skipped. */
    void *m;
    VT_OK(vmmc_mem_alloc(ep, 2 * PG, &m));
    p = (vmmc_export_params_t){0};
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS;
    p.name = "h_mem";
    p.addr = m;
    p.length = 2 * PG;
    p.flags = VMMC_EXPORT_READ;
    VT_OK(vmmc_export(ep, &p, &xs[1]));
    /* A memfd that shrinks after the export. */
    int s = memfd_create("t-hostile-s", MFD_CLOEXEC);
    VT_CHECK(s >= 0 && ftruncate(s, 2 * PG) == 0);
    void *sa = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, s, 0);
    VT_CHECK(sa != MAP_FAILED);
    p = fd_params("h_short", sa, 2 * PG, s, 0);
    VT_OK(vmmc_export(ep, &p, &xs[2]));
    VT_CHECK(ftruncate(s, PG) == 0);
    /* A redirectable export, whose control block (a memfd importers map)
     * this process did not seal. */
    p = (vmmc_export_params_t){0};
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS;
    static char redir_mem[2 * PG]; /* (static: nothing for the leak checker) */
    p.name = "h_redirect";
    p.addr = redir_mem;
    p.length = 2 * PG;
    p.flags = VMMC_EXPORT_REDIRECTABLE;
    VT_OK(vmmc_export(ep, &p, &xs[3]));
    atomic_store(&lie_seals, 0);
}

static void import_refused(vmmc_ep_t *ep, const char *name, const char *word)
{
    vmmc_proxy_t *px = NULL;
    int rc = vmmc_import(ep, 1, name, 10000, &px);
    if (rc != VMMC_ERR_PROTOCOL)
        VT_FAIL("import of hostile '%s' returned %d (%s), expected VMMC_ERR_PROTOCOL", name, rc,
                vmmc_strerror(rc));
    if (!strstr(vmmc_last_error(), word))
        VT_FAIL("import of hostile '%s': the message does not say '%s'", name, word);
}

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep), n = vmmc_size(ep);
    if (n != 2)
        VT_SKIP("needs 2 ranks, has %d", n);
    if (vt_remote()) {
        VT_OK(vmmc_finalize(ep));
        VT_SKIP("descriptors are passed to peers on this host only");
    }

    /* 1 */
    if (me == 0)
        refusals(ep);

    /* 2 */
    int fd = -1;
    char *view = NULL, *obs = NULL;
    static char snap[XLEN];
    vmmc_export_t *ex = NULL;
    if (me == 0) {
        fd = sealed_memfd("t-fdx", 4 * PG, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
        view = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, PG);
        obs = mmap(NULL, 4 * PG, PROT_READ, MAP_SHARED, fd, 0); /* a second mapping */
        VT_CHECK(view != MAP_FAILED && obs != MAP_FAILED);
        memset(view, 0xEE, 2 * PG);
        vmmc_export_params_t p = fd_params("fdx", view, XLEN, fd, PG);
        VT_OK(vmmc_export(ep, &p, &ex));
        VT_CHECK(vmmc_export_addr(ex) == view && vmmc_export_length(ex) == XLEN);
        VT_CHECK(close(fd) == 0); /* the library holds its own */
        VT_CHECK(count_fds("t-fdx") == 1);
    }
    VT_OK(vmmc_barrier(ep));

    vmmc_proxy_t *px = NULL;
    unsigned char *map = NULL;
    if (me == 1) {
        VT_OK(vmmc_import(ep, 0, "fdx", 10000, &px));
        VT_CHECK(vmmc_proxy_length(px) == XLEN);
        VT_CHECK(vmmc_proxy_flags(px) & VMMC_EXPORT_READ);
        VT_OK(vmmc_proxy_map(px, (void **)&map)); /* mapped, not the copy path */
        VT_CHECK(map[0] == 0xEE && map[XLEN - 1] == 0xEE);
        unsigned char buf[300], back[300];
        for (int i = 0; i < 300; i++)
            buf[i] = (unsigned char)(i * 7 + 1);
        VT_OK(vmmc_send_imm(px, 10, buf, 300, VMMC_SEND_NOTIFY, 0xfeed));
        VT_OK(vmmc_send_imm(px, XLEN - 300, buf, 300, VMMC_SEND_NOTIFY, 0xbeef));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send(px, XLEN - 299, buf, 300, 0));
        VT_OK(vmmc_fetch(px, 10, back, 300));
        VT_CHECK(memcmp(back, buf, 300) == 0);
        map[5000] = 0x42; /* a plain store */
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        wait_notes(ep, 2);
        VT_CHECK(atomic_load(&note_off) == XLEN - 300 && atomic_load(&note_len) == 300 &&
                 atomic_load(&note_imm) == 0xbeef);
        for (int i = 0; i < 300; i++) {
            VT_CHECK((unsigned char)obs[PG + 10 + i] == (unsigned char)(i * 7 + 1));
            VT_CHECK((unsigned char)obs[PG + XLEN - 300 + i] == (unsigned char)(i * 7 + 1));
        }
        VT_CHECK((unsigned char)obs[PG + 5000] == 0x42);
        VT_CHECK((unsigned char)obs[PG + 9] == 0xEE && (unsigned char)obs[PG + 310] == 0xEE);
        VT_CHECK(obs[0] == 0); /* outside the export */

        /* 3 */
        VT_OK(vmmc_unexport(ex));
        VT_CHECK(count_fds("t-fdx") == 0);
        memcpy(snap, obs + PG, XLEN);
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        unsigned char b = 0x77;
        VT_STATUS(VMMC_ERR_STALE, vmmc_send(px, 20, &b, 1, 0));
        memset(map, 0x77, XLEN); /* through the old mapping: no fault, no effect */
        VT_OK(vmmc_unimport(px));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        for (int i = 0; i < XLEN; i++)
            if (obs[PG + i] != snap[i])
                VT_FAIL("a store after unexport reached the memfd at offset %d", i);
        munmap(view, 2 * PG);
        munmap(obs, 4 * PG);
    }

    /* 4 */
    vmmc_export_t *hx[4] = {NULL, NULL, NULL, NULL};
    if (me == 1)
        hostile_exports(ep, hx);
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        import_refused(ep, "h_unsealed", "sealed against shrinking");
        import_refused(ep, "h_mem", "sealed against shrinking");
        import_refused(ep, "h_short", "smaller");
        import_refused(ep, "h_redirect", "redirect control block");
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1)
        for (int i = 0; i < 4; i++)
            VT_OK(vmmc_unexport(hx[i]));
    VT_OK(vmmc_finalize(ep));
    printf("rank %d: ok\n", me);
    return 0;
}
