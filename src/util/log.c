#include "util/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vmmc/vmmc.h"

int vmmc_log_level = VMMC_LOG_WARN;
static __thread char last_error[512];

int vmmc_error(int status, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    vmmc_log(VMMC_LOG_DEBUG, "error %d (%s): %s", status, vmmc_strerror(status), last_error);
    errno = saved;
    return status;
}

int vmmc_error_sys(const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof last_error)
        snprintf(last_error + n, sizeof last_error - (size_t)n, ": %s", strerror(saved));
    errno = saved;
    return VMMC_ERR_SYSTEM;
}

const char *vmmc_last_error(void)
{
    return last_error[0] ? last_error : "no error";
}

void vmmc_log_write(int level, const char *file, int line, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug", "trace"};
    char buf[768];
    const char *base = strrchr(file, '/');
    int n = snprintf(buf, sizeof buf, "vmmc[%d] %s %s:%d: ", (int)getpid(),
                     names[level < 0 ? 0 : level > 4 ? 4 : level], base ? base + 1 : file, line);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof buf)
        n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf - 1)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(2, buf, (size_t)n); /* one write: lines from ranks do not interleave */
    (void)w;
}
