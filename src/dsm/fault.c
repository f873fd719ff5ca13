/* Faults: the SIGSEGV handler and the one path every access request takes
 * (a fault, or vmmc_dsm_prefetch()).
 *
 * The handler looks only at faults inside the application views; any other
 * fault goes to the handler that was installed before (or to the default
 * action: an ordinary segfault), as does an access to an address that holds
 * no minipage. Read or write comes from the page-fault error code the
 * kernel saves in the context (x86-64: bit 1 of REG_ERR); elsewhere a fault
 * on a readable minipage is a write. The faulting thread sends its request
 * and waits as other waits in the DSM do (wait.c): while the service thread
 * sleeps, it handles the rank's messages itself for up to
 * VMMC_DSM_WAIT_POLL (the answer that opens the minipage, and whatever else
 * comes meanwhile), then sleeps on a condition variable until the service
 * thread has opened the minipage (VMMC_DSM_FAULT_POLL=n: at once). Other
 * threads' faults on the same page and view wait for the request in flight
 * instead of sending their own. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <ucontext.h>

#include "dsm/dsm_int.h"

int dsm_addr_id(const void *p, uint32_t *id, size_t *off_in_page)
{
    const char *c = p;
    if (!dsm.base || c < dsm.base || c >= dsm.base + (size_t)dsm.views * dsm.size)
        return -1;
    size_t d = (size_t)(c - dsm.base);
    unsigned view = (unsigned)(d / dsm.size);
    size_t off = d % dsm.size;
    *id = (uint32_t)((off / DSM_PAGE) * dsm.views + view);
    if (off_in_page)
        *off_in_page = off % DSM_PAGE;
    return 0;
}

int dsm_acquire(void *addr, int write, int from_fault)
{
    uint32_t id;
    if (dsm_addr_id(addr, &id, NULL) != 0)
        return dsm_error(VMMC_ERR_BOUNDS, "%p is not in the shared area", addr);
    int need = write ? ACC_W : ACC_R;
    int sent = 0, st = VMMC_OK;
    dsm_sched_skip_thread(1); /* an application thread (sched.c) */
    uint64_t t0 = 0;
    pthread_mutex_lock(&dsm.lock);
    if (dsm.funneled && !pthread_equal(pthread_self(), dsm.init_thread))
        dsm_fatal("VMMC_DSM_THREADS=funneled, but a thread other than the one that called "
                  "vmmc_dsm_init() accessed the shared area at %p (use multiple)",
                  addr);
    if (from_fault)
        atomic_fetch_add(write ? &dsm.st_write_faults : &dsm.st_read_faults, 1);
    for (;;) {
        uint8_t a = dsm.acc[id];
        if ((a & ACC_MASK) >= need)
            break;
        if (a & ACC_NACK) { /* this thread takes the answer; others ask again */
            dsm.acc[id] &= (uint8_t)~ACC_NACK;
            st = dsm_error(VMMC_ERR_NOT_FOUND, "%p is in no allocation of the shared area", addr);
            break;
        }
        if (!(a & ACC_INFLIGHT)) {
            /* nobody asks (or the answer came and was taken away again) */
            dsm.acc[id] = (uint8_t)(a | ACC_INFLIGHT);
            if (!sent)
                t0 = dsm_now_ns();
            sent = 1;
            int owner = dsm.hint[id] - 1; /* known only for a minipage's first page */
            if (!write && dsm_cfg.onehop && owner >= 0 && owner != dsm.me)
                dsm_post(owner, dsm_imm(M_REQ_D, (unsigned)dsm.me, id, 0)); /* one hop */
            else
                dsm_post(dsm_route(id),
                         dsm_imm(write ? M_REQ_W : M_REQ_R, (unsigned)dsm.me, id, 0));
            dsm_unlock_flush();
            pthread_mutex_lock(&dsm.lock);
            if (dsm.funneled && from_fault && !dsm.early_open) {
                dsm.early_want = 1; /* opened by the waiting thread (wait.c) */
                dsm.early_id = id;
                dsm.early_acc = need;
            }
            continue;
        }
        st = dsm_wait_locked(dsm_cfg.fault_poll ? DSM_WAIT_ACCESS : 0);
        if (st != VMMC_OK)
            break;
    }
    if (sent && st == VMMC_OK)
        dsm_stats_delay(dsm_now_ns() - t0);
    dsm.early_want = 0;
    if (dsm.early_open) /* no answer set it (an error): the protocol's access */
        dsm_protect(id % dsm.views, id / dsm.views, 1, dsm.acc[id] & ACC_MASK);
    dsm_unlock();
    return st;
}

static void chain(int sig, siginfo_t *si, void *uc)
{
    struct sigaction *o = &dsm.old_segv;
    if ((o->sa_flags & SA_SIGINFO) && o->sa_sigaction) {
        o->sa_sigaction(sig, si, uc);
    } else if (o->sa_handler == SIG_DFL || o->sa_handler == SIG_IGN) {
        /* the instruction runs again and the default action ends the process */
        signal(SIGSEGV, SIG_DFL);
    } else {
        o->sa_handler(sig);
    }
}

static int is_write(void *uc, uint32_t id)
{
#if defined(__x86_64__)
    (void)id;
    return (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)uc;
    return (dsm.acc[id] & ACC_MASK) >= ACC_R; /* readable, yet it faulted */
#endif
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    uint32_t id;
    if (!dsm.active || dsm_addr_id(si->si_addr, &id, NULL) != 0) {
        chain(sig, si, uc);
        return;
    }
    int saved = errno;
    int st = dsm_acquire(si->si_addr, is_write(uc, id), 1);
    if (st == VMMC_ERR_NOT_FOUND) {
        errno = saved;
        chain(sig, si, uc);
        return;
    }
    if (st != VMMC_OK)
        dsm_fatal("an access to %p cannot be served: %s", si->si_addr, vmmc_dsm_last_error());
    errno = saved;
}

int dsm_fault_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &dsm.old_segv) != 0)
        return dsm_error(VMMC_ERR_SYSTEM, "vmmc_dsm_init: sigaction(SIGSEGV): %s", strerror(errno));
    return VMMC_OK;
}

void dsm_fault_remove(void)
{
    struct sigaction cur;
    if (sigaction(SIGSEGV, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
        cur.sa_sigaction == on_segv)
        sigaction(SIGSEGV, &dsm.old_segv, NULL);
}
