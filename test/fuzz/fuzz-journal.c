/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target for the crash journal (broker/objects/journal.h): the
 * input is a journal memfd's content, read by journal_check_bytes() as a
 * restarted bus reads it before it applies anything: the header and its
 * CRCs, the snapshot as a state, every record's payload. A truncated,
 * corrupted or hostile journal must be refused (JOURNAL_E_CORRUPT), never
 * crash, leak or allocate what its numbers claim. The seeds in
 * corpus/journal/ are journals a real bus wrote (make-journal-seeds.py).
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "broker/objects/journal.h"
#include "broker/objects/log.h"
#include "broker/upgrade/journal-replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool once;
	uint8_t *copy;
	int r;

	if (!once) {
		log_setup(LOG_TARGET_SYSLOG);
		once = true;
	}
	/* Aligned as a mapping is: the header is read in place. */
	copy = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	r = journal_check_bytes(copy, size);
	if (r != 0 && r != JOURNAL_E_CORRUPT)
		abort();
	free(copy);
	return 0;
}
