/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The vhost-user wire format, as QEMU's docs/interop/vhost-user.rst
 * defines it ("Message types", "Protocol features"): what every message
 * of either side looks like, shared by vhost-blk-bridge (a back-end) and
 * vhost-blk-bench (a front-end).  Reading and writing messages is vu_io.h.
 *
 * A message is a 12-byte header, then header.size bytes of payload, and
 * any file descriptors ride along as SCM_RIGHTS.  The header and the
 * payload are sent and received as two pieces, so no structure here needs
 * to be packed: each has the protocol's layout by natural alignment, which
 * the _Static_asserts at the end pin down.  Integers are the host's byte
 * order (the protocol is local to one machine).
 */
#ifndef VU_VHOST_USER_WIRE_H
#define VU_VHOST_USER_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <linux/vhost_types.h>

/* Front-end requests ("Front-end message types"), VHOST_USER_<name>. */
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

/*
 * Back-end requests ("Back-end message types"), on the channel of
 * SET_BACKEND_REQ_FD: VHOST_USER_BACKEND_<name>.
 */
enum vu_backend_request {
	VU_BACKEND_IOTLB_MSG = 1,
	VU_BACKEND_CONFIG_CHANGE_MSG = 2,
	VU_BACKEND_VRING_HOST_NOTIFIER_MSG = 3,
};

/* The header ("Header"): size is the payload's, after the header. */
struct vu_hdr {
	uint32_t request;
	uint32_t flags;
	uint32_t size;
};

/* Header flags: bits 0-1 the version, bit 2 reply, bit 3 need_reply. */
#define VU_VERSION		0x1
#define VU_VERSION_MASK		0x3
#define VU_REPLY		(1u << 2)
#define VU_NEED_REPLY		(1u << 3)
/* Every reply carries exactly this. */
#define VU_REPLY_FLAGS		(VU_VERSION | VU_REPLY)

/* Virtio feature bit 30, VHOST_USER_F_PROTOCOL_FEATURES. */
#define VU_F_PROTOCOL_FEATURES	30

/* Protocol feature bits ("Protocol features"), VHOST_USER_PROTOCOL_F_*. */
#define VU_PROTOCOL_F_MQ			0
#define VU_PROTOCOL_F_LOG_SHMFD			1
#define VU_PROTOCOL_F_RARP			2
#define VU_PROTOCOL_F_REPLY_ACK			3
#define VU_PROTOCOL_F_NET_MTU			4
#define VU_PROTOCOL_F_BACKEND_REQ		5
#define VU_PROTOCOL_F_CROSS_ENDIAN		6
#define VU_PROTOCOL_F_CRYPTO_SESSION		7
#define VU_PROTOCOL_F_PAGEFAULT			8
#define VU_PROTOCOL_F_CONFIG			9
#define VU_PROTOCOL_F_BACKEND_SEND_FD		10
#define VU_PROTOCOL_F_HOST_NOTIFIER		11
#define VU_PROTOCOL_F_INFLIGHT_SHMFD		12
#define VU_PROTOCOL_F_RESET_DEVICE		13
#define VU_PROTOCOL_F_INBAND_NOTIFICATIONS	14
#define VU_PROTOCOL_F_CONFIGURE_MEM_SLOTS	15
#define VU_PROTOCOL_F_STATUS			16

/*
 * SET_VRING_KICK / CALL / ERR: the u64 payload is the ring index (bits
 * 0-7) and the "invalid FD" flag (bit 8): no descriptor comes with it.
 */
#define VU_VRING_IDX_MASK	0xffULL
#define VU_VRING_NOFD		(1ULL << 8)

/* Regions of a SET_MEM_TABLE (QEMU's VHOST_MEMORY_BASELINE_NREGIONS). */
#define VU_MAX_REGIONS		8
/* File descriptors one message may carry: SET_MEM_TABLE's, the most. */
#define VU_MAX_FDS		VU_MAX_REGIONS
/* The largest config space (QEMU's VHOST_USER_MAX_CONFIG_SIZE). */
#define VU_MAX_CONFIG_SIZE	256

/* "Memory region description", VhostUserMemoryRegion. */
struct vu_mem_region {
	uint64_t guest_phys_addr;
	uint64_t memory_size;
	uint64_t userspace_addr;	/* in the front-end's address space */
	uint64_t mmap_offset;		/* into the region's fd */
};

/*
 * "Multiple Memory regions description", VhostUserMemory: SET_MEM_TABLE,
 * nregions of them (the payload ends after the last), an fd each.
 */
struct vu_memory {
	uint32_t nregions;
	uint32_t padding;
	struct vu_mem_region regions[VU_MAX_REGIONS];
};

/*
 * "Single memory region description", VhostUserMemRegMsg: ADD_MEM_REG
 * (with its fd) and REM_MEM_REG.
 */
struct vu_mem_reg {
	uint64_t padding;
	struct vu_mem_region region;
};

/*
 * "Log description", VhostUserLog: SET_LOG_BASE with LOG_SHMFD, the dirty
 * log in the message's fd.
 */
struct vu_log {
	uint64_t mmap_size;
	uint64_t mmap_offset;
};

/*
 * "Virtio device config space", VhostUserConfig: GET_CONFIG and
 * SET_CONFIG, size bytes of region (the payload ends after them).
 */
struct vu_config_space {
	uint32_t offset;
	uint32_t size;
	uint32_t flags;			/* SET_CONFIG: VU_CONFIG_* */
	uint8_t region[VU_MAX_CONFIG_SIZE];
};

#define VU_CONFIG_HDR_SIZE	offsetof(struct vu_config_space, region)

/* SET_CONFIG flags: VHOST_SET_CONFIG_TYPE_FRONTEND / _MIGRATION. */
#define VU_CONFIG_FRONTEND	0
#define VU_CONFIG_MIGRATION	1

/*
 * Every payload this code sends or accepts.  "A single 64-bit integer",
 * "A vring state description" and "A vring address description" are the
 * kernel's struct vhost_vring_state and vhost_vring_addr, to the byte.
 */
union vu_payload {
	uint64_t u64;
	struct vhost_vring_state state;
	struct vhost_vring_addr addr;
	struct vu_memory memory;
	struct vu_mem_reg mem_reg;
	struct vu_log log;
	struct vu_config_space config;
};

/* The largest payload accepted. */
#define VU_MAX_PAYLOAD		sizeof(union vu_payload)

_Static_assert(sizeof(struct vu_hdr) == 12, "vhost-user header");
_Static_assert(sizeof(struct vhost_vring_state) == 8, "vring state");
_Static_assert(sizeof(struct vhost_vring_addr) == 40, "vring address");
_Static_assert(sizeof(struct vu_mem_region) == 32, "memory region");
_Static_assert(offsetof(struct vu_memory, regions) == 8, "memory table");
_Static_assert(sizeof(struct vu_mem_reg) == 40, "single memory region");
_Static_assert(sizeof(struct vu_log) == 16, "log description");
_Static_assert(VU_CONFIG_HDR_SIZE == 12, "config space header");

#endif /* VU_VHOST_USER_WIRE_H */
