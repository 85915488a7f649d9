/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost-blk: what the driver needs from the kernel that Linux 6.1 LTS
 * (Debian 12's default kernel) does not have, in one place.
 *
 * blk.c is written to the interfaces of 6.12.  On 6.12 and later this
 * header adds only the vhost_blk_*() wrappers below, each the kernel's
 * own call.  On 6.1 it supplies the newer interfaces blk.c calls, built
 * on what 6.1 has:
 *
 * - vhost_vq_work_queue() and vhost_vq_has_work(): 6.1 has one worker per
 *   device, so they act on the device's worker;
 * - vhost_task_create() and its kin, for the sync task: a kthread put
 *   into every cgroup of the owner, as the 6.1 vhost core puts its own
 *   worker (vhost_attach_cgroups()), that charges its memory to the
 *   owner's memory cgroup;
 * - file_bdev() and iter_iov();
 * - vhost_blk_eventfd_signal(), as eventfd_signal() lost its count in 6.8;
 * - vhost_blk_iocb_iter_write(), as 6.1's vfs_iocb_iter_write() leaves
 *   the file system's freeze protection to its caller, which 6.7 moved
 *   into it (kiocb_start_write(), and kiocb_end_write() when the write
 *   completes at once): blk.c's completion ends it, as on 6.12;
 * - vhost_blk_bio_set_pages_dirty() and vhost_blk_bio_check_pages_dirty(),
 *   as 6.1 does not export the block layer's own to modules;
 * - vhost_blk_bdev_can_poll(), as 6.1 keeps "this queue polls" in a
 *   queue flag (QUEUE_FLAG_POLL), 6.12 in its limits (BLK_FEAT_POLL).
 *   bio_poll() is the same call on both, and on both enters the queue
 *   without waiting for a freeze to end (Debian's 6.1 has the fix).
 *
 * Per-queue workers (VHOST_NEW_WORKER and its kin) do not exist on 6.1:
 * vhost_blk_worker_ioctl() then answers ENOTTY, as the 6.1 vhost core
 * answers a VMM asking for them.  Nothing is faked.
 *
 * Kbuild defines VHOST_BLK_COMPAT_6_1 on a 6.1 kernel, and refuses any
 * other release before 6.12: the interfaces changed one release at a time
 * in between, and only these two are tested.  In the kernel tree it is
 * never defined.
 */
#ifndef _VHOST_BLK_COMPAT_H
#define _VHOST_BLK_COMPAT_H

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/eventfd.h>

#ifndef VHOST_BLK_COMPAT_6_1

#include <linux/sched/vhost_task.h>

/*
 * Whether @bdev takes REQ_POLLED bios: a blk-mq device with poll queues,
 * as blk_mq_can_poll() says; blk_mq_submit_bio() fails a polled bio with
 * BLK_STS_NOTSUPP on any other.
 */
static inline bool vhost_blk_bdev_can_poll(struct block_device *bdev)
{
	struct request_queue *q = bdev_get_queue(bdev);

	return queue_is_mq(q) && (q->limits.features & BLK_FEAT_POLL) &&
	       READ_ONCE(q->tag_set->map[HCTX_TYPE_POLL].nr_queues);
}

static inline ssize_t vhost_blk_iocb_iter_write(struct file *file,
						struct kiocb *iocb,
						struct iov_iter *iter)
{
	return vfs_iocb_iter_write(file, iocb, iter);
}

static inline void vhost_blk_eventfd_signal(struct eventfd_ctx *ctx)
{
	eventfd_signal(ctx);
}

static inline void vhost_blk_bio_set_pages_dirty(struct bio *bio)
{
	bio_set_pages_dirty(bio);
}

static inline void vhost_blk_bio_check_pages_dirty(struct bio *bio)
{
	bio_check_pages_dirty(bio);
}

static inline void vhost_blk_compat_exit(void)
{
}

/* The per-queue worker ioctls, or -ENOIOCTLCMD.  Under dev->mutex. */
static inline long vhost_blk_worker_ioctl(struct vhost_dev *dev,
					  unsigned int ioctl,
					  void __user *argp)
{
	lockdep_assert_held(&dev->mutex);
	switch (ioctl) {
	case VHOST_NEW_WORKER:
	case VHOST_FREE_WORKER:
	case VHOST_ATTACH_VRING_WORKER:
	case VHOST_GET_VRING_WORKER:
		return vhost_worker_ioctl(dev, ioctl, argp);
	}
	return -ENOIOCTLCMD;
}

#else /* VHOST_BLK_COMPAT_6_1 */

#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/cgroup.h>
#include <linux/err.h>
#include <linux/kthread.h>
#include <linux/memcontrol.h>
#include <linux/sched/mm.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>

/*
 * 6.1's vfs_iocb_iter_write() does not take the file system's freeze
 * protection for the write: take it here, and drop it here if the write
 * completed at once; vhost_blk_rw_complete() drops it otherwise.
 */
static inline ssize_t vhost_blk_iocb_iter_write(struct file *file,
						struct kiocb *iocb,
						struct iov_iter *iter)
{
	ssize_t ret;

	kiocb_start_write(iocb);
	ret = vfs_iocb_iter_write(file, iocb, iter);
	if (ret != -EIOCBQUEUED)
		kiocb_end_write(iocb);
	return ret;
}

static inline void vhost_blk_eventfd_signal(struct eventfd_ctx *ctx)
{
	eventfd_signal(ctx, 1);
}

/* No per-queue workers on 6.1: the VMM is told so, as by vhost-net. */
static inline long vhost_blk_worker_ioctl(struct vhost_dev *dev,
					  unsigned int ioctl,
					  void __user *argp)
{
	lockdep_assert_held(&dev->mutex);
	return -ENOIOCTLCMD;
}

/*
 * Whether @bdev polls REQ_POLLED bios: a blk-mq device with poll queues
 * (6.1 sets QUEUE_FLAG_POLL only then; submit_bio_noacct() clears
 * REQ_POLLED on any other queue, whose bios then raise interrupts).
 */
static inline bool vhost_blk_bdev_can_poll(struct block_device *bdev)
{
	struct request_queue *q = bdev_get_queue(bdev);

	return queue_is_mq(q) && test_bit(QUEUE_FLAG_POLL, &q->queue_flags);
}

/* One worker per device on 6.1: every ring's work goes to it. */
static inline bool vhost_vq_work_queue(struct vhost_virtqueue *vq,
				       struct vhost_work *work)
{
	vhost_work_queue(vq->dev, work);
	return true;
}

static inline bool vhost_vq_has_work(struct vhost_virtqueue *vq)
{
	return vhost_has_work(vq->dev);
}

/*
 * 6.1 does not export bio_set_pages_dirty() and bio_check_pages_dirty():
 * the same, with our own list of bios whose pages must be dirtied again
 * in process context.
 */
static inline void vhost_blk_bio_set_pages_dirty(struct bio *bio)
{
	struct folio_iter fi;

	bio_for_each_folio_all(fi, bio) {
		folio_lock(fi.folio);
		folio_mark_dirty(fi.folio);
		folio_unlock(fi.folio);
	}
}

/* Bios whose pages wait to be dirtied, linked through bi_private. */
static DEFINE_SPINLOCK(vhost_blk_dirty_lock);
static struct bio *vhost_blk_dirty_list;

static void vhost_blk_dirty_fn(struct work_struct *work)
{
	struct bio *bio, *next;

	spin_lock_irq(&vhost_blk_dirty_lock);
	next = vhost_blk_dirty_list;
	vhost_blk_dirty_list = NULL;
	spin_unlock_irq(&vhost_blk_dirty_lock);

	while ((bio = next)) {
		next = bio->bi_private;
		bio_release_pages(bio, true);
		bio_put(bio);
	}
}

static DECLARE_WORK(vhost_blk_dirty_work, vhost_blk_dirty_fn);

/* May run in IRQ context, as bio_check_pages_dirty() does. */
static inline void vhost_blk_bio_check_pages_dirty(struct bio *bio)
{
	struct folio_iter fi;
	unsigned long flags;

	bio_for_each_folio_all(fi, bio) {
		if (!folio_test_dirty(fi.folio))
			goto defer;
	}
	bio_release_pages(bio, false);
	bio_put(bio);
	return;
defer:
	spin_lock_irqsave(&vhost_blk_dirty_lock, flags);
	bio->bi_private = vhost_blk_dirty_list;
	vhost_blk_dirty_list = bio;
	spin_unlock_irqrestore(&vhost_blk_dirty_lock, flags);
	schedule_work(&vhost_blk_dirty_work);
}

/* No deferred bio may outlive the module. */
static inline void vhost_blk_compat_exit(void)
{
	flush_work(&vhost_blk_dirty_work);
}

static inline struct block_device *file_bdev(struct file *file)
{
	return I_BDEV(file->f_mapping->host);
}

/* 6.4 renamed the field to keep its users to this accessor. */
static inline const struct iovec *iter_iov(const struct iov_iter *iter)
{
	return iter->iov;
}

/*
 * The sync task.  On 6.12 it is a thread of the owner's own; here a
 * kthread stands in, in the owner's cgroups and charging the owner's
 * memory cgroup.  It is never killed with its owner: the owner's exit
 * closes the device, which stops it, so handle_kill is never called.
 */
struct vhost_task {
	struct task_struct *task;
	bool (*fn)(void *data);
	void *data;
	struct mem_cgroup *memcg;	/* a reference, dropped by stop */
};

static inline int vhost_blk_task_fn(void *arg)
{
	struct vhost_task *vtsk = arg;
	struct mem_cgroup *old = set_active_memcg(vtsk->memcg);

	for (;;) {
		/* Pairs with the wake-up in kthread_stop(). */
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop()) {
			__set_current_state(TASK_RUNNING);
			break;
		}
		if (!vtsk->fn(vtsk->data))
			schedule();
	}
	set_active_memcg(old);
	return 0;
}

/* Called by the owner: the task joins its cgroups. */
static inline struct vhost_task *
vhost_task_create(bool (*fn)(void *data), void (*handle_kill)(void *data),
		  void *data, const char *name)
{
	struct vhost_task *vtsk;
	struct task_struct *task;
	int ret;

	vtsk = kzalloc(sizeof(*vtsk), GFP_KERNEL_ACCOUNT);
	if (!vtsk)
		return ERR_PTR(-ENOMEM);
	vtsk->fn = fn;
	vtsk->data = data;
	task = kthread_create(vhost_blk_task_fn, vtsk, "%s", name);
	if (IS_ERR(task)) {
		kfree(vtsk);
		return ERR_CAST(task);
	}
	ret = cgroup_attach_task_all(current, task);
	if (ret) {
		kthread_stop(task);
		kfree(vtsk);
		return ERR_PTR(ret);
	}
	vtsk->task = task;
	vtsk->memcg = get_mem_cgroup_from_mm(current->mm);
	return vtsk;
}

static inline void vhost_task_start(struct vhost_task *vtsk)
{
	wake_up_process(vtsk->task);
}

static inline void vhost_task_wake(struct vhost_task *vtsk)
{
	wake_up_process(vtsk->task);
}

/* Returns once the task has run its last fn() and exited. */
static inline void vhost_task_stop(struct vhost_task *vtsk)
{
	kthread_stop(vtsk->task);
	mem_cgroup_put(vtsk->memcg);
	kfree(vtsk);
}

#endif /* VHOST_BLK_COMPAT_6_1 */

#endif /* _VHOST_BLK_COMPAT_H */
