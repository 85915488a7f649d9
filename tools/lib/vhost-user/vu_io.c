// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-user message framing.  See vu_io.h.
 *
 * A message is read in two pieces, its header and then the payload the
 * header announces, by as many recvmsg() calls as the sender's writes
 * take; file descriptors may come with any of them and are gathered into
 * the message.  It is written with sendmsg(), its descriptors on the
 * first call.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "vu_io.h"

/* The most descriptors one sendmsg() may pass (include/net/scm.h). */
#define VU_SCM_MAX_FD		253

static const char *const vu_names[VU_REQUEST_MAX] = {
	[VU_GET_FEATURES] = "GET_FEATURES",
	[VU_SET_FEATURES] = "SET_FEATURES",
	[VU_SET_OWNER] = "SET_OWNER",
	[VU_RESET_OWNER] = "RESET_OWNER",
	[VU_SET_MEM_TABLE] = "SET_MEM_TABLE",
	[VU_SET_LOG_BASE] = "SET_LOG_BASE",
	[VU_SET_LOG_FD] = "SET_LOG_FD",
	[VU_SET_VRING_NUM] = "SET_VRING_NUM",
	[VU_SET_VRING_ADDR] = "SET_VRING_ADDR",
	[VU_SET_VRING_BASE] = "SET_VRING_BASE",
	[VU_GET_VRING_BASE] = "GET_VRING_BASE",
	[VU_SET_VRING_KICK] = "SET_VRING_KICK",
	[VU_SET_VRING_CALL] = "SET_VRING_CALL",
	[VU_SET_VRING_ERR] = "SET_VRING_ERR",
	[VU_GET_PROTOCOL_FEATURES] = "GET_PROTOCOL_FEATURES",
	[VU_SET_PROTOCOL_FEATURES] = "SET_PROTOCOL_FEATURES",
	[VU_GET_QUEUE_NUM] = "GET_QUEUE_NUM",
	[VU_SET_VRING_ENABLE] = "SET_VRING_ENABLE",
	[VU_SEND_RARP] = "SEND_RARP",
	[VU_NET_SET_MTU] = "NET_SET_MTU",
	[VU_SET_BACKEND_REQ_FD] = "SET_BACKEND_REQ_FD",
	[VU_IOTLB_MSG] = "IOTLB_MSG",
	[VU_SET_VRING_ENDIAN] = "SET_VRING_ENDIAN",
	[VU_GET_CONFIG] = "GET_CONFIG",
	[VU_SET_CONFIG] = "SET_CONFIG",
	[VU_CREATE_CRYPTO_SESSION] = "CREATE_CRYPTO_SESSION",
	[VU_CLOSE_CRYPTO_SESSION] = "CLOSE_CRYPTO_SESSION",
	[VU_POSTCOPY_ADVISE] = "POSTCOPY_ADVISE",
	[VU_POSTCOPY_LISTEN] = "POSTCOPY_LISTEN",
	[VU_POSTCOPY_END] = "POSTCOPY_END",
	[VU_GET_INFLIGHT_FD] = "GET_INFLIGHT_FD",
	[VU_SET_INFLIGHT_FD] = "SET_INFLIGHT_FD",
	[VU_GPU_SET_SOCKET] = "GPU_SET_SOCKET",
	[VU_RESET_DEVICE] = "RESET_DEVICE",
	[VU_VRING_KICK] = "VRING_KICK",
	[VU_GET_MAX_MEM_SLOTS] = "GET_MAX_MEM_SLOTS",
	[VU_ADD_MEM_REG] = "ADD_MEM_REG",
	[VU_REM_MEM_REG] = "REM_MEM_REG",
	[VU_SET_STATUS] = "SET_STATUS",
	[VU_GET_STATUS] = "GET_STATUS",
};

bool vu_request_known(uint32_t request)
{
	return request < VU_REQUEST_MAX && vu_names[request];
}

const char *vu_request_name(uint32_t request)
{
	static _Thread_local char buf[32];

	if (vu_request_known(request))
		return vu_names[request];
	snprintf(buf, sizeof(buf), "request %" PRIu32, request);
	return buf;
}

void vu_msg_close_fds(struct vu_msg *m)
{
	unsigned int i;

	for (i = 0; i < m->nfds; i++)
		if (m->fds[i] >= 0)
			close(m->fds[i]);
	m->nfds = 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One message being read. */
struct vu_rx {
	int sock;
	struct vu_msg *m;
	int wait_ms;			/* for its first byte ... */
	int64_t wait_until;		/* ... until then; 0: no limit */
	int timeout_ms;			/* for the whole of it ... */
	int64_t deadline;		/* ... until then; 0: no byte yet */
	char *err;
	size_t errlen;
};

/* wait_for()'s @until: no limit. */
#define VU_NEVER	INT64_MAX

/*
 * Wait until the socket has @events (POLLIN, POLLOUT), or @until
 * (CLOCK_MONOTONIC ms, or VU_NEVER) has passed: 1, 0 (the time is up) or
 * -1 (errno).
 */
static int wait_for(int sock, short events, int64_t until)
{
	for (;;) {
		struct pollfd pfd = { .fd = sock, .events = events };
		int64_t left = until - now_ms();
		int r;

		if (left <= 0)
			return 0;
		r = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		return r < 0 ? -1 : !!r;
	}
}

/*
 * Read exactly len bytes into buf, gathering SCM_RIGHTS descriptors into
 * the message.  The first read of a message waits for its first byte as
 * long as wait_until says, or blocks (the caller saw the socket readable);
 * that byte starts the message's deadline: the whole message must arrive
 * by then, however the sender spreads its bytes.  1: done; 0: EOF before
 * the first byte; -1: error in rx->err (EOF after some bytes included).
 */
static int recv_full(struct vu_rx *rx, void *buf, size_t len,
		     const char *what)
{
	struct vu_msg *m = rx->m;
	union {
		char buf[CMSG_SPACE(sizeof(int) * VU_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	size_t got = 0;
	bool too_many = false, again = false;

	while (got < len) {
		struct iovec iov = {
			.iov_base = (char *)buf + got, .iov_len = len - got,
		};
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
		};
		struct cmsghdr *c;
		ssize_t n;

		/* A non-blocking socket with nothing to read: wait. */
		if (rx->deadline || rx->wait_until || again) {
			int r = wait_for(rx->sock, POLLIN,
					 rx->deadline ? rx->deadline :
					 rx->wait_until ? rx->wait_until :
					 VU_NEVER);

			if (r < 0) {
				snprintf(rx->err, rx->errlen,
					 "poll on the socket: %s",
					 strerror(errno));
				return -1;
			}
			if (r == 0 && !rx->deadline) {
				snprintf(rx->err, rx->errlen,
					 "no message within %d ms", rx->wait_ms);
				return -1;
			}
			if (r == 0) {
				snprintf(rx->err, rx->errlen,
					 "short %s: %zu of %zu bytes when the message's %d ms were up",
					 what, got, len, rx->timeout_ms);
				return -1;
			}
		}
		n = recvmsg(rx->sock, &mh, MSG_CMSG_CLOEXEC);
		again = n < 0 && errno == EAGAIN;
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0) {
			snprintf(rx->err, rx->errlen, "reading the socket: %s",
				 strerror(errno));
			return -1;
		}
		for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			size_t i, nfds;
			int *fds = (int *)CMSG_DATA(c);

			if (c->cmsg_level != SOL_SOCKET ||
			    c->cmsg_type != SCM_RIGHTS)
				continue;
			nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (i = 0; i < nfds; i++) {
				int fd;

				memcpy(&fd, &fds[i], sizeof(fd));
				if (m->nfds < VU_MAX_FDS) {
					m->fds[m->nfds++] = fd;
				} else {
					close(fd);
					too_many = true;
				}
			}
		}
		if (mh.msg_flags & MSG_CTRUNC)
			too_many = true;
		if (too_many) {
			snprintf(rx->err, rx->errlen,
				 "more than %d file descriptors with one message",
				 VU_MAX_FDS);
			return -1;
		}
		if (n == 0) {
			if (!rx->deadline)
				return 0;
			snprintf(rx->err, rx->errlen,
				 "short %s: connection closed after %zu of %zu bytes",
				 what, got, len);
			return -1;
		}
		if (!rx->deadline)
			rx->deadline = now_ms() + rx->timeout_ms;
		got += n;
	}
	return 1;
}

int vu_recv_msg(int sock, struct vu_msg *m, enum vu_recv_kind kind,
		int wait_ms, int timeout_ms, char *err, size_t errlen)
{
	struct vu_rx rx = {
		.sock = sock, .m = m, .wait_ms = wait_ms,
		.timeout_ms = timeout_ms, .err = err, .errlen = errlen,
	};
	const char *name;
	int ret;

	if (wait_ms >= 0)
		rx.wait_until = now_ms() + wait_ms;
	memset(&m->hdr, 0, sizeof(m->hdr));
	m->nfds = 0;
	ret = recv_full(&rx, &m->hdr, sizeof(m->hdr), "header");
	if (ret <= 0)
		goto out;

	ret = -1;
	name = vu_request_name(m->hdr.request);
	if ((m->hdr.flags & VU_VERSION_MASK) != VU_VERSION) {
		snprintf(err, errlen,
			 "%s: unsupported protocol version %u (flags 0x%x)",
			 name, m->hdr.flags & VU_VERSION_MASK, m->hdr.flags);
		goto out;
	}
	if (kind == VU_RECV_REQUEST && (m->hdr.flags & VU_REPLY)) {
		snprintf(err, errlen, "%s: a request with the reply flag (flags 0x%x)",
			 name, m->hdr.flags);
		goto out;
	}
	if (kind == VU_RECV_REPLY && !(m->hdr.flags & VU_REPLY)) {
		snprintf(err, errlen, "%s: a reply without the reply flag (flags 0x%x)",
			 name, m->hdr.flags);
		goto out;
	}
	if (m->hdr.size > VU_MAX_PAYLOAD) {
		snprintf(err, errlen,
			 "%s: payload of %u bytes, larger than any request (%zu)",
			 name, m->hdr.size, VU_MAX_PAYLOAD);
		goto out;
	}
	memset(&m->payload, 0, sizeof(m->payload));
	if (m->hdr.size)
		ret = recv_full(&rx, &m->payload, m->hdr.size, "payload");
	else
		ret = 1;
	if (ret == 0) {
		snprintf(err, errlen, "%s: connection closed before the payload",
			 name);
		ret = -1;
	}
out:
	if (ret <= 0)
		vu_msg_close_fds(m);
	return ret;
}

int vu_sendv_within(int sock, struct iovec *iov, int iovcnt, const int *fds,
		    unsigned int nfds, int timeout_ms)
{
	int64_t deadline = timeout_ms < 0 ? VU_NEVER : now_ms() + timeout_ms;
	union {
		char buf[CMSG_SPACE(sizeof(int) * VU_SCM_MAX_FD)];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = iovcnt };
	size_t left = 0;
	int i;

	if (nfds > VU_SCM_MAX_FD || iovcnt < 0)
		return -EINVAL;
	for (i = 0; i < iovcnt; i++)
		left += iov[i].iov_len;
	if (nfds) {
		struct cmsghdr *c;

		memset(ctl.buf, 0, CMSG_SPACE(sizeof(int) * nfds));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	while (left) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		int r;

		if (n < 0 && errno == EINTR)
			continue;
		/* A peer that does not read: wait for room, until the deadline. */
		if (n < 0 && errno == EAGAIN) {
			r = wait_for(sock, POLLOUT, deadline);
			if (r < 0)
				return -errno;
			if (r == 0)
				return -ETIMEDOUT;
			continue;
		}
		if (n < 0)
			return -errno;
		/* The descriptors went with the first byte. */
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
		left -= n;
		/* Skip what went out. */
		while (mh.msg_iovlen && (size_t)n >= mh.msg_iov->iov_len) {
			n -= mh.msg_iov->iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov->iov_base = (char *)mh.msg_iov->iov_base + n;
			mh.msg_iov->iov_len -= n;
		}
	}
	return 0;
}

int vu_sendv(int sock, struct iovec *iov, int iovcnt, const int *fds,
	     unsigned int nfds)
{
	return vu_sendv_within(sock, iov, iovcnt, fds, nfds, -1);
}

int vu_send_msg_within(int sock, const struct vu_hdr *hdr,
		       const void *payload, const int *fds, unsigned int nfds,
		       int timeout_ms)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)hdr, .iov_len = sizeof(*hdr) },
		{ .iov_base = (void *)payload, .iov_len = hdr->size },
	};

	return vu_sendv_within(sock, iov, hdr->size ? 2 : 1, fds, nfds,
			       timeout_ms);
}

int vu_send_msg(int sock, const struct vu_hdr *hdr, const void *payload,
		const int *fds, unsigned int nfds)
{
	return vu_send_msg_within(sock, hdr, payload, fds, nfds, -1);
}
