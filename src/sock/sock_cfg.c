/* VMMC_SOCK_* settings of the sockets layer. */
#include <pthread.h>

#include "sock/sock.h"
#include "util/config.h"

static sock_cfg_t cfg;

static const vmmc_cfg_entry_t sock_entries[] = {
    {"SOCK_UPGRADE", "y",
     "move TCP connections whose both ends run vmmc onto vmmc (n: every socket stays on the "
     "kernel)",
     VMMC_CFG_BOOL, &cfg.upgrade},
    {"SOCK_RING", "256K", "bytes of each direction's ring of an upgraded connection",
     VMMC_CFG_SIZE, &cfg.ring, 4096, 1ull << 30},
    {"SOCK_PROBE_TIMEOUT", "50ms",
     "how long a client waits for the listener's answer to its upgrade probe (none: the "
     "connection stays on the kernel)",
     VMMC_CFG_TIME, &cfg.probe_timeout_ns, 1000000ull, 60000000000ull},
    {"SOCK_HELLO_TIMEOUT", "2s",
     "how long an accepted connection that a vmmc client probed waits for its hello",
     VMMC_CFG_TIME, &cfg.hello_timeout_ns, 1000000ull, 600000000000ull},
    {"SOCK_REVERT_TIMEOUT", "5s",
     "how long fork() or exec waits for a peer to move a connection back to TCP before it "
     "resets it",
     VMMC_CFG_TIME, &cfg.revert_timeout_ns, 1000000ull, 600000000000ull},
    {"SOCK_SPIN", "20us", "a blocking socket call spins this long before it sleeps",
     VMMC_CFG_TIME, &cfg.spin_ns},
    {"SOCK_ZCOPY", "0",
     "a blocking read of at least this many bytes may have the writer place them directly in "
     "its buffer (0, the default: never, and postings of the peer are not served; 256K turns "
     "it on: slower than the ring on this 2-core box, see docs/sock_conn.md)",
     VMMC_CFG_SIZE, &cfg.zcopy},
    {"SOCK_PROBE_SLOTS", "1024",
     "connections a listener can have probed and not yet accepted (its shared probe table)",
     VMMC_CFG_INT, &cfg.probe_slots, 16, 1u << 20},
    {"SOCK_DEBUG", "n", "print one line per upgrade, fallback and revert on stderr",
     VMMC_CFG_BOOL, &cfg.debug},
};
VMMC_CONFIG_TABLE(sock_cfg_tab, "sock", sock_entries);

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
    (void)vmmc_config_load(); /* a refused value keeps its default (and is reported) */
}

const sock_cfg_t *sock_cfg(void)
{
    pthread_once(&once, load);
    return &cfg;
}

uint64_t vmmc_sock_spin_ns(void)
{
    return sock_cfg()->spin_ns;
}
