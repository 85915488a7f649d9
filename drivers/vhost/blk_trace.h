/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Tracepoints of vhost-blk: perf record -e 'vhost_blk:*'.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM vhost_blk

#ifndef _VHOST_BLK_TRACE_ENUMS
#define _VHOST_BLK_TRACE_ENUMS
/* Why a busy poll ended; vhost_blk_poll_end shows them by name. */
enum vhost_blk_poll_outcome {
	VHOST_BLK_POLL_TIMEOUT,		/* window over: sleep */
	VHOST_BLK_POLL_REQUEST,		/* the guest added a request */
	VHOST_BLK_POLL_COMPLETION,	/* done_work is queued: requeue */
	VHOST_BLK_POLL_YIELD,		/* other work or need_resched: requeue */
	VHOST_BLK_POLL_SIGNAL,		/* the owner is dying: sleep */
	VHOST_BLK_POLL_CONTROL,		/* an ioctl wants the ring: sleep */
};
#endif

#if !defined(_VHOST_BLK_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _VHOST_BLK_TRACE_H

#include <linux/tracepoint.h>

/* The values into the format file, for perf and trace-cmd. */
TRACE_DEFINE_ENUM(VHOST_BLK_POLL_TIMEOUT);
TRACE_DEFINE_ENUM(VHOST_BLK_POLL_REQUEST);
TRACE_DEFINE_ENUM(VHOST_BLK_POLL_COMPLETION);
TRACE_DEFINE_ENUM(VHOST_BLK_POLL_YIELD);
TRACE_DEFINE_ENUM(VHOST_BLK_POLL_SIGNAL);
TRACE_DEFINE_ENUM(VHOST_BLK_POLL_CONTROL);

DECLARE_EVENT_CLASS(vhost_blk_req_class,
	TP_PROTO(unsigned int vq, u16 desc, u32 type, u64 sector, u64 len,
		 u8 status),
	TP_ARGS(vq, desc, type, sector, len, status),
	TP_STRUCT__entry(
		__field(unsigned int, vq)
		__field(u16, desc)
		__field(u8, status)
		__field(u32, type)
		__field(u64, sector)
		__field(u64, len)
	),
	TP_fast_assign(
		__entry->vq = vq;
		__entry->desc = desc;
		__entry->type = type;
		__entry->sector = sector;
		__entry->len = len;
		__entry->status = status;
	),
	TP_printk("vq=%u desc=%u type=%u sector=%llu len=%llu status=%u",
		  __entry->vq, __entry->desc, __entry->type,
		  __entry->sector, __entry->len, __entry->status)
);

/* A request taken from the ring (status is 0 until it completes). */
DEFINE_EVENT(vhost_blk_req_class, vhost_blk_req_submit,
	TP_PROTO(unsigned int vq, u16 desc, u32 type, u64 sector, u64 len,
		 u8 status),
	TP_ARGS(vq, desc, type, sector, len, status));

/* A request answered: status byte written, about to enter the used ring. */
DEFINE_EVENT(vhost_blk_req_class, vhost_blk_req_complete,
	TP_PROTO(unsigned int vq, u16 desc, u32 type, u64 sector, u64 len,
		 u8 status),
	TP_ARGS(vq, desc, type, sector, len, status));

/* The used ring moved on: the guest was signalled, or asked not to be. */
TRACE_EVENT(vhost_blk_notify,
	TP_PROTO(unsigned int vq, u16 used_idx, bool sent),
	TP_ARGS(vq, used_idx, sent),
	TP_STRUCT__entry(
		__field(unsigned int, vq)
		__field(u16, used_idx)
		__field(bool, sent)
	),
	TP_fast_assign(
		__entry->vq = vq;
		__entry->used_idx = used_idx;
		__entry->sent = sent;
	),
	TP_printk("vq=%u used_idx=%u %s", __entry->vq, __entry->used_idx,
		  __entry->sent ? "sent" : "suppressed")
);

/* The worker ran for a ring: woken by a guest kick or by itself. */
TRACE_EVENT(vhost_blk_kick,
	TP_PROTO(unsigned int vq, bool guest),
	TP_ARGS(vq, guest),
	TP_STRUCT__entry(
		__field(unsigned int, vq)
		__field(bool, guest)
	),
	TP_fast_assign(
		__entry->vq = vq;
		__entry->guest = guest;
	),
	TP_printk("vq=%u %s", __entry->vq,
		  __entry->guest ? "guest kick" : "requeued")
);

TRACE_EVENT(vhost_blk_poll_start,
	TP_PROTO(unsigned int vq, u64 window_ns),
	TP_ARGS(vq, window_ns),
	TP_STRUCT__entry(
		__field(unsigned int, vq)
		__field(u64, window_ns)
	),
	TP_fast_assign(
		__entry->vq = vq;
		__entry->window_ns = window_ns;
	),
	TP_printk("vq=%u window_ns=%llu", __entry->vq, __entry->window_ns)
);

TRACE_EVENT(vhost_blk_poll_end,
	TP_PROTO(unsigned int vq, u64 ns, int outcome),
	TP_ARGS(vq, ns, outcome),
	TP_STRUCT__entry(
		__field(unsigned int, vq)
		__field(u64, ns)
		__field(int, outcome)
	),
	TP_fast_assign(
		__entry->vq = vq;
		__entry->ns = ns;
		__entry->outcome = outcome;
	),
	TP_printk("vq=%u ns=%llu %s", __entry->vq, __entry->ns,
		  __print_symbolic(__entry->outcome,
				   { VHOST_BLK_POLL_TIMEOUT, "timeout" },
				   { VHOST_BLK_POLL_REQUEST, "request" },
				   { VHOST_BLK_POLL_COMPLETION, "completion" },
				   { VHOST_BLK_POLL_YIELD, "yield" },
				   { VHOST_BLK_POLL_SIGNAL, "signal" },
				   { VHOST_BLK_POLL_CONTROL, "control" }))
);

#endif /* _VHOST_BLK_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE blk_trace
#include <trace/define_trace.h>
