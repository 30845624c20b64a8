/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __BUS1_TX_H
#define __BUS1_TX_H

/**
 * DOC: Transactions
 *
 * A transaction delivers a set of entries (one SEND to all its destinations,
 * or the notifications of one node destruction) atomically: they are all
 * staged, then all committed with one timestamp (see queue.h for why that
 * gives a consistent and causal order), or all aborted. Receivers never see
 * part of a transaction before the rest is decided: a staged entry blocks
 * everything ordered after it.
 *
 * Usage: bus1_tx_init(); bus1_tx_stage() for each entry (an entry that
 * cannot be staged is left to the caller); then either bus1_tx_timestamp()
 * followed by bus1_tx_commit(), or bus1_tx_abort().
 *
 * A SEND is one transaction: bus1_tx_send() reserves its entries at every
 * destination, copies the data into them, writes the per-destination
 * errors back to the sender, and only then stages and commits them, so no
 * user memory is touched while anything is staged.
 *
 * Locking: each step takes the lock of one peer at a time; the caller must
 * hold no peer lock.
 */

#include <linux/list.h>
#include <linux/types.h>

struct bus1_entry;
struct bus1_peer;
struct bus1_send;

/**
 * struct bus1_tx - a transaction
 * @sender:	the sending peer (its clock is synced at commit)
 * @entries:	staged entries, linked by their @tx_link
 * @clock:	the largest destination clock seen while staging
 * @seq:	this transaction's number among the sender's
 * @index:	index for the next staged entry
 * @timestamp:	commit timestamp, 0 until bus1_tx_timestamp()
 */
struct bus1_tx {
	struct bus1_peer *sender;
	struct list_head entries;
	u64 clock;
	u64 seq;
	u64 index;
	u64 timestamp;
};

void bus1_tx_init(struct bus1_tx *tx, struct bus1_peer *sender);
int bus1_tx_stage(struct bus1_tx *tx, struct bus1_entry *entry);
u64 bus1_tx_timestamp(struct bus1_tx *tx);
void bus1_tx_commit(struct bus1_tx *tx);
void bus1_tx_abort(struct bus1_tx *tx);
int bus1_tx_send(struct bus1_send *send);

#endif /* __BUS1_TX_H */
