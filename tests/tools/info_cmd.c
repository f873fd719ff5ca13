/* `vmmc info`: version, facts, every setting with -c, and the warning about
 * an unknown VMMC_* variable. Argument: the vmmc tool. */
#include "spawn.h"

int main(int argc, char **argv)
{
    VT_CHECK(argc == 2);
    char *vmmc = argv[1];
    spawn_result_t *r = spawn_run((char *[]){vmmc, "info", "-c", NULL},
                                  (char *[]){"VMMC_FOO=1", "VMMC_RUN_GRACE=2s", NULL}, 30, NULL,
                                  NULL);
    if (exit_code(r->status) != 0)
        VT_FAIL("status %d, stderr: %s", exit_code(r->status), r->err);
    char ver[64];
    snprintf(ver, sizeof ver, "vmmc %s", vmmc_version());
    VT_CHECK(strstr(r->out, ver));
    VT_CHECK(strstr(r->err, "VMMC_FOO") && strstr(r->err, "unknown setting"));
    VT_CHECK(strstr(r->out, "VMMC_BOOT_TIMEOUT") && strstr(r->out, "VMMC_LOG_LEVEL"));
    const char *g = strstr(r->out, "VMMC_RUN_GRACE");
    VT_CHECK(g && strstr(g, "2s") && strstr(g, "(default 500ms) *"));
    const char *k, *v;
    VT_OK(vmmc_info_get(0, &k, &v));
    VT_CHECK(strstr(r->out, k));

    r = spawn_run((char *[]){vmmc, "info", NULL}, NULL, 30, NULL, NULL);
    VT_CHECK(exit_code(r->status) == 0 && !strstr(r->out, "VMMC_BOOT_TIMEOUT"));
    r = spawn_run((char *[]){vmmc, "info", "--bogus", NULL}, NULL, 30, NULL, NULL);
    VT_CHECK(exit_code(r->status) == 2 && strstr(r->err, "unknown argument"));
    r = spawn_run((char *[]){vmmc, "info", "--help", NULL}, NULL, 30, NULL, NULL);
    VT_CHECK(exit_code(r->status) == 0 && strstr(r->out, "usage: vmmc info"));
    printf("info ok\n");
    return 0;
}
