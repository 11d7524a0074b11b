/*
 * tests/unit/test_avro_ocf.c: the object container file writer.  Files written
 * with each codec are read back with avro-c's file reader; every record it
 * returns is serialised again and compared byte for byte with what was
 * written.  The header is parsed here independently, to check that the schema
 * text is exactly the one given (with its logical types) and the codec name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <avro.h>
#include <cmocka.h>

#include "common/buf.h"
#include "common/util.h"
#include "sinks/avro/avro_enc.h"
#include "sinks/avro/ocf.h"
#include "tests/unit/avro_testlib.h"

static char *g_dir;

static int setup(void **state)
{
	(void)state;
	g_dir = tl_mkdtemp("ocf");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tl_rm_rf(g_dir);
	free(g_dir);
	return 0;
}

static struct sl_table *sample_table(void)
{
	const struct tl_col cols[] = {
		{ "id", T_INT8, -1, "bigint", true },
		{ "name", T_TEXT, -1, "text", false },
		{ "amount", T_NUMERIC, numeric_typmod(10, 2), "numeric(10,2)", false },
		{ "ts", T_TIMESTAMPTZ, -1, "timestamp with time zone", false },
	};
	return tl_table("public", "sample", cols, 4);
}

/* The codec state for codec and level; fails the test if it cannot be made. */
static struct sl_ocf_codec *codec_of(enum sl_codec codec, int level)
{
	struct sl_ocf_codec *c;
	char err[256];

	if (sl_ocf_codec_new(&c, codec, level, 0, err, sizeof err) != 0)
		fail_msg("codec: %s", err);
	return c;
}

/* Test-local Avro long decoder. */
static int64_t get_long(const unsigned char **p)
{
	uint64_t z = 0;
	int shift = 0;

	for (;;) {
		unsigned char c = *(*p)++;
		z |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			break;
		shift += 7;
	}
	return (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
}

/* Parses the header of file data: checks magic, returns the schema and codec
 * (pointers into data) and the sync marker. */
static void parse_header(const unsigned char *data, size_t len, const char **schema, size_t *slen,
			 const char **codec, size_t *clen, const unsigned char **sync)
{
	const unsigned char *p = data + 4;
	int64_t n;

	assert_true(len >= 4 + 1 + 16);
	assert_memory_equal(data, "Obj\x01", 4);
	*schema = *codec = NULL;
	while ((n = get_long(&p)) != 0) {
		if (n < 0) {
			n = -n;
			(void)get_long(&p);  /* block byte size */
		}
		for (int64_t i = 0; i < n; i++) {
			int64_t kl = get_long(&p), vl;
			const char *k = (const char *)p;
			p += kl;
			vl = get_long(&p);
			if (kl == 11 && !memcmp(k, "avro.schema", 11)) {
				*schema = (const char *)p;
				*slen = (size_t)vl;
			} else if (kl == 10 && !memcmp(k, "avro.codec", 10)) {
				*codec = (const char *)p;
				*clen = (size_t)vl;
			}
			p += vl;
		}
	}
	*sync = p;
}

/* When set, write_file writes through an output callback into this buffer
 * (sl_ocf_open_out) and then copies it to the file. */
static struct sl_buf *via_out;

static int out_to_buf(void *arg, const struct iovec *iov, int iovcnt, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	for (int i = 0; i < iovcnt; i++)
		sl_buf_append(arg, iov[i].iov_base, iov[i].iov_len);
	return sl_buf_failed(arg) ? -1 : 0;
}

/* Writes n records to path with codec; returns all encoded records
 * back to back in *recs, with their lengths in *lens. */
static void write_file(const char *path, enum sl_codec codec, int level, int n, struct sl_buf *recs,
		       size_t **lens, const char **schema, size_t *schema_len, struct sl_avro_enc **enc,
		       struct sl_table *t)
{
	struct sl_ocf_writer *w;
	struct sl_ocf_codec *oc = codec_of(codec, level);
	char err[256], name[400], amount[32];
	struct sl_value v[4];
	struct sl_change c;
	uint64_t last_size = 0;

	*enc = sl_avro_enc_new(t, "s", err, sizeof err);
	assert_non_null(*enc);
	*schema = sl_avro_enc_schema(*enc, schema_len);
	if (via_out) {
		struct sl_ocf_out o = { out_to_buf, via_out };
		sl_buf_reset(via_out);
		if (sl_ocf_open_out(&w, &o, path, *schema, *schema_len, oc, 0, err, sizeof err) != 0)
			fail_msg("open: %s", err);
	} else if (sl_ocf_open(&w, path, *schema, *schema_len, oc, 0, err, sizeof err) != 0) {
		fail_msg("open: %s", err);
	}
	*lens = calloc((size_t)n + 1, sizeof **lens);
	for (int i = 0; i < n; i++) {
		struct sl_buf *b = sl_ocf_record_buf(w);
		size_t before = b->len, nl = (size_t)(i * 7 % 300);
		for (size_t k = 0; k < nl; k++)
			name[k] = (char)('a' + (i + (int)k) % 26);
		name[nl] = '\0';
		/* amount: [-]i.(i % 100), as unscaled digits; ts: 2024-01-(1 + i % 28)
		 * 13:45:(i % 60).i UTC (2024-01-01 is day 19723) */
		snprintf(amount, sizeof amount, "%d", i * 100 + i % 100);
		v[0] = tl_int((int64_t)i * 1000003);
		v[1] = i % 11 == 0 ? tl_null() : tl_str(name);
		v[2] = tl_dec(i % 3 == 0 && i > 0, amount, 2);
		v[3] = tl_ts(((int64_t)(19723 + i % 28) * 86400 + 13 * 3600 + 45 * 60 + i % 60) * 1000000 + i);
		tl_change(&c, t, i % 5 == 4 ? SL_OP_DELETE : SL_OP_INSERT, v, 0x1000 + (uint64_t)i, 1, 0);
		if (sl_avro_enc_record(*enc, b, &c, err, sizeof err) != 0)
			fail_msg("encode: %s", err);
		sl_buf_append(recs, b->data + before, b->len - before);
		(*lens)[i] = b->len - before;
		assert_int_equal(sl_ocf_record_done(w, err, sizeof err), 0);
		/* without compression the size only grows */
		if (codec == SL_CODEC_NULL)
			assert_true(sl_ocf_size(w) > last_size);
		last_size = sl_ocf_size(w);
	}
	assert_int_equal(sl_ocf_count(w), (uint64_t)n);
	assert_string_equal(sl_ocf_path(w), path);
	if (sl_ocf_close(w, true, err, sizeof err) != 0)
		fail_msg("close: %s", err);
	if (via_out) {
		/* Everything went through the callback, and the bytes make a
		 * file avro-c reads (roundtrip reads it back). */
		assert_true(via_out->len > 0);
		if (sl_write_file_atomic(path, via_out->data, via_out->len, err, sizeof err) != 0)
			fail_msg("write: %s", err);
	}
	sl_ocf_codec_free(oc);
}

/* Reads path with avro-c and compares every record with recs/lens. */
static void read_back(const char *path, int n, const struct sl_buf *recs, const size_t *lens)
{
	avro_file_reader_t rd;
	avro_schema_t ws;
	avro_value_iface_t *iface;
	avro_value_t val;
	char *mem = calloc(1, 1 << 22);
	avro_writer_t w = avro_writer_memory(mem, 1 << 22);
	size_t off = 0;
	int got = 0;

	if (avro_file_reader(path, &rd) != 0)
		fail_msg("avro-c cannot open %s: %s", path, avro_strerror());
	ws = avro_file_reader_get_writer_schema(rd);
	iface = avro_generic_class_from_schema(ws);
	assert_int_equal(avro_generic_value_new(iface, &val), 0);
	while (avro_file_reader_read_value(rd, &val) == 0) {
		int64_t sz;
		assert_true(got < n);
		avro_writer_reset(w);
		if (avro_value_write(w, &val) != 0)
			fail_msg("avro-c write: %s", avro_strerror());
		sz = avro_writer_tell(w);
		if ((size_t)sz != lens[got] || memcmp(mem, recs->data + off, lens[got]) != 0)
			fail_msg("%s: record %d differs after the round trip", path, got);
		off += lens[got];
		got++;
	}
	assert_int_equal(got, n);
	avro_value_decref(&val);
	avro_value_iface_decref(iface);
	avro_schema_decref(ws);
	avro_file_reader_close(rd);
	avro_writer_free(w);
	free(mem);
}

static void roundtrip(enum sl_codec codec, int level, const char *codec_name, int n)
{
	struct sl_table *t = sample_table();
	struct sl_avro_enc *enc;
	struct sl_buf recs;
	size_t *lens, slen, clen, flen, sjl;
	const char *sj, *hs, *hc;
	const unsigned char *sync;
	unsigned char *data;
	char path[512];

	snprintf(path, sizeof path, "%s/%s-%d-%d.avro", g_dir, codec_name, level, n);
	sl_buf_init(&recs, 0);
	write_file(path, codec, level, n, &recs, &lens, &sj, &sjl, &enc, t);
	read_back(path, n, &recs, lens);

	data = tl_read_file(path, &flen);
	assert_non_null(data);
	parse_header(data, flen, &hs, &slen, &hc, &clen, &sync);
	assert_non_null(hs);
	assert_non_null(hc);
	/* the schema text exactly as given, logical types included */
	assert_int_equal(slen, sjl);
	assert_memory_equal(hs, sj, sjl);
	{
		char *s = strndup(hs, slen);
		assert_non_null(strstr(s, "{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":10,\"scale\":2}"));
		assert_non_null(strstr(s, "\"logicalType\":\"timestamp-micros\""));
		free(s);
	}
	assert_int_equal(clen, strlen(codec_name));
	assert_memory_equal(hc, codec_name, clen);
	/* the file ends with the sync marker (after the last block) */
	assert_memory_equal(data + flen - 16, sync, 16);
	free(data);
	free(lens);
	sl_buf_free(&recs);
	sl_avro_enc_free(enc);
	sl_table_free(t);
}

static void test_null(void **state)
{
	(void)state;
	roundtrip(SL_CODEC_NULL, 0, "null", 5000);
}

static void test_deflate1(void **state)
{
	(void)state;
	roundtrip(SL_CODEC_DEFLATE, 1, "deflate", 5000);
}

static void test_deflate9(void **state)
{
	(void)state;
	roundtrip(SL_CODEC_DEFLATE, 9, "deflate", 5000);
}

/* The same container through an output callback instead of a file. */
static void test_output_callback(void **state)
{
	struct sl_buf b;

	(void)state;
	sl_buf_init(&b, 0);
	via_out = &b;
	roundtrip(SL_CODEC_NULL, 0, "null", 3000);
	roundtrip(SL_CODEC_DEFLATE, 1, "deflate", 3000);
	via_out = NULL;
	sl_buf_free(&b);
}

/* libdeflate has a different strategy per band of levels: every level's
 * output must inflate (avro-c uses zlib) to the same records. */
static void test_deflate_levels(void **state)
{
	(void)state;
	for (int level = 2; level <= 8; level++)
		roundtrip(SL_CODEC_DEFLATE, level, "deflate", 2000);
}

static void test_snappy(void **state)
{
	(void)state;
	roundtrip(SL_CODEC_SNAPPY, 0, "snappy", 5000);
}

static void test_small_files(void **state)
{
	(void)state;
	/* one record, and no record at all (a header-only file) */
	roundtrip(SL_CODEC_DEFLATE, 1, "deflate", 1);
	roundtrip(SL_CODEC_SNAPPY, 0, "snappy", 1);
	roundtrip(SL_CODEC_NULL, 0, "null", 0);
	roundtrip(SL_CODEC_SNAPPY, 0, "snappy", 0);
}

/* One record much larger than a block, then small ones again. */
static void test_huge_record(void **state)
{
	static const char schema[] = "{\"type\":\"record\",\"name\":\"r\",\"fields\":[{\"name\":\"s\",\"type\":\"string\"}]}";
	enum sl_codec codecs[] = { SL_CODEC_NULL, SL_CODEC_DEFLATE, SL_CODEC_SNAPPY };
	const size_t big = 3 << 20;

	(void)state;
	for (size_t ci = 0; ci < 3; ci++) {
		struct sl_ocf_writer *w;
		struct sl_ocf_codec *oc = codec_of(codecs[ci], 6);
		struct sl_buf recs;
		size_t lens[3];
		char path[512], err[256];
		char *s = malloc(big);

		memset(s, 'q', big);
		for (size_t k = 0; k < big; k += 4099)
			s[k] = (char)('a' + k % 26);
		snprintf(path, sizeof path, "%s/huge-%zu.avro", g_dir, ci);
		assert_int_equal(sl_ocf_open(&w, path, schema, sizeof schema - 1, oc, 0, err, sizeof err), 0);
		sl_buf_init(&recs, 0);
		for (int i = 0; i < 3; i++) {
			struct sl_buf one;
			sl_buf_init(&one, 0);
			sl_avro_put_bytes(&one, s, i == 1 ? big : 10);
			lens[i] = one.len;
			sl_buf_append(&recs, one.data, one.len);
			assert_int_equal(sl_ocf_append(w, one.data, one.len, err, sizeof err), 0);
			sl_buf_free(&one);
		}
		assert_int_equal(sl_ocf_close(w, false, err, sizeof err), 0);
		sl_ocf_codec_free(oc);
		read_back(path, 3, &recs, lens);
		sl_buf_free(&recs);
		free(s);
	}
}

static void test_errors(void **state)
{
	struct sl_ocf_writer *w, *w2;
	struct sl_ocf_codec *oc = codec_of(SL_CODEC_NULL, 0), *bad = (struct sl_ocf_codec *)1;
	char path[512], err[512];
	unsigned char *a, *b;
	size_t la, lb;
	const char *hs, *hc;
	size_t slen, clen;
	const unsigned char *sa, *sb;

	(void)state;
	snprintf(path, sizeof path, "%s/exists.avro", g_dir);
	assert_int_equal(sl_ocf_open(&w, path, "\"int\"", 5, oc, 0, err, sizeof err), 0);
	/* the same path again: refused, never truncated */
	assert_int_equal(sl_ocf_open(&w2, path, "\"int\"", 5, oc, 0, err, sizeof err), -1);
	assert_null(w2);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "File exists"));
	assert_int_equal(sl_ocf_append(w, "\x02", 1, err, sizeof err), 0);
	assert_int_equal(sl_ocf_close(w, true, err, sizeof err), 0);

	snprintf(path, sizeof path, "%s/no/such/dir/x.avro", g_dir);
	assert_int_equal(sl_ocf_open(&w, path, "\"int\"", 5, oc, 0, err, sizeof err), -1);
	assert_non_null(strstr(err, "No such file or directory"));

	/* deflate levels outside 1-9, and unknown codecs, are refused */
	assert_int_equal(sl_ocf_codec_new(&bad, SL_CODEC_DEFLATE, 10, 0, err, sizeof err), -1);
	assert_null(bad);
	assert_string_equal(err, "deflate level 10 is not in 1-9");
	assert_int_equal(sl_ocf_codec_new(&bad, SL_CODEC_DEFLATE, 0, 0, err, sizeof err), -1);
	assert_string_equal(err, "deflate level 0 is not in 1-9");
	assert_int_equal(sl_ocf_codec_new(&bad, (enum sl_codec)42, 1, 0, err, sizeof err), -1);
	assert_string_equal(err, "unknown avro codec 42");
	/* level is ignored for codecs other than deflate */
	assert_int_equal(sl_ocf_codec_new(&bad, SL_CODEC_SNAPPY, 99, 0, err, sizeof err), 0);
	sl_ocf_codec_free(bad);
	sl_ocf_codec_free(NULL);

	/* each file gets its own random sync marker */
	snprintf(path, sizeof path, "%s/sync1.avro", g_dir);
	assert_int_equal(sl_ocf_open(&w, path, "\"int\"", 5, oc, 0, err, sizeof err), 0);
	assert_int_equal(sl_ocf_close(w, false, err, sizeof err), 0);
	a = tl_read_file(path, &la);
	snprintf(path, sizeof path, "%s/sync2.avro", g_dir);
	assert_int_equal(sl_ocf_open(&w, path, "\"int\"", 5, oc, 0, err, sizeof err), 0);
	sl_ocf_abort(w);
	b = tl_read_file(path, &lb);
	assert_int_equal(lb, 0);  /* abort writes nothing */
	assert_int_equal(sl_ocf_open(&w, path, "\"int\"", 5, oc, 0, err, sizeof err), -1);
	remove(path);
	free(b);
	assert_int_equal(sl_ocf_open(&w, path, "\"int\"", 5, oc, 0, err, sizeof err), 0);
	assert_int_equal(sl_ocf_close(w, false, err, sizeof err), 0);
	b = tl_read_file(path, &lb);
	parse_header(a, la, &hs, &slen, &hc, &clen, &sa);
	parse_header(b, lb, &hs, &slen, &hc, &clen, &sb);
	assert_memory_not_equal(sa, sb, 16);
	free(a);
	free(b);
	sl_ocf_codec_free(oc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_null),
		cmocka_unit_test(test_deflate1),
		cmocka_unit_test(test_deflate9),
		cmocka_unit_test(test_output_callback),
		cmocka_unit_test(test_deflate_levels),
		cmocka_unit_test(test_snappy),
		cmocka_unit_test(test_small_files),
		cmocka_unit_test(test_huge_record),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
