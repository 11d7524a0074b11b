/*
 * sources/mysql/my_source.c: the MySQL / MariaDB source behind struct
 * sl_source_ops (sources/source.h): the stream is the server's binlog, read
 * as a replica (my_dump.c) and decoded by the binlog library
 * (binlog_event.h, row_image.h); backfill reads a consistent snapshot
 * (my_backfill.c); the catalog is information_schema (my_catalog.c).
 *
 * This file holds the operations table, the context's life (open, close)
 * and the snapshots; my_internal.h lists the files of the rest.
 */
#include "sources/mysql/my_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

#define HEARTBEAT_MS 5000           /* the server's heartbeat period */
#define SILENCE_FACTOR 5 / 2        /* a connection silent for 2.5 heartbeats is dead */

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
int my_wm_name(const char *v, char *db, char *table)
{
	const char *dot = v ? strchr(v, '.') : NULL;

	if (!dot || dot == v || !dot[1] || strchr(dot + 1, '.') || (size_t)(dot - v) >= 256 || strlen(dot + 1) >= 256)
		return -1;
	snprintf(db, 256, "%.*s", (int)(dot - v), v);
	snprintf(table, 256, "%s", dot + 1);
	return 0;
}

bool my_is_wm(const struct my_src *s, const char *db, const char *name)
{
	return s->wm_db[0] && !strcmp(s->wm_db, db) && !strcmp(s->wm_table, name);
}

/* Whether the stream selects db.name: never the watermark table, whose
 * rows are watermarks, not changes. */
bool my_selects(const struct my_src *s, const char *db, const char *name)
{
	return !my_is_wm(s, db, name) && sl_my_selects(s->st->tables, s->st->exclude_tables, db, name);
}

/* Drops table db.name (the watermark table) from a list of n tables. */
void my_drop_table(struct sl_my_table *t, int *n, const char *db, const char *name)
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
		my_map_drop_shadow(&s->maps[i]);
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
	sl_buf_free(&s->wm_emitted);
	free_pks(s);
	for (int i = 0; i < s->ncovers; i++) {
		free(s->covers[i].db);
		free(s->covers[i].name);
		free(s->covers[i].first);
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
	sl_buf_init(&s->wm_emitted, 0);
	if (my_wm_name(cfg ? sl_my_conf(cfg)->watermark_table : "sluice.watermarks", s->wm_db, s->wm_table) < 0)
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

/* ---- snapshots ---- */

/* Test hook SLUICE_FAULT_MY_SNAPSHOT_WAIT=path: a snapshot for backfill
 * waits (up to 60 s) for file path to exist, so that a test can change a
 * table between the listing of the stream's tables and the snapshot. */
static void snapshot_fault_wait(const struct my_src *s)
{
	const char *path = getenv("SLUICE_FAULT_MY_SNAPSHOT_WAIT");

	if (!path)
		return;
	sl_info("stream \"%s\": test hook: the snapshot waits for \"%s\"", s->st->name, path);
	for (int i = 0; i < 1200 && access(path, F_OK) != 0; i++) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

static int my_snapshot(void *ctx, bool create, void **snap, struct sl_snapshot_info *info, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	struct sl_my_snap *sn;
	int rc;

	(void)create;  /* the stream's position is only the checkpoint's: nothing to create on the server */
	*snap = NULL;
	snapshot_fault_wait(s);
	if ((rc = sl_my_snapshot_open(&sn, s->cfg, s->st, &s->srv, info, err, errlen)) < 0)
		return rc;
	/* The rows are read with the columns my_tables() read: a DDL since
	 * then, before the snapshot's position, would be lost.  The stream
	 * starts again, with the tables as they are now. */
	if ((rc = my_tables_moved(s, err, errlen)) != 0) {
		sl_my_snapshot_close(sn);
		return rc < 0 ? rc : SL_ERESTART;
	}
	*snap = sn;
	return SL_OK;
}

static int my_snapshot_read(void *ctx, void *snap, const struct sl_table *t, sl_row_fn fn, void *payload,
			    uint64_t *rows, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	const struct sl_my_table *mt = my_known_table(s, t->ns, t->name);

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

static void my_counters(void *ctx, struct sl_source_counters *out)
{
	const struct my_src *s = ctx;

	memset(out, 0, sizeof *out);
	out->skipped_changes = s->skipped;
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
	.has_pending = my_has_pending,
	.ack = my_ack,
	.emit_watermark = my_emit_watermark,
	.read_chunk = my_read_chunk,
	.watermark_ready = my_watermark_ready,
	.counters = my_counters,
	.log_heartbeats = true,
};
