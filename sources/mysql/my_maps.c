/*
 * sources/mysql/my_maps.c: the binlog's TABLE_MAP events of the MySQL /
 * MariaDB source: which selected table a map names, whether its backfill
 * holds its changes (covered), and its table's new versions when the
 * layout changed (redescribe) or a table is new to the stream.
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

/* The `sluice backfill` that reads table t again, for messages. */
void my_backfill_hint(const struct my_src *s, const struct sl_my_table *t, char *out, size_t outlen)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_put_backfill_command(&b, s->st->config_path, s->st->name, t ? t->db : NULL, t ? t->name : NULL);
	snprintf(out, outlen, "%s", sl_buf_failed(&b) ? "sluice backfill" : b.data);
	sl_buf_free(&b);
}

int my_cover_of(struct my_src *s, const char *db, const char *name, struct cover **out, char *err, size_t errlen)
{
	struct cover *c = NULL;
	int rc;

	for (int i = 0; i < s->ncovers && !c; i++)
		if (!strcmp(s->covers[i].db, db) && !strcmp(s->covers[i].name, name))
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
		c->db = strdup(db);
		c->name = strdup(name);
		if (!c->db || !c->name) {
			free(c->db);
			free(c->name);
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		s->ncovers++;
		rc = s->st->hooks && s->st->hooks->covered
			? s->st->hooks->covered(s->st->hooks->payload, db, name, &c->until, err, errlen)
			: SL_COVER_NONE;
		if (rc < 0)
			return rc;
		c->kind = (enum sl_cover)rc;
	}
	*out = c;
	return SL_OK;
}

void my_cover_watermark(struct my_src *s, const char *text)
{
	for (int i = 0; i < s->ncovers; i++)
		if (s->covers[i].first && !strcmp(s->covers[i].first, text))
			s->covers[i].passed = true;
}

/* 1 when the changes of t in the open group are in its backfill (the
 * source skips them), 0 when not, or a failure.  The agent is asked once
 * a run, at the first need. */
int my_covered(struct my_src *s, const struct sl_my_table *t, char *err, size_t errlen)
{
	struct cover *c;
	struct sl_position at;
	int rc;

	if ((rc = my_cover_of(s, t->db, t->name, &c, err, errlen)) < 0)
		return rc;
	at = sl_my_pos(s->file, s->in_tx ? s->tx_start : s->ev.start, NULL, NULL);
	switch (c->kind) {
	case SL_COVER_UNTIL:
		return my_place_compare(&at, &c->until) < 0;
	case SL_COVER_FIRST_WATERMARK:
		return !c->passed;
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
int my_layout_unknown(struct my_src *s, const struct sl_my_table *t, const char *why, char *err, size_t errlen)
{
	struct sl_position at = sl_my_pos(s->file, s->ev.start, NULL, NULL);
	char at_text[600], hint[1200];
	int rc = 0;

	my_here(s, at_text, sizeof at_text);
	my_backfill_hint(s, t, hint, sizeof hint);
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

void my_maps_forget(struct my_src *s, const struct sl_my_table *t, const struct sl_binlog_table_map *keep)
{
	for (int k = 0; k < MAX_MAPS; k++)
		if (s->maps[k].t == t && &s->maps[k].tm != keep)
			s->maps[k].rawlen = 0;
}

/* t takes fresh's description, keeping what the stream knows of it. */
static void take_description(struct sl_my_table *t, struct sl_my_table *fresh)
{
	uint64_t start_layout = t->start_layout;
	bool deferred = t->deferred;

	sl_my_table_free(t);
	*t = *fresh;
	t->start_layout = start_layout;
	t->deferred = deferred;
}

/* A new version for table t from the catalog (or from the map when the
 * catalog no longer describes what the binlog holds and the map names its
 * columns); without a map and with only_layout, only if the catalog's has
 * that layout.  Returns 1 with *retired set when the version changed, 2 when
 * only the binlog's layout of the same columns did, 0 when nothing did, or
 * a failure. */
int my_redescribe(struct my_src *s, struct sl_my_table *t, const struct sl_binlog_table_map *tm,
		  uint64_t only_layout, struct sl_table **retired, char *err, size_t errlen)
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
				 my_here(s, at, sizeof at), t->db, t->name, why[0] ? why : "it no longer exists");
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
	if (n == 1 && !tm && only_layout && sl_my_table_layout(&fresh[0]) != only_layout) {
		sl_my_tables_free(fresh, n);
		return 0;
	}
	if (n != 1) {
		sl_my_tables_free(fresh, n);
		return 0;
	}
	/* the maps that completed their columns from the old description */
	my_maps_forget(s, t, tm);
	if (t->version && sl_table_same_columns(t->version, fresh[0].version)) {
		/* the same output columns; keep the description (charsets, strings)
		 * fresh, and say when the binlog's layout of them changed */
		struct sl_table *v = t->version;
		bool moved = v->layout != fresh[0].version->layout;
		v->layout = fresh[0].version->layout;
		t->version = NULL;
		sl_table_free(fresh[0].version);
		fresh[0].version = NULL;
		take_description(t, &fresh[0]);
		t->version = v;
		free(fresh);
		return moved ? 2 : 0;
	}
	*retired = t->version;
	t->version = NULL;
	take_description(t, &fresh[0]);
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
		 my_here(s, at, sizeof at), sl_buf_failed(&on) ? table : on.data, s->cfg->user ? s->cfg->user : "?",
		 sl_buf_failed(&on) ? table : on.data, s->cfg->user ? s->cfg->user : "?", db, table);
	sl_buf_free(&on);
	return SL_EPREREQ;
}

void my_map_drop_shadow(struct tmap *m)
{
	if (!m->shadow)
		return;
	if (m->t == m->shadow)
		m->t = NULL;
	sl_my_table_free(m->shadow);
	free(m->shadow);
	m->shadow = NULL;
}

/* Covered rows of table t whose map is not laid out as t's version (a DDL
 * between them and the catalog read at the start): a description from the
 * map, m's own, to decode them with, so
 * that they take the sequence numbers a run that wrote them gave them;
 * NULL (logged) when it cannot be built: the rows are skipped unnumbered. */
static struct sl_my_table *shadow_of(struct my_src *s, struct tmap *m, const struct sl_my_table *t)
{
	char err[SL_ERRLEN];

	if (!(m->shadow = calloc(1, sizeof *m->shadow))) {
		sl_warn("stream \"%s\": out of memory describing a table map of \"%s\".\"%s\"", s->st->name, t->db,
			t->name);
		return NULL;
	}
	if (sl_my_table_from_map(m->shadow, &m->tm, t, err, sizeof err) < 0) {
		sl_warn("stream \"%s\": %s: the changes after rows of \"%s\".\"%s\" that its backfill holds may be "
			"numbered otherwise than when they were read before", s->st->name, err, t->db, t->name);
		free(m->shadow);
		m->shadow = NULL;
		return NULL;
	}
	return m->shadow;
}

/* A TABLE_MAP: which table it maps, whether the stream follows it, and
 * whether its columns are still the version's.  Returns 1 with a schema
 * event in ev, 0, or a failure. */
int my_on_table_map(struct my_src *s, struct sl_event *ev, char *err, size_t errlen)
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
	m = my_map_by_id(s, id);
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
	m->recheck = m->covered = false;
	my_map_drop_shadow(m);
	if (sl_binlog_table_map_parse(&m->tm, &s->rd, e, err, errlen) < 0) {
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, " (at %s)", my_here(s, at, sizeof at));
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
	m->wm = my_is_wm(s, m->tm.db, m->tm.table);
	if (m->wm) {
		m->rawlen = e->body_len;
		return SL_OK;
	}
	t = my_known_table(s, m->tm.db, m->tm.table);
	if (!t) {
		if (!s->replay && my_selects(s, m->tm.db, m->tm.table)) {
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
	if ((rc = my_covered(s, t, err, errlen)) != 0) {
		/* Laid out as the columns sluice knows: decoded, so that the
		 * changes after them in the transaction are numbered as a run
		 * that did not skip them (the run before, killed) numbered them */
		enum sl_my_match mt = rc > 0 ? sl_my_map_match(&m->tm, t, why, sizeof why) : SL_MY_DIFFERENT;
		m->recheck = rc > 0;
		m->rawlen = rc > 0 ? e->body_len : 0;
		/* otherwise as the map describes them: with the binlog's names,
		 * or (MINIMAL, NO_LOG) the map's types under the catalog's names
		 * by position; only the rows' lengths and keys count, and a row
		 * that does not decode ends the event (covered_row) */
		if (mt != SL_MY_MATCH && rc > 0 && (t = shadow_of(s, m, t)))
			mt = sl_my_map_match(&m->tm, t, why, sizeof why);
		if (mt == SL_MY_MATCH) {
			if (my_grow_vals(s, t->ncols) < 0) {
				snprintf(err, errlen, "out of memory");
				return SL_EFAIL;
			}
			sl_my_map_complete(&m->tm, t);
			m->t = t;
			m->covered = true;
		}
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
			return my_layout_unknown(s, t, what, err, errlen);
		}
		/* The binlog's columns are not the version's: describe again. */
		rc = my_redescribe(s, t, &m->tm, 0, &retired, err, errlen);
		if (rc < 0)
			return rc;
		if (sl_my_map_match(&m->tm, t, why, sizeof why) != SL_MY_MATCH) {
			sl_table_free(retired);
			snprintf(err, errlen, "stream \"%s\": at %s, the rows of table \"%s\".\"%s\" do not match its "
				 "columns: %s", s->st->name, my_here(s, at, sizeof at), t->db, t->name, why);
			return SL_EDATA;
		}
		break;
	}
	sl_my_map_complete(&m->tm, t);
	m->t = t;
	m->rawlen = e->body_len;
	if (my_grow_vals(s, t->ncols) < 0) {
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
