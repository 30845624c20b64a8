/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * AppArmor mediation: label queries of the dbus class. See apparmor.h.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if HAVE_APPARMOR
#include <sys/apparmor.h>
#endif
#include "broker/policy/apparmor.h"
#include "broker/policy/audit.h"
#include "broker/objects/peer.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "util/macro.h"

struct apparmor_label {
	char *con;		/* the label, e.g. "profile" or "unconfined" */
	const char *mode;	/* "enforce", "complain", ...; inside ->con; NULL: none */
	bool unconfined;
};

struct apparmor {
	char *bus_type;			/* "" when the configuration has no <type> */
	struct apparmor_label *bus;	/* the bus' own label: messages to the driver */
};

struct apparmor_label *apparmor_label_free(struct apparmor_label *label)
{
	if (label) {
		free(label->con);
		free(label);
	}
	return NULL;
}

#if HAVE_APPARMOR

/*
 * A label as the kernel gives it, "label (mode)", split as aa_splitcon()
 * splits it; or, with @split, already split (aa_getcon(): @mode or NULL).
 */
static int label_new(struct apparmor_label **labelp, const char *context, bool split,
		     const char *mode)
{
	_cleanup_free_ char *buf = NULL;
	struct apparmor_label *l;
	char *m = NULL;

	buf = malloc(strlen(context) + (mode ? strlen(mode) : 0) + 2);
	if (!buf)
		return -ENOMEM;
	strcpy(buf, context);
	if (split) {
		if (mode) {
			m = buf + strlen(buf) + 1;
			strcpy(m, mode);
		}
	} else {
		/* Cuts " (mode)" off in place: the buffer starts with the label. */
		(void)aa_splitcon(buf, &m);
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->con = steal_ptr(buf);
	l->mode = m;
	/* dbus-daemon: "unconfined" as the mode, or as the label without a mode. */
	l->unconfined = (m && !strcmp(m, "unconfined")) ||
			(!m && !strcmp(l->con, "unconfined"));
	*labelp = l;
	return 0;
}

static bool kernel_mediates_dbus(void)
{
	_cleanup_free_ char *mnt = NULL, *flag = NULL;
	int fd;

	if (!aa_is_enabled())
		return false;
	if (aa_find_mountpoint(&mnt) < 0)
		return false;
	if (asprintf(&flag, "%s/features/dbus/mask", mnt) < 0) {
		flag = NULL;
		return false;
	}
	/*
	 * open(), not stat(): AppArmor mediates the open of its own files, so a
	 * confined bus (a container's) without the rights to query it behaves as
	 * if AppArmor were absent, as dbus-daemon does.
	 */
	fd = open(flag, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

int apparmor_new(struct apparmor **aap, enum bus_config_apparmor mode, const char *bus_type,
		 char **errorp)
{
	struct apparmor *aa;
	char *con = NULL, *m = NULL;
	int r;

	*aap = NULL;
	if (mode == BUS_CONFIG_APPARMOR_DISABLED)
		return 0;
	if (!kernel_mediates_dbus()) {
		if (mode != BUS_CONFIG_APPARMOR_REQUIRED)
			return 0;
		*errorp = strdup("AppArmor mediation required but not present");
		return *errorp ? APPARMOR_E_UNAVAILABLE : -ENOMEM;
	}
	aa = calloc(1, sizeof(*aa));
	if (!aa)
		return -ENOMEM;
	aa->bus_type = strdup(bus_type ? bus_type : "");
	if (!aa->bus_type) {
		apparmor_free(aa);
		return -ENOMEM;
	}
	if (aa_getcon(&con, &m) < 0) {
		r = -errno;
		apparmor_free(aa);
		if (r == -ENOMEM)
			return r;
		if (asprintf(errorp, "Error getting AppArmor context of bus: %s",
			     strerror(-r)) < 0) {
			*errorp = NULL;
			return -ENOMEM;
		}
		return APPARMOR_E_UNAVAILABLE;
	}
	/* aa_getcon() split "label (mode)" in one buffer already. */
	r = label_new(&aa->bus, con, true, m);
	free(con);
	if (r < 0) {
		apparmor_free(aa);
		return r;
	}
	*aap = aa;
	return 0;
}

struct apparmor *apparmor_free(struct apparmor *aa)
{
	if (aa) {
		apparmor_label_free(aa->bus);
		free(aa->bus_type);
		free(aa);
	}
	return NULL;
}

/* A peer's label, parsed on first use and kept with it (peer.h's attachments). */
struct apparmor_peer {
	struct peer_attachment attachment;
	struct apparmor_label *label;
};

static void apparmor_peer_free(struct peer_attachment *a)
{
	struct apparmor_peer *ap = container_of(a, struct apparmor_peer, attachment);

	apparmor_label_free(ap->label);
	free(ap);
}

static const struct peer_attachment_ops apparmor_peer_ops = {
	.free = apparmor_peer_free,
};

int apparmor_peer_label(struct peer *peer, const struct apparmor_label **labelp)
{
	struct peer_attachment *a = peer_find_attachment(peer, &apparmor_peer_ops);
	struct apparmor_peer *ap;
	int r;

	if (!a) {
		if (!peer->creds.label)
			return APPARMOR_E_NO_LABEL;
		ap = calloc(1, sizeof(*ap));
		if (!ap)
			return -ENOMEM;
		r = label_new(&ap->label, peer->creds.label, false, NULL);
		if (r < 0) {
			free(ap);
			return r;
		}
		peer_attach(peer, &ap->attachment, &apparmor_peer_ops);
		a = &ap->attachment;
	}
	*labelp = container_of(a, struct apparmor_peer, attachment)->label;
	return 0;
}

bool apparmor_peer_unconfined(struct apparmor *aa, struct peer *peer)
{
	const struct apparmor_label *l;

	return !aa || (apparmor_peer_label(peer, &l) == 0 && l->unconfined);
}

/* ------------------------------------------------------------ queries */

/*
 * A query: AA_QUERY_CMD_LABEL_SIZE bytes libapparmor writes its command
 * into, the label, NUL, the class, the bus type, then each further field
 * after a NUL (an absent field is empty).
 */
struct query {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void query_put(struct query *q, const void *p, size_t n)
{
	if (q->oom)
		return;
	if (q->len + n > q->cap) {
		size_t cap = MAX(q->cap * 2, q->len + n + 64);
		char *b = realloc(q->buf, cap);

		if (!b) {
			q->oom = true;
			return;
		}
		q->buf = b;
		q->cap = cap;
	}
	memcpy(q->buf + q->len, p, n);
	q->len += n;
}

static void query_field(struct query *q, const char *s)
{
	query_put(q, "", 1);
	if (s)
		query_put(q, s, strlen(s));
}

static void query_start(struct query *q, const struct apparmor *aa, const char *con)
{
	static const char zeros[AA_QUERY_CMD_LABEL_SIZE];
	const char class = AA_CLASS_DBUS;

	*q = (struct query){};
	query_put(q, zeros, sizeof(zeros));
	query_put(q, con, strlen(con));
	query_put(q, "", 1);
	query_put(q, &class, 1);
	query_put(q, aa->bus_type, strlen(aa->bus_type));
}

/*
 * Ask the kernel. Return 0 with *allow and *audit set, 1 when the query
 * failed (*err: its errno; denied), -ENOMEM.
 */
static int query_run(struct query *q, uint32_t mask, int *allow, int *audit, int *err)
{
	int r = 0;

	*allow = 0;
	*audit = 1;
	*err = 0;
	if (q->oom) {
		free(q->buf);
		return -ENOMEM;
	}
	if (aa_query_label(mask, q->buf, q->len, allow, audit) < 0) {
		*err = errno;
		*allow = 0;
		*audit = 1;
		r = *err == ENOMEM ? -ENOMEM : 1;
	}
	free(q->buf);
	return r;
}

/* ------------------------------------------------------------ the log */

struct logline {
	char buf[2048];
	size_t len;
};

static void log_add(struct logline *l, const char *fmt, ...) _printf_(2, 3);
static void log_add(struct logline *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->len >= sizeof(l->buf))
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->buf + l->len, sizeof(l->buf) - l->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		l->len = MIN(l->len + (size_t)n, sizeof(l->buf) - 1);
}

static void log_str(struct logline *l, const char *key, const char *value)
{
	if (value)
		log_add(l, " %s=\"%s\"", key, value);
}

static void log_pid(struct logline *l, const char *key, const struct peer *peer)
{
	if (peer && peer->pid > 0)
		log_add(l, " %s=%d", key, (int)peer->pid);
}

/* apparmor="DENIED" operation="dbus_OP" followed by the fields in @l. */
static void log_decision(bool allow, const char *op, const struct logline *l)
{
	char text[sizeof(l->buf) + 64];

	/* dbus-daemon's form, to the byte: the fields start with a space too. */
	snprintf(text, sizeof(text), "apparmor=\"%s\" operation=\"dbus_%s\" %s\n",
		 allow ? "ALLOWED" : "DENIED", op, l->buf);
	audit_log_avc(text);
}

static bool is_complain(const char *mode)
{
	return mode && !strcmp(mode, "complain");
}

/* ------------------------------------------------------------ checks */

/*
 * A question about @peer alone: may it bind @name, or eavesdrop (@name
 * NULL)? @op names the permission in the log (mask=, operation=dbus_).
 */
static int check_peer(struct apparmor *aa, struct peer *peer, uint32_t perm,
		      const char *name, const char *op)
{
	const struct apparmor_label *l;
	struct logline line = {};
	struct query q;
	int allow, audit, err, r;

	r = apparmor_peer_label(peer, &l);
	if (r)
		return r < 0 ? r : ACCESS_DENIED;
	if (l->unconfined)
		return ACCESS_ALLOWED;
	query_start(&q, aa, l->con);
	if (name)
		query_field(&q, name);
	r = query_run(&q, perm, &allow, &audit, &err);
	if (r < 0)
		return r;
	if (is_complain(l->mode))
		allow = 1;
	if (audit) {
		log_str(&line, "bus", aa->bus_type[0] ? aa->bus_type : "unknown");
		log_str(&line, "name", name);
		if (err)
			log_str(&line, "info", strerror(err));
		log_str(&line, "mask", op);
		log_pid(&line, "pid", peer);
		log_str(&line, "label", l->con);
		log_decision(allow, op, &line);
	}
	return allow ? ACCESS_ALLOWED : ACCESS_DENIED;
}

int apparmor_check_bind(struct apparmor *aa, struct peer *peer, const char *name)
{
	return check_peer(aa, peer, AA_DBUS_BIND, name, "bind");
}

int apparmor_check_eavesdrop(struct apparmor *aa, struct peer *peer)
{
	return check_peer(aa, peer, AA_DBUS_EAVESDROP, NULL, "eavesdrop");
}

/* One side of a message: may @con send (or receive) it? */
static int query_message(struct apparmor *aa, uint32_t perm, const char *con,
			 const char *name, const char *peer_con, const struct message *m,
			 int *allow, int *audit, int *err)
{
	struct query q;

	query_start(&q, aa, con);
	query_field(&q, name);
	query_field(&q, peer_con);
	query_field(&q, m->path);
	query_field(&q, m->interface);
	query_field(&q, m->member);
	return query_run(&q, perm, allow, audit, err);
}

int apparmor_check_send(struct apparmor *aa, struct peer *from, struct peer *to,
			bool activation, const char *assumed_label, struct message *m,
			bool requested_reply, int *query_errno)
{
	const struct apparmor_label *src, *dst = NULL;
	const char *dst_con = NULL, *dst_mode = NULL;
	const char *dest = m->destination ? m->destination : DC_SERVICE_DBUS;
	const char *source = m->sender ? m->sender : DC_SERVICE_DBUS;
	const char *op = bus_message_type_to_string(m->type);
	int src_allow = 1, dst_allow = 1, src_audit = 0, dst_audit = 0;
	int src_err = 0, dst_err = 0;
	struct logline line = {};
	size_t common;
	int r;

	*query_errno = 0;
	/* The call was allowed; its reply needs no permission of its own. */
	if (requested_reply)
		return ACCESS_ALLOWED;

	/* Peers without a label are not accepted (policy_check_connect_lsm()). */
	r = apparmor_peer_label(from, &src);
	if (r)
		return r < 0 ? r : ACCESS_DENIED;
	if (to) {
		r = apparmor_peer_label(to, &dst);
		if (r)
			return r < 0 ? r : ACCESS_DENIED;
	} else if (!activation) {
		dst = aa->bus;
	}
	if (dst) {
		dst_con = dst->con;
		dst_mode = dst->mode;
	} else {
		dst_con = assumed_label;
	}

	if (!src->unconfined) {
		r = query_message(aa, AA_DBUS_SEND, src->con, dest, dst_con, m, &src_allow,
				  &src_audit, &src_err);
		if (r < 0)
			return r;
	}
	/* Starting a service asks the sender only: the service is not there yet. */
	if (!src_err && !activation && !(dst ? dst->unconfined : false) && dst_con) {
		r = query_message(aa, AA_DBUS_RECEIVE, dst_con, source, src->con, m, &dst_allow,
				  &dst_audit, &dst_err);
		if (r < 0)
			return r;
	}
	if (is_complain(src->mode))
		src_allow = 1;
	if (is_complain(dst_mode))
		dst_allow = 1;
	*query_errno = src_err ? src_err : dst_err;

	/*
	 * Replies are not logged: the policy language has no notion of them (an
	 * unrequested one is simply not delivered), as in dbus-daemon.
	 */
	if ((!src_audit && !dst_audit && !src_err && !dst_err) ||
	    m->type == DC_MESSAGE_METHOD_RETURN || m->type == DC_MESSAGE_ERROR)
		return src_allow && dst_allow ? ACCESS_ALLOWED : ACCESS_DENIED;

	log_str(&line, "bus", aa->bus_type[0] ? aa->bus_type : "unknown");
	log_str(&line, "path", m->path);
	log_str(&line, "interface", m->interface);
	log_str(&line, "member", m->member);
	log_str(&line, "error_name", m->error_name);
	common = line.len;
	if (src_audit || src_err) {
		log_str(&line, "mask", "send");
		log_str(&line, "name", dest);
		log_pid(&line, "pid", from);
		log_str(&line, "label", src->con);
		log_pid(&line, "peer_pid", to);
		log_str(&line, "peer_label", dst_con);
		if (src_err)
			log_str(&line, "info", strerror(src_err));
		if (dst_err)
			log_str(&line, "peer_info", strerror(dst_err));
		log_decision(src_allow, op, &line);
	}
	if (dst_audit || dst_err) {
		line.len = common;
		line.buf[common] = '\0';
		log_str(&line, "name", source);
		log_str(&line, "mask", "receive");
		log_pid(&line, "pid", to);
		log_str(&line, "label", dst_con);
		log_pid(&line, "peer_pid", from);
		log_str(&line, "peer_label", src->con);
		if (dst_err)
			log_str(&line, "info", strerror(dst_err));
		if (src_err)
			log_str(&line, "peer_info", strerror(src_err));
		log_decision(dst_allow, op, &line);
	}
	return src_allow && dst_allow ? ACCESS_ALLOWED : ACCESS_DENIED;
}

#else /* !HAVE_APPARMOR */

int apparmor_new(struct apparmor **aap, enum bus_config_apparmor mode, const char *bus_type,
		 char **errorp)
{
	*aap = NULL;
	if (mode != BUS_CONFIG_APPARMOR_REQUIRED)
		return 0;
	*errorp = strdup("AppArmor mediation required but not present "
			 "(bus1-broker was built without AppArmor support)");
	return *errorp ? APPARMOR_E_UNAVAILABLE : -ENOMEM;
}

struct apparmor *apparmor_free(struct apparmor *aa)
{
	return NULL;
}

int apparmor_peer_label(struct peer *peer, const struct apparmor_label **labelp)
{
	return APPARMOR_E_NO_LABEL;
}

bool apparmor_peer_unconfined(struct apparmor *aa, struct peer *peer)
{
	return true;
}

int apparmor_check_bind(struct apparmor *aa, struct peer *peer, const char *name)
{
	return ACCESS_ALLOWED;
}

int apparmor_check_send(struct apparmor *aa, struct peer *from, struct peer *to,
			bool activation, const char *assumed_label, struct message *m,
			bool requested_reply, int *query_errno)
{
	*query_errno = 0;
	return ACCESS_ALLOWED;
}

int apparmor_check_eavesdrop(struct apparmor *aa, struct peer *peer)
{
	return ACCESS_ALLOWED;
}

#endif
