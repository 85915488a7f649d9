// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bench: drive /dev/vhost-blk, a vhost-user-blk back-end and the
 * raw device (io_uring) with the same guest-model workload, and report
 * IOPS, latency, notifications, kicks and back-end CPU per request.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "report.h"

#define LIST_MAX	32
#define SMOKE_IOS	64

struct uint_list {
	unsigned int n;
	int v[LIST_MAX];
	bool adaptive[LIST_MAX];	/* --poll only */
};

struct matrix {
	bool be[BE_NR];
	bool be_given;
	struct uint_list rw, iodepth, queues, event_idx, poll, cpoll, uring;
};

static void usage(FILE *f)
{
	fprintf(f,
"Usage: " BENCH_NAME " [OPTIONS]\n"
"\n"
"Drive virtio-blk back-ends with one guest-model driver (split virtqueues in\n"
"shared memfd memory, Linux virtio_blk's notification habits) and report,\n"
"per run: IOPS, mean/p50/p99 latency, guest notifications and kicks per\n"
"request, and the back-end's CPU time per request (with --json also its\n"
"context switches and system calls per request).  Every combination of\n"
"the lists below is run; then a table (with vhost-blk / vhost-user and\n"
"vhost-blk / io_uring ratios) is printed and, with --json, one JSON object\n"
"per run is appended to a file.\n"
"\n"
"Back-ends (-b LIST, default: every one whose target is given):\n"
"  vhost-blk     /dev/vhost-blk serving --dev; CPU: its vhost worker threads\n"
"  vhost-user    the vhost-user-blk back-end on --socket (e.g. qemu-storage-\n"
"                daemon --export type=vhost-user-blk); CPU: its process\n"
"  io_uring      --dev from userspace, O_DIRECT; CPU: this tool's threads\n"
"                (its SQPOLL thread included)\n"
"For every back-end the CPU time per request adds all CPUs' irq and softirq\n"
"time (/proc/stat) over the window; the JSON has both parts.\n"
"\n"
"Options:\n"
"  -d, --dev PATH        block device (or file) for vhost-blk and io_uring\n"
"  -s, --socket PATH     vhost-user-blk socket\n"
"  -b, --backend LIST    vhost-blk,vhost-user,io_uring\n"
"  -r, --rw LIST         randread,randwrite (default randread)\n"
"  -q, --iodepth LIST    requests in flight per queue (default 1)\n"
"  -n, --queues LIST     queues, one driver thread each; 'all' = online\n"
"                        CPUs (default 1)\n"
"  -e, --event-idx LIST  on,off: negotiate VIRTIO_RING_F_EVENT_IDX (default on)\n"
"  -p, --poll LIST       vhost-blk busy polling: timeouts in us (0 = off),\n"
"                        'adaptive' (ceiling 32 us) or 'adaptive:MAX'\n"
"                        (default 0)\n"
"      --poll-completions LIST  vhost-blk: off,on: ask the worker to poll\n"
"                        its bios' completions (VHOST_BLK_POLL_COMPLETIONS,\n"
"                        with busy polling; default off).  A kernel without\n"
"                        it refuses the flag: the run is reported as\n"
"                        unsupported, not as failed\n"
"  -u, --uring LIST      io_uring set-ups: plain (default), sqpoll\n"
"                        (registered file and buffers, one SQPOLL thread),\n"
"                        iopoll (registered file and buffers, IOPOLL: the\n"
"                        disk needs poll queues)\n"
"      --vu-poll SPEC    what the vhost-user back-end polls, for the\n"
"                        reports only (0, N us, adaptive:MAX), e.g. qsd's\n"
"                        iothread poll-max-ns; default unknown\n"
"      --vu-peer TEXT    which vhost-user back-end this is, for the reports\n"
"                        (e.g. 'qsd 10.0'); JSON \"peer\" of its runs\n"
"  -w, --workers MODE    vhost-blk: 'shared' (one worker per device, the\n"
"                        default) or 'per-queue' (VHOST_NEW_WORKER)\n"
"      --pin-memory      vhost-blk: pin the guest memory once, at its memory\n"
"                        table, not per request (VHOST_BLK_SET_MEM_PINNED)\n"
"  -c, --cpus MODE       'any' (the default: the scheduler places every\n"
"                        thread) or 'split': queue thread i on CPU i mod\n"
"                        CPUs, the back-end's threads (vhost workers, the\n"
"                        vhost-user back-end process) on the last CPU\n"
"  -t, --runtime SEC     measured time per run (default 3)\n"
"      --ramp SEC        unmeasured warm-up before it (default 0.5)\n"
"      --repeat N        run the whole list N times over (default 1), round\n"
"                        after round; each run says its round (\"rep\")\n"
"      --round N         number the first round N (default 1), for rounds\n"
"                        made of several invocations\n"
"      --ios N           count-based instead: N requests per queue, all\n"
"                        measured, no warm-up\n"
"      --bs BYTES        request size (default 4096)\n"
"      --ring N          virtqueue size (default 256)\n"
"      --direct          chains of 3 descriptors instead of indirect tables\n"
"      --size BYTES      address only the first BYTES of the disk\n"
"      --seed N          random offsets (default 1)\n"
"      --label TEXT      what the device is, for the reports\n"
"      --tag TEXT        which experiment this is, for the JSON\n"
"      --env TEXT        where this runs, for the reports (default: detected,\n"
"                        e.g. 'QEMU TCG emulation')\n"
"      --json FILE       append one JSON object per run ('-': stdout)\n"
"      --smoke           check that it runs: count-based (--ios %d unless\n"
"                        given), and every count must add up (requests\n"
"                        issued == completed, bytes, the device's own\n"
"                        counters); never checks timings.  Prints TAP on\n"
"                        stdout (one test per run), the table on stderr\n"
"      --quiet           no progress lines\n"
"  -h, --help            this text\n"
"\n"
"Under QEMU TCG the figures are those of an emulated CPU, not hardware\n"
"figures; every output says so.  Exit status: 0, 1 if a run failed or a\n"
"smoke check did not add up, 2 for usage errors.\n", SMOKE_IOS);
}

static int die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, BENCH_NAME ": ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (see --help)\n");
	exit(2);
}

static unsigned long long parse_num(const char *opt, const char *s,
				    unsigned long long max)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || v > max) {
		fprintf(stderr, BENCH_NAME ": %s: '%s' is not a number (at most %llu) (see --help)\n",
			opt, s, max);
		exit(2);
	}
	return v;
}

static double parse_secs(const char *opt, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < 0 || v > 86400) {
		fprintf(stderr, BENCH_NAME ": %s: '%s' is not a time in seconds (see --help)\n",
			opt, s);
		exit(2);
	}
	return v;
}

static unsigned int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > BENCH_MAX_QUEUES ? BENCH_MAX_QUEUES : (unsigned int)n;
}

/* Parse one item of list @opt into @l; @s is writable. */
static void list_item(const char *opt, struct uint_list *l, const char *s)
{
	int v = 0;
	bool adaptive = false;

	if (l->n == LIST_MAX)
		die_usage("%s: too many values", opt);
	if (!strcmp(opt, "--rw")) {
		if (!strcmp(s, "randread") || !strcmp(s, "read"))
			v = RW_READ;
		else if (!strcmp(s, "randwrite") || !strcmp(s, "write"))
			v = RW_WRITE;
		else
			die_usage("--rw: '%s' is neither randread nor randwrite", s);
	} else if (!strcmp(opt, "--event-idx") ||
		   !strcmp(opt, "--poll-completions")) {
		if (!strcmp(s, "on") || !strcmp(s, "1"))
			v = 1;
		else if (!strcmp(s, "off") || !strcmp(s, "0"))
			v = 0;
		else if (!strcmp(opt, "--event-idx"))
			die_usage("--event-idx: '%s' is neither on nor off", s);
		else
			die_usage("--poll-completions: '%s' is neither on nor off", s);
	} else if (!strcmp(opt, "--queues") && !strcmp(s, "all")) {
		v = (int)online_cpus();
	} else if (!strcmp(opt, "--poll") && !strncmp(s, "adaptive", 8)) {
		adaptive = true;
		v = 32;
		if (s[8] == ':')
			v = (int)parse_num(opt, s + 9, 1000000);
		else if (s[8])
			die_usage("--poll: '%s' is not adaptive[:MAX]", s);
		if (!v)
			die_usage("--poll: '%s': the ceiling must be above 0", s);
	} else if (!strcmp(opt, "--poll")) {
		v = (int)parse_num(opt, s, 1000000);
	} else if (!strcmp(opt, "--uring")) {
		for (v = 0; v < URING_NR; v++)
			if (!strcmp(s, uring_name((enum uring_mode)v)))
				break;
		if (v == URING_NR)
			die_usage("--uring: '%s' is none of plain, sqpoll, iopoll", s);
	} else if (!strcmp(opt, "--iodepth")) {
		v = (int)parse_num(opt, s, BENCH_MAX_DEPTH);
		if (!v)
			die_usage("--iodepth: '%s': at least 1", s);
	} else {
		v = (int)parse_num(opt, s, BENCH_MAX_QUEUES);
		if (!v)
			die_usage("--queues: '%s': at least 1", s);
	}
	l->adaptive[l->n] = adaptive;
	l->v[l->n++] = v;
}

static void parse_list(const char *opt, struct uint_list *l, const char *arg)
{
	char *copy = strdup(arg), *save = NULL, *tok;

	if (!copy)
		exit(1);
	l->n = 0;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		list_item(opt, l, tok);
	if (!l->n)
		die_usage("%s: empty list", opt);
	free(copy);
}

static void parse_backends(struct matrix *m, const char *arg)
{
	char *copy = strdup(arg), *save = NULL, *tok;

	if (!copy)
		exit(1);
	memset(m->be, 0, sizeof(m->be));
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "vhost-blk"))
			m->be[BE_VHOST_BLK] = true;
		else if (!strcmp(tok, "vhost-user") || !strcmp(tok, "qsd"))
			m->be[BE_VHOST_USER] = true;
		else if (!strcmp(tok, "io_uring") || !strcmp(tok, "uring") ||
			 !strcmp(tok, "raw"))
			m->be[BE_URING] = true;
		else
			die_usage("--backend: unknown back-end '%s'", tok);
	}
	m->be_given = true;
	free(copy);
}

static const char *detect_env(void)
{
	char line[512];
	bool hypervisor = false, tcg = false;
	FILE *f = fopen("/proc/cpuinfo", "re");

	if (!f)
		return "unknown";
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "model name", 10) && strstr(line, "QEMU TCG"))
			tcg = true;
		if (!strncmp(line, "flags", 5) && strstr(line, " hypervisor"))
			hypervisor = true;
	}
	fclose(f);
	if (tcg)
		return "QEMU TCG emulation";
	return hypervisor ? "virtual machine" : "bare metal";
}

/*
 * The run's own checks for --smoke, as TAP test @num: every count must add
 * up.  Timings are never checked.
 */
static int smoke_check(const struct opts *o, const struct result *r,
		       unsigned int num)
{
	const struct qstats *t = &r->tot;
	uint64_t want = o->ios * r->p.queues;
	char why[8][160];
	unsigned int nwhy = 0, i;

#define SMOKE_EXPECT(cond, fmt, ...) do {				\
	if (!(cond) && nwhy < 8)					\
		snprintf(why[nwhy++], sizeof(why[0]), fmt, ##__VA_ARGS__); \
} while (0)
	SMOKE_EXPECT(r->ok, "the run failed (see the messages above)");
	SMOKE_EXPECT(t->issued == want, "%llu requests issued, expected %llu",
		     (unsigned long long)t->issued, (unsigned long long)want);
	SMOKE_EXPECT(t->completed == t->issued,
		     "%llu completed of %llu issued",
		     (unsigned long long)t->completed,
		     (unsigned long long)t->issued);
	SMOKE_EXPECT(t->m_done == t->completed && t->hist.count == t->completed,
		     "%llu measured, %llu latencies, %llu completed",
		     (unsigned long long)t->m_done,
		     (unsigned long long)t->hist.count,
		     (unsigned long long)t->completed);
	SMOKE_EXPECT(!t->errors, "%llu requests failed",
		     (unsigned long long)t->errors);
	SMOKE_EXPECT(!t->bad_len, "%llu reads with a wrong used length",
		     (unsigned long long)t->bad_len);
	SMOKE_EXPECT(t->bytes == t->completed * o->bs,
		     "%llu bytes moved, expected %llu",
		     (unsigned long long)t->bytes,
		     (unsigned long long)(t->completed * o->bs));
	if (r->p.be != BE_URING)
		SMOKE_EXPECT(t->m_kicks >= 1, "no kick at all");
	if (r->p.be == BE_VHOST_BLK) {
		const struct vhost_blk_vring_stats *d = &r->dev;
		uint64_t reqs = r->p.rw == RW_READ ? d->reqs_in : d->reqs_out;
		uint64_t bytes = r->p.rw == RW_READ ? d->bytes_read :
						      d->bytes_written;

		SMOKE_EXPECT(r->have_dev_stats, "no device counters");
		SMOKE_EXPECT(reqs == t->completed &&
			     d->reqs_in + d->reqs_out == reqs,
			     "the device counted %llu reads and %llu writes, the driver %llu %ss",
			     (unsigned long long)d->reqs_in,
			     (unsigned long long)d->reqs_out,
			     (unsigned long long)t->completed,
			     r->p.rw == RW_READ ? "read" : "write");
		SMOKE_EXPECT(bytes == t->bytes,
			     "the device counted %llu bytes, the driver %llu",
			     (unsigned long long)bytes,
			     (unsigned long long)t->bytes);
		SMOKE_EXPECT(!d->inflight, "%llu requests still in flight",
			     (unsigned long long)d->inflight);
		/* Attaching the backend runs each ring once, unkicked. */
		SMOKE_EXPECT(d->kicks <= t->m_kicks + r->p.queues,
			     "the device saw %llu kicks, the driver sent %llu",
			     (unsigned long long)d->kicks,
			     (unsigned long long)t->m_kicks);
		SMOKE_EXPECT(d->notifies >= t->m_signals,
			     "the driver took %llu notifications, the device sent %llu",
			     (unsigned long long)t->m_signals,
			     (unsigned long long)d->notifies);
	}
#undef SMOKE_EXPECT
	printf("%sok %u - %s%s%s %s qd%u %uq: %llu requests, %llu bytes\n",
	       nwhy ? "not " : "", num, be_name(r->p.be),
	       r->p.be == BE_URING ? " " : "",
	       r->p.be == BE_URING ? uring_name(r->p.uring) : "",
	       rw_name(r->p.rw),
	       r->p.iodepth, r->p.queues, (unsigned long long)t->completed,
	       (unsigned long long)t->bytes);
	for (i = 0; i < nwhy; i++)
		printf("# %s\n", why[i]);
	fflush(stdout);
	return nwhy ? 1 : 0;
}

static int run_point(const struct opts *o, const struct point *p,
		     struct result *res)
{
	memset(res, 0, sizeof(*res));
	res->p = *p;
	switch (p->be) {
	case BE_VHOST_BLK:
		return engine_vhost_blk(o, p, res);
	case BE_VHOST_USER:
		return engine_vhost_user(o, p, res);
	default:
		return engine_uring(o, p, res);
	}
}

static void progress(const struct opts *o, unsigned int i, unsigned int n,
		     const struct result *r)
{
	struct figures f;

	if (o->quiet)
		return;
	figures_of(r, &f);
	fprintf(stderr, "[%u/%u] %s%s%s %s qd%u %uq eidx=%d poll=%d%s%s: ",
		i, n, be_name(r->p.be), r->p.be == BE_URING ? "/" : "",
		r->p.be == BE_URING ? uring_name(r->p.uring) : "",
		rw_name(r->p.rw), r->p.iodepth, r->p.queues, r->p.event_idx,
		r->p.poll_us, r->p.poll_adaptive ? "a" : "",
		r->p.poll_completions == 1 ? " cpoll" : "");
	if (r->unsupported)
		fprintf(stderr, "unsupported by this kernel\n");
	else if (r->ok)
		fprintf(stderr, "%.0f IOPS, %.1f us\n", f.iops, f.lat_mean_us);
	else
		fprintf(stderr, "FAILED\n");
}

/* Expand the matrix, @reps times over; @pts may be NULL to count. */
static unsigned int matrix_points(const struct matrix *m,
				  const struct opts *o, struct point *pts)
{
	unsigned int n = 0, a, b, c, d, e, f, rep;
	int be;

	for (rep = 1; rep <= o->repeat; rep++)
	for (a = 0; a < m->rw.n; a++)
	for (b = 0; b < m->queues.n; b++)
	for (c = 0; c < m->iodepth.n; c++)
	for (d = 0; d < m->event_idx.n; d++)
	for (be = 0; be < BE_NR; be++) {
		/* The lists that apply to this back-end only. */
		unsigned int ne = be == BE_VHOST_BLK ? m->poll.n : 1;
		unsigned int nf = be == BE_VHOST_BLK ? m->cpoll.n :
				  be == BE_URING ? m->uring.n : 1;

		if (!m->be[be])
			continue;
		/* io_uring has no rings to negotiate: run it once. */
		if (be == BE_URING && d)
			continue;
		for (e = 0; e < ne; e++)
		for (f = 0; f < nf; f++) {
			if (pts) {
				struct point *p = &pts[n];

				p->be = (enum be_kind)be;
				p->rw = (enum rw_kind)m->rw.v[a];
				p->queues = (unsigned int)m->queues.v[b];
				p->iodepth = (unsigned int)m->iodepth.v[c];
				p->event_idx = be == BE_URING ? -1 :
					       m->event_idx.v[d];
				p->poll_us = be == BE_VHOST_BLK ? m->poll.v[e] :
					     be == BE_VHOST_USER ? o->vu_poll_us :
					     -1;
				p->poll_adaptive = be == BE_VHOST_BLK ?
						   m->poll.adaptive[e] :
						   be == BE_VHOST_USER &&
						   o->vu_poll_adaptive;
				p->poll_completions = be == BE_VHOST_BLK ?
						      m->cpoll.v[f] : -1;
				p->uring = be == BE_URING ?
					   (enum uring_mode)m->uring.v[f] :
					   URING_PLAIN;
				p->rep = o->round + rep - 1;
			}
			n++;
		}
	}
	return n;
}

int main(int argc, char **argv)
{
	enum { O_RAMP = 256, O_IOS, O_BS, O_RING, O_DIRECT, O_SIZE, O_SEED,
	       O_LABEL, O_TAG, O_ENV, O_JSON, O_SMOKE, O_QUIET, O_CPOLL,
	       O_REPEAT, O_ROUND, O_VU_POLL, O_VU_PEER, O_PIN_MEMORY };
	static const struct option longopts[] = {
		{ "dev", required_argument, NULL, 'd' },
		{ "socket", required_argument, NULL, 's' },
		{ "backend", required_argument, NULL, 'b' },
		{ "rw", required_argument, NULL, 'r' },
		{ "iodepth", required_argument, NULL, 'q' },
		{ "queues", required_argument, NULL, 'n' },
		{ "event-idx", required_argument, NULL, 'e' },
		{ "poll", required_argument, NULL, 'p' },
		{ "poll-completions", required_argument, NULL, O_CPOLL },
		{ "uring", required_argument, NULL, 'u' },
		{ "vu-poll", required_argument, NULL, O_VU_POLL },
		{ "vu-peer", required_argument, NULL, O_VU_PEER },
		{ "repeat", required_argument, NULL, O_REPEAT },
		{ "round", required_argument, NULL, O_ROUND },
		{ "workers", required_argument, NULL, 'w' },
		{ "pin-memory", no_argument, NULL, O_PIN_MEMORY },
		{ "cpus", required_argument, NULL, 'c' },
		{ "runtime", required_argument, NULL, 't' },
		{ "ramp", required_argument, NULL, O_RAMP },
		{ "ios", required_argument, NULL, O_IOS },
		{ "bs", required_argument, NULL, O_BS },
		{ "ring", required_argument, NULL, O_RING },
		{ "direct", no_argument, NULL, O_DIRECT },
		{ "size", required_argument, NULL, O_SIZE },
		{ "seed", required_argument, NULL, O_SEED },
		{ "label", required_argument, NULL, O_LABEL },
		{ "tag", required_argument, NULL, O_TAG },
		{ "env", required_argument, NULL, O_ENV },
		{ "json", required_argument, NULL, O_JSON },
		{ "smoke", no_argument, NULL, O_SMOKE },
		{ "quiet", no_argument, NULL, O_QUIET },
		{ "help", no_argument, NULL, 'h' },
		{ }
	};
	struct opts o = {
		.ramp_s = 0.5, .runtime_s = 3, .bs = 4096, .ring = 256,
		.indirect = true, .seed = 1, .repeat = 1, .round = 1,
		.vu_poll_us = -1,
	};
	struct matrix m = { 0 };
	struct point *pts;
	struct result *res;
	unsigned int n, i, failed = 0;
	bool rw_given = false, qd_given = false, nq_given = false;
	int c;

	parse_list("--rw", &m.rw, "randread");
	parse_list("--iodepth", &m.iodepth, "1");
	parse_list("--queues", &m.queues, "1");
	parse_list("--event-idx", &m.event_idx, "on");
	parse_list("--poll", &m.poll, "0");
	parse_list("--poll-completions", &m.cpoll, "off");
	parse_list("--uring", &m.uring, "plain");

	while ((c = getopt_long(argc, argv, "d:s:b:r:q:n:e:p:u:w:c:t:h", longopts,
				NULL)) != -1) {
		switch (c) {
		case 'd': o.dev = optarg; break;
		case 's': o.sock = optarg; break;
		case 'b': parse_backends(&m, optarg); break;
		case 'r': parse_list("--rw", &m.rw, optarg); rw_given = true; break;
		case 'q': parse_list("--iodepth", &m.iodepth, optarg); qd_given = true; break;
		case 'n': parse_list("--queues", &m.queues, optarg); nq_given = true; break;
		case 'e': parse_list("--event-idx", &m.event_idx, optarg); break;
		case 'p': parse_list("--poll", &m.poll, optarg); break;
		case 'u': parse_list("--uring", &m.uring, optarg); break;
		case O_CPOLL:
			parse_list("--poll-completions", &m.cpoll, optarg);
			break;
		case O_VU_POLL: {
			struct uint_list l = { 0 };

			parse_list("--poll", &l, optarg);
			if (l.n != 1)
				die_usage("--vu-poll: '%s' is not one value", optarg);
			o.vu_poll_us = l.v[0];
			o.vu_poll_adaptive = l.adaptive[0];
			break;
		}
		case O_REPEAT:
			o.repeat = (unsigned int)parse_num("--repeat", optarg, 100);
			if (!o.repeat)
				die_usage("--repeat: '%s': at least 1", optarg);
			break;
		case O_ROUND:
			o.round = (unsigned int)parse_num("--round", optarg, 1000000);
			break;
		case 'w':
			if (!strcmp(optarg, "shared"))
				o.workers = WORKERS_SHARED;
			else if (!strcmp(optarg, "per-queue"))
				o.workers = WORKERS_PER_QUEUE;
			else
				die_usage("--workers: '%s' is neither shared nor per-queue",
					  optarg);
			break;
		case 'c':
			if (!strcmp(optarg, "split"))
				o.split_cpus = true;
			else if (strcmp(optarg, "any"))
				die_usage("--cpus: '%s' is neither any nor split",
					  optarg);
			break;
		case 't': o.runtime_s = parse_secs("--runtime", optarg); break;
		case O_RAMP: o.ramp_s = parse_secs("--ramp", optarg); break;
		case O_IOS: o.ios = parse_num("--ios", optarg, 1ULL << 40); break;
		case O_BS: o.bs = (unsigned int)parse_num("--bs", optarg, 1 << 20); break;
		case O_RING: o.ring = (unsigned int)parse_num("--ring", optarg, 32768); break;
		case O_DIRECT: o.indirect = false; break;
		case O_SIZE: o.size = parse_num("--size", optarg, ULLONG_MAX); break;
		case O_SEED: o.seed = parse_num("--seed", optarg, ULLONG_MAX); break;
		case O_LABEL: o.label = optarg; break;
		case O_TAG: o.tag = optarg; break;
		case O_VU_PEER: o.vu_peer = optarg; break;
		case O_ENV: o.env = optarg; break;
		case O_JSON: o.json = optarg; break;
		case O_SMOKE: o.smoke = true; break;
		case O_QUIET: o.quiet = true; break;
		case O_PIN_MEMORY: o.pin_memory = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);

	if (!m.be_given) {
		m.be[BE_VHOST_BLK] = m.be[BE_URING] = o.dev != NULL;
		m.be[BE_VHOST_USER] = o.sock != NULL;
	}
	if ((m.be[BE_VHOST_BLK] || m.be[BE_URING]) && !o.dev)
		die_usage("%s needs --dev", m.be[BE_VHOST_BLK] ? "vhost-blk" : "io_uring");
	if (m.be[BE_VHOST_USER] && !o.sock)
		die_usage("%s needs --socket", "vhost-user");
	if (!m.be[BE_VHOST_BLK] && !m.be[BE_VHOST_USER] && !m.be[BE_URING])
		die_usage("%s", "nothing to run: give --dev and/or --socket");
	if (o.bs < 512 || o.bs % 512)
		die_usage("--bs: %s is not a multiple of 512", "the size");
	if (o.ring < 2 || (o.ring & (o.ring - 1)))
		die_usage("--ring: %s must be a power of two of at least 2", "the size");
	if (o.smoke) {
		if (!o.ios)
			o.ios = SMOKE_IOS;
		if (!rw_given)
			parse_list("--rw", &m.rw, "randread,randwrite");
		if (!qd_given)
			parse_list("--iodepth", &m.iodepth, "4");
		if (!nq_given)
			parse_list("--queues", &m.queues, online_cpus() > 1 ? "1,2" : "1");
	}
	if (!o.ios && o.runtime_s <= 0)
		die_usage("--runtime: %s must be above 0", "the time");
	for (i = 0; i < m.iodepth.n; i++) {
		unsigned int qd = (unsigned int)m.iodepth.v[i];

		if (!o.indirect && qd * 3 > o.ring)
			die_usage("--iodepth %s needs a larger --ring with --direct (3 descriptors a request)",
				  "value");
		if (o.indirect && qd > o.ring)
			die_usage("--iodepth: %s larger than --ring", "a value");
	}
	if (!o.env)
		o.env = detect_env();

	n = matrix_points(&m, &o, NULL);
	pts = calloc(n, sizeof(*pts));
	res = calloc(n, sizeof(*res));
	if (!pts || !res) {
		bench_err("out of memory for %u runs", n);
		return 1;
	}
	matrix_points(&m, &o, pts);
	if (o.smoke)
		printf("TAP version 13\n1..%u\n", n);
	if (!o.quiet && report_emulated(&o))
		fprintf(stderr, BENCH_NAME ": running under %s: the figures are not hardware figures\n",
			o.env);

	for (i = 0; i < n; i++) {
		int err = run_point(&o, &pts[i], &res[i]);

		if (res[i].unsupported) {
			res[i].ok = false;
		} else if (err || !res[i].ok) {
			res[i].ok = false;
			failed++;
		}
		progress(&o, i + 1, n, &res[i]);
		if (o.smoke && res[i].unsupported)
			printf("ok %u - %s qd%u %uq # SKIP unsupported by this kernel\n",
			       i + 1, be_name(res[i].p.be), res[i].p.iodepth,
			       res[i].p.queues);
		else if (o.smoke && smoke_check(&o, &res[i], i + 1))
			failed++;
	}

	/* With --smoke, stdout is TAP: the table goes to stderr. */
	report_table(o.smoke ? stderr : stdout, &o, res, n);
	if (o.json && report_json(o.json, &o, res, n))
		failed++;
	free(pts);
	free(res);
	return failed ? 1 : 0;
}
