/* vmmc: the command-line tool (run, bench, info, mpirun, preload). */
#include <stdio.h>
#include <string.h>

#include "cmds.h"
#include "vmmc/vmmc.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vmmc <command> [options]\n"
            "\n"
            "commands:\n"
            "  run -n N [--] prog [args...]   start N processes of prog as one job\n"
            "  bench [--quick] [suites...]     measure latency, bandwidth, overheads\n"
            "  info [-c]                       version, transports, limits, settings\n"
            "  mpirun [mpirun args] prog       an MPI program over the libfabric provider vmmc\n"
            "  preload [-v] -- cmd [args...]   an unmodified program, its TCP over vmmc\n"
            "  help                            this text\n"
            "\n"
            "`vmmc <command> --help` describes each command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run"))
        return vmmc_cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "info"))
        return vmmc_cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench"))
        return vmmc_cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "mpirun"))
        return vmmc_cmd_mpirun(argc - 1, argv + 1);
    if (!strcmp(cmd, "preload"))
        return vmmc_cmd_preload(argc - 1, argv + 1);
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("vmmc %s\n", vmmc_version());
        return 0;
    }
    fprintf(stderr, "vmmc: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
