/* A hostile co-tenant, 2 ranks on this host: rank 0 is the victim, rank 1
 * uses every public call outside its rights, and interposes close() (to
 * keep the descriptors the library receives) and recvmsg() (to sit on
 * revocations, the way a slow or hostile importer would).
 *
 * The victim asserts that its memory outside each export, the guard bytes
 * around it and its notification stream are untouched, and that nothing
 * lands after vmmc_unexport() returns (copy path, mapping, kept
 * descriptor, an old proxy against a new export under the same name); the
 * attacker asserts that each refused call got the right status. */

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vtest.h"

#define GUARD 4096
#define HLEN 4096
#define ALEN 65536
#define SMALL_OFF 4096
#define SMALL_LEN 8
#define WLEN 8192

/* ---- interposed libc calls (the library in this program calls these) ---- */

static _Atomic int keep_fds;        /* close() keeps library memory descriptors */
static int kept[16], nkept;         /* vmmc_mem_alloc() memory */
static int kept_r[16], nkept_r;     /* redirect control blocks */
static _Atomic int delay_revokes;   /* recvmsg() sits on revocations */

static int is_memfd(int fd, const char *name)
{
    char path[64], link[128];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0)
        return 0;
    link[n] = 0;
    return strncmp(link, name, strlen(name)) == 0;
}

int close(int fd)
{
    if (atomic_load(&keep_fds) && nkept < 16 && is_memfd(fd, "/memfd:vmmc-mem")) {
        kept[nkept++] = fd;
        return 0;
    }
    if (atomic_load(&keep_fds) && nkept_r < 16 && is_memfd(fd, "/memfd:vmmc-redirect")) {
        kept_r[nkept_r++] = fd;
        return 0;
    }
    return (int)syscall(SYS_close, fd);
}

ssize_t recvmsg(int fd, struct msghdr *mh, int flags)
{
    ssize_t r = syscall(SYS_recvmsg, fd, mh, flags);
    if (r >= 8 && atomic_load(&delay_revokes) && mh->msg_iovlen > 0) {
        const uint32_t *w = mh->msg_iov[0].iov_base;
        if (w[0] == 0x564d4d43u && w[1] == 5) /* a control message: revocation */
            usleep(200000);
    }
    return r;
}

/* ---- shared between the ranks ---- */

typedef struct box {
    vmmc_mkey_t key;   /* for [K + 4096, +64), issued to rank 1 */
    uint64_t ready;
} box_t;

static _Atomic int notes;
static void on_note(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    (void)n;
    (void)arg;
    atomic_fetch_add(&notes, 1);
}

static int all_are(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

static vmmc_export_t *export(vmmc_ep_t *ep, const char *name, void *addr, size_t len,
                             unsigned flags, const int *imp, int nimp)
{
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS | VMMC_EXPORT_PARAM_HANDLER |
                   (nimp ? VMMC_EXPORT_PARAM_IMPORTERS : 0);
    p.name = name;
    p.addr = addr;
    p.length = len;
    p.flags = flags;
    p.handler = on_note;
    p.importers = imp;
    p.num_importers = nimp;
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &p, &ex));
    return ex;
}

/* ---- the attacker's writer thread for the use-after-unexport phase ---- */

typedef struct writer {
    vmmc_proxy_t *px[2];
    _Atomic int started, stop;
    int landed_after_stale; /* sends accepted after one was refused */
    int bad_status;
} writer_t;

static void *writer_main(void *arg)
{
    writer_t *w = arg;
    unsigned char pat[64];
    memset(pat, 0x5a, sizeof pat);
    int stale[2] = {0, 0};
    double t0 = vt_now();
    while (!atomic_load(&w->stop) && vt_now() - t0 < 20) {
        for (int i = 0; i < 2; i++) {
            int rc = vmmc_send(w->px[i], 0, pat, i ? SMALL_LEN : sizeof pat, 0);
            if (rc == VMMC_OK) {
                atomic_store(&w->started, 1);
                w->landed_after_stale += stale[i];
            } else if (rc == VMMC_ERR_STALE) {
                stale[i] = 1;
            } else {
                w->bad_status = rc;
            }
        }
        if (stale[0] && stale[1])
            break;
    }
    return NULL;
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
        VT_SKIP("mappings, descriptors and the copy path are for peers on this host");
    }
    int only0[] = {0}, only1[] = {1};

    /* Victim's memory: guards of 0xEE around every export. */
    unsigned char *A = NULL, *B = NULL, *C = NULL, *D = NULL, *K = NULL, *H = NULL;
    vmmc_export_t *ex_small = NULL, *ex_whole = NULL, *ex_heap = NULL;
    box_t *box = NULL;
    if (me == 0) {
        VT_OK(vmmc_mem_alloc(ep, ALEN, (void **)&A));
        VT_OK(vmmc_mem_alloc(ep, WLEN, (void **)&B));
        VT_OK(vmmc_mem_alloc(ep, WLEN, (void **)&C));
        VT_OK(vmmc_mem_alloc(ep, 4096, (void **)&D));
        VT_OK(vmmc_mem_alloc(ep, ALEN, (void **)&K));
        H = malloc(HLEN + 2 * GUARD);
        memset(A, 0xEE, ALEN);
        memset(K, 0xEE, ALEN);
        memset(H, 0xEE, HLEN + 2 * GUARD);
        /* An export may not run past its allocation. */
        vmmc_export_params_t p = {.name = "past", .addr = D + 4000, .length = 200};
        vmmc_export_t *x;
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_export(ep, &p, &x));
        p.addr = D;
        p.length = 4097;
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_export(ep, &p, &x));
        ex_small = export(ep, "small", A + SMALL_OFF, SMALL_LEN, VMMC_EXPORT_READ, NULL, 0);
        export(ep, "wo", B, WLEN, 0, NULL, 0);                  /* whole, write-only */
        ex_whole = export(ep, "whole", C, WLEN, VMMC_EXPORT_READ, NULL, 0);
        ex_heap = export(ep, "heap", H + GUARD, HLEN, 0, only1, 1);
        export(ep, "priv", H, 16, VMMC_EXPORT_READ, only0, 1);  /* not for rank 1 */
    } else {
        VT_OK(vmmc_mem_alloc(ep, sizeof *box, (void **)&box));
        export(ep, "box", box, sizeof *box, VMMC_EXPORT_READ, only0, 1);
    }
    VT_OK(vmmc_barrier(ep));

    if (me == 0) {
        box_t b = {0};
        VT_OK(vmmc_mem_key(ep, K + 4096, 64, 1, &b.key));
        b.ready = 1;
        vmmc_proxy_t *px;
        VT_OK(vmmc_import(ep, 1, "box", 5000, &px));
        VT_OK(vmmc_send(px, 0, &b, sizeof b, 0));
        VT_OK(vmmc_unimport(px));
    }
    VT_OK(vmmc_barrier(ep)); /* key delivered */

    /* ---------------------------------------------------- phase 1: rights */
    vmmc_proxy_t *p_small = NULL, *p_wo = NULL, *p_whole = NULL, *p_heap = NULL, *p;
    unsigned char *map_whole = NULL;
    if (me == 1) {
        unsigned char buf[HLEN], back[64];
        memset(buf, 0x11, sizeof buf);
        void *m;
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_import(ep, 0, "priv", 5000, &p));

        atomic_store(&keep_fds, 1);
        VT_OK(vmmc_import(ep, 0, "small", 5000, &p_small));
        VT_OK(vmmc_import(ep, 0, "wo", 5000, &p_wo));
        VT_OK(vmmc_import(ep, 0, "heap", 5000, &p_heap));
        /* 8 bytes inside a 64 KiB allocation, a write-only allocation and
         * malloc memory: no descriptor reaches this process. */
        VT_CHECK(nkept == 0);

        /* Bounds: nothing outside the export. */
        VT_OK(vmmc_send(p_small, 0, buf, SMALL_LEN, VMMC_SEND_NOTIFY));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send(p_small, 1, buf, SMALL_LEN, 0));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send(p_small, SMALL_LEN, buf, 1, VMMC_SEND_NOTIFY));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send(p_small, SIZE_MAX - 3, buf, 8, 0));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_fetch(p_small, 4, back, SMALL_LEN));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send(p_heap, HLEN - 8, buf, 9, VMMC_SEND_NOTIFY));
        VT_OK(vmmc_fetch(p_small, 0, back, SMALL_LEN));
        VT_CHECK(all_are(back, SMALL_LEN, 0x11));
        /* Page granularity cannot express these: no mapping. */
        VT_STATUS(VMMC_ERR_UNSUPPORTED, vmmc_proxy_map(p_small, &m));
        VT_STATUS(VMMC_ERR_UNSUPPORTED, vmmc_proxy_map(p_wo, &m));
        VT_STATUS(VMMC_ERR_UNSUPPORTED, vmmc_proxy_map(p_heap, &m));
        /* Write-only exports cannot be read. */
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_fetch(p_wo, 0, back, 8));
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_fetch(p_heap, 0, back, 8));
        VT_OK(vmmc_send(p_wo, 0, buf, 16, 0));
        VT_OK(vmmc_send(p_heap, 0, buf, HLEN, 0));

        /* A whole allocation that grants reads maps; the descriptor kept
         * through close() is that allocation and nothing more, and cannot
         * be truncated or grown under its owner. */
        VT_OK(vmmc_import(ep, 0, "whole", 5000, &p_whole));
        VT_OK(vmmc_proxy_map(p_whole, &m));
        map_whole = m;
        atomic_store(&keep_fds, 0);
        VT_CHECK(nkept == 1);
        struct stat st;
        VT_CHECK(fstat(kept[0], &st) == 0 && st.st_size == WLEN);
        VT_CHECK(ftruncate(kept[0], 2 * WLEN) != 0);
        VT_CHECK(ftruncate(kept[0], 0) != 0);
        memset(map_whole, 0x22, WLEN);

        /* Memory keys: the issued key works; every altered one is refused. */
        VT_CHECK(box->ready == 1);
        unsigned char *kp;
        VT_OK(vmmc_mem_attach(ep, 0, &box->key, -1, (void **)&kp));
        memset(kp, 0x33, 64);
        VT_OK(vmmc_mem_detach(ep, kp));
        for (int w = 0; w < 4; w++) {
            for (int bit = 6; bit < 14; bit += 7) {
                vmmc_mkey_t f = box->key;
                f.opaque[w] ^= (uint64_t)1 << bit;
                int rc = vmmc_mem_attach(ep, 0, &f, 2000, (void **)&kp);
                if (rc == VMMC_OK)
                    VT_FAIL("a key altered in word %d (bit %d) was accepted", w, bit);
                VT_CHECK(rc == VMMC_ERR_PERMISSION || rc == VMMC_ERR_STALE);
            }
        }
        /* Keys made up from nothing name nothing, or fail the MAC. */
        unsigned long long seed = 12345;
        for (int i = 0; i < 8; i++) {
            vmmc_mkey_t f;
            for (int w = 0; w < 4; w++)
                f.opaque[w] = vt_rand(&seed);
            if (i & 1) /* the real export and generation, a made-up range */
                f.opaque[0] = box->key.opaque[0];
            int rc = vmmc_mem_attach(ep, 0, &f, 2000, (void **)&kp);
            VT_CHECK(rc == VMMC_ERR_PERMISSION || rc == VMMC_ERR_STALE);
        }
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        /* Exactly the bytes granted changed; guards and the notification
         * stream (one legitimate notification) are as they must be. */
        VT_CHECK(all_are(A, SMALL_OFF, 0xEE));
        VT_CHECK(all_are(A + SMALL_OFF, SMALL_LEN, 0x11));
        VT_CHECK(all_are(A + SMALL_OFF + SMALL_LEN, ALEN - SMALL_OFF - SMALL_LEN, 0xEE));
        VT_CHECK(all_are(H, GUARD, 0xEE) && all_are(H + GUARD, HLEN, 0x11) &&
                 all_are(H + GUARD + HLEN, GUARD, 0xEE));
        VT_CHECK(all_are(B, 16, 0x11) && all_are(B + 16, WLEN - 16, 0));
        VT_CHECK(all_are(C, WLEN, 0x22));
        VT_CHECK(all_are(K, 4096, 0xEE) && all_are(K + 4096, 64, 0x33) &&
                 all_are(K + 4096 + 64, ALEN - 4096 - 64, 0xEE));
        double t0 = vt_now();
        while (atomic_load(&notes) < 1 && vt_now() - t0 < 10)
            VT_CHECK(vmmc_wait(ep, 100) >= 0);
        VT_CHECK(atomic_load(&notes) == 1);
    }

    VT_OK(vmmc_barrier(ep)); /* the victim has checked */

    /* ------------------------------------------ phase 2: after unexport */
    writer_t w = {{p_heap, p_small}, 0, 0, 0, 0};
    pthread_t th;
    if (me == 1) {
        /* Keep writing while the victim unexports, and answer its
         * revocations late. */
        atomic_store(&delay_revokes, 1);
        VT_CHECK(pthread_create(&th, NULL, writer_main, &w) == 0);
        double t0 = vt_now();
        while (!atomic_load(&w.started) && vt_now() - t0 < 20)
            usleep(100);
        VT_CHECK(atomic_load(&w.started));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        VT_OK(vmmc_unexport(ex_heap));
        VT_OK(vmmc_unexport(ex_small));
        VT_OK(vmmc_unexport(ex_whole));
        /* From here on nothing may land: mark the memory, and export the
         * heap buffer again under the same name (a new generation). */
        memset(H + GUARD, 0, HLEN);
        memset(A + SMALL_OFF, 0, SMALL_LEN);
        memset(C, 0, WLEN);
        ex_heap = export(ep, "heap", H + GUARD, HLEN, 0, only1, 1);
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        VT_CHECK(pthread_join(th, NULL) == 0);
        atomic_store(&delay_revokes, 0);
        if (w.landed_after_stale || w.bad_status)
            VT_FAIL("writer: %d sends accepted after a refusal, bad status %d",
                    w.landed_after_stale, w.bad_status);
        unsigned char x[64];
        memset(x, 0x66, sizeof x);
        VT_STATUS(VMMC_ERR_STALE, vmmc_send(p_heap, 0, x, sizeof x, VMMC_SEND_NOTIFY));
        VT_STATUS(VMMC_ERR_STALE, vmmc_send(p_small, 0, x, SMALL_LEN, 0));
        VT_STATUS(VMMC_ERR_STALE, vmmc_send(p_whole, 0, x, sizeof x, VMMC_SEND_NOTIFY));
        VT_STATUS(VMMC_ERR_STALE, vmmc_fetch(p_whole, 0, x, 8));
        /* Stores through the old mapping and through the kept descriptor. */
        memset(map_whole, 0x77, WLEN);
        unsigned char *again = mmap(NULL, WLEN, PROT_READ | PROT_WRITE, MAP_SHARED, kept[0], 0);
        VT_CHECK(again != MAP_FAILED);
        memset(again, 0x77, WLEN);
        munmap(again, WLEN);
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        VT_CHECK(all_are(H + GUARD, HLEN, 0));
        VT_CHECK(all_are(A + SMALL_OFF, SMALL_LEN, 0));
        VT_CHECK(all_are(C, WLEN, 0));
        VT_CHECK(all_are(H, GUARD, 0xEE) && all_are(H + GUARD + HLEN, GUARD, 0xEE));
        VT_CHECK(all_are(A, SMALL_OFF, 0xEE));
        VT_CHECK(atomic_load(&notes) == 1);
    }

    /* ------------- phase 3: a redirect control block scribbled over */
    vmmc_export_t *ex_r = NULL;
    unsigned char *R = NULL;
    if (me == 0) {
        R = malloc(HLEN);
        ex_r = export(ep, "redir", R, HLEN, VMMC_EXPORT_REDIRECTABLE, only1, 1);
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        vmmc_proxy_t *p_r;
        atomic_store(&keep_fds, 1);
        VT_OK(vmmc_import(ep, 0, "redir", 5000, &p_r));
        atomic_store(&keep_fds, 0);
        VT_CHECK(nkept_r == 1);
        unsigned char *cb = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, kept_r[0], 0);
        VT_CHECK(cb != MAP_FAILED);
        /* Its layout: magic, pid, the mutex, 8 slots of 40 bytes, then the
         * log's length: no slot posted, a log longer than the block. */
        size_t slots = 8 + sizeof(pthread_mutex_t), nlog = slots + 8 * 40;
        memset(cb + slots, 0, 8 * 40);
        memset(cb + nlog, 0xFF, 8192 - nlog);
        munmap(cb, 8192);
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        vmmc_request_t rq;
        unsigned char dst[64];
        VT_STATUS(VMMC_ERR_PROTOCOL, vmmc_redirect(ex_r, 0, dst, sizeof dst, &rq));
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    free(R);
    if (me == 0)
        free(H);
    printf("rank %d: ok\n", me);
    return 0;
}
