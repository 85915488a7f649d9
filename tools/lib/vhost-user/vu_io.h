/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost-user messages (vhost_user_wire.h) in and out of a unix stream
 * socket, with their file descriptors (SCM_RIGHTS): the one framing of
 * vhost-blk-bridge, its tests and vhost-blk-bench.
 */
#ifndef VU_IO_H
#define VU_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "vhost_user_wire.h"

/* One message as received. */
struct vu_msg {
	struct vu_hdr hdr;
	union vu_payload payload;
	int fds[VU_MAX_FDS];
	unsigned int nfds;
};

/* "SET_VRING_KICK", or "request 99" in a buffer of the calling thread. */
const char *vu_request_name(uint32_t request);

/* Whether @request is one of enum vu_request, named. */
bool vu_request_known(uint32_t request);

/* What vu_recv_msg() accepts: a request (no reply flag) or a reply. */
enum vu_recv_kind {
	VU_RECV_REQUEST,
	VU_RECV_REPLY,
};

/* vu_recv_msg()'s wait_ms: block until the first byte comes. */
#define VU_WAIT_FOREVER		(-1)

/*
 * Read one message: the header (and any file descriptors, at most
 * VU_MAX_FDS), checked (version 1, the reply flag as @kind says, a payload
 * of at most VU_MAX_PAYLOAD), then its payload.  The first byte is waited
 * for @wait_ms, or without a limit (VU_WAIT_FOREVER: the caller saw the
 * socket readable); once it has arrived the whole message must follow
 * within @timeout_ms, however the sender spreads its bytes.  1: a message;
 * 0: the peer closed the connection between messages; -1: a malformed
 * message, a timeout or a socket error, described in @err.  Descriptors
 * received are close-on-exec, in m->fds; on -1 none is left open.
 */
int vu_recv_msg(int sock, struct vu_msg *m, enum vu_recv_kind kind,
		int wait_ms, int timeout_ms, char *err, size_t errlen);

/* Close the descriptors that came with @m (those not set to -1). */
void vu_msg_close_fds(struct vu_msg *m);

/*
 * Send one message: @hdr, then hdr->size bytes of @payload, with @nfds
 * descriptors from @fds attached to its first byte.  Interrupted and
 * partial writes are resumed.  More than VU_MAX_FDS descriptors (up to the
 * kernel's 253) go out too: refusing them is the receiver's part, which a
 * test wants to see.  0 or -errno.
 */
int vu_send_msg(int sock, const struct vu_hdr *hdr, const void *payload,
		const int *fds, unsigned int nfds);

/*
 * vu_send_msg() with a deadline: a peer that does not read (its socket
 * buffer full) gets @timeout_ms for the whole message, then -ETIMEDOUT
 * (the connection is then unusable: part of the message may have gone).
 * @timeout_ms < 0: no limit.
 */
int vu_send_msg_within(int sock, const struct vu_hdr *hdr,
		       const void *payload, const int *fds, unsigned int nfds,
		       int timeout_ms);

/*
 * vu_send_msg() for any bytes: all of @iov (which it uses up), @nfds
 * descriptors with the first byte.  Part of a message, for a test of the
 * receiving side.  0 or -errno.
 */
int vu_sendv(int sock, struct iovec *iov, int iovcnt, const int *fds,
	     unsigned int nfds);
/* vu_sendv() with vu_send_msg_within()'s deadline. */
int vu_sendv_within(int sock, struct iovec *iov, int iovcnt, const int *fds,
		    unsigned int nfds, int timeout_ms);

#endif /* VU_IO_H */
