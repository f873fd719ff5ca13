/* Errors the standard leaves undefined and we can detect: one line on
 * stderr naming the call, then the whole job ends with status 1 (every
 * other PE is told, as by shmem_global_exit(1)). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "shmem/shmem_core.h"

_Noreturn void shm_fatal(const char *fn, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "shmem: %s: %s\n", fn, msg);
    fflush(stderr);
    if (shm_g.heap && shm_g.pe)
        shm_global_exit(1);
    fflush(stdout);
    _exit(1);
}

_Noreturn void shm_fatal_vmmc(const char *fn, const char *what, int status)
{
    /* A peer that died may have done so through shmem_global_exit: its
     * status wins over ours. */
    shm_exit_check();
    shm_fatal(fn, "%s: %s: %s", what, vmmc_strerror(status), vmmc_last_error());
}

void shm_check_init(const char *fn)
{
    if (__builtin_expect(!shm_g.initialized, 0)) {
        if (shm_g.finalized)
            shm_fatal(fn, "called after shmem_finalize");
        shm_fatal(fn, "called before shmem_init");
    }
}

void shm_check_pe(const char *fn, int pe)
{
    if (__builtin_expect(pe < 0 || pe >= shm_g.npes, 0))
        shm_fatal(fn, "PE out of range 0..%d (%d)", shm_g.npes - 1, pe);
}
