// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk: a virtio-blk device served from the host kernel.
 *
 * The VMM hands us guest memory, virtqueues, kick/call eventfds and one
 * backend (a block device or a raw image file).  A vhost worker takes
 * requests off the rings and turns them into bios on the guest's own pages
 * (block device) or asynchronous direct-I/O kiocbs through the VFS, as
 * pread(2)/pwrite(2) on the backend fd would go (regular file).  I/O
 * completion only queues work: the worker writes status bytes and the used
 * ring in batches and signals the guest once per batch.
 *
 * Only the owner changes state: every ioctl that does, or that touches the
 * rings (which live in the caller's mm), checks vhost_dev_check_owner()
 * under dev.mutex first, as the vhost core's own ioctls do.
 *
 * Locking: vhost_blk.init_mutex (only until the queues exist), then
 * vhost_dev.mutex, then vhost_virtqueue.mutex (the vhost core's order).
 * vhost_blk.backend, the pinned memory table and the sync task's
 * pointers are under dev.mutex.
 * Everything in a vhost_blk_vq (the backend pointer of
 * vhost_vq_get_backend(), the done_list consumer, the serial, the
 * counters, the bounce budget, the polling state and the requests kept
 * for reuse) is under that vq's mutex, and so are the ring's polled
 * requests (vhost_blk_vq.polled).
 * vhost_blk.sync_lock, a spinlock taken last and around nothing else,
 * guards the sync task's list.  I/O completion, which may run in IRQ
 * context (or in whoever polls a polled bio), touches only atomics,
 * llists and vhost_vq_work_queue().
 * Functions that rely on a lock say so with lockdep_assert_held().
 */
#include <linux/bio.h>
#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/cgroup.h>
#include <linux/file.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/fsnotify.h>
#include <linux/ioprio.h>
#include <linux/kthread.h>
#include <linux/llist.h>
#include <linux/memcontrol.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/nospec.h>
#include <linux/overflow.h>
#include <linux/pagemap.h>
#include <linux/sizes.h>
#include <linux/sort.h>
#include <linux/sched/clock.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/sched/vhost_task.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <linux/vhost.h>
#include <linux/virtio_blk.h>
#include <linux/vhost_blk.h>
#include <linux/wait_bit.h>

#include <net/sock.h>

#include "vhost.h"

#define CREATE_TRACE_POINTS
#include "blk_trace.h"

enum {
	VHOST_BLK_FEATURES = (1ULL << VIRTIO_F_VERSION_1) |
			     (1ULL << VIRTIO_RING_F_INDIRECT_DESC) |
			     (1ULL << VIRTIO_RING_F_EVENT_IDX) |
			     (1ULL << VIRTIO_BLK_F_SIZE_MAX) |
			     (1ULL << VIRTIO_BLK_F_SEG_MAX) |
			     (1ULL << VIRTIO_BLK_F_BLK_SIZE) |
			     (1ULL << VIRTIO_BLK_F_FLUSH) |
			     (1ULL << VIRTIO_BLK_F_CONFIG_WCE) |
			     (1ULL << VIRTIO_BLK_F_TOPOLOGY) |
			     (1ULL << VIRTIO_BLK_F_MQ) |
			     (1ULL << VHOST_F_LOG_ALL),
	/*
	 * Only offered while the attached backend has them; a request that
	 * needs one the driver did not accept is answered UNSUPP.
	 */
	VHOST_BLK_FEATURES_BACKEND = (1ULL << VIRTIO_BLK_F_RO) |
				     (1ULL << VIRTIO_BLK_F_DISCARD) |
				     (1ULL << VIRTIO_BLK_F_WRITE_ZEROES) |
				     (1ULL << VIRTIO_BLK_F_SECURE_ERASE),
};

/* The most queues a device can have (virtio_blk_config.num_queues). */
#define VHOST_BLK_MAX_QUEUES	256U
/* Requests one worker run may take from one ring before it yields. */
#define VHOST_BLK_WEIGHT	256
/*
 * Requests submitted between looks at the completion list: a deep ring
 * must not hold back completions that are ready until it is all submitted.
 */
#define VHOST_BLK_SUBMIT_BATCH	32
/* Bytes one worker run may submit from one ring before it yields. */
#define VHOST_BLK_BYTE_WEIGHT	SZ_8M
/* First window of an adaptive busy poll, as QEMU's poll-grow starts. */
#define VHOST_BLK_POLL_INIT_NS	4000
/* Ranges in one DISCARD, WRITE_ZEROES or SECURE_ERASE request. */
#define VHOST_BLK_MAX_RANGE_SEG		VHOST_BLK_MAX_DISCARD_SEG
#define VHOST_BLK_MAX_RANGE_SECTORS	VHOST_BLK_MAX_DISCARD_SECTORS
/* Largest request whose buffers are too misaligned for direct I/O. */
#define VHOST_BLK_BOUNCE_MAX	SZ_1M
/*
 * Bounce pages one ring may have in flight.  A guest that posts nothing
 * but misaligned buffers would otherwise make the host allocate up to
 * VHOST_BLK_BOUNCE_MAX per ring entry.  Below VHOST_BLK_BYTE_WEIGHT, so
 * that a run meets the budget before its weight.
 */
#define VHOST_BLK_BOUNCE_BUDGET	SZ_4M

static unsigned int max_queues = 64;
module_param(max_queues, uint, 0444);
MODULE_PARM_DESC(max_queues, "Virtqueues per device (1-256, default 64)");

struct vhost_blk_backend {
	struct file *file;
	struct block_device *bdev;	/* NULL for a regular file */
	bool read_only;			/* the fd was not opened for writing */
	unsigned int len_mask;		/* logical block size - 1 */
	unsigned int addr_mask;		/* DMA alignment of buffers */
};

/*
 * One region of a memory table pinned for VHOST_BLK_SET_MEM_PINNED: the
 * pages of the user addresses [start, start + npages * PAGE_SIZE), as
 * they were mapped when pinned.  NULL pages: the table it replaces holds
 * them until it is replaced (vhost_blk_pin_take()), or another does.
 */
struct vhost_blk_pin_region {
	unsigned long start;
	unsigned long npages;
	struct page **pages;
};

/*
 * The owner's memory table, pinned: its regions sorted by start.  The
 * pages are charged to @mm's locked_vm; @mm is held with mmgrab().
 */
struct vhost_blk_pinned {
	struct mm_struct *mm;
	unsigned long npages;		/* in the regions with pages */
	unsigned int nregions;
	struct vhost_blk_pin_region regions[];
};

struct vhost_blk_vq {
	struct vhost_virtqueue vq;
	unsigned int index;
	/* Requests whose I/O ended, waiting for done_work. */
	struct llist_head done_list;
	struct vhost_work done_work;
	/* Requests of this ring whose I/O has not ended. */
	atomic_t inflight;
	/* The GET_ID answer; a copy per ring keeps it under vq->mutex. */
	char serial[VHOST_BLK_SERIAL_LEN];
	/* Set when the worker requeued itself rather than being kicked. */
	bool requeued;
	/* Bytes of bounce pages in flight; see vhost_blk_bounce_must_wait(). */
	size_t bounce_bytes;
	/* A request was put back to wait for bounce pages to be freed. */
	bool bounce_wait;
	/*
	 * Entries of vq->log for the chain being taken, when VHOST_F_LOG_ALL
	 * is on: its device-writable buffers, by guest-physical address.
	 */
	unsigned int log_num;
	/* Busy polling: see vhost_blk_poll(). */
	bool poll_adaptive;
	u32 poll_grow;
	u32 poll_shrink;
	u64 poll_window_ns;
	u64 idle_since_ns;
	/* Completion polling (VHOST_BLK_POLL_COMPLETIONS): vhost_blk_reap(). */
	bool poll_completions;
	/* Requests with a polled bio, from submission to vhost_blk_req_free(). */
	struct list_head polled;
	/*
	 * Requests whose polled bio the block layer refused (REQ_NOWAIT):
	 * to be sent again without polling, by vhost_blk_retry().
	 */
	struct llist_head retry_list;
	/*
	 * Read bios whose pages were cleaned while the device wrote them:
	 * dirtied again by vhost_blk_redirty(), in process context.
	 */
	spinlock_t dirty_lock;
	struct bio_list dirty_bios;
	/* Polls them while the ring is not busy-polled. */
	struct vhost_work reap_work;
	/*
	 * Requests answered, kept for the next ones: see
	 * vhost_blk_req_alloc().  At most vq.num of them.
	 */
	struct list_head free_reqs;
	unsigned int nr_free_reqs;
	struct vhost_blk_vring_stats stats;
};

struct vhost_blk {
	struct vhost_dev dev;
	struct vhost_blk_backend *backend;
	/* Requests submitted whose I/O has not ended yet. */
	atomic_t inflight;
	/*
	 * The queues, and dev itself, are set up by the first ioctl that
	 * needs them (or VHOST_BLK_SET_NUM_QUEUES), under init_mutex: the
	 * vhost core allocates every queue's state at VHOST_SET_OWNER, so
	 * a VMM using few queues should not pay for max_queues of them.
	 */
	struct mutex init_mutex;
	bool ready;
	struct vhost_blk_vq *vqs;
	/*
	 * The guest switched its write cache to writethrough (the config's
	 * writeback 0, VIRTIO_BLK_F_CONFIG_WCE).  Written under dev.mutex;
	 * each write reads it once, as it is taken.
	 */
	bool writethrough;
	/*
	 * VHOST_BLK_SET_MEM_PINNED: whether each new memory table is to be
	 * pinned (pin_mem), and the one in force as pinned (pinned, or
	 * NULL).  Both are written under dev.mutex, pinned only while no
	 * ring has a backend and no request is in flight (vhost_blk_pause()):
	 * the workers read it under their ring's mutex, while it has one.
	 */
	bool pin_mem;
	struct vhost_blk_pinned *pinned;
	/*
	 * Whose cgroups pay for the guest when the vhost workers are
	 * kthreads (dev.fork_owner clear): the owner's, or with
	 * VHOST_BLK_CHARGE_PEER those of the process at the other end of
	 * the VMM's socket (charge_task, a reference).  The kthreads are
	 * moved into its cgroups and charge work_memcg (a reference) for
	 * what they allocate, as a kthread charges no memory cgroup by
	 * itself.  Both are set under dev.mutex before the first backend
	 * and put once the workers have stopped.
	 */
	struct task_struct *charge_task;
	struct mem_cgroup *work_memcg;
	/*
	 * What a backend can only do synchronously (fsync, fallocate, secure
	 * erase) runs in a task of the owner's own, as the vhost worker
	 * does: the owner's cgroup limits (io.max, memory) and CPU
	 * accounting apply to it, and one guest's flushes wait behind no
	 * other guest's.  Created by the owner's first SET_BACKEND, under
	 * dev.mutex; sync_lock guards sync_list and sync_dead.  It follows
	 * the vhost workers' model (VHOST_SET_FORK_FROM_OWNER): a vhost_task
	 * of the owner, or with dev.fork_owner clear a kthread in the
	 * owner's cgroups that charges the owner's memory cgroup.
	 */
	struct vhost_task *sync_task;
	struct task_struct *sync_kthread;
	spinlock_t sync_lock;		/* sync_list, sync_dead */
	struct list_head sync_list;
	bool sync_dead;			/* killed with its owner */
	/*
	 * ioctls and releases in progress.  A busy poll holds its ring's
	 * mutex for up to the window, which the owner sets and may set to
	 * seconds: while this is not 0, polls end at once, so no control
	 * path waits one out.  Read without a lock, as a hint.
	 */
	atomic_t ctl_waiters;
};

struct vhost_blk_req {
	struct llist_node node;
	struct vhost_blk_vq *bvq;
	struct vhost_blk_backend *be;
	u8 __user *status;
	u16 head;
	u32 type;
	u8 result;			/* VIRTIO_BLK_S_*, set on failure */
	/* A write to be durable when answered: vhost_blk_write_durable(). */
	bool durable;
	/* Bios, or a kiocb that completed asynchronously: ours to fsnotify. */
	bool notify;
	bool dirty;			/* bios read into user pages */
	/* Bios, the kiocb or the flush work still running, plus one. */
	atomic_t pending;
	sector_t sector;
	size_t len;
	/*
	 * The guest's data buffers: in inline_iov, or in iov, ours to kfree,
	 * for a chain longer than that.
	 */
	struct iov_iter iter;
	const void *iov;
	/* DISCARD, WRITE_ZEROES and SECURE_ERASE ranges, validated. */
	struct virtio_blk_discard_write_zeroes *segs;
	unsigned int nr_segs;
	/* Bounce pages, when the buffers defeat direct I/O. */
	struct bio_vec *bounce;
	unsigned int nr_bounce;
	/* Migration: the buffers to log dirty once answered; ours to kfree. */
	struct vhost_log *log;
	unsigned int log_num;
	struct kiocb iocb;
	struct list_head sync_node;	/* on vhost_blk.sync_list */
	/* Its one bio, if submitted REQ_POLLED: a reference of ours. */
	struct bio *poll_bio;
	struct list_head poll_node;	/* on vhost_blk_vq.polled */
	/*
	 * That bio went REQ_NOWAIT, and was not refused: how to send it
	 * again, should it be.
	 */
	bool poll_nowait;
	blk_opf_t poll_opf;
	struct iov_iter poll_iter;
	struct list_head free_node;	/* on vhost_blk_vq.free_reqs */
	/*
	 * Last: vhost_blk_req_alloc() does not clear it.  Linux guests send
	 * a 4 KiB request in one buffer, and few requests in more than
	 * UIO_FASTIOV.
	 */
	struct iovec inline_iov[UIO_FASTIOV];
};

static struct kmem_cache *vhost_blk_req_cache;

static inline struct vhost_blk *vhost_blk_from_vq(struct vhost_virtqueue *vq)
{
	return container_of(vq->dev, struct vhost_blk, dev);
}

static sector_t vhost_blk_capacity(struct vhost_blk_backend *be)
{
	if (be->bdev)
		return bdev_nr_sectors(be->bdev);
	return i_size_read(file_inode(be->file)) >> SECTOR_SHIFT;
}

/*
 * Whether a write may go to the backend now, as write(2) on the fd would
 * allow it: the fd was opened for writing, and neither the block device
 * was made read-only (BLKROSET) nor the file append-only or immutable
 * since.
 */
static bool vhost_blk_writable(struct vhost_blk_backend *be)
{
	struct inode *inode = file_inode(be->file);

	if (be->read_only)
		return false;
	if (be->bdev)
		return !bdev_read_only(be->bdev);
	return !IS_APPEND(inode) && !IS_IMMUTABLE(inode);
}

/*
 * Whether WRITE_ZEROES is cheap on the backend: fallocate() on a file, or
 * REQ_OP_WRITE_ZEROES on a block device.  A block device without it would
 * have the worker write zero pages, up to 64 GiB for one request: there
 * the guest is not offered it and zeroes with writes, which are bounded.
 */
static bool vhost_blk_has_write_zeroes(struct vhost_blk_backend *be)
{
	return !be->bdev || bdev_write_zeroes_sectors(be->bdev);
}

/*
 * Whether DISCARD can be served: a punched hole on a file, discard bios
 * on a block device that takes them.  Not offered otherwise.
 */
static bool vhost_blk_has_discard(struct vhost_blk_backend *be)
{
	return !be->bdev || bdev_max_discard_sectors(be->bdev);
}

static void vhost_blk_free_bounce(struct vhost_blk_req *req)
{
	struct vhost_blk_vq *bvq = req->bvq;
	unsigned int i;

	lockdep_assert_held(&bvq->vq.mutex);
	bvq->bounce_bytes -= (size_t)req->nr_bounce * PAGE_SIZE;
	for (i = 0; i < req->nr_bounce; i++)
		__free_page(req->bounce[i].bv_page);
	kfree(req->bounce);
	req->bounce = NULL;
	req->nr_bounce = 0;
}

/*
 * A kthread worker's allocations for the guest charge no memory cgroup by
 * themselves: charge work_memcg (NULL for a vhost_task, which charges its
 * owner's).  Returns what to restore with set_active_memcg().
 */
static struct mem_cgroup *vhost_blk_charge_begin(struct vhost_blk *blk)
{
	return set_active_memcg(READ_ONCE(blk->work_memcg));
}

/*
 * A zeroed request for @bvq.  An answered request is kept on the ring's
 * free list rather than given back to the slab: a slab allocation, its
 * zeroing and its free, with the memory cgroup charged and uncharged,
 * for every request showed in the worker's profile (see benchmark.rst).
 * The list only holds requests the ring had in flight at once, up to
 * vq.num: a guest gets no memory kept that it could not already keep
 * busy, and it stays charged to the owner, as it was while in flight.
 * vhost_blk_drain() gives it all back.
 */
static struct vhost_blk_req *vhost_blk_req_alloc(struct vhost_blk_vq *bvq)
{
	struct vhost_blk_req *req;

	lockdep_assert_held(&bvq->vq.mutex);
	req = list_first_entry_or_null(&bvq->free_reqs, struct vhost_blk_req,
				       free_node);
	if (!req)
		return kmem_cache_zalloc(vhost_blk_req_cache,
					 GFP_KERNEL_ACCOUNT);
	list_del(&req->free_node);
	bvq->nr_free_reqs--;
	memset(req, 0, offsetof(struct vhost_blk_req, inline_iov));
	return req;
}

static void vhost_blk_req_free(struct vhost_blk_req *req)
{
	struct vhost_blk_vq *bvq = req->bvq;

	lockdep_assert_held(&bvq->vq.mutex);
	vhost_blk_free_bounce(req);
	if (req->poll_bio) {
		list_del(&req->poll_node);
		bio_put(req->poll_bio);
	}
	kfree(req->log);
	kfree(req->segs);
	kfree(req->iov);
	if (bvq->nr_free_reqs >= bvq->vq.num) {
		kmem_cache_free(vhost_blk_req_cache, req);
		return;
	}
	list_add(&req->free_node, &bvq->free_reqs);
	bvq->nr_free_reqs++;
}

/* Give back the ring's kept requests: none is in flight any more. */
static void vhost_blk_free_reqs(struct vhost_blk_vq *bvq)
{
	struct vhost_blk_req *req, *tmp;

	lockdep_assert_held(&bvq->vq.mutex);
	list_for_each_entry_safe(req, tmp, &bvq->free_reqs, free_node)
		kmem_cache_free(vhost_blk_req_cache, req);
	INIT_LIST_HEAD(&bvq->free_reqs);
	bvq->nr_free_reqs = 0;
}

/*
 * Drop one reference on the request's I/O.  The last one hands the request
 * to its ring's worker; this may run in IRQ context, so it touches neither
 * guest memory nor the ring.
 */
static void vhost_blk_req_put(struct vhost_blk_req *req)
{
	struct vhost_blk_vq *bvq = req->bvq;
	struct vhost_blk *blk = vhost_blk_from_vq(&bvq->vq);

	if (!atomic_dec_and_test(&req->pending))
		return;

	/*
	 * Before the request is published: llist_add() is a full barrier,
	 * so whoever sees its answer in the used ring also sees it no
	 * longer counted (VHOST_BLK_GET_VRING_STATS reads the count bare).
	 */
	atomic_dec(&bvq->inflight);
	llist_add(&req->node, &bvq->done_list);
	vhost_vq_work_queue(&bvq->vq, &bvq->done_work);

	/*
	 * atomic_dec_and_test() is fully ordered: the llist_add() and the
	 * work queued above are visible before vhost_blk_drain() sees zero
	 * in its wait_var_event().  wake_up_var() does not dereference blk,
	 * which may be freed as soon as the count reaches zero.
	 */
	if (atomic_dec_and_test(&blk->inflight))
		wake_up_var(&blk->inflight);
}

/*
 * A read into guest pages must leave them dirty, as direct I/O does
 * (bio_set_pages_dirty() and bio_check_pages_dirty(), which are not for
 * modules): they are dirtied before the bio is sent; if one was cleaned
 * meanwhile, the bio waits for vhost_blk_redirty() to dirty it again.
 * folio_mark_dirty() needs the folio lock, which end_io cannot take.
 */
static void vhost_blk_bio_set_pages_dirty(struct bio *bio)
{
	struct folio_iter fi;

	bio_for_each_folio_all(fi, bio) {
		folio_lock(fi.folio);
		folio_mark_dirty(fi.folio);
		folio_unlock(fi.folio);
	}
}

/* May run in IRQ context. */
static bool vhost_blk_bio_pages_dirty(struct bio *bio)
{
	struct folio_iter fi;

	bio_for_each_folio_all(fi, bio) {
		if (!folio_test_dirty(fi.folio))
			return false;
	}
	return true;
}

/* May run in IRQ context: done_work dirties the pages and frees @bio. */
static void vhost_blk_defer_dirty(struct vhost_blk_vq *bvq, struct bio *bio)
{
	unsigned long flags;

	spin_lock_irqsave(&bvq->dirty_lock, flags);
	bio_list_add(&bvq->dirty_bios, bio);
	spin_unlock_irqrestore(&bvq->dirty_lock, flags);
	vhost_vq_work_queue(&bvq->vq, &bvq->done_work);
}

/*
 * Dirty the pages of the bios vhost_blk_defer_dirty() kept, and free
 * them.  Run by done_work, and by vhost_blk_drain() once nothing is in
 * flight, for a worker that may be gone.
 */
static void vhost_blk_redirty(struct vhost_blk_vq *bvq)
{
	struct bio_list list;
	struct bio *bio;

	spin_lock_irq(&bvq->dirty_lock);
	list = bvq->dirty_bios;
	bio_list_init(&bvq->dirty_bios);
	spin_unlock_irq(&bvq->dirty_lock);

	while ((bio = bio_list_pop(&list))) {
		bio_release_pages(bio, true);
		bio_put(bio);
	}
}

static void vhost_blk_bio_end_io(struct bio *bio)
{
	struct vhost_blk_req *req = bio->bi_private;
	struct vhost_blk_vq *bvq = req->bvq;

	/*
	 * A polled bio goes REQ_NOWAIT (vhost_blk_bio_set_polled()): the
	 * block layer refuses it rather than wait for a tag or the end of a
	 * queue freeze (BLK_STS_AGAIN, also for a split), or refuses the
	 * flags themselves (BLK_STS_NOTSUPP: the poll queues are gone).  It
	 * moved no data: the worker sends the request again, unpolled.  Its
	 * reference on the request stays, so it is still in flight.
	 */
	if (unlikely(req->poll_nowait &&
		     (bio->bi_status == BLK_STS_AGAIN ||
		      bio->bi_status == BLK_STS_NOTSUPP))) {
		bio_release_pages(bio, false);
		bio_put(bio);
		/* Published by llist_add(), a full barrier: not to be reaped. */
		WRITE_ONCE(req->poll_nowait, false);
		llist_add(&req->node, &bvq->retry_list);
		vhost_vq_work_queue(&bvq->vq, &bvq->done_work);
		return;
	}
	if (bio->bi_status == BLK_STS_NOTSUPP)
		WRITE_ONCE(req->result, VIRTIO_BLK_S_UNSUPP);
	else if (bio->bi_status)
		WRITE_ONCE(req->result, VIRTIO_BLK_S_IOERR);

	if (req->dirty && !vhost_blk_bio_pages_dirty(bio)) {
		vhost_blk_defer_dirty(bvq, bio);
	} else {
		bio_release_pages(bio, false);
		bio_put(bio);
	}
	vhost_blk_req_put(req);
}

static void vhost_blk_rw_done(struct vhost_blk_req *req, ssize_t ret)
{
	if (ret < 0 || (size_t)ret != req->len)
		WRITE_ONCE(req->result, VIRTIO_BLK_S_IOERR);
	vhost_blk_req_put(req);
}

/* ->ki_complete of a kiocb that returned -EIOCBQUEUED; may be IRQ context. */
static void vhost_blk_rw_complete(struct kiocb *iocb, long ret)
{
	struct vhost_blk_req *req = container_of(iocb, struct vhost_blk_req,
						 iocb);

	/* vfs_iocb_iter_write() leaves this to the completion. */
	if (iocb->ki_flags & IOCB_WRITE)
		kiocb_end_write(iocb);
	req->notify = true;
	vhost_blk_rw_done(req, ret);
}

/*
 * Bios bypass the page cache that other users of the same disk read and
 * write through (blkid, dd, a backup tool), as O_DIRECT does, and they get
 * what blkdev_direct_write() and blkdev_read_iter() give O_DIRECT: their
 * dirty pages over @len bytes from @sector are written back first, so
 * that the device reads them and does not have them land on its writes
 * later; with @drop (a write) their cached pages are dropped too, so that
 * their reads see the device's data.  A no-op when nothing is cached.
 * The fd's mapping is the block device's page cache.
 */
static int vhost_blk_cache_sync(struct vhost_blk_backend *be, sector_t sector,
				u64 len, bool drop)
{
	struct address_space *mapping = be->file->f_mapping;
	loff_t pos = (loff_t)sector << SECTOR_SHIFT;
	loff_t end = pos + len - 1;
	int ret;

	if (likely(!mapping->nrpages) || !len)
		return 0;
	ret = filemap_write_and_wait_range(mapping, pos, end);
	if (ret || !drop)
		return ret;
	return invalidate_inode_pages2_range(mapping, pos >> PAGE_SHIFT,
					     end >> PAGE_SHIFT);
}

/* The block layer's flags for one WRITE_ZEROES range on a block device. */
static unsigned int vhost_blk_zeroout_flags(struct virtio_blk_discard_write_zeroes *seg)
{
	/* Never zero pages, should the device lose write-zeroes. */
	unsigned int flags = BLKDEV_ZERO_NOFALLBACK;

	if (!(le32_to_cpu(seg->flags) & VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP))
		flags |= BLKDEV_ZERO_NOUNMAP;
	return flags;
}

/*
 * One DISCARD or WRITE_ZEROES range on a regular file, SECURE_ERASE, or
 * a durable WRITE_ZEROES range on a block device.
 */
static int vhost_blk_sync_range(struct vhost_blk_req *req,
				struct virtio_blk_discard_write_zeroes *seg)
{
	u64 sector = le64_to_cpu(seg->sector);
	u32 nr = le32_to_cpu(seg->num_sectors);
	loff_t pos = sector << SECTOR_SHIFT, len = (loff_t)nr << SECTOR_SHIFT;
	const int punch = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	struct file *file = req->be->file;
	int ret;

	/*
	 * An empty range is done, as it is on a block device: fallocate()
	 * would call it EINVAL after the ranges before it were applied.
	 */
	if (!nr)
		return 0;
	if (req->type == VIRTIO_BLK_T_SECURE_ERASE)
		return blkdev_issue_secure_erase(req->be->bdev, sector, nr,
						 GFP_KERNEL);
	if (req->be->bdev) {
		ret = vhost_blk_cache_sync(req->be, sector, len, true);
		if (ret)
			return ret;
		return blkdev_issue_zeroout(req->be->bdev, sector, nr,
					    GFP_KERNEL,
					    vhost_blk_zeroout_flags(seg));
	}
	if (req->type == VIRTIO_BLK_T_DISCARD)
		return vfs_fallocate(file, punch, pos, len);

	if (le32_to_cpu(seg->flags) & VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP) {
		ret = vfs_fallocate(file, punch, pos, len);
		if (ret != -EOPNOTSUPP)
			return ret;
	}
	ret = vfs_fallocate(file, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
			    pos, len);
	if (ret != -EOPNOTSUPP)
		return ret;
	/* No ZERO_RANGE (tmpfs): a hole reads as zeroes, then fill it. */
	ret = vfs_fallocate(file, punch, pos, len);
	if (ret)
		return ret;
	return vfs_fallocate(file, FALLOC_FL_KEEP_SIZE, pos, len);
}

static void vhost_blk_sync_run(struct vhost_blk_req *req)
{
	unsigned int i;
	int ret = 0;

	if (req->type == VIRTIO_BLK_T_FLUSH)
		ret = vfs_fsync(req->be->file, 0);
	for (i = 0; i < req->nr_segs && !ret; i++)
		ret = vhost_blk_sync_range(req, &req->segs[i]);
	/* Zeroes written through: on stable storage before the answer. */
	if (!ret && req->durable)
		ret = req->be->bdev ? blkdev_issue_flush(req->be->bdev) :
				      vfs_fsync(req->be->file, 1);

	if (ret == -EOPNOTSUPP)
		WRITE_ONCE(req->result, VIRTIO_BLK_S_UNSUPP);
	else if (ret)
		WRITE_ONCE(req->result, VIRTIO_BLK_S_IOERR);
	vhost_blk_req_put(req);
}

/* The sync task's body: one request per call, false when idle. */
static bool vhost_blk_sync_fn(void *data)
{
	struct vhost_blk *blk = data;
	struct vhost_blk_req *req;

	spin_lock(&blk->sync_lock);
	req = list_first_entry_or_null(&blk->sync_list, struct vhost_blk_req,
				       sync_node);
	if (req)
		list_del(&req->sync_node);
	spin_unlock(&blk->sync_lock);
	if (!req)
		return false;
	/* vhost_task_fn() calls us ready to sleep. */
	__set_current_state(TASK_RUNNING);
	vhost_blk_sync_run(req);
	return true;
}

/* The owner was killed, and the sync task with it: fail what is left. */
static void vhost_blk_sync_killed(void *data)
{
	struct vhost_blk *blk = data;
	struct vhost_blk_req *req, *tmp;
	LIST_HEAD(list);

	spin_lock(&blk->sync_lock);
	blk->sync_dead = true;
	list_splice_init(&blk->sync_list, &list);
	spin_unlock(&blk->sync_lock);
	list_for_each_entry_safe(req, tmp, &list, sync_node) {
		WRITE_ONCE(req->result, VIRTIO_BLK_S_IOERR);
		vhost_blk_req_put(req);
	}
}

static void vhost_blk_submit_sync(struct vhost_blk_req *req)
{
	struct vhost_blk *blk = vhost_blk_from_vq(&req->bvq->vq);
	bool dead;

	atomic_inc(&req->pending);
	/*
	 * Woken under sync_lock: once the lock is dropped the task may run
	 * the request, end it, and let a detach stop and free the task.
	 */
	spin_lock(&blk->sync_lock);
	dead = blk->sync_dead;
	if (!dead) {
		list_add_tail(&req->sync_node, &blk->sync_list);
		if (blk->sync_task)
			vhost_task_wake(blk->sync_task);
		else
			wake_up_process(blk->sync_kthread);
	}
	spin_unlock(&blk->sync_lock);
	if (unlikely(dead)) {
		WRITE_ONCE(req->result, VIRTIO_BLK_S_IOERR);
		vhost_blk_req_put(req);
	}
}

/*
 * The sync task as a kthread, for a device whose vhost workers are
 * kthreads (dev.fork_owner clear), as vhost_run_work_kthread_list() runs
 * them.  The owner's exit closes the device, which stops it: it is never
 * killed, so sync_dead stays false.
 */
static int vhost_blk_sync_kthread_fn(void *data)
{
	struct vhost_blk *blk = data;
	struct mem_cgroup *old = set_active_memcg(blk->work_memcg);

	for (;;) {
		/* Pairs with the wake-up in kthread_stop(). */
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop()) {
			__set_current_state(TASK_RUNNING);
			break;
		}
		if (!vhost_blk_sync_fn(blk))
			schedule();
		cond_resched();
	}
	set_active_memcg(old);
	return 0;
}

static int vhost_blk_sync_kthread_start(struct vhost_blk *blk,
					const char *name)
{
	struct task_struct *task;
	int ret;

	task = kthread_create(vhost_blk_sync_kthread_fn, blk, "%s", name);
	if (IS_ERR(task))
		return PTR_ERR(task);
	ret = cgroup_attach_task_all(blk->charge_task ?: current, task);
	if (ret) {
		kthread_stop(task);
		return ret;
	}
	blk->sync_kthread = task;
	wake_up_process(task);
	return 0;
}

/*
 * Start the sync task, in the owner's context: one of its threads, or a
 * kthread in its cgroups (or the charged peer's), as its vhost workers
 * are.
 */
static int vhost_blk_sync_start(struct vhost_blk *blk)
{
	char name[TASK_COMM_LEN];
	struct vhost_task *vtsk;

	lockdep_assert_held(&blk->dev.mutex);
	if (blk->sync_task || blk->sync_kthread)
		return 0;
	blk->sync_dead = false;
	snprintf(name, sizeof(name), "vhost-blk-%d", current->pid);
	if (!blk->dev.fork_owner)
		return vhost_blk_sync_kthread_start(blk, name);
	vtsk = vhost_task_create(vhost_blk_sync_fn, vhost_blk_sync_killed,
				 blk, name);
	if (IS_ERR(vtsk))
		return PTR_ERR(vtsk);
	blk->sync_task = vtsk;
	vhost_task_start(vtsk);
	return 0;
}

/* After a detach: nothing is queued, and nothing can be. */
static void vhost_blk_sync_stop(struct vhost_blk *blk)
{
	lockdep_assert_held(&blk->dev.mutex);
	if (blk->sync_kthread) {
		kthread_stop(blk->sync_kthread);
		blk->sync_kthread = NULL;
	}
	if (!blk->sync_task)
		return;
	vhost_task_stop(blk->sync_task);
	blk->sync_task = NULL;
}

/* DISCARD and WRITE_ZEROES on a block device: one chain of bios. */
static void vhost_blk_submit_ranges(struct vhost_blk_req *req)
{
	struct block_device *bdev = req->be->bdev;
	struct virtio_blk_discard_write_zeroes *seg;
	struct bio *bio = NULL;
	sector_t sector, nr;
	unsigned int i;
	int ret = 0;

	for (i = 0; i < req->nr_segs && !ret; i++) {
		seg = &req->segs[i];
		sector = le64_to_cpu(seg->sector);
		nr = le32_to_cpu(seg->num_sectors);
		/* An empty range is done (6.1's block layer calls it EINVAL). */
		if (!nr)
			continue;
		ret = vhost_blk_cache_sync(req->be, sector,
					   (u64)nr << SECTOR_SHIFT, true);
		if (ret)
			break;
		if (req->type == VIRTIO_BLK_T_DISCARD) {
			/* vhost_blk_check_ranges() made it one the device takes. */
			__blkdev_issue_discard(bdev, sector, nr, GFP_KERNEL,
					       &bio);
			continue;
		}
		ret = __blkdev_issue_zeroout(bdev, sector, nr, GFP_KERNEL,
					     &bio, vhost_blk_zeroout_flags(seg));
	}
	if (ret)
		WRITE_ONCE(req->result, ret == -EOPNOTSUPP ?
			   VIRTIO_BLK_S_UNSUPP : VIRTIO_BLK_S_IOERR);
	if (!bio)
		return;
	/* The last bio of the chain ends after all the others. */
	bio->bi_end_io = vhost_blk_bio_end_io;
	bio->bi_private = req;
	atomic_inc(&req->pending);
	submit_bio(bio);
}

/*
 * Whether the fd asks for writes durable when they complete, as
 * iocb_is_dsync() does for pwrite(2) on it: O_DSYNC, O_SYNC (read per
 * request: fcntl() cannot change them, but cheap), or a sync inode.
 */
static bool vhost_blk_dsync(struct vhost_blk_backend *be)
{
	return (be->file->f_flags & (O_DSYNC | __O_SYNC)) ||
	       IS_SYNC(be->file->f_mapping->host);
}

/*
 * Whether a write must be on stable storage when it is answered (VIRTIO
 * 1.2, 5.2.6.2, "a write becomes stable"): the fd asks for it; or the
 * driver did not negotiate VIRTIO_BLK_F_FLUSH, so it can never ask; or it
 * negotiated VIRTIO_BLK_F_CONFIG_WCE and switched the cache to
 * writethrough.  Called under vq->mutex.
 */
static bool vhost_blk_write_durable(struct vhost_blk_req *req)
{
	struct vhost_virtqueue *vq = &req->bvq->vq;

	lockdep_assert_held(&vq->mutex);
	return vhost_blk_dsync(req->be) ||
	       !vhost_has_feature(vq, VIRTIO_BLK_F_FLUSH) ||
	       (vhost_has_feature(vq, VIRTIO_BLK_F_CONFIG_WCE) &&
		READ_ONCE(vhost_blk_from_vq(vq)->writethrough));
}

/* FLUSH on a block device: an empty preflush bio, answered when done. */
static void vhost_blk_submit_flush(struct vhost_blk_req *req)
{
	struct bio *bio;

	bio = bio_alloc(req->be->bdev, 0, REQ_OP_WRITE | REQ_PREFLUSH,
			GFP_KERNEL);
	bio->bi_end_io = vhost_blk_bio_end_io;
	bio->bi_private = req;
	atomic_inc(&req->pending);
	submit_bio(bio);
}

static u64 vhost_blk_poll_window(struct vhost_blk_vq *bvq)
{
	if (bvq->poll_adaptive)
		return bvq->poll_window_ns;
	return (u64)bvq->vq.busyloop_timeout * NSEC_PER_USEC;
}

/*
 * Whether @bdev takes REQ_POLLED bios: a blk-mq device with poll queues,
 * as blk_mq_can_poll() says; blk_mq_submit_bio() fails a polled bio with
 * BLK_STS_NOTSUPP on any other.
 */
static bool vhost_blk_bdev_can_poll(struct block_device *bdev)
{
	struct request_queue *q = bdev_get_queue(bdev);

	return queue_is_mq(q) && (bdev_limits(bdev)->features & BLK_FEAT_POLL) &&
	       READ_ONCE(q->tag_set->map[HCTX_TYPE_POLL].nr_queues);
}

/*
 * Whether a read or write of @bvq goes to @be with REQ_POLLED: the queue
 * asked for it, its ring is being busy-polled (its worker is there to
 * reap), and the backend is a device that takes polled bios.  A queue
 * that asked and cannot have it counts a fallback.
 */
static bool vhost_blk_want_polled(struct vhost_blk_vq *bvq,
				  struct vhost_blk_backend *be)
{
	lockdep_assert_held(&bvq->vq.mutex);
	if (!bvq->poll_completions)
		return false;
	if (be->bdev && vhost_blk_poll_window(bvq) &&
	    vhost_blk_bdev_can_poll(be->bdev))
		return true;
	bvq->stats.poll_fallbacks++;
	return false;
}

/*
 * Submit @bio, all of the request's data from @iter on, with REQ_POLLED,
 * to be reaped by vhost_blk_reap(), and REQ_NOWAIT: a polled bio must not
 * sleep in submit_bio() for a tag or a queue freeze, as only this worker
 * would reap the polled bios whose end frees them.  A refused one is sent
 * again by vhost_blk_retry().  The reference taken here keeps the bio for
 * vhost_blk_reap() until vhost_blk_req_free().
 */
static void vhost_blk_bio_set_polled(struct vhost_blk_req *req,
				     struct bio *bio,
				     const struct iov_iter *iter)
{
	struct vhost_blk_vq *bvq = req->bvq;

	lockdep_assert_held(&bvq->vq.mutex);
	req->poll_opf = bio->bi_opf;
	req->poll_iter = *iter;
	req->poll_nowait = true;
	bio->bi_opf |= REQ_POLLED | REQ_NOWAIT;
	bio_get(bio);
	req->poll_bio = bio;
	list_add_tail(&req->poll_node, &bvq->polled);
	bvq->stats.polled_bios++;
}

/* Where in its page the next byte of @iter is. */
static size_t vhost_blk_iter_page_offset(const struct iov_iter *iter)
{
	if (iov_iter_is_bvec(iter))
		return offset_in_page(iter->bvec->bv_offset + iter->iov_offset);
	return offset_in_page(iter_iov_addr(iter));
}

/*
 * The region of @pin that holds the @len bytes at user address @addr,
 * or NULL.  Regions that overlap (one memory aliased at two guest
 * addresses) are found by the last that starts at or below @addr.
 */
static const struct vhost_blk_pin_region *
vhost_blk_pin_find(const struct vhost_blk_pinned *pin, unsigned long addr,
		   size_t len)
{
	const struct vhost_blk_pin_region *r;
	unsigned int lo = 0, hi = pin->nregions, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (pin->regions[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	r = &pin->regions[lo - 1];
	if (!r->pages || addr - r->start > (r->npages << PAGE_SHIFT) ||
	    len > (r->npages << PAGE_SHIFT) - (addr - r->start))
		return NULL;
	return r;
}

/*
 * The pinned memory table, if every byte of @iter is in it: then @iter's
 * pages are taken from it, and none is pinned for the request.
 */
static const struct vhost_blk_pinned *
vhost_blk_pinned_for(struct vhost_blk_req *req, const struct iov_iter *iter)
{
	struct vhost_blk *blk = vhost_blk_from_vq(&req->bvq->vq);
	const struct vhost_blk_pinned *pin = blk->pinned;
	struct iov_iter it = *iter;
	size_t len;

	lockdep_assert_held(&req->bvq->vq.mutex);
	if (!pin || !user_backed_iter(iter))
		return NULL;
	while (iov_iter_count(&it)) {
		len = min(iter_iov_len(&it), iov_iter_count(&it));
		if (!vhost_blk_pin_find(pin, (unsigned long)iter_iov_addr(&it),
					len))
			return NULL;
		iov_iter_advance(&it, len);
	}
	return pin;
}

/*
 * iov_iter_extract_pages() on the pinned table: the pages of up to
 * @maxsize bytes of @iter's next buffer, which is in @pin.  @maxsize
 * leaves room for them in @maxpages pages from the buffer's offset.
 */
static ssize_t vhost_blk_pin_extract(const struct vhost_blk_pinned *pin,
				     struct iov_iter *iter,
				     struct page ***pages, size_t maxsize,
				     size_t *offset)
{
	unsigned long addr = (unsigned long)iter_iov_addr(iter);
	size_t len = min3(iter_iov_len(iter), iov_iter_count(iter), maxsize);
	const struct vhost_blk_pin_region *r;

	r = vhost_blk_pin_find(pin, addr, len);
	if (!r)
		return -EFAULT;
	*offset = offset_in_page(addr);
	*pages = r->pages + ((addr - r->start) >> PAGE_SHIFT);
	iov_iter_advance(iter, len);
	return len;
}

/*
 * Add the pages of @iter to @bio, one bio_vec each, for as many whole
 * logical blocks (@len_mask) as it holds, pinned as direct I/O pins them:
 * a module cannot call bio_iov_iter_get_pages().  The buffers keep to the
 * device's alignment, as vhost_blk_iter_aligned() found.  Never merged:
 * a guest whose buffers share a page has it pinned once per buffer, and
 * bio_release_pages() unpins each once.  On failure nothing stays pinned.
 * With @pin, the pages are those of the pinned memory table, which holds
 * all of @iter: none is pinned, and the bio releases none.
 */
static int vhost_blk_bio_add_pages(struct bio *bio, struct iov_iter *iter,
				   unsigned int len_mask,
				   const struct vhost_blk_pinned *pin)
{
	struct page *batch[16], **pages;
	size_t offset, len, max;
	unsigned int n, i;
	ssize_t size;
	int ret;

	if (!pin && iov_iter_extract_will_pin(iter))
		bio_set_flag(bio, BIO_PAGE_PINNED);
	while (iov_iter_count(iter) && bio->bi_vcnt < bio->bi_max_vecs) {
		n = min_t(unsigned int, ARRAY_SIZE(batch),
			  bio->bi_max_vecs - bio->bi_vcnt);
		/* A bio must not end inside a block. */
		max = round_down(n * PAGE_SIZE - vhost_blk_iter_page_offset(iter),
				 len_mask + 1);
		if (!max)
			break;
		pages = batch;
		if (pin)
			size = vhost_blk_pin_extract(pin, iter, &pages, max,
						     &offset);
		else
			size = iov_iter_extract_pages(iter, &pages, max, n, 0,
						      &offset);
		if (size <= 0) {
			ret = size ? size : -EFAULT;
			goto fail;
		}
		ret = size & len_mask ? -EFAULT : 0;
		for (i = 0; size; i++) {
			len = min_t(size_t, PAGE_SIZE - offset, size);
			__bio_add_page(bio, pages[i], len, offset);
			size -= len;
			offset = 0;
		}
		/* Cut short inside a block: the guest's memory went away. */
		if (ret)
			goto fail;
	}
	if (bio->bi_vcnt)
		return 0;
	ret = -EINVAL;
fail:
	bio_release_pages(bio, false);
	return ret;
}

/*
 * A read or write on a block device: bios built straight on the pages
 * @iter describes, as block device direct I/O builds them
 * (__blkdev_direct_IO_async()): writes are REQ_SYNC | REQ_IDLE, so that
 * writeback throttling and the I/O schedulers do not take them for
 * background writeback, and REQ_FUA when the fd asks for durability.
 * Measured against sending them through blkdev_write_iter() (see
 * benchmark.rst), they cost less CPU per request for the same result.
 * With @polled, a request that fits in one bio has it polled, as block
 * device direct I/O polls only then (__blkdev_direct_IO_async()).
 */
static void vhost_blk_submit_bio(struct vhost_blk_req *req,
				 struct iov_iter *iter, blk_opf_t opf,
				 bool polled)
{
	const struct vhost_blk_pinned *pin = vhost_blk_pinned_for(req, iter);
	struct block_device *bdev = req->be->bdev;
	const struct iov_iter start = *iter;
	sector_t sector = req->sector;
	struct bio *bio;
	int ret;

	if (pin) {
		/* Pinned pages are dirtied as they are unpinned. */
		req->dirty = false;
		req->bvq->stats.reqs_pinned++;
	}
	while (iov_iter_count(iter)) {
		bio = bio_alloc(bdev, iov_iter_npages(iter, BIO_MAX_VECS),
				opf, GFP_KERNEL);
		bio->bi_iter.bi_sector = sector;
		bio->bi_end_io = vhost_blk_bio_end_io;
		bio->bi_private = req;
		ret = vhost_blk_bio_add_pages(bio, iter, req->be->len_mask,
					      pin);
		if (unlikely(ret)) {
			bio_put(bio);
			WRITE_ONCE(req->result, VIRTIO_BLK_S_IOERR);
			return;
		}
		if (req->dirty)
			vhost_blk_bio_set_pages_dirty(bio);
		if (polled) {
			if (!iov_iter_count(iter))
				vhost_blk_bio_set_polled(req, bio, &start);
			else
				req->bvq->stats.poll_fallbacks++;
			polled = false;
		}
		sector += bio->bi_iter.bi_size >> SECTOR_SHIFT;
		atomic_inc(&req->pending);
		submit_bio(bio);
	}
}

/*
 * A read or write on a file: an asynchronous direct-I/O kiocb through the
 * VFS, so that the request gets what pread(2)/pwrite(2) on the fd would:
 * rw_verify_area() and the LSM hooks, fsnotify, O_DSYNC/O_SYNC durability
 * (FUA or a sync after the write), REQ_SYNC | REQ_IDLE on the bios, and
 * coherence with the page cache.
 */
static void vhost_blk_submit_kiocb(struct vhost_blk_req *req,
				   struct iov_iter *iter, bool write)
{
	struct file *file = req->be->file;
	struct kiocb *iocb = &req->iocb;
	ssize_t ret;

	iocb->ki_filp = file;
	iocb->ki_pos = (loff_t)req->sector << SECTOR_SHIFT;
	iocb->ki_ioprio = IOPRIO_PRIO_VALUE(IOPRIO_CLASS_NONE, 0);
	iocb->ki_complete = vhost_blk_rw_complete;
	/* O_APPEND was refused at attach; O_DSYNC and O_SYNC count. */
	iocb->ki_flags = iocb_flags(file) | IOCB_DIRECT;
	/* So does the guest's writethrough cache. */
	if (write && req->durable)
		iocb->ki_flags |= IOCB_DSYNC;

	atomic_inc(&req->pending);
	if (write) {
		iocb->ki_flags |= IOCB_WRITE;
		ret = vfs_iocb_iter_write(file, iocb, iter);
	} else {
		ret = vfs_iocb_iter_read(file, iocb, iter);
	}
	/* Done at once: the VFS already ended the write and notified. */
	if (ret != -EIOCBQUEUED)
		vhost_blk_rw_done(req, ret);
}

/*
 * Buffers that break the backend's alignment rules (a header sharing a
 * descriptor with data, odd segment lengths) go through kernel pages.
 * Writes are copied in here; reads are copied out by the worker.
 */
static int vhost_blk_setup_bounce(struct vhost_blk_req *req, bool write)
{
	unsigned int i, nr = DIV_ROUND_UP(req->len, PAGE_SIZE);
	struct vhost_blk_vq *bvq = req->bvq;
	size_t left = req->len;

	lockdep_assert_held(&bvq->vq.mutex);
	req->bounce = kcalloc(nr, sizeof(*req->bounce),
			      GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!req->bounce)
		return -ENOMEM;
	bvq->stats.reqs_bounced++;

	for (i = 0; i < nr; i++) {
		size_t len = min_t(size_t, left, PAGE_SIZE);
		struct page *page;

		page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
		if (!page)
			return -ENOMEM;
		bvec_set_page(&req->bounce[i], page, len, 0);
		req->nr_bounce++;
		bvq->bounce_bytes += PAGE_SIZE;
		bvq->stats.bounce_bytes_max = max_t(u64,
						    bvq->stats.bounce_bytes_max,
						    bvq->bounce_bytes);
		left -= len;
		if (write && copy_page_from_iter(page, 0, len, &req->iter) != len)
			return -EFAULT;
	}
	return 0;
}

static bool vhost_blk_copy_bounce_out(struct vhost_blk_req *req)
{
	unsigned int i;

	for (i = 0; i < req->nr_bounce; i++) {
		struct bio_vec *bv = &req->bounce[i];

		if (copy_page_to_iter(bv->bv_page, 0, bv->bv_len,
				      &req->iter) != bv->bv_len)
			return false;
	}
	return true;
}

/*
 * Whether every buffer of @data starts on the backend's DMA alignment and
 * spans whole logical blocks, so that its pages can go to the device as
 * they are: bio_iov_iter_get_pages() refuses anything else.
 */
static bool vhost_blk_iter_aligned(const struct iov_iter *data,
				   const struct vhost_blk_backend *be)
{
	const struct iovec *iov = iter_iov(data);
	size_t skip = data->iov_offset, left = iov_iter_count(data), len;
	unsigned long i;

	if (left & be->len_mask)
		return false;
	for (i = 0; i < data->nr_segs && left; i++) {
		len = min(iov[i].iov_len - skip, left);
		if ((len & be->len_mask) ||
		    ((unsigned long)iov[i].iov_base + skip) & be->addr_mask)
			return false;
		left -= len;
		skip = 0;
	}
	return true;
}

/* Start the I/O of a validated request.  Returns 0 or -errno. */
static int vhost_blk_submit(struct vhost_blk_req *req)
{
	struct vhost_blk_backend *be = req->be;
	bool write = req->type == VIRTIO_BLK_T_OUT;
	struct iov_iter *iter = &req->iter;
	struct iov_iter bounce_iter;
	bool polled;
	blk_opf_t opf;
	int ret;

	req->durable = (write || req->type == VIRTIO_BLK_T_WRITE_ZEROES) &&
		       vhost_blk_write_durable(req);
	switch (req->type) {
	case VIRTIO_BLK_T_FLUSH:
		if (be->bdev)
			vhost_blk_submit_flush(req);
		else
			vhost_blk_submit_sync(req);
		return 0;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		/* Durable zeroes on a block device: zeroed, then flushed. */
		if (be->bdev && !req->durable)
			vhost_blk_submit_ranges(req);
		else
			vhost_blk_submit_sync(req);
		return 0;
	case VIRTIO_BLK_T_SECURE_ERASE:
		vhost_blk_submit_sync(req);
		return 0;
	}

	if (!vhost_blk_iter_aligned(iter, be)) {
		if (req->len > VHOST_BLK_BOUNCE_MAX)
			return -EINVAL;
		ret = vhost_blk_setup_bounce(req, write);
		if (ret)
			return ret;
		iov_iter_bvec(&bounce_iter, write ? ITER_SOURCE : ITER_DEST,
			      req->bounce, req->nr_bounce, req->len);
		iter = &bounce_iter;
	} else {
		req->dirty = !write;
	}

	polled = vhost_blk_want_polled(req->bvq, be);
	if (!be->bdev) {
		vhost_blk_submit_kiocb(req, iter, write);
		return 0;
	}
	ret = vhost_blk_cache_sync(be, req->sector, req->len, write);
	if (ret)
		return ret;
	/* fsnotify in done_work, as for a file's asynchronous kiocb. */
	req->notify = true;
	opf = REQ_OP_READ;
	if (write)
		opf = REQ_OP_WRITE | REQ_SYNC | REQ_IDLE |
		      (req->durable ? REQ_FUA : 0);
	vhost_blk_submit_bio(req, iter, opf, polled);
	return 0;
}

/* Count and trace one answered request.  Called under vq->mutex. */
static void vhost_blk_account(struct vhost_blk_vq *bvq, u16 head, u32 type,
			      u64 sector, u64 len, u8 status)
{
	struct vhost_blk_vring_stats *st = &bvq->stats;

	lockdep_assert_held(&bvq->vq.mutex);
	trace_vhost_blk_req_complete(bvq->index, head, type, sector, len,
				     status);
	if (status == VIRTIO_BLK_S_UNSUPP) {
		st->reqs_unsupp++;
		return;
	}
	if (status == VIRTIO_BLK_S_IOERR)
		st->reqs_ioerr++;
	switch (type) {
	case VIRTIO_BLK_T_IN:
		st->reqs_in++;
		if (status == VIRTIO_BLK_S_OK)
			st->bytes_read += len;
		break;
	case VIRTIO_BLK_T_OUT:
		st->reqs_out++;
		if (status == VIRTIO_BLK_S_OK)
			st->bytes_written += len;
		break;
	case VIRTIO_BLK_T_FLUSH:
		st->reqs_flush++;
		break;
	case VIRTIO_BLK_T_GET_ID:
		st->reqs_get_id++;
		break;
	case VIRTIO_BLK_T_DISCARD:
		st->reqs_discard++;
		break;
	case VIRTIO_BLK_T_WRITE_ZEROES:
		st->reqs_write_zeroes++;
		break;
	case VIRTIO_BLK_T_SECURE_ERASE:
		st->reqs_secure_erase++;
		break;
	}
}

/*
 * Mark all of a request's device-writable buffers dirty in the migration
 * log, while VHOST_F_LOG_ALL is on.  All of them: the status byte is the
 * last, and an answer may write any byte before it.  The used ring is
 * logged by the vhost core.  Called after the writes, under vq->mutex.
 */
static void vhost_blk_log_write(struct vhost_virtqueue *vq,
				struct vhost_log *log, unsigned int log_num)
{
	unsigned int i;
	u64 len = 0;

	lockdep_assert_held(&vq->mutex);
	if (!log_num || !vhost_has_feature(vq, VHOST_F_LOG_ALL))
		return;
	for (i = 0; i < log_num; i++)
		len += log[i].len;
	/* Exactly what the entries cover: more is a BUG() in the core. */
	if (len && vhost_log_write(vq, log, log_num, len, NULL, 0))
		vq_err(vq, "vhost-blk: cannot write the dirty log\n");
}

/*
 * Return @n answered requests (vq->heads) to the guest.  A used ring the
 * guest made unwritable loses them: count and report it.
 */
static bool vhost_blk_add_used(struct vhost_blk_vq *bvq,
			       struct vring_used_elem *heads, unsigned int n)
{
	struct vhost_virtqueue *vq = &bvq->vq;

	lockdep_assert_held(&vq->mutex);
	if (likely(!vhost_add_used_n(vq, heads, NULL, n)))
		return true;
	bvq->stats.used_errors += n;
	vq_err(vq, "vhost-blk: cannot return %u requests to the used ring\n",
	       n);
	return false;
}

/* Complete a request that needs no I/O: status byte, then the used ring. */
static void vhost_blk_finish_now(struct vhost_blk_vq *bvq, u16 head,
				 u32 type, u64 sector, u8 __user *status,
				 u8 val, u32 len)
{
	struct vhost_virtqueue *vq = &bvq->vq;
	struct vring_used_elem used = {
		.id = cpu_to_vhost32(vq, head),
		.len = cpu_to_vhost32(vq, len),
	};

	lockdep_assert_held(&vq->mutex);
	if (put_user(val, status))
		vq_err(vq, "vhost-blk: cannot write status of request %u\n",
		       head);
	vhost_blk_log_write(vq, vq->log, bvq->log_num);
	vhost_blk_account(bvq, head, type, sector, len - 1, val);
	vhost_blk_add_used(bvq, &used, 1);
}

/*
 * Decide whether the guest wants to hear about the used ring moving, by the
 * same rule as the vhost core's vhost_notify(), so that the answer can be
 * counted and traced.  NOTIFY_ON_EMPTY is never offered.
 */
static bool vhost_blk_need_notify(struct vhost_virtqueue *vq)
{
	__virtio16 flags, event;
	u16 old, new;
	bool valid;

	lockdep_assert_held(&vq->mutex);
	/*
	 * Make the used index written by vhost_add_used_n() visible before
	 * reading the guest's suppression state.  Pairs with the full barrier
	 * the guest driver issues between writing used_event (or clearing
	 * VRING_AVAIL_F_NO_INTERRUPT) and re-reading the used index.
	 */
	smp_mb();

	if (!vhost_has_feature(vq, VIRTIO_RING_F_EVENT_IDX)) {
		if (get_user(flags, &vq->avail->flags))
			return true;
		return !(flags & cpu_to_vhost16(vq, VRING_AVAIL_F_NO_INTERRUPT));
	}

	old = vq->signalled_used;
	valid = vq->signalled_used_valid;
	new = vq->last_used_idx;
	vq->signalled_used = new;
	vq->signalled_used_valid = true;
	if (unlikely(!valid))
		return true;

	if (get_user(event, &vq->avail->ring[vq->num]))
		return true;
	return vring_need_event(vhost16_to_cpu(vq, event), new, old);
}

/* One used-buffer notification for everything added since the last one. */
static void vhost_blk_signal(struct vhost_blk_vq *bvq)
{
	struct vhost_virtqueue *vq = &bvq->vq;
	bool sent;

	lockdep_assert_held(&vq->mutex);
	if (!vq->call_ctx.ctx)
		return;

	sent = vhost_blk_need_notify(vq);
	if (sent) {
		eventfd_signal(vq->call_ctx.ctx);
		bvq->stats.notifies++;
	} else {
		bvq->stats.notifies_suppressed++;
	}
	trace_vhost_blk_notify(bvq->index, vq->last_used_idx, sent);
}

static u8 vhost_blk_check_rw(struct vhost_blk_backend *be, u64 sector,
			     size_t len, bool write)
{
	sector_t capacity = vhost_blk_capacity(be);

	if (write && !vhost_blk_writable(be))
		return VIRTIO_BLK_S_IOERR;
	if (len & (SECTOR_SIZE - 1))
		return VIRTIO_BLK_S_IOERR;
	/* Written this way round so that no sum can overflow. */
	if (sector > capacity || (len >> SECTOR_SHIFT) > capacity - sector)
		return VIRTIO_BLK_S_IOERR;
	if (((sector << SECTOR_SHIFT) | len) & be->len_mask)
		return VIRTIO_BLK_S_IOERR;
	return VIRTIO_BLK_S_OK;
}

/*
 * Find the status byte: the last byte of the device-writable buffers,
 * wherever the descriptors put it.  NULL if there is none.
 */
static u8 __user *vhost_blk_status_ptr(struct iovec *iov, unsigned int in)
{
	while (in--) {
		if (iov[in].iov_len)
			return (u8 __user *)iov[in].iov_base +
			       iov[in].iov_len - 1;
	}
	return NULL;
}

/*
 * Validate and copy the range table of a DISCARD, WRITE_ZEROES or
 * SECURE_ERASE request.  On success *segsp is ours to kfree.
 */
static u8 vhost_blk_check_ranges(struct vhost_blk_backend *be, u32 type,
				 struct iov_iter *from,
				 struct virtio_blk_discard_write_zeroes **segsp,
				 unsigned int *nr_segsp)
{
	u32 flag_mask = type == VIRTIO_BLK_T_WRITE_ZEROES ?
			VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP : 0;
	struct virtio_blk_discard_write_zeroes *segs;
	sector_t capacity = vhost_blk_capacity(be);
	u32 align = be->len_mask >> SECTOR_SHIFT;
	size_t len = iov_iter_count(from);
	unsigned int i, nr;
	u64 sector;
	u32 count;

	if (!vhost_blk_writable(be) || !len || len % sizeof(*segs))
		return VIRTIO_BLK_S_IOERR;
	if (len / sizeof(*segs) > VHOST_BLK_MAX_RANGE_SEG)
		return VIRTIO_BLK_S_UNSUPP;
	if (type == VIRTIO_BLK_T_DISCARD && !vhost_blk_has_discard(be))
		return VIRTIO_BLK_S_UNSUPP;
	if (type == VIRTIO_BLK_T_WRITE_ZEROES &&
	    !vhost_blk_has_write_zeroes(be))
		return VIRTIO_BLK_S_UNSUPP;
	if (type == VIRTIO_BLK_T_SECURE_ERASE &&
	    (!be->bdev || !bdev_max_secure_erase_sectors(be->bdev)))
		return VIRTIO_BLK_S_UNSUPP;

	nr = len / sizeof(*segs);
	segs = kmalloc_array(nr, sizeof(*segs), GFP_KERNEL_ACCOUNT);
	if (!segs)
		return VIRTIO_BLK_S_IOERR;
	if (!copy_from_iter_full(segs, len, from))
		goto ioerr;

	for (i = 0; i < nr; i++) {
		if (le32_to_cpu(segs[i].flags) & ~flag_mask) {
			kfree(segs);
			return VIRTIO_BLK_S_UNSUPP;
		}
	}
	for (i = 0; i < nr; i++) {
		sector = le64_to_cpu(segs[i].sector);
		count = le32_to_cpu(segs[i].num_sectors);
		if (count > VHOST_BLK_MAX_RANGE_SECTORS || sector > capacity ||
		    count > capacity - sector || ((sector | count) & align))
			goto ioerr;
	}
	*segsp = segs;
	*nr_segsp = nr;
	return VIRTIO_BLK_S_OK;

ioerr:
	kfree(segs);
	return VIRTIO_BLK_S_IOERR;
}

/*
 * Whether the data buffers of a read or write keep to what the device
 * offers (VIRTIO_BLK_F_SIZE_MAX): none longer than VHOST_BLK_SIZE_MAX,
 * as the vhost core translated them (at most UIO_MAXIOV of them).  That
 * bounds what one request pins and submits under the ring's mutex, and
 * its used length fits in 32 bits.
 */
static bool vhost_blk_data_bounded(const struct iov_iter *data)
{
	const struct iovec *iov = iter_iov(data);
	size_t skip = data->iov_offset, left = iov_iter_count(data), len;
	unsigned long i;

	BUILD_BUG_ON((u64)UIO_MAXIOV * VHOST_BLK_SIZE_MAX >= U32_MAX);
	for (i = 0; i < data->nr_segs && left; i++) {
		len = min(iov[i].iov_len - skip, left);
		if (len > VHOST_BLK_SIZE_MAX)
			return false;
		left -= len;
		skip = 0;
	}
	return true;
}

/* The feature a DISCARD, WRITE_ZEROES or SECURE_ERASE request needs. */
static unsigned int vhost_blk_range_feature(u32 type)
{
	switch (type) {
	case VIRTIO_BLK_T_DISCARD:
		return VIRTIO_BLK_F_DISCARD;
	case VIRTIO_BLK_T_WRITE_ZEROES:
		return VIRTIO_BLK_F_WRITE_ZEROES;
	default:
		return VIRTIO_BLK_F_SECURE_ERASE;
	}
}

/*
 * Make the buffers of @iter, our copy @iov of the guest's, end where its
 * data does: the status byte may share the last buffer, and the block
 * layer checks a buffer's whole length against the device's alignment
 * (iov_iter_extract_bvecs() does), not the part the I/O uses.
 */
static void vhost_blk_iter_trim(struct iov_iter *iter, struct iovec *base)
{
	size_t left = iter->iov_offset + iov_iter_count(iter);
	unsigned long i, nr = iter->nr_segs;
	/* The buffer iter is at: it may have advanced past the header. */
	struct iovec *iov = base + (iter_iov(iter) - base);

	for (i = 0; i < nr; i++) {
		if (iov[i].iov_len >= left) {
			iov[i].iov_len = left;
			iter->nr_segs = i + 1;
			return;
		}
		left -= iov[i].iov_len;
	}
}

/*
 * Keep the request's data buffers, @data, for as long as its I/O runs:
 * vq->iov already describes the next chain by then.  A chain of up to
 * UIO_FASTIOV buffers goes into the request itself, so that the common
 * request costs no allocation; a longer one, up to UIO_MAXIOV, into a copy
 * of its own.
 */
static int vhost_blk_req_set_iter(struct vhost_blk_req *req,
				  struct iov_iter *data)
{
	unsigned long nr = data->nr_segs;

	if (nr > ARRAY_SIZE(req->inline_iov)) {
		req->iov = dup_iter(&req->iter, data, GFP_KERNEL_ACCOUNT);
		if (!req->iov)
			return -ENOMEM;
		/* dup_iter() made the copy ours. */
		vhost_blk_iter_trim(&req->iter, (struct iovec *)req->iov);
		return 0;
	}
	memcpy(req->inline_iov, iter_iov(data), nr * sizeof(struct iovec));
	/* The header may have been read from the first buffer: skip it. */
	iov_iter_init(&req->iter, iov_iter_rw(data), req->inline_iov, nr,
		      data->iov_offset + iov_iter_count(data));
	iov_iter_advance(&req->iter, data->iov_offset);
	vhost_blk_iter_trim(&req->iter, req->inline_iov);
	return 0;
}

/*
 * Whether a read or write into @data must wait before it is taken from the
 * ring: its buffers would be bounced, and the ring already has bounce
 * pages in flight that this request would take past
 * VHOST_BLK_BOUNCE_BUDGET.  With none in flight any request may go, so
 * the ring always moves.
 */
static bool vhost_blk_bounce_must_wait(struct vhost_blk_vq *bvq,
				       struct vhost_blk_backend *be, u32 type,
				       struct iov_iter *in, struct iov_iter *out)
{
	struct iov_iter *data;
	size_t len;

	lockdep_assert_held(&bvq->vq.mutex);
	if (likely(!bvq->bounce_bytes))
		return false;
	if (type == VIRTIO_BLK_T_IN)
		data = in;
	else if (type == VIRTIO_BLK_T_OUT)
		data = out;
	else
		return false;
	len = iov_iter_count(data);
	if (len > VHOST_BLK_BOUNCE_MAX ||
	    bvq->bounce_bytes + PAGE_ALIGN(len) <= VHOST_BLK_BOUNCE_BUDGET)
		return false;
	return !vhost_blk_iter_aligned(data, be);
}

/*
 * Turn one descriptor chain into a request.  Returns the number of bytes
 * it moves, for the worker's byte weight: its data, or the bytes its
 * ranges cover (a discard or a write-zeroes of 64 GiB is work too, even
 * if no data crosses guest memory).  Or -EAGAIN if the request must wait
 * for bounce pages (it was not taken: the caller puts it back).
 */
static ssize_t vhost_blk_handle_req(struct vhost_blk_vq *bvq,
				    struct vhost_blk_backend *be, u16 head,
				    unsigned int out, unsigned int in)
{
	struct virtio_blk_discard_write_zeroes *segs = NULL;
	struct vhost_virtqueue *vq = &bvq->vq;
	struct vhost_blk *blk = vhost_blk_from_vq(vq);
	struct iov_iter out_iter, in_iter, *data;
	struct virtio_blk_outhdr hdr;
	unsigned int nr_segs = 0;
	struct vhost_blk_req *req;
	u8 __user *status;
	size_t len = 0;
	u64 sector;
	u32 type;
	u8 ret;

	lockdep_assert_held(&vq->mutex);
	status = vhost_blk_status_ptr(vq->iov + out, in);
	if (unlikely(!status)) {
		/* Nowhere to report an error: drop it without touching it. */
		struct vring_used_elem used = {
			.id = cpu_to_vhost32(vq, head),
		};

		vq_err(vq, "vhost-blk: request %u has no status byte\n", head);
		vhost_blk_add_used(bvq, &used, 1);
		return 0;
	}

	iov_iter_init(&out_iter, ITER_SOURCE, vq->iov, out,
		      iov_length(vq->iov, out));
	/* Everything writable but the status byte is data. */
	iov_iter_init(&in_iter, ITER_DEST, vq->iov + out, in,
		      iov_length(vq->iov + out, in) - 1);

	if (unlikely(!copy_from_iter_full(&hdr, sizeof(hdr), &out_iter))) {
		vhost_blk_finish_now(bvq, head, U32_MAX, 0, status,
				     VIRTIO_BLK_S_IOERR, 1);
		return 0;
	}
	type = vhost32_to_cpu(vq, hdr.type);
	sector = vhost64_to_cpu(vq, hdr.sector);
	/* Before anything is traced or counted: it will come round again. */
	if (vhost_blk_bounce_must_wait(bvq, be, type, &in_iter, &out_iter))
		return -EAGAIN;
	trace_vhost_blk_req_submit(bvq->index, head, type, sector,
				   iov_iter_count(&out_iter) +
				   iov_iter_count(&in_iter), 0);

	/*
	 * Data in the wrong direction for the type, or more of it than the
	 * device offered to take, is an I/O error.
	 */
	switch (type) {
	case VIRTIO_BLK_T_IN:
		data = &in_iter;
		ret = iov_iter_count(&out_iter) || !vhost_blk_data_bounded(data) ?
		      VIRTIO_BLK_S_IOERR :
		      vhost_blk_check_rw(be, sector, iov_iter_count(data),
					 false);
		break;
	case VIRTIO_BLK_T_OUT:
		data = &out_iter;
		ret = iov_iter_count(&in_iter) || !vhost_blk_data_bounded(data) ?
		      VIRTIO_BLK_S_IOERR :
		      vhost_blk_check_rw(be, sector, iov_iter_count(data),
					 true);
		break;
	case VIRTIO_BLK_T_FLUSH:
		data = NULL;
		ret = VIRTIO_BLK_S_OK;
		break;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
	case VIRTIO_BLK_T_SECURE_ERASE:
		data = NULL;
		/*
		 * Not negotiated: UNSUPP, whatever the backend could do
		 * (VIRTIO 1.2, 5.2.6.2), before anything else is looked at.
		 */
		if (!vhost_has_feature(vq, vhost_blk_range_feature(type)))
			ret = VIRTIO_BLK_S_UNSUPP;
		else if (iov_iter_count(&in_iter))
			ret = VIRTIO_BLK_S_IOERR;
		else
			ret = vhost_blk_check_ranges(be, type, &out_iter,
						     &segs, &nr_segs);
		break;
	case VIRTIO_BLK_T_GET_ID:
		len = min_t(size_t, iov_iter_count(&in_iter),
			    VHOST_BLK_SERIAL_LEN);
		len = copy_to_iter(bvq->serial, len, &in_iter);
		vhost_blk_finish_now(bvq, head, type, sector, status,
				     VIRTIO_BLK_S_OK, len + 1);
		return 0;
	default:
		vhost_blk_finish_now(bvq, head, type, sector, status,
				     VIRTIO_BLK_S_UNSUPP, 1);
		return 0;
	}

	if (ret != VIRTIO_BLK_S_OK || (data && !iov_iter_count(data))) {
		vhost_blk_finish_now(bvq, head, type, sector, status, ret, 1);
		return 0;
	}

	req = vhost_blk_req_alloc(bvq);
	if (!req) {
		kfree(segs);
		goto err;
	}
	req->bvq = bvq;
	req->be = be;
	req->status = status;
	req->head = head;
	req->type = type;
	req->sector = sector;
	req->segs = segs;
	req->nr_segs = nr_segs;
	while (nr_segs--)
		len += (size_t)le32_to_cpu(segs[nr_segs].num_sectors) <<
		       SECTOR_SHIFT;
	if (bvq->log_num) {
		req->log = kmemdup(vq->log, bvq->log_num * sizeof(*vq->log),
				   GFP_KERNEL_ACCOUNT);
		if (!req->log) {
			vhost_blk_req_free(req);
			goto err;
		}
		req->log_num = bvq->log_num;
	}
	if (data) {
		len = iov_iter_count(data);
		req->len = len;
		if (vhost_blk_req_set_iter(req, data)) {
			vhost_blk_req_free(req);
			goto err;
		}
	}

	/* The submitter's reference: no completion before we are done. */
	atomic_set(&req->pending, 1);
	atomic_inc(&blk->inflight);
	bvq->stats.inflight_max = max_t(u64, bvq->stats.inflight_max,
					atomic_inc_return(&bvq->inflight));
	if (vhost_blk_submit(req))
		WRITE_ONCE(req->result, VIRTIO_BLK_S_IOERR);
	vhost_blk_req_put(req);
	return len;

err:
	vhost_blk_finish_now(bvq, head, type, sector, status,
			     VIRTIO_BLK_S_IOERR, 1);
	return 0;
}

/* Stop polling for @req's bio: it ends, or ended, some other way. */
static void vhost_blk_unpoll(struct vhost_blk_req *req)
{
	struct vhost_blk_vq *bvq = req->bvq;

	lockdep_assert_held(&bvq->vq.mutex);
	if (!req->poll_bio)
		return;
	list_del(&req->poll_node);
	bio_put(req->poll_bio);
	req->poll_bio = NULL;
	bvq->stats.poll_fallbacks++;
}

/*
 * Poll for the completions of this ring's polled bios, each in flight
 * once, but one right after another of the same hardware queue: a poll
 * reaps every completion of its queue.  They end here, in
 * vhost_blk_bio_end_io(), which queues done_work as an interrupt would.
 * Returns whether any of them was still in flight.
 *
 * Polling a bio needs it not freed meanwhile.  Each request on ->polled
 * holds a reference on its polled bio from before submit_bio() until
 * vhost_blk_req_free(), which runs under vq->mutex, held here: so the
 * bio's end_io, run meanwhile by another task polling the same hardware
 * queue or by an interrupt (the block layer clears REQ_POLLED of a bio it
 * splits), cannot free it under bio_poll().  Its block device outlives
 * it: the backend's file is put only after vhost_blk_drain().
 */
static bool vhost_blk_reap(struct vhost_blk_vq *bvq)
{
	blk_qc_t cookie, last = BLK_QC_T_NONE;
	struct vhost_blk_req *req, *tmp;
	bool busy = false;

	lockdep_assert_held(&bvq->vq.mutex);
	list_for_each_entry_safe(req, tmp, &bvq->polled, poll_node) {
		/* Ended: waiting in done_list, or refused, in retry_list. */
		if (!atomic_read(&req->pending) || !READ_ONCE(req->poll_nowait))
			continue;
		/*
		 * The block layer took polling away (a throttled bio, or
		 * one split by a stacking driver): it ends by interrupt,
		 * and polling for it would spin until then.
		 */
		if (!(READ_ONCE(req->poll_bio->bi_opf) & REQ_POLLED)) {
			vhost_blk_unpoll(req);
			continue;
		}
		busy = true;
		/* Not dispatched yet, or merged into another's request. */
		cookie = READ_ONCE(req->poll_bio->bi_cookie);
		if (cookie == BLK_QC_T_NONE || cookie == last)
			continue;
		last = cookie;
		if (bio_poll(req->poll_bio, NULL, BLK_POLL_ONESHOT) > 0)
			bvq->stats.poll_reaped++;
	}
	return busy;
}

/*
 * Send again, unpolled, the requests whose polled bio the block layer
 * refused (vhost_blk_bio_end_io()).  Unpolled and without REQ_NOWAIT, so
 * submit_bio() may sleep: first reap every polled bio of the ring still
 * in flight, so that none of them is what it waits for (a tag, or the end
 * of a freeze that waits for them).  They are all dispatched (REQ_NOWAIT
 * sends nothing that would wait), so that ends.  Returns whether there
 * was any.
 */
static bool vhost_blk_retry(struct vhost_blk_vq *bvq)
{
	struct vhost_blk_req *req, *tmp;
	struct llist_node *list;

	lockdep_assert_held(&bvq->vq.mutex);
	if (llist_empty(&bvq->retry_list))
		return false;
	while (vhost_blk_reap(bvq))
		cond_resched();
	list = llist_del_all(&bvq->retry_list);
	llist_for_each_entry_safe(req, tmp, list, node) {
		vhost_blk_unpoll(req);
		/*
		 * Its buffers are the owner's memory: the worker shares the
		 * owner's mm, an ioctl of the owner too.  A teardown run by
		 * anyone else (a release in the owner's exit, its mm gone)
		 * fails the request rather than pin another mm's pages.
		 */
		if (likely(current->mm == bvq->vq.dev->mm))
			vhost_blk_submit_bio(req, &req->poll_iter,
					     req->poll_opf, false);
		else
			WRITE_ONCE(req->result, VIRTIO_BLK_S_IOERR);
		/* The refused bio's reference. */
		vhost_blk_req_put(req);
	}
	return true;
}

/*
 * Write the status bytes of finished requests and return them to the guest
 * in one used-ring update and at most one notification.
 */
static void vhost_blk_done_work(struct vhost_work *work)
{
	struct vhost_blk_vq *bvq = container_of(work, struct vhost_blk_vq,
						done_work);
	struct vhost_virtqueue *vq = &bvq->vq;
	struct vhost_blk_req *req, *tmp;
	struct mem_cgroup *memcg;
	struct llist_node *list;
	unsigned int n = 0;
	u32 len;
	u8 status;

	mutex_lock(&vq->mutex);
	memcg = vhost_blk_charge_begin(vhost_blk_from_vq(vq));
	vhost_blk_redirty(bvq);
	vhost_blk_retry(bvq);
	list = llist_reverse_order(llist_del_all(&bvq->done_list));
	llist_for_each_entry_safe(req, tmp, list, node) {
		status = READ_ONCE(req->result);
		if (status == VIRTIO_BLK_S_OK && req->bounce &&
		    req->type == VIRTIO_BLK_T_IN &&
		    !vhost_blk_copy_bounce_out(req))
			status = VIRTIO_BLK_S_IOERR;
		len = 1;
		if (status == VIRTIO_BLK_S_OK && req->type == VIRTIO_BLK_T_IN)
			len += req->len;

		if (put_user(status, req->status))
			vq_err(vq, "vhost-blk: cannot write status of request %u\n",
			       req->head);
		/*
		 * Pages others read in while a write ran are stale, as
		 * kiocb_invalidate_post_direct_write() knows.
		 */
		if (req->be->bdev && req->type == VIRTIO_BLK_T_OUT &&
		    status == VIRTIO_BLK_S_OK)
			vhost_blk_cache_sync(req->be, req->sector,
					     req->len, true);
		/* What the VFS does for a read or write that completes at once. */
		if (req->notify && status == VIRTIO_BLK_S_OK) {
			if (req->type == VIRTIO_BLK_T_OUT)
				fsnotify_modify(req->be->file);
			else
				fsnotify_access(req->be->file);
		}
		vhost_blk_log_write(vq, req->log, req->log_num);
		vhost_blk_account(bvq, req->head, req->type, req->sector,
				  req->len, status);
		vq->heads[n].id = cpu_to_vhost32(vq, req->head);
		vq->heads[n].len = cpu_to_vhost32(vq, len);
		vhost_blk_req_free(req);
		if (++n == vq->dev->iov_limit) {
			bvq->stats.used_batches += vhost_blk_add_used(bvq,
								      vq->heads,
								      n);
			n = 0;
		}
	}
	if (n)
		bvq->stats.used_batches += vhost_blk_add_used(bvq, vq->heads, n);
	if (list)
		vhost_blk_signal(bvq);
	/* Bounce pages came back: take the request that waited for them. */
	if (bvq->bounce_wait && list) {
		bvq->bounce_wait = false;
		bvq->requeued = true;
		vhost_poll_queue(&vq->poll);
	}
	set_active_memcg(memcg);
	mutex_unlock(&vq->mutex);
}

/*
 * Adaptive polling, after QEMU's aio poll: @block_ns is how long the ring
 * waited for its next request (the poll plus the sleep after it).  A window
 * that already covers it is right; a wait past the ceiling shrinks it; a
 * wait that a longer window would have covered grows it.
 */
static void vhost_blk_poll_adapt(struct vhost_blk_vq *bvq, u64 block_ns)
{
	u64 max_ns = (u64)bvq->vq.busyloop_timeout * NSEC_PER_USEC;
	u64 window = bvq->poll_window_ns;

	lockdep_assert_held(&bvq->vq.mutex);
	if (block_ns <= window)
		return;
	if (block_ns > max_ns)
		window = bvq->poll_shrink ? div_u64(window, bvq->poll_shrink) : 0;
	else if (!window)
		window = VHOST_BLK_POLL_INIT_NS;
	/* A u32 grow times a window of up to 2^32 us can wrap: saturate. */
	else if (window < max_ns &&
		 check_mul_overflow(window, (u64)bvq->poll_grow, &window))
		window = max_ns;
	bvq->poll_window_ns = min(window, max_ns);
}

/*
 * The ring is not busy-polled any more, but its polled bios raise no
 * interrupt: poll them, a pass per run, until none is in flight.
 */
static void vhost_blk_reap_work(struct vhost_work *work)
{
	struct vhost_blk_vq *bvq = container_of(work, struct vhost_blk_vq,
						reap_work);
	struct vhost_virtqueue *vq = &bvq->vq;

	mutex_lock(&vq->mutex);
	if (vhost_blk_reap(bvq))
		vhost_vq_work_queue(vq, &bvq->reap_work);
	mutex_unlock(&vq->mutex);
}

/*
 * Poll an empty ring, guest kicks still disabled, until the queue's window
 * has passed since the ring ran dry (idle_since_ns).  Stop at once when
 * the worker has other work (completions included), the scheduler wants
 * the CPU, a signal is pending or an ioctl or release waits to take a
 * mutex (ctl_waiters).  The caller requeues itself for the first two, and
 * the window still counts from idle_since_ns afterwards, so the total
 * time polled per idle period stays bounded.
 * Meanwhile the ring's polled bios are reaped: their completions queue
 * done_work, and end the poll as an interrupt's would.
 */
static enum vhost_blk_poll_outcome vhost_blk_poll(struct vhost_blk_vq *bvq)
{
	struct vhost_virtqueue *vq = &bvq->vq;
	struct vhost_blk *blk = vhost_blk_from_vq(vq);
	u64 window = vhost_blk_poll_window(bvq);
	enum vhost_blk_poll_outcome outcome;
	u64 start, now, deadline;

	lockdep_assert_held(&vq->mutex);
	start = local_clock();
	deadline = bvq->idle_since_ns + window;
	if (!window || start >= deadline)
		return VHOST_BLK_POLL_TIMEOUT;

	trace_vhost_blk_poll_start(bvq->index, deadline - start);
	for (;;) {
		if (!vhost_vq_avail_empty(vq->dev, vq)) {
			outcome = VHOST_BLK_POLL_REQUEST;
			break;
		}
		if (vhost_vq_has_work(vq)) {
			outcome = llist_empty(&bvq->done_list) ?
				  VHOST_BLK_POLL_YIELD :
				  VHOST_BLK_POLL_COMPLETION;
			break;
		}
		if (need_resched()) {
			outcome = VHOST_BLK_POLL_YIELD;
			break;
		}
		if (signal_pending(current)) {
			outcome = VHOST_BLK_POLL_SIGNAL;
			break;
		}
		if (atomic_read(&blk->ctl_waiters)) {
			outcome = VHOST_BLK_POLL_CONTROL;
			break;
		}
		now = local_clock();
		if (now >= deadline) {
			outcome = VHOST_BLK_POLL_TIMEOUT;
			break;
		}
		if (!list_empty(&bvq->polled))
			vhost_blk_reap(bvq);
		cpu_relax();
	}
	now = local_clock();

	bvq->stats.polls++;
	bvq->stats.poll_ns += now - start;
	if (outcome == VHOST_BLK_POLL_REQUEST)
		bvq->stats.poll_hits++;
	trace_vhost_blk_poll_end(bvq->index, now - start, outcome);
	return outcome;
}

static void vhost_blk_handle_kick(struct vhost_work *work)
{
	struct vhost_virtqueue *vq = container_of(work, struct vhost_virtqueue,
						  poll.work);
	struct vhost_blk_vq *bvq = container_of(vq, struct vhost_blk_vq, vq);
	struct vhost_blk *blk = vhost_blk_from_vq(vq);
	enum vhost_blk_poll_outcome poll;
	struct vhost_blk_backend *be;
	unsigned int out, in, ndesc, log_num = 0;
	struct mem_cgroup *memcg;
	struct vhost_log *vq_log;
	struct blk_plug plug;
	size_t bytes = 0;
	int head, reqs = 0;
	ssize_t len;
	u16 used = 0;

	mutex_lock(&vq->mutex);
	be = vhost_vq_get_backend(vq);
	if (!be)
		goto out;
	memcg = vhost_blk_charge_begin(blk);

	trace_vhost_blk_kick(bvq->index, !bvq->requeued);
	if (!bvq->requeued) {
		/* The guest ended an idle period: its length tunes polling. */
		bvq->stats.kicks++;
		if (bvq->idle_since_ns && bvq->poll_adaptive)
			vhost_blk_poll_adapt(bvq, local_clock() -
					     bvq->idle_since_ns);
		bvq->idle_since_ns = 0;
	}
	bvq->requeued = false;

	vhost_disable_notify(&blk->dev, vq);
	used = vq->last_used_idx;
	/* Migration: learn where every chain's writable buffers are. */
	vq_log = unlikely(vhost_has_feature(vq, VHOST_F_LOG_ALL)) ?
		 vq->log : NULL;
	blk_start_plug(&plug);
	do {
		head = vhost_get_vq_desc_n(vq, vq->iov, ARRAY_SIZE(vq->iov),
					   &out, &in, vq_log, &log_num, &ndesc);
		bvq->log_num = vq_log ? log_num : 0;
		/* The vhost core already reported a malformed chain. */
		if (unlikely(head < 0))
			break;
		if (head == vq->num) {
			if (!bvq->idle_since_ns)
				bvq->idle_since_ns = local_clock();
			/*
			 * Send what is plugged first: a blk-mq disk would not
			 * see the last request until the poll ended, and the
			 * completion that ends a poll would never come.
			 */
			blk_finish_plug(&plug);
			poll = vhost_blk_poll(bvq);
			blk_start_plug(&plug);
			if (poll == VHOST_BLK_POLL_REQUEST)
				continue;
			if (poll == VHOST_BLK_POLL_COMPLETION ||
			    poll == VHOST_BLK_POLL_YIELD) {
				/*
				 * Let done_work (or whoever) run, then poll
				 * on with kicks still off: a guest that keeps
				 * the ring busy need not kick again.
				 */
				bvq->requeued = true;
				vhost_poll_queue(&vq->poll);
				break;
			}
			if (unlikely(vhost_enable_notify(&blk->dev, vq))) {
				vhost_disable_notify(&blk->dev, vq);
				continue;
			}
			break;
		}
		bvq->idle_since_ns = 0;
		len = vhost_blk_handle_req(bvq, be, head, out, in);
		if (unlikely(len < 0)) {
			/*
			 * Out of bounce budget: put the chain back, kicks
			 * stay off, and done_work requeues us when it has
			 * freed some.
			 */
			vhost_discard_vq_desc(vq, 1, ndesc);
			bvq->bounce_wait = true;
			bvq->stats.bounce_waits++;
			break;
		}
		bytes += len;
		/* vhost_exceeds_weight() takes an int: no wrap to below. */
		if (unlikely(vhost_exceeds_weight(vq, ++reqs,
						  min_t(size_t, bytes, INT_MAX)))) {
			/* vhost_exceeds_weight() requeued us. */
			bvq->requeued = true;
			break;
		}
		/*
		 * Completions are waiting: let done_work answer them, then
		 * carry on submitting.  Kicks stay disabled meanwhile.
		 */
		if (!(reqs % VHOST_BLK_SUBMIT_BATCH) &&
		    !llist_empty(&bvq->done_list)) {
			bvq->requeued = true;
			vhost_poll_queue(&vq->poll);
			break;
		}
	} while (true);
	blk_finish_plug(&plug);

	/* Requests answered without I/O: one notification for all. */
	if (vq->last_used_idx != used)
		vhost_blk_signal(bvq);
	/*
	 * A run that does not come back leaves its polled bios to
	 * reap_work: nothing else would end them.
	 */
	if (!bvq->requeued && !list_empty(&bvq->polled))
		vhost_vq_work_queue(vq, &bvq->reap_work);
	set_active_memcg(memcg);
out:
	mutex_unlock(&vq->mutex);
}

static void vhost_blk_backend_put(struct vhost_blk_backend *be)
{
	if (!be)
		return;
	fput(be->file);
	kfree(be);
}

static struct vhost_blk_backend *vhost_blk_backend_get(int fd)
{
	struct vhost_blk_backend *be;
	struct super_block *sb;
	struct inode *inode;
	struct file *file;
	int ret;

	file = fget(fd);
	if (!file)
		return ERR_PTR(-EBADF);
	inode = file_inode(file);

	if (!S_ISBLK(inode->i_mode) && !S_ISREG(inode->i_mode)) {
		ret = -ENOTBLK;
		goto err_file;
	}
	/*
	 * The fd's mode binds us as it binds read(2) and write(2): every
	 * request reads, so an fd not open for reading is refused; writes
	 * go to any offset, which an O_APPEND fd, an append-only or an
	 * immutable file does not allow.
	 */
	if (!(file->f_mode & FMODE_READ)) {
		ret = -EBADF;
		goto err_file;
	}
	if (file->f_flags & O_APPEND) {
		ret = -EINVAL;
		goto err_file;
	}
	if ((file->f_mode & FMODE_WRITE) &&
	    (IS_APPEND(inode) || IS_IMMUTABLE(inode))) {
		ret = -EPERM;
		goto err_file;
	}

	be = kzalloc(sizeof(*be), GFP_KERNEL_ACCOUNT);
	if (!be) {
		ret = -ENOMEM;
		goto err_file;
	}
	be->file = file;
	be->read_only = !(file->f_mode & FMODE_WRITE);

	if (S_ISBLK(inode->i_mode)) {
		be->bdev = file_bdev(file);
		be->len_mask = bdev_logical_block_size(be->bdev) - 1;
		/*
		 * Buffers start on a sector, whatever less the device would
		 * take: a bio_vec that ends inside a sector is legal, but
		 * drivers get it wrong (null_blk of 7.3, dma_alignment 1,
		 * copies a chunk spanning two sectors as if all of it were
		 * the first's, so a read next to a discarded sector returns
		 * zeroes for live data).  Guests align to sectors anyway;
		 * what does not is bounced.
		 */
		be->addr_mask = max_t(unsigned int,
				      bdev_dma_alignment(be->bdev),
				      SECTOR_SIZE - 1);
	} else {
		if (!(file->f_mode & FMODE_CAN_ODIRECT)) {
			ret = -EOPNOTSUPP;
			goto err_be;
		}
		sb = inode->i_sb;
		be->len_mask = SECTOR_SIZE - 1;
		be->addr_mask = SECTOR_SIZE - 1;
		if (sb->s_bdev) {
			be->len_mask = bdev_logical_block_size(sb->s_bdev) - 1;
			be->addr_mask = max(be->addr_mask,
					    bdev_dma_alignment(sb->s_bdev));
		}
	}
	return be;

err_be:
	kfree(be);
err_file:
	fput(file);
	return ERR_PTR(ret);
}

/* Stop taking requests from every ring.  In-flight I/O goes on. */
static void vhost_blk_stop_vqs(struct vhost_blk *blk)
{
	struct vhost_virtqueue *vq;
	int i;

	lockdep_assert_held(&blk->dev.mutex);
	for (i = 0; i < blk->dev.nvqs; i++) {
		vq = &blk->vqs[i].vq;
		mutex_lock(&vq->mutex);
		vhost_vq_set_backend(vq, NULL);
		mutex_unlock(&vq->mutex);
	}
}

/*
 * Poll every ring's polled bios until none is in flight.  The rings must
 * already be stopped, so that no new one is submitted.  The worker may
 * not poll them any more: its owner may be dead.  Returns -EINTR if
 * @killable and a fatal signal came first.
 */
static int vhost_blk_reap_all(struct vhost_blk *blk, bool killable)
{
	struct vhost_blk_vq *bvq;
	bool busy;
	int i;

	lockdep_assert_held(&blk->dev.mutex);
	do {
		busy = false;
		for (i = 0; i < blk->dev.nvqs; i++) {
			bvq = &blk->vqs[i];
			mutex_lock(&bvq->vq.mutex);
			busy |= vhost_blk_retry(bvq);
			busy |= vhost_blk_reap(bvq);
			mutex_unlock(&bvq->vq.mutex);
		}
		if (busy && killable && fatal_signal_pending(current))
			return -EINTR;
		cond_resched();
	} while (busy);
	return 0;
}

/*
 * Wait for every submitted request to end and be answered.  The rings must
 * already be stopped.  If the owner's worker was killed, its completions
 * can no longer reach the guest: free them without touching its memory.
 *
 * On hung storage (a hard NFS mount, multipath queue_if_no_path) that
 * wait has no end.  A @killable drain gives up on a fatal signal and
 * returns -EINTR, with requests still in flight: the caller must start
 * the rings again as they were, and the release drains them.
 */
static int vhost_blk_drain(struct vhost_blk *blk, bool killable)
{
	struct vhost_blk_req *req, *tmp;
	struct vhost_virtqueue *vq;
	struct llist_node *list;
	int i;

	lockdep_assert_held(&blk->dev.mutex);

	/* Polled bios end only when polled. */
	if (vhost_blk_reap_all(blk, killable))
		return -EINTR;
	/* Pairs with atomic_dec_and_test() in vhost_blk_req_put(). */
	if (!killable)
		wait_var_event(&blk->inflight, !atomic_read(&blk->inflight));
	else if (wait_var_event_killable(&blk->inflight,
					 !atomic_read(&blk->inflight)))
		return -EINTR;
	vhost_dev_flush(&blk->dev);

	for (i = 0; i < blk->dev.nvqs; i++) {
		vq = &blk->vqs[i].vq;
		mutex_lock(&vq->mutex);
		vhost_blk_redirty(&blk->vqs[i]);
		list = llist_del_all(&blk->vqs[i].done_list);
		llist_for_each_entry_safe(req, tmp, list, node)
			vhost_blk_req_free(req);
		vhost_blk_free_reqs(&blk->vqs[i]);
		mutex_unlock(&vq->mutex);
	}
	return 0;
}

/*
 * Stop the rings and answer every request in flight, keeping the
 * backend, for a change that requests already taken must not see.
 * Returns the backend to resume with, NULL if none is attached.
 */
static struct vhost_blk_backend *vhost_blk_pause(struct vhost_blk *blk)
{
	lockdep_assert_held(&blk->dev.mutex);
	if (!blk->backend)
		return NULL;
	vhost_blk_stop_vqs(blk);
	vhost_blk_drain(blk, false);
	return blk->backend;
}

/* Stop every ring, answer every request in flight, drop the backend. */
static void vhost_blk_detach(struct vhost_blk *blk)
{
	vhost_blk_backend_put(vhost_blk_pause(blk));
	blk->backend = NULL;
}

/* Point every ring that is set up at @be and start it. */
static int vhost_blk_start_vqs(struct vhost_blk *blk,
			       struct vhost_blk_backend *be)
{
	DECLARE_BITMAP(started, VHOST_BLK_MAX_QUEUES);
	struct vhost_virtqueue *vq, *first;
	struct vhost_blk_vq *bvq;
	int i, ret;

	lockdep_assert_held(&blk->dev.mutex);
	bitmap_zero(started, VHOST_BLK_MAX_QUEUES);
	for (i = 0; i < blk->dev.nvqs; i++) {
		vq = &blk->vqs[i].vq;
		mutex_lock(&vq->mutex);
		if (!vq->desc) {
			mutex_unlock(&vq->mutex);
			continue;
		}
		/* Set up, but its rings or dirty log are not all mapped. */
		if (!vhost_vq_access_ok(vq)) {
			vq_err(vq, "vhost-blk: vq %d: rings or log not accessible, not started\n",
			       i);
			mutex_unlock(&vq->mutex);
			continue;
		}
		/* vhost_vq_init_access() does nothing without a backend. */
		vhost_vq_set_backend(vq, be);
		ret = vhost_vq_init_access(vq);
		if (ret) {
			/*
			 * Its used index and flags are not ours: no run may
			 * take a request before the caller's detach, as net.c
			 * makes sure too.
			 */
			vhost_vq_set_backend(vq, NULL);
			mutex_unlock(&vq->mutex);
			return ret;
		}
		/*
		 * Serve what the guest queued while there was no backend.  On
		 * an empty ring, publish kicks as on (a run cut short by a
		 * detach may have left them off, and with EVENT_IDX a ring
		 * whose base was set has no avail_event yet) and re-check, as
		 * a run that drained the ring would: the guest's next request
		 * then kicks, and no run races with it to count it.
		 */
		vhost_disable_notify(&blk->dev, vq);
		bvq = &blk->vqs[i];
		bvq->requeued = !vhost_vq_avail_empty(&blk->dev, vq) ||
				vhost_enable_notify(&blk->dev, vq);
		/* The detach before this freed every bounce page. */
		bvq->bounce_wait = false;
		if (bvq->requeued)
			__set_bit(i, started);
		mutex_unlock(&vq->mutex);
	}

	/*
	 * Queue the runs once every ring is set up, holding the first one's
	 * mutex: a worker that starts the first run meanwhile waits in it
	 * until every run is queued, so however this thread is scheduled, a
	 * flooded ring's next run is queued behind the other rings' first.
	 */
	i = find_first_bit(started, blk->dev.nvqs);
	if (i >= blk->dev.nvqs)
		return 0;
	first = &blk->vqs[i].vq;
	mutex_lock(&first->mutex);
	for_each_set_bit(i, started, blk->dev.nvqs)
		vhost_poll_queue(&blk->vqs[i].vq.poll);
	mutex_unlock(&first->mutex);
	return 0;
}

struct vhost_blk_charge_work {
	struct vhost_work work;
	struct task_struct *task;
	int ret;
};

static void vhost_blk_charge_work_fn(struct vhost_work *work)
{
	struct vhost_blk_charge_work *cw;

	cw = container_of(work, struct vhost_blk_charge_work, work);
	cw->ret = cgroup_attach_task_all(cw->task, current);
}

/*
 * Move the kthread worker of every ring into @task's cgroups, from inside
 * it, as the vhost core attaches a new worker to the owner's.  A worker
 * that serves several rings is moved once per ring.
 */
static int vhost_blk_charge_workers(struct vhost_blk *blk,
				    struct task_struct *task)
{
	struct vhost_blk_charge_work cw = { .task = task };
	int i;

	lockdep_assert_held(&blk->dev.mutex);
	vhost_work_init(&cw.work, vhost_blk_charge_work_fn);
	for (i = 0; i < blk->dev.nvqs && !cw.ret; i++)
		if (vhost_vq_work_queue(&blk->vqs[i].vq, &cw.work))
			vhost_dev_flush(&blk->dev);
	return cw.ret;
}

/*
 * Before the first backend: kthread workers charge the owner's memory
 * cgroup for the guest, unless VHOST_BLK_CHARGE_PEER chose another's.
 */
static void vhost_blk_charge_start(struct vhost_blk *blk)
{
	lockdep_assert_held(&blk->dev.mutex);
	if (!blk->dev.fork_owner && !blk->work_memcg)
		WRITE_ONCE(blk->work_memcg,
			   get_mem_cgroup_from_mm(current->mm));
}

/* Once the workers and the sync task have stopped. */
static void vhost_blk_charge_put(struct vhost_blk *blk)
{
	mem_cgroup_put(blk->work_memcg);
	WRITE_ONCE(blk->work_memcg, NULL);
	if (blk->charge_task)
		put_task_struct(blk->charge_task);
	blk->charge_task = NULL;
}

/* The process at the other end of the socket @fd, a reference. */
static struct task_struct *vhost_blk_peer_get(int fd)
{
	struct task_struct *task;
	struct pid *pid = NULL;
	struct socket *sock;
	int err;

	sock = sockfd_lookup(fd, &err);
	if (!sock)
		return ERR_PTR(err);
	if (sock->sk && sock->sk->sk_family == AF_UNIX) {
		spin_lock(&sock->sk->sk_peer_lock);
		pid = get_pid(sock->sk->sk_peer_pid);
		spin_unlock(&sock->sk->sk_peer_lock);
	}
	sockfd_put(sock);
	if (!pid)
		return ERR_PTR(-ENOTCONN);
	task = get_pid_task(pid, PIDTYPE_TGID);
	put_pid(pid);
	return task ?: ERR_PTR(-ESRCH);
}

static long vhost_blk_charge_peer(struct vhost_blk *blk, int __user *argp)
{
	struct task_struct *task;
	struct mem_cgroup *memcg;
	struct mm_struct *mm;
	int fd;
	long ret;

	if (get_user(fd, argp))
		return -EFAULT;
	mutex_lock(&blk->dev.mutex);
	ret = vhost_dev_check_owner(&blk->dev);
	if (ret)
		goto out;
	/* A vhost_task is a thread of the owner: it stays in its cgroup. */
	ret = -EINVAL;
	if (blk->dev.fork_owner)
		goto out;
	ret = -EBUSY;
	if (blk->charge_task || blk->work_memcg)
		goto out;

	task = vhost_blk_peer_get(fd);
	if (IS_ERR(task)) {
		ret = PTR_ERR(task);
		goto out;
	}
	mm = get_task_mm(task);
	if (!mm) {
		ret = -ESRCH;
		goto put_task;
	}
	memcg = get_mem_cgroup_from_mm(mm);
	mmput(mm);
	ret = vhost_blk_charge_workers(blk, task);
	if (ret)
		goto put_memcg;
	blk->charge_task = task;
	WRITE_ONCE(blk->work_memcg, memcg);
	goto out;

put_memcg:
	/* Back where they were: that move was allowed before. */
	vhost_blk_charge_workers(blk, current);
	mem_cgroup_put(memcg);
put_task:
	put_task_struct(task);
out:
	mutex_unlock(&blk->dev.mutex);
	return ret;
}

static long vhost_blk_set_backend(struct vhost_blk *blk, int fd)
{
	struct vhost_blk_backend *be = NULL;
	long ret;

	mutex_lock(&blk->dev.mutex);
	ret = vhost_dev_check_owner(&blk->dev);
	if (ret)
		goto out;

	if (fd != -1) {
		vhost_blk_charge_start(blk);
		ret = vhost_blk_sync_start(blk);
		if (ret)
			goto out;
		be = vhost_blk_backend_get(fd);
		if (IS_ERR(be)) {
			ret = PTR_ERR(be);
			goto out;
		}
	}

	vhost_blk_detach(blk);
	if (be) {
		blk->backend = be;
		ret = vhost_blk_start_vqs(blk, be);
		if (ret)
			vhost_blk_detach(blk);
	}
out:
	mutex_unlock(&blk->dev.mutex);
	return ret;
}

static long vhost_blk_set_serial(struct vhost_blk *blk, void __user *argp)
{
	char serial[VHOST_BLK_SERIAL_LEN];
	struct vhost_blk_vq *bvq;
	int i;

	long ret;

	if (copy_from_user(serial, argp, sizeof(serial)))
		return -EFAULT;

	mutex_lock(&blk->dev.mutex);
	ret = vhost_dev_check_owner(&blk->dev);
	if (ret)
		goto out;
	for (i = 0; i < blk->dev.nvqs; i++) {
		bvq = &blk->vqs[i];
		mutex_lock(&bvq->vq.mutex);
		memcpy(bvq->serial, serial, sizeof(serial));
		mutex_unlock(&bvq->vq.mutex);
	}
out:
	mutex_unlock(&blk->dev.mutex);
	return ret;
}

static struct vhost_blk_vq *vhost_blk_get_bvq(struct vhost_blk *blk, u32 index)
{
	if (index >= blk->dev.nvqs)
		return NULL;
	return &blk->vqs[array_index_nospec(index, blk->dev.nvqs)];
}

static long vhost_blk_get_vring_stats(struct vhost_blk *blk,
				      void __user *argp)
{
	struct vhost_blk_vring_stats st;
	struct vhost_blk_vq *bvq;
	u32 flags, argsz;
	long ret;

	BUILD_BUG_ON(offsetofend(struct vhost_blk_vring_stats, reserved) !=
		     VHOST_BLK_VRING_STATS_MIN_SZ);
	if (copy_from_user(&st, argp, VHOST_BLK_VRING_STATS_MIN_SZ))
		return -EFAULT;
	bvq = vhost_blk_get_bvq(blk, st.index);
	if (!bvq || (st.flags & ~VHOST_BLK_STATS_RESET) || st.reserved ||
	    st.argsz < VHOST_BLK_VRING_STATS_MIN_SZ)
		return -EINVAL;

	/* A newer caller's struct is longer: fill what we have. */
	argsz = min_t(u32, st.argsz, sizeof(st));
	flags = st.flags;
	/* Anyone with the fd may read the counters; only the owner resets. */
	if (flags & VHOST_BLK_STATS_RESET) {
		mutex_lock(&blk->dev.mutex);
		ret = vhost_dev_check_owner(&blk->dev);
		mutex_unlock(&blk->dev.mutex);
		if (ret)
			return ret;
	}
	mutex_lock(&bvq->vq.mutex);
	st = bvq->stats;
	if (flags & VHOST_BLK_STATS_RESET)
		memset(&bvq->stats, 0, sizeof(bvq->stats));
	st.poll_window_ns = vhost_blk_poll_window(bvq);
	mutex_unlock(&bvq->vq.mutex);

	st.argsz = argsz;
	st.index = bvq->index;
	st.flags = flags;
	st.reserved = 0;
	st.inflight = atomic_read(&bvq->inflight);
	if (copy_to_user(argp, &st, argsz))
		return -EFAULT;
	return 0;
}

static long vhost_blk_set_vring_poll(struct vhost_blk *blk,
				     void __user *argp)
{
	struct vhost_blk_vring_poll poll;
	struct vhost_blk_vq *bvq;
	long ret;

	if (copy_from_user(&poll, argp, sizeof(poll)))
		return -EFAULT;
	bvq = vhost_blk_get_bvq(blk, poll.index);
	if (!bvq || memchr_inv(poll.reserved, 0, sizeof(poll.reserved)) ||
	    (poll.flags & ~(VHOST_BLK_POLL_ADAPTIVE |
			    VHOST_BLK_POLL_COMPLETIONS)))
		return -EINVAL;

	mutex_lock(&blk->dev.mutex);
	ret = vhost_dev_check_owner(&blk->dev);
	if (!ret) {
		mutex_lock(&bvq->vq.mutex);
		bvq->poll_adaptive = poll.flags & VHOST_BLK_POLL_ADAPTIVE;
		/* Bios already polled are reaped all the same. */
		bvq->poll_completions = poll.flags &
					VHOST_BLK_POLL_COMPLETIONS;
		bvq->poll_grow = poll.grow ? poll.grow : 2;
		bvq->poll_shrink = poll.shrink;
		bvq->poll_window_ns = 0;
		mutex_unlock(&bvq->vq.mutex);
	}
	mutex_unlock(&blk->dev.mutex);
	return ret;
}

/* The features that depend on the backend, for GET_FEATURES. */
static u64 vhost_blk_backend_features(struct vhost_blk_backend *be)
{
	u64 features = 0;

	if (!be)
		return 0;
	if (!vhost_blk_writable(be))
		features |= 1ULL << VIRTIO_BLK_F_RO;
	if (vhost_blk_has_discard(be))
		features |= 1ULL << VIRTIO_BLK_F_DISCARD;
	if (vhost_blk_has_write_zeroes(be))
		features |= 1ULL << VIRTIO_BLK_F_WRITE_ZEROES;
	if (be->bdev && bdev_max_secure_erase_sectors(be->bdev))
		features |= 1ULL << VIRTIO_BLK_F_SECURE_ERASE;
	return features;
}

static long vhost_blk_get_features(struct vhost_blk *blk, u64 __user *featurep)
{
	u64 features = VHOST_BLK_FEATURES;

	mutex_lock(&blk->dev.mutex);
	features |= vhost_blk_backend_features(blk->backend);
	mutex_unlock(&blk->dev.mutex);

	if (copy_to_user(featurep, &features, sizeof(features)))
		return -EFAULT;
	return 0;
}

/*
 * The config's writeback byte: 0 once a driver negotiated features
 * without VIRTIO_BLK_F_FLUSH (VIRTIO 1.2, 5.2.5.1: it may never flush);
 * otherwise what VHOST_BLK_SET_CONFIG last wrote, 1 at first.
 */
static u8 vhost_blk_writeback(struct vhost_blk *blk)
{
	struct vhost_virtqueue *vq = &blk->vqs[0].vq;
	u8 wb;

	lockdep_assert_held(&blk->dev.mutex);
	wb = !blk->writethrough;
	mutex_lock(&vq->mutex);
	if (vq->acked_features && !vhost_has_feature(vq, VIRTIO_BLK_F_FLUSH))
		wb = 0;
	mutex_unlock(&vq->mutex);
	return wb;
}

/*
 * Write the virtio-blk config space, as the guest's driver did: only
 * writeback (VIRTIO_BLK_F_CONFIG_WCE) is writable, with 0 or 1.
 */
static long vhost_blk_set_config(struct vhost_blk *blk, void __user *argp)
{
	struct vhost_blk_config __user *c = argp;
	u32 off, len;
	long ret;
	u8 wce;

	if (get_user(off, &c->offset) || get_user(len, &c->len))
		return -EFAULT;
	if (off != offsetof(struct virtio_blk_config, wce) || len != 1)
		return -EINVAL;
	if (get_user(wce, c->buf))
		return -EFAULT;
	if (wce > 1)
		return -EINVAL;

	mutex_lock(&blk->dev.mutex);
	ret = vhost_dev_check_owner(&blk->dev);
	if (!ret)
		WRITE_ONCE(blk->writethrough, !wce);
	mutex_unlock(&blk->dev.mutex);
	return ret;
}

/* Fill in the virtio-blk config space of the attached backend. */
static long vhost_blk_get_config(struct vhost_blk *blk, void __user *argp)
{
	struct vhost_blk_config __user *c = argp;
	struct virtio_blk_config cfg = {};
	struct vhost_blk_backend *be;
	unsigned int lbs, pbs, io_min;
	u32 discard_align, off, len;

	if (get_user(off, &c->offset) || get_user(len, &c->len))
		return -EFAULT;
	if (!len || off >= sizeof(cfg))
		return -EINVAL;
	/* An older kernel's config space ends sooner: say how much. */
	len = min_t(u32, len, sizeof(cfg) - off);

	mutex_lock(&blk->dev.mutex);
	be = blk->backend;
	if (!be) {
		mutex_unlock(&blk->dev.mutex);
		return -ENXIO;
	}
	lbs = be->len_mask + 1;
	pbs = lbs;
	discard_align = lbs;
	if (be->bdev) {
		pbs = bdev_physical_block_size(be->bdev);
		discard_align = max(lbs, bdev_discard_granularity(be->bdev));
		io_min = bdev_io_min(be->bdev) / lbs;
		/* 16 bits: past them, the largest power of two they hold. */
		cfg.min_io_size = cpu_to_le16(io_min > U16_MAX ? 1U << 15 :
					      io_min);
		cfg.opt_io_size = cpu_to_le32(bdev_io_opt(be->bdev) / lbs);
	}
	cfg.capacity = cpu_to_le64(vhost_blk_capacity(be));
	cfg.size_max = cpu_to_le32(VHOST_BLK_SIZE_MAX);
	cfg.seg_max = cpu_to_le32(VHOST_BLK_SEG_MAX);
	cfg.blk_size = cpu_to_le32(lbs);
	cfg.physical_block_exp = ilog2(max(pbs / lbs, 1U));
	cfg.num_queues = cpu_to_le16(blk->dev.nvqs);
	if (vhost_blk_has_discard(be)) {
		cfg.max_discard_sectors =
			cpu_to_le32(VHOST_BLK_MAX_DISCARD_SECTORS);
		cfg.max_discard_seg = cpu_to_le32(VHOST_BLK_MAX_DISCARD_SEG);
		cfg.discard_sector_alignment =
			cpu_to_le32(discard_align >> SECTOR_SHIFT);
	}
	if (vhost_blk_has_write_zeroes(be)) {
		cfg.max_write_zeroes_sectors =
			cpu_to_le32(VHOST_BLK_MAX_DISCARD_SECTORS);
		cfg.max_write_zeroes_seg =
			cpu_to_le32(VHOST_BLK_MAX_DISCARD_SEG);
		cfg.write_zeroes_may_unmap = 1;
	}
	if (be->bdev && bdev_max_secure_erase_sectors(be->bdev)) {
		cfg.max_secure_erase_sectors =
			cpu_to_le32(VHOST_BLK_MAX_DISCARD_SECTORS);
		cfg.max_secure_erase_seg =
			cpu_to_le32(VHOST_BLK_MAX_DISCARD_SEG);
		cfg.secure_erase_sector_alignment =
			cpu_to_le32(discard_align >> SECTOR_SHIFT);
	}
	cfg.wce = vhost_blk_writeback(blk);
	mutex_unlock(&blk->dev.mutex);

	if (copy_to_user(c->buf, (u8 *)&cfg + off, len))
		return -EFAULT;
	return len;
}

/* Start the rings paused by vhost_blk_pause() again, or detach. */
static long vhost_blk_resume(struct vhost_blk *blk,
			     struct vhost_blk_backend *be)
{
	long ret;

	lockdep_assert_held(&blk->dev.mutex);
	if (!be)
		return 0;
	ret = vhost_blk_start_vqs(blk, be);
	if (ret)
		vhost_blk_detach(blk);
	return ret;
}

/* Pages per pin_user_pages_fast(): how long a fatal signal waits. */
#define VHOST_BLK_PIN_BATCH	SZ_64K

/* Unpin @pin's pages, dirty (the device may have written any); free it. */
static void vhost_blk_unpin(struct vhost_blk_pinned *pin)
{
	struct vhost_blk_pin_region *r;
	unsigned int i;

	if (!pin)
		return;
	for (i = 0; i < pin->nregions; i++) {
		r = &pin->regions[i];
		if (!r->pages)
			continue;
		unpin_user_pages_dirty_lock(r->pages, r->npages, true);
		kvfree(r->pages);
	}
	if (mmget_not_zero(pin->mm)) {
		account_locked_vm(pin->mm, pin->npages, false);
		mmput(pin->mm);
	}
	mmdrop(pin->mm);
	kvfree(pin);
}

/* Pin the pages of @r, whose start and npages are set: 0 or -errno. */
static int vhost_blk_pin_region(struct vhost_blk_pin_region *r)
{
	unsigned long done = 0;
	int n, ret;

	r->pages = kvmalloc_array(r->npages, sizeof(*r->pages),
				  GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!r->pages)
		return -ENOMEM;
	while (done < r->npages) {
		n = pin_user_pages_fast(r->start + (done << PAGE_SHIFT),
					min_t(unsigned long, r->npages - done,
					      VHOST_BLK_PIN_BATCH),
					FOLL_WRITE | FOLL_LONGTERM,
					r->pages + done);
		if (n <= 0) {
			ret = n ? n : -EFAULT;
			goto fail;
		}
		done += n;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto fail;
		}
		cond_resched();
	}
	return 0;
fail:
	unpin_user_pages(r->pages, done);
	kvfree(r->pages);
	r->pages = NULL;
	return ret;
}

/* By start, then by size: the same region listed twice sorts together. */
static int vhost_blk_pin_cmp(const void *a, const void *b)
{
	const struct vhost_blk_pin_region *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->npages < y->npages ? -1 : x->npages > y->npages;
}

/*
 * The region of @old that region @r of a new table can have the pages
 * of: the same addresses, @r the first of the new table to have them
 * (@prev is the region before @r, sorted by vhost_blk_pin_cmp(), so that
 * every other region with them comes after @r and gets none).  A region
 * found in @old has its pages: vhost_blk_pin_find() skips one without.
 */
static struct vhost_blk_pin_region *
vhost_blk_pin_reusable(const struct vhost_blk_pinned *old,
		       const struct vhost_blk_pin_region *r,
		       const struct vhost_blk_pin_region *prev)
{
	const struct vhost_blk_pin_region *o;

	if (!old || (prev && prev->start == r->start &&
		     prev->npages == r->npages))
		return NULL;
	o = vhost_blk_pin_find(old, r->start, r->npages << PAGE_SHIFT);
	if (!o || o->start != r->start || o->npages != r->npages)
		return NULL;
	return (struct vhost_blk_pin_region *)o;
}

/*
 * Once @pin has replaced @old: the pages of the regions @pin has the
 * same as @old's, which were left to @old meanwhile, are @pin's now.
 */
static void vhost_blk_pin_take(struct vhost_blk_pinned *pin,
			       struct vhost_blk_pinned *old)
{
	struct vhost_blk_pin_region *r, *o;
	unsigned int i;

	for (i = 0; i < pin->nregions; i++) {
		r = &pin->regions[i];
		if (r->pages)
			continue;
		o = vhost_blk_pin_reusable(old, r, i ? r - 1 : NULL);
		/* Never so: vhost_blk_pin_table() found it, and no other. */
		if (!o)
			continue;
		r->pages = o->pages;
		o->pages = NULL;
		old->npages -= r->npages;
		pin->npages += r->npages;
	}
}

/*
 * Pin the memory table VHOST_SET_MEM_TABLE is given at @argp, in the
 * caller's mm, for VHOST_BLK_SET_MEM_PINNED.  A region that the table in
 * force, @old, has too (memory hot-plug resends every region) is not
 * pinned or charged again: vhost_blk_pin_take() hands its pages over.
 * The vhost core reads the table again: should the VMM change it in
 * between, requests outside what was pinned pin their own pages.
 */
static struct vhost_blk_pinned *
vhost_blk_pin_table(void __user *argp, struct vhost_blk_pinned *old)
{
	struct vhost_memory __user *m = argp;
	struct vhost_memory_region *mr;
	struct vhost_blk_pin_region *r;
	struct vhost_blk_pinned *pin;
	struct vhost_memory mem;
	unsigned int i;
	int ret;

	if (copy_from_user(&mem, m, sizeof(mem)))
		return ERR_PTR(-EFAULT);
	/* The vhost core's own bound (its max_mem_regions is a ushort). */
	if (mem.nregions > U16_MAX)
		return ERR_PTR(-E2BIG);
	mr = vmemdup_user(m->regions, array_size(mem.nregions, sizeof(*mr)));
	if (IS_ERR(mr))
		return ERR_CAST(mr);
	pin = kvzalloc(struct_size(pin, regions, mem.nregions),
		       GFP_KERNEL_ACCOUNT);
	if (!pin) {
		ret = -ENOMEM;
		goto free_mr;
	}
	for (i = 0; i < mem.nregions; i++) {
		r = &pin->regions[i];
		if (!mr[i].memory_size ||
		    !access_ok(u64_to_user_ptr(mr[i].userspace_addr),
			       mr[i].memory_size)) {
			ret = -EFAULT;
			goto free_pin;
		}
		r->start = ALIGN_DOWN(mr[i].userspace_addr, PAGE_SIZE);
		r->npages = (PAGE_ALIGN(mr[i].userspace_addr +
					mr[i].memory_size) - r->start) >>
			    PAGE_SHIFT;
	}
	pin->nregions = mem.nregions;
	sort(pin->regions, pin->nregions, sizeof(*r), vhost_blk_pin_cmp, NULL);
	for (i = 0; i < pin->nregions; i++) {
		r = &pin->regions[i];
		if (!vhost_blk_pin_reusable(old, r, i ? r - 1 : NULL))
			pin->npages += r->npages;
	}
	ret = account_locked_vm(current->mm, pin->npages, true);
	if (ret)
		goto free_pin;
	pin->mm = current->mm;
	mmgrab(pin->mm);
	for (i = 0; i < pin->nregions && !ret; i++) {
		r = &pin->regions[i];
		if (!vhost_blk_pin_reusable(old, r, i ? r - 1 : NULL))
			ret = vhost_blk_pin_region(r);
	}
	if (ret) {
		vhost_blk_unpin(pin);
		pin = ERR_PTR(ret);
	}
	kvfree(mr);
	return pin;
free_pin:
	kvfree(pin);
free_mr:
	kvfree(mr);
	return ERR_PTR(ret);
}

static long vhost_blk_set_mem_pinned(struct vhost_blk *blk, u32 __user *argp)
{
	struct vhost_blk_backend *be;
	u32 on;
	long ret;

	if (get_user(on, argp))
		return -EFAULT;
	if (on > 1)
		return -EINVAL;
	mutex_lock(&blk->dev.mutex);
	ret = vhost_dev_check_owner(&blk->dev);
	if (ret)
		goto out;
	blk->pin_mem = on;
	if (!on && blk->pinned) {
		/* No request may be left on the pages. */
		be = vhost_blk_pause(blk);
		vhost_blk_unpin(blk->pinned);
		blk->pinned = NULL;
		ret = vhost_blk_resume(blk, be);
	}
out:
	mutex_unlock(&blk->dev.mutex);
	return ret;
}

/*
 * A request in flight holds the host addresses of its buffers and status
 * byte, translated through the memory table in force when it was taken.
 * Answer them all before a new table takes over, so that none of them
 * writes where the new table puts other memory.
 */
static long vhost_blk_set_mem_table(struct vhost_blk *blk,
				    void __user *argp)
{
	struct vhost_blk_pinned *pin = NULL;
	struct vhost_blk_backend *be;
	long ret, err;

	mutex_lock(&blk->dev.mutex);
	ret = vhost_dev_check_owner(&blk->dev);
	if (ret)
		goto out;
	/* Pinned while the rings still serve on the old table. */
	if (blk->pin_mem) {
		pin = vhost_blk_pin_table(argp, blk->pinned);
		if (IS_ERR(pin)) {
			ret = PTR_ERR(pin);
			goto out;
		}
	}
	/*
	 * Killable: a VMM changing its memory map must not be held for
	 * ever by storage that stopped answering.  Killed, the old table
	 * stays and the rings start again on it.
	 */
	be = blk->backend;
	if (be) {
		vhost_blk_stop_vqs(blk);
		ret = vhost_blk_drain(blk, true);
	}
	if (!ret)
		ret = vhost_dev_ioctl(&blk->dev, VHOST_SET_MEM_TABLE, argp);
	/* The old table's pages once it is replaced, else the new one's. */
	if (!ret) {
		if (pin && blk->pinned)
			vhost_blk_pin_take(pin, blk->pinned);
		swap(blk->pinned, pin);
	}
	vhost_blk_unpin(pin);
	err = vhost_blk_resume(blk, be);
	if (!ret)
		ret = err;
out:
	mutex_unlock(&blk->dev.mutex);
	return ret;
}

static long vhost_blk_set_features(struct vhost_blk *blk, u64 features)
{
	bool log = features & (1ULL << VHOST_F_LOG_ALL);
	struct vhost_blk_backend *be = NULL;
	struct vhost_virtqueue *vq;
	long ret = 0;
	int i;

	if (features & ~(VHOST_BLK_FEATURES | VHOST_BLK_FEATURES_BACKEND))
		return -EOPNOTSUPP;

	mutex_lock(&blk->dev.mutex);
	/* Restarting the rings touches them in the caller's mm. */
	ret = vhost_dev_check_owner(&blk->dev);
	if (ret)
		goto out;
	if (log && !vhost_log_access_ok(&blk->dev)) {
		ret = -EFAULT;
		goto out;
	}
	/*
	 * Requests taken while logging was off do not know which guest
	 * pages they are yet to write.  Let them all finish before logging
	 * starts, so that every write from then on is logged.
	 */
	if (log && !vhost_has_feature(&blk->vqs[0].vq, VHOST_F_LOG_ALL))
		be = vhost_blk_pause(blk);
	for (i = 0; i < blk->dev.nvqs; i++) {
		vq = &blk->vqs[i].vq;
		mutex_lock(&vq->mutex);
		vq->acked_features = features;
		mutex_unlock(&vq->mutex);
	}
	ret = vhost_blk_resume(blk, be);
out:
	mutex_unlock(&blk->dev.mutex);
	return ret;
}

static long vhost_blk_reset_owner(struct vhost_blk *blk)
{
	struct vhost_iotlb *umem;
	long ret;

	mutex_lock(&blk->dev.mutex);
	ret = vhost_dev_check_owner(&blk->dev);
	if (ret)
		goto out;
	umem = vhost_dev_reset_owner_prepare();
	if (!umem) {
		ret = -ENOMEM;
		goto out;
	}
	vhost_blk_detach(blk);
	vhost_blk_unpin(blk->pinned);
	blk->pinned = NULL;
	vhost_blk_sync_stop(blk);
	vhost_dev_stop(&blk->dev);
	vhost_dev_reset_owner(&blk->dev, umem);
	vhost_blk_charge_put(blk);
out:
	mutex_unlock(&blk->dev.mutex);
	return ret;
}

static unsigned int vhost_blk_max_queues(void)
{
	return clamp(max_queues, 1U, VHOST_BLK_MAX_QUEUES);
}

/* Create @nvqs queues and the vhost device, once. */
static int vhost_blk_init_vqs(struct vhost_blk *blk, unsigned int nvqs)
{
	struct vhost_virtqueue **vqs;
	unsigned int i;

	lockdep_assert_held(&blk->init_mutex);
	blk->vqs = kvcalloc(nvqs, sizeof(*blk->vqs), GFP_KERNEL_ACCOUNT);
	if (!blk->vqs)
		return -ENOMEM;
	vqs = kmalloc_array(nvqs, sizeof(*vqs), GFP_KERNEL_ACCOUNT);
	if (!vqs) {
		kvfree(blk->vqs);
		blk->vqs = NULL;
		return -ENOMEM;
	}

	for (i = 0; i < nvqs; i++) {
		vqs[i] = &blk->vqs[i].vq;
		blk->vqs[i].index = i;
		blk->vqs[i].poll_grow = 2;
		blk->vqs[i].vq.handle_kick = vhost_blk_handle_kick;
		init_llist_head(&blk->vqs[i].done_list);
		vhost_work_init(&blk->vqs[i].done_work, vhost_blk_done_work);
		INIT_LIST_HEAD(&blk->vqs[i].polled);
		init_llist_head(&blk->vqs[i].retry_list);
		spin_lock_init(&blk->vqs[i].dirty_lock);
		bio_list_init(&blk->vqs[i].dirty_bios);
		vhost_work_init(&blk->vqs[i].reap_work, vhost_blk_reap_work);
		INIT_LIST_HEAD(&blk->vqs[i].free_reqs);
	}
	vhost_dev_init(&blk->dev, vqs, nvqs, UIO_MAXIOV, VHOST_BLK_WEIGHT,
		       VHOST_BLK_BYTE_WEIGHT, true, NULL);
	/* Pairs with smp_load_acquire() in vhost_blk_get_ready(). */
	smp_store_release(&blk->ready, true);
	return 0;
}

/* The device with its queues, creating max_queues of them if need be. */
static int vhost_blk_get_ready(struct vhost_blk *blk)
{
	int ret = 0;

	/* Pairs with smp_store_release() in vhost_blk_init_vqs(). */
	if (smp_load_acquire(&blk->ready))
		return 0;
	mutex_lock(&blk->init_mutex);
	if (!blk->ready)
		ret = vhost_blk_init_vqs(blk, vhost_blk_max_queues());
	mutex_unlock(&blk->init_mutex);
	return ret;
}

static long vhost_blk_set_num_queues(struct vhost_blk *blk,
				     u32 __user *argp)
{
	u32 nvqs;
	long ret;

	if (get_user(nvqs, argp))
		return -EFAULT;
	if (!nvqs || nvqs > vhost_blk_max_queues())
		return -EINVAL;

	mutex_lock(&blk->init_mutex);
	ret = blk->ready ? -EBUSY : vhost_blk_init_vqs(blk, nvqs);
	mutex_unlock(&blk->init_mutex);
	return ret;
}

static int vhost_blk_open(struct inode *inode, struct file *f)
{
	struct vhost_blk *blk;

	blk = kzalloc_obj(*blk, GFP_KERNEL_ACCOUNT);
	if (!blk)
		return -ENOMEM;
	mutex_init(&blk->init_mutex);
	atomic_set(&blk->inflight, 0);
	spin_lock_init(&blk->sync_lock);
	INIT_LIST_HEAD(&blk->sync_list);
	f->private_data = blk;
	return 0;
}

static int vhost_blk_release(struct inode *inode, struct file *f)
{
	struct vhost_blk *blk = f->private_data;

	if (!blk->ready)
		goto free;

	/* End any busy poll now rather than at its window: never undone. */
	atomic_inc(&blk->ctl_waiters);
	mutex_lock(&blk->dev.mutex);
	vhost_blk_detach(blk);
	vhost_blk_unpin(blk->pinned);
	blk->pinned = NULL;
	vhost_blk_sync_stop(blk);
	mutex_unlock(&blk->dev.mutex);

	vhost_dev_stop(&blk->dev);
	vhost_dev_cleanup(&blk->dev);
	vhost_blk_charge_put(blk);
	kfree(blk->dev.vqs);
	kvfree(blk->vqs);
free:
	mutex_destroy(&blk->init_mutex);
	kfree(blk);
	return 0;
}

static long vhost_blk_do_ioctl(struct vhost_blk *blk, unsigned int ioctl,
			       unsigned long arg)
{
	void __user *argp = (void __user *)arg;
	struct vhost_vring_file backend;
	u64 features;
	long ret;

	if (ioctl == VHOST_BLK_SET_NUM_QUEUES)
		return vhost_blk_set_num_queues(blk, argp);
	ret = vhost_blk_get_ready(blk);
	if (ret)
		return ret;

	switch (ioctl) {
	case VHOST_BLK_SET_BACKEND:
		if (copy_from_user(&backend, argp, sizeof(backend)))
			return -EFAULT;
		/* One backend serves every queue. */
		if (backend.index)
			return -EINVAL;
		return vhost_blk_set_backend(blk, backend.fd);
	case VHOST_BLK_SET_SERIAL:
		return vhost_blk_set_serial(blk, argp);
	case VHOST_BLK_GET_CONFIG:
		return vhost_blk_get_config(blk, argp);
	case VHOST_BLK_SET_CONFIG:
		return vhost_blk_set_config(blk, argp);
	case VHOST_BLK_GET_VRING_STATS:
		return vhost_blk_get_vring_stats(blk, argp);
	case VHOST_BLK_SET_VRING_POLL:
		return vhost_blk_set_vring_poll(blk, argp);
	case VHOST_GET_FEATURES:
		return vhost_blk_get_features(blk, argp);
	case VHOST_SET_FEATURES:
		if (copy_from_user(&features, argp, sizeof(features)))
			return -EFAULT;
		return vhost_blk_set_features(blk, features);
	case VHOST_SET_MEM_TABLE:
		return vhost_blk_set_mem_table(blk, argp);
	case VHOST_RESET_OWNER:
		return vhost_blk_reset_owner(blk);
	case VHOST_BLK_CHARGE_PEER:
		return vhost_blk_charge_peer(blk, argp);
	case VHOST_BLK_SET_MEM_PINNED:
		return vhost_blk_set_mem_pinned(blk, argp);
	case VHOST_NEW_WORKER:
	case VHOST_FREE_WORKER:
	case VHOST_ATTACH_VRING_WORKER:
	case VHOST_GET_VRING_WORKER:
		mutex_lock(&blk->dev.mutex);
		ret = vhost_worker_ioctl(&blk->dev, ioctl, argp);
		mutex_unlock(&blk->dev.mutex);
		return ret;
	default:
		mutex_lock(&blk->dev.mutex);
		ret = vhost_dev_ioctl(&blk->dev, ioctl, argp);
		if (ret == -ENOIOCTLCMD)
			ret = vhost_vring_ioctl(&blk->dev, ioctl, argp);
		else
			vhost_dev_flush(&blk->dev);
		mutex_unlock(&blk->dev.mutex);
		return ret;
	}
}

static long vhost_blk_ioctl(struct file *f, unsigned int ioctl,
			    unsigned long arg)
{
	struct vhost_blk *blk = f->private_data;
	long ret;

	/* Busy polls end while we may wait for a ring's mutex. */
	atomic_inc(&blk->ctl_waiters);
	ret = vhost_blk_do_ioctl(blk, ioctl, arg);
	atomic_dec(&blk->ctl_waiters);
	return ret;
}

static const struct file_operations vhost_blk_fops = {
	.owner		= THIS_MODULE,
	.open		= vhost_blk_open,
	.release	= vhost_blk_release,
	.unlocked_ioctl	= vhost_blk_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

static struct miscdevice vhost_blk_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "vhost-blk",
	.fops	= &vhost_blk_fops,
};

static int __init vhost_blk_init(void)
{
	int ret;

	vhost_blk_req_cache = KMEM_CACHE(vhost_blk_req, SLAB_ACCOUNT);
	if (!vhost_blk_req_cache)
		return -ENOMEM;

	ret = misc_register(&vhost_blk_misc);
	if (ret)
		kmem_cache_destroy(vhost_blk_req_cache);
	return ret;
}
module_init(vhost_blk_init);

static void __exit vhost_blk_exit(void)
{
	misc_deregister(&vhost_blk_misc);
	kmem_cache_destroy(vhost_blk_req_cache);
}
module_exit(vhost_blk_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Host kernel accelerator for virtio-blk");
