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
#include <sys/types.h>
#include <linux/vhost.h>

#include "kdev.h"
#include "vu_io.h"

/*
 * The wire format (enum vu_request, struct vu_hdr, the payloads, the
 * protocol feature bits) and the message I/O are shared with
 * vhost-blk-bench: tools/lib/vhost-user/.
 */

/* The protocol features the bridge implements, and offers. */
#define VU_PROTOCOL_FEATURES	((1ULL << VU_PROTOCOL_F_MQ) |		\
				 (1ULL << VU_PROTOCOL_F_LOG_SHMFD) |	\
				 (1ULL << VU_PROTOCOL_F_REPLY_ACK) |	\
				 (1ULL << VU_PROTOCOL_F_BACKEND_REQ) |	\
				 (1ULL << VU_PROTOCOL_F_CONFIG) |	\
				 (1ULL << VU_PROTOCOL_F_CONFIGURE_MEM_SLOTS))

/*
 * Regions added one at a time (CONFIGURE_MEM_SLOTS): the vhost module's
 * max_mem_regions default.  GET_MAX_MEM_SLOTS says the module's own, if
 * lower.
 */
#define VU_MAX_MEM_SLOTS	64

/* ------------------------------------------------------------- session */

/* Daemon-wide settings each connection is served with. */
struct vu_params {
	struct kdev_params kdev;
	int msg_timeout_ms;		/* a whole message, from its first byte */
	/* GET_MAX_MEM_SLOTS: the vhost module's max_mem_regions (0: ours). */
	unsigned int max_mem_slots;
	/* Kept across connections (NULL: nothing is). */
	struct vu_kept *kept;
};

/*
 * The guest's last write cache switch (@wce: 1 writeback, 0 writethrough,
 * -1 none yet) and the frontend process that made it (@pid, SO_PEERCRED):
 * when that process reconnects, the new device starts as its guest left
 * it.  Another process, a new VM, starts from the module's default.
 */
struct vu_kept {
	int wce;
	pid_t pid;
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
	/*
	 * Set, but not inside the memory table now (REM_MEM_REG took its
	 * region): cleared in the kernel until the memory comes back.
	 */
	bool unmapped;
	struct vhost_vring_addr addr;	/* frontend addresses */
	bool kick_set;
	bool call_set;
	bool enabled;			/* SET_VRING_ENABLE */
};

struct vu_session {
	const struct vu_params *p;
	int sock;
	pid_t peer_pid;			/* the frontend (SO_PEERCRED), or 0 */
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
	uint64_t log_size;		/* bytes, as the frontend sent it */
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
