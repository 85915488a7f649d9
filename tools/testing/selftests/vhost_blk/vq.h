/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Split virtqueue, driver side, living in a struct guest_mem.
 *
 * The rings and indirect tables are allocated from guest memory; the
 * descriptors carry guest-physical addresses.  Ring indices are published
 * with release stores and read with acquire loads; the notification
 * decisions (kick / used_event) use full fences like virtio_ring.c.
 */
#ifndef VBLK_VQ_H
#define VBLK_VQ_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/virtio_ring.h>

#include "guest_mem.h"

#define VQ_DEFAULT_NUM		128
#define VQ_DEFAULT_INDIRECT	512	/* entries per indirect table */
#define VQ_HANG_TIMEOUT_MS	10000	/* VHOST_BLK_TEST_HANG_MS overrides */

struct vq_config {
	unsigned int index;		/* virtqueue number on the device */
	unsigned int num;		/* ring size, power of two; 0: 128 */
	unsigned int max_indirect;	/* indirect table entries; 0: 512 */
	bool event_idx;			/* VIRTIO_RING_F_EVENT_IDX negotiated */
	uint16_t base;			/* initial avail/used index */
};

/* One buffer of a chain. */
struct vq_buf {
	uint64_t addr;			/* guest-physical */
	uint32_t len;
	bool write;			/* device-writable */
};

/* One harvested used-ring element. */
struct vq_used {
	uint32_t id;
	uint32_t len;
	void *token;			/* as passed when adding; NULL if bad */
	bool bad;			/* id is not an outstanding head */
};

/*
 * How the driver asks for completion notifications.
 * VQ_CB_AUTO: keep them enabled (used_event follows the harvested index,
 * VRING_AVAIL_F_NO_INTERRUPT clear).  VQ_CB_MANUAL: never touch used_event
 * or avail->flags; the caller sets them (vq_set_used_event/no_interrupt).
 */
enum vq_cb_mode {
	VQ_CB_AUTO,
	VQ_CB_MANUAL,
};

struct vq_slot {
	void *token;
	uint16_t ndesc;			/* descriptors owned in the ring */
	bool busy;
};

struct vq {
	struct guest_mem *gm;
	unsigned int index;
	unsigned int num;
	bool event_idx;
	enum vq_cb_mode cb_mode;

	struct vring_desc *desc;
	struct vring_avail *avail;	/* ring[num] is used_event */
	struct vring_used *used;	/* ring[num] holds avail_event */
	struct vring_desc *indirect;	/* num tables of max_indirect */
	unsigned int max_indirect;

	int kick_fd;			/* eventfd, driver -> device */
	int call_fd;			/* eventfd, device -> driver */

	/* Driver-private state (host heap, never visible to the device). */
	struct vq_slot *slot;		/* by head */
	uint16_t *link;			/* free list / chain links */
	uint16_t free_head;
	unsigned int num_free;
	unsigned int inflight;		/* chains added and not harvested */
	uint16_t avail_idx;		/* shadow of avail->idx */
	uint16_t kicked_idx;		/* avail_idx at the last kick check */
	uint16_t last_used_idx;

	/* Counters. */
	uint64_t kicks;			/* eventfd writes */
	uint64_t kicks_suppressed;	/* vq_kick() that did not need to */
	uint64_t notifications;		/* sum of call eventfd counters */
	uint64_t call_reads;		/* call eventfd reads returning > 0 */
	uint64_t completions;		/* used elements harvested */

	/*
	 * Called when a wait for a completion gives up, to say what the
	 * device saw (vblk_dev.c sets it to print the queue's counters).
	 */
	void (*hang_report)(const struct vq *vq, void *arg);
	void *hang_arg;
};

enum {
	VQ_ADD_INDIRECT = 1 << 0,	/* chain in an indirect table */
};

int vq_init(struct vq *vq, struct guest_mem *gm, const struct vq_config *cfg);
void vq_destroy(struct vq *vq);

/* User-space addresses of the rings, as VHOST_SET_VRING_ADDR wants. */
static inline uint64_t vq_uaddr(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

/*
 * Add a chain of @n buffers (device-readable ones first) and publish it.
 * Returns the head (>= 0), -ENOSPC when the ring or the indirect table is
 * too small, -EINVAL for an empty chain.  Not kicked.
 */
int vq_add_chain(struct vq *vq, const struct vq_buf *bufs, unsigned int n,
		 unsigned int flags, void *token);

/*
 * Raw variant for fuzzing: @n descriptors are copied verbatim into free
 * ring slots, except that a "next" below @n is taken as an index into
 * @descs and rewritten to the real slot (anything else is kept as is).
 * The slots are reclaimed when the head comes back, whatever the flags.
 */
int vq_add_raw(struct vq *vq, const struct vring_desc *descs, unsigned int n,
	       void *token);

/* Put any head value into the avail ring and publish it (fuzzing). */
void vq_publish(struct vq *vq, uint16_t head);

/*
 * Kick if the device asked for it (avail_event with EVENT_IDX, else
 * !VRING_USED_F_NO_NOTIFY).  Returns 1 kicked, 0 suppressed, -errno.
 */
int vq_kick(struct vq *vq);
/* Kick unconditionally; returns 1 or -errno. */
int vq_kick_force(struct vq *vq);

/* Take one used element: 1 taken, 0 none. */
int vq_get_used(struct vq *vq, struct vq_used *out);

/* Number of used elements the device has published and we have not taken. */
uint16_t vq_used_pending(const struct vq *vq);

/*
 * Wait (poll) for the call eventfd, then read and count it.  0 on a
 * notification, -ETIMEDOUT after @timeout_ms, -errno.
 */
int vq_wait_call(struct vq *vq, int timeout_ms);

/*
 * Take one used element, waiting up to @timeout_ms (negative: the hang
 * timeout) for it.  0 with *out filled, -ETIMEDOUT (reported), -errno.
 * When the hang timeout runs out, the driver's and (hang_report) the
 * device's view of the queue are logged, and the queue is kicked once
 * more and looked at a second later: a lost kick and a lost completion
 * tell themselves apart.
 */
int vq_wait_used(struct vq *vq, struct vq_used *out, int timeout_ms);

/*
 * The hang guard: VHOST_BLK_TEST_HANG_MS from the environment (ms, for a
 * slow kernel on a loaded host), else VQ_HANG_TIMEOUT_MS.
 */
int vq_hang_timeout_ms(void);

/* Read the call eventfd without blocking; returns the counter (0 if none). */
uint64_t vq_drain_calls(struct vq *vq);

void vq_set_cb_mode(struct vq *vq, enum vq_cb_mode mode);
void vq_set_used_event(struct vq *vq, uint16_t idx);
void vq_set_no_interrupt(struct vq *vq, bool on);

#endif /* VBLK_VQ_H */
