/* A transport table of another interface version is refused: this program
 * links the library's objects with shm, udp and "old" (tl_loop/old.c, its
 * version one past VMMC_TL_VERSION). Opening an endpoint fails with
 * VMMC_ERR_INVALID naming the transport and both versions, none of old's
 * operations runs, and the failed open leaks nothing (ASan). */
#include <stdatomic.h>
#include <string.h>

#include "vtest.h"

extern _Atomic int vmmc_old_calls;

int main(void)
{
    vmmc_ep_t *ep = NULL;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_ep_open(NULL, &ep));
    VT_CHECK(strstr(vmmc_last_error(), "'old'") && strstr(vmmc_last_error(), "version"));
    VT_CHECK(atomic_load(&vmmc_old_calls) == 0);
    printf("t_tl_old: OK (%s)\n", vmmc_last_error());
    return 0;
}
