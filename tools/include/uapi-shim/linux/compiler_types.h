/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The raw include/uapi headers of linux-source (not run through
 * headers_install) include <linux/compiler_types.h> and <linux/compiler.h>,
 * and use the sparse annotations headers_install strips.  Userspace needs
 * none of it.
 */
#ifndef VBLK_SHIM_COMPILER_TYPES_H
#define VBLK_SHIM_COMPILER_TYPES_H

#ifndef __user
#define __user
#endif
#ifndef __force
#define __force
#endif
#ifndef __iomem
#define __iomem
#endif

#endif /* VBLK_SHIM_COMPILER_TYPES_H */
