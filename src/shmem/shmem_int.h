/* OpenSHMEM over vmmc: the internal contract of src/shmem/ (libvmmc-shmem).
 *
 * The layer is a client of the public vmmc API (vmmc/vmmc.h) only. Each PE
 * is one rank of a vmmc job (vmmc_init) with one endpoint.
 *
 * Symmetric memory, per PE:
 *  - the heap: one vmmc_mem_alloc() of SHM_RESERVED + SHMEM_SYMMETRIC_SIZE
 *    bytes, exported whole as "shmem.heap" with READ|WRITE. Its first
 *    SHM_RESERVED bytes belong to the library (shm_hdr_t, team scratch);
 *    shmem_malloc() hands out the rest. Every PE imports every other PE's
 *    heap; where the import maps it (same host), pe[i].heap is that mapping
 *    and a put is a memcpy, an atomic an __atomic instruction on it.
 *  - static data: the executable's .data and .bss ([data_start, data_end),
 *    page-rounded), moved onto a memfd at shmem_init (shmem_data.c) and
 *    exported as "shmem.data"; where the import maps it (same host, both
 *    PEs moved theirs), pe[i].data is that mapping, as pe[i].heap; else it
 *    is written with process_vm_writev on one host and by deliberate update
 *    across hosts. Every PE runs the same executable, so an address there
 *    has the same offset from data_start on every PE.
 *  - this PE's own memory is reached with plain loads and stores.
 *
 * Files and owners:
 *  shmem_init.c   init/finalize/query/global_exit/info/start_pes   (core)
 *  shmem_heap.c   symmetric heap allocator, shmem_malloc family     (core)
 *  shmem_xlate.c  PE table, exports/imports, shm_locate, shmem_ptr,
 *                 *_accessible                                      (core)
 *  shmem_move.c   shm_put_bytes/shm_get_bytes/shm_amo/quiet/fence   (core)
 *  shmem_wait.c   shm_wait, shm_ring (doorbell)                     (core)
 *  shmem_ctx.c    contexts                                          (core)
 *  shmem_err.c    shm_fatal, shm_check_*                            (core)
 *  shmem_rma*.c   typed/sized/mem put/get/p/g/iput/iget/nbi,
 *                 put_signal, signal_fetch; include/shmem_generic.h (rma)
 *  shmem_amo*.c   atomics (1.5 and deprecated names)                (amo)
 *  shmem_p2p.c    wait_until/test families, signal_wait_until       (amo)
 *  shmem_lock.c   set/test/clear_lock                               (amo)
 *  shmem_team*.c, shmem_coll*.c, shmem_reduce*.c, shmem_active.c
 *                 teams, barrier/sync, collectives, reductions,
 *                 deprecated active-set forms                       (coll)
 *  tools/shmem/osh{cc,run}.in, cmake/shmem.cmake, t_mixed, bench (tools)
 *
 * Errors: a call the standard leaves undefined that we can detect (not
 * initialised, PE out of range, address not symmetric, heap exhausted,
 * non-symmetric collective allocation) prints one line
 *   "shmem: <function>: <what> (<value>)" on stderr
 * and ends the whole job with status 1 (shm_fatal), never corrupts memory.
 * shmem_malloc beyond the heap returns NULL after such a line on stderr
 * (the standard's behaviour) unless VMMC_SHMEM_MALLOC_FATAL=1.
 *
 * Threads: SHMEM_THREAD_MULTIPLE is provided; the allocator and team table
 * take shm_g.lock, the data paths take none of ours.
 */
#ifndef VMMC_SHMEM_INT_H
#define VMMC_SHMEM_INT_H

#include <shmem.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <vmmc/vmmc.h>

/* ------------------------------------------------------------------------- */
/* Layout of the reserved head of every heap (same offsets on every PE). */

#define SHM_RESERVED (1u << 20)  /* bytes of the heap kept by the library */
#define SHM_MAX_TEAMS 64         /* team slots, world and shared included */
#define SHM_TEAM_SCRATCH (8192u) /* bytes of scratch per team slot */

/* Offset 0 of every heap. Written by other PEs: every field is hostile
 * input to the code that reads it (bounds-check indices, never trust a
 * length found here). */
typedef struct shm_hdr {
    _Atomic uint32_t doorbell;  /* bumped by shm_ring(); futex word */
    _Atomic uint32_t sleepers;  /* > 0 while a thread of this PE sleeps in shm_wait */
    /* shmem_global_exit of another PE: SHM_EXIT_REQ | (uint32_t)status.
     * This PE ends with that status as soon as it sees it (shm_wait, and a
     * watcher thread when some PE is on another host). */
    _Atomic uint64_t exit_word;
    /* 1 while a sleeper waits for a ring: the first ringer takes it (0) and
     * wakes; the ones after it, until a sleeper arms again, make no system
     * call (one ring per sleep, not per operation). */
    _Atomic uint32_t armed;
    uint8_t pad0[44];
    /* The collectives' own words (barrier counters, flags): owned by coll,
     * laid out in shmem_coll.h, within this many bytes. */
    uint8_t coll[4096 - 64];
} shm_hdr_t;

#define SHM_EXIT_REQ (1ull << 32)

/* Team slot i's scratch: heap + SHM_TEAM_OFF(i), SHM_TEAM_SCRATCH bytes. */
#define SHM_TEAM_OFF(i) (4096u + (size_t)(i) * SHM_TEAM_SCRATCH)
_Static_assert(sizeof(shm_hdr_t) == 4096, "shm_hdr_t is one page");
_Static_assert(SHM_TEAM_OFF(SHM_MAX_TEAMS) <= SHM_RESERVED, "team scratch fits");

/* ------------------------------------------------------------------------- */
/* Global state */

typedef struct shm_pe {
    char *heap;            /* that PE's heap mapped here, or NULL (reach it through heap_px) */
    vmmc_proxy_t *heap_px; /* import of its heap (NULL for this PE) */
    vmmc_proxy_t *data_px; /* import of its static data (NULL for this PE) */
    char *data;            /* that PE's static data mapped here, or NULL (through data_px) */
    int same_host;         /* reachable through shared memory */
} shm_pe_t;

typedef struct shm_state {
    int initialized;  /* 1 between shmem_init and shmem_finalize */
    int finalized;    /* 1 after shmem_finalize */
    int me, npes;
    int thread_level; /* provided */
    vmmc_ep_t *ep;
    char *heap;       /* this PE's heap (vmmc_mem_alloc) */
    size_t heap_size; /* SHM_RESERVED + usable bytes */
    char *data_start; /* this PE's static data export, page-rounded */
    size_t data_len;
    vmmc_export_t *heap_ex, *data_ex;
    shm_pe_t *pe;     /* [npes] */
    int any_remote;   /* some PE is not on this host (quiet must fence) */
    pthread_mutex_t lock; /* allocator, teams, contexts */
} shm_state_t;

extern shm_state_t shm_g;

static inline shm_hdr_t *shm_hdr(void)
{
    return (shm_hdr_t *)(void *)shm_g.heap;
}

/* ------------------------------------------------------------------------- */
/* Errors (shmem_err.c) */

/* Print "shmem: <fn>: <message>" and end the job with status 1. */
_Noreturn void shm_fatal(const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* shm_fatal unless shmem_init ran and shmem_finalize did not. */
void shm_check_init(const char *fn);
/* shm_fatal unless 0 <= pe < npes. */
void shm_check_pe(const char *fn, int pe);

/* ------------------------------------------------------------------------- */
/* Addresses (shmem_xlate.c) */

/* Where [sym, sym+len) of this PE's symmetric memory is on PE @pe. */
typedef struct shm_loc {
    char *ptr;        /* non-NULL: load and store here (this PE, or a mapping) */
    vmmc_proxy_t *px; /* otherwise: vmmc_send/vmmc_fetch/vmmc_atomic on px at off */
    size_t off;
    int in_heap;      /* 1: heap, 0: static data */
} shm_loc_t;

/* Fills @loc; shm_fatal (naming @fn) if @pe is out of range or the range is
 * not entirely inside this PE's heap (user part or reserved) or static
 * data. */
void shm_locate(const char *fn, const void *sym, size_t len, int pe, shm_loc_t *loc);
/* 1 if [p, p+len) lies in this PE's symmetric memory (heap or data). */
int shm_is_symmetric(const void *p, size_t len);

/* ------------------------------------------------------------------------- */
/* Data movement (shmem_move.c). @ctx may be SHMEM_CTX_DEFAULT or a created
 * context; SHMEM_CTX_INVALID is a no-op as the standard says. */

/* Blocking: returns when @src may be reused (put) / @dst holds the data (get). */
void shm_put_bytes(const char *fn, shmem_ctx_t ctx, void *dst_sym, const void *src, size_t len,
                   int pe);
void shm_get_bytes(const char *fn, shmem_ctx_t ctx, void *dst, const void *src_sym, size_t len,
                   int pe);
/* Non-blocking forms: complete at the latest in shm_quiet(ctx). */
void shm_put_nbi_bytes(const char *fn, shmem_ctx_t ctx, void *dst_sym, const void *src,
                       size_t len, int pe);
void shm_get_nbi_bytes(const char *fn, shmem_ctx_t ctx, void *dst, const void *src_sym,
                       size_t len, int pe);
/* Strided: @nelems elements of @elem bytes, strides in elements. */
void shm_iput_bytes(const char *fn, shmem_ctx_t ctx, void *dst_sym, const void *src,
                    ptrdiff_t dst_stride, ptrdiff_t src_stride, size_t elem, size_t nelems,
                    int pe);
void shm_iget_bytes(const char *fn, shmem_ctx_t ctx, void *dst, const void *src_sym,
                    ptrdiff_t dst_stride, ptrdiff_t src_stride, size_t elem, size_t nelems,
                    int pe);

/* Atomic on the word at @sym on @pe. @size is 4 or 8 or'ed with
 * VMMC_ATOMIC_SIGNED / VMMC_ATOMIC_FLOAT (vmmc.h); values as vmmc_atomic()
 * carries them. Returns the old value (0 when the op fetches nothing and
 * @fetch is 0). Rings @pe's doorbell. */
uint64_t shm_amo(const char *fn, shmem_ctx_t ctx, void *sym, int pe, vmmc_atomic_op_t op,
                 int size, uint64_t operand, uint64_t compare, int fetch);

/* Ordering/completion of everything this PE issued on @ctx. */
void shm_fence(shmem_ctx_t ctx);
void shm_quiet(shmem_ctx_t ctx);

/* ------------------------------------------------------------------------- */
/* Waiting (shmem_wait.c) */

/* Return when @ready(@arg) != 0. Spins VMMC_SHMEM_SPIN ns, then sleeps on
 * this PE's doorbell (futex, bounded sleeps so that a plain put that rang
 * no bell is still seen), progressing vmmc meanwhile: with more PEs than
 * cores nothing spins forever. Every update that ends in this PE's memory
 * through shm_amo, shm_ring or shm_quiet/shm_fence of the writer wakes it
 * within microseconds. */
void shm_wait(int (*ready)(void *arg), void *arg);
/* Wake the threads of @pe sleeping in shm_wait (cheap when none sleeps:
 * one load of its header). Called after puts that others may wait on
 * (p, put_signal, collectives' flags) and by shm_amo. */
void shm_ring(int pe);

/* ------------------------------------------------------------------------- */
/* Contexts (shmem_ctx.c) */

struct shmem_ctx_s {
    long options;
    shmem_team_t team;
    int nbi_pending; /* non-blocking operations not yet quieted */
};

/* ------------------------------------------------------------------------- */
/* Teams (shmem_team.c, owned by coll) */

struct shmem_team_s {
    int start, stride, size; /* PEs start, start+stride, ... of the world */
    int my_pe;               /* index of this PE in the team, -1 if not in it */
    int slot;                /* 0..SHM_MAX_TEAMS-1: scratch at SHM_TEAM_OFF(slot) */
    shmem_team_config_t config;
    long config_mask;
    uint64_t seq;            /* collectives started on this team (sequence of flags) */
};

/* World PE of team index @i. */
static inline int shm_team_pe(const struct shmem_team_s *t, int i)
{
    return t->start + i * t->stride;
}

/* Called by shmem_init after the heaps are exchanged (world, shared),
 * and by shmem_finalize. */
void shm_teams_init(void);
void shm_teams_fini(void);
/* Barrier over the world, used by init/finalize/malloc (coll). */
void shm_barrier_world(void);
/* Allreduce MIN and MAX of @v over the world in one step (coll): used by
 * the allocator to check that every PE asked for the same thing. */
void shm_world_minmax(uint64_t v, uint64_t *min, uint64_t *max);

#endif /* VMMC_SHMEM_INT_H */
