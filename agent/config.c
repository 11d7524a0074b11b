/*
 * agent/config.c: loads and validates the INI configuration file
 * (doc/configuration.md is the user-facing reference).
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
 * 2. Apply.  Each section kind has one table of key descriptors (name, value
 *    type, bounds, default, types it applies to, required-ness, target
 *    field, validator).  Every value, defaults included, goes through the
 *    same parsing code into struct sl_config.  Then come the cross-checks:
 *    stream references, default slot names, slots shared between streams.
 *
 * Errors stop at the first problem and read "FILE:LINE: message".  A value
 * is quoted in a message only as written in the file (before ${NAME}
 * expansion), and resolved passwords are never quoted, so no message can
 * hold a secret.  Nothing here exits or logs: the caller decides.
 */
#include "agent/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/util.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define NAME_MAX_LEN 64          /* NAME in [source.NAME] etc. */
#define SLOT_MAX_LEN 63          /* PostgreSQL NAMEDATALEN - 1 */
#define SECRET_FILE_MAX 65536    /* a password file larger than this is a mistake */

/* ---------------------------------------------------------------------- */
/* Key descriptors                                                        */

enum key_type {
	KT_STRING,       /* char *: non-empty unless F_EMPTY_OK */
	KT_CHOICE,       /* char *: one of choices[], stored as text */
	KT_ENUM,         /* integer-like field (enum, int, bool): choices[i].value */
	KT_INT,          /* int or uint32_t field, min..max (strtoll) */
	KT_BYTES,        /* uint64_t: a byte size with optional suffix, min..max */
	KT_SECONDS,      /* int or uint64_t: a duration with optional s/m/h suffix, min..max */
	KT_LIST,         /* char **: comma-separated, NULL-terminated */
	KT_SECRET_ENV,   /* char *password: read from the named environment variable */
	KT_SECRET_FILE,  /* char *password: read from the named file (mode 0600 or less) */
};

#define F_REQUIRED  0x1u  /* must be present (for the types the row applies to) */
#define F_EMPTY_OK  0x2u  /* the empty string is a valid value */
#define F_EMPTY_NULL 0x4u /* the empty string means "not set": the field stays NULL */

struct choice {
	const char *name;
	int value;
};

/* Returns NULL if s is acceptable, or a short reason (a static string). */
typedef const char *(*validator_fn)(const char *s);

struct key_desc {
	const char *name;
	enum key_type type;
	unsigned applies;              /* mask of (1 << type); 0: every type */
	unsigned flags;
	const char *def;               /* default, parsed like a value; NULL: none */
	size_t off, size;              /* target field in the section's struct */
	const struct choice *choices;  /* KT_CHOICE, KT_ENUM; ends with a NULL name */
	uint64_t min, max;             /* KT_INT, KT_BYTES, KT_SECONDS */
	const char *excludes;          /* a key that may not be given together with this one */
	validator_fn validate;         /* KT_STRING: the value; KT_LIST: each entry */
};

#define FIELD(type, member) .off = offsetof(type, member), .size = sizeof(((type *)0)->member)

enum sect { S_AGENT = 0, S_SOURCE, S_DEST, S_STREAM };

/* Type numbers: source kinds come from enum sl_source_kind. */
#define T_PG (1u << SL_SOURCE_POSTGRES)
#define T_MY (1u << SL_SOURCE_MYSQL)
enum { DEST_AVRO_DIR = 0, DEST_CLICKHOUSE };
#define T_AVRO (1u << DEST_AVRO_DIR)
#define T_CH (1u << DEST_CLICKHOUSE)

static const char *valid_hostport(const char *s);
static const char *valid_url(const char *s);
static const char *valid_table_glob(const char *s);
static const char *valid_slot_name(const char *s);
static const char *valid_identifier(const char *s);

static const struct choice log_levels[] = {
	{ "debug", SL_LOG_DEBUG }, { "info", SL_LOG_INFO }, { "warn", SL_LOG_WARN },
	{ "warning", SL_LOG_WARN }, { "error", SL_LOG_ERROR }, { NULL, 0 },
};
static const struct choice source_types[] = {
	{ "postgres", SL_SOURCE_POSTGRES }, { "mysql", SL_SOURCE_MYSQL }, { NULL, 0 },
};
static const struct choice dest_types[] = {
	{ "avro_dir", DEST_AVRO_DIR }, { "clickhouse", DEST_CLICKHOUSE }, { NULL, 0 },
};
static const struct choice pg_sslmodes[] = {
	{ "disable", 0 }, { "allow", 0 }, { "prefer", 0 }, { "require", 0 },
	{ "verify-ca", 0 }, { "verify-full", 0 }, { NULL, 0 },
};
static const struct choice my_ssl_modes[] = {
	{ "disabled", 0 }, { "preferred", 0 }, { "required", 0 }, { "verify_ca", 0 },
	{ "verify_identity", 0 }, { NULL, 0 },
};
static const struct choice codecs[] = {
	{ "null", SL_CODEC_NULL }, { "deflate", SL_CODEC_DEFLATE }, { "snappy", SL_CODEC_SNAPPY },
	{ NULL, 0 },
};
static const struct choice backfill_modes[] = { { "auto", 1 }, { "none", 0 }, { NULL, 0 } };
static const struct choice write_modes[] = {
	{ "append", SL_WRITE_APPEND }, { "merge", SL_WRITE_MERGE }, { NULL, 0 },
};

#define KIB UINT64_C(1024)
#define DAY_S UINT64_C(86400)

static const struct key_desc agent_keys[] = {
	{ .name = "state_dir", .type = KT_STRING, .def = "./state",
	  FIELD(struct sl_config, state_dir) },
	{ .name = "log_level", .type = KT_ENUM, .choices = log_levels, .def = "info",
	  FIELD(struct sl_config, log_level) },
	{ .name = "metrics_listen", .type = KT_STRING, .flags = F_EMPTY_OK, .def = "127.0.0.1:9187",
	  .validate = valid_hostport, FIELD(struct sl_config, metrics_listen) },
	{ .name = "alert_webhook", .type = KT_STRING, .flags = F_EMPTY_NULL, .validate = valid_url,
	  FIELD(struct sl_config, alert_webhook) },
};

static const struct key_desc source_keys[] = {
	{ .name = "type", .type = KT_ENUM, .flags = F_REQUIRED, .choices = source_types,
	  FIELD(struct sl_source_config, kind) },
	{ .name = "host", .type = KT_STRING, .def = "127.0.0.1",
	  FIELD(struct sl_source_config, host) },
	{ .name = "port", .type = KT_INT, .applies = T_PG, .def = "5432", .min = 1, .max = 65535,
	  FIELD(struct sl_source_config, port) },
	{ .name = "port", .type = KT_INT, .applies = T_MY, .def = "3306", .min = 1, .max = 65535,
	  FIELD(struct sl_source_config, port) },
	{ .name = "user", .type = KT_STRING, .flags = F_REQUIRED,
	  FIELD(struct sl_source_config, user) },
	{ .name = "dbname", .type = KT_STRING, .applies = T_PG, .flags = F_REQUIRED,
	  FIELD(struct sl_source_config, dbname) },
	{ .name = "password_env", .type = KT_SECRET_ENV, .excludes = "password_file",
	  FIELD(struct sl_source_config, password) },
	{ .name = "password_file", .type = KT_SECRET_FILE, .excludes = "password_env",
	  FIELD(struct sl_source_config, password) },
	{ .name = "sslmode", .type = KT_CHOICE, .applies = T_PG, .choices = pg_sslmodes,
	  FIELD(struct sl_source_config, sslmode) },
	{ .name = "sslrootcert", .type = KT_STRING,
	  FIELD(struct sl_source_config, sslrootcert) },
	{ .name = "connect_timeout", .type = KT_SECONDS, .def = "10", .min = 1, .max = 3600,
	  FIELD(struct sl_source_config, connect_timeout) },
	{ .name = "server_id", .type = KT_INT, .applies = T_MY, .flags = F_REQUIRED,
	  .min = 1, .max = UINT32_MAX, FIELD(struct sl_source_config, server_id) },
	{ .name = "ssl_mode", .type = KT_CHOICE, .applies = T_MY, .choices = my_ssl_modes,
	  FIELD(struct sl_source_config, ssl_mode) },
};

static const struct key_desc dest_keys[] = {
	{ .name = "type", .type = KT_CHOICE, .flags = F_REQUIRED, .choices = dest_types,
	  FIELD(struct sl_dest_config, type) },
	{ .name = "path", .type = KT_STRING, .applies = T_AVRO, .flags = F_REQUIRED,
	  FIELD(struct sl_dest_config, path) },
	{ .name = "codec", .type = KT_ENUM, .applies = T_AVRO, .choices = codecs, .def = "deflate",
	  FIELD(struct sl_dest_config, codec) },
	{ .name = "compression_level", .type = KT_INT, .applies = T_AVRO, .def = "1",
	  .min = 1, .max = 9, FIELD(struct sl_dest_config, compression_level) },
	{ .name = "max_file_bytes", .type = KT_BYTES, .applies = T_AVRO, .def = "64MB",
	  .min = KIB, .max = UINT64_MAX, FIELD(struct sl_dest_config, max_file_bytes) },
	{ .name = "max_file_seconds", .type = KT_SECONDS, .applies = T_AVRO, .def = "60",
	  .min = 1, .max = DAY_S, FIELD(struct sl_dest_config, max_file_seconds) },
	{ .name = "url", .type = KT_STRING, .applies = T_CH, .flags = F_REQUIRED,
	  .validate = valid_url, FIELD(struct sl_dest_config, url) },
	{ .name = "database", .type = KT_STRING, .applies = T_CH, .def = "default",
	  FIELD(struct sl_dest_config, database) },
	{ .name = "user", .type = KT_STRING, .applies = T_CH,
	  FIELD(struct sl_dest_config, user) },
	{ .name = "password_env", .type = KT_SECRET_ENV, .applies = T_CH, .excludes = "password_file",
	  FIELD(struct sl_dest_config, password) },
	{ .name = "password_file", .type = KT_SECRET_FILE, .applies = T_CH, .excludes = "password_env",
	  FIELD(struct sl_dest_config, password) },
};

/* Stream rows apply by the kind of the stream's source. */
static const struct key_desc stream_keys[] = {
	{ .name = "source", .type = KT_STRING, .flags = F_REQUIRED,
	  FIELD(struct sl_stream_config, source_name) },
	{ .name = "destination", .type = KT_STRING, .flags = F_REQUIRED,
	  FIELD(struct sl_stream_config, destination_name) },
	{ .name = "tables", .type = KT_LIST, .flags = F_REQUIRED, .validate = valid_table_glob,
	  FIELD(struct sl_stream_config, tables) },
	{ .name = "exclude_tables", .type = KT_LIST, .flags = F_EMPTY_OK, .def = "",
	  .validate = valid_table_glob, FIELD(struct sl_stream_config, exclude_tables) },
	{ .name = "backfill", .type = KT_ENUM, .choices = backfill_modes, .def = "auto",
	  FIELD(struct sl_stream_config, backfill) },
	{ .name = "write_mode", .type = KT_ENUM, .choices = write_modes, .def = "append",
	  FIELD(struct sl_stream_config, write_mode) },
	/* No default in the table: it derives from the stream name (finish_stream). */
	{ .name = "slot", .type = KT_STRING, .applies = T_PG, .validate = valid_slot_name,
	  FIELD(struct sl_stream_config, slot) },
	{ .name = "publication", .type = KT_STRING, .applies = T_PG, .validate = valid_identifier,
	  FIELD(struct sl_stream_config, publication) },
	{ .name = "lag_warn_bytes", .type = KT_BYTES, .def = "256MB", .min = 0, .max = UINT64_MAX,
	  FIELD(struct sl_stream_config, lag_warn_bytes) },
	{ .name = "lag_critical_bytes", .type = KT_BYTES, .def = "2GB", .min = 0, .max = UINT64_MAX,
	  FIELD(struct sl_stream_config, lag_critical_bytes) },
	{ .name = "retained_wal_warn_bytes", .type = KT_BYTES, .def = "1GB", .min = 0,
	  .max = UINT64_MAX, FIELD(struct sl_stream_config, retained_wal_warn_bytes) },
	{ .name = "freshness_warn_seconds", .type = KT_SECONDS, .def = "300", .min = 0,
	  .max = 365 * DAY_S, FIELD(struct sl_stream_config, freshness_warn_seconds) },
};

/* Rows applied to one section are tracked in a 64-bit mask. */
_Static_assert(ARRAY_LEN(agent_keys) <= 64, "too many rows");
_Static_assert(ARRAY_LEN(source_keys) <= 64, "too many rows");
_Static_assert(ARRAY_LEN(dest_keys) <= 64, "too many rows");
_Static_assert(ARRAY_LEN(stream_keys) <= 64, "too many rows");
/* KT_ENUM and KT_INT store through the field size; these are the sizes used. */
_Static_assert(sizeof(enum sl_log_level) == 4 && sizeof(enum sl_source_kind) == 4 &&
	       sizeof(enum sl_codec) == 4 && sizeof(enum sl_write_mode) == 4, "enum size");

struct kind_desc {
	const char *prefix;             /* the section name, or what comes before ".NAME" */
	const struct key_desc *keys;
	size_t nkeys;
	const char *const *type_names;  /* for messages: index = type number */
};

static const char *const source_type_names[] = { "postgres", "mysql" };
static const char *const dest_type_names[] = { "avro_dir", "clickhouse" };

static const struct kind_desc kinds[] = {
	[S_AGENT] = { "agent", agent_keys, ARRAY_LEN(agent_keys), NULL },
	[S_SOURCE] = { "source", source_keys, ARRAY_LEN(source_keys), source_type_names },
	[S_DEST] = { "destination", dest_keys, ARRAY_LEN(dest_keys), dest_type_names },
	[S_STREAM] = { "stream", stream_keys, ARRAY_LEN(stream_keys), source_type_names },
};

/* ---------------------------------------------------------------------- */
/* Loader state                                                           */

struct entry {
	char *key;
	char *value;     /* after ${NAME} expansion: may hold a secret, never quoted */
	char *raw;       /* as written in the file: the only text quoted in messages */
	int line;
	bool expanded;   /* the value took something from the environment */
};

struct section {
	enum sect kind;
	char *title;     /* "agent", "source.shop", ...: what is between the brackets */
	const char *name;/* points into title, after the dot ("" for [agent]) */
	int line;
	struct entry *e;
	size_t n, alloc;
};

struct loader {
	const char *path;
	FILE *f;
	int line;                /* number of lines read so far */
	char *err;
	size_t errlen;
	bool failed;             /* err holds the first error */
	struct section *secs;
	size_t nsecs, asecs;
	long cur;                /* index of the current section, -1 before the first */
	struct sl_config *cfg;
};

static void set_errv(struct loader *L, int line, const char *fmt, va_list ap)
{
	int n;

	if (L->failed)
		return;
	L->failed = true;
	if (line > 0)
		n = snprintf(L->err, L->errlen, "%s:%d: ", L->path, line);
	else
		n = snprintf(L->err, L->errlen, "%s: ", L->path);
	if (n >= 0 && (size_t)n < L->errlen)
		vsnprintf(L->err + n, L->errlen - (size_t)n, fmt, ap);
}

/* Records the first error, "FILE:LINE: message" ("FILE: message" when line
 * is 0).  Always returns -1 so callers can write "return set_err(...)". */
__attribute__((format(printf, 3, 4)))
static int set_err(struct loader *L, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_errv(L, line, fmt, ap);
	va_end(ap);
	return -1;
}

static int oom(struct loader *L)
{
	return set_err(L, 0, "out of memory");
}

static char *xstrdup(struct loader *L, const char *s)
{
	char *p = strdup(s);

	if (!p)
		oom(L);
	return p;
}

/* Frees a string that may hold a secret, wiping it first. */
static void free_secret(char *p)
{
	if (p) {
		explicit_bzero(p, strlen(p));
		free(p);
	}
}

/* ---------------------------------------------------------------------- */
/* Small parsers and validators                                           */

static bool is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* NAME of [source.NAME] etc.: 1-64 characters of [A-Za-z0-9_-]. */
static bool valid_section_name(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!is_name_char(s[n]))
			return false;
	return n >= 1 && n <= NAME_MAX_LEN;
}

static const char *valid_slot_name(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || is_digit(s[n]) || s[n] == '_'))
			break;
	if (s[n] || n < 1 || n > SLOT_MAX_LEN)
		return "a replication slot name is 1-63 characters of a-z, 0-9 and _";
	return NULL;
}

static const char *valid_identifier(const char *s)
{
	if (strlen(s) > SLOT_MAX_LEN)
		return "must be at most 63 characters";
	return NULL;
}

static const char *valid_table_glob(const char *s)
{
	const char *dot = strchr(s, '.');

	if (!dot || dot == s || dot[1] == '\0')
		return "each entry must be SCHEMA.TABLE (globs allowed, such as public.orders or shop.*)";
	return NULL;
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

/* HOST:PORT, or [IPV6]:PORT; empty is handled by F_EMPTY_OK. */
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

/* "4096", "64MB", "64 mb", "1GiB": powers of 1024, suffix case-insensitive.
 * Returns 0, -1 (not a byte size) or -2 (does not fit in 64 bits). */
static int parse_byte_size(const char *s, uint64_t *out)
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

/* "90", "90s", "5m", "1h" (case-insensitive).  Same returns as parse_byte_size(). */
static int parse_duration(const char *s, uint64_t *out)
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

/* Writes v as the largest exact unit ("1KB", "64MB") or as plain bytes. */
static void format_bytes(char *out, size_t len, uint64_t v)
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

static const struct choice *find_choice(const struct choice *c, const char *s)
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

static void free_list(char **list)
{
	if (list) {
		for (char **p = list; *p; p++)
			free(*p);
		free(list);
	}
}

/* ---------------------------------------------------------------------- */
/* Environment references and secrets                                     */

/* Expands ${NAME} and $$ in in.  *out is malloc'd (caller frees); *expanded
 * tells whether anything came from the environment.  0, or -1 with the error set. */
static int expand_env(struct loader *L, const char *key, const char *in, char **out,
		      bool *expanded)
{
	struct sl_buf b;
	const char *p = in;
	int rc = -1;

	sl_buf_init(&b, 0);
	*expanded = false;
	while (*p) {
		const char *dollar = strchr(p, '$'), *name, *q;
		char *var = NULL;
		const char *v;

		if (!dollar) {
			sl_buf_puts(&b, p);
			break;
		}
		sl_buf_append(&b, p, (size_t)(dollar - p));
		if (dollar[1] == '$') {
			sl_buf_putc(&b, '$');
			p = dollar + 2;
			continue;
		}
		if (dollar[1] != '{') {
			set_err(L, L->line, "stray \"$\" in the value of key \"%s\": write ${NAME} "
				"for an environment variable or $$ for a literal $", key);
			goto out;
		}
		name = q = dollar + 2;
		if (*q == '_' || (*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z'))
			for (q++; *q == '_' || (*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
				  is_digit(*q); q++)
				;
		if (q == name || *q != '}') {
			set_err(L, L->line, "bad variable reference in the value of key \"%s\": "
				"expected ${NAME}, NAME made of A-Z, a-z, 0-9 and _", key);
			goto out;
		}
		var = strndup(name, (size_t)(q - name));
		if (!var) {
			oom(L);
			goto out;
		}
		v = getenv(var);
		if (!v) {
			set_err(L, L->line, "environment variable \"%s\" is not set (used by key \"%s\")",
				var, key);
			free(var);
			goto out;
		}
		free(var);
		sl_buf_puts(&b, v);
		*expanded = true;
		p = q + 1;
	}
	if (!b.data && sl_buf_reserve(&b, 0) < 0) {
		oom(L);
		goto out;
	}
	if (sl_buf_failed(&b)) {
		oom(L);
		goto out;
	}
	*out = sl_buf_detach(&b);
	rc = 0;
out:
	if (rc < 0) {
		if (b.data)
			explicit_bzero(b.data, b.len);
		sl_buf_free(&b);
	}
	return rc;
}

/* password_env: the password is the named variable's value.  shown is what
 * messages call the variable: var itself, or the text of the file when var
 * came from ${NAME} expansion (and so might hold anything). */
static int secret_from_env(struct loader *L, const char *var, const char *shown, int line,
			   char **out)
{
	const char *v = getenv(var);

	if (!v)
		return set_err(L, line, "environment variable \"%s\" named by password_env is not set",
			       shown);
	if (!*v)
		return set_err(L, line, "environment variable \"%s\" named by password_env is empty",
			       shown);
	*out = strdup(v);
	return *out ? 0 : oom(L);
}

/* password_file: the file must be a regular file owned by the effective user
 * with no group or other permission bits (as libpq wants for .pgpass, except
 * that we refuse rather than warn).  The password is its content without one
 * trailing newline ("\n" or "\r\n").  Messages name the file by shown (see
 * secret_from_env()). */
static int secret_from_file(struct loader *L, const char *path, const char *shown, int line,
			    char **out)
{
	char *data = NULL;
	size_t n = 0;
	struct stat stt;
	int fd, rc = -1;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);  /* a FIFO must not block */
	if (fd < 0) {
		set_err(L, line, "cannot open password_file \"%s\": %s", shown, strerror(errno));
		goto out;
	}
	if (fstat(fd, &stt) < 0) {
		set_err(L, line, "cannot stat password_file \"%s\": %s", shown, strerror(errno));
		goto out;
	}
	if (!S_ISREG(stt.st_mode)) {
		set_err(L, line, "password_file \"%s\" is not a regular file", shown);
		goto out;
	}
	if (stt.st_uid != geteuid()) {
		set_err(L, line, "password_file \"%s\" is owned by uid %u, not by the user sluice "
			"runs as (uid %u)", shown, (unsigned)stt.st_uid, (unsigned)geteuid());
		goto out;
	}
	if (stt.st_mode & (S_IRWXG | S_IRWXO)) {
		set_err(L, line, "password_file \"%s\" has mode %04o, which gives group or others "
			"access; it must be readable by its owner only: run chmod 600 \"%s\"",
			shown, (unsigned)(stt.st_mode & 07777), shown);
		goto out;
	}
	data = malloc(SECRET_FILE_MAX + 1);
	if (!data) {
		oom(L);
		goto out;
	}
	for (;;) {
		ssize_t r = read(fd, data + n, SECRET_FILE_MAX + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			set_err(L, line, "cannot read password_file \"%s\": %s", shown, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > SECRET_FILE_MAX) {
			set_err(L, line, "password_file \"%s\" is larger than %d bytes", shown,
				SECRET_FILE_MAX);
			goto out;
		}
	}
	if (n > 0 && data[n - 1] == '\n') {
		n--;
		if (n > 0 && data[n - 1] == '\r')
			n--;
	}
	data[n] = '\0';
	if (memchr(data, '\0', n)) {
		set_err(L, line, "password_file \"%s\" contains a NUL byte", shown);
		goto out;
	}
	if (n == 0) {
		set_err(L, line, "password_file \"%s\" is empty", shown);
		goto out;
	}
	*out = strdup(data);
	rc = *out ? 0 : oom(L);
out:
	if (data) {
		explicit_bzero(data, SECRET_FILE_MAX + 1);
		free(data);
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Phase 1: reading lines and collecting keys                             */

static void free_sections(struct loader *L)
{
	for (size_t i = 0; i < L->nsecs; i++) {
		struct section *s = &L->secs[i];
		for (size_t j = 0; j < s->n; j++) {
			free(s->e[j].key);
			free_secret(s->e[j].value);
			free(s->e[j].raw);
		}
		free(s->e);
		free(s->title);
	}
	free(L->secs);
	L->secs = NULL;
	L->nsecs = L->asecs = 0;
}

static bool kind_has_key(const struct kind_desc *k, const char *name)
{
	for (size_t i = 0; i < k->nkeys; i++)
		if (strcmp(k->keys[i].name, name) == 0)
			return true;
	return false;
}

static struct entry *find_entry(const struct section *sec, const char *key)
{
	for (size_t i = 0; i < sec->n; i++)
		if (strcmp(sec->e[i].key, key) == 0)
			return &sec->e[i];
	return NULL;
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
	for (p = close + 1; is_blank(*p); p++)
		;
	if (*p && *p != ';' && *p != '#')
		return set_err(L, L->line, "syntax error: text after the section header");
	for (b = line + 1; is_blank(*b); b++)
		;
	for (e = close; e > b && is_blank(e[-1]); e--)
		;
	if (!(name = strndup(b, (size_t)(e - b))))
		return oom(L);

	dot = strchr(name, '.');
	if (strcmp(name, "agent") != 0) {
		size_t plen = dot ? (size_t)(dot - name) : 0;
		for (size_t i = S_SOURCE; i <= S_STREAM; i++)
			if (dot && strlen(kinds[i].prefix) == plen &&
			    strncmp(name, kinds[i].prefix, plen) == 0)
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
		if (strcmp(L->secs[i].title, name) == 0) {
			set_err(L, L->line, "section [%s] repeated (first on line %d)", name,
				L->secs[i].line);
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
	s->title = name;
	s->name = kind == S_AGENT ? "" : dot + 1;
	s->line = L->line;
	name = NULL;  /* owned by the section now */
	L->cur = (long)L->nsecs++;
	rc = 0;
out:
	free(name);
	return rc;
}

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

/* One "key = value" line: checks that the key is known in the current
 * section and not repeated, expands ${NAME}, and adds the entry.  0, or -1
 * with the error set. */
static int add_key(struct loader *L, const char *key, const char *value)
{
	struct section *sec;
	struct entry *e;
	char *expanded = NULL;
	bool from_env;

	if (L->cur < 0)
		return set_err(L, L->line, "key \"%s\" outside of any section", key);
	sec = &L->secs[L->cur];
	if (!kind_has_key(&kinds[sec->kind], key)) {
		if (strcmp(key, "password") == 0)
			return set_err(L, L->line, "unknown key \"password\" in [%s]: put the password "
				       "in an environment variable or a file, and name it with "
				       "password_env or password_file", sec->title);
		return set_err(L, L->line, "unknown key \"%s\" in [%s]", key, sec->title);
	}
	if ((e = find_entry(sec, key)))
		return set_err(L, L->line, "duplicate key \"%s\" in [%s] (first on line %d)", key,
			       sec->title, e->line);
	if (expand_env(L, key, value, &expanded, &from_env) < 0)
		return -1;
	if (sec->n == sec->alloc) {
		size_t na = sec->alloc ? sec->alloc * 2 : 8;
		struct entry *ne = realloc(sec->e, na * sizeof *ne);
		if (!ne) {
			free_secret(expanded);
			return oom(L);
		}
		sec->e = ne;
		sec->alloc = na;
	}
	e = &sec->e[sec->n];
	e->key = strdup(key);
	e->raw = strdup(value);
	e->value = expanded;
	e->line = L->line;
	e->expanded = from_env;
	sec->n++;
	if (!e->key || !e->raw)
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
			set_err(L, 0, "cannot read: %s", strerror(errno));
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

__attribute__((format(printf, 5, 6)))
static int bad_value(struct loader *L, int line, const struct key_desc *d, const char *raw,
		     const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	return set_err(L, line, "bad value \"%s\" for key \"%s\": %s", raw, d->name, why);
}

/* "a, b, c" -> {"a","b","c",NULL}; entries trimmed, none may be empty. */
static int parse_list(struct loader *L, const struct key_desc *d, const char *text,
		      const char *raw, bool expanded, int line, char ***out)
{
	size_t cap = 2, n = 0;
	const char *p = text;
	char **list = calloc(cap, sizeof *list);

	if (!list)
		return oom(L);
	while (*text) {  /* an empty value is an empty list */
		const char *comma = strchr(p, ','), *b = p, *e = comma ? comma : p + strlen(p);
		const char *why;
		char *item;

		while (b < e && is_blank(*b))
			b++;
		while (e > b && is_blank(e[-1]))
			e--;
		if (b == e) {
			bad_value(L, line, d, raw, "empty entry in the list");
			goto fail;
		}
		item = strndup(b, (size_t)(e - b));
		if (!item) {
			oom(L);
			goto fail;
		}
		if (n + 1 == cap) {
			char **nl = realloc(list, cap * 2 * sizeof *nl);
			if (!nl) {
				free(item);
				oom(L);
				goto fail;
			}
			list = nl;
			cap *= 2;
		}
		list[n++] = item;
		list[n] = NULL;
		if (d->validate && (why = d->validate(item))) {
			/* The entry is quoted only if it came from the file itself. */
			if (expanded)
				bad_value(L, line, d, raw, "%s", why);
			else
				bad_value(L, line, d, raw, "%s (\"%s\" is not)", why, item);
			goto fail;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	*out = list;
	return 0;
fail:
	free_list(list);
	return -1;
}

/* Parses text (raw: as written, for messages) for row d and stores it into
 * target.  0, or -1 with the error set. */
static int store_value(struct loader *L, const struct key_desc *d, const char *text,
		       const char *raw, bool expanded, int line, void *target)
{
	char *field = (char *)target + d->off;
	char lo[32], hi[32];
	const struct choice *c;
	const char *why;
	uint64_t v = 0;
	int rc;

	if (*text == '\0' && d->type != KT_LIST && !(d->flags & (F_EMPTY_OK | F_EMPTY_NULL)))
		return bad_value(L, line, d, raw, "must not be empty");
	if (*text == '\0' && d->type == KT_LIST && !(d->flags & F_EMPTY_OK))
		return bad_value(L, line, d, raw, "must not be empty");

	switch (d->type) {
	case KT_STRING: {
		char *s, **dst = (char **)(void *)field;
		if (*text == '\0' && (d->flags & F_EMPTY_NULL))
			return 0;
		if (d->validate && (why = d->validate(text)))
			return bad_value(L, line, d, raw, "%s", why);
		if (!(s = xstrdup(L, text)))
			return -1;
		free(*dst);
		*dst = s;
		return 0;
	}
	case KT_CHOICE:
	case KT_ENUM: {
		struct sl_buf b;
		c = find_choice(d->choices, text);
		if (!c) {
			sl_buf_init(&b, 0);
			for (const struct choice *k = d->choices; k->name; k++)
				sl_buf_printf(&b, "%s%s", k == d->choices ? "" : ", ", k->name);
			rc = bad_value(L, line, d, raw, "must be one of %s",
				       sl_buf_failed(&b) ? "..." : b.data);
			sl_buf_free(&b);
			return rc;
		}
		if (d->type == KT_ENUM) {
			store_uint(field, d->size, (uint64_t)c->value);
		} else {
			char *s, **dst = (char **)(void *)field;
			if (!(s = xstrdup(L, c->name)))
				return -1;
			free(*dst);
			*dst = s;
		}
		return 0;
	}
	case KT_INT: {
		char *end;
		long long x;
		if (!is_digit(*text) && !(*text == '-' && is_digit(text[1])))
			return bad_value(L, line, d, raw, "not an integer");
		errno = 0;
		x = strtoll(text, &end, 10);
		if (*end != '\0')
			return bad_value(L, line, d, raw, "not an integer");
		if (errno == ERANGE || x < 0 || (uint64_t)x < d->min || (uint64_t)x > d->max)
			return bad_value(L, line, d, raw, "must be from %llu to %llu",
					 (unsigned long long)d->min, (unsigned long long)d->max);
		store_uint(field, d->size, (uint64_t)x);
		return 0;
	}
	case KT_BYTES:
		rc = parse_byte_size(text, &v);
		if (rc == -1)
			return bad_value(L, line, d, raw, "not a byte size (a number of bytes, with an "
					 "optional suffix KB, MB, GB, TB, KiB, MiB, GiB or TiB)");
		if (rc == -2)
			return bad_value(L, line, d, raw, "too large (must be less than 16EiB)");
		format_bytes(lo, sizeof lo, d->min);
		format_bytes(hi, sizeof hi, d->max);
		if (v < d->min && d->max == UINT64_MAX)
			return bad_value(L, line, d, raw, "must be at least %s", lo);
		if (v < d->min || v > d->max)
			return bad_value(L, line, d, raw, "must be from %s to %s", lo, hi);
		store_uint(field, d->size, v);
		return 0;
	case KT_SECONDS:
		rc = parse_duration(text, &v);
		if (rc == -1)
			return bad_value(L, line, d, raw, "not a duration (seconds, or a number with "
					 "the suffix s, m or h)");
		if (rc == -2 || v < d->min || v > d->max)
			return bad_value(L, line, d, raw, "must be from %llu to %llu seconds",
					 (unsigned long long)d->min, (unsigned long long)d->max);
		store_uint(field, d->size, v);
		return 0;
	case KT_LIST: {
		char **list = NULL, ***dst = (char ***)(void *)field;
		if (parse_list(L, d, text, raw, expanded, line, &list) < 0)
			return -1;
		free_list(*dst);
		*dst = list;
		return 0;
	}
	case KT_SECRET_ENV:
	case KT_SECRET_FILE: {
		char *s = NULL, **dst = (char **)(void *)field;
		const char *shown = expanded ? raw : text;
		rc = d->type == KT_SECRET_ENV ? secret_from_env(L, text, shown, line, &s)
					      : secret_from_file(L, text, shown, line, &s);
		if (rc < 0)
			return -1;
		free_secret(*dst);
		*dst = s;
		return 0;
	}
	}
	return set_err(L, line, "internal error: key \"%s\" has no type", d->name);
}

/* The row for key name that applies to a section of the given type mask, or NULL. */
static const struct key_desc *find_row(const struct kind_desc *k, const char *name, unsigned mask)
{
	for (size_t i = 0; i < k->nkeys; i++)
		if (strcmp(k->keys[i].name, name) == 0 && (!k->keys[i].applies ||
							   (k->keys[i].applies & mask)))
			return &k->keys[i];
	return NULL;
}

/* "postgres", "avro_dir or clickhouse": the types some row called name applies to. */
static void types_of_key(const struct kind_desc *k, const char *name, char *out, size_t len)
{
	unsigned mask = 0;
	size_t n = 0;

	for (size_t i = 0; i < k->nkeys; i++)
		if (strcmp(k->keys[i].name, name) == 0)
			mask |= k->keys[i].applies;
	out[0] = '\0';
	for (unsigned t = 0; t < 32 && (mask >> t); t++) {
		if (!(mask & (1u << t)))
			continue;
		snprintf(out + n, len - n, "%s%s", n ? " or " : "", k->type_names[t]);
		n = strlen(out);
	}
}

/* Applies entry e of sec through row d (already known to apply): checks
 * the key it excludes, then parses and stores the value. */
static int apply_entry(struct loader *L, const struct section *sec, const struct key_desc *d,
		       const struct entry *e, void *target)
{
	const struct entry *other = d->excludes ? find_entry(sec, d->excludes) : NULL;

	if (other) {
		const struct entry *first = other->line < e->line ? other : e;
		const struct entry *second = first == e ? other : e;
		return set_err(L, second->line, "%s and %s cannot both be set in [%s] (%s on line %d)",
			       first->key, second->key, sec->title, first->key, first->line);
	}
	return store_value(L, d, e->value, e->raw, e->expanded, e->line, target);
}

/* Applies the one row called name (which applies to every type and has no
 * default) before the others, because the rest depend on it: type, source,
 * destination.  *applied records the row.  0, or -1 with the error set. */
static int apply_first(struct loader *L, const struct section *sec, const char *name,
		       void *target, uint64_t *applied, const struct entry **out)
{
	const struct kind_desc *k = &kinds[sec->kind];
	const struct key_desc *d = find_row(k, name, ~0u);
	const struct entry *e = find_entry(sec, name);

	*applied |= UINT64_C(1) << (d - k->keys);
	if (!e)
		return set_err(L, sec->line, "missing required key \"%s\" in [%s]", name, sec->title);
	*out = e;
	return apply_entry(L, sec, d, e, target);
}

/* Applies every entry of sec in file order, then the defaults and the
 * required-key checks of the rows that apply to type mask.  Rows in applied
 * (done by apply_first()) are skipped.  type_desc names the type in messages. */
static int apply_section(struct loader *L, const struct section *sec, void *target, unsigned mask,
			 uint64_t applied, const char *type_desc)
{
	const struct kind_desc *k = &kinds[sec->kind];
	char types[128];

	for (size_t i = 0; i < sec->n; i++) {
		const struct entry *e = &sec->e[i];
		const struct key_desc *d = find_row(k, e->key, mask);
		uint64_t bit;

		if (!d) {
			types_of_key(k, e->key, types, sizeof types);
			if (sec->kind == S_STREAM)
				return set_err(L, e->line, "key \"%s\" applies only to streams from a %s "
					       "source, and source \"%s\" is %s", e->key, types,
					       find_entry(sec, "source")->raw, type_desc);
			return set_err(L, e->line, "key \"%s\" applies only to type %s, not to %s",
				       e->key, types, type_desc);
		}
		bit = UINT64_C(1) << (d - k->keys);
		if (applied & bit)
			continue;
		if (apply_entry(L, sec, d, e, target) < 0)
			return -1;
		applied |= bit;
	}
	for (size_t i = 0; i < k->nkeys; i++) {
		const struct key_desc *d = &k->keys[i];

		if ((applied & (UINT64_C(1) << i)) || (d->applies && !(d->applies & mask)))
			continue;
		if (d->flags & F_REQUIRED) {
			if (d->applies && sec->kind != S_STREAM)
				return set_err(L, sec->line, "missing required key \"%s\" in [%s] "
					       "(required for type %s)", d->name, sec->title, type_desc);
			return set_err(L, sec->line, "missing required key \"%s\" in [%s]", d->name,
				       sec->title);
		}
		if (d->def && store_value(L, d, d->def, d->def, false, sec->line, target) < 0)
			return -1;
	}
	return 0;
}

static int apply_agent(struct loader *L, const struct section *sec, struct sl_config *cfg)
{
	return apply_section(L, sec, cfg, ~0u, 0, "");
}

static int apply_source(struct loader *L, const struct section *sec, struct sl_source_config *src)
{
	uint64_t applied = 0;
	const struct entry *e;

	if (!(src->name = xstrdup(L, sec->name)))
		return -1;
	if (apply_first(L, sec, "type", src, &applied, &e) < 0)
		return -1;
	return apply_section(L, sec, src, 1u << src->kind, applied, source_type_names[src->kind]);
}

static int apply_dest(struct loader *L, const struct section *sec, struct sl_dest_config *dc)
{
	uint64_t applied = 0;
	const struct entry *e;
	int t;

	if (!(dc->name = xstrdup(L, sec->name)))
		return -1;
	if (apply_first(L, sec, "type", dc, &applied, &e) < 0)
		return -1;
	t = find_choice(dest_types, dc->type)->value;
	return apply_section(L, sec, dc, 1u << t, applied, dest_type_names[t]);
}

static int apply_stream(struct loader *L, const struct section *sec, struct sl_stream_config *st)
{
	struct sl_config *cfg = L->cfg;
	uint64_t applied = 0;
	const struct entry *src_e, *dst_e;
	int i;

	if (!(st->name = xstrdup(L, sec->name)))
		return -1;
	if (apply_first(L, sec, "source", st, &applied, &src_e) < 0)
		return -1;
	for (i = 0; i < cfg->nsources; i++)
		if (strcmp(cfg->sources[i].name, st->source_name) == 0)
			st->source = &cfg->sources[i];
	if (!st->source)
		return set_err(L, src_e->line, "unknown source \"%s\" in [%s] (there is no "
			       "[source.%s] section)", src_e->raw, sec->title, src_e->raw);
	if (apply_first(L, sec, "destination", st, &applied, &dst_e) < 0)
		return -1;
	for (i = 0; i < cfg->ndestinations; i++)
		if (strcmp(cfg->destinations[i].name, st->destination_name) == 0)
			st->destination = &cfg->destinations[i];
	if (!st->destination)
		return set_err(L, dst_e->line, "unknown destination \"%s\" in [%s] (there is no "
			       "[destination.%s] section)", dst_e->raw, sec->title, dst_e->raw);
	if (apply_section(L, sec, st, 1u << st->source->kind, applied,
			  source_type_names[st->source->kind]) < 0)
		return -1;

	if (st->source->kind == SL_SOURCE_POSTGRES) {
		if (!st->slot) {
			/* Default: "sluice_" + the stream name, lowercased, with '-' turned into '_'. */
			size_t n = strlen("sluice_") + strlen(st->name) + 1;
			if (!(st->slot = malloc(n)))
				return oom(L);
			snprintf(st->slot, n, "sluice_%s", st->name);
			for (char *p = st->slot; *p; p++) {
				if (*p == '-')
					*p = '_';
				else if (*p >= 'A' && *p <= 'Z')
					*p = (char)(*p - 'A' + 'a');
			}
			if (valid_slot_name(st->slot))
				return set_err(L, sec->line, "the default slot name \"%s\" of [%s] is not "
					       "a valid replication slot name (1-63 characters of a-z, "
					       "0-9 and _): set slot explicitly", st->slot, sec->title);
		}
		if (!st->publication && !(st->publication = xstrdup(L, st->slot)))
			return -1;
	}
	if (st->lag_warn_bytes && st->lag_critical_bytes &&
	    st->lag_critical_bytes < st->lag_warn_bytes) {
		const struct entry *e = find_entry(sec, "lag_critical_bytes");
		if (!e)
			e = find_entry(sec, "lag_warn_bytes");
		return set_err(L, e ? e->line : sec->line, "lag_critical_bytes is lower than "
			       "lag_warn_bytes in [%s]", sec->title);
	}
	return 0;
}

/* Where a stream's slot name was set: the slot line, or the section line. */
static int slot_line(const struct section *sec)
{
	const struct entry *e = find_entry(sec, "slot");

	return e ? e->line : sec->line;
}

/* The slot name as messages may show it: as written when it came from ${NAME}. */
static const char *slot_shown(const struct section *sec, const struct sl_stream_config *st)
{
	const struct entry *e = find_entry(sec, "slot");

	return e && e->expanded ? e->raw : st->slot;
}

/* Two streams of one PostgreSQL source cannot share a slot: each would
 * consume, and acknowledge, the other's changes. */
static int check_slots(struct loader *L, const struct section **stream_secs)
{
	struct sl_config *cfg = L->cfg;

	for (int j = 0; j < cfg->nstreams; j++) {
		const struct sl_stream_config *b = &cfg->streams[j];
		if (b->source->kind != SL_SOURCE_POSTGRES)
			continue;
		for (int i = 0; i < j; i++) {
			const struct sl_stream_config *a = &cfg->streams[i];
			if (a->source != b->source || strcmp(a->slot, b->slot) != 0)
				continue;
			return set_err(L, slot_line(stream_secs[j]), "slot \"%s\" of [stream.%s] is "
				       "already used by [stream.%s] (line %d) on source \"%s\": each "
				       "stream needs its own slot", slot_shown(stream_secs[j], b),
				       b->name, a->name,
				       slot_line(stream_secs[i]), b->source->name);
		}
	}
	return 0;
}

static int build_config(struct loader *L)
{
	struct sl_config *cfg = L->cfg;
	static const struct section no_agent = { .kind = S_AGENT, .title = (char *)"agent",
						 .name = "", .line = 0 };
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

struct sl_config *sl_config_load(const char *path, char *err, size_t errlen)
{
	char scratch[SL_ERRLEN];
	struct loader L = {
		.path = path, .err = err, .errlen = errlen, .cur = -1,
	};
	struct sl_config *cfg = NULL;

	if (!err || errlen == 0) {
		L.err = scratch;
		L.errlen = sizeof scratch;
	}
	L.err[0] = '\0';
	L.f = fopen(path, "r");
	if (!L.f) {
		set_err(&L, 0, "cannot open: %s", strerror(errno));
		goto out;
	}
	if (read_file(&L) < 0)
		goto out;
	if (!(cfg = calloc(1, sizeof *cfg)) || !(cfg->path = strdup(path))) {
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
	if (L.cfg) {
		sl_config_free(L.cfg);
		cfg = NULL;
	}
	return cfg;
}

/* Frees the string, list and secret fields of one struct through its key table. */
static void free_fields(const struct kind_desc *k, void *target)
{
	for (size_t i = 0; i < k->nkeys; i++) {
		const struct key_desc *d = &k->keys[i];
		void *field = (char *)target + d->off;

		switch (d->type) {
		case KT_STRING:
		case KT_CHOICE:
			free(*(char **)field);
			*(char **)field = NULL;
			break;
		case KT_SECRET_ENV:
		case KT_SECRET_FILE:
			free_secret(*(char **)field);
			*(char **)field = NULL;
			break;
		case KT_LIST:
			free_list(*(char ***)field);
			*(char ***)field = NULL;
			break;
		default:
			break;
		}
	}
}

void sl_config_free(struct sl_config *cfg)
{
	if (!cfg)
		return;
	free_fields(&kinds[S_AGENT], cfg);
	for (int i = 0; cfg->sources && i < cfg->nsources; i++) {
		free_fields(&kinds[S_SOURCE], &cfg->sources[i]);
		free(cfg->sources[i].name);
	}
	for (int i = 0; cfg->destinations && i < cfg->ndestinations; i++) {
		free_fields(&kinds[S_DEST], &cfg->destinations[i]);
		free(cfg->destinations[i].name);
	}
	for (int i = 0; cfg->streams && i < cfg->nstreams; i++) {
		free_fields(&kinds[S_STREAM], &cfg->streams[i]);
		free(cfg->streams[i].name);
	}
	free(cfg->sources);
	free(cfg->destinations);
	free(cfg->streams);
	free(cfg->path);
	free(cfg);
}

struct sl_stream_config *sl_config_stream(struct sl_config *cfg, const char *name)
{
	for (int i = 0; cfg && i < cfg->nstreams; i++)
		if (strcmp(cfg->streams[i].name, name) == 0)
			return &cfg->streams[i];
	return NULL;
}
