// SPDX-License-Identifier: GPL-2.0
/*
 * Table and JSON output.  See report.h.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "report.h"

bool report_emulated(const struct opts *o)
{
	return strstr(o->env, "TCG") != NULL;
}

const char *report_env(const struct opts *o)
{
	return o->env;
}

void figures_of(const struct result *res, struct figures *f)
{
	const struct qstats *t = &res->tot;
	double n = (double)t->m_done;

	memset(f, 0, sizeof(*f));
	f->lat_mean_us = hist_mean(&t->hist) / 1e3;
	f->lat_p50_us = (double)hist_percentile(&t->hist, 50) / 1e3;
	f->lat_p99_us = (double)hist_percentile(&t->hist, 99) / 1e3;
	f->lat_max_us = (double)t->hist.max / 1e3;
	if (!n)
		return;
	f->iops = res->secs > 0 ? n / res->secs : 0;
	/* Each signal of the call eventfd adds one to its counter. */
	f->notif = (double)t->m_signals / n;
	f->wakeups = (double)t->m_call_reads / n;
	f->spurious = (double)t->m_spurious / n;
	f->kicks = (double)t->m_kicks / n;
	f->kicks_suppressed = (double)t->m_kicks_suppressed / n;
	f->syscalls = (double)t->m_syscalls / n;
	f->be_cpu_us = (double)res->be_cpu_ns / 1e3 / n;
	f->guest_cpu_us = (double)res->guest_cpu_ns / 1e3 / n;
	f->irq_cpu_us = (double)res->irq_ns / 1e3 / n;
	f->cpu_us = f->be_cpu_us + f->irq_cpu_us;
	f->be_csw = (double)res->be_csw / n;
	f->be_syscalls = res->be_syscalls < 0 ? NAN :
			 (double)res->be_syscalls / n;
}

void polling_name(const struct point *p, char *buf, size_t len)
{
	if (p->be == BE_URING)
		snprintf(buf, len, "%s", p->uring == URING_PLAIN ? "off" :
			 uring_name(p->uring));
	else if (p->poll_us < 0)
		snprintf(buf, len, "unknown");
	else if (p->poll_us == 0)
		snprintf(buf, len, "off");
	else
		snprintf(buf, len, "%s:%d", p->poll_adaptive ? "adaptive" :
			 "fixed", p->poll_us);
}

static void workload_name(const struct point *p, char *buf, size_t len)
{
	char poll[32];
	int off;

	off = snprintf(buf, len, "%s qd%u %uq", rw_name(p->rw), p->iodepth,
		       p->queues);
	if (p->event_idx == 0)
		off += snprintf(buf + off, len - off, " no-eventidx");
	polling_name(p, poll, sizeof(poll));
	if (strcmp(poll, "off") && strcmp(poll, "unknown"))
		off += snprintf(buf + off, len - off, " poll=%s", poll);
	if (p->poll_completions == 1)
		off += snprintf(buf + off, len - off, " cpoll");
	if (p->rep > 1)
		snprintf(buf + off, len - off, " #%u", p->rep);
}

/* The run of kind @be that vhost-blk run @vb is compared with. */
static const struct result *report_match(const struct result *res,
					 unsigned int n,
					 const struct result *vb,
					 enum be_kind be)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		const struct point *p = &res[i].p;

		if (p->be != be || !res[i].ok || !res[i].tot.m_done ||
		    p->rw != vb->p.rw || p->iodepth != vb->p.iodepth ||
		    p->queues != vb->p.queues || p->rep != vb->p.rep)
			continue;
		/* vb/raw: against the plain ring. */
		if (be == BE_URING && p->uring != URING_PLAIN)
			continue;
		if (be == BE_VHOST_USER && p->event_idx != vb->p.event_idx)
			continue;
		return &res[i];
	}
	return NULL;
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : NAN;
}

static void cell(FILE *out, double v, const char *fmt, int width)
{
	if (isnan(v))
		fprintf(out, " %*s", width, "-");
	else
		fprintf(out, fmt, width, v);
}

void report_table(FILE *out, const struct opts *o, const struct result *res,
		  unsigned int n)
{
	unsigned int i;

	fprintf(out, "\n%s: %s%s%s\n", BENCH_NAME, o->dev ? o->dev : "",
		o->dev && o->sock ? " / " : "", o->sock ? o->sock : "");
	if (o->label)
		fprintf(out, "device: %s\n", o->label);
	if (o->vu_peer && o->sock)
		fprintf(out, "vhost-user back-end: %s\n", o->vu_peer);
	if (report_emulated(o))
		fprintf(out, "ENVIRONMENT: %s -- NOT hardware figures: absolute numbers are those of an emulated CPU; compare only ratios and per-request counts.\n",
			report_env(o));
	else
		fprintf(out, "environment: %s\n", report_env(o));
	fprintf(out, "%u-byte random I/O, %s, %s, %s.\nlatency in us; notif/r, kick/r: guest notifications and kicks per request; cpu/r: back-end CPU us per request (its threads + all irq/softirq time);\nvb/vu, vb/raw: vhost-blk IOPS / vhost-user back-end IOPS, / io_uring IOPS; cpu/vu: vhost-blk cpu/r / vhost-user cpu/r\n",
		o->bs, o->ios ? "count-based" : "time-based",
		o->workers == WORKERS_PER_QUEUE ?
		(o->pin_memory ? "one vhost worker per queue, guest memory pinned" :
		 "one vhost worker per queue") :
		(o->pin_memory ? "one vhost worker per device, guest memory pinned" :
		 "one vhost worker per device"),
		o->split_cpus ? "queue i on CPU i, back-end on the last CPU" :
		"threads placed by the scheduler");
	fprintf(out, "%-42s %-10s %9s %8s %8s %8s %7s %7s %8s %6s %6s %6s\n",
		"workload", "backend", "IOPS", "mean", "p50", "p99",
		"notif/r", "kick/r", "cpu/r", "vb/vu", "vb/raw", "cpu/vu");
	for (i = 0; i < n; i++) {
		const struct result *r = &res[i];
		const struct result *vu = NULL, *raw = NULL;
		double nan = NAN;
		struct figures f, fu, fr;
		char name[96];

		workload_name(&r->p, name, sizeof(name));
		fprintf(out, "%-42s %-10s", name, r->p.be == BE_URING &&
			r->p.uring != URING_PLAIN ? uring_name(r->p.uring) :
			be_name(r->p.be));
		if (r->unsupported) {
			fprintf(out, " unsupported by this kernel\n");
			continue;
		}
		if (!r->ok) {
			fprintf(out, " FAILED\n");
			continue;
		}
		figures_of(r, &f);
		fprintf(out, " %9.0f %8.1f %8.1f %8.1f", f.iops,
			f.lat_mean_us, f.lat_p50_us, f.lat_p99_us);
		if (r->p.be == BE_URING) {
			cell(out, nan, "", 7);
			cell(out, nan, "", 7);
		} else {
			cell(out, f.notif, " %*.2f", 7);
			cell(out, f.kicks, " %*.2f", 7);
		}
		cell(out, f.cpu_us, " %*.1f", 8);
		if (r->p.be == BE_VHOST_BLK) {
			vu = report_match(res, n, r, BE_VHOST_USER);
			raw = report_match(res, n, r, BE_URING);
		}
		if (vu)
			figures_of(vu, &fu);
		if (raw)
			figures_of(raw, &fr);
		cell(out, vu ? ratio(f.iops, fu.iops) : nan, " %*.2f", 6);
		cell(out, raw ? ratio(f.iops, fr.iops) : nan, " %*.2f", 6);
		cell(out, vu ? ratio(f.be_cpu_us, fu.be_cpu_us) : nan,
		     " %*.2f", 6);
		fputc('\n', out);
	}
	fflush(out);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, const char *key, double v)
{
	if (isnan(v) || isinf(v))
		fprintf(f, ",\"%s\":null", key);
	else
		fprintf(f, ",\"%s\":%.6g", key, v);
}

static void json_u64(FILE *f, const char *key, uint64_t v)
{
	fprintf(f, ",\"%s\":%llu", key, (unsigned long long)v);
}

static void json_ratios(FILE *f, const char *key, const struct figures *a,
			const struct result *other)
{
	struct figures b;

	if (!other) {
		fprintf(f, ",\"%s\":null", key);
		return;
	}
	figures_of(other, &b);
	fprintf(f, ",\"%s\":{\"backend\":\"%s\"", key, be_name(other->p.be));
	json_num(f, "iops", ratio(a->iops, b.iops));
	json_num(f, "lat_mean", ratio(a->lat_mean_us, b.lat_mean_us));
	json_num(f, "be_cpu_per_req", ratio(a->be_cpu_us, b.be_cpu_us));
	json_num(f, "cpu_per_req", ratio(a->cpu_us, b.cpu_us));
	fputc('}', f);
}

static void json_dev_stats(FILE *f, const struct result *r)
{
	const struct vhost_blk_vring_stats *d = &r->dev;

	fputs(",\"vhost_blk_stats\":{", f);
	fprintf(f, "\"reqs_in\":%llu", (unsigned long long)d->reqs_in);
	json_u64(f, "reqs_out", d->reqs_out);
	json_u64(f, "reqs_ioerr", d->reqs_ioerr);
	json_u64(f, "bytes_read", d->bytes_read);
	json_u64(f, "bytes_written", d->bytes_written);
	json_u64(f, "kicks", d->kicks);
	json_u64(f, "notifies", d->notifies);
	json_u64(f, "notifies_suppressed", d->notifies_suppressed);
	json_u64(f, "used_batches", d->used_batches);
	json_u64(f, "polls", d->polls);
	json_u64(f, "poll_hits", d->poll_hits);
	json_u64(f, "poll_ns", d->poll_ns);
	json_u64(f, "inflight_max", d->inflight_max);
	json_u64(f, "poll_window_ns", d->poll_window_ns);
	if (r->have_cpoll_stats) {
		json_u64(f, "polled_bios", d->polled_bios);
		json_u64(f, "poll_reaped", d->poll_reaped);
		json_u64(f, "poll_fallbacks", d->poll_fallbacks);
	}
	fputc('}', f);
}

static void json_run(FILE *f, const struct opts *o, const struct result *res,
		     unsigned int n, const struct result *r, const char *when)
{
	const struct point *p = &r->p;
	struct figures fig;
	char poll[32];

	figures_of(r, &fig);
	polling_name(p, poll, sizeof(poll));
	fprintf(f, "{\"tool\":\"%s\",\"date\":\"%s\",\"environment\":", BENCH_NAME,
		when);
	json_str(f, report_env(o));
	fprintf(f, ",\"emulated\":%s", report_emulated(o) ? "true" : "false");
	fputs(",\"note\":", f);
	json_str(f, report_emulated(o) ?
		 "measured under QEMU TCG emulation: not a hardware figure" :
		 "");
	fputs(",\"experiment\":", f);
	json_str(f, o->tag);
	fputs(",\"device\":", f);
	json_str(f, o->dev);
	fputs(",\"label\":", f);
	json_str(f, o->label);
	fputs(",\"backend\":", f);
	json_str(f, be_name(p->be));
	fputs(",\"peer\":", f);
	if (p->be == BE_VHOST_USER && o->vu_peer)
		json_str(f, o->vu_peer);
	else
		fputs("null", f);
	fputs(",\"rw\":", f);
	json_str(f, rw_name(p->rw));
	json_u64(f, "bs", o->bs);
	json_u64(f, "iodepth", p->iodepth);
	json_u64(f, "queues", p->queues);
	if (p->event_idx < 0)
		fputs(",\"event_idx\":null", f);
	else
		fprintf(f, ",\"event_idx\":%s", p->event_idx ? "true" : "false");
	if (p->poll_us < 0)
		fputs(",\"poll_us\":null,\"poll_adaptive\":null", f);
	else
		fprintf(f, ",\"poll_us\":%d,\"poll_adaptive\":%s", p->poll_us,
			p->poll_adaptive ? "true" : "false");
	fprintf(f, ",\"polling\":\"%s\"", poll);
	if (p->poll_completions < 0)
		fputs(",\"poll_completions\":null", f);
	else
		fprintf(f, ",\"poll_completions\":%s",
			p->poll_completions ? "true" : "false");
	fprintf(f, ",\"uring_mode\":%s%s%s", p->be == BE_URING ? "\"" : "",
		p->be == BE_URING ? uring_name(p->uring) : "null",
		p->be == BE_URING ? "\"" : "");
	json_u64(f, "rep", p->rep);
	fprintf(f, ",\"workers\":\"%s\"", p->be != BE_VHOST_BLK ? "" :
		o->workers == WORKERS_PER_QUEUE ? "per-queue" : "shared");
	fprintf(f, ",\"pin_memory\":%s",
		p->be == BE_VHOST_BLK && o->pin_memory ? "true" : "false");
	fprintf(f, ",\"cpus\":\"%s\"", o->split_cpus ? "split" : "any");
	json_u64(f, "ring", o->ring);
	fprintf(f, ",\"indirect\":%s", o->indirect ? "true" : "false");
	fprintf(f, ",\"mode\":\"%s\"", o->ios ? "count" : "time");
	json_num(f, "ramp_s", o->ios ? 0 : o->ramp_s);
	json_num(f, "secs", r->secs);
	fprintf(f, ",\"ok\":%s", r->ok ? "true" : "false");
	fprintf(f, ",\"status\":\"%s\"", r->unsupported ? "unsupported" :
		r->ok ? "ok" : "failed");
	json_u64(f, "capacity", r->capacity);
	json_u64(f, "issued", r->tot.issued);
	json_u64(f, "completed", r->tot.completed);
	json_u64(f, "errors", r->tot.errors);
	json_u64(f, "bad_len", r->tot.bad_len);
	json_u64(f, "bytes", r->tot.bytes);
	json_u64(f, "measured", r->tot.m_done);
	json_num(f, "iops", fig.iops);
	json_num(f, "lat_mean_us", fig.lat_mean_us);
	json_num(f, "lat_p50_us", fig.lat_p50_us);
	json_num(f, "lat_p99_us", fig.lat_p99_us);
	json_num(f, "lat_max_us", fig.lat_max_us);
	if (p->be == BE_URING) {
		fputs(",\"notif_per_req\":null,\"kicks_per_req\":null", f);
		json_num(f, "syscalls_per_req", fig.syscalls);
	} else {
		json_num(f, "notif_per_req", fig.notif);
		json_num(f, "kicks_per_req", fig.kicks);
		json_num(f, "wakeups_per_req", fig.wakeups);
		json_num(f, "spurious_per_req", fig.spurious);
		json_num(f, "kicks_suppressed_per_req", fig.kicks_suppressed);
	}
	json_num(f, "be_cpu_us_per_req", fig.be_cpu_us);
	json_num(f, "irq_cpu_us_per_req", fig.irq_cpu_us);
	json_num(f, "cpu_us_per_req", fig.cpu_us);
	fputs(",\"be_cpu_of\":", f);
	json_str(f, r->be_cpu_what);
	json_u64(f, "be_threads", r->be_threads);
	/* Per request, the back-end's threads (be_cpu_of) as for CPU. */
	json_num(f, "be_ctxsw_per_req", fig.be_csw);
	json_num(f, "be_syscalls_per_req", fig.be_syscalls);
	fprintf(f, ",\"cpu_source\":\"%s\"", r->cpu_ticks ? "stat ticks" :
		"schedstat");
	if (p->be != BE_URING)
		json_num(f, "guest_cpu_us_per_req", fig.guest_cpu_us);
	if (p->be == BE_VHOST_BLK) {
		json_ratios(f, "vs_vhost_user", &fig,
			    report_match(res, n, r, BE_VHOST_USER));
		json_ratios(f, "vs_io_uring", &fig,
			    report_match(res, n, r, BE_URING));
		if (r->have_dev_stats)
			json_dev_stats(f, r);
	}
	fputs("}\n", f);
}

int report_json(const char *path, const struct opts *o,
		const struct result *res, unsigned int n)
{
	char when[32];
	time_t now = time(NULL);
	unsigned int i;
	FILE *f;

	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	f = !strcmp(path, "-") ? stdout : fopen(path, "ae");
	if (!f) {
		int err = errno;

		bench_err("--json %s: %s", path, strerror(err));
		return -err;
	}
	for (i = 0; i < n; i++)
		json_run(f, o, res, n, &res[i], when);
	if (f != stdout && fclose(f)) {
		int err = errno;

		bench_err("writing %s: %s", path, strerror(err));
		return -err;
	}
	return 0;
}
