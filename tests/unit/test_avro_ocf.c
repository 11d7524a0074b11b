/*
 * tests/unit/test_avro_ocf.c: the object container file writer.  Files written
 * with each codec are read back with avro-c's file reader; every record it
 * returns is serialised again and compared byte for byte with what was
 * written.  The header is parsed here independently, to check that the schema
 * text is exactly the one given (with its logical types) and the codec name.
 * With compression threads, files must be the same bytes as inline (but for
 * the random sync marker), with blocks in order however many are in flight;
 * a failed block is reported by its writer's next call and by its close.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <avro.h>
#include <cmocka.h>
#include <zstd.h>

#include "common/buf.h"
#include "common/util.h"
#include "sinks/avro/avro_enc.h"
#include "sinks/avro/avro_read.h"
#include "sinks/avro/ocf.h"
#include "tests/unit/avro_testlib.h"

static char *g_dir;
/* Compression threads of the codecs codec_of makes, and the block target of
 * the files write_file writes (0: the default). */
static int g_threads;
static size_t g_block_target;

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
static struct sl_ocf_codec *codec_with(enum sl_codec codec, int level, int threads)
{
	struct sl_ocf_codec *c;
	char err[256];

	if (sl_ocf_codec_new(&c, codec, level, threads, err, sizeof err) != 0)
		fail_msg("codec: %s", err);
	assert_int_equal(sl_ocf_codec_threads(c), codec == SL_CODEC_NULL ? 0 : threads);
	return c;
}

/* A codec with g_threads threads (set by the callers of roundtrip,
 * write_file and test_huge_record). */
static struct sl_ocf_codec *codec_of(enum sl_codec codec, int level)
{
	return codec_with(codec, level, g_threads);
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
		if (sl_ocf_open_out(&w, &o, path, *schema, *schema_len, oc, g_block_target, err, sizeof err) != 0)
			fail_msg("open: %s", err);
	} else if (sl_ocf_open(&w, path, *schema, *schema_len, oc, g_block_target, err, sizeof err) != 0) {
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
		if (sl_ocf_record_done(w, err, sizeof err) != 0)
			fail_msg("record %d: %s", i, err);
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

/* Serialises val again with avro-c and compares it with record got of
 * recs/lens, which starts at *off. */
static void same_record(avro_writer_t w, const char *mem, avro_value_t *val, const char *path, int got,
			const struct sl_buf *recs, const size_t *lens, size_t *off)
{
	int64_t sz;

	avro_writer_reset(w);
	if (avro_value_write(w, val) != 0)
		fail_msg("avro-c write: %s", avro_strerror());
	sz = avro_writer_tell(w);
	if ((size_t)sz != lens[got] || memcmp(mem, recs->data + *off, lens[got]) != 0)
		fail_msg("%s: record %d differs after the round trip", path, got);
	*off += lens[got];
}

/* Reads the container at path from memory, through the readers' stream
 * entry points (what tests/fuzz/fuzz_ocf reads through), and compares every
 * record with recs/lens, and the blocks' counts with n. */
static void read_back_stream(avro_writer_t w, char *mem, const char *path, int n, const struct sl_buf *recs,
			     const size_t *lens)
{
	struct sl_avro_read *sr;
	struct sl_ocf_reader *or;
	avro_value_t *v;
	char *file, err[512];
	const void *block;
	size_t flen, len, off = 0;
	uint64_t count, blocks_count = 0;
	int got = 0, rc;

	if (sl_read_file(path, &file, &flen, err, sizeof err) != 0)
		fail_msg("%s", err);
	if (sl_avro_read_open_stream(&sr, fmemopen(file, flen, "r"), "in memory", err, sizeof err) != 0)
		fail_msg("sluice cannot open %s in memory: %s", path, err);
	while ((rc = sl_avro_read_next(sr, &v, err, sizeof err)) > 0) {
		assert_true(got < n);
		same_record(w, mem, v, path, got++, recs, lens, &off);
	}
	if (rc < 0)
		fail_msg("sluice cannot read %s in memory: %s", path, err);
	assert_int_equal(got, n);
	sl_avro_read_close(sr);

	if (sl_ocf_reader_open_stream(&or, fmemopen(file, flen, "r"), "in memory", err, sizeof err) != 0)
		fail_msg("%s", err);
	while ((rc = sl_ocf_reader_block(or, &block, &len, &count, err, sizeof err)) > 0)
		blocks_count += count;
	assert_int_equal(rc, 0);
	assert_int_equal(blocks_count, (uint64_t)n);
	sl_ocf_reader_close(or);
	free(file);
}

/* read_back's pass with avro-c: each record against recs/lens. */
struct avro_c_check {
	avro_writer_t w;
	char *mem;
	const char *path;
	int n, got;
	const struct sl_buf *recs;
	const size_t *lens;
	size_t off;
};

static void avro_c_record(void *arg, struct avro_value *v)
{
	struct avro_c_check *c = arg;

	assert_true(c->got < c->n);
	same_record(c->w, c->mem, v, c->path, c->got++, c->recs, c->lens, &c->off);
}

/* Reads path with sluice's reader (avro_read.h) and, unless its codec is
 * zstandard (which avro-c 1.11 lacks), with avro-c's own file reader, and
 * compares every record with recs/lens. */
static void read_back(const char *path, int n, const struct sl_buf *recs, const size_t *lens)
{
	struct sl_avro_read *sr;
	struct sl_ocf_reader *or;
	avro_value_t *v;
	char *mem = calloc(1, 1 << 22), err[512];
	avro_writer_t w = avro_writer_memory(mem, 1 << 22);
	size_t off = 0;
	int got = 0, rc;
	bool zstd;

	if (sl_avro_read_open(&sr, path, err, sizeof err) != 0)
		fail_msg("sluice cannot open %s: %s", path, err);
	while ((rc = sl_avro_read_next(sr, &v, err, sizeof err)) > 0) {
		assert_true(got < n);
		same_record(w, mem, v, path, got++, recs, lens, &off);
	}
	if (rc < 0)
		fail_msg("sluice cannot read %s: %s", path, err);
	assert_int_equal(got, n);
	assert_int_equal(sl_avro_read_count(sr), (uint64_t)n);
	sl_avro_read_close(sr);
	read_back_stream(w, mem, path, n, recs, lens);

	if (sl_ocf_reader_open(&or, path, err, sizeof err) != 0)
		fail_msg("%s", err);
	zstd = sl_ocf_reader_codec(or) == SL_CODEC_ZSTANDARD;
	sl_ocf_reader_close(or);
	off = 0;
	got = 0;
	if (zstd)
		goto out;
	{
		struct avro_c_check ck = { w, mem, path, n, 0, recs, lens, 0 };
		if (tl_avro_c_each(path, avro_c_record, &ck) < 0)
			fail_msg("avro-c cannot open %s: %s", path, avro_strerror());
		assert_int_equal(ck.got, n);
	}
out:
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

/* zstandard at the fastest, the default-ish and a high level (avro-c has
 * no zstandard: read_back reads these with sluice's reader only, and
 * test_avro_python checks them with Python's avro and zstandard). */
static void test_zstandard(void **state)
{
	(void)state;
	roundtrip(SL_CODEC_ZSTANDARD, 1, "zstandard", 5000);
	roundtrip(SL_CODEC_ZSTANDARD, 3, "zstandard", 5000);
	roundtrip(SL_CODEC_ZSTANDARD, 19, "zstandard", 2000);
}

static void test_small_files(void **state)
{
	(void)state;
	roundtrip(SL_CODEC_ZSTANDARD, 1, "zstandard", 1);
	roundtrip(SL_CODEC_ZSTANDARD, 1, "zstandard", 0);
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
	enum sl_codec codecs[] = { SL_CODEC_NULL, SL_CODEC_DEFLATE, SL_CODEC_SNAPPY, SL_CODEC_ZSTANDARD };
	const size_t big = 3 << 20;

	(void)state;
	for (size_t ci = 0; ci < 4; ci++) {
		struct sl_ocf_writer *w;
		struct sl_ocf_codec *oc = codec_of(codecs[ci], 6);
		struct sl_buf recs;
		size_t lens[3];
		char path[512], err[256];
		char *s = malloc(big);

		memset(s, 'q', big);
		for (size_t k = 0; k < big; k += 4099)
			s[k] = (char)('a' + k % 26);
		snprintf(path, sizeof path, "%s/huge-%zu-%d.avro", g_dir, ci, g_threads);
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

	/* deflate levels outside 1-9, zstandard levels outside 1-22, and unknown
	 * codecs, are refused */
	assert_int_equal(sl_ocf_codec_new(&bad, SL_CODEC_DEFLATE, 10, 0, err, sizeof err), -1);
	assert_null(bad);
	assert_string_equal(err, "compression_level 10 is not in 1-9 (deflate)");
	assert_int_equal(sl_ocf_codec_new(&bad, SL_CODEC_DEFLATE, 0, 0, err, sizeof err), -1);
	assert_string_equal(err, "compression_level 0 is not in 1-9 (deflate)");
	assert_int_equal(sl_ocf_codec_new(&bad, SL_CODEC_ZSTANDARD, 23, 0, err, sizeof err), -1);
	assert_string_equal(err, "compression_level 23 is not in 1-22 (zstandard)");
	assert_int_equal(sl_ocf_codec_new(&bad, SL_CODEC_ZSTANDARD, 0, 2, err, sizeof err), -1);
	assert_string_equal(err, "compression_level 0 is not in 1-22 (zstandard)");
	assert_int_equal(sl_ocf_codec_new(&bad, (enum sl_codec)42, 1, 0, err, sizeof err), -1);
	assert_string_equal(err, "unknown avro codec 42");
	/* level is ignored for codecs other than deflate and zstandard */
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

/* ---------------------------------------------------------------------- */
/* Compression threads                                                    */

/* Reads path into memory with every occurrence of its sync marker zeroed:
 * what must be the same, byte for byte, for the same records written with
 * the same codec, inline or by compression threads. */
static unsigned char *read_unsynced(const char *path, size_t *len)
{
	unsigned char *data = tl_read_file(path, len), *p, sync[16];
	const char *hs, *hc;
	size_t slen, clen;
	const unsigned char *sp;

	assert_non_null(data);
	parse_header(data, *len, &hs, &slen, &hc, &clen, &sp);
	memcpy(sync, sp, 16);
	for (p = data; (p = memmem(p, *len - (size_t)(p - data), sync, 16)) != NULL; p += 16)
		memset(p, 0, 16);
	return data;
}

/* Writes the same n records inline and with threads compression threads,
 * reads both back with avro-c (every record, in order), and compares the
 * two files' bytes. */
static void same_as_inline(enum sl_codec codec, int level, int threads, size_t block_target, int n)
{
	struct sl_table *t = sample_table();
	struct sl_avro_enc *enc;
	struct sl_buf recs;
	size_t *lens, sjl, la, lb;
	const char *sj;
	unsigned char *a, *b;
	char pa[512], pb[512];

	g_block_target = block_target;
	snprintf(pa, sizeof pa, "%s/inline-%d-%d-%zu.avro", g_dir, (int)codec, level, block_target);
	snprintf(pb, sizeof pb, "%s/threads%d-%d-%d-%zu.avro", g_dir, threads, (int)codec, level, block_target);
	remove(pa);
	remove(pb);
	g_threads = 0;
	sl_buf_init(&recs, 0);
	write_file(pa, codec, level, n, &recs, &lens, &sj, &sjl, &enc, t);
	sl_avro_enc_free(enc);
	free(lens);
	sl_buf_free(&recs);
	g_threads = threads;
	sl_buf_init(&recs, 0);
	write_file(pb, codec, level, n, &recs, &lens, &sj, &sjl, &enc, t);
	g_threads = 0;
	g_block_target = 0;
	read_back(pb, n, &recs, lens);
	a = read_unsynced(pa, &la);
	b = read_unsynced(pb, &lb);
	if (la != lb || memcmp(a, b, la) != 0)
		fail_msg("%s and %s differ (%zu and %zu bytes)", pa, pb, la, lb);
	free(a);
	free(b);
	free(lens);
	sl_buf_free(&recs);
	sl_avro_enc_free(enc);
	sl_table_free(t);
}

/* Many small blocks (a 200-byte target: one or two records each, thousands
 * of blocks through a ring of 2 per thread) and the default 64 KiB blocks,
 * with each codec and 1 to 3 threads. */
static void test_threads_same_bytes(void **state)
{
	(void)state;
	for (int threads = 1; threads <= 3; threads++) {
		same_as_inline(SL_CODEC_DEFLATE, 1, threads, 200, 5000);
		same_as_inline(SL_CODEC_DEFLATE, 1, threads, 0, 20000);
		same_as_inline(SL_CODEC_DEFLATE, 6, threads, 0, 5000);
		same_as_inline(SL_CODEC_SNAPPY, 0, threads, 200, 5000);
		same_as_inline(SL_CODEC_SNAPPY, 0, threads, 0, 20000);
		same_as_inline(SL_CODEC_ZSTANDARD, 1, threads, 200, 5000);
		same_as_inline(SL_CODEC_ZSTANDARD, 3, threads, 0, 20000);
		same_as_inline(SL_CODEC_NULL, 0, threads, 200, 2000);
	}
	/* one record, none at all */
	same_as_inline(SL_CODEC_DEFLATE, 1, 2, 0, 1);
	same_as_inline(SL_CODEC_DEFLATE, 1, 2, 0, 0);
}

/* Through an output callback (the way the file tree writes to its store). */
static void test_threads_output_callback(void **state)
{
	struct sl_buf b;

	(void)state;
	sl_buf_init(&b, 0);
	via_out = &b;
	g_threads = 2;
	roundtrip(SL_CODEC_DEFLATE, 1, "deflate", 3000);
	roundtrip(SL_CODEC_SNAPPY, 0, "snappy", 3000);
	roundtrip(SL_CODEC_ZSTANDARD, 1, "zstandard", 3000);
	g_threads = 0;
	via_out = NULL;
	sl_buf_free(&b);
}

static void test_threads_huge_record(void **state)
{
	g_threads = 2;
	test_huge_record(state);
	g_threads = 0;
}

/* Records for writer k of test_threads_shared_codec: a long string. */
static size_t shared_rec(struct sl_buf *one, int k, int i)
{
	char s[600];
	size_t n = (size_t)((i * 37 + k * 101) % 500) + 1;

	for (size_t x = 0; x < n; x++)
		s[x] = (char)('a' + (i + k + (int)x / 7) % 26);
	sl_buf_reset(one);
	sl_avro_put_bytes(one, s, n);
	return one->len;
}

/* Three files share one codec with one thread (a ring of 2 slots), records
 * interleaved as a sink's tables are: a writer often has to write another
 * file's block out to get a slot.  A fourth file is aborted with blocks in
 * flight; they are dropped without touching the others. */
static void test_threads_shared_codec(void **state)
{
	static const char schema[] = "{\"type\":\"record\",\"name\":\"r\",\"fields\":[{\"name\":\"s\",\"type\":\"string\"}]}";
	enum sl_codec codecs[] = { SL_CODEC_DEFLATE, SL_CODEC_SNAPPY, SL_CODEC_ZSTANDARD };
	const int n = 3000;

	(void)state;
	for (size_t ci = 0; ci < 3; ci++) {
		struct sl_ocf_writer *w[4];
		struct sl_ocf_codec *oc;
		struct sl_buf recs[3], one;
		size_t *lens[3];
		char path[4][512], err[512];

		oc = codec_with(codecs[ci], 1, 1);
		sl_buf_init(&one, 0);
		for (int k = 0; k < 4; k++) {
			snprintf(path[k], sizeof path[k], "%s/shared-%zu-%d.avro", g_dir, ci, k);
			remove(path[k]);
			if (sl_ocf_open(&w[k], path[k], schema, sizeof schema - 1, oc, 300 + 500 * (size_t)k, err,
					sizeof err) != 0)
				fail_msg("open: %s", err);
			if (k < 3) {
				sl_buf_init(&recs[k], 0);
				lens[k] = calloc((size_t)n, sizeof *lens[k]);
			}
		}
		for (int i = 0; i < n; i++) {
			for (int k = 0; k < 4; k++) {
				size_t len;
				if (k == 3 && i > n / 2)
					continue;
				len = shared_rec(&one, k, i);
				if (k < 3) {
					lens[k][i] = len;
					sl_buf_append(&recs[k], one.data, len);
				}
				if (sl_ocf_append(w[k], one.data, len, err, sizeof err) != 0)
					fail_msg("append: %s", err);
			}
			if (i == n / 2)
				sl_ocf_abort(w[3]);
		}
		for (int k = 0; k < 3; k++) {
			if (sl_ocf_close(w[k], true, err, sizeof err) != 0)
				fail_msg("close: %s", err);
			read_back(path[k], n, &recs[k], lens[k]);
			sl_buf_free(&recs[k]);
			free(lens[k]);
		}
		sl_buf_free(&one);
		sl_ocf_codec_free(oc);
	}
}

/* Writes a file of n records of codec (64-byte blocks: many of them) at
 * path, and returns its bytes (*len) and where its first block begins. */
static unsigned char *small_blocks(const char *path, enum sl_codec codec, int n, size_t *len, size_t *first)
{
	static const char schema[] = "\"string\"";
	struct sl_ocf_codec *oc = codec_with(codec, 1, 0);
	struct sl_ocf_writer *w;
	struct sl_buf one;
	const char *hs, *hc;
	size_t slen, clen;
	const unsigned char *sync;
	unsigned char *data;
	char err[512];

	remove(path);
	sl_buf_init(&one, 0);
	if (sl_ocf_open(&w, path, schema, sizeof schema - 1, oc, 64, err, sizeof err) != 0)
		fail_msg("open: %s", err);
	for (int i = 0; i < n; i++)
		assert_int_equal(sl_ocf_append(w, one.data, shared_rec(&one, 1, i), err, sizeof err), 0);
	assert_int_equal(sl_ocf_close(w, false, err, sizeof err), 0);
	sl_ocf_codec_free(oc);
	sl_buf_free(&one);
	data = tl_read_file(path, len);
	parse_header(data, *len, &hs, &slen, &hc, &clen, &sync);
	*first = (size_t)(sync + 16 - data);
	return data;
}

/* The zigzag long at *p; moves *p past it. */
static int64_t zz_long(const unsigned char **p)
{
	uint64_t v = 0;

	for (int shift = 0;; shift += 7) {
		unsigned char c = *(*p)++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
	}
}

/* Where the data of the block at d + first begins, and its size. */
static size_t block_data(const unsigned char *d, size_t first, size_t *size)
{
	const unsigned char *p = d + first;

	zz_long(&p);
	*size = (size_t)zz_long(&p);
	return (size_t)(p - d);
}

/* Reads path to its end with sluice's reader: the records read, and the
 * error (or "") in err. */
static int read_all(const char *path, char *err, size_t errlen)
{
	struct sl_avro_read *r;
	avro_value_t *v;
	int n = 0, rc;

	err[0] = '\0';
	if (sl_avro_read_open(&r, path, err, errlen) < 0)
		return -1;
	while ((rc = sl_avro_read_next(r, &v, err, errlen)) > 0)
		n++;
	sl_avro_read_close(r);
	return rc < 0 ? -1 : n;
}

/* Damaged files are refused by sluice's reader, naming the file and the
 * block: a cut-off file, a bad sync marker, a corrupt zstandard frame, a
 * snappy block whose CRC-32 does not match, a codec it does not know. */
static void test_reader_damage(void **state)
{
	enum sl_codec codecs[] = { SL_CODEC_NULL, SL_CODEC_DEFLATE, SL_CODEC_SNAPPY, SL_CODEC_ZSTANDARD };
	char path[512], err[512];
	unsigned char *d;
	size_t len, first, bsize;

	(void)state;
	snprintf(path, sizeof path, "%s/damage.avro", g_dir);
	for (size_t ci = 0; ci < 4; ci++) {
		d = small_blocks(path, codecs[ci], 300, &len, &first);
		assert_int_equal(read_all(path, err, sizeof err), 300);
		assert_string_equal(err, "");
		/* the last sync marker changed */
		d[len - 1] ^= 0x55;
		assert_int_equal(sl_write_file_atomic(path, d, len, err, sizeof err), 0);
		assert_int_equal(read_all(path, err, sizeof err), -1);
		assert_non_null(strstr(err, path));
		assert_non_null(strstr(err, " is truncated or damaged"));
		/* cut off in the middle of the last block */
		d[len - 1] ^= 0x55;
		assert_int_equal(sl_write_file_atomic(path, d, len - 20, err, sizeof err), 0);
		assert_int_equal(read_all(path, err, sizeof err), -1);
		assert_non_null(strstr(err, " is truncated or damaged"));
		free(d);
	}
	d = small_blocks(path, SL_CODEC_ZSTANDARD, 300, &len, &first);
	d[block_data(d, first, &bsize)] ^= 0xff;  /* the frame's magic number */
	assert_int_equal(sl_write_file_atomic(path, d, len, err, sizeof err), 0);
	assert_int_equal(read_all(path, err, sizeof err), -1);
	assert_non_null(strstr(err, "\": block 1: bad zstandard data: "));
	free(d);
	d = small_blocks(path, SL_CODEC_SNAPPY, 300, &len, &first);
	d[block_data(d, first, &bsize) + bsize - 1] ^= 0x01;  /* the last byte of the CRC-32 */
	assert_int_equal(sl_write_file_atomic(path, d, len, err, sizeof err), 0);
	assert_int_equal(read_all(path, err, sizeof err), -1);
	assert_non_null(strstr(err, "\": block 1: the snappy block's CRC-32 does not match its data"));
	free(d);
	/* a codec sluice does not read */
	d = small_blocks(path, SL_CODEC_NULL, 3, &len, &first);
	{
		const char *hs, *hc;
		size_t slen, clen;
		const unsigned char *sync;
		parse_header(d, len, &hs, &slen, &hc, &clen, &sync);
		memcpy((char *)hc, "lzma", 4);
	}
	assert_int_equal(sl_write_file_atomic(path, d, len, err, sizeof err), 0);
	assert_int_equal(read_all(path, err, sizeof err), -1);
	assert_non_null(strstr(err, "its codec \"lzma\" cannot be read"));
	free(d);
}

/* A zstandard container written by hand as other writers may: one block of
 * n strings (about 2.5 MB) in two frames that do not record their content
 * size, so the reader cannot size its buffer up front.  Returns the bytes
 * (*len) and the records (recs, lens). */
static unsigned char *foreign_zstd(int n, size_t *len, struct sl_buf *recs, size_t *lens)
{
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	struct sl_buf f, z;
	size_t half;
	char s[600];

	sl_buf_init(&f, 0);
	sl_buf_init(&z, 0);
	for (int i = 0; i < n; i++) {
		size_t before = recs->len, k = (size_t)(i * 37 % 500) + 1;
		for (size_t x = 0; x < k; x++)
			s[x] = (char)('a' + (i + (int)x / 5) % 26);
		sl_avro_put_bytes(recs, s, k);
		lens[i] = recs->len - before;
	}
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0)));
	half = recs->len / 2;
	for (int fr = 0; fr < 2; fr++) {
		const char *src = recs->data + (fr ? half : 0);
		size_t sn = fr ? recs->len - half : half, bound = ZSTD_compressBound(sn), got;
		assert_int_equal(sl_buf_reserve(&z, bound), 0);
		got = ZSTD_compress2(cc, z.data + z.len, bound, src, sn);
		assert_false(ZSTD_isError(got));
		assert_int_equal(ZSTD_getFrameContentSize(z.data + z.len, got), ZSTD_CONTENTSIZE_UNKNOWN);
		z.len += got;
	}
	sl_buf_append(&f, "Obj\x01", 4);
	sl_avro_put_long(&f, 2);
	sl_avro_put_str(&f, "avro.codec");
	sl_avro_put_str(&f, "zstandard");
	sl_avro_put_str(&f, "avro.schema");
	sl_avro_put_str(&f, "\"string\"");
	sl_avro_put_long(&f, 0);
	sl_buf_append(&f, "0123456789abcdef", 16);
	sl_avro_put_long(&f, n);
	sl_avro_put_long(&f, (int64_t)z.len);
	sl_buf_append(&f, z.data, z.len);
	sl_buf_append(&f, "0123456789abcdef", 16);
	assert_false(sl_buf_failed(&f));
	ZSTD_freeCCtx(cc);
	sl_buf_free(&z);
	*len = f.len;
	return (unsigned char *)sl_buf_detach(&f);
}

/* Where an address-space limit can be set (not under ASan or TSan, which
 * reserve terabytes of shadow memory). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NO_RLIMIT_AS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NO_RLIMIT_AS 1
#endif
#endif
#ifndef NO_RLIMIT_AS
#define NO_RLIMIT_AS 0
#endif

/* A block that declares 512 MiB in a file that ends 10 bytes later (made
 * by tests/fuzz/fuzz_ocf, which it slowed down): the reader takes memory as
 * the data comes in, so under an address-space limit far below the size it
 * finds the file truncated, where it used to ask for the whole block first
 * and run out of memory. */
static void test_reader_short_block(void **state)
{
	static const unsigned char block[] = {
		0x02,                           /* 1 record */
		0x80, 0x80, 0x80, 0x80, 0x04,   /* 2^29 bytes (zigzag 2^30) */
		1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
	};
	char path[512], err[512];
	unsigned char *d;
	size_t len, first;
	int status;
	pid_t pid;

	(void)state;
	snprintf(path, sizeof path, "%s/short-block.avro", g_dir);
	d = small_blocks(path, SL_CODEC_NULL, 1, &len, &first);
	memcpy(d + first, block, sizeof block);
	assert_int_equal(sl_write_file_atomic(path, d, first + sizeof block, err, sizeof err), 0);
	free(d);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit lim;
		unsigned long pages = 0;
		FILE *statm = fopen("/proc/self/statm", "r");
		if (!statm || fscanf(statm, "%lu", &pages) != 1)
			_exit(3);
		fclose(statm);
		lim.rlim_cur = lim.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)256 << 20);
		/* under a sanitizer (NO_RLIMIT_AS) the reader runs without the
		 * limit: it must still name the block, not run out of memory */
		if (!NO_RLIMIT_AS && setrlimit(RLIMIT_AS, &lim) != 0)
			_exit(3);
		read_all(path, err, sizeof err);
		_exit(strstr(err, "\": block 1 is truncated or damaged") ? 0 : strstr(err, "out of memory") ? 1 : 2);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* sluice's reader takes what other writers make of zstandard: frames
 * without their content size, several frames in one block, a block far
 * larger than its first guess (64 KiB). */
/* A header map whose block count is the most negative long (found by
 * tests/fuzz/fuzz_ocf): negating it overflowed.  It is a damaged file. */
static void test_reader_count_min(void **state)
{
	static const unsigned char file[] = {
		'O', 'b', 'j', 1,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,  /* count: -2^63 (zigzag) */
		0, 0,  /* size 0, then the map's end */
		1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
	};
	struct sl_ocf_reader *r = NULL;
	char path[512], err[512];

	(void)state;
	snprintf(path, sizeof path, "%s/count_min.avro", g_dir);
	assert_int_equal(sl_write_file_atomic(path, file, sizeof file, err, sizeof err), 0);
	assert_int_equal(sl_ocf_reader_open(&r, path, err, sizeof err), -1);
	assert_null(r);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "\": not an Avro object container file, or its header is damaged"));
}

static void test_reader_foreign_zstd(void **state)
{
	const int n = 10000;
	struct sl_buf recs;
	size_t *lens = calloc((size_t)n, sizeof *lens), len;
	unsigned char *d;
	char path[512], err[512];

	(void)state;
	sl_buf_init(&recs, 0);
	snprintf(path, sizeof path, "%s/foreign-zstd.avro", g_dir);
	d = foreign_zstd(n, &len, &recs, lens);
	assert_true(recs.len > 2000000);
	assert_int_equal(sl_write_file_atomic(path, d, len, err, sizeof err), 0);
	read_back(path, n, &recs, lens);
	free(d);
	free(lens);
	sl_buf_free(&recs);
}

/* An output that fails from its fail_at-th call on, and counts its calls. */
struct failing_out {
	int calls, fail_at;
	struct sl_buf *got;
};

static int failing_write(void *arg, const struct iovec *iov, int iovcnt, char *err, size_t errlen)
{
	struct failing_out *f = arg;

	if (++f->calls >= f->fail_at) {
		snprintf(err, errlen, "could not write \"spool/x.avro\": No space left on device");
		return -1;
	}
	for (int i = 0; f->got && i < iovcnt; i++)
		sl_buf_append(f->got, iov[i].iov_base, iov[i].iov_len);
	return 0;
}

/* A block that fails while it is written out (the output fails) fails its
 * writer: the error comes back, naming the file, from the writer's next
 * call or at the latest from its close, which never reports the file
 * complete; later calls keep failing.  Another file on the same codec is
 * not affected. */
static void test_threads_write_error(void **state)
{
	static const char schema[] = "{\"type\":\"record\",\"name\":\"r\",\"fields\":[{\"name\":\"s\",\"type\":\"string\"}]}";

	(void)state;
	for (int threads = 0; threads <= 2; threads++) {
		for (int fail_at = 1; fail_at <= 6; fail_at++) {
			struct failing_out bad = { 0, fail_at, NULL }, good = { 0, 1 << 30, NULL };
			struct sl_ocf_out ob = { failing_write, &bad }, og = { failing_write, &good };
			struct sl_ocf_writer *wb, *wg;
			struct sl_ocf_codec *oc;
			struct sl_buf one, gb, recs;
			size_t lens[200];
			char err[512], path[512];
			int failures = 0, first = -1;

			oc = codec_with(SL_CODEC_DEFLATE, 1, threads);
			sl_buf_init(&one, 0);
			sl_buf_init(&gb, 0);
			sl_buf_init(&recs, 0);
			good.got = &gb;
			assert_int_equal(sl_ocf_open_out(&wb, &ob, "lake/t/bad.avro", schema, sizeof schema - 1, oc,
							 256, err, sizeof err), 0);
			assert_int_equal(sl_ocf_open_out(&wg, &og, "lake/t/good.avro", schema, sizeof schema - 1, oc,
							 256, err, sizeof err), 0);
			for (int i = 0; i < 200; i++) {
				size_t len = shared_rec(&one, 0, i);
				err[0] = '\0';
				if (sl_ocf_append(wb, one.data, len, err, sizeof err) != 0) {
					/* the output's own message, which names the file */
					assert_string_equal(err, "could not write \"spool/x.avro\": No space left on device");
					if (failures++ == 0)
						first = i;
				}
				lens[i] = len;
				sl_buf_append(&recs, one.data, len);
				assert_int_equal(sl_ocf_append(wg, one.data, len, err, sizeof err), 0);
			}
			/* with threads, from the first failure on every call fails
			 * (inline, each block that fills fails) */
			assert_true(failures > 0 && first < 100);
			if (threads > 0)
				assert_int_equal(failures, 200 - first);
			err[0] = '\0';
			assert_int_equal(sl_ocf_close(wb, true, err, sizeof err), -1);
			assert_non_null(strstr(err, "spool/x.avro"));
			assert_int_equal(sl_ocf_close(wg, true, err, sizeof err), 0);
			snprintf(path, sizeof path, "%s/good-%d-%d.avro", g_dir, threads, fail_at);
			if (sl_write_file_atomic(path, gb.data, gb.len, err, sizeof err) != 0)
				fail_msg("write: %s", err);
			read_back(path, 200, &recs, lens);
			sl_buf_free(&one);
			sl_buf_free(&gb);
			sl_buf_free(&recs);
			sl_ocf_codec_free(oc);
		}
	}
}

/* An output that records how many bytes it took, and is slow. */
static int slow_write(void *arg, const struct iovec *iov, int iovcnt, char *err, size_t errlen)
{
	struct timespec ts = { 0, 200 * 1000 };

	(void)err;
	(void)errlen;
	nanosleep(&ts, NULL);
	for (int i = 0; i < iovcnt; i++)
		sl_buf_append(arg, iov[i].iov_base, iov[i].iov_len);
	return 0;
}

/* sl_ocf_close returns only once every block in flight is written: at that
 * moment the output holds the whole file (records and all), which is what
 * the file tree then makes durable. */
static void test_threads_close_waits(void **state)
{
	static const char schema[] = "{\"type\":\"record\",\"name\":\"r\",\"fields\":[{\"name\":\"s\",\"type\":\"string\"}]}";

	(void)state;
	for (int threads = 1; threads <= 4; threads++) {
		struct sl_buf got, one, recs;
		struct sl_ocf_out o = { slow_write, &got };
		struct sl_ocf_writer *w;
		struct sl_ocf_codec *oc;
		size_t lens[500];
		uint64_t size_before;
		char err[512], path[512];

		oc = codec_with(SL_CODEC_DEFLATE, 9, threads);
		sl_buf_init(&got, 0);
		sl_buf_init(&one, 0);
		sl_buf_init(&recs, 0);
		assert_int_equal(sl_ocf_open_out(&w, &o, "x.avro", schema, sizeof schema - 1, oc, 512, err,
						 sizeof err), 0);
		for (int i = 0; i < 500; i++) {
			lens[i] = shared_rec(&one, 1, i);
			sl_buf_append(&recs, one.data, lens[i]);
			assert_int_equal(sl_ocf_append(w, one.data, lens[i], err, sizeof err), 0);
		}
		/* blocks are in flight: the output has less than the size says */
		size_before = sl_ocf_size(w);
		assert_true(got.len < size_before);
		assert_int_equal(sl_ocf_close(w, true, err, sizeof err), 0);
		snprintf(path, sizeof path, "%s/waits-%d.avro", g_dir, threads);
		remove(path);
		if (sl_write_file_atomic(path, got.data, got.len, err, sizeof err) != 0)
			fail_msg("write: %s", err);
		read_back(path, 500, &recs, lens);
		sl_buf_free(&got);
		sl_buf_free(&one);
		sl_buf_free(&recs);
		sl_ocf_codec_free(oc);
	}
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
		cmocka_unit_test(test_zstandard),
		cmocka_unit_test(test_reader_damage),
		cmocka_unit_test(test_reader_foreign_zstd),
		cmocka_unit_test(test_reader_count_min),
		cmocka_unit_test(test_reader_short_block),
		cmocka_unit_test(test_small_files),
		cmocka_unit_test(test_huge_record),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_threads_same_bytes),
		cmocka_unit_test(test_threads_output_callback),
		cmocka_unit_test(test_threads_huge_record),
		cmocka_unit_test(test_threads_shared_codec),
		cmocka_unit_test(test_threads_write_error),
		cmocka_unit_test(test_threads_close_waits),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
