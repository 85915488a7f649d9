/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The include/uapi headers of linux-source have not been through
 * headers_install: they include <linux/compiler_types.h> and
 * <linux/compiler.h> and use the sparse annotations that headers_install
 * strips.  Userspace needs none of it.
 */
#ifndef VBB_SHIM_COMPILER_TYPES_H
#define VBB_SHIM_COMPILER_TYPES_H

#ifndef __user
#define __user
#endif
#ifndef __force
#define __force
#endif
#ifndef __iomem
#define __iomem
#endif

#endif
