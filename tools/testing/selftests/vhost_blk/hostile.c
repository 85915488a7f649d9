// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers of the hostile-guest programs.  See hostile.h.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/vhost.h>

#include "hostile.h"
#include "vblk_dev.h"

static inline void hq_mb(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

int hq_add(struct vq *vq, const struct vring_desc *descs, unsigned int n,
	   void *token, bool publish)
{
	uint16_t pos[1024], head, i;
	unsigned int k;

	if (!n || n > 1024)
		return -EINVAL;
	if (n > vq->num_free)
		return -ENOSPC;
	/* Take n slots in free-list order, as vq_add_raw() does. */
	head = vq->free_head;
	for (k = 0, i = head; k < n; k++) {
		pos[k] = i;
		i = vq->link[i];
	}
	vq->free_head = i;
	vq->num_free -= n;
	for (k = 0; k < n; k++) {
		vq->desc[pos[k]] = descs[k];
		if (descs[k].next < n)
			vq->desc[pos[k]].next = pos[descs[k].next];
	}
	vq->slot[head].token = token;
	vq->slot[head].ndesc = (uint16_t)n;
	vq->slot[head].busy = true;
	vq->inflight++;
	if (publish)
		vq_publish(vq, head);
	else
		hq_mb();
	return head;
}

void hq_reclaim(struct vq *vq, uint16_t head)
{
	struct vq_slot *s = &vq->slot[head];
	uint16_t last = head;
	unsigned int k;

	if (head >= vq->num || !s->busy)
		return;
	for (k = 1; k < s->ndesc; k++)
		last = vq->link[last];
	vq->link[last] = vq->free_head;
	vq->free_head = head;
	vq->num_free += s->ndesc;
	s->busy = false;
	s->token = NULL;
	s->ndesc = 0;
	vq->inflight--;
}

void hq_set_avail_entry(struct vq *vq, uint16_t pos, uint16_t head)
{
	__atomic_store_n(&vq->avail->ring[pos & (vq->num - 1)], head,
			 __ATOMIC_RELAXED);
	hq_mb();
}

void hq_set_avail_idx(struct vq *vq, uint16_t idx)
{
	__atomic_store_n(&vq->avail->idx, idx, __ATOMIC_RELEASE);
	hq_mb();
}

int hq_set_err_fd(int devfd, unsigned int index, int efd)
{
	struct vhost_vring_file f = { .index = index, .fd = efd };

	return VBLK_IOCTL(devfd, VHOST_SET_VRING_ERR, &f);
}

int hq_vring_base(int devfd, unsigned int index, uint16_t *base)
{
	struct vhost_vring_state s = { .index = index };
	int err;

	err = VBLK_IOCTL(devfd, VHOST_GET_VRING_BASE, &s);
	if (!err)
		*base = (uint16_t)s.num;
	return err;
}

int hq_stats(int devfd, unsigned int index, bool reset,
	     struct vhost_blk_vring_stats *st)
{
	return vblk_get_stats(devfd, index, reset ? VHOST_BLK_STATS_RESET : 0,
			      st);
}

int hq_set_mem_table(int devfd, const struct guest_mem *gm,
		     const size_t *cuts, unsigned int ncuts)
{
	struct vhost_memory *mem;
	size_t start = 0, end;
	unsigned int i;
	int err;

	if (ncuts + 1 > HQ_MAX_REGIONS)
		return -EINVAL;
	mem = calloc(1, sizeof(*mem) + (ncuts + 1) * sizeof(mem->regions[0]));
	if (!mem)
		return -ENOMEM;
	mem->nregions = ncuts + 1;
	for (i = 0; i <= ncuts; i++) {
		end = i < ncuts ? cuts[i] : gm->size;
		if (end <= start || end > gm->size) {
			free(mem);
			guest_log("%s: bad cut %zu", __func__, end);
			return -EINVAL;
		}
		mem->regions[i].guest_phys_addr = gm->gpa + start;
		mem->regions[i].memory_size = end - start;
		mem->regions[i].userspace_addr =
			(uint64_t)(uintptr_t)(gm->va + start);
		start = end;
	}
	err = VBLK_IOCTL(devfd, VHOST_SET_MEM_TABLE, mem);
	free(mem);
	return err;
}

uint64_t hq_eventfd_read(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return 0;
	return v;
}

int hq_wait_fd(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int r;

	do {
		r = poll(&pfd, 1, ms);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return r > 0;
}

void hq_canary_fill(const struct guest_mem *gm, size_t off, size_t len)
{
	uint8_t *p = gm->va;
	size_t end = off + len;

	for (; off < end && (off & 7); off++)
		p[off] = hq_canary(off);
	for (; off + 8 <= end; off += 8) {
		uint64_t w = hq_canary_word(off >> 3);

		memcpy(p + off, &w, 8);
	}
	for (; off < end; off++)
		p[off] = hq_canary(off);
}

long long hq_canary_find(const struct guest_mem *gm, size_t off, size_t len)
{
	const uint8_t *p = gm->va;
	size_t end = off + len;

	while (off < end && (off & 7)) {
		if (p[off] != hq_canary(off))
			return (long long)off;
		off++;
	}
	for (; off + 8 <= end; off += 8) {
		uint64_t w = hq_canary_word(off >> 3), g;

		memcpy(&g, p + off, 8);
		if (g != w)
			break;
	}
	while (off < end) {
		if (p[off] != hq_canary(off))
			return (long long)off;
		off++;
	}
	return -1;
}

static inline uint64_t hq_sector_key(uint64_t seed, uint64_t gen,
				     uint64_t sector)
{
	return hq_mix(seed ^ hq_mix(gen * 0x100000001b3ULL ^ sector));
}

void hq_sector_fill(void *buf, uint64_t seed, uint64_t gen, uint64_t sector)
{
	uint64_t k = hq_sector_key(seed, gen, sector), *w = buf;
	unsigned int j;

	/* Word 0 names the sector and generation, the rest depends on both. */
	w[0] = sector ^ (gen << 40) ^ 0x5ec7000000000000ULL;
	for (j = 1; j < 64; j++)
		w[j] = (k + j * 0xd1342543de82ef95ULL) | 1;
}

unsigned int hq_sector_diff(const void *buf, uint64_t seed, uint64_t gen,
			    uint64_t sector)
{
	uint64_t want[64];
	const uint8_t *a = buf, *b = (const uint8_t *)want;
	unsigned int i;

	hq_sector_fill(want, seed, gen, sector);
	if (!memcmp(buf, want, sizeof(want)))
		return 0;
	for (i = 0; a[i] == b[i]; i++)
		;
	return i + 1;
}

bool hq_is_zero(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		if (w)
			return false;
	}
	for (; i < len; i++)
		if (p[i])
			return false;
	return true;
}
