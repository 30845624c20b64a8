/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: SELinux mediation
 *
 * With SELinux enabled (a policy loaded, selinuxfs mounted), the bus asks
 * the policy what dbus-daemon asks it, through libselinux's userspace access
 * vector cache, in the "dbus" class:
 *  - acquire_svc: may a connection own a name? The name's context is the one
 *    of its <selinux><associate own= context=/>, else the bus' own;
 *  - send_msg: may a message go from one connection to another (or to the
 *    bus driver, whose context is the bus': Hello first, so a context that
 *    may not send to the bus never gets on it)? Every message between two
 *    connections is asked, replies too; messages from the driver are not,
 *    nor is the start of a service (the service is asked once it is there).
 * A connection's context is its socket's peer label (SO_PEERSEC, from when
 * it connected; a native client's, the socket it bootstrapped through),
 * carried across a re-exec with the credentials. A connection without one
 * is not accepted.
 *
 * The policy may change while the bus runs: the cache follows the kernel's
 * netlink notifications (policy loads, enforcing mode), and a policy load
 * reloads the configuration, so that <associate> contexts are looked up
 * again, as dbus-daemon does (it raises SIGHUP). Decisions the policy asks
 * to audit are logged as libselinux writes them (avc: denied { send_msg }
 * for msgtype=... scontext=... tcontext=... tclass=dbus), to audit when the
 * bus may write to it (audit.h). Permissive mode logs and allows.
 *
 * Without SELinux there is no struct selinux (bus->selinux NULL).
 */

#include <stdbool.h>
#include <systemd/sd-event.h>
#include "broker/policy/policy.h"

struct bus_config;
struct message;
struct peer;

enum {
	_SELINUX_E_SUCCESS,
	SELINUX_E_FAILED,		/* the bus cannot mediate: it must not start */
	SELINUX_E_NO_CONTEXT,		/* a peer without a context the cache knows */
};
struct selinux;

/**
 * selinux_new() - start mediating if SELinux is enabled
 * @sp:		output: the mediation, or NULL when SELinux is off
 * @errorp:	set (malloc()ed) when the bus must not start
 *
 * Return: 0, SELINUX_E_FAILED (the cache or the bus' own context failed:
 * *@errorp), or -ENOMEM.
 */
int selinux_new(struct selinux **sp, char **errorp);
struct selinux *selinux_free(struct selinux *s);

/* Follow policy loads and mode changes on @event. Return 0 or negative errno. */
int selinux_attach(struct selinux *s, sd_event *event);

/* Whether SELinux is enabled here (<include if_selinux_enabled=>). */
bool selinux_is_enabled(void);

/* The policy root for <include selinux_root_relative=>, or NULL. */
const char *selinux_root(void);

/* (Re)read the <associate> contexts of @config. Unknown contexts are skipped. */
void selinux_set_associations(struct selinux *s, const struct bus_config *config);

/*
 * Whether @peer has a context the cache knows. Return 0,
 * SELINUX_E_NO_CONTEXT (none: it cannot be accepted), or -ENOMEM.
 */
int selinux_peer_setup(struct selinux *s, struct peer *peer);

/* May @peer own @name? Return ACCESS_ALLOWED, ACCESS_DENIED (logged), -ENOMEM. */
int selinux_check_acquire(struct selinux *s, struct peer *peer, const char *name);

/**
 * selinux_check_send() - may @m go from @from to @to (NULL: the driver)?
 * @audit:	log as the policy says; false: a probe (of the direct path,
 *		where nothing is logged per message), which allows only when
 *		the policy allows without asking to log it (auditallow)
 * Return: ACCESS_ALLOWED, ACCESS_DENIED, -ENOMEM.
 */
int selinux_check_send(struct selinux *s, struct peer *from, struct peer *to,
		       const struct message *m, bool audit);

/*
 * The context of @peer (NULL: the bus itself), malloc()ed into *@ctxp.
 * Return 0, SELINUX_E_NO_CONTEXT if unknown, -ENOMEM.
 */
int selinux_context(struct selinux *s, struct peer *peer, char **ctxp);
