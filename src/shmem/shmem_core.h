/* What the core files of src/shmem/ share among themselves (settings,
 * set-up steps, the nbi queue); the layer's contract is shmem_int.h. */
#ifndef VMMC_SHMEM_CORE_H
#define VMMC_SHMEM_CORE_H

#include "shmem/shmem_int.h"

/* Settings (shmem_cfg.c): VMMC_SHMEM_* and the standard SHMEM_* names. */
typedef struct shm_cfg {
    uint64_t spin_ns;      /* VMMC_SHMEM_SPIN: shm_wait spins this long, then sleeps */
    uint64_t sleep_ns;     /* VMMC_SHMEM_SLEEP: longest sleep before looking again */
    uint64_t exit_poll_ns; /* VMMC_SHMEM_EXIT_POLL: the watcher's period (multi-host) */
    uint64_t nbi_depth;    /* VMMC_SHMEM_NBI_DEPTH: non-blocking operations in flight */
    int malloc_fatal;      /* VMMC_SHMEM_MALLOC_FATAL */
    int map_data;          /* VMMC_SHMEM_MAP_DATA */
    size_t symmetric_size; /* SHMEM_SYMMETRIC_SIZE */
    int debug;             /* SHMEM_DEBUG */
    int info;              /* SHMEM_INFO */
    int version;           /* SHMEM_VERSION */
} shm_cfg_t;

/* Parse the settings (once); shm_fatal naming @fn on a refused value. */
const shm_cfg_t *shm_cfg_load(const char *fn);
extern shm_cfg_t shm_cfg;
/* Parse a size with an optional k/K/m/M/g/G/t/T suffix: 0 or -1. */
int shm_parse_size(const char *s, size_t *out);

/* Set-up steps of shmem_init (shmem_xlate.c, shmem_heap.c, shmem_move.c). */
void shm_xlate_init(void);  /* exports, imports, size checks, maps */
void shm_heap_init(void);   /* allocator over the user part of the heap */
/* shmem_data.c: move the page-aligned static data [lo, lo + len) onto a
 * sealed memfd, mapped at the same address (*fd_out, owned by that file).
 * 0, or -1 with the private pages left in place. */
int shm_data_share(char *lo, size_t len, int *fd_out);
void shm_heap_fini(void);
void shm_move_init(void);   /* nbi completion queue */
void shm_move_fini(void);
void shm_wait_init(void);        /* shmem_wait.c: the progress hook of waits across hosts */
void shm_wait_fini(void);
void shm_exit_watch_start(void); /* shmem_wait.c: watcher for the exit word */
void shm_exit_watch_stop(void);

/* End this PE at once if another PE asked for a global exit. */
void shm_exit_check(void);
/* Write the exit request into every other PE, make sure it landed, and end
 * this PE with @status (shmem_init.c). */
_Noreturn void shm_global_exit(int status);

/* Mark @pe as written since the last fence/quiet (they ring it). */
extern uint8_t *shm_dirty;
static inline void shm_mark(int pe)
{
    __atomic_store_n(&shm_dirty[pe], 1, __ATOMIC_RELAXED);
}

/* A vmmc error from @what during @fn, fatal. */
_Noreturn void shm_fatal_vmmc(const char *fn, const char *what, int status);

/* The vmmc job's barrier (two-way, through the launcher or bootstrap):
 * shmem_finalize's last step (shmem_init.c). */
void shm_job_barrier(const char *fn);

#endif
