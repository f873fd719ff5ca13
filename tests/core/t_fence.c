/* vmmc_fence: when it returns, every send issued before it to that peer
 * (synchronous, asynchronous in the copy engine, gather, atomic) is in the
 * peer's memory. Rank 0 writes a fresh pattern into rank 1's region, fences,
 * then tells rank 1 through a channel vmmc knows nothing of (a shared file
 * mapping); rank 1 checks the whole region at once, without calling vmmc,
 * so only the fence can have made the data land (over udp a send returns
 * while its datagrams still travel). Also: fence to every peer (-1), to a
 * peer never used, and a bad peer.
 *
 * usage (vmmc run -n 2): t_fence [rounds] */
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vtest.h"

#define BIG (4u << 20)
#define CHUNK (64u << 10)

typedef struct oob {
    _Atomic uint64_t posted, checked;
} oob_t;

static unsigned char pat(uint64_t round, size_t i)
{
    return (unsigned char)(i * 7 + round * 13 + (i >> 12));
}

int main(int argc, char **argv)
{
    vt_require_transport();
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 2);
    char path[64];
    snprintf(path, sizeof path, "/tmp/vmmc_t_fence.%d", (int)getppid());
    unsigned char *dst = NULL;
    uint64_t *word = NULL;
    if (me == 1) {
        dst = calloc(1, BIG); /* heap: process_vm_writev on shm, datagrams on udp */
        VT_CHECK(posix_memalign((void **)&word, 64, 64) == 0);
        memset(word, 0, 64);
        vmmc_export_params_t p = {0};
        vmmc_export_t *e;
        p.name = "dst", p.addr = dst, p.length = BIG;
        VT_OK(vmmc_export(ep, &p, &e));
        p.name = "word", p.addr = word, p.length = 64;
        VT_OK(vmmc_export(ep, &p, &e));
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        VT_CHECK(fd >= 0 && ftruncate(fd, 4096) == 0);
        close(fd);
    }
    VT_STATUS(VMMC_ERR_INVALID, vmmc_fence(ep, 2));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_fence(ep, -2));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_fence(NULL, 0));
    VT_OK(vmmc_fence(ep, 1 - me)); /* nothing sent yet */
    VT_OK(vmmc_barrier(ep));
    int fd = open(path, O_RDWR);
    VT_CHECK(fd >= 0);
    oob_t *oob = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    VT_CHECK(oob != MAP_FAILED);
    close(fd);
    VT_OK(vmmc_barrier(ep));

    if (me == 0) {
        vmmc_proxy_t *pd, *pw;
        VT_OK(vmmc_import(ep, 1, "dst", 5000, &pd));
        VT_OK(vmmc_import(ep, 1, "word", 5000, &pw));
        unsigned char *src = malloc(BIG);
        for (uint64_t r = 1; r <= (uint64_t)rounds; r++) {
            for (size_t i = 0; i < BIG; i++)
                src[i] = pat(r, i);
            /* An atomic (a round trip: first, or it would fence by itself),
             * the first half in chunks, a gather send, then the second half
             * asynchronously (copy engine). */
            VT_OK(vmmc_atomic(pw, 0, VMMC_ATOMIC_ADD, 8, 1, 0, NULL));
            for (size_t off = 0; off < BIG / 2 - CHUNK; off += CHUNK)
                VT_OK(vmmc_send(pd, off, src + off, CHUNK, 0));
            vmmc_iov_t iov[2] = {{src + BIG / 2 - CHUNK, CHUNK / 2},
                                 {src + BIG / 2 - CHUNK / 2, CHUNK / 2}};
            VT_OK(vmmc_sendv(pd, BIG / 2 - CHUNK, iov, 2, 0, 0));
            vmmc_request_t rq;
            int rc = vmmc_send_async(pd, BIG / 2, src + BIG / 2, BIG / 2, 0, &rq);
            VT_CHECK(rc == VMMC_OK || rc == VMMC_INPROGRESS);
            VT_OK(vmmc_fence(ep, r % 2 ? 1 : -1));
            atomic_store(&oob->posted, r);
            double t0 = vt_now();
            while (atomic_load(&oob->checked) != (uint64_t)r) {
                if (vt_now() - t0 > 60)
                    VT_FAIL("rank 1 did not check round %llu", (unsigned long long)r);
                sched_yield();
            }
            VT_OK(vmmc_test(&rq)); /* complete, as the fence said */
        }
        free(src);
    } else {
        for (uint64_t r = 1; r <= (uint64_t)rounds; r++) {
            double t0 = vt_now();
            while (atomic_load(&oob->posted) != (uint64_t)r) {
                if (vt_now() - t0 > 60)
                    VT_FAIL("rank 0 did not post round %llu", (unsigned long long)r);
                sched_yield();
            }
            /* No vmmc call between the notice and the check, which starts
             * with what was sent last. */
            if (__atomic_load_n(word, __ATOMIC_SEQ_CST) != r)
                VT_FAIL("round %llu: the atomic counter is %llu after the fence",
                        (unsigned long long)r, (unsigned long long)*word);
            for (size_t i = BIG; i-- > 0;)
                if (dst[i] != pat(r, i))
                    VT_FAIL("round %llu: byte %zu is %u, not %u, after the fence",
                            (unsigned long long)r, i, dst[i], pat(r, i));
            atomic_store(&oob->checked, r);
        }
        printf("t_fence: ok (%d rounds, %s)\n", rounds, vt_remote() ? "udp" : "shm");
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1)
        unlink(path);
    VT_OK(vmmc_finalize(ep));
    munmap(oob, 4096);
    free(dst);
    free(word);
    return 0;
}
