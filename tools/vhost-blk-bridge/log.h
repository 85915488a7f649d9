/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost-blk-bridge: messages on stderr (or wherever vbb_log_file points),
 * each prefixed with the program name.
 */
#ifndef VBB_LOG_H
#define VBB_LOG_H

#include <stdbool.h>
#include <stdio.h>

extern FILE *vbb_log_file;	/* NULL: stderr */
extern bool vbb_verbose;

void vbb_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vbb_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vbb_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Only with --verbose. */
void vbb_dbg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
