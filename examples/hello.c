/* Two ranks: rank 1 exports a buffer, rank 0 writes into it with a
 * notification; rank 1's handler runs once the bytes are in place.
 * Run: vmmc run -n 2 -- ./example_hello */
#include <stdio.h>
#include <string.h>
#include <vmmc/vmmc.h>

static int done;
static void on_data(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    printf("rank %d got '%s' from rank %d\n", vmmc_rank(ep), (char *)arg + n->offset, n->sender);
    done = 1;
}

int main(void)
{
    vmmc_ep_t *ep;
    char *buf;
    if (vmmc_init(NULL, &ep) != VMMC_OK) return 1;
    vmmc_mem_alloc(ep, 4096, (void **)&buf);
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_HANDLER, .name = "inbox",
                              .addr = buf, .length = 4096, .handler = on_data, .handler_arg = buf};
    vmmc_export_t *ex;
    vmmc_export(ep, &p, &ex);
    if (vmmc_rank(ep) == 0) {
        vmmc_proxy_t *px;
        int rc = vmmc_import(ep, 1, "inbox", 5000, &px);
        if (rc == VMMC_OK)
            rc = vmmc_send(px, 0, "hello, vmmc", 12, VMMC_SEND_NOTIFY);
        if (rc != VMMC_OK) fprintf(stderr, "%s: %s\n", vmmc_strerror(rc), vmmc_last_error());
    } else {
        while (!done) vmmc_wait(ep, -1);
    }
    vmmc_barrier(ep);
    return vmmc_finalize(ep);
}
