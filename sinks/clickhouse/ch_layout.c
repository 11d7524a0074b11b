/*
 * sinks/clickhouse/ch_layout.c: table layouts, the merge version, and rows
 * (see ch_layout.h).
 */
#include "sinks/clickhouse/ch_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/clickhouse/ch_sql.h"

int ch_version(uint64_t pos, uint32_t seq, uint64_t shift, uint64_t *out)
{
	uint64_t base;

	if (pos >= CH_VERSION_POS_LIMIT)
		return -1;
	base = pos << CH_VERSION_SEQ_BITS;
	if (shift > UINT64_MAX - base || seq > UINT64_MAX - base - shift)
		return -1;
	*out = base + shift + seq;
	return 0;
}

/* The index of the first step at pos or after it. */
static size_t vmap_find(const struct ch_vmap *m, uint64_t pos)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->steps[mid].pos < pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint64_t ch_vmap_shift(const struct ch_vmap *m, uint64_t pos)
{
	size_t i = vmap_find(m, pos);

	return i > 0 ? m->steps[i - 1].shift : 0;
}

int ch_vmap_add(struct ch_vmap *m, uint64_t pos, uint64_t shift)
{
	size_t i = vmap_find(m, pos);

	if (i < m->n && m->steps[i].pos == pos) {
		if (m->steps[i].shift == shift)
			return 0;
		m->steps[i].shift = shift;
		return 1;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 8;
		struct ch_vstep *st = realloc(m->steps, cap * sizeof *st);
		if (!st)
			return -1;
		m->steps = st;
		m->cap = cap;
	}
	memmove(m->steps + i + 1, m->steps + i, (m->n - i) * sizeof *m->steps);
	m->steps[i].pos = pos;
	m->steps[i].shift = shift;
	m->n++;
	return 1;
}

bool ch_vmap_pending(const struct ch_vmap *m)
{
	return m->open && !m->closed && m->top > CH_VERSION_ROOM;
}

int ch_vmap_close(struct ch_vmap *m, struct ch_vstep *step)
{
	if (!ch_vmap_pending(m))
		return 0;
	/* the position's changes used versions up to (pos << 8) + shift + top:
	 * the next position starts after them */
	step->pos = m->pos;
	step->shift = ch_vmap_shift(m, m->pos) + (m->top - CH_VERSION_ROOM);
	if (ch_vmap_add(m, step->pos, step->shift) < 0)
		return -1;
	m->closed = true;
	return 1;
}

int ch_vmap_note(struct ch_vmap *m, uint64_t pos, uint32_t seq, struct ch_vstep *step)
{
	int rc = 0;

	if (m->open && m->pos == pos) {
		if (seq > m->top) {
			m->top = seq;
			m->closed = false;
		}
		return 0;
	}
	if ((rc = ch_vmap_close(m, step)) < 0)
		return -1;
	m->open = true;
	m->closed = false;
	m->pos = pos;
	m->top = seq;
	return rc;
}

void ch_vmap_free(struct ch_vmap *m)
{
	free(m->steps);
	memset(m, 0, sizeof *m);
}

static const char *const meta_names[CH_M_FIXED] = {
	[CH_M_UUID] = "_uuid",
	[CH_M_SOURCE_TS] = "_source_timestamp",
	[CH_M_READ_TS] = "_read_timestamp",
	[CH_M_CHANGE_TYPE] = "_change_type",
	[CH_M_CSN] = "_csn",
	[CH_M_VERSION] = "_version",
	[CH_M_IS_DELETED] = "_is_deleted",
	[CH_M_TX_ID] = "_tx_id",
	[CH_M_UNCHANGED] = "_unchanged_columns",
};

/* The metadata columns' types in the legacy layout; the modern layout has
 * UUID and DateTime64(6, 'UTC') instead of the first three (meta_type). */
static const enum ch_ctype meta_types[CH_M_FIXED] = {
	[CH_M_UUID] = CH_STRING,
	[CH_M_SOURCE_TS] = CH_INT64,
	[CH_M_READ_TS] = CH_INT64,
	[CH_M_CHANGE_TYPE] = CH_STRING,
	[CH_M_CSN] = CH_STRING,
	[CH_M_VERSION] = CH_UINT64,
	[CH_M_IS_DELETED] = CH_UINT8,
	[CH_M_TX_ID] = CH_UINT64,
	[CH_M_UNCHANGED] = CH_ARRAY_STRING,
};

static enum ch_ctype meta_type(int m, enum ch_flavor fl)
{
	if (fl == CH_MODERN && m == CH_M_UUID)
		return CH_UUID;
	if (fl == CH_MODERN && (m == CH_M_SOURCE_TS || m == CH_M_READ_TS))
		return CH_DATETIME64_UTC;
	return meta_types[m];
}

const char *ch_meta_name(int m)
{
	return m >= 0 && m < CH_M_FIXED ? meta_names[m] : NULL;
}

char *ch_column_name(const char *name)
{
	size_t n = strlen(name);
	char *s = malloc(n + 2);

	if (!s)
		return NULL;
	if (name[0] == '_') {
		s[0] = '_';
		memcpy(s + 1, name, n + 1);
	} else {
		memcpy(s, name, n + 1);
	}
	return s;
}

void ch_layout_free(struct ch_layout *l)
{
	if (!l)
		return;
	for (int i = 0; i < l->ncols; i++) {
		free(l->cols[i].name);
		free(l->cols[i].comment);
	}
	for (int i = 0; i < l->nkeep; i++)
		free(l->keep[i]);
	free(l->keep);
	free(l->cols);
	free(l->of_src);
	free(l->keys);
	free(l->object);
	free(l);
}

/* Rebuilds of_src, of_meta and keys from cols. */
static void index_layout(struct ch_layout *l)
{
	int k = 0;

	for (int m = 0; m < CH_M_POS + SL_META_MAX; m++)
		l->of_meta[m] = -1;
	for (int i = 0; i < l->ncols; i++) {
		if (l->cols[i].src >= 0)
			l->of_src[l->cols[i].src] = i;
		else
			l->of_meta[l->cols[i].meta] = i;
	}
	/* keys in source order */
	for (int s = 0; s < l->nsrc; s++) {
		int c = l->of_src[s];
		if (l->cols[c].key)
			l->keys[k++] = c;
	}
	l->nkeys = k;
}

int ch_layout_new(struct ch_layout **out, const struct sl_table *t, bool merge, enum ch_flavor fl, char *err,
		  size_t errlen)
{
	const struct sl_source_desc *d = t->src;
	int nmeta = d ? d->nmeta : 0;
	struct ch_layout *l;
	int n = 0;

	*out = NULL;
	if (nmeta > SL_META_MAX)
		nmeta = SL_META_MAX;
	if (merge && t->ncols > 0 && !sl_table_has_key(t)) {
		snprintf(err, errlen, "table \"%s\".\"%s\" has no primary key: write_mode = merge needs one "
			 "(use write_mode = append for it)", t->ns, t->name);
		return -1;
	}
	l = calloc(1, sizeof *l);
	if (!l)
		goto oom;
	l->merge = merge;
	l->flavor = fl;
	l->desc = d;
	l->nsrc = t->ncols;
	l->nmeta_pos = nmeta;
	memcpy(l->schema_key, t->schema_key, sizeof l->schema_key);
	l->cols = calloc((size_t)(t->ncols + CH_M_FIXED + nmeta), sizeof *l->cols);
	l->of_src = calloc((size_t)t->ncols + 1, sizeof *l->of_src);
	l->keys = calloc((size_t)t->ncols + 1, sizeof *l->keys);
	l->object = strdup(t->object ? t->object : "");
	if (!l->cols || !l->of_src || !l->keys || !l->object)
		goto oom;
	for (int i = 0; i < t->ncols; i++, n++) {
		const struct sl_column *sc = &t->cols[i];
		struct ch_col *c = &l->cols[n];
		bool key = merge && sc->is_key;
		c->src = i;
		c->meta = -1;
		c->key = key;
		if (!(c->name = ch_column_name(sc->name)) || (sc->doc && !(c->comment = strdup(sc->doc))))
			goto oom;
		if (ch_type_of_column(&c->type, sc, !key, fl) < 0) {
			snprintf(err, errlen, "table \"%s\".\"%s\": column \"%s\" has an unknown type %d",
				 t->ns, t->name, sc->name, (int)sc->type);
			l->ncols = n + 1;
			goto fail;
		}
	}
	for (int m = 0; m < CH_M_FIXED + nmeta; m++, n++) {
		struct ch_col *c = &l->cols[n];
		c->src = -1;
		c->meta = m;
		c->type.sl = SL_T_STRING;
		if (m < CH_M_FIXED) {
			c->name = strdup(meta_names[m]);
			c->type.ch = meta_type(m, fl);
			c->key = !merge && (m == CH_M_CSN || m == CH_M_UUID);
		} else {
			const struct sl_meta_field *f = &d->meta[m - CH_M_FIXED];
			size_t len = strlen(f->name);
			if ((c->name = malloc(len + 2))) {
				c->name[0] = '_';
				memcpy(c->name + 1, f->name, len + 1);
			}
			c->type.ch = f->type == SL_META_LONG ? CH_INT64 : CH_STRING;
			c->type.nullable = f->type == SL_META_OPT_STRING;
		}
		if (!c->name) {
			l->ncols = n + 1;
			goto oom;
		}
	}
	l->ncols = n;
	index_layout(l);
	*out = l;
	return 0;
oom:
	snprintf(err, errlen, "table \"%s\".\"%s\": out of memory", t->ns, t->name);
fail:
	ch_layout_free(l);
	return -1;
}

/* Type texts compared without spaces: "Decimal(12, 2)" and "Decimal(12,2)". */
static bool same_type(const char *a, const char *b)
{
	for (;;) {
		while (*a == ' ')
			a++;
		while (*b == ' ')
			b++;
		if (*a != *b)
			return false;
		if (!*a)
			return true;
		a++;
		b++;
	}
}

static int find_col(const struct ch_layout *l, const char *name)
{
	for (int i = 0; i < l->ncols; i++)
		if (!strcmp(l->cols[i].name, name))
			return i;
	return -1;
}

int ch_layout_keep(struct ch_layout *l, const char *name)
{
	char **k = realloc(l->keep, (size_t)(l->nkeep + 1) * sizeof *k);

	if (!k)
		return -1;
	l->keep = k;
	if (!(k[l->nkeep] = strdup(name)))
		return -1;
	l->nkeep++;
	return 0;
}

/* Whether destination column name is one l keeps (ch_layout_keep). */
static bool kept_col(const struct ch_layout *l, const char *name)
{
	for (int i = 0; i < l->nkeep; i++)
		if (!strcmp(l->keep[i], name))
			return true;
	return false;
}

/* The message for column c, of type have in ClickHouse, where the source
 * table needs type need; made is the type sluice made it with (NULL: not
 * known). */
static void type_changed(char *err, size_t errlen, const char *object, const char *c, const char *have,
			 const char *need, const char *made)
{
	if (!made)
		snprintf(err, errlen, "table \"%s\": column \"%s\" has type %s in ClickHouse, and the source table "
			 "needs %s; sluice has no record of the type it made it with, so either side may have "
			 "changed", object, c, have, need);
	else if (same_type(made, have))
		snprintf(err, errlen, "table \"%s\": column \"%s\" changed at the source: ClickHouse has %s, as "
			 "sluice made it, and the source table now needs %s", object, c, have, need);
	else if (same_type(made, need))
		snprintf(err, errlen, "table \"%s\": column \"%s\" was changed in ClickHouse: sluice made it %s, "
			 "which the source table still needs, and ClickHouse now has %s (ALTER TABLE ... MODIFY "
			 "COLUMN puts it back)", object, c, need, have);
	else
		snprintf(err, errlen, "table \"%s\": column \"%s\" changed on both sides: sluice made it %s, "
			 "ClickHouse now has %s, and the source table needs %s", object, c, made, have, need);
}

static const char *made_type(const struct ch_dest_col *wrote, int nwrote, const char *name)
{
	for (int i = 0; wrote && i < nwrote; i++)
		if (!strcmp(wrote[i].name, name))
			return wrote[i].type;
	return NULL;
}

/* Copies type text t into out (n bytes) without spaces and without a
 * Nullable( ) around it, which *nullable tells.  False when it does not fit. */
static bool bare_type(const char *t, char *out, size_t n, bool *nullable)
{
	size_t k = 0, len;

	for (; *t; t++)
		if (*t != ' ') {
			if (k + 1 >= n)
				return false;
			out[k++] = *t;
		}
	out[k] = '\0';
	len = strlen("Nullable(");
	*nullable = k > len && !strncmp(out, "Nullable(", len) && out[k - 1] == ')';
	if (*nullable) {
		memmove(out, out + len, k - len - 1);
		out[k - len - 1] = '\0';
	}
	return true;
}

/* Reads "Decimal(P,S)" (no spaces). */
static bool decimal_of(const char *t, long *p, long *sc)
{
	char *end;

	if (strncmp(t, "Decimal(", 8) != 0)
		return false;
	*p = strtol(t + 8, &end, 10);
	if (end == t + 8 || *end != ',')
		return false;
	t = end + 1;
	*sc = strtol(t, &end, 10);
	return end != t && !strcmp(end, ")");
}

/* Whether ClickHouse's column of type from holds every value of type to
 * once changed to it (MODIFY COLUMN): a wider integer or float, a Decimal
 * with at least as many digits on each side of the point. */
static bool widens(const char *from, const char *to)
{
	char f[64], t[64];
	bool fnull, tnull;
	long fp, fs, tp, ts;

	if (!bare_type(from, f, sizeof f, &fnull) || !bare_type(to, t, sizeof t, &tnull) || fnull != tnull)
		return false;
	if (!strcmp(f, "Int32"))
		return !strcmp(t, "Int64");
	if (!strcmp(f, "Float32"))
		return !strcmp(t, "Float64");
	if (decimal_of(f, &fp, &fs) && decimal_of(t, &tp, &ts))
		return ts >= fs && tp - ts >= fp - fs && tp > fp;
	return false;
}

/* Whether destination column dc, which the version lacks, is one sluice
 * made so (a payload column dropped or renamed at the source). */
static bool dropped_at_source(const struct ch_layout *l, const struct ch_dest_col *dc,
			      const struct ch_dest_col *wrote, int nwrote)
{
	const char *made = made_type(wrote, nwrote, dc->name);

	return made && same_type(made, dc->type) && !dc->in_sorting_key &&
	       (l->merge || !strncmp(dc->type, "Nullable(", 9));
}

void ch_alter_free(struct ch_alter *a)
{
	free(a->add);
	free(a->modify);
	free(a->drop);
	memset(a, 0, sizeof *a);
}

/* The message for destination column dc that the version lacks. */
static void column_not_in_source(char *err, size_t errlen, const struct ch_layout *l, const struct ch_dest_col *dc,
				 const struct ch_dest_col *wrote, int nwrote)
{
	const char *made = made_type(wrote, nwrote, dc->name);

	if (dc->name[0] == '_' && dc->name[1] != '_')
		snprintf(err, errlen, "table \"%s\": column \"%s\" in ClickHouse is not one sluice writes for this "
			 "stream (a table of another source kind, or not made by sluice)", l->object, dc->name);
	else if (dc->in_sorting_key)
		snprintf(err, errlen, "table \"%s\": the primary key changed at the source (key column \"%s\" "
			 "is gone); ClickHouse cannot change a table's sorting key", l->object, dc->name);
	else if (made)
		snprintf(err, errlen, "table \"%s\": column \"%s\" is in ClickHouse but no longer in the source "
			 "table (dropped or renamed at the source), and it was changed in ClickHouse: sluice made it "
			 "%s, and ClickHouse now has %s", l->object, dc->name, made, dc->type);
	else
		snprintf(err, errlen, "table \"%s\": column \"%s\" is in ClickHouse but no longer in the source "
			 "table (dropped or renamed at the source), and sluice has no record of making it, so it "
			 "leaves it alone", l->object, dc->name);
}

/* Compares destination column dc with l's column c: 0 when they agree,
 * 1 when c is to be widened, CH_MATCH_CONFLICT (err set), -1 out of memory. */
static int match_column(const struct ch_layout *l, const struct ch_col *c, const struct ch_dest_col *dc,
			const struct ch_dest_col *wrote, int nwrote, char *err, size_t errlen)
{
	const char *mode = l->merge ? "merge" : "append";
	const char *other = l->merge ? "append" : "merge";
	const char *made;
	struct sl_buf ty;
	int rc = 0;

	sl_buf_init(&ty, 0);
	if (ch_type_sql(&ty, &c->type) < 0) {
		rc = -1;
		goto out;
	}
	if (!same_type(ty.data, dc->type)) {
		made = made_type(wrote, nwrote, c->name);
		rc = CH_MATCH_CONFLICT;
		if (c->src >= 0 && l->merge != c->type.nullable && c->key != dc->in_sorting_key)
			snprintf(err, errlen, "table \"%s\": column \"%s\" is %s in ClickHouse and the stream "
				 "needs %s: the table was made for write_mode = %s (or the primary key "
				 "changed); a %s-mode stream needs a table of its own (another database)",
				 l->object, c->name, dc->type, ty.data, other, mode);
		else if (c->src >= 0 && !c->key && made && same_type(made, dc->type) && widens(dc->type, ty.data))
			rc = 1;
		else
			type_changed(err, errlen, l->object, c->name, dc->type, ty.data, made);
		if (rc != 1)
			goto out;
	}
	if (c->key != dc->in_sorting_key) {
		snprintf(err, errlen, "table \"%s\": ClickHouse sorts it %s column \"%s\", so it was made "
			 "for write_mode = %s (or the primary key changed); a %s-mode stream needs a table "
			 "of its own (another database)", l->object, dc->in_sorting_key ? "by" : "without", c->name,
			 dc->in_sorting_key == l->merge ? mode : other, mode);
		rc = CH_MATCH_CONFLICT;
	}
out:
	sl_buf_free(&ty);
	return rc;
}

int ch_layout_match(struct ch_layout *l, const struct ch_dest_col *dest, int ndest,
		    const struct ch_dest_col *wrote, int nwrote, struct ch_alter *a, char *err, size_t errlen)
{
	bool *seen = calloc((size_t)l->ncols + 1, sizeof *seen);
	struct ch_col *ordered = NULL;
	int rc = -1, n = 0, nkept = 0;

	memset(a, 0, sizeof *a);
	if (!seen || !(a->add = calloc((size_t)l->ncols + 1, sizeof *a->add)) ||
	    !(a->modify = calloc((size_t)l->ncols + 1, sizeof *a->modify)) ||
	    !(a->drop = calloc((size_t)ndest + 1, sizeof *a->drop)))
		goto out;
	for (int j = 0; j < ndest; j++) {
		int i = find_col(l, dest[j].name), m;
		if (i < 0 && kept_col(l, dest[j].name)) {
			nkept++;
			continue;
		}
		if (i < 0) {
			if (dropped_at_source(l, &dest[j], wrote, nwrote)) {
				a->drop[a->ndrop++] = j;
				continue;
			}
			column_not_in_source(err, errlen, l, &dest[j], wrote, nwrote);
			rc = CH_MATCH_CONFLICT;
			goto out;
		}
		seen[i] = true;
		if ((m = match_column(l, &l->cols[i], &dest[j], wrote, nwrote, err, errlen)) < 0 ||
		    m == CH_MATCH_CONFLICT) {
			rc = m;
			goto out;
		}
		if (m == 1)
			a->modify[a->nmodify++] = i;
	}
	for (int i = 0; i < l->ncols; i++) {
		if (seen[i])
			continue;
		if (l->cols[i].src < 0 || l->cols[i].key) {
			if (l->cols[i].src < 0)
				snprintf(err, errlen, "table \"%s\": ClickHouse lacks the metadata column \"%s\" (a "
					 "table of another source kind, or not made by sluice)", l->object,
					 l->cols[i].name);
			else
				snprintf(err, errlen, "table \"%s\": the primary key changed at the source (new key "
					 "column \"%s\"); ClickHouse cannot change a table's sorting key", l->object,
					 l->cols[i].name);
			rc = CH_MATCH_CONFLICT;
			goto out;
		}
		a->add[a->nadd++] = i;
	}
	if (a->nadd > 0 || a->nmodify > 0 || (l->merge && a->ndrop > 0)) {
		rc = CH_MATCH_ALTER;
		goto out;
	}
	/* The same columns (append mode: and kept ones): take the destination's order. */
	if (!(ordered = calloc((size_t)l->ncols, sizeof *ordered)))
		goto out;
	for (int j = 0; j < ndest; j++) {
		int i = find_col(l, dest[j].name);
		if (i >= 0)
			ordered[n++] = l->cols[i];
	}
	free(l->cols);
	l->cols = ordered;
	ordered = NULL;
	l->partial = a->ndrop > 0 || nkept > 0;
	index_layout(l);
	rc = CH_MATCH_SAME;
out:
	if (rc < 0 || rc == CH_MATCH_CONFLICT) {
		ch_alter_free(a);
		if (rc < 0)
			snprintf(err, errlen, "table \"%s\": out of memory", l->object);
	}
	free(ordered);
	free(seen);
	return rc;
}

int ch_layout_column_list(struct sl_buf *b, const struct ch_layout *l, bool meta_only)
{
	bool first = true;

	sl_buf_putc(b, '(');
	for (int i = 0; i < l->ncols; i++) {
		if (meta_only && l->cols[i].src >= 0)
			continue;
		if (!first)
			sl_buf_puts(b, ", ");
		first = false;
		ch_quote_ident(b, l->cols[i].name);
	}
	sl_buf_putc(b, ')');
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_rowmeta_of_change(struct ch_rowmeta *m, const struct sl_change *c, const struct ch_vmap *vm, char *buf,
			 char *err, size_t errlen)
{
	const struct sl_source_desc *d = c->table->src;
	uint32_t seq = vm || c->seq < CH_VERSION_ROOM ? c->seq : CH_VERSION_ROOM;

	uint64_t shift = vm ? ch_vmap_shift(vm, c->csn_pos) : 0;

	memset(m, 0, sizeof *m);
	if (ch_version(c->csn_pos, seq, shift, &m->version) < 0) {
		if (c->csn_pos >= CH_VERSION_POS_LIMIT)
			snprintf(err, errlen, "table \"%s\".\"%s\": change %s: its position part %016llX is beyond "
				 "the %d bits the merge version keeps for positions (see doc/clickhouse.md, \"The "
				 "version\")", c->table->ns, c->table->name, c->csn, (unsigned long long)c->csn_pos,
				 64 - CH_VERSION_SEQ_BITS);
		else
			snprintf(err, errlen, "table \"%s\".\"%s\": change %s: its version, moved up by %llu for "
				 "earlier long transactions, passes 2^64 - 1 (see doc/clickhouse.md, \"The version\")",
				 c->table->ns, c->table->name, c->csn, (unsigned long long)shift);
		return -1;
	}
	m->uuid = c->uuid;
	m->source_ts_us = c->source_ts_us;
	m->read_ts_us = c->read_ts_us;
	m->tx_id = c->tx_id;
	m->csn = c->csn;
	m->op = c->op;
	if (d && c->pos) {
		m->nmeta = d->nmeta > SL_META_MAX ? SL_META_MAX : d->nmeta;
		d->meta_values(c->pos, m->meta, buf, SL_META_BUF);
	}
	return 0;
}

static int put_meta(struct sl_buf *b, const struct ch_layout *l, const struct ch_col *c,
		    const struct ch_rowmeta *m, const struct sl_value *vals)
{
	char u[36];

	switch (c->meta) {
	case CH_M_UUID:
		if (c->type.ch == CH_UUID)
			return ch_rb_put_uuid(b, m->uuid);
		ch_uuid_text(u, m->uuid);
		return ch_rb_put_str(b, u, sizeof u);
	case CH_M_SOURCE_TS:
		return ch_rb_put_i64(b, m->source_ts_us);
	case CH_M_READ_TS:
		return ch_rb_put_i64(b, m->read_ts_us);
	case CH_M_CHANGE_TYPE: {
		const char *s = sl_op_name(m->op);
		return ch_rb_put_str(b, s, strlen(s));
	}
	case CH_M_CSN:
		return ch_rb_put_str(b, m->csn, SL_CSN_LEN);
	case CH_M_VERSION:
		return ch_rb_put_u64(b, m->version);
	case CH_M_IS_DELETED:
		return ch_rb_put_u8(b, m->op == SL_OP_DELETE || m->op == SL_OP_UPDATE_DELETE ||
					   m->op == SL_OP_TRUNCATE);
	case CH_M_TX_ID:
		return ch_rb_put_u64(b, m->tx_id);
	case CH_M_UNCHANGED: {
		uint64_t n = 0;
		for (int s = 0; vals && s < l->nsrc; s++)
			n += vals[s].kind == SL_V_UNCHANGED;
		if (ch_rb_put_uleb(b, n) < 0)
			return -1;
		for (int s = 0; n && s < l->nsrc; s++) {
			const char *name = l->cols[l->of_src[s]].name;
			if (vals[s].kind == SL_V_UNCHANGED && ch_rb_put_str(b, name, strlen(name)) < 0)
				return -1;
		}
		return 0;
	}
	default: {
		int i = c->meta - CH_M_POS;
		const struct sl_meta_value *v = &m->meta[i];
		if (i < 0 || i >= m->nmeta) {
			/* no position (a hand-made change): empty or null */
			if (c->type.ch == CH_INT64)
				return ch_rb_put_i64(b, 0);
			return c->type.nullable ? ch_rb_put_u8(b, 1) : ch_rb_put_str(b, "", 0);
		}
		if (c->type.ch == CH_INT64)
			return ch_rb_put_i64(b, v->i);
		if (c->type.nullable) {
			if (!v->s)
				return ch_rb_put_u8(b, 1);
			if (ch_rb_put_u8(b, 0) < 0)
				return -1;
		}
		return ch_rb_put_str(b, v->s ? v->s : "", v->s ? v->len : 0);
	}
	}
}

int ch_layout_put_row(struct sl_buf *b, const struct ch_layout *l, const struct ch_rowmeta *m,
		      const struct sl_value *vals, bool meta_only, char *err, size_t errlen)
{
	static const struct sl_value null_value = { .kind = SL_V_NULL };
	size_t start = b->len;
	int clamped = 0;

	for (int i = 0; i < l->ncols; i++) {
		const struct ch_col *c = &l->cols[i];
		if (c->src >= 0) {
			int rc;
			if (meta_only)
				continue;
			rc = ch_rb_put_value(b, &c->type, vals ? &vals[c->src] : &null_value, c->name, err, errlen);
			if (rc < 0)
				goto fail;
			clamped += rc;
		} else if (put_meta(b, l, c, m, vals) < 0) {
			snprintf(err, errlen, "table \"%s\": out of memory or over the buffer cap encoding a row",
				 l->object);
			goto fail;
		}
	}
	return clamped;
fail:
	if (!sl_buf_failed(b)) {
		b->len = start;
		if (b->data)
			b->data[start] = '\0';
	}
	return -1;
}
