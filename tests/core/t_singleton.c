/* A program started without the launcher is a job of size 1: it can export,
 * import its own exports, send, and wait, and the barrier is immediate. */
#include <string.h>

#include "vtest.h"

static int notes;

static void h(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    (void)arg;
    notes += (int)n->length;
}

int main(void)
{
    unsetenv("VMMC_LAUNCHER");
    unsetenv("VMMC_RANK");
    unsetenv("VMMC_SIZE");
    unsetenv("VMMC_BOOTSTRAP");
    unsetenv("PMIX_RANK");
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    VT_CHECK(vmmc_rank(ep) == 0 && vmmc_size(ep) == 1);
    VT_OK(vmmc_barrier(ep));
    char *mem;
    VT_OK(vmmc_mem_alloc(ep, 4096, (void **)&mem));
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_HANDLER;
    p.name = "self";
    p.addr = mem;
    p.length = 4096;
    p.handler = h;
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &p, &ex));
    vmmc_proxy_t *px;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_import(ep, 1, "self", 100, &px));
    VT_OK(vmmc_import(ep, 0, "self", 1000, &px));
    VT_OK(vmmc_send(px, 10, "hello", 6, VMMC_SEND_NOTIFY));
    VT_CHECK(vmmc_wait(ep, 2000) == 1 && notes == 6);
    VT_CHECK(strcmp(mem + 10, "hello") == 0);
    VT_CHECK(vmmc_wait(ep, 50) == 0); /* nothing more: times out */
    VT_OK(vmmc_signal(ep, 0));
    VT_OK(vmmc_unimport(px));
    VT_OK(vmmc_unexport(ex));
    VT_OK(vmmc_finalize(ep));
    printf("t_singleton: ok\n");
    return 0;
}
