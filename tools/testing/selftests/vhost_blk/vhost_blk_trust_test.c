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
#include <sys/wait.h>

#include "kselftest_harness.h"

#include "vblk_test.h"

FIXTURE(vhost_blk_trust) {
	struct env e;
};

FIXTURE_SETUP(vhost_blk_trust)
{
	env_setup(_metadata, &self->e, VBLK_FEATURES_ALL);
}

FIXTURE_TEARDOWN(vhost_blk_trust)
{
	env_teardown(&self->e);
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

TEST_HARNESS_MAIN
