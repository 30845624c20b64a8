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
#include "queue.h"
#include "user.h"

struct bus1_node;
struct bus1_peer;
struct bus1_slice;
struct cred;
struct file;
struct iov_iter;
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

struct bus1_message *bus1_message_new(struct bus1_user *user, size_t n_bytes,
				      size_t n_handles, size_t n_fds);
struct bus1_message *bus1_message_ref(struct bus1_message *message);
struct bus1_message *bus1_message_unref(struct bus1_message *message);
size_t bus1_message_slice_size(const struct bus1_message *message);

struct bus1_entry *bus1_entry_new_data(struct bus1_peer *peer, struct bus1_message *message,
				       struct bus1_node *node);
struct bus1_entry *bus1_entry_new_notify(struct bus1_peer *peer, u64 handle_id);
struct bus1_entry *bus1_entry_new_release(struct bus1_node *node);
int bus1_entry_reserve(struct bus1_entry *entry);
int bus1_entry_copy_data(struct bus1_entry *entry, struct iov_iter *iter);
void bus1_entry_unlink(struct bus1_entry *entry, bool publish);
void bus1_entry_free(struct bus1_entry *entry);
void bus1_entry_free_list(struct list_head *list);

#endif /* __BUS1_MESSAGE_H */
