// SPDX-License-Identifier: GPL-2.0
/*
 * Per-user accounting: see user.h.
 */

#include <linux/err.h>
#include <linux/mutex.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/uidgid.h>
#include "user.h"

static DEFINE_MUTEX(bus1_user_lock);
static struct rb_root bus1_user_tree = RB_ROOT;

/**
 * bus1_user_ref_by_uid() - find or create the user object of a uid
 * @uid:	the uid
 *
 * Return: a new reference to the user object, or ERR_PTR(-ENOMEM).
 */
struct bus1_user *bus1_user_ref_by_uid(kuid_t uid)
{
	struct rb_node **slot, *parent = NULL;
	struct bus1_user *user;

	mutex_lock(&bus1_user_lock);
	slot = &bus1_user_tree.rb_node;
	while (*slot) {
		parent = *slot;
		user = rb_entry(parent, struct bus1_user, rb);
		if (uid_lt(uid, user->uid)) {
			slot = &parent->rb_left;
		} else if (uid_gt(uid, user->uid)) {
			slot = &parent->rb_right;
		} else {
			/* drops to zero only under the lock, so this is safe */
			kref_get(&user->ref);
			mutex_unlock(&bus1_user_lock);
			return user;
		}
	}

	user = kzalloc(sizeof(*user), GFP_KERNEL);
	if (!user) {
		mutex_unlock(&bus1_user_lock);
		return ERR_PTR(-ENOMEM);
	}
	kref_init(&user->ref);
	user->uid = uid;
	rb_link_node(&user->rb, parent, slot);
	rb_insert_color(&user->rb, &bus1_user_tree);
	mutex_unlock(&bus1_user_lock);
	return user;
}

/**
 * bus1_user_ref() - take a reference
 * @user:	user object, or NULL
 *
 * Return: @user
 */
struct bus1_user *bus1_user_ref(struct bus1_user *user)
{
	if (user)
		kref_get(&user->ref);
	return user;
}

static void bus1_user_free(struct bus1_user *user)
{
	/* every charge must have been returned before the last reference */
	WARN_ON(atomic64_read(&user->bytes));
	WARN_ON(atomic64_read(&user->messages));
	WARN_ON(atomic64_read(&user->handles));
	WARN_ON(atomic64_read(&user->fds));
	WARN_ON(atomic64_read(&user->objects));
	WARN_ON(atomic_read(&user->peers));
	kfree(user);
}

/**
 * bus1_user_unref() - drop a reference
 * @user:	user object, or NULL
 *
 * The last reference is dropped under bus1_user_lock, so that a lookup
 * never finds a user on its way out; the lock is taken and released here
 * (not in a kref release callback), which keeps it balanced for sparse.
 *
 * Return: NULL
 */
struct bus1_user *bus1_user_unref(struct bus1_user *user)
{
	if (!user || !refcount_dec_and_mutex_lock(&user->ref.refcount, &bus1_user_lock))
		return NULL;
	rb_erase(&user->rb, &bus1_user_tree);
	mutex_unlock(&bus1_user_lock);
	bus1_user_free(user);
	return NULL;
}

static bool bus1_user_add(atomic64_t *counter, u64 n, u64 limit)
{
	if (!n)
		return true;
	if ((u64)atomic64_add_return(n, counter) <= limit)
		return true;
	atomic64_sub(n, counter);
	return false;
}

/**
 * bus1_user_charge() - charge a message to a user
 * @user:	the sender's user
 * @charge:	what to charge
 *
 * All four counters are charged or none is.
 *
 * Return: 0, or -EDQUOT if any counter would exceed its quota.
 */
int bus1_user_charge(struct bus1_user *user, const struct bus1_charge *charge)
{
	if (!bus1_user_add(&user->bytes, charge->bytes, bus1_quota_bytes))
		return -EDQUOT;
	if (!bus1_user_add(&user->messages, charge->messages, bus1_quota_messages))
		goto err_bytes;
	if (!bus1_user_add(&user->handles, charge->handles, bus1_quota_handles))
		goto err_messages;
	if (!bus1_user_add(&user->fds, charge->fds, bus1_quota_fds))
		goto err_handles;
	return 0;

err_handles:
	atomic64_sub(charge->handles, &user->handles);
err_messages:
	atomic64_sub(charge->messages, &user->messages);
err_bytes:
	atomic64_sub(charge->bytes, &user->bytes);
	return -EDQUOT;
}

/**
 * bus1_user_uncharge() - return a charge taken with bus1_user_charge()
 * @user:	the user charged
 * @charge:	the same charge
 */
void bus1_user_uncharge(struct bus1_user *user, const struct bus1_charge *charge)
{
	WARN_ON(atomic64_sub_return(charge->bytes, &user->bytes) < 0);
	WARN_ON(atomic64_sub_return(charge->messages, &user->messages) < 0);
	WARN_ON(atomic64_sub_return(charge->handles, &user->handles) < 0);
	WARN_ON(atomic64_sub_return(charge->fds, &user->fds) < 0);
}

/**
 * bus1_user_charge_objects() - charge nodes or handles to a user
 * @user:	the user of the peer that will own or hold them
 * @n:		how many objects
 *
 * Return: 0, or -EDQUOT if the user would exceed quota_objects.
 */
int bus1_user_charge_objects(struct bus1_user *user, unsigned int n)
{
	return bus1_user_add(&user->objects, n, bus1_quota_objects) ? 0 : -EDQUOT;
}

/**
 * bus1_user_force_objects() - charge objects that cannot be refused
 * @user:	the user to charge
 * @n:		how many objects
 *
 * For what must not fail (a node destruction's notifications): the count
 * may exceed quota_objects, and later charges fail until it is back below.
 */
void bus1_user_force_objects(struct bus1_user *user, unsigned int n)
{
	atomic64_add(n, &user->objects);
}

/**
 * bus1_user_uncharge_objects() - return objects charged with bus1_user_charge_objects()
 * @user:	the user charged
 * @n:		how many objects
 */
void bus1_user_uncharge_objects(struct bus1_user *user, unsigned int n)
{
	WARN_ON(atomic64_sub_return(n, &user->objects) < 0);
}

/*
 * The seq_file walk of the user tree: the header line, then the users in uid
 * order. The tree's mutex is held from start to stop; seq_file copies to the
 * reader only after stop. A reader that comes back for more starts again from
 * the first user and skips what it has seen, so a tree that changed between
 * two reads may show a user twice or not at all: this is a snapshot for an
 * operator, not a consistent one.
 */
static void *bus1_user_seq_start(struct seq_file *m, loff_t *pos)
{
	struct rb_node *node;
	loff_t i;

	mutex_lock(&bus1_user_lock);
	if (!*pos)
		return SEQ_START_TOKEN;
	node = rb_first(&bus1_user_tree);
	for (i = 1; node && i < *pos; i++)
		node = rb_next(node);
	return node;
}

static void *bus1_user_seq_next(struct seq_file *m, void *v, loff_t *pos)
{
	++*pos;
	if (v == SEQ_START_TOKEN)
		return rb_first(&bus1_user_tree);
	return rb_next(v);
}

static void bus1_user_seq_stop(struct seq_file *m, void *v)
{
	mutex_unlock(&bus1_user_lock);
}

static int bus1_user_seq_show(struct seq_file *m, void *v)
{
	struct bus1_user *user;

	lockdep_assert_held(&bus1_user_lock);
	if (v == SEQ_START_TOKEN) {
		seq_puts(m, "uid peers bytes messages handles fds objects\n");
		return 0;
	}
	user = rb_entry(v, struct bus1_user, rb);
	seq_printf(m, "%u %d %lld %lld %lld %lld %lld\n",
		   from_kuid_munged(seq_user_ns(m), user->uid),
		   atomic_read(&user->peers),
		   (long long)atomic64_read(&user->bytes),
		   (long long)atomic64_read(&user->messages),
		   (long long)atomic64_read(&user->handles),
		   (long long)atomic64_read(&user->fds),
		   (long long)atomic64_read(&user->objects));
	return 0;
}

const struct seq_operations bus1_user_seq_ops = {
	.start	= bus1_user_seq_start,
	.next	= bus1_user_seq_next,
	.stop	= bus1_user_seq_stop,
	.show	= bus1_user_seq_show,
};
