/*
 * agent/config.c: reads and validates the INI configuration file
 * (doc/configuration.md is the user-facing reference).
 *
 * Who owns which keys:
 * - [agent] and the keys of [stream.NAME]: this file (agent_keys,
 *   stream_keys); the rows marked SOURCE_KEY apply only to streams from a
 *   source that names them (sl_source_ops.stream_keys); a source's own
 *   stream keys (sl_source_ops.stream_conf_keys: PostgreSQL's slot and
 *   publication) are its own table, applied to its own struct;
 * - [source.NAME]: "type" is read here; every other key belongs to the
 *   source that implements the type (sl_source_ops.keys, found through the
 *   registry), which gets its own struct (sources/source_conf.h);
 * - [destination.NAME]: "type" is read here; every other key belongs to the
 *   sink that implements the type (sl_sink_ops.keys, found through the
 *   registry), which gets its own struct (sl_dest_config.conf).
 * The rules and the messages of every key come from one engine,
 * common/keytab.c.
 *
 * Loading runs in two phases:
 *
 * 1. Read.  A small INI reader of our own (read_file(), parse_line()) takes
 *    the file one line at a time into a growable buffer, so a line may be of
 *    any length.  It follows the rules of libinih, which sluice used before,
 *    as Debian builds it: comments start with ';' or '#' at the start of a
 *    line, an inline comment with a ';' after whitespace; "key: value" works
 *    like "key = value"; whitespace around keys and values is dropped.  And
 *    it keeps sluice's stricter rules: no continuation lines (an indented
 *    line stands on its own), a NUL byte is an error, a UTF-8 byte order mark
 *    is skipped.  Each key is checked (known for its kind of section, not
 *    repeated), its ${NAME} references expanded, and it is collected into
 *    the current section.
 *
 * 2. Apply.  Each section goes through its key table into struct sl_config;
 *    the rows that decide which others apply (a section's type, a stream's
 *    source and destination) come first.  Then come the cross-checks: stream
 *    references, write_mode against what the destination's sink supports,
 *    default slot names, slots shared between streams, lag thresholds.
 *
 * Errors stop at the first problem and read "FILE:LINE: message" (see
 * common/keytab.h for the rules that keep secrets out of messages).
 * Nothing here exits or logs: the caller decides.
 */
#include "agent/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "common/keytab.h"
#include "common/log.h"
#include "common/secret.h"
#include "common/util.h"
#include "schema/mask.h"
#include "sources/source_conf.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define NAME_MAX_LEN 64          /* NAME in [source.NAME] etc. */

/* ---------------------------------------------------------------------- */
/* Validators                                                             */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static const char *valid_table_glob(const char *s)
{
	const char *dot = strchr(s, '.');

	if (!dot || dot == s || dot[1] == '\0')
		return "each entry must be SCHEMA.TABLE (globs allowed, such as public.orders or shop.*)";
	return NULL;
}

/* key_columns entries: SCHEMA.TABLE.COLUMN, three non-empty parts. */
static const char *valid_key_column(const char *s)
{
	const char *first = strchr(s, '.'), *last = strrchr(s, '.');

	if (!first || first == s || first == last || last == first + 1 || last[1] == '\0' || strpbrk(s, "*?["))
		return "each entry must be SCHEMA.TABLE.COLUMN, without globs, such as public.events.id";
	return NULL;
}

/* exclude_columns and mask_columns entries (schema/mask.h). */
static const char *valid_exclude_column(const char *s)
{
	return sl_mask_rule_check(s, false);
}

static const char *valid_mask_column(const char *s)
{
	return sl_mask_rule_check(s, true);
}

/* A port: 1-65535, digits only. */
static bool parse_port(const char *s)
{
	char *end;
	long long v;

	if (!is_digit(*s))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	return errno == 0 && *end == '\0' && v >= 1 && v <= 65535;
}

/* HOST:PORT, or [IPV6]:PORT; empty is handled by SL_KF_EMPTY_OK. */
static const char *valid_hostport(const char *s)
{
	static const char why[] =
		"must be HOST:PORT (such as 127.0.0.1:9187 or [::1]:9187), or empty to disable";
	const char *colon;

	if (*s == '\0')
		return NULL;
	if (*s == '[') {
		const char *close = strchr(s, ']');
		if (!close || close == s + 1 || close[1] != ':')
			return why;
		colon = close + 1;
	} else {
		colon = strchr(s, ':');
		if (!colon || colon == s || strchr(colon + 1, ':'))
			return why;
	}
	return parse_port(colon + 1) ? NULL : why;
}

static const char *valid_url(const char *s)
{
	size_t n;

	if (strncasecmp(s, "http://", 7) == 0)
		n = 7;
	else if (strncasecmp(s, "https://", 8) == 0)
		n = 8;
	else
		return "must be an http:// or https:// URL";
	if (s[n] == '\0' || s[n] == '/' || s[n] == ':')
		return "must be an http:// or https:// URL with a host";
	for (const char *p = s; *p; p++)
		if (*p == ' ' || *p == '\t')
			return "a URL cannot contain spaces";
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* sluice's own keys                                                      */

#define DAY_S UINT64_C(86400)
/* A stream row that applies only to streams from a source that names it
 * in its stream_keys (apply_stream() filters them). */
#define SOURCE_KEY 1u
/* The most rows a source's own stream conf has (sl_keytab_apply()'s bound). */
#define MAX_STREAM_CONF_KEYS 64

static const struct sl_keychoice log_levels[] = {
	{ "debug", SL_LOG_DEBUG }, { "info", SL_LOG_INFO }, { "warn", SL_LOG_WARN },
	{ "warning", SL_LOG_WARN }, { "error", SL_LOG_ERROR }, { NULL, 0 },
};
static const struct sl_keychoice backfill_modes[] = { { "auto", 1 }, { "none", 0 }, { NULL, 0 } };
static const struct sl_keychoice write_modes[] = {
	{ "append", SL_WRITE_APPEND }, { "merge", SL_WRITE_MERGE }, { NULL, 0 },
};

static const struct sl_keychoice log_formats[] = {
	{ "text", SL_LOG_TEXT }, { "json", SL_LOG_JSON }, { NULL, 0 },
};

static const struct sl_keydesc agent_keys[] = {
	{ .name = "state_dir", .type = SL_KT_STRING, .def = "./state",
	  FIELD(struct sl_config, state_dir) },
	{ .name = "log_level", .type = SL_KT_ENUM, .choices = log_levels, .def = "info",
	  FIELD(struct sl_config, log_level) },
	{ .name = "log_format", .type = SL_KT_ENUM, .choices = log_formats, .def = "text",
	  FIELD(struct sl_config, log_format) },
	{ .name = "metrics_listen", .type = SL_KT_STRING, .flags = SL_KF_EMPTY_OK,
	  .def = "", .validate = valid_hostport,
	  FIELD(struct sl_config, metrics_listen) },
	{ .name = "alert_webhook", .type = SL_KT_STRING, .flags = SL_KF_EMPTY_NULL,
	  .validate = valid_url, FIELD(struct sl_config, alert_webhook) },
	{ .name = "queue_bytes", .type = SL_KT_BYTES, .def = "8MB", .min = UINT64_C(256) * 1024,
	  .max = UINT64_C(1) << 40, FIELD(struct sl_config, queue_bytes) },
	{ .name = "probe_interval", .type = SL_KT_SECONDS, .def = "5", .min = 1, .max = 300,
	  FIELD(struct sl_config, probe_interval) },
	{ .name = "outage_log_interval", .type = SL_KT_SECONDS, .def = "60", .min = 1, .max = 3600,
	  FIELD(struct sl_config, outage_log_interval) },
};

/* Only the type: the sink that implements it owns the other keys. */
static const struct sl_keydesc dest_keys[] = {
	{ .name = "type", .type = SL_KT_STRING, .flags = SL_KF_REQUIRED,
	  FIELD(struct sl_dest_config, type) },
};

/* Stream rows apply by the kind of the stream's source. */
static const struct sl_keydesc stream_keys[] = {
	{ .name = "source", .type = SL_KT_STRING, .flags = SL_KF_REQUIRED,
	  FIELD(struct sl_stream_config, source_name) },
	{ .name = "destination", .type = SL_KT_STRING, .flags = SL_KF_REQUIRED,
	  FIELD(struct sl_stream_config, destination_name) },
	{ .name = "tables", .type = SL_KT_LIST, .flags = SL_KF_REQUIRED,
	  .validate = valid_table_glob, FIELD(struct sl_stream_config, tables) },
	{ .name = "exclude_tables", .type = SL_KT_LIST, .flags = SL_KF_EMPTY_OK, .def = "",
	  .validate = valid_table_glob, FIELD(struct sl_stream_config, exclude_tables) },
	{ .name = "key_columns", .type = SL_KT_LIST, .flags = SL_KF_EMPTY_OK, .def = "", .applies = SOURCE_KEY,
	  .validate = valid_key_column, FIELD(struct sl_stream_config, key_columns) },
	{ .name = "backfill", .type = SL_KT_ENUM, .choices = backfill_modes, .def = "auto",
	  FIELD(struct sl_stream_config, backfill) },
	{ .name = "write_mode", .type = SL_KT_ENUM, .choices = write_modes, .def = "append",
	  FIELD(struct sl_stream_config, write_mode) },
	{ .name = "lag_warn_bytes", .type = SL_KT_BYTES, .def = "256MB", .min = 0,
	  .max = UINT64_MAX, FIELD(struct sl_stream_config, lag_warn_bytes) },
	{ .name = "lag_critical_bytes", .type = SL_KT_BYTES, .def = "2GB", .min = 0,
	  .max = UINT64_MAX, FIELD(struct sl_stream_config, lag_critical_bytes) },
	{ .name = "retained_wal_warn_bytes", .type = SL_KT_BYTES, .def = "1GB", .min = 0,
	  .max = UINT64_MAX, FIELD(struct sl_stream_config, retained_wal_warn_bytes) },
	{ .name = "freshness_warn_seconds", .type = SL_KT_SECONDS, .def = "300", .min = 0,
	  .max = 365 * DAY_S, FIELD(struct sl_stream_config, freshness_warn_seconds) },
	{ .name = "retained_wal_critical_bytes", .type = SL_KT_BYTES, .def = "0", .min = 0,
	  .max = UINT64_MAX, FIELD(struct sl_stream_config, retained_wal_critical_bytes) },
	{ .name = "retained_wal_growth_warn_bytes", .type = SL_KT_BYTES, .def = "64MB", .min = 0,
	  .max = UINT64_MAX, FIELD(struct sl_stream_config, retained_wal_growth_warn_bytes) },
	{ .name = "slot_inactive_warn_seconds", .type = SL_KT_SECONDS, .def = "120", .min = 0,
	  .max = 365 * DAY_S, FIELD(struct sl_stream_config, slot_inactive_warn_seconds) },
	{ .name = "log_purge_warn_seconds", .type = SL_KT_SECONDS, .def = "24h", .min = 0,
	  .max = 365 * DAY_S, FIELD(struct sl_stream_config, log_purge_warn_seconds) },
	{ .name = "stream_down_warn_seconds", .type = SL_KT_SECONDS, .def = "60", .min = 0,
	  .max = 365 * DAY_S, FIELD(struct sl_stream_config, stream_down_warn_seconds) },
	{ .name = "heartbeat_interval", .type = SL_KT_SECONDS, .def = "0", .min = 0,
	  .max = 3600, FIELD(struct sl_stream_config, heartbeat_interval) },
	/* Column selection and masking (schema/mask.h); check_masking() below. */
	{ .name = "exclude_columns", .type = SL_KT_LIST, .flags = SL_KF_EMPTY_OK, .def = "",
	  .validate = valid_exclude_column, FIELD(struct sl_stream_config, exclude_columns) },
	{ .name = "mask_columns", .type = SL_KT_LIST, .flags = SL_KF_EMPTY_OK, .def = "",
	  .validate = valid_mask_column, FIELD(struct sl_stream_config, mask_columns) },
	{ .name = "mask_key_env", .type = SL_KT_SECRET_ENV, .excludes = "mask_key_file",
	  FIELD(struct sl_stream_config, mask_key) },
	{ .name = "mask_key_file", .type = SL_KT_SECRET_FILE, .excludes = "mask_key_env",
	  FIELD(struct sl_stream_config, mask_key) },
	{ .name = "status_interval", .type = SL_KT_MSECONDS, .def = "1", .min = 200, .max = 60 * 1000,
	  .applies = SOURCE_KEY, FIELD(struct sl_stream_config, status_interval_ms) },
};

_Static_assert(ARRAY_LEN(agent_keys) <= 64 && ARRAY_LEN(stream_keys) <= 64,
	       "too many rows for sl_keytab_apply()");
/* SL_KT_ENUM stores through the field size; these are the sizes used. */
_Static_assert(sizeof(enum sl_log_level) == 4 && sizeof(enum sl_log_format) == 4 &&
	       sizeof(enum sl_write_mode) == 4, "enum size");

/* ---------------------------------------------------------------------- */
/* Loader state                                                           */

enum sect { S_AGENT = 0, S_SOURCE, S_DEST, S_STREAM };

/* The section name, or what comes before ".NAME". */
static const char *const sect_prefix[] = {
	[S_AGENT] = "agent", [S_SOURCE] = "source", [S_DEST] = "destination", [S_STREAM] = "stream",
};

struct section {
	struct sl_ini_section ini;  /* title: what is between the brackets */
	enum sect kind;
	const char *name;           /* points into ini.title, after the dot ("" for [agent]) */
};

struct loader {
	const char *path;
	FILE *f;
	int line;                   /* number of lines read so far */
	struct sl_keyerr er;        /* the first error */
	struct section *secs;
	size_t nsecs, asecs;
	long cur;                   /* index of the current section, -1 before the first */
	struct sl_config *cfg;
};

/* Records the first error, "FILE:LINE: message" ("FILE: message" when line
 * is 0).  Always returns -1 so callers can write "return set_err(...)". */
__attribute__((format(printf, 3, 4)))
static int set_err(struct loader *L, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sl_keyerr_vset(&L->er, line, fmt, ap);
	va_end(ap);
	return -1;
}

static int oom(struct loader *L)
{
	return sl_keyerr_oom(&L->er);
}

static char *xstrdup(struct loader *L, const char *s)
{
	char *p = strdup(s);

	if (!p)
		oom(L);
	return p;
}

static void free_sections(struct loader *L)
{
	for (size_t i = 0; i < L->nsecs; i++)
		sl_ini_section_free(&L->secs[i].ini);
	free(L->secs);
	L->secs = NULL;
	L->nsecs = L->asecs = 0;
}

/* ---------------------------------------------------------------------- */
/* Phase 1: reading lines and collecting keys                             */

/* isspace() of the C locale. */
static bool is_space(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

static char *lskip(char *s)
{
	while (is_space(*s))
		s++;
	return s;
}

static char *rstrip(char *s)
{
	char *e = s + strlen(s);

	while (e > s && is_space(e[-1]))
		*--e = '\0';
	return s;
}

/* The first character of s that is in chars (when chars is not NULL), or
 * the ';' of an inline comment (a ';' right after whitespace), or the end of
 * s.  These are libinih's rules, kept so that no file changes meaning. */
static char *find_chars_or_comment(char *s, const char *chars)
{
	bool was_space = false;

	while (*s && (!chars || !strchr(chars, *s)) && !(was_space && *s == ';')) {
		was_space = is_space(*s);
		s++;
	}
	return s;
}

/* NAME of [source.NAME] etc.: 1-64 characters of [A-Za-z0-9_-]. */
static bool valid_section_name(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
		      is_digit(s[n]) || s[n] == '_' || s[n] == '-'))
			return false;
	return n >= 1 && n <= NAME_MAX_LEN;
}

/* True if key exists in a section of this kind: for destinations, "type"
 * or a key of any sink, and for sources "type" or a key of any source
 * (whether it applies to this section's type is
 * checked in phase 2, once the type is known). */
static bool key_known(enum sect kind, const char *key)
{
	switch (kind) {
	case S_AGENT:
		return sl_keytab_has(agent_keys, ARRAY_LEN(agent_keys), key);
	case S_SOURCE:
		return !strcmp(key, "type") || sl_source_has_key(key);
	case S_STREAM:
		return sl_keytab_has(stream_keys, ARRAY_LEN(stream_keys), key) || sl_source_has_stream_key(key);
	case S_DEST:
		if (sl_keytab_has(dest_keys, ARRAY_LEN(dest_keys), key))
			return true;
		for (size_t i = 0; i < sl_sink_count(); i++) {
			const struct sl_sink_ops *ops = sl_sink_at(i);
			if (sl_keytab_has(ops->keys, ops->nkeys, key))
				return true;
		}
		return false;
	}
	return false;
}

/* Parses a section header line (whitespace around it already gone) and
 * makes it the current section.  0, or -1 with the error set. */
static int start_section(struct loader *L, const char *line)
{
	const char *close = strchr(line, ']'), *p, *b, *e;
	char *name = NULL, *dot;
	struct section *s;
	enum sect kind = S_AGENT;
	int rc = -1;

	if (!close)
		return set_err(L, L->line, "syntax error: section header without \"]\"");
	for (p = close + 1; is_space(*p); p++)
		;
	if (*p && *p != ';' && *p != '#')
		return set_err(L, L->line, "syntax error: text after the section header");
	for (b = line + 1; is_space(*b); b++)
		;
	for (e = close; e > b && is_space(e[-1]); e--)
		;
	if (!(name = strndup(b, (size_t)(e - b))))
		return oom(L);

	dot = strchr(name, '.');
	if (strcmp(name, "agent") != 0) {
		size_t plen = dot ? (size_t)(dot - name) : 0;
		for (size_t i = S_SOURCE; i <= S_STREAM; i++)
			if (dot && strlen(sect_prefix[i]) == plen &&
			    strncmp(name, sect_prefix[i], plen) == 0)
				kind = (enum sect)i;
		if (kind == S_AGENT) {
			set_err(L, L->line, "unknown section [%s] (expected [agent], [source.NAME], "
				"[destination.NAME] or [stream.NAME])", name);
			goto out;
		}
		if (!valid_section_name(dot + 1)) {
			set_err(L, L->line, "bad section name [%s]: NAME must be 1-%d characters of "
				"A-Z, a-z, 0-9, _ and -", name, NAME_MAX_LEN);
			goto out;
		}
	}
	for (size_t i = 0; i < L->nsecs; i++) {
		if (strcmp(L->secs[i].ini.title, name) == 0) {
			set_err(L, L->line, "section [%s] repeated (first on line %d)", name,
				L->secs[i].ini.line);
			goto out;
		}
	}
	if (L->nsecs == L->asecs) {
		size_t na = L->asecs ? L->asecs * 2 : 8;
		struct section *ns = realloc(L->secs, na * sizeof *ns);
		if (!ns) {
			oom(L);
			goto out;
		}
		L->secs = ns;
		L->asecs = na;
	}
	s = &L->secs[L->nsecs];
	memset(s, 0, sizeof *s);
	s->kind = kind;
	s->ini.title = name;
	s->ini.line = L->line;
	s->name = kind == S_AGENT ? "" : dot + 1;
	name = NULL;  /* owned by the section now */
	L->cur = (long)L->nsecs++;
	rc = 0;
out:
	free(name);
	return rc;
}

/* One "key = value" line: checks that the key is known in the current
 * section and not repeated, expands ${NAME}, and adds the entry.  0, or -1
 * with the error set. */
static int add_key(struct loader *L, const char *key, const char *value)
{
	struct section *sec;
	const struct sl_ini_entry *e;
	char why[SL_ERRLEN], *expanded = NULL;
	bool from_env;

	if (L->cur < 0)
		return set_err(L, L->line, "key \"%s\" outside of any section", key);
	sec = &L->secs[L->cur];
	if (!key_known(sec->kind, key)) {
		if (strcmp(key, "password") == 0)
			return set_err(L, L->line, "unknown key \"password\" in [%s]: put the password "
				       "in an environment variable or a file, and name it with "
				       "password_env or password_file", sec->ini.title);
		return set_err(L, L->line, "unknown key \"%s\" in [%s]", key, sec->ini.title);
	}
	if ((e = sl_ini_find(&sec->ini, key)))
		return set_err(L, L->line, "duplicate key \"%s\" in [%s] (first on line %d)", key,
			       sec->ini.title, e->line);
	if (sl_env_expand(value, key, &expanded, &from_env, why, sizeof why) < 0)
		return set_err(L, L->line, "%s", why);
	if (sl_ini_add(&sec->ini, key, value, expanded, from_env, L->line) < 0)
		return oom(L);
	return 0;
}

/* Parses one line (without its line end; modified in place).  0, or -1
 * with the error set. */
static int parse_line(struct loader *L, char *line)
{
	char *start = line, *end, *key, *value;

	if (L->line == 1 && strncmp(start, "\xEF\xBB\xBF", 3) == 0)
		start += 3;
	start = lskip(rstrip(start));
	if (*start == '\0' || *start == ';' || *start == '#')
		return 0;
	if (*start == '[')
		return start_section(L, start);
	end = find_chars_or_comment(start, "=:");
	if (*end != '=' && *end != ':')
		return set_err(L, L->line, "syntax error: expected \"[section]\", \"key = value\" or "
			       "a comment");
	*end = '\0';
	key = rstrip(start);
	value = end + 1;
	*find_chars_or_comment(value, NULL) = '\0';
	value = lskip(value);
	rstrip(value);
	if (*key == '\0')
		return set_err(L, L->line, "syntax error: expected \"[section]\", \"key = value\" or "
			       "a comment");
	return add_key(L, key, value);
}

/* Reads the file line by line, of any length, into the sections.  A NUL
 * byte anywhere in a line is an error.  0, or -1 with the error set. */
static int read_file(struct loader *L)
{
	struct sl_buf line;
	int rc = -1;

	sl_buf_init(&line, 0);
	for (;;) {
		bool got = false, nul = false;
		int c;

		sl_buf_reset(&line);
		while ((c = getc(L->f)) != EOF) {
			got = true;
			if (c == '\n')
				break;
			if (c == '\0')
				nul = true;
			sl_buf_putc(&line, (char)c);
		}
		if (ferror(L->f)) {
			set_err(L, 0, "cannot read: %s", sl_strerror(errno));
			goto out;
		}
		if (!got)
			break;
		L->line++;
		sl_buf_append(&line, "", 0);  /* NUL-terminated, also when empty */
		if (sl_buf_failed(&line)) {
			oom(L);
			goto out;
		}
		if (nul) {
			set_err(L, L->line, "NUL byte in line");
			goto out;
		}
		if (parse_line(L, line.data) < 0)
			goto out;
	}
	rc = 0;
out:
	sl_buf_free(&line);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Phase 2: applying values through the key tables                        */

static int apply_agent(struct loader *L, const struct section *sec, struct sl_config *cfg)
{
	return sl_keytab_apply(&L->er, agent_keys, ARRAY_LEN(agent_keys), &sec->ini, cfg, NULL);
}

/* The source types that have key (in their keys, or in their stream_keys
 * with streams), other than ops: "postgres", "postgres or mysql"; "" none. */
static void source_types_of(const char *key, bool streams, const struct sl_source_ops *ops, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (size_t i = 0; i < sl_source_count() && n < len; i++) {
		const struct sl_source_ops *o = sl_source_at(i);
		bool has = false;
		if (o == ops)
			continue;
		if (!streams)
			has = sl_keytab_has(o->keys, o->nkeys, key);
		for (const char *const *k = o->stream_keys; streams && k && *k && !has; k++)
			has = !strcmp(*k, key);
		if (!has)
			continue;
		snprintf(out + n, len - n, "%s%s", n ? " or " : "", o->type);
		n += strlen(out + n);
	}
}

/* A key of [source.NAME] that the type's source does not have: it belongs
 * to other sources (phase 1 refused keys that no source has). */
static int source_unknown(struct sl_keyerr *er, const struct sl_ini_section *sec, const struct sl_ini_entry *e,
			  const char *types, const struct sl_keyapply *how)
{
	char others[256];

	(void)types;  /* the source's own table knows no other types */
	source_types_of(e->key, false, how->arg, others, sizeof others);
	if (!others[0])
		return sl_keyerr_set(er, e->line, "unknown key \"%s\" in [%s]", e->key, sec->title);
	return sl_keyerr_set(er, e->line, "key \"%s\" applies only to type %s, not to %s", e->key, others,
			     how->type_name);
}

static int apply_source(struct loader *L, const struct section *sec, struct sl_source_config **out)
{
	static const char *const skip[] = { "type", NULL };
	struct sl_keyapply how = { .mask = SL_SOURCE_OWN, .ntypes = 1, .skip = skip, .unknown = source_unknown };
	const struct sl_ini_entry *e = sl_ini_find(&sec->ini, "type");
	const struct sl_source_ops *ops;
	struct sl_source_config *src;
	char types[256];

	if (!e)
		return set_err(L, sec->ini.line, "missing required key \"type\" in [%s]", sec->ini.title);
	if (!(ops = sl_source_lookup(e->value))) {
		sl_source_types(types, sizeof types, ", ");
		return set_err(L, e->line, "bad value \"%s\" for key \"type\": must be one of %s", e->raw, types);
	}
	if (!(src = *out = calloc(1, ops->conf_size)))
		return oom(L);
	src->ops = ops;
	if (!(src->name = xstrdup(L, sec->name)))
		return -1;
	how.type_name = ops->type;
	how.type_names = &ops->type;
	how.arg = ops;
	if (sl_keytab_apply(&L->er, ops->keys, ops->nkeys, &sec->ini, src, &how) < 0)
		return -1;
	if (ops->conf_check && ops->conf_check(src, &sec->ini, &L->er) < 0)
		return set_err(L, sec->ini.line, "bad configuration in [%s]", sec->ini.title);
	return 0;
}

/* A key of [destination.NAME] that the type's sink does not have: it
 * belongs to other sinks (phase 1 refused keys that no sink has). */
static int dest_unknown(struct sl_keyerr *er, const struct sl_ini_section *sec,
			const struct sl_ini_entry *e, const char *types,
			const struct sl_keyapply *how)
{
	char others[256];
	size_t n = 0;

	(void)types;  /* the sink's own table knows no other types */
	others[0] = '\0';
	for (size_t i = 0; i < sl_sink_count() && n < sizeof others; i++) {
		const struct sl_sink_ops *ops = sl_sink_at(i);
		if (!sl_keytab_has(ops->keys, ops->nkeys, e->key))
			continue;
		snprintf(others + n, sizeof others - n, "%s%s", n ? " or " : "", ops->type);
		n += strlen(others + n);
	}
	if (n == 0)
		return sl_keyerr_set(er, e->line, "unknown key \"%s\" in [%s]", e->key, sec->title);
	return sl_keyerr_set(er, e->line, "key \"%s\" applies only to type %s, not to %s", e->key,
			     others, how->type_name);
}

static int apply_dest(struct loader *L, const struct section *sec, struct sl_dest_config *dc)
{
	static const char *const skip[] = { "type", NULL };
	struct sl_keyapply how = { .typed = true, .skip = skip, .unknown = dest_unknown };
	const struct sl_ini_entry *e;
	const struct sl_sink_ops *ops;
	char types[256];

	if (!(dc->name = xstrdup(L, sec->name)))
		return -1;
	if (sl_keytab_apply_one(&L->er, dest_keys, ARRAY_LEN(dest_keys), &sec->ini, "type", dc,
				&e) < 0)
		return -1;
	if (!(ops = sl_sink_lookup(dc->type))) {
		sl_sink_types(types, sizeof types);
		return set_err(L, e->line, "bad value \"%s\" for key \"type\": no sink implements this "
			       "destination type (supported: %s)", e->raw, types);
	}
	dc->ops = ops;
	if (!(dc->conf = calloc(1, ops->conf_size ? ops->conf_size : 1)))
		return oom(L);
	how.type_name = ops->type;
	if (sl_keytab_apply(&L->er, ops->keys, ops->nkeys, &sec->ini, dc->conf, &how) < 0)
		return -1;
	if (ops->conf_check && ops->conf_check(dc->conf, &sec->ini, &L->er) < 0)
		return set_err(L, sec->ini.line, "bad configuration in [%s]", sec->ini.title);
	return 0;
}

/* A key of [stream.NAME] whose rows apply only to streams from another kind
 * of source; how->arg is the stream's source. */
static int stream_unknown(struct sl_keyerr *er, const struct sl_ini_section *sec,
			  const struct sl_ini_entry *e, const char *types,
			  const struct sl_keyapply *how)
{
	const struct sl_source_config *src = how->arg;
	char others[256];

	(void)types;  /* the table holds only the rows of this stream's source */
	source_types_of(e->key, true, src->ops, others, sizeof others);
	if (!others[0])
		return sl_keyerr_set(er, e->line, "unknown key \"%s\" in [%s]", e->key, sec->title);
	return sl_keyerr_set(er, e->line, "key \"%s\" applies only to streams from a %s source, and "
			     "source \"%s\" is %s", e->key, others, sl_ini_find(sec, "source")->raw,
			     src->ops->type);
}

/* The keys of sec that are not rows of keys (nkeys), NULL-terminated, in
 * a new array (freed by the caller); NULL when out of memory. */
static const char **keys_but(const struct sl_ini_section *sec, const struct sl_keydesc *keys, size_t nkeys)
{
	const char **out;
	size_t n = 0;

	if (!(out = calloc(sec->n + 1, sizeof *out)))
		return NULL;
	for (size_t i = 0; i < sec->n; i++)
		if (!sl_keytab_has(keys, nkeys, sec->e[i].key))
			out[n++] = sec->e[i].key;
	return out;
}

/* The source's own stream keys (sl_source_ops.stream_conf_keys) of sec
 * into st->source_conf: the rows the source has, the others left to the
 * stream's table.  0, or -1 with the error set. */
static int apply_stream_conf(struct loader *L, const struct section *sec, struct sl_stream_config *st)
{
	const struct sl_source_ops *ops = st->source->ops;
	struct sl_keyapply how = { .type_name = ops->type, .typed = true };
	const char **skip;
	int rc;

	if (!ops->stream_conf_size)
		return 0;
	if (!(st->source_conf = calloc(1, ops->stream_conf_size)))
		return oom(L);
	if (!(skip = keys_but(&sec->ini, ops->stream_conf_keys, ops->stream_conf_nkeys)))
		return oom(L);
	how.skip = skip;
	rc = sl_keytab_apply(&L->er, ops->stream_conf_keys, ops->stream_conf_nkeys, &sec->ini, st->source_conf, &how);
	free(skip);
	return rc;
}

/* The string of the source's stream key name (a row of its
 * stream_conf_keys), NULL when it has no such key or it is unset. */
static const char *stream_conf_string(const struct sl_stream_config *st, const char *name)
{
	const struct sl_source_ops *ops = st->source->ops;

	for (size_t i = 0; st->source_conf && i < ops->stream_conf_nkeys; i++)
		if (!strcmp(ops->stream_conf_keys[i].name, name) && ops->stream_conf_keys[i].type == SL_KT_STRING)
			return *(char *const *)((const char *)st->source_conf + ops->stream_conf_keys[i].off);
	return NULL;
}

/* Column masking: a hash rule needs the key, and a key needs a hash rule
 * (a key read for nothing is a mistake).  0, or -1 with the error set. */
static int check_masking(struct loader *L, const struct section *sec, const struct sl_stream_config *st)
{
	const struct sl_ini_entry *e = sl_ini_find(&sec->ini, "mask_columns");
	bool hashes = false;

	for (char **r = st->mask_columns; r && *r; r++) {
		const char *colon = strrchr(*r, ':');
		if (colon && strcmp(colon + 1, "hash") == 0)
			hashes = true;
	}
	if (hashes && !st->mask_key)
		return set_err(L, e->line, "mask_columns in [%s] hashes a column, and there is no mask key: set "
			       "mask_key_env or mask_key_file", sec->ini.title);
	if (!hashes && st->mask_key) {
		e = sl_ini_find(&sec->ini, "mask_key_env");
		if (!e)
			e = sl_ini_find(&sec->ini, "mask_key_file");
		return set_err(L, e ? e->line : sec->ini.line, "%s in [%s] is set, and no mask_columns rule "
			       "hashes", e ? e->key : "mask_key_env", sec->ini.title);
	}
	return 0;
}

/* True when the source takes the SOURCE_KEY row key. */
static bool takes_key(const struct sl_source_ops *ops, const char *key)
{
	for (const char *const *k = ops->stream_keys; k && *k; k++)
		if (!strcmp(*k, key))
			return true;
	return false;
}

/* The rows of stream_keys that apply to a stream from source ops, in table
 * order, into rows; returns their number. */
static size_t stream_rows(const struct sl_source_ops *ops, struct sl_keydesc *rows)
{
	size_t n = 0;

	for (size_t i = 0; i < ARRAY_LEN(stream_keys); i++) {
		if (stream_keys[i].applies == SOURCE_KEY && !takes_key(ops, stream_keys[i].name))
			continue;
		rows[n] = stream_keys[i];
		rows[n++].applies = 0;
	}
	return n;
}

static int apply_stream(struct loader *L, const struct section *sec, struct sl_stream_config *st)
{
	static const char *const skip[] = { "source", "destination", NULL };
	struct sl_config *cfg = L->cfg;
	struct sl_keyapply how = { .skip = skip, .unknown = stream_unknown };
	struct sl_keydesc rows[ARRAY_LEN(stream_keys)];
	const struct sl_ini_entry *src_e, *dst_e, *e;
	const struct sl_source_ops *ops;
	const char *own[2 + MAX_STREAM_CONF_KEYS + 1] = { "source", "destination" };
	size_t nrows, nown = 2;
	int i;

	if (!(st->name = xstrdup(L, sec->name)))
		return -1;
	if (sl_keytab_apply_one(&L->er, stream_keys, ARRAY_LEN(stream_keys), &sec->ini, "source",
				st, &src_e) < 0)
		return -1;
	for (i = 0; i < cfg->nsources; i++)
		if (strcmp(cfg->sources[i]->name, st->source_name) == 0)
			st->source = cfg->sources[i];
	if (!st->source)
		return set_err(L, src_e->line, "unknown source \"%s\" in [%s] (there is no "
			       "[source.%s] section)", src_e->raw, sec->ini.title, src_e->raw);
	if (sl_keytab_apply_one(&L->er, stream_keys, ARRAY_LEN(stream_keys), &sec->ini,
				"destination", st, &dst_e) < 0)
		return -1;
	for (i = 0; i < cfg->ndestinations; i++)
		if (strcmp(cfg->destinations[i].name, st->destination_name) == 0)
			st->destination = &cfg->destinations[i];
	if (!st->destination)
		return set_err(L, dst_e->line, "unknown destination \"%s\" in [%s] (there is no "
			       "[destination.%s] section)", dst_e->raw, sec->ini.title, dst_e->raw);
	how.arg = st->source;
	ops = st->source->ops;
	nrows = stream_rows(ops, rows);
	/* The source's own rows are its stream conf's (apply_stream_conf). */
	for (size_t k = 0; k < ops->stream_conf_nkeys && k < MAX_STREAM_CONF_KEYS; k++)
		own[nown++] = ops->stream_conf_keys[k].name;
	own[nown] = NULL;
	how.skip = own;
	if (sl_keytab_apply(&L->er, rows, nrows, &sec->ini, st, &how) < 0 || apply_stream_conf(L, sec, st) < 0)
		return -1;

	/* What the sink supports: merge mode is the only capability so far. */
	if (st->write_mode == SL_WRITE_MERGE && !(st->destination->ops->caps & SL_SINK_CAP_MERGE)) {
		e = sl_ini_find(&sec->ini, "write_mode");
		return set_err(L, e ? e->line : sec->ini.line, "destination \"%s\": write_mode = merge is "
			       "not supported by type = %s yet; use write_mode = append",
			       st->destination->name, st->destination->type);
	}
	/* The source fills what derives from the stream's name (PostgreSQL: the
	 * default slot and publication). */
	if (ops->stream_conf_check && ops->stream_conf_check(st->source_conf, &sec->ini, st->name, &L->er) < 0)
		return set_err(L, sec->ini.line, "bad configuration in [%s]", sec->ini.title);
	st->slot = stream_conf_string(st, "slot");
	st->publication = stream_conf_string(st, "publication");
	if (st->lag_warn_bytes && st->lag_critical_bytes &&
	    st->lag_critical_bytes < st->lag_warn_bytes) {
		e = sl_ini_find(&sec->ini, "lag_critical_bytes");
		if (!e)
			e = sl_ini_find(&sec->ini, "lag_warn_bytes");
		return set_err(L, e ? e->line : sec->ini.line, "lag_critical_bytes is lower than "
			       "lag_warn_bytes in [%s]", sec->ini.title);
	}
	if (st->retained_wal_warn_bytes && st->retained_wal_critical_bytes &&
	    st->retained_wal_critical_bytes < st->retained_wal_warn_bytes) {
		e = sl_ini_find(&sec->ini, "retained_wal_critical_bytes");
		if (!e)
			e = sl_ini_find(&sec->ini, "retained_wal_warn_bytes");
		return set_err(L, e ? e->line : sec->ini.line, "retained_wal_critical_bytes is lower than "
			       "retained_wal_warn_bytes in [%s]", sec->ini.title);
	}
	return check_masking(L, sec, st);
}

/* Where a stream's slot name was set: the slot line, or the section line. */
static int slot_line(const struct section *sec)
{
	const struct sl_ini_entry *e = sl_ini_find(&sec->ini, "slot");

	return e ? e->line : sec->ini.line;
}

/* The slot name as messages may show it: as written when it came from ${NAME}. */
static const char *slot_shown(const struct section *sec, const struct sl_stream_config *st)
{
	const struct sl_ini_entry *e = sl_ini_find(&sec->ini, "slot");

	return e && e->expanded ? e->raw : st->slot;
}

/* Two streams of one PostgreSQL source cannot share a slot: each would
 * consume, and acknowledge, the other's changes. */
static int check_slots(struct loader *L, const struct section **stream_secs)
{
	struct sl_config *cfg = L->cfg;

	for (int j = 0; j < cfg->nstreams; j++) {
		const struct sl_stream_config *b = &cfg->streams[j];
		if (!b->slot)
			continue;
		for (int i = 0; i < j; i++) {
			const struct sl_stream_config *a = &cfg->streams[i];
			if (a->source != b->source || strcmp(a->slot, b->slot) != 0)
				continue;
			return set_err(L, slot_line(stream_secs[j]), "slot \"%s\" of [stream.%s] is "
				       "already used by [stream.%s] (line %d) on source \"%s\": each "
				       "stream needs its own slot", slot_shown(stream_secs[j], b),
				       b->name, a->name, slot_line(stream_secs[i]), b->source->name);
		}
	}
	return 0;
}

static int build_config(struct loader *L)
{
	struct sl_config *cfg = L->cfg;
	static const struct section no_agent = {
		.ini = { .title = (char *)"agent", .line = 0 }, .kind = S_AGENT, .name = "",
	};
	const struct section *agent = &no_agent, **stream_secs = NULL;
	int ns = 0, nd = 0, nt = 0, rc = -1;

	for (size_t i = 0; i < L->nsecs; i++) {
		switch (L->secs[i].kind) {
		case S_AGENT: agent = &L->secs[i]; break;
		case S_SOURCE: cfg->nsources++; break;
		case S_DEST: cfg->ndestinations++; break;
		case S_STREAM: cfg->nstreams++; break;
		}
	}
	if (cfg->nstreams == 0)
		return set_err(L, 0, "no [stream.NAME] section");
	if (cfg->nsources &&
	    !(cfg->sources = calloc((size_t)cfg->nsources, sizeof *cfg->sources)))
		return oom(L);
	if (cfg->ndestinations &&
	    !(cfg->destinations = calloc((size_t)cfg->ndestinations, sizeof *cfg->destinations)))
		return oom(L);
	if (!(cfg->streams = calloc((size_t)cfg->nstreams, sizeof *cfg->streams)) ||
	    !(stream_secs = calloc((size_t)cfg->nstreams, sizeof *stream_secs)))
		return oom(L);

	/* Order: [agent], sources, destinations, then streams, which refer to both. */
	if (apply_agent(L, agent, cfg) < 0)
		goto out;
	for (size_t i = 0; i < L->nsecs; i++) {
		const struct section *s = &L->secs[i];
		if (s->kind == S_SOURCE && apply_source(L, s, &cfg->sources[ns++]) < 0)
			goto out;
		if (s->kind == S_DEST && apply_dest(L, s, &cfg->destinations[nd++]) < 0)
			goto out;
	}
	for (size_t i = 0; i < L->nsecs; i++) {
		const struct section *s = &L->secs[i];
		if (s->kind != S_STREAM)
			continue;
		stream_secs[nt] = s;
		if (apply_stream(L, s, &cfg->streams[nt++]) < 0)
			goto out;
	}
	rc = check_slots(L, stream_secs);
out:
	free(stream_secs);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Public API                                                             */

struct sl_config *sl_config_load_stream(FILE *f, const char *path, char *err, size_t errlen)
{
	char scratch[SL_ERRLEN];
	struct loader L = { .path = path, .cur = -1, .f = f };
	struct sl_config *cfg = NULL;
	int open_errno = errno;

	if (!err || errlen == 0)
		sl_keyerr_init(&L.er, path, scratch, sizeof scratch);
	else
		sl_keyerr_init(&L.er, path, err, errlen);
	if (!L.f) {
		set_err(&L, 0, "cannot open: %s", sl_strerror(open_errno));
		goto out;
	}
	if (read_file(&L) < 0)
		goto out;
	if (!(cfg = calloc(1, sizeof *cfg)) || !(cfg->path = strdup(path))) {
		oom(&L);
		goto out;
	}
	if (!(cfg->abs_path = realpath(path, NULL)) && !(cfg->abs_path = strdup(path))) {
		oom(&L);
		goto out;
	}
	L.cfg = cfg;
	if (build_config(&L) < 0)
		goto out;
	L.cfg = NULL;  /* success: the caller owns cfg */
out:
	if (L.f)
		fclose(L.f);
	free_sections(&L);
	if (L.er.failed) {  /* build_config() may have filled part of cfg */
		sl_config_free(cfg);
		cfg = NULL;
	}
	return cfg;
}

struct sl_config *sl_config_load(const char *path, char *err, size_t errlen)
{
	return sl_config_load_stream(fopen(path, "r"), path, err, errlen);
}

static void free_dest(struct sl_dest_config *dc)
{
	if (dc->conf) {
		if (dc->ops->conf_free)
			dc->ops->conf_free(dc->conf);
		sl_keytab_free(dc->ops->keys, dc->ops->nkeys, dc->conf);
		free(dc->conf);
	}
	sl_keytab_free(dest_keys, ARRAY_LEN(dest_keys), dc);
	free(dc->name);
}

void sl_config_free(struct sl_config *cfg)
{
	if (!cfg)
		return;
	sl_keytab_free(agent_keys, ARRAY_LEN(agent_keys), cfg);
	/* The streams first: a stream's source conf is freed by its source's table. */
	for (int i = 0; cfg->streams && i < cfg->nstreams; i++) {
		const struct sl_source_ops *ops = cfg->streams[i].source ? cfg->streams[i].source->ops : NULL;
		sl_keytab_free(stream_keys, ARRAY_LEN(stream_keys), &cfg->streams[i]);
		if (ops && cfg->streams[i].source_conf)
			sl_keytab_free(ops->stream_conf_keys, ops->stream_conf_nkeys, cfg->streams[i].source_conf);
		free(cfg->streams[i].source_conf);
		free(cfg->streams[i].name);
	}
	for (int i = 0; cfg->sources && i < cfg->nsources; i++) {
		struct sl_source_config *src = cfg->sources[i];
		if (!src)
			continue;
		sl_keytab_free(src->ops->keys, src->ops->nkeys, src);
		free(src->name);
		free(src);
	}
	for (int i = 0; cfg->destinations && i < cfg->ndestinations; i++)
		free_dest(&cfg->destinations[i]);
	free(cfg->sources);
	free(cfg->destinations);
	free(cfg->streams);
	free(cfg->path);
	free(cfg->abs_path);
	free(cfg);
}

struct sl_stream_config *sl_config_stream(struct sl_config *cfg, const char *name)
{
	for (int i = 0; cfg && i < cfg->nstreams; i++)
		if (strcmp(cfg->streams[i].name, name) == 0)
			return &cfg->streams[i];
	return NULL;
}
