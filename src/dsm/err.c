/* Errors of libvmmc-dsm: the calling thread's message for
 * vmmc_dsm_last_error(), the broken state (a rank died, a send failed:
 * every waiter gets an error) and the fatal exit of a fault that cannot be
 * served (the faulting instruction cannot be given an error code). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsm/dsm_int.h"

static __thread char last_error[512];

int dsm_error(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

int dsm_error_vmmc(int status, const char *what)
{
    return dsm_error(status, "%s: %s: %s", what, vmmc_strerror(status), vmmc_last_error());
}

const char *vmmc_dsm_last_error(void)
{
    return last_error[0] ? last_error : "no error";
}

/* Lock held. The first reason wins; every waiter wakes and fails. */
void dsm_break(const char *fmt, ...)
{
    if (!dsm.broken) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(dsm.broken_why, sizeof dsm.broken_why, fmt, ap);
        va_end(ap);
        dsm.broken = 1;
    }
    dsm_wake();
}

_Noreturn void dsm_fatal(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "vmmc dsm: rank %d: %s\n", dsm.me, buf);
    fflush(stderr);
    _exit(1);
}

void dsm_bad_msg(int src, uint64_t imm, const char *why)
{
    atomic_fetch_add(&dsm.st_bad_msgs, 1);
    if (dsm_cfg.debug)
        fprintf(stderr, "vmmc dsm: rank %d: dropped message type %u from rank %d (id %u): %s\n",
                dsm.me, IMM_TYPE(imm), src, IMM_ID(imm), why);
}
