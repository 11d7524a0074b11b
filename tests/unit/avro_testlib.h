/*
 * tests/unit/avro_testlib.h: helpers shared by the Avro unit tests: table
 * construction from PostgreSQL type OIDs, typed values, temporary folders,
 * file listing, and an independent Avro varint writer for expected values.
 */
#ifndef SLUICE_TESTS_AVRO_TESTLIB_H
#define SLUICE_TESTS_AVRO_TESTLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"

/* PostgreSQL type OIDs used by the tests. */
enum {
	T_BOOL = 16, T_BYTEA = 17, T_INT8 = 20, T_INT2 = 21, T_INT4 = 23, T_TEXT = 25,
	T_JSON = 114, T_FLOAT4 = 700, T_FLOAT8 = 701, T_VARCHAR = 1043, T_DATE = 1082,
	T_TIME = 1083, T_TIMESTAMP = 1114, T_TIMESTAMPTZ = 1184, T_NUMERIC = 1700,
	T_UUID = 2950, T_JSONB = 3802,
};

/* numeric(p,s) typmod as PostgreSQL stores it. */
static inline int32_t numeric_typmod(int p, int s)
{
	return ((p << 16) | s) + 4;
}

/* One column of tl_table(): name, type OID, typmod, type name, key flag. */
struct tl_col {
	const char *name;
	uint32_t oid;
	int32_t typmod;
	const char *type_name;
	bool key;
};

/* Builds and finishes a table; aborts the test program on failure.  Each
 * column's output type follows doc/types.md's PostgreSQL mapping, restated in
 * avro_testlib.c so that the sink tests do not depend on the source's code. */
struct sl_table *tl_table(const char *ns, const char *name, const struct tl_col *cols, int n);

/* Test-local Avro long encoding (zigzag varint), written independently of
 * the code under test.  Returns the number of bytes written to out (<= 10). */
size_t tl_zigzag(int64_t v, unsigned char *out);

/* Makes a fresh folder under $TMPDIR or /tmp; returns a malloc'd path. */
char *tl_mkdtemp(const char *tag);
/* rm -rf path. */
void tl_rm_rf(const char *path);

/* Lists regular files under root (recursively), as paths relative to root,
 * sorted.  *n receives the count; free with tl_free_list. */
char **tl_list_files(const char *root, size_t *n);
void tl_free_list(char **list, size_t n);

/* Reads a whole file into a malloc'd buffer, with a NUL after the data;
 * NULL on failure. */
unsigned char *tl_read_file(const char *path, size_t *len);

/* A change with typed values; values must hold table->ncols entries. */
void tl_change(struct sl_change *c, const struct sl_table *t, enum sl_op op,
	       const struct sl_value *values, uint64_t pos, uint32_t seq, int64_t source_ts_us);

/* Typed values.  Pointers are kept, not copied: the caller's strings must
 * outlive the value. */
struct sl_value tl_null(void);
struct sl_value tl_unchanged(void);
struct sl_value tl_bool(bool b);
struct sl_value tl_int(int64_t i);
struct sl_value tl_float(float f);
struct sl_value tl_double(double d);
/* digits: the unscaled value's digits, as struct sl_value documents them. */
struct sl_value tl_dec(bool neg, const char *digits, int scale);
struct sl_value tl_bytes(const void *p, size_t n);
struct sl_value tl_str(const char *s);
struct sl_value tl_json(const char *s);
struct sl_value tl_date(int64_t days);
struct sl_value tl_time(int64_t us);
struct sl_value tl_ts(int64_t us);
/* u: 16 bytes. */
struct sl_value tl_uuid(const unsigned char *u);

/* Reads every record of the container file at path with avro-c's own file
 * reader (an independent reader: the writer schema of the file), calling
 * fn(arg, record) for each.  Returns the number of records, or -1 (with
 * avro_strerror()) when avro-c cannot open the file. */
struct avro_value;
long tl_avro_c_each(const char *path, void (*fn)(void *arg, struct avro_value *rec), void *arg);

#endif
