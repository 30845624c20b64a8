/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __BUS1_MESSAGE_H
#define __BUS1_MESSAGE_H

/**
 * DOC: Messages and entries
 *
 * A SEND creates one bus1_message, the part shared by all destinations: the
 * sender's credentials (real uid/gid from its cred, its pid and tid), the
 * data size, the carried nodes (one reference each) and files (one
 * reference each), and the sender's user, which is charged.
 *
 * Every destination gets a bus1_entry: its link into the destination
 * peer's queue, a reference on the message, the destination node, the slice
 * reserved in the destination's pool and the charge taken for it. Node
 * destruction and release notifications are entries without a message.
 *
 * A data entry's slice holds, in order: the data (padded to 8 bytes), one
 * __u64 per carried handle and one __u32 per carried fd. The sender writes the
 * data; the receiver writes handle ids and fd numbers at RECV.
 *
 * A SEND is first imported (bus1_send_import()): the command and the arrays
 * it names are copied from the sender's memory and resolved, without any
 * lock held across user copies, into a struct bus1_send: the message with
 * its carried nodes and files, the destinations, and an iterator over the
 * data, which stays in the sender's memory until it is copied into each
 * destination's slice. Then the SEND's transaction (bus1_tx_send(), tx.h)
 * instantiates it at every destination.
 *
 * Locking: bus1_entry_reserve() and bus1_entry_unlink() take or require the
 * destination peer's lock as documented; bus1_entry_copy_data() reads user
 * memory and runs unlocked; bus1_entry_free() and bus1_message_unref() must
 * be called without any peer lock held, because dropping the last node or
 * peer reference may free peers, and freeing a message may send a
 * NODE_RELEASE (node.h).
 */

#include <linux/kref.h>
#include <linux/list.h>
#include <linux/types.h>
#include <linux/uio.h>
#include "queue.h"
#include "user.h"

struct bus1_node;
struct bus1_peer;
struct bus1_slice;
struct cred;
struct file;
struct pid;

enum bus1_entry_type {
	BUS1_ENTRY_DATA,
	BUS1_ENTRY_NODE_DESTROY,
	BUS1_ENTRY_NODE_RELEASE,
};

/**
 * struct bus1_message - the shared part of a sent message
 * @ref:	reference count (one per entry, plus the sender's)
 * @user:	the sender's user, charged for every entry
 * @cred:	the sender's credentials
 * @pid:	the sender's thread-group pid
 * @tid:	the sender's thread pid
 * @n_bytes:	data size
 * @n_handles:	number of carried nodes
 * @n_fds:	number of carried files
 * @n_unix:	how many of them are AF_UNIX sockets (see gc.h)
 * @nodes:	carried nodes (references)
 * @files:	carried files (references)
 */
struct bus1_message {
	struct kref ref;
	struct bus1_user *user;
	const struct cred *cred;
	struct pid *pid;
	struct pid *tid;
	size_t n_bytes;
	size_t n_handles;
	size_t n_fds;
	size_t n_unix;
	struct bus1_node **nodes;
	struct file **files;
};

/**
 * struct bus1_entry - a message or notification for one destination
 * @qnode:	link into the destination's queue
 * @tx_link:	link into a transaction or a to-be-freed list
 * @peer:	destination peer (a reference)
 * @type:	BUS1_ENTRY_*
 * @message:	DATA: the message (a reference)
 * @node:	DATA and NODE_RELEASE: the destination node (a reference)
 * @slice:	DATA: the slice reserved in the destination's pool, or NULL
 * @charge:	DATA: what is charged to the message's user
 * @charged:	DATA: whether @charge is currently charged
 * @handle_id:	NODE_DESTROY: the destination's handle id of the node
 */
struct bus1_entry {
	struct bus1_queue_node qnode;
	struct list_head tx_link;
	struct bus1_peer *peer;
	unsigned int type;
	struct bus1_message *message;
	struct bus1_node *node;
	struct bus1_slice *slice;
	struct bus1_charge charge;
	bool charged;
	u64 handle_id;
};

/* destinations a SEND handles without allocating its per-destination arrays */
#define BUS1_SEND_FAST_DESTS 8

/**
 * struct bus1_send - a SEND, imported from the sender's memory
 * @sender:	the sending peer (the caller's reference)
 * @flags:	BUS1_SEND_FLAG_*
 * @message:	the message (a reference), its nodes and files resolved
 * @iter:	the data, still in the sender's memory
 * @iov:	the iovec array behind @iter if it was allocated, or NULL
 * @n_dests:	number of destinations
 * @dests:	the destinations, handle ids of @sender
 * @errors:	per destination: 0, or the positive errno reported for it
 * @uerrors:	where the sender wants @errors back, or NULL
 * @entries:	per destination: its entry while reserved and not staged
 * @n_handles:	number of carried handles
 * @ids:	their ids, with CREATE replaced by the new id, or NULL
 * @created:	bitmap: which of @ids this SEND created, or NULL
 * @iov_stack:	room for @iov of a SEND with few vectors
 * @dests_stack:	room for @dests of a SEND with few destinations
 * @errors_stack:	likewise for @errors
 * @entries_stack:	likewise for @entries
 *
 * @iter may point into @iov_stack: the object must not be moved. The room
 * for small SENDs comes last: bus1_send_import() zeroes what precedes it.
 */
struct bus1_send {
	struct bus1_peer *sender;
	u64 flags;
	struct bus1_message *message;
	struct iov_iter iter;
	struct iovec *iov;
	size_t n_dests;
	u64 *dests;
	u32 *errors;
	u32 __user *uerrors;
	struct bus1_entry **entries;
	size_t n_handles;
	u64 *ids;
	unsigned long *created;
	struct iovec iov_stack[UIO_FASTIOV];
	u64 dests_stack[BUS1_SEND_FAST_DESTS];
	u32 errors_stack[BUS1_SEND_FAST_DESTS];
	struct bus1_entry *entries_stack[BUS1_SEND_FAST_DESTS];
};

struct bus1_message *bus1_message_new(struct bus1_user *user, size_t n_bytes,
				      size_t n_handles, size_t n_fds);
struct bus1_message *bus1_message_ref(struct bus1_message *message);
struct bus1_message *bus1_message_unref(struct bus1_message *message);
size_t bus1_message_slice_size(const struct bus1_message *message);

struct bus1_entry *bus1_entry_new_data(struct bus1_peer *peer, struct bus1_message *message,
				       struct bus1_node *node);
struct bus1_entry *bus1_entry_new_notify(gfp_t gfp);
void bus1_entry_attach_notify(struct bus1_entry *entry, struct bus1_peer *peer, u64 handle_id);
void bus1_entry_discard_notify(struct bus1_entry *entry);
void bus1_entry_discard_notify_list(struct list_head *list);
struct bus1_entry *bus1_entry_new_release(struct bus1_node *node, struct bus1_entry *spare);
int bus1_entry_reserve(struct bus1_entry *entry);
int bus1_entry_copy_data(struct bus1_entry *entry, struct iov_iter *iter);
void bus1_entry_unlink(struct bus1_entry *entry, bool publish);
void bus1_entry_free(struct bus1_entry *entry);
void bus1_entry_free_list(struct list_head *list);

int bus1_send_import(struct bus1_send *send, struct bus1_peer *sender, void __user *uarg);
void bus1_send_deinit(struct bus1_send *send, int r);

#endif /* __BUS1_MESSAGE_H */
