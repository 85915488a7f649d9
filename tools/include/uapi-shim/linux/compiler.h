/* SPDX-License-Identifier: GPL-2.0 */
/* See compiler_types.h in this directory. */
#ifndef VBLK_SHIM_COMPILER_H
#define VBLK_SHIM_COMPILER_H
#include <linux/compiler_types.h>
#endif
