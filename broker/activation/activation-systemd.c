/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Service activation through systemd: the ActivationRequest, its
 * ActivationFailure, messages that wait for systemd to be on the bus. See
 * activation-internal.h.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include "broker/activation/activation-internal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "util/fd.h"

/* -------------------------------------------------------------- systemd */

static int build_activation_request(struct activation *a, const char *unit, struct message **mp)
{
	struct message_builder b;
	int r;

	message_builder_init_signal(&b, DC_PATH_DBUS, SYSTEMD_ACTIVATOR_INTERFACE,
				    "ActivationRequest", "s");
	b.sender = DC_SERVICE_DBUS;
	b.destination = ACTIVATION_SYSTEMD_NAME;
	dc_writer_write(&b.body, "s", unit);
	r = message_builder_seal(&b, a->ops->next_serial(a->userdata), mp);
	message_builder_deinit(&b);
	return r;
}

/*
 * Send the ActivationRequest of @p if systemd is there. @capture: show it to
 * the monitors (when it is first made, even if systemd is not there yet, as
 * dbus-daemon logs it; not again when it goes out later). Return 0 or
 * negative errno.
 */
int act_pending_request_systemd(struct pending *p, bool capture)
{
	struct activation *a = p->a;
	_cleanup_message_ struct message *m = NULL;
	int r;

	r = build_activation_request(a, p->unit, &m);
	if (r < 0)
		return r;
	if (capture && a->ops->capture)
		a->ops->capture(a->userdata, NULL, m);
	if (a->ops->send_to_systemd(a->userdata, m)) {
		p->request_sent = true;
		p->a->changes++;
		act_log(a, 6, "Activating via systemd: service name='%s' unit='%s'", p->name,
			p->unit);
	} else {
		act_log(a, 6, "Activating systemd to hand-off: service name='%s' unit='%s'",
			p->name, p->unit);
	}
	return 0;
}

bool activation_is_systemd_failure(const struct message *msg)
{
	return msg->type == DC_MESSAGE_SIGNAL && msg->interface && msg->member &&
	       !strcmp(msg->interface, SYSTEMD_ACTIVATOR_INTERFACE) &&
	       !strcmp(msg->member, "ActivationFailure");
}

int activation_systemd_failure(struct activation *a, struct message *msg)
{
	const char *unit, *error, *text;
	struct dc_reader r;

	if (!activation_is_systemd_failure(msg) || strcmp(msg->signature, "sss"))
		return 0;
	if (message_get_body_reader(msg, &r) != 0 ||
	    dc_reader_read(&r, "sss", &unit, &error, &text) != 0)
		return 0;
	act_log(a, 6, "Activation via systemd failed for unit '%s': %s", unit, text);
	for (;;) {
		struct pending *p, *found = NULL;

		list_for_each_entry(p, &a->pendings, link) {
			if (p->unit && !strcmp(p->unit, unit)) {
				found = p;
				break;
			}
		}
		if (!found)
			return 0;
		act_pending_fail_quiet(found, error, text);	/* logged once, above */
	}
}

/*
 * A message of the bus for systemd, which is not on the bus: it waits on the
 * pending activation of org.freedesktop.systemd1 (sender NULL), as in
 * dbus-daemon. Bounded like any queued request. Return 0 or -ENOMEM.
 */
int act_queue_for_systemd(struct activation *a, struct message *msg)
{
	struct pending *p = act_pending_find(a, ACTIVATION_SYSTEMD_NAME);
	size_t size = message_get_size(msg);
	struct act_entry *e;
	int r;

	if (a->n_entries >= a->max_pending || a->n_bytes + size > ACTIVATION_QUEUE_BYTES_MAX) {
		act_log(a, 4, "Too many pending activations: message for systemd dropped");
		return 0;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	if (!p) {
		r = act_pending_new(a, ACTIVATION_SYSTEMD_NAME, NULL, &p);
		if (r < 0) {
			free(e);
			return r;
		}
	}
	e->msg = message_ref(msg);
	e->size = size;
	e->auto_start = true;
	list_append(&p->entries, &e->link);
	a->changes++;
	a->n_entries++;
	a->n_bytes += size;
	return 0;
}

