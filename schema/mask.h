/*
 * schema/mask.h: column selection and masking (a stream's exclude_columns
 * and mask_columns, doc/configuration.md).
 *
 * A rule names columns as SCHEMA.TABLE.COLUMN (for MySQL/MariaDB the first
 * part is the database), each part an fnmatch() glob matched on its own.
 * An excluded column disappears from the table and from every record; a
 * masked column becomes a string column (bytes for truncate of a bytes
 * column) whose values are replaced by the method's:
 *
 *   hash         HMAC-SHA-256 of the value's bytes (below) with the
 *                stream's mask key, as 64 lowercase hex digits
 *   null         always null
 *   truncate(N)  the first N characters of the value (UTF-8 characters of a
 *                string or JSON value, bytes of a bytes value, characters of
 *                the text form of any other value)
 *   redact       the constant string SL_MASK_REDACTED
 *
 * The bytes a value stands for (hashed, and truncated for non-string
 * kinds), by value kind (schema.h):
 *   STRING, JSON        its UTF-8 bytes as the source sent them
 *   BYTES               its raw bytes
 *   BOOL                "true" or "false"
 *   INT, UINT           decimal, with a leading "-" when negative
 *   FLOAT, DOUBLE       printf("%.9g") (float) or printf("%.17g") (double),
 *                       "NaN", "Infinity" or "-Infinity"
 *   DECIMAL             the digits with a "." before the last scale digits,
 *                       at least one digit before it, "-" when negative
 *                       ("-0.05", "12", "3.10")
 *   DATE                YYYY-MM-DD (the year with at least 4 digits, "-"
 *                       before it when negative, astronomical numbering)
 *   TIME                HH:MM:SS.ffffff
 *   TIMESTAMP           YYYY-MM-DDTHH:MM:SS.ffffffZ (UTC)
 *   UUID                8-4-4-4-12 lowercase hex digits
 * NULL stays NULL and an unchanged value (PostgreSQL's unsent TOAST value)
 * stays unchanged, whatever the method.
 *
 * Excluding wins over masking, and of several mask rules that match a
 * column the first one written applies.  Nothing here logs a value.
 */
#ifndef SLUICE_SCHEMA_MASK_H
#define SLUICE_SCHEMA_MASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"

#define SL_MASK_REDACTED "REDACTED"

enum sl_mask_method {
	SL_MASK_KEEP = 0,
	SL_MASK_EXCLUDE,
	SL_MASK_HASH,
	SL_MASK_NULL,
	SL_MASK_TRUNCATE,
	SL_MASK_REDACT,
};

struct sl_mask;

/* Checks one entry of exclude_columns (with_method false) or mask_columns
 * (true).  NULL when it is fine, else why not (a static string). */
const char *sl_mask_rule_check(const char *entry, bool with_method);

/* Compiles a stream's rules (NULL-terminated lists, either may be NULL or
 * empty, entries already checked) with the key of the hash method (key may
 * be NULL when no rule hashes).  *out is NULL when there is no rule at all.
 * Returns 0, or -1 with a message in err (out of memory, a hash rule
 * without a key).  The key is copied; free *out with sl_mask_free(). */
int sl_mask_new(struct sl_mask **out, char *const *exclude, char *const *mask, const char *key, char *err,
		size_t errlen);
void sl_mask_free(struct sl_mask *m);
int sl_mask_nrules(const struct sl_mask *m);
/* Rule i as written, and whether any table column matched it so far (see
 * sl_mask_table). */
const char *sl_mask_rule_text(const struct sl_mask *m, int i);
bool sl_mask_rule_used(const struct sl_mask *m, int i);

/* What happens to column col of ns.table: the method (SL_MASK_KEEP when
 * no rule matches) and, for truncate, N in *n. */
enum sl_mask_method sl_mask_column(const struct sl_mask *m, const char *ns, const char *table, const char *col,
				   uint32_t *n);
/* Names the mask key without revealing it: 16 hex digits of the HMAC of a
 * fixed text under the key, so that a changed key can be told apart; ""
 * without a key. */
void sl_mask_key_id(const struct sl_mask *m, char out[static 17]);
/* The method as the configuration writes it ("hash", "truncate(8)", ...), into out. */
void sl_mask_method_name(enum sl_mask_method method, uint32_t n, char *out, size_t outlen);

/* A table version as the destination sees it: src without its excluded
 * columns, with its masked ones typed as strings (doc says how), and its own
 * schema_key. */
struct sl_masked {
	struct sl_table *t;          /* owned */
	const struct sl_table *src;  /* not owned */
	char src_key[17];            /* src->schema_key when made */
	int *from;                   /* t->ncols: the column of src each comes from */
	uint8_t *method;             /* t->ncols: enum sl_mask_method */
	uint32_t *n;                 /* t->ncols: truncate's N */
};

/* Derives the masked version of src.  Returns 0 with *out NULL when no rule
 * touches a column of src (the destination sees src itself), 0 with *out
 * to free with sl_masked_free(), SL_ECONFIG when a rule excludes a key
 * column or masks it otherwise than by hash (err names the table, the
 * column and the rule), or -1 (out of memory).  Marks the
 * rules that matched (sl_mask_rule_used). */
int sl_mask_table(struct sl_mask *m, const struct sl_table *src, struct sl_masked **out, char *err, size_t errlen);
/* Frees pm and, with table, its table. */
void sl_masked_free(struct sl_masked *pm, bool table);

/* The values of a row of pm->src (pm->src->ncols of them) as pm->t has
 * them, into out (pm->t->ncols).  Bytes the methods make go into scratch,
 * which is reset first: out is valid while both in and scratch are.
 * Returns 0, or -1 (out of memory, or a value kind unknown). */
int sl_mask_values(const struct sl_mask *m, const struct sl_masked *pm, const struct sl_value *in,
		   struct sl_value *out, struct sl_buf *scratch);

/* Appends to b the bytes value v stands for (the table at the top).
 * Returns 0, or -1 (out of memory, or NULL / UNCHANGED / unknown kind). */
int sl_mask_value_text(struct sl_buf *b, const struct sl_value *v);

#endif
