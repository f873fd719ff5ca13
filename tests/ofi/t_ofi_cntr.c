/* The provider's counters alone (src/ofi/ofi_cntr.c), with fakes of the
 * rest of the provider (ofi_fake.c).
 *
 * Every wait is bounded: cntr_wait with long timeouts, and an alarm. */
#include <pthread.h>
#include <unistd.h>

#include "ofi_fake.h"
#include "vtest.h"

static void *ep_arrive_later(void *arg)
{
    usleep(50000);
    ep_arrive(arg, 1);
    return NULL;
}

static vofi_cntr_t *cntr_open(enum fi_wait_obj w)
{
    struct fi_cntr_attr a = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = w};
    struct fid_cntr *f = NULL;
    int r = fi_cntr_open(&dom.fid, &a, &f, NULL);
    if (r)
        VT_FAIL("cntr_open: %d (%s)", r, last_warn);
    return (vofi_cntr_t *)(void *)f;
}

static vofi_cntr_t *th_c;
static _Atomic int th_step;

static void *th_cntr_main(void *arg)
{
    for (int i = 0; i < 10; i++) {
        usleep(5000);
        vofi_cntr_inc(th_c);
    }
    atomic_store(&th_step, 1);
    usleep(20000);
    fi_cntr_add(&th_c->fid, 5); /* 15 */
    usleep(20000);
    vofi_cntr_err(th_c);
    return NULL;
}

static void *th_waiter(void *arg)
{
    uint64_t want = (uint64_t)(uintptr_t)arg;
    int r = fi_cntr_wait(&th_c->fid, want, 20000);
    if (r)
        VT_FAIL("waiter for %llu: %d", (unsigned long long)want, r);
    return NULL;
}

static void t_cntr(void)
{
    struct fid_cntr *f;
    struct fi_cntr_attr bad[] = {
        {.events = (enum fi_cntr_events)9},
        {.wait_obj = FI_WAIT_SET},
        {.wait_obj = FI_WAIT_MUTEX_COND},
        {.flags = 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        VT_CHECK(fi_cntr_open(&dom.fid, &bad[i], &f, NULL) == -FI_ENOSYS);

    vofi_cntr_t *c = cntr_open(FI_WAIT_NONE);
    int fd;
    VT_CHECK(fi_control(&c->fid.fid, FI_GETWAIT, &fd) == -FI_ENODATA);
    VT_CHECK(fi_cntr_read(&c->fid) == 0 && fi_cntr_readerr(&c->fid) == 0);
    VT_CHECK(fi_cntr_add(&c->fid, 7) == 0 && fi_cntr_read(&c->fid) == 7);
    VT_CHECK(fi_cntr_set(&c->fid, 3) == 0 && fi_cntr_read(&c->fid) == 3);
    VT_CHECK(fi_cntr_adderr(&c->fid, 2) == 0 && fi_cntr_readerr(&c->fid) == 2);
    VT_CHECK(fi_cntr_seterr(&c->fid, 1) == 0 && fi_cntr_readerr(&c->fid) == 1);
    vofi_cntr_inc(c);
    vofi_cntr_err(c);
    VT_CHECK(fi_cntr_read(&c->fid) == 4 && fi_cntr_readerr(&c->fid) == 2);
    VT_CHECK(!readable(c->efd)); /* nobody waits: no eventfd write */
    VT_CHECK(fi_cntr_wait(&c->fid, 4, 0) == 0);
    double t0 = vt_now();
    VT_CHECK(fi_cntr_wait(&c->fid, 5, 50) == -FI_ETIMEDOUT);
    VT_CHECK(vt_now() - t0 >= 0.04);
    VT_CHECK(fi_cntr_readerr(&c->fid) == 2); /* unchanged by the timeout */

    /* Reads and waits progress the bound endpoints. */
    struct fake_ep *ep = &feps[3];
    ep->cntr = c;
    VT_CHECK(vofi_cntr_bind_ep(c, &ep->ep) == 0);
    VT_CHECK(fi_close(&c->fid.fid) == -FI_EBUSY);
    atomic_store(&ep->pending, 1);
    VT_CHECK(fi_cntr_read(&c->fid) == 5);
    atomic_store(&ep->pending, 1);
    VT_CHECK(fi_cntr_wait(&c->fid, 6, 10000) == 0);
    /* ... and wake up when an endpoint has work. */
    th_c = c;
    feps[2].cntr = c;
    VT_CHECK(vofi_cntr_bind_ep(c, &feps[2].ep) == 0);
    pthread_t th;
    VT_CHECK(pthread_create(&th, NULL, ep_arrive_later, &feps[2]) == 0);
    VT_CHECK(fi_cntr_wait(&c->fid, 7, -1) == 0);
    pthread_join(th, NULL);
    vofi_cntr_unbind_ep(c, &feps[2].ep);
    feps[2].cntr = NULL;

    /* Thresholds reached by another thread; an error ends a wait. */
    fi_cntr_set(&c->fid, 0);
    atomic_store(&th_step, 0);
    VT_CHECK(pthread_create(&th, NULL, th_cntr_main, NULL) == 0);
    VT_CHECK(fi_cntr_wait(&c->fid, 10, 20000) == 0);
    VT_CHECK(fi_cntr_read(&c->fid) >= 10);
    VT_CHECK(fi_cntr_wait(&c->fid, 15, 20000) == 0);
    VT_CHECK(fi_cntr_wait(&c->fid, 100, 20000) == -FI_EAVAIL);
    VT_CHECK(fi_cntr_readerr(&c->fid) == 3);
    pthread_join(th, NULL);

    /* Several waiters with different thresholds: none sleeps through its own. */
    for (int round = 0; round < 20; round++) {
        fi_cntr_set(&c->fid, 0);
        pthread_t w[3];
        for (uintptr_t i = 0; i < 3; i++)
            VT_CHECK(pthread_create(&w[i], NULL, th_waiter, (void *)(i * 2 + 1)) == 0);
        for (int i = 0; i < 5; i++) {
            usleep(1000);
            vofi_cntr_inc(c);
        }
        for (int i = 0; i < 3; i++)
            pthread_join(w[i], NULL);
        /* Each wake-up was taken by the one it was for: none left over. */
        VT_CHECK(atomic_load(&c->waiters) == 0 && !readable(c->efd));
    }
    vofi_cntr_unbind_ep(c, &ep->ep);
    ep->cntr = NULL;
    VT_CHECK(fi_close(&c->fid.fid) == 0);

    /* The fd: readable after a change, until the counter is read. */
    c = cntr_open(FI_WAIT_FD);
    enum fi_wait_obj wo;
    VT_CHECK(fi_control(&c->fid.fid, FI_GETWAITOBJ, &wo) == 0 && wo == FI_WAIT_FD);
    VT_CHECK(fi_control(&c->fid.fid, FI_GETWAIT, &fd) == 0);
    fi_cntr_read(&c->fid);
    VT_CHECK(!readable(fd) && vofi_cntr_ready(c) == 0);
    vofi_cntr_inc(c);
    VT_CHECK(readable(fd) && vofi_cntr_ready(c) == 1);
    vofi_cntr_inc(c);
    VT_CHECK(fi_cntr_read(&c->fid) == 2);
    VT_CHECK(!readable(fd) && vofi_cntr_ready(c) == 0);
    vofi_cntr_err(c);
    VT_CHECK(readable(fd));
    VT_CHECK(fi_cntr_wait(&c->fid, 2, 1000) == 0);
    VT_CHECK(!readable(fd));
    VT_CHECK(fi_close(&c->fid.fid) == 0);
}

int main(void)
{
    alarm(120); /* nothing here may hang */
    fake_setup();
    t_cntr();
    printf("ok\n");
    return 0;
}
