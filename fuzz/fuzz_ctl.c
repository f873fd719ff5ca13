/* libFuzzer target: control messages between endpoints (src/core/ctl.h),
 * as vmmc_ctl_recv() gets them from a peer's control channel, with the
 * descriptors that came along.
 *
 * One endpoint (a job of one, whose peer table is widened to 4 ranks on
 * this host that never answer) lives for the whole run. It exports two
 * regions and keeps one import of a name nobody exports pending towards
 * itself, so that replies have a request to complete. Input: byte 0 =
 * mode bits, byte 1 = the sending rank (mod 4), byte 2 = the length of a
 * memfd to pass (x 64 bytes), then the message bytes. Mode bit 0: fix up
 * magic, sender and string terminators so the message reaches the
 * handlers; bit 1: aim the message at the pending import (id, sender 0);
 * bits 2-3: descriptors to pass (0: none, 1: a memfd, 2: memfd + eventfd,
 * 3: three). Anything is fine except a crash, a sanitizer report, a hang
 * or a descriptor leak. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/ctl.h"
#include "fuzz_target.h"

static vmmc_ep_t *ep;
static vmmc_proxy_t *pending;
static char *region;

static void start_pending(void)
{
    pending = NULL;
    vmmc_proxy_t *px = NULL;
    int rc = vmmc_import_start(ep, 0, "fuzz.never.exported", 3600 * 1000, &px);
    if (rc == VMMC_INPROGRESS || rc == VMMC_OK)
        pending = px;
    else if (px)
        vmmc_unimport(px);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const char *vars[] = {"VMMC_LAUNCHER", "VMMC_BOOTSTRAP", "VMMC_RANK", "VMMC_SIZE",
                                 "PMIX_RANK", "PMIX_NAMESPACE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    setenv("VMMC_LOG_LEVEL", "0", 0);
    setenv("VMMC_TRANSPORT", "shm", 1);
    if (vmmc_init(NULL, &ep) != VMMC_OK) {
        fprintf(stderr, "fuzz_ctl: vmmc_init: %s\n", vmmc_last_error());
        exit(1);
    }
    /* Widen the job: ranks 1..3 are on this host but publish no socket. */
    int size = 4;
    for (int r = 1; r < size; r++) {
        char card[160];
        snprintf(card, sizeof card, "host=%s;pid=1;", ep->host_id);
        if (vmmc_peer_insert(ep, card, strlen(card), 1) != r)
            exit(1);
    }
    if (vmmc_mem_alloc(ep, 1 << 16, (void **)&region) != VMMC_OK)
        exit(1);
    vmmc_export_params_t p = {.name = "fuzz.mem", .addr = region, .length = 1 << 16};
    vmmc_export_t *ex;
    if (vmmc_export(ep, &p, &ex) != VMMC_OK)
        exit(1);
    static char heap[4096];
    p = (vmmc_export_params_t){.field_mask = VMMC_EXPORT_PARAM_FLAGS, .name = "fuzz.heap",
                               .addr = heap, .length = sizeof heap, .flags = VMMC_EXPORT_READ};
    if (vmmc_export(ep, &p, &ex) != VMMC_OK)
        exit(1);
    start_pending();
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    unsigned mode = data[0];
    int rank = data[1] % 4;
    size_t memlen = (size_t)data[2] * 64;
    data += 3;
    size -= 3;
    vmmc_ctl_msg_t m;
    size_t len = size;
    memset(&m, 0, sizeof m);
    memcpy(&m, data, size < sizeof m ? size : sizeof m);
    if (mode & 1) {
        len = sizeof m;
        m.magic = VMMC_CTL_MAGIC;
        m.src_rank = rank;
        m.name[sizeof m.name - 1] = 0;
        m.text[sizeof m.text - 1] = 0;
    }
    if ((mode & 2) && pending) {
        rank = 0;
        m.src_rank = 0;
        m.id = pending->req_id;
    }
    /* The message as the transport hands it over: at most a struct. */
    if (len > sizeof m)
        len = sizeof m;
    int before = count_fds();
    int fds[3], nfds = (int)((mode >> 2) & 3);
    for (int i = 0; i < nfds; i++) {
        if (i == 1) {
            fds[i] = eventfd(0, EFD_CLOEXEC);
        } else {
            fds[i] = memfd_create("fuzz", MFD_CLOEXEC);
            if (fds[i] >= 0 && ftruncate(fds[i], (off_t)memlen) != 0) {
                close(fds[i]);
                fds[i] = -1;
            }
        }
        if (fds[i] < 0)
            nfds = i;
    }
    vmmc_ctl_recv(ep, rank, &m, len, fds, nfds);
    /* A reply that completed the pending import hands it over: release it
     * (that closes what it kept) and start another one. */
    if (pending && vmmc_import_test(pending) != VMMC_INPROGRESS) {
        vmmc_unimport(pending);
        start_pending();
    }
    /* Descriptors handed to the core and never closed. The control thread
     * may hold one for a moment (a reply the endpoint sent itself): only a
     * count that stays up is a leak. */
    for (int i = 0; before >= 0 && count_fds() > before; i++) {
        if (i == 200)
            abort();
        usleep(1000);
    }
    return 0;
}
