/* Library setup and exit: shmem_init joins the vmmc job (one endpoint per
 * PE), allocates and exports the symmetric heap, exports the static data,
 * imports every other PE's, and ends with a barrier; shmem_finalize
 * completes everything, waits for every PE and leaves the job;
 * shmem_global_exit ends every PE with one status. Queries and the
 * deprecated names live here too. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shmem/shmem_core.h"

shm_state_t shm_g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic int exiting;

static void print_info(void)
{
    if (shm_g.me != 0)
        return;
    if (shm_cfg.version || shm_cfg.info)
        printf("%s %d.%d (vmmc %s)\n", SHMEM_VENDOR_STRING, SHMEM_MAJOR_VERSION,
               SHMEM_MINOR_VERSION, vmmc_version());
    if (shm_cfg.info) {
        printf("  PEs                   %d\n", shm_g.npes);
        printf("  SHMEM_SYMMETRIC_SIZE  %zu bytes per PE (+%u reserved)\n",
               shm_g.heap_size - SHM_RESERVED, SHM_RESERVED);
        printf("  static data           %zu bytes per PE\n", shm_g.data_len);
        printf("  PEs on other hosts    %s\n", shm_g.any_remote ? "yes (udp)" : "none (shm)");
        printf("  VMMC_SHMEM_SPIN       %llu ns\n", (unsigned long long)shm_cfg.spin_ns);
        printf("  VMMC_SHMEM_SLEEP      %llu ns\n", (unsigned long long)shm_cfg.sleep_ns);
        printf("  SHMEM_DEBUG           %s\n", shm_cfg.debug ? "on" : "off");
        printf("  (every VMMC_SHMEM_* setting: vmmc info -c)\n");
    }
    fflush(stdout);
}

static void debug_table(void)
{
    if (!shm_cfg.debug)
        return;
    int mapped = 0;
    for (int i = 0; i < shm_g.npes; i++)
        mapped += shm_g.pe[i].heap != NULL;
    fprintf(stderr,
            "shmem: PE %d of %d: heap %p (%zu bytes), static data %p (%zu bytes), %d heaps "
            "mapped, %d reached by deliberate update\n",
            shm_g.me, shm_g.npes, (void *)shm_g.heap, shm_g.heap_size,
            (void *)shm_g.data_start, shm_g.data_len, mapped, shm_g.npes - mapped);
}

void shm_job_barrier(const char *fn)
{
    int st = vmmc_barrier(shm_g.ep);
    if (st != VMMC_OK)
        shm_fatal_vmmc(fn, "the job's barrier", st);
}

static void at_exit(void)
{
    /* A program that returns from main without shmem_finalize leaves as
     * if it had called it (the other PEs may wait for it in a barrier). */
    if (shm_g.initialized && !atomic_load(&exiting))
        shmem_finalize();
}

static void init(const char *fn, int level)
{
    if (shm_g.initialized)
        return; /* a second call changes nothing */
    if (shm_g.finalized)
        shm_fatal(fn, "the library cannot start again after shmem_finalize (%d)", 1);
    shm_cfg_load(fn);
    int st = vmmc_init(NULL, &shm_g.ep);
    if (st != VMMC_OK) {
        shm_g.ep = NULL;
        shm_fatal(fn, "cannot join the job: %s: %s", vmmc_strerror(st), vmmc_last_error());
    }
    shm_g.me = vmmc_rank(shm_g.ep);
    shm_g.npes = vmmc_size(shm_g.ep);
    shm_g.thread_level = level;
    shm_g.pe = calloc((size_t)shm_g.npes, sizeof *shm_g.pe);
    shm_dirty = calloc((size_t)shm_g.npes, 1);
    if (!shm_g.pe || !shm_dirty)
        shm_fatal(fn, "out of memory for the PE table (%d PEs)", shm_g.npes);
    shm_g.heap_size = SHM_RESERVED + shm_cfg.symmetric_size;
    void *heap;
    st = vmmc_mem_alloc(shm_g.ep, shm_g.heap_size, &heap);
    if (st != VMMC_OK)
        shm_fatal(fn, "cannot allocate a symmetric heap of %zu bytes (SHMEM_SYMMETRIC_SIZE): %s",
                  shm_cfg.symmetric_size, vmmc_last_error());
    shm_g.heap = heap;
    shm_xlate_init();
    shm_heap_init();
    shm_move_init();
    shm_wait_init();
    shm_g.initialized = 1;
    shm_teams_init();
    shm_exit_watch_start();
    atexit(at_exit);
    debug_table();
    shm_barrier_world();
    print_info();
}

void shmem_init(void)
{
    init("shmem_init", SHMEM_THREAD_MULTIPLE);
}

int shmem_init_thread(int requested, int *provided)
{
    if (requested < SHMEM_THREAD_SINGLE || requested > SHMEM_THREAD_MULTIPLE)
        shm_fatal("shmem_init_thread", "unknown thread level (%d)", requested);
    /* every level up to SHMEM_THREAD_MULTIPLE is provided */
    init("shmem_init_thread", SHMEM_THREAD_MULTIPLE);
    if (provided)
        *provided = shm_g.thread_level;
    return 0;
}

void shmem_query_thread(int *provided)
{
    shm_check_init("shmem_query_thread");
    if (provided)
        *provided = shm_g.thread_level;
}

void shmem_finalize(void)
{
    if (!shm_g.initialized)
        return; /* idempotent, and called again at exit */
    /* Everything this PE issued is in place, then the job's own barrier:
     * two-way, so no PE leaves (and looks dead to the others) while
     * another still waits for the last flag of a one-way barrier. */
    shm_quiet(SHMEM_CTX_DEFAULT);
    shm_job_barrier("shmem_finalize");
    shm_exit_watch_stop();
    shm_teams_fini();
    shm_move_fini();
    shm_wait_fini();
    shm_g.initialized = 0;
    shm_g.finalized = 1;
    int st = vmmc_finalize(shm_g.ep);
    if (st != VMMC_OK)
        fprintf(stderr, "shmem: shmem_finalize: leaving the job: %s: %s\n", vmmc_strerror(st),
                vmmc_last_error());
    shm_heap_fini();
    shm_g.ep = NULL;
    shm_g.heap = NULL;
    free(shm_g.pe);
    shm_g.pe = NULL;
    free(shm_dirty);
    shm_dirty = NULL;
}

/* Ask every other PE to end with @status (the first request a PE gets
 * wins), make sure the requests landed, then end this PE. */
_Noreturn void shm_global_exit(int status)
{
    if (atomic_exchange(&exiting, 1)) {
        for (;;)
            pause(); /* another thread of this PE is ending it */
    }
    fflush(stdout);
    fflush(stderr);
    uint64_t w = SHM_EXIT_REQ | (uint32_t)status;
    size_t off = offsetof(shm_hdr_t, exit_word);
    for (int i = 0; i < shm_g.npes; i++) {
        if (i == shm_g.me)
            continue;
        shm_pe_t *p = &shm_g.pe[i];
        if (p->heap) {
            shm_hdr_t *h = (shm_hdr_t *)(void *)p->heap;
            uint64_t zero = 0;
            atomic_compare_exchange_strong(&h->exit_word, &zero, w);
        } else if (p->heap_px) {
            (void)vmmc_atomic(p->heap_px, off, VMMC_ATOMIC_CSWAP, 8, w, 0, NULL);
        }
    }
    if (shm_g.any_remote)
        (void)vmmc_fence(shm_g.ep, -1); /* a dead PE makes it fail: nothing to wait for */
    for (int i = 0; i < shm_g.npes; i++) {
        if (i == shm_g.me)
            continue;
        shm_pe_t *p = &shm_g.pe[i];
        if (p->heap) {
            shm_hdr_t *h = (shm_hdr_t *)(void *)p->heap;
            if (atomic_load(&h->sleepers))
                shm_ring(i);
        } else if (p->heap_px) {
            (void)vmmc_signal(shm_g.ep, i);
        }
    }
    _exit(status);
}

void shmem_global_exit(int status)
{
    if (!shm_g.initialized) {
        fflush(stdout);
        fflush(stderr);
        _exit(status);
    }
    shm_global_exit(status);
}

int shmem_my_pe(void)
{
    shm_check_init("shmem_my_pe");
    return shm_g.me;
}

int shmem_n_pes(void)
{
    shm_check_init("shmem_n_pes");
    return shm_g.npes;
}

void shmem_info_get_version(int *major, int *minor)
{
    if (major)
        *major = SHMEM_MAJOR_VERSION;
    if (minor)
        *minor = SHMEM_MINOR_VERSION;
}

void shmem_info_get_name(char *name)
{
    if (name) {
        strncpy(name, SHMEM_VENDOR_STRING, SHMEM_MAX_NAME_LEN - 1);
        name[SHMEM_MAX_NAME_LEN - 1] = '\0';
    }
}

/* Deprecated names (OpenSHMEM 1.2 and earlier) */
void start_pes(int npes)
{
    (void)npes; /* the launcher decides how many PEs there are */
    init("start_pes", SHMEM_THREAD_MULTIPLE);
}

int _my_pe(void)
{
    shm_check_init("_my_pe");
    return shm_g.me;
}

int _num_pes(void)
{
    shm_check_init("_num_pes");
    return shm_g.npes;
}

int my_pe(void)
{
    shm_check_init("my_pe");
    return shm_g.me;
}

int num_pes(void)
{
    shm_check_init("num_pes");
    return shm_g.npes;
}

/* Deprecated cache management: the memory is coherent, nothing to do. */
void shmem_clear_cache_inv(void)
{
}

void shmem_set_cache_inv(void)
{
}

void shmem_clear_cache_line_inv(void *dest)
{
    (void)dest;
}

void shmem_set_cache_line_inv(void *dest)
{
    (void)dest;
}

void shmem_udcflush(void)
{
}

void shmem_udcflush_line(void *dest)
{
    (void)dest;
}
