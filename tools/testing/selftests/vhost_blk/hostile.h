/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers of the hostile-guest programs (vhost_blk_hostile_test and
 * vhost_blk_fuzz) on top of the guest-model library: chains posted but not
 * yet published, avail-ring tampering, the vq error eventfd, a memory table
 * split into several regions, canary bytes and per-sector data patterns.
 */
#ifndef VBLK_HOSTILE_H
#define VBLK_HOSTILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/virtio_ring.h>
#include <linux/vhost_blk.h>

#include "guest_mem.h"
#include "vq.h"

#define HQ_MAX_REGIONS	8

/*
 * Like vq_add_raw(): @n descriptors into free ring slots, a "next" below
 * @n rewritten to the real slot.  With @publish false the head is tracked
 * (vq_get_used() accepts it) but not put in the avail ring: the caller
 * publishes it later, with vq_publish() or hq_set_avail_entry().
 * Returns the head or -ENOSPC / -EINVAL.
 */
int hq_add(struct vq *vq, const struct vring_desc *descs, unsigned int n,
	   void *token, bool publish);

/* Give back the slots of @head, which the device will never answer. */
void hq_reclaim(struct vq *vq, uint16_t head);

/* Overwrite avail->ring[@pos] (an index, not yet masked); full fence. */
void hq_set_avail_entry(struct vq *vq, uint16_t pos, uint16_t head);
/* Store @idx in avail->idx without touching the driver's shadow. */
void hq_set_avail_idx(struct vq *vq, uint16_t idx);

/* Device-side helpers: 0 or -errno (reported). */
int hq_set_err_fd(int devfd, unsigned int index, int efd);
int hq_vring_base(int devfd, unsigned int index, uint16_t *base);
int hq_stats(int devfd, unsigned int index, bool reset,
	     struct vhost_blk_vring_stats *st);
/*
 * VHOST_SET_MEM_TABLE with @gm split at the byte offsets @cuts (ascending,
 * inside the mapping) into 1 + @ncuts regions, contiguous in both guest
 * physical and user space, so that a buffer across a cut becomes two iovecs.
 */
int hq_set_mem_table(int devfd, const struct guest_mem *gm,
		     const size_t *cuts, unsigned int ncuts);

/* Read an eventfd without blocking: its counter, 0 if not signalled. */
uint64_t hq_eventfd_read(int fd);
/* Wait up to @ms for @fd to be readable: 1 yes, 0 timeout, -errno. */
int hq_wait_fd(int fd, int ms);

/* splitmix64 */
static inline uint64_t hq_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

struct hq_rng {
	uint64_t s;
};

static inline uint64_t hq_rand(struct hq_rng *r)
{
	r->s += 0x9e3779b97f4a7c15ULL;
	return hq_mix(r->s);
}

/* Uniform in [0, n), n > 0. */
static inline uint64_t hq_below(struct hq_rng *r, uint64_t n)
{
	return (uint64_t)(((__uint128_t)hq_rand(r) * n) >> 64);
}

/* True with probability @num / @den. */
static inline bool hq_chance(struct hq_rng *r, unsigned int num,
			     unsigned int den)
{
	return hq_below(r, den) < num;
}

/*
 * Canaries: the byte that guest-memory offset @off holds while no request
 * owns it.  Fill and check are word-at-a-time.
 */
static inline uint64_t hq_canary_word(uint64_t word)
{
	/* Cheap (one multiply): it is filled and checked a lot. */
	return (word * 0x9e3779b97f4a7c15ULL) ^ 0xca4a41e5ca4a41e5ULL;
}

static inline uint8_t hq_canary(uint64_t off)
{
	return (uint8_t)(hq_canary_word(off >> 3) >> ((off & 7) * 8));
}

void hq_canary_fill(const struct guest_mem *gm, size_t off, size_t len);
/* Offset of the first byte in [off, off + len) that is not a canary, or -1. */
long long hq_canary_find(const struct guest_mem *gm, size_t off, size_t len);

/*
 * Sector contents: generation @gen of sector @sector under @seed (gen 0 is
 * the initial pattern).  512 bytes; never all zeroes.
 */
void hq_sector_fill(void *buf, uint64_t seed, uint64_t gen, uint64_t sector);
/* 0 if @buf holds that sector, else 1 + the first differing byte. */
unsigned int hq_sector_diff(const void *buf, uint64_t seed, uint64_t gen,
			    uint64_t sector);
bool hq_is_zero(const void *buf, size_t len);

#endif /* VBLK_HOSTILE_H */
