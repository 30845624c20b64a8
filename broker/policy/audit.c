/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The log of LSM decisions: audit or the bus' log. See audit.h.
 */

#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>
#if HAVE_LIBAUDIT
#include <libaudit.h>
#endif
#include "broker/policy/audit.h"
#include "broker/objects/log.h"

#if HAVE_LIBAUDIT
/* -2: not tried yet; -1: no audit (no capability, no kernel support). */
static int audit_fd = -2;

static bool have_audit_write(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};

	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	return data[CAP_AUDIT_WRITE / 32].effective & (1U << (CAP_AUDIT_WRITE % 32));
}

/*
 * Opened on first use, not at start: the bus may drop to <user> after its
 * set-up, and a kernel checks the capability at every write.
 */
static int audit_get_fd(void)
{
	if (audit_fd != -2)
		return audit_fd;
	audit_fd = -1;
	if (!have_audit_write())
		return -1;
	audit_fd = audit_open();
	if (audit_fd < 0) {
		if (errno != EINVAL && errno != EPROTONOSUPPORT && errno != EAFNOSUPPORT)
			log_warn("Failed to open connection to the audit subsystem: %m");
		audit_fd = -1;
	}
	return audit_fd;
}
#endif

void audit_log_avc(const char *text)
{
#if HAVE_LIBAUDIT
	int fd = audit_get_fd();

	if (fd >= 0 && have_audit_write() &&
	    audit_log_user_avc_message(fd, AUDIT_USER_AVC, text, NULL, NULL, NULL,
				       getuid()) > 0)
		return;
#endif
	log_printf(5, "%.*s", (int)strcspn(text, "\n"), text);
}

void audit_log_close(void)
{
#if HAVE_LIBAUDIT
	if (audit_fd >= 0)
		audit_close(audit_fd);
	audit_fd = -2;
#endif
}
