/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SELinux mediation through libselinux's access vector cache. See selinux.h.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if HAVE_SELINUX
#include <selinux/avc.h>
#include <selinux/selinux.h>
#endif
#include "broker/policy/audit.h"
#include "broker/objects/log.h"
#include "broker/objects/peer.h"
#include "broker/policy/selinux.h"
#include "conf/config.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "util/macro.h"

#if HAVE_SELINUX

struct association {
	char *name;
	security_id_t sid;
};

struct selinux {
	security_id_t bus_sid;
	sd_event_source *netlink;
	struct association *assoc;
	size_t n_assoc;
};

/* The cache is the process's (libselinux keeps it in globals): one at a time. */
static bool avc_is_open;

/* libselinux's log lines: AVC decisions to audit as dbus-daemon sends them. */
static int log_cb(int type, const char *fmt, ...) _printf_(2, 3);
static int log_cb(int type, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (type == SELINUX_AVC)
		audit_log_avc(buf);
	else
		log_printf(6, "%.*s", (int)strcspn(buf, "\n"), buf);
	return 0;
}

/* The text after an AVC line: what the check was about (its auxdata). */
static int audit_cb(void *data, security_class_t cls, char *buf, size_t size)
{
	snprintf(buf, size, "%s", data ? (const char *)data : "");
	return 0;
}

/* A new policy: reload the configuration, as dbus-daemon does (SIGHUP). */
static int policyload_cb(int seqno)
{
	log_info("SELinux policy %d loaded: reloading the configuration", seqno);
	return raise(SIGHUP);
}

bool selinux_is_enabled(void)
{
	return is_selinux_enabled() > 0;
}

const char *selinux_root(void)
{
	return selinux_is_enabled() ? selinux_policy_root() : NULL;
}

int selinux_new(struct selinux **sp, char **errorp)
{
	struct selinux *s;
	char *con = NULL;

	*sp = NULL;
	if (!selinux_is_enabled())
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	selinux_set_callback(SELINUX_CB_LOG, (union selinux_callback){ .func_log = log_cb });
	selinux_set_callback(SELINUX_CB_AUDIT,
			     (union selinux_callback){ .func_audit = audit_cb });
	selinux_set_callback(SELINUX_CB_POLICYLOAD,
			     (union selinux_callback){ .func_policyload = policyload_cb });
	if (avc_open(NULL, 0) < 0) {
		free(s);
		if (asprintf(errorp, "Failed to start Access Vector Cache (AVC): %m") < 0)
			*errorp = NULL;
		return *errorp ? SELINUX_E_FAILED : -ENOMEM;
	}
	avc_is_open = true;
	if (getcon(&con) < 0 || avc_context_to_sid(con, &s->bus_sid) < 0) {
		if (asprintf(errorp, "Error getting context of bus: %m") < 0)
			*errorp = NULL;
		freecon(con);
		selinux_free(s);
		return *errorp ? SELINUX_E_FAILED : -ENOMEM;
	}
	freecon(con);
	*sp = s;
	return 0;
}

static void clear_associations(struct selinux *s)
{
	for (size_t i = 0; i < s->n_assoc; i++)
		free(s->assoc[i].name);
	free(s->assoc);
	s->assoc = NULL;
	s->n_assoc = 0;
}

struct selinux *selinux_free(struct selinux *s)
{
	if (!s)
		return NULL;
	s->netlink = sd_event_source_disable_unref(s->netlink);
	clear_associations(s);
	if (avc_is_open) {
		avc_netlink_release_fd();
		avc_destroy();
		avc_is_open = false;
	}
	free(s);
	return NULL;
}

static int netlink_cb(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	/* Policy loads and enforcing changes: the cache updates itself. */
	if (avc_netlink_check_nb() < 0)
		log_warn("Failed to check the netlink socket for pending messages and "
			 "process them: %m");
	return 0;
}

int selinux_attach(struct selinux *s, sd_event *event)
{
	int fd = avc_netlink_acquire_fd();

	if (fd < 0)
		return -errno;
	(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	return sd_event_add_io(event, &s->netlink, fd, EPOLLIN, netlink_cb, s);
}

void selinux_set_associations(struct selinux *s, const struct bus_config *config)
{
	const struct bus_config_associate *a;
	size_t n = 0;

	clear_associations(s);
	if (!config)
		return;
	list_for_each_entry(a, &config->associations, link)
		n++;
	s->assoc = calloc(n ? n : 1, sizeof(*s->assoc));
	if (!s->assoc) {
		log_warn("cannot apply the SELinux associations: out of memory");
		return;
	}
	list_for_each_entry(a, &config->associations, link) {
		struct association *e = &s->assoc[s->n_assoc];

		if (avc_context_to_sid(a->context, &e->sid) < 0) {
			log_warn("Error getting SID from context \"%s\": %m", a->context);
			continue;
		}
		e->name = strdup(a->own);
		if (!e->name)
			continue;
		s->n_assoc++;
	}
}

/* A peer's context in the AVC's table (which owns it), kept with the peer (peer.h). */
struct selinux_peer {
	struct peer_attachment attachment;
	security_id_t sid;
};

static void selinux_peer_free(struct peer_attachment *a)
{
	free(container_of(a, struct selinux_peer, attachment));
}

static const struct peer_attachment_ops selinux_peer_ops = {
	.free = selinux_peer_free,
};

/* @peer's SID (selinux_peer_setup()), or NULL. */
static security_id_t peer_sid(const struct peer *peer)
{
	struct peer_attachment *a = peer_find_attachment(peer, &selinux_peer_ops);

	return a ? container_of(a, struct selinux_peer, attachment)->sid : NULL;
}

int selinux_peer_setup(struct selinux *s, struct peer *peer)
{
	struct selinux_peer *sp;
	security_id_t sid;

	if (peer_sid(peer))
		return 0;
	if (!peer->creds.label)
		return SELINUX_E_NO_CONTEXT;
	if (avc_context_to_sid(peer->creds.label, &sid) < 0) {
		if (errno == ENOMEM)
			return -ENOMEM;
		log_warn("Error getting SID from context \"%s\": %m", peer->creds.label);
		return SELINUX_E_NO_CONTEXT;
	}
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->sid = sid;
	peer_attach(peer, &sp->attachment, &selinux_peer_ops);
	return 0;
}

/*
 * avc_has_perm() in the dbus class. An unknown class or permission is
 * allowed if the policy allows unknown ones. Return ACCESS_ALLOWED,
 * ACCESS_DENIED, -ENOMEM.
 */
static int check(security_id_t ssid, security_id_t tsid, const char *perm, char *aux,
		 bool audit)
{
	security_class_t cls = string_to_security_class("dbus");
	access_vector_t av = cls ? string_to_av_perm(cls, perm) : 0;
	struct av_decision avd;
	int r;

	if (!cls || !av)
		return security_deny_unknown() == 0 ? ACCESS_ALLOWED : ACCESS_DENIED;
	if (audit)
		r = avc_has_perm(ssid, tsid, cls, av, NULL, aux);
	else
		r = avc_has_perm_noaudit(ssid, tsid, cls, av, NULL, &avd);
	if (r < 0)
		return errno == ENOMEM ? -ENOMEM : ACCESS_DENIED;
	/* A probe is answered yes only if nothing would be logged (auditallow). */
	if (!audit && (avd.auditallow & av))
		return ACCESS_DENIED;
	return ACCESS_ALLOWED;
}

int selinux_check_acquire(struct selinux *s, struct peer *peer, const char *name)
{
	security_id_t tsid = s->bus_sid;
	char aux[512];
	int r;

	r = selinux_peer_setup(s, peer);
	if (r)
		return r < 0 ? r : ACCESS_DENIED;
	for (size_t i = 0; i < s->n_assoc; i++)
		if (!strcmp(s->assoc[i].name, name))
			tsid = s->assoc[i].sid;
	if (peer->pid > 0)
		snprintf(aux, sizeof(aux), "service=%s spid=%d", name, (int)peer->pid);
	else
		snprintf(aux, sizeof(aux), "service=%s", name);
	return check(peer_sid(peer), tsid, "acquire_svc", aux, true);
}

int selinux_check_send(struct selinux *s, struct peer *from, struct peer *to,
		       const struct message *m, bool audit)
{
	char aux[1024];
	size_t n;
	int r;

	r = selinux_peer_setup(s, from);
	if (!r && to)
		r = selinux_peer_setup(s, to);
	if (r)
		return r < 0 ? r : ACCESS_DENIED;

	/* dbus-daemon's auxiliary data, field by field. */
	n = (size_t)snprintf(aux, sizeof(aux), "msgtype=%s", bus_message_type_to_string(m->type));
	if (m->interface && n < sizeof(aux))
		n += (size_t)snprintf(aux + n, sizeof(aux) - n, " interface=%s", m->interface);
	if (m->member && n < sizeof(aux))
		n += (size_t)snprintf(aux + n, sizeof(aux) - n, " member=%s", m->member);
	if (m->error_name && n < sizeof(aux))
		n += (size_t)snprintf(aux + n, sizeof(aux) - n, " error_name=%s", m->error_name);
	if (n < sizeof(aux))
		n += (size_t)snprintf(aux + n, sizeof(aux) - n, " dest=%s",
				      m->destination ? m->destination : DC_SERVICE_DBUS);
	if (from->pid > 0 && n < sizeof(aux))
		n += (size_t)snprintf(aux + n, sizeof(aux) - n, " spid=%d", (int)from->pid);
	if (to && to->pid > 0 && n < sizeof(aux))
		snprintf(aux + n, sizeof(aux) - n, " tpid=%d", (int)to->pid);
	return check(peer_sid(from), to ? peer_sid(to) : s->bus_sid, "send_msg", aux, audit);
}

int selinux_context(struct selinux *s, struct peer *peer, char **ctxp)
{
	char *con = NULL;
	int r;

	if (peer) {
		r = selinux_peer_setup(s, peer);
		if (r)
			return r;
	}
	if (avc_sid_to_context(peer ? peer_sid(peer) : s->bus_sid, &con) < 0)
		return errno == ENOMEM ? -ENOMEM : SELINUX_E_NO_CONTEXT;
	*ctxp = strdup(con);
	freecon(con);
	return *ctxp ? 0 : -ENOMEM;
}

#else /* !HAVE_SELINUX */

int selinux_new(struct selinux **sp, char **errorp)
{
	*sp = NULL;
	return 0;
}

struct selinux *selinux_free(struct selinux *s)
{
	return NULL;
}

int selinux_attach(struct selinux *s, sd_event *event)
{
	return 0;
}

bool selinux_is_enabled(void)
{
	return false;
}

const char *selinux_root(void)
{
	return NULL;
}

void selinux_set_associations(struct selinux *s, const struct bus_config *config)
{
}

int selinux_peer_setup(struct selinux *s, struct peer *peer)
{
	return 0;
}

int selinux_check_acquire(struct selinux *s, struct peer *peer, const char *name)
{
	return ACCESS_ALLOWED;
}

int selinux_check_send(struct selinux *s, struct peer *from, struct peer *to,
		       const struct message *m, bool audit)
{
	return ACCESS_ALLOWED;
}

int selinux_context(struct selinux *s, struct peer *peer, char **ctxp)
{
	return SELINUX_E_NO_CONTEXT;
}

#endif
