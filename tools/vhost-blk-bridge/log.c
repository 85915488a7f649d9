// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: messages.
 */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

FILE *vbb_log_file;
bool vbb_verbose;

static void vbb_vlog(const char *level, const char *fmt, va_list ap)
{
	FILE *f = vbb_log_file ? vbb_log_file : stderr;

	fprintf(f, "vhost-blk-bridge: %s", level);
	vfprintf(f, fmt, ap);
	fputc('\n', f);
	fflush(f);
}

void vbb_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vbb_vlog("error: ", fmt, ap);
	va_end(ap);
}

void vbb_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vbb_vlog("warning: ", fmt, ap);
	va_end(ap);
}

void vbb_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vbb_vlog("", fmt, ap);
	va_end(ap);
}

void vbb_dbg(const char *fmt, ...)
{
	va_list ap;

	if (!vbb_verbose)
		return;
	va_start(ap, fmt);
	vbb_vlog("", fmt, ap);
	va_end(ap);
}
