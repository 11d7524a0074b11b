/*
 * agent/masking.c: a stream's column rules against its tables (see
 * masking.h and schema/mask.h).
 */
#include "agent/masking.h"

#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

int sl_stream_mask_new(const struct sl_stream_config *sc, struct sl_mask **out, char *err, size_t errlen)
{
	char why[SL_ERRLEN];

	if (sl_mask_new(out, sc->exclude_columns, sc->mask_columns, sc->mask_key, why, sizeof why) < 0) {
		snprintf(err, errlen, "stream \"%s\": %s", sc->name, why);
		return SL_EFAIL;
	}
	return SL_OK;
}

/* Prints what the rules do to the columns of t: "excluded a, b; masked c
 * (hash)".  Nothing when they do nothing. */
static void print_table(const struct sl_stream_config *sc, struct sl_mask *m, const struct sl_table *t,
			FILE *out, struct sl_buf *b)
{
	bool any_ex = false, any_mask = false;
	char how[32];
	uint32_t n;

	sl_buf_reset(b);
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < t->ncols; i++) {
			enum sl_mask_method method = sl_mask_column(m, t->ns, t->name, t->cols[i].name, &n);
			if (method == SL_MASK_KEEP || (method == SL_MASK_EXCLUDE) != (pass == 0))
				continue;
			if (pass == 0)
				sl_buf_printf(b, "%s\"%s\"", any_ex ? ", " : "columns excluded: ", t->cols[i].name);
			else {
				sl_mask_method_name(method, n, how, sizeof how);
				sl_buf_printf(b, "%s\"%s\" (%s)", any_mask ? ", " : any_ex ? "; masked: " :
					      "columns masked: ", t->cols[i].name, how);
			}
			*(pass == 0 ? &any_ex : &any_mask) = true;
		}
	}
	if (b->len && !sl_buf_failed(b))
		fprintf(out, "stream %s: table %s.%s: %s\n", sc->name, t->ns, t->name, b->data);
}

int sl_stream_mask_tables(const struct sl_stream_config *sc, struct sl_mask *m, struct sl_table *const *tables,
			  int n, FILE *out, char *err, size_t errlen)
{
	struct sl_buf b;
	char why[SL_ERRLEN];
	int rc = SL_OK;

	sl_buf_init(&b, 0);
	for (int i = 0; i < n; i++) {
		struct sl_masked *pm = NULL;
		if ((rc = sl_mask_table(m, tables[i], &pm, why, sizeof why)) < 0) {
			snprintf(err, errlen, "stream \"%s\": %s", sc->name, why);
			goto out;
		}
		sl_masked_free(pm, true);
		if (out)
			print_table(sc, m, tables[i], out, &b);
	}
	for (int r = 0; r < sl_mask_nrules(m); r++) {
		if (sl_mask_rule_used(m, r))
			continue;
		if (!out) {
			sl_warn("stream \"%s\": column rule \"%s\" matches no column of the stream's tables", sc->name,
				sl_mask_rule_text(m, r));
			continue;
		}
		snprintf(err, errlen, "stream \"%s\": column rule \"%s\" matches no column of the stream's tables "
			 "(exclude_columns and mask_columns name SCHEMA.TABLE.COLUMN)", sc->name, sl_mask_rule_text(m, r));
		rc = SL_ECONFIG;
		goto out;
	}
out:
	sl_buf_free(&b);
	return rc;
}

int sl_stream_mask_rules(const struct sl_mask *m, const struct sl_table *t, struct sl_buf *out)
{
	char name[48], key[17];
	bool any = false, hashed = false;

	for (int i = 0; m && i < t->ncols; i++) {
		uint32_t n = 0;
		enum sl_mask_method method = sl_mask_column(m, t->ns, t->name, t->cols[i].name, &n);
		if (method == SL_MASK_KEEP)
			continue;
		sl_mask_method_name(method, n, name, sizeof name);
		sl_buf_printf(out, "%s%s:%s", any ? ", " : "", t->cols[i].name, name);
		any = true;
		hashed |= method == SL_MASK_HASH;
	}
	if (hashed) {
		sl_mask_key_id(m, key);
		sl_buf_printf(out, " (key %s)", key);
	}
	return sl_buf_failed(out) ? -1 : 0;
}
