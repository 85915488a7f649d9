// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk against a hostile guest: every malformed input of the
 * "Malformed requests" table of Documentation/virt/vhost-blk/uapi.rst, the
 * range requests (DISCARD, WRITE_ZEROES, SECURE_ERASE) and their limits, a
 * read-only backend, chains the vhost core itself rejects, and the bound on
 * the work one ring may take from the worker.
 *
 * Every malformed request is checked for its exact status byte and used
 * length, for the data it must not have written (disk) and for the guest
 * memory it must not have touched (canary bytes around every buffer, or a
 * snapshot of all of guest memory).
 *
 * The backend is VHOST_BLK_TEST_DEV (see vblk_test.h).  The test of the
 * per-range sector limit needs a file larger than 2 GiB: it makes a sparse
 * one in VHOST_BLK_SCRATCH_DIR, else next to a file backend, else in /tmp.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>

#include "kselftest_harness.h"

#include "vblk_test.h"
#include "hostile.h"

/* The tests use sectors [AREA, AREA + 16384), 10-18 MiB into the disk. */
#define AREA		20000ULL
#define RSEG_SIZE	((uint32_t)sizeof(struct virtio_blk_discard_write_zeroes))
#define MAX_SEG		VHOST_BLK_MAX_DISCARD_SEG
#define MAX_SECT	VHOST_BLK_MAX_DISCARD_SECTORS

FIXTURE(hostile) {
	struct env e;
	int err[VBLK_MAX_VQS];		/* vq error eventfds of e.dev */
	int ro_bdev_fd;			/* BLKROSET to undo in teardown */
};

static void arm_err(struct __test_metadata *_metadata,
		    FIXTURE_DATA(hostile) *self)
{
	unsigned int i;

	for (i = 0; i < self->e.dev.nvqs; i++) {
		if (self->err[i] < 0)
			self->err[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		ASSERT_LE(0, self->err[i]);
		ASSERT_EQ(0, hq_set_err_fd(self->e.dev.fd, i, self->err[i]));
		hq_eventfd_read(self->err[i]);
	}
}

FIXTURE_SETUP(hostile)
{
	const char *path;
	unsigned int i;
	int fd;

	self->ro_bdev_fd = -1;
	for (i = 0; i < VBLK_MAX_VQS; i++)
		self->err[i] = -1;
	/*
	 * A test that failed with the backend marked read-only may not have
	 * got to its teardown: the harness loses track of its fork when
	 * built with optimisation (its -Wclobbered warning).  Undo it first.
	 */
	path = getenv("VHOST_BLK_TEST_DEV");
	fd = path && *path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd >= 0) {
		struct stat st;
		int off = 0;

		if (!fstat(fd, &st) && S_ISBLK(st.st_mode))
			ioctl(fd, BLKROSET, &off);
		close(fd);
	}
	env_setup(_metadata, &self->e, VBLK_FEATURES_ALL);
	if (_metadata->exit_code || self->e.dev.fd < 0)
		return;
	arm_err(_metadata, self);
}

FIXTURE_TEARDOWN(hostile)
{
	unsigned int i;
	int off = 0;

	if (self->ro_bdev_fd >= 0)
		ioctl(self->ro_bdev_fd, BLKROSET, &off);
	env_teardown(&self->e);
	for (i = 0; i < VBLK_MAX_VQS; i++)
		if (self->err[i] >= 0)
			close(self->err[i]);
}

/* Reopen the test's device with @nvqs queues and arm their error fds. */
static void reopen(struct __test_metadata *_metadata,
		   FIXTURE_DATA(hostile) *self, unsigned int nvqs)
{
	/* Small indirect tables: the tests reopen often. */
	env_reopen(_metadata, &self->e, nvqs, 16, 0);
	arm_err(_metadata, self);
}

/* ------------------------------------------------------------ backend */

static bool is_bdev(struct env *e)
{
	struct stat st;

	return !fstat(e->backend_fd, &st) && S_ISBLK(st.st_mode);
}

/* What a served DISCARD or WRITE_ZEROES leaves in the sectors it covers. */
enum sect_want { W_OLD, W_ZERO, W_OLD_OR_ZERO };

struct range_kind {
	uint8_t status;			/* answer to a valid request */
	enum sect_want effect;		/* on the sectors it covers */
};

static struct range_kind discard_kind(struct env *e)
{
	/* A file punches holes; a block device may drop what it likes. */
	if (!is_bdev(e))
		return (struct range_kind){ VIRTIO_BLK_S_OK, W_ZERO };
	if (!backend_queue_limit(e->backend_fd, "discard_max_bytes"))
		return (struct range_kind){ VIRTIO_BLK_S_UNSUPP, W_OLD };
	return (struct range_kind){ VIRTIO_BLK_S_OK, W_OLD_OR_ZERO };
}

/*
 * A file (fallocate()) and a block device with REQ_OP_WRITE_ZEROES zero;
 * on a block device without it, which would have the kernel write zero
 * pages, WRITE_ZEROES is UNSUPP, whatever its ranges, and changes nothing.
 */
static struct range_kind write_zeroes_kind(struct env *e)
{
	if (!backend_has_write_zeroes(e->backend_fd))
		return (struct range_kind){ VIRTIO_BLK_S_UNSUPP, W_OLD };
	return (struct range_kind){ VIRTIO_BLK_S_OK, W_ZERO };
}

/* ------------------------------------------------------------ disk areas */

/* Write the pattern of @seed over @n sectors from @sector. */
static void area_fill(struct __test_metadata *_metadata, struct env *e,
		      struct vq *vq, uint64_t sector, unsigned int n,
		      uint64_t seed)
{
	const unsigned int chunk = 512;		/* sectors per write */
	uint8_t *buf = xmalloc(_metadata, chunk * SECTOR);
	unsigned int done, k;

	for (done = 0; done < n; done += k) {
		k = n - done < chunk ? n - done : chunk;
		pattern_fill(buf, k * SECTOR, seed, (sector + done) * SECTOR);
		write_ok(_metadata, e, vq, sector + done, buf, k * SECTOR,
			 NULL);
	}
	free(buf);
}

/*
 * Read @n sectors from @sector and check each against @want[i] (NULL: all
 * W_OLD), "old" being the pattern of @seed.
 */
static void area_expect(struct __test_metadata *_metadata, struct env *e,
			struct vq *vq, uint64_t sector, unsigned int n,
			uint64_t seed, const uint8_t *want, const char *what)
{
	const unsigned int chunk = 512;
	uint8_t *buf = xmalloc(_metadata, chunk * SECTOR);
	uint8_t old[SECTOR];
	unsigned int done, k, i;

	for (done = 0; done < n; done += k) {
		k = n - done < chunk ? n - done : chunk;
		read_ok(_metadata, e, vq, sector + done, buf, k * SECTOR, NULL);
		for (i = 0; i < k; i++) {
			uint64_t s = sector + done + i;
			uint8_t *p = buf + i * SECTOR;
			enum sect_want w = want ? want[done + i] : W_OLD;
			bool is_old, is_zero;

			pattern_fill(old, SECTOR, seed, s * SECTOR);
			is_old = !memcmp(p, old, SECTOR);
			is_zero = hq_is_zero(p, SECTOR);
			if (w == W_OLD) {
				ASSERT_TRUE(is_old)
					TH_LOG("%s: sector %llu changed%s", what,
					       (unsigned long long)s,
					       is_zero ? " to zeroes" : "");
			} else if (w == W_ZERO) {
				ASSERT_TRUE(is_zero)
					TH_LOG("%s: sector %llu is not zeroes%s",
					       what, (unsigned long long)s,
					       is_old ? " (unchanged)" : "");
			} else {
				ASSERT_TRUE(is_old || is_zero)
					TH_LOG(
						"%s: sector %llu is neither its old contents nor zeroes",
						what, (unsigned long long)s);
			}
		}
	}
	free(buf);
}

/* ------------------------------------------------------------ ranges */

static void rseg(struct virtio_blk_discard_write_zeroes *s, uint64_t sector,
		 uint32_t num, uint32_t flags)
{
	s->sector = sector;
	s->num_sectors = num;
	s->flags = flags;
}

/* A range request whose table is @bytes of @segs, in one readable segment. */
static struct result range_req(struct __test_metadata *_metadata,
			       struct env *e, struct vq *vq, uint32_t type,
			       const void *segs, size_t bytes)
{
	return xfer_dir(_metadata, e, vq, type, BLK_DIR_OUT, 0, (void *)segs,
			bytes, NULL);
}

/* Mark the sectors of @segs in @want (indexed from @base) with @w. */
static void mark_ranges(uint8_t *want, uint64_t base, unsigned int n,
			const struct virtio_blk_discard_write_zeroes *segs,
			unsigned int nseg, enum sect_want w)
{
	unsigned int i;
	uint64_t s;

	for (i = 0; i < nseg; i++)
		for (s = segs[i].sector; s < segs[i].sector + segs[i].num_sectors; s++)
			if (s >= base && s < base + n)
				want[s - base] = (uint8_t)w;
}

static const char *type_name(uint32_t type)
{
	switch (type) {
	case VIRTIO_BLK_T_IN:		return "IN";
	case VIRTIO_BLK_T_OUT:		return "OUT";
	case VIRTIO_BLK_T_FLUSH:	return "FLUSH";
	case VIRTIO_BLK_T_GET_ID:	return "GET_ID";
	case VIRTIO_BLK_T_DISCARD:	return "DISCARD";
	case VIRTIO_BLK_T_WRITE_ZEROES:	return "WRITE_ZEROES";
	case VIRTIO_BLK_T_SECURE_ERASE:	return "SECURE_ERASE";
	default:			return "other";
	}
}

/* -------------------------------------------------- raw chains, canaries */

/* Guest buffer of @len bytes at @align (+@mis), canary-filled. */
static uint8_t *galloc(struct __test_metadata *_metadata, struct env *e,
		       size_t len, size_t align, size_t mis)
{
	uint8_t *p = guest_alloc(&e->gm, len + mis + 64, align);

	ASSERT_NE(NULL, p);
	hq_canary_fill(&e->gm, (size_t)(p - e->gm.va), len + mis + 64);
	return p + mis;
}

static void expect_canary(struct __test_metadata *_metadata, struct env *e,
			  const void *p, size_t len, const char *what)
{
	size_t off = (size_t)((const uint8_t *)p - e->gm.va);
	long long bad = hq_canary_find(&e->gm, off, len);

	ASSERT_EQ(-1, bad)
		TH_LOG("%s: byte %lld of %zu was written", what,
		       bad - (long long)off, len);
}

static struct virtio_blk_outhdr *ghdr(struct __test_metadata *_metadata,
				      struct env *e, uint32_t type,
				      uint64_t sector)
{
	struct virtio_blk_outhdr *h = guest_alloc(&e->gm, sizeof(*h), 16);

	ASSERT_NE(NULL, h);
	h->type = type;
	h->ioprio = 0;
	h->sector = sector;
	return h;
}

struct chain {
	struct vring_desc d[32];
	unsigned int n;
};

static void ch_add(struct chain *c, struct env *e, const void *p,
		   uint32_t len, uint16_t flags)
{
	if (c->n) {
		c->d[c->n - 1].flags |= VRING_DESC_F_NEXT;
		c->d[c->n - 1].next = (uint16_t)c->n;
	}
	c->d[c->n].addr = gpa_of(&e->gm, p);
	c->d[c->n].len = len;
	c->d[c->n].flags = flags;
	c->d[c->n].next = 0;
	c->n++;
}

struct snap;
static void snap_take(struct __test_metadata *_metadata, struct env *e,
		      struct snap *s);

/*
 * Post @c on @vq, take snapshot @s of guest memory if not NULL, kick, wait
 * for the completion; returns the used length.
 */
static uint32_t ch_run_snap(struct __test_metadata *_metadata, struct env *e,
			    struct vq *vq, struct chain *c, struct snap *s)
{
	struct vq_used u;
	int head;

	head = hq_add(vq, c->d, c->n, c, true);
	ASSERT_LE(0, head);
	if (s)
		snap_take(_metadata, e, s);
	ASSERT_EQ(1, vq_kick_force(vq));
	ASSERT_EQ(0, vq_wait_used(vq, &u, -1))
		TH_LOG("a chain of %u descriptors was never answered", c->n);
	ASSERT_FALSE(u.bad);
	ASSERT_EQ((uint32_t)head, u.id);
	return u.len;
}

static uint32_t ch_run(struct __test_metadata *_metadata, struct vq *vq,
		       struct chain *c)
{
	return ch_run_snap(_metadata, NULL, vq, c, NULL);
}

/* Whole-guest-memory snapshot, to prove the device wrote nothing. */
struct snap {
	uint8_t *copy;
	size_t len;
};

static void snap_take(struct __test_metadata *_metadata, struct env *e,
		      struct snap *s)
{
	s->len = e->gm.brk;
	s->copy = xmalloc(_metadata, s->len);
	memcpy(s->copy, e->gm.va, s->len);
}

/*
 * The rings' index areas: the device writes the used ring (and
 * avail_event), the driver side used_event as it harvests.
 */
static bool in_ring_indices(const struct vblk_dev *dev,
			    const struct guest_mem *gm, size_t off)
{
	unsigned int i;

	for (i = 0; i < dev->nvqs; i++) {
		const struct vq *vq = &dev->vq[i];
		size_t used = (size_t)((const uint8_t *)vq->used - gm->va);
		size_t avail = (size_t)((const uint8_t *)vq->avail - gm->va);

		if (off >= used && off < used + 4 + 8 * (size_t)vq->num + 2)
			return true;
		if (off >= avail && off < avail + 4 + 2 * (size_t)vq->num + 2)
			return true;
	}
	return false;
}

/* Everything but the ring indices (and @skip if not NULL) is unchanged. */
static void snap_expect(struct __test_metadata *_metadata, struct env *e,
			const struct vblk_dev *dev, struct snap *s,
			const void *skip, size_t skip_len, const char *what)
{
	size_t skip_off = skip ? (size_t)((const uint8_t *)skip - e->gm.va) :
				 SIZE_MAX;
	size_t i;

	for (i = 0; i < s->len; i++) {
		/* Skip equal 4 KiB blocks at once. */
		if (!(i & 4095) && i + 4096 <= s->len &&
		    !memcmp(s->copy + i, e->gm.va + i, 4096)) {
			i += 4095;
			continue;
		}
		if (s->copy[i] == e->gm.va[i])
			continue;
		if (in_ring_indices(dev, &e->gm, i))
			continue;
		if (i >= skip_off && i < skip_off + skip_len)
			continue;
		ASSERT_EQ(s->copy[i], e->gm.va[i])
			TH_LOG("%s: guest memory offset %zu was written", what,
			       i);
	}
	free(s->copy);
	s->copy = NULL;
}

/* ===================================================== DISCARD ranges */

/* 32 scattered ranges in [AREA, AREA + 2048): aligned, odd, one sector. */
static void scattered_ranges(struct virtio_blk_discard_write_zeroes *segs,
			     unsigned int n, uint32_t flags)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		uint64_t base = AREA + 64 * i;

		switch (i % 4) {
		case 0:
			rseg(&segs[i], base + 8, 16, flags);
			break;
		case 1:
			rseg(&segs[i], base + 3, 11, flags);
			break;
		case 2:
			rseg(&segs[i], base + 40, 1, flags);
			break;
		default:
			rseg(&segs[i], base, 64, flags);
			break;
		}
	}
}

TEST_F_TIMEOUT(hostile, discard_of_1_to_32_ranges_covers_each_and_nothing_else,
	       120)
{
	static const unsigned int counts[] = { 1, 2, 5, 31, MAX_SEG };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct range_kind dk = discard_kind(e);
	uint8_t want[2048 + 64];
	struct virtio_blk_discard_write_zeroes segs[MAX_SEG];
	unsigned int c;
	char what[64];

	for (c = 0; c < ARRAY_SIZE(counts); c++) {
		uint64_t seed = new_seed(e);

		area_fill(_metadata, e, vq, AREA, sizeof(want), seed);
		scattered_ranges(segs, counts[c], 0);
		snprintf(what, sizeof(what), "DISCARD of %u ranges", counts[c]);
		expect_result(_metadata,
			      range_req(_metadata, e, vq, VIRTIO_BLK_T_DISCARD,
					segs, counts[c] * RSEG_SIZE),
			      dk.status, 1, what);
		memset(want, W_OLD, sizeof(want));
		if (dk.status == VIRTIO_BLK_S_OK)
			mark_ranges(want, AREA, sizeof(want), segs, counts[c],
				    dk.effect);
		area_expect(_metadata, e, vq, AREA, sizeof(want), seed, want,
			    what);
	}
}

/*
 * A range of no sectors is done: the request is answered as a valid one
 * and that range changes nothing.  A request of nothing but empty ranges
 * sends no I/O at all; beside a range that is not empty, that one is
 * done and nothing else.
 */
TEST_F(hostile, empty_ranges_are_done_and_change_nothing)
{
	static const uint32_t types[] = { VIRTIO_BLK_T_DISCARD,
					  VIRTIO_BLK_T_WRITE_ZEROES };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct virtio_blk_discard_write_zeroes segs[3];
	struct range_kind kind;
	uint8_t want[256], status;
	unsigned int t, n;
	char what[64];
	uint64_t seed;

	rseg(&segs[0], AREA, 0, 0);
	rseg(&segs[1], AREA + 64, 0, 0);
	rseg(&segs[2], AREA + 128, 64, 0);
	for (t = 0; t < ARRAY_SIZE(types); t++) {
		kind = types[t] == VIRTIO_BLK_T_DISCARD ? discard_kind(e) :
		       write_zeroes_kind(e);
		status = range_status(&e->dev, types[t], kind.status);
		/* The two empty ranges alone, then with a third that is not. */
		for (n = 2; n <= 3; n++) {
			seed = new_seed(e);
			area_fill(_metadata, e, vq, AREA, sizeof(want), seed);
			snprintf(what, sizeof(what), "%s of %u ranges, 2 empty",
				 type_name(types[t]), n);
			expect_result(_metadata,
				      range_req(_metadata, e, vq, types[t],
						segs, n * RSEG_SIZE),
				      status, 1, what);
			memset(want, W_OLD, sizeof(want));
			if (status == VIRTIO_BLK_S_OK)
				mark_ranges(want, AREA, sizeof(want), segs, n,
					    kind.effect);
			area_expect(_metadata, e, vq, AREA, sizeof(want), seed,
				    want, what);
		}
	}
}

TEST_F(hostile, discard_with_unmap_flag_is_unsupp_and_discards_nothing)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e);
	struct virtio_blk_discard_write_zeroes segs[2];

	area_fill(_metadata, e, vq, AREA, 256, seed);
	rseg(&segs[0], AREA, 64, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
	expect_result(_metadata,
		      range_req(_metadata, e, vq, VIRTIO_BLK_T_DISCARD, segs,
				RSEG_SIZE),
		      VIRTIO_BLK_S_UNSUPP, 1, "DISCARD with unmap");
	/* A valid range first does not make it partly served. */
	rseg(&segs[0], AREA, 64, 0);
	rseg(&segs[1], AREA + 128, 64, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
	expect_result(_metadata,
		      range_req(_metadata, e, vq, VIRTIO_BLK_T_DISCARD, segs,
				sizeof(segs)),
		      VIRTIO_BLK_S_UNSUPP, 1, "DISCARD, unmap on range 2");
	area_expect(_metadata, e, vq, AREA, 256, seed, NULL,
		    "after DISCARD with unmap");
}

TEST_F(hostile, reserved_range_flag_bits_are_unsupp_and_change_nothing)
{
	static const uint32_t bits[] = { 1U << 1, 1U << 2, 1U << 7, 1U << 16,
					 1U << 31, 0xfffffffeU, 0xffffffffU };
	static const uint32_t types[] = { VIRTIO_BLK_T_DISCARD,
					  VIRTIO_BLK_T_WRITE_ZEROES };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e);
	unsigned int t, b;
	struct virtio_blk_discard_write_zeroes segs[3];
	char what[96];

	area_fill(_metadata, e, vq, AREA, 256, seed);
	/*
	 * UNSUPP either way on a device without write zeroes, which refuses
	 * any WRITE_ZEROES before its flags are read.
	 */
	for (t = 0; t < ARRAY_SIZE(types); t++) {
		for (b = 0; b < ARRAY_SIZE(bits); b++) {
			/* Bit 0 is unmap: allowed on WRITE_ZEROES only. */
			uint32_t f = bits[b];

			rseg(&segs[0], AREA, 32, 0);
			rseg(&segs[1], AREA + 64, 32,
			     types[t] == VIRTIO_BLK_T_WRITE_ZEROES ?
			     VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP : 0);
			rseg(&segs[2], AREA + 128, 32, f);
			snprintf(what, sizeof(what), "%s, flags %#x on range 3",
				 type_name(types[t]), f);
			expect_result(_metadata,
				      range_req(_metadata, e, vq, types[t],
						segs, sizeof(segs)),
				      VIRTIO_BLK_S_UNSUPP, 1, what);
			snprintf(what, sizeof(what), "%s, flags %#x alone",
				 type_name(types[t]), f);
			expect_result(_metadata,
				      range_req(_metadata, e, vq, types[t],
						&segs[2], RSEG_SIZE),
				      VIRTIO_BLK_S_UNSUPP, 1, what);
		}
	}
	area_expect(_metadata, e, vq, AREA, 256, seed, NULL,
		    "after reserved flags");
}

TEST_F(hostile, more_than_32_ranges_is_unsupp_and_changes_nothing)
{
	static const unsigned int counts[] = { MAX_SEG + 1, 64, 256 };
	static const uint32_t types[] = { VIRTIO_BLK_T_DISCARD,
					  VIRTIO_BLK_T_WRITE_ZEROES,
					  VIRTIO_BLK_T_SECURE_ERASE };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e);
	struct virtio_blk_discard_write_zeroes segs[256];
	unsigned int t, c, i;
	char what[64];

	area_fill(_metadata, e, vq, AREA, 512, seed);
	/* Each range valid on its own. */
	for (i = 0; i < ARRAY_SIZE(segs); i++)
		rseg(&segs[i], AREA + 2 * i, 1, 0);
	for (t = 0; t < ARRAY_SIZE(types); t++) {
		for (c = 0; c < ARRAY_SIZE(counts); c++) {
			snprintf(what, sizeof(what), "%s of %u ranges",
				 type_name(types[t]), counts[c]);
			expect_result(_metadata,
				      range_req(_metadata, e, vq, types[t],
						segs, counts[c] * RSEG_SIZE),
				      VIRTIO_BLK_S_UNSUPP, 1, what);
		}
	}
	area_expect(_metadata, e, vq, AREA, 512, seed, NULL,
		    "after too many ranges");
}

TEST_F(hostile, range_outside_the_disk_is_ioerr_and_changes_nothing)
{
	static const uint32_t types[] = { VIRTIO_BLK_T_DISCARD,
					  VIRTIO_BLK_T_WRITE_ZEROES };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e), cap = e->sectors;
	const struct { uint64_t sector; uint32_t num; const char *what; } bad[] = {
		{ cap, 1, "first sector past the end" },
		{ cap - 1, 2, "last sector and one past" },
		{ cap - 8, MAX_SECT, "running far past the end" },
		{ cap + 1000000, 8, "far past the end" },
		/* sector << 9 wraps to AREA * 512: must not reach AREA. */
		{ (1ULL << 55) + AREA, 8, "2^55 + AREA" },
		{ (1ULL << 55) + AREA + 8, 8, "2^55 + AREA + 8" },
		{ ~0ULL, 1, "sector UINT64_MAX" },
		{ ~0ULL - 7, 8, "sector UINT64_MAX - 7" },
		{ AREA, 0xffffffffU, "count UINT32_MAX" },
		{ AREA, MAX_SECT + 1, "count max + 1" },
	};
	struct range_kind dk = discard_kind(e), wk = write_zeroes_kind(e);
	unsigned int t, i;
	struct virtio_blk_discard_write_zeroes segs[2];
	char what[96];
	uint8_t want;

	area_fill(_metadata, e, vq, AREA, 256, seed);
	area_fill(_metadata, e, vq, cap - 64, 64, seed);
	for (t = 0; t < ARRAY_SIZE(types); t++) {
		/*
		 * A device without discard (write zeroes) answers UNSUPP to
		 * any DISCARD (WRITE_ZEROES), before looking at its ranges.
		 */
		want = (types[t] == VIRTIO_BLK_T_DISCARD ? dk : wk).status ==
		       VIRTIO_BLK_S_UNSUPP ?
		       VIRTIO_BLK_S_UNSUPP : VIRTIO_BLK_S_IOERR;
		for (i = 0; i < ARRAY_SIZE(bad); i++) {
			rseg(&segs[0], bad[i].sector, bad[i].num, 0);
			snprintf(what, sizeof(what), "%s: %s",
				 type_name(types[t]), bad[i].what);
			expect_result(_metadata,
				      range_req(_metadata, e, vq, types[t],
						segs, RSEG_SIZE),
				      want, 1, what);
			/* After a valid range: nothing of it is done. */
			rseg(&segs[0], AREA + 128, 64, 0);
			rseg(&segs[1], bad[i].sector, bad[i].num, 0);
			snprintf(what, sizeof(what), "%s: valid range, then %s",
				 type_name(types[t]), bad[i].what);
			expect_result(_metadata,
				      range_req(_metadata, e, vq, types[t],
						segs, sizeof(segs)),
				      want, 1, what);
		}
	}
	area_expect(_metadata, e, vq, AREA, 256, seed, NULL,
		    "after ranges outside the disk");
	area_expect(_metadata, e, vq, cap - 64, 64, seed, NULL,
		    "end of the disk after ranges outside it");
}

TEST_F(hostile, range_table_empty_or_not_multiple_of_16_is_ioerr)
{
	static const size_t lens[] = { 0, 1, 8, 15, 17, 31, 40,
				       MAX_SEG * RSEG_SIZE + 1 };
	static const uint32_t types[] = { VIRTIO_BLK_T_DISCARD,
					  VIRTIO_BLK_T_WRITE_ZEROES,
					  VIRTIO_BLK_T_SECURE_ERASE };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e);
	struct virtio_blk_discard_write_zeroes segs[MAX_SEG + 1];
	unsigned int t, l, i;
	char what[64];

	area_fill(_metadata, e, vq, AREA, 256, seed);
	for (i = 0; i < ARRAY_SIZE(segs); i++)
		rseg(&segs[i], AREA + (i % 8) * 32, 16, 0);
	for (t = 0; t < ARRAY_SIZE(types); t++) {
		for (l = 0; l < ARRAY_SIZE(lens); l++) {
			snprintf(what, sizeof(what), "%s with a %zu-byte table",
				 type_name(types[t]), lens[l]);
			expect_result(_metadata,
				      range_req(_metadata, e, vq, types[t],
						segs, lens[l]),
				      range_status(&e->dev, types[t],
						   VIRTIO_BLK_S_IOERR),
				      1, what);
		}
	}
	area_expect(_metadata, e, vq, AREA, 256, seed, NULL,
		    "after malformed tables");
}

TEST_F(hostile, range_table_split_over_descriptors_is_served)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct range_kind wk = write_zeroes_kind(e);
	uint64_t seed = new_seed(e);
	struct virtio_blk_outhdr *h;
	uint8_t want[256], *t1, *t2, *st;
	struct chain c = { .n = 0 };
	struct virtio_blk_discard_write_zeroes segs[2];

	area_fill(_metadata, e, vq, AREA, 256, seed);
	rseg(&segs[0], AREA + 16, 16, 0);
	rseg(&segs[1], AREA + 100, 7, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
	/* 32 bytes as 13 + 19, the second range split between descriptors. */
	h = ghdr(_metadata, e, VIRTIO_BLK_T_WRITE_ZEROES, 0);
	t1 = galloc(_metadata, e, 13, 64, 0);
	t2 = galloc(_metadata, e, 19, 64, 5);
	st = galloc(_metadata, e, 1, 64, 0);
	memcpy(t1, segs, 13);
	memcpy(t2, (uint8_t *)segs + 13, 19);
	ch_add(&c, e, h, sizeof(*h), 0);
	ch_add(&c, e, t1, 13, 0);
	ch_add(&c, e, t2, 19, 0);
	ch_add(&c, e, st, 1, VRING_DESC_F_WRITE);
	ASSERT_EQ(1U, ch_run(_metadata, vq, &c));
	ASSERT_STATUS(wk.status, *st, "split WRITE_ZEROES table");
	memset(want, W_OLD, sizeof(want));
	mark_ranges(want, AREA, sizeof(want), segs, 2, wk.effect);
	area_expect(_metadata, e, vq, AREA, sizeof(want), seed, want,
		    "split WRITE_ZEROES table");
	if (wk.status != VIRTIO_BLK_S_OK)
		SKIP(return, "%s has no write zeroes: the table was not read",
		     e->path);
}

TEST_F(hostile, range_request_with_device_writable_data_is_ioerr)
{
	static const uint32_t types[] = { VIRTIO_BLK_T_DISCARD,
					  VIRTIO_BLK_T_WRITE_ZEROES,
					  VIRTIO_BLK_T_SECURE_ERASE };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e);
	unsigned int t;
	struct virtio_blk_discard_write_zeroes seg;

	area_fill(_metadata, e, vq, AREA, 64, seed);
	rseg(&seg, AREA, 64, 0);
	for (t = 0; t < ARRAY_SIZE(types); t++) {
		struct virtio_blk_outhdr *h = ghdr(_metadata, e, types[t], 0);
		uint8_t *tab = galloc(_metadata, e, RSEG_SIZE, 64, 0);
		uint8_t *wr = galloc(_metadata, e, 512, 512, 0);
		uint8_t *st = galloc(_metadata, e, 1, 64, 0);
		struct chain c = { .n = 0 };

		memcpy(tab, &seg, sizeof(seg));
		ch_add(&c, e, h, sizeof(*h), 0);
		ch_add(&c, e, tab, RSEG_SIZE, 0);
		ch_add(&c, e, wr, 512, VRING_DESC_F_WRITE);
		ch_add(&c, e, st, 1, VRING_DESC_F_WRITE);
		ASSERT_EQ(1U, ch_run(_metadata, vq, &c));
		ASSERT_STATUS(range_status(&e->dev, types[t],
					   VIRTIO_BLK_S_IOERR),
			      *st, "%s with writable data",
			      type_name(types[t]));
		expect_canary(_metadata, e, wr, 512 + 64, "writable data");
		expect_canary(_metadata, e, st + 1, 64, "after the status");
	}
	area_expect(_metadata, e, vq, AREA, 64, seed, NULL,
		    "after range requests with writable data");
}

/*
 * A range over VHOST_BLK_MAX_DISCARD_SECTORS can only be told from one past
 * the capacity on a disk of more than 2 GiB: a sparse scratch file.
 */
TEST_F_TIMEOUT(hostile, range_over_max_sectors_is_ioerr_on_a_big_disk, 120)
{
	struct env *e = &self->e;
	uint64_t size = 5ULL << 29, seed = new_seed(e);	/* 2.5 GiB */
	char path[PATH_MAX + 64], dirbuf[PATH_MAX];
	struct vblk_dev big;
	const char *dir;
	struct vq *vq;
	uint8_t want[8];
	struct virtio_blk_discard_write_zeroes seg;
	int fd, err;

	dir = scratch_dir(e, dirbuf, sizeof(dirbuf));
	snprintf(path, sizeof(path), "%s/vhost-blk-hostile-big.XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		SKIP(return, "cannot create a scratch file in %.200s: %s", dir,
		     strerror(errno));
	unlink(path);
	if (ftruncate(fd, (off_t)size)) {
		close(fd);
		SKIP(return, "cannot make a %llu-byte sparse file in %.200s",
		     (unsigned long long)size, dir);
	}
	{
		struct vblk_config cfg = {
			.nvqs = 1, .features = VBLK_FEATURES_ALL,
			.backend_fd = fd,
		};

		err = vblk_open(&big, &e->gm, &cfg);
	}
	if (err == -EOPNOTSUPP) {
		close(fd);
		SKIP(return, "%.200s does not support O_DIRECT", dir);
	}
	ASSERT_EQ(0, err);
	vq = &big.vq[0];

	/* Data in the first sector and just past MAX_SECT sectors. */
	area_fill(_metadata, e, vq, 0, 8, seed);
	area_fill(_metadata, e, vq, MAX_SECT - 3, 8, seed);

	rseg(&seg, 0, MAX_SECT + 1, 0);
	expect_result(_metadata,
		      range_req(_metadata, e, vq, VIRTIO_BLK_T_DISCARD, &seg,
				RSEG_SIZE),
		      VIRTIO_BLK_S_IOERR, 1, "DISCARD of max + 1 sectors");
	rseg(&seg, 0, MAX_SECT + 1, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
	expect_result(_metadata,
		      range_req(_metadata, e, vq, VIRTIO_BLK_T_WRITE_ZEROES,
				&seg, RSEG_SIZE),
		      VIRTIO_BLK_S_IOERR, 1, "WRITE_ZEROES of max + 1 sectors");
	rseg(&seg, 1, 0x7fffffff, 0);
	expect_result(_metadata,
		      range_req(_metadata, e, vq, VIRTIO_BLK_T_DISCARD, &seg,
				RSEG_SIZE),
		      VIRTIO_BLK_S_IOERR, 1, "DISCARD of 2^31 - 1 sectors");
	area_expect(_metadata, e, vq, 0, 8, seed, NULL, "after max + 1");
	area_expect(_metadata, e, vq, MAX_SECT - 3, 8, seed, NULL,
		    "after max + 1");

	/* Exactly the maximum is served, and stops where it should. */
	rseg(&seg, 0, MAX_SECT, 0);
	expect_result(_metadata,
		      range_req(_metadata, e, vq, VIRTIO_BLK_T_DISCARD, &seg,
				RSEG_SIZE),
		      VIRTIO_BLK_S_OK, 1, "DISCARD of max sectors");
	memset(want, W_ZERO, sizeof(want));
	area_expect(_metadata, e, vq, 0, 8, seed, want, "DISCARD of max");
	memset(want, W_OLD, sizeof(want));
	want[0] = want[1] = want[2] = W_ZERO;
	area_expect(_metadata, e, vq, MAX_SECT - 3, 8, seed, want,
		    "end of the DISCARD of max");

	area_fill(_metadata, e, vq, 0, 8, seed);
	rseg(&seg, 3, MAX_SECT, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
	expect_result(_metadata,
		      range_req(_metadata, e, vq, VIRTIO_BLK_T_WRITE_ZEROES,
				&seg, RSEG_SIZE),
		      VIRTIO_BLK_S_OK, 1, "WRITE_ZEROES (unmap) of max sectors");
	memset(want, W_ZERO, sizeof(want));
	want[0] = want[1] = want[2] = W_OLD;
	area_expect(_metadata, e, vq, 0, 8, seed, want,
		    "start of WRITE_ZEROES of max");
	vblk_close(&big);
	close(fd);
}

/* ===================================================== WRITE_ZEROES */

/*
 * Returns false, after checking that the request was refused and changed
 * nothing, if the backend has no write zeroes.
 */
static bool write_zeroes_case(struct __test_metadata *_metadata,
			      struct env *e, uint32_t flags)
{
	struct range_kind wk = write_zeroes_kind(e);
	struct vq *vq = &e->dev.vq[0];
	uint8_t want[1024];
	struct virtio_blk_discard_write_zeroes segs[6];
	uint64_t seed;
	char what[64];

	snprintf(what, sizeof(what), "WRITE_ZEROES%s",
		 flags ? " with unmap" : "");
	/* Single sectors, partial and whole pages, a long run. */
	rseg(&segs[0], AREA + 1, 1, flags);
	rseg(&segs[1], AREA + 10, 5, flags);
	rseg(&segs[2], AREA + 64, 8, flags);
	rseg(&segs[3], AREA + 100, 37, flags);
	rseg(&segs[4], AREA + 256, 512, flags);
	rseg(&segs[5], AREA + 1023, 1, flags);

	seed = new_seed(e);
	area_fill(_metadata, e, vq, AREA, sizeof(want), seed);
	expect_result(_metadata,
		      range_req(_metadata, e, vq, VIRTIO_BLK_T_WRITE_ZEROES,
				segs, sizeof(segs)),
		      wk.status, 1, what);
	memset(want, W_OLD, sizeof(want));
	mark_ranges(want, AREA, sizeof(want), segs, ARRAY_SIZE(segs),
		    wk.effect);
	area_expect(_metadata, e, vq, AREA, sizeof(want), seed, want, what);
	if (wk.status != VIRTIO_BLK_S_OK)
		return false;

	/* The maximum number of ranges, one sector each. */
	seed = new_seed(e);
	area_fill(_metadata, e, vq, AREA, 128, seed);
	{
		struct virtio_blk_discard_write_zeroes many[MAX_SEG];
		unsigned int i;

		for (i = 0; i < MAX_SEG; i++)
			rseg(&many[i], AREA + 4 * i + (i % 3), 1, flags);
		expect_result(_metadata,
			      range_req(_metadata, e, vq,
					VIRTIO_BLK_T_WRITE_ZEROES, many,
					sizeof(many)),
			      VIRTIO_BLK_S_OK, 1, what);
		memset(want, W_OLD, 128);
		mark_ranges(want, AREA, 128, many, MAX_SEG, W_ZERO);
		area_expect(_metadata, e, vq, AREA, 128, seed, want, what);
	}
	return true;
}

TEST_F_TIMEOUT(hostile, write_zeroes_zeroes_ranges_and_keeps_neighbours, 60)
{
	if (!write_zeroes_case(_metadata, &self->e, 0))
		SKIP(return, "%s has no write zeroes", self->e.path);
}

TEST_F_TIMEOUT(hostile, write_zeroes_unmap_zeroes_ranges_and_keeps_neighbours,
	       60)
{
	if (!write_zeroes_case(_metadata, &self->e,
			       VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP))
		SKIP(return, "%s has no write zeroes", self->e.path);
}

TEST_F(hostile, write_zeroes_at_the_last_sector)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct range_kind wk = write_zeroes_kind(e);
	uint64_t seed = new_seed(e);
	uint8_t want[16];
	struct virtio_blk_discard_write_zeroes seg;

	area_fill(_metadata, e, vq, e->sectors - 16, 16, seed);
	rseg(&seg, e->sectors - 3, 3, 0);
	expect_result(_metadata,
		      range_req(_metadata, e, vq, VIRTIO_BLK_T_WRITE_ZEROES,
				&seg, RSEG_SIZE),
		      wk.status, 1, "WRITE_ZEROES up to the end");
	memset(want, W_OLD, sizeof(want));
	want[13] = want[14] = want[15] = wk.effect;
	area_expect(_metadata, e, vq, e->sectors - 16, 16, seed, want,
		    "WRITE_ZEROES up to the end");
	if (wk.status != VIRTIO_BLK_S_OK)
		SKIP(return, "%s has no write zeroes", e->path);
}

/* ===================================================== SECURE_ERASE */

TEST_F(hostile, secure_erase_is_unsupp_and_not_offered_without_support)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct virtio_blk_config cfg;
	uint64_t seed = new_seed(e), f = 0;
	struct virtio_blk_discard_write_zeroes seg;

	ASSERT_EQ(0, vblk_get_features(e->dev.fd, &f));
	ASSERT_EQ(0, vblk_get_config(e->dev.fd, &cfg));
	if (f & VBLK_F(VIRTIO_BLK_F_SECURE_ERASE))
		SKIP(return, "the backend supports secure erase");
	ASSERT_EQ(0U, cfg.max_secure_erase_sectors);
	ASSERT_EQ(0U, cfg.max_secure_erase_seg);

	area_fill(_metadata, e, vq, AREA, 64, seed);
	rseg(&seg, AREA, 64, 0);
	expect_result(_metadata,
		      range_req(_metadata, e, vq, VIRTIO_BLK_T_SECURE_ERASE,
				&seg, RSEG_SIZE),
		      VIRTIO_BLK_S_UNSUPP, 1, "SECURE_ERASE");
	area_expect(_metadata, e, vq, AREA, 64, seed, NULL,
		    "after SECURE_ERASE");
}

/* ===================================================== request types */

TEST_F_TIMEOUT(hostile, unknown_and_zone_types_are_unsupp_and_touch_nothing,
	       60)
{
	static const uint32_t fixed[] = {
		VIRTIO_BLK_T_GET_LIFETIME, VIRTIO_BLK_T_ZONE_APPEND,
		VIRTIO_BLK_T_ZONE_REPORT, VIRTIO_BLK_T_ZONE_OPEN,
		VIRTIO_BLK_T_ZONE_CLOSE, VIRTIO_BLK_T_ZONE_FINISH,
		VIRTIO_BLK_T_ZONE_RESET, VIRTIO_BLK_T_ZONE_RESET_ALL,
		VIRTIO_BLK_T_SCSI_CMD, 3, 5, 6, 7, 9, 12, 15, 16, 0x80000000U,
		VIRTIO_BLK_T_OUT | 0x100,
	};
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct hq_rng rng = { e->seed };
	uint64_t seed = new_seed(e);
	unsigned int i, n = ARRAY_SIZE(fixed) + 200;

	area_fill(_metadata, e, vq, AREA, 8, seed);
	for (i = 0; i < n; i++) {
		size_t mark = guest_mark(&e->gm);
		uint32_t type;
		struct virtio_blk_outhdr *h;
		uint8_t *rd, *wr, *st;
		struct chain c = { .n = 0 };
		uint32_t used;

		if (i < ARRAY_SIZE(fixed)) {
			type = fixed[i];
		} else {
			do {
				type = (uint32_t)hq_rand(&rng);
				if (i & 1)
					type &= 0xff;
			} while (type <= VIRTIO_BLK_T_FLUSH ||
				 type == VIRTIO_BLK_T_GET_ID ||
				 type == VIRTIO_BLK_T_DISCARD ||
				 type == VIRTIO_BLK_T_WRITE_ZEROES ||
				 type == VIRTIO_BLK_T_SECURE_ERASE);
		}
		/* Readable and writable data, a plausible range table. */
		h = ghdr(_metadata, e, type, AREA);
		rd = galloc(_metadata, e, 512, 512, 0);
		wr = galloc(_metadata, e, 512, 512, 0);
		st = galloc(_metadata, e, 1, 64, 0);
		rseg((struct virtio_blk_discard_write_zeroes *)rd, AREA, 8, 0);
		ch_add(&c, e, h, sizeof(*h), 0);
		ch_add(&c, e, rd, 512, 0);
		ch_add(&c, e, wr, 512, VRING_DESC_F_WRITE);
		ch_add(&c, e, st, 1, VRING_DESC_F_WRITE);
		used = ch_run(_metadata, vq, &c);
		ASSERT_STATUS(VIRTIO_BLK_S_UNSUPP, *st, "type %#x", type);
		ASSERT_EQ(1U, used) TH_LOG("type %#x", type);
		expect_canary(_metadata, e, wr, 512 + 64, "writable data");
		ASSERT_EQ(AREA, ((struct virtio_blk_discard_write_zeroes *)rd)->sector);
		guest_release(&e->gm, mark);
	}
	area_expect(_metadata, e, vq, AREA, 8, seed, NULL,
		    "after unknown types");
}

/* ===================================================== read-only backend */

/* 64-bit digest of the whole disk, read O_DIRECT from the backend. */
static uint64_t disk_digest(struct __test_metadata *_metadata, struct env *e)
{
	const size_t chunk = 1 << 20;
	uint64_t h = 0xcbf29ce484222325ULL, off;
	uint64_t *buf;
	int fd;

	fd = open(e->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	ASSERT_LE(0, fd) TH_LOG("open %s O_DIRECT: %s", e->path,
				strerror(errno));
	ASSERT_EQ(0, posix_memalign((void **)&buf, 4096, chunk));
	for (off = 0; off < e->capacity; off += chunk) {
		size_t len = e->capacity - off < chunk ? e->capacity - off :
							 chunk, i;

		ASSERT_EQ((ssize_t)len, pread(fd, buf, len, (off_t)off))
			TH_LOG("pread at %llu: %s", (unsigned long long)off,
			       strerror(errno));
		for (i = 0; i < len / 8; i++)
			h = (h ^ buf[i]) * 0x100000001b3ULL + (h >> 29);
	}
	free(buf);
	close(fd);
	return h;
}

/* Every write-type request on a read-only backend: IOERR. */
static void write_types_fail(struct __test_metadata *_metadata, struct env *e,
			     struct vq *vq, uint64_t seed)
{
	static const uint32_t split[] = { 512, 1536, 2048 };
	struct layout lo = { .nseg = 3, .seg = split };
	uint64_t cap = e->sectors;
	struct virtio_blk_discard_write_zeroes segs[MAX_SEG];
	uint8_t buf[4096];
	unsigned int i, t;
	char what[64];

	memset(buf, 0x5a, sizeof(buf));
	expect_result(_metadata, xfer(_metadata, e, vq, VIRTIO_BLK_T_OUT, 0,
				      buf, 512, NULL),
		      VIRTIO_BLK_S_IOERR, 1, "OUT at sector 0");
	expect_result(_metadata, xfer(_metadata, e, vq, VIRTIO_BLK_T_OUT, AREA,
				      buf, sizeof(buf), &lo),
		      VIRTIO_BLK_S_IOERR, 1, "OUT at AREA, 3 segments");
	expect_result(_metadata, xfer(_metadata, e, vq, VIRTIO_BLK_T_OUT,
				      cap - 1, buf, 512, NULL),
		      VIRTIO_BLK_S_IOERR, 1, "OUT at the last sector");
	for (t = 0; t < 4; t++) {
		uint32_t type = t == 0 ? VIRTIO_BLK_T_DISCARD :
				t == 3 ? VIRTIO_BLK_T_SECURE_ERASE :
					 VIRTIO_BLK_T_WRITE_ZEROES;
		uint32_t flags = t == 2 ? VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP : 0;

		/* The whole disk, then 32 ranges. */
		rseg(&segs[0], 0, cap < MAX_SECT ? (uint32_t)cap : MAX_SECT,
		     flags);
		snprintf(what, sizeof(what), "%s%s of the disk",
			 type_name(type), flags ? " (unmap)" : "");
		expect_result(_metadata,
			      range_req(_metadata, e, vq, type, segs,
					RSEG_SIZE),
			      range_status(&e->dev, type, VIRTIO_BLK_S_IOERR),
			      1, what);
		for (i = 0; i < MAX_SEG; i++)
			rseg(&segs[i], AREA + 16 * i, 8, flags);
		snprintf(what, sizeof(what), "%s%s of 32 ranges",
			 type_name(type), flags ? " (unmap)" : "");
		expect_result(_metadata,
			      range_req(_metadata, e, vq, type, segs,
					sizeof(segs)),
			      range_status(&e->dev, type, VIRTIO_BLK_S_IOERR),
			      1, what);
	}
	/* Reads and FLUSH still work. */
	expect_result(_metadata, xfer(_metadata, e, vq, VIRTIO_BLK_T_FLUSH, 0,
				      NULL, 0, NULL),
		      VIRTIO_BLK_S_OK, 1, "FLUSH on a read-only backend");
	area_expect(_metadata, e, vq, AREA, 512, seed, NULL,
		    "read-only backend");
}

TEST_F_TIMEOUT(hostile, read_only_fd_fails_every_write_type_disk_unchanged,
	       120)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e), before, f = 0;
	int ro;

	area_fill(_metadata, e, vq, AREA, 512, seed);
	ASSERT_EQ(0, fdatasync(e->backend_fd));
	before = disk_digest(_metadata, e);

	ro = open(e->path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, ro);
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, ro));
	close(ro);
	ASSERT_EQ(0, vblk_get_features(e->dev.fd, &f));
	ASSERT_TRUE(!!(f & VBLK_F(VIRTIO_BLK_F_RO)));

	write_types_fail(_metadata, e, vq, seed);
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	ASSERT_EQ(before, disk_digest(_metadata, e))
		TH_LOG("the disk changed under a read-only backend");
}

TEST_F_TIMEOUT(hostile, read_only_block_device_fails_every_write_type, 120)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e), before, f = 0;
	int on = 1, off = 0;

	if (!is_bdev(e))
		SKIP(return, "the backend is not a block device");
	area_fill(_metadata, e, vq, AREA, 512, seed);
	before = disk_digest(_metadata, e);

	/* A writable fd on a device marked read-only. */
	self->ro_bdev_fd = e->backend_fd;
	ASSERT_EQ(0, ioctl(e->backend_fd, BLKROSET, &on))
		TH_LOG("BLKROSET: %s", strerror(errno));
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, e->backend_fd));
	ASSERT_EQ(0, vblk_get_features(e->dev.fd, &f));
	ASSERT_TRUE(!!(f & VBLK_F(VIRTIO_BLK_F_RO)));

	write_types_fail(_metadata, e, vq, seed);
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	ASSERT_EQ(0, ioctl(e->backend_fd, BLKROSET, &off));
	self->ro_bdev_fd = -1;
	ASSERT_EQ(before, disk_digest(_metadata, e))
		TH_LOG("the disk changed under a read-only backend");

	/* Writable again. */
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, e->backend_fd));
	ASSERT_EQ(0, vblk_get_features(e->dev.fd, &f));
	ASSERT_FALSE(!!(f & VBLK_F(VIRTIO_BLK_F_RO)));
	rw_verify(_metadata, e, vq, AREA, 4096, NULL, NULL);
}

/* ===================================================== sector arithmetic */

TEST_F(hostile, sector_wrapping_past_2_64_bytes_does_not_reach_low_sectors)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e);
	/* sector * 512 (mod 2^64) == AREA * 512 */
	const uint64_t wraps[] = { (1ULL << 55) + AREA, (1ULL << 56) + AREA,
				   (7ULL << 55) + AREA, ~0ULL - ((1ULL << 55) - 1) + AREA };
	uint8_t buf[4096];
	unsigned int i;
	char what[80];

	area_fill(_metadata, e, vq, AREA, 8, seed);
	for (i = 0; i < ARRAY_SIZE(wraps); i++) {
		memset(buf, 0xe7, sizeof(buf));
		snprintf(what, sizeof(what), "OUT at sector %#llx",
			 (unsigned long long)wraps[i]);
		expect_result(_metadata,
			      xfer(_metadata, e, vq, VIRTIO_BLK_T_OUT, wraps[i],
				   buf, sizeof(buf), NULL),
			      VIRTIO_BLK_S_IOERR, 1, what);
		{
			size_t mark = guest_mark(&e->gm);
			struct virtio_blk_outhdr *h =
				ghdr(_metadata, e, VIRTIO_BLK_T_IN, wraps[i]);
			uint8_t *d = galloc(_metadata, e, 4096, 512, 0);
			uint8_t *st = galloc(_metadata, e, 1, 64, 0);
			struct chain c = { .n = 0 };

			ch_add(&c, e, h, sizeof(*h), 0);
			ch_add(&c, e, d, 4096, VRING_DESC_F_WRITE);
			ch_add(&c, e, st, 1, VRING_DESC_F_WRITE);
			ASSERT_EQ(1U, ch_run(_metadata, vq, &c));
			ASSERT_STATUS(VIRTIO_BLK_S_IOERR, *st,
				      "IN at sector %#llx",
				      (unsigned long long)wraps[i]);
			expect_canary(_metadata, e, d, 4096 + 64,
				      "buffer of a failed IN");
			guest_release(&e->gm, mark);
		}
	}
	area_expect(_metadata, e, vq, AREA, 8, seed, NULL,
		    "after wrapping sectors");
}

TEST_F(hostile, sector_plus_length_overflow_is_ioerr)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	/* sector * 512 fits in 64 bits, adding the length does not. */
	const uint64_t sectors[] = { (1ULL << 55) - 1, (1ULL << 55) - 2,
				     ~0ULL >> 9, ~0ULL, ~0ULL - 1 };
	uint8_t buf[8192];
	unsigned int i, t;
	char what[80];

	for (i = 0; i < ARRAY_SIZE(sectors); i++) {
		for (t = 0; t < 2; t++) {
			uint32_t type = t ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN;

			memset(buf, 0x77, sizeof(buf));
			snprintf(what, sizeof(what), "%s of 8 KiB at sector %#llx",
				 type_name(type),
				 (unsigned long long)sectors[i]);
			expect_result(_metadata,
				      xfer(_metadata, e, vq, type, sectors[i],
					   buf, sizeof(buf), NULL),
				      VIRTIO_BLK_S_IOERR, 1, what);
		}
	}
	/* The largest in-range request still works. */
	rw_verify(_metadata, e, vq, e->sectors - 16, 8192, NULL, NULL);
}

/* ===================================================== directions */

TEST_F(hostile, header_in_a_device_writable_descriptor_is_ioerr)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e);
	unsigned int v;

	area_fill(_metadata, e, vq, AREA, 8, seed);
	for (v = 0; v < 3; v++) {
		size_t mark = guest_mark(&e->gm);
		uint8_t *b = galloc(_metadata, e, 17 + 512, 64, 0);
		uint8_t *st = galloc(_metadata, e, 1, 64, 0);
		struct virtio_blk_outhdr h = {
			.type = VIRTIO_BLK_T_OUT, .sector = AREA,
		};
		struct chain c = { .n = 0 };
		uint8_t *status;

		memcpy(b, &h, sizeof(h));
		memset(b + 16, 0x42, 512);
		if (v == 0) {
			/* One writable descriptor: header, data, status. */
			ch_add(&c, e, b, 16 + 512 + 1, VRING_DESC_F_WRITE);
			status = b + 16 + 512;
		} else if (v == 1) {
			/* Writable header, writable data. */
			ch_add(&c, e, b, 16, VRING_DESC_F_WRITE);
			ch_add(&c, e, b + 16, 512, VRING_DESC_F_WRITE);
			ch_add(&c, e, st, 1, VRING_DESC_F_WRITE);
			status = st;
		} else {
			/* Header split: 8 readable bytes, 8 writable. */
			ch_add(&c, e, b, 8, 0);
			ch_add(&c, e, b + 8, 8, VRING_DESC_F_WRITE);
			ch_add(&c, e, st, 1, VRING_DESC_F_WRITE);
			status = st;
		}
		ASSERT_EQ(1U, ch_run(_metadata, vq, &c)) TH_LOG("layout %u", v);
		ASSERT_STATUS(VIRTIO_BLK_S_IOERR, *status, "layout %u", v);
		ASSERT_EQ(0, memcmp(b, &h, 16)) TH_LOG("layout %u: header written", v);
		{
			unsigned int k;

			for (k = 0; k < 512; k++)
				ASSERT_EQ(0x42, b[16 + k])
					TH_LOG("layout %u: data byte %u written", v, k);
		}
		guest_release(&e->gm, mark);
	}
	area_expect(_metadata, e, vq, AREA, 8, seed, NULL,
		    "after writable headers");
}

TEST_F(hostile, header_shorter_than_16_bytes_is_ioerr)
{
	static const unsigned int lens[] = { 0, 1, 8, 15 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e);
	unsigned int i;

	area_fill(_metadata, e, vq, AREA, 8, seed);
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		struct virtio_blk_outhdr *h = ghdr(_metadata, e,
						   VIRTIO_BLK_T_OUT, AREA);
		uint8_t *st = galloc(_metadata, e, 1, 64, 0);
		struct chain c = { .n = 0 };

		/* Split in 1-byte pieces where there are any. */
		if (lens[i] == 0) {
			ch_add(&c, e, h, 0, 0);
		} else {
			unsigned int k;

			for (k = 0; k < lens[i] && k < 8; k++)
				ch_add(&c, e, (uint8_t *)h + k, 1, 0);
			if (lens[i] > 8)
				ch_add(&c, e, (uint8_t *)h + 8, lens[i] - 8, 0);
		}
		ch_add(&c, e, st, 1, VRING_DESC_F_WRITE);
		ASSERT_EQ(1U, ch_run(_metadata, vq, &c));
		ASSERT_STATUS(VIRTIO_BLK_S_IOERR, *st, "%u-byte header",
			      lens[i]);
		expect_canary(_metadata, e, st + 1, 64, "after the status");
	}
	area_expect(_metadata, e, vq, AREA, 8, seed, NULL,
		    "after short headers");
}

TEST_F(hostile, in_with_device_readable_data_is_ioerr_and_writes_nothing)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e);
	unsigned int v;

	area_fill(_metadata, e, vq, AREA, 8, seed);
	for (v = 0; v < 3; v++) {
		struct virtio_blk_outhdr *h = ghdr(_metadata, e,
						   VIRTIO_BLK_T_IN, AREA);
		uint8_t *rd = galloc(_metadata, e, 512, 512, 0);
		uint8_t *wr = galloc(_metadata, e, 4096, 512, 0);
		uint8_t *st = galloc(_metadata, e, 1, 64, 0);
		struct chain c = { .n = 0 };
		struct snap s;

		ch_add(&c, e, h, sizeof(*h), 0);
		/* 512 readable bytes, 1 readable byte, or readable only. */
		ch_add(&c, e, rd, v == 1 ? 1 : 512, 0);
		if (v < 2)
			ch_add(&c, e, wr, 4096, VRING_DESC_F_WRITE);
		ch_add(&c, e, st, 1, VRING_DESC_F_WRITE);
		ASSERT_EQ(1U, ch_run_snap(_metadata, e, vq, &c, &s));
		ASSERT_STATUS(VIRTIO_BLK_S_IOERR, *st, "IN, layout %u", v);
		snap_expect(_metadata, e, &e->dev, &s, st, 1,
			    "IN with readable data");
	}
}

TEST_F(hostile, out_with_device_writable_data_is_ioerr_and_writes_nothing)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e);
	unsigned int v;

	area_fill(_metadata, e, vq, AREA, 16, seed);
	for (v = 0; v < 3; v++) {
		struct virtio_blk_outhdr *h = ghdr(_metadata, e,
						   VIRTIO_BLK_T_OUT, AREA);
		uint8_t *rd = galloc(_metadata, e, 4096, 512, 0);
		uint8_t *wr = galloc(_metadata, e, 512, 512, 0);
		uint8_t *st = galloc(_metadata, e, 1 + 512, 64, 0);
		struct chain c = { .n = 0 };
		uint8_t *status = st;
		struct snap s;

		memset(rd, 0x99, 4096);
		ch_add(&c, e, h, sizeof(*h), 0);
		if (v != 2)
			ch_add(&c, e, rd, 4096, 0);
		if (v == 0) {
			ch_add(&c, e, wr, 512, VRING_DESC_F_WRITE);
			ch_add(&c, e, st, 1, VRING_DESC_F_WRITE);
		} else {
			/* Writable data shares the status descriptor. */
			ch_add(&c, e, st, 513, VRING_DESC_F_WRITE);
			status = st + 512;
		}
		ASSERT_EQ(1U, ch_run_snap(_metadata, e, vq, &c, &s));
		ASSERT_STATUS(VIRTIO_BLK_S_IOERR, *status, "OUT, layout %u", v);
		snap_expect(_metadata, e, &e->dev, &s, status, 1,
			    "OUT with writable data");
	}
	area_expect(_metadata, e, vq, AREA, 16, seed, NULL,
		    "after OUT with writable data");
}

/*
 * No device-writable byte: nowhere to put a status.  The module reports it
 * with vq_err() (the vq error eventfd), returns the head with used length
 * 0, executes nothing and writes nothing.
 */
TEST_F(hostile, chain_without_writable_byte_is_dropped_with_used_len_0)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e);
	unsigned int v;

	area_fill(_metadata, e, vq, AREA, 16, seed);
	for (v = 0; v < 6; v++) {
		static const uint32_t types[] = {
			VIRTIO_BLK_T_OUT, VIRTIO_BLK_T_OUT, VIRTIO_BLK_T_IN,
			VIRTIO_BLK_T_GET_ID, VIRTIO_BLK_T_WRITE_ZEROES,
			VIRTIO_BLK_T_FLUSH,
		};
		struct virtio_blk_outhdr *h = ghdr(_metadata, e, types[v], AREA);
		uint8_t *d = galloc(_metadata, e, 4096, 512, 0);
		struct chain c = { .n = 0 };
		struct snap s;

		ch_add(&c, e, h, sizeof(*h), 0);
		if (types[v] == VIRTIO_BLK_T_WRITE_ZEROES) {
			rseg((struct virtio_blk_discard_write_zeroes *)d, AREA, 16, 0);
			ch_add(&c, e, d, RSEG_SIZE, 0);
		} else if (v == 1) {
			/* Writable descriptors, all of length zero. */
			ch_add(&c, e, d, 4096, 0);
			ch_add(&c, e, d, 0, VRING_DESC_F_WRITE);
			ch_add(&c, e, d + 512, 0, VRING_DESC_F_WRITE);
		} else if (types[v] != VIRTIO_BLK_T_FLUSH) {
			ch_add(&c, e, d, 4096, 0);
		}
		hq_eventfd_read(self->err[0]);
		ASSERT_EQ(0U, ch_run_snap(_metadata, e, vq, &c, &s))
			TH_LOG("variant %u", v);
		ASSERT_LE(1ULL, hq_eventfd_read(self->err[0]))
			TH_LOG("variant %u: no vq_err()", v);
		snap_expect(_metadata, e, &e->dev, &s, NULL, 0,
			    "chain without a status byte");
	}
	/* Nothing was executed; the device still serves. */
	area_expect(_metadata, e, vq, AREA, 16, seed, NULL,
		    "after chains without status");
	rw_verify(_metadata, e, vq, AREA + 64, 4096, NULL, NULL);
	ASSERT_EQ(0ULL, hq_eventfd_read(self->err[0]));
}

TEST_F(hostile, get_id_into_a_short_buffer_writes_only_what_fits)
{
	static const uint32_t lens[] = { 1, 2, 7, 19, 20 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	unsigned int i, v;

	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		for (v = 0; v < 3; v++) {
			size_t mark = guest_mark(&e->gm);
			struct virtio_blk_outhdr *h =
				ghdr(_metadata, e, VIRTIO_BLK_T_GET_ID, 0);
			uint8_t *area = galloc(_metadata, e, 128, 64, 0);
			uint8_t *buf = area + 32, *st;
			struct chain c = { .n = 0 };
			uint32_t used, k = lens[i];

			ch_add(&c, e, h, sizeof(*h), 0);
			if (v == 0) {
				st = galloc(_metadata, e, 1, 64, 0);
				ch_add(&c, e, buf, k, VRING_DESC_F_WRITE);
				ch_add(&c, e, st, 1, VRING_DESC_F_WRITE);
			} else if (v == 1) {
				/* Buffer and status in one descriptor. */
				st = buf + k;
				ch_add(&c, e, buf, k + 1, VRING_DESC_F_WRITE);
			} else {
				/* Byte by byte, then the status. */
				uint32_t j;

				st = galloc(_metadata, e, 1, 64, 0);
				for (j = 0; j < k; j++)
					ch_add(&c, e, buf + j, 1,
					       VRING_DESC_F_WRITE);
				ch_add(&c, e, st, 1, VRING_DESC_F_WRITE);
			}
			used = ch_run(_metadata, vq, &c);
			ASSERT_STATUS(VIRTIO_BLK_S_OK, *st, "GET_ID into %u bytes",
				      k);
			ASSERT_EQ(k + 1, used) TH_LOG("GET_ID into %u bytes, layout %u",
						      k, v);
			expect_same(_metadata, TEST_SERIAL, buf, k, "serial");
			expect_canary(_metadata, e, area, 32, "before the buffer");
			expect_canary(_metadata, e, buf + k + (v == 1),
				      128 + 64 - 32 - k - (v == 1),
				      "after the buffer");
			guest_release(&e->gm, mark);
		}
	}
}

/* ===================================================== vhost core checks */

enum bad_kind { BAD_CHAIN, BAD_HEAD, BAD_IDX };

struct bad {
	enum bad_kind kind;
	struct vring_desc d[8];
	unsigned int n;
	uint16_t head;			/* BAD_HEAD: the bogus head */
};

/*
 * Post @b on queue 0 of a fresh 2-queue device and prove that the vhost
 * core rejects it: the vq error eventfd fires, nothing is answered, no byte
 * of guest memory is written (the used ring aside), a later kick hits the
 * same head again, queue 1 and a new device serve requests, and once the
 * guest puts a valid head in that avail slot (or restores the index) the
 * ring resumes.  That is what the vhost core does: it does not consume a
 * head it cannot parse.
 */
static void expect_core_reject(struct __test_metadata *_metadata,
			       FIXTURE_DATA(hostile) *self, struct bad *b,
			       const char *what)
{
	struct env *e = &self->e;
	struct vq *vq0, *vq1;
	struct virtio_blk_outhdr *rh;
	uint8_t *rid, *rst;
	struct vblk_dev other;
	uint16_t pos, used0, real = 0;
	struct vq_used u;
	int head = -1, fix;
	struct snap s;
	struct vring_desc fixd[3] = {};

	reopen(_metadata, self, 2);
	vq0 = &e->dev.vq[0];
	vq1 = &e->dev.vq[1];
	rw_verify(_metadata, e, vq0, AREA, 4096, NULL, NULL);

	/* The guest's fix, ready but not published: a GET_ID. */
	rh = ghdr(_metadata, e, VIRTIO_BLK_T_GET_ID, 0);
	rid = galloc(_metadata, e, VHOST_BLK_SERIAL_LEN, 64, 0);
	rst = galloc(_metadata, e, 1, 64, 0);
	fixd[0] = (struct vring_desc){ gpa_of(&e->gm, rh), 16,
				       VRING_DESC_F_NEXT, 1 };
	fixd[1] = (struct vring_desc){ gpa_of(&e->gm, rid),
				       VHOST_BLK_SERIAL_LEN,
				       VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2 };
	fixd[2] = (struct vring_desc){ gpa_of(&e->gm, rst), 1,
				       VRING_DESC_F_WRITE, 0 };
	fix = hq_add(vq0, fixd, 3, NULL, false);
	ASSERT_LE(0, fix);

	pos = vq0->avail_idx;
	switch (b->kind) {
	case BAD_CHAIN:
		head = hq_add(vq0, b->d, b->n, NULL, true);
		ASSERT_LE(0, head);
		break;
	case BAD_HEAD:
		vq_publish(vq0, b->head);
		break;
	case BAD_IDX:
		real = vq0->avail_idx;
		hq_set_avail_idx(vq0, (uint16_t)(real + vq0->num + 1));
		break;
	}
	used0 = vq0->used->idx;
	snap_take(_metadata, e, &s);
	hq_eventfd_read(self->err[0]);

	ASSERT_EQ(1, vq_kick_force(vq0));
	ASSERT_EQ(1, hq_wait_fd(self->err[0], vq_hang_timeout_ms()))
		TH_LOG("%s: the vhost core reported nothing", what);
	ASSERT_LE(1ULL, hq_eventfd_read(self->err[0]));
	usleep(50000);
	ASSERT_EQ(used0, vq0->used->idx) TH_LOG("%s was answered", what);
	snap_expect(_metadata, e, &e->dev, &s, NULL, 0, what);

	/* Kicked again, the core meets the same head again. */
	ASSERT_EQ(1, vq_kick_force(vq0));
	ASSERT_EQ(1, hq_wait_fd(self->err[0], vq_hang_timeout_ms()))
		TH_LOG("%s: no error on the second kick", what);
	hq_eventfd_read(self->err[0]);
	ASSERT_EQ(used0, vq0->used->idx);

	/* The other queue, and another device, serve. */
	rw_verify(_metadata, e, vq1, AREA + 16, 8192, NULL, NULL);
	ASSERT_EQ(0ULL, hq_eventfd_read(self->err[1]));
	ASSERT_EQ(0, env_open_dev(e, &other, 1, 16, 0));
	rw_verify(_metadata, e, &other.vq[0], AREA + 32, 4096, NULL, NULL);
	vblk_close(&other);
	ASSERT_EQ(used0, vq0->used->idx);

	/* The guest repairs its ring: the device resumes. */
	if (b->kind == BAD_IDX) {
		hq_set_avail_idx(vq0, real);
		vq_publish(vq0, (uint16_t)fix);
	} else {
		hq_set_avail_entry(vq0, pos, (uint16_t)fix);
	}
	ASSERT_EQ(1, vq_kick_force(vq0));
	ASSERT_EQ(0, vq_wait_used(vq0, &u, -1))
		TH_LOG("%s: the repaired ring did not resume", what);
	ASSERT_FALSE(u.bad);
	ASSERT_EQ((uint32_t)fix, u.id);
	ASSERT_EQ(VHOST_BLK_SERIAL_LEN + 1U, u.len);
	ASSERT_STATUS(VIRTIO_BLK_S_OK, *rst, "GET_ID after the repair");
	expect_same(_metadata, TEST_SERIAL, rid, VHOST_BLK_SERIAL_LEN,
		    "serial after the repair");
	if (head >= 0)
		hq_reclaim(vq0, (uint16_t)head);
	/* (A run that began before the swap may still have met it.) */
	hq_eventfd_read(self->err[0]);
	rw_verify(_metadata, e, vq0, AREA + 48, 16384, NULL, NULL);
	ASSERT_EQ(0ULL, hq_eventfd_read(self->err[0]))
		TH_LOG("%s: errors after the repair", what);
}

static struct vring_desc rd_desc(struct env *e, const void *p, uint32_t len,
				 uint16_t flags, uint16_t next)
{
	return (struct vring_desc){ gpa_of(&e->gm, p), len, flags, next };
}

/* A valid GET_ID chain's pieces, for the bad chains to be made of. */
struct pieces {
	struct virtio_blk_outhdr *h;
	uint8_t *data;			/* 4 KiB */
	uint8_t *st;
};

static void pieces(struct __test_metadata *_metadata, struct env *e,
		   struct pieces *p)
{
	p->h = ghdr(_metadata, e, VIRTIO_BLK_T_GET_ID, 0);
	p->data = galloc(_metadata, e, 4096, 512, 0);
	p->st = galloc(_metadata, e, 1, 64, 0);
}

TEST_F(hostile, core_rejects_a_descriptor_loop)
{
	struct env *e = &self->e;
	struct bad b = { .kind = BAD_CHAIN, .n = 3 };
	struct pieces p;

	pieces(_metadata, e, &p);
	/* Readable only, so that only the loop is wrong. */
	b.d[0] = rd_desc(e, p.h, 16, VRING_DESC_F_NEXT, 1);
	b.d[1] = rd_desc(e, p.data, 512, VRING_DESC_F_NEXT, 2);
	b.d[2] = rd_desc(e, p.data + 512, 512, VRING_DESC_F_NEXT, 0);
	expect_core_reject(_metadata, self, &b, "a loop of 3 descriptors");
}

TEST_F(hostile, core_rejects_a_descriptor_pointing_at_itself)
{
	struct env *e = &self->e;
	struct bad b = { .kind = BAD_CHAIN, .n = 1 };
	struct pieces p;

	pieces(_metadata, e, &p);
	b.d[0] = rd_desc(e, p.h, 16, VRING_DESC_F_NEXT, 0);
	expect_core_reject(_metadata, self, &b, "a descriptor pointing at itself");
}

TEST_F(hostile, core_rejects_a_writable_loop_longer_than_the_ring)
{
	struct env *e = &self->e;
	struct bad b = { .kind = BAD_CHAIN, .n = 4 };
	struct pieces p;

	pieces(_metadata, e, &p);
	b.d[0] = rd_desc(e, p.h, 16, VRING_DESC_F_NEXT, 1);
	b.d[1] = rd_desc(e, p.data, 1, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
	b.d[2] = rd_desc(e, p.data + 1, 1, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 3);
	b.d[3] = rd_desc(e, p.st, 1, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 1);
	expect_core_reject(_metadata, self, &b, "a writable loop");
}

TEST_F(hostile, core_rejects_a_next_index_outside_the_ring)
{
	struct env *e = &self->e;
	struct bad b = { .kind = BAD_CHAIN, .n = 2 };
	struct pieces p;

	pieces(_metadata, e, &p);
	b.d[0] = rd_desc(e, p.h, 16, VRING_DESC_F_NEXT, 1);
	b.d[1] = rd_desc(e, p.st, 1, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE,
			 VQ_DEFAULT_NUM);
	expect_core_reject(_metadata, self, &b, "next == ring size");
}

TEST_F(hostile, core_rejects_addresses_outside_guest_memory)
{
	struct env *e = &self->e;
	const uint64_t end = e->gm.gpa + e->gm.size;
	const struct { uint64_t addr; uint32_t len; const char *what; } bad[] = {
		{ end, 16, "header just past the end of memory" },
		{ end - 8, 16, "header across the end of memory" },
		{ e->gm.gpa - 16, 16, "header just below memory" },
		{ e->gm.gpa - 8, 16, "header across the start of memory" },
		{ 0, 16, "header at address 0" },
		{ ~0ULL - 7, 16, "header wrapping past 2^64" },
		{ e->gm.gpa, 0xffffffffU, "4 GiB from the start of memory" },
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		struct bad b = { .kind = BAD_CHAIN, .n = 2 };
		struct pieces p;

		pieces(_metadata, e, &p);
		b.d[0] = (struct vring_desc){ bad[i].addr, bad[i].len,
					      VRING_DESC_F_NEXT, 1 };
		b.d[1] = rd_desc(e, p.st, 1, VRING_DESC_F_WRITE, 0);
		expect_core_reject(_metadata, self, &b, bad[i].what);
	}
	/* A writable status outside memory. */
	{
		struct bad b = { .kind = BAD_CHAIN, .n = 2 };
		struct pieces p;

		pieces(_metadata, e, &p);
		b.d[0] = rd_desc(e, p.h, 16, VRING_DESC_F_NEXT, 1);
		b.d[1] = (struct vring_desc){ end, 1, VRING_DESC_F_WRITE, 0 };
		expect_core_reject(_metadata, self, &b, "status past the end");
	}
}

/* An indirect table of @n entries in guest memory, entries from @d. */
static uint64_t table(struct __test_metadata *_metadata, struct env *e,
		      const struct vring_desc *d, unsigned int n)
{
	struct vring_desc *t = guest_alloc(&e->gm, 16 * (n ? n : 1), 16);

	ASSERT_NE(NULL, t);
	memcpy(t, d, 16 * n);
	return gpa_of(&e->gm, t);
}

TEST_F(hostile, core_rejects_an_indirect_table_outside_guest_memory)
{
	struct env *e = &self->e;
	struct bad b = { .kind = BAD_CHAIN, .n = 1 };

	b.d[0] = (struct vring_desc){ e->gm.gpa + e->gm.size - 16, 48,
				      VRING_DESC_F_INDIRECT, 0 };
	expect_core_reject(_metadata, self, &b, "indirect table across the end");
}

TEST_F(hostile, core_rejects_an_indirect_length_not_multiple_of_16)
{
	struct env *e = &self->e;
	struct pieces p;
	struct vring_desc t[3];
	unsigned int lens[] = { 47, 40, 1 }, i;
	uint64_t ta;

	pieces(_metadata, e, &p);
	t[0] = rd_desc(e, p.h, 16, VRING_DESC_F_NEXT, 1);
	t[1] = rd_desc(e, p.data, 20, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
	t[2] = rd_desc(e, p.st, 1, VRING_DESC_F_WRITE, 0);
	ta = table(_metadata, e, t, 3);
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		struct bad b = { .kind = BAD_CHAIN, .n = 1 };

		b.d[0] = (struct vring_desc){ ta, lens[i], VRING_DESC_F_INDIRECT,
					      0 };
		expect_core_reject(_metadata, self, &b,
				   "indirect length not a multiple of 16");
	}
}

TEST_F(hostile, core_rejects_an_empty_indirect_table)
{
	struct env *e = &self->e;
	struct bad b = { .kind = BAD_CHAIN, .n = 1 };
	struct pieces p;

	pieces(_metadata, e, &p);
	b.d[0] = (struct vring_desc){ gpa_of(&e->gm, p.data), 0,
				      VRING_DESC_F_INDIRECT, 0 };
	expect_core_reject(_metadata, self, &b, "indirect table of length 0");
}

TEST_F(hostile, core_rejects_an_indirect_table_that_loops)
{
	struct env *e = &self->e;
	struct bad b = { .kind = BAD_CHAIN, .n = 1 };
	struct vring_desc t[2];
	struct pieces p;

	pieces(_metadata, e, &p);
	/* The last entry chains back to the first. */
	t[0] = rd_desc(e, p.h, 16, VRING_DESC_F_NEXT, 1);
	t[1] = rd_desc(e, p.st, 1, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 0);
	b.d[0] = (struct vring_desc){ table(_metadata, e, t, 2), 32,
				      VRING_DESC_F_INDIRECT, 0 };
	expect_core_reject(_metadata, self, &b, "an indirect table that loops");
}

TEST_F(hostile, core_rejects_a_nested_indirect_table)
{
	struct env *e = &self->e;
	struct bad b = { .kind = BAD_CHAIN, .n = 1 };
	struct vring_desc inner[2], outer[2];
	struct pieces p;

	pieces(_metadata, e, &p);
	inner[0] = rd_desc(e, p.data, 20, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 1);
	inner[1] = rd_desc(e, p.st, 1, VRING_DESC_F_WRITE, 0);
	outer[0] = rd_desc(e, p.h, 16, VRING_DESC_F_NEXT, 1);
	outer[1] = (struct vring_desc){ table(_metadata, e, inner, 2), 32,
					VRING_DESC_F_INDIRECT, 0 };
	b.d[0] = (struct vring_desc){ table(_metadata, e, outer, 2), 32,
				      VRING_DESC_F_INDIRECT, 0 };
	expect_core_reject(_metadata, self, &b, "a nested indirect table");
}

TEST_F(hostile, core_rejects_readable_after_writable)
{
	struct env *e = &self->e;
	struct bad b = { .kind = BAD_CHAIN, .n = 3 };
	struct pieces p;

	pieces(_metadata, e, &p);
	b.d[0] = rd_desc(e, p.h, 16, VRING_DESC_F_NEXT, 1);
	b.d[1] = rd_desc(e, p.st, 1, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
	b.d[2] = rd_desc(e, p.data, 512, 0, 0);
	expect_core_reject(_metadata, self, &b, "readable after writable");
}

TEST_F(hostile, core_rejects_an_avail_head_outside_the_ring)
{
	static const uint16_t heads[] = { VQ_DEFAULT_NUM, 0xffff };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(heads); i++) {
		struct bad b = { .kind = BAD_HEAD, .head = heads[i] };

		expect_core_reject(_metadata, self, &b, "avail head >= ring size");
	}
}

TEST_F(hostile, core_rejects_an_avail_index_jump)
{
	struct bad b = { .kind = BAD_IDX };

	expect_core_reject(_metadata, self, &b, "avail index + ring size + 1");
}

/* Header, @nseg 512-byte data segments (OUT), status: in one table. */
static uint64_t long_out_table(struct __test_metadata *_metadata,
			       struct env *e, unsigned int nseg,
			       const uint8_t *data, uint8_t **st)
{
	struct vring_desc *t = xmalloc(_metadata, 16 * (nseg + 2));
	struct virtio_blk_outhdr *h = ghdr(_metadata, e, VIRTIO_BLK_T_OUT, AREA);
	unsigned int i;
	uint64_t ta;

	*st = galloc(_metadata, e, 1, 64, 0);
	t[0] = rd_desc(e, h, 16, VRING_DESC_F_NEXT, 1);
	for (i = 0; i < nseg; i++)
		t[1 + i] = rd_desc(e, data + 512 * i, 512, VRING_DESC_F_NEXT,
				   (uint16_t)(2 + i));
	t[nseg + 1] = rd_desc(e, *st, 1, VRING_DESC_F_WRITE, 0);
	ta = table(_metadata, e, t, nseg + 2);
	free(t);
	return ta;
}

TEST_F_TIMEOUT(hostile, chain_of_1024_descriptors_is_served_1025_rejected, 60)
{
	struct env *e = &self->e;
	const unsigned int nseg = VHOST_BLK_SEG_MAX;	/* 1022 */
	size_t len = (size_t)(nseg + 1) * 512;
	uint8_t *data, *st, *pat = xmalloc(_metadata, len);
	struct chain c = { .n = 0 };
	uint64_t seed = new_seed(e), ta;

	/* 1 + 1022 + 1 descriptors: the maximum, served. */
	data = galloc(_metadata, e, len, 512, 0);
	pattern_fill(pat, len, seed, AREA * SECTOR);
	memcpy(data, pat, len);
	ta = long_out_table(_metadata, e, nseg, data, &st);
	c.d[0] = (struct vring_desc){ ta, 16 * (nseg + 2),
				      VRING_DESC_F_INDIRECT, 0 };
	c.n = 1;
	ASSERT_EQ(1U, ch_run(_metadata, &e->dev.vq[0], &c));
	ASSERT_STATUS(VIRTIO_BLK_S_OK, *st, "1022 data segments");
	verify_pattern(_metadata, e, &e->dev.vq[0], AREA, nseg * 512, seed);

	/* One segment more: 1025 iovecs, the core refuses it. */
	{
		struct bad b = { .kind = BAD_CHAIN, .n = 1 };
		uint64_t seed2 = new_seed(e);

		pattern_fill(pat, len, seed2, AREA * SECTOR);
		memcpy(data, pat, len);
		ta = long_out_table(_metadata, e, nseg + 1, data, &st);
		b.d[0] = (struct vring_desc){ ta, 16 * (nseg + 3),
					      VRING_DESC_F_INDIRECT, 0 };
		expect_core_reject(_metadata, self, &b, "1025 descriptors");
		/* expect_core_reject() wrote AREA .. AREA + 128 itself. */
		verify_pattern(_metadata, e, &e->dev.vq[0], AREA + 128,
			       (nseg - 128) * 512, seed);
	}
	free(pat);
}

/*
 * A guest that makes its used ring unwritable loses the answers: each
 * one is counted (used_errors) and reported on the vq's error eventfd,
 * and the host does not mind.
 */
TEST_F_TIMEOUT(hostile, unwritable_used_ring_is_counted_and_reported, 60)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint32_t len = 4096;
	struct blk_req_spec spec = {
		.type = VIRTIO_BLK_T_IN, .nseg = 1, .seg_len = &len,
		.sector = AREA,
	};
	struct vhost_blk_vring_stats st;
	struct blk_req req;
	void *page;
	int i;

	arm_err(_metadata, self);
	rw_verify(_metadata, e, vq, AREA, 4096, NULL, NULL);
	ASSERT_EQ(0, blk_req_prep(&req, &e->gm, &spec));
	ASSERT_EQ(0, blk_req_post(vq, &req));
	/* vq_init() gives the used ring a page of its own, first. */
	page = (void *)((uintptr_t)vq->used & ~(uintptr_t)4095);
	ASSERT_EQ(vq->used, page);
	ASSERT_EQ(0, mprotect(page, 4096, PROT_READ));
	ASSERT_EQ(1, vq_kick_force(vq));

	/* The read itself is done, and its status written; then lost. */
	for (i = 0; i < vq_hang_timeout_ms(); i++) {
		ASSERT_EQ(0, hq_stats(e->dev.fd, 0, false, &st));
		if (st.used_errors)
			break;
		usleep(1000);
	}
	ASSERT_EQ(0, mprotect(page, 4096, PROT_READ | PROT_WRITE));
	EXPECT_EQ(1U, st.used_errors);
	ASSERT_STATUS(VIRTIO_BLK_S_OK, *req.status, "the read whose answer was lost");
	EXPECT_EQ(0, vq_used_pending(vq));
	EXPECT_NE(0U, hq_eventfd_read(self->err[0]))
		TH_LOG("no vq_err() on the error eventfd");
	blk_req_free(&req);
}

/* ===================================================== bounded work */

#define TRACEFS		"/sys/kernel/tracing"

static int write_file(const char *path, const char *str)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, str, strlen(str));
	close(fd);
	return n == (ssize_t)strlen(str) ? 0 : -EIO;
}

/*
 * From the vhost_blk_req_submit trace (requests in the order the worker
 * took them): how many queue-0 requests came before the first of queue 1,
 * and how many of each in all.
 */
static void trace_order(unsigned int *before, unsigned int *n0,
			unsigned int *n1)
{
	FILE *f = fopen(TRACEFS "/trace", "r");
	char line[512];
	bool seen1 = false;

	*before = *n0 = *n1 = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, "vhost_blk_req_submit:"))
			continue;
		if (strstr(line, " vq=0 ")) {
			++*n0;
			if (!seen1)
				++*before;
		} else if (strstr(line, " vq=1 ")) {
			++*n1;
			seen1 = true;
		}
	}
	fclose(f);
}

/*
 * Queue 0 holds @n requests of @type: reads of @len bytes each into one
 * shared buffer @data, or DISCARDs whose range table (@len bytes) is
 * @data; queue 1 a GET_ID, all posted while no backend is attached;
 * attaching starts queue 0 first.  Returns how many queue-0 requests the
 * worker took before the one of queue 1, from the trace.
 */
static unsigned int flood_round(struct __test_metadata *_metadata,
				struct env *e, struct vblk_dev *dev,
				uint32_t type, uint8_t *data, unsigned int n,
				uint32_t len)
{
	bool read = type == VIRTIO_BLK_T_IN;
	struct vq *q0 = &dev->vq[0], *q1 = &dev->vq[1];
	size_t mark = guest_mark(&e->gm);
	unsigned int i, before, n0, n1;
	struct virtio_blk_outhdr *h;
	uint8_t *st, *id, *st1;
	struct vring_desc d[3];
	struct vq_used u;

	st = galloc(_metadata, e, n, 64, 0);
	for (i = 0; i < n; i++) {
		struct vring_desc ind;

		h = ghdr(_metadata, e, type, AREA + (i % 64) * 8);
		d[0] = rd_desc(e, h, 16, VRING_DESC_F_NEXT, 1);
		d[1] = rd_desc(e, data, len, VRING_DESC_F_NEXT |
			       (read ? VRING_DESC_F_WRITE : 0), 2);
		d[2] = rd_desc(e, st + i, 1, VRING_DESC_F_WRITE, 0);
		ind = (struct vring_desc){ table(_metadata, e, d, 3), 48,
					   VRING_DESC_F_INDIRECT, 0 };
		ASSERT_LE(0, hq_add(q0, &ind, 1, st + i, true));
	}
	h = ghdr(_metadata, e, VIRTIO_BLK_T_GET_ID, 0);
	id = galloc(_metadata, e, VHOST_BLK_SERIAL_LEN, 64, 0);
	st1 = galloc(_metadata, e, 1, 64, 0);
	d[0] = rd_desc(e, h, 16, VRING_DESC_F_NEXT, 1);
	d[1] = rd_desc(e, id, VHOST_BLK_SERIAL_LEN,
		       VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
	d[2] = rd_desc(e, st1, 1, VRING_DESC_F_WRITE, 0);
	ASSERT_LE(0, hq_add(q1, d, 3, st1, true));

	ASSERT_EQ(0, write_file(TRACEFS "/trace", ""));
	ASSERT_EQ(0, write_file(TRACEFS "/tracing_on", "1"));
	ASSERT_EQ(0, vblk_set_backend(dev->fd, e->backend_fd));

	/* A hang guard only: a run of queue 0 may be slow, not long. */
	ASSERT_EQ(0, vq_wait_used(q1, &u, 120000));
	ASSERT_STATUS(VIRTIO_BLK_S_OK, *st1, "GET_ID on queue 1");
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, vq_wait_used(q0, &u, 60000))
			TH_LOG("%u of %u answered on queue 0", i, n);
		ASSERT_FALSE(u.bad);
		ASSERT_EQ(read ? len + 1 : 1, u.len);
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *(uint8_t *)u.token,
			      "request of type %u on queue 0", type);
	}
	ASSERT_EQ(0, write_file(TRACEFS "/tracing_on", "0"));
	ASSERT_EQ(0, vblk_set_backend(dev->fd, -1));
	trace_order(&before, &n0, &n1);
	ASSERT_EQ(n, n0) TH_LOG("trace lost events: %u of %u", n0, n);
	ASSERT_EQ(1U, n1);
	guest_release(&e->gm, mark);
	return before;
}

/*
 * Flood queue 0 with @n requests of @type (reads of @len bytes, or
 * DISCARDs of the @nr ranges in @tab), @rounds times, while queue 1 asks
 * for one GET_ID each time: queue 1 must be served after at most
 * @max_before queue-0 requests (without a bound on a worker run it would
 * wait for all @n).  The per-queue counters must add up.
 */
static void flood_type(struct __test_metadata *_metadata, struct env *e,
		       uint32_t type, unsigned int n, uint32_t len,
		       const struct virtio_blk_discard_write_zeroes *tab,
		       unsigned int rounds, unsigned int max_before)
{
	struct vblk_config cfg = {
		.nvqs = 2, .num = n < 64 ? 64 : n, .max_indirect = 4,
		.features = VBLK_FEATURES_ALL, .backend_fd = -1,
	};
	struct vhost_blk_vring_stats s0, s1;
	unsigned int before[8], r;
	struct vblk_dev dev;
	uint64_t features;
	uint8_t *data;

	if (access(TRACEFS "/events/vhost_blk/vhost_blk_req_submit", F_OK))
		SKIP(return, "no vhost_blk tracepoints in " TRACEFS);
	ASSERT_GE(ARRAY_SIZE(before), rounds);
	ASSERT_EQ(0, write_file(TRACEFS "/tracing_on", "0"));
	ASSERT_EQ(0, write_file(TRACEFS "/buffer_size_kb", "4096"));
	/* One order across CPUs, should the worker migrate. */
	ASSERT_EQ(0, write_file(TRACEFS "/trace_clock", "global"));
	ASSERT_EQ(0, write_file(TRACEFS "/events/vhost_blk/vhost_blk_req_submit/enable",
				"1"));

	/* Opened with no backend: accept the backend's features by hand. */
	features = e->dev.features;
	vblk_close(&e->dev);
	ASSERT_EQ(0, vblk_open(&dev, &e->gm, &cfg));
	dev.features |= features & VBLK_FEATURES_BACKEND;
	ASSERT_EQ(0, vblk_set_features(dev.fd, dev.features));
	data = galloc(_metadata, e, len, 4096, 0);
	if (tab)
		memcpy(data, tab, len);
	for (r = 0; r < rounds; r++)
		before[r] = flood_round(_metadata, e, &dev, type, data, n, len);
	ASSERT_EQ(0, hq_stats(dev.fd, 0, false, &s0));
	ASSERT_EQ(0, hq_stats(dev.fd, 1, false, &s1));
	vblk_close(&dev);
	write_file(TRACEFS "/events/vhost_blk/vhost_blk_req_submit/enable", "0");
	write_file(TRACEFS "/trace_clock", "local");

	for (r = 0; r < rounds; r++)
		TH_LOG("round %u: queue 1 was served after %u of the %u requests of queue 0",
		       r, before[r], n);
	if (type == VIRTIO_BLK_T_IN) {
		ASSERT_EQ((uint64_t)rounds * n, s0.reqs_in);
		ASSERT_EQ((uint64_t)rounds * n * len, s0.bytes_read);
	} else {
		ASSERT_EQ((uint64_t)rounds * n, s0.reqs_discard);
	}
	ASSERT_EQ(0ULL, s0.reqs_ioerr);
	ASSERT_EQ((uint64_t)rounds, s1.reqs_get_id);
	ASSERT_EQ(0ULL, s1.reqs_in);
	for (r = 0; r < rounds; r++)
		ASSERT_GE(max_before, before[r])
			TH_LOG("round %u: queue 1 waited for %u requests of queue 0",
			       r, before[r]);
}

static void flood(struct __test_metadata *_metadata, struct env *e,
		  unsigned int n, uint32_t len, unsigned int rounds,
		  unsigned int max_before)
{
	flood_type(_metadata, e, VIRTIO_BLK_T_IN, n, len, NULL, rounds,
		   max_before);
}

TEST_F_TIMEOUT(hostile, flooded_ring_yields_to_another_queue_every_256_requests,
	       180)
{
	/* One run takes at most 256, and queue 1's run is queued next. */
	flood(_metadata, &self->e, 1024, 4096, 4, 256);
}

TEST_F_TIMEOUT(hostile, flooded_ring_yields_to_another_queue_every_8_mib, 180)
{
	/* 1 MiB each: a run stops after 8, then queue 1's run comes. */
	flood(_metadata, &self->e, 64, 1 << 20, 2, 8);
}

/*
 * A range request weighs the bytes of its ranges: 32 ranges of 128 MiB
 * (the test disks' first 128 MiB, over and over) are 4 GiB, past the
 * 8 MiB of a run at once, and a multiple of 4 GiB, which an int would
 * wrap to 0.  Four of them: a disk may take seconds over each (null_blk
 * frees its sectors one by one).
 */
TEST_F_TIMEOUT(hostile, flooded_ring_yields_after_each_range_request_over_8_mib,
	       300)
{
	struct virtio_blk_discard_write_zeroes tab[32];
	const uint32_t sectors = (128 * MiB) / SECTOR;
	struct env *e = &self->e;
	unsigned int i;

	ASSERT_LE(sectors, e->sectors);
	/* brd before 6.9 (Debian's 6.1 kernel): answered UNSUPP, no I/O. */
	if (discard_kind(e).status != VIRTIO_BLK_S_OK)
		SKIP(return, "%s has no discard", e->path);
	for (i = 0; i < ARRAY_SIZE(tab); i++)
		tab[i] = range(0, sectors, 0);
	flood_type(_metadata, e, VIRTIO_BLK_T_DISCARD, 4, sizeof(tab), tab,
		   1, 1);
}

/* ===================================================== bounce budget */

/* Bounce pages a ring may hold (VHOST_BLK_BOUNCE_BUDGET, datapath.rst). */
#define BOUNCE_BUDGET	(4ULL << 20)

/*
 * Post @n requests of @type and @len bytes each, from or into @bufs and
 * from @sector on, all at once with one kick; every one must be answered
 * OK with the right used length.
 */
static void bounce_flood(struct __test_metadata *_metadata, struct env *e,
			 struct vq *vq, uint32_t type, uint8_t **bufs,
			 unsigned int n, uint32_t len, uint64_t sector)
{
	uint16_t dir = type == VIRTIO_BLK_T_IN ? VRING_DESC_F_WRITE : 0;
	uint8_t *st = galloc(_metadata, e, n, 64, 0);
	struct virtio_blk_outhdr *h;
	struct vring_desc d[3];
	struct vq_used u;
	unsigned int i;

	for (i = 0; i < n; i++) {
		h = ghdr(_metadata, e, type, sector + (uint64_t)i * (len / SECTOR));
		d[0] = rd_desc(e, h, 16, VRING_DESC_F_NEXT, 1);
		d[1] = rd_desc(e, bufs[i], len, VRING_DESC_F_NEXT | dir, 2);
		d[2] = rd_desc(e, st + i, 1, VRING_DESC_F_WRITE, 0);
		ASSERT_LE(0, hq_add(vq, d, 3, st + i, true));
	}
	ASSERT_EQ(1, vq_kick_force(vq));
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, vq_wait_used(vq, &u, 60000))
			TH_LOG("%u of %u %s requests answered", i, n,
			       type_name(type));
		ASSERT_FALSE(u.bad);
		ASSERT_EQ(type == VIRTIO_BLK_T_IN ? len + 1 : 1, u.len);
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *(uint8_t *)u.token,
			      "misaligned %s", type_name(type));
	}
}

/*
 * A ring full of buffers that direct I/O cannot take (one byte off a
 * sector boundary) is served through bounce pages, but never more than
 * the budget of them at once: the request that would go over waits, on
 * the ring, for earlier ones to be answered.  One run of the worker takes
 * four 1 MiB requests, so the fifth waits whatever the backend's speed.
 */
TEST_F_TIMEOUT(hostile, misaligned_flood_holds_at_most_4_mib_of_bounce_pages,
	       120)
{
	enum { N = 8 };
	const uint32_t len = 1 << 20;
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	size_t mark = guest_mark(&e->gm);
	uint8_t *bufs[N], *want = xmalloc(_metadata, len);
	struct vhost_blk_vring_stats s;
	uint64_t seed = new_seed(e);
	unsigned int i;

	ASSERT_EQ(0, hq_stats(e->dev.fd, 0, true, &s));
	for (i = 0; i < N; i++) {
		bufs[i] = galloc(_metadata, e, len, 4096, 1);
		pattern_fill(bufs[i], len, seed,
			     (AREA + (uint64_t)i * (len / SECTOR)) * SECTOR);
	}
	bounce_flood(_metadata, e, vq, VIRTIO_BLK_T_OUT, bufs, N, len, AREA);
	for (i = 0; i < N; i++)
		memset(bufs[i], 0, len);
	bounce_flood(_metadata, e, vq, VIRTIO_BLK_T_IN, bufs, N, len, AREA);
	for (i = 0; i < N; i++) {
		pattern_fill(want, len, seed,
			     (AREA + (uint64_t)i * (len / SECTOR)) * SECTOR);
		expect_same(_metadata, want, bufs[i], len, "misaligned read");
		expect_canary(_metadata, e, bufs[i] + len, 64,
			      "after a misaligned read");
	}

	ASSERT_EQ(0, hq_stats(e->dev.fd, 0, false, &s));
	TH_LOG("bounced %llu requests, waited %llu times, at most %llu bytes",
	       (unsigned long long)s.reqs_bounced,
	       (unsigned long long)s.bounce_waits,
	       (unsigned long long)s.bounce_bytes_max);
	ASSERT_EQ(2ULL * N, s.reqs_bounced);
	ASSERT_EQ(BOUNCE_BUDGET, s.bounce_bytes_max);
	ASSERT_LE(2ULL, s.bounce_waits);
	ASSERT_EQ(0ULL, s.reqs_ioerr);
	ASSERT_EQ((uint64_t)N * len, s.bytes_read);
	ASSERT_EQ((uint64_t)N * len, s.bytes_written);
	guest_release(&e->gm, mark);
	free(want);
}

TEST_HARNESS_MAIN
