/* `vmmc info`'s fabric transport section: the providers libfabric offers and
 * the one the transport would open. Argument: the vmmc tool. */
#include "vspawn.h"

int main(int argc, char **argv)
{
    VT_CHECK(argc == 2);
    char *vmmc = argv[1];
    spawn_result_t *r = spawn_run((char *[]){vmmc, "info", NULL}, NULL, 30, NULL, NULL);
    VT_CHECK(exit_code(r->status) == 0);
    const char *s = strstr(r->out, "fabric transport");
    VT_CHECK(s != NULL);
    if (strstr(s, "not built: libfabric's headers"))
        VT_SKIP("built without libfabric");
    if (strstr(s, "libfabric  not loadable"))
        VT_SKIP("libfabric.so.1 is not installed");
    if (!strstr(s, "tcp;ofi_rxm "))
        VT_SKIP("libfabric offers no tcp;ofi_rxm here");
    VT_CHECK(strstr(s, "providers with reliable datagrams"));
    VT_CHECK(strstr(s, "would use  "));
    /* Never vmmc's own provider (the transport would run over itself). */
    VT_CHECK(!strstr(s, "would use  vmmc"));

    /* FI_PROVIDER is honoured, and VMMC_TRANSPORT=fabric opens it. */
    r = spawn_run((char *[]){vmmc, "info", NULL},
                  (char *[]){"FI_PROVIDER=tcp;ofi_rxm", "VMMC_TRANSPORT=fabric", NULL}, 30, NULL, NULL);
    VT_CHECK(exit_code(r->status) == 0);
    s = strstr(r->out, "fabric transport");
    VT_CHECK(s && strstr(s, "would use  tcp;ofi_rxm (") && strstr(s, "FI_PROVIDER applied"));
    VT_CHECK(strstr(s, "opened     yes"));

    /* A provider that does not exist: none, said so. */
    r = spawn_run((char *[]){vmmc, "info", NULL}, (char *[]){"FI_PROVIDER=nosuchprov", NULL}, 30, NULL,
                  NULL);
    VT_CHECK(exit_code(r->status) == 0);
    s = strstr(r->out, "fabric transport");
    VT_CHECK(s && strstr(s, "would use  none") && strstr(s, "FI_PROVIDER=nosuchprov"));
    printf("info fabric ok\n");
    return 0;
}
