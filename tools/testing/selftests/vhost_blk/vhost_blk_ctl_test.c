// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk control plane and life cycle: features, SET_BACKEND errors,
 * detach and re-attach, read-only backends, serial and config, completion
 * notifications, closing or exiting with requests in flight, and the
 * dirty log of a migration (VHOST_F_LOG_ALL).
 *
 * The backend is VHOST_BLK_TEST_DEV (see vblk_test.h).
 */
#include <limits.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "kselftest_harness.h"

#include "vblk_test.h"

FIXTURE(vhost_blk_ctl) {
	struct env e;
};

FIXTURE_SETUP(vhost_blk_ctl)
{
	env_setup(_metadata, &self->e, VBLK_FEATURES_ALL);
}

FIXTURE_TEARDOWN(vhost_blk_ctl)
{
	env_teardown(&self->e);
}

/* SET_BACKEND that is expected to fail: returns errno (0 if it worked). */
static int set_backend_errno(int fd, int backend_fd)
{
	struct vhost_vring_file file = { .index = 0, .fd = backend_fd };

	return ioctl(fd, VHOST_BLK_SET_BACKEND, &file) ? errno : 0;
}

static uint64_t features_of(struct __test_metadata *_metadata, int fd)
{
	uint64_t f = 0;

	ASSERT_EQ(0, vblk_get_features(fd, &f));
	return f;
}

/* Post @n writes of @len bytes from @sector on; they are not kicked. */
static struct blk_req *post_writes(struct __test_metadata *_metadata,
				   struct env *e, struct vq *vq,
				   uint64_t sector, unsigned int n,
				   uint32_t len, uint64_t seed)
{
	struct blk_req *req = calloc(n, sizeof(*req));
	uint8_t *pat = xmalloc(_metadata, len);
	struct blk_req_spec spec = {
		.type = VIRTIO_BLK_T_OUT, .nseg = 1, .seg_len = &len,
		.flags = BLK_REQ_INDIRECT,
	};
	unsigned int i;

	ASSERT_NE(NULL, req);
	for (i = 0; i < n; i++) {
		spec.sector = sector + (uint64_t)i * (len / SECTOR);
		ASSERT_EQ(0, blk_req_prep(&req[i], &e->gm, &spec));
		pattern_fill(pat, len, seed, spec.sector * SECTOR);
		blk_req_fill(&req[i], pat, len);
		ASSERT_EQ(0, blk_req_post(vq, &req[i]));
	}
	free(pat);
	return req;
}

/* The device's next avail index (VHOST_GET_VRING_BASE) for queue 0. */
static uint16_t vring_base(struct __test_metadata *_metadata, int fd)
{
	struct vhost_vring_state base = { .index = 0 };

	ASSERT_EQ(0, VBLK_IOCTL(fd, VHOST_GET_VRING_BASE, &base));
	return (uint16_t)base.num;
}

/* Wait until the device has taken a request after @start. */
static uint16_t wait_taken(struct __test_metadata *_metadata, int fd,
			   uint16_t start)
{
	uint16_t base;
	int i;

	for (i = 0; i < VQ_HANG_TIMEOUT_MS * 10; i++) {
		base = vring_base(_metadata, fd);
		if (base != start)
			return base;
		usleep(100);
	}
	ASSERT_NE(start, base) TH_LOG("the device took no request");
	return base;
}

static void free_reqs(struct blk_req *req, unsigned int n)
{
	while (n--)
		blk_req_free(&req[n]);
	free(req);
}

TEST_F(vhost_blk_ctl, features_offered_match_the_device)
{
	struct env *e = &self->e;
	uint64_t f;
	int fd;

	/* Without a backend: exactly the backend-independent set. */
	fd = vblk_open_fd();
	ASSERT_LE(0, fd);
	f = features_of(_metadata, fd);
	EXPECT_EQ(VBLK_FEATURES_DEVICE | VBLK_FEATURES_VHOST, f)
		TH_LOG("offered %#llx, expected %#llx",
		       (unsigned long long)f,
		       (unsigned long long)(VBLK_FEATURES_DEVICE |
					    VBLK_FEATURES_VHOST));
	close(fd);

	/*
	 * A writable backend adds nothing but maybe SECURE_ERASE, and
	 * WRITE_ZEROES exactly where it is cheap.
	 */
	f = features_of(_metadata, e->dev.fd);
	EXPECT_EQ(VBLK_FEATURES_DEVICE | VBLK_FEATURES_VHOST,
		  f & ~VBLK_FEATURES_BACKEND);
	EXPECT_EQ(0ULL, f & VBLK_F(VIRTIO_BLK_F_RO));
	EXPECT_EQ(backend_has_write_zeroes(e->backend_fd),
		  !!(f & VBLK_F(VIRTIO_BLK_F_WRITE_ZEROES)))
		TH_LOG("WRITE_ZEROES %soffered on %s",
		       f & VBLK_F(VIRTIO_BLK_F_WRITE_ZEROES) ? "" : "not ",
		       e->path);
	EXPECT_EQ(VBLK_FEATURES_DEVICE | VBLK_FEATURES_VHOST, e->dev.offered);
	/* Logging is acked only when asked for. */
	EXPECT_EQ(0ULL, e->dev.features & VBLK_FEATURES_VHOST);
}

TEST_F(vhost_blk_ctl, set_features_rejects_what_is_not_offered)
{
	static const unsigned int bad[] = {
		VIRTIO_BLK_F_SIZE_MAX, VIRTIO_BLK_F_GEOMETRY,
		VIRTIO_BLK_F_SCSI, VIRTIO_BLK_F_CONFIG_WCE,
		VIRTIO_BLK_F_ZONED, VIRTIO_F_ACCESS_PLATFORM,
		VIRTIO_F_RING_PACKED, 63,
	};
	uint64_t f;
	unsigned int i;
	int fd;

	fd = vblk_open_fd();
	ASSERT_LE(0, fd);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		f = VBLK_FEATURES_DEVICE | VBLK_F(bad[i]);
		EXPECT_EQ(-1, ioctl(fd, VHOST_SET_FEATURES, &f))
			TH_LOG("feature bit %u accepted", bad[i]);
		EXPECT_EQ(EOPNOTSUPP, errno) TH_LOG("feature bit %u", bad[i]);
	}
	/* Subsets are fine. */
	f = 0;
	EXPECT_EQ(0, ioctl(fd, VHOST_SET_FEATURES, &f));
	f = VBLK_F(VIRTIO_F_VERSION_1);
	EXPECT_EQ(0, ioctl(fd, VHOST_SET_FEATURES, &f));
	f = VBLK_FEATURES_DEVICE;
	EXPECT_EQ(0, ioctl(fd, VHOST_SET_FEATURES, &f));
	/* The backend-dependent bits too, even with no backend to offer them. */
	f = VBLK_FEATURES_DEVICE | VBLK_FEATURES_BACKEND;
	EXPECT_EQ(0, ioctl(fd, VHOST_SET_FEATURES, &f));
	close(fd);
}

TEST_F(vhost_blk_ctl, set_backend_pipe_is_enotblk)
{
	struct env *e = &self->e;
	int p[2];

	ASSERT_EQ(0, pipe(p));
	EXPECT_EQ(ENOTBLK, set_backend_errno(e->dev.fd, p[0]));
	EXPECT_EQ(ENOTBLK, set_backend_errno(e->dev.fd, p[1]));
	close(p[0]);
	close(p[1]);
	/* The old backend is still attached and works. */
	rw_verify(_metadata, e, &e->dev.vq[0], 10, 4096, NULL, NULL);
}

TEST_F(vhost_blk_ctl, set_backend_other_file_types_are_enotblk)
{
	struct env *e = &self->e;
	int fds[4], i;

	fds[0] = open("/dev/null", O_RDWR | O_CLOEXEC);
	fds[1] = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fds[2] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fds[3] = eventfd(0, EFD_CLOEXEC);
	for (i = 0; i < 4; i++) {
		ASSERT_LE(0, fds[i]);
		EXPECT_EQ(ENOTBLK, set_backend_errno(e->dev.fd, fds[i]))
			TH_LOG("file %d (null, directory, socket, eventfd)",
			       i);
		close(fds[i]);
	}
	rw_verify(_metadata, e, &e->dev.vq[0], 20, 4096, NULL, NULL);
}

TEST_F(vhost_blk_ctl, set_backend_bad_fd_is_ebadf)
{
	struct env *e = &self->e;
	int fd;

	fd = dup(e->backend_fd);
	ASSERT_LE(0, fd);
	close(fd);
	EXPECT_EQ(EBADF, set_backend_errno(e->dev.fd, fd));
	EXPECT_EQ(EBADF, set_backend_errno(e->dev.fd, -2));
	EXPECT_EQ(EBADF, set_backend_errno(e->dev.fd, INT_MAX));
	rw_verify(_metadata, e, &e->dev.vq[0], 30, 4096, NULL, NULL);
}

TEST_F(vhost_blk_ctl, detach_without_backend_is_ok)
{
	int fd;

	fd = vblk_open_fd();
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, vblk_set_backend(fd, -1));
	EXPECT_EQ(0, vblk_set_backend(fd, -1));
	close(fd);
}

TEST_F(vhost_blk_ctl, set_backend_index_is_ignored)
{
	struct env *e = &self->e;
	struct vhost_vring_file file = { .index = 1000, .fd = e->backend_fd };

	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	ASSERT_EQ(0, VBLK_IOCTL(e->dev.fd, VHOST_BLK_SET_BACKEND, &file));
	rw_verify(_metadata, e, &e->dev.vq[0], 40, 4096, NULL, NULL);
}

TEST_F(vhost_blk_ctl, queue_index_past_num_queues_is_enobufs)
{
	struct env *e = &self->e;
	struct vhost_vring_state s = { .index = e->nq - 1, .num = 128 };
	int fd;

	fd = vblk_open_fd();
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, ioctl(fd, VHOST_SET_VRING_NUM, &s));
	s.index = e->nq;
	EXPECT_EQ(-1, ioctl(fd, VHOST_SET_VRING_NUM, &s))
		TH_LOG("queue %u accepted, num_queues is %u", s.index, e->nq);
	EXPECT_EQ(ENOBUFS, errno);
	close(fd);
}

TEST_F(vhost_blk_ctl, get_id_default_serial_is_zeroes)
{
	struct env *e = &self->e;
	uint8_t id[VIRTIO_BLK_ID_BYTES], zero[VIRTIO_BLK_ID_BYTES] = { 0 };
	struct vblk_config cfg = {
		.features = VBLK_FEATURES_ALL,
		.backend_fd = e->backend_fd,
	};

	vblk_close(&e->dev);
	ASSERT_EQ(0, vblk_open(&e->dev, &e->gm, &cfg));
	expect_result(_metadata,
		      get_id(_metadata, e, &e->dev.vq[0], sizeof(id), 0, id),
		      VIRTIO_BLK_S_OK, sizeof(id) + 1, "GET_ID");
	expect_same(_metadata, zero, id, sizeof(id), "default serial");
}

TEST_F(vhost_blk_ctl, set_serial_again_replaces_it)
{
	struct env *e = &self->e;
	uint8_t id[VIRTIO_BLK_ID_BYTES], want[VIRTIO_BLK_ID_BYTES] = "short";
	uint8_t full[VIRTIO_BLK_ID_BYTES];

	ASSERT_EQ(0, vblk_set_serial(e->dev.fd, "short"));
	expect_result(_metadata,
		      get_id(_metadata, e, &e->dev.vq[0], sizeof(id), 0, id),
		      VIRTIO_BLK_S_OK, sizeof(id) + 1, "GET_ID");
	expect_same(_metadata, want, id, sizeof(id), "NUL-padded serial");

	/* All 20 bytes, no NUL. */
	memset(full, 'x', sizeof(full));
	ASSERT_EQ(0, VBLK_IOCTL(e->dev.fd, VHOST_BLK_SET_SERIAL, full));
	expect_result(_metadata,
		      get_id(_metadata, e, &e->dev.vq[0], sizeof(id), 0, id),
		      VIRTIO_BLK_S_OK, sizeof(id) + 1, "GET_ID");
	expect_same(_metadata, full, id, sizeof(id), "20-byte serial");
}

/* The module's max_queues parameter, 0 if it cannot be read. */
static unsigned int module_max_queues(void)
{
	FILE *f = fopen("/sys/module/vhost_blk/parameters/max_queues", "r");
	unsigned int n = 0;

	if (f) {
		if (fscanf(f, "%u", &n) != 1)
			n = 0;
		fclose(f);
	}
	return n;
}

TEST_F(vhost_blk_ctl, get_config_describes_the_backend)
{
	struct env *e = &self->e;
	struct virtio_blk_config cfg;
	unsigned int mq = module_max_queues();
	int fd;

	memset(&cfg, 0xa5, sizeof(cfg));
	ASSERT_EQ(0, vblk_get_config(e->dev.fd, &cfg));
	EXPECT_EQ(e->sectors, cfg.capacity);
	EXPECT_EQ((uint32_t)VHOST_BLK_SEG_MAX, cfg.seg_max);
	EXPECT_LE(512U, cfg.blk_size);
	EXPECT_EQ(0U, cfg.blk_size & (cfg.blk_size - 1));
	if (mq)
		EXPECT_EQ(mq < 1 ? 1 : mq > 256 ? 256 : mq, cfg.num_queues)
			TH_LOG("max_queues=%u", mq);
	/* Write-zeroes limits only where WRITE_ZEROES is offered. */
	if (backend_has_write_zeroes(e->backend_fd)) {
		EXPECT_EQ((uint32_t)VHOST_BLK_MAX_DISCARD_SECTORS,
			  cfg.max_write_zeroes_sectors);
		EXPECT_EQ((uint32_t)VHOST_BLK_MAX_DISCARD_SEG,
			  cfg.max_write_zeroes_seg);
		EXPECT_EQ(1, cfg.write_zeroes_may_unmap);
	} else {
		EXPECT_EQ(0U, cfg.max_write_zeroes_sectors);
		EXPECT_EQ(0U, cfg.max_write_zeroes_seg);
		EXPECT_EQ(0, cfg.write_zeroes_may_unmap);
	}

	fd = vblk_open_fd();
	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, ioctl(fd, VHOST_BLK_GET_CONFIG, &cfg));
	EXPECT_EQ(ENXIO, errno) TH_LOG("GET_CONFIG without a backend");
	close(fd);
}

TEST_F(vhost_blk_ctl, detach_and_reattach_keeps_data)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t buf[8192];
	uint64_t seed;
	int fd;

	seed = new_seed(e);
	pattern_fill(buf, sizeof(buf), seed, 500 * SECTOR);
	write_ok(_metadata, e, vq, 500, buf, sizeof(buf), NULL);

	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, e->backend_fd));
	verify_pattern(_metadata, e, vq, 500, sizeof(buf), seed);

	/* And with another fd for the same disk. */
	fd = open(e->path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, fd));
	close(fd);	/* the device holds its own reference */
	verify_pattern(_metadata, e, vq, 500, sizeof(buf), seed);
	rw_verify(_metadata, e, vq, 520, 4096, NULL, NULL);
}

TEST_F(vhost_blk_ctl, switch_backend_without_detach)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t buf[4096];
	uint64_t seed;
	int fd;

	seed = new_seed(e);
	pattern_fill(buf, sizeof(buf), seed, 540 * SECTOR);
	write_ok(_metadata, e, vq, 540, buf, sizeof(buf), NULL);
	fd = open(e->path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, fd));
	close(fd);
	verify_pattern(_metadata, e, vq, 540, sizeof(buf), seed);
}

TEST_F(vhost_blk_ctl, requests_while_detached_wait_for_reattach)
{
	enum { N = 8 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed = new_seed(e);
	struct blk_req *req;
	unsigned int i, served_before_kick;

	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	req = post_writes(_metadata, e, vq, 600, N, 4096, seed);
	ASSERT_EQ(1, vq_kick_force(vq));

	/* Nothing may be served without a backend. */
	usleep(200 * 1000);
	EXPECT_EQ(0, vq_used_pending(vq));
	for (i = 0; i < N; i++)
		EXPECT_EQ(BLK_STATUS_UNSET, *req[i].status);

	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, e->backend_fd));
	usleep(200 * 1000);
	served_before_kick = vq_used_pending(vq);
	ASSERT_EQ(1, vq_kick_force(vq));
	ASSERT_EQ(0, blk_complete(vq, N));
	TH_LOG("%u of %u requests queued while detached were served on re-attach before the next kick",
	       served_before_kick, N);
	for (i = 0; i < N; i++) {
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *req[i].status, "request %u", i);
		ASSERT_EQ(1U, req[i].used_len);
	}
	for (i = 0; i < N; i++)
		verify_pattern(_metadata, e, vq, 600 + i * 8, 4096, seed);
	free_reqs(req, N);
}

TEST_F_TIMEOUT(vhost_blk_ctl, detach_drains_requests_in_flight, 60)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint16_t start = vq->avail_idx;
	uint64_t seed = new_seed(e);
	unsigned int n = vq->num, i, taken, done;
	uint32_t len = 128 * KiB;
	struct blk_req *req;

	req = post_writes(_metadata, e, vq, 20000, n, len, seed);
	ASSERT_EQ(1, vq_kick_force(vq));
	wait_taken(_metadata, e->dev.fd, start);
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));

	/* Every request the device took has been answered. */
	taken = (uint16_t)(vring_base(_metadata, e->dev.fd) - start);
	done = vq_used_pending(vq);
	TH_LOG("%u of %u requests taken before the detach", taken, n);
	ASSERT_EQ(taken, done);
	ASSERT_EQ(0, blk_complete(vq, done));
	for (i = 0; i < n; i++) {
		if (!req[i].done) {
			EXPECT_EQ(BLK_STATUS_UNSET, *req[i].status);
			continue;
		}
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *req[i].status, "request %u", i);
		ASSERT_EQ(1U, req[i].used_len);
	}

	/* The rest is served once a backend is back. */
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, e->backend_fd));
	ASSERT_EQ(1, vq_kick_force(vq));
	ASSERT_EQ(0, blk_complete(vq, n - done));
	for (i = 0; i < n; i++) {
		ASSERT_TRUE(req[i].done);
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *req[i].status, "request %u", i);
	}
	for (i = 0; i < n; i += 9)
		verify_pattern(_metadata, e, vq, 20000 + i * (len / SECTOR),
			       len, seed);
	free_reqs(req, n);
}

TEST_F_TIMEOUT(vhost_blk_ctl, close_with_requests_in_flight_then_reopen, 60)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	unsigned int n = vq->num, i, ok = 0, unset = 0;
	uint16_t start = vq->avail_idx;
	struct blk_req *req;

	req = post_writes(_metadata, e, vq, 60000, n, 64 * KiB, new_seed(e));
	ASSERT_EQ(1, vq_kick_force(vq));
	wait_taken(_metadata, e->dev.fd, start);
	vblk_close(&e->dev);

	for (i = 0; i < n; i++) {
		uint8_t st = *req[i].status;

		ok += st == VIRTIO_BLK_S_OK;
		unset += st == BLK_STATUS_UNSET;
		EXPECT_TRUE(st == VIRTIO_BLK_S_OK || st == BLK_STATUS_UNSET)
			TH_LOG("request %u: status %s", i,
			       blk_status_name(st));
	}
	TH_LOG("on close: %u of %u requests answered, %u not taken", ok, n,
	       unset);
	free_reqs(req, n);

	ASSERT_EQ(0, env_open_dev(e, &e->dev, 1, 0, 0));
	rw_verify(_metadata, e, &e->dev.vq[0], 60000, 64 * KiB, NULL, NULL);
}

TEST_F_TIMEOUT(vhost_blk_ctl, owner_exit_with_requests_in_flight_then_reopen,
	       60)
{
	struct env *e = &self->e;
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* Its own device on its own copy of guest memory. */
		struct vblk_dev dev;
		unsigned int i;

		if (env_open_dev(e, &dev, 1, 0, 0))
			_exit(1);
		for (i = 0; i < dev.vq[0].num; i++) {
			uint32_t len = 64 * KiB;
			struct blk_req_spec spec = {
				.type = VIRTIO_BLK_T_OUT, .nseg = 1,
				.seg_len = &len, .flags = BLK_REQ_INDIRECT,
				.sector = 70000 + i * 128,
			};
			struct blk_req req;

			if (blk_req_prep(&req, &e->gm, &spec) ||
			    blk_req_post(&dev.vq[0], &req))
				_exit(2);
		}
		vq_kick_force(&dev.vq[0]);
		/* Exit, without closing anything, once I/O is under way. */
		for (i = 0; i < VQ_HANG_TIMEOUT_MS * 10; i++) {
			struct vhost_vring_state base = { .index = 0 };

			if (ioctl(dev.fd, VHOST_GET_VRING_BASE, &base) ||
			    base.num)
				break;
			usleep(100);
		}
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));

	vblk_close(&e->dev);
	ASSERT_EQ(0, env_open_dev(e, &e->dev, 1, 0, 0));
	rw_verify(_metadata, e, &e->dev.vq[0], 70000, 64 * KiB, NULL, NULL);
}

TEST_F(vhost_blk_ctl, two_devices_share_one_backend)
{
	struct env *e = &self->e;
	struct vblk_dev other;
	uint8_t buf[16384];
	uint64_t seed;

	ASSERT_EQ(0, env_open_dev(e, &other, 2, 0, 0));
	seed = new_seed(e);
	pattern_fill(buf, sizeof(buf), seed, 800 * SECTOR);
	write_ok(_metadata, e, &e->dev.vq[0], 800, buf, sizeof(buf), NULL);
	verify_pattern(_metadata, e, &other.vq[1], 800, sizeof(buf), seed);

	seed = new_seed(e);
	pattern_fill(buf, sizeof(buf), seed, 840 * SECTOR);
	write_ok(_metadata, e, &other.vq[0], 840, buf, sizeof(buf), NULL);
	verify_pattern(_metadata, e, &e->dev.vq[0], 840, sizeof(buf), seed);
	vblk_close(&other);
}

TEST_F(vhost_blk_ctl, read_only_backend_offers_ro_and_fails_writes)
{
	static const uint32_t segs[] = { 512, 3584 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct layout two = { .nseg = 2, .seg = segs };
	struct layout ind = { .flags = BLK_REQ_INDIRECT };
	uint8_t old[4096], new[4096];
	uint64_t seed;
	int ro;

	seed = new_seed(e);
	pattern_fill(old, sizeof(old), seed, 900 * SECTOR);
	write_ok(_metadata, e, vq, 900, old, sizeof(old), NULL);

	ro = open(e->path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, ro);
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, ro));
	close(ro);
	EXPECT_TRUE(!!(features_of(_metadata, e->dev.fd) &
		       VBLK_F(VIRTIO_BLK_F_RO)));

	pattern_fill(new, sizeof(new), new_seed(e), 900 * SECTOR);
	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_OUT, 900, new,
			   sizeof(new), NULL),
		      VIRTIO_BLK_S_IOERR, 1, "write to a read-only backend");
	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_OUT, 900, new,
			   sizeof(new), &two),
		      VIRTIO_BLK_S_IOERR, 1, "2-segment write, read-only");
	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_OUT, 900, new,
			   sizeof(new), &ind),
		      VIRTIO_BLK_S_IOERR, 1, "indirect write, read-only");
	verify_pattern(_metadata, e, vq, 900, sizeof(old), seed);

	/* Writable again: RO is gone, the data never changed. */
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, e->backend_fd));
	EXPECT_FALSE(!!(features_of(_metadata, e->dev.fd) &
			VBLK_F(VIRTIO_BLK_F_RO)));
	verify_pattern(_metadata, e, vq, 900, sizeof(old), seed);
}

TEST_F(vhost_blk_ctl, event_idx_used_event_defers_the_call)
{
	enum { N = 8 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t buf[4096];
	struct blk_req *req;
	uint64_t calls;
	uint16_t start;
	unsigned int i;

	ASSERT_TRUE(vblk_has(&e->dev, VIRTIO_RING_F_EVENT_IDX));
	/* The first completion after start-up is always signalled. */
	pattern_fill(buf, sizeof(buf), new_seed(e), 0);
	write_ok(_metadata, e, vq, 1000, buf, sizeof(buf), NULL);
	if (!vq->notifications)
		ASSERT_EQ(0, vq_wait_call(vq, VQ_HANG_TIMEOUT_MS));
	vq_drain_calls(vq);
	calls = vq->notifications;

	/* Ask to hear about the N-th completion only. */
	vq_set_cb_mode(vq, VQ_CB_MANUAL);
	start = vq->last_used_idx;
	vq_set_used_event(vq, (uint16_t)(start + N - 1));
	req = calloc(N, sizeof(*req));
	ASSERT_NE(NULL, req);
	for (i = 0; i < N; i++) {
		uint32_t len = 4096;
		struct blk_req_spec spec = {
			.type = VIRTIO_BLK_T_OUT, .sector = 1100 + i * 8,
			.nseg = 1, .seg_len = &len,
		};

		ASSERT_EQ(0, blk_req_prep(&req[i], &e->gm, &spec));
		ASSERT_EQ(0, blk_req_post(vq, &req[i]));
		ASSERT_LE(0, vq_kick(vq));
	}
	ASSERT_EQ(0, vq_wait_call(vq, VQ_HANG_TIMEOUT_MS))
		TH_LOG("no call after %u completions", vq_used_pending(vq));
	EXPECT_EQ(N, vq_used_pending(vq))
		TH_LOG("called with %u of %u completions, used_event %u",
		       vq_used_pending(vq), N, (uint16_t)(start + N - 1));
	ASSERT_EQ(0, blk_complete(vq, N));
	for (i = 0; i < N; i++)
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *req[i].status, "request %u", i);
	vq_drain_calls(vq);
	EXPECT_EQ(1ULL, vq->notifications - calls)
		TH_LOG("%llu calls for one crossing of used_event",
		       (unsigned long long)(vq->notifications - calls));
	free_reqs(req, N);
}

TEST_F(vhost_blk_ctl, no_interrupt_flag_suppresses_the_call)
{
	enum { N = 8 };
	struct env *e = &self->e;
	uint8_t buf[4096];
	struct blk_req *req;
	struct vq_used u;
	unsigned int i;
	struct vq *vq;

	e->features &= ~VBLK_F(VIRTIO_RING_F_EVENT_IDX);
	env_reopen(_metadata, e, 1, 0, 0);
	vq = &e->dev.vq[0];
	ASSERT_FALSE(vblk_has(&e->dev, VIRTIO_RING_F_EVENT_IDX));

	vq_set_cb_mode(vq, VQ_CB_MANUAL);
	vq_set_no_interrupt(vq, true);
	req = post_writes(_metadata, e, vq, 1200, N, 4096, new_seed(e));
	ASSERT_LE(0, vq_kick(vq));
	for (i = 0; i < 10000 && vq_used_pending(vq) < N; i++)
		usleep(1000);
	ASSERT_EQ(N, vq_used_pending(vq));
	for (i = 0; i < N; i++) {
		ASSERT_EQ(1, vq_get_used(vq, &u));
		ASSERT_FALSE(u.bad);
	}
	for (i = 0; i < N; i++)
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *req[i].status, "request %u", i);
	EXPECT_EQ(0ULL, vq_drain_calls(vq))
		TH_LOG("called although VRING_AVAIL_F_NO_INTERRUPT was set");

	/* Interrupts back on: the next completion is signalled. */
	vq_set_no_interrupt(vq, false);
	vq_set_cb_mode(vq, VQ_CB_AUTO);
	pattern_fill(buf, sizeof(buf), new_seed(e), 1300 * SECTOR);
	write_ok(_metadata, e, vq, 1300, buf, sizeof(buf), NULL);
	if (!vq->notifications)
		ASSERT_EQ(0, vq_wait_call(vq, VQ_HANG_TIMEOUT_MS))
			TH_LOG("no call with interrupts enabled");
	free_reqs(req, N);
}

/* ------------------------------------------------------ dirty logging */

#define LOG_PAGE	4096ULL

/* A dirty log, one bit per 4 KiB guest page, covering @e's guest memory. */
static uint8_t *log_alloc(struct __test_metadata *_metadata, struct env *e,
			  size_t *size)
{
	uint64_t pages = (e->gm.gpa + e->gm.size) / LOG_PAGE;
	uint8_t *bits;

	*size = (size_t)((pages + 7) / 8);
	bits = calloc(1, *size);
	ASSERT_NE(NULL, bits);
	return bits;
}

static bool log_dirty(const uint8_t *bits, uint64_t gpa)
{
	uint64_t page = gpa / LOG_PAGE;

	return bits[page / 8] & (1u << (page % 8));
}

/* Every page of [p, p + len) of guest memory is dirty (or clean). */
static void expect_pages(struct __test_metadata *_metadata, struct env *e,
			 const uint8_t *bits, const void *p, size_t len,
			 bool dirty, const char *what)
{
	uint64_t gpa = gpa_of(&e->gm, p), end = gpa + len;

	for (gpa &= ~(LOG_PAGE - 1); gpa < end; gpa += LOG_PAGE)
		ASSERT_EQ(dirty, log_dirty(bits, gpa))
			TH_LOG("%s: guest page %#llx is %s", what,
			       (unsigned long long)gpa,
			       dirty ? "clean" : "dirty");
}

/* Only pages of the used ring or of @n buffers [p[i], p[i] + len[i]). */
static void expect_only(struct __test_metadata *_metadata, struct env *e,
			const uint8_t *bits, size_t size, const void **p,
			const size_t *len, unsigned int n)
{
	const struct vq *vq = &e->dev.vq[0];
	uint64_t used = gpa_of(&e->gm, vq->used);
	/* flags, idx, the ring and avail_event */
	uint64_t used_end = used + 4 + 8ULL * vq->num + 2;
	uint64_t page, gpa, start;
	unsigned int i;
	bool ok;

	for (page = 0; page < size * 8ULL; page++) {
		gpa = page * LOG_PAGE;
		if (!log_dirty(bits, gpa))
			continue;
		ok = gpa + LOG_PAGE > used && gpa < used_end;
		for (i = 0; i < n && !ok; i++) {
			start = gpa_of(&e->gm, p[i]);
			ok = gpa + LOG_PAGE > start && gpa < start + len[i];
		}
		ASSERT_TRUE(ok)
			TH_LOG("guest page %#llx is dirty, but the device wrote nothing there",
			       (unsigned long long)gpa);
	}
}

/*
 * Turn logging on or off as QEMU does around a migration: the log base,
 * VHOST_F_LOG_ALL, then the used ring's guest address with VHOST_VRING_F_LOG.
 */
static void log_set(struct __test_metadata *_metadata, struct env *e,
		    uint8_t *bits, bool on)
{
	uint64_t base = (uint64_t)(uintptr_t)bits;
	uint64_t f = e->dev.features;

	if (on)
		f |= VBLK_FEATURES_VHOST;
	ASSERT_EQ(0, VBLK_IOCTL(e->dev.fd, VHOST_SET_LOG_BASE, &base));
	ASSERT_EQ(0, vblk_set_features(e->dev.fd, f));
	ASSERT_EQ(0, vblk_set_vring_addr(e->dev.fd, &e->dev.vq[0], on));
}

/* A 12 KiB request on whole pages of its own; prep'd, not posted. */
static void page_req(struct __test_metadata *_metadata, struct env *e,
		     struct blk_req *req, uint32_t type, uint64_t sector)
{
	static const uint32_t len = 3 * LOG_PAGE;
	struct blk_req_spec spec = {
		.type = type, .sector = sector, .nseg = 1, .seg_len = &len,
		.align = LOG_PAGE,
	};

	ASSERT_EQ(0, blk_req_prep(req, &e->gm, &spec));
	/* Nothing else in the data's pages: the status follows them. */
	ASSERT_EQ(0ULL, gpa_of(&e->gm, req->data[0]) % LOG_PAGE);
}

/*
 * With VHOST_F_LOG_ALL, the pages the device wrote are dirty: a read's
 * data, every status byte, the used ring.  A write's data, which it only
 * read, stays clean, and so does everything else.  Logging off, nothing.
 */
TEST_F(vhost_blk_ctl, dirty_log_marks_exactly_the_pages_written)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	size_t mark = guest_mark(&e->gm), size;
	uint8_t *bits = log_alloc(_metadata, e, &size);
	struct blk_req rd, wr, again;
	const void *p[3];
	size_t len[3];

	page_req(_metadata, e, &wr, VIRTIO_BLK_T_OUT, 9000);
	page_req(_metadata, e, &rd, VIRTIO_BLK_T_IN, 9000);
	page_req(_metadata, e, &again, VIRTIO_BLK_T_IN, 9000);
	pattern_fill(wr.data[0], wr.data_len, new_seed(e), 9000 * SECTOR);

	log_set(_metadata, e, bits, true);
	ASSERT_EQ(0, blk_req_run(vq, &wr));
	ASSERT_STATUS(VIRTIO_BLK_S_OK, *wr.status, "write, logging");
	expect_pages(_metadata, e, bits, wr.data[0], wr.data_len, false,
		     "a write's data");
	expect_pages(_metadata, e, bits, wr.status, 1, true, "write status");

	ASSERT_EQ(0, blk_req_run(vq, &rd));
	ASSERT_STATUS(VIRTIO_BLK_S_OK, *rd.status, "read, logging");
	expect_same(_metadata, wr.data[0], rd.data[0], rd.data_len,
		    "read back");
	expect_pages(_metadata, e, bits, rd.data[0], rd.data_len, true,
		     "a read's data");
	expect_pages(_metadata, e, bits, rd.status, 1, true, "read status");
	p[0] = rd.data[0];
	len[0] = rd.data_len;
	p[1] = wr.status;
	len[1] = 1;
	p[2] = rd.status;
	len[2] = 1;
	expect_only(_metadata, e, bits, size, p, len, 3);

	/* Logging off: nothing is logged any more. */
	log_set(_metadata, e, bits, false);
	memset(bits, 0, size);
	ASSERT_EQ(0, blk_req_run(vq, &again));
	ASSERT_STATUS(VIRTIO_BLK_S_OK, *again.status, "read, not logging");
	expect_only(_metadata, e, bits, size, NULL, NULL, 0);
	expect_pages(_metadata, e, bits, vq->used, 4, false, "the used ring");

	blk_req_free(&rd);
	blk_req_free(&wr);
	blk_req_free(&again);
	guest_release(&e->gm, mark);
	free(bits);
}

/*
 * Requests taken before logging starts do not know their pages: turning
 * VHOST_F_LOG_ALL on waits for them.  Whatever is answered after the
 * ioctl returns was taken with logging on, so its pages are dirty.
 */
TEST_F_TIMEOUT(vhost_blk_ctl, dirty_logging_starts_after_requests_in_flight,
	       60)
{
	enum { N = 32 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	size_t mark = guest_mark(&e->gm), size;
	uint8_t *bits = log_alloc(_metadata, e, &size);
	struct blk_req *req = calloc(N, sizeof(*req));
	unsigned int i, k, before, logged = 0;
	bool seen[N] = { false };

	ASSERT_NE(NULL, req);
	vq_set_cb_mode(vq, VQ_CB_MANUAL);
	for (i = 0; i < N; i++) {
		page_req(_metadata, e, &req[i], VIRTIO_BLK_T_IN, 9000 + 24 * i);
		ASSERT_EQ(0, blk_req_post(vq, &req[i]));
	}
	ASSERT_LE(0, vq_kick(vq));
	log_set(_metadata, e, bits, true);
	/* What is in the used ring now was answered before logging began. */
	before = vq_used_pending(vq);
	TH_LOG("%u of %u answered before logging started", before, N);

	/* The rest, in used-ring order: each must have dirtied its pages. */
	for (i = 0; i < N; i++) {
		ASSERT_EQ(0, blk_complete_one(vq));
		for (k = 0; k < N; k++) {
			if (!req[k].done || seen[k])
				continue;
			seen[k] = true;
			if (i < before)
				continue;
			expect_pages(_metadata, e, bits, req[k].data[0],
				     req[k].data_len, true,
				     "a read answered while logging");
			logged++;
		}
	}
	EXPECT_EQ(N - before, logged);
	log_set(_metadata, e, bits, false);
	for (i = 0; i < N; i++) {
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *req[i].status, "read %u", i);
		blk_req_free(&req[i]);
	}
	free(req);
	guest_release(&e->gm, mark);
	free(bits);
}

TEST_HARNESS_MAIN
