/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __BUS1_COMPAT_H
#define __BUS1_COMPAT_H

/**
 * DOC: Kernel version compatibility
 *
 * The module builds against every kernel from 6.1 (Debian 12's) to 6.12
 * (bookworm-security's). Where an interface changed in between, the newer
 * spelling is used in the code and this header provides it for older
 * kernels, so no other file needs a check. What a kernel has is probed in
 * its headers by Kbuild (BUS1_HAVE_*), not guessed from its version:
 * distribution kernels backport.
 */

#include <linux/mm.h>

#ifndef BUS1_HAVE_VM_FLAGS_CLEAR
/* 6.3 made vm_flags read-only and added accessors that take the VMA lock. */
static inline void vm_flags_clear(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#endif

#endif /* __BUS1_COMPAT_H */
