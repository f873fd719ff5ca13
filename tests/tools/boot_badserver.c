/* The bootstrap client against a misbehaving server: this test plays the
 * launcher on its own abstract socket and answers HELLO with malformed,
 * truncated, refused or missing replies. Each case runs vmmc_boot_init in a
 * child process, which must return the right error (never crash, never hang),
 * and after a good table, malformed events must close the connection. */
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/boot.h"
#include "core/boot_wire.h"
#include "vspawn.h"

static int lfd;
static char sockname[64];

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* A message: header + body. */
static size_t msg(unsigned char *out, uint16_t type, const void *body, uint32_t len)
{
    put_u32(out, len);
    out[4] = (unsigned char)type;
    out[5] = 0;
    out[6] = VMMC_BW_VERSION;
    out[7] = 0;
    memcpy(out + 8, body, len);
    return 8 + len;
}

/* A TABLE for a job of @size ranks, all with card "c"; returns its length. */
static size_t table(unsigned char *out, uint32_t size, uint32_t declared_size)
{
    unsigned char body[256];
    size_t n = 0;
    put_u32(body + n, 3);
    memcpy(body + n + 4, "job", 3);
    n += 7;
    put_u32(body + n, declared_size);
    n += 4;
    for (uint32_t r = 0; r < size; r++) {
        put_u32(body + n, 1000 + r);
        put_u32(body + n + 4, 1);
        body[n + 8] = 'c';
        n += 9;
    }
    return msg(out, VMMC_BW_TABLE, body, (uint32_t)n);
}

typedef struct {
    const char *name;
    int expect;             /* vmmc status from vmmc_boot_init */
    unsigned char reply[512];
    size_t len;
    int close_after;        /* close the connection after the reply */
    int after_init;         /* bytes sent after a good table: test dispatch */
} bcase_t;

static void on_ev(void *arg, vmmc_boot_event_t ev, int64_t a, int64_t b)
{
    if (ev == VMMC_BOOT_EV_CLOSED)
        *(int *)arg = 1;
}

/* Child: join, report the status as the exit code (negated). */
static void child(const bcase_t *c)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
    vmmc_boot_t b;
    int rc = vmmc_boot_init(&b, "my-card", 2000);
    if (rc != VMMC_OK) {
        printf("%s: %s\n", c->name, vmmc_last_error());
        fflush(stdout);
        _exit(-rc);
    }
    if (c->after_init) {
        int closed = 0;
        double end = vt_now() + 10;
        while (!closed && vt_now() < end) {
            struct pollfd pf = {.fd = b.fd, .events = POLLIN};
            if (b.fd < 0 || poll(&pf, 1, 100) < 0)
                break;
            rc = vmmc_boot_dispatch(&b, on_ev, &closed);
        }
        if (!closed || b.fd != -1 || rc != VMMC_ERR_PROTOCOL)
            _exit(100);
        rc = vmmc_boot_barrier_send(&b, 1);
        vmmc_boot_fini(&b);
        _exit(rc == VMMC_ERR_PEER_DEAD ? 0 : 101);
    }
    vmmc_boot_fini(&b);
    _exit(0);
}

static void run_case(const bcase_t *c)
{
    fflush(stdout);
    pid_t pid = fork();
    VT_CHECK(pid >= 0);
    if (pid == 0)
        child(c);
    /* Serve one connection: read the HELLO, send the reply. */
    struct pollfd pf = {.fd = lfd, .events = POLLIN};
    VT_CHECK(poll(&pf, 1, 10000) == 1);
    int fd = accept(lfd, NULL, NULL);
    VT_CHECK(fd >= 0);
    unsigned char hello[512];
    size_t got = 0;
    double end = vt_now() + 10;
    while (got < 8 || got < 8 + (size_t)(hello[0] | hello[1] << 8)) {
        VT_CHECK(vt_now() < end);
        ssize_t n = recv(fd, hello + got, sizeof hello - got, 0);
        VT_CHECK(n > 0);
        got += (size_t)n;
    }
    VT_CHECK(hello[4] == VMMC_BW_HELLO);
    if (c->len)
        VT_CHECK(send(fd, c->reply, c->len, MSG_NOSIGNAL) == (ssize_t)c->len);
    if (c->close_after)
        close(fd);
    int st;
    end = vt_now() + 20;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (vt_now() > end) {
            kill(pid, SIGKILL);
            VT_FAIL("case %s: the client hangs", c->name);
        }
        usleep(10000);
    }
    if (!c->close_after)
        close(fd);
    if (!WIFEXITED(st))
        VT_FAIL("case %s: client crashed (status 0x%x)", c->name, st);
    int rc = -WEXITSTATUS(st);
    if (c->after_init ? WEXITSTATUS(st) != 0 : rc != c->expect)
        VT_FAIL("case %s: client returned %d, expected %d", c->name, c->after_init ? WEXITSTATUS(st) : rc,
                c->expect);
    printf("case %s ok\n", c->name);
}

int main(void)
{
    snprintf(sockname, sizeof sockname, "vmmc-test-badserver-%d", (int)getpid());
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path + 1, sockname, strlen(sockname));
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    VT_CHECK(lfd >= 0);
    VT_CHECK(bind(lfd, (struct sockaddr *)&sa,
                  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sockname))) == 0);
    VT_CHECK(listen(lfd, 8) == 0);
    setenv("VMMC_LAUNCHER", sockname, 1);
    setenv("VMMC_RANK", "0", 1);
    setenv("VMMC_SIZE", "2", 1);
    setenv("VMMC_JOB", "job", 1);
    unsetenv("VMMC_BOOTSTRAP");
    unsetenv("VMMC_BOOT_TIMEOUT");

    static bcase_t c;
    unsigned char body[64];

    c = (bcase_t){.name = "good table", .expect = VMMC_OK};
    c.len = table(c.reply, 2, 2);
    run_case(&c);

    c = (bcase_t){.name = "huge length", .expect = VMMC_ERR_PROTOCOL};
    c.len = msg(c.reply, VMMC_BW_TABLE, "", 0);
    put_u32(c.reply, 0x7fffffff);
    run_case(&c);

    c = (bcase_t){.name = "wrong version", .expect = VMMC_ERR_PROTOCOL};
    c.len = table(c.reply, 2, 2);
    c.reply[6] = 9;
    run_case(&c);

    c = (bcase_t){.name = "table of another size", .expect = VMMC_ERR_PROTOCOL};
    c.len = table(c.reply, 3, 3);
    run_case(&c);

    c = (bcase_t){.name = "table shorter than declared", .expect = VMMC_ERR_PROTOCOL};
    c.len = table(c.reply, 1, 2);
    run_case(&c);

    c = (bcase_t){.name = "table with trailing bytes", .expect = VMMC_ERR_PROTOCOL};
    c.len = table(c.reply, 2, 2);
    c.reply[c.len] = 0;
    put_u32(c.reply, (uint32_t)(c.len - 8 + 1));
    c.len++;
    run_case(&c);

    c = (bcase_t){.name = "card length past the end", .expect = VMMC_ERR_PROTOCOL};
    c.len = table(c.reply, 2, 2);
    put_u32(c.reply + c.len - 5, 0xfffffff0);
    run_case(&c);

    c = (bcase_t){.name = "refused", .expect = VMMC_ERR_PROTOCOL};
    put_u32(body, 7);
    memcpy(body + 4, "go away", 7);
    c.len = msg(c.reply, VMMC_BW_ERROR, body, 11);
    run_case(&c);

    c = (bcase_t){.name = "dead before start", .expect = VMMC_ERR_PEER_DEAD};
    memset(body, 0, 12);
    body[0] = 1;
    body[4] = SIGKILL;
    c.len = msg(c.reply, VMMC_BW_DEAD, body, 12);
    run_case(&c);

    c = (bcase_t){.name = "unexpected barrier", .expect = VMMC_ERR_PROTOCOL};
    memset(body, 0, 8);
    c.len = msg(c.reply, VMMC_BW_BARRIER, body, 8);
    run_case(&c);

    c = (bcase_t){.name = "half a header then close", .expect = VMMC_ERR_PEER_UNREACHABLE,
                  .close_after = 1};
    c.len = table(c.reply, 2, 2);
    c.len = 5;
    run_case(&c);

    c = (bcase_t){.name = "no reply", .expect = VMMC_ERR_TIMEOUT};
    run_case(&c);

    c = (bcase_t){.name = "bad event after the table", .after_init = 1};
    c.len = table(c.reply, 2, 2);
    memset(body, 0, 4);
    c.len += msg(c.reply + c.len, VMMC_BW_DEAD, body, 4); /* DEAD needs 12 bytes */
    run_case(&c);

    c = (bcase_t){.name = "dead rank out of range after the table", .after_init = 1};
    c.len = table(c.reply, 2, 2);
    memset(body, 0, 12);
    body[0] = 7;
    c.len += msg(c.reply + c.len, VMMC_BW_DEAD, body, 12);
    run_case(&c);

    /* Seeded random replies: any error is fine, a crash or hang is not. */
    unsigned long long seed = 42;
    for (int i = 0; i < 50; i++) {
        c = (bcase_t){.name = "random", .close_after = 1};
        c.len = 8 + vt_rand(&seed) % 200;
        for (size_t k = 0; k < c.len; k++)
            c.reply[k] = (unsigned char)vt_rand(&seed);
        if (i % 2) { /* a plausible header with a random body */
            put_u32(c.reply, (uint32_t)(c.len - 8));
            c.reply[4] = (unsigned char)(1 + i % 6);
            c.reply[5] = 0;
            c.reply[6] = VMMC_BW_VERSION;
            c.reply[7] = 0;
        }
        fflush(stdout);
        pid_t pid = fork();
        VT_CHECK(pid >= 0);
        if (pid == 0)
            child(&c);
        struct pollfd pf = {.fd = lfd, .events = POLLIN};
        VT_CHECK(poll(&pf, 1, 10000) == 1);
        int fd = accept(lfd, NULL, NULL);
        VT_CHECK(fd >= 0);
        send(fd, c.reply, c.len, MSG_NOSIGNAL);
        close(fd);
        int st;
        VT_CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFEXITED(st))
            VT_FAIL("random reply %d: client crashed (status 0x%x)", i, st);
        VT_CHECK(WEXITSTATUS(st) != 0);
    }
    printf("random replies ok\n");
    close(lfd);
    return 0;
}
