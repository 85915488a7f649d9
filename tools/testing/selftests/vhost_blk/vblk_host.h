/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The host's view of a backend, for the selftests that check what the
 * device does to the host rather than to its guest: which block device
 * carries the backend, its write cache and flush counter, and the bios
 * queued on it (the block_bio_queue tracepoint, in a tracefs instance of
 * the test's own).  Include after vblk_test.h.
 */
#ifndef VBLK_HOST_H
#define VBLK_HOST_H

#include <dirent.h>
#include <glob.h>
#include <linux/loop.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define VBLK_TRACEFS	"/sys/kernel/tracing"

/* The block device a backend's I/O reaches: the device, or a file's fs. */
static inline dev_t host_disk_of(struct __test_metadata *_metadata,
				 const char *path)
{
	struct stat st;

	EXPECT_EQ(0, stat(path, &st)) TH_LOG("stat %s: %s", path,
					     strerror(errno));
	return S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
}

/* Read a sysfs attribute of block device @dev into @buf; 0 or -errno. */
static inline int host_disk_attr(dev_t dev, const char *attr, char *buf,
				 size_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/%s", major(dev),
		 minor(dev), attr);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

/* The kernel's name of block device @dev ("nvme0n1", "ram0"); 0 or -errno. */
static inline int host_disk_name(dev_t dev, char *buf, size_t len)
{
	char path[64], link[PATH_MAX];
	const char *name;
	ssize_t n;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(dev),
		 minor(dev));
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	link[n] = 0;
	name = strrchr(link, '/');
	name = name ? name + 1 : link;
	if (strlen(name) >= len)
		return -ENAMETOOLONG;
	memcpy(buf, name, strlen(name) + 1);
	return 0;
}

/* Whether @dev has a volatile write cache, which flushes and FUA reach. */
static inline bool host_disk_write_back(struct __test_metadata *_metadata,
					dev_t dev)
{
	char buf[64];

	EXPECT_EQ(0, host_disk_attr(dev, "queue/write_cache", buf,
				    sizeof(buf)))
		TH_LOG("no queue/write_cache for %u:%u", major(dev),
		       minor(dev));
	return !strncmp(buf, "write back", 10);
}

/* Field 15 of a block device's stat file: the flushes it completed. */
static inline uint64_t host_stat_flushes(struct __test_metadata *_metadata,
					 const char *what, const char *buf)
{
	unsigned long long v[17] = { 0 };
	int n;

	n = sscanf(buf,
		   "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
		   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
		   &v[8], &v[9], &v[10], &v[11], &v[12], &v[13], &v[14],
		   &v[15], &v[16]);
	EXPECT_LE(16, n) TH_LOG("stat of %s: '%s'", what, buf);
	return v[15];
}

/*
 * Flush requests @dev has completed.  An NVMe multipath head (nvmeXnY, as
 * an NVMe/TCP namespace is with Debian's CONFIG_NVME_MULTIPATH) is
 * bio-based: its requests, flushes among them, are counted on its paths
 * (nvmeXcZnY), which are summed.
 */
static inline uint64_t host_disk_flushes(struct __test_metadata *_metadata,
					 dev_t dev)
{
	char buf[512], name[64], path[PATH_MAX];
	unsigned int subsys, ns;
	uint64_t sum;
	glob_t g;
	size_t i;
	ssize_t n;
	int fd;

	EXPECT_EQ(0, host_disk_attr(dev, "stat", buf, sizeof(buf)));
	sum = host_stat_flushes(_metadata, "the disk", buf);
	if (host_disk_name(dev, name, sizeof(name)))
		return sum;
	if (sscanf(name, "nvme%un%u", &subsys, &ns) != 2 || strchr(name, 'c') ||
	    strchr(name, 'p'))
		return sum;
	snprintf(path, sizeof(path), "/sys/block/nvme%uc*n%u/stat", subsys, ns);
	if (glob(path, 0, NULL, &g))
		return sum;
	for (i = 0; i < g.gl_pathc; i++) {
		fd = open(g.gl_pathv[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		sum += host_stat_flushes(_metadata, g.gl_pathv[i], buf);
	}
	globfree(&g);
	return sum;
}

/* One bio seen by block_bio_queue. */
struct host_bio {
	char rwbs[16];			/* e.g. "WFS": write, FUA, sync */
	unsigned long long sector;
	unsigned int nr_sectors;
	char comm[32];			/* the task that submitted it */
};

struct host_trace {
	char dir[PATH_MAX];		/* our tracefs instance */
};

/* The first line of @path, without its newline, in @buf; 0 or -1. */
static inline int host_read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int ret = -1;

	if (!f)
		return -1;
	if (fgets(buf, len, f)) {
		buf[strcspn(buf, "\n")] = 0;
		ret = 0;
	}
	fclose(f);
	return ret;
}

/*
 * The tasks of @dir_path (/proc/self/task for our threads, /proc for
 * kthreads) whose comm is @comm, such as a device's workers (vhost-PID)
 * and sync task (vhost-blk-PID): @fn(@dir_path, tid, @arg) for each, if
 * @fn is set.  Returns how many there are, -1 if @dir_path is unreadable.
 */
static inline int host_tasks_named(const char *dir_path, const char *comm,
				   void (*fn)(const char *dir_path, pid_t tid,
					      void *arg),
				   void *arg)
{
	char path[300], line[32], want[16];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	/* The kernel keeps 15 bytes of a task's name (TASK_COMM_LEN). */
	memset(want, 0, sizeof(want));
	memcpy(want, comm, strnlen(comm, sizeof(want) - 1));
	dir = opendir(dir_path);
	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "%s/%s/comm", dir_path,
			 d->d_name);
		if (host_read_line(path, line, sizeof(line)) ||
		    strcmp(line, want))
			continue;
		n++;
		if (fn)
			fn(dir_path, atoi(d->d_name), arg);
	}
	closedir(dir);
	return n;
}

/* Write @val to a sysfs, tracefs or cgroup file; 0 or -errno. */
static inline int host_write_file(const char *path, const char *val)
{
	ssize_t n;
	int fd;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -errno : 0;
}

static inline int host_trace_write(const struct host_trace *t,
				   const char *file, const char *val)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", t->dir, file);
	return host_write_file(path, val);
}

/* Start recording the bios queued on @dev, in a tracefs instance. */
static inline void host_trace_start(struct __test_metadata *_metadata,
				    struct host_trace *t, dev_t dev)
{
	char filter[64];

	snprintf(t->dir, sizeof(t->dir), VBLK_TRACEFS "/instances/vblk-%d",
		 getpid());
	rmdir(t->dir);
	ASSERT_EQ(0, mkdir(t->dir, 0700))
		TH_LOG("mkdir %s: %s", t->dir, strerror(errno));
	/* The kernel's dev_t: 12 bits of major, 20 of minor. */
	snprintf(filter, sizeof(filter), "dev == %u",
		 (major(dev) << 20) | minor(dev));
	ASSERT_EQ(0, host_trace_write(t, "events/block/block_bio_queue/filter",
				      filter));
	ASSERT_EQ(0, host_trace_write(t, "events/block/block_bio_queue/enable",
				      "1"));
}

/*
 * The bios recorded so far, oldest first: up to @max of them into @bio.
 * Returns how many there were (it may exceed @max).
 */
static inline unsigned int host_trace_bios(struct __test_metadata *_metadata,
					   struct host_trace *t,
					   struct host_bio *bio,
					   unsigned int max)
{
	char path[PATH_MAX + 16], line[512];
	unsigned int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/trace", t->dir);
	f = fopen(path, "re");
	EXPECT_NE(NULL, f) TH_LOG("open %s: %s", path, strerror(errno));
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, " block_bio_queue: ");
		struct host_bio b = { 0 };
		unsigned int ma, mi;

		if (!p || sscanf(p, " block_bio_queue: %u,%u %15s %llu + %u [%31[^]]]",
				 &ma, &mi, b.rwbs, &b.sector, &b.nr_sectors,
				 b.comm) != 6)
			continue;
		if (n < max)
			bio[n] = b;
		n++;
	}
	fclose(f);
	return n;
}

static inline void host_trace_stop(struct host_trace *t)
{
	if (!t->dir[0])
		return;
	host_trace_write(t, "events/block/block_bio_queue/enable", "0");
	rmdir(t->dir);
	t->dir[0] = 0;
}

/* Whether a bio's rwbs says write (W), FUA (an F after the op) or sync. */
static inline bool host_bio_is_write(const struct host_bio *b)
{
	return strchr(b->rwbs, 'W') != NULL;
}

static inline bool host_bio_is_fua(const struct host_bio *b)
{
	const char *w = strchr(b->rwbs, 'W');

	return w && strchr(w, 'F') != NULL;
}

static inline bool host_bio_is_preflush(const struct host_bio *b)
{
	return b->rwbs[0] == 'F';
}

static inline bool host_bio_is_sync(const struct host_bio *b)
{
	return strchr(b->rwbs, 'S') != NULL;
}

/*
 * Bind a free loop device to @file_fd (LOOP_CTL_GET_FREE, LOOP_CONFIGURE),
 * to be detached on its last close.  Returns its fd, open read-write, its
 * path in @name; or -errno.
 */
static inline int loop_attach(int file_fd, char *name, size_t len)
{
	struct loop_config lc = {
		.fd = (uint32_t)file_fd,
		.block_size = 512,
		.info.lo_flags = LO_FLAGS_AUTOCLEAR,
	};
	int ctl, nr, fd, i, err = -EBUSY;

	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0 && errno == ENOENT) {
		/* loop may be a module not loaded yet: as losetup would. */
		if (!system("modprobe -q loop"))
			ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	}
	if (ctl < 0)
		return -errno;
	/* Someone else may bind the free device first: take the next. */
	for (i = 0; i < 8 && err == -EBUSY; i++) {
		nr = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (nr < 0) {
			err = -errno;
			break;
		}
		snprintf(name, len, "/dev/loop%d", nr);
		fd = open(name, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			err = -errno;
			break;
		}
		if (!ioctl(fd, LOOP_CONFIGURE, &lc)) {
			close(ctl);
			return fd;
		}
		err = -errno;
		close(fd);
	}
	close(ctl);
	return err;
}

/* The kernel's fault-injection attributes (debug kernels). */
#define VBLK_FAULT_DIR		"/sys/kernel/debug"

/*
 * A cgroup v2 of the test's own under the root, with the io and memory
 * controllers, that the test process moves into as a VMM would be.
 */
#define VBLK_CGROUP_ROOT	"/sys/fs/cgroup"

struct host_cgroup {
	char dir[PATH_MAX];
};

/*
 * Create the cgroup vblk-test-@pid, with the io and memory controllers
 * enabled above it, and move the process @pid into it.
 */
static inline void host_cgroup_enter_pid(struct __test_metadata *_metadata,
					 struct host_cgroup *cg, pid_t pid)
{
	char path[PATH_MAX + 32], id[32];
	int err;

	err = host_write_file(VBLK_CGROUP_ROOT "/cgroup.subtree_control",
			      "+io +memory");
	ASSERT_EQ(0, err) TH_LOG("enabling io and memory in %s: %s",
				 VBLK_CGROUP_ROOT, strerror(-err));
	snprintf(cg->dir, sizeof(cg->dir), VBLK_CGROUP_ROOT "/vblk-test-%d",
		 pid);
	rmdir(cg->dir);
	ASSERT_EQ(0, mkdir(cg->dir, 0755))
		TH_LOG("mkdir %s: %s", cg->dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg->dir);
	snprintf(id, sizeof(id), "%d", pid);
	err = host_write_file(path, id);
	ASSERT_EQ(0, err) TH_LOG("%s: %s", path, strerror(-err));
}

static inline void host_cgroup_enter(struct __test_metadata *_metadata,
				     struct host_cgroup *cg)
{
	host_cgroup_enter_pid(_metadata, cg, getpid());
}

/*
 * Remove the cgroup, once every process in it has left or exited (and
 * the devices whose kthreads it holds are closed).
 */
static inline void host_cgroup_remove(struct host_cgroup *cg)
{
	int i;

	if (!cg->dir[0])
		return;
	/* Exiting vhost tasks may linger a moment. */
	for (i = 0; i < 100 && rmdir(cg->dir) && errno == EBUSY; i++)
		usleep(10000);
	cg->dir[0] = 0;
}

/* Move back to the root and remove the cgroup (after the device closed). */
static inline void host_cgroup_leave(struct host_cgroup *cg)
{
	char pid[32];

	if (!cg->dir[0])
		return;
	snprintf(pid, sizeof(pid), "%d", getpid());
	host_write_file(VBLK_CGROUP_ROOT "/cgroup.procs", pid);
	host_cgroup_remove(cg);
}

static inline void host_cgroup_set(struct __test_metadata *_metadata,
				   struct host_cgroup *cg, const char *file,
				   const char *val)
{
	char path[PATH_MAX + 32];
	int err;

	snprintf(path, sizeof(path), "%s/%s", cg->dir, file);
	err = host_write_file(path, val);
	ASSERT_EQ(0, err) TH_LOG("writing '%s' to %s: %s", val, path,
				 strerror(-err));
}

/* The io.stat counters of @dev in the cgroup (all zero if no line). */
struct host_io_stat {
	unsigned long long rbytes, wbytes, rios, wios, dbytes, dios;
};

static inline struct host_io_stat host_cgroup_io(struct __test_metadata *_metadata,
						 struct host_cgroup *cg,
						 dev_t dev)
{
	struct host_io_stat st = { 0 };
	char path[PATH_MAX + 32], line[1024], want[32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/io.stat", cg->dir);
	snprintf(want, sizeof(want), "%u:%u ", major(dev), minor(dev));
	f = fopen(path, "re");
	EXPECT_NE(NULL, f) TH_LOG("open %s: %s", path, strerror(errno));
	if (!f)
		return st;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, want, strlen(want)))
			continue;
		/* A short match leaves the fields it did not reach at zero. */
		if (sscanf(line + strlen(want),
			   "rbytes=%llu wbytes=%llu rios=%llu wios=%llu dbytes=%llu dios=%llu",
			   &st.rbytes, &st.wbytes, &st.rios, &st.wios,
			   &st.dbytes, &st.dios) < 6)
			continue;
	}
	fclose(f);
	return st;
}

/* A key of the cgroup's memory.stat, in bytes. */
static inline unsigned long long host_cgroup_mem(struct __test_metadata *_metadata,
						 struct host_cgroup *cg,
						 const char *key)
{
	char path[PATH_MAX + 32], name[64];
	unsigned long long v, found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/memory.stat", cg->dir);
	f = fopen(path, "re");
	EXPECT_NE(NULL, f) TH_LOG("open %s: %s", path, strerror(errno));
	if (!f)
		return 0;
	while (fscanf(f, "%63s %llu", name, &v) == 2) {
		if (!strcmp(name, key))
			found = v;
	}
	fclose(f);
	return found;
}

/*
 * A slow disk without a slow device: close the test's device, move into
 * @cg with io.max limiting reads and writes on the backend's disk to
 * @iops a second, and open the device again from there.  Requests then
 * stay in flight, held by the throttle, for about 1/@iops s each.
 */
static inline void host_reopen_throttled(struct __test_metadata *_metadata,
					 struct env *e, struct host_cgroup *cg,
					 unsigned int iops)
{
	dev_t disk = host_disk_of(_metadata, e->path);
	char max[96];

	vblk_close(&e->dev);
	host_cgroup_enter(_metadata, cg);
	snprintf(max, sizeof(max), "%u:%u riops=%u wiops=%u", major(disk),
		 minor(disk), iops, iops);
	host_cgroup_set(_metadata, cg, "io.max", max);
	ASSERT_EQ(0, env_open_dev(e, &e->dev, 1, 0, 0));
}

#endif /* VBLK_HOST_H */
