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
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "kselftest_harness.h"

#include "vblk_test.h"
#include "vblk_host.h"

FIXTURE(vhost_blk_ctl) {
	struct env e;
	struct host_cgroup cg;		/* for a throttled disk */
	/* Fault injection to turn off again, whatever happened. */
	char make_it_fail[PATH_MAX];	/* a disk's make-it-fail */
	bool failslab;			/* failslab was armed */
};

FIXTURE_SETUP(vhost_blk_ctl)
{
	self->cg.dir[0] = 0;
	self->make_it_fail[0] = 0;
	self->failslab = false;
	env_setup(_metadata, &self->e, VBLK_FEATURES_ALL);
}

FIXTURE_TEARDOWN(vhost_blk_ctl)
{
	if (self->make_it_fail[0]) {
		host_write_file(self->make_it_fail, "0");
		host_write_file(VBLK_FAULT_DIR "/fail_make_request/probability",
				"0");
	}
	if (self->failslab) {
		host_write_file(VBLK_FAULT_DIR "/failslab/probability", "0");
		host_write_file(VBLK_FAULT_DIR "/failslab/ignore-gfp-wait", "Y");
		host_write_file(VBLK_FAULT_DIR "/failslab/task-filter", "N");
	}
	env_teardown(&self->e);
	host_cgroup_leave(&self->cg);
}

/*
 * Set up the fault-injection attribute set @name (failslab,
 * fail_make_request) to fail every call it is asked about, @times times
 * (-1: until disarmed), silently, once fault_go() sets its probability.
 * False if the kernel has none.
 */
static bool fault_arm(struct __test_metadata *_metadata, const char *name,
		      const char *times)
{
	static const char *const files[][2] = {
		{ "probability", "0" }, { "verbose", "0" }, { "interval", "1" },
		{ "space", "0" },
	};
	char dir[128], path[192];
	unsigned int i;
	int err;

	snprintf(dir, sizeof(dir), VBLK_FAULT_DIR "/%s", name);
	if (access(dir, F_OK))
		return false;
	for (i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i][0]);
		err = host_write_file(path, files[i][1]);
		EXPECT_EQ(0, err) TH_LOG("%s: %s", path, strerror(-err));
	}
	snprintf(path, sizeof(path), "%s/times", dir);
	err = host_write_file(path, times);
	EXPECT_EQ(0, err) TH_LOG("%s: %s", path, strerror(-err));
	return true;
}

/*
 * failslab, armed as fault_arm() does, for sleeping allocations too (the
 * kind the set-up and the worker make); the teardown puts it back.
 * False if the kernel has none.
 */
static bool failslab_arm(struct __test_metadata *_metadata,
			 FIXTURE_DATA(vhost_blk_ctl) *self, const char *times)
{
	if (!fault_arm(_metadata, "failslab", times))
		return false;
	self->failslab = true;
	ASSERT_EQ(0, host_write_file(VBLK_FAULT_DIR "/failslab/ignore-gfp-wait",
				     "N"));
	return true;
}

/*
 * Fire @name: every filter is set by now, or an allocation of anyone's
 * would take the failures meant for the test's target.
 */
static void fault_go(struct __test_metadata *_metadata, const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), VBLK_FAULT_DIR "/%s/probability", name);
	ASSERT_EQ(0, host_write_file(path, "100")) TH_LOG("%s", path);
}

/*
 * Bios that fail on the disk (fail_make_request and the disk's
 * make-it-fail) answer the guest IOERR, and once the disk is back the
 * device serves it as before, what was written intact.
 */
TEST_F(vhost_blk_ctl, disk_errors_are_ioerr_and_the_device_serves_on)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	const size_t len = 16 * KiB;
	uint8_t *buf = xmalloc(_metadata, len);
	uint64_t seed = new_seed(e);
	struct stat st;
	dev_t disk;

	ASSERT_EQ(0, fstat(e->backend_fd, &st));
	if (!S_ISBLK(st.st_mode))
		SKIP(return,
		     "%s is a file: its disk's errors reach the file system first",
		     e->path);
	pattern_fill(buf, len, seed, 4096 * SECTOR);
	write_ok(_metadata, e, vq, 4096, buf, len, NULL);
	if (!fault_arm(_metadata, "fail_make_request", "-1"))
		SKIP(return,
		     "no fail_make_request in this kernel (CONFIG_FAIL_MAKE_REQUEST, debugfs)");
	disk = st.st_rdev;
	snprintf(self->make_it_fail, sizeof(self->make_it_fail),
		 "/sys/dev/block/%u:%u/make-it-fail", major(disk), minor(disk));
	ASSERT_EQ(0, host_write_file(self->make_it_fail, "1"))
		TH_LOG("%s", self->make_it_fail);
	fault_go(_metadata, "fail_make_request");

	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_IN, 4096, buf, len,
			   NULL),
		      VIRTIO_BLK_S_IOERR, 1, "read of a failing disk");
	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_OUT, 8192, buf, len,
			   NULL),
		      VIRTIO_BLK_S_IOERR, 1, "write to a failing disk");

	ASSERT_EQ(0, host_write_file(self->make_it_fail, "0"));
	self->make_it_fail[0] = 0;
	host_write_file(VBLK_FAULT_DIR "/fail_make_request/probability", "0");
	verify_pattern(_metadata, e, vq, 4096, len, seed);
	rw_verify(_metadata, e, vq, 8192, len, NULL, NULL);
	free(buf);
}

static void note_tid(const char *dir_path, pid_t tid, void *arg)
{
	(void)dir_path;
	*(pid_t *)arg = tid;
}

/* The vhost worker of our device: a thread of ours (a vhost_task). */
static pid_t worker_tid(void)
{
	char comm[32];
	pid_t tid = 0;

	snprintf(comm, sizeof(comm), "vhost-%d", getpid());
	return host_tasks_named("/proc/self/task", comm, note_tid, &tid) == 1 ?
	       tid : 0;
}

/*
 * A slab allocation that fails in the worker (failslab, for the worker
 * alone) fails that request alone, IOERR; the next one is served.  The
 * device is opened afresh, so that no request kept for reuse spares the
 * first one its allocation.
 */
TEST_F(vhost_blk_ctl, a_failed_allocation_in_the_worker_is_ioerr)
{
	struct env *e = &self->e;
	uint8_t buf[4096];
	char path[96];
	pid_t tid;

	vblk_close(&e->dev);
	ASSERT_EQ(0, env_open_dev(e, &e->dev, 1, 0, 0));
	tid = worker_tid();
	if (!tid)
		SKIP(return,
		     "the worker is not a thread of the VMM here (a 6.1 kthread)");
	/* Armed once for the worker's next allocation, sleeping or not. */
	if (!failslab_arm(_metadata, self, "1"))
		SKIP(return,
		     "no failslab in this kernel (CONFIG_FAILSLAB, debugfs)");
	ASSERT_EQ(0, host_write_file(VBLK_FAULT_DIR "/failslab/task-filter",
				     "Y"));
	snprintf(path, sizeof(path), "/proc/self/task/%d/make-it-fail", tid);
	ASSERT_EQ(0, host_write_file(path, "1")) TH_LOG("%s", path);
	fault_go(_metadata, "failslab");

	memset(buf, 0x5a, sizeof(buf));
	expect_result(_metadata,
		      xfer(_metadata, e, &e->dev.vq[0], VIRTIO_BLK_T_OUT, 2048,
			   buf, sizeof(buf), NULL),
		      VIRTIO_BLK_S_IOERR, 1, "write whose allocation failed");
	host_write_file(path, "0");
	rw_verify(_metadata, e, &e->dev.vq[0], 2048, 16 * KiB, NULL, NULL);
}

/* Wait (up to 10 s) until no task named @comm is left; how many are. */
static int tasks_left(const char *comm)
{
	int i, n = 0;

	for (i = 0; i < 10000; i++) {
		n = host_tasks_named("/proc/self/task", comm, NULL, NULL) +
		    host_tasks_named("/proc", comm, NULL, NULL);
		if (!n)
			break;
		usleep(1000);
	}
	return n;
}

/*
 * Each allocation of the device's own set-up fails in turn, the first,
 * then the second, and so on (the kernel's fail-nth): those of
 * VHOST_BLK_SET_NUM_QUEUES (the queues), which can then be asked again,
 * and those of VHOST_BLK_SET_BACKEND (the backend, the sync task), after
 * which the device closes with no worker and no sync task left behind.
 * Each fails its ioctl with ENOMEM; kmemleak, on the debug kernel, looks
 * for leaks; the device set up after the last allocation serves.  With
 * vhost_task workers, and with kthread workers where the kernel has them.
 * (VHOST_SET_OWNER's hundreds, in creating the vhost worker, are the vhost
 * core's.)
 */
TEST_F_TIMEOUT(vhost_blk_ctl, each_failed_allocation_of_the_set_up_is_enomem,
	       120)
{
	static const char *const modes[] = { "vhost_task", "kthread" };
	struct env *e = &self->e;
	struct vblk_config cfg = env_config(e, 2);
	unsigned int mode, nth, failed = 0, nqueues = 4;
	char comm[2][32];
	size_t brk;
	int fd, err;

	vblk_close(&e->dev);
	if (!failslab_arm(_metadata, self, "-1"))
		SKIP(return,
		     "no failslab in this kernel (CONFIG_FAILSLAB, debugfs)");
	vblk_fault.fd = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, vblk_fault.fd) TH_LOG("/proc/thread-self/fail-nth: %s",
					   strerror(errno));

	/* The queues: asked again on the same file after a failure. */
	vblk_fault.req = VHOST_BLK_SET_NUM_QUEUES;
	for (nth = 1; nth < 1000; nth++) {
		fd = open(VBLK_DEV_PATH, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, fd);
		vblk_fault.nth = nth;
		vblk_fault.fired = false;
		err = VBLK_IOCTL(fd, VHOST_BLK_SET_NUM_QUEUES, &nqueues);
		vblk_fault.nth = 0;
		if (vblk_fault.fired && err) {
			failed++;
			EXPECT_EQ(-ENOMEM, err)
				TH_LOG("SET_NUM_QUEUES, allocation %u: %s", nth,
				       strerror(-err));
			err = VBLK_IOCTL(fd, VHOST_BLK_SET_NUM_QUEUES,
					 &nqueues);
		}
		EXPECT_EQ(0, err) TH_LOG("SET_NUM_QUEUES, allocation %u", nth);
		EXPECT_EQ(0, VBLK_IOCTL(fd, VHOST_SET_OWNER, NULL));
		close(fd);
		if (!vblk_fault.fired)
			break;
	}
	TH_LOG("SET_NUM_QUEUES: %u of %u allocations failed it", failed,
	       nth - 1);
	EXPECT_LT(0U, failed);

	/* The backend: a new device for each. */
	snprintf(comm[0], sizeof(comm[0]), "vhost-%d", getpid());
	snprintf(comm[1], sizeof(comm[1]), "vhost-blk-%d", getpid());
	brk = e->gm.brk;
	vblk_fault.req = VHOST_BLK_SET_BACKEND;
	for (mode = 0; mode < ARRAY_SIZE(modes); mode++) {
		cfg.kthread_workers = mode;
		failed = 0;
		for (nth = 1; nth < 1000; nth++) {
			vblk_fault.nth = nth;
			vblk_fault.fired = false;
			err = vblk_open(&e->dev, &e->gm, &cfg);
			vblk_fault.nth = 0;
			if (!vblk_fault.fired)
				break;
			vblk_close(&e->dev);
			e->gm.brk = brk;
			/* One the kernel could do without. */
			if (!err)
				continue;
			failed++;
			EXPECT_EQ(-ENOMEM, err)
				TH_LOG("%s workers, allocation %u: %s",
				       modes[mode], nth, strerror(-err));
			EXPECT_EQ(0, tasks_left(comm[0]))
				TH_LOG("%s workers, allocation %u: a worker is left",
				       modes[mode], nth);
			EXPECT_EQ(0, tasks_left(comm[1]))
				TH_LOG("%s workers, allocation %u: a sync task is left",
				       modes[mode], nth);
		}
		if (mode && err == -ENOTTY)
			break;		/* no VHOST_SET_FORK_FROM_OWNER (6.1) */
		ASSERT_EQ(0, err) TH_LOG("%s workers: the set-up without a fault",
					 modes[mode]);
		TH_LOG("SET_BACKEND, %s workers: %u of %u allocations failed it",
		       modes[mode], failed, nth - 1);
		EXPECT_LT(0U, failed);
		rw_verify(_metadata, e, &e->dev.vq[0], 1024, 8 * KiB, NULL,
			  NULL);
		vblk_close(&e->dev);
		e->gm.brk = brk;
	}
	vblk_fault.req = 0;
	close(vblk_fault.fd);
	vblk_fault.fd = -1;
}

/*
 * A VMM's argument pointers are user memory like any other: one that
 * points at nothing mapped is EFAULT from every ioctl of the device's
 * own, and the device serves on.
 */
TEST_F(vhost_blk_ctl, ioctl_arguments_that_point_nowhere_are_efault)
{
	static const struct {
		const char *name;
		unsigned long req;
	} reqs[] = {
		{ "VHOST_GET_FEATURES", VHOST_GET_FEATURES },
		{ "VHOST_SET_FEATURES", VHOST_SET_FEATURES },
		{ "VHOST_BLK_SET_BACKEND", VHOST_BLK_SET_BACKEND },
		{ "VHOST_BLK_SET_SERIAL", VHOST_BLK_SET_SERIAL },
		{ "VHOST_BLK_GET_CONFIG", VHOST_BLK_GET_CONFIG },
		{ "VHOST_BLK_SET_CONFIG", VHOST_BLK_SET_CONFIG },
		{ "VHOST_BLK_GET_VRING_STATS", VHOST_BLK_GET_VRING_STATS },
		{ "VHOST_BLK_SET_VRING_POLL", VHOST_BLK_SET_VRING_POLL },
		{ "VHOST_BLK_CHARGE_PEER", VHOST_BLK_CHARGE_PEER },
	};
	struct env *e = &self->e;
	void *nowhere;
	unsigned int i;
	int fd, err;

	/* An address that was mapped once: nothing is there now. */
	nowhere = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, nowhere);
	ASSERT_EQ(0, munmap(nowhere, 4096));
	for (i = 0; i < ARRAY_SIZE(reqs); i++) {
		err = ioctl(e->dev.fd, reqs[i].req, nowhere) ? errno : 0;
		EXPECT_EQ(EFAULT, err) TH_LOG("%s: %s", reqs[i].name,
					      strerror(err));
	}
	/* SET_NUM_QUEUES comes first on a new file, or it is EBUSY. */
	fd = open(VBLK_DEV_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	err = ioctl(fd, VHOST_BLK_SET_NUM_QUEUES, nowhere) ? errno : 0;
	EXPECT_EQ(EFAULT, err) TH_LOG("VHOST_BLK_SET_NUM_QUEUES: %s",
				      strerror(err));
	close(fd);
	rw_verify(_metadata, e, &e->dev.vq[0], 512, 8 * KiB, NULL, NULL);
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
	uint16_t base = start;
	int i;

	for (i = 0; i < vq_hang_timeout_ms() * 10; i++) {
		base = vring_base(_metadata, fd);
		if (base != start)
			return base;
		usleep(100);
	}
	ASSERT_NE(start, base) TH_LOG("the device took no request");
	return base;
}

/* Wait until the device has taken all @n requests posted after @start. */
static void wait_all_taken(struct __test_metadata *_metadata, int fd,
			   uint16_t start, unsigned int n)
{
	uint16_t base = start;
	int i;

	for (i = 0; i < vq_hang_timeout_ms() * 10; i++) {
		base = vring_base(_metadata, fd);
		if (base == (uint16_t)(start + n))
			return;
		usleep(100);
	}
	ASSERT_EQ((uint16_t)(start + n), base)
		TH_LOG("the device took %u of %u requests",
		       (uint16_t)(base - start), n);
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
	 * A writable backend adds nothing but maybe SECURE_ERASE, DISCARD
	 * where the backend discards, and WRITE_ZEROES exactly where it is
	 * cheap.
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
	EXPECT_EQ(backend_has_discard(e->backend_fd),
		  !!(f & VBLK_F(VIRTIO_BLK_F_DISCARD)))
		TH_LOG("DISCARD %soffered on %s",
		       f & VBLK_F(VIRTIO_BLK_F_DISCARD) ? "" : "not ", e->path);
	/* vblk_open() negotiated them once the backend was attached. */
	EXPECT_EQ(f, e->dev.offered);
	EXPECT_EQ(f & VBLK_FEATURES_BACKEND,
		  e->dev.features & VBLK_FEATURES_BACKEND);
	/* Logging is acked only when asked for. */
	EXPECT_EQ(0ULL, e->dev.features & VBLK_FEATURES_VHOST);
}

/*
 * DISCARD, WRITE_ZEROES and SECURE_ERASE are answered UNSUPP unless their
 * feature was negotiated, whatever the backend could do (VIRTIO 1.2,
 * 5.2.6.2), and change nothing.  Features negotiated before the backend
 * was attached cannot hold the backend's bits; negotiated again after
 * the attach, they do, and the same requests are served.
 */
TEST_F(vhost_blk_ctl, range_requests_not_negotiated_are_unsupp)
{
	static const uint32_t types[] = { VIRTIO_BLK_T_DISCARD,
					  VIRTIO_BLK_T_WRITE_ZEROES,
					  VIRTIO_BLK_T_SECURE_ERASE };
	const uint64_t sector = 40 * MiB / SECTOR;
	struct env *e = &self->e;
	struct virtio_blk_discard_write_zeroes r[2];
	struct vblk_config cfg = {
		.features = VBLK_FEATURES_ALL,
		.serial = TEST_SERIAL,
		.backend_fd = -1,
	};
	struct vblk_dev dev;
	uint64_t seed, offered;
	struct result res;
	unsigned int t;
	char what[64];

	/* The usual order: features, memory, rings, then the backend. */
	ASSERT_EQ(0, vblk_open(&dev, &e->gm, &cfg));
	ASSERT_EQ(0, vblk_set_backend(dev.fd, e->backend_fd));
	EXPECT_EQ(0ULL, dev.features & VBLK_FEATURES_BACKEND);
	seed = new_seed(e);
	{
		uint8_t *buf = xmalloc(_metadata, 64 * KiB);

		pattern_fill(buf, 64 * KiB, seed, sector * SECTOR);
		write_ok(_metadata, e, &dev.vq[0], sector, buf, 64 * KiB,
			 NULL);
		free(buf);
	}
	r[0] = range(sector, 64, 0);
	r[1] = range(sector + 64, 64, 0);
	for (t = 0; t < ARRAY_SIZE(types); t++) {
		snprintf(what, sizeof(what), "type %u, not negotiated",
			 types[t]);
		expect_result(_metadata, ranges(_metadata, e, &dev.vq[0],
						types[t], r, 2, 0),
			      VIRTIO_BLK_S_UNSUPP, 1, what);
	}
	verify_pattern(_metadata, e, &dev.vq[0], sector, 64 * KiB, seed);
	EXPECT_EQ(0ULL, dev.features & VBLK_FEATURES_BACKEND);

	/* Negotiated again with the backend attached: served. */
	ASSERT_EQ(0, vblk_get_features(dev.fd, &offered));
	ASSERT_EQ(0, vblk_set_features(dev.fd, offered & VBLK_FEATURES_ALL));
	dev.features = offered & VBLK_FEATURES_ALL;
	EXPECT_EQ(backend_has_write_zeroes(e->backend_fd),
		  vblk_has(&dev, VIRTIO_BLK_F_WRITE_ZEROES));
	res = ranges(_metadata, e, &dev.vq[0], VIRTIO_BLK_T_WRITE_ZEROES, r,
		     1, 0);
	expect_result(_metadata, res,
		      range_status(&dev, VIRTIO_BLK_T_WRITE_ZEROES,
				   VIRTIO_BLK_S_OK), 1,
		      "WRITE_ZEROES, negotiated after the attach");
	if (vblk_has(&dev, VIRTIO_BLK_F_WRITE_ZEROES)) {
		uint8_t *buf = xmalloc(_metadata, 32 * KiB);
		uint8_t *zero = xmalloc(_metadata, 32 * KiB);

		memset(zero, 0, 32 * KiB);
		read_ok(_metadata, e, &dev.vq[0], sector, buf, 32 * KiB,
			NULL);
		expect_same(_metadata, zero, buf, 32 * KiB,
			    "sectors WRITE_ZEROES was served on");
		free(zero);
		free(buf);
	}
	res = ranges(_metadata, e, &dev.vq[0], VIRTIO_BLK_T_DISCARD, &r[1],
		     1, 0);
	expect_result(_metadata, res,
		      range_status(&dev, VIRTIO_BLK_T_DISCARD,
				   VIRTIO_BLK_S_OK), 1,
		      "DISCARD, negotiated after the attach");
	vblk_close(&dev);
}

/*
 * The device offers VIRTIO_BLK_F_SIZE_MAX: a read or write with a data
 * buffer longer than size_max is an I/O error and moves nothing; the same
 * bytes in buffers of at most size_max are served.
 */
TEST_F(vhost_blk_ctl, data_buffer_over_size_max_is_ioerr)
{
	const uint32_t max = VHOST_BLK_SIZE_MAX;
	const uint32_t over[] = { max + 512 };
	const uint32_t split[] = { max, 512 };
	const struct layout lo_over = { .nseg = 1, .seg = over };
	const struct layout lo_split = { .nseg = 2, .seg = split };
	const uint64_t sector = 48 * MiB / SECTOR;
	const size_t len = max + 512;
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct virtio_blk_config cfg;
	uint8_t *a = xmalloc(_metadata, len), *b = xmalloc(_metadata, len);
	uint8_t *r = xmalloc(_metadata, len);
	uint64_t seed_a = new_seed(e);

	ASSERT_TRUE(vblk_has(&e->dev, VIRTIO_BLK_F_SIZE_MAX));
	ASSERT_EQ(0, vblk_get_config(e->dev.fd, &cfg));
	EXPECT_EQ(max, cfg.size_max);

	pattern_fill(a, len, seed_a, sector * SECTOR);
	pattern_fill(b, len, new_seed(e), sector * SECTOR);
	write_ok(_metadata, e, vq, sector, a, len, &lo_split);
	expect_result(_metadata, xfer(_metadata, e, vq, VIRTIO_BLK_T_OUT,
				      sector, b, len, &lo_over),
		      VIRTIO_BLK_S_IOERR, 1, "write of one size_max + 512 buffer");
	memset(r, 0xa5, len);
	expect_result(_metadata, xfer(_metadata, e, vq, VIRTIO_BLK_T_IN,
				      sector, r, len, &lo_over),
		      VIRTIO_BLK_S_IOERR, 1, "read into one size_max + 512 buffer");
	read_ok(_metadata, e, vq, sector, r, len, &lo_split);
	expect_same(_metadata, a, r, len, "after the refused write");
	write_ok(_metadata, e, vq, sector, b, len, &lo_split);
	read_ok(_metadata, e, vq, sector, r, len, &lo_split);
	expect_same(_metadata, b, r, len, "size_max + 512 bytes in two buffers");
	free(a);
	free(b);
	free(r);
}

TEST_F(vhost_blk_ctl, set_features_rejects_what_is_not_offered)
{
	static const unsigned int bad[] = {
		VIRTIO_BLK_F_BARRIER, VIRTIO_BLK_F_GEOMETRY,
		VIRTIO_BLK_F_SCSI, VIRTIO_BLK_F_ZONED, VIRTIO_F_ACCESS_PLATFORM,
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

/*
 * A file whose file system has no direct I/O (ramfs) cannot be served
 * without the page cache between the guest and the file: EOPNOTSUPP,
 * and the device serves on with the backend it had.
 */
TEST_F(vhost_blk_ctl, set_backend_file_without_direct_io_is_eopnotsupp)
{
	struct env *e = &self->e;
	char dir[] = "/tmp/vblk-ramfs.XXXXXX", path[64];
	int fd, err;

	ASSERT_NE(NULL, mkdtemp(dir));
	/* (<sys/mount.h> and <linux/fs.h> do not go together.) */
	if (syscall(SYS_mount, "ramfs", dir, "ramfs", 0UL, NULL)) {
		err = errno;
		rmdir(dir);
		SKIP(return, "cannot mount ramfs on %s: %s", dir,
		     strerror(err));
	}
	snprintf(path, sizeof(path), "%s/disk.img", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	EXPECT_LE(0, fd) TH_LOG("%s: %s", path, strerror(errno));
	if (fd >= 0) {
		EXPECT_EQ(0, ftruncate(fd, 1 << 20));
		EXPECT_EQ(EOPNOTSUPP, set_backend_errno(e->dev.fd, fd));
		close(fd);
	}
	syscall(SYS_umount2, dir, 2 /* MNT_DETACH */);
	rmdir(dir);
	rw_verify(_metadata, e, &e->dev.vq[0], 40, 4096, NULL, NULL);
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

/* One backend serves every queue: an index other than 0 is refused. */
TEST_F(vhost_blk_ctl, set_backend_index_other_than_0_is_einval)
{
	static const unsigned int bad[] = { 1, 1000, 0xffffffffU };
	struct env *e = &self->e;
	struct vhost_vring_file file = { .fd = e->backend_fd };
	unsigned int i;

	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		file.index = bad[i];
		EXPECT_EQ(-1, ioctl(e->dev.fd, VHOST_BLK_SET_BACKEND, &file))
			TH_LOG("index %u accepted", bad[i]);
		EXPECT_EQ(EINVAL, errno);
	}
	file.index = 0;
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
	EXPECT_EQ((uint32_t)VHOST_BLK_SIZE_MAX, cfg.size_max);
	EXPECT_LE(512U, cfg.blk_size);
	EXPECT_EQ(0U, cfg.blk_size & (cfg.blk_size - 1));
	if (mq)
		EXPECT_EQ(mq < 1 ? 1 : mq > 256 ? 256 : mq, cfg.num_queues)
			TH_LOG("max_queues=%u", mq);
	/* Discard limits only where DISCARD is offered. */
	if (backend_has_discard(e->backend_fd)) {
		EXPECT_EQ((uint32_t)VHOST_BLK_MAX_DISCARD_SECTORS,
			  cfg.max_discard_sectors);
		EXPECT_EQ((uint32_t)VHOST_BLK_MAX_DISCARD_SEG,
			  cfg.max_discard_seg);
		EXPECT_LE(1U, cfg.discard_sector_alignment);
	} else {
		EXPECT_EQ(0U, cfg.max_discard_sectors);
		EXPECT_EQ(0U, cfg.max_discard_seg);
		EXPECT_EQ(0U, cfg.discard_sector_alignment);
	}
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
	EXPECT_EQ(-ENXIO, vblk_get_config(fd, &cfg))
		TH_LOG("GET_CONFIG without a backend");
	close(fd);
}

/*
 * VHOST_BLK_SET_CONFIG writes the writeback byte and nothing else: 0 or
 * 1, one byte at its offset; any other byte, length or value is EINVAL
 * and changes nothing.  Only the owner may write it; it needs no
 * backend.
 */
TEST_F(vhost_blk_ctl, set_config_writes_only_writeback)
{
	const uint32_t wce = offsetof(struct virtio_blk_config, wce);
	struct env *e = &self->e;
	struct virtio_blk_config cfg;
	uint8_t zero = 0, one = 1, two = 2, many[4] = { 0 };
	int status, fd;
	pid_t pid;

	ASSERT_EQ(0, vblk_get_config(e->dev.fd, &cfg));
	EXPECT_EQ(1, cfg.wce);
	EXPECT_EQ(-EINVAL, vblk_set_config(e->dev.fd, wce, &two, 1));
	EXPECT_EQ(-EINVAL, vblk_set_config(e->dev.fd, wce, many, 2));
	EXPECT_EQ(-EINVAL, vblk_set_config(e->dev.fd, wce - 1, many, 2));
	EXPECT_EQ(-EINVAL, vblk_set_config(e->dev.fd, 0, &zero, 1));
	EXPECT_EQ(-EINVAL, vblk_set_config(e->dev.fd, wce + 1, &zero, 1));
	EXPECT_EQ(-EINVAL, vblk_set_config(e->dev.fd, wce, &zero, 0));
	ASSERT_EQ(0, vblk_get_config(e->dev.fd, &cfg));
	EXPECT_EQ(1, cfg.wce) TH_LOG("a refused write changed writeback");
	EXPECT_EQ(e->sectors, cfg.capacity);

	/* A forked child shares the fd, not the ownership. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(vblk_set_config(e->dev.fd, wce, &zero, 1) == -EPERM ?
		      0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("a non-owner's SET_CONFIG was not EPERM");
	ASSERT_EQ(0, vblk_get_config(e->dev.fd, &cfg));
	EXPECT_EQ(1, cfg.wce);

	ASSERT_EQ(0, vblk_set_config(e->dev.fd, wce, &zero, 1));
	ASSERT_EQ(0, vblk_get_config(e->dev.fd, &cfg));
	EXPECT_EQ(0, cfg.wce);
	ASSERT_EQ(0, vblk_set_config(e->dev.fd, wce, &one, 1));
	ASSERT_EQ(0, vblk_get_config(e->dev.fd, &cfg));
	EXPECT_EQ(1, cfg.wce);

	/* Before any backend: kept, and read once one is attached. */
	fd = vblk_open_fd();
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, vblk_set_config(fd, wce, &zero, 1));
	ASSERT_EQ(0, vblk_set_backend(fd, e->backend_fd));
	ASSERT_EQ(0, vblk_get_config(fd, &cfg));
	EXPECT_EQ(0, cfg.wce);
	close(fd);
}

/*
 * VHOST_BLK_GET_CONFIG reads any window of the config space, and says
 * how much it filled: the struct grows with the spec, the number not.
 */
TEST_F(vhost_blk_ctl, get_config_reads_any_window_of_the_config_space)
{
	const size_t size = sizeof(struct virtio_blk_config);
	union {
		struct vhost_blk_config hdr;
		uint8_t raw[sizeof(struct vhost_blk_config) + 2 * size];
	} arg;
	struct virtio_blk_config whole;
	int fd = self->e.dev.fd;
	uint64_t capacity;
	int ksize;

	ASSERT_EQ(0, vblk_get_config(fd, &whole));
	/*
	 * The kernel's config space, which ends sooner than ours on a kernel
	 * with older headers (6.1 has no zoned fields): all of it, from 0.
	 */
	memset(&arg, 0xa5, sizeof(arg));
	arg.hdr.offset = 0;
	arg.hdr.len = 2 * size;
	ksize = ioctl(fd, VHOST_BLK_GET_CONFIG, &arg);
	ASSERT_LE((int)offsetof(struct virtio_blk_config, unused1), ksize);
	ASSERT_GE((int)size, ksize);
	EXPECT_EQ(0, memcmp(arg.hdr.buf, &whole, ksize));
	EXPECT_EQ(0xa5, arg.hdr.buf[ksize]);
	/* The capacity alone, from its offset. */
	memset(&arg, 0xa5, sizeof(arg));
	arg.hdr.offset = offsetof(struct virtio_blk_config, capacity);
	arg.hdr.len = sizeof(capacity);
	ASSERT_EQ((int)sizeof(capacity), ioctl(fd, VHOST_BLK_GET_CONFIG, &arg));
	memcpy(&capacity, arg.hdr.buf, sizeof(capacity));
	EXPECT_EQ(whole.capacity, le64toh(capacity));
	EXPECT_EQ(0xa5, arg.hdr.buf[sizeof(capacity)]);
	/* The tail from num_queues on, asking for more than there is. */
	memset(&arg, 0xa5, sizeof(arg));
	arg.hdr.offset = offsetof(struct virtio_blk_config, num_queues);
	arg.hdr.len = 2 * size;
	ASSERT_EQ((int)(ksize - arg.hdr.offset),
		  ioctl(fd, VHOST_BLK_GET_CONFIG, &arg));
	EXPECT_EQ(whole.num_queues, le16toh(*(uint16_t *)arg.hdr.buf));
	EXPECT_EQ(0xa5, arg.hdr.buf[ksize - arg.hdr.offset]);
	/* Nothing asked, at the end or past it: EINVAL. */
	arg.hdr.offset = 0;
	arg.hdr.len = 0;
	EXPECT_EQ(-1, ioctl(fd, VHOST_BLK_GET_CONFIG, &arg));
	EXPECT_EQ(EINVAL, errno);
	arg.hdr.offset = ksize;
	arg.hdr.len = 1;
	EXPECT_EQ(-1, ioctl(fd, VHOST_BLK_GET_CONFIG, &arg))
		TH_LOG("offset %d, the end of the config space", ksize);
	EXPECT_EQ(EINVAL, errno);
	arg.hdr.offset = size + 1;
	arg.hdr.len = 1;
	EXPECT_EQ(-1, ioctl(fd, VHOST_BLK_GET_CONFIG, &arg));
	EXPECT_EQ(EINVAL, errno);
}

/*
 * VHOST_BLK_GET_VRING_STATS fills as much of the counters as @argsz
 * holds and says how much that was: an older caller's shorter struct, a
 * newer caller's longer one.  Under the 16-byte header: EINVAL.
 */
TEST_F(vhost_blk_ctl, vring_stats_fill_what_argsz_holds)
{
	const size_t size = sizeof(struct vhost_blk_vring_stats);
	struct env *e = &self->e;
	union {
		struct vhost_blk_vring_stats st;
		uint8_t raw[2 * sizeof(struct vhost_blk_vring_stats)];
	} arg;
	size_t part = offsetof(struct vhost_blk_vring_stats, reqs_flush);

	rw_verify(_metadata, e, &e->dev.vq[0], 100, 4096, NULL, NULL);
	/* An older caller's: the header and two counters. */
	memset(&arg, 0xa5, sizeof(arg));
	arg.st.argsz = part;
	arg.st.index = 0;
	arg.st.flags = 0;
	arg.st.reserved = 0;
	ASSERT_EQ(0, ioctl(e->dev.fd, VHOST_BLK_GET_VRING_STATS, &arg));
	EXPECT_EQ(part, arg.st.argsz);
	EXPECT_EQ(1U, arg.st.reqs_in);
	EXPECT_EQ(1U, arg.st.reqs_out);
	EXPECT_EQ(0xa5, arg.raw[part]);
	/* A newer caller's, longer than this struct. */
	memset(&arg, 0xa5, sizeof(arg));
	arg.st.argsz = sizeof(arg);
	arg.st.index = 0;
	arg.st.flags = 0;
	arg.st.reserved = 0;
	ASSERT_EQ(0, ioctl(e->dev.fd, VHOST_BLK_GET_VRING_STATS, &arg));
	EXPECT_EQ(size, arg.st.argsz);
	EXPECT_EQ(0U, arg.st.used_errors);
	EXPECT_EQ(0xa5, arg.raw[size]);
	/* Under the header, or a reserved field set. */
	arg.st.argsz = VHOST_BLK_VRING_STATS_MIN_SZ - 1;
	EXPECT_EQ(-1, ioctl(e->dev.fd, VHOST_BLK_GET_VRING_STATS, &arg));
	EXPECT_EQ(EINVAL, errno);
	arg.st.argsz = size;
	arg.st.reserved = 1;
	EXPECT_EQ(-1, ioctl(e->dev.fd, VHOST_BLK_GET_VRING_STATS, &arg));
	EXPECT_EQ(EINVAL, errno);
}

/* The /dev/dm-N node of device-mapper device @name. */
static int dm_node(const char *name, char *path, size_t len)
{
	char attr[64], got[128];
	unsigned int i;

	for (i = 0; i < 256; i++) {
		FILE *f;

		snprintf(attr, sizeof(attr), "/sys/block/dm-%u/dm/name", i);
		f = fopen(attr, "re");
		if (!f)
			continue;
		if (fgets(got, sizeof(got), f) &&
		    !strncmp(got, name, strlen(name)) &&
		    (got[strlen(name)] == '\n' || !got[strlen(name)])) {
			fclose(f);
			snprintf(path, len, "/dev/dm-%u", i);
			return 0;
		}
		fclose(f);
	}
	return -ENOENT;
}

/*
 * min_io_size is 16 bits of blocks: a larger hint (here a dm stripe with
 * a 128 MiB chunk over the test disk) becomes the largest power of two
 * that fits, not its low 16 bits.
 */
TEST_F(vhost_blk_ctl, get_config_clamps_a_large_min_io_size)
{
	struct env *e = &self->e;
	struct virtio_blk_config cfg;
	char name[64], cmd[512], path[128];
	const uint64_t chunk = 262144;		/* sectors: 128 MiB */
	struct stat st;
	int fd, rc;

	ASSERT_EQ(0, fstat(e->backend_fd, &st));
	if (!S_ISBLK(st.st_mode))
		SKIP(return, "a file has no I/O size hints");
	ASSERT_LE(2 * chunk, e->sectors);
	snprintf(name, sizeof(name), "vblk-stripe-%d", getpid());
	snprintf(cmd, sizeof(cmd),
		 "dmsetup create %s --table '0 %llu striped 2 %llu %s 0 %s %llu'",
		 name, (unsigned long long)(2 * chunk),
		 (unsigned long long)chunk, e->path, e->path,
		 (unsigned long long)chunk);
	/* dm-mod may be a module not loaded yet (then dmsetup fails). */
	rc = system("modprobe -q dm_mod");
	rc = system(cmd);
	ASSERT_EQ(0, rc) TH_LOG("%s: status %d", cmd, rc);
	/* devtmpfs makes /dev/dm-N; without udev there is no mapper link. */
	ASSERT_EQ(0, dm_node(name, path, sizeof(path)))
		TH_LOG("no /sys/block/dm-*/dm/name says %s", name);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		EXPECT_EQ(0, vblk_set_backend(e->dev.fd, fd));
		EXPECT_EQ(0, vblk_get_config(e->dev.fd, &cfg));
		EXPECT_EQ(1U << 15, cfg.min_io_size)
			TH_LOG("io_min of %llu blocks", (unsigned long long)
			       (chunk * 512 / cfg.blk_size));
		EXPECT_EQ(0, vblk_set_backend(e->dev.fd, -1));
		close(fd);
	}
	/*
	 * udev, where it runs, probes a new device (blkid) as it appears:
	 * a remove that meets its open is retried, not failed.
	 */
	snprintf(cmd, sizeof(cmd), "dmsetup remove --retry %s", name);
	EXPECT_EQ(0, system(cmd));
	ASSERT_LE(0, fd) TH_LOG("open %s: %s", path, strerror(errno));
}

/*
 * SECURE_ERASE is counted as such, answered OK where the backend has it,
 * or IOERR (a write on a read-only disk) where it has not: none of the
 * test disks has it.
 */
TEST_F(vhost_blk_ctl, secure_erase_is_counted)
{
	struct env *e = &self->e;
	struct virtio_blk_discard_write_zeroes r = range(1000, 8, 0);
	struct vhost_blk_vring_stats st;
	uint8_t want = VIRTIO_BLK_S_OK;
	uint64_t f = 0;
	int ro = -1;

	ASSERT_EQ(0, vblk_get_features(e->dev.fd, &f));
	if (!(f & VBLK_F(VIRTIO_BLK_F_SECURE_ERASE))) {
		/*
		 * Negotiated all the same (a VMM may set the bit before any
		 * backend offers it), on a read-only backend: an IOERR
		 * counted as a SECURE_ERASE.
		 */
		f = e->dev.features | VBLK_F(VIRTIO_BLK_F_SECURE_ERASE);
		ASSERT_EQ(0, vblk_set_features(e->dev.fd, f));
		ro = open(e->path, O_RDONLY | O_CLOEXEC);
		ASSERT_LE(0, ro);
		ASSERT_EQ(0, vblk_set_backend(e->dev.fd, ro));
		want = VIRTIO_BLK_S_IOERR;
	}
	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, VHOST_BLK_STATS_RESET, &st));
	expect_result(_metadata,
		      ranges(_metadata, e, &e->dev.vq[0],
			     VIRTIO_BLK_T_SECURE_ERASE, &r, 1, 0),
		      want, 1, "SECURE_ERASE");
	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, 0, &st));
	EXPECT_EQ(1U, st.reqs_secure_erase);
	EXPECT_EQ(want == VIRTIO_BLK_S_IOERR ? 1U : 0U, st.reqs_ioerr);
	EXPECT_EQ(0U, st.reqs_unsupp + st.reqs_discard + st.reqs_write_zeroes);
	if (ro >= 0) {
		ASSERT_EQ(0, vblk_set_backend(e->dev.fd, e->backend_fd));
		close(ro);
	}
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
	TH_LOG(
		"%u of %u requests queued while detached were served on re-attach before the next kick",
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

/*
 * Closing the device with requests in flight answers every request it
 * took: status and used ring.  The disk is throttled (8 writes a second),
 * so that they are in flight when the fd is closed.
 */
TEST_F_TIMEOUT(vhost_blk_ctl, close_with_requests_in_flight_then_reopen, 60)
{
	enum { N = 8 };
	struct env *e = &self->e;
	uint64_t seed = new_seed(e);
	unsigned int i, done;
	struct blk_req *req;
	uint16_t start;
	struct vq *vq;

	host_reopen_throttled(_metadata, e, &self->cg, 8);
	vq = &e->dev.vq[0];
	start = vq->avail_idx;
	req = post_writes(_metadata, e, vq, 60000, N, 64 * KiB, seed);
	ASSERT_EQ(1, vq_kick_force(vq));
	wait_all_taken(_metadata, e->dev.fd, start, N);
	/* The fd only: the rings stay ours to read. */
	close(e->dev.fd);
	e->dev.fd = -1;

	done = vq_used_pending(vq);
	EXPECT_EQ((unsigned int)N, done)
		TH_LOG("%u of the %u requests taken were answered on close",
		       done, N);
	ASSERT_EQ(0, blk_complete(vq, done));
	for (i = 0; i < N; i++)
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *req[i].status, "request %u",
			      i);
	free_reqs(req, N);

	vblk_close(&e->dev);
	ASSERT_EQ(0, env_open_dev(e, &e->dev, 1, 0, 0));
	for (i = 0; i < N; i++)
		verify_pattern(_metadata, e, &e->dev.vq[0], 60000 + i * 128,
			       64 * KiB, seed);
}

/*
 * An owner that exits with requests in flight: the guest is gone, but
 * every write its device took reaches the disk before the exit is over
 * (before its parent's waitpid() returns), and a new device sees it.  The
 * disk is throttled, so that they are in flight at the exit.
 */
TEST_F_TIMEOUT(vhost_blk_ctl, owner_exit_with_requests_in_flight_then_reopen,
	       60)
{
	enum { N = 16 };
	struct env *e = &self->e;
	uint64_t seed = new_seed(e);
	unsigned int i;
	int status;
	pid_t pid;

	host_reopen_throttled(_metadata, e, &self->cg, 4);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* Its own device on its own copy of guest memory. */
		struct vblk_dev dev;
		uint16_t start;

		if (env_open_dev(e, &dev, 1, 0, 0))
			_exit(1);
		start = dev.vq[0].avail_idx;
		free_reqs(post_writes(_metadata, e, &dev.vq[0], 70000, N,
				      64 * KiB, seed), N);
		vq_kick_force(&dev.vq[0]);
		wait_all_taken(_metadata, dev.fd, start, N);
		/* Exit, without closing anything, with all N in flight. */
		_exit(vq_used_pending(&dev.vq[0]) == N ? 3 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_NE(3, WEXITSTATUS(status))
		TH_LOG("all writes were done before the exit: nothing tested");
	ASSERT_EQ(0, WEXITSTATUS(status));

	vblk_close(&e->dev);
	ASSERT_EQ(0, env_open_dev(e, &e->dev, 1, 0, 0));
	for (i = 0; i < N; i++)
		verify_pattern(_metadata, e, &e->dev.vq[0], 70000 + i * 128,
			       64 * KiB, seed);
	rw_verify(_metadata, e, &e->dev.vq[0], 70000, 64 * KiB, NULL, NULL);
}

/*
 * The status bytes of requests in flight are host addresses translated
 * through the memory table of the time: VHOST_SET_MEM_TABLE answers them
 * all before the new table takes over.  The disk is throttled, so that
 * they are still in flight when it is called.
 */
TEST_F_TIMEOUT(vhost_blk_ctl, set_mem_table_answers_requests_in_flight_first,
	       60)
{
	enum { N = 8 };
	struct env *e = &self->e;
	struct blk_req req[N];
	uint32_t len = 4096;
	struct blk_req_spec spec = {
		.type = VIRTIO_BLK_T_IN, .nseg = 1, .seg_len = &len,
	};
	unsigned int i, done;
	uint16_t start;
	struct vq *vq;

	host_reopen_throttled(_metadata, e, &self->cg, 4);
	vq = &e->dev.vq[0];
	start = vq->avail_idx;
	for (i = 0; i < N; i++) {
		spec.sector = 30000 + i * 8;
		ASSERT_EQ(0, blk_req_prep(&req[i], &e->gm, &spec));
		ASSERT_EQ(0, blk_req_post(vq, &req[i]));
	}
	ASSERT_EQ(1, vq_kick_force(vq));
	wait_all_taken(_metadata, e->dev.fd, start, N);

	ASSERT_EQ(0, vblk_set_mem_table(e->dev.fd, &e->gm));
	done = vq_used_pending(vq);
	EXPECT_EQ((unsigned int)N, done)
		TH_LOG("%u of %u requests answered when VHOST_SET_MEM_TABLE returned",
		       done, N);
	ASSERT_EQ(0, blk_complete(vq, N));
	for (i = 0; i < N; i++) {
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *req[i].status, "read %u", i);
		blk_req_free(&req[i]);
	}
	/* And the device goes on under the new table. */
	rw_verify(_metadata, e, vq, 30000, 4096, NULL, NULL);
}

/* Wait until task @pid sleeps uninterruptibly or killably (state D). */
static void wait_task_in_d(struct __test_metadata *_metadata, pid_t pid)
{
	char path[64], buf[512], *p = NULL;
	int i, fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (i = 0; i < vq_hang_timeout_ms() * 10; i++) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		ASSERT_LE(0, fd) TH_LOG("open %s: %s", path, strerror(errno));
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		ASSERT_LT(0, n);
		buf[n] = 0;
		/* "pid (comm) S ...": the state follows the last ')'. */
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'D')
			return;
		usleep(100);
	}
	ASSERT_EQ('D', p ? p[2] : 0) TH_LOG("%s: never in state D", path);
}

/*
 * Storage that stops answering (a hard NFS mount, multipath with
 * queue_if_no_path) must not leave its VMM unkillable.  The owner calls
 * VHOST_SET_MEM_TABLE with 8 writes in flight to a disk throttled to two
 * a second, and is killed while it waits for them: it dies at once, with
 * requests still in flight, which a second reference to its device
 * (pidfd_getfd()) counts.  Closing that reference answers the rest, and
 * every write reached the disk.
 */
TEST_F_TIMEOUT(vhost_blk_ctl, set_mem_table_waiting_for_storage_is_killable,
	       90)
{
	enum { N = 8 };
	struct env *e = &self->e;
	uint64_t seed = new_seed(e);
	struct vhost_blk_vring_stats st;
	int pfd[2], pidfd, fd, child_fd, status;
	unsigned int i;
	uint8_t *old;
	pid_t pid;

	/*
	 * Written once before the throttle: on a file, the writes below are
	 * then overwrites, which the ring's worker submits without reading
	 * the filesystem's metadata through the throttled disk (its ring
	 * mutex held, which the owner's VHOST_SET_MEM_TABLE waits for).
	 */
	old = calloc(N, 4096);
	ASSERT_NE(NULL, old);
	write_ok(_metadata, e, &e->dev.vq[0], 80000, old, N * 4096, NULL);
	free(old);
	/* io.max takes no rate below 2. */
	host_reopen_throttled(_metadata, e, &self->cg, 2);
	ASSERT_EQ(0, pipe(pfd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* Its own device on its own copy of guest memory. */
		struct vblk_dev dev;
		uint16_t start;

		close(pfd[0]);
		if (env_open_dev(e, &dev, 1, 0, 0))
			_exit(1);
		start = dev.vq[0].avail_idx;
		free_reqs(post_writes(_metadata, e, &dev.vq[0], 80000, N, 4096,
				      seed), N);
		vq_kick_force(&dev.vq[0]);
		wait_all_taken(_metadata, dev.fd, start, N);
		if (write(pfd[1], &dev.fd, sizeof(dev.fd)) != sizeof(dev.fd))
			_exit(1);
		vblk_set_mem_table(dev.fd, &e->gm);
		/* Not killed while it waited. */
		_exit(2);
	}
	close(pfd[1]);
	ASSERT_EQ((ssize_t)sizeof(child_fd),
		  read(pfd[0], &child_fd, sizeof(child_fd)))
		TH_LOG("the owner did not get its writes in flight");
	close(pfd[0]);
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	ASSERT_LE(0, pidfd) TH_LOG("pidfd_open: %s", strerror(errno));
	fd = syscall(SYS_pidfd_getfd, pidfd, child_fd, 0);
	ASSERT_LE(0, fd) TH_LOG("pidfd_getfd: %s", strerror(errno));
	close(pidfd);

	wait_task_in_d(_metadata, pid);
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		TH_LOG("the owner ended with status %#x, not by SIGKILL",
		       status);
	ASSERT_EQ(0, vblk_get_stats(fd, 0, 0, &st));
	EXPECT_LT(0ULL, (unsigned long long)st.inflight)
		TH_LOG("the owner died only once its %u writes were done", N);
	TH_LOG("%llu of %u writes in flight when the killed owner was reaped",
	       (unsigned long long)st.inflight, N);
	/* The last reference: its release answers what is left. */
	close(fd);

	for (i = 0; i < N; i++)
		verify_pattern(_metadata, e, &e->dev.vq[0], 80000 + i * 8, 4096,
			       seed);
}

struct kicker {
	int fd;
	bool stop;
	unsigned long kicks;
};

/* Kick as fast as the eventfd takes it, until told to stop. */
static void *kicker_fn(void *arg)
{
	struct kicker *k = arg;
	uint64_t one = 1;

	while (!__atomic_load_n(&k->stop, __ATOMIC_ACQUIRE)) {
		if (write(k->fd, &one, sizeof(one)) == sizeof(one))
			k->kicks++;
	}
	return NULL;
}

/*
 * An attach that fails on a ring (here its used ring is read-only, so
 * vhost_vq_init_access() cannot write the flags) must not leave that ring
 * running for a moment on state that was never set up: with the guest
 * kicking all the while, no request is ever taken from it, and once the
 * ring is fixed the next attach serves the request.  The window this
 * closes is short: many attempts, each raced by kicks.
 */
TEST_F_TIMEOUT(vhost_blk_ctl, failed_attach_takes_nothing_from_the_ring, 120)
{
	enum { ROUNDS = 400 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t old[4096], new[4096];
	struct kicker k = { .fd = vq->kick_fd };
	uint32_t len = sizeof(new);
	struct blk_req_spec spec = {
		.type = VIRTIO_BLK_T_OUT, .nseg = 1, .seg_len = &len,
		.sector = 40000,
	};
	struct vhost_blk_vring_stats st;
	uint64_t seed = new_seed(e);
	unsigned int r, failed = 0;
	struct blk_req req;
	uint16_t start;
	pthread_t th;
	void *page;

	pattern_fill(old, sizeof(old), seed, 40000 * SECTOR);
	write_ok(_metadata, e, vq, 40000, old, sizeof(old), NULL);
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	start = vring_base(_metadata, e->dev.fd);
	ASSERT_EQ(0, blk_req_prep(&req, &e->gm, &spec));
	pattern_fill(new, sizeof(new), new_seed(e), 40000 * SECTOR);
	blk_req_fill(&req, new, sizeof(new));
	ASSERT_EQ(0, blk_req_post(vq, &req));

	page = (void *)((uintptr_t)vq->used & ~(uintptr_t)4095);
	ASSERT_EQ(0, mprotect(page, 4096, PROT_READ));
	ASSERT_EQ(0, pthread_create(&th, NULL, kicker_fn, &k));
	while (__atomic_load_n(&k.kicks, __ATOMIC_RELAXED) < 1000)
		sched_yield();
	for (r = 0; r < ROUNDS; r++) {
		int err = set_backend_errno(e->dev.fd, e->backend_fd);

		failed += err == EFAULT;
		if (err != EFAULT)
			break;
		sched_yield();
	}
	__atomic_store_n(&k.stop, true, __ATOMIC_RELEASE);
	ASSERT_EQ(0, pthread_join(th, NULL));
	ASSERT_EQ(0, mprotect(page, 4096, PROT_READ | PROT_WRITE));
	TH_LOG("%u attaches failed with EFAULT under %lu kicks", failed,
	       k.kicks);
	ASSERT_EQ((unsigned int)ROUNDS, failed);

	EXPECT_EQ(start, vring_base(_metadata, e->dev.fd))
		TH_LOG("a request was taken from the ring of a failed attach");
	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, 0, &st));
	EXPECT_EQ(1U, st.reqs_out) TH_LOG("only the first write was served");
	/* No backend now: read the disk from here. */
	ASSERT_EQ((ssize_t)sizeof(new),
		  pread(e->backend_fd, new, sizeof(new), 40000 * SECTOR));
	expect_same(_metadata, old, new, sizeof(old),
		    "the disk after the failed attaches");

	/* Fixed: the next attach serves it. */
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, e->backend_fd));
	ASSERT_EQ(0, blk_complete(vq, 1));
	ASSERT_STATUS(VIRTIO_BLK_S_OK, *req.status, "the posted write");
	blk_req_free(&req);
	verify_pattern(_metadata, e, vq, 40000, sizeof(new), e->seed);
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
		ASSERT_EQ(0, vq_wait_call(vq, vq_hang_timeout_ms()));
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
	ASSERT_EQ(0, vq_wait_call(vq, vq_hang_timeout_ms()))
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
		ASSERT_EQ(0, vq_wait_call(vq, vq_hang_timeout_ms()))
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
static void dirty_log_check(struct __test_metadata *_metadata, struct env *e)
{
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

TEST_F(vhost_blk_ctl, dirty_log_marks_exactly_the_pages_written)
{
	dirty_log_check(_metadata, &self->e);
}

/*
 * Pinned memory (VHOST_BLK_SET_MEM_PINNED) is written without a page
 * pinned per request: the dirty log must not notice the difference.
 */
TEST_F(vhost_blk_ctl, dirty_log_marks_the_pages_written_in_pinned_memory)
{
	struct env *e = &self->e;

	ASSERT_EQ(0, vblk_set_mem_pinned(e->dev.fd, true));
	ASSERT_EQ(0, vblk_set_mem_table(e->dev.fd, &e->gm));
	dirty_log_check(_metadata, e);
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

/* The caller's locked memory (VmLck: its mm's locked_vm), in KiB. */
static long vm_locked_kib(struct __test_metadata *_metadata)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "re");

	ASSERT_NE(NULL, f) TH_LOG("/proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %ld kB", &kib) == 1)
			break;
	fclose(f);
	ASSERT_LE(0, kib) TH_LOG("no VmLck in /proc/self/status");
	return kib;
}

static uint64_t reqs_pinned(struct __test_metadata *_metadata, int fd)
{
	struct vhost_blk_vring_stats st;

	ASSERT_EQ(0, vblk_get_stats(fd, 0, 0, &st));
	return st.reqs_pinned;
}

static bool backend_is_bdev(const struct env *e)
{
	struct stat st;

	return !fstat(e->backend_fd, &st) && S_ISBLK(st.st_mode);
}

/*
 * VHOST_BLK_SET_MEM_PINNED pins the next memory table, charges it to the
 * owner's locked memory, and a block device's reads and writes are built
 * on it: counted in reqs_pinned, with the data where it belongs, in one
 * buffer or three.  A file's requests pin their own pages, as before.
 * Turned off, the pages are unpinned at once; a close unpins them too.
 */
TEST_F(vhost_blk_ctl, pinned_memory_serves_io_and_is_charged_to_memlock)
{
	static const uint32_t segs[] = { 512, 3584, 8192 };
	const struct layout three = { .nseg = 3, .seg = segs };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t per_bdev = backend_is_bdev(e) ? 1 : 0;
	long before = vm_locked_kib(_metadata);

	/* Asked for, it waits for the next table. */
	ASSERT_EQ(0, vblk_set_mem_pinned(e->dev.fd, true));
	EXPECT_EQ(before, vm_locked_kib(_metadata));
	rw_verify(_metadata, e, vq, 2048, 4096, NULL, NULL);
	EXPECT_EQ(0U, reqs_pinned(_metadata, e->dev.fd));

	ASSERT_EQ(0, vblk_set_mem_table(e->dev.fd, &e->gm));
	EXPECT_EQ(before + (long)(e->gm.size >> 10), vm_locked_kib(_metadata));
	rw_verify(_metadata, e, vq, 2048, 4096, NULL, NULL);
	rw_verify(_metadata, e, vq, 4096, 12288, &three, &three);
	rw_verify(_metadata, e, vq, 8192, 1 << 20, NULL, NULL);
	EXPECT_EQ(6 * per_bdev, reqs_pinned(_metadata, e->dev.fd));

	ASSERT_EQ(0, vblk_set_mem_pinned(e->dev.fd, false));
	EXPECT_EQ(before, vm_locked_kib(_metadata));
	rw_verify(_metadata, e, vq, 2048, 4096, NULL, NULL);
	EXPECT_EQ(6 * per_bdev, reqs_pinned(_metadata, e->dev.fd));

	ASSERT_EQ(0, vblk_set_mem_pinned(e->dev.fd, true));
	ASSERT_EQ(0, vblk_set_mem_table(e->dev.fd, &e->gm));
	EXPECT_EQ(before + (long)(e->gm.size >> 10), vm_locked_kib(_metadata));
	vblk_close(&e->dev);
	EXPECT_EQ(before, vm_locked_kib(_metadata));
}

/* Write a fresh pattern and read it back, each request wholly in @gm. */
static void rw_verify_in(struct __test_metadata *_metadata, struct env *e,
			 struct guest_mem *gm, uint64_t sector, uint32_t len)
{
	struct blk_req_spec spec = {
		.type = VIRTIO_BLK_T_OUT, .sector = sector, .nseg = 1,
		.seg_len = &len,
	};
	struct vq *vq = &e->dev.vq[0];
	size_t mark = guest_mark(gm);
	struct blk_req wr, rd;

	ASSERT_EQ(0, blk_req_prep(&wr, gm, &spec));
	pattern_fill(wr.data[0], len, new_seed(e), sector * SECTOR);
	spec.type = VIRTIO_BLK_T_IN;
	ASSERT_EQ(0, blk_req_prep(&rd, gm, &spec));
	ASSERT_EQ(0, blk_req_run(vq, &wr));
	ASSERT_STATUS(VIRTIO_BLK_S_OK, *wr.status, "write at sector %llu",
		      (unsigned long long)sector);
	ASSERT_EQ(0, blk_req_run(vq, &rd));
	ASSERT_STATUS(VIRTIO_BLK_S_OK, *rd.status, "read at sector %llu",
		      (unsigned long long)sector);
	expect_same(_metadata, wr.data[0], rd.data[0], len, "read back");
	blk_req_free(&wr);
	blk_req_free(&rd);
	guest_release(gm, mark);
}

/*
 * Memory hot-plug: a table with a second region pins it as well, and a
 * request whose every buffer is in it is served from it.  Unplugged, the
 * region's pages are unpinned; VHOST_RESET_OWNER unpins the rest.  On
 * the way, a region that aliases part of the first (the same memory at
 * two guest addresses, as QEMU's aliases are) leaves a buffer past its
 * end to be found in the first, or pinned for the request: served either
 * way.
 */
TEST_F(vhost_blk_ctl, set_mem_table_pins_the_new_regions_and_unpins_the_old)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t per_bdev = backend_is_bdev(e) ? 1 : 0;
	long before = vm_locked_kib(_metadata);
	const struct guest_mem *two[2], *three[3];
	struct guest_mem gm2, alias, half, dup;
	size_t mark;

	ASSERT_EQ(0, guest_mem_init(&gm2, 8 << 20,
				    e->gm.gpa + e->gm.size + (1ULL << 30)));
	two[0] = &e->gm;
	two[1] = &gm2;
	ASSERT_EQ(0, vblk_set_mem_pinned(e->dev.fd, true));
	ASSERT_EQ(0, vblk_set_mem_regions(e->dev.fd, two, 2));
	EXPECT_EQ(before + (long)((e->gm.size + gm2.size) >> 10),
		  vm_locked_kib(_metadata));

	rw_verify_in(_metadata, e, &gm2, 6000, 65536);
	EXPECT_EQ(2 * per_bdev, reqs_pinned(_metadata, e->dev.fd));

	ASSERT_EQ(0, vblk_set_mem_table(e->dev.fd, &e->gm));
	EXPECT_EQ(before + (long)(e->gm.size >> 10), vm_locked_kib(_metadata));
	rw_verify(_metadata, e, vq, 6000, 4096, NULL, NULL);
	EXPECT_EQ(4 * per_bdev, reqs_pinned(_metadata, e->dev.fd));

	/* The alias: 1 MiB of the first region's memory from its 1 MiB on. */
	alias.va = e->gm.va + (1 << 20);
	alias.size = 1 << 20;
	alias.gpa = gm2.gpa;
	two[1] = &alias;
	ASSERT_EQ(0, vblk_set_mem_regions(e->dev.fd, two, 2));
	mark = guest_mark(&e->gm);
	if (e->gm.brk < (3 << 20))
		ASSERT_NE(NULL, guest_alloc(&e->gm, (3 << 20) - e->gm.brk, 0));
	rw_verify(_metadata, e, vq, 6100, 4096, NULL, NULL);
	guest_release(&e->gm, mark);
	EXPECT_EQ(4 * per_bdev, reqs_pinned(_metadata, e->dev.fd));

	/*
	 * The table in force's memory listed twice, and half of it once
	 * more, each at a guest address of its own: only one of the two
	 * takes over the pinned pages, the other two are pinned again.
	 * Then the first table back: it takes them over from the last one.
	 */
	ASSERT_EQ(0, vblk_set_mem_table(e->dev.fd, &e->gm));
	half = e->gm;
	half.size = e->gm.size / 2;
	half.gpa = gm2.gpa;
	dup = e->gm;
	dup.gpa = gm2.gpa + (1ULL << 30);
	three[0] = &e->gm;
	three[1] = &half;
	three[2] = &dup;
	ASSERT_EQ(0, vblk_set_mem_regions(e->dev.fd, three, 3));
	EXPECT_EQ(before + (long)((2 * e->gm.size + half.size) >> 10),
		  vm_locked_kib(_metadata));
	rw_verify(_metadata, e, vq, 6200, 65536, NULL, NULL);
	EXPECT_EQ(6 * per_bdev, reqs_pinned(_metadata, e->dev.fd));
	ASSERT_EQ(0, vblk_set_mem_table(e->dev.fd, &e->gm));
	EXPECT_EQ(before + (long)(e->gm.size >> 10), vm_locked_kib(_metadata));
	rw_verify(_metadata, e, vq, 6300, 65536, NULL, NULL);
	EXPECT_EQ(8 * per_bdev, reqs_pinned(_metadata, e->dev.fd));
	ASSERT_EQ(0, vblk_set_mem_table(e->dev.fd, &e->gm));

	ASSERT_EQ(0, ioctl(e->dev.fd, VHOST_RESET_OWNER, NULL));
	EXPECT_EQ(before, vm_locked_kib(_metadata));
	guest_mem_destroy(&gm2);
}

/*
 * A table that cannot be pinned fails VHOST_SET_MEM_TABLE and leaves the
 * old one in force, nothing pinned or charged: a region that is not
 * mapped writable, one of no bytes, one past what user space can map,
 * one that is not mapped at all, one too large to keep its pages' array;
 * 65536 regions, and a table that runs off the caller's memory.
 */
TEST_F(vhost_blk_ctl, a_table_that_cannot_be_pinned_fails_and_keeps_the_old)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	long before = vm_locked_kib(_metadata);
	const size_t len = 1 << 20;
	struct guest_mem bad = {
		.size = len, .gpa = e->gm.gpa + e->gm.size + (1ULL << 30),
	};
	const struct guest_mem *two[2] = { &e->gm, &bad };
	struct {
		const char *what;
		size_t size;
		int prot;
		bool unmap;
		uint64_t uaddr;		/* 0: the mapping's */
	} tries[] = {
		{ "a read-only region", len, PROT_READ, false, 0 },
		{ "a region of no bytes", 0, PROT_READ | PROT_WRITE, false, 0 },
		{ "a region of 2^62 bytes", 1ULL << 62, PROT_READ | PROT_WRITE,
		  false, 0 },
		{ "an unmapped region", len, PROT_READ | PROT_WRITE, true, 0 },
		/* Its page array alone is 2 GiB: ENOMEM before any pinning. */
		{ "a region of 2^40 bytes at 1 TiB", 1ULL << 40,
		  PROT_READ | PROT_WRITE, false, 1ULL << 40 },
	};
	struct vhost_memory many = { .nregions = 65536 }, *end;
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *two_pages;
	unsigned int i;
	int err;

	ASSERT_EQ(0, vblk_set_mem_pinned(e->dev.fd, true));
	for (i = 0; i < ARRAY_SIZE(tries); i++) {
		bad.va = mmap(NULL, len, tries[i].prot,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1,
			      0);
		ASSERT_NE(MAP_FAILED, bad.va);
		bad.size = tries[i].size;
		if (tries[i].unmap)
			ASSERT_EQ(0, munmap(bad.va, len));
		if (tries[i].uaddr) {
			munmap(bad.va, len);
			bad.va = (uint8_t *)(uintptr_t)tries[i].uaddr;
		}
		err = vblk_set_mem_regions(e->dev.fd, two, 2);
		EXPECT_TRUE(err == -EFAULT || err == -ENOMEM)
			TH_LOG("%s: %s", tries[i].what, strerror(-err));
		EXPECT_EQ(before, vm_locked_kib(_metadata))
			TH_LOG("after %s", tries[i].what);
		rw_verify(_metadata, e, vq, 7000 + i * 8, 4096, NULL, NULL);
		if (!tries[i].unmap && !tries[i].uaddr)
			munmap(bad.va, len);
	}
	/*
	 * A shared mapping of the backend itself: writeback could clean
	 * its pages under a long-term pin (6.5's GUP refuses it; on 6.1
	 * the backport does).
	 */
	bad.va = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
		      e->backend_fd, 0);
	ASSERT_NE(MAP_FAILED, bad.va) TH_LOG("mmap %s: %s", e->path,
					     strerror(errno));
	bad.size = len;
	err = vblk_set_mem_regions(e->dev.fd, two, 2);
	EXPECT_EQ(-EFAULT, err)
		TH_LOG("a shared mapping of %s: %s", e->path, strerror(-err));
	munmap(bad.va, len);
	/* More regions than the vhost core could ever take. */
	EXPECT_EQ(-1, ioctl(e->dev.fd, VHOST_SET_MEM_TABLE, &many));
	EXPECT_EQ(E2BIG, errno);
	/* A table whose regions run off the end of the caller's memory. */
	two_pages = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, two_pages);
	ASSERT_EQ(0, mprotect(two_pages + page, page, PROT_NONE));
	end = (struct vhost_memory *)(two_pages + page - sizeof(*end));
	end->nregions = 1;
	end->padding = 0;
	EXPECT_EQ(-1, ioctl(e->dev.fd, VHOST_SET_MEM_TABLE, end));
	EXPECT_EQ(EFAULT, errno);
	munmap(two_pages, 2 * page);
	EXPECT_EQ(before, vm_locked_kib(_metadata));
	rw_verify(_metadata, e, vq, 7100, 4096, NULL, NULL);
	EXPECT_EQ(0U, reqs_pinned(_metadata, e->dev.fd));
	/* And a good one is pinned after them. */
	ASSERT_EQ(0, vblk_set_mem_table(e->dev.fd, &e->gm));
	EXPECT_EQ(before + (long)(e->gm.size >> 10), vm_locked_kib(_metadata));
}

/*
 * The child's half of pinning_past_rlimit_memlock_is_enomem: without
 * CAP_IPC_LOCK and with 1 MiB of RLIMIT_MEMLOCK, a device of its own
 * cannot pin its 64 MiB table (ENOMEM), and serves on, unpinned, with
 * nothing charged; with the limit raised it can.  Then, with the limit
 * at what is pinned plus @gm2's size, the same table sent again and the
 * table with @gm2 hot-plugged fit: the regions they share with the table
 * in force are not pinned or charged twice.  Returns the step that
 * failed, 0 if none.
 */
static int child_pins_past_memlock(struct env *e, struct guest_mem *gm2)
{
	const struct guest_mem *two[2] = { &e->gm, gm2 };
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct cap[2];
	struct rlimit rl = { .rlim_cur = 1 << 20, .rlim_max = RLIM_INFINITY };
	uint32_t len = 4096;
	struct blk_req_spec spec = {
		.type = VIRTIO_BLK_T_IN, .nseg = 1, .seg_len = &len,
	};
	struct vhost_blk_vring_stats st;
	struct vblk_dev dev;
	struct blk_req req;
	int ret = 0;

	if (syscall(SYS_capget, &hdr, cap))
		return 1;
	cap[0].effective &= ~(1U << CAP_IPC_LOCK);
	if (syscall(SYS_capset, &hdr, cap) || setrlimit(RLIMIT_MEMLOCK, &rl))
		return 2;
	if (env_open_dev(e, &dev, 1, 0, 0))
		return 3;
	if (vblk_set_mem_pinned(dev.fd, true) ||
	    vblk_set_mem_table(dev.fd, &e->gm) != -ENOMEM)
		ret = 4;
	else if (blk_req_prep(&req, &e->gm, &spec) ||
		 blk_req_run(&dev.vq[0], &req) ||
		 *req.status != VIRTIO_BLK_S_OK)
		ret = 5;
	else if (vblk_get_stats(dev.fd, 0, 0, &st) || st.reqs_pinned)
		ret = 6;
	rl.rlim_cur = RLIM_INFINITY;
	if (!ret && (setrlimit(RLIMIT_MEMLOCK, &rl) ||
		     vblk_set_mem_table(dev.fd, &e->gm)))
		ret = 7;
	rl.rlim_cur = e->gm.size + gm2->size;
	if (!ret && (setrlimit(RLIMIT_MEMLOCK, &rl) ||
		     vblk_set_mem_table(dev.fd, &e->gm)))
		ret = 8;
	if (!ret && vblk_set_mem_regions(dev.fd, two, 2))
		ret = 9;
	if (!ret && vblk_set_mem_table(dev.fd, &e->gm))
		ret = 10;
	vblk_close(&dev);
	return ret;
}

TEST_F(vhost_blk_ctl, pinning_past_rlimit_memlock_is_enomem)
{
	struct guest_mem gm2;
	int status;
	pid_t pid;

	ASSERT_EQ(0, guest_mem_init(&gm2, 8 << 20, self->e.gm.gpa +
				    self->e.gm.size + (1ULL << 30)));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(child_pins_past_memlock(&self->e, &gm2));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status))
		TH_LOG("the child failed at step %d", WEXITSTATUS(status));
	guest_mem_destroy(&gm2);
}

TEST_HARNESS_MAIN
