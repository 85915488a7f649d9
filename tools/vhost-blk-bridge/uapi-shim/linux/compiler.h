/* SPDX-License-Identifier: GPL-2.0 */
/* See compiler_types.h in this directory. */
#ifndef VBB_SHIM_COMPILER_H
#define VBB_SHIM_COMPILER_H
#include <linux/compiler_types.h>
#endif
