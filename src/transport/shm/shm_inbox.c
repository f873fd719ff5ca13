/* shm notification channels: one ring per sender, written only by it.
 *
 * A receiver gives each sender, at that sender's HELLO, a segment of its own
 * (a memfd holding one single-producer ring of records) and a read-only view
 * of its status page (the `sleeping` word). No sender can reach another
 * sender's ring, so none can invent notifications "from" another rank or
 * erase real ones: the receiver takes the sender's rank from the ring a
 * record came from, never from the record.
 *
 * Each record is one cache line whose last word is its sequence number: the
 * sender writes the record after the data and publishes it with a release
 * store of that word, so the receiver polls the record slot itself and a
 * notification costs the data's lines plus one. The receiver publishes how
 * far it consumed in a separate line that the sender reads only when its
 * cached view says the ring is full. After publishing, the sender (after a
 * full fence) looks at the receiver's `sleeping` word: only a sleeping
 * receiver costs it a write() to the receiver's eventfd.
 *
 * Everything in a ring is written by another process: the receiver copies a
 * record before it uses it, keeps its own consumption point, drains at most
 * one ring's worth per call (a sender rewriting sequence words cannot keep it
 * there), and the core checks each record against the export it names.
 * Segments are sealed against shrinking, so no sender can make the receiver
 * fault by truncating one; the status page is sealed against new writable
 * mappings. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/shm/shm_int.h"

#define STATUS_BYTES 4096
#define NREC_MAX (1u << 20)

static size_t ring_bytes_for(uint32_t nrec)
{
    size_t b = sizeof(shm_ring_t) + (size_t)nrec * sizeof(shm_rec_t);
    return (b + 4095) & ~(size_t)4095;
}

/* A sealed segment of @len bytes mapped read/write here. */
static void *segment(const char *name, size_t len, unsigned seals, int *fdp)
{
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        vmmc_error_sys("memfd_create for %s", name);
        return NULL;
    }
    if (ftruncate(fd, (off_t)len) != 0) {
        vmmc_error_sys("ftruncate %s to %zu bytes", name, len);
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        vmmc_error_sys("mmap %s of %zu bytes", name, len);
        close(fd);
        return NULL;
    }
    if (fcntl(fd, F_ADD_SEALS, seals) != 0) {
        vmmc_error_sys("seal %s", name);
        munmap(p, len);
        close(fd);
        return NULL;
    }
    *fdp = fd;
    return p;
}

int shm_inbox_open(vmmc_ep_t *ep, shm_ep_t *s)
{
    s->status_fd = -1;
    s->ring_bytes = ring_bytes_for(s->nrec);
    s->status = segment("vmmc-status", STATUS_BYTES,
                        F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL,
                        &s->status_fd);
    if (!s->status)
        return VMMC_ERR_SYSTEM;
    s->status->magic = SHM_STATUS_MAGIC;
    s->status->pid = (int32_t)VMMC_TL_EP(ep)->pid;
    s->status->nrec = s->nrec;
    s->status->ring_bytes = s->ring_bytes;
    VMMC_TL_EP(ep)->sleeping = &s->status->sleeping;
    return VMMC_OK;
}

void shm_inbox_close(shm_ep_t *s)
{
    int n = atomic_load(&s->nactive);
    for (int i = 0; i < n; i++) {
        shm_inring_t *in = s->active[i / SHM_ACTIVE_CHUNK][i % SHM_ACTIVE_CHUNK];
        munmap(in->ring, s->ring_bytes);
        close(in->fd);
        free(in);
    }
    for (int c = 0; c < SHM_ACTIVE_CHUNKS; c++)
        free(s->active[c]);
    memset(s->active, 0, sizeof s->active);
    atomic_store(&s->nactive, 0);
    if (s->status)
        munmap(s->status, STATUS_BYTES);
    if (s->status_fd >= 0)
        close(s->status_fd);
    s->status = NULL;
    s->status_fd = -1;
}

/* Control thread only (HELLO): rings are created and published here. */
int shm_inbox_ring_for(vmmc_ep_t *ep, shm_ep_t *s, shm_peer_t *sp, int h, int *fd)
{
    (void)ep;
    shm_inring_t *in = sp->in;
    if (!in) {
        int n = atomic_load_explicit(&s->nactive, memory_order_relaxed);
        if (n >= SHM_ACTIVE_CHUNK * SHM_ACTIVE_CHUNKS)
            return vmmc_error(VMMC_ERR_AGAIN, "%d notification rings already", n);
        shm_inring_t **chunk = s->active[n / SHM_ACTIVE_CHUNK];
        if (!chunk) {
            chunk = calloc(SHM_ACTIVE_CHUNK, sizeof *chunk);
            if (!chunk)
                return vmmc_error(VMMC_ERR_NOMEM, "out of memory for notification rings");
            atomic_store_explicit(&s->active[n / SHM_ACTIVE_CHUNK], chunk, memory_order_release);
        }
        in = calloc(1, sizeof *in);
        if (!in)
            return vmmc_error(VMMC_ERR_NOMEM, "out of memory for a notification ring");
        int rfd;
        shm_ring_t *ring = segment("vmmc-ring", s->ring_bytes,
                                   F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, &rfd);
        if (!ring) {
            free(in);
            return VMMC_ERR_SYSTEM;
        }
        in->ring = ring;
        in->tail = 0;
        in->fd = rfd;
        in->handle = h;
        sp->in = in;
        chunk[n % SHM_ACTIVE_CHUNK] = in;
        atomic_store_explicit(&s->nactive, n + 1, memory_order_release);
    }
    *fd = in->fd;
    return VMMC_OK;
}

int shm_inbox_attach(shm_peer_t *sp, int rank, int status_fd, int ring_fd)
{
    struct stat st;
    if (fstat(status_fd, &st) != 0 || st.st_size < STATUS_BYTES)
        return vmmc_error(VMMC_ERR_PROTOCOL, "rank %d's status page is too small", rank);
    shm_status_t *status = mmap(NULL, STATUS_BYTES, PROT_READ, MAP_SHARED, status_fd, 0);
    if (status == MAP_FAILED)
        return vmmc_error_sys("mmap rank %d's status page", rank);
    uint32_t nrec = status->nrec;
    size_t rb = ring_bytes_for(nrec < NREC_MAX ? nrec : 2);
    if (status->magic != SHM_STATUS_MAGIC || nrec < 2 || nrec > NREC_MAX ||
        status->ring_bytes != rb || fstat(ring_fd, &st) != 0 || (uint64_t)st.st_size < rb) {
        munmap(status, STATUS_BYTES);
        return vmmc_error(VMMC_ERR_PROTOCOL, "rank %d's notification ring is malformed", rank);
    }
    shm_ring_t *ring = mmap(NULL, rb, PROT_READ | PROT_WRITE, MAP_SHARED, ring_fd, 0);
    if (ring == MAP_FAILED) {
        munmap(status, STATUS_BYTES);
        return vmmc_error_sys("mmap the notification ring at rank %d", rank);
    }
    (void)madvise(ring, rb, MADV_DONTFORK); /* the receiver's ring: not in children */
    sp->status = status;
    sp->ring = ring;
    sp->ring_bytes = rb;
    sp->nrec = nrec;
    sp->head = sp->tail_cache = atomic_load(&ring->tail);
    return VMMC_OK;
}

void shm_inbox_detach(shm_peer_t *sp)
{
    if (sp->ring)
        munmap(sp->ring, sp->ring_bytes);
    if (sp->status)
        munmap(sp->status, STATUS_BYTES);
    sp->ring = NULL;
    sp->status = NULL;
}

/* Wake a sleeping receiver. The caller has published its event before. */
int shm_wake_peer(vmmc_ep_t *ep, shm_peer_t *sp)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (VMMC_LIKELY(atomic_load_explicit(&sp->status->sleeping, memory_order_relaxed) == 0))
        return VMMC_OK;
    uint64_t one = 1;
    ssize_t w = write(sp->evfd, &one, sizeof one);
    (void)w;
    VMMC_COUNT(ep, CNT_WAKEUPS_SENT, 1);
    return VMMC_OK;
}

int vmmc_shm_notify(vmmc_tl_proxy_t *px, size_t off, size_t len, uint64_t imm, int nonblock)
{
    vmmc_ep_t *ep = px->ep;
    shm_peer_t *sp = VMMC_TL_PEER(px->peer)->tl_priv;
    while (atomic_flag_test_and_set_explicit(&sp->prod_lock, memory_order_acquire))
        __builtin_ia32_pause();
    if (VMMC_UNLIKELY(sp->head - sp->tail_cache >= sp->nrec)) {
        sp->tail_cache = atomic_load_explicit(&sp->ring->tail, memory_order_acquire);
        uint64_t t0 = 0;
        while (sp->head - sp->tail_cache >= sp->nrec) {
            atomic_flag_clear_explicit(&sp->prod_lock, memory_order_release);
            if (nonblock)
                return vmmc_error(VMMC_ERR_AGAIN, "notification queue to rank %d is full",
                                  px->rank);
            int st = vmmc_tl_peer_error(VMMC_TL_PEER(px->peer));
            if (st != VMMC_OK)
                return st;
            /* The receiver drains its queue in its progress: make sure it is
             * awake, and empty our own queues meanwhile (the receiver may be
             * waiting for room in them), without running a handler inside
             * this send. */
            shm_wake_peer(ep, sp);
            if (!t0)
                t0 = vmmc_now_ns();
            if (vmmc_now_ns() - t0 > 50000)
                usleep(50);
            else
                __builtin_ia32_pause();
            vmmc_tl_drain(ep);
            while (atomic_flag_test_and_set_explicit(&sp->prod_lock, memory_order_acquire))
                __builtin_ia32_pause();
            sp->tail_cache = atomic_load_explicit(&sp->ring->tail, memory_order_acquire);
        }
    }
    shm_rec_t *slot = &sp->ring->rec[shm_ring_slot(sp->head, sp->nrec)];
    slot->r.export_id = px->export_id;
    slot->r.gen = px->gen;
    slot->r.sender = VMMC_TL_EP(ep)->rank;
    slot->r.offset = off;
    slot->r.length = len;
    slot->r.imm = imm;
    sp->head++;
    atomic_store_explicit(&slot->seq, sp->head, memory_order_release);
    atomic_flag_clear_explicit(&sp->prod_lock, memory_order_release);
    VMMC_COUNT(ep, CNT_NOTIFY_SENT, 1);
    return shm_wake_peer(ep, sp);
}

/* Called with the endpoint's progress lock held (one consumer). */
int vmmc_shm_drain(vmmc_ep_t *ep, vmmc_shm_rec_fn fn)
{
    shm_ep_t *s = VMMC_TL_STATE(ep, shm);
    if (!s)
        return 0;
    int n = 0, na = atomic_load_explicit(&s->nactive, memory_order_acquire);
    for (int i = 0; i < na; i++) {
        shm_inring_t *in = atomic_load_explicit(&s->active[i / SHM_ACTIVE_CHUNK],
                                                memory_order_relaxed)[i % SHM_ACTIVE_CHUNK];
        int rank = in->handle;
        uint64_t tail = in->tail, t0 = tail;
        for (uint32_t k = 0; k < s->nrec; k++) {
            shm_rec_t *slot = &in->ring->rec[shm_ring_slot(tail, s->nrec)];
            if (atomic_load_explicit(&slot->seq, memory_order_acquire) != tail + 1)
                break;
            vmmc_nrec_t rec = slot->r;
            rec.sender = rank; /* the ring's owner, whatever the record says */
            fn(ep, &rec);
            tail++;
            n++;
        }
        if (tail != t0) {
            in->tail = tail;
            atomic_store_explicit(&in->ring->tail, tail, memory_order_release);
        }
    }
    return n;
}
