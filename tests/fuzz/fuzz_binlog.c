/*
 * tests/fuzz/fuzz_binlog.c: the binlog event decoder (sources/mysql/
 * binlog_event.c) and the row-image decoder (row_image.c) on a binlog
 * file's events without its magic: each event cut at the size its header
 * declares, decoded by one reader as the source drives it.  TABLE_MAP
 * events are kept (up to 8 tables); a rows event is counted without
 * decoding, then decoded row by row into output columns made from its
 * table map, as the source makes them for a table without a catalog.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "schema/schema.h"
#include "sources/mysql/binlog_event.h"
#include "sources/mysql/row_image.h"
#include "tests/fuzz/fuzz.h"

#define MAPS 8
#define MAX_COLS 64

struct tmap {
	struct sl_binlog_table_map tm;
	struct sl_column cols[MAX_COLS];
	bool used;
};

static int table_map(struct tmap *maps, const struct sl_binlog_reader *r, const struct sl_binlog_event *ev,
		     char *err, size_t errlen)
{
	struct sl_binlog_table_map tmp;
	struct tmap *m = NULL;
	uint64_t id;
	int rc;

	sl_binlog_table_map_init(&tmp);
	rc = sl_binlog_table_map_parse(&tmp, r, ev, err, errlen);
	id = tmp.table_id;
	sl_binlog_table_map_free(&tmp);
	if (rc < 0)
		return rc;
	for (int i = 0; i < MAPS && !m; i++)
		if (maps[i].used && maps[i].tm.table_id == id)
			m = &maps[i];
	for (int i = 0; i < MAPS && !m; i++)
		if (!maps[i].used)
			m = &maps[i];
	if (!m)
		return 0;
	m->used = true;
	if (sl_binlog_table_map_parse(&m->tm, r, ev, err, errlen) < 0 || m->tm.ncols > MAX_COLS) {
		m->used = false;
		return -1;
	}
	for (uint32_t i = 0; i < m->tm.ncols; i++) {
		m->cols[i].name = (char *)(m->tm.cols[i].name.p ? m->tm.cols[i].name.p : "?");
		m->cols[i].type = sl_mysql_type_map(&m->tm.cols[i], &m->cols[i].precision, &m->cols[i].scale);
	}
	return 0;
}

static int rows(struct sl_mysql_rowdec *dec, struct tmap *maps, const struct sl_binlog_reader *r,
		const struct sl_binlog_event *ev, char *err, size_t errlen)
{
	struct sl_value before[MAX_COLS], after[MAX_COLS];
	struct sl_binlog_rows rw;
	struct tmap *m = NULL;
	uint64_t n;
	int rc;

	if (sl_binlog_rows_parse(r, ev, &rw, err, errlen) < 0)
		return -1;
	for (int i = 0; i < MAPS && !m; i++)
		if (maps[i].used && maps[i].tm.table_id == rw.table_id)
			m = &maps[i];
	if (!m)
		return -1;
	if (sl_mysql_rows_count(&rw, &m->tm, &n, err, errlen) < 0)
		return -1;
	while ((rc = sl_mysql_rows_next(dec, &rw, &m->tm, m->cols, before, after, err, errlen)) == 1)
		;
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size;
	struct tmap *maps = calloc(MAPS, sizeof *maps);
	struct sl_binlog_reader r;
	struct sl_mysql_rowdec dec;
	char err[512];

	if (!maps)
		return 0;
	for (int i = 0; i < MAPS; i++)
		sl_binlog_table_map_init(&maps[i].tm);
	sl_mysql_rowdec_init(&dec);
	sl_binlog_reader_init(&r, SL_BL_CHECKSUM_OFF, "fuzz.000001");
	while (end - p >= 13) {
		struct sl_binlog_event ev;
		size_t len = (size_t)p[9] | (size_t)p[10] << 8 | (size_t)p[11] << 16 | (size_t)p[12] << 24;
		int rc;

		if (len > (size_t)(end - p))
			len = (size_t)(end - p);
		if (len == 0)
			break;
		rc = sl_binlog_decode(&r, p, len, &ev, err, sizeof err);
		p += len;
		if (rc < 0)
			break;
		if (ev.kind == SL_BLK_TABLE_MAP)
			rc = table_map(maps, &r, &ev, err, sizeof err);
		else if (ev.kind == SL_BLK_ROWS)
			rc = rows(&dec, maps, &r, &ev, err, sizeof err);
		if (rc < 0)
			break;
	}
	for (int i = 0; i < MAPS; i++)
		sl_binlog_table_map_free(&maps[i].tm);
	sl_mysql_rowdec_free(&dec);
	free(maps);
	return 0;
}
