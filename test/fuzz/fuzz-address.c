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
#include "check.h"

static const char *const kind_key[] = {
	[ADDRESS_UNIX_PATH] = "path",
	[ADDRESS_UNIX_ABSTRACT] = "abstract",
	[ADDRESS_UNIX_TMPDIR] = "tmpdir",
	[ADDRESS_UNIX_DIR] = "dir",
	[ADDRESS_UNIX_RUNTIME] = "runtime",
};

/* Append ",KEY=escaped value" for a tcp value that is set. */
static size_t put_tcp_key(char *s, size_t n, const char *key, const char *value)
{
	char *v;
	size_t k;

	if (!value)
		return n;
	v = address_escape(value, strlen(value));
	CHECK(v);
	k = (size_t)sprintf(s + n, "%s%s=%s", s[n - 1] == ':' ? "" : ",", key, v);
	free(v);
	return n + k;
}

static size_t tcp_len(const struct address *a)
{
	const char *v[] = { a->host, a->bind, a->port, a->family, a->noncefile };
	size_t n = 0;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		n += v[i] ? 3 * strlen(v[i]) + 16 : 0;
	return n;
}

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
		need = n + strlen(v) + tcp_len(a) + 128;
		if (need > cap) {
			cap = need * 2;
			s = realloc(s, cap);
			CHECK(s);
		}
		if (a->kind == ADDRESS_TCP || a->kind == ADDRESS_NONCE_TCP) {
			n += (size_t)sprintf(s + n, "%s%s:", i ? ";" : "",
					     a->kind == ADDRESS_TCP ? "tcp" : "nonce-tcp");
			n = put_tcp_key(s, n, "host", a->host);
			n = put_tcp_key(s, n, "bind", a->bind);
			n = put_tcp_key(s, n, "port", a->port);
			n = put_tcp_key(s, n, "family", a->family);
			n = put_tcp_key(s, n, "noncefile", a->noncefile);
			n = put_tcp_key(s, n, "guid", a->guid);
		} else {
			n += (size_t)sprintf(s + n, "%sunix:%s=%s%s%s", i ? ";" : "",
					     kind_key[a->kind], v, a->guid ? ",guid=" : "",
					     a->guid ? a->guid : "");
		}
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
			{
				const char *const va[] = { a->host, a->bind, a->port, a->family,
							   a->noncefile };
				const char *const vb[] = { b->host, b->bind, b->port, b->family,
							   b->noncefile };

				for (size_t k = 0; k < sizeof(va) / sizeof(va[0]); k++) {
					CHECK((va[k] == NULL) == (vb[k] == NULL));
					CHECK(!va[k] || !strcmp(va[k], vb[k]));
				}
			}
		}
		address_list_deinit(&l2);
		free(printed);
	}
	address_list_deinit(&l);
	free(str);
	return 0;
}
