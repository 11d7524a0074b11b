/*
 * schema/mask.c: column selection and masking (see mask.h for the rules
 * and the bytes each value kind stands for).
 */
#include "schema/mask.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/hmac.h>

#include "common/buf.h"
#include "common/util.h"

#define TRUNCATE_MAX 1000000u

struct rule {
	char *text;                 /* as written */
	char *part[3];              /* schema, table, column globs */
	enum sl_mask_method method;
	uint32_t n;
	bool used;
};

struct sl_mask {
	int nrules;
	struct rule *rules;
	bool has_key;
	struct hmac_sha256_ctx hmac;  /* keyed once; copied for each value */
};

/* ---------------------------------------------------------------------- */
/* Rules                                                                  */

/* Splits "A.B.C" at its first two dots into parts (malloc'd when parts is
 * not NULL).  false when a part is empty or a dot is missing. */
static bool split3(const char *s, size_t len, char **parts)
{
	const char *d1 = memchr(s, '.', len), *d2, *end = s + len;

	if (!d1 || d1 == s)
		return false;
	d2 = memchr(d1 + 1, '.', (size_t)(end - d1 - 1));
	if (!d2 || d2 == d1 + 1 || d2 + 1 == end)
		return false;
	if (parts) {
		parts[0] = strndup(s, (size_t)(d1 - s));
		parts[1] = strndup(d1 + 1, (size_t)(d2 - d1 - 1));
		parts[2] = strndup(d2 + 1, (size_t)(end - d2 - 1));
	}
	return true;
}

/* The method after the last ':' of a mask_columns entry. */
static bool parse_method(const char *s, enum sl_mask_method *method, uint32_t *n)
{
	*n = 0;
	if (strcmp(s, "hash") == 0)
		*method = SL_MASK_HASH;
	else if (strcmp(s, "null") == 0)
		*method = SL_MASK_NULL;
	else if (strcmp(s, "redact") == 0)
		*method = SL_MASK_REDACT;
	else if (strncmp(s, "truncate(", 9) == 0) {
		size_t l = strlen(s);
		char num[16];
		uint64_t v;
		if (l < 11 || s[l - 1] != ')' || l - 10 >= sizeof num)
			return false;
		memcpy(num, s + 9, l - 10);
		num[l - 10] = '\0';
		if (num[0] < '0' || num[0] > '9' || sl_parse_u64(num, TRUNCATE_MAX, &v) < 0)
			return false;
		*method = SL_MASK_TRUNCATE;
		*n = (uint32_t)v;
	} else
		return false;
	return true;
}

const char *sl_mask_rule_check(const char *entry, bool with_method)
{
	const char *colon = with_method ? strrchr(entry, ':') : NULL;
	enum sl_mask_method method;
	uint32_t n;

	if (!with_method)
		return split3(entry, strlen(entry), NULL) ? NULL :
			"each entry must be SCHEMA.TABLE.COLUMN (globs allowed, such as public.users.email or "
			"shop.*.card_*)";
	if (!colon || !split3(entry, (size_t)(colon - entry), NULL))
		return "each entry must be SCHEMA.TABLE.COLUMN:METHOD (globs allowed, such as "
		       "public.users.email:hash)";
	if (!parse_method(colon + 1, &method, &n))
		return "the method after \":\" must be hash, null, redact or truncate(N) with N from 0 to 1000000";
	return NULL;
}

static int add_rules(struct sl_mask *m, char *const *list, bool with_method)
{
	for (; list && *list; list++) {
		struct rule *r = &m->rules[m->nrules];
		const char *colon = with_method ? strrchr(*list, ':') : NULL;
		size_t len = colon ? (size_t)(colon - *list) : strlen(*list);

		memset(r, 0, sizeof *r);
		m->nrules++;
		if (!(r->text = strdup(*list)))
			return -1;
		if (!split3(*list, len, r->part))
			return -1;
		if (!r->part[0] || !r->part[1] || !r->part[2])
			return -1;
		r->method = SL_MASK_EXCLUDE;
		if (colon && !parse_method(colon + 1, &r->method, &r->n))
			return -1;
	}
	return 0;
}

static size_t list_len(char *const *l)
{
	size_t n = 0;

	while (l && l[n])
		n++;
	return n;
}

int sl_mask_new(struct sl_mask **out, char *const *exclude, char *const *mask, const char *key, char *err,
		size_t errlen)
{
	size_t n = list_len(exclude) + list_len(mask);
	struct sl_mask *m = NULL;
	int rc = -1;

	*out = NULL;
	if (n == 0)
		return 0;
	if (!(m = calloc(1, sizeof *m)) || !(m->rules = calloc(n, sizeof *m->rules)) ||
	    add_rules(m, exclude, false) < 0 || add_rules(m, mask, true) < 0) {
		snprintf(err, errlen, "out of memory (or a bad rule) compiling the column rules");
		goto out;
	}
	for (int i = 0; i < m->nrules; i++)
		if (m->rules[i].method == SL_MASK_HASH && !key) {
			snprintf(err, errlen, "mask_columns rule \"%s\" hashes, and there is no mask key: set "
				 "mask_key_env or mask_key_file", m->rules[i].text);
			goto out;
		}
	if (key) {
		hmac_sha256_set_key(&m->hmac, strlen(key), (const uint8_t *)key);
		m->has_key = true;
	}
	*out = m;
	m = NULL;
	rc = 0;
out:
	sl_mask_free(m);
	return rc;
}

void sl_mask_key_id(const struct sl_mask *m, char out[static 17])
{
	static const char hex[] = "0123456789abcdef", what[] = "sluice mask key id";
	struct hmac_sha256_ctx ctx;
	uint8_t d[SHA256_DIGEST_SIZE];

	out[0] = '\0';
	if (!m || !m->has_key)
		return;
	ctx = m->hmac;
	hmac_sha256_update(&ctx, sizeof what - 1, (const uint8_t *)what);
	hmac_sha256_digest(&ctx, sizeof d, d);
	explicit_bzero(&ctx, sizeof ctx);
	for (int i = 0; i < 8; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[16] = '\0';
}

void sl_mask_free(struct sl_mask *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->nrules; i++) {
		free(m->rules[i].text);
		for (int j = 0; j < 3; j++)
			free(m->rules[i].part[j]);
	}
	free(m->rules);
	/* the keyed HMAC state is as secret as the key */
	explicit_bzero(&m->hmac, sizeof m->hmac);
	free(m);
}

int sl_mask_nrules(const struct sl_mask *m)
{
	return m ? m->nrules : 0;
}

const char *sl_mask_rule_text(const struct sl_mask *m, int i)
{
	return m->rules[i].text;
}

bool sl_mask_rule_used(const struct sl_mask *m, int i)
{
	return m->rules[i].used;
}

/* The first rule that applies to the column (exclusions first), or -1. */
static int match(const struct sl_mask *m, const char *ns, const char *table, const char *col)
{
	int found = -1;

	for (int i = 0; m && i < m->nrules; i++) {
		const struct rule *r = &m->rules[i];
		if (fnmatch(r->part[0], ns, 0) || fnmatch(r->part[1], table, 0) || fnmatch(r->part[2], col, 0))
			continue;
		if (r->method == SL_MASK_EXCLUDE)
			return i;
		if (found < 0)
			found = i;
	}
	return found;
}

enum sl_mask_method sl_mask_column(const struct sl_mask *m, const char *ns, const char *table, const char *col,
				   uint32_t *n)
{
	int i = match(m, ns, table, col);

	*n = i < 0 ? 0 : m->rules[i].n;
	return i < 0 ? SL_MASK_KEEP : m->rules[i].method;
}

void sl_mask_method_name(enum sl_mask_method method, uint32_t n, char *out, size_t outlen)
{
	switch (method) {
	case SL_MASK_KEEP: snprintf(out, outlen, "keep"); break;
	case SL_MASK_EXCLUDE: snprintf(out, outlen, "exclude"); break;
	case SL_MASK_HASH: snprintf(out, outlen, "hash"); break;
	case SL_MASK_NULL: snprintf(out, outlen, "null"); break;
	case SL_MASK_TRUNCATE: snprintf(out, outlen, "truncate(%" PRIu32 ")", n); break;
	case SL_MASK_REDACT: snprintf(out, outlen, "redact"); break;
	}
}

/* ---------------------------------------------------------------------- */
/* Tables                                                                 */

void sl_masked_free(struct sl_masked *pm, bool table)
{
	if (!pm)
		return;
	if (table)
		sl_table_free(pm->t);
	free(pm->from);
	free(pm->method);
	free(pm->n);
	free(pm);
}

static const char *method_doc(enum sl_mask_method method)
{
	switch (method) {
	case SL_MASK_HASH: return "masked by sluice: hash (HMAC-SHA-256 with the stream's mask key, hex)";
	case SL_MASK_NULL: return "masked by sluice: null";
	case SL_MASK_TRUNCATE: return "masked by sluice: truncate";
	case SL_MASK_REDACT: return "masked by sluice: redact (\"" SL_MASK_REDACTED "\")";
	default: return NULL;
	}
}

/* Adds column c of the source, masked by method, to t. */
static int add_masked(struct sl_table *t, const struct sl_column *c, enum sl_mask_method method, uint32_t n)
{
	struct sl_column *d;
	char doc[160];
	enum sl_type ty = method == SL_MASK_TRUNCATE && c->type == SL_T_BYTES ? SL_T_BYTES : SL_T_STRING;

	if (method == SL_MASK_KEEP)
		ty = c->type;
	if (sl_table_add_column(t, c->name, ty, method == SL_MASK_KEEP ? c->precision : 0,
				method == SL_MASK_KEEP ? c->scale : 0, c->src_type, c->src_typmod, c->type_name,
				c->is_key) < 0)
		return -1;
	d = &t->cols[t->ncols - 1];
	d->not_null = c->not_null && method != SL_MASK_NULL;
	d->in_identity = c->in_identity;
	if (method == SL_MASK_KEEP)
		return (c->doc && !(d->doc = strdup(c->doc))) || sl_column_set_missing(d, &c->missing) < 0 ? -1 : 0;
	if (method == SL_MASK_TRUNCATE)
		snprintf(doc, sizeof doc, "%s(%" PRIu32 ")", method_doc(method), n);
	else
		snprintf(doc, sizeof doc, "%s", method_doc(method));
	return (d->doc = strdup(doc)) ? 0 : -1;
}

/* The masked table's own schema_key: its columns' (schema.c) and then each
 * masked column's name and method, so adding or changing a rule makes a
 * new schema version. */
static void masked_key(struct sl_masked *pm)
{
	uint64_t h = sl_fnv1a(SL_FNV1A_BASIS, pm->t->schema_key, 16);
	char name[32];

	for (int i = 0; i < pm->t->ncols; i++) {
		if (pm->method[i] == SL_MASK_KEEP)
			continue;
		sl_mask_method_name(pm->method[i], pm->n[i], name, sizeof name);
		h = sl_fnv1a(h, pm->t->cols[i].name, strlen(pm->t->cols[i].name) + 1);
		h = sl_fnv1a(h, name, strlen(name) + 1);
	}
	snprintf(pm->t->schema_key, sizeof pm->t->schema_key, "%016" PRIx64, h);
}

int sl_mask_table(struct sl_mask *m, const struct sl_table *src, struct sl_masked **out, char *err, size_t errlen)
{
	struct sl_masked *pm = NULL;
	bool touched = false;
	int rc = -1;

	*out = NULL;
	for (int i = 0; m && i < src->ncols; i++) {
		const struct sl_column *c = &src->cols[i];
		int r = match(m, src->ns, src->name, c->name);
		if (r < 0)
			continue;
		m->rules[r].used = touched = true;
		if (c->is_key && m->rules[r].method != SL_MASK_HASH) {
			/* null, truncate and redact would make keys equal: rows would
			 * merge into one and share their uuids */
			snprintf(err, errlen, "column \"%s\" of table \"%s\".\"%s\" is part of the table's key and "
				 "cannot be %s (rule \"%s\"): mask it with hash instead", c->name, src->ns, src->name,
				 m->rules[r].method == SL_MASK_EXCLUDE ? "excluded" : "masked but by hash",
				 m->rules[r].text);
			return SL_ECONFIG;
		}
	}
	if (!touched)
		return 0;
	if (!(pm = calloc(1, sizeof *pm)) || !(pm->t = sl_table_new(src->ns, src->name)) ||
	    !(pm->from = calloc((size_t)src->ncols + 1, sizeof *pm->from)) ||
	    !(pm->method = calloc((size_t)src->ncols + 1, 1)) ||
	    !(pm->n = calloc((size_t)src->ncols + 1, sizeof *pm->n)))
		goto out;
	pm->src = src;
	memcpy(pm->src_key, src->schema_key, sizeof pm->src_key);
	for (int i = 0; i < src->ncols; i++) {
		uint32_t n;
		enum sl_mask_method method = sl_mask_column(m, src->ns, src->name, src->cols[i].name, &n);
		if (method == SL_MASK_EXCLUDE)
			continue;
		pm->from[pm->t->ncols] = i;
		pm->method[pm->t->ncols] = (uint8_t)method;
		pm->n[pm->t->ncols] = n;
		if (add_masked(pm->t, &src->cols[i], method, n) < 0)
			goto out;
	}
	if (sl_table_finish(pm->t) < 0)
		goto out;
	masked_key(pm);
	pm->t->relid = src->relid;
	pm->t->shape = src->shape;
	pm->t->layout = src->layout;
	pm->t->src_flags = src->src_flags;
	pm->t->no_row_identity = src->no_row_identity;
	pm->t->src = src->src;
	pm->t->est_rows = src->est_rows;
	if (src->src_columns && !(pm->t->src_columns = strdup(src->src_columns)))
		goto out;
	*out = pm;
	pm = NULL;
	rc = 0;
out:
	if (rc < 0)
		snprintf(err, errlen, "out of memory masking the columns of \"%s\".\"%s\"", src->ns, src->name);
	sl_masked_free(pm, true);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Values                                                                 */

/* Days since 1970-01-01 to a proleptic Gregorian date (the inverse of
 * sl_days_from_civil: eras of 400 years, March-based years). */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	int64_t era, doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static int put_date(struct sl_buf *b, int64_t days)
{
	int64_t y;
	int m, d;

	civil_from_days(days, &y, &m, &d);
	return sl_buf_printf(b, "%s%04" PRId64 "-%02d-%02d", y < 0 ? "-" : "", y < 0 ? -y : y, m, d);
}

/* Microseconds of a day as HH:MM:SS.ffffff. */
static int put_time(struct sl_buf *b, int64_t us)
{
	int64_t s = us / 1000000;

	return sl_buf_printf(b, "%02" PRId64 ":%02" PRId64 ":%02" PRId64 ".%06" PRId64, s / 3600, s / 60 % 60,
			     s % 60, us % 1000000);
}

static int put_real(struct sl_buf *b, double d, int digits)
{
	if (isnan(d))
		return sl_buf_puts(b, "NaN");
	if (isinf(d))
		return sl_buf_puts(b, d < 0 ? "-Infinity" : "Infinity");
	return sl_buf_printf(b, "%.*g", digits, d);
}

int sl_mask_value_text(struct sl_buf *b, const struct sl_value *v)
{
	static const char hex[] = "0123456789abcdef";
	int64_t days, us;

	switch ((enum sl_value_kind)v->kind) {
	case SL_V_STRING: case SL_V_JSON: case SL_V_BYTES:
		return sl_buf_append(b, v->p, v->len);
	case SL_V_BOOL: return sl_buf_puts(b, v->b ? "true" : "false");
	case SL_V_INT: return sl_buf_printf(b, "%" PRId64, v->i);
	case SL_V_UINT: return sl_buf_printf(b, "%" PRIu64, v->u);
	case SL_V_FLOAT: return put_real(b, v->f, 9);
	case SL_V_DOUBLE: return put_real(b, v->d, 17);
	case SL_V_DECIMAL: return sl_value_decimal_text(b, v);
	case SL_V_DATE: return put_date(b, v->i);
	case SL_V_TIME: return put_time(b, v->i);
	case SL_V_TIMESTAMP:
		days = v->i / 86400000000LL;
		us = v->i % 86400000000LL;
		if (us < 0) {
			us += 86400000000LL;
			days--;
		}
		put_date(b, days);
		sl_buf_putc(b, 'T');
		put_time(b, us);
		return sl_buf_putc(b, 'Z');
	case SL_V_UUID:
		for (uint32_t i = 0; i < 16 && i < v->len; i++) {
			unsigned char c = (unsigned char)v->p[i];
			if (i == 4 || i == 6 || i == 8 || i == 10)
				sl_buf_putc(b, '-');
			sl_buf_putc(b, hex[c >> 4]);
			sl_buf_putc(b, hex[c & 15]);
		}
		return sl_buf_failed(b) ? -1 : 0;
	case SL_V_NULL: case SL_V_UNCHANGED:
		break;
	}
	return -1;
}

/* The length of the first n UTF-8 characters of p (a byte that is not a
 * continuation byte starts a character). */
static uint32_t utf8_prefix(const char *p, uint32_t len, uint32_t n)
{
	uint32_t i = 0, chars = 0;

	for (; i < len; i++) {
		if (((unsigned char)p[i] & 0xC0) != 0x80) {
			if (chars == n)
				break;
			chars++;
		}
	}
	return i;
}

/* Cuts b to its first len bytes, keeping its NUL, and wipes what was cut
 * (the clear text of a hashed value). */
static void cut(struct sl_buf *b, size_t len)
{
	if (b->len > len) {
		memset(b->data + len, 0, b->len - len);
		b->len = len;
	}
}

/* One masked value: its bytes go into scratch at *off (out->p is set
 * later, once scratch no longer moves), or out points at static text or
 * into in. */
static int mask_one(const struct sl_mask *m, enum sl_mask_method method, uint32_t n, const struct sl_value *in,
		    struct sl_value *out, struct sl_buf *scratch, size_t *off)
{
	static const char hex[] = "0123456789abcdef";
	size_t start = scratch->len;

	*off = SIZE_MAX;
	memset(out, 0, sizeof *out);
	out->kind = SL_V_STRING;
	switch (method) {
	case SL_MASK_NULL:
		out->kind = SL_V_NULL;
		return 0;
	case SL_MASK_REDACT:
		out->p = SL_MASK_REDACTED;
		out->len = (uint32_t)strlen(SL_MASK_REDACTED);
		return 0;
	case SL_MASK_TRUNCATE:
		if (in->kind == SL_V_STRING || in->kind == SL_V_JSON || in->kind == SL_V_BYTES) {
			out->kind = in->kind == SL_V_BYTES ? SL_V_BYTES : SL_V_STRING;
			out->p = in->p;
			out->len = in->kind == SL_V_BYTES ? (in->len < n ? in->len : n) : utf8_prefix(in->p, in->len, n);
			return 0;
		}
		if (sl_mask_value_text(scratch, in) < 0)
			return -1;
		if (scratch->len - start > n)
			cut(scratch, start + n);
		break;
	case SL_MASK_HASH: {
		struct hmac_sha256_ctx ctx = m->hmac;
		uint8_t digest[SHA256_DIGEST_SIZE];
		if (sl_mask_value_text(scratch, in) < 0)
			return -1;
		hmac_sha256_update(&ctx, scratch->len - start, (const uint8_t *)scratch->data + start);
		hmac_sha256_digest(&ctx, sizeof digest, digest);
		explicit_bzero(&ctx, sizeof ctx);
		cut(scratch, start);
		for (size_t i = 0; i < sizeof digest; i++) {
			sl_buf_putc(scratch, hex[digest[i] >> 4]);
			sl_buf_putc(scratch, hex[digest[i] & 15]);
		}
		break;
	}
	default:
		return -1;
	}
	if (sl_buf_failed(scratch))
		return -1;
	*off = start;
	out->len = (uint32_t)(scratch->len - start);
	return 0;
}

int sl_mask_values(const struct sl_mask *m, const struct sl_masked *pm, const struct sl_value *in,
		   struct sl_value *out, struct sl_buf *scratch)
{
	size_t offs[64], *off = offs;
	int rc = -1;

	sl_buf_reset(scratch);
	if ((size_t)pm->t->ncols > sizeof offs / sizeof offs[0] &&
	    !(off = malloc(sizeof *off * (size_t)pm->t->ncols)))
		return -1;
	for (int i = 0; i < pm->t->ncols; i++) {
		const struct sl_value *v = &in[pm->from[i]];
		off[i] = SIZE_MAX;
		if (pm->method[i] == SL_MASK_KEEP || v->kind == SL_V_NULL || v->kind == SL_V_UNCHANGED)
			out[i] = *v;
		else if (mask_one(m, (enum sl_mask_method)pm->method[i], pm->n[i], v, &out[i], scratch, &off[i]) < 0)
			goto out;
	}
	for (int i = 0; i < pm->t->ncols; i++)
		if (off[i] != SIZE_MAX)
			out[i].p = scratch->data + off[i];
	rc = 0;
out:
	if (off != offs)
		free(off);
	return rc;
}
