/* PMIx bootstrap: two ranks started by Open MPI's mpirun exchange cards and
 * run barriers through PMIx. Skips without mpirun or without PMIx support.
 * Arguments: boot_peer, a LeakSanitizer suppression file for libpmix's own
 * leaks (used by sanitizer builds). */
#include "vspawn.h"
#include "vmmc_build_config.h"

int main(int argc, char **argv)
{
    VT_CHECK(argc == 3);
    char lsan[1024];
    snprintf(lsan, sizeof lsan, "LSAN_OPTIONS=suppressions=%s", argv[2]);
    if (!VMMC_HAVE_PMIX)
        VT_SKIP("this build has no PMIx support (libpmix-dev not found at configure time)");
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        VT_SKIP("mpirun is not installed (Debian: openmpi-bin)");
    spawn_result_t *r = spawn_run(
        (char *[]){"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", argv[1],
                   "ranks", "20", NULL},
        (char *[]){lsan, NULL}, 90, NULL, NULL);
    if (exit_code(r->status) != 0)
        VT_FAIL("mpirun status %d\nstdout: %s\nstderr: %s", exit_code(r->status), r->out, r->err);
    VT_CHECK(strstr(r->out, "rank 0 of 2 ok (20 barriers)"));
    VT_CHECK(strstr(r->out, "rank 1 of 2 ok (20 barriers)"));
    /* A job of one: barriers still complete through the event descriptor. */
    r = spawn_run((char *[]){"mpirun", "--allow-run-as-root", "-np", "1", argv[1], "ranks", "5",
                             NULL},
                  (char *[]){lsan, NULL}, 90, NULL, NULL);
    if (exit_code(r->status) != 0)
        VT_FAIL("mpirun -np 1 status %d\nstdout: %s\nstderr: %s", exit_code(r->status), r->out,
                r->err);
    VT_CHECK(strstr(r->out, "rank 0 of 1 ok (5 barriers)"));
    printf("pmix ok\n");
    return 0;
}
