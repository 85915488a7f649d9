// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk completion polling (VHOST_BLK_POLL_COMPLETIONS): a busy-polled
 * queue that offers it has its reads and writes submitted REQ_POLLED and
 * reaped by bio_poll() on a device with poll queues, and completes them
 * by interrupt everywhere else; the data is right either way, and
 * detaching or closing with polled bios in flight does not hang.  Every
 * assertion is on counters (polled_bios, poll_reaped, poll_fallbacks)
 * and data, never on time.
 *
 * The program brings its own backends, whatever VHOST_BLK_TEST_DEV says:
 * memory-backed null_blk devices made through configfs, with and without
 * poll queues, and a scratch file.  Where null_blk's configfs or its poll
 * queues are missing, the tests are skipped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kselftest_harness.h"

#include "vblk_test.h"

#define NULLB_CONFIGFS	"/sys/kernel/config/nullb"
#define NULLB_PARAMS	"/sys/module/null_blk/parameters"
/* A window far longer than any turnaround of the guest model, even on TCG. */
#define POLL_US		2000000
/* Requests in flight at once in the teardown tests. */
#define DEPTH		32

struct nullb {
	char dir[128];			/* configfs directory; "" if none */
	char dev[128];			/* its block device */
};

struct nullb_spec {
	const char *tag;		/* names it, with the pid */
	unsigned int poll_queues;
	unsigned int max_sectors;	/* 0: null_blk's default */
	unsigned int hw_queue_depth;	/* 0: null_blk's default (64) */
};

static int write_attr(const char *dir, const char *attr, unsigned int val)
{
	char path[192], buf[16];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, attr);
	snprintf(buf, sizeof(buf), "%u", val);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, strlen(buf)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static int read_uint(const char *path, unsigned int *val)
{
	FILE *f = fopen(path, "r");
	int ret;

	if (!f)
		return -errno;
	ret = fscanf(f, "%u", val) == 1 ? 0 : -EINVAL;
	fclose(f);
	return ret;
}

static void nullb_destroy(struct nullb *nb)
{
	if (!nb->dir[0])
		return;
	write_attr(nb->dir, "power", 0);
	rmdir(nb->dir);
	nb->dir[0] = 0;
}

/*
 * Make a 256 MiB memory-backed blk-mq null_blk as @spec says.  0; or
 * KSFT_SKIP, or -1 for a failure, with the reason in @why.
 */
static int nullb_create(struct nullb *nb, const struct nullb_spec *spec,
			char *why, size_t whylen)
{
	const char *name;
	unsigned int val;
	char path[192];
	int i;

	nb->dir[0] = 0;
	if (access(NULLB_CONFIGFS, F_OK)) {
		snprintf(why, whylen, "no %s (null_blk not loaded?)",
			 NULLB_CONFIGFS);
		return KSFT_SKIP;
	}
	/* Devices made through configfs get at most the module's number. */
	if (spec->poll_queues &&
	    (read_uint(NULLB_PARAMS "/poll_queues", &val) ||
	     val < spec->poll_queues)) {
		snprintf(why, whylen, "null_blk has no poll queues (module parameter poll_queues)");
		return KSFT_SKIP;
	}
	snprintf(nb->dir, sizeof(nb->dir), "%s/vbcpoll-%d-%s", NULLB_CONFIGFS,
		 getpid(), spec->tag);
	if (mkdir(nb->dir, 0755)) {
		snprintf(why, whylen, "mkdir %s: %s", nb->dir, strerror(errno));
		nb->dir[0] = 0;
		return -1;
	}
	snprintf(path, sizeof(path), "%s/poll_queues", nb->dir);
	if (access(path, F_OK)) {
		snprintf(why, whylen, "this null_blk has no poll_queues attribute");
		nullb_destroy(nb);
		return KSFT_SKIP;
	}
	if (write_attr(nb->dir, "queue_mode", 2) ||
	    write_attr(nb->dir, "size", 256) ||
	    write_attr(nb->dir, "memory_backed", 1) ||
	    write_attr(nb->dir, "blocksize", 512) ||
	    write_attr(nb->dir, "poll_queues", spec->poll_queues) ||
	    (spec->max_sectors &&
	     write_attr(nb->dir, "max_sectors", spec->max_sectors)) ||
	    (spec->hw_queue_depth &&
	     write_attr(nb->dir, "hw_queue_depth", spec->hw_queue_depth)) ||
	    write_attr(nb->dir, "power", 1)) {
		snprintf(why, whylen, "cannot set up %s", nb->dir);
		nullb_destroy(nb);
		return -1;
	}
	/* Named after the configfs directory since 6.x, nullbN before. */
	name = strrchr(nb->dir, '/') + 1;
	snprintf(path, sizeof(path), "%s/index", nb->dir);
	if (read_uint(path, &val))
		val = ~0U;
	for (i = 0; i < 100; i++) {
		snprintf(nb->dev, sizeof(nb->dev), "/dev/%s", name);
		if (!access(nb->dev, F_OK))
			return 0;
		snprintf(nb->dev, sizeof(nb->dev), "/dev/nullb%u", val);
		if (!access(nb->dev, F_OK))
			return 0;
		usleep(50000);
	}
	snprintf(why, whylen, "no block device appeared for %s", nb->dir);
	nullb_destroy(nb);
	return -1;
}

/* Whether the block device @fd polls: its queue's io_poll. */
static bool backend_polls(int fd)
{
	return backend_queue_limit(fd, "io_poll") == 1;
}

FIXTURE(cpoll) {
	struct env e;
	struct nullb polling;		/* the device under test */
	struct nullb other;		/* another, made by a test */
	int other_fd;
	char file[320];			/* a scratch file; "" if none */
	int file_fd;
};

FIXTURE_SETUP(cpoll)
{
	const struct nullb_spec spec = { .tag = "poll", .poll_queues = 1 };
	char why[160];
	int ret;

	memset(&self->e, 0, sizeof(self->e));
	self->e.backend_fd = -1;
	self->e.dev.fd = -1;
	self->e.features = VBLK_FEATURES_ALL;
	self->polling.dir[0] = 0;
	self->other.dir[0] = 0;
	self->other_fd = -1;
	self->file[0] = 0;
	self->file_fd = -1;

	if (access(VBLK_DEV_PATH, F_OK)) {
		ASSERT_FALSE(env_strict())
			TH_LOG("%s does not exist (is vhost_blk loaded?) (VHOST_BLK_TEST_STRICT)",
			       VBLK_DEV_PATH);
		SKIP(return, "%s does not exist (is vhost_blk loaded?)",
		     VBLK_DEV_PATH);
	}
	ret = nullb_create(&self->polling, &spec, why, sizeof(why));
	if (ret == KSFT_SKIP)
		SKIP(return, "%s", why);
	ASSERT_EQ(0, ret) TH_LOG("%s", why);
	env_attach(_metadata, &self->e, self->polling.dev);
	if (!backend_polls(self->e.backend_fd))
		SKIP(return, "%s has poll queues but its io_poll is 0",
		     self->polling.dev);
}

FIXTURE_TEARDOWN(cpoll)
{
	env_teardown(&self->e);
	if (self->other_fd >= 0)
		close(self->other_fd);
	if (self->file_fd >= 0)
		close(self->file_fd);
	if (self->file[0])
		unlink(self->file);
	nullb_destroy(&self->other);
	nullb_destroy(&self->polling);
}

/* Busy-poll queue 0 for @us (0: off), with the poll flags @flags. */
static void set_polling(struct __test_metadata *_metadata, struct env *e,
			unsigned int us, uint32_t flags)
{
	struct vhost_vring_state t = { .index = 0, .num = us };
	struct vhost_blk_vring_poll p = { .index = 0, .flags = flags };

	ASSERT_EQ(0, VBLK_IOCTL(e->dev.fd, VHOST_SET_VRING_BUSYLOOP_TIMEOUT,
				&t));
	ASSERT_EQ(0, VBLK_IOCTL(e->dev.fd, VHOST_BLK_SET_VRING_POLL, &p));
	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, VHOST_BLK_STATS_RESET,
				    &(struct vhost_blk_vring_stats){ 0 }));
}

static struct vhost_blk_vring_stats stats0(struct __test_metadata *_metadata,
					   struct env *e)
{
	struct vhost_blk_vring_stats st;

	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, 0, &st));
	return st;
}

/*
 * Switch the test's device to another null_blk, made as @spec says.
 * False if the test is to be skipped (said so).
 */
static bool use_other_nullb(struct __test_metadata *_metadata,
			    FIXTURE_DATA(cpoll) *self,
			    const struct nullb_spec *spec)
{
	char why[160];
	int ret;

	ret = nullb_create(&self->other, spec, why, sizeof(why));
	if (ret == KSFT_SKIP)
		SKIP(return false, "%s", why);
	ASSERT_EQ(0, ret) TH_LOG("%s", why);
	self->other_fd = open(self->other.dev, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->other_fd)
		TH_LOG("open %s: %s", self->other.dev, strerror(errno));
	ASSERT_EQ(0, vblk_set_backend(self->e.dev.fd, self->other_fd));
	return true;
}

/* Write and read back patterns of 4 to 32 KiB; returns the requests. */
static unsigned int rw_some(struct __test_metadata *_metadata, struct env *e)
{
	unsigned int i;

	for (i = 0; i < 4; i++)
		rw_verify(_metadata, e, &e->dev.vq[0], 2048 + i * 128,
			  4096 << i, NULL, NULL);
	return 2 * i;
}

TEST_F(cpoll, busy_polled_queue_polls_its_completions)
{
	const struct layout odd = { .misalign = 1 };
	struct vhost_blk_vring_stats st;
	struct env *e = &self->e;
	unsigned int n;

	set_polling(_metadata, e, POLL_US, VHOST_BLK_POLL_COMPLETIONS);
	n = rw_some(_metadata, e);
	/* Buffers that go through bounce pages: one bio all the same. */
	rw_verify(_metadata, e, &e->dev.vq[0], 4096, 8192, &odd, &odd);
	n += 2;

	st = stats0(_metadata, e);
	ASSERT_EQ(n, st.reqs_in + st.reqs_out);
	ASSERT_EQ(0ULL, st.reqs_ioerr);
	ASSERT_EQ(2ULL, st.reqs_bounced);
	/* Every one of them in one bio, polled and reaped. */
	ASSERT_EQ(n, st.polled_bios);
	ASSERT_LT(0ULL, st.poll_reaped);
	ASSERT_GE(st.polled_bios, st.poll_reaped);
	ASSERT_EQ(0ULL, st.poll_fallbacks);
	ASSERT_EQ(0ULL, st.inflight);
}

TEST_F(cpoll, without_the_flag_completions_raise_interrupts)
{
	struct vhost_blk_vring_stats st;
	struct env *e = &self->e;
	unsigned int n;

	set_polling(_metadata, e, POLL_US, 0);
	n = rw_some(_metadata, e);
	st = stats0(_metadata, e);
	ASSERT_EQ(n, st.reqs_in + st.reqs_out);
	ASSERT_EQ(0ULL, st.polled_bios);
	ASSERT_EQ(0ULL, st.poll_reaped);
	/* Not asked for: no fallback either. */
	ASSERT_EQ(0ULL, st.poll_fallbacks);
}

/*
 * With completion polling asked for and a busy-poll window of @us, every
 * read and write falls back to interrupts, and is right.
 */
static struct vhost_blk_vring_stats
expect_fallbacks(struct __test_metadata *_metadata, struct env *e,
		 unsigned int us)
{
	struct vhost_blk_vring_stats st;
	unsigned int n;

	set_polling(_metadata, e, us, VHOST_BLK_POLL_COMPLETIONS);
	n = rw_some(_metadata, e);
	st = stats0(_metadata, e);
	ASSERT_EQ(n, st.reqs_in + st.reqs_out);
	ASSERT_EQ(0ULL, st.reqs_ioerr);
	ASSERT_EQ(0ULL, st.polled_bios);
	ASSERT_EQ(n, st.poll_fallbacks);
	return st;
}

/* With busy polling off there is no worker around to reap: a fallback. */
TEST_F(cpoll, not_polled_while_busy_polling_is_off)
{
	ASSERT_EQ(0ULL, expect_fallbacks(_metadata, &self->e, 0).polls);
}

TEST_F(cpoll, falls_back_on_a_device_without_poll_queues)
{
	const struct nullb_spec spec = { .tag = "nopoll", .poll_queues = 0 };

	if (!use_other_nullb(_metadata, self, &spec))
		return;
	ASSERT_FALSE(backend_polls(self->other_fd));
	expect_fallbacks(_metadata, &self->e, POLL_US);
}

TEST_F(cpoll, falls_back_on_a_file)
{
	struct env *e = &self->e;
	const char *where;
	char dir[256];
	int ret;

	where = scratch_dir(e, dir, sizeof(dir));
	snprintf(self->file, sizeof(self->file), "%s/vhost-blk-cpoll.XXXXXX",
		 where);
	self->file_fd = mkostemp(self->file, O_CLOEXEC);
	ASSERT_LE(0, self->file_fd)
		TH_LOG("mkostemp %s: %s", self->file, strerror(errno));
	ASSERT_EQ(0, ftruncate(self->file_fd, TEST_MIN_CAPACITY));
	ret = vblk_set_backend(e->dev.fd, self->file_fd);
	if (ret == -EOPNOTSUPP)
		SKIP(return, "no O_DIRECT in %s (tmpfs before 6.6?): set VHOST_BLK_SCRATCH_DIR",
		     where);
	ASSERT_EQ(0, ret);
	expect_fallbacks(_metadata, e, POLL_US);
}

/*
 * A polled bio the device would split (its max_sectors is 8) is refused
 * by the block layer, as it goes REQ_NOWAIT (a split would sleep): sent
 * again unpolled, counted as polled and as a fallback, answered all the
 * same.
 */
TEST_F(cpoll, a_polled_bio_the_device_splits_completes)
{
	const struct nullb_spec spec = {
		.tag = "split", .poll_queues = 1, .max_sectors = 8,
	};
	struct vhost_blk_vring_stats st;
	struct env *e = &self->e;

	if (!use_other_nullb(_metadata, self, &spec))
		return;
	set_polling(_metadata, e, POLL_US, VHOST_BLK_POLL_COMPLETIONS);
	rw_verify(_metadata, e, &e->dev.vq[0], 512, 64 * KiB, NULL, NULL);
	st = stats0(_metadata, e);
	ASSERT_EQ(1ULL, st.reqs_in);
	ASSERT_EQ(1ULL, st.reqs_out);
	ASSERT_EQ(0ULL, st.reqs_ioerr);
	ASSERT_EQ(2ULL, st.polled_bios);
	ASSERT_EQ(2ULL, st.poll_fallbacks);
}

/*
 * Post DEPTH writes on @vq of @len bytes each from @sector on, with the
 * patterns of @seed; not kicked.
 */
static void post_writes(struct __test_metadata *_metadata, struct env *e,
			struct vq *vq, struct blk_req *req, uint64_t sector,
			uint32_t len, uint64_t seed)
{
	struct blk_req_spec spec = {
		.type = VIRTIO_BLK_T_OUT, .nseg = 1, .seg_len = &len,
	};
	uint8_t *buf = xmalloc(_metadata, len);
	unsigned int i;

	for (i = 0; i < DEPTH; i++) {
		spec.sector = sector + i * (len / SECTOR);
		ASSERT_EQ(0, blk_req_prep(&req[i], &e->gm, &spec));
		pattern_fill(buf, len, seed, spec.sector * SECTOR);
		blk_req_fill(&req[i], buf, len);
		ASSERT_EQ(0, blk_req_post(vq, &req[i]));
	}
	free(buf);
}

/* Wait for the DEPTH requests @req posted on @vq: all answered OK. */
static void complete_ok(struct __test_metadata *_metadata, struct vq *vq,
			struct blk_req *req, unsigned int done)
{
	unsigned int i;

	ASSERT_EQ(0, blk_complete(vq, DEPTH - done));
	for (i = 0; i < DEPTH; i++) {
		ASSERT_TRUE(req[i].done);
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *req[i].status, "request %u",
			      i);
		blk_req_free(&req[i]);
	}
}

/*
 * post_writes() on queue 0 and kick; return once the worker has submitted
 * at least one of them polled.
 */
static void post_polled_writes(struct __test_metadata *_metadata,
			       struct env *e, struct blk_req *req,
			       uint64_t sector, uint32_t len, uint64_t seed)
{
	struct vq *vq = &e->dev.vq[0];
	struct vhost_blk_vring_stats st;
	unsigned int i;

	post_writes(_metadata, e, vq, req, sector, len, seed);
	ASSERT_LE(0, vq_kick(vq));
	for (i = 0; i < (unsigned int)vq_hang_timeout_ms(); i++) {
		st = stats0(_metadata, e);
		if (st.polled_bios)
			return;
		usleep(1000);
	}
	ASSERT_TRUE(false) TH_LOG("no request was submitted polled");
}

/*
 * Detaching the backend answers every request taken, polled ones
 * included, although nothing polls them but the detach; attaching it
 * again serves the rest.
 */
TEST_F(cpoll, detach_reaps_polled_bios_in_flight)
{
	const uint32_t len = 64 * KiB;
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct vhost_blk_vring_stats st;
	struct blk_req req[DEPTH];
	uint64_t seed = new_seed(e);
	unsigned int i, n = 0;
	size_t mark = guest_mark(&e->gm);

	set_polling(_metadata, e, POLL_US, VHOST_BLK_POLL_COMPLETIONS);
	post_polled_writes(_metadata, e, req, 8192, len, seed);
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	st = stats0(_metadata, e);
	ASSERT_EQ(0ULL, st.inflight);
	/* What was taken is answered; take those answers without waiting. */
	while (vq_used_pending(vq)) {
		ASSERT_EQ(0, blk_complete_one(vq));
		n++;
	}
	ASSERT_EQ(n, st.reqs_out);
	ASSERT_LE(1U, n);
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, e->backend_fd));
	complete_ok(_metadata, vq, req, n);
	guest_release(&e->gm, mark);
	for (i = 0; i < DEPTH; i++)
		verify_pattern(_metadata, e, vq, 8192 + i * (len / SECTOR),
			       len, seed);
	st = stats0(_metadata, e);
	ASSERT_EQ(2ULL * DEPTH, st.polled_bios);
	ASSERT_EQ(0ULL, st.poll_fallbacks);
}

/* Closing the device with polled bios in flight ends them: no hang. */
TEST_F(cpoll, close_reaps_polled_bios_in_flight)
{
	struct env *e = &self->e;
	struct blk_req req[DEPTH];
	size_t mark = guest_mark(&e->gm);
	unsigned int i;

	set_polling(_metadata, e, POLL_US, VHOST_BLK_POLL_COMPLETIONS);
	post_polled_writes(_metadata, e, req, 8192, 64 * KiB, new_seed(e));
	vblk_close(&e->dev);
	for (i = 0; i < DEPTH; i++)
		blk_req_free(&req[i]);
	guest_release(&e->gm, mark);

	/* A new device on the same disk polls as the first did. */
	ASSERT_EQ(0, env_open_dev(e, &e->dev, 1, 0, 0));
	set_polling(_metadata, e, POLL_US, VHOST_BLK_POLL_COMPLETIONS);
	rw_verify(_metadata, e, &e->dev.vq[0], 64, 4096, NULL, NULL);
	ASSERT_EQ(2ULL, stats0(_metadata, e).polled_bios);
}

/*
 * Two rings, each on a worker of its own where the kernel has per-queue
 * workers, polling the device's one poll queue at once: either may reap
 * the other's completions, and run the other's end_io.  Every request is
 * answered, and right.
 */
TEST_F(cpoll, two_rings_poll_one_poll_queue)
{
	const unsigned int nvqs = 2, rounds = 8, len = 4096;
	const unsigned int per_round = nvqs * DEPTH;
	struct blk_req req[2][DEPTH];
	struct vhost_blk_vring_stats st;
	struct env *e = &self->e;
	uint64_t seed = new_seed(e);
	unsigned int q, r, i;
	struct vblk_dev *dev;
	size_t mark;

	env_reopen(_metadata, e, nvqs, 0, 0);
	dev = &e->dev;
	for (q = 0; q < nvqs; q++) {
		struct vhost_vring_state t = { .index = q, .num = POLL_US };
		struct vhost_blk_vring_poll p = {
			.index = q, .flags = VHOST_BLK_POLL_COMPLETIONS,
		};
		struct vhost_vring_worker vw = { .index = q };
		struct vhost_worker_state w = {};

		/* ENOTTY before 6.5: one worker serves both rings. */
		if (!ioctl(dev->fd, VHOST_NEW_WORKER, &w)) {
			vw.worker_id = w.worker_id;
			ASSERT_EQ(0, VBLK_IOCTL(dev->fd,
						VHOST_ATTACH_VRING_WORKER,
						&vw));
		}
		ASSERT_EQ(0, VBLK_IOCTL(dev->fd,
					VHOST_SET_VRING_BUSYLOOP_TIMEOUT, &t));
		ASSERT_EQ(0, VBLK_IOCTL(dev->fd, VHOST_BLK_SET_VRING_POLL,
					&p));
	}
	for (r = 0; r < rounds; r++) {
		mark = guest_mark(&e->gm);
		for (q = 0; q < nvqs; q++)
			post_writes(_metadata, e, &dev->vq[q], req[q],
				    (r * per_round + q * DEPTH) * (len / SECTOR),
				    len, seed);
		for (q = 0; q < nvqs; q++)
			ASSERT_LE(0, vq_kick(&dev->vq[q]));
		for (q = 0; q < nvqs; q++)
			complete_ok(_metadata, &dev->vq[q], req[q], 0);
		guest_release(&e->gm, mark);
	}
	for (q = 0; q < nvqs; q++) {
		ASSERT_EQ(0, vblk_get_stats(dev->fd, q, 0, &st));
		ASSERT_EQ((uint64_t)rounds * DEPTH, st.reqs_out);
		ASSERT_EQ((uint64_t)rounds * DEPTH, st.polled_bios)
			TH_LOG("queue %u", q);
		ASSERT_EQ(0ULL, st.poll_fallbacks);
	}
	for (i = 0; i < rounds * per_round; i++)
		verify_pattern(_metadata, e, &dev->vq[0], i * (len / SECTOR),
			       len, seed);
}

/*
 * @rounds of DEPTH writes of @len bytes each in flight at once on queue
 * 0, from sector 0 on, all answered OK; then all read back, one by one.
 */
static void write_rounds(struct __test_metadata *_metadata, struct env *e,
			 unsigned int rounds, uint32_t len, uint64_t seed)
{
	struct vq *vq = &e->dev.vq[0];
	struct blk_req req[DEPTH];
	unsigned int r, i;
	size_t mark;

	for (r = 0; r < rounds; r++) {
		mark = guest_mark(&e->gm);
		post_writes(_metadata, e, vq, req, r * DEPTH * (len / SECTOR),
			    len, seed);
		ASSERT_LE(0, vq_kick(vq));
		complete_ok(_metadata, vq, req, 0);
		guest_release(&e->gm, mark);
	}
	for (i = 0; i < rounds * DEPTH; i++)
		verify_pattern(_metadata, e, vq, i * (len / SECTOR), len,
			       seed);
}

/*
 * More polled bios than the poll queue has tags: a polled bio must not
 * sleep for a tag in submit_bio(), as only the sleeping worker would
 * reap the bios that hold them.  The block layer refuses the ones past
 * the two tags (REQ_NOWAIT); they go again unpolled.  Every request is
 * answered OK, and a detach returns.
 */
TEST_F(cpoll, more_polled_bios_than_poll_queue_tags_all_complete)
{
	const struct nullb_spec spec = {
		.tag = "depth2", .poll_queues = 1, .hw_queue_depth = 2,
	};
	struct env *e = &self->e;
	struct vhost_blk_vring_stats st;

	if (!use_other_nullb(_metadata, self, &spec))
		return;
	set_polling(_metadata, e, POLL_US, VHOST_BLK_POLL_COMPLETIONS);
	write_rounds(_metadata, e, 4, 16 * KiB, new_seed(e));
	st = stats0(_metadata, e);
	ASSERT_EQ(4ULL * DEPTH, st.reqs_out);
	ASSERT_EQ(0ULL, st.reqs_ioerr);
	/* The writes, and the reads that checked them, one at a time. */
	ASSERT_EQ(8ULL * DEPTH, st.polled_bios);
	/* At least the third write of a round found no tag. */
	ASSERT_LE(4ULL, st.poll_fallbacks);
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	ASSERT_EQ(0ULL, stats0(_metadata, e).inflight);
}

/*
 * Write @val to /sys/block/NAME/queue/@attr of the block device @dev.
 * 0 or -errno.
 */
static int queue_attr_set(const char *dev, const char *attr, const char *val)
{
	char path[256];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/sys/block/%s/queue/%s",
		 strrchr(dev, '/') + 1, attr);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * Polled I/O while another task switches the device's I/O scheduler and
 * its nr_requests over and over: each switch freezes the queue, and a
 * polled bio must not sleep in bio_queue_enter() meanwhile, as the
 * freeze waits for the polled bios that only the sleeping worker would
 * reap.  Every request is answered OK.
 */
TEST_F(cpoll, polled_io_through_scheduler_switches_completes)
{
	const char *dev = self->polling.dev;
	struct vhost_blk_vring_stats st;
	struct env *e = &self->e;
	unsigned int i;
	int status;
	pid_t pid;

	if (queue_attr_set(dev, "scheduler", "mq-deadline"))
		SKIP(return, "%s cannot have mq-deadline", dev);
	ASSERT_EQ(0, queue_attr_set(dev, "scheduler", "none"));
	set_polling(_metadata, e, POLL_US, VHOST_BLK_POLL_COMPLETIONS);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		for (i = 0; i < 100000; i++) {
			queue_attr_set(dev, "scheduler",
				       i & 1 ? "none" : "mq-deadline");
			queue_attr_set(dev, "nr_requests",
				       i & 2 ? "16" : "64");
			usleep(2000);
		}
		_exit(0);
	}
	write_rounds(_metadata, e, 8, 8 * KiB, new_seed(e));
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	queue_attr_set(dev, "scheduler", "none");
	st = stats0(_metadata, e);
	ASSERT_EQ(8ULL * DEPTH, st.reqs_out);
	ASSERT_EQ(0ULL, st.reqs_ioerr);
}

/* Flags past the known ones are refused; the known ones together are not. */
TEST(unknown_poll_flags_are_einval)
{
	struct vhost_blk_vring_poll p = { .index = 0 };
	int fd;

	if (access(VBLK_DEV_PATH, F_OK)) {
		ASSERT_FALSE(env_strict())
			TH_LOG("%s does not exist (is vhost_blk loaded?)",
			       VBLK_DEV_PATH);
		SKIP(return, "%s does not exist (is vhost_blk loaded?)",
		     VBLK_DEV_PATH);
	}
	fd = vblk_open_fd();
	ASSERT_LE(0, fd);
	p.flags = 1U << 2;
	ASSERT_EQ(-1, ioctl(fd, VHOST_BLK_SET_VRING_POLL, &p));
	ASSERT_EQ(EINVAL, errno);
	p.flags = VHOST_BLK_POLL_COMPLETIONS | (1U << 31);
	ASSERT_EQ(-1, ioctl(fd, VHOST_BLK_SET_VRING_POLL, &p));
	ASSERT_EQ(EINVAL, errno);
	p.flags = VHOST_BLK_POLL_ADAPTIVE | VHOST_BLK_POLL_COMPLETIONS;
	ASSERT_EQ(0, ioctl(fd, VHOST_BLK_SET_VRING_POLL, &p));
	close(fd);
}

TEST_HARNESS_MAIN
