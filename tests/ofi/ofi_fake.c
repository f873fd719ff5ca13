/* Fakes of the rest of the provider for the CQ and counter tests. */
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ofi_fake.h"
#include "vtest.h"

vofi_settings_t vofi_set = {.cq_size = 32};
char last_warn[256];

void vofi_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_warn, sizeof last_warn, fmt, ap);
    va_end(ap);
}

void vofi_info(const char *fmt, ...) {}

struct fake_ep feps[NEP];

static struct fake_ep *fake_of(vofi_ep_t *ep)
{
    for (int i = 0; i < NEP; i++)
        if (&feps[i].ep == ep)
            return &feps[i];
    VT_FAIL("unknown endpoint");
}

int vofi_ep_progress(vofi_ep_t *ep)
{
    struct fake_ep *f = fake_of(ep);
    uint64_t v;
    int n = 0;
    atomic_fetch_add(&f->progressed, 1);
    if (f->fd >= 0)
        (void)!read(f->fd, &v, sizeof v);
    for (int p = atomic_exchange(&f->pending, 0); p > 0; p--, n++) {
        pthread_mutex_lock(&ep->lock); /* as the endpoint would write */
        if (f->cq) {
            vofi_cqe_t e = {.op_context = f, .flags = FI_RECV, .src = FI_ADDR_NOTAVAIL};
            vofi_cq_write(f->cq, &e);
        }
        if (f->cntr)
            vofi_cntr_inc(f->cntr);
        pthread_mutex_unlock(&ep->lock);
    }
    return n;
}

/* The fake's every pass empties its fd already. */
int vofi_ep_progress_wait(vofi_ep_t *ep)
{
    return vofi_ep_progress(ep);
}

int vofi_ep_wait_fd(vofi_ep_t *ep)
{
    return fake_of(ep)->fd;
}

void ep_arrive(struct fake_ep *f, int n)
{
    uint64_t one = 1;
    atomic_fetch_add(&f->pending, n);
    VT_CHECK(write(f->evfd, &one, sizeof one) == sizeof one);
}

vofi_fabric_t fab;
vofi_domain_t dom;
struct fi_ops_domain dom_ops = {
    .size = sizeof(struct fi_ops_domain),
    .cq_open = vofi_cq_open,
    .cntr_open = vofi_cntr_open,
};

void fake_setup(void)
{
    fab.fid.fid.fclass = FI_CLASS_FABRIC;
    fab.fid.api_version = FI_VERSION(1, 17);
    dom.fid.fid.fclass = FI_CLASS_DOMAIN;
    dom.fid.ops = &dom_ops;
    dom.fab = &fab;
    for (int i = 0; i < NEP; i++) {
        pthread_mutex_init(&feps[i].ep.lock, NULL);
        feps[i].evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        VT_CHECK(feps[i].evfd >= 0);
        feps[i].fd = feps[i].evfd;
    }
}

int readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

