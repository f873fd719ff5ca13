/**
 * @file dsm.h
 * @brief MILLIPAGE-style distributed shared memory on vmmc (libvmmc-dsm).
 *
 * A sequentially consistent shared area, at the same virtual address in
 * every rank of a job started by `vmmc run` (or by a PMIx launcher), on one
 * host (shm) or across hosts (udp). Each allocation is its own *minipage*:
 * a (view, offset, length) triple. The area is one memory object mapped
 * several times ("MultiView"): the application reaches each minipage of a
 * page through a different view, so the MMU protects minipages of one page
 * independently and there is no false sharing between them. A privileged
 * view that the application never sees lets the library receive a minipage
 * straight into place while the application's view stays protected.
 *
 * Accesses to a minipage that this rank may not read (or write) fault; the
 * library's SIGSEGV handler asks the minipage's manager, which forwards the
 * request to the owner (a read fault asks the owner straight away when this
 * rank knows it); the owner sends the contents, read copies being
 * invalidated first on a write fault (single writer / multiple readers). The
 * faulting thread waits until the minipage arrives: it handles the answer
 * itself for up to VMMC_DSM_WAIT_POLL while the service thread sleeps, then
 * blocks. Requests from other ranks are served by a service thread while
 * the application computes.
 *
 * @code
 *   vmmc_dsm_init(NULL);                       // collective
 *   long *counter = NULL;
 *   if (vmmc_dsm_rank() == 0) { counter = vmmc_dsm_malloc(sizeof *counter); *counter = 0; }
 *   vmmc_dsm_bcast_ptr((void **)&counter, 0);  // same address in every rank
 *   vmmc_dsm_lock(0); ++*counter; vmmc_dsm_unlock(0);
 *   vmmc_dsm_barrier();
 *   vmmc_dsm_finalize();                       // collective
 * @endcode
 *
 * Errors: the calls return 0 or a negative VMMC_ERR_* (vmmc/vmmc.h), with
 * vmmc_dsm_last_error() saying why; the allocation calls return NULL and
 * set the same message. An access that the protocol cannot satisfy (a rank that
 * died holding the minipage, a protocol error) cannot be returned to the
 * faulting instruction: the library prints the reason and exits non-zero.
 *
 * Threads: one application thread per rank calls the DSM (the calls are
 * not reentrant); other threads may touch shared memory, each faulting
 * thread waits for its own minipage. With VMMC_DSM_THREADS=funneled the
 * application promises that only the thread that called vmmc_dsm_init()
 * touches the shared area (a fault of another thread ends the process with
 * a message); a fault then opens its page while the request travels (on
 * one host, where the faulting thread handles its answer itself).
 *
 * Settings (environment, `vmmc info -c` lists them): VMMC_DSM_SIZE,
 * VMMC_DSM_VIEWS, VMMC_DSM_PAGE (1: page mode, 4 KiB granularity and one
 * view), VMMC_DSM_ONEHOP, VMMC_DSM_THREADS, VMMC_DSM_DEBUG, and the waiting
 * and scheduling ones in docs/dsm.md, which is the manual.
 */
#ifndef VMMC_DSM_H
#define VMMC_DSM_H

#include <stddef.h>
#include <stdint.h>

#include "vmmc/vmmc.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Number of global locks (ids 0 .. VMMC_DSM_LOCKS-1). */
#define VMMC_DSM_LOCKS 64

/** Parameters of vmmc_dsm_init(); zero fields take the defaults. */
typedef struct vmmc_dsm_params {
    size_t size;    /**< shared area bytes (0: VMMC_DSM_SIZE, default 64M);
                         rounded up to whole pages; the same in every rank */
    unsigned views; /**< application views = most minipages one page can
                         hold (0: VMMC_DSM_VIEWS, default 32); 1 in page mode */
} vmmc_dsm_params_t;

/**
 * @brief Join the DSM: collective over the job.
 *
 * Opens a vmmc endpoint (vmmc_init()), maps the shared area at an address
 * chosen by rank 0 in every rank (fails with VMMC_ERR_NOMEM and a message
 * if that address is taken in some rank), installs the SIGSEGV handler
 * (the previous handler still gets faults outside the shared area) and
 * starts the service thread.
 * @param p NULL for the defaults. Every rank must pass the same values.
 * @return 0; VMMC_ERR_BUSY if already initialised; VMMC_ERR_INVALID for
 *         bad parameters or ranks that disagree; VMMC_ERR_SYSTEM,
 *         VMMC_ERR_NOMEM, or the error of vmmc_init().
 */
VMMC_API int vmmc_dsm_init(const vmmc_dsm_params_t *p);

/**
 * @brief Leave the DSM: collective. A barrier, then the service thread
 * stops, the handler is restored and the area is unmapped: pointers into
 * it are invalid afterwards.
 */
VMMC_API int vmmc_dsm_finalize(void);

/** @brief This rank (0 .. size-1), or -1 before vmmc_dsm_init(). */
VMMC_API int vmmc_dsm_rank(void);
/** @brief Number of ranks, or -1 before vmmc_dsm_init(). */
VMMC_API int vmmc_dsm_size(void);

/**
 * @brief Allocate @p n bytes as a minipage of their own. Not collective:
 * any rank may allocate; the manager chooses the place. The address is the
 * same in every rank, so it can be passed through shared memory. The
 * calling rank owns the new minipage (writable, zero-filled).
 * Allocations of more than a page take whole pages of their own and are
 * one minipage.
 * @return the address, or NULL with vmmc_dsm_last_error() set: out of shared
 *         space (VMMC_DSM_SIZE raises it), out of views (VMMC_DSM_VIEWS).
 */
VMMC_API void *vmmc_dsm_malloc(size_t n);

/**
 * @brief Like vmmc_dsm_malloc(), but allocations with the same @p chunk id
 * (>= 0) share minipages while they fit in one page ("chunking"): data that
 * is used together moves together. A chunk's minipage grows only while no
 * other rank has a copy of it; otherwise a new minipage starts.
 */
VMMC_API void *vmmc_dsm_malloc_chunk(size_t n, int chunk);

/**
 * @brief Free an allocation (its whole minipage once every allocation in
 * it is freed). Any rank may free; no rank may touch it afterwards.
 * A pointer that vmmc_dsm_malloc() did not return is reported (message)
 * and ignored.
 */
VMMC_API void vmmc_dsm_free(void *p);

/** @brief Acquire global lock @p id (0 .. VMMC_DSM_LOCKS-1); blocks. */
VMMC_API int vmmc_dsm_lock(int id);
/** @brief Release global lock @p id; VMMC_ERR_INVALID if not held here. */
VMMC_API int vmmc_dsm_unlock(int id);

/** @brief Wait until every rank reached the barrier (collective);
 *  VMMC_ERR_PEER_DEAD if a rank died. */
VMMC_API int vmmc_dsm_barrier(void);

/**
 * @brief Give every other rank a readable copy of the minipage holding
 * @p p (this rank keeps a read copy; it must be able to read it, and
 * becomes or stays the owner). Later reads of it elsewhere do not fault.
 */
VMMC_API int vmmc_dsm_push(void *p);

/**
 * @brief Fetch the minipage holding @p p now, readable (@p write 0) or
 * writable (@p write 1), as the fault would: it returns when the access is
 * allowed.
 */
VMMC_API int vmmc_dsm_prefetch(void *p, int write);

/** @brief Collective: every rank's *@p p becomes rank @p root's. */
VMMC_API int vmmc_dsm_bcast_ptr(void **p, int root);

/** Counters of this rank, since vmmc_dsm_init(). */
typedef struct vmmc_dsm_stats {
    uint64_t read_faults;     /**< read faults taken on the shared area */
    uint64_t write_faults;    /**< write faults (including upgrades) */
    uint64_t requests_served; /**< minipage requests served as owner */
    uint64_t invalidations;   /**< read copies invalidated here */
    uint64_t forwards;        /**< requests forwarded as manager */
    uint64_t bytes_in;        /**< minipage bytes received */
    uint64_t delay_ns_sum;    /**< request delay summed, ns: how long this
                                   rank's faults (and prefetches) waited,
                                   from the request leaving to the
                                   minipage open (the manager, the owner's
                                   service thread and the transfer) */
    uint64_t delay_ns_max;    /**< longest request delay, ns */
    uint64_t delay_count;     /**< requests whose delay was recorded */
    uint64_t delay_hist[16];  /**< request delay histogram: bucket i counts
                                   delays < 2^i µs and >= 2^(i-1) µs
                                   (bucket 0: < 1 µs), bucket 15 every
                                   delay from 2^14 µs up */
    /* The serving side (MILLIPAGE's "request delay"): requests that reached
     * this rank from another rank on the same host (as manager, owner or
     * holder: a read or write request, a forwarded one, an invalidation),
     * from their arrival (the sender's clock at the send: ranks on other
     * hosts have another clock and are not counted) to the moment this
     * rank has served them (its answer or forward sent). */
    uint64_t serve_ns_sum;      /**< arrival -> served, summed, ns */
    uint64_t serve_ns_max;      /**< longest arrival -> served, ns */
    uint64_t serve_count;       /**< requests counted in serve_* */
    uint64_t serve_wait_ns_sum; /**< the part of serve_ns_sum spent before
                                     this rank's handler started: waiting
                                     for its service thread to run */
    uint64_t serve_wait_ns_max; /**< longest such wait, ns */
    uint64_t serve_hist[16];    /**< arrival -> served, buckets as
                                     delay_hist */
    uint64_t spin_yields;       /**< times vmmc's spin in this rank gave its
                                     core away while an application thread
                                     waited in the DSM (VMMC_DSM_SPIN_YIELD) */
    uint64_t bad_messages;      /**< messages from other ranks dropped
                                     because they broke the protocol (a
                                     field out of range, a type the sender
                                     may not send, a step nobody asked
                                     for); VMMC_DSM_DEBUG=1 prints each */
    uint64_t wait_timeouts;     /**< waits of an application thread (a fault,
                                     a lock, the barrier) that reached the
                                     100 ms death check before their answer
                                     woke them: a wait that long, or an
                                     answer whose wake-up was lost */
    uint64_t messages_sent;     /**< protocol messages sent to other ranks */
    uint64_t outbox;            /**< messages posted and not yet sent (or,
                                     for this rank itself, handled) at the
                                     call: 0 unless another thread of this
                                     rank is in the middle of sending. What a
                                     handler posts is sent before the
                                     threads it woke run, so a thread back
                                     from a fault, lock or barrier finds 0 */
    uint64_t polled_waits;      /**< waits (a fault, a lock, the barrier, a
                                     reply of the manager) whose answer the
                                     waiting thread handled itself while the
                                     service thread slept
                                     (VMMC_DSM_WAIT_POLL) */
    uint64_t polled_faults;     /**< of those, waits for a minipage (a
                                     fault, or vmmc_dsm_prefetch();
                                     VMMC_DSM_FAULT_POLL) */
    uint64_t opened_early;      /**< faults whose page was opened while the
                                     request travelled
                                     (VMMC_DSM_THREADS=funneled) */
} vmmc_dsm_stats_t;

/** @brief Copy this rank's counters into @p s. */
VMMC_API int vmmc_dsm_stats(vmmc_dsm_stats_t *s);

/** @brief Why the calling thread's last failed DSM call failed ("no error"
 *  if none did); valid until its next DSM call. */
VMMC_API const char *vmmc_dsm_last_error(void);

/** @brief "minipage" or "page" (VMMC_DSM_PAGE=1); NULL before init. */
VMMC_API const char *vmmc_dsm_mode(void);

#ifdef __cplusplus
}
#endif

#endif /* VMMC_DSM_H */
