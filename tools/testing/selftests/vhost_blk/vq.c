// SPDX-License-Identifier: GPL-2.0
/*
 * Split virtqueue, driver side.  See vq.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "vq.h"

#define VQ_MAX_NUM	32768

static inline void vq_mb(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static inline uint16_t *vq_used_event(const struct vq *vq)
{
	return (uint16_t *)&vq->avail->ring[vq->num];
}

static inline uint16_t *vq_avail_event(const struct vq *vq)
{
	return (uint16_t *)&vq->used->ring[vq->num];
}

int vq_init(struct vq *vq, struct guest_mem *gm, const struct vq_config *cfg)
{
	unsigned int num = cfg->num ? cfg->num : VQ_DEFAULT_NUM;
	unsigned int max_indirect = cfg->max_indirect ? cfg->max_indirect :
						       VQ_DEFAULT_INDIRECT;
	unsigned int i;
	int err;

	memset(vq, 0, sizeof(*vq));
	vq->kick_fd = -1;
	vq->call_fd = -1;
	if (!num || num > VQ_MAX_NUM || (num & (num - 1))) {
		guest_log("vq %u: size %u is not a power of two <= %u",
			  cfg->index, num, VQ_MAX_NUM);
		return -EINVAL;
	}
	if (max_indirect > 65536) {
		guest_log("vq %u: indirect tables of %u entries are too large",
			  cfg->index, max_indirect);
		return -EINVAL;
	}

	vq->gm = gm;
	vq->index = cfg->index;
	vq->num = num;
	vq->event_idx = cfg->event_idx;
	vq->max_indirect = max_indirect;

	vq->desc = guest_alloc(gm, sizeof(*vq->desc) * num, 4096);
	vq->avail = guest_alloc(gm, sizeof(*vq->avail) +
				sizeof(vq->avail->ring[0]) * (num + 1), 64);
	vq->used = guest_alloc(gm, sizeof(*vq->used) +
			       sizeof(vq->used->ring[0]) * num +
			       sizeof(uint16_t), 4096);
	vq->indirect = guest_alloc(gm, sizeof(struct vring_desc) *
				   max_indirect * num, 64);
	vq->slot = calloc(num, sizeof(*vq->slot));
	vq->link = calloc(num, sizeof(*vq->link));
	if (!vq->desc || !vq->avail || !vq->used || !vq->indirect ||
	    !vq->slot || !vq->link) {
		err = -ENOMEM;
		goto fail;
	}

	for (i = 0; i < num; i++)
		vq->link[i] = (uint16_t)(i + 1);
	vq->free_head = 0;
	vq->num_free = num;

	vq->avail_idx = cfg->base;
	vq->kicked_idx = cfg->base;
	vq->last_used_idx = cfg->base;
	vq->avail->idx = cfg->base;
	vq->used->idx = cfg->base;
	*vq_used_event(vq) = cfg->base;

	vq->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	vq->call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (vq->kick_fd < 0 || vq->call_fd < 0) {
		err = -errno;
		guest_log("vq %u: eventfd: %s", cfg->index, strerror(errno));
		goto fail;
	}
	vq_mb();
	return 0;

fail:
	if (err == -ENOMEM)
		guest_log("vq %u: out of memory for a ring of %u", cfg->index,
			  num);
	vq_destroy(vq);
	return err;
}

void vq_destroy(struct vq *vq)
{
	if (vq->kick_fd >= 0)
		close(vq->kick_fd);
	if (vq->call_fd >= 0)
		close(vq->call_fd);
	free(vq->slot);
	free(vq->link);
	memset(vq, 0, sizeof(*vq));
	vq->kick_fd = -1;
	vq->call_fd = -1;
}

void vq_publish(struct vq *vq, uint16_t head)
{
	vq->avail->ring[vq->avail_idx & (vq->num - 1)] = head;
	vq->avail_idx++;
	/* Descriptors and ring entry become visible before the index. */
	__atomic_store_n(&vq->avail->idx, vq->avail_idx, __ATOMIC_RELEASE);
}

/* Take @n free descriptors; their order is the one of vq->link. */
static uint16_t vq_take(struct vq *vq, unsigned int n)
{
	uint16_t head = vq->free_head;
	uint16_t i = head;
	unsigned int k;

	for (k = 0; k < n; k++)
		i = vq->link[i];
	vq->free_head = i;
	vq->num_free -= n;
	return head;
}

static void vq_give_back(struct vq *vq, uint16_t head, unsigned int n)
{
	uint16_t last = head;
	unsigned int k;

	for (k = 1; k < n; k++)
		last = vq->link[last];
	vq->link[last] = vq->free_head;
	vq->free_head = head;
	vq->num_free += n;
}

static void vq_track(struct vq *vq, uint16_t head, unsigned int ndesc,
		     void *token)
{
	vq->slot[head].token = token;
	vq->slot[head].ndesc = (uint16_t)ndesc;
	vq->slot[head].busy = true;
	vq->inflight++;
}

static inline uint16_t vq_buf_flags(const struct vq_buf *b, bool more)
{
	return (b->write ? VRING_DESC_F_WRITE : 0) |
	       (more ? VRING_DESC_F_NEXT : 0);
}

int vq_add_chain(struct vq *vq, const struct vq_buf *bufs, unsigned int n,
		 unsigned int flags, void *token)
{
	uint16_t head, i;
	unsigned int k;

	if (!n)
		return -EINVAL;

	if (flags & VQ_ADD_INDIRECT) {
		struct vring_desc *table;

		if (n > vq->max_indirect || !vq->num_free)
			return -ENOSPC;
		head = vq_take(vq, 1);
		table = vq->indirect + (size_t)head * vq->max_indirect;
		for (k = 0; k < n; k++) {
			table[k].addr = bufs[k].addr;
			table[k].len = bufs[k].len;
			table[k].flags = vq_buf_flags(&bufs[k], k + 1 < n);
			table[k].next = k + 1 < n ? (uint16_t)(k + 1) : 0;
		}
		vq->desc[head].addr = gpa_of(vq->gm, table);
		vq->desc[head].len = (uint32_t)(n * sizeof(*table));
		vq->desc[head].flags = VRING_DESC_F_INDIRECT;
		vq->desc[head].next = 0;
		vq_track(vq, head, 1, token);
		vq_publish(vq, head);
		return head;
	}

	if (n > vq->num_free)
		return -ENOSPC;
	head = vq_take(vq, n);
	for (k = 0, i = head; k < n; k++, i = vq->link[i]) {
		vq->desc[i].addr = bufs[k].addr;
		vq->desc[i].len = bufs[k].len;
		vq->desc[i].flags = vq_buf_flags(&bufs[k], k + 1 < n);
		vq->desc[i].next = k + 1 < n ? vq->link[i] : 0;
	}
	vq_track(vq, head, n, token);
	vq_publish(vq, head);
	return head;
}

int vq_add_raw(struct vq *vq, const struct vring_desc *descs, unsigned int n,
	       void *token)
{
	uint16_t *pos, head, i;
	unsigned int k;

	if (!n)
		return -EINVAL;
	if (n > vq->num_free)
		return -ENOSPC;
	pos = malloc(n * sizeof(*pos));
	if (!pos)
		return -ENOMEM;
	head = vq_take(vq, n);
	for (k = 0, i = head; k < n; k++, i = vq->link[i])
		pos[k] = i;
	for (k = 0; k < n; k++) {
		vq->desc[pos[k]] = descs[k];
		if (descs[k].next < n)
			vq->desc[pos[k]].next = pos[descs[k].next];
	}
	free(pos);
	vq_track(vq, head, n, token);
	vq_publish(vq, head);
	return head;
}

int vq_kick_force(struct vq *vq)
{
	uint64_t one = 1;

	if (write(vq->kick_fd, &one, sizeof(one)) != sizeof(one)) {
		int err = errno;

		guest_log("vq %u: kick eventfd write: %s", vq->index,
			  strerror(err));
		return -err;
	}
	vq->kicks++;
	vq->kicked_idx = vq->avail_idx;
	return 1;
}

int vq_kick(struct vq *vq)
{
	uint16_t old = vq->kicked_idx, new = vq->avail_idx;
	bool need;

	/*
	 * The avail index store must be visible before we read the
	 * device's suppression state (virtio_ring.c: virtio_mb()).
	 */
	vq_mb();
	vq->kicked_idx = new;
	if (vq->event_idx)
		need = vring_need_event(__atomic_load_n(vq_avail_event(vq),
							__ATOMIC_RELAXED),
					new, old);
	else
		need = !(__atomic_load_n(&vq->used->flags, __ATOMIC_RELAXED) &
			 VRING_USED_F_NO_NOTIFY);
	if (!need) {
		vq->kicks_suppressed++;
		return 0;
	}
	return vq_kick_force(vq);
}

uint16_t vq_used_pending(const struct vq *vq)
{
	return (uint16_t)(__atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE) -
			  vq->last_used_idx);
}

/* Ask for a notification on the next completion (VQ_CB_AUTO). */
static void vq_enable_cb(struct vq *vq)
{
	if (vq->cb_mode != VQ_CB_AUTO)
		return;
	if (vq->event_idx)
		__atomic_store_n(vq_used_event(vq), vq->last_used_idx,
				 __ATOMIC_RELAXED);
	else if (vq->avail->flags & VRING_AVAIL_F_NO_INTERRUPT)
		__atomic_store_n(&vq->avail->flags, 0, __ATOMIC_RELAXED);
	vq_mb();
}

int vq_get_used(struct vq *vq, struct vq_used *out)
{
	uint16_t idx = __atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE);
	struct vring_used_elem *e;

	if (idx == vq->last_used_idx)
		return 0;
	if ((uint16_t)(idx - vq->last_used_idx) > vq->num)
		guest_log("vq %u: device published %u used entries on a ring of %u",
			  vq->index, (uint16_t)(idx - vq->last_used_idx),
			  vq->num);

	e = &vq->used->ring[vq->last_used_idx & (vq->num - 1)];
	out->id = __atomic_load_n(&e->id, __ATOMIC_RELAXED);
	out->len = __atomic_load_n(&e->len, __ATOMIC_RELAXED);
	out->token = NULL;
	out->bad = true;
	vq->last_used_idx++;
	vq->completions++;

	if (out->id < vq->num && vq->slot[out->id].busy) {
		struct vq_slot *s = &vq->slot[out->id];

		out->token = s->token;
		out->bad = false;
		vq_give_back(vq, (uint16_t)out->id, s->ndesc);
		s->busy = false;
		s->token = NULL;
		vq->inflight--;
	} else {
		guest_log("vq %u: used id %u is not an outstanding head",
			  vq->index, out->id);
	}

	/* Like virtqueue_get_buf(): keep used_event at our position. */
	if (vq->cb_mode == VQ_CB_AUTO && vq->event_idx) {
		__atomic_store_n(vq_used_event(vq), vq->last_used_idx,
				 __ATOMIC_RELAXED);
		vq_mb();
	}
	return 1;
}

uint64_t vq_drain_calls(struct vq *vq)
{
	uint64_t v;

	if (read(vq->call_fd, &v, sizeof(v)) != sizeof(v))
		return 0;
	vq->notifications += v;
	vq->call_reads++;
	return v;
}

int vq_wait_call(struct vq *vq, int timeout_ms)
{
	struct pollfd pfd = { .fd = vq->call_fd, .events = POLLIN };
	int r;

	do {
		r = poll(&pfd, 1, timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r < 0) {
		int err = errno;

		guest_log("vq %u: poll on the call eventfd: %s", vq->index,
			  strerror(err));
		return -err;
	}
	if (!r)
		return -ETIMEDOUT;
	vq_drain_calls(vq);
	return 0;
}

static void vq_hang_report(struct vq *vq);

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int vq_hang_timeout_ms(void)
{
	static int ms;
	const char *env;
	char *end;
	long v;

	if (ms)
		return ms;
	ms = VQ_HANG_TIMEOUT_MS;
	env = getenv("VHOST_BLK_TEST_HANG_MS");
	if (env && *env) {
		v = strtol(env, &end, 10);
		if (!*end && v > 0 && v <= 3600 * 1000)
			ms = (int)v;
		else
			guest_log("VHOST_BLK_TEST_HANG_MS='%s' is not a number of ms: %d",
				  env, ms);
	}
	return ms;
}

/* A wait of the hang guard that came close: said, as a hint, never a failure. */
static void vq_note_slow(const struct vq *vq, int64_t start, int timeout_ms)
{
	int64_t took = now_ms() - start;

	if (took > timeout_ms / 4)
		guest_log("vq %u: a completion after %lld ms (hang guard %d ms)",
			  vq->index, (long long)took, timeout_ms);
}

int vq_wait_used(struct vq *vq, struct vq_used *out, int timeout_ms)
{
	bool hang_guard = timeout_ms < 0;
	int64_t start = now_ms(), deadline;
	int r;

	if (hang_guard)
		timeout_ms = vq_hang_timeout_ms();
	deadline = start + timeout_ms;

	for (;;) {
		int64_t left;

		if (vq_get_used(vq, out))
			return 0;
		vq_enable_cb(vq);
		if (vq_get_used(vq, out)) {
			if (hang_guard)
				vq_note_slow(vq, start, timeout_ms);
			return 0;
		}
		left = deadline - now_ms();
		if (left <= 0)
			break;
		r = vq_wait_call(vq, (int)left);
		if (r && r != -ETIMEDOUT)
			return r;
	}
	guest_log(
		"vq %u: no completion within %d ms (inflight %u, avail idx %u, used idx %u, last used %u)",
		vq->index, timeout_ms, vq->inflight, vq->avail_idx,
		__atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE),
		vq->last_used_idx);
	if (hang_guard)
		vq_hang_report(vq);
	return -ETIMEDOUT;
}

static void vq_hang_report(struct vq *vq)
{
	uint16_t used;

	guest_log(
		"vq %u: driver: %llu kicks, %llu suppressed, last kick check at avail idx %u; avail_event %u, used_event %u, used flags %#x, avail flags %#x; %llu notifications",
		vq->index, (unsigned long long)vq->kicks,
		(unsigned long long)vq->kicks_suppressed, vq->kicked_idx,
		__atomic_load_n(vq_avail_event(vq), __ATOMIC_RELAXED),
		__atomic_load_n(vq_used_event(vq), __ATOMIC_RELAXED),
		__atomic_load_n(&vq->used->flags, __ATOMIC_RELAXED),
		__atomic_load_n(&vq->avail->flags, __ATOMIC_RELAXED),
		(unsigned long long)vq->notifications);
	if (vq->hang_report)
		vq->hang_report(vq, vq->hang_arg);
	/*
	 * A lost kick or a lost completion?  Kick once more and look again
	 * (the wait has failed whatever this shows).
	 */
	used = __atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE);
	if (vq->kick_fd < 0 || vq_kick_force(vq) < 0)
		return;
	usleep(1000 * 1000);
	guest_log("vq %u: one more kick: used idx %u -> %u a second later",
		  vq->index, used,
		  __atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE));
	if (vq->hang_report)
		vq->hang_report(vq, vq->hang_arg);
}

void vq_set_cb_mode(struct vq *vq, enum vq_cb_mode mode)
{
	vq->cb_mode = mode;
}

void vq_set_used_event(struct vq *vq, uint16_t idx)
{
	__atomic_store_n(vq_used_event(vq), idx, __ATOMIC_RELAXED);
	vq_mb();
}

void vq_set_no_interrupt(struct vq *vq, bool on)
{
	__atomic_store_n(&vq->avail->flags,
			 on ? VRING_AVAIL_F_NO_INTERRUPT : 0,
			 __ATOMIC_RELAXED);
	vq_mb();
}
