/* The provider's completion queues alone (src/ofi/ofi_cq.c), with fakes of
 * the rest of the provider (ofi_fake.c).
 *
 * Every wait is bounded: sread with long timeouts, and an alarm. */
#include <pthread.h>
#include <unistd.h>

#include "ofi_fake.h"
#include "vtest.h"

static vofi_cq_t *cq_open(enum fi_cq_format fmt, enum fi_wait_obj w, size_t size)
{
    struct fi_cq_attr a = {.size = size, .format = fmt, .wait_obj = w};
    struct fid_cq *f = NULL;
    int r = fi_cq_open(&dom.fid, &a, &f, NULL);
    if (r)
        VT_FAIL("cq_open: %d %s (%s)", r, fi_strerror(-r), last_warn);
    return (vofi_cq_t *)(void *)f;
}

static vofi_cqe_t cqe(uintptr_t i)
{
    vofi_cqe_t e = {.op_context = (void *)(i + 1), .flags = FI_RECV | FI_TAGGED, .len = i * 3,
                    .buf = (void *)(i * 7), .data = i ^ 0xabcd, .tag = i << 8,
                    .src = (fi_addr_t)i};
    return e;
}

/* ---- completion queues ---- */

static void t_open_attrs(void)
{
    struct fid_cq *f;
    struct fi_cq_attr a = {0};
    int ref0 = atomic_load(&dom.ref);
    VT_CHECK(fi_cq_open(&dom.fid, &a, &f, NULL) == 0);
    vofi_cq_t *cq = (vofi_cq_t *)(void *)f;
    VT_CHECK(cq->size == vofi_set.cq_size);
    VT_CHECK(cq->format == FI_CQ_FORMAT_CONTEXT);
    VT_CHECK(atomic_load(&dom.ref) == ref0 + 1);
    enum fi_wait_obj wo;
    int fd;
    VT_CHECK(fi_control(&f->fid, FI_GETWAITOBJ, &wo) == 0 && wo == FI_WAIT_NONE);
    VT_CHECK(fi_control(&f->fid, FI_GETWAIT, &fd) == -FI_ENODATA);
    struct fi_cq_entry ent;
    VT_CHECK(fi_cq_sread(f, &ent, 1, NULL, 10) == -FI_ENOSYS);
    VT_CHECK(fi_close(&f->fid) == 0);
    VT_CHECK(atomic_load(&dom.ref) == ref0);

    struct fi_cq_attr bad[] = {
        {.format = (enum fi_cq_format)77},
        {.wait_obj = FI_WAIT_SET},
        {.wait_obj = FI_WAIT_MUTEX_COND},
        {.wait_obj = FI_WAIT_YIELD},
        {.flags = FI_AFFINITY},
        {.wait_cond = FI_CQ_COND_THRESHOLD},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        last_warn[0] = 0;
        VT_CHECK(fi_cq_open(&dom.fid, &bad[i], &f, NULL) == -FI_ENOSYS);
        VT_CHECK(last_warn[0] != 0); /* and says why */
    }
    VT_CHECK(atomic_load(&dom.ref) == ref0);
    struct fid_domain notdom = {.fid = {.fclass = FI_CLASS_FABRIC}, .ops = &dom_ops};
    VT_CHECK(fi_cq_open(&notdom, &a, &f, NULL) == -FI_EINVAL);
}

static void t_formats(void)
{
    enum fi_cq_format fmts[] = {FI_CQ_FORMAT_UNSPEC, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG,
                                FI_CQ_FORMAT_DATA, FI_CQ_FORMAT_TAGGED};
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        vofi_cq_t *cq = cq_open(fmts[k], FI_WAIT_NONE, 8);
        for (uintptr_t i = 0; i < 3; i++) {
            vofi_cqe_t e = cqe(i);
            vofi_cq_write(cq, &e);
        }
        struct fi_cq_tagged_entry t[3];
        memset(t, 0xee, sizeof t);
        VT_CHECK(fi_cq_read(&cq->fid, t, 3) == 3);
        for (uintptr_t i = 0; i < 3; i++) {
            vofi_cqe_t e = cqe(i);
            switch (fmts[k]) {
            case FI_CQ_FORMAT_UNSPEC:
            case FI_CQ_FORMAT_CONTEXT: {
                struct fi_cq_entry *c = (void *)t;
                VT_CHECK(c[i].op_context == e.op_context);
                break;
            }
            case FI_CQ_FORMAT_MSG: {
                struct fi_cq_msg_entry *m = (void *)t;
                VT_CHECK(m[i].op_context == e.op_context && m[i].flags == e.flags &&
                         m[i].len == e.len);
                break;
            }
            case FI_CQ_FORMAT_DATA: {
                struct fi_cq_data_entry *d = (void *)t;
                VT_CHECK(d[i].op_context == e.op_context && d[i].flags == e.flags &&
                         d[i].len == e.len && d[i].buf == e.buf && d[i].data == e.data);
                break;
            }
            default:
                VT_CHECK(t[i].op_context == e.op_context && t[i].flags == e.flags &&
                         t[i].len == e.len && t[i].buf == e.buf && t[i].data == e.data &&
                         t[i].tag == e.tag);
            }
        }
        /* Nothing written past the three entries of the format. */
        unsigned char *end = (unsigned char *)t + 3 * cq->entry_size;
        VT_CHECK(end == (unsigned char *)t + sizeof t || *end == 0xee);
        VT_CHECK(fi_cq_read(&cq->fid, t, 3) == -FI_EAGAIN);
        VT_CHECK(fi_close(&cq->fid.fid) == 0);
    }
}

static void t_overflow(void)
{
    vofi_cq_t *cq = cq_open(FI_CQ_FORMAT_DATA, FI_WAIT_NONE, 4);
    uintptr_t next_w = 0, next_r = 0;
    unsigned long long seed = 7;
    struct fi_cq_data_entry d[5];
    fi_addr_t src[5];
    /* Bursts far beyond the size, read in small pieces, interleaved. */
    for (int round = 0; round < 200; round++) {
        int w = (int)(vt_rand(&seed) % 40);
        for (int i = 0; i < w; i++) {
            vofi_cqe_t e = cqe(next_w++);
            vofi_cq_write(cq, &e);
        }
        int r = (int)(vt_rand(&seed) % 30);
        while (r > 0 && next_r < next_w) {
            size_t want = (size_t)(vt_rand(&seed) % 5) + 1;
            ssize_t n = fi_cq_readfrom(&cq->fid, d, want, src);
            VT_CHECK(n > 0 && (size_t)n <= want);
            for (ssize_t i = 0; i < n; i++, next_r++) {
                VT_CHECK(d[i].op_context == (void *)(next_r + 1));
                VT_CHECK(d[i].data == (next_r ^ 0xabcd));
                VT_CHECK(src[i] == (fi_addr_t)next_r);
            }
            r -= (int)n;
        }
    }
    while (next_r < next_w) {
        ssize_t n = fi_cq_read(&cq->fid, d, 5);
        VT_CHECK(n > 0);
        for (ssize_t i = 0; i < n; i++, next_r++)
            VT_CHECK(d[i].op_context == (void *)(next_r + 1));
    }
    VT_CHECK(next_w > 2000);
    VT_CHECK(fi_cq_read(&cq->fid, d, 5) == -FI_EAGAIN);
    /* Closing with entries beyond the ring frees them (ASan checks). */
    for (uintptr_t i = 0; i < 20; i++) {
        vofi_cqe_t e = cqe(i);
        vofi_cq_write(cq, &e);
        vofi_cq_write_err(cq, &e);
    }
    VT_CHECK(fi_close(&cq->fid.fid) == 0);
}

static void t_errors(void)
{
    vofi_cq_t *cq = cq_open(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 8);
    struct fi_cq_tagged_entry t[4];
    struct fi_cq_err_entry ee;
    memset(&ee, 0, sizeof ee);
    VT_CHECK(fi_cq_readerr(&cq->fid, &ee, 0) == -FI_EAGAIN);
    vofi_cqe_t ok = cqe(1), bad = cqe(2);
    bad.err = FI_ETRUNC;
    bad.prov_errno = VMMC_ERR_TRUNCATED;
    bad.olen = 1234;
    vofi_cq_write(cq, &ok);
    vofi_cq_write_err(cq, &bad);
    VT_CHECK(vofi_cq_ready(cq) == 1);
    VT_CHECK(fi_cq_read(&cq->fid, t, 4) == -FI_EAVAIL);
    VT_CHECK(fi_cq_read(&cq->fid, t, 4) == -FI_EAVAIL); /* still there until readerr */
    /* API >= 1.5, no buffer of the caller's: err_data is the queue's message. */
    VT_CHECK(fi_cq_readerr(&cq->fid, &ee, 0) == 1);
    VT_CHECK(ee.op_context == bad.op_context && ee.flags == bad.flags && ee.len == bad.len &&
             ee.buf == bad.buf && ee.data == bad.data && ee.tag == bad.tag);
    VT_CHECK(ee.err == FI_ETRUNC && ee.prov_errno == VMMC_ERR_TRUNCATED && ee.olen == 1234);
    VT_CHECK(ee.err_data && ee.err_data_size == strlen(ee.err_data) + 1);
    VT_CHECK(strstr(ee.err_data, "tagged receive") && strstr(ee.err_data, "1234"));
    char sb[128];
    VT_CHECK(fi_cq_strerror(&cq->fid, ee.prov_errno, ee.err_data, sb, sizeof sb) == sb);
    VT_CHECK(strcmp(sb, vmmc_strerror(VMMC_ERR_TRUNCATED)) == 0);
    VT_CHECK(fi_cq_read(&cq->fid, t, 4) == 1 && t[0].op_context == ok.op_context);

    /* The caller's buffer: the message is copied in, cut to its size. */
    vofi_cq_write_err(cq, &bad);
    char mine[10];
    memset(&ee, 0, sizeof ee);
    ee.err_data = mine;
    ee.err_data_size = sizeof mine;
    VT_CHECK(fi_cq_readerr(&cq->fid, &ee, 0) == 1);
    VT_CHECK(ee.err_data == mine && ee.err_data_size == sizeof mine);
    VT_CHECK(memcmp(mine, cq->err_str, sizeof mine) == 0);

    /* API 1.4: the entry ends before err_data_size, which stays untouched. */
    fab.fid.api_version = FI_VERSION(1, 4);
    vofi_cq_write_err(cq, &bad);
    memset(&ee, 0, sizeof ee);
    ee.err_data_size = 0x5a5a;
    VT_CHECK(fi_cq_readerr(&cq->fid, &ee, 0) == 1);
    VT_CHECK(ee.err == FI_ETRUNC && ee.err_data == cq->err_str && ee.err_data_size == 0x5a5a);
    fab.fid.api_version = FI_VERSION(1, 17);

    /* Errors come out in order, before successes written between them. */
    for (int i = 0; i < 3; i++) {
        vofi_cqe_t e = cqe(10 + (uintptr_t)i);
        e.err = FI_EIO;
        e.prov_errno = VMMC_ERR_PEER_DEAD;
        vofi_cq_write_err(cq, &e);
        vofi_cq_write(cq, &ok);
    }
    for (int i = 0; i < 3; i++) {
        VT_CHECK(fi_cq_read(&cq->fid, t, 4) == -FI_EAVAIL);
        VT_CHECK(fi_cq_readerr(&cq->fid, &ee, 0) == 1);
        VT_CHECK(ee.op_context == (void *)(uintptr_t)(11 + i) && ee.err == FI_EIO);
    }
    VT_CHECK(fi_cq_read(&cq->fid, t, 4) == 3);
    VT_CHECK(fi_cq_readerr(&cq->fid, &ee, 0) == -FI_EAGAIN);
    VT_CHECK(vofi_cq_ready(cq) == 0);
    VT_CHECK(fi_close(&cq->fid.fid) == 0);
}

/* Linked with -Wl,--wrap=malloc: a completion that finds no memory. */
void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
static _Atomic int malloc_fails;
void *__wrap_malloc(size_t n)
{
    return atomic_load(&malloc_fails) ? NULL : __real_malloc(n);
}

static void t_no_memory(void)
{
    vofi_cq_t *cq = cq_open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD, 2);
    int fd;
    VT_CHECK(fi_control(&cq->fid.fid, FI_GETWAIT, &fd) == 0);
    vofi_cqe_t e = cqe(0);
    vofi_cq_write(cq, &e);
    vofi_cq_write(cq, &e);
    atomic_store(&malloc_fails, 1);
    vofi_cq_write(cq, &e); /* beyond the ring */
    vofi_cq_write(cq, &e);
    vofi_cq_write_err(cq, &e);
    atomic_store(&malloc_fails, 0);
    /* Not lost silently: one FI_EOVERRUN error says how many. */
    struct fi_cq_entry c[4];
    VT_CHECK(fi_cq_read(&cq->fid, c, 4) == -FI_EAVAIL);
    struct fi_cq_err_entry ee = {0};
    VT_CHECK(fi_cq_readerr(&cq->fid, &ee, 0) == 1);
    VT_CHECK(ee.err == FI_EOVERRUN && ee.len == 3 && ee.op_context == NULL);
    VT_CHECK(strstr(ee.err_data, "3 completion(s) lost"));
    VT_CHECK(fi_cq_readerr(&cq->fid, &ee, 0) == -FI_EAGAIN);
    VT_CHECK(fi_cq_read(&cq->fid, c, 4) == 2);
    VT_CHECK(!readable(fd));
    VT_CHECK(fi_close(&cq->fid.fid) == 0);
}

static void t_bind_progress(void)
{
    vofi_cq_t *cq = cq_open(FI_CQ_FORMAT_MSG, FI_WAIT_FD, 8);
    struct fake_ep *f = &feps[0];
    f->cq = cq;
    VT_CHECK(vofi_cq_bind_ep(cq, &f->ep) == 0);
    VT_CHECK(vofi_cq_bind_ep(cq, &f->ep) == 0); /* transmit and receive */
    VT_CHECK(fi_close(&cq->fid.fid) == -FI_EBUSY);
    /* A read progresses the endpoint first, once though bound twice. */
    atomic_store(&f->progressed, 0);
    atomic_store(&f->pending, 2);
    struct fi_cq_msg_entry m[4];
    fi_addr_t src[4];
    VT_CHECK(fi_cq_readfrom(&cq->fid, m, 4, src) == 2);
    VT_CHECK(atomic_load(&f->progressed) == 1);
    VT_CHECK(m[0].op_context == f && m[1].flags == FI_RECV);
    VT_CHECK(src[0] == FI_ADDR_NOTAVAIL && src[1] == FI_ADDR_NOTAVAIL);
    /* The fd holds the endpoint's wait fd while one binding is left. */
    int fd;
    VT_CHECK(fi_control(&cq->fid.fid, FI_GETWAIT, &fd) == 0);
    VT_CHECK(!readable(fd));
    ep_arrive(f, 1);
    VT_CHECK(readable(fd));
    VT_CHECK(fi_cq_read(&cq->fid, m, 4) == 1);
    VT_CHECK(!readable(fd));
    vofi_cq_unbind_ep(cq, &f->ep);
    VT_CHECK(fi_close(&cq->fid.fid) == -FI_EBUSY);
    ep_arrive(f, 1);
    VT_CHECK(readable(fd));
    VT_CHECK(fi_cq_read(&cq->fid, m, 4) == 1);
    vofi_cq_unbind_ep(cq, &f->ep);
    atomic_store(&f->progressed, 0);
    ep_arrive(f, 1); /* no longer in the set, nor progressed */
    VT_CHECK(!readable(fd));
    VT_CHECK(fi_cq_read(&cq->fid, m, 4) == -FI_EAGAIN && atomic_load(&f->progressed) == 0);
    f->cq = NULL;
    vofi_ep_progress(&f->ep); /* drain the fake endpoint */
    VT_CHECK(fi_close(&cq->fid.fid) == 0);

    /* No more than VOFI_MAX_CNTR_EPS bindings. */
    cq = cq_open(FI_CQ_FORMAT_MSG, FI_WAIT_NONE, 8);
    for (int i = 0; i < VOFI_MAX_CNTR_EPS; i++)
        VT_CHECK(vofi_cq_bind_ep(cq, &feps[i % NEP].ep) == 0);
    VT_CHECK(vofi_cq_bind_ep(cq, &feps[0].ep) == -FI_ENOSPC);
    for (int i = 0; i < VOFI_MAX_CNTR_EPS; i++)
        vofi_cq_unbind_ep(cq, &feps[i % NEP].ep);
    VT_CHECK(cq->neps == 0);
    VT_CHECK(fi_close(&cq->fid.fid) == 0);
}

static void t_fd(void)
{
    vofi_cq_t *cq = cq_open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 4);
    vofi_cqe_t e = cqe(0);
    /* Nobody can sleep on it yet: a completion costs no eventfd write. */
    vofi_cq_write(cq, &e);
    VT_CHECK(!readable(cq->efd));
    VT_CHECK(vofi_cq_ready(cq) == 1);
    enum fi_wait_obj wo;
    VT_CHECK(fi_control(&cq->fid.fid, FI_GETWAITOBJ, &wo) == 0 && wo == FI_WAIT_FD);
    int fd;
    VT_CHECK(fi_control(&cq->fid.fid, FI_GETWAIT, &fd) == 0 && fd >= 0);
    VT_CHECK(readable(fd)); /* the entry written before */
    struct fi_cq_entry c[8];
    VT_CHECK(fi_cq_read(&cq->fid, c, 8) == 1);
    VT_CHECK(!readable(fd));
    VT_CHECK(vofi_cq_ready(cq) == 0);
    for (uintptr_t i = 0; i < 10; i++) { /* beyond the ring too */
        e = cqe(i);
        vofi_cq_write(cq, &e);
        VT_CHECK(readable(fd));
    }
    VT_CHECK(fi_cq_read(&cq->fid, c, 8) == 8);
    VT_CHECK(readable(fd)); /* two left */
    VT_CHECK(fi_cq_read(&cq->fid, c, 8) == 2);
    VT_CHECK(!readable(fd));
    vofi_cq_write_err(cq, &e);
    VT_CHECK(readable(fd));
    struct fi_cq_err_entry ee = {0};
    VT_CHECK(fi_cq_readerr(&cq->fid, &ee, 0) == 1);
    VT_CHECK(!readable(fd));
    fi_cq_signal(&cq->fid);
    VT_CHECK(readable(fd) && vofi_cq_ready(cq) == 1);
    VT_CHECK(fi_cq_sread(&cq->fid, c, 1, NULL, 10000) == -FI_EAGAIN); /* the signal */
    VT_CHECK(!readable(fd) && vofi_cq_ready(cq) == 0);
    /* One who sleeps on the fd and reads takes the signal too. */
    fi_cq_signal(&cq->fid);
    VT_CHECK(readable(fd));
    VT_CHECK(fi_cq_read(&cq->fid, c, 8) == -FI_EAGAIN);
    VT_CHECK(!readable(fd) && vofi_cq_ready(cq) == 0);

    /* An endpoint bound before it has a wait fd: added once it has one. */
    struct fake_ep *f = &feps[1];
    f->fd = -1;
    f->cq = cq;
    VT_CHECK(vofi_cq_bind_ep(cq, &f->ep) == 0);
    VT_CHECK(cq->ep_fd[0] == -1);
    f->fd = f->evfd;
    VT_CHECK(vofi_cq_ready(cq) == 0); /* as fi_trywait would ask */
    VT_CHECK(cq->ep_fd[0] == f->evfd);
    ep_arrive(f, 1);
    VT_CHECK(readable(fd));
    VT_CHECK(fi_cq_read(&cq->fid, c, 8) == 1 && c[0].op_context == f);
    VT_CHECK(!readable(fd));
    vofi_cq_unbind_ep(cq, &f->ep);
    f->cq = NULL;
    VT_CHECK(fi_close(&cq->fid.fid) == 0);
}

static vofi_cq_t *th_cq;
static int th_what;

static void *th_cq_main(void *arg)
{
    usleep(50000);
    if (th_what == 0) {
        vofi_cqe_t e = cqe(5);
        vofi_cq_write(th_cq, &e);
    } else if (th_what == 1) {
        fi_cq_signal(&th_cq->fid);
    } else {
        ep_arrive(&feps[2], 1);
    }
    return NULL;
}

static void t_sread(void)
{
    vofi_cq_t *cq = cq_open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD, 4);
    struct fi_cq_entry c[2];
    fi_addr_t src[2];
    double t0 = vt_now();
    VT_CHECK(fi_cq_sread(&cq->fid, c, 2, NULL, 100) == -FI_EAGAIN);
    VT_CHECK(vt_now() - t0 >= 0.09); /* it did wait */
    VT_CHECK(fi_cq_sread(&cq->fid, c, 2, NULL, 0) == -FI_EAGAIN);
    /* Woken by another thread's completion, by a signal, by an endpoint. */
    feps[2].cq = cq;
    VT_CHECK(vofi_cq_bind_ep(cq, &feps[2].ep) == 0);
    for (th_what = 0; th_what < 3; th_what++) {
        pthread_t th;
        th_cq = cq;
        VT_CHECK(pthread_create(&th, NULL, th_cq_main, NULL) == 0);
        ssize_t r = fi_cq_sreadfrom(&cq->fid, c, 2, src, NULL, -1);
        VT_CHECK(pthread_join(th, NULL) == 0);
        if (th_what == 0)
            VT_CHECK(r == 1 && c[0].op_context == (void *)6 && src[0] == 5);
        else if (th_what == 1)
            VT_CHECK(r == -FI_EAGAIN);
        else
            VT_CHECK(r == 1 && c[0].op_context == &feps[2]);
        VT_CHECK(cq->waiters == 0);
    }
    /* An error wakes it too, and is reported as such. */
    th_what = 0;
    vofi_cqe_t e = cqe(1);
    e.err = FI_ECANCELED;
    vofi_cq_write_err(cq, &e);
    VT_CHECK(fi_cq_sread(&cq->fid, c, 2, NULL, 10000) == -FI_EAVAIL);
    vofi_cq_unbind_ep(cq, &feps[2].ep);
    feps[2].cq = NULL;
    VT_CHECK(fi_close(&cq->fid.fid) == 0);
}

/* Several threads in sread, others writing: every completion read once. */
#define MT_W 2
#define MT_N 3000
static _Atomic int mt_got;
static void *mt_writer(void *arg)
{
    for (uintptr_t i = 0; i < MT_N; i++) {
        vofi_cqe_t e = cqe(i);
        vofi_cq_write(th_cq, &e);
        if (i % 64 == 0)
            usleep(100);
    }
    return NULL;
}
static void *mt_reader(void *arg)
{
    struct fi_cq_entry c[7];
    while (atomic_load(&mt_got) < MT_W * MT_N) {
        ssize_t r = fi_cq_sread(&th_cq->fid, c, 7, NULL, 10000);
        if (r > 0)
            atomic_fetch_add(&mt_got, (int)r);
        else if (r != -FI_EAGAIN)
            VT_FAIL("sread: %zd", r);
    }
    fi_cq_signal(&th_cq->fid); /* the other reader may sleep still */
    return NULL;
}

static void t_sread_threads(void)
{
    th_cq = cq_open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD, 16);
    pthread_t w[MT_W], r[2];
    for (int i = 0; i < 2; i++)
        VT_CHECK(pthread_create(&r[i], NULL, mt_reader, NULL) == 0);
    for (int i = 0; i < MT_W; i++)
        VT_CHECK(pthread_create(&w[i], NULL, mt_writer, NULL) == 0);
    for (int i = 0; i < MT_W; i++)
        pthread_join(w[i], NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(r[i], NULL);
    VT_CHECK(atomic_load(&mt_got) == MT_W * MT_N);
    VT_CHECK(fi_close(&th_cq->fid.fid) == 0);
}

int main(void)
{
    alarm(120); /* nothing here may hang */
    fake_setup();
    t_open_attrs();
    t_formats();
    t_overflow();
    t_errors();
    t_no_memory();
    t_bind_progress();
    t_fd();
    t_sread();
    t_sread_threads();
    printf("ok\n");
    return 0;
}

