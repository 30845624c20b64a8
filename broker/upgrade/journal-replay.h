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
