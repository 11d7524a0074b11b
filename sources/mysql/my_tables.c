/*
 * sources/mysql/my_tables.c: the MySQL / MariaDB source's tables and its
 * checks: the stream's selected tables with their privileges, keys and
 * foreign key actions, and the check, probe and discard_position
 * operations.
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

/* ---- tables ---- */

struct sl_my_table *my_known_table(struct my_src *s, const char *db, const char *name)
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
	/* a table the checkpoint follows is left out only when it is gone */
	const struct sl_my_list_how how = {
		.mariadb = srv->mariadb, .include = st->tables, .exclude = st->exclude_tables, .only_db = NULL,
		.only_table = NULL, .describe = true, .expect = NULL, .nexpect = 0, .expect_names = st->known_tables,
	};
	int rc = sl_my_list_confirmed(c, &how, out, n, err, errlen);
	char wdb[256], wt[256];

	if (rc < 0)
		return rc;
	if (my_wm_name(sl_my_conf(cfg)->watermark_table, wdb, wt) == 0)
		my_drop_table(*out, n, wdb, wt);   /* its rows are watermarks, never changes */
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

int my_tables(void *ctx, struct sl_table ***out, int *n, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	int rc;

	*out = NULL;
	*n = 0;
	sl_my_tables_free(s->tables, s->ntables);
	s->tables = NULL;
	s->ntables = 0;
	/* the statements logged before this position are in the columns read
	 * next (a statement logged since may be too: my_hand_deferred).  A
	 * user without BINLOG MONITOR learns it from the checks that follow,
	 * with the GRANT to run (the stream does without) */
	s->ndeferred = 0;
	s->start_set = !s->replay && sl_my_head(s->meta, &s->srv, &s->start_at, err, errlen) == SL_OK;
	err[0] = '\0';
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
		s->tables[i].start_layout = s->tables[i].version->layout;
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

/* Whether the columns of a table of the stream changed since my_tables()
 * read them: 1 (err names the table), 0, or a failure.  A snapshot taken
 * after a DDL that came between the two would read the table's rows with
 * the columns read before it, and the DDL is behind the snapshot's
 * position, where the stream never reads it. */
int my_tables_moved(struct my_src *s, char *err, size_t errlen)
{
	struct sl_my_table *now = NULL;
	int n = 0, rc;

	if (s->replay)
		return 0;
	if ((rc = sl_my_list_tables(s->meta, s->srv.mariadb, s->st->tables, s->st->exclude_tables, NULL, NULL, true,
				    &now, &n, err, errlen)) < 0)
		return rc;
	for (int i = 0; i < s->ntables && rc == 0; i++) {
		const struct sl_my_table *t = &s->tables[i];
		for (int j = 0; j < n && rc == 0; j++) {
			if (strcmp(now[j].db, t->db) || strcmp(now[j].name, t->name) ||
			    sl_my_table_layout(&now[j]) == sl_my_table_layout(t))
				continue;
			snprintf(err, errlen, "stream \"%s\": the columns of table \"%s\".\"%s\" changed after they were "
				 "read and before the backfill's snapshot (%d columns, now %d)", s->st->name, t->db, t->name,
				 t->ncols, now[j].ncols);
			rc = 1;
		}
	}
	sl_my_tables_free(now, n);
	return rc;
}

/* ---- check, probe, discard ---- */

int my_check(const struct sl_source_config *cfg, const struct sl_source_stream *st,
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
		rc = my_wm_verify(c, cfg, st, &absent, e2, sizeof e2);
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
		if ((rc = my_judge_position(c, &srv, cfg, st, resume, &resume->durable, err, errlen)) < 0)
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

int my_probe(const struct sl_source_config *cfg, const struct sl_source_stream *st, struct sl_source_status *out,
	     char *err, size_t errlen)
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

int my_discard_position(const struct sl_source_config *cfg, const struct sl_source_stream *st,
			const struct sl_source_resume *resume, bool dry_run, bool *renew, FILE *out, char *err,
			size_t errlen)
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
	rc = my_judge_position(c, &srv, cfg, st, resume, &resume->durable, msg, sizeof msg);
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
