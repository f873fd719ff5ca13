/* `vmmc run`: the ranks' output (stderr always, stdout with --tag-output)
 * through the launcher, a whole line at a time, so that ranks' lines never
 * mix; each rank's last stderr line is kept for its failure summary. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "run_int.h"

/* Copy a complete line (with a [rank] prefix under --tag-output); note the
 * last non-empty line of each rank's stderr. */
static void emit(job_t *j, int r, int k, const char *p, size_t n, int newline)
{
    FILE *f = k ? stderr : stdout;
    if (j->tag_output)
        fprintf(f, "[%d] %.*s%s", r, (int)n, p, newline ? "\n" : "");
    else
        fprintf(f, "%.*s%s", (int)n, p, newline ? "\n" : "");
    if (k == 1 && n > 0) {
        char *le = j->ranks[r].last_err;
        size_t m = n < sizeof j->ranks[r].last_err - 1 ? n : sizeof j->ranks[r].last_err - 1;
        memcpy(le, p, m);
        le[m] = 0;
        for (size_t i = 0; i < m; i++)
            if ((unsigned char)le[i] < ' ')
                le[i] = ' ';
    }
}

/* Read what the pipe holds now (all of it), pass complete lines on; at EOF
 * or with @eof_flush, the last partial line too. */
void run_drain(job_t *j, int r, int k, int eof_flush)
{
    outstream_t *o = &j->ranks[r].out[k];
    FILE *f = k ? stderr : stdout;
    for (;;) {
        if (o->fd >= 0 && !eof_flush) {
            ssize_t n = read(o->fd, o->buf + o->len, sizeof o->buf - o->len);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN)
                break;
            if (n <= 0) {
                close(o->fd);
                o->fd = -1;
                eof_flush = 1;
            } else {
                o->len += (size_t)n;
            }
        }
        size_t start = 0;
        for (size_t i = 0; i < o->len; i++)
            if (o->buf[i] == '\n') {
                emit(j, r, k, o->buf + start, i - start, 1);
                start = i + 1;
            }
        if (start == 0 && o->len == sizeof o->buf) { /* a line longer than the buffer */
            emit(j, r, k, o->buf, o->len, 0);
            start = o->len;
        }
        if (eof_flush && start < o->len) {
            emit(j, r, k, o->buf + start, o->len - start, 1);
            start = o->len;
        }
        memmove(o->buf, o->buf + start, o->len - start);
        o->len -= start;
        if (o->fd < 0 || eof_flush)
            break;
    }
    fflush(f);
}

int run_open_streams(const job_t *j)
{
    for (int r = 0; r < j->n; r++)
        for (int k = 0; k < 2; k++)
            if (j->ranks[r].out[k].fd >= 0)
                return 1;
    return 0;
}
