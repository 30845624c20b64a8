/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The bus driver: org.freedesktop.DBus and friends, table-driven: the
 * tables, properties, introspection, dispatch and the reply helpers; the
 * methods are in the files driver-internal.h lists. See driver.h. Error
 * names and texts follow dbus-daemon 1.14.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>
#include "broker/activation/activation.h"
#include "broker/core/bus.h"
#include "broker/core/bus-journal.h"
#include "broker/objects/peer.h"
#include "broker/core/driver.h"
#include "broker/core/driver-internal.h"
#include "broker/objects/log.h"
#include "broker/objects/log-limit.h"
#include "broker/objects/match.h"
#include "broker/core/monitor.h"
#include "broker/objects/name.h"
#include "broker/policy/policy.h"
#include "broker/objects/reply.h"
#include "broker/core/router.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/native-protocol.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/signature.h"
#include "dbus-compat/socket.h"
#include "dbus-compat/validate.h"

int driver_fail(struct driver_call *c, const char *name, const char *fmt, ...)
{
	va_list ap;

	c->err_name = name;
	free(c->err_text);
	c->err_text = NULL;
	va_start(ap, fmt);
	if (vasprintf(&c->err_text, fmt, ap) < 0)
		c->err_text = NULL;
	va_end(ap);
	return DRIVER_E_ERROR_SET;
}

int driver_fail_limit(struct driver_call *c, const char *limit, long long value,
		      const char *fmt, ...)
{
	struct log_limit *l = peer_refusal_log(c->peer);
	va_list ap;

	c->err_name = DC_ERROR_LIMITS_EXCEEDED;
	free(c->err_text);
	va_start(ap, fmt);
	if (vasprintf(&c->err_text, fmt, ap) < 0)
		c->err_text = NULL;
	va_end(ap);
	if (c->err_text && limit)
		log_limit_printf(&c->bus->log_limits, l, LOG_WARNING, "%s (%s=%lld)", c->err_text,
				 limit, value);
	else if (c->err_text)
		log_limit_printf(&c->bus->log_limits, l, LOG_WARNING, "%s", c->err_text);
	return DRIVER_E_ERROR_SET;
}

void driver_reply_init(struct driver_call *c, struct message_builder *b, const char *sig)
{
	message_builder_init_method_return(b, c->msg, sig);
	b->sender = DC_SERVICE_DBUS;
}

/*
 * Seal and send a reply, also to a call that expects none: dbus-daemon does
 * (only its acknowledgements honour the flag, driver_reply_ack()). Deinits @b.
 */
int driver_reply_send(struct driver_call *c, struct message_builder *b)
{
	_cleanup_message_ struct message *m = NULL;
	int r;

	r = message_builder_seal(b, bus_next_serial(c->bus), &m);
	message_builder_deinit(b);
	if (r < 0)
		return r;
	router_send_from_driver(c->bus, c->peer, m);
	return 0;
}

int driver_reply_ack(struct driver_call *c)
{
	if (c->msg->flags & DC_FLAG_NO_REPLY_EXPECTED)
		return 0;
	return driver_reply_empty(c);
}

int driver_reply_empty(struct driver_call *c)
{
	struct message_builder b;

	driver_reply_init(c, &b, "");
	return driver_reply_send(c, &b);
}

int driver_reply_u(struct driver_call *c, uint32_t v)
{
	struct message_builder b;

	driver_reply_init(c, &b, "u");
	dc_writer_write(&b.body, "u", v);
	return driver_reply_send(c, &b);
}

int driver_reply_s(struct driver_call *c, const char *s)
{
	struct message_builder b;

	driver_reply_init(c, &b, "s");
	dc_writer_write(&b.body, "s", s);
	return driver_reply_send(c, &b);
}

int driver_reply_b(struct driver_call *c, bool v)
{
	struct message_builder b;

	driver_reply_init(c, &b, "b");
	dc_writer_write(&b.body, "b", (int)v);
	return driver_reply_send(c, &b);
}

bool driver_caller_is_privileged(const struct driver_call *c)
{
	return c->peer->uid == c->bus->uid || c->peer->uid == 0;
}

/* Read the single string argument every "s" method has. */
int driver_read_name(struct driver_call *c, const char **namep)
{
	int r = dc_reader_read(&c->reader, "s", namep);

	if (r)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
	return 0;
}

int driver_lookup_conn(struct driver_call *c, const char *what, const char **namep,
		       struct peer **connp, bool *selfp)
{
	const char *name;
	int r;

	r = driver_read_name(c, &name);
	if (r)
		return r;
	*namep = name;
	*selfp = !strcmp(name, DC_SERVICE_DBUS);
	if (*selfp)
		return 0;
	*connp = bus_resolve(c->bus, name);
	if (!*connp)
		return driver_fail(c, DC_ERROR_NAME_HAS_NO_OWNER,
				   "Could not get %s of name '%s': no such name", what, name);
	return 0;
}

/* One {sv} entry whose value is of the basic @type, passed as dc_writer_write() takes it. */
static void driver_asv(struct dc_writer *w, const char *key, const char *type, ...)
{
	va_list ap;

	dc_writer_open(w, '{', NULL);
	dc_writer_write(w, "s", key);
	dc_writer_open(w, 'v', type);
	va_start(ap, type);
	dc_writer_writev(w, type, ap);
	va_end(ap);
	dc_writer_close(w);
	dc_writer_close(w);
}

void driver_asv_u(struct dc_writer *w, const char *key, uint32_t v)
{
	driver_asv(w, key, "u", v);
}

void driver_asv_t(struct dc_writer *w, const char *key, uint64_t v)
{
	driver_asv(w, key, "t", v);
}

void driver_asv_b(struct dc_writer *w, const char *key, bool v)
{
	driver_asv(w, key, "b", (int)v);
}

void driver_asv_s(struct dc_writer *w, const char *key, const char *v)
{
	driver_asv(w, key, "s", v);
}

/* ------------------------------------------------------------ Properties */

static int prop_features(struct driver_call *c, struct dc_writer *w);
static int prop_interfaces(struct driver_call *c, struct dc_writer *w);


static const struct driver_property dbus_properties[] = {
	{ "Features", "as", prop_features },
	{ "Interfaces", "as", prop_interfaces },
	{}
};

static int method_props_get(struct driver_call *c);
static int method_props_get_all(struct driver_call *c);
static int method_props_set(struct driver_call *c);
static int method_introspect(struct driver_call *c);

/* ------------------------------------------------------------------ tables */


static const struct driver_method dbus_methods[] = {
	{ "Hello", "", "s", driver_method_hello, METHOD_ANY_PATH | METHOD_BOOTSTRAP },
	{ "RequestName", "su", "u", driver_method_request_name, METHOD_ANY_PATH },
	{ "ReleaseName", "s", "u", driver_method_release_name, METHOD_ANY_PATH },
	{ "StartServiceByName", "su", "u", driver_method_start_service_by_name, METHOD_ANY_PATH },
	{ "UpdateActivationEnvironment", "a{ss}", "", driver_method_update_activation_environment,
	  METHOD_PRIVILEGED },
	{ "NameHasOwner", "s", "b", driver_method_name_has_owner, METHOD_ANY_PATH },
	{ "ListNames", "", "as", driver_method_list_names, METHOD_ANY_PATH },
	{ "ListActivatableNames", "", "as", driver_method_list_activatable_names, METHOD_ANY_PATH },
	{ "AddMatch", "s", "", driver_method_add_match, METHOD_ANY_PATH },
	{ "RemoveMatch", "s", "", driver_method_remove_match, METHOD_ANY_PATH },
	{ "GetNameOwner", "s", "s", driver_method_get_name_owner, METHOD_ANY_PATH },
	{ "ListQueuedOwners", "s", "as", driver_method_list_queued_owners, METHOD_ANY_PATH },
	{ "GetConnectionUnixUser", "s", "u", driver_method_get_connection_unix_user,
	  METHOD_ANY_PATH },
	{ "GetConnectionUnixProcessID", "s", "u", driver_method_get_connection_unix_process_id,
	  METHOD_ANY_PATH },
	{ "GetAdtAuditSessionData", "s", "ay", driver_method_get_adt_audit_session_data,
	  METHOD_ANY_PATH },
	{ "GetConnectionSELinuxSecurityContext", "s", "ay",
	  driver_method_get_connection_selinux_security_context, METHOD_ANY_PATH },
	{ "ReloadConfig", "", "", driver_method_reload_config, METHOD_ANY_PATH },
	{ "GetId", "", "s", driver_method_get_id, METHOD_ANY_PATH },
	{ "GetConnectionCredentials", "s", "a{sv}", driver_method_get_connection_credentials,
	  METHOD_ANY_PATH },
	{}
};

static const struct driver_method properties_methods[] = {
	{ "Get", "ss", "v", method_props_get, 0 },
	{ "GetAll", "s", "a{sv}", method_props_get_all, 0 },
	{ "Set", "ssv", "", method_props_set, 0 },
	{}
};

static const struct driver_method introspectable_methods[] = {
	{ "Introspect", "", "s", method_introspect, METHOD_ANY_PATH },
	{}
};

static const struct driver_method monitoring_methods[] = {
	{ "BecomeMonitor", "asu", "", driver_method_become_monitor, METHOD_PRIVILEGED },
	{}
};

static const struct driver_method stats_methods[] = {
	{ "GetStats", "", "a{sv}", driver_method_get_stats, 0 },
	{ "GetConnectionStats", "s", "a{sv}", driver_method_get_connection_stats, 0 },
	{ "GetAllMatchRules", "", "a{sas}", driver_method_get_all_match_rules, 0 },
	/* bus1-broker's own (driver-stats.c), after dbus-daemon's. */
	{ "ListConnectionStats", "uu", "ua(sa{sv})", driver_method_list_connection_stats, 0 },
	{ "GetUserStats", "", "a(ua{sv})", driver_method_get_user_stats, 0 },
	{}
};

static const struct driver_method peer_methods[] = {
	{ "GetMachineId", "", "s", driver_method_get_machine_id, METHOD_ANY_PATH },
	{ "Ping", "", "", driver_method_ping, METHOD_ANY_PATH },
	{}
};

static const struct driver_interface interfaces[] = {
	{ DC_INTERFACE_DBUS, dbus_methods,
	  "    <signal name=\"NameOwnerChanged\">\n"
	  "      <arg type=\"s\"/>\n"
	  "      <arg type=\"s\"/>\n"
	  "      <arg type=\"s\"/>\n"
	  "    </signal>\n"
	  "    <signal name=\"NameLost\">\n"
	  "      <arg type=\"s\"/>\n"
	  "    </signal>\n"
	  "    <signal name=\"NameAcquired\">\n"
	  "      <arg type=\"s\"/>\n"
	  "    </signal>\n"
	  "    <signal name=\"ActivatableServicesChanged\">\n"
	  "    </signal>\n",
	  IFACE_ANY_PATH | IFACE_UNINTERESTING, dbus_properties },
	{ DC_INTERFACE_PROPERTIES, properties_methods,
	  "    <signal name=\"PropertiesChanged\">\n"
	  "      <arg type=\"s\" name=\"interface_name\"/>\n"
	  "      <arg type=\"a{sv}\" name=\"changed_properties\"/>\n"
	  "      <arg type=\"as\" name=\"invalidated_properties\"/>\n"
	  "    </signal>\n",
	  IFACE_UNINTERESTING, NULL },
	{ DC_INTERFACE_INTROSPECTABLE, introspectable_methods, NULL,
	  IFACE_ANY_PATH | IFACE_UNINTERESTING, NULL },
	{ DC_INTERFACE_MONITORING, monitoring_methods, NULL, 0, NULL },
	{ DC_INTERFACE_STATS, stats_methods, NULL, 0, NULL },
	{ DC_INTERFACE_PEER, peer_methods, NULL, IFACE_ANY_PATH | IFACE_UNINTERESTING, NULL },
	{}
};

/*
 * The @k-th interface (NULL: no more): the driver's own, then the @n_extra
 * of @extra (those added to a bus, driver_add_interface()).
 */
static const struct driver_interface *iface_at(const struct driver_interface *const *extra,
					       size_t n_extra, size_t k)
{
	if (k < ARRAY_SIZE(interfaces) - 1)
		return &interfaces[k];
	k -= ARRAY_SIZE(interfaces) - 1;
	return k < n_extra ? extra[k] : NULL;
}

#define for_each_iface(extra, n_extra, i) \
	for (size_t _k = 0; ((i) = iface_at((extra), (n_extra), _k)); _k++)
/* Every interface of the driver of @bus (NULL: its own only). */
#define for_each_interface(bus, i)                                              \
	for_each_iface((bus) ? (bus)->driver_interfaces : NULL,                 \
		       (bus) ? (bus)->n_driver_interfaces : 0, i)

int driver_add_interface(struct bus *bus, const struct driver_interface *iface)
{
	if (bus->n_driver_interfaces == ARRAY_SIZE(bus->driver_interfaces))
		return -ENOSPC;
	bus->driver_interfaces[bus->n_driver_interfaces++] = iface;
	return 0;
}

static int prop_features(struct driver_call *c, struct dc_writer *w)
{
	dc_writer_open(w, 'a', NULL);
	/* Broadcast after every reload (bus.c), as dbus-daemon >= 1.13.14 does. */
	dc_writer_write(w, "s", "ActivatableServicesChanged");
	if (c->bus->apparmor)
		dc_writer_write(w, "s", "AppArmor");
	/* Unknown header fields are dropped when the sender is stitched. */
	dc_writer_write(w, "s", "HeaderFiltering");
	if (c->bus->selinux)
		dc_writer_write(w, "s", "SELinux");
	if (c->bus->systemd_activation)
		dc_writer_write(w, "s", "SystemdActivation");
	return dc_writer_close(w);
}

static int prop_interfaces(struct driver_call *c, struct dc_writer *w)
{
	const struct driver_interface *i;

	dc_writer_open(w, 'a', NULL);
	for_each_interface(c->bus, i)
		if (!(i->flags & IFACE_UNINTERESTING))
			dc_writer_write(w, "s", i->name);
	return dc_writer_close(w);
}

/* Properties are implemented on the canonical path only (dbus-daemon too). */
static const struct driver_interface *find_interface(struct driver_call *c, const char *name)
{
	const struct driver_interface *i;

	for_each_interface(c->bus, i)
		if (!(i->flags & IFACE_HIDDEN) && !strcmp(i->name, name))
			return i;
	driver_fail(c, DC_ERROR_UNKNOWN_INTERFACE, "Interface \"%s\" not found", name);
	return NULL;
}

static const struct driver_property *find_property(struct driver_call *c,
						   const struct driver_interface *i,
						   const char *name)
{
	const struct driver_property *p;

	for (p = i->properties; p && p->name; p++)
		if (!strcmp(p->name, name))
			return p;
	driver_fail(c, DC_ERROR_UNKNOWN_PROPERTY, "Property \"%s.%s\" not found", i->name, name);
	return NULL;
}

static int method_props_get(struct driver_call *c)
{
	const struct driver_interface *i;
	const struct driver_property *p;
	struct message_builder b;
	const char *iface, *prop;
	int r;

	r = dc_reader_read(&c->reader, "ss", &iface, &prop);
	if (r)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
	i = find_interface(c, iface);
	if (!i)
		return DRIVER_E_ERROR_SET;
	p = find_property(c, i, prop);
	if (!p)
		return DRIVER_E_ERROR_SET;
	driver_reply_init(c, &b, "v");
	dc_writer_open(&b.body, 'v', p->type);
	p->get(c, &b.body);
	dc_writer_close(&b.body);
	return driver_reply_send(c, &b);
}

static int method_props_get_all(struct driver_call *c)
{
	const struct driver_interface *i;
	const struct driver_property *p;
	struct message_builder b;
	const char *iface;
	int r;

	r = driver_read_name(c, &iface);
	if (r)
		return r;
	i = find_interface(c, iface);
	if (!i)
		return DRIVER_E_ERROR_SET;
	driver_reply_init(c, &b, "a{sv}");
	dc_writer_open(&b.body, 'a', NULL);
	for (p = i->properties; p && p->name; p++) {
		dc_writer_open(&b.body, '{', NULL);
		dc_writer_write(&b.body, "s", p->name);
		dc_writer_open(&b.body, 'v', p->type);
		p->get(c, &b.body);
		dc_writer_close(&b.body);
		dc_writer_close(&b.body);
	}
	dc_writer_close(&b.body);
	return driver_reply_send(c, &b);
}

static int method_props_set(struct driver_call *c)
{
	const struct driver_interface *i;
	const char *iface, *prop;
	int r;

	r = dc_reader_read(&c->reader, "ss", &iface, &prop);
	if (r)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
	i = find_interface(c, iface);
	if (!i)
		return DRIVER_E_ERROR_SET;
	if (!find_property(c, i, prop))
		return DRIVER_E_ERROR_SET;
	return driver_fail(c, DC_ERROR_PROPERTY_READ_ONLY, "Property '%s.%s' cannot be set",
			   iface, prop);
}

/* -------------------------------------------------------- introspection */

struct strbuf {
	char *s;
	size_t n, cap;
	bool oom;
};

static void sb_add(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	size_t cap;
	char *p;
	int l;

	if (sb->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		l = vsnprintf(sb->s ? sb->s + sb->n : NULL, sb->s ? sb->cap - sb->n : 0, fmt, ap);
		va_end(ap);
		if (l < 0) {
			sb->oom = true;
			return;
		}
		if (sb->s && sb->n + (size_t)l < sb->cap) {
			sb->n += (size_t)l;
			return;
		}
		cap = MAX(sb->cap * 2, sb->n + (size_t)l + 256);
		p = realloc(sb->s, cap);

		if (!p) {
			sb->oom = true;
			return;
		}
		sb->s = p;
		sb->cap = cap;
	}
}

static void sb_args(struct strbuf *sb, const char *sig, const char *direction)
{
	size_t len = strlen(sig), pos = 0, l;

	while (pos < len && (l = signature_next(sig + pos, len - pos)) > 0) {
		sb_add(sb, "      <arg direction=\"%s\" type=\"%.*s\"/>\n", direction, (int)l,
		       sig + pos);
		pos += l;
	}
}

int driver_introspect_xml(char **xmlp, const char *path,
			 const struct driver_interface *const *extra, size_t n_extra)
{
	const struct driver_interface *i;
	const struct driver_method *m;
	const struct driver_property *p;
	struct strbuf sb = {};
	bool canonical = path && !strcmp(path, DC_PATH_DBUS);

	sb_add(&sb, "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection "
		    "1.0//EN\"\n\"http://www.freedesktop.org/standards/dbus/1.0/"
		    "introspect.dtd\">\n<node>\n");
	for_each_iface(extra, n_extra, i) {
		if (i->flags & IFACE_HIDDEN)
			continue;
		if (!canonical && !(i->flags & IFACE_ANY_PATH))
			continue;
		sb_add(&sb, "  <interface name=\"%s\">\n", i->name);
		for (m = i->methods; m->name; m++) {
			sb_add(&sb, "    <method name=\"%s\">\n", m->name);
			sb_args(&sb, m->in, "in");
			sb_args(&sb, m->out, "out");
			sb_add(&sb, "    </method>\n");
		}
		for (p = i->properties; p && p->name; p++)
			sb_add(&sb, "    <property name=\"%s\" type=\"%s\" access=\"read\">\n"
				    "      <annotation name=\"org.freedesktop.DBus.Property."
				    "EmitsChangedSignal\" value=\"const\"/>\n"
				    "    </property>\n", p->name, p->type);
		if (i->extra_xml)
			sb_add(&sb, "%s", i->extra_xml);
		sb_add(&sb, "  </interface>\n");
	}
	/* Make the driver's object discoverable from its parents. */
	if (path && !strcmp(path, "/"))
		sb_add(&sb, "  <node name=\"org/freedesktop/DBus\"/>\n");
	else if (path && !strcmp(path, "/org"))
		sb_add(&sb, "  <node name=\"freedesktop/DBus\"/>\n");
	else if (path && !strcmp(path, "/org/freedesktop"))
		sb_add(&sb, "  <node name=\"DBus\"/>\n");
	sb_add(&sb, "</node>\n");
	if (sb.oom) {
		free(sb.s);
		return -ENOMEM;
	}
	*xmlp = sb.s;
	return 0;
}

static int method_introspect(struct driver_call *c)
{
	_cleanup_free_ char *xml = NULL;
	int r;

	r = driver_introspect_xml(&xml, c->msg->path, c->bus->driver_interfaces,
				  c->bus->n_driver_interfaces);
	if (r < 0)
		return r;
	return driver_reply_s(c, xml);
}

/* ---------------------------------------------------------------- dispatch */

/* Send the error a method set (DRIVER_E_ERROR_SET); free the call. 0 or negative errno. */
static int driver_finish(struct driver_call *c, int r)
{
	if (r == DRIVER_E_ERROR_SET) {
		r = router_send_error(c->peer, c->msg, c->err_name, "%s",
				      c->err_text ? c->err_text : "");
	}
	free(c->err_text);
	return r < 0 ? r : 0;
}

/* Return: 0, the positive code of message_get_body_reader() (unreadable body), -errno. */
static int driver_call_init(struct driver_call *c, struct peer *peer, struct message *msg)
{
	*c = (struct driver_call){ .bus = peer->bus, .peer = peer, .msg = msg };
	return message_get_body_reader(msg, &c->reader);
}

/* Positive code of driver_call_start(). */
enum {
	_DRIVER_CALL_E_SUCCESS,
	DRIVER_CALL_E_ANSWERED,		/* the body cannot be read: InvalidArgs was sent */
};

/*
 * driver_call_init(), and a body that cannot be read is answered with
 * InvalidArgs. Return: 0, DRIVER_CALL_E_ANSWERED or negative errno.
 */
static int driver_call_start(struct driver_call *c, struct peer *peer, struct message *msg)
{
	int r = driver_call_init(c, peer, msg);

	if (r <= 0)
		return r;
	r = driver_finish(c, driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid message body"));
	return r < 0 ? r : DRIVER_CALL_E_ANSWERED;
}

int driver_dispatch(struct peer *peer, struct message *msg)
{
	const struct driver_interface *i;
	const struct driver_method *m;
	struct driver_call c;
	bool canonical, found_iface = false;
	int r;

	/* systemd reports a failed activation (dbus-daemon: only from systemd itself). */
	if (msg->type == DC_MESSAGE_SIGNAL && msg->interface && msg->member &&
	    !strcmp(msg->interface, "org.freedesktop.systemd1.Activator") &&
	    !strcmp(msg->member, "ActivationFailure")) {
		if (bus_resolve(peer->bus, ACTIVATION_SYSTEMD_NAME) == peer)
			return activation_systemd_failure(peer->bus->activation, msg);
		log_info("Ignoring ActivationFailure from non-systemd connection %s",
			 peer_name(peer));
		return 0;
	}
	/* Signals and replies to the bus are ignored, as by dbus-daemon. */
	if (msg->type != DC_MESSAGE_METHOD_CALL)
		return 0;

	r = driver_call_start(&c, peer, msg);
	if (r)
		return r < 0 ? r : 0;

	canonical = msg->path && !strcmp(msg->path, DC_PATH_DBUS);
	for_each_interface(peer->bus, i) {
		if (!canonical && !(i->flags & IFACE_ANY_PATH))
			continue;
		if (msg->interface ? strcmp(msg->interface, i->name) != 0 :
				     (i->flags & IFACE_HIDDEN) != 0)
			continue;
		found_iface = true;
		for (m = i->methods; m->name; m++) {
			if (strcmp(m->name, msg->member))
				continue;
			/* A contained connection is never privileged (dbus's draft). */
			if ((m->flags & (METHOD_PRIVILEGED | METHOD_NO_CONTAINERS)) &&
			    peer->restricted)
				return driver_finish(&c, driver_fail(&c, DC_ERROR_ACCESS_DENIED,
					"rejected attempt to call %s by connection %s (%s) in "
					"container", m->name, peer_name(peer),
					peer_loginfo(peer)));
			if ((m->flags & METHOD_PRIVILEGED) && !driver_caller_is_privileged(&c))
				return driver_finish(&c, driver_fail(&c, DC_ERROR_ACCESS_DENIED,
					"rejected attempt to call %s by connection %s with uid %u",
					m->name, peer_name(peer), (unsigned)peer->uid));
			if (!canonical && !(m->flags & METHOD_ANY_PATH))
				return driver_finish(&c, driver_fail(&c, DC_ERROR_ACCESS_DENIED,
					"Method '%s' is only available at the canonical object "
					"path '%s'", m->name, DC_PATH_DBUS));
			if (strcmp(msg->signature, m->in))
				return driver_finish(&c, driver_fail(&c, DC_ERROR_INVALID_ARGS,
					"Call to %s has wrong args (%s, expected %s)\n", m->name,
					msg->signature, m->in));
			return driver_finish(&c, m->fn(&c));
		}
	}
	return driver_finish(&c, driver_fail(&c, found_iface ? DC_ERROR_UNKNOWN_METHOD :
					     DC_ERROR_UNKNOWN_INTERFACE,
					     "%s does not understand message %s",
					     DC_SERVICE_DBUS, msg->member));
}

int driver_dispatch_peer(struct peer *peer, struct message *msg)
{
	struct driver_call c;
	int r;

	r = driver_call_init(&c, peer, msg);
	if (r < 0)
		return r;
	if (msg->interface && !strcmp(msg->interface, DC_INTERFACE_PEER)) {
		if (!strcmp(msg->member, "Ping") && !strcmp(msg->signature, ""))
			return driver_finish(&c, driver_method_ping(&c));
		if (!strcmp(msg->member, "GetMachineId") && !strcmp(msg->signature, ""))
			return driver_finish(&c, driver_method_get_machine_id(&c));
	}
	return driver_finish(&c, driver_fail(&c, DC_ERROR_UNKNOWN_METHOD,
		"Method \"%s\" with signature \"%s\" on interface \"%s\" doesn't exist\n",
		msg->member, msg->signature, msg->interface ? msg->interface : "(null)"));
}

int driver_hello(struct peer *peer, struct message *msg)
{
	struct bus *bus = peer->bus;
	_cleanup_message_ struct message *m = NULL;
	struct driver_call c;
	int r;

	if (strcmp(msg->signature, "")) {
		r = driver_call_init(&c, peer, msg);
		if (r < 0)
			return r;
		return driver_finish(&c, driver_fail(&c, DC_ERROR_INVALID_ARGS,
			"Call to Hello has wrong args (%s, expected )\n", msg->signature));
	}
	if (bus->n_active >= (unsigned int)bus->limits.max_completed_connections) {
		r = driver_call_init(&c, peer, msg);
		if (r < 0)
			return r;
		/* As dbus-daemon: refuse, but leave the connection (it may retry). */
		return driver_finish(&c, driver_fail_limit(&c, "max_completed_connections",
			(long long)bus->limits.max_completed_connections,
			"The maximum number of active connections has been reached"));
	}

	/* Completed connections count against the user, as in dbus-daemon. */
	if (peer_charge(peer, USER_SLOT_CONNECTIONS, 1)) {
		r = driver_call_init(&c, peer, msg);
		if (r < 0)
			return r;
		return driver_finish(&c, driver_fail_limit(&c, "max_connections_per_user",
			(long long)bus->users->limits.max[USER_SLOT_CONNECTIONS],
			"The maximum number of active connections for UID %u has been reached",
			(unsigned)peer->uid));
	}

	/* Unique names are allocated at Hello, in order, never reused. */
	name_owner_init(&peer->owner, bus->next_id++);
	peer_set_registered(peer);

	r = message_stitch_sender(msg, peer_name(peer), &m);
	if (r < 0)
		return r;
	monitor_capture(bus, m, peer, NULL);

	r = driver_call_init(&c, peer, m);
	if (r < 0)
		return r;
	/* The reply comes before NameOwnerChanged/NameAcquired, as with dbus-daemon. */
	r = driver_finish(&c, driver_reply_s(&c, peer_name(peer)));
	if (r < 0)
		return r;
	r = name_registry_add_unique(bus->names, &peer->owner);
	/* What hangs on it learns (a container's filter: what it may see from the start). */
	if (r >= 0)
		r = peer_attachments_registered(peer);
	/*
	 * A contained peer's membership is the container's to write, and the
	 * side of a peer whose output another transport took over (a native
	 * client's bus1 side) that transport's: a snapshot.
	 */
	if (r >= 0 && (peer->group || peer->restricted || peer->output != peer->transport))
		bus_journal_changed(bus);
	else if (r >= 0)
		bus_journal_hello(peer);
	return r;
}

/* The METHOD_BOOTSTRAP method @msg calls, or NULL. */
static const struct driver_method *find_bootstrap_method(const struct bus *bus,
							  const struct message *msg)
{
	const struct driver_interface *i;
	const struct driver_method *m;

	if (msg->type != DC_MESSAGE_METHOD_CALL || !msg->member || !msg->destination ||
	    strcmp(msg->destination, DC_SERVICE_DBUS))
		return NULL;
	for_each_interface(bus, i) {
		if (msg->interface ? strcmp(msg->interface, i->name) != 0 :
				     (i->flags & IFACE_HIDDEN) != 0)
			continue;
		for (m = i->methods; m->name; m++)
			if ((m->flags & METHOD_BOOTSTRAP) && !strcmp(m->name, msg->member))
				return m;
	}
	return NULL;
}

bool driver_is_bootstrap(const struct bus *bus, const struct message *msg)
{
	return find_bootstrap_method(bus, msg) != NULL;
}

bool driver_is_hello(const struct message *msg)
{
	/* Hello is the driver's own: no other interface is looked at. */
	const struct driver_method *m = find_bootstrap_method(NULL, msg);

	return m && m->fn == driver_method_hello;
}

int driver_dispatch_bootstrap(struct peer *peer, struct message *msg)
{
	const struct driver_method *m = find_bootstrap_method(peer->bus, msg);
	struct driver_call c;
	int r;

	if (m->fn == driver_method_hello)
		return driver_hello(peer, msg);
	/* Not stitched (no unique name yet) and not shown to monitors. */
	r = driver_call_start(&c, peer, msg);
	if (r)
		return r < 0 ? r : 0;
	return driver_finish(&c, m->fn(&c));
}

