/* Socket programs for the tests of libvmmc-preload.so. Built WITHOUT vmmc:
 * plain libc calls only, as any program `vmmc preload` runs. Each scenario
 * has a server and a client side (pltest server SCENARIO PORTFILE, pltest
 * client SCENARIO PORT); run.sh starts both. Every byte is checked. */
#ifndef PLTEST_H
#define PLTEST_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

extern const char *pl_role, *pl_scen;

/* Fail the program: message, errno text, exit 1. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#define CHECK(c, ...)         \
    do {                      \
        if (!(c))             \
            die(__VA_ARGS__); \
    } while (0)

/* The byte at offset @p i of stream @p seed. */
static inline unsigned char pat(unsigned seed, size_t i)
{
    return (unsigned char)(seed * 131u + i * 7u + (i >> 9));
}
void fill(unsigned char *b, size_t n, unsigned seed, size_t off);
/* Check @p n bytes against the stream (fails the program on a mismatch). */
void verify(const unsigned char *b, size_t n, unsigned seed, size_t off);

void write_all(int fd, const void *b, size_t n);
/* Read exactly @p n bytes (0 at EOF before them fails). */
void read_all(int fd, void *b, size_t n);
/* Send @p n bytes of stream @p seed / receive and check them. */
void send_stream(int fd, size_t n, unsigned seed);
void recv_stream(int fd, size_t n, unsigned seed);

/* The connection's mode as libvmmc-preload.so sees it (vmmc_sock_info found
 * with dlsym(RTLD_DEFAULT)): 2 upgraded, 0 kernel, -1 not a vmmc socket or
 * no preload. Checked against PL_EXPECT=vmmc|kernel when it is set. */
int sock_mode(int fd);
void expect_mode(int fd);
/* Is the preload there (vmmc_sock_is found) and does it own @p fd? */
int vmmc_owns(int fd);
int preloaded(void);

/* A listening TCP socket on loopback (AF_INET or AF_INET6), its port
 * written to @p portfile (atomically, for run.sh). */
int listen_on(int family, const char *portfile);
int connect_to(int family, int port);
struct sockaddr_storage;
socklen_t loop_addr(int family, int port, struct sockaddr_storage *ss);
int family_of_env(void);
void set_nonblock(int fd, int on);

/* Scenarios (pltest_*.c): fn(fd) with the connected socket; a server side
 * given the listener instead sets PL_LISTENER in its table entry. */
typedef struct scenario {
    const char *name;
    int (*server)(int fd);  /* returns the exit status */
    int (*client)(int fd);
    int listener;           /* server gets the listening socket */
    int client_connects;    /* client gets the port (fd = port) and connects itself */
    int close_listener;     /* the server closes its listener right after accept */
} scenario_t;

extern const scenario_t pl_scen_basic[], pl_scen_wait[], pl_scen_proc[];

#endif
