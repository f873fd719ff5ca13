/* Bootstrap through PMIx, for processes started by Open MPI's mpirun/prterun
 * or by srun. Cards and pids are exchanged with PMIx_Put/Commit/Fence/Get;
 * the barrier is a non-blocking PMIx fence whose completion (and any
 * process-death event PMIx reports) is written, in the bootstrap wire format,
 * into a socket pair whose reading end is b->fd, so the core sees the same
 * events as with the launcher. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/boot_priv.h"
#include "util/log.h"
#include "vmmc/vmmc.h"
#include "vmmc_build_config.h"

#if VMMC_HAVE_PMIX
#include <pmix.h>

typedef struct pmix_state {
    pmix_proc_t me;
    pthread_mutex_t lock; /* serialises writes to ev_wr from PMIx threads */
    int ev_wr;
    size_t evh_id;
    int evh_registered;
} pmix_state_t;

typedef struct fence_req {
    pmix_state_t *st;
    uint64_t epoch;
} fence_req_t;

int vmmc_boot_pmix_available(void)
{
    return getenv("PMIX_RANK") && getenv("PMIX_NAMESPACE");
}

static void post_event(pmix_state_t *st, vmmc_bw_out_t *o)
{
    if (vmmc_bw_out_finish(o) == 0) {
        pthread_mutex_lock(&st->lock);
        if (st->ev_wr >= 0)
            vmmc_bw_write_all(st->ev_wr, o->p, o->len, 1000);
        pthread_mutex_unlock(&st->lock);
    }
    vmmc_bw_out_free(o);
}

static void fence_done(pmix_status_t status, void *cbdata)
{
    fence_req_t *req = cbdata;
    vmmc_bw_out_t o;
    if (status == PMIX_SUCCESS) {
        vmmc_bw_out_init(&o, VMMC_BW_BARRIER);
        vmmc_bw_put_u64(&o, req->epoch);
    } else {
        /* A failed fence means a process of the job is gone. */
        vmmc_bw_out_init(&o, VMMC_BW_ERROR);
        const char *why = PMIx_Error_string(status);
        vmmc_bw_put_str(&o, why, strlen(why));
    }
    post_event(req->st, &o);
    free(req);
}

/* The process's PMIx state, for the event handler (one job per process). */
static pmix_state_t *event_state;

static void proc_event(size_t id, pmix_status_t status, const pmix_proc_t *source,
                       pmix_info_t info[], size_t ninfo, pmix_info_t *results, size_t nresults,
                       pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    pmix_state_t *st = event_state;
    if (st && source && PMIX_CHECK_NSPACE(source->nspace, st->me.nspace) &&
        source->rank != PMIX_RANK_WILDCARD && source->rank != st->me.rank) {
        vmmc_bw_out_t o;
        vmmc_bw_out_init(&o, VMMC_BW_DEAD);
        vmmc_bw_put_u32(&o, source->rank);
        vmmc_bw_put_u64(&o, (uint64_t)(int64_t)-1);
        post_event(st, &o);
    }
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static int pmix_fail(const char *what, pmix_status_t rc)
{
    return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "PMIx: %s failed: %s", what,
                      PMIx_Error_string(rc));
}

int vmmc_boot_pmix_init(vmmc_boot_t *b, boot_priv_t *p, const char *card, int timeout_ms)
{
    size_t cl = strlen(card);
    if (cl > VMMC_BW_MAX_CARD)
        return vmmc_error(VMMC_ERR_INVALID, "bootstrap: card of %zu bytes exceeds %u", cl,
                          VMMC_BW_MAX_CARD);
    pmix_state_t *st = calloc(1, sizeof *st);
    if (!st)
        return vmmc_error(VMMC_ERR_NOMEM, "PMIx: no memory");
    st->ev_wr = -1;
    pthread_mutex_init(&st->lock, NULL);
    p->pmix = st;
    pmix_status_t rc = PMIx_Init(&st->me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        pthread_mutex_destroy(&st->lock);
        free(st);
        p->pmix = NULL;
        return pmix_fail("PMIx_Init", rc);
    }
    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, st->me.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t *val = NULL;
    rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val);
    if (rc != PMIX_SUCCESS || !val)
        return pmix_fail("PMIx_Get(job size)", rc);
    uint32_t size = val->type == PMIX_UINT32 ? val->data.uint32 : 0;
    PMIX_VALUE_RELEASE(val);
    if (size < 1 || size > VMMC_BW_MAX_SIZE || st->me.rank >= size)
        return vmmc_error(VMMC_ERR_PROTOCOL, "PMIx: rank %u of job size %u is not usable",
                          st->me.rank, size);
    b->rank = (int)st->me.rank;
    b->size = (int)size;
    /* The job id must be short and safe in socket names: hash the namespace. */
    uint64_t h = 1469598103934665603ull;
    for (const char *c = st->me.nspace; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    snprintf(b->job, sizeof b->job, "%016llx", (unsigned long long)h);

    /* Publish "pid:card". */
    char *pc = malloc(cl + 24);
    if (!pc)
        return vmmc_error(VMMC_ERR_NOMEM, "PMIx: no memory");
    snprintf(pc, cl + 24, "%d:%s", (int)getpid(), card);
    pmix_value_t v;
    PMIX_VALUE_LOAD(&v, pc, PMIX_STRING);
    rc = PMIx_Put(PMIX_GLOBAL, "vmmc.card", &v);
    PMIX_VALUE_DESTRUCT(&v);
    free(pc);
    if (rc != PMIX_SUCCESS)
        return pmix_fail("PMIx_Put", rc);
    if ((rc = PMIx_Commit()) != PMIX_SUCCESS)
        return pmix_fail("PMIx_Commit", rc);
    pmix_info_t finfo[2];
    bool collect = true;
    int tmo = timeout_ms > 0 ? (timeout_ms + 999) / 1000 : 0;
    PMIX_INFO_LOAD(&finfo[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&finfo[1], PMIX_TIMEOUT, &tmo, PMIX_INT);
    rc = PMIx_Fence(NULL, 0, finfo, tmo > 0 ? 2 : 1);
    PMIX_INFO_DESTRUCT(&finfo[0]);
    PMIX_INFO_DESTRUCT(&finfo[1]);
    if (rc != PMIX_SUCCESS)
        return pmix_fail("PMIx_Fence", rc);

    b->peers = calloc(size, sizeof *b->peers);
    if (!b->peers)
        return vmmc_error(VMMC_ERR_NOMEM, "PMIx: no memory for %u peers", size);
    for (uint32_t r = 0; r < size; r++) {
        pmix_proc_t pr;
        PMIX_LOAD_PROCID(&pr, st->me.nspace, r);
        val = NULL;
        rc = PMIx_Get(&pr, "vmmc.card", NULL, 0, &val);
        if (rc != PMIX_SUCCESS || !val || val->type != PMIX_STRING || !val->data.string) {
            if (val)
                PMIX_VALUE_RELEASE(val);
            return vmmc_error(VMMC_ERR_PROTOCOL, "PMIx: no card from rank %u: %s", r,
                              PMIx_Error_string(rc));
        }
        char *colon = strchr(val->data.string, ':');
        if (colon) {
            b->peers[r].pid = (pid_t)atoi(val->data.string);
            b->peers[r].card = strdup(colon + 1);
        }
        PMIX_VALUE_RELEASE(val);
        if (!colon)
            return vmmc_error(VMMC_ERR_PROTOCOL, "PMIx: malformed card from rank %u", r);
        if (!b->peers[r].card)
            return vmmc_error(VMMC_ERR_NOMEM, "PMIx: no memory for cards");
    }

    /* Events (barrier completions, deaths) arrive on b->fd. */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        return vmmc_error_sys("PMIx: socketpair");
    b->fd = sv[0];
    st->ev_wr = sv[1];
    event_state = st;
    pmix_status_t codes[] = {PMIX_ERR_PROC_ABORTED, PMIX_EVENT_PROC_TERMINATED,
                             PMIX_ERR_PROC_TERM_WO_SYNC};
    rc = PMIx_Register_event_handler(codes, sizeof codes / sizeof codes[0], NULL, 0, proc_event,
                                     NULL, NULL);
    if (rc >= 0) {
        st->evh_id = (size_t)rc;
        st->evh_registered = 1;
    } else {
        vmmc_debug("PMIx: no process event handler: %s", PMIx_Error_string(rc));
    }
    return VMMC_OK;
}

int vmmc_boot_pmix_barrier(vmmc_boot_t *b, boot_priv_t *p, uint64_t epoch)
{
    pmix_state_t *st = p->pmix;
    if (b->size == 1) { /* complete at once, through b->fd like any other */
        vmmc_bw_out_t o;
        vmmc_bw_out_init(&o, VMMC_BW_BARRIER);
        vmmc_bw_put_u64(&o, epoch);
        post_event(st, &o);
        return VMMC_OK;
    }
    fence_req_t *req = malloc(sizeof *req);
    if (!req)
        return vmmc_error(VMMC_ERR_NOMEM, "PMIx: no memory for a fence");
    req->st = st;
    req->epoch = epoch;
    pmix_status_t rc = PMIx_Fence_nb(NULL, 0, NULL, 0, fence_done, req);
    if (rc != PMIX_SUCCESS) {
        free(req);
        return vmmc_error(VMMC_ERR_PEER_DEAD, "PMIx: fence failed: %s", PMIx_Error_string(rc));
    }
    return VMMC_OK;
}

void vmmc_boot_pmix_fini(vmmc_boot_t *b, boot_priv_t *p)
{
    pmix_state_t *st = p->pmix;
    if (!st)
        return;
    if (st->evh_registered)
        PMIx_Deregister_event_handler(st->evh_id, NULL, NULL);
    PMIx_Finalize(NULL, 0);
    event_state = NULL;
    pthread_mutex_lock(&st->lock);
    if (st->ev_wr >= 0)
        close(st->ev_wr);
    st->ev_wr = -1;
    pthread_mutex_unlock(&st->lock);
    pthread_mutex_destroy(&st->lock);
    free(st);
    p->pmix = NULL;
    (void)b;
}

#else /* built without PMIx: processes started by mpirun are singletons */

int vmmc_boot_pmix_available(void)
{
    return 0;
}

int vmmc_boot_pmix_init(vmmc_boot_t *b, boot_priv_t *p, const char *card, int timeout_ms)
{
    return vmmc_error(VMMC_ERR_UNSUPPORTED, "this vmmc was built without PMIx");
}

int vmmc_boot_pmix_barrier(vmmc_boot_t *b, boot_priv_t *p, uint64_t epoch)
{
    return vmmc_error(VMMC_ERR_UNSUPPORTED, "this vmmc was built without PMIx");
}

void vmmc_boot_pmix_fini(vmmc_boot_t *b, boot_priv_t *p)
{
}

#endif
