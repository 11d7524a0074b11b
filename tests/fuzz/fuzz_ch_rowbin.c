/*
 * tests/fuzz/fuzz_ch_rowbin.c: the ClickHouse RowBinary decoder (sinks/
 * clickhouse/ch_rowbin.c) that reads rows back (the lookup of unchanged
 * TOAST values, dead-letter lines).  The input's first byte gives the
 * number of columns (1 to 8), then two bytes per column its type (the
 * sluice type, Nullable or not; a decimal's precision and scale), and the
 * rest is rows of those columns.  Each value read is encoded again, and
 * stepping over it (ch_rb_skip) must end where reading it ended.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "common/buf.h"
#include "schema/schema.h"
#include "sinks/clickhouse/ch_rowbin.h"
#include "tests/fuzz/fuzz.h"

#define MAX_COLS 8

/* The column types of the input's head; returns how many (0: too short). */
static int column_types(struct ch_rb_reader *r, struct ch_type *types)
{
	int n;

	if (r->p == r->end)
		return 0;
	n = 1 + *r->p++ % MAX_COLS;
	for (int i = 0; i < n; i++) {
		struct sl_column col = { .name = "c" };
		if (r->end - r->p < 2)
			return 0;
		col.type = (enum sl_type)(r->p[0] % (SL_T_UINT64 + 1));
		col.precision = 1 + r->p[1] % 60;
		col.scale = (r->p[1] >> 6) * col.precision / 3;
		if (ch_type_of_column(&types[i], &col, r->p[0] & 0x80, r->p[0] & 0x40 ? CH_MODERN : CH_LEGACY) < 0)
			return 0;
		r->p += 2;
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ch_rb_reader r = { data, data + size };
	struct ch_type types[MAX_COLS];
	struct sl_buf out;
	char scratch[CH_RB_SCRATCH], err[512];
	int n = column_types(&r, types);

	sl_buf_init(&out, 0);
	for (int i = 0; n > 0 && r.p < r.end; i = (i + 1) % n) {
		struct ch_rb_reader skip = r;
		struct sl_value v;
		if (ch_rb_get_value(&r, &types[i], &v, scratch) < 0)
			break;
		if (ch_rb_skip(&skip, &types[i]) < 0 || skip.p != r.p)
			abort();  /* skipping a value must step over exactly what reading it reads */
		sl_buf_reset(&out);
		(void)ch_rb_put_value(&out, &types[i], &v, "c", err, sizeof err);
	}
	sl_buf_free(&out);
	return 0;
}
