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
#define _GNU_SOURCE
#include <limits.h>
#include <poll.h>
#include <stdalign.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <linux/fs.h>

#include "kselftest_harness.h"

#include "vblk_test.h"
#include "vblk_host.h"

/*
 * A frontend as a vhost-user bridge serves one: a child process in a
 * cgroup of its own, connected to a socket whose other end (@conn) the
 * test holds, as the bridge holds the frontend's connection.
 */
struct frontend {
	pid_t pid;
	int conn;
	struct host_cgroup cg;
};

FIXTURE(vhost_blk_trust) {
	struct env e;
	/* Undone by the teardown, whatever happened to the test. */
	int ro_fd;			/* BLKROSET was set on this fd */
	int flags_fd;			/* FS_IOC_SETFLAGS was used on this fd */
	char scratch[PATH_MAX + 64];	/* a file to unlink */
	struct host_trace trace;	/* a tracefs instance to remove */
	struct host_cgroup cg;		/* a cgroup to leave and remove */
	struct frontend fe;		/* a process to end, its cgroup */
};

FIXTURE_SETUP(vhost_blk_trust)
{
	self->ro_fd = -1;
	self->flags_fd = -1;
	self->scratch[0] = 0;
	self->trace.dir[0] = 0;
	self->cg.dir[0] = 0;
	self->fe.pid = 0;
	self->fe.conn = -1;
	self->fe.cg.dir[0] = 0;
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
	host_trace_stop(&self->trace);
	env_teardown(&self->e);
	host_cgroup_leave(&self->cg);
	/* Its end of the socket closed, the frontend exits. */
	if (self->fe.conn >= 0)
		close(self->fe.conn);
	if (self->fe.pid > 0)
		waitpid(self->fe.pid, NULL, 0);
	host_cgroup_remove(&self->fe.cg);
}

/*
 * A scratch image of @size bytes in @dir, opened with @flags.  The
 * teardown removes it.
 */
static int scratch_open_in(struct __test_metadata *_metadata,
			   FIXTURE_DATA(vhost_blk_trust) *self,
			   const char *dir, off_t size, int flags)
{
	int fd;

	snprintf(self->scratch, sizeof(self->scratch), "%s/vblk-trust-%d.img",
		 dir, getpid());
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

/* A scratch image in scratch_dir(). */
static int scratch_open(struct __test_metadata *_metadata,
			FIXTURE_DATA(vhost_blk_trust) *self, off_t size,
			int flags)
{
	char dir[PATH_MAX];

	return scratch_open_in(_metadata, self,
			       scratch_dir(&self->e, dir, sizeof(dir)),
			       size, flags);
}

/*
 * Close the test's device, move into a cgroup of the test's own, as a
 * VMM that its manager placed there, and open the device again from it.
 */
static void reopen_in_cgroup(struct __test_metadata *_metadata,
			     FIXTURE_DATA(vhost_blk_trust) *self)
{
	vblk_close(&self->e.dev);
	host_cgroup_enter(_metadata, &self->cg);
	ASSERT_EQ(0, env_open_dev(&self->e, &self->e.dev, 1, 0, 0));
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
		.argsz = sizeof(st), .flags = VHOST_BLK_STATS_RESET,
	};
	struct vhost_worker_state worker = {};
	char serial[VHOST_BLK_SERIAL_LEN] = "not-the-owner";
	uint32_t one = 1;
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
		{ "VHOST_BLK_SET_MEM_PINNED", VHOST_BLK_SET_MEM_PINNED, &one },
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
	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, 0, &st));
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
		_exit(vblk_get_stats(e->dev.fd, 0, 0, &st) || st.reqs_in != 1);
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

/* The inotify events waiting on @fd, ORed; 0 if none. */
static uint32_t inotify_events(int fd)
{
	alignas(__alignof__(struct inotify_event)) char buf[4096];
	const struct inotify_event *ev;
	uint32_t mask = 0;
	ssize_t n, off;

	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (off = 0; off < n; off += sizeof(*ev) + ev->len) {
			ev = (const void *)(buf + off);
			mask |= ev->mask;
		}
	}
	return mask;
}

/* A guest read or write is seen by inotify, as read(2)/write(2) would be. */
TEST_F(vhost_blk_trust, guest_io_is_seen_by_inotify)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t buf[8192];
	uint32_t got;
	int in;

	in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	ASSERT_LE(0, in);
	ASSERT_LE(0, inotify_add_watch(in, e->path, IN_MODIFY | IN_ACCESS));

	pattern_fill(buf, sizeof(buf), new_seed(e), 400 * SECTOR);
	write_ok(_metadata, e, vq, 400, buf, sizeof(buf), NULL);
	got = inotify_events(in);
	EXPECT_NE(0U, got & IN_MODIFY) TH_LOG("events after a write: 0x%x", got);
	EXPECT_EQ(0U, got & IN_ACCESS) TH_LOG("events after a write: 0x%x", got);

	read_ok(_metadata, e, vq, 400, buf, sizeof(buf), NULL);
	got = inotify_events(in);
	EXPECT_NE(0U, got & IN_ACCESS) TH_LOG("events after a read: 0x%x", got);
	EXPECT_EQ(0U, got & IN_MODIFY) TH_LOG("events after a read: 0x%x", got);
	close(in);
}

/* The worker's comm, as block_bio_queue shows the submitter. */
static void worker_comm(char *buf, size_t len)
{
	snprintf(buf, len, "vhost-%d", getpid());
}

/*
 * The guest's writes reach the disk as the kernel's own direct I/O does,
 * REQ_SYNC (and REQ_IDLE, which the trace does not show): writeback
 * throttling and the I/O schedulers must not take them for background
 * writeback.
 */
TEST_F(vhost_blk_trust, guest_writes_are_sync_io)
{
	enum { MAX = 4096 };
	struct env *e = &self->e;
	struct host_bio *bio = calloc(MAX, sizeof(*bio));
	unsigned int n, i, ours = 0;
	uint8_t buf[65536];
	char comm[32];

	ASSERT_NE(NULL, bio);
	worker_comm(comm, sizeof(comm));
	host_trace_start(_metadata, &self->trace,
			 host_disk_of(_metadata, e->path));
	pattern_fill(buf, sizeof(buf), new_seed(e), 500 * SECTOR);
	write_ok(_metadata, e, &e->dev.vq[0], 500, buf, sizeof(buf), NULL);
	n = host_trace_bios(_metadata, &self->trace, bio, MAX);
	ASSERT_GE((unsigned int)MAX, n);
	for (i = 0; i < n; i++) {
		if (strcmp(bio[i].comm, comm) || !host_bio_is_write(&bio[i]))
			continue;
		ours++;
		EXPECT_TRUE(host_bio_is_sync(&bio[i]))
			TH_LOG("write bio %s at %llu + %u is not REQ_SYNC",
			       bio[i].rwbs, bio[i].sector, bio[i].nr_sectors);
	}
	EXPECT_LT(0U, ours) TH_LOG("no write bio from %s among %u", comm, n);
	free(bio);
}

/*
 * Of the @n bios in @bio: the data writes from @comm (into *@data), and
 * how many bios make them durable: FUA on one, or a preflush after one.
 * Logs them all if there was no data write.
 */
static unsigned int durable_writes(struct __test_metadata *_metadata,
				   const struct host_bio *bio, unsigned int n,
				   const char *comm, unsigned int *data)
{
	unsigned int i, durable = 0;

	*data = 0;
	for (i = 0; i < n; i++) {
		if (!strcmp(bio[i].comm, comm) && host_bio_is_write(&bio[i]) &&
		    bio[i].nr_sectors) {
			(*data)++;
			durable += host_bio_is_fua(&bio[i]);
		} else if (*data && host_bio_is_preflush(&bio[i])) {
			durable++;
		}
	}
	for (i = 0; i < n && !*data; i++)
		TH_LOG("  %s %llu + %u [%s]", bio[i].rwbs, bio[i].sector,
		       bio[i].nr_sectors, bio[i].comm);
	return durable;
}

/*
 * Write @len bytes of a fresh pattern at @sector with the device's bios
 * traced on @disk; returns how many bios made them durable (see
 * durable_writes()), and asserts that some data went out.
 */
static unsigned int traced_write(struct __test_metadata *_metadata,
				 FIXTURE_DATA(vhost_blk_trust) *self,
				 dev_t disk, uint64_t sector, size_t len)
{
	enum { MAX = 4096 };
	struct env *e = &self->e;
	struct host_bio *bio = calloc(MAX, sizeof(*bio));
	uint8_t *buf = malloc(len);
	unsigned int n, data, durable;
	char comm[32];

	ASSERT_NE(NULL, bio);
	ASSERT_NE(NULL, buf);
	worker_comm(comm, sizeof(comm));
	host_trace_start(_metadata, &self->trace, disk);
	pattern_fill(buf, len, new_seed(e), sector * SECTOR);
	write_ok(_metadata, e, &e->dev.vq[0], sector, buf, len, NULL);
	n = host_trace_bios(_metadata, &self->trace, bio, MAX);
	host_trace_stop(&self->trace);
	ASSERT_GE((unsigned int)MAX, n);
	durable = durable_writes(_metadata, bio, n, comm, &data);
	EXPECT_LT(0U, data) TH_LOG("no data write from %s among %u bios",
				   comm, n);
	verify_pattern(_metadata, e, &e->dev.vq[0], sector, len, e->seed);
	free(buf);
	free(bio);
	return durable;
}

/*
 * A backend fd opened O_DSYNC makes every write durable before it is
 * answered, as pwrite(2) on it would: a FUA write, or a cache flush after
 * it.  A disk without a volatile write cache has nothing to flush.
 */
TEST_F(vhost_blk_trust, o_dsync_backend_makes_writes_durable)
{
	struct env *e = &self->e;
	dev_t disk = host_disk_of(_metadata, e->path);
	int fd;

	if (!host_disk_write_back(_metadata, disk))
		SKIP(return, "%s is write-through: no cache to make writes durable in",
		     e->path);
	fd = open(e->path, O_RDWR | O_DSYNC | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, fd));
	close(fd);
	EXPECT_LT(0U, traced_write(_metadata, self, disk, 600, 16384))
		TH_LOG("the data bios were neither FUA nor followed by a flush");
}

/* The config's writeback byte, as the driver reads it. */
static uint8_t config_wce(struct __test_metadata *_metadata, int fd)
{
	struct virtio_blk_config cfg;

	EXPECT_EQ(0, vblk_get_config(fd, &cfg));
	return cfg.wce;
}

static void set_wce(struct __test_metadata *_metadata, int fd, uint8_t wce)
{
	ASSERT_EQ(0, vblk_set_config(fd, offsetof(struct virtio_blk_config, wce),
				     &wce, 1));
	ASSERT_EQ(wce, config_wce(_metadata, fd));
}

/*
 * VIRTIO_BLK_F_CONFIG_WCE: a driver that switches the cache to
 * writethrough (writeback 0) gets every write durable when answered
 * (VIRTIO 1.2, 5.2.6.2), as with an O_DSYNC backend: FUA, or a flush
 * after it; back to writeback, a block device gets neither.  The mode
 * holds across a detach and a new backend.
 */
TEST_F(vhost_blk_trust, writethrough_cache_makes_writes_durable)
{
	struct env *e = &self->e;
	dev_t disk = host_disk_of(_metadata, e->path);
	struct stat st;

	ASSERT_TRUE(vblk_has(&e->dev, VIRTIO_BLK_F_CONFIG_WCE));
	ASSERT_TRUE(vblk_has(&e->dev, VIRTIO_BLK_F_FLUSH));
	ASSERT_EQ(0, stat(e->path, &st));
	EXPECT_EQ(1, config_wce(_metadata, e->dev.fd)) TH_LOG("not writeback at first");
	if (!host_disk_write_back(_metadata, disk))
		SKIP(return, "%s is write-through: no cache to make writes durable in",
		     e->path);
	/* A file's file system may flush on its own (its journal). */
	if (S_ISBLK(st.st_mode))
		EXPECT_EQ(0U, traced_write(_metadata, self, disk, 640, 16384))
			TH_LOG("a writeback cache's write was made durable");

	set_wce(_metadata, e->dev.fd, 0);
	EXPECT_LT(0U, traced_write(_metadata, self, disk, 680, 16384))
		TH_LOG("writethrough: the data bios were neither FUA nor followed by a flush");

	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, -1));
	ASSERT_EQ(0, vblk_set_backend(e->dev.fd, e->backend_fd));
	EXPECT_EQ(0, config_wce(_metadata, e->dev.fd)) TH_LOG("lost with the backend");
	EXPECT_LT(0U, traced_write(_metadata, self, disk, 720, 16384))
		TH_LOG("writethrough, after a new backend: not durable");

	set_wce(_metadata, e->dev.fd, 1);
	if (S_ISBLK(st.st_mode))
		EXPECT_EQ(0U, traced_write(_metadata, self, disk, 760, 16384))
			TH_LOG("writeback again: a write was made durable");
}

/*
 * A driver that did not negotiate VIRTIO_BLK_F_FLUSH can never flush: it
 * reads writeback 0, and every write is durable when answered.
 */
TEST_F(vhost_blk_trust, without_flush_every_write_is_durable)
{
	struct env *e = &self->e;
	dev_t disk = host_disk_of(_metadata, e->path);

	e->features &= ~(VBLK_F(VIRTIO_BLK_F_FLUSH) |
			 VBLK_F(VIRTIO_BLK_F_CONFIG_WCE));
	env_reopen(_metadata, e, 1, 0, 0);
	ASSERT_FALSE(vblk_has(&e->dev, VIRTIO_BLK_F_FLUSH));
	EXPECT_EQ(0, config_wce(_metadata, e->dev.fd));
	if (!host_disk_write_back(_metadata, disk))
		SKIP(return, "%s is write-through: no cache to make writes durable in",
		     e->path);
	EXPECT_LT(0U, traced_write(_metadata, self, disk, 800, 16384))
		TH_LOG("no FLUSH: the data bios were neither FUA nor followed by a flush");
}

/*
 * Switch to writethrough and WRITE_ZEROES 16 sectors from @sector, with
 * the bios on @disk traced: the zeroes must be followed by a flush of
 * the disk before the answer, and read back as zeroes.
 */
static void write_zeroes_flushed(struct __test_metadata *_metadata,
				 FIXTURE_DATA(vhost_blk_trust) *self,
				 dev_t disk, uint64_t sector)
{
	enum { MAX = 4096 };
	struct env *e = &self->e;
	struct host_bio *bio = calloc(MAX, sizeof(*bio));
	/* Unmapping: a loop device over tmpfs has no ZERO_RANGE. */
	struct virtio_blk_discard_write_zeroes r =
		range(sector, 16, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
	uint8_t zero[8192] = { 0 }, got[8192];
	unsigned int n, i, flushes = 0;

	ASSERT_NE(NULL, bio);
	set_wce(_metadata, e->dev.fd, 0);
	host_trace_start(_metadata, &self->trace, disk);
	expect_result(_metadata,
		      ranges(_metadata, e, &e->dev.vq[0],
			     VIRTIO_BLK_T_WRITE_ZEROES, &r, 1, 0),
		      VIRTIO_BLK_S_OK, 1, "WRITE_ZEROES, writethrough");
	n = host_trace_bios(_metadata, &self->trace, bio, MAX);
	host_trace_stop(&self->trace);
	ASSERT_GE((unsigned int)MAX, n);
	for (i = 0; i < n; i++)
		flushes += host_bio_is_preflush(&bio[i]);
	EXPECT_LT(0U, flushes) TH_LOG("no flush among %u bios", n);
	for (i = 0; i < n && !flushes; i++)
		TH_LOG("  %s %llu + %u [%s]", bio[i].rwbs, bio[i].sector,
		       bio[i].nr_sectors, bio[i].comm);
	read_ok(_metadata, e, &e->dev.vq[0], sector, got, sizeof(got), NULL);
	expect_same(_metadata, zero, got, sizeof(got), "the zeroed range");
	free(bio);
}

/*
 * WRITE_ZEROES through a writethrough cache is durable too: the zeroes,
 * then a flush of the disk, before the answer.
 */
TEST_F(vhost_blk_trust, writethrough_write_zeroes_is_flushed)
{
	struct env *e = &self->e;
	dev_t disk = host_disk_of(_metadata, e->path);

	if (!vblk_has(&e->dev, VIRTIO_BLK_F_WRITE_ZEROES))
		SKIP(return, "%s: WRITE_ZEROES is not offered", e->path);
	if (!host_disk_write_back(_metadata, disk))
		SKIP(return, "%s is write-through: no cache to flush", e->path);
	write_zeroes_flushed(_metadata, self, disk, 840);
}

/*
 * The same on a block device with write zeroes and a write-back cache,
 * whatever the test's backend: a loop device over a scratch file.  The
 * zeroes are not a bio chain there but a blkdev_issue_zeroout() in the
 * sync task, then a flush.
 */
TEST_F(vhost_blk_trust, writethrough_write_zeroes_on_a_loop_device_is_flushed)
{
	struct env *e = &self->e;
	char dirbuf[PATH_MAX], name[32];
	const char *dir;
	struct stat st;
	int fd, loop;

	dir = scratch_dir(e, dirbuf, sizeof(dirbuf));
	fd = scratch_open_in(_metadata, self, dir, 64 << 20, O_RDWR);
	loop = loop_attach(fd, name, sizeof(name));
	close(fd);
	if (loop == -ENOENT)
		SKIP(return, "no /dev/loop-control (no loop driver)");
	ASSERT_LE(0, loop) TH_LOG("a loop device over %s: %s", dir,
				  strerror(-loop));
	ASSERT_EQ(0, fstat(loop, &st));
	if (!backend_has_write_zeroes(loop) ||
	    !host_disk_write_back(_metadata, st.st_rdev)) {
		close(loop);
		SKIP(return, "%s over %.200s: no write zeroes, or write-through",
		     name, dir);
	}
	ASSERT_EQ(0, vblk_attach(&e->dev, loop));
	close(loop);
	ASSERT_TRUE(vblk_has(&e->dev, VIRTIO_BLK_F_WRITE_ZEROES));
	write_zeroes_flushed(_metadata, self, st.st_rdev, 2048);
}

/*
 * Other host processes may read and write the same disk through the page
 * cache (blkid, dd, a backup tool).  The device's direct I/O must not
 * leave them stale pages, nor read under their dirty pages, nor be
 * overwritten later by them, as O_DIRECT on the fd would not.
 */
TEST_F(vhost_blk_trust, buffered_io_of_other_processes_stays_coherent)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t a[4096], b[4096], got[4096];
	const uint64_t s1 = 700, s2 = 720;
	int fd;

	fd = open(e->path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);

	/* Their cached copy is replaced by what the guest writes. */
	pattern_fill(a, sizeof(a), new_seed(e), s1 * SECTOR);
	write_ok(_metadata, e, vq, s1, a, sizeof(a), NULL);
	ASSERT_EQ((ssize_t)sizeof(got), pread(fd, got, sizeof(got), s1 * SECTOR));
	expect_same(_metadata, a, got, sizeof(got), "buffered read of A");
	pattern_fill(b, sizeof(b), new_seed(e), s1 * SECTOR);
	write_ok(_metadata, e, vq, s1, b, sizeof(b), NULL);
	ASSERT_EQ((ssize_t)sizeof(got), pread(fd, got, sizeof(got), s1 * SECTOR));
	expect_same(_metadata, b, got, sizeof(got),
		    "buffered read after the guest wrote B over A");

	/* The guest reads their dirty data, and its write then wins. */
	pattern_fill(a, sizeof(a), new_seed(e), s2 * SECTOR);
	ASSERT_EQ((ssize_t)sizeof(a), pwrite(fd, a, sizeof(a), s2 * SECTOR));
	read_ok(_metadata, e, vq, s2, got, sizeof(got), NULL);
	expect_same(_metadata, a, got, sizeof(got),
		    "guest read of a dirty buffered write");
	pattern_fill(b, sizeof(b), new_seed(e), s2 * SECTOR);
	write_ok(_metadata, e, vq, s2, b, sizeof(b), NULL);
	ASSERT_EQ(0, fsync(fd));
	read_ok(_metadata, e, vq, s2, got, sizeof(got), NULL);
	expect_same(_metadata, b, got, sizeof(got),
		    "guest read after its write and their fsync");
	ASSERT_EQ((ssize_t)sizeof(got), pread(fd, got, sizeof(got), s2 * SECTOR));
	expect_same(_metadata, b, got, sizeof(got), "their read after it all");
	close(fd);
}

/*
 * A VMM in a cgroup with io.max set: the bios of its guest's reads,
 * writes, flushes and ranges are charged to that cgroup (its io.stat),
 * which is what its io.max throttles.  A file system may do part of a
 * file's flush or range in its own threads (ext4's journal), which no
 * cgroup of ours can count: on a file, reads and writes are counted.
 */
TEST_F(vhost_blk_trust, guest_io_is_charged_to_the_vmm_cgroup)
{
	static const uint32_t types[] = {
		VIRTIO_BLK_T_FLUSH, VIRTIO_BLK_T_DISCARD,
		VIRTIO_BLK_T_WRITE_ZEROES,
	};
	struct env *e = &self->e;
	dev_t disk = host_disk_of(_metadata, e->path);
	struct virtio_blk_discard_write_zeroes r = range(1024, 2048, 0);
	bool bdev, wc = host_disk_write_back(_metadata, disk);
	struct host_io_stat a, b;
	const size_t len = 64 * KiB;
	uint8_t *buf = xmalloc(_metadata, len);
	struct result res;
	char max[128];
	struct stat st;
	unsigned int i;
	struct vq *vq;

	ASSERT_EQ(0, fstat(e->backend_fd, &st));
	bdev = S_ISBLK(st.st_mode);
	reopen_in_cgroup(_metadata, self);
	vq = &e->dev.vq[0];
	snprintf(max, sizeof(max), "%u:%u rbps=%lu wbps=%lu riops=2000 wiops=2000",
		 major(disk), minor(disk), 32 * MiB, 32 * MiB);
	host_cgroup_set(_metadata, &self->cg, "io.max", max);

	a = host_cgroup_io(_metadata, &self->cg, disk);
	for (i = 0; i < 16; i++) {
		pattern_fill(buf, len, new_seed(e), (1024 + i * 128) * SECTOR);
		write_ok(_metadata, e, vq, 1024 + i * 128, buf, len, NULL);
	}
	b = host_cgroup_io(_metadata, &self->cg, disk);
	EXPECT_LE(16 * len, b.wbytes - a.wbytes);
	EXPECT_LE(1U, b.wios - a.wios);

	for (i = 0; i < 16; i++)
		read_ok(_metadata, e, vq, 1024 + i * 128, buf, len, NULL);
	a = host_cgroup_io(_metadata, &self->cg, disk);
	EXPECT_LE(16 * len, a.rbytes - b.rbytes);
	EXPECT_LE(1U, a.rios - b.rios);

	for (i = 0; i < ARRAY_SIZE(types); i++) {
		a = host_cgroup_io(_metadata, &self->cg, disk);
		if (types[i] == VIRTIO_BLK_T_FLUSH)
			res = xfer(_metadata, e, vq, types[i], 0, NULL, 0, NULL);
		else
			res = ranges(_metadata, e, vq, types[i], &r, 1, 0);
		b = host_cgroup_io(_metadata, &self->cg, disk);
		TH_LOG("type %u: %s, %llu ios charged", types[i],
		       blk_status_name(res.status),
		       (b.rios + b.wios + b.dios) - (a.rios + a.wios + a.dios));
		if (res.status == VIRTIO_BLK_S_UNSUPP &&
		    types[i] != VIRTIO_BLK_T_FLUSH)
			continue;
		ASSERT_STATUS(VIRTIO_BLK_S_OK, res.status, "type %u", types[i]);
		/* A flush reaches only a disk with a write cache. */
		if (bdev && (types[i] != VIRTIO_BLK_T_FLUSH || wc))
			EXPECT_LE(1U, (b.wios + b.dios) - (a.wios + a.dios))
				TH_LOG("type %u: nothing charged", types[i]);
	}
	free(buf);
}

/* The first line of @path (without its newline) into @buf; 0 or -1. */
struct in_cgroup {
	const char *cgroup;		/* a line of /proc/PID/cgroup */
	int inside;
};

static void count_in_cgroup(const char *dir_path, pid_t tid, void *arg)
{
	struct in_cgroup *in = arg;
	char path[300], line[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%d/cgroup", dir_path, tid);
	if (!host_read_line(path, line, sizeof(line)) &&
	    !strcmp(line, in->cgroup))
		in->inside++;
}

/*
 * Tasks named @comm in @dir (/proc/self/task, or /proc for kthreads): how
 * many, and how many of them are in the cgroup @cgroup (a line of
 * /proc/PID/cgroup).
 */
static void tasks_in_cgroup(const char *dir_path, const char *comm,
			    const char *cgroup, int *found, int *inside)
{
	struct in_cgroup in = { .cgroup = cgroup };
	int n = host_tasks_named(dir_path, comm, count_in_cgroup, &in);

	if (n > 0) {
		*found += n;
		*inside += in.inside;
	}
}

/*
 * After a FLUSH (so that the sync task has run): the vhost worker
 * (vhost-PID) and the sync task (vhost-blk-PID) are one task each, in the
 * cgroup of the process @pid (the caller's for 0); with @kthreads,
 * neither is a thread of the caller.
 */
static void expect_guest_tasks_in(struct __test_metadata *_metadata,
				  struct env *e, bool kthreads, pid_t pid)
{
	char ours[PATH_MAX], comm[2][32], path[64];
	int i, threads, found, inside;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid ?: getpid());
	ASSERT_EQ(0, host_read_line(path, ours, sizeof(ours)));
	expect_result(_metadata,
		      xfer(_metadata, e, &e->dev.vq[0], VIRTIO_BLK_T_FLUSH, 0,
			   NULL, 0, NULL),
		      VIRTIO_BLK_S_OK, 1, "FLUSH");
	snprintf(comm[0], sizeof(comm[0]), "vhost-%d", getpid());
	snprintf(comm[1], sizeof(comm[1]), "vhost-blk-%d", getpid());
	for (i = 0; i < 2; i++) {
		threads = 0;
		inside = 0;
		tasks_in_cgroup("/proc/self/task", comm[i], ours, &threads,
				&inside);
		EXPECT_EQ(0, kthreads ? threads : 0)
			TH_LOG("%s is a thread of the VMM", comm[i]);
		found = threads;
		tasks_in_cgroup("/proc", comm[i], ours, &found, &inside);
		EXPECT_EQ(1, found) TH_LOG("tasks named %s", comm[i]);
		EXPECT_EQ(found, inside)
			TH_LOG("%s: %d of %d in %s", comm[i], inside, found,
			       ours);
	}
}

static void expect_guest_tasks(struct __test_metadata *_metadata,
			       struct env *e, bool kthreads)
{
	expect_guest_tasks_in(_metadata, e, kthreads, 0);
}

/*
 * The tasks that work for the guest, the vhost worker and the sync task,
 * are in the VMM's cgroup: threads of the VMM on 6.12, kthreads moved
 * there on 6.1.
 */
TEST_F(vhost_blk_trust, worker_and_sync_task_are_in_the_vmm_cgroup)
{
	reopen_in_cgroup(_metadata, self);
	expect_guest_tasks(_metadata, &self->e, false);
}

/*
 * A VMM that asks for kthread workers (VHOST_SET_FORK_FROM_OWNER) gets
 * the sync task as a kthread too: neither is a thread of the VMM, both
 * are in its cgroup, and the device serves reads, writes and flushes.
 */
TEST_F(vhost_blk_trust, kthread_workers_and_sync_task_are_in_the_vmm_cgroup)
{
	struct env *e = &self->e;
	struct vblk_config cfg = env_config(e, 1);
	uint8_t mode = 0xff;
	int err;

	cfg.kthread_workers = true;
	vblk_close(&e->dev);
	host_cgroup_enter(_metadata, &self->cg);
	err = vblk_open(&e->dev, &e->gm, &cfg);
	if (err == -ENOTTY) {
		/* Only a kernel that does not know the ioctls at all. */
		int fd = vblk_open_fd();

		ASSERT_LE(0, fd);
		EXPECT_NE(0, ioctl(fd, VHOST_GET_FORK_FROM_OWNER, &mode));
		EXPECT_EQ(ENOTTY, errno);
		close(fd);
		SKIP(return,
		     "no VHOST_SET_FORK_FROM_OWNER in this kernel: its workers are always vhost_tasks");
	}
	ASSERT_EQ(0, err);
	ASSERT_EQ(0, ioctl(e->dev.fd, VHOST_GET_FORK_FROM_OWNER, &mode))
		TH_LOG("VHOST_GET_FORK_FROM_OWNER: %s", strerror(errno));
	EXPECT_EQ(VHOST_FORK_OWNER_KTHREAD, mode);

	rw_verify(_metadata, e, &e->dev.vq[0], 2048, 16 * KiB, NULL, NULL);
	expect_guest_tasks(_metadata, e, true);
}

/*
 * Start a frontend (see struct frontend) in a cgroup of its own, and
 * open the device with kthread workers, no backend yet.  False (the test
 * skipped) where the kernel has no VHOST_SET_FORK_FROM_OWNER.
 */
static bool frontend_start(struct __test_metadata *_metadata,
			   FIXTURE_DATA(vhost_blk_trust) *self)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct env *e = &self->e;
	struct vblk_config cfg = env_config(e, 1);
	socklen_t len;
	int lfd, err;
	char c;

	cfg.backend_fd = -1;
	cfg.kthread_workers = true;
	vblk_close(&e->dev);
	host_cgroup_enter(_metadata, &self->cg);
	err = vblk_open(&e->dev, &e->gm, &cfg);
	if (err == -ENOTTY)
		return false;
	ASSERT_EQ(0, err);

	/* An abstract socket: nothing to unlink. */
	snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1,
		 "vblk-trust-frontend-%d", getpid());
	len = offsetof(struct sockaddr_un, sun_path) + 1 +
	      strlen(addr.sun_path + 1);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_LE(0, lfd);
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&addr, len))
		TH_LOG("bind: %s", strerror(errno));
	ASSERT_EQ(0, listen(lfd, 1));
	self->fe.pid = fork();
	ASSERT_LE(0, self->fe.pid);
	if (!self->fe.pid) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0 || connect(fd, (struct sockaddr *)&addr, len))
			_exit(1);
		/* Until the test closes its end. */
		while (read(fd, &c, 1) > 0)
			;
		_exit(0);
	}
	self->fe.conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	close(lfd);
	ASSERT_LE(0, self->fe.conn) TH_LOG("accept: %s", strerror(errno));
	host_cgroup_enter_pid(_metadata, &self->fe.cg, self->fe.pid);
	return true;
}

static int charge_peer(int fd, int sock)
{
	return ioctl(fd, VHOST_BLK_CHARGE_PEER, &sock) ? errno : 0;
}

/*
 * A bridge that serves a frontend passes VHOST_BLK_CHARGE_PEER its
 * connection: the guest's work then runs in the frontend's cgroups, not
 * in the owner's.  The worker and the sync task are there, and the
 * guest's reads and writes count in its io.stat and none in the owner's.
 */
TEST_F(vhost_blk_trust, guest_work_is_charged_to_the_frontend_cgroup)
{
	struct env *e = &self->e;
	dev_t disk = host_disk_of(_metadata, e->path);
	struct host_io_stat a0, a1, b0, b1;
	const size_t len = 64 * KiB;
	uint8_t *buf = xmalloc(_metadata, len);
	unsigned int i;
	struct vq *vq;

	if (!frontend_start(_metadata, self))
		SKIP(return,
		     "no VHOST_SET_FORK_FROM_OWNER in this kernel: no kthread workers to charge a frontend");
	ASSERT_EQ(0, charge_peer(e->dev.fd, self->fe.conn))
		TH_LOG("VHOST_BLK_CHARGE_PEER: %s", strerror(errno));
	ASSERT_EQ(0, vblk_attach(&e->dev, e->backend_fd));
	vq = &e->dev.vq[0];
	expect_guest_tasks_in(_metadata, e, true, self->fe.pid);

	a0 = host_cgroup_io(_metadata, &self->cg, disk);
	b0 = host_cgroup_io(_metadata, &self->fe.cg, disk);
	for (i = 0; i < 16; i++) {
		pattern_fill(buf, len, new_seed(e), (1024 + i * 128) * SECTOR);
		write_ok(_metadata, e, vq, 1024 + i * 128, buf, len, NULL);
		read_ok(_metadata, e, vq, 1024 + i * 128, buf, len, NULL);
	}
	a1 = host_cgroup_io(_metadata, &self->cg, disk);
	b1 = host_cgroup_io(_metadata, &self->fe.cg, disk);
	EXPECT_LE(16 * len, b1.wbytes - b0.wbytes);
	EXPECT_LE(16 * len, b1.rbytes - b0.rbytes);
	EXPECT_EQ(0ULL, a1.wbytes - a0.wbytes)
		TH_LOG("guest writes charged to the owner");
	EXPECT_EQ(0ULL, a1.rbytes - a0.rbytes)
		TH_LOG("guest reads charged to the owner");
	free(buf);
}

/*
 * The memory the guest makes the device allocate goes to the frontend's
 * memory cgroup too: on tmpfs, pages written by the worker (OUT) and
 * zeroed by the sync task (WRITE_ZEROES).
 */
TEST_F(vhost_blk_trust, guest_memory_is_charged_to_the_frontend_memcg)
{
	struct env *e = &self->e;
	struct virtio_blk_discard_write_zeroes r = range(8192, 16384, 0);
	unsigned long long a0, a1, b0, b1, stat_lag;
	const size_t len = 256 * KiB;
	uint8_t *buf = xmalloc(_metadata, len);
	unsigned int i;
	char path[64];
	int mfd, fd;

	if (!frontend_start(_metadata, self))
		SKIP(return,
		     "no VHOST_SET_FORK_FROM_OWNER in this kernel: no kthread workers to charge a frontend");
	ASSERT_EQ(0, charge_peer(e->dev.fd, self->fe.conn))
		TH_LOG("VHOST_BLK_CHARGE_PEER: %s", strerror(errno));
	/* A tmpfs file, as in file_ranges_are_charged_to_the_vmm_memcg. */
	mfd = memfd_create("vblk-trust-frontend", MFD_CLOEXEC);
	ASSERT_LE(0, mfd) TH_LOG("memfd_create: %s", strerror(errno));
	ASSERT_EQ(0, ftruncate(mfd, 16 * MiB));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	close(mfd);
	if (fd < 0 && errno == EINVAL)
		SKIP(return, "tmpfs has no O_DIRECT (it has since 6.6)");
	ASSERT_LE(0, fd) TH_LOG("open %s: %s", path, strerror(errno));
	ASSERT_EQ(0, vblk_attach(&e->dev, fd));
	close(fd);

	a0 = host_cgroup_mem(_metadata, &self->cg, "shmem");
	b0 = host_cgroup_mem(_metadata, &self->fe.cg, "shmem");
	memset(buf, 0x5a, len);
	for (i = 0; i < 16; i++)
		write_ok(_metadata, e, &e->dev.vq[0], i * (len / SECTOR), buf,
			 len, NULL);
	expect_result(_metadata,
		      ranges(_metadata, e, &e->dev.vq[0],
			     VIRTIO_BLK_T_WRITE_ZEROES, &r, 1, 0),
		      VIRTIO_BLK_S_OK, 1, "WRITE_ZEROES of 8 MiB on tmpfs");
	a1 = host_cgroup_mem(_metadata, &self->cg, "shmem");
	b1 = host_cgroup_mem(_metadata, &self->fe.cg, "shmem");
	/* memory.stat lags: see file_ranges_are_charged_to_the_vmm_memcg. */
	stat_lag = 128ULL * sysconf(_SC_PAGESIZE) *
		   sysconf(_SC_NPROCESSORS_CONF);
	EXPECT_LE(b0 + 12 * MiB, b1 + stat_lag)
		TH_LOG("shmem charged to the frontend: %llu -> %llu (lag %llu)",
		       b0, b1, stat_lag);
	EXPECT_GE(a0 + stat_lag, a1)
		TH_LOG("shmem charged to the owner: %llu -> %llu (lag %llu)",
		       a0, a1, stat_lag);
	free(buf);
}

/*
 * VHOST_BLK_CHARGE_PEER takes a connected socket, kthread workers, an
 * owner, and comes once, before the first backend.
 */
TEST_F(vhost_blk_trust, charge_peer_is_refused_out_of_order)
{
	struct env *e = &self->e;
	int fd, sock, status, pair[2];
	pid_t pid;

	/* vhost_task workers are threads of the owner. */
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair));
	fd = vblk_open_fd();
	ASSERT_LE(0, fd);
	EXPECT_EQ(EINVAL, charge_peer(fd, pair[0]));
	close(fd);

	if (!frontend_start(_metadata, self)) {
		close(pair[0]);
		close(pair[1]);
		SKIP(return,
		     "no VHOST_SET_FORK_FROM_OWNER in this kernel: no kthread workers to charge a frontend");
	}
	fd = e->dev.fd;
	EXPECT_EQ(ENOTSOCK, charge_peer(fd, e->backend_fd));
	EXPECT_EQ(EBADF, charge_peer(fd, -1));
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_LE(0, sock);
	EXPECT_EQ(ENOTCONN, charge_peer(fd, sock));
	close(sock);

	/* Not the owner: a forked child holding the fd. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(charge_peer(fd, self->fe.conn) == EPERM ? 0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("a forked child's CHARGE_PEER was not EPERM");

	/* Once: a socketpair's peer is its creator, the test itself. */
	EXPECT_EQ(0, charge_peer(fd, pair[0]));
	EXPECT_EQ(EBUSY, charge_peer(fd, self->fe.conn));
	close(pair[0]);
	close(pair[1]);
	vblk_close(&e->dev);

	/* Before the first backend. */
	ASSERT_EQ(0, vblk_open(&e->dev, &e->gm, &(struct vblk_config) {
		.nvqs = 1, .features = e->features, .backend_fd = -1,
		.kthread_workers = true,
	}));
	ASSERT_EQ(0, vblk_attach(&e->dev, e->backend_fd));
	EXPECT_EQ(EBUSY, charge_peer(e->dev.fd, self->fe.conn));
	rw_verify(_metadata, e, &e->dev.vq[0], 2048, 16 * KiB, NULL, NULL);
}

/*
 * VHOST_RESET_OWNER stops the device and ends the charge: the next owner
 * may charge a frontend again, and is served.
 */
TEST_F(vhost_blk_trust, reset_owner_ends_the_charge)
{
	uint8_t kthread = VHOST_FORK_OWNER_KTHREAD;
	struct env *e = &self->e;
	int fd;

	if (!frontend_start(_metadata, self))
		SKIP(return,
		     "no VHOST_SET_FORK_FROM_OWNER in this kernel: no kthread workers to charge a frontend");
	fd = e->dev.fd;
	ASSERT_EQ(0, charge_peer(fd, self->fe.conn));
	ASSERT_EQ(0, vblk_attach(&e->dev, e->backend_fd));
	rw_verify(_metadata, e, &e->dev.vq[0], 4096, 16 * KiB, NULL, NULL);

	ASSERT_EQ(0, ioctl(fd, VHOST_RESET_OWNER, NULL))
		TH_LOG("VHOST_RESET_OWNER: %s", strerror(errno));
	/* The reset forgot the worker kind too: vhost_tasks, refused. */
	ASSERT_EQ(0, ioctl(fd, VHOST_SET_OWNER, NULL))
		TH_LOG("VHOST_SET_OWNER after the reset: %s", strerror(errno));
	EXPECT_EQ(EINVAL, charge_peer(fd, self->fe.conn));
	ASSERT_EQ(0, ioctl(fd, VHOST_RESET_OWNER, NULL));
	ASSERT_EQ(0, ioctl(fd, VHOST_SET_FORK_FROM_OWNER, &kthread))
		TH_LOG("VHOST_SET_FORK_FROM_OWNER: %s", strerror(errno));
	ASSERT_EQ(0, ioctl(fd, VHOST_SET_OWNER, NULL))
		TH_LOG("VHOST_SET_OWNER after the reset: %s", strerror(errno));
	EXPECT_EQ(0, charge_peer(fd, self->fe.conn));
	EXPECT_EQ(EBUSY, charge_peer(fd, self->fe.conn));
	vblk_close(&e->dev);

	/* A device set up afresh is served, charged or not. */
	ASSERT_EQ(0, env_open_dev(e, &e->dev, 1, 0, 0));
	rw_verify(_metadata, e, &e->dev.vq[0], 4096, 16 * KiB, NULL, NULL);
}

/*
 * A VMM that points a ring at addresses no process can map (above the
 * user half of the address space) before the backend is attached gets
 * that ring left stopped at VHOST_BLK_SET_BACKEND, and the others
 * started: a read posted and kicked there is not taken.  Pointed back
 * into its memory and attached again, the ring serves it.
 */
TEST_F(vhost_blk_trust, a_ring_at_an_address_no_process_maps_is_not_started)
{
	struct env *e = &self->e;
	struct vblk_config cfg = env_config(e, 2);
	struct vhost_vring_addr addr = {
		.index = 0,
		.desc_user_addr = 0xffff880000000000ULL,
		.avail_user_addr = 0xffff880000001000ULL,
		.used_user_addr = 0xffff880000002000ULL,
	};
	struct vhost_blk_vring_stats st;
	struct vq *vq0 = &e->dev.vq[0];
	uint32_t len = 4096;
	struct blk_req_spec spec = {
		.type = VIRTIO_BLK_T_IN, .nseg = 1, .seg_len = &len,
		.sector = 4096,
	};
	struct blk_req req;

	cfg.backend_fd = -1;
	vblk_close(&e->dev);
	ASSERT_EQ(0, vblk_open(&e->dev, &e->gm, &cfg));
	ASSERT_EQ(0, ioctl(e->dev.fd, VHOST_SET_VRING_ADDR, &addr))
		TH_LOG("VHOST_SET_VRING_ADDR before a backend: %s",
		       strerror(errno));
	ASSERT_EQ(0, vblk_attach(&e->dev, e->backend_fd));
	ASSERT_EQ(0, blk_req_prep(&req, &e->gm, &spec));
	ASSERT_EQ(0, blk_req_post(vq0, &req));
	ASSERT_EQ(1, vq_kick_force(vq0));
	/* Queue 1 serves meanwhile; queue 0 took nothing. */
	rw_verify(_metadata, e, &e->dev.vq[1], 2048, 8 * KiB, NULL, NULL);
	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, 0, &st));
	EXPECT_EQ(0U, st.reqs_in + st.reqs_out + st.kicks);
	EXPECT_EQ(0, vq_used_pending(vq0));
	EXPECT_EQ(BLK_STATUS_UNSET, *req.status);

	/* Its own rings, and the backend again: the read is served. */
	ASSERT_EQ(0, vblk_set_vring_addr(e->dev.fd, vq0, false));
	ASSERT_EQ(0, vblk_attach(&e->dev, e->backend_fd));
	vq_kick_force(vq0);
	ASSERT_EQ(0, blk_complete_one(vq0));
	EXPECT_EQ(VIRTIO_BLK_S_OK, *req.status);
	blk_req_free(&req);
	rw_verify(_metadata, e, vq0, 4096, 8 * KiB, NULL, NULL);
}

/*
 * Flushes and ranges on a file run synchronously, beside the worker:
 * on behalf of the VMM too.  On tmpfs a WRITE_ZEROES allocates the
 * range's pages, which the memory controller charges to whoever runs it.
 */
TEST_F(vhost_blk_trust, file_ranges_are_charged_to_the_vmm_memcg)
{
	struct env *e = &self->e;
	struct virtio_blk_discard_write_zeroes r = range(0, 16384, 0);
	unsigned long long before, after, stat_lag;
	char path[64];
	int mfd, fd;

	reopen_in_cgroup(_metadata, self);
	/*
	 * A memfd is a tmpfs file on the kernel's own mount, whatever /tmp
	 * is.  Opened again through /proc it gets tmpfs's open(), which
	 * allows O_DIRECT as the module requires of a file.
	 */
	mfd = memfd_create("vblk-trust-memcg", MFD_CLOEXEC);
	ASSERT_LE(0, mfd) TH_LOG("memfd_create: %s", strerror(errno));
	ASSERT_EQ(0, ftruncate(mfd, 16 * MiB));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL) {
		close(mfd);
		SKIP(return, "tmpfs has no O_DIRECT (it has since 6.6)");
	}
	ASSERT_LE(0, fd) TH_LOG("open %s: %s", path, strerror(errno));
	close(mfd);
	ASSERT_EQ(0, vblk_attach(&e->dev, fd));
	close(fd);

	before = host_cgroup_mem(_metadata, &self->cg, "shmem");
	expect_result(_metadata,
		      ranges(_metadata, e, &e->dev.vq[0],
			     VIRTIO_BLK_T_WRITE_ZEROES, &r, 1, 0),
		      VIRTIO_BLK_S_OK, 1, "WRITE_ZEROES of 8 MiB on tmpfs");
	expect_result(_metadata,
		      xfer(_metadata, e, &e->dev.vq[0], VIRTIO_BLK_T_FLUSH, 0,
			   NULL, 0, NULL),
		      VIRTIO_BLK_S_OK, 1, "FLUSH on tmpfs");
	after = host_cgroup_mem(_metadata, &self->cg, "shmem");
	/*
	 * memory.stat lags the charges: each CPU holds back up to
	 * MEMCG_CHARGE_BATCH (64) page updates before it marks them
	 * pending, and a read flushes the pending ones only once there
	 * are more than 64 per CPU.  So up to 128 pages per CPU may not
	 * show yet (CI once saw 162 missing on 2 CPUs).  Uncharged, the
	 * VMM would see none of the 8 MiB.
	 */
	stat_lag = 128ULL * sysconf(_SC_PAGESIZE) *
		   sysconf(_SC_NPROCESSORS_CONF);
	EXPECT_LE(before + 8 * MiB, after + stat_lag)
		TH_LOG("shmem charged to the VMM: %llu -> %llu (lag %llu)",
		       before, after, stat_lag);
}

/*
 * Guest writes to a file backend hold the file system's freeze protection
 * only while they run, as write(2) does: afterwards fsfreeze -f (FIFREEZE)
 * returns, and fsfreeze -u thaws.  On a disk whose completions are
 * asynchronous (a loop device, null_blk with a timer) every write takes
 * the kiocb's completion path; an unbalanced one there leaves s_writers
 * below zero and the freeze waiting for ever.
 */
TEST_F_TIMEOUT(vhost_blk_trust, fsfreeze_after_guest_writes_returns, 180)
{
	const struct layout page = { .align = 4096 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t buf[16384];
	struct stat st;
	unsigned int i;
	int fd, status, waited;
	pid_t pid;

	ASSERT_EQ(0, fstat(e->backend_fd, &st));
	if (!S_ISREG(st.st_mode))
		SKIP(return, "%s is not a file", e->path);
	/*
	 * Blocks written and synced first, and page-aligned buffers, as a
	 * Linux guest's: the guest's writes are then aligned overwrites,
	 * which a file system sends asynchronously (ext4 waits inside the
	 * submission for a write into a hole or one off its block size).
	 */
	memset(buf, 0, sizeof(buf));
	for (i = 0; i < 64; i++)
		ASSERT_EQ((ssize_t)sizeof(buf),
			  pwrite(e->backend_fd, buf, sizeof(buf),
				 (3000 + i * 32) * SECTOR));
	ASSERT_EQ(0, fsync(e->backend_fd));
	for (i = 0; i < 64; i++) {
		pattern_fill(buf, sizeof(buf), new_seed(e),
			     (3000 + i * 32) * SECTOR);
		write_ok(_metadata, e, vq, 3000 + i * 32, buf, sizeof(buf),
			 &page);
	}
	fd = open(e->path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	/* In a child: a freeze that never returns cannot be killed. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(ioctl(fd, FIFREEZE, 0) ? errno : 0);
	/* A hang guard, not a measure: a freeze takes milliseconds. */
	for (waited = 0; waited < 600; waited++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		usleep(100000);
	}
	ASSERT_GT(600, waited)
		TH_LOG("FIFREEZE on %s has not returned after 60 s: unbalanced freeze protection",
		       e->path);
	ASSERT_TRUE(WIFEXITED(status));
	if (WEXITSTATUS(status) == EOPNOTSUPP) {
		close(fd);
		SKIP(return, "the file system of %s cannot be frozen",
		     e->path);
	}
	ASSERT_EQ(0, WEXITSTATUS(status))
		TH_LOG("FIFREEZE: %s", strerror(WEXITSTATUS(status)));
	ASSERT_EQ(0, ioctl(fd, FITHAW, 0)) TH_LOG("FITHAW: %s", strerror(errno));
	close(fd);
	/* Thawed: the guest writes again. */
	rw_verify(_metadata, e, vq, 3000, 4096, NULL, NULL);
}

TEST_HARNESS_MAIN
