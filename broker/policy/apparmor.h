/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: AppArmor mediation
 *
 * The bus asks the kernel's AppArmor policy, as dbus-daemon does, whether a
 * confined client may own a name ("bind"), send a message ("send"), receive
 * one ("receive") and eavesdrop ("eavesdrop"). The questions are label
 * queries of the dbus class (aa_query_label()): the client's label, the bus
 * type (<type> of the configuration), then the name, the other end's label,
 * path, interface and member. Profiles write them as `dbus` rules.
 *
 * When: AppArmor is enabled in the kernel and it mediates D-Bus, which it
 * says with the file features/dbus/mask in its securityfs directory (the
 * flag dbus-daemon looks for; a kernel without it cannot label unix socket
 * peers), and the configuration does not say <apparmor mode="disabled"/>.
 * mode="required" refuses to start without it. Otherwise there is no struct
 * apparmor (bus->apparmor NULL) and nothing is asked.
 *
 * Labels: a client's label is its socket's peer label (SO_PEERSEC), taken
 * when it connected, the label of the process that called connect(). A
 * native client's label is that of the socket it bootstrapped through: its
 * bus1 handle to the bus is a capability the bus handed to that connection
 * only, so every message arriving on it is that connection's. A client
 * without a label is not accepted while mediation is on. A re-executed bus
 * carries the labels over with the credentials (never re-read from
 * processes, which may be gone or be others by then).
 *
 * Decisions, as dbus-daemon makes them: "unconfined" clients are allowed
 * everything; a profile in complain mode is allowed and logged; a requested
 * reply is allowed (the call was); a message to the bus driver is asked
 * against the bus' own label, Hello and whatever else comes before it too
 * (sender ":not.active.yet", as dbus-daemon's): a profile with no rule for
 * the driver is refused Hello, so its client never gets on the bus (the
 * bus1 bootstrap Connect, the transport's handshake, is not asked); a
 * message that starts a service asks only the
 * sender, against the service's AssumedAppArmorLabel=. Messages the driver
 * sends are not mediated. Denials and audited decisions are logged in
 * dbus-daemon's form (apparmor="DENIED" operation="dbus_..." ...), to the
 * audit system when the bus may write to it, else to the log.
 */

#include <stdbool.h>
#include "broker/policy/policy.h"
#include "conf/config.h"

struct apparmor;
struct apparmor_label;
struct message;
struct peer;

enum {
	_APPARMOR_E_SUCCESS,
	APPARMOR_E_UNAVAILABLE,		/* required, but the bus cannot mediate */
	APPARMOR_E_NO_LABEL,		/* a peer without label: not accepted */
};

/**
 * apparmor_new() - decide whether the bus mediates with AppArmor
 * @aap:	output: the mediation, or NULL when there is none
 * @mode:	<apparmor mode=...> of the configuration
 * @bus_type:	<type> of the configuration, or NULL
 * @errorp:	set to a message (malloc()ed) when the bus must not start
 *
 * Return: 0, APPARMOR_E_UNAVAILABLE (mode="required" and no AppArmor D-Bus
 * mediation in the kernel, or the bus' own label cannot be read: *@errorp),
 * or -ENOMEM.
 */
int apparmor_new(struct apparmor **aap, enum bus_config_apparmor mode, const char *bus_type,
		 char **errorp);
struct apparmor *apparmor_free(struct apparmor *aa);

/*
 * The label of a peer, parsed from its credentials (creds.label) on first
 * use and kept with the peer (an attachment, peer.h). Return 0,
 * APPARMOR_E_NO_LABEL if it has none (it cannot be mediated: not accepted),
 * or -ENOMEM.
 */
int apparmor_peer_label(struct peer *peer, const struct apparmor_label **labelp);
struct apparmor_label *apparmor_label_free(struct apparmor_label *label);

/**
 * apparmor_check_bind() - may @peer own @name?
 * Return: ACCESS_ALLOWED, ACCESS_DENIED (logged), -ENOMEM.
 */
int apparmor_check_bind(struct apparmor *aa, struct peer *peer, const char *name);

/**
 * apparmor_check_send() - may @m go from @from to @to?
 * @to:		the receiver (the addressed one or an eavesdropper), or NULL:
 *		the bus driver, or with @activation, a service not yet started
 * @activation:	@m starts a service: only @from is asked, against
 *		@assumed_label (AssumedAppArmorLabel=, may be NULL)
 * @requested_reply: @m is a reply @to waits for: allowed
 * @query_errno: set when denied because the kernel could not be asked
 *
 * Return: ACCESS_ALLOWED, ACCESS_DENIED (logged unless a reply), -ENOMEM.
 */
int apparmor_check_send(struct apparmor *aa, struct peer *from, struct peer *to,
			bool activation, const char *assumed_label, struct message *m,
			bool requested_reply, int *query_errno);

/**
 * apparmor_check_eavesdrop() - may @peer eavesdrop (an eavesdrop=true match
 * rule, BecomeMonitor)?
 * Return: ACCESS_ALLOWED, ACCESS_DENIED (logged), -ENOMEM.
 */
int apparmor_check_eavesdrop(struct apparmor *aa, struct peer *peer);

/* Whether @peer is unconfined: AppArmor allows it everything. */
bool apparmor_peer_unconfined(struct apparmor *aa, struct peer *peer);
