/* Sub-commands of the `vmmc` tool. Each takes the arguments after its name
 * (argv[0] is the sub-command) and returns the process exit status. */
#ifndef VMMC_TOOLS_CMDS_H
#define VMMC_TOOLS_CMDS_H

int vmmc_cmd_run(int argc, char **argv);   /* run.c: the job launcher */
int vmmc_cmd_info(int argc, char **argv);  /* info.c: version, limits, settings */
int vmmc_cmd_bench(int argc, char **argv); /* bench.c: the benchmark instrument */
int vmmc_cmd_mpirun(int argc, char **argv); /* mpirun.c: Open MPI's mpirun over the provider */
int vmmc_cmd_preload(int argc, char **argv); /* preload.c: a program with libvmmc-preload.so */

/* info_fi.c: the libfabric provider section of `vmmc info`. probe() loads
 * libfabric and the provider (registering its settings); print() reports. */
void vmmc_info_fi_probe(void);
void vmmc_info_fi_print(void);
int vmmc_info_fi_ok(void);
/* info_fabric.c: the fabric transport section: providers, which one is used. */
void vmmc_info_fabric_print(void);

/* preload.c: the line of `vmmc info` that says where libvmmc-preload.so is. */
void vmmc_info_preload_print(void);

#endif
