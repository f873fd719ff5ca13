/* Helpers and main of the preload test programs (see pltest.h). */
#include "pltest.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *pl_role = "?", *pl_scen = "?";

void die(const char *fmt, ...)
{
    int e = errno;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "pltest %s %s [%d]: FAIL: %s (errno %d: %s)\n", pl_role, pl_scen,
            (int)getpid(), msg, e, strerror(e));
    exit(1);
}

void fill(unsigned char *b, size_t n, unsigned seed, size_t off)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pat(seed, off + i);
}

void verify(const unsigned char *b, size_t n, unsigned seed, size_t off)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat(seed, off + i)) {
            errno = 0;
            die("byte %zu of stream %u is %u, not %u", off + i, seed, b[i], pat(seed, off + i));
        }
}

void write_all(int fd, const void *b, size_t n)
{
    const char *p = b;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        CHECK(w > 0, "write(%d, %zu)", fd, n);
        p += w;
        n -= (size_t)w;
    }
}

void read_all(int fd, void *b, size_t n)
{
    char *p = b;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        CHECK(r >= 0, "read(%d, %zu)", fd, n);
        if (r == 0) {
            errno = 0;
            die("EOF with %zu bytes still expected", n);
        }
        p += r;
        n -= (size_t)r;
    }
}

void send_stream(int fd, size_t n, unsigned seed)
{
    unsigned char b[65536];
    for (size_t off = 0; off < n;) {
        size_t k = n - off < sizeof b ? n - off : sizeof b;
        /* varying sizes: 1 byte, odd sizes, whole buffers */
        if (off % 3 == 1)
            k = k > 1 ? 1 : k;
        else if (off % 3 == 2 && k > 1000 + off % 777)
            k = 1000 + off % 777;
        fill(b, k, seed, off);
        write_all(fd, b, k);
        off += k;
    }
}

void recv_stream(int fd, size_t n, unsigned seed)
{
    unsigned char b[70000];
    for (size_t off = 0; off < n;) {
        size_t want = n - off < sizeof b ? n - off : sizeof b;
        ssize_t r = read(fd, b, want);
        if (r < 0 && errno == EINTR)
            continue;
        CHECK(r >= 0, "read at %zu of %zu", off, n);
        if (r == 0) {
            errno = 0;
            die("EOF at byte %zu of %zu", off, n);
        }
        verify(b, (size_t)r, seed, off);
        off += (size_t)r;
    }
}

typedef struct {
    int mode;
    char transport[16];
    uint64_t a, b;
    size_t c;
} info_t;   /* vmmc_sock_info_t's layout (vmmc/sock.h) */

int sock_mode(int fd)
{
    int (*info)(int, info_t *) = (int (*)(int, info_t *))dlsym(RTLD_DEFAULT, "vmmc_sock_info");
    info_t i;
    if (!info || info(fd, &i) < 0)
        return -1;
    return i.mode;
}

int preloaded(void)
{
    return dlsym(RTLD_DEFAULT, "vmmc_sock_is") != NULL;
}

int vmmc_owns(int fd)
{
    int (*is)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "vmmc_sock_is");
    return is && is(fd);
}

void expect_mode(int fd)
{
    const char *e = getenv("PL_EXPECT");
    if (!e || !*e)
        return;
    int m = sock_mode(fd);
    errno = 0;
    if (!strcmp(e, "vmmc"))
        CHECK(m == 2, "fd %d: mode %d, expected upgraded (2)", fd, m);
    else if (!strcmp(e, "kernel"))
        CHECK(m != 2, "fd %d: upgraded, expected the kernel's TCP", fd);
}

int family_of_env(void)
{
    const char *f = getenv("PL_FAMILY");
    return f && !strcmp(f, "6") ? AF_INET6 : AF_INET;
}

void set_nonblock(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    CHECK(fl >= 0, "F_GETFL");
    CHECK(fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) == 0, "F_SETFL");
}

int listen_on(int family, const char *portfile)
{
    int fd = socket(family, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_loopback;
        len = sizeof *s6;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *s4;
    }
    CHECK(bind(fd, (struct sockaddr *)&ss, len) == 0, "bind");
    CHECK(listen(fd, 64) == 0, "listen");
    CHECK(getsockname(fd, (struct sockaddr *)&ss, &len) == 0, "getsockname");
    int port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                        : ((struct sockaddr_in *)&ss)->sin_port);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", portfile);
    FILE *f = fopen(tmp, "w");
    CHECK(f, "fopen %s", tmp);
    fprintf(f, "%d\n", port);
    fclose(f);
    CHECK(rename(tmp, portfile) == 0, "rename");
    return fd;
}

socklen_t loop_addr(int family, int port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_loopback;
        s6->sin6_port = htons((uint16_t)port);
        return sizeof *s6;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s4->sin_port = htons((uint16_t)port);
    return sizeof *s4;
}

int connect_to(int family, int port)
{
    int fd = socket(family, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket");
    struct sockaddr_storage ss;
    socklen_t len = loop_addr(family, port, &ss);
    CHECK(connect(fd, (struct sockaddr *)&ss, len) == 0, "connect to port %d", port);
    return fd;
}

static const scenario_t *find(const char *name)
{
    const scenario_t *tabs[] = {pl_scen_basic, pl_scen_wait, pl_scen_proc};
    for (size_t t = 0; t < sizeof tabs / sizeof *tabs; t++)
        for (const scenario_t *s = tabs[t]; s->name; s++)
            if (!strcmp(s->name, name))
                return s;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: pltest server|client SCENARIO PORTFILE|PORT\n");
        return 2;
    }
    pl_role = argv[1];
    pl_scen = argv[2];
    const scenario_t *s = find(argv[2]);
    if (!s) {
        fprintf(stderr, "pltest: no scenario %s\n", argv[2]);
        return 2;
    }
    int family = family_of_env();
    if (!strcmp(argv[1], "server")) {
        int lfd = listen_on(family, argv[3]);
        if (s->listener)
            return s->server(lfd);
        int fd = accept(lfd, NULL, NULL);
        CHECK(fd >= 0, "accept");
        if (s->close_listener)   /* `nc -l` does: the connection outlives it */
            close(lfd);
        int rc = s->server(fd);
        if (!s->close_listener)
            close(lfd);
        return rc;
    }
    if (!strcmp(argv[1], "client")) {
        int port = atoi(argv[3]);
        if (s->client_connects)
            return s->client(port);
        return s->client(connect_to(family, port));
    }
    /* `pltest exec SCENARIO FD`: the image a scenario exec'ed, with its socket */
    if (!strcmp(argv[1], "exec") && s->server)
        return s->server(-atoi(argv[3]) - 1);
    fprintf(stderr, "pltest: bad role %s\n", argv[1]);
    return 2;
}
