/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Monitors
 *
 * org.freedesktop.DBus.Monitoring.BecomeMonitor turns a connection into a
 * monitor, as in dbus-daemon: it loses its unique and well-known names (with
 * the usual NameLost/NameOwnerChanged signals for the others), its match
 * rules and its pending calls; from then on it only receives copies of the
 * messages that pass through the bus and match one of its filters (an empty
 * filter list matches everything), and it is disconnected if it sends
 * anything. The filters live in their own match registry
 * (bus->monitor_matches) with eavesdrop forced on, so ordinary broadcasts
 * never look at them.
 *
 * monitor_capture() is called for every message the bus routes or sends,
 * after stitching, with the sending and addressed connections (NULL for the
 * driver / no addressed recipient). It is a list-empty check when no monitor
 * exists.
 */

#include <stddef.h>
#include "broker/core/bus.h"

struct bus;
struct peer;
struct match_rule;
struct message;

/**
 * monitor_become() - make @peer a monitor
 * @peer:	a registered, non-monitor connection
 * @rules:	parsed filters (eavesdrop is forced on here); ownership moves to
 *		the monitor registry on success, stays with the caller on failure
 * @n_rules:	number of filters (>= 1; an empty list is [""] by then)
 *
 * Return: 0 or -ENOMEM.
 */
int monitor_become(struct peer *peer, struct match_rule **rules, size_t n_rules);

void monitor_capture_all(struct bus *bus, struct message *msg, struct peer *sender,
			 struct peer *recipient);

/* Inline: without monitors (the common case) it costs a test. */
static inline void monitor_capture(struct bus *bus, struct message *msg, struct peer *sender,
				   struct peer *recipient)
{
	if (!list_is_empty(&bus->monitors))
		monitor_capture_all(bus, msg, sender, recipient);
}
