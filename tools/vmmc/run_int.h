/* `vmmc run`: what the launcher's files share. run.c starts the job and
 * watches it (the event loop, exits, signals, the kill plan); run_opts.c
 * parses the command line; run_rank.c turns a forked child into a rank;
 * run_output.c passes the ranks' output on, line by line. */
#ifndef VMMC_TOOLS_RUN_INT_H
#define VMMC_TOOLS_RUN_INT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RUN_MAX_RANKS 1024

typedef struct {
    int fd;        /* read end, -1 when closed */
    char buf[4096];
    size_t len;
} outstream_t;

typedef struct {
    pid_t pid;
    int running;
    outstream_t out[2]; /* stdout (--tag-output only), stderr (always) */
    char last_err[256]; /* the last non-empty line the rank wrote to stderr */
} rank_t;

typedef struct {
    int n;
    double timeout_s;
    int tag_output;
    int cpu_bind;
    char **argv;
    rank_t *ranks;
    int alive;
    int status;        /* exit status of the launcher: the first failure */
    int stopping;      /* a failure, signal or timeout: the job is being torn down */
    int64_t t_term;    /* when to send SIGTERM (-1: not planned) */
    int64_t t_kill;    /* when to send SIGKILL (-1: not planned) */
    int64_t grace_ms;
} job_t;

/* run_opts.c */
/* Fill @j from the command line; prints the reason and returns -1 if it is
 * wrong; prints the usage and exits 0 for --help. */
int run_parse_args(job_t *j, int argc, char **argv);
/* VMMC_RUN_GRACE in ms, through the library's settings table (500 if unset). */
int64_t run_grace_ms(void);

/* run_rank.c */
/* Raise the launcher's descriptor limit for @j's connections and pipes (the
 * ranks get the caller's limit back); prints the reason and returns -1. */
int run_raise_nofile(const job_t *j);
/* In the child after fork: become rank @r of job @job and exec the program. */
void run_child(const job_t *j, int r, const char *job, const char *sock, const sigset_t *oldmask,
               int pipes[2][2], pid_t launcher) __attribute__((noreturn));

/* run_output.c */
/* Read what rank @r's stream @k (0 stdout, 1 stderr) holds now and pass
 * complete lines on; at EOF or with @eof_flush, the last partial line too. */
void run_drain(job_t *j, int r, int k, int eof_flush);
/* Is any rank's output stream still open? */
int run_open_streams(const job_t *j);

#endif
