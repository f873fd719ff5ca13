/* Every rank but 0 exports a buffer; rank 0 writes a greeting into each with
 * a notification, and each receiver's handler runs once the bytes are in
 * place. Any job size from 2 up; every failure exits non-zero with the reason.
 * Run: build/vmmc run -n 2 -- build/example_hello */
#include <stdio.h>
#include <stdlib.h>
#include <vmmc/vmmc.h>

#define WAIT_MS 10000 /* a receiver waits this long for its greeting */

static int done;
static void on_data(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    printf("rank %d got '%s' from rank %d\n", vmmc_rank(ep), (char *)arg + n->offset, n->sender);
    done = 1;
}

/* Say what failed and why, and leave with a non-zero status. */
static int die(vmmc_ep_t *ep, const char *what, int rc)
{
    fprintf(stderr, "example_hello: rank %d: %s: %s (%s)\n", ep ? vmmc_rank(ep) : -1, what,
            vmmc_strerror(rc), vmmc_last_error());
    exit(1);
}

int main(void)
{
    vmmc_ep_t *ep = NULL;
    char *buf;
    vmmc_export_t *ex;
    int rc = vmmc_init(NULL, &ep);
    if (rc != VMMC_OK)
        die(NULL, "vmmc_init", rc);
    if (vmmc_size(ep) < 2) {
        fprintf(stderr, "example_hello: needs at least 2 ranks: build/vmmc run -n 2 -- %s\n",
                "build/example_hello");
        vmmc_finalize(ep);
        return 2;
    }
    if ((rc = vmmc_mem_alloc(ep, 4096, (void **)&buf)) != VMMC_OK)
        die(ep, "vmmc_mem_alloc", rc);
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_HANDLER, .name = "inbox",
                              .addr = buf, .length = 4096, .handler = on_data, .handler_arg = buf};
    if (vmmc_rank(ep) != 0 && (rc = vmmc_export(ep, &p, &ex)) != VMMC_OK)
        die(ep, "vmmc_export", rc);
    if (vmmc_rank(ep) == 0) {
        for (int r = 1; r < vmmc_size(ep); r++) {
            vmmc_proxy_t *px;
            if ((rc = vmmc_import(ep, r, "inbox", 5000, &px)) != VMMC_OK)
                die(ep, "vmmc_import", rc);
            if ((rc = vmmc_send(px, 0, "hello, vmmc", 12, VMMC_SEND_NOTIFY)) != VMMC_OK)
                die(ep, "vmmc_send", rc);
        }
    } else {
        for (int waited = 0; !done; waited += 100) {
            if (waited >= WAIT_MS) {
                fprintf(stderr, "example_hello: rank %d: no greeting from rank 0 in %d ms\n",
                        vmmc_rank(ep), WAIT_MS);
                exit(1);
            }
            if ((rc = vmmc_wait(ep, 100)) < 0) /* spin, then sleep */
                die(ep, "vmmc_wait", rc);
        }
    }
    if ((rc = vmmc_barrier(ep)) != VMMC_OK)
        die(ep, "vmmc_barrier", rc);
    if ((rc = vmmc_finalize(ep)) != VMMC_OK)
        die(NULL, "vmmc_finalize", rc);
    return 0;
}
