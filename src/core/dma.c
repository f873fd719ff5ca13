/* The copy engine: a thread that carries out large asynchronous sends while
 * the application computes, the way a network interface's DMA engine would.
 * It is started on the first large asynchronous send, spins for
 * VMMC_DMA_SPIN after its queue empties (so back-to-back sends do not pay a
 * ~30 us wake-up), then sleeps on a condition variable. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

/* Where the engine runs. Like a NIC's DMA engine it should not share the
 * caller's CPU, or "asynchronous" only means "later": a launcher that binds
 * each rank to one CPU would otherwise bind the engine there too. "auto"
 * takes every online CPU but the one the first asynchronous send came from
 * (all of them on a one-CPU machine); a number pins it; "inherit" keeps the
 * caller's affinity. */
static void place_engine(pthread_t t, int caller_cpu)
{
    const char *how = vmmc_core_cfg.dma_cpu;
    if (!strcmp(how, "inherit"))
        return;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1 || ncpu > CPU_SETSIZE)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (strcmp(how, "auto") != 0) {
        char *end;
        long c = strtol(how, &end, 10);
        if (*end || c < 0 || c >= ncpu) {
            vmmc_warn("VMMC_DMA_CPU=%s is not auto, inherit or a CPU number below %ld", how, ncpu);
            return;
        }
        CPU_SET((int)c, &set);
    } else {
        for (int c = 0; c < ncpu; c++)
            if (c != caller_cpu || ncpu == 1)
                CPU_SET(c, &set);
    }
    int e = pthread_setaffinity_np(t, sizeof set, &set);
    if (e)
        vmmc_debug("copy engine affinity not set: %s", strerror(e));
}

static vmmc_req_int_t *pop(vmmc_ep_t *ep)
{
    pthread_mutex_lock(&ep->dma_lock);
    vmmc_req_int_t *r = ep->dma_head;
    if (r) {
        ep->dma_head = r->next;
        if (!ep->dma_head)
            ep->dma_tail = NULL;
    }
    pthread_mutex_unlock(&ep->dma_lock);
    return r;
}

static void *dma_main(void *arg)
{
    vmmc_ep_t *ep = arg;
    for (;;) {
        vmmc_req_int_t *r = pop(ep);
        if (r) {
            vmmc_proxy_t *px = r->px;
            vmmc_peer_t *peer = px->peer;
            uint32_t type = r->type;
            int rc = VMMC_OK;
            if (type == REQ_CQ)
                vmmc_cq_run(r); /* completes into its queue; r is no longer ours */
            else if (atomic_load(&px->state) != PX_ACTIVE)
                rc = vmmc_proxy_state_error(px);
            else if (type == REQ_FETCH)
                rc = px->get(&px->view, r->off, (void *)r->src, r->len);
            else
                rc = px->put(&px->view, r->off, r->src, r->len, (int)r->flags, r->imm);
            atomic_fetch_sub(&ep->dma_pending, 1);
            VMMC_COUNT(ep, CNT_ASYNC_ENGINE, 1);
            /* After this store the request belongs to the application again. */
            if (type != REQ_CQ)
                atomic_store_explicit(&r->status, rc, memory_order_release);
            atomic_fetch_sub_explicit(&peer->async_inflight, 1, memory_order_release);
            /* Waiters look at the request; a progress hook may too. */
            if (atomic_load_explicit(&ep->nhooks, memory_order_acquire))
                vmmc_ep_wake(ep);
            else
                vmmc_ep_wake_waiters(ep);
            continue;
        }
        if (atomic_load(&ep->dma_stop))
            break;
        uint64_t t0 = vmmc_now_ns();
        while (!atomic_load_explicit(&ep->dma_pending, memory_order_acquire) &&
               !atomic_load(&ep->dma_stop) && vmmc_now_ns() - t0 < vmmc_core_cfg.dma_spin_ns)
            __builtin_ia32_pause();
        pthread_mutex_lock(&ep->dma_lock);
        while (!ep->dma_head && !atomic_load(&ep->dma_stop)) {
            atomic_store(&ep->dma_sleeping, 1);
            pthread_cond_wait(&ep->dma_cond, &ep->dma_lock);
            atomic_store(&ep->dma_sleeping, 0);
        }
        pthread_mutex_unlock(&ep->dma_lock);
    }
    return NULL;
}

int vmmc_dma_submit(vmmc_ep_t *ep, vmmc_req_int_t *r)
{
    r->next = NULL;
    pthread_mutex_lock(&ep->dma_lock);
    if (!ep->dma_started) {
        int e = pthread_create(&ep->dma_thread, NULL, dma_main, ep);
        if (e) {
            pthread_mutex_unlock(&ep->dma_lock);
            errno = e;
            return vmmc_error_sys("pthread_create (copy engine)");
        }
        place_engine(ep->dma_thread, sched_getcpu());
        ep->dma_started = 1;
    }
    if (ep->dma_tail)
        ep->dma_tail->next = r;
    else
        ep->dma_head = r;
    ep->dma_tail = r;
    atomic_fetch_add_explicit(&ep->dma_pending, 1, memory_order_release);
    if (atomic_load(&ep->dma_sleeping))
        pthread_cond_signal(&ep->dma_cond);
    pthread_mutex_unlock(&ep->dma_lock);
    return VMMC_OK;
}

int vmmc_dma_post(vmmc_proxy_t *px, vmmc_req_int_t *r)
{
    atomic_fetch_add_explicit(&px->peer->async_inflight, 1, memory_order_acq_rel);
    int rc = vmmc_dma_submit(px->ep, r);
    if (rc != VMMC_OK) {
        atomic_fetch_sub(&px->peer->async_inflight, 1);
        atomic_store(&r->status, rc);
    }
    return rc;
}

void vmmc_dma_stop(vmmc_ep_t *ep)
{
    pthread_mutex_lock(&ep->dma_lock);
    int started = ep->dma_started;
    atomic_store(&ep->dma_stop, 1);
    pthread_cond_signal(&ep->dma_cond);
    pthread_mutex_unlock(&ep->dma_lock);
    if (started)
        pthread_join(ep->dma_thread, NULL);
    ep->dma_started = 0;
}
