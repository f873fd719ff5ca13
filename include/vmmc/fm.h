/**
 * @file fm.h
 * @brief Fast Messages 2.x over VMMC: streams, handlers, credits, paced extract.
 *
 * Every rank of the job opens FM on its endpoint with fm_init(). A message
 * is a byte stream sent to one rank and handled there by a handler chosen by
 * id:
 *
 * @code
 *   fm_stream_t *s;
 *   fm_begin_message(fm, dest, sizeof hdr + n, H_DATA, &s);  // upper bound
 *   fm_send_piece(s, &hdr, sizeof hdr);                      // gather
 *   fm_send_piece(s, payload, n);
 *   fm_end_message(s);
 *
 *   static void on_data(fm_stream_t *s, int sender, void *arg) {
 *       struct hdr h;
 *       fm_receive(&h, s, sizeof h);              // scatter: read the header,
 *       fm_receive(lookup(h.tag), s, h.len);      // then the payload in place
 *   }
 *   ...
 *   fm_extract(fm, 64 * 1024);                    // run handlers, paced
 * @endcode
 *
 * Guarantees: delivery is reliable and in order per sender; no message is
 * dropped and no receive buffer is overrun (a sender writes a packet only
 * into ring space the receiver has granted as credit). Messages from
 * different senders interleave packet by packet, so a long message never
 * holds up another sender's short ones by more than a few packets.
 *
 * How it moves: each rank exports one receive ring per sender (memory from
 * vmmc_mem_alloc()), made when that sender first imports it or is first
 * sent to, so ranks that never talk hold nothing for each other. A sender writes packets (16-byte header + payload, on
 * 64-byte boundaries) straight into the receiver's ring — through a mapping
 * of the ring when the core offers one (vmmc_proxy_map()), else with
 * vmmc_send() — and wakes a sleeping receiver with vmmc_signal(). The receiver
 * returns ring space (credits) by writing its consumed-byte count into a word
 * of the sender's ring for it, in batches.
 *
 * Large messages (VMMC_FM_ZCOPY and up) whose handler receives into
 * vmmc_mem_alloc() memory on the same host are placed there directly by the
 * sender: one copy instead of two, nothing to do for the user.
 *
 * Threading: an fm_t and its streams are used by one thread at a time
 * (handlers run in the thread that calls fm_extract()), unless it was opened
 * with FM_THREADS (see below). Different channels are independent: each may
 * be used by a thread of its own at the same time. The core may run
 * FM's progress hook in another thread (the service thread): that hook only
 * looks at the rings and returns credits; it never runs handlers.
 *
 * Channels: several independent clients (an MPI provider, a sockets layer,
 * SHMEM) share one endpoint by opening FM *channels* on it, each with an id
 * the client chooses (fm_channel_open()). An fm_t is one channel: its own
 * rings (one per sender), credits, handler table, handler stacks and
 * counters. A message sent on channel c is delivered only to channel c's
 * handlers at the destination; one channel's credits, pacing, suspended
 * handlers or closing never hold up another. fm_init() opens channel 0 for
 * the whole job at once, as FM always did.
 *
 * Status: calls return 0 (VMMC_OK) or a negative vmmc_status_t; the detailed
 * text is in vmmc_last_error().
 */
#ifndef VMMC_FM_H
#define VMMC_FM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmmc/vmmc.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief One FM channel on an endpoint (fm_init(): channel 0). Opaque. */
typedef struct fm fm_t;

/** Channel ids are 0 .. FM_CHANNEL_MAX - 1. */
#define FM_CHANNEL_MAX 256

/**
 * @brief A message stream: on the sending side, the message being composed
 * (from fm_begin_message() to fm_end_message()); on the receiving side, the
 * message being handled (valid only inside its handler). Opaque.
 */
typedef struct fm_stream fm_stream_t;

/**
 * @brief Message handler, registered with fm_register_handler().
 *
 * Runs inside fm_extract() (or inside a blocking send that waits for
 * credits, which extracts meanwhile), in the calling thread, when the
 * *first* packet of a message from @p sender has arrived.
 *
 * Context rules:
 * - It reads the message with fm_receive() on @p s, any number of times,
 *   with piece sizes independent of the sender's. @p s is valid only until
 *   the handler returns and only for fm_receive(); do not keep it.
 * - fm_receive() may suspend the handler when it asks for bytes that have
 *   not arrived yet; fm_extract() then returns to its caller or serves other
 *   senders, and resumes the handler where it left off once they arrive.
 *   So a handler is not atomic with respect to the main program or to
 *   handlers of other senders: guard shared structures accordingly.
 *   Messages from one sender are handled one after the other, never
 *   concurrently. A message that arrived whole in one packet runs its
 *   handler straight through on the caller's stack.
 * - Bytes the handler does not read are discarded when it returns.
 * - It may send (fm_begin_message() etc.), but never blocks: a begin that
 *   cannot get ring space for the whole message at once returns
 *   VMMC_ERR_AGAIN. Copy the data aside and send it from the main program
 *   instead of retrying in a loop.
 * - It must not call fm_extract(), fm_extract_wait(), fm_finalize() or
 *   vmmc_wait() (they return VMMC_ERR_INVALID or must not be used), and must
 *   not longjmp out.
 * - A suspended handler runs on a stack from FM's pool (VMMC_FM_STACK bytes,
 *   with a guard page): keep large arrays off the stack.
 */
typedef void (*fm_handler_t)(fm_stream_t *s, int sender, void *arg);

/** Pass as the id to fm_register_handler() to take the lowest free id. */
#define FM_ANY_ID (-1)

/** Pass as max_bytes to fm_extract() to process everything present. */
#define FM_EXTRACT_ALL ((size_t)-1)

/** Fields of fm_params_t that are set (field_mask bits). */
enum {
    FM_PARAM_FLAGS = 1u << 0,        /**< flags is set */
    FM_PARAM_RING_SIZE = 1u << 1,    /**< ring_size is set */
    FM_PARAM_PACKET_SIZE = 1u << 2,  /**< packet_size is set */
    FM_PARAM_CREDIT_BATCH = 1u << 3, /**< credit_batch is set */
    FM_PARAM_MAX_HANDLERS = 1u << 4, /**< max_handlers is set */
    FM_PARAM_OPEN_WAIT = 1u << 5     /**< open_wait_ms is set */
};

/** fm_params_t::flags */
enum {
    /** Sends never wait: fm_begin_message() reserves ring space for the whole
     *  message (its max_length) or returns VMMC_ERR_AGAIN. Sends from inside
     *  handlers always behave this way. */
    FM_NONBLOCK = 1u << 0,
    /** Do not write through mappings of the peers' rings even when the core
     *  allows it: every packet goes through vmmc_send() (what a remote peer
     *  gets). For testing and comparison. */
    FM_NO_MAP = 1u << 1,
    /** Several threads may call FM at once (FM 2.x's send-queue lock): one
     *  thread at a time sends to a given rank, from fm_begin_message() to
     *  fm_end_message(); another thread's fm_begin_message() to that rank
     *  waits (or gets VMMC_ERR_AGAIN in non-blocking mode and in handlers).
     *  One thread at a time extracts; handlers run in the thread that
     *  extracts. Costs an atomic operation per message. */
    FM_THREADS = 1u << 2
};

/** @brief FM parameters; zero-initialise and set field_mask. Unset fields
 *  come from the VMMC_FM_* settings (`vmmc info -c`). */
typedef struct fm_params {
    uint64_t field_mask;
    unsigned flags;      /**< FM_NONBLOCK, FM_NO_MAP, FM_THREADS */
    size_t ring_size;    /**< receive ring per sender, bytes (VMMC_FM_RING);
                              rounded up to a power of two */
    size_t packet_size;  /**< largest payload per packet (VMMC_FM_PACKET) */
    size_t credit_batch; /**< return credits every this many bytes
                              (VMMC_FM_CREDIT_BATCH; 0 = ring_size/4) */
    int max_handlers;    /**< handler ids 0..max_handlers-1 (VMMC_FM_HANDLERS) */
    int open_wait_ms;    /**< how long a send waits for the destination to open
                              the channel (VMMC_FM_OPEN_WAIT); > 0 */
} fm_params_t;

/**
 * @brief Open FM's channel 0 on @p ep for the whole job. Collective: every
 * rank of the job must call it; it waits in a barrier, so every rank has
 * the channel open when it returns. Rings are made and imported as each
 * pair of ranks first talks; a non-blocking send (FM_NONBLOCK, or from a
 * handler) to a rank not reached yet waits for that connection (one control
 * round trip, no handler runs meanwhile) rather than return VMMC_ERR_AGAIN.
 * @p params may be NULL.
 * Errors: VMMC_ERR_INVALID (bad parameters, e.g. a ring smaller than two
 * packets), VMMC_ERR_EXISTS (channel 0 already open on @p ep),
 * VMMC_ERR_NOMEM, VMMC_ERR_PEER_DEAD (a rank died during the set-up).
 */
VMMC_API int fm_init(vmmc_ep_t *ep, const fm_params_t *params, fm_t **fm);

/**
 * @brief Open channel @p channel (0 .. FM_CHANNEL_MAX - 1) of FM on @p ep.
 * Not collective: each rank that takes part opens the channel when it is
 * ready (with the same id), and ranks may open and close channels at any
 * time. It makes no ring at open: our ring for a peer is made when the
 * peer first imports it (its first send to us) or when we first send to
 * it, and the peer's ring for us is imported then too, so a rank that never
 * talks to another on this channel costs it no ring (counters "rings",
 * "ring_bytes"; requests for ring names a peer has no right to are refused
 * and counted in "ring_refused").
 *
 * A channel also reaches the endpoint's peers beyond the job (handles from
 * vmmc_connect() and vmmc_listen(); an endpoint from vmmc_ep_open() has
 * only those): a ring for such a peer is made on the first send to it, or
 * when its first import of its ring (named after the hash of its address)
 * arrives.
 *
 * Sending on a channel the destination has not opened (yet): a blocking
 * send waits for it to open the channel (extracting this channel
 * meanwhile), at most open_wait_ms (VMMC_FM_OPEN_WAIT), then fails with
 * VMMC_ERR_TIMEOUT; a non-blocking send gets VMMC_ERR_AGAIN while the
 * destination has not answered. Nothing is ever delivered into another
 * channel. A rank that closed the channel (or still has it open from before
 * this rank closed and reopened it) makes sends to it fail with
 * VMMC_ERR_STALE; close the channel on both sides before reusing its id.
 *
 * At most VMMC_FM_CHANNELS channels are open on one endpoint; each takes
 * its rings (one per peer it talks with, bounded by VMMC_FM_RING_TOTAL), a
 * staging packet per peer it
 * sends to and a stack per sender whose message is in progress.
 * Errors: VMMC_ERR_INVALID (bad id or parameters), VMMC_ERR_EXISTS (the
 * channel is open on @p ep already), VMMC_ERR_AGAIN (VMMC_FM_CHANNELS
 * channels are open), VMMC_ERR_NOMEM.
 */
VMMC_API int fm_channel_open(vmmc_ep_t *ep, int channel, const fm_params_t *params, fm_t **ch);

/**
 * @brief Close a channel (from fm_channel_open() or fm_init(); the same as
 * fm_finalize()). The channel's peers are told: their sends to this rank on
 * it fail with VMMC_ERR_STALE from then on. Other channels are unaffected.
 * Not collective; the same rules as fm_finalize().
 */
VMMC_API int fm_channel_close(fm_t *ch);

/** @brief The id of channel @p ch (0 for fm_init()'s). */
VMMC_API int fm_channel_id(const fm_t *ch);

/**
 * @brief Close an FM channel: withdraw its rings, release imports, stacks
 * and memory. Not collective: make sure (e.g. with vmmc_barrier()) that no
 * peer still sends to this rank on it: its sends fail with VMMC_ERR_STALE
 * once it notices, and what it sent before it noticed is lost.
 * Fails with VMMC_ERR_INVALID inside a handler, or VMMC_ERR_BUSY while a
 * handler is suspended or a message is open (nothing is closed then).
 *
 * fork(): in a child, every call on a channel it inherited fails with
 * VMMC_ERR_ENDPOINT (its rings are the parent's and are not mapped in the
 * child); fm_finalize() / fm_channel_close() drop the child's copy and
 * return VMMC_OK, telling no one.
 */
VMMC_API int fm_finalize(fm_t *fm);

/** @brief This rank (FM_nodeid). */
VMMC_API int fm_nodeid(const fm_t *fm);
/** @brief Number of ranks (FM_numnodes). */
VMMC_API int fm_numnodes(const fm_t *fm);

/**
 * @brief Register @p h under @p id (0..max_handlers-1), or under the lowest
 * free id with FM_ANY_ID. Registering an id again replaces its handler.
 * Returns the id (>= 0) or VMMC_ERR_INVALID / VMMC_ERR_NOMEM (no free id).
 * Register before any fm_extract() that could meet the id: a message for an
 * unregistered id is counted ("unknown_handler"), warned about once per id,
 * and discarded.
 */
VMMC_API int fm_register_handler(fm_t *fm, int id, fm_handler_t h, void *arg);

/* ------------------------------------------------------------------------- */
/** @name Sending
 *  @{ */

/**
 * @brief Open a message of at most @p max_length bytes to @p dest (any
 * rank, including this one, or any peer handle of the endpoint, 0 ..
 * vmmc_peer_count() - 1) for handler @p handler; *@p s receives the
 * stream. One message per destination may be open at a time.
 *
 * Blocking mode (the default, outside handlers): may wait for credits; while
 * it waits it extracts this rank's own incoming packets (so handlers may
 * run), so two ranks sending to each other cannot deadlock. Non-blocking
 * mode (FM_NONBLOCK, and always inside a handler): reserves ring space for
 * the whole message now or fails with VMMC_ERR_AGAIN; a message larger than
 * the receiver's ring can never be reserved (VMMC_ERR_INVALID).
 *
 * Errors: VMMC_ERR_INVALID (bad rank or handler id, NULL stream pointer),
 * VMMC_ERR_BUSY (a message to @p dest is already open outside a handler;
 * inside a handler this is VMMC_ERR_AGAIN), VMMC_ERR_AGAIN,
 * VMMC_ERR_PEER_DEAD (@p dest died; found out while waiting or sending).
 */
VMMC_API int fm_begin_message(fm_t *fm, int dest, size_t max_length, int handler,
                              fm_stream_t **s);

/**
 * @brief Append @p n bytes from @p buf to the open message (gather: any
 * number of pieces, any sizes, no alignment). Bytes are copied into the
 * receiver's ring (or a staging packet) before the call returns, so @p buf
 * may be reused at once. Full packets go out as they fill; the rest goes out
 * at fm_end_message().
 * If the piece would take the message past its max_length it is refused
 * whole with VMMC_ERR_OVERFLOW (nothing of it is sent; the message stays
 * open and what was sent before stands). Blocking mode may wait for credits
 * as fm_begin_message() does and may fail with VMMC_ERR_PEER_DEAD; after any
 * error other than OVERFLOW the stream is failed: fm_end_message() closes it
 * and returns the error, and the receiver sees a shorter message.
 */
VMMC_API int fm_send_piece(fm_stream_t *s, const void *buf, size_t n);

/**
 * @brief Close the message and send what remains. Ending before max_length
 * bytes were sent is fine (the receiver sees the actual length).
 * Returns 0 or the stream's first error (the stream is closed either way).
 */
VMMC_API int fm_end_message(fm_stream_t *s);

/** @brief FM 1.x: a message of four 32-bit words (16 bytes) to handler
 *  @p handler at @p dest. Same rules as begin/piece/end. */
VMMC_API int fm_send_4(fm_t *fm, int dest, int handler, uint32_t i0, uint32_t i1,
                       uint32_t i2, uint32_t i3);

/** @brief FM 1.x: one contiguous buffer as a message. */
VMMC_API int fm_send(fm_t *fm, int dest, int handler, const void *buf, size_t n);
/** @} */

/* ------------------------------------------------------------------------- */
/** @name Receiving
 *  @{ */

/**
 * @brief Inside a handler: copy the next up to @p n bytes of the message
 * into @p buf (scatter: piece sizes need not match the sender's).
 * Suspends the handler while bytes of the message are still to come.
 * Returns the number of bytes copied: @p n, or fewer exactly when the
 * message ended (a short count, not an error; later calls return 0).
 * Negative errors: VMMC_ERR_INVALID (@p s is not the stream of the handler
 * that is running), VMMC_ERR_PEER_DEAD (the sender died mid-message; the
 * bytes copied before are in @p buf), VMMC_ERR_PROTOCOL (malformed packet).
 */
VMMC_API ssize_t fm_receive(void *buf, fm_stream_t *s, size_t n);

/**
 * @brief Process received packets: start handlers for new messages, resume
 * suspended ones whose data arrived, discard unread data. Serves the
 * senders round robin, one packet each per round, and stops once about
 * @p max_bytes of packet payload were processed: the bound is soft, rounded
 * up to whole packets (at least one packet is processed when one is there;
 * 0 means one packet). Packets left in the rings hold their credits, so a
 * receiver that extracts slowly slows its senders down and loses nothing.
 * Never blocks. Returns the number of packets processed (>= 0), or
 * VMMC_ERR_INVALID (called from a handler), VMMC_ERR_NOMEM (no stack for a
 * handler that must be suspended), VMMC_ERR_PEER_DEAD (checked now and then
 * when nothing arrives: a rank died and nothing of its is left).
 */
VMMC_API int fm_extract(fm_t *fm, size_t max_bytes);

/**
 * @brief fm_extract(), waiting up to @p timeout_ms (-1: forever) for
 * something to process. Spins then sleeps in vmmc_wait(), so an idle
 * receiver uses no CPU. Returns as fm_extract() (0 on timeout), and
 * VMMC_ERR_PEER_DEAD when nothing can be processed and a rank of the job has
 * died (a handler suspended in a message from that rank is resumed first,
 * its fm_receive() failing with VMMC_ERR_PEER_DEAD).
 */
VMMC_API int fm_extract_wait(fm_t *fm, size_t max_bytes, int timeout_ms);
/** @} */

/**
 * @brief Iterate over FM's counters (messages, packets, bytes, credit waits,
 * suspended handlers, unknown handler ids, ...): 0 and the name/value for
 * index @p i, or VMMC_ERR_NOT_FOUND past the end.
 */
VMMC_API int fm_counter_get(const fm_t *fm, int i, const char **name, uint64_t *value);

/** @brief The value of the counter called @p name, or 0 if there is none. */
VMMC_API uint64_t fm_counter(const fm_t *fm, const char *name);

#ifdef __cplusplus
}
#endif
#endif /* VMMC_FM_H */
