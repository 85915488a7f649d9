/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost-blk-bridge: the vhost-user protocol (QEMU's
 * docs/interop/vhost-user.rst), back-end side, for a virtio-blk device
 * whose data plane is /dev/vhost-blk.
 */
#ifndef VBB_VHOST_USER_H
#define VBB_VHOST_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/vhost.h>

#include "kdev.h"

/* ---------------------------------------------------------- wire format */

enum vu_request {
	VU_GET_FEATURES = 1,
	VU_SET_FEATURES = 2,
	VU_SET_OWNER = 3,
	VU_RESET_OWNER = 4,
	VU_SET_MEM_TABLE = 5,
	VU_SET_LOG_BASE = 6,
	VU_SET_LOG_FD = 7,
	VU_SET_VRING_NUM = 8,
	VU_SET_VRING_ADDR = 9,
	VU_SET_VRING_BASE = 10,
	VU_GET_VRING_BASE = 11,
	VU_SET_VRING_KICK = 12,
	VU_SET_VRING_CALL = 13,
	VU_SET_VRING_ERR = 14,
	VU_GET_PROTOCOL_FEATURES = 15,
	VU_SET_PROTOCOL_FEATURES = 16,
	VU_GET_QUEUE_NUM = 17,
	VU_SET_VRING_ENABLE = 18,
	VU_SEND_RARP = 19,
	VU_NET_SET_MTU = 20,
	VU_SET_BACKEND_REQ_FD = 21,
	VU_IOTLB_MSG = 22,
	VU_SET_VRING_ENDIAN = 23,
	VU_GET_CONFIG = 24,
	VU_SET_CONFIG = 25,
	VU_CREATE_CRYPTO_SESSION = 26,
	VU_CLOSE_CRYPTO_SESSION = 27,
	VU_POSTCOPY_ADVISE = 28,
	VU_POSTCOPY_LISTEN = 29,
	VU_POSTCOPY_END = 30,
	VU_GET_INFLIGHT_FD = 31,
	VU_SET_INFLIGHT_FD = 32,
	VU_GPU_SET_SOCKET = 33,
	VU_RESET_DEVICE = 34,
	VU_VRING_KICK = 35,
	VU_GET_MAX_MEM_SLOTS = 36,
	VU_ADD_MEM_REG = 37,
	VU_REM_MEM_REG = 38,
	VU_SET_STATUS = 39,
	VU_GET_STATUS = 40,
	VU_REQUEST_MAX
};

/* Header flags. */
#define VU_VERSION		0x1
#define VU_VERSION_MASK		0x3
#define VU_REPLY		(1u << 2)
#define VU_NEED_REPLY		(1u << 3)
/* Every reply carries exactly this. */
#define VU_REPLY_FLAGS		(VU_VERSION | VU_REPLY)

/* Virtio feature bit 30: the backend speaks protocol features. */
#define VU_F_PROTOCOL_FEATURES	30

/* Protocol feature bits. */
#define VU_PROTOCOL_F_MQ		0
#define VU_PROTOCOL_F_LOG_SHMFD		1
#define VU_PROTOCOL_F_REPLY_ACK		3
#define VU_PROTOCOL_F_BACKEND_REQ	5
#define VU_PROTOCOL_F_CONFIG		9
#define VU_PROTOCOL_F_CONFIGURE_MEM_SLOTS	15
/* What the bridge implements, and offers. */
#define VU_PROTOCOL_FEATURES	((1ULL << VU_PROTOCOL_F_MQ) |		\
				 (1ULL << VU_PROTOCOL_F_LOG_SHMFD) |	\
				 (1ULL << VU_PROTOCOL_F_REPLY_ACK) |	\
				 (1ULL << VU_PROTOCOL_F_BACKEND_REQ) |	\
				 (1ULL << VU_PROTOCOL_F_CONFIG) |	\
				 (1ULL << VU_PROTOCOL_F_CONFIGURE_MEM_SLOTS))

/* Back-end to front-end requests, on the SET_BACKEND_REQ_FD channel. */
#define VU_BACKEND_CONFIG_CHANGE_MSG	2

/* SET_VRING_KICK / CALL / ERR payload. */
#define VU_VRING_IDX_MASK	0xffULL
#define VU_VRING_NOFD		(1ULL << 8)

/* Regions in SET_MEM_TABLE (VHOST_MEMORY_BASELINE_NREGIONS in QEMU). */
#define VU_MAX_REGIONS		8
/*
 * Regions added one at a time (CONFIGURE_MEM_SLOTS): the vhost module's
 * max_mem_regions default.  GET_MAX_MEM_SLOTS says the module's own, if
 * lower.
 */
#define VU_MAX_MEM_SLOTS	64
/* File descriptors one message may carry. */
#define VU_MAX_FDS		VU_MAX_REGIONS
/* Largest config space a GET_CONFIG / SET_CONFIG may address. */
#define VU_MAX_CONFIG_SIZE	256

/* SET_CONFIG flags. */
#define VU_CONFIG_FRONTEND	0
#define VU_CONFIG_MIGRATION	1

struct vu_hdr {
	uint32_t request;
	uint32_t flags;
	uint32_t size;			/* of the payload */
};

struct vu_mem_region {
	uint64_t guest_phys_addr;
	uint64_t memory_size;
	uint64_t userspace_addr;	/* in the frontend's address space */
	uint64_t mmap_offset;		/* into the region's fd */
};

struct vu_memory {
	uint32_t nregions;
	uint32_t padding;
	struct vu_mem_region regions[VU_MAX_REGIONS];
};

/* ADD_MEM_REG / REM_MEM_REG: one region. */
struct vu_mem_reg {
	uint64_t padding;
	struct vu_mem_region region;
};

/* SET_LOG_BASE with LOG_SHMFD: the dirty log, in the message's fd. */
struct vu_log {
	uint64_t mmap_size;
	uint64_t mmap_offset;
};

struct vu_config_space {
	uint32_t offset;
	uint32_t size;
	uint32_t flags;
	uint8_t region[VU_MAX_CONFIG_SIZE];
};

#define VU_CONFIG_HDR_SIZE	offsetof(struct vu_config_space, region)

union vu_payload {
	uint64_t u64;
	struct vhost_vring_state state;
	struct vhost_vring_addr addr;
	struct vu_memory memory;
	struct vu_mem_reg mem_reg;
	struct vu_log log;
	struct vu_config_space config;
};

/* The largest payload the bridge accepts. */
#define VU_MAX_PAYLOAD		sizeof(union vu_payload)

struct vu_msg {
	struct vu_hdr hdr;
	union vu_payload payload;
	int fds[VU_MAX_FDS];
	unsigned int nfds;
};

/* "SET_VRING_KICK", or "request 99" in a static buffer. */
const char *vu_request_name(uint32_t request);

/*
 * Read one message: the header (and any file descriptors, SCM_RIGHTS, at
 * most VU_MAX_FDS), then its payload.  Once its first byte has arrived the
 * rest must follow within timeout_ms.  1: a message; 0: the peer closed
 * the connection between messages; -1: a malformed message or a socket
 * error, described in err.  Descriptors received are in m->fds; on -1
 * none is left open.
 */
int vu_recv_msg(int sock, struct vu_msg *m, int timeout_ms, char *err,
		size_t errlen);

/* Send one message (no fds); 0 or -errno. */
int vu_send_msg(int sock, const struct vu_hdr *hdr, const void *payload);

/* ------------------------------------------------------------- session */

/* Daemon-wide settings each connection is served with. */
struct vu_params {
	struct kdev_params kdev;
	int msg_timeout_ms;		/* a whole message, from its first byte */
	/* GET_MAX_MEM_SLOTS: the vhost module's max_mem_regions (0: ours). */
	unsigned int max_mem_slots;
};

struct vu_region {
	struct vu_mem_region r;		/* as the frontend sent it */
	void *mmap_addr;		/* our mapping of the fd ... */
	size_t mmap_len;
	uint8_t *host;			/* ... where guest_phys_addr is */
};

struct vu_vring {
	uint32_t num;
	bool num_set;
	bool addr_set;			/* SET_VRING_ADDR since last stop */
	struct vhost_vring_addr addr;	/* frontend addresses */
	bool kick_set;
	bool call_set;
	bool enabled;			/* SET_VRING_ENABLE */
};

struct vu_session {
	const struct vu_params *p;
	int sock;
	struct kdev kdev;
	bool owner;			/* SET_OWNER seen */
	uint64_t features;		/* offered */
	uint64_t acked_features;	/* SET_FEATURES */
	bool features_set;
	uint64_t protocol_features;	/* SET_PROTOCOL_FEATURES */
	struct vu_region regions[VU_MAX_MEM_SLOTS];
	unsigned int nregions;
	bool mem_set;
	struct vu_vring vrings[KDEV_MAX_QUEUES];
	/* The back-end request channel (SET_BACKEND_REQ_FD), or -1. */
	int backend_fd;
	/* The dirty log of a migration (SET_LOG_BASE), mapped here. */
	void *log_map;
	size_t log_map_len;
	unsigned int msgs;		/* handled, for messages */
};

/*
 * Start serving a new frontend on sock: open /dev/vhost-blk for it.
 * 0 or -errno (printed); the socket is the caller's either way.
 */
int vu_session_open(struct vu_session *s, const struct vu_params *p,
		    int sock);

/*
 * The disk's size changed (SIGHUP): tell the frontend on the back-end
 * channel (VHOST_USER_BACKEND_CONFIG_CHANGE_MSG), which then reads the
 * config space again and interrupts the guest.  0, or -ENOTCONN when the
 * frontend set up no channel (logged).
 */
int vu_session_config_changed(struct vu_session *s);

/*
 * Read and handle one message.  0: go on; 1: the frontend closed the
 * connection; -1: the connection must be closed (the reason is printed).
 */
int vu_session_handle(struct vu_session *s);

/*
 * Forget the frontend: close /dev/vhost-blk (the module finishes every
 * request in flight), unmap its memory.  Does not close the socket.
 */
void vu_session_close(struct vu_session *s);

/* Address translation, exposed for the tests. */
void *vu_uva_to_host(const struct vu_session *s, uint64_t uva, uint64_t len);

#endif
