/*
 * tests/unit/avro_testlib.c: helpers shared by the Avro unit tests.
 */
#include "tests/unit/avro_testlib.h"

#include "sources/source.h"

#include <avro.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* doc/types.md's PostgreSQL -> output type table, for the OIDs above. */
static enum sl_type map_type(uint32_t oid, int32_t typmod, int *precision, int *scale)
{
	switch (oid) {
	case T_BOOL: return SL_T_BOOL;
	case T_INT2: case T_INT4: return SL_T_INT32;
	case T_INT8: return SL_T_INT64;
	case T_FLOAT4: return SL_T_FLOAT;
	case T_FLOAT8: return SL_T_DOUBLE;
	case T_BYTEA: return SL_T_BYTES;
	case T_DATE: return SL_T_DATE;
	case T_TIME: return SL_T_TIME;
	case T_TIMESTAMP: return SL_T_TIMESTAMP;
	case T_TIMESTAMPTZ: return SL_T_TIMESTAMPTZ;
	case T_UUID: return SL_T_UUID;
	case T_JSON: case T_JSONB: return SL_T_JSON;
	case T_NUMERIC:
		/* numeric(p,s) with 0 <= s <= p, as numeric_typmod() makes it */
		if (typmod >= 4 && ((typmod - 4) >> 16) >= 1 && ((typmod - 4) & 0xffff) <= ((typmod - 4) >> 16)) {
			*precision = (typmod - 4) >> 16;
			*scale = (typmod - 4) & 0xffff;
			return SL_T_DECIMAL;
		}
		return SL_T_STRING;
	default:
		return SL_T_STRING;
	}
}

struct sl_table *tl_table(const char *ns, const char *name, const struct tl_col *cols, int n)
{
	struct sl_table *t = sl_table_new(ns, name);

	if (!t)
		abort();
	for (int i = 0; i < n; i++) {
		int p = 0, s = 0;
		enum sl_type type = map_type(cols[i].oid, cols[i].typmod, &p, &s);
		if (sl_table_add_column(t, cols[i].name, type, p, s, cols[i].oid, cols[i].typmod,
					cols[i].type_name, cols[i].key) < 0)
			abort();
	}
	if (sl_table_finish(t) < 0)
		abort();
	t->src = sl_source_lookup("postgres")->desc;
	return t;
}

size_t tl_zigzag(int64_t v, unsigned char *out)
{
	/* Spec: (n << 1) ^ (n >> 63), then 7 bits at a time, low first. */
	uint64_t z = v < 0 ? ~((uint64_t)v << 1) : (uint64_t)v << 1;
	size_t n = 0;

	do {
		unsigned char byte = z & 0x7f;
		z >>= 7;
		out[n++] = z ? byte | 0x80 : byte;
	} while (z);
	return n;
}

char *tl_mkdtemp(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *p;
	size_t n;

	if (!base || !*base)
		base = "/tmp";
	n = strlen(base) + strlen(tag) + 32;
	p = malloc(n);
	if (!p)
		abort();
	snprintf(p, n, "%s/sluice-%s-XXXXXX", base, tag);
	if (!mkdtemp(p))
		abort();
	return p;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void tl_rm_rf(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static char **g_list;
static size_t g_n, g_alloc, g_rootlen;

static int list_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (flag != FTW_F)
		return 0;
	if (g_n == g_alloc) {
		g_alloc = g_alloc ? g_alloc * 2 : 16;
		g_list = realloc(g_list, g_alloc * sizeof *g_list);
		if (!g_list)
			abort();
	}
	g_list[g_n] = strdup(path + g_rootlen + 1);
	if (!g_list[g_n])
		abort();
	g_n++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char **tl_list_files(const char *root, size_t *n)
{
	char **out;

	g_list = NULL;
	g_n = g_alloc = 0;
	g_rootlen = strlen(root);
	nftw(root, list_one, 16, FTW_PHYS);
	if (g_n)
		qsort(g_list, g_n, sizeof *g_list, cmp_str);
	out = g_list;
	*n = g_n;
	g_list = NULL;
	return out;
}

void tl_free_list(char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

unsigned char *tl_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *p = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		p = malloc((size_t)n + 1);
		if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
			free(p);
			p = NULL;
		} else if (p) {
			p[n] = '\0';
		}
		*len = (size_t)n;
	}
	fclose(f);
	return p;
}

void tl_change(struct sl_change *c, const struct sl_table *t, enum sl_op op,
	       const struct sl_value *values, uint64_t pos, uint32_t seq, int64_t source_ts_us)
{
	memset(c, 0, sizeof *c);
	c->table = t;
	c->op = op;
	c->values = values;
	c->read_method = seq == 0 ? "postgresql-backfill" : "postgresql-cdc-wal";
	/* Positions must outlive the change: a ring of them serves the tests,
	 * none of which holds this many changes at once. */
	static struct sl_position ring[1 << 16];
	static size_t next;
	struct sl_position *p = &ring[next++ & ((1 << 16) - 1)];

	memset(p, 0, sizeof *p);
	p->w[0] = pos;
	c->pos = p;
	sl_change_set_csn(c, pos, seq);
	c->source_ts_us = source_ts_us;
	c->read_ts_us = source_ts_us + 1500;
	c->tx_id = seq == 0 ? 0 : 4242;
	sl_change_set_uuid(c, "s1", NULL, 0);
}

struct sl_value tl_null(void)
{
	return (struct sl_value){ .kind = SL_V_NULL };
}

struct sl_value tl_unchanged(void)
{
	return (struct sl_value){ .kind = SL_V_UNCHANGED };
}

struct sl_value tl_bool(bool b)
{
	return (struct sl_value){ .kind = SL_V_BOOL, .b = b };
}

struct sl_value tl_int(int64_t i)
{
	return (struct sl_value){ .kind = SL_V_INT, .i = i };
}

struct sl_value tl_float(float f)
{
	return (struct sl_value){ .kind = SL_V_FLOAT, .f = f };
}

struct sl_value tl_double(double d)
{
	return (struct sl_value){ .kind = SL_V_DOUBLE, .d = d };
}

struct sl_value tl_dec(bool neg, const char *digits, int scale)
{
	return (struct sl_value){ .kind = SL_V_DECIMAL, .neg = neg, .scale = (int16_t)scale,
				  .len = (uint32_t)strlen(digits), .p = digits };
}

struct sl_value tl_bytes(const void *p, size_t n)
{
	return (struct sl_value){ .kind = SL_V_BYTES, .len = (uint32_t)n, .p = p };
}

struct sl_value tl_str(const char *s)
{
	return (struct sl_value){ .kind = SL_V_STRING, .len = (uint32_t)strlen(s), .p = s };
}

struct sl_value tl_json(const char *s)
{
	return (struct sl_value){ .kind = SL_V_JSON, .len = (uint32_t)strlen(s), .p = s };
}

struct sl_value tl_date(int64_t days)
{
	return (struct sl_value){ .kind = SL_V_DATE, .i = days };
}

struct sl_value tl_time(int64_t us)
{
	return (struct sl_value){ .kind = SL_V_TIME, .i = us };
}

struct sl_value tl_ts(int64_t us)
{
	return (struct sl_value){ .kind = SL_V_TIMESTAMP, .i = us };
}

struct sl_value tl_uuid(const unsigned char *u)
{
	return (struct sl_value){ .kind = SL_V_UUID, .len = 16, .p = (const char *)u };
}

long tl_avro_c_each(const char *path, void (*fn)(void *arg, struct avro_value *rec), void *arg)
{
	avro_file_reader_t rd;
	avro_schema_t ws;
	avro_value_iface_t *iface;
	avro_value_t val;
	long n = 0;

	if (avro_file_reader(path, &rd) != 0)
		return -1;
	ws = avro_file_reader_get_writer_schema(rd);
	iface = avro_generic_class_from_schema(ws);
	if (!iface || avro_generic_value_new(iface, &val) != 0) {
		if (iface)
			avro_value_iface_decref(iface);
		avro_schema_decref(ws);
		avro_file_reader_close(rd);
		return -1;
	}
	while (avro_file_reader_read_value(rd, &val) == 0) {
		fn(arg, &val);
		n++;
	}
	avro_value_decref(&val);
	avro_value_iface_decref(iface);
	avro_schema_decref(ws);
	avro_file_reader_close(rd);
	return n;
}
