/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost-blk backport layer: <linux/sched/vhost_task.h> on Linux 6.1.
 *
 * vhost_task (6.4) runs a function as a thread of its owner.  6.1 has no
 * such thing: here a kthread stands in, put into every cgroup of the
 * owner as 6.1's vhost core puts its own worker (vhost_attach_cgroups()),
 * and charging the owner's memory cgroup.  It is never killed with its
 * owner: the owner's exit closes the device, which stops it, so
 * handle_kill is never called.
 *
 * Out-of-tree and DKMS builds only (see backport/backport.h).
 */
#ifndef _VHOST_BLK_BACKPORT_VHOST_TASK_H
#define _VHOST_BLK_BACKPORT_VHOST_TASK_H

#include <linux/version.h>

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
#include_next <linux/sched/vhost_task.h>
#else

#include <linux/cgroup.h>
#include <linux/err.h>
#include <linux/kthread.h>
#include <linux/memcontrol.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

struct vhost_task {
	struct task_struct *task;
	bool (*fn)(void *data);
	void *data;
	struct mem_cgroup *memcg;	/* a reference, dropped by stop */
};

static inline int vhost_blk_backport_task_fn(void *arg)
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
	task = kthread_create(vhost_blk_backport_task_fn, vtsk, "%s", name);
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

#endif /* < 6.4 */
#endif /* _VHOST_BLK_BACKPORT_VHOST_TASK_H */
