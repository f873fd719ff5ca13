/* `vmmc info --counters`: the counters of a running process, read by another
 * process from the memfd its endpoint publishes. They go away when the
 * endpoint closes and when the process is killed, leaving nothing behind;
 * malformed counters files are skipped without harm.
 * usage: info_counters VMMC_TOOL */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/counters.h"
#include "vtest.h"

#define SENDS 25

static const char *tool;
static int notes;

static void on_note(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep, (void)n, (void)arg;
    notes++;
}

/* Run `vmmc info --counters ARG` into @out; its exit status. */
static int info(const char *arg, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s info --counters %s 2>&1", tool, arg);
    FILE *f = popen(cmd, "r");
    VT_CHECK(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The value printed for counter @name, or -1. */
static long long value(const char *text, const char *name)
{
    char want[96];
    snprintf(want, sizeof want, "\n  %s ", name);
    const char *p = strstr(text, want);
    return p ? atoll(p + strlen(want)) : -1;
}

static int sets;
static long long sent_seen;
static void count_set(const vmmc_counter_set_t *s, void *arg)
{
    (void)arg;
    sets++;
    for (int i = 0; i < s->count; i++)
        if (!strcmp(s->names[i], "notifications_sent"))
            sent_seen = (long long)s->values[i];
}

static void nop_set(const vmmc_counter_set_t *s, void *arg)
{
    (void)s, (void)arg;
}

/* Endpoints process @pid publishes. */
static int published(int pid)
{
    int n = vmmc_counters_published(pid, nop_set, NULL);
    VT_CHECK(n >= 0);
    return n;
}

/* A counters memfd with these bytes, kept open (as an endpoint keeps its). */
static int fake(const char *name, const void *data, size_t len)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    VT_CHECK(fd >= 0 && write(fd, data, len) == (ssize_t)len);
    return fd;
}

/* Anything of vmmc in /dev/shm (the library uses memfds only). */
static int dev_shm_files(void)
{
    DIR *d = opendir("/dev/shm");
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += strstr(de->d_name, "vmmc") != NULL;
    if (d)
        closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    VT_CHECK(argc == 2);
    tool = argv[1];
    setenv("VMMC_COUNTERS_PERIOD", "20ms", 1);
    unsetenv("VMMC_LAUNCHER");
    unsetenv("VMMC_RANK");
    unsetenv("VMMC_SIZE");
    unsetenv("VMMC_BOOTSTRAP");
    vt_require_transport();
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    static char buf[4096];
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_HANDLER, .name = "c", .addr = buf,
                              .length = sizeof buf, .handler = on_note};
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &p, &ex));
    vmmc_proxy_t *px;
    VT_OK(vmmc_import(ep, 0, "c", 5000, &px));
    for (int i = 0; i < SENDS; i++)
        VT_OK(vmmc_send(px, 0, &i, sizeof i, VMMC_SEND_NOTIFY));
    double t0 = vt_now();
    while (notes < SENDS && vt_now() - t0 < 30)
        VT_CHECK(vmmc_wait(ep, 100) >= 0);
    VT_CHECK(notes == SENDS);

    /* Another process reads them while this one runs. */
    char me[32], out[16384], head[128];
    snprintf(me, sizeof me, "%d", (int)getpid());
    snprintf(head, sizeof head, "pid %d endpoint 0 (rank 0 of 1), refreshed", (int)getpid());
    t0 = vt_now();
    int st;
    do {
        st = info(me, out, sizeof out);
    } while ((value(out, "notifications_run") != SENDS) && vt_now() - t0 < 30 && !usleep(20000));
    printf("%s", out);
    VT_CHECK(st == 0 && strstr(out, head));
    VT_CHECK(value(out, "notifications_sent") == SENDS && value(out, "notifications_run") == SENDS);
    if (vt_remote())
        VT_CHECK(value(out, "udp.tx_dgrams") > 0 && value(out, "udp.rx_bytes") > 0 &&
                 value(out, "udp.retransmits") >= 0 && value(out, "udp.drop_auth") == 0);
    VT_CHECK(vmmc_counters_published((int)getpid(), count_set, NULL) == 1 && sets == 1 &&
             sent_seen == SENDS);
    VT_STATUS(VMMC_ERR_INVALID, vmmc_counters_published(-1, count_set, NULL));

    /* Malformed counters files are skipped, not trusted; a copy a child of
     * fork() holds (another pid in the header) is not reported twice. */
    cnt_header_t h;
    memset(&h, 0, sizeof h);
    h.magic = CNT_MAGIC;
    h.version = CNT_VERSION;
    h.header_bytes = sizeof h;
    h.name_bytes = CNT_NAME;
    h.count = 100000; /* far more entries than the file holds */
    h.pid = (int32_t)getpid();
    h.index = 77;
    int bad = fake(CNT_MEMFD_NAME "77", &h, sizeof h);
    int tiny = fake(CNT_MEMFD_NAME "78", "garbage", 7);
    h.count = 0;
    h.index = 79;
    h.pid = 1;
    int other = fake(CNT_MEMFD_NAME "79", &h, sizeof h);
    sets = 0;
    VT_CHECK(vmmc_counters_published((int)getpid(), count_set, NULL) == 1 && sets == 1);
    VT_CHECK(info(me, out, sizeof out) == 0 && strstr(out, "malformed") &&
             strstr(out, "not a counters file") && strstr(out, head));
    close(bad);
    close(tiny);
    close(other);

    /* A process killed with its endpoint open leaves nothing behind. */
    int pfd[2];
    VT_CHECK(pipe(pfd) == 0);
    pid_t kid = fork();
    VT_CHECK(kid >= 0);
    if (kid == 0) {
        vmmc_ep_t *own;
        VT_OK(vmmc_init(NULL, &own));
        char c = 1;
        VT_CHECK(write(pfd[1], &c, 1) == 1);
        pause();
        _exit(0);
    }
    char c;
    VT_CHECK(read(pfd[0], &c, 1) == 1);
    VT_CHECK(published(kid) == 1);
    kill(kid, SIGKILL);
    VT_CHECK(waitpid(kid, &st, 0) == kid);
    VT_CHECK(published(kid) == 0);
    VT_CHECK(published((int)getpid()) == 1); /* the child's copy closed at fork */
    VT_CHECK(dev_shm_files() == 0);

    /* Closing the endpoint withdraws its counters. */
    VT_OK(vmmc_unimport(px));
    VT_OK(vmmc_unexport(ex));
    VT_OK(vmmc_finalize(ep));
    VT_CHECK(published((int)getpid()) == 0);
    VT_CHECK(info(me, out, sizeof out) == 1 && strstr(out, "publishes no counters"));
    VT_CHECK(info("x1", out, sizeof out) == 2);
    printf("info_counters: ok\n");
    return 0;
}
