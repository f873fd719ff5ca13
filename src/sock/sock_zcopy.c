/* Posted receives: a large blocking read has the writer place its bytes
 * straight into the reader's buffer (see docs/sock_conn.md, "Posted
 * receives").
 *
 * The reader owns a window: one VMMC_EXPORT_REDIRECTABLE export of
 * ZC_SLOTS * ZC_MAX bytes of anonymous, never touched (MAP_NORESERVE)
 * memory, importable only by the peer, named after its ring. A reader whose
 * ring is empty redirects window range X(seq) to the piece of its buffer
 * (vmmc_redirect), then writes POST = seq << 32 | bytes into the writer's
 * ring header. A writer that sees a new posting, has consumed credit for all
 * it put into the ring (so the posting is next in the stream) and whose last
 * direct record the reader took, writes its user data into the window at
 * X(seq) with vmmc_send (the core redirects it into the posted buffer:
 * process_vm_writev on shm, deliberate update over udp), then publishes the
 * record {DIR_AT = its ring tail, DIR_LEN = bytes, DIR_SEQ = seq} in the
 * reader's header: the bytes sit in the stream right after ring position
 * DIR_AT; then DIR_DONE = seq (it also says so for a posting it declines or
 * finds withdrawn: it acts on each posting once). The reader takes the record (cancel: vmmc_redirect_cancel says how
 * many bytes landed in its buffer) and acknowledges it (DIR_ACK). A write
 * that came after the reader withdrew lands in the window's default buffer
 * and the arrival log; its record is taken later by redirecting that range
 * into a spill buffer, which is read before the ring bytes that follow; the
 * reader posts again only once the writer is done with a withdrawn posting
 * (DIR_DONE), so such a write can only land in its own range. So
 * each byte is delivered once and in order whoever wins a race; a record that
 * does not check out resets the connection. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "sock/sock_conn_priv.h"
#include "sock/sock_sys.h"
#include "util/log.h"

/* The window: postings rotate over ZC_SLOTS ranges of ZC_MAX bytes, so a
 * write the reader withdrew from lands away from the next postings. Both
 * ends use these (the writer checks the window's length). */
enum { ZC_SLOTS = 16 };
#define ZC_MAX ((size_t)4 << 20)
/* A writer places fewer bytes than posted only if it has at least this many
 * (else they go through the ring, and the reader withdraws): a placement
 * is a round of posting, record and wake-up during which neither side
 * copies anything else, while through the ring both copy at once; below
 * this the ring is faster (measured: 64 KiB writes into 1 MiB reads). */
#define ZC_MIN_DIRECT ((size_t)256 << 10)

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static size_t zc_at(uint32_t seq)
{
    return (size_t)(seq % ZC_SLOTS) * ZC_MAX;
}

static uint64_t word(const sock_conn_t *c, int off)
{
    return sock_rx_word(&c->rx, off);
}

/* ------------------------------------------------------------------------ */
/* the reader */

static int make_window(sock_conn_t *c)
{
    size_t len = ZC_SLOTS * ZC_MAX;
    void *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
        vmmc_error_sys("sock: fd %d: no memory for the receive window", c->s->fd);
        return -1;
    }
    char name[SOCK_RING_NAME_MAX + 4];
    snprintf(name, sizeof name, "%s.z", c->rx.name);
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS | VMMC_EXPORT_PARAM_IMPORTERS;
    p.name = name;
    p.addr = mem;
    p.length = len;
    p.flags = VMMC_EXPORT_REDIRECTABLE;
    p.importers = &c->peer;
    p.num_importers = 1;
    if (vmmc_export(c->ep, &p, &c->zex) != VMMC_OK) {
        munmap(mem, len);
        c->zex = NULL;
        return -1;
    }
    c->zmem = mem;
    c->zlen = len;
    return 0;
}

int sock_zc_post(sock_conn_t *c, const struct iovec *iov, int iovcnt, size_t skip, size_t want)
{
    uint64_t min = sock_cfg()->zcopy;
    int st = atomic_load(&c->st);
    if (!min || want < min || c->zoff || c->zposted || !(st & C_ATTACHED) ||
        (st & (C_REV_SENT | C_REV_PEER | C_REV_ACKED | C_RX_TCP | C_TX_TCP | C_RETIRED |
               C_RESET | C_DEAD | C_PEER_FIN | C_SHUT_RD)) ||
        sock_zc_pending(c))
        return 0;
    if (c->zdoubt) {
        /* a withdrawn posting the writer may still be writing: not before
         * it is done with it (its bytes then wait as a record, taken first) */
        if ((int32_t)((uint32_t)word(c, SOCK_HDR_DIR_DONE) - c->zdoubt) < 0)
            return 0;
        c->zdoubt = 0;
        if (sock_zc_pending(c))
            return 0;
    }
    /* the piece of the iovec at @p skip: it must be large enough alone */
    uint8_t *buf = NULL;
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        buf = (uint8_t *)iov[i].iov_base + skip;
        len = iov[i].iov_len - skip;
        break;
    }
    if (!buf || len < min)
        return 0;
    if (len > want)
        len = want;
    if (len > ZC_MAX)
        len = ZC_MAX;
    if (!c->zex && make_window(c) != 0) {
        c->zoff = 1; /* the ring only, for good */
        if (sock_cfg()->debug)
            fprintf(stderr, "vmmc-sock[%d]: fd %d: no receive window: %s\n", (int)getpid(),
                    c->s->fd, vmmc_last_error());
        return 0;
    }
    uint32_t seq = c->zpost + 1;
    if (!seq)
        seq = 1;
    int rc = vmmc_redirect(c->zex, zc_at(seq), buf, len, &c->zreq);
    if (rc != VMMC_OK && rc != VMMC_INPROGRESS)
        return 0; /* slots busy or the like: read through the ring */
    c->zpost = seq;
    c->zposted = 1;
    c->zbuf = buf;
    c->zwant = len;
    /* The writer places bytes only once it has its credit for all it put
     * into the ring (the posting is next in the stream): publish it now. */
    if (c->credit_pub != c->head)
        sock_conn_publish_credit(c);
    sock_tx_word(&c->tx, SOCK_HDR_POST, (uint64_t)seq << 32 | len);
    if (c->tx.map)
        atomic_thread_fence(memory_order_seq_cst); /* then the ring is looked at again */
    atomic_fetch_add(&c->zposts, 1);
    return 1;
}

static void ack(sock_conn_t *c, uint32_t seq)
{
    c->ztaken = seq;
    sock_tx_word(&c->tx, SOCK_HDR_DIR_ACK, seq);
}

/* Copy window range [at, at + len) out of the arrival log into @p dst: the
 * bytes a writer placed while nothing was posted there. All must be there. */
static int pull(sock_conn_t *c, size_t at, uint8_t *dst, size_t len)
{
    vmmc_request_t req;
    int rc = vmmc_redirect(c->zex, at, dst, len, &req);
    if (rc == VMMC_OK)
        return 0;
    if (rc == VMMC_INPROGRESS)
        (void)vmmc_redirect_cancel(&req);
    return -1;
}

static int settle_check(void *arg)
{
    sock_conn_t *c = arg;
    return sock_conn_tcp_pending(c) || (atomic_load(&c->st) & (C_RESET | C_DEAD)) ||
           (uint32_t)word(c, SOCK_HDR_DIR_SEQ) == c->zpost;
}

ssize_t sock_zc_cancel(sock_conn_t *c)
{
    if (!c->zposted)
        return 0;
    uint32_t seq = c->zpost;
    sock_tx_word(&c->tx, SOCK_HDR_POST, (uint64_t)seq << 32); /* withdrawn */
    int d = vmmc_redirect_cancel(&c->zreq);
    c->zposted = 0;
    if (d <= 0) {
        c->zdoubt = seq; /* nothing landed: a late write goes to the window (taken later) */
        return 0;
    }
    /* The writer placed bytes: its record follows them (it is at most one
     * send behind). Signals do not interrupt this wait: the bytes are in the
     * caller's buffer and must be counted. */
    uint64_t deadline = now_ms() + sock_cfg()->revert_timeout_ns / 1000000;
    if ((uint32_t)word(c, SOCK_HDR_DIR_SEQ) != seq)
        atomic_fetch_add(&c->zwaited, 1);
    while ((uint32_t)word(c, SOCK_HDR_DIR_SEQ) != seq) {
        if (atomic_load(&c->st) & (C_RESET | C_DEAD))
            return 0; /* it died in the middle of its send: void, as the send never ended */
        uint64_t now = now_ms();
        if (now >= deadline)
            return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                                  "the peer placed %d bytes for posting %u and never said so",
                                  d, seq);
        if (sock_conn_tcp_pending(c))
            sock_conn_on_tcp(c);
        (void)sock_wait(c->ctx, c->s->fd, 50, settle_check, c);
    }
    uint64_t at = word(c, SOCK_HDR_DIR_AT), k = word(c, SOCK_HDR_DIR_LEN);
    if (at != c->head || k < (uint64_t)d || k > c->zwant)
        return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                              "the peer's direct record (%" PRIu64 " bytes at %" PRIu64
                              ") does not match posting %u (%zu bytes, %d placed, at %" PRIu64 ")",
                              k, at, seq, c->zwant, d, c->head);
    if (k > (uint64_t)d && pull(c, zc_at(seq) + (size_t)d, c->zbuf + d, (size_t)(k - d)) != 0)
        return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                              "the peer claims %" PRIu64 " direct bytes for posting %u and "
                              "placed %d", k, seq, d);
    ack(c, seq);
    atomic_fetch_add(&c->zrecv, k);
    atomic_fetch_add(&c->nrecv, k);
    return (ssize_t)k;
}

/* A record for no current posting (one the reader withdrew from): its bytes
 * are in the window's default buffer; move them to the spill. */
static int take_late(sock_conn_t *c, uint64_t tail)
{
    uint32_t seq = (uint32_t)word(c, SOCK_HDR_DIR_SEQ);
    uint64_t at = word(c, SOCK_HDR_DIR_AT), k = word(c, SOCK_HDR_DIR_LEN);
    if ((int32_t)(seq - c->ztaken) <= 0 || (int32_t)(c->zpost - seq) < 0 || !c->zex)
        return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                              "the peer's direct record %u is for no posting (last %u, taken %u)",
                              seq, c->zpost, c->ztaken);
    if (at != c->head || at > tail || k == 0 || k > ZC_MAX)
        return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                              "the peer's direct record %u (%" PRIu64 " bytes at %" PRIu64
                              ") does not fit the stream (at %" PRIu64 ")",
                              seq, k, at, c->head);
    uint8_t *sp = malloc((size_t)k);
    if (!sp)
        return sock_conn_fail(c, C_RESET | C_EPIPE, ENOMEM, "no memory for %" PRIu64
                              " bytes placed after a withdrawn read", k);
    if (pull(c, zc_at(seq), sp, (size_t)k) != 0) {
        free(sp);
        return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                              "the peer claims %" PRIu64 " direct bytes for posting %u that "
                              "are not in the window", k, seq);
    }
    c->spill = sp;
    c->spill_off = 0;
    if (seq == c->zdoubt)
        c->zdoubt = 0;
    atomic_fetch_add(&c->zlate, 1);
    atomic_store(&c->spill_len, (size_t)k);
    ack(c, seq);
    return 0;
}

ssize_t sock_zc_read(sock_conn_t *c, const struct iovec *iov, int iovcnt, size_t skip,
                     size_t want, int peek, uint64_t tail)
{
    if (c->zposted) {
        ssize_t k = sock_zc_cancel(c);
        if (k != 0)
            return k;
    }
    if (!atomic_load(&c->spill_len)) {
        if ((uint32_t)word(c, SOCK_HDR_DIR_SEQ) == c->ztaken)
            return 0;
        if (take_late(c, tail) != 0)
            return -1;
    }
    size_t have = atomic_load(&c->spill_len), n = have < want ? have : want, done = 0;
    const uint8_t *src = c->spill + c->spill_off;
    for (int i = 0; iov && i < iovcnt && done < n; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        size_t k = iov[i].iov_len - skip;
        if (k > n - done)
            k = n - done;
        memcpy((uint8_t *)iov[i].iov_base + skip, src + done, k);
        done += k;
        skip = 0;
    }
    if (peek)
        return (ssize_t)n;
    c->spill_off += n;
    atomic_store(&c->spill_len, have - n);
    atomic_fetch_add(&c->nrecv, n);
    if (have == n) {
        free(c->spill);
        c->spill = NULL;
        c->spill_off = 0;
    }
    return (ssize_t)n;
}

size_t sock_zc_unread(const sock_conn_t *c)
{
    size_t n = atomic_load(&c->spill_len);
    if (!n && (uint32_t)word(c, SOCK_HDR_DIR_SEQ) != c->ztaken) {
        uint64_t k = word(c, SOCK_HDR_DIR_LEN);
        n = k <= ZC_MAX ? (size_t)k : 0;
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* the writer */

/* The writer acts on each posting once: it is done with @p seq (served,
 * declined or found withdrawn), and tells the reader. */
static ssize_t done(sock_conn_t *c, uint32_t seq, ssize_t placed)
{
    c->zseen = seq;
    (void)sock_tx_word(&c->tx, SOCK_HDR_DIR_DONE, seq);
    return placed;
}

ssize_t sock_zc_send(sock_conn_t *c, const struct iovec *iov, int iovcnt, size_t skip,
                     size_t len)
{
    uint64_t pw = word(c, SOCK_HDR_POST);
    uint32_t seq = (uint32_t)(pw >> 32);
    size_t want = (size_t)(uint32_t)pw;
    if (!want || c->zno || !sock_cfg()->zcopy)
        return done(c, seq, 0); /* withdrawn, or not for this side */
    /* Only when the posting is next in the stream (every byte put into the
     * ring was consumed) and the reader took my last record; else these
     * bytes go through the ring, and the reader withdraws when it sees them. */
    uint64_t sent = atomic_load(&c->sent);
    if (word(c, SOCK_HDR_CREDIT) != sent || (uint32_t)word(c, SOCK_HDR_DIR_ACK) != c->zpub)
        return done(c, seq, 0);
    if (want > ZC_MAX)
        return sock_conn_fail(c, C_RESET | C_EPIPE, ECONNRESET,
                              "the peer posted %zu bytes (at most %zu)", want, ZC_MAX);
    size_t m = len < want ? len : want;
    if (m < want && m < ZC_MIN_DIRECT)
        return done(c, seq, 0);
    if (!c->zpx) {
        int rc = vmmc_import(c->ep, c->peer, c->zname,
                             (int)(sock_cfg()->hello_timeout_ns / 1000000), &c->zpx);
        if (rc == VMMC_OK && (vmmc_proxy_length(c->zpx) != ZC_SLOTS * ZC_MAX ||
                              !(vmmc_proxy_flags(c->zpx) & VMMC_EXPORT_REDIRECTABLE))) {
            vmmc_unimport(c->zpx);
            rc = VMMC_ERR_PROTOCOL;
        }
        if (rc != VMMC_OK) {
            c->zpx = NULL;
            c->zno = 1;
            (void)done(c, seq, 0);
            if (sock_cfg()->debug)
                fprintf(stderr, "vmmc-sock[%d]: fd %d: the peer's receive window is not "
                        "usable: the ring only\n", (int)getpid(), c->s->fd);
            return 0;
        }
    }
    size_t at = zc_at(seq), put = 0;
    for (int i = 0; i < iovcnt && put < m; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        size_t k = iov[i].iov_len - skip;
        if (k > m - put)
            k = m - put;
        if (vmmc_send(c->zpx, at + put, (const uint8_t *)iov[i].iov_base + skip, k, 0) !=
            VMMC_OK)
            return sock_conn_fail(c, C_EPIPE, EPIPE, "the peer's window cannot be written: %s",
                                  vmmc_last_error());
        put += k;
        skip = 0;
    }
    if (sock_tx_word(&c->tx, SOCK_HDR_DIR_AT, sent) != VMMC_OK ||
        sock_tx_word(&c->tx, SOCK_HDR_DIR_LEN, m) != VMMC_OK ||
        sock_tx_word(&c->tx, SOCK_HDR_DIR_SEQ, seq) != VMMC_OK)
        return sock_conn_fail(c, C_EPIPE, EPIPE, "the peer's ring cannot be written");
    c->zpub = seq;
    atomic_fetch_add(&c->zsent, m);
    atomic_fetch_add(&c->nsent, m);
    (void)done(c, seq, 0);
    sock_conn_notify_data(c);
    return (ssize_t)m;
}

/* ------------------------------------------------------------------------ */
/* the end */

void sock_zc_unexport(sock_conn_t *c)
{
    if (c->zposted)
        (void)vmmc_redirect_cancel(&c->zreq);
    c->zposted = 0;
    if (c->zex)
        vmmc_unexport(c->zex);
    c->zex = NULL;
}

void sock_zc_free(sock_conn_t *c)
{
    sock_zc_unexport(c);
    if (c->zmem)
        munmap(c->zmem, c->zlen);
    c->zmem = NULL;
    if (c->zpx)
        vmmc_unimport(c->zpx);
    c->zpx = NULL;
    free(c->spill);
    c->spill = NULL;
    atomic_store(&c->spill_len, 0);
}
