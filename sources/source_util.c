/*
 * sources/source_util.c: helpers every source kind shares (see the end of
 * source.h): the recovery command that messages name, and the rules of the
 * stream's table selection that do not depend on the database.
 */
#include "sources/source.h"

#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/util.h"

int sl_source_backfill_command(struct sl_buf *b, const struct sl_source_stream *st)
{
	return sl_buf_put_backfill_command(b, st->config_path, st->name, NULL, NULL);
}

static struct sl_source_figure *add_figure(struct sl_source_status *out, const char *name)
{
	struct sl_source_figure *f;

	if (out->nfigures >= SL_SOURCE_NFIGURES)
		return NULL;
	f = &out->figures[out->nfigures++];
	memset(f, 0, sizeof *f);
	f->name = name;
	return f;
}

void sl_source_figure_text(struct sl_source_status *out, const char *name, const char *text)
{
	struct sl_source_figure *f = add_figure(out, name);

	if (f) {
		f->is_text = true;
		snprintf(f->text, sizeof f->text, "%s", text ? text : "");
	}
}

void sl_source_figure_num(struct sl_source_status *out, const char *name, int64_t num)
{
	struct sl_source_figure *f = add_figure(out, name);

	if (f)
		f->num = num;
}

int sl_source_check_exact(const struct sl_source_stream *st, const char *source, struct sl_table *const *tables,
			  int n, char *err, size_t errlen)
{
	struct sl_buf full;
	int rc = SL_OK;

	sl_buf_init(&full, 0);
	for (char *const *e = st->tables; e && *e && rc == SL_OK; e++) {
		bool found = false;
		if (strpbrk(*e, "*?[\\"))
			continue;  /* a glob: it may match nothing */
		for (char *const *k = st->known_tables; k && *k && !found; k++)
			found = !strcmp(*k, *e);  /* followed before: dropped since */
		for (int i = 0; i < n && !found; i++) {
			sl_buf_reset(&full);
			sl_buf_printf(&full, "%s.%s", tables[i]->ns, tables[i]->name);
			found = !sl_buf_failed(&full) && !strcmp(full.data, *e);
		}
		if (!found) {
			snprintf(err, errlen, "stream \"%s\": tables entry \"%s\" names no table on source \"%s\" (it "
				 "does not exist there, or exclude_tables leaves it out); an entry without *, ? or [ must "
				 "name a table", st->name, *e, source);
			rc = SL_ECONFIG;
		}
	}
	sl_buf_free(&full);
	return rc;
}

int sl_source_apply_key_columns(const struct sl_source_stream *st, struct sl_table **tables, int n, char *err,
				size_t errlen)
{
	struct sl_buf full;
	int rc = SL_OK;

	if (!st->key_columns || !*st->key_columns)
		return SL_OK;
	sl_buf_init(&full, 0);
	for (int i = 0; i < n && rc == SL_OK; i++) {
		struct sl_table *t = tables[i];
		bool named = false;
		sl_buf_reset(&full);
		sl_buf_printf(&full, "%s.%s.", t->ns, t->name);
		if (sl_buf_failed(&full)) {
			snprintf(err, errlen, "out of memory");
			rc = SL_EFAIL;
			break;
		}
		for (char *const *e = st->key_columns; *e; e++)
			named |= !strncmp(*e, full.data, full.len) && !strchr(*e + full.len, '.');
		if (!named)
			continue;
		for (int c = 0; c < t->ncols; c++)
			t->cols[c].is_key = false;
		for (char *const *e = st->key_columns; *e && rc == SL_OK; e++) {
			int c;
			if (strncmp(*e, full.data, full.len) != 0 || strchr(*e + full.len, '.'))
				continue;
			for (c = 0; c < t->ncols && strcmp(t->cols[c].name, *e + full.len) != 0; c++)
				;
			if (c == t->ncols) {
				snprintf(err, errlen, "stream \"%s\": key_columns entry \"%s\": table \"%s\".\"%s\" has no "
					 "column \"%s\"", st->name, *e, t->ns, t->name, *e + full.len);
				rc = SL_ECONFIG;
			} else {
				t->cols[c].is_key = true;
			}
		}
		if (rc == SL_OK && sl_table_finish(t) < 0) {
			snprintf(err, errlen, "out of memory");
			rc = SL_EFAIL;
		}
	}
	/* every entry names a selected table */
	for (char *const *e = st->key_columns; *e && rc == SL_OK; e++) {
		bool found = false;
		for (int i = 0; i < n && !found; i++) {
			sl_buf_reset(&full);
			sl_buf_printf(&full, "%s.%s.", tables[i]->ns, tables[i]->name);
			found = !sl_buf_failed(&full) && !strncmp(*e, full.data, full.len) && !strchr(*e + full.len, '.');
		}
		if (!found) {
			snprintf(err, errlen, "stream \"%s\": key_columns entry \"%s\" names no table the stream selects "
				 "(SCHEMA.TABLE.COLUMN, with the table in tables and not in exclude_tables)", st->name, *e);
			rc = SL_ECONFIG;
		}
	}
	sl_buf_free(&full);
	return rc;
}
