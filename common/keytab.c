/*
 * common/keytab.c: the key-table engine (see keytab.h): the error
 * convention, the section/entry model, value parsing and storing, and
 * applying a table to a section.
 *
 * Every value, defaults included, goes through store_value(), so a default
 * obeys the same rules as a value from the file.  Values are parsed from the
 * expanded text; messages quote the raw text only, and for a list entry or a
 * secret's variable or file name they quote the expanded text only when
 * nothing came from the environment.
 */
#include "common/keytab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "common/secret.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define KIB UINT64_C(1024)
#define MAX_ROWS 64              /* rows applied to one section are tracked in a uint64_t */

/* ---------------------------------------------------------------------- */
/* Errors                                                                 */

void sl_keyerr_init(struct sl_keyerr *er, const char *path, char *buf, size_t len)
{
	er->path = path;
	er->buf = buf;
	er->len = len;
	er->failed = false;
	er->line = 0;
	if (len)
		buf[0] = '\0';
}

int sl_keyerr_vset(struct sl_keyerr *er, int line, const char *fmt, va_list ap)
{
	int n;

	if (er->failed)
		return -1;
	er->failed = true;
	er->line = line;
	if (line > 0)
		n = snprintf(er->buf, er->len, "%s:%d: ", er->path, line);
	else
		n = snprintf(er->buf, er->len, "%s: ", er->path);
	if (n >= 0 && (size_t)n < er->len)
		vsnprintf(er->buf + n, er->len - (size_t)n, fmt, ap);
	return -1;
}

int sl_keyerr_set(struct sl_keyerr *er, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sl_keyerr_vset(er, line, fmt, ap);
	va_end(ap);
	return -1;
}

int sl_keyerr_oom(struct sl_keyerr *er)
{
	return sl_keyerr_set(er, 0, "out of memory");
}

/* ---------------------------------------------------------------------- */
/* Sections and entries                                                   */

const struct sl_ini_entry *sl_ini_find(const struct sl_ini_section *sec, const char *key)
{
	for (size_t i = 0; i < sec->n; i++)
		if (strcmp(sec->e[i].key, key) == 0)
			return &sec->e[i];
	return NULL;
}

int sl_ini_add(struct sl_ini_section *sec, const char *key, const char *raw, char *value,
	       bool expanded, int line)
{
	struct sl_ini_entry *e;

	if (sec->n == sec->alloc) {
		size_t na = sec->alloc ? sec->alloc * 2 : 8;
		struct sl_ini_entry *ne = realloc(sec->e, na * sizeof *ne);

		if (!ne) {
			sl_secret_free(value);
			return -1;
		}
		sec->e = ne;
		sec->alloc = na;
	}
	e = &sec->e[sec->n];
	e->key = strdup(key);
	e->raw = strdup(raw);
	e->value = value;
	e->line = line;
	e->expanded = expanded;
	sec->n++;  /* even half made, so that sl_ini_section_free() frees it */
	return e->key && e->raw ? 0 : -1;
}

void sl_ini_section_free(struct sl_ini_section *sec)
{
	for (size_t i = 0; i < sec->n; i++) {
		free(sec->e[i].key);
		sl_secret_free(sec->e[i].value);
		free(sec->e[i].raw);
	}
	free(sec->e);
	free(sec->title);
	memset(sec, 0, sizeof *sec);
}

/* ---------------------------------------------------------------------- */
/* Value parsers                                                          */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* Parses a run of digits at *s with strtoull; the first character must be a
 * digit (no sign, no space).  Returns 0, or -1 (not a number), or -2 (too large). */
static int parse_digits(const char **s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!is_digit(**s))
		return -1;
	errno = 0;
	v = strtoull(*s, &end, 10);
	if (errno == ERANGE)
		return -2;
	if (errno)
		return -1;
	*s = end;
	*out = v;
	return 0;
}

int sl_key_parse_duration_ms(const char *s, uint64_t *out)
{
	uint64_t whole, frac = 0, mul;
	int ndec = 0;
	int rc = parse_digits(&s, &whole);

	if (rc < 0)
		return rc;
	if (*s == '.') {
		s++;
		if (!is_digit(*s))
			return -1;
		for (; is_digit(*s); s++) {
			if (++ndec > 3)
				return -1;  /* finer than a millisecond */
			frac = frac * 10 + (uint64_t)(*s - '0');
		}
		for (int i = ndec; i < 3; i++)
			frac *= 10;
	}
	while (*s == ' ')
		s++;
	if (strcasecmp(s, "ms") == 0) {
		if (ndec)
			return -1;
		*out = whole;
		return 0;
	}
	if (*s == '\0' || strcasecmp(s, "s") == 0)
		mul = 1000;
	else if (strcasecmp(s, "m") == 0)
		mul = 60 * 1000;
	else if (strcasecmp(s, "h") == 0)
		mul = 3600 * 1000;
	else
		return -1;
	/* whole * mul + frac * mul / 1000, where frac is in thousandths */
	if (whole > UINT64_MAX / mul || whole * mul > UINT64_MAX - frac * (mul / 1000))
		return -2;
	*out = whole * mul + frac * (mul / 1000);
	return 0;
}

static const struct {
	const char *suffix;
	uint64_t mul;
} byte_suffixes[] = {
	{ "", 1 }, { "B", 1 },
	{ "KB", KIB }, { "MB", KIB * KIB }, { "GB", KIB * KIB * KIB },
	{ "TB", KIB * KIB * KIB * KIB },
	{ "KiB", KIB }, { "MiB", KIB * KIB }, { "GiB", KIB * KIB * KIB },
	{ "TiB", KIB * KIB * KIB * KIB },
};

int sl_key_parse_bytes(const char *s, uint64_t *out)
{
	uint64_t v;
	int rc = parse_digits(&s, &v);

	if (rc < 0)
		return rc;
	while (*s == ' ')
		s++;
	for (size_t i = 0; i < ARRAY_LEN(byte_suffixes); i++) {
		if (strcasecmp(s, byte_suffixes[i].suffix) != 0)
			continue;
		if (v > UINT64_MAX / byte_suffixes[i].mul)
			return -2;
		*out = v * byte_suffixes[i].mul;
		return 0;
	}
	return -1;
}

int sl_key_parse_duration(const char *s, uint64_t *out)
{
	uint64_t v, mul;
	int rc = parse_digits(&s, &v);

	if (rc < 0)
		return rc;
	while (*s == ' ')
		s++;
	if (*s == '\0' || strcasecmp(s, "s") == 0)
		mul = 1;
	else if (strcasecmp(s, "m") == 0)
		mul = 60;
	else if (strcasecmp(s, "h") == 0)
		mul = 3600;
	else
		return -1;
	if (v > UINT64_MAX / mul)
		return -2;
	*out = v * mul;
	return 0;
}

void sl_key_format_bytes(char *out, size_t len, uint64_t v)
{
	static const char *const units[] = { "TB", "GB", "MB", "KB" };
	uint64_t mul = KIB * KIB * KIB * KIB;

	for (size_t i = 0; i < ARRAY_LEN(units); i++, mul /= KIB) {
		if (v >= mul && v % mul == 0) {
			snprintf(out, len, "%llu%s", (unsigned long long)(v / mul), units[i]);
			return;
		}
	}
	snprintf(out, len, "%llu", (unsigned long long)v);
}

void sl_key_free_list(char **list)
{
	if (list) {
		for (char **p = list; *p; p++)
			free(*p);
		free(list);
	}
}

int sl_key_parse_list(const char *text, sl_key_validator validate, char ***out,
		      const char **why, char **bad)
{
	size_t cap = 2, n = 0;
	const char *p = text;
	char **list = calloc(cap, sizeof *list);
	int rc = -3;

	if (!list)
		goto out;
	while (*text) {  /* an empty text is the empty list */
		const char *comma = strchr(p, ','), *b = p, *e = comma ? comma : p + strlen(p);
		char *item;

		while (b < e && is_blank(*b))
			b++;
		while (e > b && is_blank(e[-1]))
			e--;
		if (b == e) {
			rc = -1;
			goto out;
		}
		if (!(item = strndup(b, (size_t)(e - b))))
			goto out;
		if (n + 1 == cap) {
			char **nl = realloc(list, cap * 2 * sizeof *nl);

			if (!nl) {
				free(item);
				goto out;
			}
			list = nl;
			cap *= 2;
		}
		list[n++] = item;
		list[n] = NULL;
		if (validate && (*why = validate(item))) {
			if (!(*bad = strdup(item)))
				goto out;
			rc = -2;
			goto out;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	*out = list;
	list = NULL;
	rc = 0;
out:
	sl_key_free_list(list);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Storing values                                                         */

static const struct sl_keychoice *find_choice(const struct sl_keychoice *c, const char *s)
{
	for (; c->name; c++)
		if (strcmp(c->name, s) == 0)
			return c;
	return NULL;
}

/* Stores v into an integer field of 1, 2, 4 or 8 bytes (the range was checked). */
static void store_uint(void *field, size_t size, uint64_t v)
{
	switch (size) {
	case 1: { uint8_t x = (uint8_t)v; memcpy(field, &x, 1); break; }
	case 2: { uint16_t x = (uint16_t)v; memcpy(field, &x, 2); break; }
	case 4: { uint32_t x = (uint32_t)v; memcpy(field, &x, 4); break; }
	default: memcpy(field, &v, 8); break;
	}
}

/* Replaces the string field *dst with a copy of s.  0, or -1 (error set). */
static int store_string(struct sl_keyerr *er, char **dst, const char *s)
{
	char *p = strdup(s);

	if (!p)
		return sl_keyerr_oom(er);
	free(*dst);
	*dst = p;
	return 0;
}

__attribute__((format(printf, 5, 6)))
static int bad_value(struct sl_keyerr *er, int line, const struct sl_keydesc *d, const char *raw,
		     const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	return sl_keyerr_set(er, line, "bad value \"%s\" for key \"%s\": %s", raw, d->name, why);
}

static int store_choice(struct sl_keyerr *er, const struct sl_keydesc *d, const char *text,
			const char *raw, int line, void *field)
{
	const struct sl_keychoice *c = find_choice(d->choices, text);
	struct sl_buf b;
	int rc;

	if (!c) {
		sl_buf_init(&b, 0);
		for (const struct sl_keychoice *k = d->choices; k->name; k++)
			sl_buf_printf(&b, "%s%s", k == d->choices ? "" : ", ", k->name);
		rc = bad_value(er, line, d, raw, "must be one of %s",
			       sl_buf_failed(&b) || !b.data ? "..." : b.data);
		sl_buf_free(&b);
		return rc;
	}
	if (d->type == SL_KT_ENUM) {
		store_uint(field, d->size, (uint64_t)c->value);
		return 0;
	}
	return store_string(er, (char **)field, c->name);
}

static int store_int(struct sl_keyerr *er, const struct sl_keydesc *d, const char *text,
		     const char *raw, int line, void *field)
{
	char *end;
	long long x;

	if (!is_digit(*text) && !(*text == '-' && is_digit(text[1])))
		return bad_value(er, line, d, raw, "not an integer");
	errno = 0;
	x = strtoll(text, &end, 10);
	if (*end != '\0')
		return bad_value(er, line, d, raw, "not an integer");
	if (errno == ERANGE || x < 0 || (uint64_t)x < d->min || (uint64_t)x > d->max)
		return bad_value(er, line, d, raw, "must be from %llu to %llu",
				 (unsigned long long)d->min, (unsigned long long)d->max);
	store_uint(field, d->size, (uint64_t)x);
	return 0;
}

static int store_bytes(struct sl_keyerr *er, const struct sl_keydesc *d, const char *text,
		       const char *raw, int line, void *field)
{
	char lo[32], hi[32];
	uint64_t v = 0;
	int rc = sl_key_parse_bytes(text, &v);

	if (rc == -1)
		return bad_value(er, line, d, raw, "not a byte size (a number of bytes, with an "
				 "optional suffix KB, MB, GB, TB, KiB, MiB, GiB or TiB)");
	if (rc == -2)
		return bad_value(er, line, d, raw, "too large (must be less than 16EiB)");
	sl_key_format_bytes(lo, sizeof lo, d->min);
	sl_key_format_bytes(hi, sizeof hi, d->max);
	if (v < d->min && d->max == UINT64_MAX)
		return bad_value(er, line, d, raw, "must be at least %s", lo);
	if (v < d->min || v > d->max)
		return bad_value(er, line, d, raw, "must be from %s to %s", lo, hi);
	store_uint(field, d->size, v);
	return 0;
}

static int store_seconds(struct sl_keyerr *er, const struct sl_keydesc *d, const char *text,
			 const char *raw, int line, void *field)
{
	uint64_t v = 0;
	int rc = sl_key_parse_duration(text, &v);

	if (rc == -1)
		return bad_value(er, line, d, raw, "not a duration (seconds, or a number with the "
				 "suffix s, m or h)");
	if (rc == -2 || v < d->min || v > d->max)
		return bad_value(er, line, d, raw, "must be from %llu to %llu seconds",
				 (unsigned long long)d->min, (unsigned long long)d->max);
	store_uint(field, d->size, v);
	return 0;
}

/* Writes a millisecond count as seconds for messages: "0.5", "3600". */
static void format_ms(char *out, size_t len, uint64_t ms)
{
	if (ms % 1000 == 0)
		snprintf(out, len, "%llu", (unsigned long long)(ms / 1000));
	else if (ms % 100 == 0)
		snprintf(out, len, "%llu.%01llu", (unsigned long long)(ms / 1000),
			 (unsigned long long)(ms % 1000 / 100));
	else if (ms % 10 == 0)
		snprintf(out, len, "%llu.%02llu", (unsigned long long)(ms / 1000),
			 (unsigned long long)(ms % 1000 / 10));
	else
		snprintf(out, len, "%llu.%03llu", (unsigned long long)(ms / 1000),
			 (unsigned long long)(ms % 1000));
}

static int store_mseconds(struct sl_keyerr *er, const struct sl_keydesc *d, const char *text,
			  const char *raw, int line, void *field)
{
	uint64_t v = 0;
	char lo[32], hi[32];
	int rc = sl_key_parse_duration_ms(text, &v);

	if (rc == -1)
		return bad_value(er, line, d, raw, "not a duration (seconds with up to three "
				 "decimals, or a number with the suffix ms, s, m or h)");
	format_ms(lo, sizeof lo, d->min);
	format_ms(hi, sizeof hi, d->max);
	if (rc == -2 || v < d->min || v > d->max)
		return bad_value(er, line, d, raw, "must be from %s to %s seconds", lo, hi);
	store_uint(field, d->size, v);
	return 0;
}

static int store_list(struct sl_keyerr *er, const struct sl_keydesc *d, const char *text,
		      const char *raw, bool expanded, int line, void *field)
{
	char **list = NULL, ***dst = (char ***)field, *bad = NULL;
	const char *why = NULL;
	int rc = sl_key_parse_list(text, d->validate, &list, &why, &bad);

	switch (rc) {
	case 0:
		sl_key_free_list(*dst);
		*dst = list;
		return 0;
	case -1:
		return bad_value(er, line, d, raw, "empty entry in the list");
	case -2:
		/* The entry is quoted only if it came from the file itself. */
		if (expanded)
			bad_value(er, line, d, raw, "%s", why);
		else
			bad_value(er, line, d, raw, "%s (\"%s\" is not)", why, bad);
		free(bad);
		return -1;
	default:
		return sl_keyerr_oom(er);
	}
}

static int store_secret(struct sl_keyerr *er, const struct sl_keydesc *d, const char *text,
			const char *raw, bool expanded, int line, void *field)
{
	char why[1024], *s = NULL, **dst = (char **)field;
	/* The variable or file name is quoted only if it came from the file itself. */
	const char *shown = expanded ? raw : text;
	int rc;

	if (d->type == SL_KT_SECRET_ENV)
		rc = sl_secret_from_env(d->name, text, shown, &s, why, sizeof why);
	else
		rc = sl_secret_from_file(d->name, text, shown, &s, why, sizeof why);
	if (rc < 0)
		return sl_keyerr_set(er, line, "%s", why);
	sl_secret_free(*dst);
	*dst = s;
	return 0;
}

/* Parses text (raw: as written, for messages; expanded: whether text took
 * anything from the environment) for row d and stores it into target.
 * 0, or -1 with the error set. */
static int store_value(struct sl_keyerr *er, const struct sl_keydesc *d, const char *text,
		       const char *raw, bool expanded, int line, void *target)
{
	void *field = (char *)target + d->off;
	const char *why;

	if (*text == '\0' && d->type != SL_KT_LIST &&
	    !(d->flags & (SL_KF_EMPTY_OK | SL_KF_EMPTY_NULL)))
		return bad_value(er, line, d, raw, "must not be empty");
	if (*text == '\0' && d->type == SL_KT_LIST && !(d->flags & SL_KF_EMPTY_OK))
		return bad_value(er, line, d, raw, "must not be empty");

	switch (d->type) {
	case SL_KT_STRING:
		if (*text == '\0' && (d->flags & SL_KF_EMPTY_NULL))
			return 0;
		if (d->validate && (why = d->validate(text)))
			return bad_value(er, line, d, raw, "%s", why);
		return store_string(er, (char **)field, text);
	case SL_KT_CHOICE:
	case SL_KT_ENUM:
		return store_choice(er, d, text, raw, line, field);
	case SL_KT_INT:
		return store_int(er, d, text, raw, line, field);
	case SL_KT_BYTES:
		return store_bytes(er, d, text, raw, line, field);
	case SL_KT_SECONDS:
		return store_seconds(er, d, text, raw, line, field);
	case SL_KT_MSECONDS:
		return store_mseconds(er, d, text, raw, line, field);
	case SL_KT_LIST:
		return store_list(er, d, text, raw, expanded, line, field);
	case SL_KT_SECRET_ENV:
	case SL_KT_SECRET_FILE:
		return store_secret(er, d, text, raw, expanded, line, field);
	}
	return sl_keyerr_set(er, line, "internal error: key \"%s\" has no type", d->name);
}

/* ---------------------------------------------------------------------- */
/* Applying a table                                                       */

static bool applies(const struct sl_keydesc *d, unsigned mask)
{
	return !d->applies || !mask || (d->applies & mask);
}

bool sl_keytab_has(const struct sl_keydesc *keys, size_t nkeys, const char *name)
{
	for (size_t i = 0; i < nkeys; i++)
		if (strcmp(keys[i].name, name) == 0)
			return true;
	return false;
}

const struct sl_keydesc *sl_keytab_find(const struct sl_keydesc *keys, size_t nkeys,
					const char *name, unsigned mask)
{
	for (size_t i = 0; i < nkeys; i++)
		if (strcmp(keys[i].name, name) == 0 && applies(&keys[i], mask))
			return &keys[i];
	return NULL;
}

static bool skipped(const struct sl_keyapply *how, const char *name)
{
	for (const char *const *s = how->skip; s && *s; s++)
		if (strcmp(*s, name) == 0)
			return true;
	return false;
}

/* "postgres", "avro_dir or s3": the types some row called name applies to. */
static void types_of_key(const struct sl_keydesc *keys, size_t nkeys, const char *name,
			 const struct sl_keyapply *how, char *out, size_t len)
{
	unsigned mask = 0;
	size_t n = 0;

	for (size_t i = 0; i < nkeys; i++)
		if (strcmp(keys[i].name, name) == 0)
			mask |= keys[i].applies;
	out[0] = '\0';
	for (unsigned t = 0; t < 32 && (mask >> t); t++) {
		if (!(mask & (1u << t)))
			continue;
		snprintf(out + n, len - n, "%s%s", n ? " or " : "",
			 how->type_names && t < how->ntypes ? how->type_names[t] : "?");
		n = strlen(out);
	}
}

static int default_unknown(struct sl_keyerr *er, const struct sl_ini_section *sec,
			   const struct sl_ini_entry *e, const char *types,
			   const struct sl_keyapply *how)
{
	if (!*types)
		return sl_keyerr_set(er, e->line, "unknown key \"%s\" in [%s]", e->key, sec->title);
	return sl_keyerr_set(er, e->line, "key \"%s\" applies only to type %s, not to %s", e->key,
			     types, how->type_name ? how->type_name : "this type");
}

/* Applies entry e of sec through row d: checks the key it excludes, then
 * parses and stores the value. */
static int apply_entry(struct sl_keyerr *er, const struct sl_ini_section *sec,
		       const struct sl_keydesc *d, const struct sl_ini_entry *e, void *target)
{
	const struct sl_ini_entry *other = d->excludes ? sl_ini_find(sec, d->excludes) : NULL;

	if (other) {
		const struct sl_ini_entry *first = other->line < e->line ? other : e;
		const struct sl_ini_entry *second = first == e ? other : e;

		return sl_keyerr_set(er, second->line, "%s and %s cannot both be set in [%s] (%s on "
				     "line %d)", first->key, second->key, sec->title, first->key,
				     first->line);
	}
	return store_value(er, d, e->value, e->raw, e->expanded, e->line, target);
}

int sl_keytab_apply_one(struct sl_keyerr *er, const struct sl_keydesc *keys, size_t nkeys,
			const struct sl_ini_section *sec, const char *name, void *target,
			const struct sl_ini_entry **entry)
{
	const struct sl_keydesc *d = sl_keytab_find(keys, nkeys, name, 0);
	const struct sl_ini_entry *e = sl_ini_find(sec, name);

	if (!d)
		return sl_keyerr_set(er, sec->line, "internal error: no key \"%s\" in the table", name);
	if (!e)
		return sl_keyerr_set(er, sec->line, "missing required key \"%s\" in [%s]", name,
				     sec->title);
	*entry = e;
	return apply_entry(er, sec, d, e, target);
}

int sl_keytab_apply(struct sl_keyerr *er, const struct sl_keydesc *keys, size_t nkeys,
		    const struct sl_ini_section *sec, void *target, const struct sl_keyapply *how)
{
	static const struct sl_keyapply all = { 0 };
	sl_key_unknown_fn unknown;
	uint64_t applied = 0;
	char types[256];

	if (!how)
		how = &all;
	unknown = how->unknown ? how->unknown : default_unknown;
	if (nkeys > MAX_ROWS)
		return sl_keyerr_set(er, sec->line, "internal error: [%s] has a table of more than "
				     "%d keys", sec->title, MAX_ROWS);
	for (size_t i = 0; i < sec->n; i++) {
		const struct sl_ini_entry *e = &sec->e[i];
		const struct sl_keydesc *d;
		uint64_t bit;

		if (skipped(how, e->key))
			continue;
		if (!(d = sl_keytab_find(keys, nkeys, e->key, how->mask))) {
			types_of_key(keys, nkeys, e->key, how, types, sizeof types);
			unknown(er, sec, e, types, how);
			/* In case unknown() forgot: the first error wins, so this is a no-op. */
			return sl_keyerr_set(er, e->line, "key \"%s\" is not valid here", e->key);
		}
		bit = UINT64_C(1) << (d - keys);
		if (applied & bit)
			continue;  /* not reached: the reader refuses a repeated key */
		if (apply_entry(er, sec, d, e, target) < 0)
			return -1;
		applied |= bit;
	}
	for (size_t i = 0; i < nkeys; i++) {
		const struct sl_keydesc *d = &keys[i];

		if ((applied & (UINT64_C(1) << i)) || !applies(d, how->mask) || skipped(how, d->name))
			continue;
		if (d->flags & SL_KF_REQUIRED) {
			if ((d->applies || how->typed) && how->type_name)
				return sl_keyerr_set(er, sec->line, "missing required key \"%s\" in [%s] "
						     "(required for type %s)", d->name, sec->title,
						     how->type_name);
			return sl_keyerr_set(er, sec->line, "missing required key \"%s\" in [%s]",
					     d->name, sec->title);
		}
		if (d->def && store_value(er, d, d->def, d->def, false, sec->line, target) < 0)
			return -1;
	}
	return 0;
}

void sl_keytab_free(const struct sl_keydesc *keys, size_t nkeys, void *target)
{
	for (size_t i = 0; i < nkeys; i++) {
		const struct sl_keydesc *d = &keys[i];
		void *field = (char *)target + d->off;

		switch (d->type) {
		case SL_KT_STRING:
		case SL_KT_CHOICE:
			free(*(char **)field);
			*(char **)field = NULL;
			break;
		case SL_KT_SECRET_ENV:
		case SL_KT_SECRET_FILE:
			sl_secret_free(*(char **)field);
			*(char **)field = NULL;
			break;
		case SL_KT_LIST:
			sl_key_free_list(*(char ***)field);
			*(char ***)field = NULL;
			break;
		default:
			break;
		}
	}
}
