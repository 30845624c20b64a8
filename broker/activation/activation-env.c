/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The activation environment: what services inherit, what
 * UpdateActivationEnvironment sets (and forwards to systemd). See
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

extern char **environ;

/* ------------------------------------------------------------ environment */

/* Variables of the bus process that do not belong to its children (as dbus-daemon). */
bool act_env_inherited(const char *entry)
{
	static const char *const drop[] = {
		"JOURNAL_STREAM", "LISTEN_FDNAMES", "LISTEN_FDS", "LISTEN_PID",
		"NOTIFY_SOCKET", "INVOCATION_ID",
	};

	for (size_t i = 0; i < ARRAY_SIZE(drop); i++) {
		size_t l = strlen(drop[i]);

		if (!strncmp(entry, drop[i], l) && entry[l] == '=')
			return false;
	}
	return strchr(entry, '=') != NULL;
}

static ssize_t env_find(struct activation *a, const char *key, size_t klen)
{
	for (size_t i = 0; i < a->n_env; i++)
		if (!strncmp(a->env[i], key, klen) && a->env[i][klen] == '=')
			return (ssize_t)i;
	return -1;
}

int act_env_set(struct activation *a, const char *key, const char *value)
{
	size_t klen = strlen(key);
	ssize_t i = env_find(a, key, klen);
	char *entry;

	if (asprintf(&entry, "%s=%s", key, value) < 0)
		return -ENOMEM;
	a->changes++;
	if (i >= 0) {
		free(a->env[i]);
		a->env[i] = entry;
		return 0;
	}
	if (a->n_env % 16 == 0) {
		char **v = realloc(a->env, (a->n_env + 16) * sizeof(*v));

		if (!v) {
			free(entry);
			return -ENOMEM;
		}
		a->env = v;
	}
	a->env[a->n_env++] = entry;
	return 0;
}

/* The environment of a child: the activation environment + the bus variables. */
int act_env_build(struct activation *a, char ***envp)
{
	const char *keys[3] = {};
	const char *values[3] = {};
	size_t n_extra = 0, n = 0;
	char **v;

	if (a->address) {
		keys[n_extra] = "DBUS_STARTER_ADDRESS";
		values[n_extra++] = a->address;
	}
	if (a->bus_type) {
		keys[n_extra] = "DBUS_STARTER_BUS_TYPE";
		values[n_extra++] = a->bus_type;
		if (a->address && !strcmp(a->bus_type, "session")) {
			keys[n_extra] = "DBUS_SESSION_BUS_ADDRESS";
			values[n_extra++] = a->address;
		} else if (a->address && !strcmp(a->bus_type, "system")) {
			keys[n_extra] = "DBUS_SYSTEM_BUS_ADDRESS";
			values[n_extra++] = a->address;
		}
	}

	v = calloc(a->n_env + n_extra + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < a->n_env; i++) {
		bool replaced = false;

		for (size_t k = 0; k < n_extra; k++) {
			size_t l = strlen(keys[k]);

			if (!strncmp(a->env[i], keys[k], l) && a->env[i][l] == '=')
				replaced = true;
		}
		if (replaced)
			continue;
		v[n] = strdup(a->env[i]);
		if (!v[n])
			goto oom;
		n++;
	}
	for (size_t k = 0; k < n_extra; k++) {
		if (asprintf(&v[n], "%s=%s", keys[k], values[k]) < 0) {
			v[n] = NULL;
			goto oom;
		}
		n++;
	}
	*envp = v;
	return 0;
oom:
	activation_strv_free(v);
	return -ENOMEM;
}

/* --------------------------------------------- UpdateActivationEnvironment */

int activation_update_environment(struct activation *a, struct message *msg,
				  struct activation_error *err)
{
	struct dc_reader r;
	size_t n_new = 0, n = 0;
	const char **keys = NULL, **values = NULL;
	int ret = 0;

	if (a->servicehelper) {
		err->name = DC_ERROR_ACCESS_DENIED;
		err->message = strdup("Cannot change activation environment on a system bus.");
		return err->message ? ACTIVATION_E_FAILED : -ENOMEM;
	}
	if (strcmp(msg->signature, "a{ss}") || message_get_body_reader(msg, &r) != 0 ||
	    dc_reader_enter(&r, 'a') != 0)
		goto invalid;

	/* Validate everything first: an update applies completely or not at all. */
	while (dc_reader_peek(&r) == '{') {
		const char *key, *value;
		const char **v;

		if (dc_reader_enter(&r, '{') || dc_reader_read(&r, "ss", &key, &value) ||
		    dc_reader_exit(&r))
			goto invalid;
		/*
		 * Any key, as dbus-daemon: "A=B" with "v" makes the entry
		 * "A=B=v" (A is "B=v" to the service), "" makes "=v" (which
		 * getenv() never finds). Only the size is bounded.
		 */
		if (strlen(key) + strlen(value) + 2 > ACTIVATION_ENV_ENTRY_MAX) {
			err->name = DC_ERROR_LIMITS_EXCEEDED;
			if (asprintf(&err->message, "Environment variable \"%s\" is too long "
				     "(at most %u bytes)", key, ACTIVATION_ENV_ENTRY_MAX) < 0)
				err->message = NULL;
			ret = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
			goto out;
		}
		if (env_find(a, key, strlen(key)) < 0)
			n_new++;
		if (n % 16 == 0) {
			v = realloc(keys, (n + 16) * sizeof(*v));
			if (!v) {
				ret = -ENOMEM;
				goto out;
			}
			keys = v;
			v = realloc(values, (n + 16) * sizeof(*v));
			if (!v) {
				ret = -ENOMEM;
				goto out;
			}
			values = v;
		}
		keys[n] = key;
		values[n++] = value;
	}
	if (dc_reader_exit(&r))
		goto invalid;
	if (a->n_env + n_new > ACTIVATION_ENV_MAX) {
		err->name = DC_ERROR_LIMITS_EXCEEDED;
		if (asprintf(&err->message, "Too many activation environment variables "
			     "(at most %u)", ACTIVATION_ENV_MAX) < 0)
			err->message = NULL;
		ret = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
		goto out;
	}

	for (size_t i = 0; i < n; i++) {
		ret = act_env_set(a, keys[i], values[i]);
		if (ret < 0)
			goto out;
	}

	if (a->systemd_activation) {
		_cleanup_message_ struct message *m = NULL;
		const char *systemd = a->ops->owner(a->userdata, ACTIVATION_SYSTEMD_NAME);
		struct message_builder b;

		/* dbus-daemon addresses the unique name, or activates systemd. */
		message_builder_init_method_call(&b, systemd ? systemd : ACTIVATION_SYSTEMD_NAME,
						 SYSTEMD_MANAGER_PATH, SYSTEMD_MANAGER_INTERFACE,
						 "SetEnvironment", "as");
		b.sender = DC_SERVICE_DBUS;
		b.flags |= DC_FLAG_NO_REPLY_EXPECTED;
		dc_writer_open(&b.body, 'a', NULL);
		for (size_t i = 0; i < n; i++) {
			ssize_t k = env_find(a, keys[i], strlen(keys[i]));

			if (k >= 0)
				dc_writer_write(&b.body, "s", a->env[k]);
		}
		dc_writer_close(&b.body);
		ret = message_builder_seal(&b, a->ops->next_serial(a->userdata), &m);
		message_builder_deinit(&b);
		if (ret < 0)
			goto out;
		if (a->ops->capture)
			a->ops->capture(a->userdata, NULL, m);
		if (!systemd || !a->ops->send_to_systemd(a->userdata, m)) {
			ret = act_queue_for_systemd(a, m);
			if (ret < 0)
				goto out;
		}
	}
	ret = 0;
	goto out;

invalid:
	err->name = DC_ERROR_INVALID_ARGS;
	err->message = strdup("Invalid arguments");
	ret = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
out:
	free(keys);
	free(values);
	return ret;
}

