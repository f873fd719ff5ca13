/* `vmmc info`: version, facts, every setting with -c (the DSM's too when
 * libvmmc-dsm.so is beside the tool), and the warning about an unknown
 * VMMC_* variable. Argument: the vmmc tool. */
#include <unistd.h>

#include "vspawn.h"

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

    /* The job's variables are settings too, and the syntax is documented. */
    VT_CHECK(strstr(r->out, "VMMC_RANK ") && strstr(r->out, "VMMC_SIZE ") &&
             strstr(r->out, "VMMC_BOOTSTRAP ") && strstr(r->out, "VMMC_IMPORT_TIMEOUT "));
    VT_CHECK(strstr(r->out, "VMMC_FM_RING ") && strstr(r->out, "unit required: ns, us, ms, s"));

    /* A layer built outside libvmmc: its settings are listed and checked. */
    char dsm[4096];
    const char *slash = strrchr(vmmc, '/');
    snprintf(dsm, sizeof dsm, "%.*s/libvmmc-dsm.so", slash ? (int)(slash - vmmc) : 1,
             slash ? vmmc : ".");
    if (access(dsm, R_OK) == 0) {
        r = spawn_run((char *[]){vmmc, "info", "-c", NULL},
                      (char *[]){"VMMC_DSM_SERVICE_SPIN=always", "VMMC_DSM_VEIWS=4", NULL}, 30,
                      NULL, NULL);
        VT_CHECK(exit_code(r->status) == 0);
        g = strstr(r->out, "VMMC_DSM_SERVICE_SPIN ");
        VT_CHECK(g && strstr(g, "= always") && strstr(g, "(default waiting) *"));
        VT_CHECK(strstr(r->err, "VMMC_DSM_VEIWS") && strstr(r->err, "unknown setting"));
    } else {
        printf("(%s not built: the DSM's settings not checked)\n", dsm);
    }

    /* A refused value: named with the reason on stderr, exit status 1. */
    r = spawn_run((char *[]){vmmc, "info", "-c", NULL},
                  (char *[]){"VMMC_SPIN=50", "VMMC_UDP_WINDOW=0", NULL}, 30, NULL, NULL);
    VT_CHECK(exit_code(r->status) == 1);
    VT_CHECK(strstr(r->err, "VMMC_SPIN=50: give a unit"));
    VT_CHECK(strstr(r->err, "VMMC_UDP_WINDOW=0: out of range: valid values are 2 .. 1024"));
    g = strstr(r->out, "VMMC_SPIN ");
    VT_CHECK(g && strstr(g, "= 50us ")); /* what is used: the default */

    r = spawn_run((char *[]){vmmc, "info", NULL}, NULL, 30, NULL, NULL);
    VT_CHECK(exit_code(r->status) == 0 && !strstr(r->out, "VMMC_BOOT_TIMEOUT"));
    r = spawn_run((char *[]){vmmc, "info", "--bogus", NULL}, NULL, 30, NULL, NULL);
    VT_CHECK(exit_code(r->status) == 2 && strstr(r->err, "unknown argument"));
    r = spawn_run((char *[]){vmmc, "info", "--help", NULL}, NULL, 30, NULL, NULL);
    VT_CHECK(exit_code(r->status) == 0 && strstr(r->out, "usage: vmmc info"));
    printf("info ok\n");
    return 0;
}
