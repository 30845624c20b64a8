/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Intrusive circular doubly-linked lists
 *
 * A struct list_node is embedded in the object that is linked; the list head
 * is a struct list_node too. An unlinked node points to itself, so
 * list_node_is_linked() is cheap and unlinking twice is harmless. No memory is
 * allocated by any operation.
 */

#include <stdbool.h>
#include <stddef.h>
#include "util/macro.h"

struct list_node {
	struct list_node *prev;
	struct list_node *next;
};

#define LIST_INIT(name) { &(name), &(name) }

static inline void list_init(struct list_node *n)
{
	n->prev = n;
	n->next = n;
}

static inline bool list_is_empty(const struct list_node *head)
{
	return head->next == head;
}

static inline bool list_node_is_linked(const struct list_node *n)
{
	return n->next != n;
}

static inline void list_insert_between(struct list_node *n, struct list_node *prev,
				       struct list_node *next)
{
	n->prev = prev;
	n->next = next;
	prev->next = n;
	next->prev = n;
}

/* Append @n at the tail of @head. */
static inline void list_append(struct list_node *head, struct list_node *n)
{
	list_insert_between(n, head->prev, head);
}

/* Insert @n at the front of @head. */
static inline void list_prepend(struct list_node *head, struct list_node *n)
{
	list_insert_between(n, head, head->next);
}

static inline void list_unlink(struct list_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	list_init(n);
}

static inline struct list_node *list_first(const struct list_node *head)
{
	return list_is_empty(head) ? NULL : head->next;
}

static inline struct list_node *list_last(const struct list_node *head)
{
	return list_is_empty(head) ? NULL : head->prev;
}

/* Move all entries of @from to the tail of @to; @from ends up empty. */
static inline void list_splice_tail(struct list_node *to, struct list_node *from)
{
	if (list_is_empty(from))
		return;
	from->next->prev = to->prev;
	to->prev->next = from->next;
	from->prev->next = to;
	to->prev = from->prev;
	list_init(from);
}

#define list_entry(ptr, type, member) container_of(ptr, type, member)

#define list_first_entry(head, type, member)                                   \
	({                                                                     \
		struct list_node *_n = list_first(head);                       \
		_n ? list_entry(_n, type, member) : NULL;                      \
	})

#define list_for_each(pos, head)                                               \
	for (struct list_node *pos = (head)->next; pos != (head); pos = pos->next)

/* Iterate entries; @pos is a pointer to the containing type. */
#define list_for_each_entry(pos, head, member)                                 \
	for (pos = list_entry((head)->next, __typeof__(*pos), member);         \
	     &pos->member != (head);                                           \
	     pos = list_entry(pos->member.next, __typeof__(*pos), member))

/* As above, from the last entry to the first. */
#define list_for_each_entry_reverse(pos, head, member)                         \
	for (pos = list_entry((head)->prev, __typeof__(*pos), member);         \
	     &pos->member != (head);                                           \
	     pos = list_entry(pos->member.prev, __typeof__(*pos), member))

/* As above, but @pos may be unlinked (and freed) inside the loop. */
#define list_for_each_entry_safe(pos, tmp, head, member)                       \
	for (pos = list_entry((head)->next, __typeof__(*pos), member),         \
	    tmp = list_entry(pos->member.next, __typeof__(*pos), member);      \
	     &pos->member != (head);                                           \
	     pos = tmp, tmp = list_entry(tmp->member.next, __typeof__(*pos), member))
