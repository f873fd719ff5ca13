/* Exports made on demand: a layer registers a name prefix and a function;
 * when a peer asks to import a name with that prefix that is not exported,
 * the core queues the request as any waiting import (export.c, bounded per
 * peer by VMMC_PENDING_IMPORTS_MAX) and then calls the function, without
 * ep->lock, in the thread that received the request. The function decides
 * (every peer can ask for any name): it exports the name, and vmmc_export()
 * answers the queued request, or it refuses, and the request is answered
 * with its status at once.
 *
 * Registrations live in a list under ep->lock. A call marks its
 * registration busy; removal unlinks it (no new calls) and waits on ep->cond
 * until no call is inside, so the caller may free the function's argument. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/export.h"

typedef struct vmmc_demand {
    char prefix[VMMC_NAME_MAX];
    size_t plen;
    vmmc_demand_fn_t fn;
    void *arg;
    int busy;                  /* calls inside fn (and a registration's scan) */
    struct vmmc_demand *next;
} vmmc_demand_t;

static vmmc_demand_t **list_of(vmmc_ep_t *ep) { return (vmmc_demand_t **)&ep->demand; }

vmmc_demand_t *vmmc_demand_match(vmmc_ep_t *ep, const char *name)
{
    for (vmmc_demand_t *d = *list_of(ep); d; d = d->next) {
        if (!strncmp(name, d->prefix, d->plen)) {
            d->busy++;
            return d;
        }
    }
    return NULL;
}

/* Caller holds ep->lock. */
static void demand_done(vmmc_ep_t *ep, vmmc_demand_t *d)
{
    if (--d->busy == 0)
        pthread_cond_broadcast(&ep->cond);
}

void vmmc_demand_call(vmmc_ep_t *ep, vmmc_demand_t *d, int rank, uint64_t id, const char *name)
{
    /* (A function that refuses without a word of its own still gives one.) */
    vmmc_error(VMMC_ERR_PERMISSION, "rank %d refused to export '%s'", ep->rank, name);
    int st = d->fn(ep, name, rank, d->arg);
    char text[160];
    if (st < 0)
        snprintf(text, sizeof text, "%s", vmmc_last_error());
    pthread_mutex_lock(&ep->lock);
    demand_done(ep, d);
    if (st < 0) {
        /* Declined: take the request out of the queue (unless an export of
         * the name answered it meanwhile) and say so now. */
        for (pending_import_t **pp = (pending_import_t **)&ep->pending_imports; *pp;
             pp = &(*pp)->next) {
            pending_import_t *pi = *pp;
            if (pi->rank == rank && pi->id == id) {
                *pp = pi->next;
                free(pi);
                vmmc_export_refuse(ep, rank, id, st, text);
                break;
            }
        }
    }
    pthread_mutex_unlock(&ep->lock);
}

static int overlaps(const char *a, size_t al, const char *b, size_t bl)
{
    return !strncmp(a, b, al < bl ? al : bl);
}

int vmmc_export_on_demand(vmmc_ep_t *ep, const char *prefix, vmmc_demand_fn_t fn, void *arg)
{
    VMMC_FORK_CHECK(ep);
    if (!ep || !prefix || !fn)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_export_on_demand: NULL %s",
                          !ep ? "endpoint" : !prefix ? "prefix" : "function");
    size_t plen = strlen(prefix);
    if (plen == 0 || plen >= VMMC_NAME_MAX)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_export_on_demand: a prefix is 1..%d bytes",
                          VMMC_NAME_MAX - 1);
    if (overlaps(prefix, plen, VMMC_MKEY_PREFIX, strlen(VMMC_MKEY_PREFIX)))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_export_on_demand: prefix '%s' overlaps the "
                          "names reserved for memory keys ('" VMMC_MKEY_PREFIX "')", prefix);
    vmmc_demand_t *d = calloc(1, sizeof *d);
    if (!d)
        return vmmc_error(VMMC_ERR_NOMEM, "vmmc_export_on_demand: no memory");
    memcpy(d->prefix, prefix, plen + 1);
    d->plen = plen;
    d->fn = fn;
    d->arg = arg;
    d->busy = 1; /* the scan below */
    pthread_mutex_lock(&ep->lock);
    for (vmmc_demand_t *o = *list_of(ep); o; o = o->next) {
        if (overlaps(o->prefix, o->plen, prefix, plen)) {
            pthread_mutex_unlock(&ep->lock);
            free(d);
            return vmmc_error(VMMC_ERR_EXISTS, "vmmc_export_on_demand: prefix '%s' overlaps "
                              "'%s', registered already", prefix, o->prefix);
        }
    }
    /* Requests that came before: hand them over too (copied, since the
     * queue changes once the lock is dropped). */
    size_t n = 0;
    for (pending_import_t *pi = ep->pending_imports; pi; pi = pi->next)
        n += !strncmp(pi->name, prefix, plen);
    pending_import_t *early = n ? calloc(n, sizeof *early) : NULL;
    if (n && !early) {
        pthread_mutex_unlock(&ep->lock);
        free(d);
        return vmmc_error(VMMC_ERR_NOMEM, "vmmc_export_on_demand: no memory");
    }
    size_t k = 0;
    for (pending_import_t *pi = ep->pending_imports; pi && k < n; pi = pi->next)
        if (!strncmp(pi->name, prefix, plen))
            early[k++] = *pi;
    d->next = *list_of(ep);
    *list_of(ep) = d;
    d->busy += (int)k;
    pthread_mutex_unlock(&ep->lock);
    for (size_t i = 0; i < k; i++)
        vmmc_demand_call(ep, d, early[i].rank, early[i].id, early[i].name);
    free(early);
    pthread_mutex_lock(&ep->lock);
    demand_done(ep, d);
    pthread_mutex_unlock(&ep->lock);
    return VMMC_OK;
}

int vmmc_export_on_demand_remove(vmmc_ep_t *ep, const char *prefix)
{
    VMMC_FORK_CHECK(ep);
    if (!ep || !prefix)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_export_on_demand_remove: NULL %s",
                          !ep ? "endpoint" : "prefix");
    pthread_mutex_lock(&ep->lock);
    vmmc_demand_t **pp = list_of(ep);
    while (*pp && strcmp((*pp)->prefix, prefix))
        pp = &(*pp)->next;
    vmmc_demand_t *d = *pp;
    if (!d) {
        pthread_mutex_unlock(&ep->lock);
        return vmmc_error(VMMC_ERR_NOT_FOUND, "vmmc_export_on_demand_remove: prefix '%s' is "
                          "not registered", prefix);
    }
    *pp = d->next;
    while (d->busy > 0)
        pthread_cond_wait(&ep->cond, &ep->lock);
    pthread_mutex_unlock(&ep->lock);
    free(d);
    return VMMC_OK;
}

void vmmc_demand_destroy(vmmc_ep_t *ep)
{
    for (vmmc_demand_t *d = *list_of(ep), *n; d; d = n) {
        n = d->next;
        free(d);
    }
    *list_of(ep) = NULL;
}
