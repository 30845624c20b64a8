/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target for address parsing and escaping. Every successfully
 * parsed address is printed back with address_escape() and must parse to the
 * same entries; unescape(escape(x)) must give x for arbitrary bytes.
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dbus-compat/address.h"

#define CHECK(x)                                                                   \
	do {                                                                       \
		if (!(x))                                                          \
			abort();                                                   \
	} while (0)

static const char *const kind_key[] = {
	[ADDRESS_UNIX_PATH] = "path",
	[ADDRESS_UNIX_ABSTRACT] = "abstract",
	[ADDRESS_UNIX_TMPDIR] = "tmpdir",
	[ADDRESS_UNIX_DIR] = "dir",
	[ADDRESS_UNIX_RUNTIME] = "runtime",
};

/* Print @l as an address string (malloc()ed). */
static char *print_list(const struct address_list *l)
{
	size_t cap = 64, n = 0, i;
	char *s = malloc(cap);

	CHECK(s);
	s[0] = '\0';
	for (i = 0; i < l->n_entries; i++) {
		const struct address *a = &l->entries[i];
		char *v = a->value ? address_escape(a->value, strlen(a->value)) : strdup("yes");
		size_t need;

		CHECK(v);
		need = n + strlen(v) + 128;
		if (need > cap) {
			cap = need * 2;
			s = realloc(s, cap);
			CHECK(s);
		}
		n += (size_t)sprintf(s + n, "%sunix:%s=%s%s%s", i ? ";" : "", kind_key[a->kind], v,
				     a->guid ? ",guid=" : "", a->guid ? a->guid : "");
		free(v);
	}
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct address_list l, l2;
	char *str, *err = NULL, *esc, *back;
	size_t n, i;
	int r;

	/* Escaping round trip on the raw bytes. */
	esc = address_escape((const char *)data, size);
	CHECK(esc);
	CHECK(address_unescape(esc, strlen(esc), &back, &n) == 0);
	CHECK(n == size && !memcmp(back, data, size));
	free(back);
	free(esc);

	/* Unescaping arbitrary input never crashes; output is never longer. */
	r = address_unescape((const char *)data, size, &back, &n);
	CHECK(r == 0 || r == ADDRESS_E_INVALID);
	if (r == 0) {
		CHECK(n <= size);
		free(back);
	}

	str = malloc(size + 1);
	CHECK(str);
	memcpy(str, data, size);
	str[size] = '\0';

	r = address_list_parse(&l, str, &err);
	CHECK(r == 0 || r == ADDRESS_E_INVALID);
	CHECK((r == 0) == (err == NULL));
	free(err);
	if (r == 0) {
		char *printed = print_list(&l);

		CHECK(l.n_entries > 0);
		CHECK(address_list_parse(&l2, printed, NULL) == 0);
		CHECK(l2.n_entries == l.n_entries);
		for (i = 0; i < l.n_entries; i++) {
			const struct address *a = &l.entries[i], *b = &l2.entries[i];

			CHECK(a->kind == b->kind);
			CHECK((a->value == NULL) == (b->value == NULL));
			CHECK(!a->value || !strcmp(a->value, b->value));
			CHECK((a->guid == NULL) == (b->guid == NULL));
			CHECK(!a->guid || (strlen(a->guid) == ADDRESS_GUID_LEN &&
					   !strcmp(a->guid, b->guid)));
		}
		address_list_deinit(&l2);
		free(printed);
	}
	address_list_deinit(&l);
	free(str);
	return 0;
}
