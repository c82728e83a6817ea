/* The least an SRTP SFU does for one publisher and N subscribers, in C: `ot-bench router --floor`'s baseline. */
#ifndef OT_BENCH_FLOOR_H
#define OT_BENCH_FLOOR_H
#include <stddef.h>
#include <stdint.h>

/** One subscriber of the floor forwarder: where its copies go, how they are rewritten and keyed. */
typedef struct {
    uint32_t ipv4;        /* host byte order */
    uint16_t port;
    uint32_t ssrc;        /* written into every copy */
    uint16_t seq_offset;  /* added to the publisher's sequence number */
    uint8_t payload_type; /* written into every copy (the marker bit is kept) */
    uint32_t roc;         /* the subscriber's SRTP rollover counter for `ssrc` when the floor starts */
    const unsigned char *key; /* master key then salt: what the subscriber decrypts with */
    size_t key_len;
} otbench_floor_subscriber;

/** What the floor's thread has done so far. */
typedef struct {
    uint64_t wakeups;          /* polls that returned */
    uint64_t received;         /* datagrams received */
    uint64_t unprotect_failed; /* publisher RTP that srtp_unprotect refused */
    uint64_t forwarded;        /* copies protected and handed to otshim_send_batch */
    uint64_t sent;             /* of them, datagrams the kernel took */
} otbench_floor_counters;

typedef struct otbench_floor otbench_floor;

/** Starts a thread named `thread_name` that serves UDP socket `fd` (not closed by the floor) until
    `otbench_floor_stop`: `poll` on it and a stop eventfd, `recvmmsg` (otshim_recv_batch) in batches of up to 64; each
    RTP packet of `publisher_ssrc` is `srtp_unprotect`ed with `publisher_key` (master key then salt; the publisher's
    rollover counter is `publisher_roc`), then per subscriber copied into a send slot, its SSRC, sequence number and
    payload type rewritten, `srtp_protect`ed with that subscriber's key, and the slots go out with `sendmmsg` and UDP
    GSO (otshim_send_batch) when 64 are full and after each receive batch. Everything else (STUN, DTLS, RTCP) is
    dropped: no RTCP, no NACK history, no header-extension rewriting. `profile` is a libsrtp `srtp_profile_t`
    (the DTLS-SRTP profile id); libsrtp must be initialised (its ciphers are whatever the process installed).
    Returns NULL on a bad argument (`*error` says which: -1 arguments, -2 key length, -3 libsrtp, -4 memory or thread). */
otbench_floor *otbench_floor_start(int fd, unsigned profile, uint32_t publisher_ssrc, uint32_t publisher_roc,
                                   const unsigned char *publisher_key, size_t publisher_key_len,
                                   const otbench_floor_subscriber *subscribers, unsigned count,
                                   const char *thread_name, int *error);

/** The counters so far (any thread). */
void otbench_floor_read(const otbench_floor *floor, otbench_floor_counters *out);

/** Stops the thread, waits for it and frees the floor. NULL is ignored. */
void otbench_floor_stop(otbench_floor *floor);
#endif
