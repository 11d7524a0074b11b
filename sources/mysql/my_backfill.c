/*
 * sources/mysql/my_backfill.c: snapshots aligned to a binlog position, and
 * reading them as typed values equal to what the binlog decoder gives for
 * the same stored values (see my_internal.h).
 *
 * The snapshot: START TRANSACTION WITH CONSISTENT SNAPSHOT, then MariaDB's
 * status variables binlog_snapshot_file / binlog_snapshot_position, which
 * name the binlog position of exactly that snapshot, without any lock.
 * MySQL has no such variables: there, FLUSH TABLES WITH READ LOCK stops
 * commits while the snapshot starts and SHOW MASTER STATUS is read, then
 * UNLOCK TABLES (the RELOAD privilege; the lock waits for running queries,
 * so it is taken only for that moment).  SLUICE_MYSQL_SNAPSHOT=lock forces
 * that method on MariaDB too (tests).
 *
 * Rows are read with the binary protocol (prepared statements), so numbers
 * and temporal values come typed, never as text to parse: FLOAT and DOUBLE
 * bit for bit, DATETIME and TIME as their parts.  The session reads strings
 * unconverted (character_set_results NULL), in each column's own charset,
 * and they are converted to UTF-8 by the same code the binlog decoder
 * uses (mysql_charset.h); TIMESTAMPs come in UTC (time_zone +00:00).  What
 * differs between a SELECT and a row image is handled here as the decoder
 * handles it: BINARY(n) values come padded (the decoder pads them), CHAR
 * values without trailing spaces (the binlog has none), GEOMETRY with its
 * SRID (dropped), zero and invalid dates (null, counted, warned).
 *
 * A snapshot of a whole table whose columns all have an exact text form
 * (sl_my_text_ok) is read with the text protocol instead: its values are
 * parsed where they lie in the connection's buffer: libmariadb's
 * conversion into bind buffers, and its copy of strings into them, is
 * left out (doc/operations.md, "Throughput", has the instruction counts).
 * SLUICE_MYSQL_BINARY_BACKFILL=1 keeps the binary protocol (tests).
 */
#include "sources/mysql/my_internal.h"

#include <inttypes.h>
#include <mysqld_error.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

#define US_PER_SEC INT64_C(1000000)
#define US_PER_DAY (INT64_C(86400) * US_PER_SEC)

struct sl_my_snap {
	MYSQL *c;
	struct sl_mysql_conv conv;
};

static int days_in_month(int64_t y, int m)
{
	static const int dm[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : dm[m - 1];
}

int sl_my_snap_connect(struct sl_my_snap **out, const struct sl_source_config *cfg, char *err, size_t errlen)
{
	struct sl_my_snap *s = calloc(1, sizeof *s);
	struct sl_my_server s2;
	int rc;

	*out = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	sl_mysql_conv_init(&s->conv);
	if (!(s->c = sl_my_connect(cfg, 0, &s2, err, errlen))) {
		rc = sl_my_err_status();
		sl_mysql_conv_free(&s->conv);
		free(s);
		return rc;
	}
	if ((rc = sl_my_exec(s->c, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", err, errlen)) < 0) {
		sl_my_snapshot_close(s);
		return rc;
	}
	*out = s;
	return SL_OK;
}

bool sl_my_snapshot_locks(const struct sl_my_server *srv)
{
	const char *m = getenv("SLUICE_MYSQL_SNAPSHOT");

	return !srv->mariadb || (m && !strcmp(m, "lock"));
}

int sl_my_snap_begin(struct sl_my_snap *s, const struct sl_source_config *cfg, const struct sl_source_stream *st,
		     const struct sl_my_server *srv, bool quiet, struct sl_snapshot_info *info, char *err, size_t errlen)
{
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	char file[SL_BL_FILE_MAX + 1] = "", pos[32] = "", gtid[SL_POS_TEXT_MAX] = "", ts[40];
	bool lock = sl_my_snapshot_locks(srv), locked = false, dropped;
	int rc;

	memset(info, 0, sizeof *info);
	/* the source time of the rows: just before the snapshot */
	if ((rc = sl_my_query_value(s->c, "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)", ts, sizeof ts, NULL,
				    err, errlen)) < 0)
		goto fail;
	info->ts_us = strtoll(ts, NULL, 10);
	if (lock) {
		if (!quiet)
			sl_info("stream \"%s\": taking the snapshot's position under FLUSH TABLES WITH READ LOCK",
				st->name);
		if ((rc = sl_my_exec(s->c, "FLUSH TABLES WITH READ LOCK", err, errlen)) < 0)
			goto fail;
		locked = true;
	}
	if ((rc = sl_my_exec(s->c, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY", err, errlen)) < 0)
		goto fail;
	if (!lock) {
		if ((rc = sl_my_query(s->c, "SHOW STATUS LIKE 'binlog_snapshot_%'", &res, err, errlen)) < 0)
			goto fail;
		while (res && (row = mysql_fetch_row(res))) {
			if (row[0] && row[1] && !strcasecmp(row[0], "Binlog_snapshot_file"))
				snprintf(file, sizeof file, "%s", row[1]);
			else if (row[0] && row[1] && !strcasecmp(row[0], "Binlog_snapshot_position"))
				snprintf(pos, sizeof pos, "%s", row[1]);
		}
		if (res)
			mysql_free_result(res);
		res = NULL;
	} else {
		if ((rc = sl_my_query(s->c, "SHOW MASTER STATUS", &res, err, errlen)) < 0)
			goto fail;
		if (res && (row = mysql_fetch_row(res)) && row[0] && row[1]) {
			snprintf(file, sizeof file, "%s", row[0]);
			snprintf(pos, sizeof pos, "%s", row[1]);
			if (!srv->mariadb && mysql_num_fields(res) >= 5 && row[4]) {
				size_t k = 0;
				for (const char *p = row[4]; *p && k + 1 < sizeof gtid; p++)
					if (*p != '\n' && *p != ' ')
						gtid[k++] = *p;
				gtid[k] = '\0';
			}
		}
		if (res)
			mysql_free_result(res);
		res = NULL;
		if ((rc = sl_my_exec(s->c, "UNLOCK TABLES", err, errlen)) < 0)
			goto fail;
		locked = false;
	}
	if (!file[0] || !pos[0]) {
		snprintf(err, errlen, "stream \"%s\": source \"%s\" did not name the binlog position of the snapshot "
			 "(is log_bin on?)", st->name, cfg->name);
		rc = SL_EPREREQ;
		goto fail;
	}
	if (srv->mariadb && !quiet) {
		struct sl_buf q;
		sl_buf_init(&q, 0);
		sl_buf_puts(&q, "SELECT BINLOG_GTID_POS(");
		sl_my_append_literal(&q, file);
		sl_buf_printf(&q, ", %s)", pos);
		rc = sl_buf_failed(&q) ? SL_EFAIL : sl_my_query_value(s->c, q.data, gtid, sizeof gtid, NULL, err, errlen);
		sl_buf_free(&q);
		if (rc < 0)
			goto fail;
	}
	info->pos = sl_my_pos(file, strtoull(pos, NULL, 10), gtid, &dropped);
	if (dropped)
		sl_warn("stream \"%s\": the GTID state at the snapshot is too long to keep: the stream resumes by binlog "
			"file and offset", st->name);
	return SL_OK;
fail:
	if (locked)
		mysql_query(s->c, "UNLOCK TABLES");
	mysql_query(s->c, "ROLLBACK");
	return rc;
}

int sl_my_snap_end(struct sl_my_snap *s, char *err, size_t errlen)
{
	return sl_my_exec(s->c, "COMMIT", err, errlen);
}

void sl_my_snap_rollback(struct sl_my_snap *s)
{
	mysql_query(s->c, "ROLLBACK");
}

int sl_my_snapshot_open(struct sl_my_snap **out, const struct sl_source_config *cfg,
			const struct sl_source_stream *st, const struct sl_my_server *srv,
			struct sl_snapshot_info *info, char *err, size_t errlen)
{
	struct sl_my_snap *s;
	int rc;

	*out = NULL;
	memset(info, 0, sizeof *info);
	if ((rc = sl_my_snap_connect(&s, cfg, err, errlen)) < 0)
		return rc;
	if ((rc = sl_my_snap_begin(s, cfg, st, srv, false, info, err, errlen)) < 0) {
		sl_my_snapshot_close(s);
		return rc;
	}
	*out = s;
	return SL_OK;
}

void sl_my_snapshot_close(struct sl_my_snap *s)
{
	if (!s)
		return;
	if (s->c) {
		mysql_query(s->c, "COMMIT");
		mysql_close(s->c);
	}
	sl_mysql_conv_free(&s->conv);
	free(s);
}

/* ---- values ---- */

static int verr(char *err, size_t errlen, const char *db, const char *table, const struct sl_my_col *col,
		const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int verr(char *err, size_t errlen, const char *db, const char *table, const struct sl_my_col *col,
		const char *fmt, ...)
{
	char what[256], tn[48];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "table \"%s\".\"%s\" column \"%s\" (%s): %s", db, table, col->name,
		 sl_mysql_type_name(&col->mc, tn, sizeof tn), what);
	return SL_MYSQL_EVALUE;
}

/* A zero or invalid date: null, counted and warned as the binlog decoder does. */
static void bad_date(struct sl_mysql_row_stats *stats, const char *db, const char *table, const struct sl_my_col *col,
		     bool zero, int64_t y, int m, int d, struct sl_value *v)
{
	uint64_t nth = zero ? ++stats->zero_dates : ++stats->invalid_dates;

	if ((nth & (nth - 1)) == 0)
		sl_warn("table \"%s\".\"%s\" column \"%s\": %s date %04" PRId64 "-%02d-%02d written as null "
			"(%" PRIu64 " so far)", db, table, col->name, zero ? "zero" : "invalid", y, m, d, nth);
	*v = (struct sl_value){ .kind = SL_V_NULL };
}

/* Digits of a decimal's text ("-0012.50") as the decoder writes them: the
 * digits without the point, padded to scale, without leading zeros ("1250",
 * scale 2), into scratch; v->p is their offset in scratch.  A zero is never
 * negative.  -1 when p is not a decimal of that scale (or out of memory). */
static int put_decimal(const char *p, size_t n, int scale, struct sl_buf *scratch, struct sl_value *v)
{
	size_t k = 0, off = scratch->len, lead, end;
	bool neg = false, point = false;
	int frac = 0;
	char *d;

	if (k < n && (p[k] == '-' || p[k] == '+'))
		neg = p[k++] == '-';
	if (sl_buf_reserve(scratch, n + (size_t)scale + 1) < 0)
		return -1;
	d = scratch->data + off;
	for (; k < n; k++) {
		if (p[k] == '.' && !point) {
			point = true;
			continue;
		}
		if (p[k] < '0' || p[k] > '9' || (point && ++frac > scale))
			return -1;
		*d++ = p[k];
	}
	for (; frac < scale; frac++)
		*d++ = '0';
	end = (size_t)(d - scratch->data);
	lead = off;
	while (lead < end && scratch->data[lead] == '0')
		lead++;
	if (lead == end) {
		scratch->data[off] = '0';
		end = off + 1;
		neg = false;
		lead = off;
	}
	scratch->len = end;
	scratch->data[end] = '\0';
	*v = (struct sl_value){ .kind = SL_V_DECIMAL, .neg = neg, .scale = (int16_t)scale,
				.len = (uint32_t)(end - lead), .p = (const char *)(uintptr_t)lead };
	return 0;
}

/* Where a value is read from: the table and column it belongs to, and
 * what converting it needs (scratch receives converted values). */
struct vctx {
	const struct sl_my_col *col;
	const struct sl_column *out;
	struct sl_buf *scratch;
	struct sl_mysql_conv *conv;
	struct sl_mysql_row_stats *stats;
	const char *db, *table;
	char *err;
	size_t errlen;
};

/* An integer column's value, mag its magnitude and neg its sign, checked
 * against the output type's range. */
static int int_value(const struct vctx *x, bool neg, uint64_t mag, struct sl_value *v)
{
	int64_t s = neg ? (int64_t)(UINT64_C(0) - mag) : (int64_t)mag;

	neg = neg && mag != 0;
	switch (x->out->type) {
	case SL_T_INT32:
		if (neg ? mag > (uint64_t)INT32_MAX + 1 : mag > INT32_MAX)
			return verr(x->err, x->errlen, x->db, x->table, x->col, "value out of range for int32");
		*v = (struct sl_value){ .kind = SL_V_INT, .i = s };
		return 0;
	case SL_T_INT64:
		if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > INT64_MAX)
			return verr(x->err, x->errlen, x->db, x->table, x->col, "value out of range for int64");
		*v = (struct sl_value){ .kind = SL_V_INT, .i = s };
		return 0;
	case SL_T_UINT64:
		if (neg)
			return verr(x->err, x->errlen, x->db, x->table, x->col, "negative value for uint64");
		*v = (struct sl_value){ .kind = SL_V_UINT, .u = mag };
		return 0;
	default:
		return verr(x->err, x->errlen, x->db, x->table, x->col, "cannot be written as this output type");
	}
}

static int decimal_value(const struct vctx *x, const char *p, size_t len, struct sl_value *v)
{
	const struct sl_mysql_column *mc = &x->col->mc;

	if (x->out->type != SL_T_DECIMAL)
		return verr(x->err, x->errlen, x->db, x->table, x->col, "cannot be written as this output type");
	if (put_decimal(p, len, mc->scale, x->scratch, v) < 0)
		return verr(x->err, x->errlen, x->db, x->table, x->col, "\"%.*s\" is not a decimal(%u,%u)", (int)len,
			    p, mc->precision, mc->scale);
	return 1;  /* p is an offset into scratch */
}

/* A DATE, DATETIME or TIMESTAMP column's value from its parts. */
static int temporal_value(const struct vctx *x, const MYSQL_TIME *t, struct sl_value *v)
{
	uint8_t rt = x->col->mc.real_type;
	int64_t days;

	if (t->year == 0 && t->month == 0 && t->day == 0) {
		bad_date(x->stats, x->db, x->table, x->col, true, 0, 0, 0, v);
		return 0;
	}
	if (rt != SL_MYSQL_TIMESTAMP && rt != SL_MYSQL_TIMESTAMP2 &&
	    (t->month < 1 || t->month > 12 || t->day < 1 || (int)t->day > days_in_month(t->year, (int)t->month))) {
		bad_date(x->stats, x->db, x->table, x->col, false, t->year, (int)t->month, (int)t->day, v);
		return 0;
	}
	days = sl_days_from_civil(t->year, (int)t->month, (int)t->day);
	if (x->out->type == SL_T_DATE)
		*v = (struct sl_value){ .kind = SL_V_DATE, .i = days };
	else
		*v = (struct sl_value){ .kind = SL_V_TIMESTAMP, .i = days * US_PER_DAY +
					((int64_t)t->hour * 3600 + t->minute * 60 + t->second) * US_PER_SEC +
					(int64_t)t->second_part };
	return 0;
}

/* Strings, BLOBs, ENUM, SET, JSON (and MariaDB's UUID, INET4, INET6, which
 * come as their text): bytes, or text in the column's charset.  Both
 * protocols send them alike. */
static int bytes_value(const struct vctx *x, const char *p, size_t len, struct sl_value *v)
{
	const struct sl_mysql_column *mc = &x->col->mc;
	uint8_t out_type = x->out->type;
	size_t off = x->scratch->len;
	bool copied;
	char why[200];

	if (mc->real_type == SL_MYSQL_STRING && mc->fbt) {
		/* through their binary form, to the binlog's value */
		unsigned char mem[16];
		if (sl_mysql_fbt_parse(mc->fbt, p, len, mem) < 0)
			return verr(x->err, x->errlen, x->db, x->table, x->col, "\"%.*s\" is not a %s",
				    (int)(len < 64 ? len : 64), p, mc->fbt == SL_MYSQL_FBT_UUID ? "uuid" : "network address");
		if (sl_mysql_fbt_value(mc->fbt, mem, x->scratch, v) < 0)
			return verr(x->err, x->errlen, x->db, x->table, x->col, "out of memory");
		return 1;
	}
	if (out_type == SL_T_BYTES) {
		*v = (struct sl_value){ .kind = SL_V_BYTES, .len = (uint32_t)len, .p = p };
		return 0;
	}
	if (out_type == SL_T_STRING && (mc->real_type == SL_MYSQL_ENUM || mc->real_type == SL_MYSQL_SET) &&
	    mc->charset && (mc->charset->kind == SL_CS_BINARY || mc->charset->kind == SL_CS_UNSUPPORTED)) {
		/* the member's bytes, as the binlog decoder writes them */
		if ((mc->charset->kind == SL_CS_BINARY ? sl_mysql_binary_member(p, len, x->scratch, &copied)
						       : sl_mysql_foreign_member(p, len, false, x->scratch, &copied)) < 0)
			return verr(x->err, x->errlen, x->db, x->table, x->col, "out of memory");
		if (!copied) {
			*v = (struct sl_value){ .kind = SL_V_STRING, .len = (uint32_t)len, .p = p };
			return 0;
		}
		*v = (struct sl_value){ .kind = SL_V_STRING, .len = (uint32_t)(x->scratch->len - off),
					.p = (const char *)(uintptr_t)off };
		return 1;
	}
	if ((out_type != SL_T_STRING && out_type != SL_T_JSON) ||
	    (mc->real_type != SL_MYSQL_JSON && mc->charset &&
	     (mc->charset->kind == SL_CS_BINARY || mc->charset->kind == SL_CS_UNSUPPORTED)))
		return verr(x->err, x->errlen, x->db, x->table, x->col, "cannot be written as this output type");
	if (sl_mysql_to_utf8(x->conv, mc->real_type == SL_MYSQL_JSON ? NULL : mc->charset, p, len, x->scratch, &copied,
			     why, sizeof why) < 0)
		return verr(x->err, x->errlen, x->db, x->table, x->col, "%s", why);
	if (copied) {
		*v = (struct sl_value){ .kind = out_type == SL_T_JSON ? SL_V_JSON : SL_V_STRING,
					.len = (uint32_t)(x->scratch->len - off), .p = (const char *)(uintptr_t)off };
		return 1;
	}
	*v = (struct sl_value){ .kind = out_type == SL_T_JSON ? SL_V_JSON : SL_V_STRING, .len = (uint32_t)len, .p = p };
	return 0;
}

int sl_my_bind_value(const struct sl_my_col *col, const struct sl_column *out, const MYSQL_BIND *b,
		     struct sl_buf *scratch, struct sl_mysql_conv *conv, struct sl_mysql_row_stats *stats,
		     const char *db, const char *table, struct sl_value *v, char *err, size_t errlen)
{
	const struct vctx x = { .col = col, .out = out, .scratch = scratch, .conv = conv, .stats = stats, .db = db,
				.table = table, .err = err, .errlen = errlen };
	const struct sl_mysql_column *mc = &col->mc;
	const MYSQL_TIME *t = b->buffer;
	unsigned long len = b->length ? *b->length : 0;
	const char *p = b->buffer;

	if (*b->is_null) {
		*v = (struct sl_value){ .kind = SL_V_NULL };
		return 0;
	}
	switch (mc->real_type) {
	case SL_MYSQL_TINY: case SL_MYSQL_SHORT: case SL_MYSQL_INT24: case SL_MYSQL_LONG: case SL_MYSQL_LONGLONG:
	case SL_MYSQL_YEAR: {
		uint64_t u = *(const uint64_t *)b->buffer;
		bool neg = !b->is_unsigned && (int64_t)u < 0;
		return int_value(&x, neg, neg ? UINT64_C(0) - u : u, v);
	}
	case SL_MYSQL_FLOAT:
		if (out->type == SL_T_FLOAT)
			*v = (struct sl_value){ .kind = SL_V_FLOAT, .f = *(const float *)b->buffer };
		else
			*v = (struct sl_value){ .kind = SL_V_DOUBLE, .d = *(const float *)b->buffer };
		return 0;
	case SL_MYSQL_DOUBLE:
		*v = (struct sl_value){ .kind = SL_V_DOUBLE, .d = *(const double *)b->buffer };
		return 0;
	case SL_MYSQL_NEWDECIMAL:
		return decimal_value(&x, p, len, v);
	case SL_MYSQL_DATE: case SL_MYSQL_NEWDATE: case SL_MYSQL_DATETIME: case SL_MYSQL_DATETIME2:
	case SL_MYSQL_TIMESTAMP: case SL_MYSQL_TIMESTAMP2:
		return temporal_value(&x, t, v);
	case SL_MYSQL_TIME: case SL_MYSQL_TIME2: {
		int64_t us = (((int64_t)t->day * 24 + t->hour) * 3600 + t->minute * 60 + t->second) * US_PER_SEC +
			     (int64_t)t->second_part;
		*v = (struct sl_value){ .kind = SL_V_TIME, .i = t->neg ? -us : us };
		return 0;
	}
	case SL_MYSQL_BIT:
		if (out->type == SL_T_BOOL) {
			bool on = false;
			for (unsigned long k = 0; k < len; k++)
				on = on || p[k];
			*v = (struct sl_value){ .kind = SL_V_BOOL, .b = on };
			return 0;
		}
		if (out->type != SL_T_BYTES)
			break;
		*v = (struct sl_value){ .kind = SL_V_BYTES, .len = (uint32_t)len, .p = p };
		return 0;
	case SL_MYSQL_GEOMETRY:
		if (out->type != SL_T_BYTES)
			break;
		if (len < 4)
			return verr(err, errlen, db, table, col, "%lu bytes, too short for the 4-byte SRID", len);
		*v = (struct sl_value){ .kind = SL_V_BYTES, .len = (uint32_t)(len - 4), .p = p + 4 };
		return 0;
	default:
		return bytes_value(&x, p, len, v);
	}
	return verr(err, errlen, db, table, col, "cannot be written as this output type");
}

/* ---- the text protocol ----
 *
 * A table whose columns all have an exact text form is read with the text
 * protocol: each value is parsed where it lies in the connection's buffer,
 * with no conversion into a bind buffer first.  FLOAT and DOUBLE (the text
 * is rounded), TIME, BIT and GEOMETRY are read with the binary protocol. */

/* Whether a column of this type reads exactly from its text. */
static bool text_exact(uint8_t real_type)
{
	switch (real_type) {
	case SL_MYSQL_TINY: case SL_MYSQL_SHORT: case SL_MYSQL_INT24: case SL_MYSQL_LONG: case SL_MYSQL_LONGLONG:
	case SL_MYSQL_YEAR: case SL_MYSQL_NEWDECIMAL:
	case SL_MYSQL_DATE: case SL_MYSQL_NEWDATE: case SL_MYSQL_DATETIME: case SL_MYSQL_DATETIME2:
	case SL_MYSQL_TIMESTAMP: case SL_MYSQL_TIMESTAMP2:
	case SL_MYSQL_VARCHAR: case SL_MYSQL_VAR_STRING: case SL_MYSQL_STRING: case SL_MYSQL_ENUM: case SL_MYSQL_SET:
	case SL_MYSQL_TINY_BLOB: case SL_MYSQL_MEDIUM_BLOB: case SL_MYSQL_LONG_BLOB: case SL_MYSQL_BLOB:
	case SL_MYSQL_JSON:
		return true;
	default:
		return false;
	}
}

bool sl_my_text_ok(const struct sl_my_table *mt)
{
	for (int i = 0; i < mt->ncols; i++)
		if (!text_exact(mt->cols[i].mc.real_type))
			return false;
	return true;
}

/* An integer's text ("-12", "18446744073709551615"): its sign and
 * magnitude; -1 when it is not one or does not fit 64 bits. */
static int parse_int(const char *p, size_t n, bool *neg, uint64_t *mag)
{
	size_t k = 0;
	uint64_t m = 0;

	*neg = n > 0 && p[0] == '-';
	k = *neg ? 1 : 0;
	if (k == n)
		return -1;
	for (; k < n; k++) {
		unsigned d = (unsigned)(p[k] - '0');
		if (d > 9 || __builtin_mul_overflow(m, 10, &m) || __builtin_add_overflow(m, d, &m))
			return -1;
	}
	*mag = m;
	return 0;
}

/* n fixed digits at p, or -1. */
static int fixed_digits(const char *p, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

/* A DATE's text "YYYY-MM-DD", or a DATETIME's or TIMESTAMP's "YYYY-MM-DD
 * HH:MM:SS" with 1 to 6 digits of a second after a point, into its parts
 * (zero and invalid dates as they are); -1 when it is not one. */
static int parse_datetime(const char *p, size_t n, bool date, MYSQL_TIME *t)
{
	int y, mo, d, h = 0, mi = 0, sec = 0;
	unsigned long us = 0;

	memset(t, 0, sizeof *t);
	if (n < 10 || p[4] != '-' || p[7] != '-' || (y = fixed_digits(p, 4)) < 0 || (mo = fixed_digits(p + 5, 2)) < 0 ||
	    (d = fixed_digits(p + 8, 2)) < 0)
		return -1;
	if (date ? n != 10 : (n < 19 || p[10] != ' ' || p[13] != ':' || p[16] != ':' ||
			      (h = fixed_digits(p + 11, 2)) < 0 || (mi = fixed_digits(p + 14, 2)) < 0 ||
			      (sec = fixed_digits(p + 17, 2)) < 0 || h > 23 || mi > 59 || sec > 59))
		return -1;
	if (!date && n > 19) {
		int nd = (int)n - 20, f;
		if (p[19] != '.' || nd < 1 || nd > 6 || (f = fixed_digits(p + 20, nd)) < 0)
			return -1;
		us = (unsigned long)f;
		for (; nd < 6; nd++)
			us *= 10;
	}
	t->year = (unsigned)y;
	t->month = (unsigned)mo;
	t->day = (unsigned)d;
	t->hour = (unsigned)h;
	t->minute = (unsigned)mi;
	t->second = (unsigned)sec;
	t->second_part = us;
	return 0;
}

int sl_my_text_value(const struct sl_my_col *col, const struct sl_column *out, const char *p, size_t len,
		     struct sl_buf *scratch, struct sl_mysql_conv *conv, struct sl_mysql_row_stats *stats,
		     const char *db, const char *table, struct sl_value *v, char *err, size_t errlen)
{
	const struct vctx x = { .col = col, .out = out, .scratch = scratch, .conv = conv, .stats = stats, .db = db,
				.table = table, .err = err, .errlen = errlen };
	uint8_t rt = col->mc.real_type;
	MYSQL_TIME t;
	uint64_t mag;
	bool neg;

	if (!p) {
		*v = (struct sl_value){ .kind = SL_V_NULL };
		return 0;
	}
	switch (rt) {
	case SL_MYSQL_TINY: case SL_MYSQL_SHORT: case SL_MYSQL_INT24: case SL_MYSQL_LONG: case SL_MYSQL_LONGLONG:
	case SL_MYSQL_YEAR:
		if (parse_int(p, len, &neg, &mag) < 0)
			return verr(err, errlen, db, table, col, "\"%.*s\" is not an integer", (int)(len < 64 ? len : 64), p);
		return int_value(&x, neg, mag, v);
	case SL_MYSQL_NEWDECIMAL:
		return decimal_value(&x, p, len, v);
	case SL_MYSQL_DATE: case SL_MYSQL_NEWDATE: case SL_MYSQL_DATETIME: case SL_MYSQL_DATETIME2:
	case SL_MYSQL_TIMESTAMP: case SL_MYSQL_TIMESTAMP2:
		if (parse_datetime(p, len, rt == SL_MYSQL_DATE || rt == SL_MYSQL_NEWDATE, &t) < 0)
			return verr(err, errlen, db, table, col, "\"%.*s\" is not a date or time", (int)(len < 64 ? len : 64),
				    p);
		return temporal_value(&x, &t, v);
	default:
		if (!text_exact(rt))
			return verr(err, errlen, db, table, col, "has no exact text form");
		return bytes_value(&x, p, len, v);
	}
}

/* One column's result binding and its storage. */
struct rcol {
	union { uint64_t u; double d; float f; MYSQL_TIME t; } fixed;
	unsigned char *buf;
	unsigned long cap, len;
	my_bool is_null, error;
	bool variable;
};

static enum enum_field_types bind_type(const struct sl_mysql_column *mc, bool *variable)
{
	*variable = false;
	switch (mc->real_type) {
	case SL_MYSQL_TINY: case SL_MYSQL_SHORT: case SL_MYSQL_INT24: case SL_MYSQL_LONG: case SL_MYSQL_LONGLONG:
	case SL_MYSQL_YEAR:
		return MYSQL_TYPE_LONGLONG;
	case SL_MYSQL_FLOAT: return MYSQL_TYPE_FLOAT;
	case SL_MYSQL_DOUBLE: return MYSQL_TYPE_DOUBLE;
	case SL_MYSQL_DATE: case SL_MYSQL_NEWDATE: return MYSQL_TYPE_DATE;
	case SL_MYSQL_DATETIME: case SL_MYSQL_DATETIME2: return MYSQL_TYPE_DATETIME;
	case SL_MYSQL_TIMESTAMP: case SL_MYSQL_TIMESTAMP2: return MYSQL_TYPE_TIMESTAMP;
	case SL_MYSQL_TIME: case SL_MYSQL_TIME2: return MYSQL_TYPE_TIME;
	default:
		*variable = true;
		return MYSQL_TYPE_BLOB;
	}
}

static void bind_col(MYSQL_BIND *b, struct rcol *r, const struct sl_mysql_column *mc)
{
	bool variable;

	memset(b, 0, sizeof *b);
	b->buffer_type = bind_type(mc, &variable);
	r->variable = variable;
	b->is_null = &r->is_null;
	b->error = &r->error;
	b->length = &r->len;
	b->is_unsigned = mc->is_unsigned == 1;
	if (variable) {
		b->buffer = r->buf;
		b->buffer_length = r->cap;
	} else {
		b->buffer = &r->fixed;
		b->buffer_length = sizeof r->fixed;
	}
}

/* ---- key texts ----
 *
 * A key text (sources/source.h) of a MySQL table is one token per key
 * column, in the key's order, joined by tabs; a token is what the server
 * sent for the column, written so that it goes back into SQL as a literal
 * that compares exactly as the column's value does:
 *
 *   integers, YEAR     decimal digits, "-" for a negative value
 *   DECIMAL            the server's text ("-12.50")
 *   FLOAT, DOUBLE      the value as a double, "%.17e" (exact)
 *   DATE               "2024-01-31"; DATETIME, TIMESTAMP (UTC, the session's
 *                      zone) "2024-01-31 12:00:00.000000"; TIME "-838:59:59.000000"
 *   BIT                the bits as an unsigned number
 *   ENUM, SET          the index / bitmap as a number (they sort by it)
 *   strings, BLOBs     the bytes, as stored, in hex (lower case)
 *
 * In SQL: numbers as they are, temporal values quoted, BIT / ENUM / SET as
 * numbers, strings as X'..' with the column's charset as introducer
 * (_latin1 X'..'), so that the column's collation decides the comparison.
 */

enum key_kind { KK_INT, KK_DECIMAL, KK_FLOAT, KK_TEMPORAL, KK_NUMBER, KK_ENUM, KK_BYTES };

static enum key_kind key_kind(const struct sl_mysql_column *mc)
{
	switch (mc->real_type) {
	case SL_MYSQL_TINY: case SL_MYSQL_SHORT: case SL_MYSQL_INT24: case SL_MYSQL_LONG: case SL_MYSQL_LONGLONG:
	case SL_MYSQL_YEAR:
		return KK_INT;
	case SL_MYSQL_NEWDECIMAL: case SL_MYSQL_DECIMAL:
		return KK_DECIMAL;
	case SL_MYSQL_FLOAT: case SL_MYSQL_DOUBLE:
		return KK_FLOAT;
	case SL_MYSQL_DATE: case SL_MYSQL_NEWDATE: case SL_MYSQL_DATETIME: case SL_MYSQL_DATETIME2:
	case SL_MYSQL_TIMESTAMP: case SL_MYSQL_TIMESTAMP2: case SL_MYSQL_TIME: case SL_MYSQL_TIME2:
		return KK_TEMPORAL;
	case SL_MYSQL_BIT:
		return KK_NUMBER;
	case SL_MYSQL_ENUM: case SL_MYSQL_SET:
		return KK_ENUM;
	default:
		return KK_BYTES;
	}
}

/* Whether a token of kind k is well formed (so that it goes into SQL as
 * it is). */
static bool token_ok(enum key_kind k, const char *p, size_t n)
{
	static const char *const allowed[] = {
		[KK_INT] = "-0123456789", [KK_DECIMAL] = "-.0123456789", [KK_FLOAT] = "-+.0123456789e",
		[KK_TEMPORAL] = "-: .0123456789", [KK_NUMBER] = "0123456789", [KK_ENUM] = "0123456789",
		[KK_BYTES] = "0123456789abcdef",
	};

	if (n == 0 && k != KK_BYTES)
		return false;
	if (k == KK_BYTES && n % 2)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!p[i] || !strchr(allowed[k], p[i]))
			return false;
	return true;
}

void sl_my_key_token(struct sl_buf *out, const struct sl_my_col *col, const MYSQL_BIND *b, const MYSQL_BIND *en)
{
	const struct sl_mysql_column *mc = &col->mc;
	const MYSQL_TIME *t = b->buffer;
	unsigned long len = b->length ? *b->length : 0;
	const unsigned char *p = b->buffer;

	switch (key_kind(mc)) {
	case KK_INT:
		if (b->is_unsigned)
			sl_buf_printf(out, "%" PRIu64, *(const uint64_t *)b->buffer);
		else
			sl_buf_printf(out, "%" PRId64, *(const int64_t *)b->buffer);
		return;
	case KK_DECIMAL:
		sl_buf_append(out, b->buffer, len);
		return;
	case KK_FLOAT:
		sl_buf_printf(out, "%.17e", mc->real_type == SL_MYSQL_FLOAT ? (double)*(const float *)b->buffer
									  : *(const double *)b->buffer);
		return;
	case KK_TEMPORAL:
		if (mc->real_type == SL_MYSQL_TIME || mc->real_type == SL_MYSQL_TIME2)
			sl_buf_printf(out, "%s%u:%02u:%02u.%06lu", t->neg ? "-" : "", t->day * 24 + t->hour, t->minute,
				      t->second, (unsigned long)t->second_part);
		else if (mc->real_type == SL_MYSQL_DATE || mc->real_type == SL_MYSQL_NEWDATE)
			sl_buf_printf(out, "%04u-%02u-%02u", t->year, t->month, t->day);
		else
			sl_buf_printf(out, "%04u-%02u-%02u %02u:%02u:%02u.%06lu", t->year, t->month, t->day, t->hour,
				      t->minute, t->second, (unsigned long)t->second_part);
		return;
	case KK_NUMBER: {
		uint64_t v = 0;
		for (unsigned long i = 0; i < len; i++)
			v = v << 8 | p[i];
		sl_buf_printf(out, "%" PRIu64, v);
		return;
	}
	case KK_ENUM:
		sl_buf_printf(out, "%" PRIu64, en ? *(const uint64_t *)en->buffer : 0);
		return;
	case KK_BYTES:
		for (unsigned long i = 0; i < len; i++)
			sl_buf_printf(out, "%02x", p[i]);
		return;
	}
}

int sl_my_key_columns(const struct sl_table *t, const char *const *pk_order, int npk, int *out)
{
	int n = 0, nkey = 0;

	for (int i = 0; i < t->ncols; i++)
		nkey += t->cols[i].is_key;
	for (int k = 0; k < npk; k++) {
		int found = -1;
		for (int i = 0; i < t->ncols && found < 0; i++)
			if (t->cols[i].is_key && !strcmp(t->cols[i].name, pk_order[k]))
				found = i;
		if (found < 0)
			break;
		out[n++] = found;
	}
	if (n == nkey && npk == nkey)
		return n;
	/* not the primary key (key_columns names another, or the catalog
	 * changed): the table's own order is a total order on the key too */
	n = 0;
	for (int i = 0; i < t->ncols; i++)
		if (t->cols[i].is_key)
			out[n++] = i;
	return n;
}

int sl_my_key_after(struct sl_buf *b, const struct sl_my_table *mt, const int *keys, int nkeys, const char *after)
{
	sl_buf_puts(b, "(");
	for (int i = 0; i < nkeys; i++) {
		/* (k1 > v1) OR (k1 = v1 AND k2 > v2) OR ...: a range on the key's index */
		const char *q = after;
		if (i)
			sl_buf_puts(b, " OR (");
		for (int j = 0; j <= i; j++) {
			const struct sl_my_col *col = &mt->cols[keys[j]];
			enum key_kind k = key_kind(&col->mc);
			size_t n = strcspn(q, "\t");
			if (!token_ok(k, q, n) || (j < nkeys - 1 ? q[n] != '\t' : q[n] != '\0'))
				return -1;
			if (j)
				sl_buf_puts(b, " AND ");
			sl_my_append_ident(b, col->name);
			sl_buf_puts(b, j == i ? " > " : " = ");
			switch (k) {
			case KK_TEMPORAL:
				sl_buf_printf(b, "'%.*s'", (int)n, q);
				break;
			case KK_BYTES:
				if (col->mc.fbt)
					/* MariaDB's UUID, INET4, INET6: the key holds their text */
					sl_buf_printf(b, "_latin1 X'%.*s'", (int)n, q);
				else if (!col->mc.charset || col->mc.charset->kind == SL_CS_BINARY)
					sl_buf_printf(b, "X'%.*s'", (int)n, q);
				else
					sl_buf_printf(b, "_%s X'%.*s'", !strcmp(col->mc.charset->name, "utf8mb3") ? "utf8"
						      : col->mc.charset->name, (int)n, q);
				break;
			default:
				sl_buf_append(b, q, n);
			}
			q += n + (q[n] ? 1 : 0);
		}
		sl_buf_puts(b, ")");
	}
	return sl_buf_failed(b) ? -1 : 0;
}

/* "SELECT `c1`, `c2`, ..." of mt's columns into q. */
static void select_columns(struct sl_buf *q, const struct sl_my_table *mt)
{
	sl_buf_puts(q, "SELECT ");
	for (int i = 0; i < mt->ncols; i++) {
		if (i)
			sl_buf_puts(q, ", ");
		sl_my_append_ident(q, mt->cols[i].name);
	}
}

/* The values that the conversion left as offsets into scratch (fix[i]
 * set) made pointers, once scratch holds the whole row: 0, or -1 when
 * scratch ran out of memory (err says so). */
static int fix_offsets(const struct sl_buf *scratch, struct sl_value *vals, const uint8_t *fix, int n, const char *what,
		       char *err, size_t errlen)
{
	if (sl_buf_failed(scratch)) {
		snprintf(err, errlen, "%s: out of memory", what);
		return -1;
	}
	for (int i = 0; i < n; i++)
		if (fix[i])
			vals[i].p = scratch->data + (uintptr_t)vals[i].p;
	return 0;
}

/* sl_my_snapshot_read of a table that sl_my_text_ok accepts: the text
 * protocol, row by row (mysql_use_result), each value converted where it
 * lies in the connection's buffer (valid until the next row is read). */
static int read_text(struct sl_my_snap *s, const struct sl_my_table *mt, const struct sl_table *t, sl_row_fn fn,
		     void *payload, uint64_t *rows, struct sl_mysql_row_stats *stats, char *err, size_t errlen)
{
	MYSQL_RES *res = NULL;
	struct sl_value *vals = calloc((size_t)mt->ncols, sizeof *vals);
	uint8_t *fix = calloc((size_t)mt->ncols, 1);
	struct sl_buf q, scratch;
	char what[600];
	int n = mt->ncols, rc = SL_OK;
	MYSQL_ROW row;

	*rows = 0;
	sl_buf_init(&q, 0);
	sl_buf_init(&scratch, 0);
	snprintf(what, sizeof what, "reading table \"%s\".\"%s\" in the snapshot", mt->db, mt->name);
	select_columns(&q, mt);
	sl_buf_puts(&q, " FROM ");
	sl_my_append_qualified(&q, mt->db, mt->name);
	if (sl_buf_failed(&q) || !vals || !fix) {
		snprintf(err, errlen, "%s: out of memory", what);
		rc = SL_EFAIL;
		goto out;
	}
	if (mysql_real_query(s->c, q.data, q.len) != 0 || !(res = mysql_use_result(s->c))) {
		rc = sl_my_err(err, errlen, what, s->c);
		goto out;
	}
	if ((int)mysql_num_fields(res) != n) {
		snprintf(err, errlen, "%s: %u columns, the table has %d", what, mysql_num_fields(res), n);
		rc = SL_EFAIL;
		goto out;
	}
	while ((row = mysql_fetch_row(res))) {
		const unsigned long *lens = mysql_fetch_lengths(res);
		sl_buf_reset(&scratch);
		for (int i = 0; i < n; i++) {
			int r = sl_my_text_value(&mt->cols[i], &t->cols[i], row[i], lens[i], &scratch, &s->conv, stats,
						 mt->db, mt->name, &vals[i], err, errlen);
			if (r < 0) {
				rc = r == SL_MYSQL_EVALUE ? SL_EDATA : SL_EFAIL;
				goto out;
			}
			fix[i] = r == 1;
		}
		if (fix_offsets(&scratch, vals, fix, n, what, err, errlen) < 0 || fn(payload, t, vals) < 0) {
			rc = SL_EFAIL;
			goto out;
		}
		(*rows)++;
	}
	if (mysql_errno(s->c))
		rc = sl_my_err(err, errlen, what, s->c);
out:
	if (res)
		mysql_free_result(res);
	free(vals);
	free(fix);
	sl_buf_free(&q);
	sl_buf_free(&scratch);
	return rc;
}

int sl_my_snapshot_read(struct sl_my_snap *s, const struct sl_my_table *mt, const struct sl_table *t, sl_row_fn fn,
			void *payload, uint64_t *rows, struct sl_mysql_row_stats *stats, char *err, size_t errlen)
{
	if (mt->ncols == t->ncols && sl_my_text_ok(mt) && !getenv("SLUICE_MYSQL_BINARY_BACKFILL"))
		return read_text(s, mt, t, fn, payload, rows, stats, err, errlen);
	return sl_my_snapshot_read_where(s, mt, t, NULL, fn, payload, rows, stats, err, errlen);
}

/* A fetch that truncated variable-length values: each is fetched again
 * into a buffer of its length, and *rebind set (the result binds are set
 * again before the next fetch). */
static int refetch_truncated(MYSQL_STMT *stmt, MYSQL_BIND *binds, struct rcol *rc_, int n, const char *what,
			     bool *rebind, char *err, size_t errlen)
{
	for (int i = 0; i < n; i++) {
		unsigned char *nb;

		if (!rc_[i].variable || !rc_[i].error || rc_[i].len <= rc_[i].cap)
			continue;
		if (!(nb = realloc(rc_[i].buf, rc_[i].len))) {
			snprintf(err, errlen, "%s: out of memory for a value of %lu bytes", what, rc_[i].len);
			return SL_EFAIL;
		}
		rc_[i].buf = nb;
		rc_[i].cap = rc_[i].len;
		binds[i].buffer = nb;
		binds[i].buffer_length = rc_[i].cap;
		if (mysql_stmt_fetch_column(stmt, &binds[i], (unsigned)i, 0) != 0)
			return sl_my_stmt_err(err, errlen, what, stmt);
		*rebind = true;
	}
	return SL_OK;
}

/* The fetched row's key as text, tab-separated, into how->key: 0, or -1
 * out of memory. */
static int key_text(const struct sl_my_read_how *how, const struct sl_my_table *mt, MYSQL_BIND *binds,
		    const int *enums)
{
	sl_buf_reset(how->key);
	for (int k = 0; k < how->nkeys; k++) {
		if (k)
			sl_buf_putc(how->key, '\t');
		sl_my_key_token(how->key, &mt->cols[how->keys[k]], &binds[how->keys[k]],
				enums[k] >= 0 ? &binds[enums[k]] : NULL);
	}
	return sl_buf_failed(how->key) ? -1 : 0;
}

int sl_my_snapshot_read_where(struct sl_my_snap *s, const struct sl_my_table *mt, const struct sl_table *t,
			      const struct sl_my_read_how *how, sl_row_fn fn, void *payload, uint64_t *rows,
			      struct sl_mysql_row_stats *stats, char *err, size_t errlen)
{
	MYSQL_STMT *stmt = NULL;
	MYSQL_BIND *binds = NULL;
	struct rcol *rc_ = NULL;
	struct sl_value *vals = NULL;
	uint8_t *fix = NULL;
	struct sl_buf q, scratch;
	char what[600];
	int n = mt->ncols, nx = 0, rc = SL_OK;
	int enums[64];   /* the result column of each key column's +0 (ENUM, SET), or -1 */

	*rows = 0;
	sl_buf_init(&q, 0);
	sl_buf_init(&scratch, 0);
	snprintf(what, sizeof what, "reading table \"%s\".\"%s\" in the snapshot", mt->db, mt->name);
	if (n != t->ncols) {
		snprintf(err, errlen, "%s: the table has %d columns, its version %d", what, n, t->ncols);
		return SL_EFAIL;
	}
	select_columns(&q, mt);
	if (how && how->nkeys > 64) {
		snprintf(err, errlen, "%s: a key of %d columns", what, how->nkeys);
		return SL_EFAIL;
	}
	for (int k = 0; how && k < how->nkeys; k++) {
		enums[k] = -1;
		if (key_kind(&mt->cols[how->keys[k]].mc) == KK_ENUM) {
			sl_buf_puts(&q, ", ");
			sl_my_append_ident(&q, mt->cols[how->keys[k]].name);
			sl_buf_puts(&q, " + 0");
			enums[k] = n + nx++;
		}
	}
	sl_buf_puts(&q, " FROM ");
	sl_my_append_qualified(&q, mt->db, mt->name);
	if (how && how->tail)
		sl_buf_puts(&q, how->tail);
	n += nx;
	binds = calloc((size_t)n, sizeof *binds);
	rc_ = calloc((size_t)n, sizeof *rc_);
	vals = calloc((size_t)n, sizeof *vals);
	fix = calloc((size_t)n, 1);
	if (sl_buf_failed(&q) || !binds || !rc_ || !vals || !fix) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		rc_[i].cap = 256;
		if (!(rc_[i].buf = malloc(rc_[i].cap))) {
			snprintf(err, errlen, "out of memory");
			rc = SL_EFAIL;
			goto out;
		}
		if (i < mt->ncols) {
			bind_col(&binds[i], &rc_[i], &mt->cols[i].mc);
		} else {
			memset(&binds[i], 0, sizeof binds[i]);
			binds[i].buffer_type = MYSQL_TYPE_LONGLONG;
			binds[i].buffer = &rc_[i].fixed;
			binds[i].buffer_length = sizeof rc_[i].fixed;
			binds[i].is_null = &rc_[i].is_null;
			binds[i].error = &rc_[i].error;
			binds[i].length = &rc_[i].len;
			binds[i].is_unsigned = true;
		}
	}
	if (!(stmt = mysql_stmt_init(s->c))) {
		rc = sl_my_err(err, errlen, what, s->c);
		goto out;
	}
	if (mysql_stmt_prepare(stmt, q.data, q.len) != 0 || mysql_stmt_execute(stmt) != 0 ||
	    mysql_stmt_bind_result(stmt, binds) != 0) {
		unsigned int e = mysql_stmt_errno(stmt);
		rc = sl_my_stmt_err(err, errlen, what, stmt);
		/* A column (or the table) renamed or dropped since mt was read:
		 * the caller's view of the table is older than the table. */
		if (e == ER_BAD_FIELD_ERROR || e == ER_NO_SUCH_TABLE)
			rc = SL_ESTALE;
		goto out;
	}
	for (;;) {
		int f = mysql_stmt_fetch(stmt);
		bool rebind = false;
		if (f == MYSQL_NO_DATA)
			break;
		if (f == 1) {
			rc = sl_my_stmt_err(err, errlen, what, stmt);
			goto out;
		}
		if (f == MYSQL_DATA_TRUNCATED &&
		    (rc = refetch_truncated(stmt, binds, rc_, n, what, &rebind, err, errlen)) < 0)
			goto out;
		sl_buf_reset(&scratch);
		for (int i = 0; i < mt->ncols; i++) {
			int r = sl_my_bind_value(&mt->cols[i], &t->cols[i], &binds[i], &scratch, &s->conv, stats, mt->db,
						 mt->name, &vals[i], err, errlen);
			if (r < 0) {
				rc = r == SL_MYSQL_EVALUE ? SL_EDATA : SL_EFAIL;
				goto out;
			}
			fix[i] = r == 1;
		}
		if (fix_offsets(&scratch, vals, fix, mt->ncols, what, err, errlen) < 0) {
			rc = SL_EFAIL;
			goto out;
		}
		if (how && how->key && key_text(how, mt, binds, enums) < 0) {
			snprintf(err, errlen, "%s: out of memory", what);
			rc = SL_EFAIL;
			goto out;
		}
		if (rebind && mysql_stmt_bind_result(stmt, binds) != 0) {
			rc = sl_my_stmt_err(err, errlen, what, stmt);
			goto out;
		}
		if (fn(payload, t, vals) < 0) {
			rc = SL_EFAIL;
			goto out;
		}
		(*rows)++;
	}
out:
	if (stmt)
		mysql_stmt_close(stmt);
	for (int i = 0; rc_ && i < n; i++)
		free(rc_[i].buf);
	free(rc_);
	free(binds);
	free(vals);
	free(fix);
	sl_buf_free(&q);
	sl_buf_free(&scratch);
	return rc;
}
