/* VMMC_RPC_* settings of vRPC, and the thread's last error text. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rpc/rpc_int.h"
#include "vmmc/config.h"

static rpc_cfg_t cfg;

static const vmmc_config_entry_t rpc_entries[] = {
    {"RPC_MAXREC", "64M",
     "largest RPC record (call or reply) a vRPC handle sends or accepts; a larger one fails "
     "the call (client) or closes the connection (server)",
     VMMC_CONFIG_SIZE, &cfg.maxrec, 4096, 0x7fffffffull},
    {"RPC_BUF", "8K", "first size of a vRPC handle's call and reply buffers (they grow as needed)",
     VMMC_CONFIG_SIZE, &cfg.buf, 512, 1ull << 30},
    {"RPC_SVC_WAIT", "10s",
     "how long a vRPC server waits for a client to take a reply before it closes the connection",
     VMMC_CONFIG_TIME, &cfg.svc_wait_ns, 1000000ull, 3600000000000ull},
};
static const vmmc_config_table_t rpc_table = {sizeof(vmmc_config_entry_t), "rpc", "RPC_",
                                              rpc_entries,
                                              sizeof rpc_entries / sizeof *rpc_entries};

__attribute__((constructor)) static void rpc_cfg_init(void)
{
    /* defaults first, so that a refused table still leaves sane values */
    cfg.maxrec = 64ull << 20;
    cfg.buf = 8192;
    cfg.svc_wait_ns = 10000000000ull;
    int st = vmmc_config_register(&rpc_table);
    if (st != VMMC_OK && st != VMMC_ERR_EXISTS)
        fprintf(stderr, "vmmc-rpc: settings: %s\n", vmmc_last_error());
}

__attribute__((destructor)) static void rpc_cfg_fini(void)
{
    (void)vmmc_config_unregister("rpc");
}

const rpc_cfg_t *rpc_cfg(void)
{
    return &cfg;
}

static __thread char last_error[256];

int rpc_fail(const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    errno = saved;
    return -1;
}

void rpc_fail_clear(void)
{
    last_error[0] = 0;
}

VMMC_API const char *vmmc_rpc_last_error(void)
{
    return last_error;
}
