/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The driver's org.freedesktop.DBus.Containers1: dbus's draft interface for
 * container instances (container.h has what they are).
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "broker/core/bus.h"
#include "broker/containers/container.h"
#include "broker/containers/container-filter.h"
#include "broker/core/driver.h"
#include "broker/transport/listener.h"
#include "broker/objects/peer.h"
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/validate.h"
#include "util/macro.h"
#include "broker/core/driver-internal.h"

/* The named arguments of AddServer this bus understands. */
static const char *const supported_arguments[] = {
	"StopOnDisconnect",	/* b: the creator's disconnection stops the instance */
	"Filter",		/* as: xdg-dbus-proxy's options (container-filter.h) */
	NULL,
};

static int driver_prop_containers_supported_arguments(struct driver_call *c, struct dc_writer *w)
{
	dc_writer_open(w, 'a', NULL);
	for (size_t i = 0; supported_arguments[i]; i++)
		dc_writer_write(w, "s", supported_arguments[i]);
	return dc_writer_close(w);
}

/*
 * The next value of @r (an a{sv}) marshalled alone, native byte order.
 * Return as dc_copy_value(): 0, a positive dc_invalid code (the argument is
 * invalid), or negative errno.
 */
static int copy_asv(struct dc_reader *r, void **datap, size_t *sizep)
{
	struct dc_writer w;
	int k;

	dc_writer_init(&w, DC_NATIVE_ENDIAN, "a{sv}");
	k = dc_copy_value(r, &w);
	if (!k)
		k = dc_writer_finish(&w, datap, sizep);
	dc_writer_deinit(&w);
	return k;
}

/* @peer's credentials, as GetConnectionCredentials gives them, marshalled alone. */
static int snapshot_credentials(struct peer *peer, void **datap, size_t *sizep)
{
	struct dc_writer w;
	int r;

	dc_writer_init(&w, DC_NATIVE_ENDIAN, "a{sv}");
	dc_writer_open(&w, 'a', NULL);
	r = driver_write_credentials(&w, peer);
	if (!r)
		r = dc_writer_close(&w);
	if (!r)
		r = dc_writer_finish(&w, datap, sizep);
	dc_writer_deinit(&w);
	return r;
}

/* The Filter argument (as), the reader inside its variant: 0, DRIVER_E_ERROR_SET, -errno. */
static int read_filter(struct driver_call *c, struct container_filter **filterp)
{
	struct dc_reader *r = &c->reader;
	const char *options[FILTER_MAX_OPTIONS + 1];
	_cleanup_free_ char *errtext = NULL;
	size_t n = 0;
	int k;

	k = dc_reader_enter(r, 'a');
	while (!k && dc_reader_peek(r)) {
		if (n == ARRAY_SIZE(options))
			return driver_fail(c, DC_ERROR_LIMITS_EXCEEDED,
					   "A filter has at most %d options", FILTER_MAX_OPTIONS);
		k = dc_reader_read(r, "s", &options[n]);
		n++;
	}
	if (!k)
		k = dc_reader_exit(r);
	if (k)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
	container_filter_unref(*filterp);
	*filterp = NULL;
	k = container_filter_new(filterp, options, n, &errtext);
	if (k == FILTER_E_INVALID)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "%s", errtext);
	return k;
}

/* AddServer's named arguments: 0, DRIVER_E_ERROR_SET or negative errno. */
static int read_named_arguments(struct driver_call *c, bool *stop_on_disconnectp,
				struct container_filter **filterp)
{
	struct dc_reader *r = &c->reader;
	int k;

	k = dc_reader_enter(r, 'a');
	while (!k && dc_reader_peek(r)) {
		const char *key, *sig;
		size_t n;
		bool v;

		k = dc_reader_enter(r, '{');
		if (!k)
			k = dc_reader_read(r, "s", &key);
		if (!k)
			k = dc_reader_enter(r, 'v');
		if (k)
			break;
		n = dc_reader_peek_signature(r, &sig);
		if (!strcmp(key, "Filter")) {
			if (n != 2 || memcmp(sig, "as", 2))
				return driver_fail(c, DC_ERROR_INVALID_ARGS,
						   "Named parameter %s must be an array of strings",
						   key);
			k = read_filter(c, filterp);
			if (k)
				return k;
		} else if (!strcmp(key, "StopOnDisconnect")) {
			if (n != 1 || sig[0] != 'b')
				return driver_fail(c, DC_ERROR_INVALID_ARGS,
						   "Named parameter %s must be a boolean", key);
			k = dc_reader_read(r, "b", &v);
			*stop_on_disconnectp = v;
		} else {
			return driver_fail(c, DC_ERROR_INVALID_ARGS,
					   "Named parameter %s is not understood", key);
		}
		if (!k)
			k = dc_reader_exit(r);
		if (!k)
			k = dc_reader_exit(r);
	}
	if (!k)
		k = dc_reader_exit(r);
	return k ? driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments") : 0;
}

static int driver_method_containers_add_server(struct driver_call *c)
{
	_cleanup_free_ void *metadata = NULL, *creds = NULL;
	_cleanup_free_ char *errtext = NULL;
	size_t n_metadata = 0, n_creds = 0;
	const char *type, *name, *errname = NULL;
	bool stop_on_disconnect = false;
	struct container_filter *filter = NULL;
	struct message_builder b;
	struct container *ct;
	int r;

	r = dc_reader_read(&c->reader, "ss", &type, &name);
	if (r)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
	if (!validate_interface_name(type, strlen(type)))
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "The container type identifier must "
				   "have the syntax of an interface name");
	r = copy_asv(&c->reader, &metadata, &n_metadata);
	if (r > 0)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
	if (r < 0)
		return r;
	r = read_named_arguments(c, &stop_on_disconnect, &filter);
	if (!r)
		r = snapshot_credentials(c->peer, &creds, &n_creds);
	if (r) {
		container_filter_unref(filter);
		return r;
	}
	r = container_add(c->bus->containers, c->peer, type, name, metadata, n_metadata,
				  creds, n_creds, stop_on_disconnect, filter, &ct, &errname,
				  &errtext);
	container_filter_unref(filter);
	if (r < 0)
		return r;
	if (r == CONTAINER_E_REFUSED)
		return driver_fail(c, errname, "%s", errtext);

	driver_reply_init(c, &b, "oays");
	dc_writer_write(&b.body, "o", ct->path);
	/* The path as a bytestring: with its NUL, as the draft (and GVariant) have it. */
	dc_writer_append_array(&b.body, 'y', ct->socket_path, strlen(ct->socket_path) + 1);
	dc_writer_write(&b.body, "s", ct->listener->address);
	return driver_reply_send(c, &b);
}

/* The instance the "o" argument names: 0, or DRIVER_E_ERROR_SET. */
static int lookup_instance(struct driver_call *c, struct container **ctp)
{
	const char *path;

	if (dc_reader_read(&c->reader, "o", &path))
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
	*ctp = container_find(c->bus->containers, path);
	if (!*ctp)
		return driver_fail(c, DC_ERROR_NOT_CONTAINER, "There is no container with path '%s'",
				   path);
	return 0;
}

/* lookup_instance(), and may the caller stop it? 0, or DRIVER_E_ERROR_SET. */
static int lookup_for_stop(struct driver_call *c, struct container **ctp)
{
	int r = lookup_instance(c, ctp);

	if (r)
		return r;
	/* The creator's uid, as in the draft, and root (bus1-broker). */
	if (c->peer->uid != (*ctp)->creator_uid && c->peer->uid != 0)
		return driver_fail(c, DC_ERROR_ACCESS_DENIED,
				   "User %u cannot stop a container server started by user %u",
				   (unsigned)c->peer->uid, (unsigned)(*ctp)->creator_uid);
	return 0;
}

static int driver_method_containers_stop_instance(struct driver_call *c)
{
	struct container *ct;
	int r = lookup_for_stop(c, &ct);

	if (r)
		return r;
	/* The caller is not among the connections it closes: it is not contained. */
	container_stop_instance(ct);
	return driver_reply_empty(c);
}

static int driver_method_containers_stop_listening(struct driver_call *c)
{
	struct container *ct;
	int r = lookup_for_stop(c, &ct);

	if (r)
		return r;
	container_stop_listening(ct);
	return driver_reply_empty(c);
}

/* The four values GetInstanceInfo returns (and GetConnectionInstance after the path). */
static int write_info(struct message_builder *b, const struct container *ct)
{
	int r = container_write_creator_creds(ct, &b->body);

	if (!r)
		r = dc_writer_write(&b->body, "ss", ct->type, ct->name);
	if (!r)
		r = container_write_metadata(ct, &b->body);
	return r;
}

static int driver_method_containers_get_connection_instance(struct driver_call *c)
{
	struct container *instance;
	struct message_builder b;
	struct peer *peer = NULL;
	const char *name;
	bool self = false;
	int r;

	r = driver_lookup_conn(c, "container instance", &name, &peer, &self);
	if (r)
		return r;
	if (self)
		return driver_fail(c, DC_ERROR_NOT_CONTAINER, "The message bus is not in a container");
	instance = container_of_peer(peer);
	if (!instance)
		return driver_fail(c, DC_ERROR_NOT_CONTAINER, "Connection '%s' is not in a container",
				   name);
	driver_reply_init(c, &b, "oa{sv}ssa{sv}");
	dc_writer_write(&b.body, "o", instance->path);
	r = write_info(&b, instance);
	if (r < 0) {
		message_builder_deinit(&b);
		return r;
	}
	return driver_reply_send(c, &b);
}

static int driver_method_containers_get_instance_info(struct driver_call *c)
{
	struct message_builder b;
	struct container *ct;
	int r;

	r = lookup_instance(c, &ct);
	if (r)
		return r;
	driver_reply_init(c, &b, "a{sv}ssa{sv}");
	r = write_info(&b, ct);
	if (r < 0) {
		message_builder_deinit(&b);
		return r;
	}
	return driver_reply_send(c, &b);
}

static const struct driver_method containers_methods[] = {
	{ "AddServer", "ssa{sv}a{sv}", "oays", driver_method_containers_add_server,
	  METHOD_NO_CONTAINERS },
	{ "StopInstance", "o", "", driver_method_containers_stop_instance, METHOD_NO_CONTAINERS },
	{ "StopListening", "o", "", driver_method_containers_stop_listening,
	  METHOD_NO_CONTAINERS },
	{ "GetConnectionInstance", "s", "oa{sv}ssa{sv}",
	  driver_method_containers_get_connection_instance, 0 },
	{ "GetInstanceInfo", "o", "a{sv}ssa{sv}", driver_method_containers_get_instance_info, 0 },
	{}
};

static const struct driver_property containers_properties[] = {
	{ "SupportedArguments", "as", driver_prop_containers_supported_arguments },
	{}
};

const struct driver_interface driver_containers_interface = {
	DC_INTERFACE_CONTAINERS1, containers_methods,
	"    <signal name=\"InstanceRemoved\">\n"
	"      <arg type=\"o\" name=\"path\"/>\n"
	"    </signal>\n",
	0, containers_properties,
};
