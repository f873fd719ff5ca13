/* A client and a server between two unrelated processes (no `vmmc run`):
 * the server opens an endpoint, prints its address, listens, and exports a
 * request buffer; a client connects to that address, imports the buffer and
 * sends requests with a notification; the server answers each one by
 * writing the request, upper-cased, into the client's reply buffer, which it
 * imports from the peer the notification names. On one host the bytes move
 * through shared memory, across hosts over udp: the program is the same.
 *
 * Run:  build/example_echo server [REQUESTS]          (prints "address: ...")
 *       build/example_echo client 'ADDRESS' [REQUESTS]
 * The server answers REQUESTS requests (default 10, from any number of
 * clients) and exits; each wait is bounded, every failure exits non-zero. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <vmmc/vmmc.h>

#define SLOT 256            /* one request or reply */
#define WAIT_MS 20000       /* the longest a side waits for the other */
#define MAX_PEERS 64

static void die(const char *who, const char *what, int rc)
{
    fprintf(stderr, "example_echo %s: %s: %s (%s)\n", who, what, vmmc_strerror(rc),
            vmmc_last_error());
    exit(1);
}

/* ---- server ---- */

/* Requests noted by the handler, answered by the main loop (a handler must
 * not block, and importing the client's buffer may). */
typedef struct pending {
    int peer;
    size_t off, len;
} pending_t;
static pending_t queue[64];
static int q_head, q_tail;

static void on_request(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    (void)arg;
    if (q_tail - q_head < 64 && n->length > 0 && n->length <= SLOT)
        queue[q_tail++ % 64] = (pending_t){n->sender, n->offset, n->length};
}

static void on_accept(vmmc_ep_t *ep, int peer, void *arg)
{
    (void)arg;
    (void)ep;
    printf("server: peer %d connected\n", peer);
    fflush(stdout);
}

static int server(int requests)
{
    vmmc_ep_t *ep;
    char *req;
    vmmc_export_t *ex;
    int rc = vmmc_ep_open(NULL, &ep);
    if (rc != VMMC_OK)
        die("server", "vmmc_ep_open", rc);
    if ((rc = vmmc_mem_alloc(ep, SLOT * 64, (void **)&req)) != VMMC_OK)
        die("server", "vmmc_mem_alloc", rc);
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_HANDLER, .name = "echo.requests",
                              .addr = req, .length = SLOT * 64, .handler = on_request};
    if ((rc = vmmc_export(ep, &p, &ex)) != VMMC_OK)
        die("server", "vmmc_export", rc);
    if ((rc = vmmc_listen(ep, on_accept, NULL)) != VMMC_OK)
        die("server", "vmmc_listen", rc);
    char addr[VMMC_ADDR_MAX], text[2 * VMMC_ADDR_MAX + 1];
    size_t len = sizeof addr;
    if ((rc = vmmc_ep_addr(ep, addr, &len)) != VMMC_OK ||
        (rc = vmmc_addr_format(addr, len, text, sizeof text)) != VMMC_OK)
        die("server", "address", rc);
    printf("address: %s\n", text);
    fflush(stdout);

    vmmc_proxy_t *reply[MAX_PEERS] = {0};
    for (int answered = 0; answered < requests;) {
        if (q_head == q_tail) {
            rc = vmmc_wait(ep, WAIT_MS);
            if (rc < 0)
                die("server", "vmmc_wait", rc);
            if (rc == 0) {
                fprintf(stderr, "example_echo server: no request for %d ms\n", WAIT_MS);
                return 1;
            }
            continue;
        }
        pending_t r = queue[q_head++ % 64];
        if (r.peer < 0 || r.peer >= MAX_PEERS || r.off > SLOT * 63 || r.len > SLOT) {
            fprintf(stderr, "example_echo server: ignored a request from peer %d\n", r.peer);
            continue;
        }
        if (!reply[r.peer] &&
            (rc = vmmc_import(ep, r.peer, "echo.replies", WAIT_MS, &reply[r.peer])) != VMMC_OK)
            die("server", "vmmc_import of the client's replies", rc);
        char out[SLOT];
        for (size_t i = 0; i < r.len; i++)
            out[i] = (char)toupper((unsigned char)req[r.off + i]);
        if (r.off + r.len > vmmc_proxy_length(reply[r.peer]))
            continue; /* the client's buffer is smaller than ours: not for us */
        if ((rc = vmmc_send(reply[r.peer], r.off, out, r.len, VMMC_SEND_NOTIFY)) != VMMC_OK)
            die("server", "vmmc_send of a reply", rc);
        answered++;
    }
    printf("server: answered %d requests\n", requests);
    for (int i = 0; i < MAX_PEERS; i++)
        if (reply[i])
            vmmc_unimport(reply[i]);
    return vmmc_ep_close(ep) == VMMC_OK ? 0 : 1;
}

/* ---- client ---- */

static volatile int replied;
static void on_reply(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    (void)n;
    (void)arg;
    replied++;
}

static int client(const char *text, int requests)
{
    vmmc_ep_t *ep;
    char *rep;
    vmmc_export_t *ex;
    vmmc_proxy_t *px;
    int rc = vmmc_ep_open(NULL, &ep);
    if (rc != VMMC_OK)
        die("client", "vmmc_ep_open", rc);
    char addr[VMMC_ADDR_MAX];
    size_t len = sizeof addr;
    int server_peer;
    if ((rc = vmmc_addr_parse(text, addr, &len)) != VMMC_OK)
        die("client", "vmmc_addr_parse", rc);
    if ((rc = vmmc_connect(ep, addr, len, &server_peer)) != VMMC_OK)
        die("client", "vmmc_connect", rc);
    /* Replies come from the server only. */
    if ((rc = vmmc_mem_alloc(ep, SLOT * 64, (void **)&rep)) != VMMC_OK)
        die("client", "vmmc_mem_alloc", rc);
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_HANDLER | VMMC_EXPORT_PARAM_IMPORTERS,
                              .name = "echo.replies", .addr = rep, .length = SLOT * 64,
                              .handler = on_reply, .importers = &server_peer, .num_importers = 1};
    if ((rc = vmmc_export(ep, &p, &ex)) != VMMC_OK)
        die("client", "vmmc_export", rc);
    if ((rc = vmmc_import(ep, server_peer, "echo.requests", WAIT_MS, &px)) != VMMC_OK)
        die("client", "vmmc_import of the server's requests", rc);
    for (int i = 0; i < requests; i++) {
        char msg[SLOT];
        int n = snprintf(msg, sizeof msg, "request %d from pid %ld", i, (long)getpid());
        size_t off = (size_t)(i % 64) * SLOT;
        int before = replied;
        if ((rc = vmmc_send(px, off, msg, (size_t)n + 1, VMMC_SEND_NOTIFY)) != VMMC_OK)
            die("client", "vmmc_send of a request", rc);
        while (replied == before) {
            rc = vmmc_wait(ep, WAIT_MS);
            if (rc < 0)
                die("client", "vmmc_wait", rc);
            if (rc == 0) {
                fprintf(stderr, "example_echo client: no reply to request %d in %d ms\n", i, WAIT_MS);
                return 1;
            }
        }
        for (int k = 0; k <= n; k++) {
            if (rep[off + (size_t)k] != (char)toupper((unsigned char)msg[k])) {
                fprintf(stderr, "example_echo client: reply %d is '%.*s', not '%s' upper-cased\n", i,
                        n, rep + off, msg);
                return 1;
            }
        }
        printf("client: %s -> %s\n", msg, rep + off);
    }
    printf("client: %d replies checked\n", requests);
    vmmc_unimport(px);
    return vmmc_ep_close(ep) == VMMC_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "server"))
        return server(argc > 2 ? atoi(argv[2]) : 10);
    if (argc >= 3 && !strcmp(argv[1], "client"))
        return client(argv[2], argc > 3 ? atoi(argv[3]) : 10);
    fprintf(stderr, "usage: %s server [REQUESTS] | client ADDRESS [REQUESTS]\n", argv[0]);
    return 2;
}
