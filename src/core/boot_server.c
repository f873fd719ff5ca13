/* The bootstrap rendezvous server (see boot_server.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core/boot_server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/boot_wire.h"

enum {
    R_WAITING = 0,  /* not joined yet */
    R_JOINED,       /* HELLO received, connection open */
    R_DISCONNECTED, /* connection lost without FINI; exit status not known yet */
    R_LEFT,         /* FINI received, or exited cleanly */
    R_DEAD          /* died; DEAD was broadcast */
};

typedef struct {
    int state;
    int conn; /* index in conns, -1 if none */
    uint32_t pid;
    char *card;
    uint32_t cardlen;
    uint64_t barrier; /* highest epoch requested */
} srank_t;

typedef struct {
    int fd;   /* -1 once closed */
    int rank; /* -1 until HELLO */
    int lost; /* closed because of an error or EOF: the rank's state must follow */
    vmmc_bw_rx_t rx;
} sconn_t;

struct vmmc_boot_server {
    int lfd;
    int size;
    char job[VMMC_BW_MAX_JOB + 1];
    unsigned flags;
    srank_t *ranks;
    sconn_t *conns;
    int nconns, maxconns;
    int joined;
    int table_sent;
    int broken_rank; /* >=0: this rank is gone before the table: it can never complete */
    int64_t broken_status;
    uint64_t barrier_done;
};

static void srv_log(const vmmc_boot_server_t *s, const char *fmt, const char *a, int n)
{
    fprintf(stderr, "vmmc: bootstrap server (job %s): ", s->job);
    fprintf(stderr, fmt, a, n);
    fputc('\n', stderr);
}

int vmmc_boot_server_create(vmmc_boot_server_t **out, int lfd, int size, const char *job,
                            unsigned flags)
{
    if (size < 1 || size > VMMC_BW_MAX_SIZE || !job || strlen(job) > VMMC_BW_MAX_JOB)
        return -EINVAL;
    vmmc_boot_server_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->ranks = calloc((size_t)size, sizeof *s->ranks);
    s->maxconns = size + 16;
    s->conns = calloc((size_t)s->maxconns, sizeof *s->conns);
    if (!s->ranks || !s->conns) {
        free(s->ranks);
        free(s->conns);
        free(s);
        return -ENOMEM;
    }
    int fl = fcntl(lfd, F_GETFL);
    if (fl < 0 || fcntl(lfd, F_SETFL, fl | O_NONBLOCK) < 0) {
        int e = errno;
        free(s->ranks);
        free(s->conns);
        free(s);
        return -e;
    }
    for (int r = 0; r < size; r++)
        s->ranks[r].conn = -1;
    s->lfd = lfd;
    s->size = size;
    snprintf(s->job, sizeof s->job, "%s", job);
    s->flags = flags;
    s->broken_rank = -1;
    *out = s;
    return 0;
}

int vmmc_boot_server_maxfds(const vmmc_boot_server_t *s)
{
    return s->maxconns + 1;
}

static void conn_close(vmmc_boot_server_t *s, int ci, int lost)
{
    sconn_t *c = &s->conns[ci];
    if (c->fd < 0)
        return;
    close(c->fd);
    c->fd = -1;
    c->lost = lost;
    vmmc_bw_rx_free(&c->rx);
}

/* Send a finished message to one connection; a client that cannot take it
 * within the send timeout is dropped. */
static void conn_send(vmmc_boot_server_t *s, int ci, const vmmc_bw_out_t *o)
{
    sconn_t *c = &s->conns[ci];
    if (c->fd < 0)
        return;
    int rc = vmmc_bw_write_all(c->fd, o->p, o->len, VMMC_BSRV_SEND_TIMEOUT_MS);
    if (rc < 0)
        conn_close(s, ci, 1);
}

static void send_error(vmmc_boot_server_t *s, int ci, const char *why)
{
    vmmc_bw_out_t o;
    vmmc_bw_out_init(&o, VMMC_BW_ERROR);
    vmmc_bw_put_str(&o, why, strlen(why));
    if (vmmc_bw_out_finish(&o) == 0)
        conn_send(s, ci, &o);
    vmmc_bw_out_free(&o);
    conn_close(s, ci, 1);
}

/* Send to every connection of a joined rank. */
static void broadcast(vmmc_boot_server_t *s, const vmmc_bw_out_t *o)
{
    for (int i = 0; i < s->nconns; i++)
        if (s->conns[i].fd >= 0 && s->conns[i].rank >= 0)
            conn_send(s, i, o);
}

static void broadcast_dead(vmmc_boot_server_t *s, int rank, int64_t status)
{
    vmmc_bw_out_t o;
    vmmc_bw_out_init(&o, VMMC_BW_DEAD);
    vmmc_bw_put_u32(&o, (uint32_t)rank);
    vmmc_bw_put_u64(&o, (uint64_t)status);
    if (vmmc_bw_out_finish(&o) == 0)
        broadcast(s, &o);
    vmmc_bw_out_free(&o);
}

static void check_barrier(vmmc_boot_server_t *s)
{
    if (!s->table_sent)
        return;
    uint64_t min = UINT64_MAX;
    for (int r = 0; r < s->size; r++)
        if (s->ranks[r].state == R_JOINED || s->ranks[r].state == R_DISCONNECTED)
            if (s->ranks[r].barrier < min)
                min = s->ranks[r].barrier;
    if (min == UINT64_MAX || min <= s->barrier_done)
        return;
    s->barrier_done = min;
    vmmc_bw_out_t o;
    vmmc_bw_out_init(&o, VMMC_BW_BARRIER);
    vmmc_bw_put_u64(&o, min);
    if (vmmc_bw_out_finish(&o) == 0)
        broadcast(s, &o);
    vmmc_bw_out_free(&o);
}

static void rank_dead(vmmc_boot_server_t *s, int rank, int64_t status)
{
    srank_t *r = &s->ranks[rank];
    if (r->state == R_DEAD || r->state == R_LEFT)
        return;
    r->state = R_DEAD;
    if (r->conn >= 0)
        conn_close(s, r->conn, 0);
    r->conn = -1;
    if (!s->table_sent && s->broken_rank < 0) {
        s->broken_rank = rank;
        s->broken_status = status;
    }
    broadcast_dead(s, rank, status);
    check_barrier(s);
}

/* Follow up connections closed by errors: their ranks disconnected. Sends
 * may drop further connections, so loop until nothing changes. */
static void settle(vmmc_boot_server_t *s)
{
    for (int again = 1; again;) {
        again = 0;
        for (int i = 0; i < s->nconns; i++) {
            sconn_t *c = &s->conns[i];
            if (!c->lost)
                continue;
            c->lost = 0;
            int rank = c->rank;
            c->rank = -1;
            if (rank < 0 || s->ranks[rank].conn != i)
                continue;
            srank_t *r = &s->ranks[rank];
            r->conn = -1;
            if (r->state != R_JOINED)
                continue;
            again = 1;
            if (s->flags & VMMC_BSRV_DEAD_ON_DISCONNECT) {
                rank_dead(s, rank, -1);
            } else {
                r->state = R_DISCONNECTED;
                check_barrier(s);
            }
        }
    }
    /* Compact closed connections. */
    int j = 0;
    for (int i = 0; i < s->nconns; i++) {
        if (s->conns[i].fd < 0 && !s->conns[i].lost)
            continue;
        if (i != j) {
            s->conns[j] = s->conns[i];
            if (s->conns[j].rank >= 0)
                s->ranks[s->conns[j].rank].conn = j;
        }
        j++;
    }
    if (j < s->nconns)
        memset(&s->conns[j], 0, (size_t)(s->nconns - j) * sizeof s->conns[0]);
    s->nconns = j;
}

static void send_table(vmmc_boot_server_t *s)
{
    vmmc_bw_out_t o;
    vmmc_bw_out_init(&o, VMMC_BW_TABLE);
    vmmc_bw_put_str(&o, s->job, strlen(s->job));
    vmmc_bw_put_u32(&o, (uint32_t)s->size);
    for (int r = 0; r < s->size; r++) {
        vmmc_bw_put_u32(&o, s->ranks[r].pid);
        vmmc_bw_put_str(&o, s->ranks[r].card, s->ranks[r].cardlen);
    }
    int rc = vmmc_bw_out_finish(&o);
    if (rc == 0) {
        s->table_sent = 1;
        broadcast(s, &o);
    } else {
        srv_log(s, "cannot build the rank table%s (%d)", "", rc);
        for (int i = 0; i < s->nconns; i++)
            if (s->conns[i].fd >= 0)
                send_error(s, i, "the rank table is too large");
    }
    vmmc_bw_out_free(&o);
}

static void on_hello(vmmc_boot_server_t *s, int ci, const uint8_t *body, uint32_t len)
{
    sconn_t *c = &s->conns[ci];
    vmmc_bw_in_t in = {.p = body, .len = len};
    uint32_t rank = vmmc_bw_get_u32(&in);
    uint32_t size = vmmc_bw_get_u32(&in);
    uint32_t pid = vmmc_bw_get_u32(&in);
    const char *job, *card;
    uint32_t joblen = vmmc_bw_get_str(&in, &job, VMMC_BW_MAX_JOB);
    uint32_t cardlen = vmmc_bw_get_str(&in, &card, VMMC_BW_MAX_CARD);
    char why[160];
    if (in.err || in.off != in.len) {
        send_error(s, ci, "malformed HELLO");
        return;
    }
    if (c->rank >= 0) {
        send_error(s, ci, "HELLO sent twice on one connection");
        return;
    }
    if ((int)size != s->size || rank >= size) {
        snprintf(why, sizeof why, "rank %u of size %u does not fit this job of size %d", rank, size,
                 s->size);
        send_error(s, ci, why);
        return;
    }
    if (joblen && (joblen != strlen(s->job) || memcmp(job, s->job, joblen))) {
        snprintf(why, sizeof why, "job id %.*s does not match this job (%s)", (int)joblen, job,
                 s->job);
        send_error(s, ci, why);
        return;
    }
    srank_t *r = &s->ranks[rank];
    if (r->state != R_WAITING) {
        snprintf(why, sizeof why, "rank %u already joined this job", rank);
        send_error(s, ci, why);
        return;
    }
    char *copy = malloc(cardlen + 1);
    if (!copy) {
        send_error(s, ci, "out of memory in the bootstrap server");
        return;
    }
    memcpy(copy, card, cardlen);
    copy[cardlen] = 0;
    r->card = copy;
    r->cardlen = cardlen;
    r->pid = pid;
    r->state = R_JOINED;
    r->conn = ci;
    c->rank = (int)rank;
    s->joined++;
    if (s->broken_rank >= 0) {
        /* The rendezvous cannot complete: tell this rank at once. */
        vmmc_bw_out_t o;
        vmmc_bw_out_init(&o, VMMC_BW_DEAD);
        vmmc_bw_put_u32(&o, (uint32_t)s->broken_rank);
        vmmc_bw_put_u64(&o, (uint64_t)s->broken_status);
        if (vmmc_bw_out_finish(&o) == 0)
            conn_send(s, ci, &o);
        vmmc_bw_out_free(&o);
        return;
    }
    if (s->joined == s->size)
        send_table(s);
}

static void on_message(vmmc_boot_server_t *s, int ci, uint16_t type, const uint8_t *body,
                       uint32_t len)
{
    sconn_t *c = &s->conns[ci];
    vmmc_bw_in_t in = {.p = body, .len = len};
    switch (type) {
    case VMMC_BW_HELLO:
        on_hello(s, ci, body, len);
        return;
    case VMMC_BW_BARRIER: {
        uint64_t epoch = vmmc_bw_get_u64(&in);
        if (in.err || in.off != in.len || c->rank < 0 || !s->table_sent) {
            send_error(s, ci, "unexpected or malformed BARRIER");
            return;
        }
        srank_t *r = &s->ranks[c->rank];
        if (epoch > r->barrier)
            r->barrier = epoch;
        check_barrier(s);
        return;
    }
    case VMMC_BW_FINI: {
        if (len || c->rank < 0) {
            send_error(s, ci, "unexpected or malformed FINI");
            return;
        }
        srank_t *r = &s->ranks[c->rank];
        if (r->state == R_JOINED)
            r->state = R_LEFT;
        r->conn = -1;
        c->rank = -1;
        conn_close(s, ci, 0);
        check_barrier(s);
        return;
    }
    default:
        send_error(s, ci, "unexpected message type");
        return;
    }
}

static void on_readable(vmmc_boot_server_t *s, int ci)
{
    sconn_t *c = &s->conns[ci];
    long n = vmmc_bw_rx_fill(&c->rx, c->fd);
    if (n == -EAGAIN)
        return;
    if (n <= 0) {
        conn_close(s, ci, 1);
        return;
    }
    for (;;) {
        uint16_t type;
        const uint8_t *body;
        uint32_t len;
        int rc = vmmc_bw_rx_next(&c->rx, &type, &body, &len);
        if (rc == 0)
            return;
        if (rc < 0) {
            srv_log(s, "malformed message from a client%s (rank %d); dropping it", "", c->rank);
            send_error(s, ci, "malformed message header");
            return;
        }
        on_message(s, ci, type, body, len);
        if (c->fd < 0)
            return;
        vmmc_bw_rx_consume(&c->rx);
    }
}

static void on_accept(vmmc_boot_server_t *s)
{
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return; /* EAGAIN, or out of descriptors: retry on the next poll */
        }
        sconn_t *c = NULL;
        if (s->nconns < s->maxconns) {
            c = &s->conns[s->nconns++];
        } else {
            /* Full: give the slot of the oldest connection that has said
             * nothing at all (ranks speak at once) to the newcomer. */
            for (int i = 0; i < s->nconns && !c; i++) {
                sconn_t *o = &s->conns[i];
                char b;
                if (o->fd < 0 || o->rank >= 0 || o->lost || o->rx.len ||
                    recv(o->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != -1)
                    continue;
                c = o;
                close(c->fd);
                vmmc_bw_rx_free(&c->rx);
            }
            if (!c) {
                close(fd);
                continue;
            }
        }
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->rank = -1;
    }
}

int vmmc_boot_server_pollfds(vmmc_boot_server_t *s, struct pollfd *fds)
{
    fds[0] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
    for (int i = 0; i < s->nconns; i++)
        fds[1 + i] = (struct pollfd){.fd = s->conns[i].fd, .events = POLLIN};
    return 1 + s->nconns;
}

void vmmc_boot_server_handle(vmmc_boot_server_t *s, const struct pollfd *fds, int n)
{
    /* Connections may have been closed and compacted since pollfds (the
     * owner may report exits in between): find each ready fd again. */
    for (int i = 1; i < n; i++) {
        if (!fds[i].revents || fds[i].fd < 0)
            continue;
        int ci = i - 1;
        if (ci >= s->nconns || s->conns[ci].fd != fds[i].fd)
            for (ci = 0; ci < s->nconns && s->conns[ci].fd != fds[i].fd; ci++)
                ;
        if (ci < s->nconns)
            on_readable(s, ci);
    }
    settle(s);
    if (n > 0 && (fds[0].revents & POLLIN))
        on_accept(s);
}

void vmmc_boot_server_rank_exited(vmmc_boot_server_t *s, int rank, int status, int failed)
{
    if (rank < 0 || rank >= s->size)
        return;
    srank_t *r = &s->ranks[rank];
    if (failed || (!s->table_sent && r->state != R_LEFT)) {
        rank_dead(s, rank, status);
    } else if (r->state != R_DEAD && r->state != R_LEFT) {
        r->state = R_LEFT;
        if (r->conn >= 0) {
            s->conns[r->conn].rank = -1;
            conn_close(s, r->conn, 0);
        }
        r->conn = -1;
        check_barrier(s);
    }
    settle(s);
}

void vmmc_boot_server_dead(vmmc_boot_server_t *s, int rank, int status)
{
    if (rank < 0 || rank >= s->size)
        return;
    rank_dead(s, rank, status);
    settle(s);
}

int vmmc_boot_server_live(const vmmc_boot_server_t *s)
{
    int n = 0;
    for (int r = 0; r < s->size; r++)
        n += s->ranks[r].state <= R_DISCONNECTED;
    return n;
}

void vmmc_boot_server_destroy(vmmc_boot_server_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nconns; i++)
        conn_close(s, i, 0);
    for (int r = 0; r < s->size; r++)
        free(s->ranks[r].card);
    close(s->lfd);
    free(s->ranks);
    free(s->conns);
    free(s);
}
