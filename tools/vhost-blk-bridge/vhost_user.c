// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: the vhost-user back-end.
 *
 * Messages are read one at a time from the frontend's socket, checked
 * (version, size, file descriptors), and turned into vhost ioctls on
 * /dev/vhost-blk: the frontend's memory regions are mapped here and handed
 * to the module with our own addresses, ring addresses are translated into
 * those mappings, kick and call eventfds go straight to the module.  The
 * disk is attached (VHOST_BLK_SET_BACKEND) while every ring the frontend
 * has set up is complete and enabled, and detached, which waits for the
 * requests in flight, before anything the module refuses or must not see
 * on a running ring: SET_VRING_NUM / BASE / ADDR, a new memory table, new
 * features, GET_VRING_BASE.  No thread and no buffer of the data path is
 * ever in this process.
 */
#include <errno.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "log.h"
#include "vhost_user.h"

#define F(bit)		(1ULL << (bit))

/* A handler's answer: not fatal, but report failure with REPLY_ACK. */
#define VU_NACK		1

/* ------------------------------------------------------------ helpers */

struct vu_reply {
	bool send;
	uint32_t size;
	union vu_payload payload;
};

static int fail(const struct vu_msg *m, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Print "REQUEST: reason" and return err (negative: fatal). */
static int fail(const struct vu_msg *m, int err, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	vbb_err("%s: %s", vu_request_name(m->hdr.request), buf);
	return err;
}

static unsigned int num_queues(const struct vu_session *s)
{
	return s->p->kdev.num_queues;
}

/* The vring a state / addr / u64 index names, or NULL (printed). */
static struct vu_vring *msg_vring(struct vu_session *s,
				  const struct vu_msg *m, uint32_t index)
{
	if (index >= num_queues(s)) {
		fail(m, -EINVAL, "vring index %u out of range (the device has %u queue%s)",
		     index, num_queues(s), num_queues(s) == 1 ? "" : "s");
		return NULL;
	}
	return &s->vrings[index];
}

static void set_reply_u64(struct vu_reply *r, uint64_t v)
{
	r->send = true;
	r->size = sizeof(r->payload.u64);
	r->payload.u64 = v;
}

void *vu_uva_to_host(const struct vu_session *s, uint64_t uva, uint64_t len)
{
	unsigned int i;

	for (i = 0; i < s->nregions; i++) {
		const struct vu_mem_region *r = &s->regions[i].r;
		uint64_t off;

		if (uva < r->userspace_addr)
			continue;
		off = uva - r->userspace_addr;
		if (off >= r->memory_size || len > r->memory_size - off)
			continue;
		return s->regions[i].host + off;
	}
	return NULL;
}

static void unmap_regions(struct vu_region *regions, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (regions[i].mmap_addr)
			munmap(regions[i].mmap_addr, regions[i].mmap_len);
		regions[i].mmap_addr = NULL;
		regions[i].host = NULL;
	}
}

/* Detach the disk if attached: the module completes what is in flight. */
static int quiesce(struct vu_session *s)
{
	if (!s->kdev.attached)
		return 0;
	return kdev_detach(&s->kdev);
}

static bool vring_ready(const struct vu_session *s, const struct vu_vring *v)
{
	/*
	 * Without VHOST_USER_F_PROTOCOL_FEATURES a ring is enabled from the
	 * start; with it, only after SET_VRING_ENABLE 1.
	 */
	bool enabled = (s->acked_features & F(VU_F_PROTOCOL_FEATURES)) ?
		       v->enabled : true;

	return v->addr_set && !v->unmapped && v->kick_set && v->call_set &&
	       enabled;
}

/*
 * Attach the disk when every ring the frontend has set up (given an
 * address since its last stop) has its kick and call eventfds and is
 * enabled, and at least one is; detach it when that stops being true.
 */
static int sync_backend(struct vu_session *s)
{
	unsigned int i, ready = 0;
	bool blocked = false, want;

	for (i = 0; i < num_queues(s); i++) {
		const struct vu_vring *v = &s->vrings[i];

		/* An unmapped ring waits for its memory; the others run. */
		if (!v->addr_set || v->unmapped)
			continue;
		if (vring_ready(s, v))
			ready++;
		else
			blocked = true;
	}
	want = s->mem_set && ready && !blocked;
	if (want && !s->kdev.attached) {
		vbb_dbg("%u ring%s ready: attaching %s", ready,
			ready == 1 ? "" : "s", s->p->kdev.disk->path);
		return kdev_attach(&s->kdev);
	}
	if (!want && s->kdev.attached)
		return kdev_detach(&s->kdev);
	return 0;
}

/* A dirty log bit covers a page of this size (the vhost core's). */
#define VU_LOG_PAGE	0x1000ULL

/* Bytes of a split ring's used ring of @num entries, with avail_event. */
static uint64_t used_ring_len(uint64_t num)
{
	return 6 + 8 * num;
}

/*
 * Whether a dirty log of @log_size bytes covers guest addresses [@gpa,
 * @gpa + @len).  The vhost core sets the bit of a page at the log's
 * address + page / 8 after an access_ok() of that address alone: a log
 * shorter than what it is asked to log would have the kernel set bits
 * past it, anywhere in this process.
 */
static bool log_covers(uint64_t log_size, uint64_t gpa, uint64_t len)
{
	uint64_t last = gpa + len - 1;

	if (!len)
		return true;
	return last >= gpa && last / VU_LOG_PAGE / 8 < log_size;
}

/*
 * While logging is on, a log of @log_size bytes must cover what the
 * kernel logs: with VHOST_F_LOG_ALL (@log_all) every byte of the
 * regions @rg[@n], and the used ring of every ring set up with
 * VHOST_VRING_F_LOG (@ring: one more, not set up yet, or NULL).  0, or
 * fail() with what is not covered.
 */
static int log_check(const struct vu_session *s, const struct vu_msg *m,
		     uint64_t log_size, bool log_all,
		     const struct vu_region *rg, unsigned int n,
		     const struct vu_vring *ring)
{
	const struct vu_vring *v;
	unsigned int i;

	for (i = 0; log_all && i < n; i++)
		if (!log_covers(log_size, rg[i].r.guest_phys_addr,
				rg[i].r.memory_size))
			return fail(m, -EINVAL,
				    "the dirty log (%llu bytes) does not cover guest memory 0x%llx + 0x%llx",
				    (unsigned long long)log_size,
				    (unsigned long long)rg[i].r.guest_phys_addr,
				    (unsigned long long)rg[i].r.memory_size);
	for (i = 0; i <= num_queues(s); i++) {
		v = i < num_queues(s) ? &s->vrings[i] : ring;
		if (!v || !v->addr_set ||
		    !(v->addr.flags & (1u << VHOST_VRING_F_LOG)))
			continue;
		if (!log_covers(log_size, v->addr.log_guest_addr,
				used_ring_len(v->num_set ? v->num : 0)))
			return fail(m, -EINVAL,
				    "the dirty log (%llu bytes) does not cover the used ring of vring %u at guest 0x%llx",
				    (unsigned long long)log_size,
				    v->addr.index,
				    (unsigned long long)v->addr.log_guest_addr);
	}
	return 0;
}

static bool log_all(const struct vu_session *s)
{
	return s->acked_features & F(VHOST_F_LOG_ALL);
}

/* Give the module ring @index at our addresses for the frontend's. */
/*
 * Ring @v's three parts at our addresses, each NULL if it is not all
 * inside the memory table.  Whether all three are.
 */
static bool vring_translate(const struct vu_session *s,
			    const struct vu_vring *v, void **desc,
			    void **avail, void **used)
{
	uint64_t num = v->num_set ? v->num : 0;

	/* Split ring sizes, with the event index words. */
	*desc = vu_uva_to_host(s, v->addr.desc_user_addr, num ? 16 * num : 1);
	*avail = vu_uva_to_host(s, v->addr.avail_user_addr, 6 + 2 * num);
	*used = vu_uva_to_host(s, v->addr.used_user_addr, used_ring_len(num));
	return *desc && *avail && *used;
}

static int kernel_vring_addr(struct vu_session *s, const struct vu_msg *m,
			     unsigned int index)
{
	struct vu_vring *v = &s->vrings[index];
	struct vhost_vring_addr ka = { .index = index };
	void *desc, *avail, *used;

	if (!vring_translate(s, v, &desc, &avail, &used))
		return fail(m, -EFAULT,
			    "vring %u: %s ring at 0x%llx is not inside the memory table",
			    index, !desc ? "descriptor" : !avail ? "available" : "used",
			    (unsigned long long)(!desc ? v->addr.desc_user_addr :
						 !avail ? v->addr.avail_user_addr :
						 v->addr.used_user_addr));
	ka.desc_user_addr = (uintptr_t)desc;
	ka.avail_user_addr = (uintptr_t)avail;
	ka.used_user_addr = (uintptr_t)used;
	/* Migration: the used ring's guest address, as the frontend said. */
	ka.flags = v->addr.flags & (1u << VHOST_VRING_F_LOG);
	ka.log_guest_addr = v->addr.log_guest_addr;
	return KDEV_IOCTL(&s->kdev, VHOST_SET_VRING_ADDR, &ka);
}

/* The frontend stopped ring @index: make sure no attach restarts it. */
static int stop_vring(struct vu_session *s, unsigned int index)
{
	struct vu_vring *v = &s->vrings[index];
	struct vhost_vring_file kick = { .index = index, .fd = VHOST_FILE_UNBIND };
	struct vhost_vring_addr none = { .index = index };
	int ret = 0;

	if (v->kick_set)
		ret = KDEV_IOCTL(&s->kdev, VHOST_SET_VRING_KICK, &kick);
	/* The module starts only rings with a descriptor table. */
	if (!ret && v->addr_set)
		ret = KDEV_IOCTL(&s->kdev, VHOST_SET_VRING_ADDR, &none);
	v->kick_set = false;
	v->addr_set = false;
	v->unmapped = false;
	return ret;
}

/* ----------------------------------------------------------- handlers */

static int h_get_features(struct vu_session *s, struct vu_msg *m,
			  struct vu_reply *r)
{
	(void)m;
	set_reply_u64(r, s->features | F(VU_F_PROTOCOL_FEATURES));
	return 0;
}

static int h_set_features(struct vu_session *s, struct vu_msg *m,
			  struct vu_reply *r)
{
	uint64_t offered = s->features | F(VU_F_PROTOCOL_FEATURES);
	uint64_t f = m->payload.u64, kf;
	int ret;

	(void)r;
	if (f & ~offered)
		return fail(m, -EINVAL,
			    "features 0x%llx include 0x%llx, never offered (offered 0x%llx)",
			    (unsigned long long)f,
			    (unsigned long long)(f & ~offered),
			    (unsigned long long)offered);
	if (f & F(VHOST_F_LOG_ALL)) {
		if (!s->log_map)
			return fail(m, -EINVAL,
				    "VHOST_F_LOG_ALL without SET_LOG_BASE");
		ret = log_check(s, m, s->log_size, true, s->regions,
				s->nregions, NULL);
		if (ret)
			return ret;
	}
	ret = quiesce(s);
	if (ret)
		return ret;
	kf = f & ~F(VU_F_PROTOCOL_FEATURES);
	ret = KDEV_IOCTL(&s->kdev, VHOST_SET_FEATURES, &kf);
	if (ret)
		return ret;
	s->acked_features = f;
	s->features_set = true;
	return 0;
}

static int h_set_owner(struct vu_session *s, struct vu_msg *m,
		       struct vu_reply *r)
{
	(void)m;
	(void)r;
	/* /dev/vhost-blk got VHOST_SET_OWNER when the frontend connected. */
	if (s->owner)
		vbb_dbg("SET_OWNER again");
	s->owner = true;
	return 0;
}

static int h_reset_owner(struct vu_session *s, struct vu_msg *m,
			 struct vu_reply *r)
{
	unsigned int i;
	int ret;

	(void)m;
	(void)r;
	/* Deprecated; vhost-user.rst suggests disabling every ring. */
	ret = quiesce(s);
	for (i = 0; i < num_queues(s) && !ret; i++) {
		ret = stop_vring(s, i);
		s->vrings[i].enabled = false;
	}
	return ret;
}

/*
 * The page size of the memory behind @fd: a hugetlbfs file (QEMU's
 * memory-backend-file on /dev/hugepages, or a memfd with hugetlb=on) maps
 * only at offsets and lengths of its huge page size.
 */
static uint64_t fd_page_size(int fd)
{
	struct statfs sfs;

	if (fstatfs(fd, &sfs) == 0 && sfs.f_type == HUGETLBFS_MAGIC)
		return sfs.f_bsize;
	return sysconf(_SC_PAGESIZE);
}

/*
 * Map @len bytes of guest memory at @offset of @fd, from the page of the
 * fd's page size that holds @offset: *@map and *@map_len are what to
 * munmap, the return value the address of @offset.  MAP_NORESERVE, as
 * QEMU maps it: the pages are the frontend's, reserved (or not) there.
 * MADV_DONTDUMP: a core of the bridge holds no guest RAM.
 */
static void *map_guest(int fd, uint64_t offset, uint64_t len, void **map,
		       size_t *map_len)
{
	uint64_t page = fd_page_size(fd), delta = offset & (page - 1);
	uint64_t span = (len + delta + page - 1) & ~(page - 1);
	void *addr;

	if (span < len || span > SIZE_MAX) {
		errno = EOVERFLOW;
		return NULL;
	}
	addr = mmap(NULL, span, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_NORESERVE, fd, (off_t)(offset - delta));
	if (addr == MAP_FAILED)
		return NULL;
	if (madvise(addr, span, MADV_DONTDUMP))
		vbb_warn("madvise(MADV_DONTDUMP) on guest memory: %s",
			 strerror(errno));
	*map = addr;
	*map_len = span;
	return (uint8_t *)addr + delta;
}

/* A region as the frontend describes it: sizes that do not wrap. */
static int check_region(struct vu_msg *m, unsigned int i,
			const struct vu_mem_region *mr)
{
	if (mr->memory_size &&
	    mr->guest_phys_addr + mr->memory_size >= mr->guest_phys_addr &&
	    mr->userspace_addr + mr->memory_size >= mr->userspace_addr &&
	    mr->mmap_offset + mr->memory_size >= mr->mmap_offset)
		return 0;
	return fail(m, -EINVAL,
		    "region %u: bad size 0x%llx (guest 0x%llx, user 0x%llx, offset 0x%llx)",
		    i, (unsigned long long)mr->memory_size,
		    (unsigned long long)mr->guest_phys_addr,
		    (unsigned long long)mr->userspace_addr,
		    (unsigned long long)mr->mmap_offset);
}

/* Map region @i of the message, from @fd, into @rg.  0 or -errno. */
static int map_region(struct vu_msg *m, unsigned int i, int fd,
		      const struct vu_mem_region *mr, struct vu_region *rg)
{
	int ret = check_region(m, i, mr);

	if (ret)
		return ret;
	memset(rg, 0, sizeof(*rg));
	rg->r = *mr;
	rg->host = map_guest(fd, mr->mmap_offset, mr->memory_size,
			     &rg->mmap_addr, &rg->mmap_len);
	if (!rg->host)
		return fail(m, -errno,
			    "mmap of region %u (%llu bytes at offset 0x%llx of fd %d, page size %llu): %s",
			    i, (unsigned long long)mr->memory_size,
			    (unsigned long long)mr->mmap_offset, fd,
			    (unsigned long long)fd_page_size(fd),
			    strerror(errno));
	vbb_dbg("region %u: guest 0x%llx size 0x%llx frontend 0x%llx -> %p",
		i, (unsigned long long)mr->guest_phys_addr,
		(unsigned long long)mr->memory_size,
		(unsigned long long)mr->userspace_addr, rg->host);
	return 0;
}

/*
 * Give the module @n regions as its memory table (VHOST_SET_MEM_TABLE, at
 * our mappings), the rings stopped first.  0 or -errno.
 */
static int kernel_mem_table(struct vu_session *s, struct vu_msg *m,
			    const struct vu_region *rg, unsigned int n)
{
	struct vhost_memory *km;
	unsigned int i;
	int ret;

	if (s->log_map) {
		ret = log_check(s, m, s->log_size, log_all(s), rg, n, NULL);
		if (ret)
			return ret;
	}
	km = calloc(1, sizeof(*km) + n * sizeof(km->regions[0]));
	if (!km)
		return fail(m, -ENOMEM, "out of memory");
	km->nregions = n;
	for (i = 0; i < n; i++) {
		km->regions[i].guest_phys_addr = rg[i].r.guest_phys_addr;
		km->regions[i].memory_size = rg[i].r.memory_size;
		km->regions[i].userspace_addr = (uintptr_t)rg[i].host;
	}
	ret = quiesce(s);
	if (!ret)
		ret = KDEV_IOCTL(&s->kdev, VHOST_SET_MEM_TABLE, km);
	if (ret == -ENOMEM && s->p->kdev.pin_memory)
		vbb_err("--pin-memory: the guest's memory could not be pinned: the bridge needs CAP_IPC_LOCK or an RLIMIT_MEMLOCK as large as the guest's memory (LimitMEMLOCK= in its unit)");
	free(km);
	return ret;
}

/* Whether ring @v's three parts are all inside the memory table. */
static bool vring_mapped(const struct vu_session *s, const struct vu_vring *v)
{
	void *desc, *avail, *used;

	return vring_translate(s, v, &desc, &avail, &used);
}

/*
 * The rings move with the memory: translate them again.  A ring whose
 * memory is no longer in the table (a region removed, and maybe added
 * back in the next message, as QEMU does when a region changes) is
 * cleared in the kernel and waits, unmapped, as libvhost-user lets it:
 * the disk is detached here (kernel_mem_table()), and sync_backend()
 * attaches it again for the rings that are mapped.
 */
static int retranslate_rings(struct vu_session *s, struct vu_msg *m)
{
	struct vhost_vring_addr none;
	struct vu_vring *v;
	unsigned int i;
	int ret;

	for (i = 0; i < num_queues(s); i++) {
		v = &s->vrings[i];
		if (!v->addr_set)
			continue;
		if (vring_mapped(s, v)) {
			ret = kernel_vring_addr(s, m, i);
			if (ret)
				return ret;
			if (v->unmapped)
				vbb_info("vring %u: its memory is back", i);
			v->unmapped = false;
			continue;
		}
		if (!v->unmapped)
			vbb_info("vring %u: its memory left the table, the ring waits for it",
				 i);
		none = (struct vhost_vring_addr){ .index = i };
		ret = KDEV_IOCTL(&s->kdev, VHOST_SET_VRING_ADDR, &none);
		if (ret)
			return ret;
		v->unmapped = true;
	}
	return 0;
}

static int h_set_mem_table(struct vu_session *s, struct vu_msg *m,
			   struct vu_reply *r)
{
	const struct vu_memory *mem = &m->payload.memory;
	struct vu_region nr[VU_MAX_REGIONS];
	unsigned int i, n = mem->nregions, nold;
	size_t want;
	int ret;

	(void)r;
	if (n == 0 || n > VU_MAX_REGIONS)
		return fail(m, -EINVAL, "%u regions (1 to %d allowed)", n,
			    VU_MAX_REGIONS);
	want = offsetof(struct vu_memory, regions) + n * sizeof(mem->regions[0]);
	if (m->hdr.size != want)
		return fail(m, -EINVAL,
			    "payload of %u bytes for %u regions, expected %zu",
			    m->hdr.size, n, want);
	if (m->nfds != n)
		return fail(m, -EINVAL, "%u regions but %u file descriptors",
			    n, m->nfds);

	memset(nr, 0, sizeof(nr));
	for (i = 0; i < n; i++) {
		ret = map_region(m, i, m->fds[i], &mem->regions[i], &nr[i]);
		if (ret)
			goto err;
	}
	ret = kernel_mem_table(s, m, nr, n);
	if (ret)
		goto err;

	/* The old mappings go once the module no longer uses them. */
	nold = s->nregions;
	unmap_regions(s->regions, nold);
	memcpy(s->regions, nr, n * sizeof(nr[0]));
	s->nregions = n;
	s->mem_set = true;
	return retranslate_rings(s, m);
err:
	unmap_regions(nr, n);
	return ret;
}

/* The slots GET_MAX_MEM_SLOTS announces: ours, or the module's if fewer. */
static unsigned int max_mem_slots(const struct vu_session *s)
{
	unsigned int n = s->p->max_mem_slots;

	return n && n < VU_MAX_MEM_SLOTS ? n : VU_MAX_MEM_SLOTS;
}

static int h_get_max_mem_slots(struct vu_session *s, struct vu_msg *m,
			       struct vu_reply *r)
{
	(void)m;
	set_reply_u64(r, max_mem_slots(s));
	return 0;
}

/* ADD_MEM_REG: one more region (memory hot-plug, or the boot's ones). */
static int h_add_mem_reg(struct vu_session *s, struct vu_msg *m,
			 struct vu_reply *r)
{
	const struct vu_mem_region *mr = &m->payload.mem_reg.region;
	struct vu_region all[VU_MAX_MEM_SLOTS];
	unsigned int n = s->nregions;
	int ret;

	(void)r;
	if (n >= max_mem_slots(s))
		return fail(m, -ENOSPC, "all %u memory slots are in use",
			    max_mem_slots(s));
	memcpy(all, s->regions, n * sizeof(all[0]));
	ret = map_region(m, n, m->fds[0], mr, &all[n]);
	if (ret)
		return ret;
	ret = kernel_mem_table(s, m, all, n + 1);
	if (ret) {
		unmap_regions(&all[n], 1);
		return ret;
	}
	s->regions[n] = all[n];
	s->nregions = n + 1;
	s->mem_set = true;
	return retranslate_rings(s, m);
}

/*
 * REM_MEM_REG: the region with the same guest address, frontend address
 * and size goes (its mmap_offset is ignored, as the protocol says, and an
 * fd sent with it is closed unused).
 */
static int h_rem_mem_reg(struct vu_session *s, struct vu_msg *m,
			 struct vu_reply *r)
{
	const struct vu_mem_region *mr = &m->payload.mem_reg.region;
	struct vu_region all[VU_MAX_MEM_SLOTS], gone;
	unsigned int i, n = s->nregions;
	int ret;

	(void)r;
	for (i = 0; i < n; i++)
		if (s->regions[i].r.guest_phys_addr == mr->guest_phys_addr &&
		    s->regions[i].r.userspace_addr == mr->userspace_addr &&
		    s->regions[i].r.memory_size == mr->memory_size)
			break;
	if (i == n)
		return fail(m, -ENOENT,
			    "no region at guest 0x%llx, frontend 0x%llx, size 0x%llx",
			    (unsigned long long)mr->guest_phys_addr,
			    (unsigned long long)mr->userspace_addr,
			    (unsigned long long)mr->memory_size);
	memcpy(all, s->regions, i * sizeof(all[0]));
	memcpy(&all[i], &s->regions[i + 1], (n - i - 1) * sizeof(all[0]));
	ret = kernel_mem_table(s, m, all, n - 1);
	if (ret)
		return ret;
	gone = s->regions[i];
	memcpy(s->regions, all, (n - 1) * sizeof(all[0]));
	s->nregions = n - 1;
	unmap_regions(&gone, 1);
	return retranslate_rings(s, m);
}

/*
 * Migration: map the dirty log the frontend shares and give the module
 * its address here, where the log of guest address 0 is mmap_offset into
 * the fd.  The old log is unmapped once the module no longer uses it.
 */
static int h_set_log_base(struct vu_session *s, struct vu_msg *m,
			  struct vu_reply *r)
{
	const struct vu_log *log = &m->payload.log;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t delta = log->mmap_offset & (page - 1), base;
	size_t len;
	void *addr;
	int ret;

	if (!(s->protocol_features & (1ULL << VU_PROTOCOL_F_LOG_SHMFD)))
		return fail(m, -EINVAL,
			    "without VHOST_USER_PROTOCOL_F_LOG_SHMFD the log is not shared");
	if (!log->mmap_size || log->mmap_size > SIZE_MAX - delta ||
	    log->mmap_offset + log->mmap_size < log->mmap_offset)
		return fail(m, -EINVAL, "bad log: 0x%llx bytes at offset 0x%llx",
			    (unsigned long long)log->mmap_size,
			    (unsigned long long)log->mmap_offset);
	ret = log_check(s, m, log->mmap_size, log_all(s), s->regions,
			s->nregions, NULL);
	if (ret)
		return ret;
	len = (size_t)(log->mmap_size + delta);
	addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m->fds[0],
		    (off_t)(log->mmap_offset - delta));
	if (addr == MAP_FAILED)
		return fail(m, -errno,
			    "mmap of the log (%llu bytes at offset 0x%llx of fd %d): %s",
			    (unsigned long long)log->mmap_size,
			    (unsigned long long)log->mmap_offset, m->fds[0],
			    strerror(errno));
	base = (uintptr_t)addr + delta;
	ret = KDEV_IOCTL(&s->kdev, VHOST_SET_LOG_BASE, &base);
	if (ret) {
		munmap(addr, len);
		return ret;
	}
	if (s->log_map)
		munmap(s->log_map, s->log_map_len);
	s->log_map = addr;
	s->log_map_len = len;
	s->log_size = log->mmap_size;
	vbb_dbg("dirty log: 0x%llx bytes -> %p", (unsigned long long)log->mmap_size,
		(void *)(uintptr_t)base);
	/* vhost-user.rst: a reply, which QEMU waits for. */
	set_reply_u64(r, 0);
	return 0;
}

static int h_set_vring_num(struct vu_session *s, struct vu_msg *m,
			   struct vu_reply *r)
{
	struct vhost_vring_state st = m->payload.state;
	struct vu_vring *v = msg_vring(s, m, st.index);
	int ret;

	(void)r;
	if (!v)
		return -EINVAL;
	if (s->log_map) {
		struct vu_vring nv = *v;

		nv.num = st.num;
		nv.num_set = true;
		ret = log_check(s, m, s->log_size, false, NULL, 0, &nv);
		if (ret)
			return ret;
	}
	/* The module refuses a new size on a running ring (EBUSY). */
	ret = quiesce(s);
	if (ret)
		return ret;
	ret = KDEV_IOCTL(&s->kdev, VHOST_SET_VRING_NUM, &st);
	if (ret)
		return ret;
	v->num = st.num;
	v->num_set = true;
	if (st.num < kdev_seg_max(s->p->kdev.queue_size) + 2)
		vbb_warn("ring %u has %u entries, fewer than seg_max %u + 2 (--queue-size %u): a guest without indirect descriptors may build a request it cannot post",
			 st.index, st.num, kdev_seg_max(s->p->kdev.queue_size),
			 s->p->kdev.queue_size ? s->p->kdev.queue_size :
			 KDEV_DEFAULT_QUEUE_SIZE);
	/* Check the ring still fits where it is. */
	if (v->addr_set && s->mem_set)
		return retranslate_rings(s, m);
	return 0;
}

static int h_set_vring_addr(struct vu_session *s, struct vu_msg *m,
			    struct vu_reply *r)
{
	const struct vhost_vring_addr *a = &m->payload.addr;
	struct vu_vring *v = msg_vring(s, m, a->index);
	int ret;

	(void)r;
	if (!v)
		return -EINVAL;
	if (a->flags & ~(1u << VHOST_VRING_F_LOG))
		return fail(m, -EINVAL, "vring %u: unknown flags 0x%x",
			    a->index, a->flags);
	if ((a->flags & (1u << VHOST_VRING_F_LOG)) && !s->log_map)
		return fail(m, -EINVAL,
			    "vring %u: VHOST_VRING_F_LOG without SET_LOG_BASE",
			    a->index);
	if (!s->mem_set)
		return fail(m, -EINVAL, "vring %u: no SET_MEM_TABLE yet",
			    a->index);
	if (s->log_map) {
		struct vu_vring nv = *v;

		nv.addr = *a;
		nv.addr_set = true;
		ret = log_check(s, m, s->log_size, false, NULL, 0, &nv);
		if (ret)
			return ret;
	}
	ret = quiesce(s);
	if (ret)
		return ret;
	v->addr = *a;
	ret = kernel_vring_addr(s, m, a->index);
	if (ret)
		return ret;
	v->addr_set = true;
	v->unmapped = false;
	return 0;
}

static int h_set_vring_base(struct vu_session *s, struct vu_msg *m,
			    struct vu_reply *r)
{
	struct vhost_vring_state st = m->payload.state;
	int ret;

	(void)r;
	if (!msg_vring(s, m, st.index))
		return -EINVAL;
	/* Refused on a running ring too. */
	ret = quiesce(s);
	if (ret)
		return ret;
	return KDEV_IOCTL(&s->kdev, VHOST_SET_VRING_BASE, &st);
}

static int h_get_vring_base(struct vu_session *s, struct vu_msg *m,
			    struct vu_reply *r)
{
	struct vhost_vring_state st = { .index = m->payload.state.index };
	int ret;

	if (!msg_vring(s, m, st.index))
		return -EINVAL;
	/*
	 * Stop the ring first: detaching waits until every request taken
	 * from it is answered, so the base is final and nothing is lost.
	 */
	ret = quiesce(s);
	if (ret)
		return ret;
	ret = KDEV_IOCTL(&s->kdev, VHOST_GET_VRING_BASE, &st);
	if (ret)
		return ret;
	ret = stop_vring(s, st.index);
	if (ret)
		return ret;
	r->send = true;
	r->size = sizeof(st);
	r->payload.state = st;
	vbb_dbg("vring %u stopped at %u", st.index, st.num);
	return 0;
}

/* SET_VRING_KICK / CALL / ERR: the eventfd goes straight to the module. */
static int h_set_vring_fd(struct vu_session *s, struct vu_msg *m,
			  struct vu_reply *r)
{
	uint64_t u = m->payload.u64;
	struct vhost_vring_file f = {
		.index = u & VU_VRING_IDX_MASK,
		.fd = (u & VU_VRING_NOFD) ? VHOST_FILE_UNBIND : m->fds[0],
	};
	struct vu_vring *v = msg_vring(s, m, f.index);
	int ret;

	(void)r;
	if (!v)
		return -EINVAL;
	switch (m->hdr.request) {
	case VU_SET_VRING_KICK:
		if (u & VU_VRING_NOFD)
			return fail(m, -EOPNOTSUPP,
				    "vring %u: no kick eventfd (polling mode) is not supported by vhost-blk",
				    f.index);
		ret = KDEV_IOCTL(&s->kdev, VHOST_SET_VRING_KICK, &f);
		if (!ret)
			v->kick_set = true;
		return ret;
	case VU_SET_VRING_CALL:
		ret = KDEV_IOCTL(&s->kdev, VHOST_SET_VRING_CALL, &f);
		if (ret)
			return ret;
		v->call_set = f.fd != VHOST_FILE_UNBIND;
		/*
		 * One signal on a new call eventfd, as libvhost-user sends:
		 * a frontend that reconnected, or that waits for a first
		 * interrupt, then misses none that went to the old one.  A
		 * guest that finds nothing new in the used ring ignores it.
		 */
		if (v->call_set && eventfd_write(f.fd, 1))
			vbb_warn("vring %u: signalling the new call eventfd: %s",
				 f.index, strerror(errno));
		return 0;
	default:
		return KDEV_IOCTL(&s->kdev, VHOST_SET_VRING_ERR, &f);
	}
}

static int h_get_protocol_features(struct vu_session *s, struct vu_msg *m,
				   struct vu_reply *r)
{
	(void)s;
	(void)m;
	set_reply_u64(r, VU_PROTOCOL_FEATURES);
	return 0;
}

static int h_set_protocol_features(struct vu_session *s, struct vu_msg *m,
				   struct vu_reply *r)
{
	uint64_t f = m->payload.u64;

	(void)r;
	if (f & ~VU_PROTOCOL_FEATURES)
		return fail(m, -EINVAL,
			    "protocol features 0x%llx include 0x%llx, never offered (offered 0x%llx)",
			    (unsigned long long)f,
			    (unsigned long long)(f & ~VU_PROTOCOL_FEATURES),
			    (unsigned long long)VU_PROTOCOL_FEATURES);
	s->protocol_features = f;
	return 0;
}

static int h_get_queue_num(struct vu_session *s, struct vu_msg *m,
			   struct vu_reply *r)
{
	(void)m;
	set_reply_u64(r, num_queues(s));
	return 0;
}

static int h_set_vring_enable(struct vu_session *s, struct vu_msg *m,
			      struct vu_reply *r)
{
	const struct vhost_vring_state *st = &m->payload.state;
	struct vu_vring *v = msg_vring(s, m, st->index);

	(void)r;
	if (!v)
		return -EINVAL;
	if (st->num > 1)
		return fail(m, -EINVAL, "vring %u: enable value %u is not 0 or 1",
			    st->index, st->num);
	v->enabled = st->num;
	return 0;
}

/* Check a GET_CONFIG / SET_CONFIG payload. */
static int check_config_msg(const struct vu_msg *m)
{
	const struct vu_config_space *c = &m->payload.config;

	if (m->hdr.size < VU_CONFIG_HDR_SIZE)
		return fail(m, -EINVAL, "payload of %u bytes, shorter than its %zu-byte header",
			    m->hdr.size, VU_CONFIG_HDR_SIZE);
	if (c->size != m->hdr.size - VU_CONFIG_HDR_SIZE)
		return fail(m, -EINVAL, "config size %u does not match the payload (%zu bytes)",
			    c->size, m->hdr.size - VU_CONFIG_HDR_SIZE);
	if (c->offset > VU_MAX_CONFIG_SIZE ||
	    c->size > VU_MAX_CONFIG_SIZE - c->offset)
		return fail(m, -EINVAL, "config range %u+%u is beyond %d bytes",
			    c->offset, c->size, VU_MAX_CONFIG_SIZE);
	return 0;
}

static int h_get_config(struct vu_session *s, struct vu_msg *m,
			struct vu_reply *r)
{
	const struct vu_config_space *c = &m->payload.config;
	union {
		struct virtio_blk_config blk;
		uint8_t bytes[VU_MAX_CONFIG_SIZE];
	} space;
	int ret;

	_Static_assert(sizeof(struct virtio_blk_config) <= VU_MAX_CONFIG_SIZE,
		       "virtio_blk_config does not fit");
	ret = check_config_msg(m);
	if (ret)
		return ret;
	memset(&space, 0, sizeof(space));
	kdev_blk_config(&s->kdev, &space.blk);
	r->send = true;
	r->size = m->hdr.size;
	r->payload.config.offset = c->offset;
	r->payload.config.size = c->size;
	r->payload.config.flags = c->flags;
	memcpy(r->payload.config.region, space.bytes + c->offset, c->size);
	return 0;
}

/* The channel for our own requests (config changes); the fd is kept. */
static int h_set_backend_req_fd(struct vu_session *s, struct vu_msg *m,
				struct vu_reply *r)
{
	(void)r;
	if (!(s->protocol_features & (1ULL << VU_PROTOCOL_F_BACKEND_REQ)))
		return fail(m, -EINVAL,
			    "VHOST_USER_PROTOCOL_F_BACKEND_REQ was not negotiated");
	if (s->backend_fd >= 0)
		close(s->backend_fd);
	s->backend_fd = m->fds[0];
	m->fds[0] = -1;
	return 0;
}

int vu_session_config_changed(struct vu_session *s)
{
	struct vu_hdr h = {
		.request = VU_BACKEND_CONFIG_CHANGE_MSG, .flags = VU_VERSION,
	};
	struct virtio_blk_config cfg;
	int ret;

	kdev_blk_config(&s->kdev, &cfg);
	if (s->backend_fd < 0) {
		vbb_warn("disk size %llu sectors: the frontend has no back-end channel (BACKEND_REQ), the guest sees it when it reads its config again",
			 (unsigned long long)le64toh(cfg.capacity));
		return -ENOTCONN;
	}
	ret = vu_send_msg_within(s->backend_fd, &h, NULL, NULL, 0,
				 s->p->msg_timeout_ms);
	if (ret) {
		vbb_warn("sending CONFIG_CHANGE_MSG to the frontend: %s",
			 strerror(-ret));
		return ret;
	}
	vbb_info("disk size %llu sectors: config change sent to the frontend",
		 (unsigned long long)le64toh(cfg.capacity));
	return 0;
}

static int h_set_config(struct vu_session *s, struct vu_msg *m,
			struct vu_reply *r)
{
	const struct vu_config_space *c = &m->payload.config;
	int ret;

	(void)r;
	ret = check_config_msg(m);
	if (ret)
		return ret;
	if (c->flags == VU_CONFIG_MIGRATION)
		return 0;	/* ours is derived from the disk again */
	/*
	 * The one writable field: writeback, which the guest's driver writes
	 * when it switches the cache (VIRTIO_BLK_F_CONFIG_WCE); QEMU passes
	 * that byte alone.  The module checks the value.
	 */
	if (c->offset == offsetof(struct virtio_blk_config, wce) &&
	    c->size == 1) {
		if (!(s->acked_features & (1ULL << VIRTIO_BLK_F_CONFIG_WCE))) {
			vbb_warn("SET_CONFIG: writeback written, but VIRTIO_BLK_F_CONFIG_WCE was not negotiated");
			return VU_NACK;
		}
		if (kdev_set_wce(&s->kdev, c->region[0]))
			return VU_NACK;
		vbb_info("the guest switched its write cache to %s",
			 c->region[0] ? "writeback" : "writethrough");
		if (s->p->kept) {
			s->p->kept->wce = c->region[0];
			s->p->kept->pid = s->peer_pid;
		}
		return 0;
	}
	vbb_warn("SET_CONFIG: refused, bytes %u+%u of the config space are read-only",
		 c->offset, c->size);
	return VU_NACK;
}

enum vu_fds {
	FDS_NONE,	/* no descriptor */
	FDS_ONE,	/* exactly one */
	FDS_VRING,	/* one, or none with VU_VRING_NOFD */
	FDS_REGIONS,	/* one per region: the handler checks */
	FDS_UNUSED,	/* none, or one to close (REM_MEM_REG) */
};

#define SIZE_VAR	UINT32_MAX

static const struct vu_handler {
	int (*fn)(struct vu_session *s, struct vu_msg *m, struct vu_reply *r);
	uint32_t size;		/* exact payload size, or SIZE_VAR */
	enum vu_fds fds;
	bool reply;		/* has a reply of its own */
} vu_handlers[VU_REQUEST_MAX] = {
	[VU_GET_FEATURES] = { h_get_features, 0, FDS_NONE, true },
	[VU_SET_FEATURES] = { h_set_features, 8, FDS_NONE, false },
	[VU_SET_OWNER] = { h_set_owner, 0, FDS_NONE, false },
	[VU_RESET_OWNER] = { h_reset_owner, 0, FDS_NONE, false },
	[VU_SET_MEM_TABLE] = { h_set_mem_table, SIZE_VAR, FDS_REGIONS, false },
	[VU_SET_LOG_BASE] = { h_set_log_base, sizeof(struct vu_log), FDS_ONE,
			      true },
	[VU_SET_VRING_NUM] = { h_set_vring_num, 8, FDS_NONE, false },
	[VU_SET_VRING_ADDR] = { h_set_vring_addr,
				sizeof(struct vhost_vring_addr), FDS_NONE,
				false },
	[VU_SET_VRING_BASE] = { h_set_vring_base, 8, FDS_NONE, false },
	[VU_GET_VRING_BASE] = { h_get_vring_base, 8, FDS_NONE, true },
	[VU_SET_VRING_KICK] = { h_set_vring_fd, 8, FDS_VRING, false },
	[VU_SET_VRING_CALL] = { h_set_vring_fd, 8, FDS_VRING, false },
	[VU_SET_VRING_ERR] = { h_set_vring_fd, 8, FDS_VRING, false },
	[VU_GET_PROTOCOL_FEATURES] = { h_get_protocol_features, 0, FDS_NONE,
				       true },
	[VU_SET_PROTOCOL_FEATURES] = { h_set_protocol_features, 8, FDS_NONE,
				       false },
	[VU_GET_QUEUE_NUM] = { h_get_queue_num, 0, FDS_NONE, true },
	[VU_SET_VRING_ENABLE] = { h_set_vring_enable, 8, FDS_NONE, false },
	[VU_GET_CONFIG] = { h_get_config, SIZE_VAR, FDS_NONE, true },
	[VU_SET_CONFIG] = { h_set_config, SIZE_VAR, FDS_NONE, false },
	[VU_SET_BACKEND_REQ_FD] = { h_set_backend_req_fd, 0, FDS_ONE, false },
	[VU_GET_MAX_MEM_SLOTS] = { h_get_max_mem_slots, 0, FDS_NONE, true },
	[VU_ADD_MEM_REG] = { h_add_mem_reg, sizeof(struct vu_mem_reg), FDS_ONE,
			     false },
	[VU_REM_MEM_REG] = { h_rem_mem_reg, sizeof(struct vu_mem_reg),
			     FDS_UNUSED, false },
};

/* Size and descriptor checks common to every request. */
static int check_msg(const struct vu_handler *h, const struct vu_msg *m)
{
	unsigned int want_fds;

	if (h->size != SIZE_VAR && m->hdr.size != h->size)
		return fail(m, -EINVAL, "payload of %u bytes, expected %u",
			    m->hdr.size, h->size);
	switch (h->fds) {
	case FDS_NONE:
		want_fds = 0;
		break;
	case FDS_ONE:
		want_fds = 1;
		break;
	case FDS_UNUSED:
		if (m->nfds > 1)
			return fail(m, -EINVAL,
				    "%u file descriptors, expected at most 1",
				    m->nfds);
		return 0;
	case FDS_VRING:
		if (m->payload.u64 & ~(VU_VRING_IDX_MASK | VU_VRING_NOFD))
			return fail(m, -EINVAL, "unknown bits in 0x%llx",
				    (unsigned long long)m->payload.u64);
		want_fds = (m->payload.u64 & VU_VRING_NOFD) ? 0 : 1;
		break;
	default:
		return 0;
	}
	if (m->nfds != want_fds)
		return fail(m, -EINVAL, "%u file descriptor%s, expected %u%s",
			    m->nfds, m->nfds == 1 ? "" : "s", want_fds,
			    h->fds == FDS_VRING ? (want_fds ?
				" (the invalid-fd flag is not set)" :
				" (the invalid-fd flag is set)") : "");
	return 0;
}

/* ------------------------------------------------------------ session */

int vu_session_open(struct vu_session *s, const struct vu_params *p,
		    int sock)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int ret;

	memset(s, 0, sizeof(*s));
	s->p = p;
	s->sock = sock;
	s->backend_fd = -1;
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
		s->peer_pid = cred.pid;
	ret = kdev_open(&s->kdev, &p->kdev, sock);
	if (ret)
		return ret;
	/*
	 * A guest that switched its cache before its frontend reconnected
	 * still has it so: the new device starts in that mode, and GET_CONFIG
	 * says it.  (The module applies it only to a driver that negotiates
	 * VIRTIO_BLK_F_CONFIG_WCE.)
	 */
	if (p->kept && p->kept->wce >= 0 && s->peer_pid &&
	    p->kept->pid == s->peer_pid) {
		ret = kdev_set_wce(&s->kdev, p->kept->wce);
		if (ret) {
			kdev_close(&s->kdev);
			return ret;
		}
		vbb_info("the write cache starts %s, as the guest last set it before its frontend reconnected",
			 p->kept->wce ? "writeback" : "writethrough");
	}
	s->features = kdev_offered_features(&s->kdev);
	vbb_dbg("offering features 0x%llx",
		(unsigned long long)(s->features | F(VU_F_PROTOCOL_FEATURES)));
	return 0;
}

int vu_session_handle(struct vu_session *s)
{
	const struct vu_handler *h = NULL;
	struct vu_reply r;
	struct vu_msg m;
	char err[256];
	bool need_reply;
	int ret, sret;

	/* The caller saw the socket readable: the first byte is there. */
	ret = vu_recv_msg(s->sock, &m, VU_RECV_REQUEST, VU_WAIT_FOREVER,
			  s->p->msg_timeout_ms, err, sizeof(err));
	if (ret == 0) {
		vbb_info("frontend disconnected after %u messages", s->msgs);
		return 1;
	}
	if (ret < 0) {
		vbb_err("%s", err);
		return -1;
	}
	s->msgs++;
	need_reply = m.hdr.flags & VU_NEED_REPLY;
	vbb_dbg("<- %s flags 0x%x size %u fds %u",
		vu_request_name(m.hdr.request), m.hdr.flags, m.hdr.size,
		m.nfds);

	memset(&r, 0, sizeof(r));
	if (m.hdr.request < VU_REQUEST_MAX && vu_handlers[m.hdr.request].fn)
		h = &vu_handlers[m.hdr.request];
	if (!h) {
		if (vu_request_known(m.hdr.request))
			vbb_err("%s (%u): not supported (never offered)",
				vu_request_name(m.hdr.request), m.hdr.request);
		else
			vbb_err("unknown request %u", m.hdr.request);
		ret = -EOPNOTSUPP;
	} else {
		ret = check_msg(h, &m);
		if (!ret)
			ret = h->fn(s, &m, &r);
		if (!ret)
			ret = sync_backend(s);
	}
	/* The module holds its own references to whatever it was given. */
	vu_msg_close_fds(&m);

	sret = 0;
	if (h && h->reply) {
		/* Its own reply, or none: the connection closes on failure. */
		struct vu_hdr hdr = {
			.request = m.hdr.request,
			.flags = VU_REPLY_FLAGS,
			.size = r.size,
		};

		if (!ret)
			sret = vu_send_msg_within(s->sock, &hdr, &r.payload, NULL, 0,
						  s->p->msg_timeout_ms);
	} else if (need_reply) {
		/* REPLY_ACK: 0 for success, else non-zero. */
		struct vu_hdr hdr = {
			.request = m.hdr.request,
			.flags = VU_REPLY_FLAGS,
			.size = sizeof(uint64_t),
		};
		uint64_t ack = ret < 0 ? (uint64_t)-ret : ret ? EPERM : 0;

		sret = vu_send_msg_within(s->sock, &hdr, &ack, NULL, 0,
					  s->p->msg_timeout_ms);
	}
	if (sret) {
		vbb_err("%s: sending the reply: %s",
			vu_request_name(m.hdr.request), strerror(-sret));
		return -1;
	}
	if (ret < 0) {
		vbb_err("closing the connection after a failed %s",
			vu_request_name(m.hdr.request));
		return -1;
	}
	return 0;
}

void vu_session_close(struct vu_session *s)
{
	/* Close first: the module may still write completions to memory. */
	kdev_close(&s->kdev);
	unmap_regions(s->regions, s->nregions);
	s->nregions = 0;
	s->mem_set = false;
	if (s->log_map)
		munmap(s->log_map, s->log_map_len);
	s->log_map = NULL;
	s->log_map_len = 0;
	s->log_size = 0;
	if (s->backend_fd >= 0)
		close(s->backend_fd);
	s->backend_fd = -1;
	memset(s->vrings, 0, sizeof(s->vrings));
}
