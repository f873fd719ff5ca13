/* `vmmc run`: environment of the ranks, exit-status propagation, programs
 * that do not use the library, --timeout, --cpu-bind, bad arguments, and no
 * trace left behind (the abstract socket disappears with the launcher).
 * Arguments: path of the vmmc tool. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>

#include "vspawn.h"

static const char *vmmc;

static spawn_result_t *run(char **args)
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)vmmc;
    argv[n++] = "run";
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return spawn_run(argv, NULL, 30, NULL, NULL);
}

#define RUN(...) run((char *[]){__VA_ARGS__, NULL})

static void expect_usage_error(char **args, const char *msg)
{
    spawn_result_t *r = run(args);
    if (exit_code(r->status) != 2 || !strstr(r->err, msg))
        VT_FAIL("expected a usage error containing '%s', got status %d, stderr: %s", msg,
                exit_code(r->status), r->err);
}

int main(int argc, char **argv)
{
    VT_CHECK(argc == 2);
    vmmc = argv[1];
    spawn_result_t *r;

    /* Programs that never talk to the launcher. */
    r = RUN("-n", "2", "--", "true");
    VT_CHECK(exit_code(r->status) == 0);
    r = RUN("-n", "3", "sh", "-c", "exit 0");
    VT_CHECK(exit_code(r->status) == 0);

    /* The environment: every rank once, consistent values. */
    r = RUN("-n", "4", "--tag-output", "--", "sh", "-c",
            "echo \"R=$VMMC_RANK S=$VMMC_SIZE L=$VMMC_LOCAL_RANK J=$VMMC_JOB "
            "S2=$VMMC_LAUNCHER\"");
    VT_CHECK(exit_code(r->status) == 0);
    char job[64] = "";
    for (int k = 0; k < 4; k++) {
        char want[64];
        snprintf(want, sizeof want, "[%d] R=%d S=4 L=%d J=", k, k, k);
        if (count_substr(r->out, want) != 1)
            VT_FAIL("rank %d's environment is missing or repeated in:\n%s", k, r->out);
        const char *j = strstr(strstr(r->out, want), "J=") + 2;
        char got[64];
        VT_CHECK(sscanf(j, "%63s", got) == 1);
        VT_CHECK(strlen(got) >= 8);
        if (!job[0])
            snprintf(job, sizeof job, "%s", got);
        VT_CHECK(!strcmp(job, got));
    }
    /* The launcher's abstract socket is gone with it; nothing in the filesystem. */
    FILE *f = fopen("/proc/net/unix", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strstr(line, job))
                VT_FAIL("the socket of job %s outlived the launcher: %s", job, line);
        fclose(f);
    }
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/vmmc-run-%s", job);
    VT_CHECK(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "/tmp/vmmc-run-%s", job);
    VT_CHECK(access(path, F_OK) != 0);

    /* Exit status: the failing rank's, named on stderr. */
    r = RUN("-n", "3", "--", "sh", "-c", "[ $VMMC_RANK = 2 ] && exit 5; exit 0");
    VT_CHECK(exit_code(r->status) == 5);
    VT_CHECK(strstr(r->err, "rank 2 (pid ") && strstr(r->err, "exited with status 5"));
    /* A signal death: 128 + signo. */
    r = RUN("-n", "2", "--", "sh", "-c", "[ $VMMC_RANK = 0 ] && kill -SEGV $$; exit 0");
    VT_CHECK(exit_code(r->status) == 128 + SIGSEGV);
    VT_CHECK(strstr(r->err, "rank 0 (pid ") && strstr(r->err, "killed by signal 11"));
    /* A program that cannot be started. */
    r = RUN("-n", "1", "--", "/nonexistent/vmmc-test-program");
    VT_CHECK(exit_code(r->status) == 127);
    VT_CHECK(strstr(r->err, "cannot execute"));

    /* --timeout kills a job that does not end. */
    r = RUN("-n", "2", "--timeout", "1", "--", "sleep", "30");
    VT_CHECK(exit_code(r->status) == 124);
    VT_CHECK(strstr(r->err, "timed out"));

    /* --cpu-bind: one cpu per rank, distinct while there are enough. */
    r = RUN("-n", "2", "--cpu-bind", "--tag-output", "--", "sh", "-c",
            "grep Cpus_allowed_list /proc/self/status");
    VT_CHECK(exit_code(r->status) == 0);
    cpu_set_t set;
    VT_CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
    char cpus[2][32];
    for (int k = 0; k < 2; k++) {
        char want[64];
        snprintf(want, sizeof want, "[%d] Cpus_allowed_list:", k);
        const char *p = strstr(r->out, want);
        VT_CHECK(p);
        VT_CHECK(sscanf(p + strlen(want), "%31s", cpus[k]) == 1);
        VT_CHECK(!strchr(cpus[k], '-') && !strchr(cpus[k], ','));
    }
    if (CPU_COUNT(&set) >= 2)
        VT_CHECK(strcmp(cpus[0], cpus[1]) != 0);

    /* Bad arguments are usage errors. */
    expect_usage_error((char *[]){NULL}, "-n N is required");
    expect_usage_error((char *[]){"-n", "0", "true", NULL}, "-n needs");
    expect_usage_error((char *[]){"-n", "1025", "true", NULL}, "-n needs");
    expect_usage_error((char *[]){"-n", "two", "true", NULL}, "-n needs");
    expect_usage_error((char *[]){"-n", NULL}, "-n needs");
    expect_usage_error((char *[]){"-n", "2", NULL}, "no program");
    expect_usage_error((char *[]){"-n", "2", "--bogus", "true", NULL}, "unknown option");
    expect_usage_error((char *[]){"-n", "2", "--timeout", "-1", "true", NULL}, "--timeout");
    expect_usage_error((char *[]){"-n", "2", "--timeout", NULL}, "--timeout");
    r = RUN("--help");
    VT_CHECK(exit_code(r->status) == 0 && strstr(r->out, "usage: vmmc run"));
    printf("run_status ok\n");
    return 0;
}
