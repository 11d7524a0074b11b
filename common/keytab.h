/*
 * common/keytab.h: table-driven configuration keys, shared by the agent, the
 * sources and the sinks.
 *
 * A section of the configuration file, once read (struct sl_ini_section),
 * is applied to a C struct through a table of key descriptors: each row
 * names a key, its value type, the types of section it applies to, its
 * flags, its default, the field it fills, and its choices, bounds, excluded
 * key and validator.  A sink, say, declares
 *
 *     static const struct sl_keydesc keys[] = {
 *         { .name = "path", .type = SL_KT_STRING, .flags = SL_KF_REQUIRED,
 *           FIELD(struct my_conf, path) },
 *         { .name = "max_file_seconds", .type = SL_KT_SECONDS, .def = "60",
 *           .min = 1, .max = 86400, FIELD(struct my_conf, max_file_seconds) },
 *     };
 *
 * and every key then follows the same rules and messages (doc/
 * configuration.md, "Value types" and "Error messages").
 *
 * Errors follow one convention: "FILE:LINE: message", or "FILE: message"
 * when no line applies, and only the first error is kept (struct
 * sl_keyerr).  A value is quoted in a message only as written in the file,
 * before ${NAME} expansion, and a secret is never quoted, so no message can
 * hold a secret.  Nothing here exits or logs: the caller decides.
 */
#ifndef SLUICE_COMMON_KEYTAB_H
#define SLUICE_COMMON_KEYTAB_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------- */
/* Errors: "FILE:LINE: message"                                           */

struct sl_keyerr {
	const char *path;  /* the file messages name; borrowed */
	char *buf;         /* the caller's buffer; borrowed */
	size_t len;        /* its size (> 0) */
	bool failed;       /* buf holds the first error */
	int line;          /* its line, 0 when none applies */
};

/* Starts with no error; buf (len > 0 bytes) receives the message. */
void sl_keyerr_init(struct sl_keyerr *er, const char *path, char *buf, size_t len);
/* Records "FILE:LINE: message" ("FILE: message" when line is 0) unless an
 * error is already recorded: the first error wins.  Always returns -1, so
 * that callers can write "return sl_keyerr_set(...)". */
int sl_keyerr_set(struct sl_keyerr *er, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int sl_keyerr_vset(struct sl_keyerr *er, int line, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
/* "FILE: out of memory"; returns -1. */
int sl_keyerr_oom(struct sl_keyerr *er);

/* ---------------------------------------------------------------------- */
/* The file, as read: sections of entries                                 */

struct sl_ini_entry {
	char *key;
	char *value;     /* after ${NAME} expansion: may hold a secret, never quoted */
	char *raw;       /* as written in the file: the only text quoted in messages */
	int line;
	bool expanded;   /* the value took something from the environment */
};

struct sl_ini_section {
	char *title;     /* what is between the brackets: "agent", "source.shop" */
	int line;        /* the line of the header; 0 for a section not in the file */
	struct sl_ini_entry *e;
	size_t n, alloc;
};

/* The entry for key in sec, or NULL.  Keys are case-sensitive. */
const struct sl_ini_entry *sl_ini_find(const struct sl_ini_section *sec, const char *key);
/* Appends an entry to sec: key and raw are copied, value (malloc'd) is taken
 * over, also on failure.  It does not check for a duplicate key.  Returns 0,
 * or -1 when out of memory. */
int sl_ini_add(struct sl_ini_section *sec, const char *key, const char *raw, char *value,
	       bool expanded, int line);
/* Frees the title and the entries, wiping every value; sec is left empty. */
void sl_ini_section_free(struct sl_ini_section *sec);

/* ---------------------------------------------------------------------- */
/* Key descriptors                                                        */

enum sl_keytype {
	SL_KT_STRING,       /* char *: non-empty unless SL_KF_EMPTY_OK / SL_KF_EMPTY_NULL */
	SL_KT_CHOICE,       /* char *: one of choices[], stored as text */
	SL_KT_ENUM,         /* integer field (enum, int, bool) of 1-8 bytes: choices[i].value */
	SL_KT_INT,          /* integer field of 1-8 bytes: decimal digits, min..max */
	SL_KT_BYTES,        /* integer field: a byte size with an optional suffix, min..max */
	SL_KT_SECONDS,      /* integer field: a duration with an optional s/m/h suffix, min..max */
	SL_KT_MSECONDS,     /* integer field: a duration in milliseconds: seconds with up to three
			     * decimals, or a number with a ms/s/m/h suffix; min..max in ms */
	SL_KT_LIST,         /* char **: comma-separated, NULL-terminated */
	SL_KT_SECRET_ENV,   /* char *: the secret in the environment variable the value names */
	SL_KT_SECRET_FILE,  /* char *: the secret in the file the value names (mode 0600 or less) */
};

#define SL_KF_REQUIRED   0x1u  /* must be present (in sections the row applies to) */
#define SL_KF_EMPTY_OK   0x2u  /* the empty string is a valid value (a list: the empty list) */
#define SL_KF_EMPTY_NULL 0x4u  /* string: the empty string means "not set", the field stays NULL */

struct sl_keychoice {
	const char *name;
	int value;                 /* what SL_KT_ENUM stores */
};

/* Returns NULL if s is acceptable, or a short reason (a static string). */
typedef const char *(*sl_key_validator)(const char *s);

struct sl_keydesc {
	const char *name;
	enum sl_keytype type;
	unsigned applies;              /* mask of the section types the row applies to; 0: all */
	unsigned flags;                /* SL_KF_* */
	const char *def;               /* default, parsed like a value from the file; NULL: none */
	size_t off, size;              /* target field: use FIELD(struct, member) */
	const struct sl_keychoice *choices;  /* SL_KT_CHOICE, SL_KT_ENUM; ends with a NULL name */
	uint64_t min, max;             /* SL_KT_INT, SL_KT_BYTES, SL_KT_SECONDS */
	const char *excludes;          /* a key that may not be given together with this one */
	sl_key_validator validate;     /* SL_KT_STRING: the value; SL_KT_LIST: each entry */
};

/* The target field of a row: FIELD(struct sl_avro_dir_conf, path). */
#define FIELD(type, member) .off = offsetof(type, member), .size = sizeof(((type *)0)->member)

/* ---------------------------------------------------------------------- */
/* Applying a table to a section                                          */

struct sl_keyapply;

/* Reports entry e of sec, which no row of the table applies to: either no
 * row has its key (types is "") or only rows for other types do (types
 * names them: "postgres", "avro_dir or s3").  Records an error in er and
 * returns -1. */
typedef int (*sl_key_unknown_fn)(struct sl_keyerr *er, const struct sl_ini_section *sec,
				 const struct sl_ini_entry *e, const char *types,
				 const struct sl_keyapply *how);

/* How sl_keytab_apply() treats a section.  Zeroed, it applies every row. */
struct sl_keyapply {
	unsigned mask;                 /* the section's type bit: rows with applies & mask, and
					* rows with applies 0, apply; 0 means every row applies */
	const char *type_name;         /* the section's type, for messages ("postgres"); or NULL */
	const char *const *type_names; /* the name of each type bit, for messages; or NULL */
	size_t ntypes;
	bool typed;                    /* every row belongs to type_name (a sink's own table):
					* a missing required key says "(required for type T)" */
	const char *const *skip;       /* NULL-terminated keys that are not this table's business,
					* or were applied already (sl_keytab_apply_one()); or NULL */
	sl_key_unknown_fn unknown;     /* reports an entry no row applies to; NULL: the default,
					* 'key "K" applies only to type T, not to U' when other
					* types have the key, else 'unknown key "K" in [S]' */
	const void *arg;               /* for unknown() */
};

/* Applies the entries of sec to target in file order (an entry's value
 * replaces the field, freeing what it held), then the defaults of the rows
 * that apply and were not given, and refuses a missing required key (at the
 * section's line).  Entries and rows named in how->skip are left alone.  A
 * row's excluded key given in the same section is an error at the later of
 * the two lines.  Returns 0, or -1 with the error in er; on failure target
 * may hold some fields: free them with sl_keytab_free().  At most 64 rows. */
int sl_keytab_apply(struct sl_keyerr *er, const struct sl_keydesc *keys, size_t nkeys,
		    const struct sl_ini_section *sec, void *target, const struct sl_keyapply *how);
/* Applies the one row called name, which must exist, before the others,
 * because they depend on it (a section's type, a stream's source).  Its
 * entry must be present ('missing required key "K" in [S]').  *entry
 * receives the entry.  Returns 0, or -1 with the error in er. */
int sl_keytab_apply_one(struct sl_keyerr *er, const struct sl_keydesc *keys, size_t nkeys,
			const struct sl_ini_section *sec, const char *name, void *target,
			const struct sl_ini_entry **entry);
/* Frees the string, list and secret fields of target through its table
 * (secrets are wiped) and sets them to NULL.  Other fields are left alone. */
void sl_keytab_free(const struct sl_keydesc *keys, size_t nkeys, void *target);

/* True if some row of the table is called name. */
bool sl_keytab_has(const struct sl_keydesc *keys, size_t nkeys, const char *name);
/* The first row called name that applies to type mask (see struct
 * sl_keyapply), or NULL. */
const struct sl_keydesc *sl_keytab_find(const struct sl_keydesc *keys, size_t nkeys,
					const char *name, unsigned mask);

/* ---------------------------------------------------------------------- */
/* Value parsers (the "Value types" of doc/configuration.md)              */

/* "4096", "64MB", "64 mb", "1GiB": a whole number and an optional suffix B,
 * KB, MB, GB, TB, KiB, MiB, GiB, TiB (powers of 1024, case-insensitive, a
 * space before it allowed).  Returns 0, -1 (not a byte size) or -2 (16 EiB
 * or more). */
int sl_key_parse_bytes(const char *s, uint64_t *out);
/* "90", "90s", "5m", "1h" (case-insensitive).  Returns like sl_key_parse_bytes(). */
int sl_key_parse_duration(const char *s, uint64_t *out);
/* "0.5", "0.25s", "500ms", "2", "1m", "1h" (case-insensitive): a duration
 * with millisecond resolution, stored in milliseconds.  A number without a
 * suffix, or with s, m or h, may have up to three decimals ("0.125");
 * "ms" takes a whole number.  Returns 0, -1 (not a duration, or finer than a
 * millisecond) or -2 (too large). */
int sl_key_parse_duration_ms(const char *s, uint64_t *out);
/* Writes v with the largest unit that divides it ("1KB", "64MB") or as bytes. */
void sl_key_format_bytes(char *out, size_t len, uint64_t v);
/* Splits "a, b ,c" at commas into {"a", "b", "c", NULL}, trimming each entry;
 * "" gives the empty list.  Each entry is checked, as it is split, by
 * validate (unless NULL).  Returns 0 with the list in *out (free it with
 * sl_key_free_list()); -1 for an empty entry; -2 when validate refused an
 * entry, with its reason in *why and the entry in *bad (malloc'd, the caller
 * frees it); -3 when out of memory. */
int sl_key_parse_list(const char *text, sl_key_validator validate, char ***out,
		      const char **why, char **bad);
void sl_key_free_list(char **list);

#endif
