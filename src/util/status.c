#include "vmmc_build_config.h"
#include "vmmc/vmmc.h"

const char *vmmc_strerror(int status)
{
    switch (status) {
    case VMMC_OK: return "success";
    case VMMC_INPROGRESS: return "operation in progress";
    case VMMC_ERR_INVALID: return "invalid argument";
    case VMMC_ERR_BOUNDS: return "out of bounds";
    case VMMC_ERR_NOT_FOUND: return "not found";
    case VMMC_ERR_EXISTS: return "already exists";
    case VMMC_ERR_STALE: return "stale handle (unexported or unimported)";
    case VMMC_ERR_TRUNCATED: return "truncated";
    case VMMC_ERR_OVERFLOW: return "length exceeds the declared bound";
    case VMMC_ERR_AGAIN: return "resource temporarily unavailable, try again";
    case VMMC_ERR_NOMEM: return "out of memory";
    case VMMC_ERR_TIMEOUT: return "timed out";
    case VMMC_ERR_BUSY: return "resource busy";
    case VMMC_ERR_PERMISSION: return "permission denied";
    case VMMC_ERR_UNSUPPORTED: return "not supported";
    case VMMC_ERR_ENDPOINT: return "endpoint closed or not initialised";
    case VMMC_ERR_SYSTEM: return "system call failed";
    case VMMC_ERR_PROTOCOL: return "protocol error";
    case VMMC_ERR_PEER_DEAD: return "peer process is dead";
    case VMMC_ERR_PEER_UNREACHABLE: return "peer unreachable";
    default: return "unknown status";
    }
}

const char *vmmc_version(void)
{
    return VMMC_VERSION_STRING;
}
