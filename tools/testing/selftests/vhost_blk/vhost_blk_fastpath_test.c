// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk fast-path selftests: notification suppression and batching,
 * kick suppression with busy polling, per-queue workers, counters and
 * tracepoints.  Every assertion is on counts (notifications, kicks,
 * requests, bytes), never on time.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/utsname.h>

#include "kselftest_harness.h"

#include "vblk_test.h"
#include "vblk_host.h"

#define TRACEFS		"/sys/kernel/tracing"

FIXTURE(fastpath) {
	struct env e;
};

FIXTURE_SETUP(fastpath)
{
	env_setup(_metadata, &self->e, VBLK_FEATURES_ALL);
}

FIXTURE_TEARDOWN(fastpath)
{
	env_teardown(&self->e);
}

static struct vhost_blk_vring_stats stats(struct __test_metadata *_metadata,
					  int fd, unsigned int index,
					  bool reset)
{
	struct vhost_blk_vring_stats st;

	ASSERT_EQ(0, vblk_get_stats(fd, index,
				    reset ? VHOST_BLK_STATS_RESET : 0, &st));
	return st;
}

/* Wait for one used element by looking at the ring, not the call fd. */
static void spin_used(struct __test_metadata *_metadata, struct vq *vq,
		      struct vq_used *u)
{
	int i;

	for (i = 0; i < vq_hang_timeout_ms() * 5; i++) {
		if (vq_get_used(vq, u)) {
			ASSERT_FALSE(u->bad);
			return;
		}
		usleep(200);
	}
	ASSERT_TRUE(false) TH_LOG("vq %u: no completion", vq->index);
}

/* Prepare a one-segment 4 KiB request at @sector. */
static void prep_4k(struct __test_metadata *_metadata, struct env *e,
		    struct blk_req *req, uint32_t type, uint64_t sector)
{
	static const uint32_t len = 4096;
	struct blk_req_spec spec = {
		.type = type, .sector = sector, .nseg = 1, .seg_len = &len,
	};

	ASSERT_EQ(0, blk_req_prep(req, &e->gm, &spec));
}

/* Post one request, kick as the ring says, and wait for it in the ring. */
static void run_spin(struct __test_metadata *_metadata, struct vq *vq,
		     struct blk_req *req)
{
	struct vq_used u;

	ASSERT_EQ(0, blk_req_post(vq, req));
	ASSERT_LE(0, vq_kick(vq));
	spin_used(_metadata, vq, &u);
	ASSERT_EQ(req, u.token);
	ASSERT_EQ(VIRTIO_BLK_S_OK, *req->status);
}

/*
 * Whether the backend is a local memory disk, brd (ram*) or null_blk
 * (nullb*, or a configfs name with "nullb" in it), whose completions
 * pile up while the worker submits: brd completes during submission,
 * null_blk from a timer.
 */
static bool backend_is_memory_disk(int fd)
{
	char name[64];
	struct stat st;

	if (fstat(fd, &st) || !S_ISBLK(st.st_mode) ||
	    host_disk_name(st.st_rdev, name, sizeof(name)))
		return false;
	return !strncmp(name, "ram", 3) || strstr(name, "nullb");
}

static void pin_task(const char *dir_path, pid_t tid, void *arg)
{
	int cpu = *(int *)arg;
	cpu_set_t set;

	(void)dir_path;
	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(tid, sizeof(set), &set);
}

/*
 * Tasks named vhost-<pid> in @dir (/proc/self/task or /proc): the device's
 * workers.  Pin them to @cpu when @cpu >= 0.  Returns how many there are.
 */
static int vhost_workers_in(const char *dir_path, int cpu)
{
	char comm[32];

	snprintf(comm, sizeof(comm), "vhost-%d", getpid());
	return host_tasks_named(dir_path, comm, pin_task, &cpu);
}

/*
 * The device's workers: threads of this process since 6.4 (vhost_task),
 * kthreads of their own before, as on 6.1.
 */
static int vhost_workers(int cpu)
{
	int threads = vhost_workers_in("/proc/self/task", cpu);
	int kthreads = vhost_workers_in("/proc", cpu);

	if (threads < 0 || kthreads < 0)
		return -1;
	return threads + kthreads;
}

/*
 * Whether the kernel has per-queue workers (VHOST_NEW_WORKER and its kin,
 * since 6.5).  A kernel that has them must not answer ENOTTY.
 */
static bool kernel_has_vhost_workers(void)
{
	struct utsname u;
	unsigned int major = 0, minor = 0;

	if (uname(&u) || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return true;
	return major > 6 || (major == 6 && minor >= 5);
}

/* Wait for exited workers of earlier devices to leave /proc. */
static int vhost_workers_settled(int want)
{
	int i, n = 0;

	for (i = 0; i < 500; i++) {
		n = vhost_workers(-1);
		if (n == want)
			break;
		usleep(10000);
	}
	return n;
}

static void pin_self(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/*
 * EVENT_IDX: with used_event N completions ahead, the device stays quiet
 * for N - 1 completions and signals exactly once, after the Nth.
 */
TEST_F(fastpath, event_idx_signals_once_after_used_event)
{
	struct vblk_dev *dev = &self->e.dev;
	struct vq *vq = &dev->vq[0];
	const unsigned int n = 8;
	struct vhost_blk_vring_stats st;
	struct blk_req req;
	uint64_t before;
	unsigned int i;

	ASSERT_TRUE(vblk_has(dev, VIRTIO_RING_F_EVENT_IDX));
	vq_set_cb_mode(vq, VQ_CB_MANUAL);
	prep_4k(_metadata, &self->e, &req, VIRTIO_BLK_T_IN, 0);

	/* The first completion after start always signals. */
	vq_set_used_event(vq, vq->last_used_idx);
	run_spin(_metadata, vq, &req);
	ASSERT_EQ(0, vq_wait_call(vq, vq_hang_timeout_ms()));
	stats(_metadata, dev->fd, 0, true);
	before = vq->notifications;

	vq_set_used_event(vq, vq->last_used_idx + n - 1);
	for (i = 0; i < n; i++) {
		run_spin(_metadata, vq, &req);
		/* done_work counts under vq->mutex: the read is exact. */
		st = stats(_metadata, dev->fd, 0, false);
		ASSERT_EQ(i + 1 == n ? 1ULL : 0ULL, st.notifies)
			TH_LOG("after completion %u of %u", i + 1, n);
		ASSERT_EQ((uint64_t)(i + 1 == n ? n - 1 : i + 1),
			  st.notifies_suppressed);
	}
	ASSERT_EQ(0, vq_wait_call(vq, vq_hang_timeout_ms()));
	ASSERT_EQ(0ULL, vq_drain_calls(vq));
	ASSERT_EQ(1ULL, vq->notifications - before);
	ASSERT_EQ((uint64_t)n, st.reqs_in);
	blk_req_free(&req);
}

/*
 * Without EVENT_IDX, M requests submitted with one kick are answered in
 * batches: fewer than M notifications, and the call eventfd saw exactly
 * the notifications the device counted.
 */
TEST_F(fastpath, no_event_idx_batches_notifications)
{
	const unsigned int m = 32;
	struct vhost_blk_vring_stats st;
	struct blk_req req[32];
	struct vblk_dev *dev;
	struct vq *vq;
	uint64_t calls;
	unsigned int i;

	self->e.features = VBLK_FEATURES_ALL &
			   ~VBLK_F(VIRTIO_RING_F_EVENT_IDX);
	env_reopen(_metadata, &self->e, 1, 0, 0);
	dev = &self->e.dev;
	vq = &dev->vq[0];
	ASSERT_FALSE(vblk_has(dev, VIRTIO_RING_F_EVENT_IDX));
	vq_set_cb_mode(vq, VQ_CB_MANUAL);
	vq_drain_calls(vq);
	stats(_metadata, dev->fd, 0, true);

	for (i = 0; i < m; i++) {
		prep_4k(_metadata, &self->e, &req[i], VIRTIO_BLK_T_OUT,
			8 * i);
		ASSERT_EQ(0, blk_req_post(vq, &req[i]));
	}
	ASSERT_EQ(1, vq_kick(vq));
	for (i = 0; i < m; i++) {
		struct vq_used u;

		spin_used(_metadata, vq, &u);
	}
	st = stats(_metadata, dev->fd, 0, false);
	calls = vq_drain_calls(vq);

	ASSERT_EQ((uint64_t)m, st.reqs_out);
	ASSERT_EQ(m * 4096ULL, st.bytes_written);
	/* Exactly one notification per used-ring batch, never per request. */
	ASSERT_LE(1ULL, st.notifies);
	ASSERT_EQ(st.used_batches, st.notifies);
	ASSERT_EQ(0ULL, st.notifies_suppressed);
	/* Each signal adds 1 to the eventfd counter. */
	ASSERT_EQ(st.notifies, calls);
	/*
	 * brd completes during submission and null_blk from a timer, so
	 * completions pile up while the worker submits: fewer batches than
	 * requests.  A file's direct I/O, or a disk across a network
	 * (NVMe/TCP), may complete one request at a time on an idle
	 * worker, each then rightly notified on its own.
	 */
	if (backend_is_memory_disk(self->e.backend_fd)) {
		ASSERT_LT(st.notifies, (uint64_t)m);
	} else {
		TH_LOG("not a memory disk: %llu notifications for %u requests",
		       (unsigned long long)st.notifies, m);
	}
	for (i = 0; i < m; i++)
		blk_req_free(&req[i]);
}

/* VRING_AVAIL_F_NO_INTERRUPT is honoured and counted as suppressed. */
TEST_F(fastpath, no_interrupt_flag_is_counted_as_suppressed)
{
	struct vhost_blk_vring_stats st;
	struct blk_req req;
	struct vq *vq;

	self->e.features = VBLK_FEATURES_ALL &
			   ~VBLK_F(VIRTIO_RING_F_EVENT_IDX);
	env_reopen(_metadata, &self->e, 1, 0, 0);
	vq = &self->e.dev.vq[0];
	vq_set_cb_mode(vq, VQ_CB_MANUAL);
	vq_set_no_interrupt(vq, true);
	stats(_metadata, self->e.dev.fd, 0, true);
	prep_4k(_metadata, &self->e, &req, VIRTIO_BLK_T_IN, 0);
	run_spin(_metadata, vq, &req);
	run_spin(_metadata, vq, &req);
	st = stats(_metadata, self->e.dev.fd, 0, false);
	ASSERT_EQ(0ULL, st.notifies);
	ASSERT_EQ(2ULL, st.notifies_suppressed);
	ASSERT_EQ(0ULL, vq_drain_calls(vq));
	blk_req_free(&req);
}

/*
 * A guest that keeps the ring busy, one request after another: with
 * polling off every request finds the ring idle and needs a kick; with
 * polling on only the first does.  The worker and the guest are on
 * different CPUs so that the poll is not cut short by need_resched().
 */
static void busy_guest(struct __test_metadata *_metadata, struct env *e,
		       uint32_t poll_us, unsigned int n,
		       struct vhost_blk_vring_stats *st, uint64_t *kicks)
{
	struct vhost_vring_state t = { .index = 0, .num = poll_us };
	struct vq *vq = &e->dev.vq[0];
	struct blk_req req;
	unsigned int i;

	pin_self(0);
	ASSERT_LE(1, vhost_workers(1));
	vq_set_cb_mode(vq, VQ_CB_MANUAL);
	prep_4k(_metadata, e, &req, VIRTIO_BLK_T_IN, 0);
	/*
	 * Warm up with polling off: the run turns kicks back on before
	 * done_work answers, so the ring is idle with kicks on once the
	 * answer is seen, however slow the machine.  Then turn polling on
	 * (the ioctl waits for the ring's mutex) and count from there.
	 */
	run_spin(_metadata, vq, &req);
	ASSERT_EQ(0, VBLK_IOCTL(e->dev.fd, VHOST_SET_VRING_BUSYLOOP_TIMEOUT,
				&t));
	stats(_metadata, e->dev.fd, 0, true);
	*kicks = vq->kicks;
	for (i = 0; i < n; i++)
		run_spin(_metadata, vq, &req);
	*kicks = vq->kicks - *kicks;
	*st = stats(_metadata, e->dev.fd, 0, false);
	blk_req_free(&req);
}

TEST_F(fastpath, without_polling_each_idle_request_needs_a_kick)
{
	struct vhost_blk_vring_stats st;
	const unsigned int n = 20;
	uint64_t kicks;

	busy_guest(_metadata, &self->e, 0, n, &st, &kicks);
	ASSERT_EQ((uint64_t)n, kicks);
	ASSERT_EQ((uint64_t)n, st.kicks);
	ASSERT_EQ(0ULL, st.polls);
	ASSERT_EQ((uint64_t)n, st.reqs_in);
}

TEST_F(fastpath, with_polling_a_busy_guest_kicks_only_once)
{
	struct vhost_blk_vring_stats st;
	const unsigned int n = 20;
	uint64_t kicks;

	/*
	 * A window no stall of a loaded TCG machine reaches (2 s once
	 * did): a window that runs out turns kicks back on, and the
	 * next request kicks.  The stats ioctl after the last request
	 * ends the final poll at once, as any ioctl does.
	 */
	busy_guest(_metadata, &self->e, 30000000, n, &st, &kicks);
	ASSERT_EQ(1ULL, kicks);
	ASSERT_EQ(1ULL, st.kicks);
	ASSERT_EQ((uint64_t)n, st.reqs_in);
	/*
	 * Requests 2..n were found with kicks still off: by a poll, or by
	 * the handler requeued behind a completion finding them at once.
	 */
	ASSERT_LE(1ULL, st.poll_hits);
	ASSERT_LE(st.poll_hits, st.polls);
}

/*
 * A busy poll holds its ring's mutex, and the owner may make the window
 * minutes long.  An ioctl (here the stats read, which takes that mutex)
 * and the release must end the poll, not wait out its window.  Before
 * they did, they waited until the window ran out or until something else
 * wanted the worker's CPU: in the test VM something soon did, so this
 * test could pass then too; on a host CPU kept for the worker, nothing
 * would have.
 */
TEST_F(fastpath, an_ioctl_ends_a_busy_poll)
{
	struct vhost_vring_state t = { .index = 0, .num = 600000000 };
	struct vhost_blk_vring_stats st;
	struct vq *vq = &self->e.dev.vq[0];
	struct blk_req req;

	/*
	 * The worker on a CPU of its own: nothing wants its CPU, so only
	 * the ioctl can end the poll (sharing ours, need_resched() would).
	 */
	pin_self(0);
	ASSERT_LE(1, vhost_workers(1));
	vq_set_cb_mode(vq, VQ_CB_MANUAL);
	prep_4k(_metadata, &self->e, &req, VIRTIO_BLK_T_IN, 0);
	ASSERT_EQ(0, VBLK_IOCTL(self->e.dev.fd,
				VHOST_SET_VRING_BUSYLOOP_TIMEOUT, &t));
	stats(_metadata, self->e.dev.fd, 0, true);
	/* Answered, then the worker polls the empty ring for 10 min. */
	run_spin(_metadata, vq, &req);
	st = stats(_metadata, self->e.dev.fd, 0, false);
	ASSERT_EQ(1ULL, st.reqs_in);
	ASSERT_LE(1ULL, st.polls);
	ASSERT_EQ(0ULL, st.poll_hits);
	/* And the ring serves on: found by a poll or by a kick. */
	run_spin(_metadata, vq, &req);
	st = stats(_metadata, self->e.dev.fd, 0, false);
	ASSERT_EQ(2ULL, st.reqs_in);
	blk_req_free(&req);
	/* The teardown's release ends the poll that follows. */
}

/* Adaptive polling: the window grows while the guest keeps coming back. */
TEST_F(fastpath, adaptive_polling_grows_the_window)
{
	struct vhost_blk_vring_poll p = {
		.index = 0, .flags = VHOST_BLK_POLL_ADAPTIVE, .grow = 2,
	};
	/* A ceiling no stall of the machine reaches: it would shrink it. */
	struct vhost_vring_state t = { .index = 0, .num = 30000000 };
	struct vhost_blk_vring_stats st;
	struct vq *vq = &self->e.dev.vq[0];
	struct blk_req req;
	unsigned int i;

	ASSERT_EQ(0, VBLK_IOCTL(self->e.dev.fd,
				VHOST_SET_VRING_BUSYLOOP_TIMEOUT, &t));
	ASSERT_EQ(0, VBLK_IOCTL(self->e.dev.fd, VHOST_BLK_SET_VRING_POLL, &p));
	st = stats(_metadata, self->e.dev.fd, 0, true);
	ASSERT_EQ(0ULL, st.poll_window_ns);

	/* Each kick after a short idle period says: a window would help. */
	prep_4k(_metadata, &self->e, &req, VIRTIO_BLK_T_IN, 0);
	for (i = 0; i < 4; i++) {
		run_spin(_metadata, vq, &req);
		usleep(1000);
	}
	st = stats(_metadata, self->e.dev.fd, 0, false);
	ASSERT_LT(0ULL, st.poll_window_ns);
	ASSERT_GE(30000000000ULL, st.poll_window_ns);

	/* Turning adaptive off again gives the fixed window. */
	p.flags = 0;
	ASSERT_EQ(0, VBLK_IOCTL(self->e.dev.fd, VHOST_BLK_SET_VRING_POLL, &p));
	st = stats(_metadata, self->e.dev.fd, 0, false);
	ASSERT_EQ(30000000000ULL, st.poll_window_ns);
	blk_req_free(&req);
}

TEST_F(fastpath, set_vring_poll_rejects_bad_queue_and_flags)
{
	struct vhost_blk_vring_poll p = { .index = 100000 };
	struct vhost_blk_vring_stats st = {
		.argsz = sizeof(st), .index = 100000,
	};

	ASSERT_EQ(-1, ioctl(self->e.dev.fd, VHOST_BLK_SET_VRING_POLL, &p));
	ASSERT_EQ(EINVAL, errno);
	p.index = 0;
	p.flags = 0x80;
	ASSERT_EQ(-1, ioctl(self->e.dev.fd, VHOST_BLK_SET_VRING_POLL, &p));
	ASSERT_EQ(EINVAL, errno);
	/* Reserved for what may come: must be 0 today. */
	p.flags = 0;
	p.reserved[1] = 1;
	ASSERT_EQ(-1, ioctl(self->e.dev.fd, VHOST_BLK_SET_VRING_POLL, &p));
	ASSERT_EQ(EINVAL, errno);
	p.reserved[1] = 0;
	ASSERT_EQ(0, ioctl(self->e.dev.fd, VHOST_BLK_SET_VRING_POLL, &p));
	ASSERT_EQ(-1, ioctl(self->e.dev.fd, VHOST_BLK_GET_VRING_STATS, &st));
	ASSERT_EQ(EINVAL, errno);
}

/*
 * All queues at once, each on its own worker: data verified, each queue's
 * counters see its own requests, and the workers are distinct threads.
 */
TEST_F(fastpath, per_queue_workers_serve_all_queues_at_once)
{
	const unsigned int nvqs = 4, per_q = 16;
	struct blk_req req[4][16];
	struct vhost_blk_vring_stats st;
	struct vblk_dev *dev;
	int ids[4], nworkers;
	unsigned int q, i;
	uint8_t *pat;

	env_reopen(_metadata, &self->e, nvqs, 0, 0);
	dev = &self->e.dev;
	ASSERT_EQ(1, vhost_workers_settled(1));
	if (!kernel_has_vhost_workers()) {
		struct vhost_worker_state w = {};

		ASSERT_EQ(-1, ioctl(dev->fd, VHOST_NEW_WORKER, &w));
		ASSERT_EQ(ENOTTY, errno);
		SKIP(return, "no per-queue workers before 6.5 (VHOST_NEW_WORKER: ENOTTY)");
	}

	for (q = 0; q < nvqs; q++) {
		struct vhost_worker_state w = {};
		struct vhost_vring_worker vw = { .index = q };

		ASSERT_EQ(0, VBLK_IOCTL(dev->fd, VHOST_NEW_WORKER, &w));
		vw.worker_id = w.worker_id;
		ASSERT_EQ(0, VBLK_IOCTL(dev->fd, VHOST_ATTACH_VRING_WORKER,
					&vw));
		vw.worker_id = ~0U;
		ASSERT_EQ(0, VBLK_IOCTL(dev->fd, VHOST_GET_VRING_WORKER, &vw));
		ASSERT_EQ(w.worker_id, vw.worker_id);
		ids[q] = vw.worker_id;
		for (i = 0; i < q; i++)
			ASSERT_NE(ids[i], ids[q]);
	}
	nworkers = vhost_workers_settled(nvqs + 1);
	ASSERT_EQ((int)nvqs + 1, nworkers);

	/* Writes on every queue, all posted before any completes. */
	pat = xmalloc(_metadata, 4096);
	for (q = 0; q < nvqs; q++) {
		stats(_metadata, dev->fd, q, true);
		for (i = 0; i < per_q; i++) {
			uint64_t sector = (q * per_q + i) * 8;

			prep_4k(_metadata, &self->e, &req[q][i],
				VIRTIO_BLK_T_OUT, sector);
			pattern_fill(pat, 4096, self->e.seed, sector * SECTOR);
			blk_req_fill(&req[q][i], pat, 4096);
			ASSERT_EQ(0, blk_req_post(&dev->vq[q], &req[q][i]));
		}
	}
	for (q = 0; q < nvqs; q++)
		ASSERT_LE(0, vq_kick(&dev->vq[q]));
	for (q = 0; q < nvqs; q++) {
		ASSERT_EQ(0, blk_complete(&dev->vq[q], per_q));
		for (i = 0; i < per_q; i++) {
			ASSERT_EQ(VIRTIO_BLK_S_OK, *req[q][i].status);
			blk_req_free(&req[q][i]);
		}
		st = stats(_metadata, dev->fd, q, false);
		ASSERT_EQ((uint64_t)per_q, st.reqs_out) TH_LOG("queue %u", q);
		ASSERT_EQ(per_q * 4096ULL, st.bytes_written);
		ASSERT_LE(1ULL, st.kicks);
	}
	/* Read everything back through queue 0. */
	for (q = 0; q < nvqs; q++)
		for (i = 0; i < per_q; i++)
			verify_pattern(_metadata, &self->e, &dev->vq[0],
				       (q * per_q + i) * 8, 4096,
				       self->e.seed);
	free(pat);
}

/* The default is one worker for the whole device. */
TEST_F(fastpath, one_worker_by_default)
{
	struct vhost_vring_worker a = { .index = 0 }, b = { .index = 3 };

	env_reopen(_metadata, &self->e, 4, 0, 0);
	if (!kernel_has_vhost_workers()) {
		/* Absent, and said so: one worker all the same. */
		ASSERT_EQ(-1, ioctl(self->e.dev.fd, VHOST_GET_VRING_WORKER, &a));
		ASSERT_EQ(ENOTTY, errno);
		ASSERT_EQ(1, vhost_workers_settled(1));
		return;
	}
	ASSERT_EQ(0, VBLK_IOCTL(self->e.dev.fd, VHOST_GET_VRING_WORKER, &a));
	ASSERT_EQ(0, VBLK_IOCTL(self->e.dev.fd, VHOST_GET_VRING_WORKER, &b));
	ASSERT_EQ(a.worker_id, b.worker_id);
	ASSERT_EQ(1, vhost_workers_settled(1));
}

/* The in-flight high-water mark sees a full batch submitted at once. */
TEST_F(fastpath, inflight_high_water_mark_counts_posted_requests)
{
	struct vhost_blk_vring_stats st;
	struct vq *vq = &self->e.dev.vq[0];
	struct blk_req req[16];
	unsigned int i;

	stats(_metadata, self->e.dev.fd, 0, true);
	for (i = 0; i < 16; i++) {
		prep_4k(_metadata, &self->e, &req[i], VIRTIO_BLK_T_IN, 8 * i);
		ASSERT_EQ(0, blk_req_post(vq, &req[i]));
	}
	ASSERT_LE(0, vq_kick(vq));
	ASSERT_EQ(0, blk_complete(vq, 16));
	st = stats(_metadata, self->e.dev.fd, 0, false);
	ASSERT_EQ(16ULL, st.reqs_in);
	ASSERT_EQ(16 * 4096ULL, st.bytes_read);
	ASSERT_LE(1ULL, st.inflight_max);
	ASSERT_GE(16ULL, st.inflight_max);
	ASSERT_EQ(0ULL, st.inflight);
	for (i = 0; i < 16; i++)
		blk_req_free(&req[i]);
}

/* A device that asked for 2 queues has 2, and no state for more. */
TEST_F(fastpath, set_num_queues_sizes_the_device)
{
	struct vhost_vring_state num = { .index = 2, .num = 64 };
	struct vhost_vring_file be = { .fd = self->e.backend_fd };
	struct virtio_blk_config cfg;
	uint32_t n = 2;
	int fd;

	fd = open(VBLK_DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, VBLK_IOCTL(fd, VHOST_BLK_SET_NUM_QUEUES, &n));
	ASSERT_EQ(0, VBLK_IOCTL(fd, VHOST_SET_OWNER, NULL));
	ASSERT_EQ(0, VBLK_IOCTL(fd, VHOST_BLK_SET_BACKEND, &be));
	ASSERT_EQ(0, vblk_get_config(fd, &cfg));
	ASSERT_EQ(2, cfg.num_queues);
	/* Queue 2 does not exist (the vhost core says ENOBUFS). */
	ASSERT_EQ(-1, ioctl(fd, VHOST_SET_VRING_NUM, &num));
	ASSERT_EQ(ENOBUFS, errno);
	num.index = 1;
	ASSERT_EQ(0, VBLK_IOCTL(fd, VHOST_SET_VRING_NUM, &num));
	close(fd);
}

TEST_F(fastpath, set_num_queues_only_first_and_in_range)
{
	uint32_t n = 0;
	int fd;

	fd = open(VBLK_DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(-1, ioctl(fd, VHOST_BLK_SET_NUM_QUEUES, &n));
	ASSERT_EQ(EINVAL, errno);
	n = 100000;
	ASSERT_EQ(-1, ioctl(fd, VHOST_BLK_SET_NUM_QUEUES, &n));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_EQ(0, VBLK_IOCTL(fd, VHOST_SET_OWNER, NULL));
	n = 1;
	ASSERT_EQ(-1, ioctl(fd, VHOST_BLK_SET_NUM_QUEUES, &n));
	ASSERT_EQ(EBUSY, errno);
	close(fd);
	/* Closing a device that never got past open is fine too. */
	fd = open(VBLK_DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	close(fd);
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

/* Count lines of the trace buffer that contain @what and @also. */
static unsigned int trace_count2(const char *what, const char *also)
{
	char line[512];
	unsigned int n = 0;
	FILE *f = fopen(TRACEFS "/trace", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, what) && strstr(line, also))
			n++;
	fclose(f);
	return n;
}

static unsigned int trace_count(const char *what)
{
	return trace_count2(what, what);
}

/* The tracepoints fire once per request and once per notify decision. */
TEST_F(fastpath, tracepoints_count_requests_and_notifications)
{
	struct vhost_blk_vring_stats st;
	struct vq *vq = &self->e.dev.vq[0];
	const unsigned int n = 10;
	struct blk_req req;
	unsigned int i;

	if (access(TRACEFS "/events/vhost_blk", F_OK))
		SKIP(return, "no " TRACEFS "/events/vhost_blk");
	ASSERT_EQ(0, write_file(TRACEFS "/tracing_on", "0"));
	ASSERT_EQ(0, write_file(TRACEFS "/buffer_size_kb", "4096"));
	ASSERT_EQ(0, write_file(TRACEFS "/trace", ""));
	ASSERT_EQ(0, write_file(TRACEFS "/events/vhost_blk/enable", "1"));
	stats(_metadata, self->e.dev.fd, 0, true);
	ASSERT_EQ(0, write_file(TRACEFS "/tracing_on", "1"));

	prep_4k(_metadata, &self->e, &req, VIRTIO_BLK_T_IN, 0);
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, blk_req_run(vq, &req));
	st = stats(_metadata, self->e.dev.fd, 0, false);

	ASSERT_EQ(0, write_file(TRACEFS "/tracing_on", "0"));
	ASSERT_EQ(0, write_file(TRACEFS "/events/vhost_blk/enable", "0"));
	ASSERT_EQ(n, trace_count("vhost_blk_req_submit:"));
	ASSERT_EQ(n, trace_count("vhost_blk_req_complete:"));
	ASSERT_EQ(n, trace_count2("vhost_blk_req_complete:",
				  "type=0 sector=0 len=4096 status=0"));
	ASSERT_EQ(st.notifies, (uint64_t)trace_count(" sent"));
	ASSERT_EQ(st.notifies_suppressed,
		  (uint64_t)trace_count(" suppressed"));
	ASSERT_EQ(st.kicks, (uint64_t)trace_count("guest kick"));
	blk_req_free(&req);
}

TEST_HARNESS_MAIN
