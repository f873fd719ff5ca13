#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include "transport/udp/fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/config.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

uint64_t vmmc_udp_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* One datagram (the latency path) goes through sendto/recvfrom: cheaper
 * than the vector calls, which copy in a message header and, for recvmmsg,
 * try a second datagram before returning. */
static int plain_send(void *ctx, int fd, struct mmsghdr *v, unsigned n)
{
    if (n == 1 && v->msg_hdr.msg_iovlen == 1) {
        const struct msghdr *h = &v->msg_hdr;
        ssize_t r = sendto(fd, h->msg_iov[0].iov_base, h->msg_iov[0].iov_len, 0, h->msg_name,
                           h->msg_namelen);
        if (r < 0)
            return -1;
        v->msg_len = (unsigned)r;
        return 1;
    }
    return sendmmsg(fd, v, n, 0);
}

static int plain_recv(void *ctx, int fd, struct mmsghdr *v, unsigned n)
{
    if (n == 1 && v->msg_hdr.msg_iovlen == 1) {
        struct msghdr *h = &v->msg_hdr;
        size_t cap = h->msg_iov[0].iov_len;
        /* MSG_TRUNC: the datagram's real length, so truncation shows. */
        ssize_t r = recvfrom(fd, h->msg_iov[0].iov_base, cap, MSG_DONTWAIT | MSG_TRUNC,
                             h->msg_name, &h->msg_namelen);
        if (r < 0)
            return -1;
        h->msg_flags = (size_t)r > cap ? MSG_TRUNC : 0;
        v->msg_len = (size_t)r > cap ? (unsigned)cap : (unsigned)r;
        return 1;
    }
    return recvmmsg(fd, v, n, MSG_DONTWAIT, NULL);
}

static uint64_t plain_due(void *ctx)
{
    return UINT64_MAX;
}

static void plain_destroy(void *ctx)
{
}

void vmmc_udp_bindings_plain(vmmc_udp_bindings_t *b)
{
    b->sendmmsg = plain_send;
    b->recvmmsg = plain_recv;
    b->next_due = plain_due;
    b->destroy = plain_destroy;
    b->ctx = NULL;
}

int vmmc_udp_fault_parse(const char *s, vmmc_udp_fault_spec_t *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->seed = 1;
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return vmmc_error(VMMC_ERR_INVALID, "fault spec too long");
    strcpy(buf, s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return vmmc_error(VMMC_ERR_INVALID, "fault spec item '%s' is not key=value", tok);
        *eq = 0;
        const char *k = tok, *v = eq + 1;
        char *end;
        if (!strcmp(k, "drop") || !strcmp(k, "dup") || !strcmp(k, "reorder")) {
            errno = 0;
            double p = strtod(v, &end);
            if (end == v || *end || errno || p < 0 || p > 1)
                return vmmc_error(VMMC_ERR_INVALID,
                                  "fault spec: %s=%s is not a probability in [0,1]", k, v);
            *(!strcmp(k, "drop") ? &spec->drop : !strcmp(k, "dup") ? &spec->dup : &spec->reorder) = p;
        } else if (!strcmp(k, "delay")) {
            if (vmmc_cfg_parse_time(v, &spec->delay_ns) != 0)
                return vmmc_error(VMMC_ERR_INVALID, "fault spec: delay=%s is not a time", v);
        } else if (!strcmp(k, "seed")) {
            errno = 0;
            unsigned long long sd = strtoull(v, &end, 0);
            if (end == v || *end || errno)
                return vmmc_error(VMMC_ERR_INVALID, "fault spec: seed=%s is not a number", v);
            spec->seed = sd ? sd : 1;
        } else {
            return vmmc_error(VMMC_ERR_INVALID,
                              "fault spec: unknown key '%s' (drop, dup, reorder, delay, seed)", k);
        }
    }
    return VMMC_OK;
}

typedef struct held {
    uint64_t due;
    uint32_t len;
    socklen_t alen;
    struct sockaddr_storage addr;
    uint8_t *data;
} held_t;

typedef struct fault {
    vmmc_udp_fault_spec_t spec;
    uint64_t rng;
    unsigned max_dgram;
    unsigned nheld;
    held_t held[VMMC_UDP_FAULT_HELD];
    vmmc_udp_fault_stats_t st;
} fault_t;

static uint64_t rnd(fault_t *f)
{
    uint64_t x = f->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    f->rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static double unif(fault_t *f)
{
    return (double)(rnd(f) >> 11) * (1.0 / 9007199254740992.0);
}

/* Keep a copy of datagram @m to hand up at @due. Returns 0, or -1 if full. */
static int hold(fault_t *f, const struct mmsghdr *m, uint64_t due)
{
    if (f->nheld == VMMC_UDP_FAULT_HELD)
        return -1;
    held_t *h = &f->held[f->nheld];
    if (!h->data && !(h->data = malloc(f->max_dgram)))
        return -1;
    h->len = m->msg_len > f->max_dgram ? f->max_dgram : m->msg_len;
    memcpy(h->data, m->msg_hdr.msg_iov[0].iov_base, h->len);
    h->alen = m->msg_hdr.msg_namelen;
    if (h->alen > sizeof h->addr)
        h->alen = sizeof h->addr;
    memcpy(&h->addr, m->msg_hdr.msg_name, h->alen);
    h->due = due;
    f->nheld++;
    return 0;
}

/* Hand up held datagram @i into @m and remove it from the set. */
static void release(fault_t *f, unsigned i, struct mmsghdr *m)
{
    held_t *h = &f->held[i];
    size_t cap = m->msg_hdr.msg_iov[0].iov_len;
    size_t n = h->len < cap ? h->len : cap;
    memcpy(m->msg_hdr.msg_iov[0].iov_base, h->data, n);
    m->msg_len = (unsigned)n;
    if (m->msg_hdr.msg_name && m->msg_hdr.msg_namelen >= h->alen)
        memcpy(m->msg_hdr.msg_name, &h->addr, h->alen);
    m->msg_hdr.msg_namelen = h->alen;
    m->msg_hdr.msg_flags = 0;
    /* Keep the buffer, move the last entry into the gap. */
    held_t tmp = *h;
    *h = f->held[--f->nheld];
    f->held[f->nheld] = tmp;
}

static int fault_recv(void *ctx, int fd, struct mmsghdr *v, unsigned n)
{
    fault_t *f = ctx;
    uint64_t now = vmmc_udp_now();
    unsigned out = 0;
    /* Due datagrams first: they were "in the network" before new ones. */
    for (unsigned i = 0; i < f->nheld && out < n;) {
        if (f->held[i].due <= now)
            release(f, i, &v[out++]);
        else
            i++;
    }
    if (out == n)
        return (int)out;
    int r = recvmmsg(fd, v + out, n - out, MSG_DONTWAIT, NULL);
    if (r < 0)
        return out ? (int)out : -1;
    unsigned end = out + (unsigned)r;
    for (unsigned i = out; i < end; i++) {
        f->st.seen++;
        struct mmsghdr *m = &v[i];
        int keep = 1;
        if (unif(f) < f->spec.drop) {
            f->st.dropped++;
            keep = 0;
        } else {
            if (unif(f) < f->spec.dup && hold(f, m, now) == 0)
                f->st.duplicated++;
            uint64_t delay = 0;
            if (f->spec.reorder > 0 && unif(f) < f->spec.reorder) {
                delay = 50000 + rnd(f) % 950000;
                f->st.reordered++;
            } else if (f->spec.delay_ns) {
                delay = rnd(f) % (f->spec.delay_ns + 1);
                f->st.delayed++;
            }
            if (delay && hold(f, m, now + delay) == 0)
                keep = 0;
        }
        if (keep) {
            if (i != out) {
                struct mmsghdr t = v[out];
                v[out] = *m;
                *m = t;
            }
            out++;
        }
    }
    if (out == 0) {
        errno = EAGAIN;
        return -1;
    }
    return (int)out;
}

static uint64_t fault_due(void *ctx)
{
    fault_t *f = ctx;
    uint64_t d = UINT64_MAX;
    for (unsigned i = 0; i < f->nheld; i++)
        if (f->held[i].due < d)
            d = f->held[i].due;
    return d;
}

static void fault_destroy(void *ctx)
{
    fault_t *f = ctx;
    for (unsigned i = 0; i < VMMC_UDP_FAULT_HELD; i++)
        free(f->held[i].data);
    free(f);
}

int vmmc_udp_bindings_fault(vmmc_udp_bindings_t *b, const vmmc_udp_fault_spec_t *spec,
                            unsigned max_dgram)
{
    fault_t *f = calloc(1, sizeof *f);
    if (!f)
        return vmmc_error(VMMC_ERR_NOMEM, "cannot allocate the UDP fault injector");
    f->spec = *spec;
    f->rng = spec->seed ? spec->seed : 1;
    f->max_dgram = max_dgram;
    b->sendmmsg = plain_send;
    b->recvmmsg = fault_recv;
    b->next_due = fault_due;
    b->destroy = fault_destroy;
    b->ctx = f;
    return VMMC_OK;
}

void vmmc_udp_fault_stats(const vmmc_udp_bindings_t *b, vmmc_udp_fault_stats_t *st)
{
    if (b->recvmmsg == fault_recv)
        *st = ((const fault_t *)b->ctx)->st;
    else
        memset(st, 0, sizeof *st);
}
