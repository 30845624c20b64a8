/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Replaying the crash journal
 *
 * After the journal's snapshot is restored (broker.c), its records are
 * applied in order, with the bus replaying (nothing goes out): a Hello
 * makes a peer of its section (peer-state.h), every other record goes to
 * bus_journal_replay(). A record that does not parse or does not fit the
 * bus fails the whole restore: never half applied.
 */

#include <stddef.h>
#include <stdint.h>

struct bus;
struct journal_loaded;

/**
 * journal_replay() - apply every record of @l to @bus
 * @max_idp:	output: the highest unique id a record gave (0: none)
 *
 * Return: 0, -EBADMSG (a record that does not fit: logged), or negative errno.
 */
int journal_replay(struct bus *bus, struct journal_loaded *l, uint64_t *max_idp);

/**
 * journal_check_records() - read every record's payload as the replay reads it
 *
 * Before anything is applied: a record that cannot parse (a Hello of a peer
 * the replay refuses, a match rule that does not parse) refuses the journal
 * at once, rather than fail the restore half way (which exits, so that only
 * the next start discards it).
 * Return: 0 if all parse, else the number (from 1) of the first that does not.
 */
size_t journal_check_records(const struct journal_loaded *l);

/**
 * journal_check_bytes() - read a journal's bytes whole without applying them
 * @mem, @n:	the memfd's content
 *
 * journal_check(), then the snapshot as broker_check_state() reads a state,
 * then every record's payload as the replay reads it (a Hello's peer, a
 * match rule parsed): what `bus1-broker` would refuse before touching the
 * bus. For the fuzzer (test/fuzz/fuzz-journal.c).
 * Return: 0, JOURNAL_E_CORRUPT, or negative errno.
 */
int journal_check_bytes(const uint8_t *mem, size_t n);
