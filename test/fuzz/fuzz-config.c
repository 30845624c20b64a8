/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target: random bytes as a busconfig file (conf/config.c).
 *
 * The input is parsed from memory under a path in a directory that does not
 * exist, so relative <include>s and <includedir>s find nothing; absolute
 * ones may read real files of the machine, which is fine (read-only, bounded
 * in size and count, and only regular files are opened).
 *
 * A second pass feeds the same bytes to the .service parser.
 */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void ignore_warning(void *userdata, const char *message)
{
	(void)userdata;
	(void)message;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct bus_config_options opts = {
		.no_listen_ok = true,
		.warn = ignore_warning,
	};
	struct bus_config *config = NULL;
	struct bus_service *service = NULL;
	char *error = NULL;
	int r;

	r = bus_config_load_buffer(&config, data, size, "/nonexistent-fuzz/bus.conf", &opts,
				   &error);
	if (r == 0) {
		struct bus_policy_rule *rule;

		/* Walk the model so that anything dangling is touched under ASan. */
		list_for_each_entry(rule, &config->rules, link)
			if (rule->name && rule->file && strlen(rule->name) > 1U << 20)
				abort();
		if (error)
			abort();	/* no message on success */
	} else if (r > 0) {
		if (!error || !*error)
			abort();	/* every rejection says why */
	} else if (r != -ENOMEM) {
		abort();
	}
	bus_config_free(config);
	free(error);
	error = NULL;

	r = bus_service_parse_buffer(&service, data, size, "fuzz.service", &error);
	if ((r == 0) != (service != NULL) || (r > 0 && !error))
		abort();
	bus_service_free(service);
	free(error);
	return 0;
}
