/* Error reporting and logging shared by every layer.
 *
 * Detect once, report once: the code that first sees a failure calls
 * vmmc_error(status, fmt, ...) which records a precise message for the calling
 * thread (vmmc_last_error()) and returns the status, so callers just propagate
 * it. Logging goes to stderr, filtered by VMMC_LOG_LEVEL; nothing logs on the
 * short-message paths. */
#ifndef VMMC_UTIL_LOG_H
#define VMMC_UTIL_LOG_H

#include <stdarg.h>

#define VMMC_LIKELY(x) __builtin_expect(!!(x), 1)
#define VMMC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define VMMC_COLD __attribute__((cold, noinline))
#define VMMC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define VMMC_INTERNAL __attribute__((visibility("hidden")))
/* For a few small thread-locals read on every progress pass and wait: at a
 * fixed offset from the thread pointer instead of through a
 * __tls_get_addr() call per function. They take bytes of the static TLS
 * block, of which glibc keeps a reserve for libraries loaded by dlopen(). */
#define VMMC_TLS_FAST __attribute__((tls_model("initial-exec")))

enum { VMMC_LOG_ERROR = 0, VMMC_LOG_WARN = 1, VMMC_LOG_INFO = 2, VMMC_LOG_DEBUG = 3, VMMC_LOG_TRACE = 4 };

/* Record @p status with a formatted message for this thread; returns status.
 * "%m" works as in printf (errno text), errno is preserved. */
int vmmc_error(int status, const char *fmt, ...) VMMC_PRINTF(2, 3) VMMC_COLD;
/* Same, with a system-call failure: appends ": <strerror(errno)>". */
int vmmc_error_sys(const char *fmt, ...) VMMC_PRINTF(1, 2) VMMC_COLD;

extern int vmmc_log_level;
void vmmc_log_write(int level, const char *file, int line, const char *fmt, ...)
    VMMC_PRINTF(4, 5) VMMC_COLD;
#define vmmc_log(level, ...)                                                  \
    do {                                                                      \
        if (VMMC_UNLIKELY((level) <= vmmc_log_level))                         \
            vmmc_log_write(level, __FILE__, __LINE__, __VA_ARGS__);           \
    } while (0)
#define vmmc_warn(...) vmmc_log(VMMC_LOG_WARN, __VA_ARGS__)
#define vmmc_debug(...) vmmc_log(VMMC_LOG_DEBUG, __VA_ARGS__)

#endif
