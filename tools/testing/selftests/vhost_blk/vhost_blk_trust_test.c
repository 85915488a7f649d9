// SPDX-License-Identifier: GPL-2.0
/*
 * What vhost-blk owes the host, beyond its guest: the VMM is trusted no
 * further than its own fd.  Only the owner changes state; the backend
 * fd's mode and flags bind the device as they bind read(2) and write(2);
 * other host processes using the same disk see coherent data; the work a
 * guest causes is charged to its VMM's cgroup.
 *
 * The backend is VHOST_BLK_TEST_DEV (see vblk_test.h).
 */
#include <libgen.h>
#include <limits.h>
#include <sys/wait.h>
#include <linux/fs.h>

#include "kselftest_harness.h"

#include "vblk_test.h"

FIXTURE(vhost_blk_trust) {
	struct env e;
	/* Undone by the teardown, whatever happened to the test. */
	int ro_fd;			/* BLKROSET was set on this fd */
	int flags_fd;			/* FS_IOC_SETFLAGS was used on this fd */
	char scratch[PATH_MAX];		/* a file to unlink */
};

FIXTURE_SETUP(vhost_blk_trust)
{
	self->ro_fd = -1;
	self->flags_fd = -1;
	self->scratch[0] = 0;
	env_setup(_metadata, &self->e, VBLK_FEATURES_ALL);
}

FIXTURE_TEARDOWN(vhost_blk_trust)
{
	int zero = 0;

	if (self->ro_fd >= 0)
		ioctl(self->ro_fd, BLKROSET, &zero);
	if (self->flags_fd >= 0) {
		ioctl(self->flags_fd, FS_IOC_SETFLAGS, &zero);
		close(self->flags_fd);
	}
	if (self->scratch[0])
		unlink(self->scratch);
	env_teardown(&self->e);
}

/*
 * A scratch image of @size bytes, opened with @flags: next to a file
 * backend (on its file system), else in /tmp.  The teardown removes it.
 */
static int scratch_open(struct __test_metadata *_metadata,
			FIXTURE_DATA(vhost_blk_trust) *self, off_t size,
			int flags)
{
	char dir[PATH_MAX];
	struct stat st;
	int fd;

	ASSERT_EQ(0, stat(self->e.path, &st));
	snprintf(dir, sizeof(dir), "%s", self->e.path);
	snprintf(self->scratch, sizeof(self->scratch), "%s/vblk-trust-%d.img",
		 S_ISREG(st.st_mode) ? dirname(dir) : "/tmp", getpid());
	fd = open(self->scratch, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ASSERT_LE(0, fd) TH_LOG("create %s: %s", self->scratch,
				strerror(errno));
	ASSERT_EQ(0, ftruncate(fd, size));
	if ((flags & O_ACCMODE) == O_RDWR && !(flags & ~(O_ACCMODE | O_CLOEXEC)))
		return fd;
	close(fd);
	fd = open(self->scratch, flags | O_CLOEXEC);
	ASSERT_LE(0, fd) TH_LOG("open %s: %s", self->scratch, strerror(errno));
	return fd;
}

/* chattr on @fd (FS_APPEND_FL, FS_IMMUTABLE_FL or 0); remembered. */
static void set_inode_flags(struct __test_metadata *_metadata,
			    FIXTURE_DATA(vhost_blk_trust) *self, int fd,
			    int flags)
{
	if (self->flags_fd < 0) {
		self->flags_fd = dup(fd);
		ASSERT_LE(0, self->flags_fd);
	}
	ASSERT_EQ(0, ioctl(fd, FS_IOC_SETFLAGS, &flags))
		TH_LOG("FS_IOC_SETFLAGS 0x%x on %s: %s", flags, self->scratch,
		       strerror(errno));
}

/* SET_BACKEND that is expected to fail: its errno, 0 if it worked. */
static int set_backend_errno(int fd, int backend_fd)
{
	struct vhost_vring_file file = { .index = 0, .fd = backend_fd };

	return ioctl(fd, VHOST_BLK_SET_BACKEND, &file) ? errno : 0;
}

static bool offers(struct __test_metadata *_metadata, int fd,
		   unsigned int bit)
{
	uint64_t f = 0;

	EXPECT_EQ(0, vblk_get_features(fd, &f));
	return f & VBLK_F(bit);
}

static int stats_of(int fd, unsigned int index, uint32_t flags,
		    struct vhost_blk_vring_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->index = index;
	st->flags = flags;
	return VBLK_IOCTL(fd, VHOST_BLK_GET_VRING_STATS, st);
}

/* errno of an ioctl that is expected to fail, 0 if it worked. */
static int ioctl_errno(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg) ? errno : 0;
}

/*
 * The child's half of ioctls_from_a_forked_child_are_eperm: every ioctl
 * that changes state or touches the rings must fail with EPERM, and
 * none may write the child's copy of the rings.  Returns the number of
 * failures, each reported on stderr.
 */
static int child_tries_ioctls(struct env *e)
{
	struct vblk_dev *dev = &e->dev;
	struct vq *vq = &dev->vq[0];
	struct vhost_vring_file backend = { .fd = e->backend_fd };
	struct vhost_vring_file detach = { .fd = -1 };
	struct vhost_blk_vring_poll poll = {
		.flags = VHOST_BLK_POLL_ADAPTIVE, .grow = 4,
	};
	struct vhost_vring_state num = { .num = 64 };
	struct vhost_blk_vring_stats st = {
		.flags = VHOST_BLK_STATS_RESET,
	};
	struct vhost_worker_state worker = {};
	char serial[VHOST_BLK_SERIAL_LEN] = "not-the-owner";
	uint64_t plain = dev->features;
	uint64_t log = dev->features | VBLK_F(VHOST_F_LOG_ALL);
	size_t size = e->gm.size;
	uint8_t *before;
	int failures = 0;
	struct {
		const char *name;
		unsigned long req;
		void *arg;
	} tries[] = {
		{ "VHOST_SET_FEATURES", VHOST_SET_FEATURES, &plain },
		{ "VHOST_SET_FEATURES (LOG_ALL)", VHOST_SET_FEATURES, &log },
		{ "VHOST_BLK_SET_SERIAL", VHOST_BLK_SET_SERIAL, serial },
		{ "VHOST_BLK_SET_VRING_POLL", VHOST_BLK_SET_VRING_POLL, &poll },
		{ "VHOST_BLK_GET_VRING_STATS (reset)",
		  VHOST_BLK_GET_VRING_STATS, &st },
		{ "VHOST_BLK_SET_BACKEND", VHOST_BLK_SET_BACKEND, &backend },
		{ "VHOST_BLK_SET_BACKEND (detach)", VHOST_BLK_SET_BACKEND,
		  &detach },
		{ "VHOST_SET_VRING_NUM", VHOST_SET_VRING_NUM, &num },
		{ "VHOST_RESET_OWNER", VHOST_RESET_OWNER, NULL },
		{ "VHOST_NEW_WORKER", VHOST_NEW_WORKER, &worker },
	};
	unsigned int i;

	/*
	 * Values the device would never leave in a ring, so that any write
	 * to this copy of guest memory shows.
	 */
	vq->used->flags = 0x5a5a;
	vq->used->idx = 0x1234;
	memset(&vq->used->ring[vq->num], 0xa5, sizeof(uint16_t));	/* avail_event */
	before = malloc(size);
	if (!before) {
		fprintf(stderr, "# child: cannot allocate %zu bytes\n", size);
		return 1;
	}
	memcpy(before, e->gm.va, size);

	for (i = 0; i < ARRAY_SIZE(tries); i++) {
		int err = ioctl_errno(dev->fd, tries[i].req, tries[i].arg);

		if (err != EPERM) {
			fprintf(stderr, "# child: %s: %s, expected EPERM\n",
				tries[i].name, err ? strerror(err) : "worked");
			failures++;
		}
	}
	if (memcmp(before, e->gm.va, size)) {
		for (i = 0; i < size && before[i] == e->gm.va[i]; i++)
			;
		fprintf(stderr, "# child: guest memory changed at offset %u\n",
			i);
		failures++;
	}
	free(before);
	return failures;
}

TEST_F(vhost_blk_trust, ioctls_from_a_forked_child_are_eperm)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct vhost_vring_state busyloop = { .index = 0, .num = 50 };
	struct vhost_blk_vring_stats st;
	uint8_t id[VHOST_BLK_SERIAL_LEN], *rings;
	size_t rings_len;
	int status;
	pid_t pid;

	/*
	 * Something to count, a polling window to see, and the parent's
	 * rings (vq_init() allocates desc, avail, used in that order).
	 */
	rw_verify(_metadata, e, vq, 100, 4096, NULL, NULL);
	ASSERT_EQ(0, VBLK_IOCTL(e->dev.fd, VHOST_SET_VRING_BUSYLOOP_TIMEOUT,
				&busyloop));
	rings_len = (uint8_t *)&vq->used->ring[vq->num] + sizeof(uint16_t) -
		    (uint8_t *)vq->desc;
	rings = xmalloc(_metadata, rings_len);
	memcpy(rings, vq->desc, rings_len);

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(child_tries_ioctls(e) ? 1 : 0);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status))
		TH_LOG("the child's ioctls were not all refused (see above)");

	/* Nothing of the parent's changed: rings, counters, serial. */
	expect_same(_metadata, rings, vq->desc, rings_len, "the owner's rings");
	free(rings);
	ASSERT_EQ(0, stats_of(e->dev.fd, 0, 0, &st));
	EXPECT_EQ(1U, st.reqs_in);
	EXPECT_EQ(1U, st.reqs_out);
	/* Fixed 50 us window: the child did not make it adaptive. */
	EXPECT_EQ(50000U, st.poll_window_ns);
	expect_result(_metadata, get_id(_metadata, e, vq, sizeof(id), 0, id),
		      VIRTIO_BLK_S_OK, sizeof(id) + 1, "GET_ID");
	expect_same(_metadata, TEST_SERIAL, id, sizeof(id), "the serial");
	/* And the owner's device still serves. */
	rw_verify(_metadata, e, vq, 108, 4096, NULL, NULL);
}

TEST_F(vhost_blk_trust, a_forked_child_may_read_the_counters)
{
	struct env *e = &self->e;
	struct vhost_blk_vring_stats st;
	int status;
	pid_t pid;

	rw_verify(_metadata, e, &e->dev.vq[0], 100, 4096, NULL, NULL);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(stats_of(e->dev.fd, 0, 0, &st) || st.reqs_in != 1);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

TEST_F(vhost_blk_trust, backend_fd_not_open_for_reading_is_ebadf)
{
	struct env *e = &self->e;
	int fd;

	fd = open(e->path, O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	EXPECT_EQ(EBADF, set_backend_errno(e->dev.fd, fd));
	close(fd);
	/* The device kept its backend. */
	rw_verify(_metadata, e, &e->dev.vq[0], 200, 4096, NULL, NULL);
}

TEST_F(vhost_blk_trust, backend_fd_opened_o_append_is_einval)
{
	struct env *e = &self->e;
	int fd;

	fd = open(e->path, O_RDWR | O_APPEND | O_CLOEXEC);
	ASSERT_LE(0, fd);
	EXPECT_EQ(EINVAL, set_backend_errno(e->dev.fd, fd));
	close(fd);
	fd = open(e->path, O_RDONLY | O_APPEND | O_CLOEXEC);
	ASSERT_LE(0, fd);
	EXPECT_EQ(EINVAL, set_backend_errno(e->dev.fd, fd));
	close(fd);
	rw_verify(_metadata, e, &e->dev.vq[0], 200, 4096, NULL, NULL);
}

/*
 * A writable fd on a file that became append-only or immutable after it
 * was opened cannot write at an offset any more: refused.  A read-only fd
 * on such a file reads, as read(2) does.
 */
TEST_F(vhost_blk_trust, append_only_or_immutable_file_is_eperm_for_writing)
{
	static const int attrs[] = { FS_APPEND_FL, FS_IMMUTABLE_FL };
	struct env *e = &self->e;
	unsigned int i;
	int fd, ro;

	fd = scratch_open(_metadata, self, 1 * MiB, O_RDWR);
	ro = open(self->scratch, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, ro);
	for (i = 0; i < ARRAY_SIZE(attrs); i++) {
		set_inode_flags(_metadata, self, fd, attrs[i]);
		EXPECT_EQ(EPERM, set_backend_errno(e->dev.fd, fd))
			TH_LOG("inode flag 0x%x", attrs[i]);
		ASSERT_EQ(0, vblk_set_backend(e->dev.fd, ro));
		EXPECT_TRUE(offers(_metadata, e->dev.fd, VIRTIO_BLK_F_RO));
		ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
		set_inode_flags(_metadata, self, fd, 0);
	}
	/* Without the flag, the same fd attaches writable. */
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, fd));
	EXPECT_FALSE(offers(_metadata, e->dev.fd, VIRTIO_BLK_F_RO));
	rw_verify(_metadata, e, &e->dev.vq[0], 8, 4096, NULL, NULL);
	close(ro);
	close(fd);
}

/*
 * Once attached, a backend that becomes read-only (BLKROSET on a block
 * device, chattr +i on a file) takes no more writes: write(2) would get
 * EPERM.  Reads go on; writes come back when it is writable again.
 */
TEST_F(vhost_blk_trust, backend_made_read_only_after_attach_stops_writes)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t old[4096], new[4096];
	uint64_t seed, sector = 300;
	struct stat st;
	int one = 1, zero = 0;

	ASSERT_EQ(0, fstat(e->backend_fd, &st));
	if (S_ISREG(st.st_mode)) {
		/* A scratch image: the test file itself must stay writable. */
		int fd = scratch_open(_metadata, self, 1 * MiB, O_RDWR);

		ASSERT_EQ(0, vblk_set_backend(e->dev.fd, fd));
		sector = 16;
		close(fd);
	}
	seed = new_seed(e);
	pattern_fill(old, sizeof(old), seed, sector * SECTOR);
	write_ok(_metadata, e, vq, sector, old, sizeof(old), NULL);

	if (S_ISBLK(st.st_mode)) {
		self->ro_fd = e->backend_fd;
		ASSERT_EQ(0, ioctl(e->backend_fd, BLKROSET, &one));
	} else {
		int fd = open(self->scratch, O_RDONLY | O_CLOEXEC);

		ASSERT_LE(0, fd);
		set_inode_flags(_metadata, self, fd, FS_IMMUTABLE_FL);
		close(fd);
	}
	EXPECT_TRUE(offers(_metadata, e->dev.fd, VIRTIO_BLK_F_RO));
	pattern_fill(new, sizeof(new), new_seed(e), sector * SECTOR);
	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_OUT, sector, new,
			   sizeof(new), NULL),
		      VIRTIO_BLK_S_IOERR, 1, "write to a backend made read-only");
	verify_pattern(_metadata, e, vq, sector, sizeof(old), seed);

	if (S_ISBLK(st.st_mode)) {
		ASSERT_EQ(0, ioctl(e->backend_fd, BLKROSET, &zero));
		self->ro_fd = -1;
	} else {
		set_inode_flags(_metadata, self, self->flags_fd, 0);
	}
	EXPECT_FALSE(offers(_metadata, e->dev.fd, VIRTIO_BLK_F_RO));
	rw_verify(_metadata, e, vq, sector, sizeof(new), NULL, NULL);
}

TEST_HARNESS_MAIN
