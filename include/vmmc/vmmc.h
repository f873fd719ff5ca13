/**
 * @file vmmc.h
 * @brief Virtual memory-mapped communication: export, import, deliberate update.
 *
 * A receiver *exports* a region of its address space under a name and says
 * which ranks may import it. A sender *imports* the region by (rank, name) and
 * gets a proxy with bounds; it then writes straight into the region with
 * vmmc_send() ("deliberate update"). There is no receive call: data lands in
 * the receiver's memory while it computes. A send may carry a notification,
 * which runs the export's handler in the receiver after the data is in place.
 *
 * Threading: every call is thread-safe unless its comment says otherwise.
 * Handlers run in whichever thread calls vmmc_progress()/vmmc_wait(), or in
 * the service thread (vmmc_service_start()).
 *
 * Status codes: 0 is success, VMMC_INPROGRESS (positive) means "not done
 * yet", negative values are errors grouped by what broke (see vmmc_status_t).
 * On error, vmmc_last_error() gives a precise message for the calling thread.
 */
#ifndef VMMC_VMMC_H
#define VMMC_VMMC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define VMMC_API __attribute__((visibility("default")))
#else
#define VMMC_API
#endif

#define VMMC_VERSION_MAJOR 0
#define VMMC_VERSION_MINOR 1
#define VMMC_VERSION_PATCH 0

/**
 * @brief One status type for the whole stack.
 *
 * Groups: -1..-9 argument errors (the call was wrong, nothing happened);
 * -10..-19 transient/resource (try again later); -20..-29 permission;
 * -30..-39 endpoint (local failure); -40..-49 peer (remote side gone).
 */
typedef enum vmmc_status {
    VMMC_OK = 0,              /**< success */
    VMMC_INPROGRESS = 1,      /**< operation started, not complete yet */

    VMMC_ERR_INVALID = -1,    /**< invalid argument */
    VMMC_ERR_BOUNDS = -2,     /**< range outside the imported/exported region */
    VMMC_ERR_NOT_FOUND = -3,  /**< no such export / handler / rank */
    VMMC_ERR_EXISTS = -4,     /**< name already exported */
    VMMC_ERR_STALE = -5,      /**< handle used after unimport/unexport */
    VMMC_ERR_TRUNCATED = -6,  /**< fewer bytes than asked were available */
    VMMC_ERR_OVERFLOW = -7,   /**< more bytes than the declared bound */

    VMMC_ERR_AGAIN = -10,     /**< transient: no resources now, try again */
    VMMC_ERR_NOMEM = -11,     /**< out of memory */
    VMMC_ERR_TIMEOUT = -12,   /**< deadline passed */
    VMMC_ERR_BUSY = -13,      /**< resource in use (e.g. redirect slots) */

    VMMC_ERR_PERMISSION = -20, /**< not permitted (import, read, map) */
    VMMC_ERR_UNSUPPORTED = -21,/**< not possible with this region/transport */

    VMMC_ERR_ENDPOINT = -30,  /**< endpoint closed or not initialised */
    VMMC_ERR_SYSTEM = -31,    /**< a system call failed (see message) */
    VMMC_ERR_PROTOCOL = -32,  /**< malformed message from outside */

    VMMC_ERR_PEER_DEAD = -40, /**< the peer process died or left the job */
    VMMC_ERR_PEER_UNREACHABLE = -41 /**< the peer could not be reached */
} vmmc_status_t;

/** @brief Short fixed text for a status code. Never NULL. */
VMMC_API const char *vmmc_strerror(int status);

/**
 * @brief Detailed message for the last error reported to this thread,
 * e.g. "send of 64 bytes at offset 4090 exceeds region 'buf' of 4096 bytes".
 * Valid until the thread's next failing call. Never NULL.
 */
VMMC_API const char *vmmc_last_error(void);

/** @brief Library version string, e.g. "0.1.0". */
VMMC_API const char *vmmc_version(void);

/* ------------------------------------------------------------------------- */
/** @name Endpoint and job
 *  One endpoint per process joins the job (rank, size). Started by
 *  `vmmc run -n N`, the process learns its rank from the environment; started
 *  alone, it is rank 0 of a job of size 1.
 *  @{ */

typedef struct vmmc_ep vmmc_ep_t;

/** Fields of vmmc_ep_params_t that are set (field_mask bits). */
enum {
    VMMC_EP_PARAM_SERVICE_THREAD = 1u << 0, /**< service_thread is set */
    VMMC_EP_PARAM_SPIN_NS = 1u << 1         /**< spin_ns is set */
};

/** @brief Endpoint parameters; zero-initialise and set field_mask. */
typedef struct vmmc_ep_params {
    uint64_t field_mask;
    int service_thread;   /**< start the notification service thread */
    uint64_t spin_ns;     /**< spin before blocking in vmmc_wait() */
} vmmc_ep_params_t;

/**
 * @brief Join the job. @p params may be NULL (defaults from VMMC_* settings).
 * Returns VMMC_ERR_PEER_UNREACHABLE if the launcher cannot be reached.
 */
VMMC_API int vmmc_init(const vmmc_ep_params_t *params, vmmc_ep_t **ep);

/** @brief Leave the job: unexport (as vmmc_unexport() does, so nothing an
 *  importer sends lands after this returns), unimport, stop threads, free. */
VMMC_API int vmmc_finalize(vmmc_ep_t *ep);

VMMC_API int vmmc_rank(const vmmc_ep_t *ep); /**< this process's rank */
VMMC_API int vmmc_size(const vmmc_ep_t *ep); /**< number of ranks in the job */

/** @brief Block until every rank of the job has entered the barrier,
 *  serving handlers and progress hooks meanwhile (spin, then sleep).
 *  Fails with VMMC_ERR_PEER_DEAD if a rank died. Control-plane speed. */
VMMC_API int vmmc_barrier(vmmc_ep_t *ep);

/** @brief Is @p rank alive as far as this endpoint knows? 1, 0, or error. */
VMMC_API int vmmc_peer_alive(vmmc_ep_t *ep, int rank);
/** @brief Is @p rank reached through memory this process shares with it
 *  (the same host, the shm transport: its exports can be mapped, its
 *  messages need no thread of either side)? 1, 0 (a network transport:
 *  udp, fabric), or an error (VMMC_ERR_PEER_UNREACHABLE: no transport). */
VMMC_API int vmmc_peer_local(vmmc_ep_t *ep, int rank);
/** @} */

/* ------------------------------------------------------------------------- */
/** @name Open-world endpoints, addresses and peers
 *  An endpoint may also live outside any job: vmmc_ep_open() gives one with
 *  no launcher, no rank and no barrier. It has an *address* (opaque bytes,
 *  like fi_getname(); vmmc_addr_format() prints it) that it hands to whoever
 *  should reach it, by any means. vmmc_connect() turns another endpoint's
 *  address into a *peer handle* (a small int), on this host (shm) or another
 *  (udp); nothing is sent until the first operation needs it, and a peer
 *  never used costs only its handle (a few hundred bytes). An endpoint that
 *  called vmmc_listen() also accepts peers that connect to it first: each
 *  gets a handle, announced to the accept callback.
 *
 *  Peer handles and ranks are one space: in a job (vmmc_init()) the handle
 *  of rank r is r, so every call that takes a rank takes a peer handle, and
 *  vmmc_notification_t.sender, vmmc_proxy_rank() etc. return handles.
 *  Handles of peers added later (connect, accept) follow the job's ranks.
 *  A job is a layer on top: vmmc_init() opens an endpoint, exchanges the
 *  addresses through the launcher, the TCP rendezvous or PMIx, and connects
 *  them in rank order.
 *  @{ */

/** Longest address vmmc_ep_addr() produces, in bytes. */
#define VMMC_ADDR_MAX 512

/** @brief Open an endpoint that belongs to no job (rank 0 of size 1 for the
 *  calls that ask). Close it with vmmc_ep_close(). Any number of endpoints
 *  may be open in one process. */
VMMC_API int vmmc_ep_open(const vmmc_ep_params_t *params, vmmc_ep_t **ep);
/** @brief Close an endpoint from vmmc_ep_open() (the same as vmmc_finalize()). */
VMMC_API int vmmc_ep_close(vmmc_ep_t *ep);

/** @brief This endpoint's address: up to *@p len bytes into @p addr; on
 *  return *@p len is its size (VMMC_ERR_TRUNCATED, with the size needed in
 *  *@p len, when @p addr is too small). */
VMMC_API int vmmc_ep_addr(vmmc_ep_t *ep, void *addr, size_t *len);
/** @brief Printable form of an address (NUL-terminated, at most
 *  2 * VMMC_ADDR_MAX + 1 bytes); VMMC_ERR_TRUNCATED if @p cap is too small. */
VMMC_API int vmmc_addr_format(const void *addr, size_t len, char *buf, size_t cap);
/** @brief The address back from its printable form. */
VMMC_API int vmmc_addr_parse(const char *str, void *addr, size_t *len);

/** @brief A peer handle for the endpoint at @p addr. Connecting twice to one
 *  address gives the same handle. Does not talk to the peer: the first
 *  operation that needs it connects (a peer that is not there makes that
 *  operation fail with VMMC_ERR_PEER_UNREACHABLE or VMMC_ERR_PEER_DEAD).
 *  VMMC_ERR_INVALID for a malformed address. */
VMMC_API int vmmc_connect(vmmc_ep_t *ep, const void *addr, size_t len, int *peer);

/** @brief Called (from the endpoint's control thread) when a peer unknown
 *  to this endpoint connected to it; @p peer is its new handle. Must not
 *  block; it may export, import and send. */
typedef void (*vmmc_accept_fn_t)(vmmc_ep_t *ep, int peer, void *arg);
/** @brief Accept peers that connect first (until vmmc_ep_close()). Without
 *  it an endpoint talks only to its job's ranks and to peers it connected
 *  to; others are refused. @p fn may be NULL. */
VMMC_API int vmmc_listen(vmmc_ep_t *ep, vmmc_accept_fn_t fn, void *arg);

/** @brief The address of peer @p peer (as vmmc_ep_addr()). */
VMMC_API int vmmc_peer_addr(vmmc_ep_t *ep, int peer, void *addr, size_t *len);
/** @brief Number of peer handles in use (ranks of the job included); handles
 *  are 0 .. this - 1. */
VMMC_API int vmmc_peer_count(const vmmc_ep_t *ep);
/** @} */

/* ------------------------------------------------------------------------- */
/** @name Communication memory
 *  Memory from vmmc_mem_alloc() is backed by its own sealed memfd. An export
 *  of one whole allocation that grants VMMC_EXPORT_READ is mapped by its
 *  importers on this host, so a send into it is a plain copy with no system
 *  call, and importers may map it for automatic update (a mapping grants
 *  whole pages with read and write rights, so nothing less can be mapped).
 *  So is an export of a caller's own sealed memfd (VMMC_EXPORT_PARAM_FD, see
 *  vmmc_export()). Every other export (part of an allocation, no
 *  VMMC_EXPORT_READ, stack, static, malloc) is written with process_vm_writev
 *  (one kernel copy) and read with process_vm_readv, which reach exactly the
 *  exported bytes. Importers check a descriptor they are given before they
 *  map it: it must hold the region and be sealed against shrinking, else the
 *  import fails with VMMC_ERR_PROTOCOL.
 *  @{ */

/** @brief Allocate @p size bytes of page-aligned, zeroed, shareable memory.
 *  Exports inside it must end within these @p size bytes. */
VMMC_API int vmmc_mem_alloc(vmmc_ep_t *ep, size_t size, void **ptr);
/** @brief Free memory from vmmc_mem_alloc(). Exports inside it must be gone
 *  (the one behind vmmc_mem_key() is withdrawn here). */
VMMC_API int vmmc_mem_free(vmmc_ep_t *ep, void *ptr);
/** @} */

/* ------------------------------------------------------------------------- */
/** @name Memory keys and the translation cache
 *  A key lets one peer rank on this host write and read a range of this
 *  process's vmmc_mem_alloc() memory with ordinary loads and stores, without
 *  an export per buffer (like an RDMA rkey). The unit of protection is the
 *  allocation that holds the range (the registration unit): the peer maps
 *  that allocation, so a hostile holder of any key for it can reach all of
 *  it; allocate separately what you grant separately. Keys are
 *  authenticated (a MAC under a secret per allocation and rank): a key
 *  altered in any field, or issued to another rank, is refused. Pass the key to the peer in
 *  any message; the peer attaches it. The first key for an allocation exports
 *  it under a secret name; the first attach by a peer imports and maps it;
 *  later attaches are a lookup in that peer's translation cache (at most
 *  VMMC_MKEY_CACHE allocations, least recently used ones unmapped).
 *  @{ */

/** @brief A key: plain data, valid for the rank it was issued to. */
typedef struct vmmc_mkey {
    uint64_t opaque[4];
} vmmc_mkey_t;

/**
 * @brief Issue a key for [@p addr, @p addr + @p len), which must lie in one
 * vmmc_mem_alloc() allocation (else VMMC_ERR_UNSUPPORTED), to @p rank.
 * VMMC_ERR_UNSUPPORTED too if importers of another export of that whole
 * allocation map it already (one export of an allocation is mapped at a time).
 */
VMMC_API int vmmc_mem_key(vmmc_ep_t *ep, const void *addr, size_t len, int rank,
                          vmmc_mkey_t *key);
/**
 * @brief Attach @p rank's @p key: *@p ptr points at the start of its range,
 * valid until vmmc_mem_detach(). The first attach of an allocation imports
 * and maps it: it waits at most @p timeout_ms (-1: until the import's own
 * deadline); with 0 it does not wait: the mapping goes on in the background
 * and VMMC_ERR_AGAIN says to try again later. VMMC_ERR_UNSUPPORTED if @p rank is
 * not reachable through shared memory, VMMC_ERR_PERMISSION if the key was not
 * issued to this rank or was altered, VMMC_ERR_STALE if the owner freed the
 * allocation (or the key names none),
 * VMMC_ERR_AGAIN if every cache entry is attached (or, with timeout 0, the
 * mapping is not ready yet).
 */
VMMC_API int vmmc_mem_attach(vmmc_ep_t *ep, int rank, const vmmc_mkey_t *key,
                             int timeout_ms, void **ptr);
/** @brief Bytes @p key covers: an attached pointer is valid for exactly
 *  this many (check a peer's claimed length against it before using one). */
VMMC_API size_t vmmc_mkey_len(const vmmc_mkey_t *key);
/** @brief Release a pointer from vmmc_mem_attach() (the mapping stays cached). */
VMMC_API int vmmc_mem_detach(vmmc_ep_t *ep, void *ptr);
/** @} */

/* ------------------------------------------------------------------------- */
/** @name Export
 *  @{ */

typedef struct vmmc_export vmmc_export_t;
struct vmmc_cq;

/** @brief What a notification handler is told. */
typedef struct vmmc_notification {
    vmmc_export_t *export_; /**< the export written to */
    int sender;             /**< rank that sent */
    size_t offset;          /**< where the data landed, within the export */
    size_t length;          /**< how many bytes landed */
    uint64_t imm;           /**< sender's immediate value (vmmc_send_imm) */
} vmmc_notification_t;

/**
 * @brief Notification handler.
 *
 * Context: runs in the thread that drives progress (vmmc_progress,
 * vmmc_wait, or the service thread), after the notified bytes are in the
 * export. Notifications are blocked while it runs, so handlers never nest.
 * It may send (vmmc_send), export and import, but must not call
 * vmmc_wait()/vmmc_finalize(), and must not block for long: other handlers
 * wait for it. @p n is valid only during the call.
 */
typedef void (*vmmc_notify_fn_t)(vmmc_ep_t *ep, const vmmc_notification_t *n,
                                 void *arg);

/** Export flags. */
enum {
    VMMC_EXPORT_READ = 1u << 0,        /**< importers may vmmc_fetch() */
    VMMC_EXPORT_REDIRECTABLE = 1u << 1 /**< receiver may vmmc_redirect() */
};

/** Fields of vmmc_export_params_t that are set (field_mask bits). */
enum {
    VMMC_EXPORT_PARAM_IMPORTERS = 1u << 0, /**< importers/num_importers set */
    VMMC_EXPORT_PARAM_HANDLER = 1u << 1,   /**< handler/handler_arg set */
    VMMC_EXPORT_PARAM_FLAGS = 1u << 2,     /**< flags set */
    VMMC_EXPORT_PARAM_CQ = 1u << 3,        /**< cq/cq_context set */
    VMMC_EXPORT_PARAM_FD = 1u << 4         /**< fd/fd_offset set (see below) */
};

/** @brief Export description; zero-initialise, then set what you need. */
typedef struct vmmc_export_params {
    uint64_t field_mask;
    const char *name;        /**< unique in this process, < 64 bytes; names
                                  starting with "vmmc.mem." are reserved */
    void *addr;              /**< start of the region */
    size_t length;           /**< bytes, >= 1 */
    unsigned flags;          /**< VMMC_EXPORT_* */
    const int *importers;    /**< ranks allowed; unset or 0 = any rank */
    int num_importers;
    vmmc_notify_fn_t handler;/**< NULL: notifications are ignored */
    void *handler_arg;
    struct vmmc_cq *cq;      /**< with VMMC_EXPORT_PARAM_CQ: notifications
                                  become completions (VMMC_OP_NOTIFY) in this
                                  queue instead of handler calls; while it is
                                  full they wait, in order, and take the
                                  slots its polls free before new operations
                                  can (other exports' notifications go on) */
    void *cq_context;        /**< context of those completions */
    int fd;                  /**< with VMMC_EXPORT_PARAM_FD: [addr, addr +
                                  length) is a MAP_SHARED mapping of this
                                  memfd ... */
    uint64_t fd_offset;      /**< ... at this offset in it */
} vmmc_export_params_t;

/** @brief Export a region. Fails with VMMC_ERR_EXISTS if the name is taken,
 *  VMMC_ERR_BOUNDS if the region starts inside a vmmc_mem_alloc() allocation
 *  and ends past it.
 *
 *  **Exports of a caller's memfd (VMMC_EXPORT_PARAM_FD).** The caller
 *  promises that [addr, addr + length) is a MAP_SHARED mapping of @c fd at
 *  @c fd_offset (vmmc cannot check it: if the promise is false, importers
 *  write into the memfd and the caller reads other memory). Importers on this
 *  host then get the descriptor and map it, as for a whole vmmc_mem_alloc()
 *  allocation: a send is a copy with no system call, and vmmc_proxy_map()
 *  works. Refused with VMMC_ERR_INVALID and a message naming the rule unless:
 *  - the export grants VMMC_EXPORT_READ (a mapping grants read and write);
 *  - addr and fd_offset are page-aligned; importers map whole pages, so they
 *    may reach up to the end of the last page of the region (as with
 *    vmmc_mem_alloc());
 *  - @c fd is a memfd open for reading and writing, sealed with F_SEAL_SHRINK
 *    (otherwise a peer holding it could truncate it and make this process
 *    fault on its next access) but not against writing, at least fd_offset +
 *    length bytes long (seal F_SEAL_SEAL too, so that holders cannot add
 *    seals of their own, such as F_SEAL_FUTURE_WRITE, which refuses new
 *    writable mappings of it);
 *  - the region is not inside vmmc_mem_alloc() memory (export the allocation).
 *  The library keeps a duplicate of @c fd until the export ends; the caller
 *  keeps, and closes, its own.
 *
 *  Revocation is weaker than for vmmc_mem_alloc() memory, whose pages move to
 *  a fresh memfd at unexport: the caller owns the mappings of its memfd, so
 *  they stay. vmmc_unexport() makes importers' proxies stale and importers on
 *  this host replace their mapping by private memory before they acknowledge,
 *  so nothing sent through vmmc lands afterwards; but a hostile process that
 *  kept the descriptor it was given keeps read and write access to the whole
 *  memfd for as long as it lives. Handing over the descriptor opts into that:
 *  export a memfd only to importers trusted with it, and put nothing in the
 *  memfd that they may not see. */
VMMC_API int vmmc_export(vmmc_ep_t *ep, const vmmc_export_params_t *params,
                         vmmc_export_t **ex);
/**
 * @brief Withdraw an export. When this returns, no byte sent through vmmc
 * reaches the region again, and importers get VMMC_ERR_STALE on their next
 * use: importers on this host are told and acknowledge once none of their
 * copy-path writes is under way (this waits for them, at most
 * VMMC_CONNECT_TIMEOUT; a dead importer is not waited for), and a mapped
 * export's allocation moves to fresh pages at the same address, so old
 * mappings and descriptors reach nothing of this process (other threads must
 * not store into that allocation meanwhile: such stores may be lost). An
 * export of a caller's memfd (VMMC_EXPORT_PARAM_FD) is not moved: importers
 * on this host drop their mapping before they acknowledge, but a process
 * that kept the descriptor still reaches the memfd (see vmmc_export()). Sends
 * racing with the call may land before it returns. The handle stays valid
 * until vmmc_finalize(): later calls with it return VMMC_ERR_STALE.
 */
VMMC_API int vmmc_unexport(vmmc_export_t *ex);
/** @brief Base address and length of an export. */
VMMC_API void *vmmc_export_addr(const vmmc_export_t *ex);
VMMC_API size_t vmmc_export_length(const vmmc_export_t *ex);

/**
 * @brief Exports made when a peer first asks for them: called when peer
 * @p peer asks to import @p name, which starts with a prefix registered with
 * vmmc_export_on_demand() and is not exported.
 *
 * Context: the thread that received the request (the endpoint's control
 * thread, or a transport's receive thread), without the endpoint's locks
 * held: it may call vmmc_mem_alloc() and vmmc_export() (the usual way to
 * accept), but must not block for long (other peers' requests wait behind
 * it), must not wait for a reply from a peer, and must not call
 * vmmc_export_on_demand_remove(). @p peer is the handle the transport
 * authenticated the request as coming from, never a field of the request.
 * @p name is valid during the call only.
 *
 * Every peer can ask for any name, so the function decides: return VMMC_OK
 * after exporting @p name (or when it exists already; the request is then
 * answered as any import is, permissions included; without an export it
 * waits for the name, within the importer's deadline), or a negative status
 * to refuse it at once: the importer gets that status, with the text this
 * thread's last vmmc error gives.
 */
typedef int (*vmmc_demand_fn_t)(vmmc_ep_t *ep, const char *name, int peer, void *arg);

/**
 * @brief Let @p fn create exports whose names start with @p prefix (1..63
 * bytes) when peers first import them (see vmmc_demand_fn_t). Requests for
 * such names that are waiting here already are handed to @p fn before this
 * returns (from this thread). A request is handed over once, after the core
 * has counted it against the requester's limit of waiting imports, so a
 * flood of requests costs at most that many calls per peer.
 * VMMC_ERR_EXISTS if @p prefix overlaps a registered one (either starts with
 * the other); a prefix that overlaps the reserved "vmmc.mem." is
 * VMMC_ERR_INVALID.
 */
VMMC_API int vmmc_export_on_demand(vmmc_ep_t *ep, const char *prefix, vmmc_demand_fn_t fn,
                                   void *arg);
/**
 * @brief Stop creating exports for @p prefix. Returns once no call of its
 * function is running (so its argument may be freed then); exports it made
 * stay. VMMC_ERR_NOT_FOUND if @p prefix is not registered.
 */
VMMC_API int vmmc_export_on_demand_remove(vmmc_ep_t *ep, const char *prefix);
/** @} */

/* ------------------------------------------------------------------------- */
/** @name Import
 *  @{ */

typedef struct vmmc_proxy vmmc_proxy_t;

/**
 * @brief Import @p rank's export @p name, waiting at most @p timeout_ms
 * for it to appear (-1: the VMMC_IMPORT_TIMEOUT setting, 30 s by default; an
 * import never waits forever for a name that does not appear).
 * VMMC_ERR_PERMISSION if the exporter does not allow this rank;
 * VMMC_ERR_TIMEOUT if the name did not appear in time; VMMC_ERR_PEER_DEAD if
 * the exporter is gone.
 */
VMMC_API int vmmc_import(vmmc_ep_t *ep, int rank, const char *name,
                         int timeout_ms, vmmc_proxy_t **px);

/**
 * @brief Non-blocking import: returns at once with a pending proxy.
 * Poll it with vmmc_import_test() (VMMC_INPROGRESS until decided); the
 * deadline @p timeout_ms still applies. A failed pending proxy must still
 * be released with vmmc_unimport().
 */
VMMC_API int vmmc_import_start(vmmc_ep_t *ep, int rank, const char *name,
                               int timeout_ms, vmmc_proxy_t **px);
VMMC_API int vmmc_import_test(vmmc_proxy_t *px);

/** @brief Release an import (unmaps it). The handle stays valid until
 *  vmmc_finalize(): later calls with it return VMMC_ERR_STALE. */
VMMC_API int vmmc_unimport(vmmc_proxy_t *px);

/** @brief Length of the imported region (0 while pending). */
VMMC_API size_t vmmc_proxy_length(const vmmc_proxy_t *px);
/** @brief Rank that exports the region. */
VMMC_API int vmmc_proxy_rank(const vmmc_proxy_t *px);
/** @brief Export flags the exporter set (VMMC_EXPORT_*). */
VMMC_API unsigned vmmc_proxy_flags(const vmmc_proxy_t *px);

/**
 * @brief Automatic update: map the imported region into this process, so
 * ordinary stores land in the exporter's memory. A mapping grants whole pages
 * with read and write rights, so only an export of one whole vmmc_mem_alloc()
 * allocation that grants VMMC_EXPORT_READ (and only through one export of an
 * allocation at a time), or of a caller's memfd (VMMC_EXPORT_PARAM_FD), on
 * the same host, can be mapped; any other gets
 * VMMC_ERR_UNSUPPORTED with the reason, and vmmc_send()/vmmc_fetch() still
 * work. Stay within [*ptr, *ptr + length). Ordering: stores become visible
 * in program order (x86 TSO); use a release store for flags.
 */
VMMC_API int vmmc_proxy_map(vmmc_proxy_t *px, void **ptr);
/** @} */

/* ------------------------------------------------------------------------- */
/** @name Deliberate update
 *  A send moves @p len bytes (0 up to the region length) from @p src to
 *  offset @p offset of the imported region. A send outside the region is
 *  refused with VMMC_ERR_BOUNDS and writes nothing. Length 0, on every
 *  transport: at an offset from 0 to the region length (@p src may be NULL)
 *  a send is a no-op that completes, and with VMMC_SEND_NOTIFY it still
 *  delivers its notification (length 0), in order with the others; a fetch
 *  of 0 bytes completes at once; a larger offset is VMMC_ERR_BOUNDS. Sends from one process to
 *  one peer land in the order they were issued, so "data, then flag" works;
 *  within one send the order in which bytes land is unspecified, except with
 *  VMMC_SEND_HEAD_LAST.
 *  @{ */

/** Send flags. */
enum {
    VMMC_SEND_NOTIFY = 1u << 0,  /**< run the export's handler after delivery */
    VMMC_SEND_NONBLOCK = 1u << 1, /**< return VMMC_ERR_AGAIN instead of waiting
                                      for resources (notification queue) */
    /** Publish a record in one send: every byte but the first 16 lands
     *  first, then the word at @p offset, then (release) the word at
     *  @p offset + 8, so a receiver that sees a new second word sees the
     *  whole record, on every transport (over udp one datagram carries it
     *  when it fits in one). Needs a length of at least 16, an offset and
     *  a region start that are multiples of 8, a synchronous send, and an
     *  export that is not redirectable (VMMC_ERR_INVALID otherwise). */
    VMMC_SEND_HEAD_LAST = 1u << 2,
    /** Start this send only once every operation the endpoint issued
     *  before it, to any peer (sends, gather sends, atomics, asynchronous
     *  ones too), has been applied in its target's memory, as after
     *  vmmc_fence(ep, -1) (libfabric's FI_FENCE): a flag written to one
     *  peer with it tells that peer that the data written to others is in
     *  place. The caller waits for that, even in vmmc_send_async(),
     *  vmmc_sendv() and vmmc_send_cq(). */
    VMMC_SEND_FENCE = 1u << 3
};

/**
 * @brief Caller-owned request for asynchronous operations (no allocation).
 * Contents are private. Keep it alive and in place until completion.
 */
typedef struct vmmc_request {
    uint64_t opaque[8];
} vmmc_request_t;

/** @brief Synchronous send: @p src may be reused when this returns. */
VMMC_API int vmmc_send(vmmc_proxy_t *px, size_t offset, const void *src,
                       size_t len, unsigned flags);

/** @brief As vmmc_send() with an immediate value passed to the handler. */
VMMC_API int vmmc_send_imm(vmmc_proxy_t *px, size_t offset, const void *src,
                           size_t len, unsigned flags, uint64_t imm);

/**
 * @brief Asynchronous send. Returns VMMC_OK if already complete, or
 * VMMC_INPROGRESS: then @p src must stay untouched until vmmc_test() or
 * vmmc_wait() on @p req returns VMMC_OK (or an error). Large transfers are
 * carried out by the endpoint's copy engine while the caller computes.
 */
VMMC_API int vmmc_send_async(vmmc_proxy_t *px, size_t offset, const void *src,
                             size_t len, unsigned flags, vmmc_request_t *req);

/** @brief Remote read from an export that allows it (VMMC_EXPORT_READ),
 *  else VMMC_ERR_PERMISSION. */
VMMC_API int vmmc_fetch(vmmc_proxy_t *px, size_t offset, void *dst,
                        size_t len);

/** @brief VMMC_OK when done, VMMC_INPROGRESS if not yet, or the error. */
VMMC_API int vmmc_test(vmmc_request_t *req);
/** @brief Wait for @p req (timeout_ms -1: forever) without burning the CPU
 *  past the configured spin. */
VMMC_API int vmmc_request_wait(vmmc_request_t *req, int timeout_ms);
/** @} */

/* ------------------------------------------------------------------------- */
/** @name Progress, notifications and waiting
 *  There is one progress engine per endpoint. Four ways to drive it:
 *  - polling: call vmmc_progress() yourself;
 *  - blocking: vmmc_wait() spins (VMMC_SPIN) then sleeps on an event;
 *  - an event fd for your own epoll loop: vmmc_event_fd() + vmmc_progress();
 *  - a service thread that runs handlers while you compute.
 *  @{ */

/** @brief Run pending notification handlers and progress hooks once.
 *  Returns the number of events handled (>= 0) or an error. */
VMMC_API int vmmc_progress(vmmc_ep_t *ep);

/**
 * @brief Wait until at least one event was handled or @p timeout_ms passed
 * (-1: forever; 0: just progress). Spins for the configured time, then blocks.
 * Events handled meanwhile by another thread (the service thread, say) count.
 * Returns the number of events handled, 0 on timeout, or an error.
 */
VMMC_API int vmmc_wait(vmmc_ep_t *ep, int timeout_ms);

/**
 * @brief A file descriptor that becomes readable when events are pending.
 * Put it in your epoll set (EPOLLIN), and when it fires call vmmc_progress()
 * until it returns 0. Do not read or close it yourself.
 */
VMMC_API int vmmc_event_fd(vmmc_ep_t *ep);

/** @brief Block notification handlers; nests. Arrivals are queued. */
VMMC_API int vmmc_notify_block(vmmc_ep_t *ep);
/**
 * @brief Undo one vmmc_notify_block(). Returns 1 if handlers are now
 * unblocked (queued ones run at the next progress), 0 if still blocked,
 * VMMC_ERR_INVALID if not blocked or called inside a handler at its own level.
 */
VMMC_API int vmmc_notify_unblock(vmmc_ep_t *ep);

/** @brief Start/stop the service thread that runs handlers and hooks while
 *  the application computes. It spins briefly, then sleeps. */
VMMC_API int vmmc_service_start(vmmc_ep_t *ep);
VMMC_API int vmmc_service_stop(vmmc_ep_t *ep);

/**
 * @brief Progress hook for layers above the core (FM, MPI, ...). Called by
 * every progress pass; returns the number of events it handled (>0 counts as
 * progress). It must not block. @p arm is called before the endpoint sleeps:
 * return nonzero if work is already pending (then it does not sleep). Either
 * may be NULL.
 */
typedef int (*vmmc_progress_fn_t)(void *arg);
VMMC_API int vmmc_progress_hook_add(vmmc_ep_t *ep, vmmc_progress_fn_t poll,
                                    vmmc_progress_fn_t arm, void *arg);
VMMC_API int vmmc_progress_hook_remove(vmmc_ep_t *ep, vmmc_progress_fn_t poll,
                                       void *arg);

/**
 * @brief Let the service thread spin after activity (VMMC_SPIN) only while
 * @p gate(@p arg) returns nonzero; NULL (the default) lets it always spin.
 * A spinning thread is awake, so nobody wakes it when an event comes; if an
 * application thread computes on the same processor meanwhile, the event
 * waits until the scheduler hands the processor back (a time slice,
 * milliseconds), while a sleeping service thread is woken and preempts at
 * once. A layer that knows when its application threads are blocked (the
 * DSM: an application thread waits for an answer) opens the gate then and
 * closes it when they compute. @p gate runs in the service thread at every
 * pass of its spin: it must be cheap and must not block. Set it before
 * vmmc_service_start() (VMMC_ERR_BUSY after).
 */
VMMC_API int vmmc_service_spin_gate(vmmc_ep_t *ep, vmmc_progress_fn_t gate, void *arg);

/**
 * @brief Drive progress in the calling thread, in place of a sleeping
 * service thread, until @p done(@p arg) returns nonzero or @p ns
 * nanoseconds have passed. While it does, the service thread sleeps on and
 * nobody wakes it: peers see no sleeper and write no wake-up, and what
 * arrives is handled here, so an application thread that waits for an
 * answer takes it without a wake-up and a context switch on each side of
 * the handler. Afterwards the service thread sleeps as before (it is woken
 * if something is left to handle). It is for a thread with a processor of
 * its own that would otherwise sleep until the service thread wakes it: on
 * a processor shared with the rank it waits for, the spin keeps that rank
 * from answering. @p done is called after every progress pass, in the
 * calling thread.
 *
 * Returns 1 if @p done said so, 0 otherwise: the time passed, a peer died,
 * the service thread was awake (it handles what comes; nothing was done
 * here), or no service thread runs, or the caller is inside a handler.
 * Counted in the endpoint's `service_borrows` counter.
 */
VMMC_API int vmmc_service_borrow(vmmc_ep_t *ep, vmmc_progress_fn_t done, void *arg, uint64_t ns);

/**
 * @brief Wake the owner of @p rank's endpoint if it sleeps in vmmc_wait()
 * (or its event fd is armed). Use after writing into a region whose owner
 * polls it through a progress hook. Cheap when the peer is not asleep.
 */
VMMC_API int vmmc_signal(vmmc_ep_t *ep, int rank);
/** @} */

/* ------------------------------------------------------------------------- */
/** @name Gather sends, fences, remote atomics, completion queues
 *  @{ */

/** @brief One piece of a gather send. */
typedef struct vmmc_iov {
    const void *base;
    size_t len;
} vmmc_iov_t;

/** @brief Gather send: the @p iovcnt pieces (at most VMMC_IOV_MAX) land one
 *  after another from @p offset, as one send of their total length would
 *  (bounds checked on the total before a byte moves; one notification, with
 *  @p imm, after all of them with VMMC_SEND_NOTIFY). Synchronous. */
#define VMMC_IOV_MAX 64
VMMC_API int vmmc_sendv(vmmc_proxy_t *px, size_t offset, const vmmc_iov_t *iov, int iovcnt,
                        unsigned flags, uint64_t imm);

/** @brief Remote completion: returns when every send, gather send and atomic
 *  this endpoint issued to @p peer (-1: to every peer) before the call,
 *  synchronous or not, has been applied in the peer's memory. (A send
 *  returning means its source may be reused, not that it landed: over udp
 *  it may still travel.) Fails with the peer's error if one cannot complete. */
VMMC_API int vmmc_fence(vmmc_ep_t *ep, int peer);

/** Remote atomic operations on a word of the type given with the size (see
 *  vmmc_atomic()). Each reads the old value and writes the new one as one
 *  indivisible step with respect to every other vmmc atomic on the same
 *  location, whoever issues it (on this host they are the processor's own
 *  atomic instructions, so they are atomic with the exporter's
 *  __atomic/stdatomic operations on that word too). In the formulas *p is
 *  the word, operand and compare the arguments, as the word's type. */
typedef enum vmmc_atomic_op {
    VMMC_ATOMIC_ADD = 1,       /**< *p += operand (libfabric FI_SUM) */
    VMMC_ATOMIC_AND = 2,       /**< *p &= operand (integers) */
    VMMC_ATOMIC_OR = 3,        /**< *p |= operand (integers) */
    VMMC_ATOMIC_XOR = 4,       /**< *p ^= operand (integers) */
    VMMC_ATOMIC_SWAP = 5,      /**< *p = operand (FI_ATOMIC_WRITE) */
    VMMC_ATOMIC_CSWAP = 6,     /**< if (compare == *p) *p = operand */
    VMMC_ATOMIC_READ = 7,      /**< nothing written: fetch the value atomically */
    VMMC_ATOMIC_MIN = 8,       /**< if (operand < *p) *p = operand */
    VMMC_ATOMIC_MAX = 9,       /**< if (operand > *p) *p = operand */
    VMMC_ATOMIC_PROD = 10,     /**< *p *= operand */
    VMMC_ATOMIC_LAND = 11,     /**< *p = *p && operand (integers: 0 or 1) */
    VMMC_ATOMIC_LOR = 12,      /**< *p = *p || operand (integers: 0 or 1) */
    VMMC_ATOMIC_LXOR = 13,     /**< *p = !*p != !operand (integers: 0 or 1) */
    VMMC_ATOMIC_MSWAP = 14,    /**< *p = (operand & compare) | (*p & ~compare) (integers) */
    VMMC_ATOMIC_CSWAP_NE = 15, /**< if (compare != *p) *p = operand */
    VMMC_ATOMIC_CSWAP_LE = 16, /**< if (compare <= *p) *p = operand */
    VMMC_ATOMIC_CSWAP_LT = 17, /**< if (compare < *p) *p = operand */
    VMMC_ATOMIC_CSWAP_GE = 18, /**< if (compare >= *p) *p = operand */
    VMMC_ATOMIC_CSWAP_GT = 19  /**< if (compare > *p) *p = operand */
} vmmc_atomic_op_t;

/** The type of the word, or'ed into the size argument of vmmc_atomic() and
 *  vmmc_atomic_cq(): 4 or 8 alone is an unsigned integer (uint32_t,
 *  uint64_t); with VMMC_ATOMIC_SIGNED a two's complement signed integer
 *  (int32_t, int64_t); with VMMC_ATOMIC_FLOAT an IEEE 754 float (4) or
 *  double (8). Any other bit, or both flags, is VMMC_ERR_INVALID. */
#define VMMC_ATOMIC_SIGNED 0x10
#define VMMC_ATOMIC_FLOAT 0x20

/** @brief The bits a double travels in (operand, compare, result). */
static inline uint64_t vmmc_atomic_from_double(double d)
{
    uint64_t u;
    __builtin_memcpy(&u, &d, sizeof u);
    return u;
}
/** @brief The double in @p bits (a result of an 8-byte VMMC_ATOMIC_FLOAT atomic). */
static inline double vmmc_atomic_to_double(uint64_t bits)
{
    double d;
    __builtin_memcpy(&d, &bits, sizeof d);
    return d;
}
/** @brief The bits a float travels in: its 32 bits in the low half. */
static inline uint64_t vmmc_atomic_from_float(float f)
{
    uint32_t u;
    __builtin_memcpy(&u, &f, sizeof u);
    return u;
}
/** @brief The float in the low 32 bits of @p bits. */
static inline float vmmc_atomic_to_float(uint64_t bits)
{
    uint32_t u = (uint32_t)bits;
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
}

/**
 * @brief Remote atomic on the word of @p size bytes (4 or 8, or'ed with
 * VMMC_ATOMIC_SIGNED or VMMC_ATOMIC_FLOAT for its type) at @p offset of the
 * imported region (a multiple of the size, else VMMC_ERR_INVALID).
 *
 * Values travel as their bits in a uint64_t: a 4-byte word's in the low 32
 * bits (the high ones are ignored in @p operand and @p compare, and zero in
 * @p result), a float's or double's as the vmmc_atomic_from_float/_double()
 * helpers give them. @p result, if not NULL, receives the word before the
 * operation.
 *
 * Types: ADD and PROD wrap around on integers (two's complement, signed
 * or not); MIN, MAX and the ordered CSWAP_* compare as the type does (a
 * signed -1 is less than 0, an unsigned one is the largest). The bitwise
 * (AND, OR, XOR, MSWAP) and logical (LAND, LOR, LXOR) operations take
 * integers only: on a float they are VMMC_ERR_INVALID. On floats every
 * comparison and every arithmetic operation is C's, in the type's own
 * precision: a NaN compares unequal and unordered with everything (so
 * CSWAP never replaces a NaN, MIN and MAX with a NaN operand change
 * nothing, a NaN in the word stays), -0.0 == +0.0 (CSWAP with compare 0.0
 * replaces either; MIN(-0.0) leaves +0.0 alone), and ADD/PROD round to
 * nearest and propagate NaN and infinity. SWAP and READ move the bits
 * unchanged for every type. Operations the processor has no instruction for
 * (float arithmetic, MIN, MAX, PROD, the logical ones, MSWAP, CSWAP_* and a
 * float CSWAP) run as a compare-and-swap loop on the word, which keeps
 * them atomic with all other atomics on it.
 *
 * Fetching (a @p result, or VMMC_ATOMIC_READ) needs an export with
 * VMMC_EXPORT_READ (VMMC_ERR_PERMISSION otherwise). Ordered with the
 * sender's sends to that peer like a send. On another host the target's
 * progress thread executes it while the target computes; the target checks
 * operation and type again, so a peer's forged request is refused there.
 */
VMMC_API int vmmc_atomic(vmmc_proxy_t *px, size_t offset, vmmc_atomic_op_t op, int size,
                         uint64_t operand, uint64_t compare, uint64_t *result);

/** @brief Asynchronous remote read into @p dst: like vmmc_send_async(). */
VMMC_API int vmmc_fetch_async(vmmc_proxy_t *px, size_t offset, void *dst, size_t len,
                              vmmc_request_t *req);

/** @brief A completion queue: asynchronous operations posted with a queue
 *  (and notifications of exports given one) complete into it, in the order
 *  they complete, each with the user's context and status. */
typedef struct vmmc_cq vmmc_cq_t;

/** What completed. */
typedef enum vmmc_op {
    VMMC_OP_SEND = 1,   /**< vmmc_send_cq */
    VMMC_OP_FETCH = 2,  /**< vmmc_fetch_cq */
    VMMC_OP_ATOMIC = 3, /**< vmmc_atomic_cq */
    VMMC_OP_NOTIFY = 4  /**< a notification for an export given this queue */
} vmmc_op_t;

/** @brief One completion. */
typedef struct vmmc_completion {
    void *context;        /**< the context given when the operation was posted
                               (VMMC_OP_NOTIFY: the export's cq_context) */
    int status;           /**< VMMC_OK or the error that ended the operation */
    int peer;             /**< the peer it went to (VMMC_OP_NOTIFY: the sender) */
    vmmc_op_t op;
    size_t offset;        /**< VMMC_OP_NOTIFY: where the data landed */
    size_t length;        /**< bytes moved (VMMC_OP_NOTIFY: bytes that landed) */
    uint64_t value;       /**< VMMC_OP_ATOMIC: the old value; VMMC_OP_NOTIFY: imm */
    vmmc_export_t *export_; /**< VMMC_OP_NOTIFY: the export written to */
    const char *error;    /**< status != VMMC_OK: what went wrong (names the
                               peer), valid until the next poll of the queue */
} vmmc_completion_t;

/** @brief Open a queue for at most @p depth outstanding operations: posting
 *  an operation when @p depth are outstanding or not yet polled gives
 *  VMMC_ERR_AGAIN, so a queue never overflows. */
VMMC_API int vmmc_cq_open(vmmc_ep_t *ep, size_t depth, vmmc_cq_t **cq);
/** @brief Close a queue: waits for its outstanding operations (at most
 *  VMMC_CONNECT_TIMEOUT), discards unpolled completions. */
VMMC_API int vmmc_cq_close(vmmc_cq_t *cq);
/** @brief Drive progress once and take up to @p max completions: returns how
 *  many (0: none yet) or an error. */
VMMC_API int vmmc_cq_poll(vmmc_cq_t *cq, vmmc_completion_t *out, int max);
/** @brief As vmmc_cq_poll(), but wait (spin, then sleep; -1: forever) until
 *  at least one completion is there; 0 on timeout. */
VMMC_API int vmmc_cq_wait(vmmc_cq_t *cq, vmmc_completion_t *out, int max, int timeout_ms);
/** @brief A descriptor that is readable while completions wait in @p cq (or
 *  progress is needed to produce them): put it in an epoll set, and when it
 *  fires call vmmc_cq_poll() until it returns 0. Do not read or close it. */
VMMC_API int vmmc_cq_fd(vmmc_cq_t *cq);

/** @brief Post a send that completes into @p cq: VMMC_OK means posted (a
 *  completion with @p context follows, even when it was done at once);
 *  any error means nothing was posted. @p src stays untouched until then. */
VMMC_API int vmmc_send_cq(vmmc_proxy_t *px, size_t offset, const void *src, size_t len,
                          unsigned flags, uint64_t imm, vmmc_cq_t *cq, void *context);
/** @brief Post a remote read that completes into @p cq. */
VMMC_API int vmmc_fetch_cq(vmmc_proxy_t *px, size_t offset, void *dst, size_t len,
                           vmmc_cq_t *cq, void *context);
/** @brief Post a remote atomic that completes into @p cq: operations, types
 *  (@p size with VMMC_ATOMIC_SIGNED or VMMC_ATOMIC_FLOAT) and checks as
 *  vmmc_atomic(); the old value is in vmmc_completion_t.value when the
 *  export allows reads (VMMC_EXPORT_READ), else 0 (VMMC_ATOMIC_READ needs
 *  the right), and vmmc_completion_t.length is the width (4 or 8). */
VMMC_API int vmmc_atomic_cq(vmmc_proxy_t *px, size_t offset, vmmc_atomic_op_t op, int size,
                            uint64_t operand, uint64_t compare, vmmc_cq_t *cq, void *context);
/** @} */

/* ------------------------------------------------------------------------- */
/** @name Transfer redirection
 *  For exports with VMMC_EXPORT_REDIRECTABLE ("default buffers"). The receiver
 *  posts a user buffer for the bytes [offset, offset+len) of the default
 *  buffer: bytes that arrive after the posting land in @p buf directly; bytes
 *  that arrived before (and were not consumed by an earlier redirect) are
 *  copied from the default buffer. Each byte is delivered exactly once. The
 *  request completes when all @p len bytes are in @p buf.
 *  @{ */
VMMC_API int vmmc_redirect(vmmc_export_t *ex, size_t offset, void *buf,
                           size_t len, vmmc_request_t *req);
/** @brief Withdraw a pending redirect; returns bytes delivered so far (>=0). */
VMMC_API int vmmc_redirect_cancel(vmmc_request_t *req);
/** @} */

/* ------------------------------------------------------------------------- */
/** @name Configuration and introspection
 *  @{ */

/** @brief Iterate over VMMC_* settings: returns 0 and fills the out
 *  parameters for index @p i, or VMMC_ERR_NOT_FOUND past the end. Every
 *  setting of every layer in the library is listed, those of the libraries
 *  that registered theirs (vmmc/config.h), and the variables of a job
 *  (VMMC_RANK, VMMC_SIZE, VMMC_BOOTSTRAP, ...). @p help ends with the
 *  syntax and valid range in brackets. A refused value shows the default,
 *  which is what would be used; vmmc_config_check() says why. */
VMMC_API int vmmc_config_get(int i, const char **name, const char **value,
                             const char **deflt, const char **help);

/** @brief Check the VMMC_* settings in the environment: VMMC_OK, or
 *  VMMC_ERR_INVALID with vmmc_last_error() naming each refused value, the
 *  reason and the valid range. A value is refused when it does not parse,
 *  when a time has no unit (write "50us", not "50"; only 0 may go without),
 *  when it does not fit in 64 bits, or when it lies outside the setting's
 *  range. vmmc_init() fails the same way, so a job never runs with a setting
 *  other than the one the user wrote. */
VMMC_API int vmmc_config_check(void);

/** @brief Iterate over facts about this build and machine (version,
 *  transports, PMIx support, limits): key/value pairs for `vmmc info`. */
VMMC_API int vmmc_info_get(int i, const char **key, const char **value);

/** @brief Iterate over endpoint counters (for `vmmc info`): same scheme.
 *  The core's come first, then the transports' (named `udp.*`: datagrams
 *  and bytes in and out, retransmissions, datagrams refused by reason). */
VMMC_API int vmmc_counter_get(vmmc_ep_t *ep, int i, const char **name,
                              uint64_t *value);

/** @brief The counters of one endpoint of a running process, as published. */
typedef struct vmmc_counter_set {
    int pid;                  /**< the process */
    int index;                /**< the endpoint's number in that process (0, 1, ...) */
    int rank, size;           /**< its rank and job size */
    double age_s;             /**< seconds since the values were refreshed */
    int count;                /**< entries in names and values */
    const char *const *names; /**< vmmc_counter_get()'s names: the core's, then udp.* ... */
    const uint64_t *values;
} vmmc_counter_set_t;

/** @brief Called once per published endpoint; the set is valid during the call. */
typedef void (*vmmc_counter_set_fn)(const vmmc_counter_set_t *set, void *arg);

/** @brief Read the counters that running processes of this user publish:
 *  each endpoint refreshes a copy of its counters every VMMC_COUNTERS_PERIOD
 *  (default 1 s) in a memfd named "vmmc-cnt.N", found through /proc/PID/fd;
 *  it vanishes when the endpoint closes or the process dies. @p pid 0 reads
 *  every process this one may inspect, otherwise that process only.
 *  Malformed files are skipped with a warning on stderr. Returns the number
 *  of sets reported (>= 0), or VMMC_ERR_INVALID for a negative @p pid or a
 *  NULL @p fn. */
VMMC_API int vmmc_counters_published(int pid, vmmc_counter_set_fn fn, void *arg);
/** @} */

#ifdef __cplusplus
}
#endif
#endif /* VMMC_VMMC_H */
