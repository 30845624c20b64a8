/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Replaying the crash journal's records: see journal-replay.h.
 */

#include <errno.h>
#include <stdlib.h>
#include "broker/broker.h"
#include "broker/core/bus-journal.h"
#include "broker/core/bus.h"
#include "broker/objects/journal.h"
#include "broker/objects/log.h"
#include "broker/objects/state.h"
#include "broker/upgrade/journal-replay.h"
#include "broker/upgrade/peer-state.h"
#include "util/macro.h"

/* A peer of a Hello record: its section, of the version the record names. */
static int replay_hello(struct bus *bus, struct state_reader *r, uint64_t *max_idp)
{
	struct peer_state st = { .conn.fd = -1 };
	uint32_t version = state_get_u32(r);
	struct peer *p;
	int ret;

	if (r->error || version == 0 || version > PEER_STATE_VERSION)
		return -EBADMSG;
	peer_state_read(r, &st, 0, version);
	if (r->error || r->pos != r->n || !(st.flags & PEER_STATE_REGISTERED) || st.native) {
		peer_state_deinit(&st);
		return -EBADMSG;
	}
	ret = peer_restore(bus, &st, &p);
	if (ret == 0)
		*max_idp = MAX(*max_idp, st.id);
	peer_state_deinit(&st);
	return ret;
}

int journal_replay(struct bus *bus, struct journal_loaded *l, uint64_t *max_idp)
{
	int ret = 0;

	*max_idp = 0;
	bus->replaying = true;
	for (size_t i = 0; i < l->n_records && ret == 0; i++) {
		const struct journal_record *rec = &l->records[i];
		struct state_reader r;

		(void)state_reader_init_view(&r, rec->payload, rec->n_payload, STATE_VERSION);
		journal_loaded_use_map(l, &r, rec);
		if (rec->type == JOURNAL_REC_HELLO) {
			ret = replay_hello(bus, &r, max_idp);
		} else {
			ret = bus_journal_replay(bus, rec, &r);
			if (ret == 0 && (r.error || r.pos != r.n))
				ret = -EBADMSG;
		}
		state_reader_deinit(&r);
		if (ret < 0)
			log_err("crash journal: record %zu of %zu (type %u) cannot be applied: %s",
				i + 1, l->n_records, (unsigned int)rec->type, log_error(ret));
	}
	bus->replaying = false;
	return ret;
}

/* A record's payload, read as its replay reads it: whether it is whole. */
static bool check_record(const struct journal_record *rec)
{
	struct state_reader r;
	bool ok;

	(void)state_reader_init_view(&r, rec->payload, rec->n_payload, STATE_VERSION);
	if (rec->type == JOURNAL_REC_HELLO) {
		struct peer_state st = { .conn.fd = -1 };
		uint32_t version = state_get_u32(&r);

		ok = !r.error && version && version <= PEER_STATE_VERSION;
		if (ok) {
			peer_state_read(&r, &st, 0, version);
			ok = !r.error && (st.flags & PEER_STATE_REGISTERED) && !st.native;
		}
		peer_state_deinit(&st);
	} else {
		ok = bus_journal_check(rec, &r);
	}
	ok = ok && !r.error && r.pos == r.n;
	state_reader_deinit(&r);
	return ok;
}

size_t journal_check_records(const struct journal_loaded *l)
{
	for (size_t i = 0; i < l->n_records; i++)
		if (!check_record(&l->records[i]))
			return i + 1;
	return 0;
}

int journal_check_bytes(const uint8_t *mem, size_t n)
{
	struct journal_loaded l = { .fd = -1 };
	int r;

	r = journal_check(mem, n, &l);
	if (r)
		return r;
	r = broker_check_snapshot(l.snapshot, l.n_snapshot);
	if (r == 0 && journal_check_records(&l))
		r = JOURNAL_E_CORRUPT;
	free(l.records);
	return r;
}
