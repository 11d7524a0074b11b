/*
 * sources/mysql/my_source.c: the MySQL / MariaDB source behind struct
 * sl_source_ops (sources/source.h): the stream is the server's binlog, read
 * as a replica (my_dump.c) and decoded by the binlog library
 * (binlog_event.h, row_image.h); backfill reads a consistent snapshot
 * (my_backfill.c); the catalog is information_schema (my_catalog.c).
 *
 * Positions (my_internal.h): (file number, offset) with the file name and a
 * GTID in the text.  The CSN's position part is the file number in the
 * high 32 bits and the offset of the transaction's first event in the low
 * 32, so plain string order is binlog order across rotations.  A
 * transaction's records carry its own position and GTID; its end (what the
 * checkpoint keeps) carries the position after its last event and the GTID
 * state there.  A stream resumes from the checkpoint by GTID when it has a
 * GTID state (MariaDB @slave_connect_state; MySQL COM_BINLOG_DUMP_GTID),
 * otherwise from the file and offset: always at a transaction boundary.
 *
 * Transactions: an event group starts with a GTID event (or QUERY BEGIN)
 * and ends with XID, QUERY COMMIT / ROLLBACK, or, for a group flagged
 * standalone (DDL), after its statement.  BEGIN is reported with the first
 * change of a selected table; a group without one ends in a keepalive, so
 * the checkpoint moves on when the stream's tables are quiet.  XA
 * transactions are held until XA COMMIT: the prepared group's events wait
 * in a temporary file, and while one waits, end positions do not move past
 * its start (a restart reads it again).
 */
#include "sources/mysql/my_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

#define HEARTBEAT_MS 5000           /* the server's heartbeat period */
#define SILENCE_FACTOR 5 / 2        /* a connection silent for 2.5 heartbeats is dead */
#define KEEPALIVE_EVERY_MS 200      /* keepalives for groups of other tables, at most this often */
#define MAX_MAPS 64                 /* table maps kept by table id */

/* ---- positions ---- */

int64_t sl_my_file_seq(const char *file, size_t len)
{
	size_t i = len;
	int64_t v = 0;

	while (i > 0 && file[i - 1] >= '0' && file[i - 1] <= '9')
		i--;
	if (i == len || i == 0 || file[i - 1] != '.' || len - i > 9)
		return -1;
	for (; i < len; i++)
		v = v * 10 + (file[i] - '0');
	return v;
}

struct sl_position sl_my_pos(const char *file, uint64_t offset, const char *gtid, bool *dropped)
{
	struct sl_position p;
	size_t fl = strlen(file), gl = gtid ? strlen(gtid) : 0;
	int64_t seq = sl_my_file_seq(file, fl);

	memset(&p, 0, sizeof p);
	p.w[0] = seq < 0 ? 0 : (uint64_t)seq;
	p.w[1] = offset;
	if (fl >= SL_POS_TEXT_MAX)
		fl = SL_POS_TEXT_MAX - 1;
	memcpy(p.text, file, fl);
	if (dropped)
		*dropped = false;
	if (gl > 0) {
		if (fl + 1 + gl < SL_POS_TEXT_MAX) {
			p.text[fl] = '\t';
			memcpy(p.text + fl + 1, gtid, gl);
		} else if (dropped) {
			*dropped = true;
		}
	}
	return p;
}

/* A resume position may carry a "done" point after its file name
 * ("file\x1fdonefile:offset\tgtid"): where the stream had read to when
 * it resumes earlier, at a held XA transaction's start.  Every group that
 * starts before it was written already (but for XA PREPARE groups, which
 * wait for their XA COMMIT): see resume_pos. */
#define DONE_SEP '\x1f'

void sl_my_pos_file(const struct sl_position *p, char *out)
{
	size_t n = strcspn(p->text, "\t\x1f");

	memcpy(out, p->text, n);
	out[n] = '\0';
}

const char *sl_my_pos_gtid(const struct sl_position *p)
{
	const char *t = strchr(p->text, '\t');

	return t ? t + 1 : "";
}

/* The done point of p into file and *off; false when it has none. */
static bool pos_done(const struct sl_position *p, char *file, size_t filelen, uint64_t *off)
{
	const char *d = strchr(p->text, DONE_SEP), *colon;
	size_t n;

	if (!d)
		return false;
	d++;
	n = strcspn(d, "\t");
	colon = memrchr(d, ':', n);
	if (!colon || (size_t)(colon - d) >= filelen)
		return false;
	memcpy(file, d, (size_t)(colon - d));
	file[colon - d] = '\0';
	*off = strtoull(colon + 1, NULL, 10);
	return true;
}

/* p with the done point file:off after its file name (dropped if it does
 * not fit). */
static void pos_set_done(struct sl_position *p, const char *file, uint64_t off)
{
	char head[SL_POS_TEXT_MAX], gtid[SL_POS_TEXT_MAX];
	int n;

	sl_my_pos_file(p, head);
	snprintf(gtid, sizeof gtid, "%s", sl_my_pos_gtid(p));
	n = snprintf(p->text, sizeof p->text, "%s%c%s:%" PRIu64 "%s%s", head, DONE_SEP, file, off, *gtid ? "\t" : "",
		     gtid);
	if (n < 0 || (size_t)n >= sizeof p->text)
		*p = sl_my_pos(head, p->w[1], *gtid ? gtid : NULL, NULL);
}

/* The binlog places of two positions in order (their done points aside). */
static int place_compare(const struct sl_position *a, const struct sl_position *b)
{
	if (a->w[0] != b->w[0])
		return a->w[0] < b->w[0] ? -1 : 1;
	if (a->w[1] != b->w[1])
		return a->w[1] < b->w[1] ? -1 : 1;
	return 0;
}

/* Positions in binlog order; at the same place, one with a later done
 * point has read further (a held XA transaction keeps the place). */
static int my_pos_compare(const struct sl_position *a, const struct sl_position *b)
{
	char fa[SL_POS_TEXT_MAX], fb[SL_POS_TEXT_MAX];
	uint64_t oa = 0, ob = 0;
	int64_t sa = -1, sb = -1;
	int c = place_compare(a, b);

	if (c != 0)
		return c;
	if (pos_done(a, fa, sizeof fa, &oa))
		sa = sl_my_file_seq(fa, strlen(fa));
	if (pos_done(b, fb, sizeof fb, &ob))
		sb = sl_my_file_seq(fb, strlen(fb));
	if (sa != sb)
		return sa < sb ? -1 : 1;
	return oa < ob ? -1 : oa > ob ? 1 : 0;
}

static uint64_t my_pos_csn(const struct sl_position *p)
{
	return p->w[0] << 32 | (p->w[1] & 0xffffffffu);
}

static int my_pos_decode_plain(const char *text, struct sl_position *out);

/* "mb.000003:1234" or "mb.000003:1234 0-1-20", and " +mb.000003:5678"
 * after it for a done point */
static int my_pos_encode(const struct sl_position *p, char *out, size_t outlen)
{
	char file[SL_POS_TEXT_MAX];
	const char *g = sl_my_pos_gtid(p);
	int n;

	char done[SL_POS_TEXT_MAX];
	uint64_t doff = 0;
	bool has_done = pos_done(p, done, sizeof done, &doff);

	sl_my_pos_file(p, file);
	n = snprintf(out, outlen, "%s:%" PRIu64 "%s%s", file[0] ? file : "?", p->w[1], *g ? " " : "", g);
	if (n >= 0 && (size_t)n < outlen && has_done)
		n += snprintf(out + n, outlen - (size_t)n, " +%s:%" PRIu64, done, doff);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

static int my_pos_decode(const char *text, struct sl_position *out)
{
	const char *plus = strstr(text, " +");
	char head[SL_POS_TEXT_MAX * 2];

	if (plus) {
		/* "file:off [gtid] +donefile:doneoff" */
		struct sl_position d;
		if ((size_t)(plus - text) >= sizeof head)
			return -1;
		memcpy(head, text, (size_t)(plus - text));
		head[plus - text] = '\0';
		if (my_pos_decode_plain(head, out) < 0 || my_pos_decode_plain(plus + 2, &d) < 0)
			return -1;
		sl_my_pos_file(&d, head);
		pos_set_done(out, head, d.w[1]);
		return 0;
	}
	return my_pos_decode_plain(text, out);
}

static int my_pos_decode_plain(const char *text, struct sl_position *out)
{
	const char *sp = strchr(text, ' '), *colon;
	char file[SL_POS_TEXT_MAX];
	size_t hl = sp ? (size_t)(sp - text) : strlen(text);
	uint64_t off;
	char num[32];

	memset(out, 0, sizeof *out);
	/* no position (a table whose backfill was skipped, or not yet taken,
	 * has no snapshot): what my_pos_encode writes for it */
	if (!strcmp(text, "?:0"))
		return 0;
	colon = memrchr(text, ':', hl);
	if (!colon || colon == text || (size_t)(colon - text) >= sizeof file || hl - (size_t)(colon - text) - 1 >= sizeof num)
		return -1;
	memcpy(file, text, (size_t)(colon - text));
	file[colon - text] = '\0';
	memcpy(num, colon + 1, hl - (size_t)(colon - text) - 1);
	num[hl - (size_t)(colon - text) - 1] = '\0';
	if (sl_parse_u64(num, UINT32_MAX, &off) < 0 || sl_my_file_seq(file, strlen(file)) < 0)
		return -1;
	*out = sl_my_pos(file, off, sp ? sp + 1 : NULL, NULL);
	return strlen(sl_my_pos_gtid(out)) == (sp ? strlen(sp + 1) : 0) ? 0 : -1;
}

static const struct sl_meta_field my_meta[] = {
	{ "log_file", SL_META_STRING },
	{ "log_position", SL_META_LONG },
	{ "gtid", SL_META_OPT_STRING },
};

static void my_meta_values(const struct sl_position *p, struct sl_meta_value *out, char *buf, size_t buflen)
{
	size_t n = strcspn(p->text, "\t\x1f");
	const char *g = sl_my_pos_gtid(p);

	(void)buf;
	(void)buflen;
	out[0].s = p->text;
	out[0].len = n;
	out[1].i = (int64_t)p->w[1];
	out[2].s = *g ? g : NULL;
	out[2].len = strlen(g);
}

const struct sl_source_desc sl_my_desc = {
	.kind = "mysql",
	.ns_field = "database",
	.read_method_cdc = "mysql-cdc-binlog",
	.read_method_backfill = "mysql-backfill-fulldump",
	.pos_compare = my_pos_compare,
	.pos_csn = my_pos_csn,
	.pos_encode = my_pos_encode,
	.pos_decode = my_pos_decode,
	.nmeta = 3,
	.meta = my_meta,
	.meta_values = my_meta_values,
};

/* ---- the context ---- */

struct tmap {
	uint64_t table_id;
	bool used;
	struct sl_binlog_table_map tm;
	struct sl_my_table *t;          /* the selected table, or NULL: skip its rows */
	unsigned char *raw;             /* the event body it was parsed from */
	size_t rawlen, araw;
	bool wm;                        /* the watermark table: its rows are watermarks */
	bool recheck;                   /* skipped for now (its backfill holds its rows): decide again */
};

/* A prepared XA transaction, held until XA COMMIT. */
struct xa_held {
	char xid[300];                  /* canonical text of the xid */
	FILE *events;                   /* its events: u32 length + bytes each */
	struct sl_position start;       /* resume position before its group */
	struct xa_held *next;
};

struct my_src {
	const struct sl_source_config *cfg;
	const struct sl_source_stream *st;
	MYSQL *meta;
	struct sl_my_server srv;
	struct sl_my_table *tables;     /* the selected tables (owned) */
	int ntables;
	bool replay;
	int64_t heartbeat_ms, silence_ms;
	bool cascades_said;             /* warn_cascades ran (once per source context) */
	char report_host[64];
	struct sl_mysql_row_stats bf_stats;

	/* streaming */
	struct sl_my_dump *dump;
	struct sl_binlog_reader rd;
	struct sl_binlog_event ev;
	char file[SL_BL_FILE_MAX + 1];  /* the current binlog file */
	uint64_t pos;                   /* the end of the last event read in it */
	struct sl_position floor;       /* where streaming started: end positions never go below */
	char done_file[SL_BL_FILE_MAX + 1];  /* "" or the done point of the start position */
	uint64_t done_off;
	bool gtid_mode;                 /* positions carry the GTID state */
	struct sl_mariadb_gtid_pos mstate;
	struct sl_mysql_gtid_set sstate;
	char state_text[SL_POS_TEXT_MAX];
	bool warned_gtid_dropped;

	/* the open event group */
	bool in_tx, standalone, begun, skip_tx, xa_prepare, truncating;
	uint64_t tx_start;              /* offset of its first event */
	char tx_gtid[128];
	bool tx_has_mgtid, tx_has_sgtid;
	struct sl_mariadb_gtid tx_mgtid;
	unsigned char tx_sid[16];
	uint64_t tx_gno;
	int64_t tx_ts_us;
	uint64_t tx_id;
	uint32_t seq;
	struct sl_position tx_pos;
	char tx_xid[300];

	/* table maps and rows */
	struct tmap maps[MAX_MAPS];
	struct tmap *rows_map;
	struct sl_binlog_rows rows;
	bool rows_pending;
	struct sl_mysql_rowdec dec;
	struct sl_value *before, *after;
	int avals;
	struct sl_change pend[2];
	int npend, ipend;
	struct sl_my_name trunc[16];
	int ntrunc, itrunc;

	/* XA */
	struct xa_held *held;           /* prepared, waiting for XA COMMIT */
	FILE *xa_out;                   /* the events of the XA group being prepared */
	FILE *xa_in;                    /* the held events being replayed at XA COMMIT */
	unsigned char *xbuf;
	size_t axbuf;

	/* keepalives */
	int64_t last_keepalive_ms;
	bool reply_wanted;
	struct sl_position last_reported;
	bool has_reported;
	uint64_t skipped;               /* changes of tables the stream does not select */
	uint64_t schema_events;

	/* backfill while streaming */
	char wm_db[256], wm_table[256]; /* the watermark table ("" none: watermark_table not valid) */
	MYSQL *wmc;                     /* emit_watermark's connection */
	struct sl_my_snap *chunk;       /* read_chunk's connection */
	struct sl_buf wm_text;          /* the watermark of the open group, then the one returned */
	bool wm_pending;                /* the open group wrote a watermark */
	bool wm_ready;                  /* a watermark to return at the next call */
	struct sl_position wm_pos;
	bool has_returned;              /* returned: a transaction was returned (COMMIT) */
	struct sl_position returned;    /* (file number, offset) where the last one returned ends */
	struct pk_order *pks;           /* primary key orders read for read_chunk */
	int npks;

	/* what the tables' backfills hold (sl_source_hooks.covered), asked once a run */
	struct cover *covers;
	int ncovers;
	bool wm_seen;                   /* a watermark table's rows were read since the start */
	bool names_logged;              /* binlog_row_metadata = FULL: the binlog names the columns */
	struct sl_table *orphan;        /* a version retired when the stream ended (freed at close) */
	char why[600];                  /* a SCHEMA event's rebackfill */
};

/* How far a followed table's backfill holds its changes. */
struct cover {
	char *db, *name;
	enum sl_cover kind;
	struct sl_position until;
};

/* The primary key's column order of a table, read for read_chunk. */
struct pk_order {
	char *db, *name;
	char **cols;
	int n;
};

static void free_pks(struct my_src *s)
{
	for (int i = 0; i < s->npks; i++) {
		for (int k = 0; k < s->pks[i].n; k++)
			free(s->pks[i].cols[k]);
		free(s->pks[i].cols);
		free(s->pks[i].db);
		free(s->pks[i].name);
	}
	free(s->pks);
	s->pks = NULL;
	s->npks = 0;
}

/* watermark_table = "db.table" into db and table (256 bytes each): -1 when
 * it is not DATABASE.TABLE. */
static int wm_name(const char *v, char *db, char *table)
{
	const char *dot = v ? strchr(v, '.') : NULL;

	if (!dot || dot == v || !dot[1] || strchr(dot + 1, '.') || (size_t)(dot - v) >= 256 || strlen(dot + 1) >= 256)
		return -1;
	snprintf(db, 256, "%.*s", (int)(dot - v), v);
	snprintf(table, 256, "%s", dot + 1);
	return 0;
}

static bool is_wm(const struct my_src *s, const char *db, const char *name)
{
	return s->wm_db[0] && !strcmp(s->wm_db, db) && !strcmp(s->wm_table, name);
}

/* Whether the stream selects db.name: never the watermark table, whose
 * rows are watermarks, not changes. */
static bool selects(const struct my_src *s, const char *db, const char *name)
{
	return !is_wm(s, db, name) && sl_my_selects(s->st->tables, s->st->exclude_tables, db, name);
}

/* Drops table db.name (the watermark table) from a list of n tables. */
static void drop_table(struct sl_my_table *t, int *n, const char *db, const char *name)
{
	for (int i = 0; i < *n; i++) {
		if (strcmp(t[i].db, db) || strcmp(t[i].name, name))
			continue;
		sl_my_table_free(&t[i]);
		memmove(&t[i], &t[i + 1], sizeof *t * (size_t)(*n - i - 1));
		(*n)--;
		i--;
	}
}

static void free_maps(struct my_src *s)
{
	for (int i = 0; i < MAX_MAPS; i++) {
		if (s->maps[i].used)
			sl_binlog_table_map_free(&s->maps[i].tm);
		free(s->maps[i].raw);
		memset(&s->maps[i], 0, sizeof s->maps[i]);
	}
}

static void free_held(struct my_src *s)
{
	while (s->held) {
		struct xa_held *h = s->held;
		s->held = h->next;
		if (h->events)
			fclose(h->events);
		free(h);
	}
	if (s->xa_out)
		fclose(s->xa_out);
	if (s->xa_in)
		fclose(s->xa_in);
	s->xa_out = s->xa_in = NULL;
}

static void my_close(void *ctx)
{
	struct my_src *s = ctx;

	if (!s)
		return;
	if (s->skipped)
		sl_info("stream \"%s\": skipped %" PRIu64 " changes of tables that the stream does not select",
			s->st->name, s->skipped);
	sl_my_dump_close(s->dump);
	free_maps(s);
	free_held(s);
	sl_mysql_rowdec_free(&s->dec);
	sl_mariadb_gtid_pos_free(&s->mstate);
	sl_mysql_gtid_set_free(&s->sstate);
	free(s->before);
	free(s->after);
	free(s->xbuf);
	if (s->wmc)
		mysql_close(s->wmc);
	sl_my_snapshot_close(s->chunk);
	sl_buf_free(&s->wm_text);
	free_pks(s);
	for (int i = 0; i < s->ncovers; i++) {
		free(s->covers[i].db);
		free(s->covers[i].name);
	}
	free(s->covers);
	sl_table_free(s->orphan);
	if (!s->replay)
		sl_my_tables_free(s->tables, s->ntables);
	if (s->meta)
		mysql_close(s->meta);
	free(s);
}

static struct my_src *new_src(const struct sl_source_config *cfg, const struct sl_source_stream *st)
{
	struct my_src *s = calloc(1, sizeof *s);
	char host[40];

	if (!s)
		return NULL;
	s->cfg = cfg;
	s->st = st;
	s->heartbeat_ms = HEARTBEAT_MS;
	s->silence_ms = cfg && cfg->receive_timeout > 0 ? (int64_t)cfg->receive_timeout * 1000
							: HEARTBEAT_MS * SILENCE_FACTOR;
	/* dead after 2.5 heartbeat periods of silence */
	s->heartbeat_ms = s->silence_ms * 2 / 5 > 100 ? s->silence_ms * 2 / 5 : 100;
	/* heartbeat_interval asks for the server's heartbeats at least this often */
	if (st && st->heartbeat_ms > 0 && st->heartbeat_ms < s->heartbeat_ms)
		s->heartbeat_ms = st->heartbeat_ms;
	if (gethostname(host, sizeof host) != 0)
		snprintf(host, sizeof host, "?");
	host[sizeof host - 1] = '\0';
	snprintf(s->report_host, sizeof s->report_host, "sluice %.20s@%.30s", st->name, host);
	sl_mysql_rowdec_init(&s->dec);
	sl_mariadb_gtid_pos_init(&s->mstate);
	sl_mysql_gtid_set_init(&s->sstate);
	sl_buf_init(&s->wm_text, 0);
	if (wm_name(cfg ? sl_my_conf(cfg)->watermark_table : "sluice.watermarks", s->wm_db, s->wm_table) < 0)
		s->wm_db[0] = s->wm_table[0] = '\0';
	return s;
}

static int my_open(void **ctx, const struct sl_source_config *cfg, const struct sl_source_stream *st, char *err,
		   size_t errlen)
{
	struct my_src *s = new_src(cfg, st);

	*ctx = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	if (!s->wm_db[0]) {
		snprintf(err, errlen, "source \"%s\": watermark_table = \"%s\" is not DATABASE.TABLE", cfg->name,
			 sl_my_conf(cfg)->watermark_table ? sl_my_conf(cfg)->watermark_table : "");
		my_close(s);
		return SL_ECONFIG;
	}
	if (!(s->meta = sl_my_connect(cfg, 60, &s->srv, err, errlen))) {
		int rc = sl_my_err_status();
		my_close(s);
		return rc;
	}
	*ctx = s;
	return SL_OK;
}

int sl_my_source_open_replay(void **ctx, const struct sl_source_stream *st, const char *path,
			     struct sl_my_table *tables, int n, char *err, size_t errlen)
{
	struct my_src *s = new_src(NULL, st);

	*ctx = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	s->replay = true;
	s->srv.mariadb = true;
	s->tables = tables;
	s->ntables = n;
	if (sl_my_dump_open_replay(&s->dump, path, err, errlen) < 0) {
		my_close(s);
		return SL_EFAIL;
	}
	*ctx = s;
	return SL_OK;
}

/* ---- tables ---- */

static struct sl_my_table *known_table(struct my_src *s, const char *db, const char *name)
{
	for (int i = 0; i < s->ntables; i++)
		if (!strcmp(s->tables[i].db, db) && !strcmp(s->tables[i].name, name))
			return &s->tables[i];
	return NULL;
}

/* Merge mode needs a key on every table: its primary key, or else a
 * unique index on NOT NULL columns (which the server reports as PRI). */
static int check_keys(const struct sl_source_stream *st, const struct sl_my_table *t, int n, char *err, size_t errlen)
{
	for (int i = 0; i < n && st->merge; i++) {
		if (!sl_table_has_key(t[i].version)) {
			snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" has no primary key and no unique key "
				 "on NOT NULL columns, so write_mode = merge cannot mirror it (identical rows would become "
				 "one). Fix one of: add a primary key (ALTER TABLE %s.%s ADD PRIMARY KEY (...)); make a "
				 "unique key's columns NOT NULL; or use write_mode = append", st->name, t[i].db, t[i].name,
				 t[i].db, t[i].name);
			return SL_EPREREQ;
		}
	}
	return SL_OK;
}

/* The user may SELECT from every table (a missing privilege: the GRANTs). */
static int check_select(MYSQL *c, const struct sl_source_stream *st, const struct sl_source_config *cfg,
			const struct sl_my_table *t, int n, char *err, size_t errlen)
{
	struct sl_buf q, grants;
	int rc = SL_OK;

	sl_buf_init(&q, 0);
	sl_buf_init(&grants, 0);
	for (int i = 0; i < n; i++) {
		sl_buf_reset(&q);
		sl_buf_puts(&q, "SELECT 1 FROM ");
		sl_my_append_qualified(&q, t[i].db, t[i].name);
		sl_buf_puts(&q, " LIMIT 0");
		if (sl_buf_failed(&q)) {
			rc = SL_EFAIL;
			snprintf(err, errlen, "out of memory");
			break;
		}
		if (mysql_real_query(c, q.data, q.len) != 0) {
			if (mysql_errno(c) == ER_TABLEACCESS_DENIED_ERROR || mysql_errno(c) == ER_COLUMNACCESS_DENIED_ERROR) {
				sl_buf_printf(&grants, "%sGRANT SELECT ON ", grants.len ? "; " : "");
				sl_my_append_qualified(&grants, t[i].db, t[i].name);
				sl_buf_printf(&grants, " TO '%s'", cfg->user ? cfg->user : "?");
				continue;
			}
			char what[600];
			snprintf(what, sizeof what, "stream \"%s\": reading \"%s\".\"%s\"", st->name, t[i].db, t[i].name);
			rc = sl_my_err(err, errlen, what, c);
			break;
		}
		MYSQL_RES *res = mysql_store_result(c);
		if (res)
			mysql_free_result(res);
	}
	if (rc == SL_OK && grants.len) {
		snprintf(err, errlen, "stream \"%s\": user \"%s\" may not read every selected table; as an administrator "
			 "run: %s", st->name, cfg->user ? cfg->user : "?", grants.data);
		rc = SL_EPREREQ;
	}
	sl_buf_free(&q);
	sl_buf_free(&grants);
	return rc;
}

/* The ON DELETE / ON UPDATE actions of one constraint line of SHOW CREATE
 * TABLE that change the referencing rows ("ON DELETE CASCADE, ON UPDATE SET
 * NULL"), into what; false when none. */
static bool fk_actions(const char *line, char *what, size_t len)
{
	static const char *const acts[] = { "CASCADE", "SET NULL", "SET DEFAULT" };
	static const char *const ons[] = { "ON DELETE ", "ON UPDATE " };

	what[0] = '\0';
	for (int o = 0; o < 2; o++) {
		const char *p = strstr(line, ons[o]);
		if (!p)
			continue;
		p += strlen(ons[o]);
		for (int k = 0; k < 3; k++)
			if (!strncmp(p, acts[k], strlen(acts[k])))
				snprintf(what + strlen(what), len - strlen(what), "%s%s%s", what[0] ? ", " : "", ons[o],
					 acts[k]);
	}
	return what[0] != '\0';
}

/* Foreign keys whose ON DELETE / ON UPDATE action changes rows of a
 * followed table: InnoDB applies those inside the engine, and the binlog
 * has no row event for them.  Said in check (out) or logged (out NULL);
 * never an error: it is only a help.  (SHOW CREATE TABLE, which SELECT
 * allows; information_schema.REFERENTIAL_CONSTRAINTS shows a role with only
 * SELECT nothing.) */
static void warn_cascades(MYSQL *c, const struct sl_source_stream *st, const struct sl_my_table *t, int n, FILE *out)
{
	struct sl_buf q;
	char err[SL_ERRLEN];

	sl_buf_init(&q, 0);
	for (int i = 0; i < n; i++) {
		MYSQL_RES *res = NULL;
		MYSQL_ROW row;

		sl_buf_reset(&q);
		sl_buf_puts(&q, "SHOW CREATE TABLE ");
		if (sl_my_append_ident(&q, t[i].db) < 0 || sl_buf_putc(&q, '.') < 0 ||
		    sl_my_append_ident(&q, t[i].name) < 0 || sl_buf_failed(&q))
			break;
		if (sl_my_query(c, q.data, &res, err, sizeof err) < 0) {
			sl_debug("stream \"%s\": could not read the foreign keys of %s.%s: %s", st->name, t[i].db,
				 t[i].name, err);
			continue;
		}
		row = res ? mysql_fetch_row(res) : NULL;
		for (const char *line = row && row[1] ? row[1] : NULL; line && *line;) {
			const char *end = strchr(line, '\n');
			size_t ll = end ? (size_t)(end - line) : strlen(line);
			char text[1024], what[100], name[300];
			const char *q1, *q2;

			snprintf(text, sizeof text, "%.*s", (int)(ll < sizeof text ? ll : sizeof text - 1), line);
			line = end ? end + 1 : NULL;
			if (!strstr(text, "FOREIGN KEY") || !fk_actions(text, what, sizeof what))
				continue;
			/* CONSTRAINT `name` FOREIGN KEY (...) REFERENCES ... */
			q1 = strchr(text, '`');
			q2 = q1 ? strchr(q1 + 1, '`') : NULL;
			snprintf(name, sizeof name, "%.*s", q1 && q2 ? (int)(q2 - q1 - 1) : 1, q1 && q2 ? q1 + 1 : "?");
			if (out)
				fprintf(out, "stream %s: table %s.%s: warning: foreign key %s (%s) changes its rows without "
					"binlog row events; those changes do not reach the destination (doc/mysql.md, "
					"Foreign keys)\n", st->name, t[i].db, t[i].name, name, what);
			else
				sl_warn("stream \"%s\": table %s.%s: foreign key %s (%s) changes its rows without binlog "
					"row events; those changes do not reach the destination (doc/mysql.md, Foreign keys)",
					st->name, t[i].db, t[i].name, name, what);
		}
		if (res)
			mysql_free_result(res);
	}
	sl_buf_free(&q);
}

/* Whether entry e (db.table) names table t of the list. */
static bool listed(const struct sl_my_table *t, int n, const char *e)
{
	size_t dl;

	for (int i = 0; i < n; i++) {
		dl = strlen(t[i].db);
		if (!strncmp(e, t[i].db, dl) && e[dl] == '.' && !strcmp(e + dl + 1, t[i].name))
			return true;
	}
	return false;
}

/* The tables entries the user's grants leave partly invisible: the catalog
 * (information_schema) lists only the tables a user has a privilege on, so
 * a table it may not read looks like no table at all, and a glob would
 * leave it out, with its changes, without a word.  An entry is whole when
 * a global SELECT, or one on its database, covers it; otherwise an exact
 * entry the catalog does not list, and any glob, is refused with the GRANT
 * that makes it whole (exit 3).  (Nothing a user without privileges may
 * run lists such tables: SHOW TABLES and information_schema hide them, and
 * mysql.* needs privileges of its own.) */
static int check_entry_grants(MYSQL *c, const struct sl_source_stream *st, const struct sl_source_config *cfg,
			      const struct sl_my_table *t, int n, char *err, size_t errlen)
{
	const char *user = cfg->user ? cfg->user : "?";
	struct sl_buf on;
	char db[256];
	int rc = SL_OK;

	sl_buf_init(&on, 0);
	for (char *const *e = st->tables; e && *e && rc == SL_OK; e++) {
		const char *dot = strchr(*e, '.');
		bool glob = strpbrk(*e, "*?[\\") != NULL, anydb, covers = false, known = false;
		if (!dot || (size_t)(dot - *e) >= sizeof db)
			continue;
		snprintf(db, sizeof db, "%.*s", (int)(dot - *e), *e);
		anydb = strpbrk(db, "*?[\\") != NULL;
		for (char *const *k = st->known_tables; k && *k && !known; k++)
			known = !strcmp(*k, *e);
		if ((!glob && (known || listed(t, n, *e))) ||
		    (rc = sl_my_select_covers(c, anydb ? NULL : db, &covers, err, errlen)) < 0 || covers)
			continue;
		/* the GRANT that makes the entry whole */
		sl_buf_reset(&on);
		if (!glob)
			sl_my_append_qualified(&on, db, dot + 1);
		else if (!anydb) {
			sl_my_append_ident(&on, db);
			sl_buf_puts(&on, ".*");
		} else
			sl_buf_puts(&on, "*.*");
		if (sl_buf_failed(&on)) {
			snprintf(err, errlen, "out of memory");
			rc = SL_EFAIL;
		} else if (!glob) {
			snprintf(err, errlen, "stream \"%s\": user \"%s\" may not see table %s (tables entry \"%s\"): it "
				 "has no privilege on it (or the table does not exist); as an administrator run: GRANT "
				 "SELECT ON %s TO '%s'", st->name, user, on.data, *e, on.data, user);
			rc = SL_EPREREQ;
		} else {
			snprintf(err, errlen, "stream \"%s\": tables entry \"%s\" is a glob, but user \"%s\" may SELECT "
				 "only some of the tables it can match (table grants): the tables it may not read are "
				 "invisible to it and would be left out with their changes; as an administrator run: "
				 "GRANT SELECT ON %s TO '%s' (or name the tables one by one)", st->name, *e, user,
				 on.data, user);
			rc = SL_EPREREQ;
		}
	}
	sl_buf_free(&on);
	return rc;
}

/* The stream's tables: SL_ECONFIG when nothing matches. */
static int list_tables(MYSQL *c, const struct sl_my_server *srv, const struct sl_source_config *cfg,
		       const struct sl_source_stream *st, struct sl_my_table **out, int *n, char *err, size_t errlen)
{
	struct sl_table **vs = NULL;
	struct sl_buf b;
	int rc = sl_my_list_tables(c, srv->mariadb, st->tables, st->exclude_tables, NULL, NULL, true, out, n, err,
				   errlen);
	char wdb[256], wt[256];

	if (rc < 0)
		return rc;
	if (wm_name(sl_my_conf(cfg)->watermark_table, wdb, wt) == 0)
		drop_table(*out, n, wdb, wt);   /* its rows are watermarks, never changes */
	if ((rc = check_entry_grants(c, st, cfg, *out, *n, err, errlen)) < 0)
		goto fail;
	if (*n > 0 && !(vs = calloc((size_t)*n, sizeof *vs))) {
		rc = SL_EFAIL;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (int i = 0; i < *n; i++)
		vs[i] = (*out)[i].version;
	rc = sl_source_check_exact(st, cfg->name, vs, *n, err, errlen);
	free(vs);
	if (rc < 0)
		goto fail;
	if (*n == 0) {
		sl_buf_init(&b, 4096);
		for (char *const *g = st->tables; g && *g; g++)
			sl_buf_printf(&b, "%s%s", g == st->tables ? "" : ", ", *g);
		snprintf(err, errlen, "stream \"%s\": no table on source \"%s\" matches tables = %s", st->name,
			 cfg->name, b.data ? b.data : "");
		sl_buf_free(&b);
		rc = SL_ECONFIG;
		goto fail;
	}
	for (int i = 0; i < *n; i++) {
		/* Its binlog rows carry the history (a DELETE is an UPDATE of
		 * row_end, an UPDATE also writes the old row as history) and the
		 * hidden row_start and row_end: read as a table, the mirror would
		 * be wrong. */
		if ((*out)[i].versioned) {
			snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" is system-versioned (WITH SYSTEM "
				 "VERSIONING), which sluice does not read: its binlog rows carry the table's history. "
				 "Leave it out of the stream (exclude_tables = %s.%s)", st->name, (*out)[i].db,
				 (*out)[i].name, (*out)[i].db, (*out)[i].name);
			rc = SL_EPREREQ;
			goto fail;
		}
	}
	if ((rc = check_select(c, st, cfg, *out, *n, err, errlen)) < 0 || (rc = check_keys(st, *out, *n, err, errlen)) < 0)
		goto fail;
	return SL_OK;
fail:
	sl_my_tables_free(*out, *n);
	*out = NULL;
	*n = 0;
	return rc;
}

/* Whether the binlog names the columns (binlog_row_metadata = FULL, MySQL
 * 8.0.1+ and MariaDB 10.5+), into s->names_logged. */
static int names_logged(struct my_src *s, char *err, size_t errlen)
{
	char v[64];
	bool found = false;
	int rc;

	s->names_logged = false;
	if (s->replay || (s->srv.mariadb && s->srv.version < 100500) || (!s->srv.mariadb && s->srv.version < 80001))
		return SL_OK;
	if ((rc = sl_my_query_value(s->meta, "SELECT @@global.binlog_row_metadata", v, sizeof v, &found, err,
				    errlen)) < 0)
		return rc;
	s->names_logged = found && !strcasecmp(v, "FULL");
	return SL_OK;
}

static int my_tables(void *ctx, struct sl_table ***out, int *n, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	int rc;

	*out = NULL;
	*n = 0;
	sl_my_tables_free(s->tables, s->ntables);
	s->tables = NULL;
	s->ntables = 0;
	if ((rc = list_tables(s->meta, &s->srv, s->cfg, s->st, &s->tables, &s->ntables, err, errlen)) < 0)
		return rc;
	if (!s->cascades_said) {
		warn_cascades(s->meta, s->st, s->tables, s->ntables, NULL);
		s->cascades_said = true;
	}
	if ((rc = names_logged(s, err, errlen)) < 0)
		return rc;
	if (!(*out = calloc((size_t)s->ntables, sizeof **out)))
		goto oom;
	for (int i = 0; i < s->ntables; i++) {
		if (!((*out)[i] = sl_my_table_copy(s->tables[i].version)))
			goto oom;
		if (s->names_logged)
			(*out)[i]->layout = 0;   /* the binlog names the columns: any layout reads */
		(*n)++;
	}
	return SL_OK;
oom:
	for (int i = 0; i < *n; i++)
		sl_table_free((*out)[i]);
	free(*out);
	*out = NULL;
	*n = 0;
	snprintf(err, errlen, "out of memory");
	return SL_EFAIL;
}

/* ---- positions on the server ---- */

/* The message for a position that cannot be resumed: what happened and
 * the one command that recovers. */
static int lost(const struct sl_source_stream *st, const struct sl_source_config *cfg,
		const struct sl_source_resume *resume, const struct sl_position *p, const char *why, char *err,
		size_t errlen)
{
	struct sl_buf b;
	char pos[2 * SL_POS_TEXT_MAX];

	sl_buf_init(&b, 0);
	if (my_pos_encode(p, pos, sizeof pos) < 0)
		snprintf(pos, sizeof pos, "?");
	sl_buf_printf(&b, "stream \"%s\": the binlog position %s%s%s%s cannot be resumed on source \"%s\": %s; changes "
		      "after it may be gone, and sluice will not skip them silently. To recover, run `", st->name, pos,
		      resume && resume->checkpoint_path ? " of checkpoint \"" : "",
		      resume && resume->checkpoint_path ? resume->checkpoint_path : "",
		      resume && resume->checkpoint_path ? "\"" : "", cfg ? cfg->name : "?", why);
	sl_source_backfill_command(&b, st);
	sl_buf_puts(&b, "`, then start sluice again: it takes a new position and backfills every table");
	snprintf(err, errlen, "%s", sl_buf_failed(&b) ? "out of memory" : b.data);
	sl_buf_free(&b);
	return SL_ELOST;
}

/* The MariaDB GTID list at the start of the oldest binlog: the GTIDs before
 * it were purged. */
static int oldest_gtid_list(MYSQL *c, const char *file, char *out, size_t outlen, char *err, size_t errlen)
{
	struct sl_buf q;
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	int rc;

	out[0] = '\0';
	sl_buf_init(&q, 0);
	sl_buf_puts(&q, "SHOW BINLOG EVENTS IN ");
	sl_my_append_literal(&q, file);
	sl_buf_puts(&q, " LIMIT 5");
	rc = sl_buf_failed(&q) ? SL_EFAIL : sl_my_query(c, q.data, &res, err, errlen);
	sl_buf_free(&q);
	if (rc < 0)
		return rc;
	while (res && (row = mysql_fetch_row(res))) {
		if (row[2] && !strcmp(row[2], "Gtid_list") && row[5]) {
			const char *a = strchr(row[5], '['), *e = a ? strchr(a, ']') : NULL;
			if (a && e)
				snprintf(out, outlen, "%.*s", (int)(e - a - 1), a + 1);
		}
	}
	if (res)
		mysql_free_result(res);
	return SL_OK;
}

/* Whether the server still has position p: SL_OK, SL_ELOST with the
 * message, or another failure. */
static int judge_position(MYSQL *c, const struct sl_my_server *srv, const struct sl_source_config *cfg,
			  const struct sl_source_stream *st, const struct sl_source_resume *resume,
			  const struct sl_position *p, char *err, size_t errlen)
{
	struct sl_my_binlog_file *logs = NULL;
	char file[SL_POS_TEXT_MAX], why[1600], list[256];
	const char *gtid = sl_my_pos_gtid(p);
	int n = 0, rc, found = -1;

	sl_my_pos_file(p, file);
	if ((rc = sl_my_binlogs(c, &logs, &n, err, errlen)) < 0)
		return rc;
	for (int i = 0; i < n; i++)
		if (!strcmp(logs[i].name, file))
			found = i;
	if (*gtid) {
		/* A GTID resume needs the GTIDs after the state, wherever they are. */
		if (srv->mariadb && n > 0) {
			struct sl_mariadb_gtid_pos have, purged;
			sl_mariadb_gtid_pos_init(&have);
			sl_mariadb_gtid_pos_init(&purged);
			rc = oldest_gtid_list(c, logs[0].name, list, sizeof list, err, errlen);
			if (rc == SL_OK && list[0] &&
			    sl_mariadb_gtid_pos_parse(&have, gtid, strlen(gtid), why, sizeof why) == 0 &&
			    sl_mariadb_gtid_pos_parse(&purged, list, strlen(list), why, sizeof why) == 0) {
				for (size_t i = 0; i < purged.n && rc == SL_OK; i++) {
					const struct sl_mariadb_gtid *g = sl_mariadb_gtid_pos_get(&have, purged.v[i].domain);
					if (!g || g->seq < purged.v[i].seq) {
						snprintf(why, sizeof why, "the binlogs holding the GTIDs after %s were purged (the "
							 "oldest binlog, %s, starts after %s)", gtid, logs[0].name, list);
						rc = lost(st, cfg, resume, p, why, err, errlen);
					}
				}
			}
			sl_mariadb_gtid_pos_free(&have);
			sl_mariadb_gtid_pos_free(&purged);
		} else if (!srv->mariadb) {
			char purged_text[4096];
			struct sl_mysql_gtid_set have, purged;
			sl_mysql_gtid_set_init(&have);
			sl_mysql_gtid_set_init(&purged);
			rc = sl_my_query_value(c, "SELECT @@global.gtid_purged", purged_text, sizeof purged_text, NULL, err,
					       errlen);
			if (rc == SL_OK && sl_mysql_gtid_set_parse(&have, gtid, strlen(gtid), why, sizeof why) == 0 &&
			    sl_mysql_gtid_set_parse(&purged, purged_text, strlen(purged_text), why, sizeof why) == 0 &&
			    !sl_mysql_gtid_set_is_subset(&purged, &have)) {
				snprintf(why, sizeof why, "GTIDs it has not read were purged (gtid_purged is %.300s)", purged_text);
				rc = lost(st, cfg, resume, p, why, err, errlen);
			}
			sl_mysql_gtid_set_free(&have);
			sl_mysql_gtid_set_free(&purged);
		}
		free(logs);
		return rc;
	}
	if (found < 0) {
		if (n > 0 && sl_my_file_seq(file, strlen(file)) < sl_my_file_seq(logs[0].name, strlen(logs[0].name)))
			snprintf(why, sizeof why, "binlog file %s was purged (the oldest binlog is now %s)", file, logs[0].name);
		else if (n > 0)
			snprintf(why, sizeof why, "the server has no binlog file %s (its binlogs are %s to %s: another server, "
				 "or one restored from a backup)", file, logs[0].name, logs[n - 1].name);
		else
			snprintf(why, sizeof why, "the server keeps no binlog file");
		rc = lost(st, cfg, resume, p, why, err, errlen);
	} else if (p->w[1] > logs[found].size) {
		snprintf(why, sizeof why, "binlog file %s ends at %" PRIu64 ", before the position", file, logs[found].size);
		rc = lost(st, cfg, resume, p, why, err, errlen);
	}
	free(logs);
	return rc;
}

static int my_prepare(void *ctx, const struct sl_source_resume *resume, struct sl_source_plan *plan, char *err,
		      size_t errlen)
{
	struct my_src *s = ctx;
	int rc;

	memset(plan, 0, sizeof *plan);
	if ((rc = sl_my_check_prereqs(s->meta, &s->srv, s->cfg, s->st, NULL, err, errlen)) < 0)
		return rc;
	plan->status_interval_ms = s->heartbeat_ms;
	if (!resume->has_position || resume->reset) {
		plan->need_position = true;
		return SL_OK;
	}
	return judge_position(s->meta, &s->srv, s->cfg, s->st, resume, &resume->durable, err, errlen);
}

static int my_current_position(void *ctx, struct sl_position *out, char *err, size_t errlen)
{
	struct my_src *s = ctx;

	return sl_my_head(s->meta, &s->srv, out, err, errlen);
}

/* ---- snapshots ---- */

static int my_snapshot(void *ctx, bool create, void **snap, struct sl_snapshot_info *info, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	struct sl_my_snap *sn;
	int rc;

	(void)create;  /* the stream's position is only the checkpoint's: nothing to create on the server */
	*snap = NULL;
	if ((rc = sl_my_snapshot_open(&sn, s->cfg, s->st, &s->srv, info, err, errlen)) < 0)
		return rc;
	*snap = sn;
	return SL_OK;
}

static int my_snapshot_read(void *ctx, void *snap, const struct sl_table *t, sl_row_fn fn, void *payload,
			    uint64_t *rows, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	const struct sl_my_table *mt = known_table(s, t->ns, t->name);

	if (!mt) {
		snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" is not one of the stream's tables", s->st->name,
			 t->ns, t->name);
		return SL_EFAIL;
	}
	return sl_my_snapshot_read(snap, mt, t, fn, payload, rows, &s->bf_stats, err, errlen);
}

static void my_snapshot_close(void *ctx, void *snap)
{
	(void)ctx;
	sl_my_snapshot_close(snap);
}

/* ---- streaming ---- */

static void state_text_update(struct my_src *s)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	if (s->srv.mariadb)
		sl_mariadb_gtid_pos_format(&s->mstate, &b);
	else
		sl_mysql_gtid_set_format(&s->sstate, &b);
	snprintf(s->state_text, sizeof s->state_text, "%s", sl_buf_failed(&b) || !b.data ? "" : b.data);
	if (!sl_buf_failed(&b) && b.len >= sizeof s->state_text) {
		s->state_text[0] = '\0';
		if (!s->warned_gtid_dropped) {
			s->warned_gtid_dropped = true;
			sl_warn("stream \"%s\": the GTID state is too long to keep (%zu bytes): the stream resumes by binlog "
				"file and offset", s->st->name, b.len);
		}
	}
	sl_buf_free(&b);
}

/* Whether a group starting at (file number seq, offset) lies before the
 * start position's done point: it was written before the restart. */
static bool before_done(const struct my_src *s, int64_t seq, uint64_t offset)
{
	int64_t dseq;

	if (!s->done_file[0])
		return false;
	dseq = sl_my_file_seq(s->done_file, strlen(s->done_file));
	return seq < dseq || (seq == dseq && offset < s->done_off);
}

/* The position after everything read so far, for resuming.  While a
 * prepared XA transaction is held, that is its group's start, so that a
 * restart reads it again; the point read to goes with it as the done
 * point, and the groups before that point are not written again. */
static struct sl_position resume_pos(struct my_src *s)
{
	struct sl_position p = sl_my_pos(s->file, s->pos, s->gtid_mode ? s->state_text : NULL, NULL);
	bool ahead = before_done(s, sl_my_file_seq(s->file, strlen(s->file)), s->pos), back = false;

	if (s->held) {
		struct xa_held *h = s->held;
		for (struct xa_held *x = s->held; x; x = x->next)
			if (my_pos_compare(&x->start, &h->start) < 0)
				h = x;
		if (my_pos_compare(&h->start, &p) < 0) {
			p = h->start;
			back = true;
		}
	}
	if (place_compare(&p, &s->floor) < 0) {
		/* a GTID resume restarts at a file's beginning: never report less than the start */
		char file[SL_POS_TEXT_MAX];
		sl_my_pos_file(&s->floor, file);
		p = sl_my_pos(file, s->floor.w[1], s->gtid_mode ? s->state_text : NULL, NULL);
	}
	if (ahead)
		pos_set_done(&p, s->done_file, s->done_off);  /* still reading again what was written */
	else if (back)
		pos_set_done(&p, s->file, s->pos);
	return p;
}

/* Another replica registered with the stream's server_id (SHOW SLAVE HOSTS,
 * when the user may run it): connecting would end that one's dump, and it
 * would end ours, over and over.  An entry that is this stream's own (an
 * agent killed a moment ago, whose connection the server has not dropped
 * yet) is no obstacle. */
static int server_id_free(struct my_src *s, char *err, size_t errlen)
{
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	char e2[SL_ERRLEN];
	int rc = SL_OK;

	if (sl_my_query(s->meta, "SHOW SLAVE HOSTS", &res, e2, sizeof e2) < 0) {
		sl_debug("stream \"%s\": cannot list the server's replicas: %s", s->st->name, e2);
		return SL_OK;
	}
	while (res && (row = mysql_fetch_row(res)) && rc == SL_OK) {
		if (!row[0] || strtoul(row[0], NULL, 10) != sl_my_conf(s->cfg)->server_id)
			continue;
		if (row[1] && !strcmp(row[1], s->report_host))
			continue;
		snprintf(err, errlen, "stream \"%s\": another replica (\"%s\") is connected to source \"%s\" with "
			 "server_id = %" PRIu32 "; each stream needs a server_id of its own (two replicas with one "
			 "server_id end each other's connection)", s->st->name, row[1] ? row[1] : "", s->cfg->name,
			 sl_my_conf(s->cfg)->server_id);
		rc = SL_ECONFIG;
	}
	if (res)
		mysql_free_result(res);
	return rc;
}

static int my_start(void *ctx, const struct sl_position *from, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	struct sl_my_dump_opts o;
	const char *gtid = sl_my_pos_gtid(from);
	char file[SL_POS_TEXT_MAX];
	int rc;

	sl_my_pos_file(from, file);
	snprintf(s->file, sizeof s->file, "%s", file);
	s->pos = from->w[1];
	s->floor = *from;
	if (!pos_done(from, s->done_file, sizeof s->done_file, &s->done_off))
		s->done_file[0] = '\0';
	s->gtid_mode = *gtid != '\0';
	sl_mariadb_gtid_pos_clear(&s->mstate);
	sl_mysql_gtid_set_clear(&s->sstate);
	if (s->gtid_mode) {
		char why[256];
		rc = s->srv.mariadb ? sl_mariadb_gtid_pos_parse(&s->mstate, gtid, strlen(gtid), why, sizeof why)
				    : sl_mysql_gtid_set_parse(&s->sstate, gtid, strlen(gtid), why, sizeof why);
		if (rc < 0) {
			snprintf(err, errlen, "stream \"%s\": the checkpoint's GTID state \"%s\" is not valid: %s",
				 s->st->name, gtid, why);
			return SL_EFAIL;
		}
		state_text_update(s);
	}
	/* the dump's first events come before its FORMAT_DESCRIPTION, with the
	 * checksum the session agreed on */
	sl_binlog_reader_init(&s->rd, sl_my_dump_checksum(s->dump), s->file);
	if (s->replay)
		return SL_OK;
	if ((rc = server_id_free(s, err, errlen)) < 0)
		return rc;
	memset(&o, 0, sizeof o);
	o.server_id = sl_my_conf(s->cfg)->server_id;
	o.report_host = s->report_host;
	o.file = file;
	o.offset = from->w[1];
	o.gtid = s->gtid_mode ? gtid : NULL;
	o.heartbeat_ms = s->heartbeat_ms;
	sl_my_dump_close(s->dump);
	s->dump = NULL;
	rc = sl_my_dump_open(&s->dump, s->cfg, &s->srv, &o, s->silence_ms, err, errlen);
	if (rc == SL_OK)
		sl_binlog_reader_init(&s->rd, sl_my_dump_checksum(s->dump), s->file);
	if (rc == SL_ELOST) {
		char why[SL_ERRLEN];
		snprintf(why, sizeof why, "the server refused it (%s)", err);
		return lost(s->st, s->cfg, NULL, from, why, err, errlen);
	}
	return rc;
}

/* Where the current event is, for messages: "mb.000002:1234". */
static const char *here(const struct my_src *s, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%" PRIu64, s->file, s->ev.start ? s->ev.start : s->pos);
	return buf;
}

static struct tmap *map_by_id(struct my_src *s, uint64_t id)
{
	for (int i = 0; i < MAX_MAPS; i++)
		if (s->maps[i].used && s->maps[i].table_id == id)
			return &s->maps[i];
	return NULL;
}

static int grow_vals(struct my_src *s, int n)
{
	if (n <= s->avals)
		return 0;
	struct sl_value *b = realloc(s->before, sizeof *b * (size_t)n), *a;
	if (!b)
		return -1;
	s->before = b;
	if (!(a = realloc(s->after, sizeof *a * (size_t)n)))
		return -1;
	s->after = a;
	s->avals = n;
	return 0;
}

/* A new version for table t from the catalog (or from the map when the
 * catalog no longer describes what the binlog holds and the map names its
 * columns).  Returns 1 with *retired set when the version changed, 0 when
 * not, or a failure. */
/* The `sluice backfill` that reads table t again, for messages. */
static void backfill_hint(const struct my_src *s, const struct sl_my_table *t, char *out, size_t outlen)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_put_backfill_command(&b, s->st->config_path, s->st->name, t ? t->db : NULL, t ? t->name : NULL);
	snprintf(out, outlen, "%s", sl_buf_failed(&b) ? "sluice backfill" : b.data);
	sl_buf_free(&b);
}

/* 1 when the changes of t in the open group are in its backfill (the
 * source skips them), 0 when not, or a failure.  The agent is asked once
 * a run, at the first need. */
static int covered(struct my_src *s, const struct sl_my_table *t, char *err, size_t errlen)
{
	struct cover *c = NULL;
	struct sl_position at;
	int rc;

	for (int i = 0; i < s->ncovers && !c; i++)
		if (!strcmp(s->covers[i].db, t->db) && !strcmp(s->covers[i].name, t->name))
			c = &s->covers[i];
	if (!c) {
		struct cover *g = realloc(s->covers, (size_t)(s->ncovers + 1) * sizeof *g);
		if (!g) {
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		s->covers = g;
		c = &g[s->ncovers];
		memset(c, 0, sizeof *c);
		c->db = strdup(t->db);
		c->name = strdup(t->name);
		if (!c->db || !c->name) {
			free(c->db);
			free(c->name);
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		s->ncovers++;
		rc = s->st->hooks && s->st->hooks->covered
			? s->st->hooks->covered(s->st->hooks->payload, t->db, t->name, &c->until, err, errlen)
			: SL_COVER_NONE;
		if (rc < 0)
			return rc;
		c->kind = (enum sl_cover)rc;
	}
	at = sl_my_pos(s->file, s->in_tx ? s->tx_start : s->ev.start, NULL, NULL);
	switch (c->kind) {
	case SL_COVER_UNTIL:
		return place_compare(&at, &c->until) < 0;
	case SL_COVER_FIRST_WATERMARK:
		return !s->wm_seen;
	case SL_COVER_NONE:
		break;
	}
	return 0;
}

/* The layout of t's rows at the current event is unknown (why): t is
 * backfilled again, behind a marker, after this point.  SL_ERESTART when
 * the agent has asked for it (the restarted stream skips t's events up to
 * the backfill, sl_source_hooks.covered); SL_EPREREQ with the command to
 * run when it cannot; or a failure. */
static int layout_unknown(struct my_src *s, const struct sl_my_table *t, const char *why, char *err,
			  size_t errlen)
{
	struct sl_position at = sl_my_pos(s->file, s->ev.start, NULL, NULL);
	char at_text[600], hint[1200];
	int rc = 0;

	here(s, at_text, sizeof at_text);
	backfill_hint(s, t, hint, sizeof hint);
	if (s->st->hooks && s->st->hooks->replaced &&
	    (rc = s->st->hooks->replaced(s->st->hooks->payload, t->db, t->name, &at, true, err, errlen)) < 0)
		return rc;
	if (rc > 0) {
		sl_warn("stream \"%s\": at %s, table \"%s\".\"%s\": %s, and the binlog does not name the columns "
			"(binlog_row_metadata is not FULL), so its rows there cannot be read: backfilling it again",
			s->st->name, at_text, t->db, t->name, why);
		snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" is backfilled again (%s)", s->st->name,
			 t->db, t->name, why);
		return SL_ERESTART;
	}
	snprintf(err, errlen, "stream \"%s\": at %s, table \"%s\".\"%s\": %s, and the binlog does not name the "
		 "columns (binlog_row_metadata is not FULL), so its rows there cannot be read; run `%s`", s->st->name,
		 at_text, t->db, t->name, why, hint);
	return SL_EPREREQ;
}

static int redescribe(struct my_src *s, struct sl_my_table *t, const struct sl_binlog_table_map *tm,
		      struct sl_table **retired, char *err, size_t errlen)
{
	struct sl_my_table *fresh = NULL;
	int n = 0, rc;
	char why[300], at[600];

	*retired = NULL;
	why[0] = '\0';
	if (s->replay) {
		n = 0;
	} else if ((rc = sl_my_list_tables(s->meta, s->srv.mariadb, (char *const[]){ "*", NULL }, NULL, t->db, t->name,
					   true, &fresh, &n, err, errlen)) < 0) {
		return rc;
	}
	if (n == 1 && fresh[0].versioned) {
		/* ALTER TABLE ... ADD SYSTEM VERSIONING: see list_tables */
		snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" became system-versioned (ADD SYSTEM "
			 "VERSIONING), which sluice does not read: its binlog rows carry the table's history. Leave it "
			 "out of the stream (exclude_tables = %s.%s)", s->st->name, t->db, t->name, t->db, t->name);
		sl_my_tables_free(fresh, n);
		return SL_EPREREQ;
	}
	if (tm && n == 1 && sl_my_map_match(tm, &fresh[0], why, sizeof why) == SL_MY_PREFIX && !tm->has_names) {
		/* a column was added since: without names in the binlog, the
		 * catalog's first columns are the best description */
		while (fresh[0].ncols > (int)tm->ncols) {
			struct sl_my_table *f = &fresh[0];
			struct sl_my_col *c = &f->cols[--f->ncols];
			free(c->name);
			for (uint32_t k = 0; k < c->nvstore; k++)
				free((char *)c->vstore[k].p);
			free(c->vstore);
		}
		if ((rc = sl_my_table_build(&fresh[0], err, errlen)) < 0) {
			sl_my_tables_free(fresh, n);
			return rc;
		}
	}
	if (tm && n == 1 && sl_my_map_match(tm, &fresh[0], why, sizeof why) != SL_MY_MATCH)
		n = -1;  /* the catalog is ahead of the binlog */
	if (n != 1 && tm) {
		struct sl_my_table from_map;
		if (!tm->has_names) {
			sl_my_tables_free(fresh, n < 0 ? 1 : n);
			snprintf(err, errlen, "stream \"%s\": at %s, table \"%s\".\"%s\" has columns that the catalog no "
				 "longer describes (%s; it changed again since), and binlog_row_metadata is not FULL, so "
				 "its columns cannot be named. Set binlog_row_metadata=FULL on the server; then run `sluice "
				 "backfill` for the stream to start over from a new position", s->st->name,
				 here(s, at, sizeof at), t->db, t->name, why[0] ? why : "it no longer exists");
			return SL_EDATA;
		}
		if ((rc = sl_my_table_from_map(&from_map, tm, t, err, errlen)) < 0) {
			sl_my_tables_free(fresh, n < 0 ? 1 : n);
			return rc;
		}
		sl_my_tables_free(fresh, n < 0 ? 1 : n);
		fresh = calloc(1, sizeof *fresh);
		if (!fresh) {
			sl_my_table_free(&from_map);
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		fresh[0] = from_map;
		n = 1;
	}
	if (n != 1) {
		sl_my_tables_free(fresh, n);
		return 0;
	}
	/* the maps that completed their columns from the old description */
	for (int k = 0; k < MAX_MAPS; k++)
		if (s->maps[k].t == t && &s->maps[k].tm != tm)
			s->maps[k].rawlen = 0;
	if (t->version && sl_table_same_columns(t->version, fresh[0].version)) {
		/* the same output columns; keep the description (charsets, strings)
		 * fresh, and say when the binlog's layout of them changed */
		struct sl_table *v = t->version;
		bool moved = v->layout != fresh[0].version->layout;
		v->layout = fresh[0].version->layout;
		t->version = NULL;
		sl_table_free(fresh[0].version);
		fresh[0].version = NULL;
		sl_my_table_free(t);
		*t = fresh[0];
		t->version = v;
		free(fresh);
		return moved ? 2 : 0;
	}
	*retired = t->version;
	t->version = NULL;
	sl_my_table_free(t);
	*t = fresh[0];
	free(fresh);
	s->schema_events++;
	return 1;
}

/* A table the stream selects has rows in the binlog but the catalog does
 * not show it: dropped since, or invisible to a user that may not read it
 * (its grants changed since the start, which checked them).  Without a
 * SELECT grant on its database it is the latter as far as sluice can
 * tell: exit 3 with the GRANT, rather than leave its changes out. */
static int unseen_table(struct my_src *s, const char *db, const char *table, char *err, size_t errlen)
{
	struct sl_buf on;
	bool covers = false;
	char at[600];
	int rc;

	for (char *const *e = s->st->tables; e && *e; e++) {
		size_t dl = strlen(db);
		if (!strpbrk(*e, "*?[\\") && !strncmp(*e, db, dl) && (*e)[dl] == '.' && !strcmp(*e + dl + 1, table))
			return SL_OK;  /* named: its grant was checked at the start; it was dropped since */
	}
	if ((rc = sl_my_select_covers(s->meta, db, &covers, err, errlen)) < 0 || covers)
		return rc;
	sl_buf_init(&on, 0);
	sl_my_append_qualified(&on, db, table);
	snprintf(err, errlen, "stream \"%s\": at %s, table %s, which tables selects, has changes but user \"%s\" may "
		 "not see it (it has no privilege on it, or the table was dropped since); as an administrator run: "
		 "GRANT SELECT ON %s TO '%s' (or leave it out: exclude_tables = %s.%s)", s->st->name,
		 here(s, at, sizeof at), sl_buf_failed(&on) ? table : on.data, s->cfg->user ? s->cfg->user : "?",
		 sl_buf_failed(&on) ? table : on.data, s->cfg->user ? s->cfg->user : "?", db, table);
	sl_buf_free(&on);
	return SL_EPREREQ;
}

/* A TABLE_MAP: which table it maps, whether the stream follows it, and
 * whether its columns are still the version's.  Returns 1 with a schema
 * event in ev, 0, or a failure. */
static int on_table_map(struct my_src *s, struct sl_event *ev, char *err, size_t errlen)
{
	const struct sl_binlog_event *e = &s->ev;
	uint64_t id = 0;
	struct tmap *m;
	struct sl_my_table *t;
	struct sl_table *retired = NULL;
	char why[300], at[600];
	int rc = 0, slot = -1;

	/* the table id: 6 bytes (or 4) at the start of the body */
	if (e->body_len < 6)
		return SL_OK;
	for (int i = 5; i >= 0; i--)
		id = id << 8 | e->body[i];
	m = map_by_id(s, id);
	if (m && !m->recheck && m->rawlen == e->body_len && !memcmp(m->raw, e->body, e->body_len))
		return SL_OK;   /* the same map as before: the same decision */
	if (!m) {
		for (int i = 0; i < MAX_MAPS && slot < 0; i++)
			if (!s->maps[i].used)
				slot = i;
		if (slot < 0) {
			/* evict the oldest: table ids only grow */
			slot = 0;
			for (int i = 1; i < MAX_MAPS; i++)
				if (s->maps[i].table_id < s->maps[slot].table_id)
					slot = i;
		}
		m = &s->maps[slot];
		if (!m->used)
			sl_binlog_table_map_init(&m->tm);
		m->used = true;
	}
	m->rawlen = 0;
	m->t = NULL;
	m->recheck = false;
	if (sl_binlog_table_map_parse(&m->tm, &s->rd, e, err, errlen) < 0) {
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, " (at %s)", here(s, at, sizeof at));
		return SL_EFAIL;
	}
	m->table_id = m->tm.table_id;
	if (e->body_len > m->araw) {
		unsigned char *r = realloc(m->raw, e->body_len);
		if (!r) {
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		m->raw = r;
		m->araw = e->body_len;
	}
	memcpy(m->raw, e->body, e->body_len);
	m->wm = is_wm(s, m->tm.db, m->tm.table);
	if (m->wm) {
		s->wm_seen = true;
		m->rawlen = e->body_len;
		return SL_OK;
	}
	t = known_table(s, m->tm.db, m->tm.table);
	if (!t) {
		if (!s->replay && selects(s, m->tm.db, m->tm.table)) {
			/* a table the stream selects but does not know: created since */
			struct sl_my_table *now = NULL;
			int n = 0;
			if ((rc = sl_my_list_tables(s->meta, s->srv.mariadb, (char *const[]){ "*", NULL }, NULL, m->tm.db,
						    m->tm.table, false, &now, &n, err, errlen)) < 0)
				return rc;
			sl_my_tables_free(now, n);
			if (n > 0) {
				snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" is new", s->st->name, m->tm.db,
					 m->tm.table);
				return SL_ERESTART;
			}
			if ((rc = unseen_table(s, m->tm.db, m->tm.table, err, errlen)) < 0)
				return rc;
		}
		m->rawlen = e->body_len;
		return SL_OK;
	}
	/* Rows the table's backfill holds are skipped, whatever their
	 * layout: the same map decides again next time, once past the
	 * backfill. */
	if ((rc = covered(s, t, err, errlen)) != 0) {
		m->recheck = rc > 0;
		m->rawlen = rc > 0 ? e->body_len : 0;
		return rc < 0 ? rc : SL_OK;
	}
	s->names_logged = m->tm.has_names;
	switch (sl_my_map_match(&m->tm, t, why, sizeof why)) {
	case SL_MY_MATCH:
		break;
	case SL_MY_PREFIX:
	case SL_MY_DIFFERENT:
		/* Without names, the columns sluice knows are those of the last
		 * DDL it read live: other ones make the layout unknown. */
		if (!m->tm.has_names && !s->replay) {
			char what[400];
			snprintf(what, sizeof what, "its rows are not laid out as the columns sluice knows (%s)", why);
			return layout_unknown(s, t, what, err, errlen);
		}
		/* The binlog's columns are not the version's: describe again. */
		rc = redescribe(s, t, &m->tm, &retired, err, errlen);
		if (rc < 0)
			return rc;
		if (sl_my_map_match(&m->tm, t, why, sizeof why) != SL_MY_MATCH) {
			sl_table_free(retired);
			snprintf(err, errlen, "stream \"%s\": at %s, the rows of table \"%s\".\"%s\" do not match its "
				 "columns: %s", s->st->name, here(s, at, sizeof at), t->db, t->name, why);
			return SL_EDATA;
		}
		break;
	}
	sl_my_map_complete(&m->tm, t);
	m->t = t;
	m->rawlen = e->body_len;
	if (grow_vals(s, t->ncols) < 0) {
		sl_table_free(retired);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	if (rc > 0 || retired) {
		ev->kind = SL_EV_SCHEMA;
		ev->table = t->version;
		ev->changed = rc != 2;
		ev->retired = retired;
		return 1;
	}
	return SL_OK;
}

static bool key_equal(const struct sl_value *a, const struct sl_value *b)
{
	if (a->kind == SL_V_UNCHANGED || b->kind == SL_V_UNCHANGED)
		return true;
	return sl_value_equal(a, b);
}

static void fill(struct my_src *s, struct sl_change *c, const struct sl_table *t, enum sl_op op,
		 const struct sl_value *vals)
{
	memset(c, 0, sizeof *c);
	c->table = t;
	c->op = op;
	c->values = vals;
	c->read_method = sl_my_desc.read_method_cdc;
	c->csn_pos = my_pos_csn(&s->tx_pos);  /* the CSN text is the writer's */
	c->seq = ++s->seq;
	c->source_ts_us = s->tx_ts_us;
	c->tx_id = s->tx_id;
}

/* Decodes the next row of the pending rows event into changes.  Returns 1
 * with changes in pend, 0 when the event has no more rows, or a failure. */
static int next_row(struct my_src *s, char *err, size_t errlen)
{
	struct tmap *m = s->rows_map;
	const struct sl_table *t = m->t->version;
	char at[600];
	int rc;

	rc = sl_mysql_rows_next(&s->dec, &s->rows, &m->tm, t->cols, s->before, s->after, err, errlen);
	if (rc <= 0) {
		if (rc < 0) {
			size_t l = strlen(err);
			snprintf(err + l, errlen - l, " (at %s)", here(s, at, sizeof at));
			return rc == SL_MYSQL_EVALUE ? SL_EDATA : SL_EFAIL;
		}
		s->rows_pending = false;
		return 0;
	}
	s->npend = s->ipend = 0;
	switch (s->rows.op) {
	case SL_BL_ROWS_WRITE:
		for (int i = 0; i < t->ncols; i++) {
			if (s->after[i].kind == SL_V_UNCHANGED) {
				char hint[1200];
				backfill_hint(s, m->t, hint, sizeof hint);
				snprintf(err, errlen, "stream \"%s\": at %s, an insert into \"%s\".\"%s\" lacks column \"%s\" "
					 "(a session with binlog_row_image=MINIMAL or NOBLOB): its value is unknown. Set "
					 "binlog_row_image=FULL for every session, then run `%s`", s->st->name,
					 here(s, at, sizeof at), t->ns, t->name, t->cols[i].name, hint);
				return SL_EPREREQ;
			}
		}
		fill(s, &s->pend[s->npend++], t, SL_OP_INSERT, s->after);
		break;
	case SL_BL_ROWS_DELETE:
		for (int i = 0; i < t->ncols; i++)
			if (s->before[i].kind == SL_V_UNCHANGED)
				s->before[i].kind = SL_V_NULL;  /* a partial image: the key only */
		fill(s, &s->pend[s->npend++], t, SL_OP_DELETE, s->before);
		break;
	case SL_BL_ROWS_UPDATE: {
		bool key_changed = !sl_table_has_key(t);  /* a keyless row is named by its whole old row */
		for (int i = 0; i < t->ncols; i++) {
			if (s->after[i].kind == SL_V_UNCHANGED && s->before[i].kind != SL_V_UNCHANGED)
				s->after[i] = s->before[i];
			if (t->cols[i].is_key && !key_equal(&s->before[i], &s->after[i]))
				key_changed = true;
		}
		if (key_changed) {
			for (int i = 0; i < t->ncols; i++)
				if (s->before[i].kind == SL_V_UNCHANGED)
					s->before[i].kind = SL_V_NULL;
			fill(s, &s->pend[s->npend++], t, SL_OP_UPDATE_DELETE, s->before);
		}
		fill(s, &s->pend[s->npend++], t, SL_OP_UPDATE_INSERT, s->after);
		break;
	}
	}
	return 1;
}

/* BEGIN of the open group, once, before its first change. */
static bool begin_once(struct my_src *s, struct sl_event *ev)
{
	if (s->begun)
		return false;
	s->begun = true;
	s->tx_pos = sl_my_pos(s->file, s->tx_start, s->tx_gtid, NULL);
	ev->kind = SL_EV_BEGIN;
	ev->pos = s->tx_pos;
	ev->ts_us = s->tx_ts_us;
	ev->tx_id = s->tx_id;
	return true;
}

static bool pending_change(struct my_src *s, struct sl_event *ev)
{
	if (s->ipend < s->npend) {
		ev->kind = SL_EV_CHANGE;
		ev->change = s->pend[s->ipend++];
		return true;
	}
	return false;
}

static void start_group(struct my_src *s, uint64_t start)
{
	s->in_tx = true;
	s->standalone = false;
	s->begun = false;
	s->skip_tx = false;
	s->xa_prepare = false;
	s->tx_start = start;
	s->tx_gtid[0] = '\0';
	s->tx_has_mgtid = s->tx_has_sgtid = false;
	s->tx_ts_us = (int64_t)s->ev.h.timestamp * 1000000;
	s->tx_id = 0;
	s->seq = 0;
	s->tx_xid[0] = '\0';
}

static void xid_text(char *out, size_t outlen, const struct sl_binlog_xa_xid *x)
{
	size_t n = 0;

	n += (size_t)snprintf(out + n, outlen - n, "X'");
	for (uint32_t i = 0; i < x->gtrid_len && n + 3 < outlen; i++)
		n += (size_t)snprintf(out + n, outlen - n, "%02x", x->data[i]);
	n += (size_t)snprintf(out + n, outlen - n, "',X'");
	for (uint32_t i = 0; i < x->bqual_len && n + 3 < outlen; i++)
		n += (size_t)snprintf(out + n, outlen - n, "%02x", x->data[x->gtrid_len + i]);
	snprintf(out + n, outlen - n, "',%" PRIu32, x->format_id);
}

/* The watermark the last group wrote, as an event. */
static void take_watermark(struct my_src *s, struct sl_event *ev)
{
	ev->kind = SL_EV_WATERMARK;
	ev->watermark = s->wm_text.data;
	ev->pos = s->wm_pos;
	s->wm_ready = false;
}

/* The rows of the watermark table in the pending rows event: the text of
 * the last one written (its second column, by position: the binlog may not
 * name the columns) becomes the group's watermark.  Never changes. */
static int watermark_rows(struct my_src *s, struct tmap *m, char *err, size_t errlen)
{
	int n = (int)m->tm.ncols, rc;
	struct sl_column *cols;
	char at[600];

	if (n < 2) {
		sl_debug("stream \"%s\": at %s, the watermark table has %d columns: its rows are ignored", s->st->name,
			 here(s, at, sizeof at), n);
		return SL_OK;
	}
	if (!(cols = calloc((size_t)n, sizeof *cols)) || grow_vals(s, n) < 0) {
		free(cols);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	for (int i = 0; i < n; i++) {
		const struct sl_mysql_column *mc = &m->tm.cols[i];
		switch (mc->real_type) {
		case SL_MYSQL_VARCHAR: case SL_MYSQL_VAR_STRING: case SL_MYSQL_STRING: case SL_MYSQL_BLOB:
		case SL_MYSQL_TINY_BLOB: case SL_MYSQL_MEDIUM_BLOB: case SL_MYSQL_LONG_BLOB:
			cols[i].type = SL_T_BYTES;   /* the bytes, whatever the charset */
			break;
		default:
			cols[i].type = sl_mysql_type_map(mc, &cols[i].precision, &cols[i].scale);
		}
	}
	while ((rc = sl_mysql_rows_next(&s->dec, &s->rows, &m->tm, cols, s->before, s->after, err, errlen)) > 0) {
		const struct sl_value *v = &s->after[1];
		if (s->rows.op == SL_BL_ROWS_DELETE || (v->kind != SL_V_BYTES && v->kind != SL_V_STRING) ||
		    memchr(v->p, '\0', v->len))
			continue;
		sl_buf_reset(&s->wm_text);
		if (sl_buf_append(&s->wm_text, v->p, v->len) < 0) {
			free(cols);
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		s->wm_pending = true;
	}
	free(cols);
	if (rc < 0) {
		sl_warn("stream \"%s\": at %s, a row of the watermark table \"%s\".\"%s\" could not be read (%s): it is "
			"ignored", s->st->name, here(s, at, sizeof at), s->wm_db, s->wm_table, err);
		err[0] = '\0';
	}
	return SL_OK;
}

/* Ends the open group: updates the GTID state and reports COMMIT (when the
 * group had changes), a watermark it wrote or, now and then, a keepalive;
 * a watermark after a COMMIT comes at the next call.  Returns true with ev
 * filled. */
static bool end_group(struct my_src *s, struct sl_event *ev)
{
	bool reported = false;

	if (s->gtid_mode && !s->skip_tx) {
		if (s->tx_has_mgtid)
			sl_mariadb_gtid_pos_add(&s->mstate, &s->tx_mgtid, NULL, 0);
		else if (s->tx_has_sgtid)
			sl_mysql_gtid_set_add(&s->sstate, s->tx_sid, s->tx_gno, NULL, 0);
		if (s->tx_has_mgtid || s->tx_has_sgtid)
			state_text_update(s);
	}
	s->in_tx = false;
	if (s->wm_pending) {
		/* a watermark: after the group, before the next */
		s->wm_pending = false;
		s->wm_ready = true;
		s->wm_pos = resume_pos(s);
	}
	if (s->begun) {
		ev->kind = SL_EV_COMMIT;
		ev->pos = resume_pos(s);
		ev->ts_us = s->tx_ts_us;
		reported = true;
		s->returned = sl_my_pos(s->file, s->pos, NULL, NULL);
		s->has_returned = true;
	} else if (s->wm_ready) {
		take_watermark(s, ev);
		reported = true;
	} else if (sl_mono_ms() - s->last_keepalive_ms >= KEEPALIVE_EVERY_MS || s->reply_wanted) {
		/* A transaction of tables the stream does not select.  Whatever
		 * committed before it started is before it in the binlog, so its
		 * time serves as a heartbeat's: a busy server whose selected
		 * tables are quiet sends no heartbeat events, yet the stream is
		 * fresh. */
		ev->kind = SL_EV_KEEPALIVE;
		ev->pos = resume_pos(s);
		if (s->tx_ts_us > 0) {
			ev->heartbeat = true;
			ev->ts_us = s->tx_ts_us;
		}
		reported = true;
	}
	if (reported) {
		s->last_keepalive_ms = sl_mono_ms();
		s->reply_wanted = false;
		s->last_reported = ev->pos;
		s->has_reported = true;
	}
	s->begun = false;
	return reported;
}

/* Writes the current event to the held XA transaction's file. */
static int hold_event(struct my_src *s, char *err, size_t errlen)
{
	unsigned char h[4];
	const unsigned char *raw = s->ev.body - SL_BL_HEADER_LEN;

	sl_put_u32(h, s->ev.h.event_size);
	if (fwrite(h, 1, 4, s->xa_out) != 4 || fwrite(raw, 1, s->ev.h.event_size, s->xa_out) != s->ev.h.event_size) {
		snprintf(err, errlen, "stream \"%s\": could not hold an XA transaction's events: %s", s->st->name,
			 sl_strerror(errno));
		return SL_EFAIL;
	}
	return SL_OK;
}

/* The next held event of an XA transaction being committed: 1, 0 at the
 * end, or a failure. */
static int held_event(struct my_src *s, const unsigned char **p, size_t *len, char *err, size_t errlen)
{
	unsigned char h[4];
	uint32_t n;

	if (fread(h, 1, 4, s->xa_in) != 4)
		return 0;
	n = sl_get_u32(h);
	if (n > s->axbuf) {
		unsigned char *b = realloc(s->xbuf, n);
		if (!b) {
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		s->xbuf = b;
		s->axbuf = n;
	}
	if (fread(s->xbuf, 1, n, s->xa_in) != n) {
		snprintf(err, errlen, "stream \"%s\": a held XA transaction's events are truncated", s->st->name);
		return SL_EFAIL;
	}
	*p = s->xbuf;
	*len = n;
	return 1;
}

static struct xa_held *take_held(struct my_src *s, const char *xid)
{
	for (struct xa_held **pp = &s->held; *pp; pp = &(*pp)->next) {
		if (!strcasecmp((*pp)->xid, xid)) {
			struct xa_held *h = *pp;
			*pp = h->next;
			return h;
		}
	}
	return NULL;
}

/* Queues a TRUNCATE record of the followed table db.name, written at the
 * end of the statement being read. */
static void queue_truncate(struct my_src *s, const char *db, const char *name)
{
	struct sl_my_name *x;

	if (s->ntrunc >= (int)(sizeof s->trunc / sizeof s->trunc[0]))
		return;
	x = &s->trunc[s->ntrunc++];
	snprintf(x->db, sizeof x->db, "%.*s", (int)sizeof x->db - 1, db);
	snprintf(x->table, sizeof x->table, "%.*s", (int)sizeof x->table - 1, name);
	x->role = SL_MY_ENDS;
	s->truncating = true;
	s->itrunc = 0;
}

/* The followed table t ended at position at (dropped, renamed away, its
 * database dropped) while a table of its name exists again: the rows the
 * stream wrote for it end there, with a TRUNCATE record (1), unless its
 * backfill comes after the statement, read again after a restart (0); or a
 * failure. */
static int end_table(struct my_src *s, const struct sl_my_table *t, const struct sl_position *at, char *err,
		     size_t errlen)
{
	int rc = !s->st->hooks || !s->st->hooks->replaced ? 1 :
		s->st->hooks->replaced(s->st->hooks->payload, t->db, t->name, at, false, err, errlen);

	if (rc > 0)
		queue_truncate(s, t->db, t->name);
	return rc;
}

/* At a DDL statement that touches t, read live when the binlog does not
 * name the columns: the catalog gives t's columns after the statement only
 * while the server has logged nothing after it (a later statement may have
 * changed them again), so the stream's position must be the server's head,
 * before and after the catalog is read.  SL_OK, or layout_unknown()'s. */
static int ddl_live(struct my_src *s, const struct sl_my_table *t, char *err, size_t errlen)
{
	struct sl_position head, end = sl_my_pos(s->file, s->pos, NULL, NULL);
	int rc;

	if (s->names_logged)
		return SL_OK;
	if ((rc = sl_my_head(s->meta, &s->srv, &head, err, errlen)) < 0)
		return rc;
	if (place_compare(&head, &end) == 0)
		return SL_OK;
	return layout_unknown(s, t, "a DDL statement changed it while the stream was behind the server", err, errlen);
}

/* The tables a DDL statement touched: new versions, restarts. */
static int on_ddl(struct my_src *s, enum sl_my_stmt kind, struct sl_my_name *names, int n, struct sl_event *ev,
		  char *err, size_t errlen)
{
	struct sl_my_table *now = NULL;
	struct sl_position at;
	int nnow = 0, rc, live;

	if (s->replay)
		return SL_OK;
	at = sl_my_pos(s->file, s->ev.start, NULL, NULL);
	if (kind == SL_MY_STMT_TABLE_DDL) {
		/* The catalog is read now, not as of the statement: the table a
		 * name has now may have come after the statement.  The roles the
		 * statement gives its names (my_ddl.c) tell what the catalog
		 * cannot: which followed table ended here, and which name was
		 * given a table with rows of its own. */
		/* first the names given rows without row events (RENAME ... TO a
		 * followed name, a partition truncated, dropped or exchanged): the
		 * stream never read them */
		for (int i = 0; i < n; i++) {
			struct sl_my_table *t = known_table(s, names[i].db, names[i].table);
			if (names[i].role != SL_MY_BINDS || !t)
				continue;
			if (!s->st->hooks || !s->st->hooks->replaced) {
				snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" was given rows without row "
					 "events (a table renamed into it, or a partition truncated, dropped or exchanged); run "
					 "`sluice backfill -c %s --stream %s --table %s.%s`",
					 s->st->name, t->db, t->name, s->st->config_path ? s->st->config_path : "FILE",
					 s->st->name, t->db, t->name);
				return SL_EPREREQ;
			}
			rc = s->st->hooks->replaced(s->st->hooks->payload, t->db, t->name, &at, true, err, errlen);
			if (rc < 0)
				return rc;
			if (rc > 0) {
				sl_info("stream \"%s\": %s.%s was given rows without row events: backfilling it again",
					s->st->name, t->db, t->name);
				snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" was given rows without row "
					 "events (a table renamed into it, or a partition truncated, dropped or exchanged): it is "
					 "backfilled again", s->st->name, t->db, t->name);
				return SL_ERESTART;
			}
		}
		for (int i = 0; i < n; i++) {
			struct sl_my_table *t = known_table(s, names[i].db, names[i].table);
			struct sl_table *retired = NULL;
			bool selected = selects(s, names[i].db, names[i].table);
			if (!t && !selected)
				continue;
			if ((rc = sl_my_list_tables(s->meta, s->srv.mariadb, (char *const[]){ "*", NULL }, NULL,
						    names[i].db, names[i].table, false, &now, &nnow, err, errlen)) < 0)
				return rc;
			sl_my_tables_free(now, nnow);
			if (t && nnow == 0) {
				snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" was dropped or renamed", s->st->name,
					 t->db, t->name);
				return SL_ERESTART;
			}
			if (!t && nnow > 0) {
				snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" is new", s->st->name, names[i].db,
					 names[i].table);
				return SL_ERESTART;
			}
			if (!t)
				continue;
			if (names[i].role == SL_MY_BINDS)
				continue;  /* above */
			if (names[i].role == SL_MY_ENDS) {
				if ((rc = end_table(s, t, &at, err, errlen)) < 0)
					return rc;
				if (rc == 0)
					continue;  /* backfilled after this statement */
			}
			if ((rc = covered(s, t, err, errlen)) < 0)
				return rc;
			if (rc > 0)
				continue;  /* its backfill comes after the statement */
			if ((rc = ddl_live(s, t, err, errlen)) < 0)
				return rc;
			if ((rc = redescribe(s, t, NULL, &retired, err, errlen)) < 0)
				return rc;
			if ((live = ddl_live(s, t, err, errlen)) < 0) {
				s->orphan = retired;  /* changes queued before may still use it */
				return live;
			}
			if (names[i].filled) {
				/* ADD COLUMN with a default (or NOT NULL): the existing rows
				 * have it, though no row event carries it */
				snprintf(s->why, sizeof s->why, "column \"%s\" was added with a default, which the "
					 "existing rows have without a change", names[i].column);
				ev->rebackfill = s->why;
			}
			if (rc > 0 || names[i].filled) {
				ev->kind = SL_EV_SCHEMA;
				ev->table = t->version;
				ev->changed = rc == 1;
				ev->retired = retired;
				/* the maps of the old version are stale */
				for (int k = 0; k < MAX_MAPS; k++)
					if (s->maps[k].t == t)
						s->maps[k].rawlen = 0;
				return 1;
			}
		}
		return SL_OK;
	}
	/* DROP DATABASE: its followed tables that exist again (the database
	 * and the tables created again before the stream read the statement)
	 * end here, as for DROP TABLE; the others are found missing below */
	for (int i = 0; i < n && kind == SL_MY_STMT_DB_DDL; i++) {
		if (names[i].role != SL_MY_ENDS || names[i].table[0])
			continue;
		for (int k = 0; k < s->ntables; k++)
			if (!strcmp(s->tables[k].db, names[i].db) && (rc = end_table(s, &s->tables[k], &at, err, errlen)) < 0)
				return rc;
	}
	/* a database changed, or a statement that cannot be read: the selection again */
	if ((rc = sl_my_list_tables(s->meta, s->srv.mariadb, s->st->tables, s->st->exclude_tables, NULL, NULL, false,
				    &now, &nnow, err, errlen)) < 0)
		return rc;
	if (s->wm_db[0])
		drop_table(now, &nnow, s->wm_db, s->wm_table);
	rc = SL_OK;
	if (nnow != s->ntables) {
		snprintf(err, errlen, "stream \"%s\": the selected tables changed (a table was created, dropped or renamed)",
			 s->st->name);
		rc = SL_ERESTART;
	}
	for (int i = 0; i < nnow && rc == SL_OK; i++) {
		if (!known_table(s, now[i].db, now[i].name)) {
			snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" is new", s->st->name, now[i].db,
				 now[i].name);
			rc = SL_ERESTART;
		}
	}
	sl_my_tables_free(now, nnow);
	return rc;
}

/* A change logged as a statement (binlog_format STATEMENT or MIXED in its
 * session), of the tables names[n] (none: unknown).  Those whose backfill
 * holds it are fine; another followed table stops the stream (SL_EPREREQ)
 * with the backfill that carries the next run past it: of that table, or
 * of the whole stream (a new position) when the statement names none. */
static int statement_change(struct my_src *s, const struct sl_binlog_query *q, const struct sl_my_name *names,
			    int n, char *err, size_t errlen)
{
	const struct sl_my_table *t = NULL;
	char at[600], hint[1200];
	int rc = 0;
	bool several = n > 0 && names[0].role != SL_MY_TOUCHES;

	/* one table: its backfill; several (a multi-table UPDATE or DELETE, of
	 * which only the first is named) or none known: every table's */
	if (n > 0 && !several && (t = known_table(s, names[0].db, names[0].table)) && (rc = covered(s, t, err, errlen)))
		return rc < 0 ? rc : SL_OK;
	if (n > 0 && !several && !t)
		return SL_OK;
	if (several && !known_table(s, names[0].db, names[0].table))
		return SL_OK;  /* its first table is not followed (as before: the others are not known) */
	for (int i = 0; (several || n == 0) && i < s->ntables; i++) {
		if ((rc = covered(s, &s->tables[i], err, errlen)) < 0)
			return rc;
		if (rc == 0)
			break;
		if (i == s->ntables - 1)
			return SL_OK;
	}
	backfill_hint(s, several || n == 0 ? NULL : t, hint, sizeof hint);
	snprintf(err, errlen, "stream \"%s\": at %s, a change was logged as a statement (binlog_format = STATEMENT or "
		 "MIXED in that session): \"%.*s\". sluice reads ROW events only: set binlog_format=ROW for every "
		 "session, then run `%s`", s->st->name, here(s, at, sizeof at),
		 (int)(q->sql_len < 200 ? q->sql_len : 200), q->sql, hint);
	return SL_EPREREQ;
}

/* A QUERY event.  Returns 1 with ev filled, 0, or a failure. */
static int on_query(struct my_src *s, struct sl_event *ev, char *err, size_t errlen)
{
	const struct sl_binlog_query *q = &s->ev.u.query;
	struct sl_my_name names[16];
	char db[256];
	int n = 0, rc;
	enum sl_my_stmt kind;

	snprintf(db, sizeof db, "%.*s", (int)q->db_len, q->db ? q->db : "");
	kind = sl_my_ddl_parse(q->sql, q->sql_len, db, names, 16, &n);
	if (kind == SL_MY_STMT_TX) {
		if (q->sql_len >= 5 && !strncasecmp(q->sql, "BEGIN", 5)) {
			if (!s->in_tx)
				start_group(s, s->ev.start);
			return SL_OK;
		}
		if ((q->sql_len >= 6 && !strncasecmp(q->sql, "COMMIT", 6)) ||
		    (q->sql_len >= 8 && !strncasecmp(q->sql, "ROLLBACK", 8) && !(q->sql_len > 8 && q->sql[8] == ' '))) {
			/* MyISAM groups end in COMMIT; a ROLLBACK ends a group whose
			 * non-transactional changes did happen */
			if (s->in_tx && end_group(s, ev))
				return 1;
			return SL_OK;
		}
		if (q->sql_len >= 9 && !strncasecmp(q->sql, "XA COMMIT", 9)) {
			char xid[300];
			struct xa_held *h;
			/* the xid: from the GTID event (MariaDB), else from the text */
			if (s->tx_xid[0])
				snprintf(xid, sizeof xid, "%s", s->tx_xid);
			else
				snprintf(xid, sizeof xid, "%.*s", (int)(q->sql_len > 10 ? q->sql_len - 10 : 0), q->sql + 10);
			if (!(h = take_held(s, xid))) {
				sl_debug("stream \"%s\": XA COMMIT of %s, which prepared no change the stream reads", s->st->name,
					 xid);
			} else {
				s->xa_in = h->events;
				h->events = NULL;
				rewind(s->xa_in);
				free(h);
			}
			if (!s->in_tx)
				start_group(s, s->ev.start);
			s->standalone = true;
			return SL_OK;
		}
		if (q->sql_len >= 11 && !strncasecmp(q->sql, "XA ROLLBACK", 11)) {
			char xid[300];
			struct xa_held *h;
			if (s->tx_xid[0])
				snprintf(xid, sizeof xid, "%s", s->tx_xid);
			else
				snprintf(xid, sizeof xid, "%.*s", (int)(q->sql_len > 12 ? q->sql_len - 12 : 0), q->sql + 12);
			if ((h = take_held(s, xid))) {
				fclose(h->events);
				free(h);
			}
		}
		if (s->in_tx && s->standalone && !s->xa_prepare && end_group(s, ev))
			return 1;
		return SL_OK;
	}
	if (!s->in_tx)
		start_group(s, s->ev.start);  /* a statement alone (no GTID event) */
	switch (kind) {
	case SL_MY_STMT_TRUNCATE:
		for (int i = 0; i < n && i < 16; i++) {
			if (known_table(s, names[i].db, names[i].table))
				queue_truncate(s, names[i].db, names[i].table);
		}
		break;
	case SL_MY_STMT_TABLE_DDL:
	case SL_MY_STMT_DB_DDL:
	case SL_MY_STMT_UNKNOWN_DDL:
		if ((rc = on_ddl(s, kind, names, n, ev, err, errlen)) != 0) {
			if (rc > 0)
				s->standalone = true;
			return rc;
		}
		break;
	case SL_MY_STMT_DML:
		if ((rc = statement_change(s, q, names, n, err, errlen)) < 0)
			return rc;
		break;
	default:
		break;
	}
	if (s->truncating)
		return SL_OK;
	/* DDL is a group of its own */
	if (s->in_tx && end_group(s, ev))
		return 1;
	return SL_OK;
}

/* Whether the group starting at the current event was written before the
 * restart (it lies before the start position's done point, which a held XA
 * transaction set back).  An XA COMMIT or ROLLBACK group among them ends
 * its prepared transaction, held again when it was read again: it is
 * dropped (its changes were written then). */
static bool group_done(struct my_src *s, bool xa_end)
{
	struct xa_held *h;

	if (!before_done(s, sl_my_file_seq(s->file, strlen(s->file)), s->ev.start))
		return false;
	if (xa_end && s->tx_xid[0] && (h = take_held(s, s->tx_xid))) {
		fclose(h->events);
		free(h);
	}
	return true;
}

/* Reads the next event into s->ev (from a held XA transaction first).
 * Returns 1 with an event, 0 on timeout, 2 at the end, or a failure. */
static int read_event(struct my_src *s, int timeout_ms, bool *held, char *err, size_t errlen)
{
	const unsigned char *p;
	size_t len;
	enum sl_my_read what;
	int rc;

	*held = false;
	if (s->xa_in) {
		if ((rc = held_event(s, &p, &len, err, errlen)) < 0)
			return rc;
		if (rc == 0) {
			fclose(s->xa_in);
			s->xa_in = NULL;
			return 3;   /* the held events are done */
		}
		*held = true;
	} else {
		if ((rc = sl_my_dump_read(s->dump, timeout_ms, &what, &p, &len, err, errlen)) < 0) {
			if (rc == SL_ELOST) {
				char why[SL_ERRLEN];
				struct sl_position at = sl_my_pos(s->file, s->pos, s->gtid_mode ? s->state_text : NULL, NULL);
				snprintf(why, sizeof why, "the server stopped the stream (%s)", err);
				return lost(s->st, s->cfg, NULL, &at, why, err, errlen);
			}
			if (rc == SL_ECONFIG) {
				size_t l = strlen(err);
				snprintf(err + l, errlen - l, ": another replica (or another sluice stream) connected with "
					 "server_id = %" PRIu32 "; each stream needs a server_id of its own", sl_my_conf(s->cfg)->server_id);
			}
			return rc;
		}
		if (what == SL_MY_TIMEOUT)
			return 0;
		if (what == SL_MY_EOF)
			return 2;
	}
	if (sl_binlog_decode(&s->rd, p, len, &s->ev, err, errlen) < 0) {
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, " (binlog %s after offset %" PRIu64 ")", s->file, s->pos);
		return SL_EFAIL;
	}
	return 1;
}

static int my_next(void *ctx, int timeout_ms, struct sl_event *ev, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	bool held;
	int rc;

	memset(ev, 0, offsetof(struct sl_event, change));
	if (pending_change(s, ev))
		return SL_OK;
	if (s->wm_ready) {
		take_watermark(s, ev);
		return SL_OK;
	}
	for (;;) {
		if (s->rows_pending) {
			if (!s->begun && begin_once(s, ev))
				return SL_OK;
			if ((rc = next_row(s, err, errlen)) < 0)
				return rc;
			if (rc > 0 && pending_change(s, ev))
				return SL_OK;
			continue;
		}
		if (s->truncating) {
			if (!s->begun && begin_once(s, ev))
				return SL_OK;
			if (s->itrunc < s->ntrunc) {
				struct sl_my_table *t = known_table(s, s->trunc[s->itrunc].db, s->trunc[s->itrunc].table);
				s->itrunc++;
				if (t) {
					fill(s, &s->pend[0], t->version, SL_OP_TRUNCATE, NULL);
					ev->kind = SL_EV_CHANGE;
					ev->change = s->pend[0];
					return SL_OK;
				}
				continue;
			}
			s->truncating = false;
			s->ntrunc = 0;
			if (s->in_tx && end_group(s, ev))
				return SL_OK;
			continue;
		}
		rc = read_event(s, timeout_ms, &held, err, errlen);
		timeout_ms = 0;
		if (rc < 0)
			return rc;
		if (rc == 3) {
			/* the held XA transaction was read: the XA COMMIT group ends */
			if (s->in_tx && end_group(s, ev))
				return SL_OK;
			continue;
		}
		if (rc == 2) {
			ev->kind = SL_EV_END;
			return SL_OK;
		}
		if (rc == 0) {
			/* quiet: tell the pipeline where the stream is */
			if (!s->in_tx && !s->xa_in) {
				struct sl_position p = resume_pos(s);
				if (s->reply_wanted || !s->has_reported || my_pos_compare(&p, &s->last_reported) > 0) {
					ev->kind = SL_EV_KEEPALIVE;
					ev->pos = p;
					s->reply_wanted = false;
					s->last_reported = p;
					s->has_reported = true;
					s->last_keepalive_ms = sl_mono_ms();
					return SL_OK;
				}
			}
			ev->kind = SL_EV_TIMEOUT;
			return SL_OK;
		}
		/* positions: the end of each real event, never backwards */
		if (!held && s->ev.end > 0 && s->ev.kind != SL_BLK_HEARTBEAT && !(s->ev.h.flags & SL_BL_F_ARTIFICIAL) &&
		    s->ev.end > s->pos && s->ev.kind != SL_BLK_ROTATE)
			s->pos = s->ev.end;
		if (s->xa_out && !held && s->ev.kind != SL_BLK_HEARTBEAT) {
			/* the group of a prepared XA transaction: held until XA COMMIT */
			if (s->ev.kind == SL_BLK_TABLE_MAP || s->ev.kind == SL_BLK_ROWS) {
				if ((rc = hold_event(s, err, errlen)) < 0)
					return rc;
				continue;
			}
		}
		switch (s->ev.kind) {
		case SL_BLK_ROTATE: {
			const struct sl_binlog_rotate *r = &s->ev.u.rotate;
			if (r->file_len == 0 || r->file_len > SL_BL_FILE_MAX)
				break;
			if (strlen(s->file) != r->file_len || memcmp(s->file, r->file, r->file_len) != 0 ||
			    r->position > s->pos) {
				bool same = strlen(s->file) == r->file_len && !memcmp(s->file, r->file, r->file_len);
				memcpy(s->file, r->file, r->file_len);
				s->file[r->file_len] = '\0';
				if (!same || r->position > s->pos)
					s->pos = r->position;
			}
			break;
		}
		case SL_BLK_MARIADB_GTID: {
			const struct sl_binlog_mariadb_gtid *g = &s->ev.u.mariadb_gtid;
			start_group(s, s->ev.start);
			s->standalone = (g->flags & SL_MARIADB_FL_STANDALONE) != 0;
			s->tx_has_mgtid = true;
			s->tx_mgtid = (struct sl_mariadb_gtid){ .domain = g->domain_id, .server = g->server_id, .seq = g->seq_no };
			snprintf(s->tx_gtid, sizeof s->tx_gtid, "%" PRIu32 "-%" PRIu32 "-%" PRIu64, g->domain_id, g->server_id,
				 g->seq_no);
			s->tx_id = g->seq_no;
			if (g->has_xid)
				xid_text(s->tx_xid, sizeof s->tx_xid, &g->xid);
			if (s->gtid_mode && sl_mariadb_gtid_pos_contains(&s->mstate, &s->tx_mgtid))
				s->skip_tx = true;
			if (!(g->flags & SL_MARIADB_FL_PREPARED_XA) && group_done(s, g->has_xid))
				s->skip_tx = true;
			if ((g->flags & SL_MARIADB_FL_PREPARED_XA) && !s->skip_tx) {
				/* XA PREPARE: hold the group's events until XA COMMIT */
				struct xa_held *h = calloc(1, sizeof *h);
				if (!h || !(h->events = tmpfile())) {
					free(h);
					snprintf(err, errlen, "stream \"%s\": could not hold an XA transaction: %s", s->st->name,
						 sl_strerror(errno));
					return SL_EFAIL;
				}
				snprintf(h->xid, sizeof h->xid, "%s", s->tx_xid);
				h->start = sl_my_pos(s->file, s->ev.start, s->gtid_mode ? s->state_text : NULL, NULL);
				h->next = s->held;
				s->held = h;
				s->xa_out = h->events;
				s->xa_prepare = true;
			}
			break;
		}
		case SL_BLK_MYSQL_GTID: {
			const struct sl_binlog_mysql_gtid *g = &s->ev.u.mysql_gtid;
			char u[37];
			start_group(s, s->ev.start);
			if (g->has_commit_ts && g->immediate_commit_ts)
				s->tx_ts_us = (int64_t)g->immediate_commit_ts;
			if (!g->anonymous) {
				s->tx_has_sgtid = true;
				memcpy(s->tx_sid, g->sid, 16);
				s->tx_gno = g->gno;
				s->tx_id = g->gno;
				sl_mysql_uuid_format(g->sid, u);
				snprintf(s->tx_gtid, sizeof s->tx_gtid, "%s:%" PRIu64, u, g->gno);
				if (s->gtid_mode && sl_mysql_gtid_set_contains(&s->sstate, g->sid, g->gno))
					s->skip_tx = true;
			}
			if (group_done(s, false))
				s->skip_tx = true;
			/* DDL follows without BEGIN: the group ends after it */
			s->standalone = true;
			break;
		}
		case SL_BLK_QUERY:
			if (s->skip_tx)
				break;
			if (!held && s->ev.u.query.sql_len >= 5 && !strncasecmp(s->ev.u.query.sql, "BEGIN", 5) && s->in_tx)
				s->standalone = false;  /* MySQL: GTID, then BEGIN ... XID */
			if (s->xa_out && s->ev.u.query.sql_len >= 6 && !strncasecmp(s->ev.u.query.sql, "XA END", 6))
				break;
			if ((rc = on_query(s, ev, err, errlen)) != 0) {
				if (rc < 0)
					return rc;
				return SL_OK;
			}
			break;
		case SL_BLK_XID:
			if (s->in_tx && end_group(s, ev))
				return SL_OK;
			break;
		case SL_BLK_XA_PREPARE:
			if (s->xa_out) {
				fflush(s->xa_out);
				s->xa_out = NULL;
			} else if (!s->xa_prepare && s->ev.u.xa_prepare.one_phase) {
				/* XA COMMIT ... ONE PHASE: an ordinary commit */
			} else if (!s->xa_prepare && !s->skip_tx) {
				sl_warn("stream \"%s\": an XA PREPARE at %s without a GTID event: its changes are read at once",
					s->st->name, here(s, (char[600]){ 0 }, 600));
			}
			s->xa_prepare = false;
			if (s->in_tx && end_group(s, ev))
				return SL_OK;
			break;
		case SL_BLK_TABLE_MAP:
			if (s->skip_tx)
				break;
			if ((rc = on_table_map(s, ev, err, errlen)) != 0) {
				if (rc < 0)
					return rc;
				return SL_OK;
			}
			break;
		case SL_BLK_ROWS: {
			struct tmap *m;
			if (s->skip_tx)
				break;
			if (sl_binlog_rows_parse(&s->rd, &s->ev, &s->rows, err, errlen) < 0) {
				char at[600];
				size_t l = strlen(err);
				snprintf(err + l, errlen - l, " (at %s)", here(s, at, sizeof at));
				return SL_EFAIL;
			}
			m = map_by_id(s, s->rows.table_id);
			if (!m || !m->rawlen) {
				char at[600];
				snprintf(err, errlen, "stream \"%s\": at %s, a rows event for table id %" PRIu64 " without its "
					 "table map", s->st->name, here(s, at, sizeof at), s->rows.table_id);
				return SL_EFAIL;
			}
			if (m->wm) {
				if (!s->in_tx)
					start_group(s, s->ev.start);
				if ((rc = watermark_rows(s, m, err, errlen)) < 0)
					return rc;
				break;
			}
			if (!m->t) {
				/* a table the stream does not select: its rows are counted, not decoded */
				uint64_t nrows;
				char why[300];
				if (sl_mysql_rows_count(&s->rows, &m->tm, &nrows, why, sizeof why) < 0) {
					sl_debug("stream \"%s\": %s; counted as one skipped change", s->st->name, why);
					nrows = 1;
				}
				s->skipped += nrows;
				break;
			}
			if (!s->in_tx)
				start_group(s, s->ev.start);
			s->rows_map = m;
			s->rows_pending = true;
			break;
		}
		case SL_BLK_HEARTBEAT:
			/* Nothing else is coming for now: the server's position is
			 * ours.  The server sends a heartbeat only after a heartbeat
			 * period with nothing to send, so everything committed before
			 * it arrived is before that position: it travels through the
			 * pipeline as a heartbeat with its arrival time, and freshness
			 * is measured end to end on an idle stream (source.h,
			 * log_heartbeats). */
			if (!s->in_tx && !s->xa_in) {
				const struct sl_binlog_heartbeat *hb = &s->ev.u.heartbeat;
				if (hb->file_len == strlen(s->file) && !memcmp(hb->file, s->file, hb->file_len) &&
				    hb->position > s->pos && s->ev.h.log_pos > 0)
					s->pos = hb->position;
				ev->kind = SL_EV_KEEPALIVE;
				ev->heartbeat = true;
				ev->ts_us = sl_now_us();
				ev->pos = resume_pos(s);
				s->reply_wanted = false;
				s->last_reported = ev->pos;
				s->has_reported = true;
				s->last_keepalive_ms = sl_mono_ms();
				return SL_OK;
			}
			break;
		case SL_BLK_INCIDENT: {
			char at[600];
			snprintf(err, errlen, "stream \"%s\": at %s, the server logged an incident (%u: %.*s): changes may be "
				 "missing from the binlog there. Run `sluice backfill` for the stream", s->st->name,
				 here(s, at, sizeof at), s->ev.u.incident.incident, (int)s->ev.u.incident.message_len,
				 s->ev.u.incident.message ? s->ev.u.incident.message : "");
			return SL_ELOST;
		}
		default:
			break;
		}
	}
}

static void my_counters(void *ctx, struct sl_source_counters *out)
{
	const struct my_src *s = ctx;

	memset(out, 0, sizeof *out);
	out->skipped_changes = s->skipped;
}

static int my_ack(void *ctx, const struct sl_position *durable, bool want_reply, char *err, size_t errlen)
{
	struct my_src *s = ctx;

	(void)durable;
	(void)err;
	(void)errlen;
	/* A binlog is not held for a replica: the checkpoint is all. */
	if (want_reply)
		s->reply_wanted = true;
	return SL_OK;
}

/* ---- backfill while streaming ----
 *
 * Watermarks are rows of a small table of the operator's making
 * (watermark_table, default sluice.watermarks; doc/mysql.md has its DDL):
 * one row per stream, overwritten by each watermark (INSERT ... ON
 * DUPLICATE KEY UPDATE, in autocommit on a connection of its own), so the
 * table stays tiny and each watermark is a transaction of its own in the
 * binlog.  next() knows the table by name in its table maps and returns
 * the text of its rows' second column as SL_EV_WATERMARK after the
 * transaction; its rows are never changes, and the table is never one of
 * the stream's, whatever `tables` says.
 *
 * A chunk is read in a consistent snapshot of its own (the same snapshot
 * as the initial backfill's: START TRANSACTION WITH CONSISTENT SNAPSHOT and
 * MariaDB's binlog_snapshot_file/position, or MySQL's FLUSH TABLES WITH
 * READ LOCK for a moment), whose binlog position is exact: every
 * transaction before it in the binlog is in the snapshot, none after.  A
 * transaction is in the binlog before it is visible, so the stream may
 * have returned one that a snapshot taken just after misses; read_chunk
 * runs on the reading thread between transactions, so the source knows
 * where the last transaction it returned ends, and a snapshot whose
 * position is before that reads nothing (SL_EAGAIN).
 */

static const char wm_ddl[] =
	"CREATE TABLE %s (stream VARBINARY(255) NOT NULL PRIMARY KEY, watermark VARBINARY(1024) NOT NULL) "
	"ENGINE=InnoDB";

/* "`db`.`table`" of the watermark table into b. */
static const char *wm_qualified(struct sl_buf *b, const char *db, const char *table)
{
	sl_buf_reset(b);
	sl_my_append_qualified(b, db, table);
	return sl_buf_failed(b) ? "?" : b->data;
}

/* Whether emit_watermark can write the watermark table of cfg on c: it
 * exists with the columns (stream, watermark, ...), the user may INSERT
 * and UPDATE it (zero-row statements in a transaction rolled back: nothing
 * changes), and the binlog is not filtered for its database.  SL_EPREREQ
 * with what to run (*absent when the table does not exist). */
static int wm_verify(MYSQL *c, const struct sl_source_config *cfg, const struct sl_source_stream *st, bool *absent,
		     char *err, size_t errlen)
{
	char db[256], table[256], what[700];
	struct sl_buf q, name, missing;
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	const char *user = cfg->user ? cfg->user : "?";
	int rc = SL_OK, ncols = 0;
	bool names_ok = true;

	*absent = false;
	if (wm_name(sl_my_conf(cfg)->watermark_table, db, table) < 0) {
		snprintf(err, errlen, "source \"%s\": watermark_table = \"%s\" is not DATABASE.TABLE", cfg->name,
			 sl_my_conf(cfg)->watermark_table ? sl_my_conf(cfg)->watermark_table : "");
		return SL_ECONFIG;
	}
	sl_buf_init(&q, 0);
	sl_buf_init(&name, 0);
	sl_buf_init(&missing, 0);
	wm_qualified(&name, db, table);
	snprintf(what, sizeof what, "stream \"%s\": reading the columns of the watermark table %s", st->name, name.data);
	sl_buf_puts(&q, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ");
	sl_my_append_literal(&q, db);
	sl_buf_puts(&q, " AND TABLE_NAME = ");
	sl_my_append_literal(&q, table);
	sl_buf_puts(&q, " ORDER BY ORDINAL_POSITION");
	if (sl_buf_failed(&q) || sl_buf_failed(&name)) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	if ((rc = sl_my_query(c, q.data, &res, err, errlen)) < 0)
		goto out;
	while (res && (row = mysql_fetch_row(res))) {
		if (ncols == 0 && (!row[0] || strcasecmp(row[0], "stream")))
			names_ok = false;
		if (ncols == 1 && (!row[0] || strcasecmp(row[0], "watermark")))
			names_ok = false;
		ncols++;
	}
	if (res)
		mysql_free_result(res);
	res = NULL;
	if (ncols == 0) {
		*absent = true;
		snprintf(err, errlen, "stream \"%s\": the watermark table %s (watermark_table of source \"%s\") is "
			 "missing, or user %s may not see it: backfill while streaming needs it. As an administrator "
			 "run: CREATE DATABASE IF NOT EXISTS `%s`; ", st->name, name.data, cfg->name, user, db);
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, wm_ddl, name.data);
		l = strlen(err);
		snprintf(err + l, errlen - l, "; GRANT INSERT, UPDATE ON %s TO '%s'", name.data, user);
		rc = SL_EPREREQ;
		goto out;
	}
	if (!names_ok || ncols < 2) {
		snprintf(err, errlen, "stream \"%s\": the watermark table %s does not have the columns (stream, "
			 "watermark, ...) in that order; drop it and create it as: ", st->name, name.data);
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, wm_ddl, name.data);
		rc = SL_EPREREQ;
		goto out;
	}
	/* the privileges, by statements that change no row */
	if ((rc = sl_my_exec(c, "START TRANSACTION", err, errlen)) < 0)
		goto out;
	for (int k = 0; k < 2; k++) {
		sl_buf_reset(&q);
		if (k == 0)
			sl_buf_printf(&q, "INSERT INTO %s (stream, watermark) SELECT 'x', 'x' FROM DUAL WHERE 1 = 0", name.data);
		else
			sl_buf_printf(&q, "UPDATE %s SET watermark = 'x' WHERE 1 = 0", name.data);
		if (sl_buf_failed(&q)) {
			snprintf(err, errlen, "out of memory");
			rc = SL_EFAIL;
			break;
		}
		if (mysql_real_query(c, q.data, q.len) != 0) {
			unsigned e = mysql_errno(c);
			if (e == ER_TABLEACCESS_DENIED_ERROR || e == ER_COLUMNACCESS_DENIED_ERROR || e == ER_DBACCESS_DENIED_ERROR) {
				sl_buf_printf(&missing, "%s%s", missing.len ? ", " : "", k == 0 ? "INSERT" : "UPDATE");
				continue;
			}
			snprintf(what, sizeof what, "stream \"%s\": trying the watermark table %s", st->name, name.data);
			rc = sl_my_err(err, errlen, what, c);
			break;
		}
		MYSQL_RES *r = mysql_store_result(c);
		if (r)
			mysql_free_result(r);
	}
	mysql_query(c, "ROLLBACK");
	if (rc < 0)
		goto out;
	if (missing.len) {
		snprintf(err, errlen, "stream \"%s\": user %s may not write the watermark table %s (backfill while "
			 "streaming writes its watermarks there); as an administrator run: GRANT %s ON %s TO '%s'",
			 st->name, user, name.data, missing.data, name.data, user);
		rc = SL_EPREREQ;
		goto out;
	}
	/* binlog filters: the table's rows must reach the binlog */
	if ((rc = sl_my_query(c, "SHOW MASTER STATUS", &res, err, errlen)) < 0)
		goto out;
	if (res && mysql_num_fields(res) >= 4 && (row = mysql_fetch_row(res))) {
		const char *doo = row[2] ? row[2] : "", *ign = row[3] ? row[3] : "";
		bool in_do = false, in_ign = false;
		for (int k = 0; k < 2; k++) {
			const char *p = k == 0 ? doo : ign;
			while (*p) {
				size_t n = strcspn(p, ",");
				if (n == strlen(db) && !strncmp(p, db, n))
					*(k == 0 ? &in_do : &in_ign) = true;
				p += n + (p[n] ? 1 : 0);
			}
		}
		if ((*doo && !in_do) || in_ign) {
			snprintf(err, errlen, "stream \"%s\": the server's binlog leaves out database `%s` of the watermark "
				 "table %s (binlog_do_db = \"%s\", binlog_ignore_db = \"%s\"), so watermarks would never "
				 "reach the stream: log that database, or set watermark_table to a table of a logged one",
				 st->name, db, name.data, doo, ign);
			rc = SL_EPREREQ;
		}
	}
	if (res)
		mysql_free_result(res);
	res = NULL;
out:
	if (res)
		mysql_free_result(res);
	sl_buf_free(&q);
	sl_buf_free(&name);
	sl_buf_free(&missing);
	return rc;
}

static int my_watermark_ready(const struct sl_source_config *cfg, const struct sl_source_stream *st, char *err,
			      size_t errlen)
{
	struct sl_my_server srv;
	bool absent;
	MYSQL *c = sl_my_connect(cfg, 30, &srv, err, errlen);
	int rc;

	if (!c)
		return sl_my_err_status();
	rc = wm_verify(c, cfg, st, &absent, err, errlen);
	mysql_close(c);
	return rc;
}

static int my_emit_watermark(void *ctx, const char *text, struct sl_position *at, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	struct sl_my_server srv;
	struct sl_buf q;
	int rc;

	memset(at, 0, sizeof *at);
	if (!s->wmc && !(s->wmc = sl_my_connect(s->cfg, 30, &srv, err, errlen)))
		return sl_my_err_status();
	sl_buf_init(&q, 0);
	sl_buf_puts(&q, "INSERT INTO ");
	sl_my_append_qualified(&q, s->wm_db, s->wm_table);
	sl_buf_puts(&q, " (stream, watermark) VALUES (");
	sl_my_append_literal(&q, s->st->name);
	sl_buf_puts(&q, ", ");
	sl_my_append_literal(&q, text);
	sl_buf_puts(&q, ") ON DUPLICATE KEY UPDATE watermark = VALUES(watermark)");
	if (sl_buf_failed(&q)) {
		sl_buf_free(&q);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	if (mysql_real_query(s->wmc, q.data, q.len) == 0) {
		sl_buf_free(&q);
		return SL_OK;
	}
	sl_buf_free(&q);
	switch (mysql_errno(s->wmc)) {
	case ER_NO_SUCH_TABLE: case ER_BAD_DB_ERROR: case ER_BAD_FIELD_ERROR: case ER_TABLEACCESS_DENIED_ERROR:
	case ER_COLUMNACCESS_DENIED_ERROR: case ER_DBACCESS_DENIED_ERROR: {
		/* say what to run; a restart reads the table from a snapshot
		 * before streaming instead (the agent asks watermark_ready) */
		bool absent;
		rc = wm_verify(s->wmc, s->cfg, s->st, &absent, err, errlen);
		if (rc == SL_EPREREQ) {
			size_t l = strlen(err);
			snprintf(err + l, errlen - l, "; so the table being backfilled while streaming is read from a "
				 "snapshot before streaming");
			return SL_ERESTART;
		}
		if (rc == SL_OK) {
			rc = SL_EFAIL;
			snprintf(err, errlen, "stream \"%s\": could not write a watermark into \"%s\".\"%s\"", s->st->name,
				 s->wm_db, s->wm_table);
		}
		return rc;
	}
	default: {
		char what[600];
		snprintf(what, sizeof what, "stream \"%s\": writing a watermark into \"%s\".\"%s\"", s->st->name, s->wm_db,
			 s->wm_table);
		rc = sl_my_err(err, errlen, what, s->wmc);
		mysql_close(s->wmc);   /* a new connection next time */
		s->wmc = NULL;
		return rc;
	}
	}
}

/* The primary key's column names of mt in index order (read once per table). */
static int pk_order(struct my_src *s, const struct sl_my_table *mt, const struct pk_order **out, char *err,
		    size_t errlen)
{
	struct pk_order *np, *k;
	struct sl_buf q;
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	int rc;

	for (int i = 0; i < s->npks; i++)
		if (!strcmp(s->pks[i].db, mt->db) && !strcmp(s->pks[i].name, mt->name)) {
			*out = &s->pks[i];
			return SL_OK;
		}
	sl_buf_init(&q, 0);
	sl_buf_puts(&q, "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ");
	sl_my_append_literal(&q, mt->db);
	sl_buf_puts(&q, " AND TABLE_NAME = ");
	sl_my_append_literal(&q, mt->name);
	sl_buf_puts(&q, " AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX");
	rc = sl_buf_failed(&q) ? SL_EFAIL : sl_my_query(s->meta, q.data, &res, err, errlen);
	sl_buf_free(&q);
	if (rc < 0)
		return rc;
	if (!(np = realloc(s->pks, sizeof *np * (size_t)(s->npks + 1))))
		goto oom;
	s->pks = np;
	k = &s->pks[s->npks];
	memset(k, 0, sizeof *k);
	if (!(k->db = strdup(mt->db)) || !(k->name = strdup(mt->name)) ||
	    !(k->cols = calloc(res ? mysql_num_rows(res) + 1 : 1, sizeof *k->cols))) {
		free(k->db);
		free(k->name);
		goto oom;
	}
	s->npks++;
	while (res && (row = mysql_fetch_row(res)))
		if (row[0] && (k->cols[k->n] = strdup(row[0])))
			k->n++;
	if (res)
		mysql_free_result(res);
	*out = k;
	return SL_OK;
oom:
	if (res)
		mysql_free_result(res);
	snprintf(err, errlen, "out of memory");
	return SL_EFAIL;
}

static int my_read_chunk(void *ctx, const struct sl_table *t, const char *after, uint64_t limit,
			 const struct sl_chunk_check *chk, sl_row_fn fn, void *payload, uint64_t *rows, char **last,
			 char *err, size_t errlen)
{
	struct my_src *s = ctx;
	const struct sl_my_table *mt = known_table(s, t->ns, t->name);
	const struct pk_order *pk;
	struct sl_my_read_how how;
	struct sl_snapshot_info info;
	struct sl_buf tail, key;
	int *keys = NULL, nkeys, rc;

	(void)chk;  /* judged by position: see above */
	*rows = 0;
	*last = NULL;
	if (!mt || !sl_table_has_key(t)) {
		snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" %s", s->st->name, t->ns, t->name,
			 mt ? "has no primary key to read it in chunks" : "is not one of the stream's tables");
		return SL_EFAIL;
	}
	if ((rc = pk_order(s, mt, &pk, err, errlen)) < 0)
		return rc;
	if (!(keys = calloc((size_t)t->ncols, sizeof *keys))) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	nkeys = sl_my_key_columns(t, (const char *const *)pk->cols, pk->n, keys);
	sl_buf_init(&tail, 0);
	sl_buf_init(&key, 0);
	if (after) {
		sl_buf_puts(&tail, " WHERE ");
		if (sl_my_key_after(&tail, mt, keys, nkeys, after) < 0) {
			snprintf(err, errlen, "table \"%s\".\"%s\": the backfill's resume key \"%s\" is not one of its keys",
				 t->ns, t->name, after);
			rc = SL_EFAIL;
			goto out;
		}
	}
	sl_buf_puts(&tail, " ORDER BY ");
	for (int i = 0; i < nkeys; i++) {
		if (i)
			sl_buf_puts(&tail, ", ");
		sl_my_append_ident(&tail, mt->cols[keys[i]].name);
	}
	sl_buf_printf(&tail, " LIMIT %" PRIu64, limit);
	if (sl_buf_failed(&tail)) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	if (!s->chunk && (rc = sl_my_snap_connect(&s->chunk, s->cfg, err, errlen)) < 0)
		goto out;
	if ((rc = sl_my_snap_begin(s->chunk, s->cfg, s->st, &s->srv, true, &info, err, errlen)) < 0)
		goto drop;
	if (s->has_returned && my_pos_compare(&info.pos, &s->returned) < 0) {
		/* a transaction the stream returned is not visible yet */
		char sf[SL_POS_TEXT_MAX], rf[SL_POS_TEXT_MAX];
		sl_my_pos_file(&info.pos, sf);
		sl_my_pos_file(&s->returned, rf);
		sl_debug("stream \"%s\": the snapshot for a chunk of %s.%s is at %s:%" PRIu64 ", before the end of the "
			 "last transaction returned (%s:%" PRIu64 "): read again", s->st->name, t->ns, t->name, sf,
			 info.pos.w[1], rf, s->returned.w[1]);
		rc = sl_my_snap_end(s->chunk, err, errlen) < 0 ? SL_EFAIL : SL_EAGAIN;
		if (rc == SL_EFAIL)
			goto drop;
		goto out;
	}
	how = (struct sl_my_read_how){ .tail = tail.data, .keys = keys, .nkeys = nkeys, .key = &key };
	rc = sl_my_snapshot_read_where(s->chunk, mt, t, &how, fn, payload, rows, &s->bf_stats, err, errlen);
	if (rc < 0) {
		sl_my_snap_rollback(s->chunk);
		if (rc == SL_EDATA)
			goto out;
		goto drop;
	}
	if ((rc = sl_my_snap_end(s->chunk, err, errlen)) < 0)
		goto drop;
	if (*rows > 0 && !(*last = sl_buf_detach(&key))) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
	}
	goto out;
drop:
	sl_my_snapshot_close(s->chunk);   /* a new connection next time */
	s->chunk = NULL;
out:
	free(keys);
	sl_buf_free(&tail);
	sl_buf_free(&key);
	return rc;
}


/* ---- check, probe, discard ---- */

static int my_check(const struct sl_source_config *cfg, const struct sl_source_stream *st,
		    const struct sl_source_resume *resume, FILE *out, char *err, size_t errlen)
{
	struct sl_my_server srv;
	struct sl_my_table *t = NULL;
	int n = 0, rc;
	MYSQL *c = sl_my_connect(cfg, 60, &srv, err, errlen);

	if (!c)
		return sl_my_err_status();
	fprintf(out, "stream %s: source %s: connected\n", st->name, cfg->name);
	if ((rc = sl_my_check_prereqs(c, &srv, cfg, st, out, err, errlen)) < 0)
		goto out;
	if ((rc = list_tables(c, &srv, cfg, st, &t, &n, err, errlen)) < 0)
		goto out;
	for (int i = 0; i < n; i++)
		fprintf(out, "stream %s: table %s.%s: %d columns%s\n", st->name, t[i].db, t[i].name, t[i].ncols,
			sl_table_has_key(t[i].version) ? "" : ", no primary key (append mode only)");
	warn_cascades(c, st, t, n, out);
	{
		/* backfill while streaming: the watermark table (its absence is no
		 * error: streaming and the initial backfill do without) */
		char e2[SL_ERRLEN * 2];
		bool absent;
		rc = wm_verify(c, cfg, st, &absent, e2, sizeof e2);
		if (rc == SL_OK) {
			fprintf(out, "stream %s: watermark table %s: ready for backfill while streaming\n", st->name,
				sl_my_conf(cfg)->watermark_table);
		} else if (rc == SL_EPREREQ && absent) {
			fprintf(out, "stream %s: source %s: warning: %s. Until it exists, a table is backfilled again only from "
				"a snapshot before streaming (the stream restarts for it)\n", st->name, cfg->name, e2);
		} else {
			snprintf(err, errlen, "%s", e2);
			goto out;
		}
	}
	if (resume && resume->has_position && !resume->reset) {
		if ((rc = judge_position(c, &srv, cfg, st, resume, &resume->durable, err, errlen)) < 0)
			goto out;
		char pos[2 * SL_POS_TEXT_MAX];
		if (my_pos_encode(&resume->durable, pos, sizeof pos) < 0)
			snprintf(pos, sizeof pos, "?");
		fprintf(out, "stream %s: binlog position %s: available\n", st->name, pos);
	} else {
		fprintf(out, "stream %s: binlog position: taken at the first run, with a snapshot for backfill\n", st->name);
	}
	rc = SL_OK;
out:
	sl_my_tables_free(t, n);
	mysql_close(c);
	return rc;
}

static int my_probe(const struct sl_source_config *cfg, const struct sl_source_stream *st,
		    struct sl_source_status *out, char *err, size_t errlen)
{
	struct sl_my_server srv;
	struct sl_my_binlog_file *logs = NULL;
	struct sl_position head;
	int n = 0, rc, need = -1;
	int64_t ret;
	MYSQL *c;

	memset(out, 0, sizeof *out);
	out->lag_bytes = out->retained_bytes = out->safe_bytes = -1;
	out->log_files = out->log_bytes = out->retention_s = out->oldest_needed_age_s = -1;
	out->time_to_purge_s = -1;
	if (!(c = sl_my_connect(cfg, 30, &srv, err, errlen)))
		return sl_my_err_status();
	if ((rc = sl_my_binlogs(c, &logs, &n, err, errlen)) < 0 || (rc = sl_my_head(c, &srv, &head, err, errlen)) < 0 ||
	    (rc = sl_my_retention_s(c, &ret, err, errlen)) < 0)
		goto out;
	out->log_files = n;
	out->log_bytes = 0;
	for (int i = 0; i < n; i++)
		out->log_bytes += (int64_t)logs[i].size;
	out->retention_s = ret;
	out->log_known = true;
	my_pos_encode(&head, out->head, sizeof out->head);
	if (st->durable) {
		char file[SL_POS_TEXT_MAX];
		sl_my_pos_file(st->durable, file);
		my_pos_encode(st->durable, out->confirmed, sizeof out->confirmed);
		snprintf(out->restart, sizeof out->restart, "%.63s", file);
		for (int i = 0; i < n; i++)
			if (!strcmp(logs[i].name, file))
				need = i;
		out->exists = need >= 0;
		out->hold = need >= 0 ? SL_HOLD_KEPT : SL_HOLD_LOST;
		snprintf(out->hold_word, sizeof out->hold_word, "%s", need >= 0 ? "available" : "lost");
		sl_source_figure_text(out, "position", out->confirmed);
		sl_source_figure_text(out, "needed_file", out->restart);
		sl_source_figure_text(out, "needed_file_status", out->hold_word);
		if (need >= 0) {
			int64_t lag = (int64_t)logs[need].size - (int64_t)st->durable->w[1], kept = 0;
			for (int i = need + 1; i < n; i++)
				lag += (int64_t)logs[i].size;
			for (int i = need; i < n; i++)
				kept += (int64_t)logs[i].size;
			out->lag_bytes = lag < 0 ? 0 : lag;
			out->retained_bytes = kept;
			/* The file the stream still needs stopped growing when the
			 * next began; the current file is never purged.  SQL does
			 * not say when an older file was closed, but it was still
			 * open when the last durable change was committed: its age
			 * is at most the time since then, so the time left before
			 * expiry is at least retention - that (an estimate on the
			 * safe side: an alert comes early, never late). */
			if (need == n - 1) {
				out->oldest_needed_age_s = 0;
			} else if (st->durable_ts_us > 0) {
				int64_t age = (sl_now_us() - st->durable_ts_us) / 1000000;
				out->oldest_needed_age_s = age < 0 ? 0 : age;
				if (ret > 0)
					out->time_to_purge_s = ret > age ? ret - age : 0;
			}
		}
	}
out:
	free(logs);
	mysql_close(c);
	return rc;
}

static int my_discard_position(const struct sl_source_config *cfg, const struct sl_source_stream *st,
			       const struct sl_source_resume *resume, bool dry_run, bool *renew, FILE *out,
			       char *err, size_t errlen)
{
	struct sl_my_server srv;
	char msg[SL_ERRLEN * 2];
	MYSQL *c;
	int rc;

	*renew = false;
	if (!resume || !resume->has_position || resume->reset)
		return SL_OK;
	if (!(c = sl_my_connect(cfg, 30, &srv, err, errlen)))
		return sl_my_err_status();
	rc = judge_position(c, &srv, cfg, st, resume, &resume->durable, msg, sizeof msg);
	mysql_close(c);
	if (rc == SL_ELOST) {
		*renew = true;
		if (!dry_run) {
			char pos[2 * SL_POS_TEXT_MAX];
			if (my_pos_encode(&resume->durable, pos, sizeof pos) < 0)
				snprintf(pos, sizeof pos, "?");
			fprintf(out, "stream %s: binlog position %s cannot be resumed (purged or not on the server)\n",
				st->name, pos);
		}
		return SL_OK;
	}
	if (rc < 0)
		snprintf(err, errlen, "%s", msg);
	return rc;
}

const struct sl_source_ops sl_my_source_ops = {
	.type = "mysql",
	.desc = &sl_my_desc,
	.keys = sl_my_keys,
	.nkeys = SL_MY_NKEYS,
	.conf_size = sizeof(struct sl_my_conf),
	/* The name PostgreSQL's gauge has, which dashboards know: available
	 * while the binlog file of the checkpoint's position is on the server. */
	.hold_metric = "sluice_slot_wal_status",
	.hold_label = "wal_status",
	.hold_help = "1 with whether the binlog file the stream needs is on the server (available, lost) as a label.",
	.check = my_check,
	.probe = my_probe,
	.discard_position = my_discard_position,
	.open = my_open,
	.close = my_close,
	.tables = my_tables,
	.prepare = my_prepare,
	.current_position = my_current_position,
	.snapshot = my_snapshot,
	.snapshot_read = my_snapshot_read,
	.snapshot_close = my_snapshot_close,
	.start = my_start,
	.next = my_next,
	.ack = my_ack,
	.emit_watermark = my_emit_watermark,
	.read_chunk = my_read_chunk,
	.watermark_ready = my_watermark_ready,
	.counters = my_counters,
	.log_heartbeats = true,
};
