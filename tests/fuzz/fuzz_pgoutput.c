/*
 * tests/fuzz/fuzz_pgoutput.c: the pgoutput decoder (sources/postgres/
 * pgoutput.c) on a stream of messages, each a frame of fuzz.h (the XLogData
 * payload, from its message type byte), through one decoder as the source
 * drives it: relations described by earlier messages, TRUNCATE's changes
 * handed out one by one, retired table versions freed.  Each message is
 * copied into a buffer of its own first, as the source's are: the decoder
 * writes into it (bytea is decoded in place).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "schema/schema.h"
#include "sources/postgres/pgoutput.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size, *msg;
	struct sl_pgoutput *d;
	size_t len;
	char err[512];

	d = sl_pgoutput_new(NULL, NULL);
	if (!d)
		return 0;
	while (fuzz_next_frame(&p, end, &msg, &len)) {
		struct sl_pgo_event ev;
		struct sl_change c;
		unsigned char *copy = malloc(len ? len : 1);
		int rc;

		if (!copy)
			break;
		memcpy(copy, msg, len);
		rc = sl_pgoutput_decode(d, copy, len, &ev, err, sizeof err);
		if (rc == 0 && ev.kind == SL_PGO_RELATION && ev.schema_changed)
			sl_table_free(ev.retired);
		if (rc == 0 && ev.kind == SL_PGO_CHANGE && ev.nchanges == 0)
			while (sl_pgoutput_truncate_next(d, &c) == 1)
				;
		free(copy);
		if (rc != 0)
			break;  /* the source stops at a message it cannot decode */
	}
	sl_pgoutput_free(d);
	return 0;
}
