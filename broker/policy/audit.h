/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The log of LSM decisions
 *
 * AppArmor's and SELinux's denials (and what their policy asks to audit) go
 * where dbus-daemon sends them: to the audit system as USER_AVC records when
 * the bus may write to it (libaudit, CAP_AUDIT_WRITE in its effective set,
 * a kernel with audit), else to the bus' log at notice level.
 */

/* Log one decision line, e.g. apparmor="DENIED" operation="dbus_bind" ... */
void audit_log_avc(const char *text);

/* Close the audit connection (at exit). */
void audit_log_close(void);
