/*
 * sources/mysql/my_query.c: the binlog's QUERY events of the MySQL /
 * MariaDB source: DDL statements (new table versions, ended tables,
 * TRUNCATE), changes logged as statements, transaction control.
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
 * database dropped), whether or not a table of its name exists again: the
 * rows the stream wrote for it end there, with a TRUNCATE record (1),
 * unless its backfill comes after the statement, read again after a
 * restart (0); or a failure. */
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
 * before and after the catalog is read.  SL_OK, or my_layout_unknown()'s. */
static int ddl_live(struct my_src *s, const struct sl_my_table *t, char *err, size_t errlen)
{
	struct sl_position head, end = sl_my_pos(s->file, s->pos, NULL, NULL);
	int rc;

	if (s->names_logged)
		return SL_OK;
	if ((rc = sl_my_head(s->meta, &s->srv, &head, err, errlen)) < 0)
		return rc;
	if (my_place_compare(&head, &end) == 0)
		return SL_OK;
	return my_layout_unknown(s, t, "a DDL statement changed it while the stream was behind the server", err, errlen);
}

/* Whether the DDL gave the existing rows of x values that no row event
 * carries (sl_my_name.fill): 1 with the reason in s->why, 0, or a failure.
 * A primary key column made NOT NULL held no NULL before (t, the table).
 * A TIMESTAMP added without NULL or DEFAULT has one only when the server's
 * explicit_defaults_for_timestamp is OFF (the global value: the session
 * that ran the statement is gone). */
static int fill_why(struct my_src *s, const struct sl_my_table *t, const struct sl_my_name *x, char *err,
		    size_t errlen)
{
	char v[32] = "";
	bool found = false;
	int rc;

	switch (x->fill) {
	case SL_MY_FILL_NONE:
		return 0;
	case SL_MY_FILL_DEFAULT:
		snprintf(s->why, sizeof s->why, "column \"%s\" was added with a default, which the existing rows "
			 "have without a change", x->column);
		return 1;
	case SL_MY_FILL_VOLATILE:
		snprintf(s->why, sizeof s->why, "column \"%s\" was added with a default that is not a constant (an "
			 "expression, or a function such as CURRENT_TIMESTAMP), which gave the existing rows values "
			 "that no change carries", x->column);
		return 1;
	case SL_MY_FILL_NOT_NULL:
		for (int k = 0; k < t->ncols; k++)
			if (!strcasecmp(t->cols[k].name, x->column) && t->cols[k].mc.is_key)
				return 0;   /* a primary key column: never NULL before either */
		snprintf(s->why, sizeof s->why, "column \"%s\" was made NOT NULL, which turned its NULLs into the "
			 "type's implicit default without a change", x->column);
		return 1;
	case SL_MY_FILL_RENAMED:
		snprintf(s->why, sizeof s->why, "a column was renamed to \"%s\", and the existing rows hold its values "
			 "under the old name without a change", x->column);
		return 1;
	case SL_MY_FILL_TIMESTAMP:
		if ((rc = sl_my_query_value(s->meta, "SELECT @@global.explicit_defaults_for_timestamp", v, sizeof v,
					    &found, err, errlen)) < 0)
			return rc;
		if (found && (!strcmp(v, "1") || !strcasecmp(v, "ON")))
			return 0;
		snprintf(s->why, sizeof s->why, "column \"%s\" was added as a TIMESTAMP under "
			 "explicit_defaults_for_timestamp = OFF, which gave the existing rows a value (CURRENT_TIMESTAMP "
			 "for the table's first TIMESTAMP) without a change", x->column);
		return 1;
	}
	return 0;
}

/* Whether offset, in the binlog file being read, is below the run's start. */
static bool below_start(const struct my_src *s, uint64_t offset)
{
	struct sl_position at = sl_my_pos(s->file, offset, NULL, NULL);

	return s->start_set && my_place_compare(&at, &s->start_at) < 0;
}

/* A DDL statement read below the run's start (a replay from the
 * checkpoint) that changed t: the catalog describes t as it was at the
 * start, after every later statement too, so its columns there may be
 * ahead of the binlog's here.  Handed to the destination, a column that a
 * later statement added would go with the next map's version (without it)
 * and come back with that statement: a drop and an add, a new Iceberg field
 * id.  When the binlog names the columns, the next map of t describes it
 * (my_on_table_map), and the catalog's version goes to the destination
 * once the stream passes the start (my_hand_deferred), if no map did.  Not
 * a statement that gave the existing rows values (a backfill again, which
 * reads the catalog's columns).  1 deferred, 0, or a failure. */
static int defer(struct my_src *s, struct sl_my_table *t, const struct sl_my_name *x, char *err, size_t errlen)
{
	int filled;

	if (!s->names_logged || !below_start(s, s->ev.start))
		return 0;
	if ((filled = fill_why(s, t, x, err, errlen)) != 0)
		return filled < 0 ? filled : 0;
	if (!t->deferred) {
		t->deferred = true;
		s->ndeferred++;
	}
	/* the maps of the old version are stale */
	my_maps_forget(s, t, NULL);
	sl_debug("stream \"%s\": table \"%s\".\"%s\": a DDL statement below the run's start: its columns come "
		 "from its next table map, or from the catalog at the start", s->st->name, t->db, t->name);
	return 1;
}

/* t's new version (rc: my_redescribe's, 1 when its columns changed) as
 * the SCHEMA event ev, the version it replaced retired; the maps of the old
 * version are stale.  Returns 1. */
static int schema_event(struct my_src *s, struct sl_my_table *t, struct sl_event *ev, int rc,
			struct sl_table *retired)
{
	ev->kind = SL_EV_SCHEMA;
	ev->table = t->version;
	ev->changed = rc == 1;
	ev->retired = retired;
	my_maps_forget(s, t, NULL);
	return 1;
}

/* A DDL statement that changed t where t's backfill holds its events
 * (my_covered): no row event of t is read before the backfill, so the
 * statement changes nothing the stream writes.  But a backfill while
 * streaming that has not read its first chunk yet (its first low
 * watermark is still to come) reads the table after the statement, with
 * the stream's description of t: that must be the table's columns now,
 * the catalog's, or a column the statement added is never read (issue 17,
 * soak seed 4620, mariadb/merge/iceberg: a column added after the run read
 * the catalog, before its resumed backfill's first watermark, never reached
 * the destination).  1 with the new version in ev (no backfill: the one
 * running reads it), 0, or a failure. */
static int covered_ddl(struct my_src *s, struct sl_my_table *t, struct sl_event *ev, char *err, size_t errlen)
{
	struct sl_table *retired = NULL;
	struct cover *c;
	int rc;

	if ((rc = my_cover_of(s, t->db, t->name, &c, err, errlen)) < 0)
		return rc;
	if (c->kind != SL_COVER_FIRST_WATERMARK)
		return 0;   /* a snapshot at a position after the statement: read with the catalog's columns */
	if ((rc = my_redescribe(s, t, NULL, 0, &retired, err, errlen)) <= 0)
		return rc;
	sl_info("stream \"%s\": table \"%s\".\"%s\": a DDL statement before its backfill's first chunk changed it: "
		"the chunks read its columns now (schema version %s)", s->st->name, t->db, t->name,
		t->version ? t->version->schema_key : "?");
	return schema_event(s, t, ev, rc, retired);
}

/* sl_source_ops.has_pending: versions due at the run's start (the agent
 * asks once the stream reported a position past it). */
bool my_has_pending(void *ctx)
{
	const struct my_src *s = ctx;

	return s->ndeferred > 0;
}

/* Once the stream passed the run's start, between groups: the catalog's
 * version of each deferred table, as an SL_EV_SCHEMA (1), one a call. */
int my_hand_deferred(struct my_src *s, struct sl_event *ev, char *err, size_t errlen)
{
	struct sl_position here;
	int rc;

	if (s->ndeferred == 0 || s->in_tx || s->xa_in || s->truncating || below_start(s, s->pos))
		return 0;
	here = sl_my_pos(s->file, s->pos, NULL, NULL);
	for (int i = 0; i < s->ntables; i++) {
		struct sl_my_table *t = &s->tables[i];
		struct sl_table *retired = NULL;
		if (!t->deferred)
			continue;
		t->deferred = false;
		s->ndeferred--;
		if (t->gone)
			continue;
		/* the catalog's columns, if they are still those of the start
		 * (a statement after it, read later, describes t again), or
		 * whatever they are with the stream at the server's head */
		if ((rc = my_redescribe(s, t, NULL, t->start_layout, &retired, err, errlen)) < 0)
			return rc;
		if (rc == 0) {
			struct sl_position head;
			if (sl_my_head(s->meta, &s->srv, &head, err, errlen) == SL_OK && my_place_compare(&head, &here) == 0 &&
			    (rc = my_redescribe(s, t, NULL, 0, &retired, err, errlen)) < 0)
				return rc;
			err[0] = '\0';
		}
		/* (a new description forgot t's maps: my_redescribe) handed
		 * also when it is the version the stream had from the start:
		 * the destination may not have it (one it has costs nothing) */
		if (!t->version)
			continue;
		sl_info("stream \"%s\": table \"%s\".\"%s\": its columns at the run's start go to the destination "
			"(schema version %s): no change of it since a DDL statement read below the start described it",
			s->st->name, t->db, t->name, t->version->schema_key);
		ev->kind = SL_EV_SCHEMA;
		ev->table = t->version;
		ev->changed = rc == 1;
		ev->retired = retired;
		return 1;
	}
	s->ndeferred = 0;
	return 0;
}

/* A statement that changed a database (or could not be read): the
 * selection again.  DROP DATABASE ends the followed tables in it (their
 * rows end with a marker my_here, gone when no table of their name exists
 * now); a table new to the selection, or one missing that no statement
 * ended, restarts the stream (SL_ERESTART).  SL_OK or a failure. */
static int db_ddl(struct my_src *s, enum sl_my_stmt kind, const struct sl_my_name *names, int n,
		  const struct sl_position *at, char *err, size_t errlen)
{
	struct sl_my_table *now = NULL;
	int nnow = 0, rc;

	/* DROP DATABASE: its followed tables end my_here, as for DROP TABLE,
	 * whether they exist again (the database and the tables created again
	 * before the stream read the statement) or not (gone, below) */
	for (int i = 0; i < n && kind == SL_MY_STMT_DB_DDL; i++) {
		if (names[i].role != SL_MY_ENDS || names[i].table[0])
			continue;
		for (int k = 0; k < s->ntables; k++)
			if (!strcmp(s->tables[k].db, names[i].db) && !s->tables[k].gone &&
			    (rc = end_table(s, &s->tables[k], at, err, errlen)) < 0)
				return rc;
	}
	/* a database changed, or a statement that cannot be read: the selection again */
	{
		const struct sl_my_list_how how = {
			.mariadb = s->srv.mariadb, .include = s->st->tables, .exclude = s->st->exclude_tables,
			.only_db = NULL, .only_table = NULL, .describe = false, .expect = s->tables,
			.nexpect = s->ntables, .expect_names = NULL,
		};
		if ((rc = sl_my_list_confirmed(s->meta, &how, &now, &nnow, err, errlen)) < 0)
			return rc;
	}
	if (s->wm_db[0])
		my_drop_table(now, &nnow, s->wm_db, s->wm_table);
	rc = SL_OK;
	for (int i = 0; i < nnow && rc == SL_OK; i++) {
		/* a gone table created again is known: its CREATE, read later,
		 * describes it */
		if (!my_known_table(s, now[i].db, now[i].name)) {
			snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" is new", s->st->name, now[i].db,
				 now[i].name);
			rc = SL_ERESTART;
		}
	}
	for (int k = 0; k < s->ntables && rc == SL_OK; k++) {
		bool listed = false, ended = false;
		for (int i = 0; i < nnow && !listed; i++)
			listed = !strcmp(now[i].db, s->tables[k].db) && !strcmp(now[i].name, s->tables[k].name);
		for (int i = 0; i < n && kind == SL_MY_STMT_DB_DDL && !ended; i++)
			ended = names[i].role == SL_MY_ENDS && !names[i].table[0] && !strcmp(names[i].db, s->tables[k].db);
		if (listed || s->tables[k].gone)
			continue;
		if (ended) {
			s->tables[k].gone = true;   /* its database was dropped: ended above */
			continue;
		}
		snprintf(err, errlen, "stream \"%s\": the selected tables changed (a table was created, dropped or renamed)",
			 s->st->name);
		rc = SL_ERESTART;
	}
	sl_my_tables_free(now, nnow);
	return rc;
}

/* The tables a DDL statement touched: new versions, restarts. */
static int on_ddl(struct my_src *s, enum sl_my_stmt kind, struct sl_my_name *names, int n, struct sl_event *ev,
		  char *err, size_t errlen)
{
	struct sl_my_table *now = NULL, *shown = NULL;
	struct sl_position at;
	char here[600];
	int nnow = 0, rc, live, filled;

	if (s->replay)
		return SL_OK;
	at = sl_my_pos(s->file, s->ev.start, NULL, NULL);
	if (kind == SL_MY_STMT_TABLE_DDL) {
		/* The catalog is read now, not as of the statement: the table a
		 * name has now may have come after the statement.  The roles the
		 * statement gives its names (my_ddl.c) tell what the catalog
		 * cannot: which followed table ended my_here, and which name was
		 * given a table with rows of its own. */
		/* first the names given rows without row events (RENAME ... TO a
		 * followed name, a partition truncated, dropped or exchanged): the
		 * stream never read them */
		for (int i = 0; i < n; i++) {
			struct sl_my_table *t = my_known_table(s, names[i].db, names[i].table);
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
			struct sl_my_table *t = my_known_table(s, names[i].db, names[i].table);
			struct sl_table *retired = NULL;
			bool selected = my_selects(s, names[i].db, names[i].table);
			if (!t && !selected)
				continue;
			/* a followed table missing from the catalog is gone only
			 * if it cannot be opened (a copying ALTER TABLE hides it
			 * from the catalog for a moment) */
			const struct sl_my_list_how how = {
				.mariadb = s->srv.mariadb, .include = (char *const[]){ "*", NULL }, .exclude = NULL,
				.only_db = names[i].db, .only_table = names[i].table, .describe = false, .expect = t,
				.nexpect = t ? 1 : 0, .expect_names = NULL,
			};
			if ((rc = sl_my_list_confirmed(s->meta, &how, &now, &nnow, err, errlen)) < 0)
				return rc;
			sl_my_tables_free(now, nnow);
			if (t && nnow == 0 && names[i].role == SL_MY_ENDS) {
				/* dropped or renamed away by this statement, and no table
				 * has its name now: its rows end here, and the stream goes
				 * on (a table created under its name later is read from
				 * its CREATE on; a table renamed to a selected name is new
				 * to the stream, below) */
				if ((rc = end_table(s, t, &at, err, errlen)) < 0)
					return rc;
				if (rc > 0)
					sl_info("stream \"%s\": table \"%s\".\"%s\" was dropped or renamed away at %s: "
						"its rows end with a TRUNCATE marker", s->st->name, t->db, t->name,
						my_here(s, here, sizeof here));
				t->gone = true;
				continue;
			}
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
			t->gone = false;   /* a table has its name (again) */
			if (names[i].role == SL_MY_BINDS)
				continue;  /* above */
			if (names[i].role == SL_MY_ENDS) {
				if ((rc = end_table(s, t, &at, err, errlen)) < 0)
					return rc;
				if (rc == 0)
					continue;  /* backfilled after this statement */
			}
			if ((rc = my_covered(s, t, err, errlen)) < 0)
				return rc;
			if (rc > 0) {
				/* its backfill comes after the statement */
				if ((rc = covered_ddl(s, t, ev, err, errlen)) != 0)
					return rc;
				continue;
			}
			if ((rc = defer(s, t, &names[i], err, errlen)) < 0)
				return rc;
			if (rc > 0)
				continue;
			if ((rc = ddl_live(s, t, err, errlen)) < 0)
				return rc;
			if ((rc = my_redescribe(s, t, NULL, 0, &retired, err, errlen)) < 0)
				return rc;
			if ((live = ddl_live(s, t, err, errlen)) < 0) {
				s->orphan = retired;  /* changes queued before may still use it */
				return live;
			}
			if ((filled = fill_why(s, t, &names[i], err, errlen)) < 0) {
				sl_table_free(retired);
				return filled;
			}
			if (filled)
				ev->rebackfill = s->why;
			if (rc > 0 || filled)
				return schema_event(s, t, ev, rc, retired);
			if (!shown && t->version)
				shown = t;
		}
		/* The statement changed no column the stream knew of: the table
		 * may have been described after it (the stream started after the
		 * statement, and no row of the table came since), so its version
		 * goes to the writer all the same, for the destination to take
		 * when no change brings it (sl_sink_ops.version; a version the
		 * destination has already costs nothing). */
		if (shown) {
			ev->kind = SL_EV_SCHEMA;
			ev->table = shown->version;
			ev->changed = false;
			ev->retired = NULL;
			return 1;
		}
		return SL_OK;
	}
	return db_ddl(s, kind, names, n, &at, err, errlen);
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
	if (n > 0 && !several && (t = my_known_table(s, names[0].db, names[0].table)) && (rc = my_covered(s, t, err, errlen)))
		return rc < 0 ? rc : SL_OK;
	if (n > 0 && !several && !t)
		return SL_OK;
	if (several && !my_known_table(s, names[0].db, names[0].table))
		return SL_OK;  /* its first table is not followed (as before: the others are not known) */
	for (int i = 0; (several || n == 0) && i < s->ntables; i++) {
		if ((rc = my_covered(s, &s->tables[i], err, errlen)) < 0)
			return rc;
		if (rc == 0)
			break;
		if (i == s->ntables - 1)
			return SL_OK;
	}
	my_backfill_hint(s, several || n == 0 ? NULL : t, hint, sizeof hint);
	snprintf(err, errlen, "stream \"%s\": at %s, a change was logged as a statement (binlog_format = STATEMENT or "
		 "MIXED in that session): \"%.*s\". sluice reads ROW events only: set binlog_format=ROW for every "
		 "session, then run `%s`", s->st->name, my_here(s, at, sizeof at),
		 (int)(q->sql_len < 200 ? q->sql_len : 200), q->sql, hint);
	return SL_EPREREQ;
}

/* A QUERY event.  Returns 1 with ev filled, 0, or a failure. */
int my_on_query(struct my_src *s, struct sl_event *ev, char *err, size_t errlen)
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
				my_start_group(s, s->ev.start);
			return SL_OK;
		}
		if ((q->sql_len >= 6 && !strncasecmp(q->sql, "COMMIT", 6)) ||
		    (q->sql_len >= 8 && !strncasecmp(q->sql, "ROLLBACK", 8) && !(q->sql_len > 8 && q->sql[8] == ' '))) {
			/* MyISAM groups end in COMMIT; a ROLLBACK ends a group whose
			 * non-transactional changes did happen */
			if (s->in_tx && my_end_group(s, ev))
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
			if (!(h = my_take_held(s, xid))) {
				sl_debug("stream \"%s\": XA COMMIT of %s, which prepared no change the stream reads", s->st->name,
					 xid);
			} else {
				s->xa_in = h->events;
				h->events = NULL;
				rewind(s->xa_in);
				free(h);
			}
			if (!s->in_tx)
				my_start_group(s, s->ev.start);
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
			if ((h = my_take_held(s, xid))) {
				fclose(h->events);
				free(h);
			}
		}
		if (s->in_tx && s->standalone && !s->xa_prepare && my_end_group(s, ev))
			return 1;
		return SL_OK;
	}
	if (!s->in_tx)
		my_start_group(s, s->ev.start);  /* a statement alone (no GTID event) */
	switch (kind) {
	case SL_MY_STMT_TRUNCATE:
		for (int i = 0; i < n && i < 16; i++) {
			struct sl_my_table *t = my_known_table(s, names[i].db, names[i].table);
			/* Skipped where the table's backfill holds it, as its rows
			 * are: a backfill while streaming applies it to its open
			 * chunk, read after it, whose rows the inserts after it
			 * (skipped) would not bring back (issue 17, seed 205) */
			if (t && (rc = my_covered(s, t, err, errlen)) < 0)
				return rc;
			if (t && rc == 0)
				queue_truncate(s, names[i].db, names[i].table);
		}
		break;
	case SL_MY_STMT_TABLE_DDL:
	case SL_MY_STMT_DB_DDL:
	case SL_MY_STMT_UNKNOWN_DDL:
		if ((rc = on_ddl(s, kind, names, n, ev, err, errlen)) != 0) {
			if (rc > 0) {
				s->standalone = true;
				s->ddl_end = true;   /* my_next ends its group next */
			}
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
	if (s->in_tx && my_end_group(s, ev))
		return 1;
	return SL_OK;
}

/* Whether the group starting at the current event was written before the
 * restart (it lies before the start position's done point, which a held XA
 * transaction set back).  An XA COMMIT or ROLLBACK group among them ends
 * its prepared transaction, held again when it was read again: it is
 * dropped (its changes were written then). */
