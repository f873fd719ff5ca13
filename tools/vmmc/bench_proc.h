/* Running external programs for the "peers" suite: each in its own process
 * group with a time limit, killed on expiry; ports, output parsing. */
#ifndef VMMC_BENCH_PROC_H
#define VMMC_BENCH_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* Is @prog an executable in $PATH? Its full path into @full (if not NULL). */
int proc_in_path(const char *prog, char *full, size_t n);
pid_t proc_spawn(char *const argv[], char *const env[], int cpu, int outfd);
void proc_stop_group(pid_t pid);
int proc_run_capture(char *const argv[], char *const env[], int cpu, double timeout_s, char **out);
int proc_free_port(int type);
int proc_wait_port(pid_t server, int port, int udp, double timeout_s);
const char *proc_why(int rc);
const char *proc_find_line(const char *s, const char *prefix);
/* Ignore SIGPIPE; on SIGTERM/SIGINT kill the running program's group, then
 * leave with the signal. */
void proc_catch_stop(void);

#endif
