/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target for the state a re-exec carries (broker/objects/state.h,
 * broker/upgrade/reexec.h): the input is the memfd's content, read by
 * broker_check_state() as `bus1-broker --check-state=FD` reads it. A
 * truncated, corrupted or hostile stream must be refused (1) or fail with
 * -errno, never crash, leak or allocate what its numbers claim. The seeds in
 * corpus/state/ are streams written by a real bus (make-state-seeds.py).
 */

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "broker/objects/log.h"
#include "broker/broker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	int r;

	if (fd < 0) {
		/* The reader's complaints go to syslog, not between libFuzzer's lines. */
		log_setup(LOG_TARGET_SYSLOG);
		fd = memfd_create("fuzz-state", MFD_CLOEXEC);
		if (fd < 0)
			abort();
	}
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	/* Read whole or refused as unreadable; anything else is a bug. */
	r = broker_check_state(fd);
	if (r > 0 && r != BROKER_E_STATE_UNREADABLE)
		abort();
	return 0;
}
