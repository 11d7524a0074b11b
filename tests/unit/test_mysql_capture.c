/*
 * tests/unit/test_mysql_capture.c: the decoder against bytes a real MariaDB
 * 10.11 wrote (tests/unit/data/mariadb-10.11/, made by the SQL in its
 * README): three binlog files, the replication stream's artificial ROTATE
 * and a heartbeat.  Every event is decoded, every table map parsed, every
 * row decoded with the output types sl_mysql_type_map gives, and the result
 * printed one line per event and compared with the golden file
 * expected.txt beside the captures (checked against mariadb-binlog -vv).
 * Then random mutations of the same events: the decoders must fail cleanly,
 * never crash or read out of bounds (run under --enable-sanitizers).
 *
 * SLUICE_UPDATE_GOLDEN=1 writes what the decoder gives to expected.txt.actual and fails.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "common/util.h"
#include "schema/schema.h"
#include "sources/mysql/binlog_event.h"
#include "sources/mysql/gtid.h"
#include "sources/mysql/mysql_charset.h"
#include "sources/mysql/row_image.h"

#define DATA SLUICE_SRCDIR "/tests/unit/data/mariadb-10.11/"

static char *read_all(const char *name, size_t *len)
{
	char path[1024], err[256], *p;

	snprintf(path, sizeof path, DATA "%s", name);
	if (sl_read_file(path, &p, len, err, sizeof err) != 0)
		fail_msg("%s: %s", path, err);
	return p;
}

/* The table maps seen, by table id. */
struct tmap {
	struct sl_binlog_table_map tm;
	struct sl_column *cols;
};

struct ctx {
	struct sl_binlog_reader r;
	struct tmap maps[8];
	int nmaps;
	struct sl_mysql_rowdec dec;
	struct sl_buf out;
	uint64_t rows_counted;   /* rows sl_mysql_rows_count found (and decoded) */
};

static void free_cols(struct tmap *m)
{
	free(m->cols);
	m->cols = NULL;
}

/* Output columns for a table map, as a source would make them. */
static int make_cols(struct tmap *m)
{
	free_cols(m);
	m->cols = calloc(m->tm.ncols ? m->tm.ncols : 1, sizeof *m->cols);
	if (!m->cols)
		return -1;
	for (uint32_t i = 0; i < m->tm.ncols; i++) {
		struct sl_column *c = &m->cols[i];
		c->name = (char *)(m->tm.cols[i].name.p ? m->tm.cols[i].name.p : "?");
		c->type = sl_mysql_type_map(&m->tm.cols[i], &c->precision, &c->scale);
	}
	return 0;
}

static void put_value(struct sl_buf *b, const struct sl_value *v)
{
	switch (v->kind) {
	case SL_V_NULL: sl_buf_puts(b, "NULL"); break;
	case SL_V_UNCHANGED: sl_buf_puts(b, "-"); break;
	case SL_V_BOOL: sl_buf_puts(b, v->b ? "true" : "false"); break;
	case SL_V_INT: sl_buf_printf(b, "%" PRId64, v->i); break;
	case SL_V_UINT: sl_buf_printf(b, "%" PRIu64 "u", v->u); break;
	case SL_V_FLOAT: sl_buf_printf(b, "%.9gf", (double)v->f); break;
	case SL_V_DOUBLE: sl_buf_printf(b, "%.17g", v->d); break;
	case SL_V_DECIMAL: sl_buf_printf(b, "dec(%s%.*s,%d)", v->neg ? "-" : "", (int)v->len, v->p, v->scale); break;
	case SL_V_STRING: case SL_V_JSON:
		sl_buf_printf(b, "%s'%.*s'", v->kind == SL_V_JSON ? "json" : "", (int)v->len, v->p);
		break;
	case SL_V_BYTES:
		sl_buf_puts(b, "x'");
		for (uint32_t i = 0; i < v->len; i++)
			sl_buf_printf(b, "%02x", (unsigned char)v->p[i]);
		sl_buf_putc(b, '\'');
		break;
	case SL_V_DATE: sl_buf_printf(b, "date(%" PRId64 ")", v->i); break;
	case SL_V_TIME: sl_buf_printf(b, "time(%" PRId64 ")", v->i); break;
	case SL_V_TIMESTAMP: sl_buf_printf(b, "ts(%" PRId64 ")", v->i); break;
	default: sl_buf_printf(b, "kind %u", v->kind); break;
	}
}

static void put_row(struct sl_buf *b, const char *what, const struct sl_value *v, uint32_t n)
{
	sl_buf_printf(b, "  %s", what);
	for (uint32_t i = 0; i < n; i++) {
		sl_buf_putc(b, ' ');
		put_value(b, &v[i]);
	}
	sl_buf_putc(b, '\n');
}

static void put_table_map(struct sl_buf *b, const struct sl_binlog_table_map *tm)
{
	char tn[64];

	sl_buf_printf(b, "TABLE_MAP %s.%s id=%" PRIu64 " flags=%u%s%s%s%s%s%s\n", tm->db, tm->table, tm->table_id,
		      tm->flags, tm->has_signedness ? " signedness" : "", tm->has_charsets ? " charsets" : "",
		      tm->has_names ? " names" : "", tm->has_enum_values || tm->has_set_values ? " values" : "",
		      tm->has_key ? " key" : "", tm->has_names ? "" : " (completed from the catalog)");
	for (uint32_t i = 0; i < tm->ncols; i++) {
		const struct sl_mysql_column *c = &tm->cols[i];
		int p = 0, s = 0;
		enum sl_type t = sl_mysql_type_map(c, &p, &s);
		sl_buf_printf(b, "  %s %s type=%u", c->name.p ? c->name.p : "?", sl_mysql_type_name(c, tn, sizeof tn),
			      c->type);
		if (c->charset)
			sl_buf_printf(b, " %s(%u)", c->charset->name, c->collation);
		if (c->nvalues) {
			sl_buf_puts(b, " [");
			for (uint32_t k = 0; k < c->nvalues; k++)
				sl_buf_printf(b, "%s%.*s", k ? "," : "", (int)c->values[k].len, c->values[k].p);
			sl_buf_putc(b, ']');
		}
		if (c->geometry_type >= 0)
			sl_buf_printf(b, " geom=%" PRId64, c->geometry_type);
		sl_buf_printf(b, "%s%s -> %d", c->nullable ? " null" : "", c->is_key ? " key" : "", (int)t);
		if (t == SL_T_DECIMAL)
			sl_buf_printf(b, "(%d,%d)", p, s);
		sl_buf_putc(b, '\n');
	}
}

/* What a source fills in from the catalog when binlog_row_metadata is not
 * FULL: here, for the one table captured with MINIMAL and NO_LOG (t_wide:
 * id INT, c CHAR(100) utf8mb4, e ENUM('a','b') latin1). */
static void from_catalog(struct sl_binlog_table_map *tm)
{
	static const struct sl_mysql_str ab[] = { { "a", 1 }, { "b", 1 } };
	static const char *names[] = { "id", "c", "e" };

	if (strcmp(tm->table, "t_wide") || tm->ncols != 3)
		return;
	for (uint32_t i = 0; i < 3; i++) {
		struct sl_mysql_column *c = &tm->cols[i];
		if (!c->name.p) {
			c->name.p = names[i];
			c->name.len = (uint32_t)strlen(names[i]);
		}
		if (c->is_unsigned < 0 && c->real_type == SL_MYSQL_LONG)
			c->is_unsigned = 0;
		if (!c->collation)
			c->collation = i == 1 ? 45 : i == 2 ? 8 : 0;
		c->charset = sl_mysql_charset_of_collation(c->collation);
		if (i == 2 && !c->nvalues) {
			c->values = ab;
			c->nvalues = 2;
		}
	}
}

/* Decodes one event; prints it to c->out.  Returns 0 or the failing code. */
static int one_event(struct ctx *c, const unsigned char *p, size_t len, char *err, size_t errlen)
{
	struct sl_binlog_event ev;
	struct sl_buf *b = &c->out;
	int rc = sl_binlog_decode(&c->r, p, len, &ev, err, errlen);
	char tb[16];

	if (rc < 0)
		return rc;
	sl_buf_printf(b, "@%" PRIu64 " ", ev.start);
	switch (ev.kind) {
	case SL_BLK_FORMAT_DESCRIPTION:
		sl_buf_printf(b, "FORMAT_DESCRIPTION v%u %s checksum=%u types=%u\n", ev.u.fde.binlog_version,
			      ev.u.fde.server_version, ev.u.fde.checksum_alg, ev.u.fde.n_post_header);
		break;
	case SL_BLK_ROTATE:
		sl_buf_printf(b, "ROTATE %.*s:%" PRIu64 "\n", (int)ev.u.rotate.file_len, ev.u.rotate.file,
			      ev.u.rotate.position);
		break;
	case SL_BLK_QUERY:
		sl_buf_printf(b, "QUERY db=%s thread=%u err=%u status=%zu '%.*s'\n", ev.u.query.db, ev.u.query.thread_id,
			      ev.u.query.error_code, ev.u.query.status_vars_len, (int)ev.u.query.sql_len, ev.u.query.sql);
		break;
	case SL_BLK_XID:
		sl_buf_printf(b, "XID %" PRIu64 "\n", ev.u.xid);
		break;
	case SL_BLK_MARIADB_GTID: {
		const struct sl_binlog_mariadb_gtid *g = &ev.u.mariadb_gtid;
		sl_buf_printf(b, "GTID %u-%u-%" PRIu64 " flags=0x%02x", g->domain_id, g->server_id, g->seq_no, g->flags);
		if (g->has_xid)
			sl_buf_printf(b, " xid=%u:%.*s", g->xid.format_id, (int)(g->xid.gtrid_len + g->xid.bqual_len),
				      (const char *)g->xid.data);
		if (g->flags_extra)
			sl_buf_printf(b, " extra=0x%02x engines=%u", g->flags_extra, g->extra_engines);
		sl_buf_putc(b, '\n');
		break;
	}
	case SL_BLK_MARIADB_GTID_LIST: {
		struct sl_mariadb_gtid g;
		sl_buf_printf(b, "GTID_LIST [");
		for (uint32_t i = 0; i < ev.u.gtid_list.count; i++) {
			sl_binlog_gtid_list_get(&ev.u.gtid_list, i, &g);
			sl_buf_printf(b, "%s%u-%u-%" PRIu64, i ? "," : "", g.domain, g.server, g.seq);
		}
		sl_buf_puts(b, "]\n");
		break;
	}
	case SL_BLK_ANNOTATE:
		sl_buf_printf(b, "ANNOTATE '%.*s'\n", (int)ev.u.annotate.len, ev.u.annotate.p);
		break;
	case SL_BLK_XA_PREPARE:
		sl_buf_printf(b, "XA_PREPARE one_phase=%d xid=%u:%.*s\n", ev.u.xa_prepare.one_phase,
			      ev.u.xa_prepare.xid.format_id,
			      (int)(ev.u.xa_prepare.xid.gtrid_len + ev.u.xa_prepare.xid.bqual_len),
			      (const char *)ev.u.xa_prepare.xid.data);
		break;
	case SL_BLK_HEARTBEAT:
		sl_buf_printf(b, "HEARTBEAT %.*s:%" PRIu64 "\n", (int)ev.u.heartbeat.file_len, ev.u.heartbeat.file,
			      ev.u.heartbeat.position);
		break;
	case SL_BLK_TABLE_MAP: {
		struct tmap *m = NULL;
		uint64_t id;
		/* find the slot by table id (peek: parse into a fresh map) */
		struct sl_binlog_table_map tmp;
		sl_binlog_table_map_init(&tmp);
		rc = sl_binlog_table_map_parse(&tmp, &c->r, &ev, err, errlen);
		id = tmp.table_id;
		sl_binlog_table_map_free(&tmp);
		if (rc < 0)
			return rc;
		for (int i = 0; i < c->nmaps; i++)
			if (c->maps[i].tm.table_id == id)
				m = &c->maps[i];
		if (!m) {
			if (c->nmaps == 8)
				return -1;
			m = &c->maps[c->nmaps++];
			sl_binlog_table_map_init(&m->tm);
		}
		rc = sl_binlog_table_map_parse(&m->tm, &c->r, &ev, err, errlen);
		if (rc < 0)
			return -1;
		if (!m->tm.has_names)  /* not FULL */
			from_catalog(&m->tm);
		if (make_cols(m) < 0)
			return -1;
		put_table_map(b, &m->tm);
		break;
	}
	case SL_BLK_ROWS: {
		struct sl_binlog_rows rows;
		struct tmap *m = NULL;
		struct sl_value before[32], after[32];
		static const char *ops[] = { "WRITE", "UPDATE", "DELETE" };
		uint64_t counted = 0, decoded = 0;
		rc = sl_binlog_rows_parse(&c->r, &ev, &rows, err, errlen);
		if (rc < 0)
			return rc;
		for (int i = 0; i < c->nmaps; i++)
			if (c->maps[i].tm.table_id == rows.table_id)
				m = &c->maps[i];
		if (!m || m->tm.ncols > 32) {
			snprintf(err, errlen, "rows for an unknown table");
			return -1;
		}
		sl_buf_printf(b, "%s_ROWS_V%d %s.%s flags=%u\n", ops[rows.op], rows.version, m->tm.db, m->tm.table,
			      rows.flags);
		/* the count without decoding (a table the stream does not
		 * select) must be the number of rows decoded */
		if (sl_mysql_rows_count(&rows, &m->tm, &counted, err, errlen) < 0)
			return -1;
		while ((rc = sl_mysql_rows_next(&c->dec, &rows, &m->tm, m->cols, before, after, err, errlen)) == 1) {
			decoded++;
			if (rows.op != SL_BL_ROWS_WRITE)
				put_row(b, "before", before, m->tm.ncols);
			if (rows.op != SL_BL_ROWS_DELETE)
				put_row(b, "after ", after, m->tm.ncols);
		}
		if (rc < 0)
			return rc;
		if (counted != decoded) {
			snprintf(err, errlen, "%s.%s: %" PRIu64 " rows counted, %" PRIu64 " decoded", m->tm.db,
				 m->tm.table, counted, decoded);
			return -1;
		}
		c->rows_counted += counted;
		break;
	}
	default:
		sl_buf_printf(b, "%s\n", sl_binlog_type_name(ev.h.type, tb));
		break;
	}
	return 0;
}

static void ctx_init(struct ctx *c)
{
	memset(c, 0, sizeof *c);
	sl_mysql_rowdec_init(&c->dec);
	sl_buf_init(&c->out, 0);
}

static void ctx_free(struct ctx *c)
{
	for (int i = 0; i < c->nmaps; i++) {
		sl_binlog_table_map_free(&c->maps[i].tm);
		free_cols(&c->maps[i]);
	}
	sl_mysql_rowdec_free(&c->dec);
	sl_buf_free(&c->out);
}

static void test_captured_files(void **state)
{
	static const char *files[] = { "mb.000001", "mb.000002", "mb.000003" };
	struct ctx c;
	char err[512], *want, *update = getenv("SLUICE_UPDATE_GOLDEN");
	size_t wantlen;

	(void)state;
	ctx_init(&c);
	for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
		size_t len, pos = 4;
		char *data = read_all(files[f], &len);
		assert_true(len >= 4 && memcmp(data, SL_BL_FILE_MAGIC, 4) == 0);
		sl_binlog_reader_init(&c.r, SL_BL_CHECKSUM_OFF, files[f]);
		sl_buf_printf(&c.out, "== %s\n", files[f]);
		while (pos < len) {
			uint32_t size;
			assert_true(len - pos >= 19);
			size = (uint32_t)(unsigned char)data[pos + 9] | (uint32_t)(unsigned char)data[pos + 10] << 8 |
			       (uint32_t)(unsigned char)data[pos + 11] << 16 | (uint32_t)(unsigned char)data[pos + 12] << 24;
			assert_true(size >= 19 && size <= len - pos);
			if (one_event(&c, (const unsigned char *)data + pos, size, err, sizeof err) != 0)
				fail_msg("%s at %zu: %s", files[f], pos, err);
			pos += size;
		}
		assert_int_equal(c.r.checksum, SL_BL_CHECKSUM_CRC32);
		free(data);
	}
	/* every type of the capture was sized without decoding */
	assert_true(c.rows_counted >= 10);
	/* The stream's artificial rotate and a heartbeat, both with checksums. */
	{
		size_t len;
		char *data = read_all("fake-rotate.bin", &len);
		sl_binlog_reader_init(&c.r, SL_BL_CHECKSUM_CRC32, NULL);
		sl_buf_puts(&c.out, "== stream\n");
		if (one_event(&c, (const unsigned char *)data, len, err, sizeof err) != 0)
			fail_msg("fake rotate: %s", err);
		assert_string_equal(c.r.file, "mb.000002");
		free(data);
		data = read_all("heartbeat.bin", &len);
		if (one_event(&c, (const unsigned char *)data, len, err, sizeof err) != 0)
			fail_msg("heartbeat: %s", err);
		free(data);
	}
	want = read_all("expected.txt", &wantlen);
	if ((update && !strcmp(update, "1")) || wantlen != c.out.len || memcmp(want, c.out.data, wantlen)) {
		/* The reviewed file is never rewritten by the code under test:
		 * what it gives goes beside it, and the test fails. */
		size_t i = 0;
		if (sl_write_file_atomic(DATA "expected.txt.actual", c.out.data, c.out.len, err, sizeof err) != 0)
			fail_msg("%s", err);
		while (i < wantlen && i < c.out.len && want[i] == c.out.data[i])
			i++;
		fail_msg("decoded events differ from expected.txt at byte %zu: got \"%.80s\" (all of it is in "
			 "expected.txt.actual: review it, and copy it over expected.txt if it is right)",
			 i, c.out.data + i);
	}
	free(want);
	ctx_free(&c);
}

/* Every event of the captures, without its checksum (so that mutations
 * reach the parsers), preceded by what it needs: the format description
 * and, for rows events, their table map. */
struct corpus {
	struct sl_buf ev[256];
	int table_map_of[256];   /* for a rows event: the index of its table map */
	int n;
	int fde;
};

static void load_corpus(struct corpus *k)
{
	static const char *files[] = { "mb.000001", "mb.000002", "mb.000003" };
	int last_map[1024];

	memset(k, 0, sizeof *k);
	for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
		size_t len, pos = 4;
		char *data = read_all(files[f], &len);
		for (int i = 0; i < 1024; i++)
			last_map[i] = -1;
		while (pos < len && k->n < 256) {
			uint32_t size = (uint32_t)(unsigned char)data[pos + 9] | (uint32_t)(unsigned char)data[pos + 10] << 8;
			unsigned char type = (unsigned char)data[pos + 4];
			struct sl_buf *e = &k->ev[k->n];
			sl_buf_init(e, 0);
			sl_buf_append(e, data + pos, size - 4);
			e->data[9] = (char)(size - 4);  /* sizes here are below 64 KiB */
			e->data[10] = (char)((size - 4) >> 8);
			k->table_map_of[k->n] = -1;
			if (type == SL_BL_FORMAT_DESCRIPTION && f == 0)
				k->fde = k->n;
			if (type == SL_BL_TABLE_MAP)
				last_map[(unsigned char)data[pos + 19] | (unsigned char)data[pos + 20] << 8] = k->n;
			if (type >= SL_BL_WRITE_ROWS_V1 && type <= SL_BL_DELETE_ROWS_V1)
				k->table_map_of[k->n] =
					last_map[(unsigned char)data[pos + 19] | (unsigned char)data[pos + 20] << 8];
			k->n++;
			pos += size;
		}
		free(data);
	}
}

static void test_captured_mutations(void **state)
{
	struct corpus k;
	struct sl_buf m;
	unsigned seed = 777;
	char err[512];
	int ok = 0, rows_ok = 0;

	(void)state;
	load_corpus(&k);
	assert_true(k.n > 50);
	sl_buf_init(&m, 0);
	for (int iter = 0; iter < 100000; iter++) {
		struct ctx c;
		int i = rand_r(&seed) % k.n, map = k.table_map_of[i], mutate_map, rc;
		const struct sl_buf *src;

		ctx_init(&c);
		sl_binlog_reader_init(&c.r, SL_BL_CHECKSUM_OFF, "mb.000001");
		/* the format description (its own checksum stripped: it still
		 * declares CRC32, which the reader is then told to ignore) */
		{
			struct sl_buf fde;
			sl_buf_init(&fde, 0);
			sl_buf_append(&fde, k.ev[k.fde].data, k.ev[k.fde].len);
			/* put back 4 bytes for the trailer the format description always has */
			sl_buf_append(&fde, "\0\0\0\0", 4);
			fde.data[9] = (char)fde.len;
			fde.data[10] = (char)(fde.len >> 8);
			fde.data[fde.len - 5] = 0;  /* checksum_alg OFF */
			assert_int_equal(one_event(&c, (const unsigned char *)fde.data, fde.len, err, sizeof err), 0);
			sl_buf_free(&fde);
		}
		/* a rows event's table map, itself mutated now and then */
		mutate_map = map >= 0 && rand_r(&seed) % 4 == 0;
		src = &k.ev[i];
		if (map >= 0 && !mutate_map)
			assert_int_equal(one_event(&c, (const unsigned char *)k.ev[map].data, k.ev[map].len, err,
						   sizeof err), 0);
		if (mutate_map)
			src = &k.ev[map];
		for (int round = 0; round < (mutate_map ? 2 : 1); round++) {
			int n = 1 + rand_r(&seed) % 4;
			sl_buf_reset(&m);
			sl_buf_append(&m, src->data, src->len);
			for (int j = 0; j < n && round == 0 && m.len > 19; j++) {
				size_t at = 19 + (size_t)rand_r(&seed) % (m.len - 19);
				switch (rand_r(&seed) % 3) {
				case 0: m.data[at] = (char)rand_r(&seed); break;
				case 1:  /* truncate, keeping the header's size right */
					m.len = at;
					m.data[9] = (char)m.len;
					m.data[10] = (char)(m.len >> 8);
					break;
				default: m.data[at] = (char)0xff; break;
				}
			}
			rc = one_event(&c, (const unsigned char *)m.data, m.len, err, sizeof err);
			assert_true(rc == 0 || rc == -1 || rc == SL_MYSQL_EVALUE);
			ok += rc == 0;
			if (rc == 0 && map >= 0)
				rows_ok++;
			if (mutate_map)
				src = &k.ev[i];  /* then the rows event, against the mutated map */
		}
		ctx_free(&c);
	}
	assert_true(ok > 0);
	assert_true(rows_ok > 0);
	for (int i = 0; i < k.n; i++)
		sl_buf_free(&k.ev[i]);
	sl_buf_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_captured_files),
		cmocka_unit_test(test_captured_mutations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
