/* sock_echo: a plain TCP echo over loopback, written with the BSD socket
 * calls only (no vmmc header). Run it as it is and the kernel carries the
 * bytes; run it under `vmmc preload` and both ends run vmmc, so the
 * connection moves onto vmmc after its TCP handshake:
 *
 *   build/example_sock_echo                      # the kernel's TCP
 *   build/vmmc preload -v -- build/example_sock_echo
 *
 * The parent listens on 127.0.0.1 (a free port), a forked child connects and
 * sends 4 MiB in pieces of every size up to 64 KiB; the parent echoes every
 * byte; the child checks them and both say how long it took. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOTAL (4u << 20)

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static unsigned char pattern(size_t i)
{
    return (unsigned char)(i * 131u + (i >> 8));
}

static void client(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
        die("client: connect");
    static unsigned char out[65536], in[65536];
    size_t sent = 0, got = 0, piece = 1;
    double t0 = now_s();
    while (got < TOTAL) {
        if (sent < TOTAL) { /* send a piece, then read back what came */
            size_t n = piece < TOTAL - sent ? piece : TOTAL - sent;
            for (size_t i = 0; i < n; i++)
                out[i] = pattern(sent + i);
            for (size_t w = 0; w < n;) {
                ssize_t r = write(fd, out + w, n - w);
                if (r <= 0)
                    die("client: write");
                w += (size_t)r;
            }
            sent += n;
            piece = piece * 2 > sizeof out ? 1 : piece * 2;
        }
        while (got < sent) {
            ssize_t r = read(fd, in, sent - got < sizeof in ? sent - got : sizeof in);
            if (r <= 0)
                die("client: read");
            for (ssize_t i = 0; i < r; i++)
                if (in[i] != pattern(got + (size_t)i)) {
                    fprintf(stderr, "client: byte %zu differs\n", got + (size_t)i);
                    exit(1);
                }
            got += (size_t)r;
        }
    }
    printf("client: %u bytes echoed and checked in %.3f s\n", TOTAL, now_s() - t0);
    close(fd);
}

int main(void)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 4) < 0 ||
        getsockname(ls, (struct sockaddr *)&a, &len) < 0)
        die("server: listen");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        close(ls);
        client(ntohs(a.sin_port));
        return 0;
    }
    int fd = accept(ls, NULL, NULL);
    if (fd < 0)
        die("server: accept");
    static unsigned char buf[65536];
    size_t total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0)
            die("server: read");
        if (r == 0)
            break;
        for (ssize_t w = 0; w < r;) {
            ssize_t k = write(fd, buf + w, (size_t)(r - w));
            if (k <= 0)
                die("server: write");
            w += k;
        }
        total += (size_t)r;
    }
    close(fd);
    close(ls);
    int st = 0;
    waitpid(pid, &st, 0);
    printf("server: echoed %zu bytes\n", total);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 && total == TOTAL ? 0 : 1;
}
