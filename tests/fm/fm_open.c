/* FM channels between open-world endpoints, with no job: a server opens an
 * endpoint (vmmc_ep_open), listens, opens channel 9 and hands its address
 * to a client it starts as a separate program (this one, executed again).
 * The client connects to that address, opens channel 9 and streams M
 * messages of 0 B to 100 KB to the server, which answers each with a
 * message of its own; every byte is checked on both sides, and the order.
 * Half-way, a second client is started and connects: the server's channel
 * reaches it too (its ring is created when the peer appears). Each client
 * ends with a "done" message once it has every answer. A third client sends
 * a few messages and kills itself: they all arrive, and the server's waits
 * go on for the others without an error. Runs over shm, and over udp with
 * VMMC_TRANSPORT=udp. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fm_test.h"

enum { CH = 9, H_DATA = 1, H_DONE = 2, H_PROBE = 3, MAXC = 2, CRASH_ID = 3, CRASH_N = 10 };
#define MAXLEN 100000u
#define SRV_ID 1000

static int M = 200;

static size_t len_of(uint64_t seq)
{
    static const size_t edge[] = {0, 1, 63, 64, 65, 4095, 4096, 8193, 65536, MAXLEN};
    return seq % 3 == 0 ? edge[seq / 3 % 10] : (size_t)(seq * 2654435761u % 3000);
}

/* One message: id, seq, then len_of(seq) bytes of ft_fill(id, seq). */
static void send_msg(fm_t *ch, int dest, int id, uint64_t seq)
{
    static uint8_t body[MAXLEN];
    size_t len = len_of(seq);
    ft_fill(body, len, id, seq);
    uint64_t hdr[2] = {(uint64_t)id, seq};
    fm_stream_t *s;
    VT_OK(fm_begin_message(ch, dest, sizeof hdr + len, H_DATA, &s));
    VT_OK(fm_send_piece(s, hdr, sizeof hdr));
    VT_OK(fm_send_piece(s, body, len / 3));
    VT_OK(fm_send_piece(s, body + len / 3, len - len / 3));
    VT_OK(fm_end_message(s));
}

/* Reads a message and checks it; returns its (id, seq). */
static void recv_msg(fm_stream_t *s, int *id, uint64_t *seq)
{
    uint64_t hdr[2];
    VT_CHECK(fm_receive(hdr, s, sizeof hdr) == (ssize_t)sizeof hdr);
    *id = (int)hdr[0];
    *seq = hdr[1];
    /* Checked piece by piece in a buffer of this handler's own: handlers
     * of several senders' messages are suspended at once. */
    uint8_t b[777];
    size_t len = len_of(*seq), off = 0;
    while (off < len) {
        size_t piece = len - off < sizeof b ? len - off : sizeof b;
        VT_CHECK(fm_receive(b, s, piece) == (ssize_t)piece);
        size_t bad = ft_check(b, piece, *id, *seq, off);
        if (bad != (size_t)-1)
            VT_FAIL("byte %zu of message %llu from %d wrong", off + bad, (unsigned long long)*seq,
                    *id);
        off += piece;
    }
    VT_CHECK(fm_receive(b, s, 1) == 0);
}

/* ---- client ---- */

static uint64_t c_got;

static void c_data(fm_stream_t *s, int sender, void *arg)
{
    int *srv = arg, id;
    uint64_t seq;
    VT_CHECK(sender == *srv);
    recv_msg(s, &id, &seq);
    VT_CHECK(id == SRV_ID);
    if (seq != c_got)
        VT_FAIL("client: answer %llu arrived, expected %llu", (unsigned long long)seq,
                (unsigned long long)c_got);
    c_got++;
}

static int client(int id, const char *addr_str)
{
    vmmc_ep_t *ep;
    fm_t *ch;
    char addr[VMMC_ADDR_MAX];
    size_t alen = sizeof addr;
    int srv;
    VT_OK(vmmc_ep_open(NULL, &ep));
    VT_OK(vmmc_addr_parse(addr_str, addr, &alen));
    VT_OK(vmmc_connect(ep, addr, alen, &srv));
    VT_OK(fm_channel_open(ep, CH, NULL, &ch));
    VT_CHECK(fm_register_handler(ch, H_DATA, c_data, &srv) == H_DATA);
    if (id == CRASH_ID) {
        /* A client that dies mid-stream: the server serves the others on. */
        for (int i = 0; i < CRASH_N; i++)
            send_msg(ch, srv, id, (uint64_t)i);
        raise(SIGKILL);
    }
    for (int i = 0; i < M; i++) {
        send_msg(ch, srv, id, (uint64_t)i);
        VT_CHECK(fm_extract(ch, FM_EXTRACT_ALL) >= 0);
    }
    double t0 = vt_now();
    while (c_got < (uint64_t)M && vt_now() - t0 < 60)
        VT_CHECK(fm_extract_wait(ch, FM_EXTRACT_ALL, 50) >= 0);
    printf("client %d: %llu of %d answers whole and in order\n", id, (unsigned long long)c_got, M);
    VT_CHECK(c_got == (uint64_t)M);
    VT_OK(fm_send_4(ch, srv, H_DONE, (uint32_t)id, 0, 0, 0));
    /* The server closes its side when it has our "done": wait for that
     * (a send then fails with VMMC_ERR_STALE), so nothing is in flight. */
    t0 = vt_now();
    int st = VMMC_OK;
    while (vt_now() - t0 < 60) {
        st = fm_send_4(ch, srv, H_PROBE, 0, 0, 0, 0);
        if (st != VMMC_OK)
            break;
        VT_CHECK(fm_extract_wait(ch, FM_EXTRACT_ALL, 20) >= 0);
    }
    VT_CHECK(st == VMMC_ERR_STALE || st == VMMC_ERR_PEER_DEAD);
    VT_OK(fm_channel_close(ch));
    VT_OK(vmmc_ep_close(ep));
    return 0;
}

/* ---- server ---- */

typedef struct {
    int id;             /* client id, 0 until its first message */
    uint64_t got, sent; /* messages from it, answers to it */
    int done;
} peer_t;
static peer_t peers[64];
static int ndone;

static void s_data(fm_stream_t *s, int sender, void *arg)
{
    (void)arg;
    int id;
    uint64_t seq;
    VT_CHECK(sender > 0 && sender < 64);
    recv_msg(s, &id, &seq);
    peer_t *p = &peers[sender];
    VT_CHECK(id >= 1 && id <= CRASH_ID && (p->id == 0 || p->id == id));
    p->id = id;
    if (seq != p->got)
        VT_FAIL("server: message %llu from client %d, expected %llu", (unsigned long long)seq, id,
                (unsigned long long)p->got);
    p->got++;
}

static void s_done(fm_stream_t *s, int sender, void *arg)
{
    (void)arg;
    uint32_t w[4];
    VT_CHECK(fm_receive(w, s, sizeof w) == (ssize_t)sizeof w);
    VT_CHECK(sender > 0 && sender < 64 && (int)w[0] == peers[sender].id);
    VT_CHECK(peers[sender].got == (uint64_t)M && peers[sender].sent == (uint64_t)M);
    peers[sender].done = 1;
    ndone++;
}

/* An answer to the client that dies: the error, not a failed check. */
static int send_crash(fm_t *ch, int dest, uint64_t seq)
{
    static uint8_t body[MAXLEN];
    size_t len = len_of(seq);
    ft_fill(body, len, SRV_ID, seq);
    uint64_t hdr[2] = {SRV_ID, seq};
    fm_stream_t *s;
    int st = fm_begin_message(ch, dest, sizeof hdr + len, H_DATA, &s);
    if (st != VMMC_OK)
        return st;
    int a = fm_send_piece(s, hdr, sizeof hdr);
    int b = fm_send_piece(s, body, len);
    int c = fm_end_message(s);
    return a ? a : b ? b : c;
}

static void s_probe(fm_stream_t *s, int sender, void *arg) { (void)s, (void)sender, (void)arg; }

static pid_t spawn(const char *self, int id, const char *addr)
{
    char ids[16], ms[16];
    snprintf(ids, sizeof ids, "%d", id);
    snprintf(ms, sizeof ms, "%d", M);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    VT_CHECK(pid >= 0);
    if (pid == 0) {
        execl(self, self, "client", ids, addr, ms, (char *)NULL);
        _exit(127);
    }
    return pid;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && !strcmp(argv[1], "client")) {
        M = atoi(argv[4]);
        return client(atoi(argv[2]), argv[3]);
    }
    if (argc > 1)
        M = atoi(argv[1]);
    vmmc_ep_t *ep;
    fm_t *ch;
    VT_OK(vmmc_ep_open(NULL, &ep));
    VT_OK(vmmc_listen(ep, NULL, NULL));
    VT_OK(fm_channel_open(ep, CH, NULL, &ch));
    VT_CHECK(fm_register_handler(ch, H_DATA, s_data, NULL) == H_DATA);
    VT_CHECK(fm_register_handler(ch, H_DONE, s_done, NULL) == H_DONE);
    VT_CHECK(fm_register_handler(ch, H_PROBE, s_probe, NULL) == H_PROBE);
    char addr[VMMC_ADDR_MAX], str[2 * VMMC_ADDR_MAX + 1];
    size_t alen = sizeof addr;
    VT_OK(vmmc_ep_addr(ep, addr, &alen));
    VT_OK(vmmc_addr_format(addr, alen, str, sizeof str));
    pid_t kids[MAXC + 1] = {spawn("/proc/self/exe", 1, str), spawn("/proc/self/exe", CRASH_ID, str),
                            -1};
    int nkids = 2, crashed = -1;
    double t0 = vt_now();
    while (ndone < MAXC && vt_now() - t0 < 90) {
        int r = fm_extract_wait(ch, FM_EXTRACT_ALL, 20);
        if (r < 0)
            VT_FAIL("server: fm_extract_wait returned %d (%s)", r, vmmc_last_error());
        /* The second client connects half-way through the first one's stream. */
        for (int h = 1; h < 64; h++)
            if (peers[h].id == 1 && peers[h].got >= (uint64_t)M / 2 && nkids == 2)
                kids[nkids++] = spawn("/proc/self/exe", 2, str);
        /* Answer what arrived (blocking sends, outside the handlers). */
        for (int h = 1; h < 64; h++) {
            peer_t *p = &peers[h];
            if (p->id == CRASH_ID) {
                /* Its answers may fill its ring: a blocked send ends when it
                 * is found dead. */
                while (crashed < 0 && p->sent < p->got) {
                    int st = send_crash(ch, h, p->sent++);
                    if (st == VMMC_ERR_PEER_DEAD || st == VMMC_ERR_PEER_UNREACHABLE)
                        crashed = h;
                    else
                        VT_OK(st);
                }
                continue;
            }
            while (p->id && p->sent < p->got)
                send_msg(ch, h, SRV_ID, p->sent++);
        }
    }
    printf("server: %d of %d clients done, %d peers\n", ndone, MAXC, vmmc_peer_count(ep));
    VT_CHECK(ndone == MAXC);
    /* The client that died: all it sent arrived before it went. */
    int ncrash = 0, hc = -1;
    for (int h = 1; h < 64; h++)
        if (peers[h].id == CRASH_ID) {
            ncrash++;
            hc = h;
            VT_CHECK(peers[h].got == CRASH_N);
        }
    VT_CHECK(ncrash == 1);
    /* Once the endpoint knows it is dead, FM retires it; waits on the
     * channel go on (no VMMC_ERR_PEER_DEAD: it is no rank of a job). */
    t0 = vt_now();
    while (vmmc_peer_alive(ep, hc) != 0 && vt_now() - t0 < 30)
        VT_CHECK(fm_extract_wait(ch, FM_EXTRACT_ALL, 20) >= 0);
    VT_CHECK(vmmc_peer_alive(ep, hc) == 0);
    for (int i = 0; i < 5; i++)
        VT_CHECK(fm_extract_wait(ch, FM_EXTRACT_ALL, 30) >= 0);
    /* On one host the clients' rings are mapped (shm); over udp none is.
     * The client that died is mapped too when it lived long enough. */
    const char *tr = getenv("VMMC_TRANSPORT");
    uint64_t mapped = fm_counter(ch, "peers_mapped");
    printf("server: %llu peers' rings mapped\n", (unsigned long long)mapped);
    if (tr && !strcmp(tr, "udp"))
        VT_CHECK(mapped == 0);
    else
        VT_CHECK(mapped == MAXC || mapped == MAXC + 1);
    /* Close (the clients wait for it), then reap them. */
    VT_OK(fm_channel_close(ch));
    for (int i = 0; i < nkids; i++) {
        int st = 0;
        int dies = i == 1; /* the crashing client */
        pid_t w;
        t0 = vt_now();
        while ((w = waitpid(kids[i], &st, WNOHANG)) == 0 && vt_now() - t0 < 60)
            (void)vmmc_wait(ep, 20); /* (a client that left may be reported dead) */
        if (w == 0)
            kill(kids[i], SIGKILL);
        VT_CHECK(w == kids[i]);
        VT_CHECK(dies ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL : WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    VT_OK(vmmc_ep_close(ep));
    return 0;
}
