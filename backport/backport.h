/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost-blk backport layer: what drivers/vhost/blk.c, written to the
 * interfaces of Linux 7.3 exactly as it is posted, needs from the kernels
 * before it that vhost-blk also serves, Debian's 6.12 and 6.1.
 *
 * As in the Linux backports project, the driver is not touched: the
 * out-of-tree and DKMS builds (Kbuild at the top of the tree) force this
 * header in before blk.c (-include) and put backport/include first on the
 * include path, on kernels before 7.3 only.  The in-tree build and the
 * patch series never see either.
 *
 * This header includes what blk.c's calls are declared in first, so that
 * a macro below redirects only blk.c's calls, never a declaration.  Then:
 *
 * before 7.3 (6.12 and 6.1):
 * - vhost_get_vq_desc_n(), vhost_discard_vq_desc() and vhost_add_used_n()
 *   without VIRTIO_F_IN_ORDER (which vhost-blk does not offer): a chain
 *   is one buffer, and nheads is NULL;
 * - __blkdev_issue_discard() without a result (blk.c checked the range
 *   before, in vhost_blk_check_ranges());
 * - kzalloc_obj();
 * - bdev_limits() (6.13);
 *
 * on 6.1 alone:
 * - vhost_dev.fork_owner (VHOST_SET_FORK_FROM_OWNER), true: there is no
 *   choice of worker kind;
 * - vhost_vq_work_queue() and vhost_vq_has_work(): 6.1 has one worker per
 *   device, so they act on the device's worker;
 * - the per-queue worker ioctls (6.4): vhost_worker_ioctl() answers
 *   -ENOIOCTLCMD, which the VMM sees as ENOTTY, as from 6.1's vhost-net;
 * - vhost_task (<linux/sched/vhost_task.h> in backport/include);
 * - file_bdev() and iter_iov();
 * - eventfd_signal() without a count (6.8);
 * - vfs_iocb_iter_write() that takes the file system's freeze protection
 *   for the write, as 6.7's does (kiocb_start_write(), and
 *   kiocb_end_write() when the write completes at once); blk.c's
 *   completion ends it otherwise, as on 6.12;
 * - pin_user_pages_fast() refusing FOLL_LONGTERM on written-back file
 *   pages (6.5);
 * - iov_iter_extract_pages() (6.3), from iov_iter_get_pages2(), which
 *   takes page references rather than pins, as 6.1's bio_release_pages()
 *   expects; and iter_iov_addr() and iter_iov_len();
 * - bdev_limits() that carries BLK_FEAT_POLL: 6.1 keeps "this queue
 *   polls" in a queue flag (QUEUE_FLAG_POLL).  bio_poll() is the same
 *   call on both, and on both enters the queue without waiting for a
 *   freeze to end (Debian's 6.1 has the fix).
 *
 * Kbuild refuses every release but 6.1, 6.12 and 7.3 and later: the
 * interfaces changed one release at a time in between, and only these
 * are tested.
 */
#ifndef _VHOST_BLK_BACKPORT_H
#define _VHOST_BLK_BACKPORT_H

#include <linux/version.h>
#include <linux/bio.h>
#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/eventfd.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/uio.h>
#include <linux/backing-dev.h>
#include <linux/mm.h>
#include <linux/vhost.h>

#include "vhost.h"

#if LINUX_VERSION_CODE < KERNEL_VERSION(7, 3, 0)

static inline int vhost_get_vq_desc_n(struct vhost_virtqueue *vq,
				      struct iovec iov[], unsigned int iov_size,
				      unsigned int *out_num,
				      unsigned int *in_num,
				      struct vhost_log *log,
				      unsigned int *log_num,
				      unsigned int *ndesc)
{
	*ndesc = 0;
	return vhost_get_vq_desc(vq, iov, iov_size, out_num, in_num, log,
				 log_num);
}

#define vhost_discard_vq_desc(vq, nbuf, ndesc) \
	vhost_discard_vq_desc(vq, nbuf)
#define vhost_add_used_n(vq, heads, nheads, count) \
	vhost_add_used_n(vq, heads, count)
#define __blkdev_issue_discard(bdev, sector, nr_sects, gfp_mask, biop) \
	((void)__blkdev_issue_discard(bdev, sector, nr_sects, gfp_mask, biop))

/* The typed allocators (7.0): the one form blk.c uses. */
#ifndef kzalloc_obj
#define kzalloc_obj(P, gfp) ((typeof(P) *)kzalloc(sizeof(P), gfp))
#endif

#endif /* < 7.3 */

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0) && \
	LINUX_VERSION_CODE < KERNEL_VERSION(6, 13, 0)
static inline struct queue_limits *bdev_limits(struct block_device *bdev)
{
	return &bdev_get_queue(bdev)->limits;
}
#endif

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 2, 0)

/* The one queue limit blk.c reads through bdev_limits() on 6.1. */
typedef unsigned int blk_features_t;
#define BLK_FEAT_POLL ((blk_features_t)(1u << 9))
struct vhost_blk_backport_limits {
	blk_features_t features;
};

#define bdev_limits(bdev) (&(struct vhost_blk_backport_limits) {	\
	.features = test_bit(QUEUE_FLAG_POLL,				\
			     &bdev_get_queue(bdev)->queue_flags) ?	\
		    BLK_FEAT_POLL : 0,					\
})

/*
 * VHOST_SET_FORK_FROM_OWNER (6.17, and Debian's 6.12) lets a VMM choose
 * kthread workers; 6.1 has no such choice, and its sync task is the
 * vhost_task below: dev.fork_owner reads as dev.use_worker, true for
 * vhost-blk.
 */
#define fork_owner use_worker

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

/* The per-queue worker ioctls of 6.4's uapi, answered ENOTTY. */
struct vhost_worker_state {
	unsigned int worker_id;
};

struct vhost_vring_worker {
	unsigned int index;
	unsigned int worker_id;
};

#define VHOST_NEW_WORKER _IOR(VHOST_VIRTIO, 0x8, struct vhost_worker_state)
#define VHOST_FREE_WORKER _IOW(VHOST_VIRTIO, 0x9, struct vhost_worker_state)
#define VHOST_ATTACH_VRING_WORKER _IOW(VHOST_VIRTIO, 0x15,		\
				       struct vhost_vring_worker)
#define VHOST_GET_VRING_WORKER _IOWR(VHOST_VIRTIO, 0x16,		\
				     struct vhost_vring_worker)

static inline long vhost_worker_ioctl(struct vhost_dev *dev,
				      unsigned int ioctl, void __user *argp)
{
	lockdep_assert_held(&dev->mutex);
	/* Only the owner learns that they do not exist, as in 6.1's vhost. */
	return vhost_dev_check_owner(dev) ?: -ENOIOCTLCMD;
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

/* vq_err() in 6.1's vhost.h still passes the count: both forms go. */
#define eventfd_signal(ctx, ...) eventfd_signal(ctx, 1)

/*
 * 6.1's vfs_iocb_iter_write() does not take the file system's freeze
 * protection for the write: take it here, and drop it here if the write
 * completed at once; blk.c's completion drops it otherwise.
 */
static inline ssize_t vhost_blk_backport_iocb_iter_write(struct file *file,
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

#define vfs_iocb_iter_write vhost_blk_backport_iocb_iter_write

/*
 * Page extraction (6.3): 6.1 takes a page reference where later kernels
 * pin user pages, for every kind of iov_iter, and its bio_release_pages()
 * drops them unless the bio is BIO_NO_PAGE_REF.  Here a bio carries a
 * flag of ours, under the later name, when its pages hold references:
 * every bio that extracted pages, and none built on the pinned memory
 * table, whose pages it must not put.
 */
#define iov_iter_extract_will_pin(iter) true
#define BIO_PAGE_PINNED BIO_FLAG_LAST

static inline void vhost_blk_backport_release_pages(struct bio *bio,
						    bool mark_dirty)
{
	if (bio_flagged(bio, BIO_PAGE_PINNED))
		__bio_release_pages(bio, mark_dirty);
}

#define bio_release_pages vhost_blk_backport_release_pages

static inline ssize_t iov_iter_extract_pages(struct iov_iter *i,
					     struct page ***pages,
					     size_t maxsize,
					     unsigned int maxpages,
					     unsigned int extraction_flags,
					     size_t *offset0)
{
	return iov_iter_get_pages2(i, *pages, maxsize, maxpages, offset0);
}

#define iter_iov_addr(iter) (iter_iov(iter)->iov_base + (iter)->iov_offset)

/*
 * 6.5 refuses to pin for long (FOLL_LONGTERM) the pages of a shared file
 * mapping that writeback cleans, which could clean them under the pin;
 * 6.1 refuses only fsdax.  Refuse them here as 6.5 does, EFAULT, for
 * VHOST_BLK_SET_MEM_PINNED: anonymous, shmem and hugetlbfs memory pass.
 */
static inline int vhost_blk_backport_pin_user_pages_fast(unsigned long start,
							 int nr_pages,
							 unsigned int gup_flags,
							 struct page **pages)
{
	unsigned long end = start + ((unsigned long)nr_pages << PAGE_SHIFT);
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	int ret = 0;

	if (gup_flags & FOLL_LONGTERM) {
		mmap_read_lock(mm);
		for (vma = find_vma(mm, start); vma && vma->vm_start < end;
		     vma = find_vma(mm, vma->vm_end)) {
			if (vma->vm_file && (vma->vm_flags & VM_SHARED) &&
			    mapping_can_writeback(vma->vm_file->f_mapping)) {
				ret = -EFAULT;
				break;
			}
		}
		mmap_read_unlock(mm);
		if (ret)
			return ret;
	}
	return pin_user_pages_fast(start, nr_pages, gup_flags, pages);
}

#define pin_user_pages_fast vhost_blk_backport_pin_user_pages_fast

/* 6.1 makes no ITER_UBUF of what blk.c takes (iov_iter_init()). */
static inline size_t iter_iov_len(const struct iov_iter *i)
{
	return iter_iov(i)->iov_len - i->iov_offset;
}

#endif /* < 6.2 */

#endif /* _VHOST_BLK_BACKPORT_H */
