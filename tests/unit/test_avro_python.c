/*
 * tests/unit/test_avro_python.c: writes avro_dir output with each codec and
 * has Debian's reference Python Avro reader (/usr/bin/python3 with
 * python3-avro, python3-snappy and python3-zstandard) decode it: tests/unit/avro_pycheck.py
 * checks every decoded value against values written down by hand there.
 * It prints TAP itself (not cmocka) so that a missing python3-avro is
 * reported as a SKIP, with the reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sinks/avro_dir/avro_dir.h"
#include "sinks/sink.h"
#include "tests/unit/avro_testlib.h"

#ifndef PYTHON
#define PYTHON "/usr/bin/python3"
#endif

static int run(const char *const argv[], bool quiet)
{
	pid_t pid;
	int status;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (quiet) {
			FILE *f = freopen("/dev/null", "w", stdout);
			if (!f || !freopen("/dev/null", "w", stderr))
				_exit(127);
		}
		execv(argv[0], (char *const *)(uintptr_t)argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Opens an avro_dir sink on dir for stream (append mode, 1 MB files). */
static int open_lake(void **ctx, const char *dir, const char *stream, enum sl_codec codec, int level, int threads,
		     int file_seconds, char *err, size_t errlen)
{
	struct sl_avro_dir_conf dc;
	struct sl_sink_stream st = { .name = stream, .mode = SL_WRITE_APPEND, .destination = "lake" };

	memset(&dc, 0, sizeof dc);
	dc.path = (char *)dir;
	dc.codec = codec;
	dc.compression_level = level;
	dc.compression_threads = threads;
	dc.max_file_bytes = 1 << 20;
	dc.max_file_seconds = file_seconds;
	return sl_sink_lookup("avro_dir")->open(ctx, &dc, &st, err, errlen);
}

/* The rows avro_pycheck.py expects, one table with every type. */
static int write_stream(const char *dir, const char *stream, enum sl_codec codec, int threads, char *err,
			size_t errlen)
{
	const struct tl_col cols[] = {
		{ "id", T_INT4, -1, "integer", true },
		{ "amount", T_NUMERIC, numeric_typmod(10, 2), "numeric(10,2)", false },
		{ "big", T_NUMERIC, numeric_typmod(38, 10), "numeric(38,10)", false },
		{ "ts", T_TIMESTAMPTZ, -1, "timestamp with time zone", false },
		{ "lts", T_TIMESTAMP, -1, "timestamp without time zone", false },
		{ "d", T_DATE, -1, "date", false },
		{ "t", T_TIME, -1, "time without time zone", false },
		{ "b", T_BYTEA, -1, "bytea", false },
		{ "f4", T_FLOAT4, -1, "real", false },
		{ "f8", T_FLOAT8, -1, "double precision", false },
		{ "u", T_UUID, -1, "uuid", false },
		{ "j", T_JSONB, -1, "jsonb", false },
		{ "name", T_TEXT, -1, "text", false },
		{ "flag", T_BOOL, -1, "boolean", false },
		{ "i8", T_INT8, -1, "bigint", false },
		{ "Odd \"Name\"", T_TEXT, -1, "text", false },
	};
	struct sl_table *t = tl_table("public", "py_t", cols, 16);
	const struct sl_sink_ops *ops = sl_sink_lookup("avro_dir");
	static const unsigned char uuid[16] = { 0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8,
						0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11 };
	struct sl_value v[16];
	struct sl_change c;
	void *ctx;
	int rc = -1;

	if (open_lake(&ctx, dir, stream, codec, 6, threads, 60, err, errlen) != 0)
		goto out;
	v[0] = tl_int(1);
	v[1] = tl_dec(true, "50500", 2);                                    /* -505.00 */
	v[2] = tl_dec(false, "123456789012345678901234567890123456", 10);  /* 12345678901234567890123456.7890123456 */
	v[3] = tl_ts(INT64_C(1704164645123456));                           /* 2024-01-02 03:04:05.123456+00 */
	v[4] = tl_ts(INT64_C(1704164645500000));                           /* 2024-01-02 03:04:05.5 */
	v[5] = tl_date(19753);                                             /* 2024-01-31 */
	v[6] = tl_time(INT64_C(49500500000));                              /* 13:45:00.5 */
	v[7] = tl_bytes("\x0a\x0b\xff", 3);
	v[8] = tl_float(1.5f);
	v[9] = tl_double(-0.1);
	v[10] = tl_uuid(uuid);
	v[11] = tl_json("{\"k\": [1, 2]}");
	v[12] = tl_str("h\xc3\xa9llo");
	v[13] = tl_bool(true);
	v[14] = tl_int(INT64_C(-9000000000));
	v[15] = tl_str("odd");
	tl_change(&c, t, SL_OP_INSERT, v, UINT64_C(0x16B374D8), 1, INT64_C(1706708700000000));
	c.tx_id = 777;
	if (ops->write(ctx, &c, err, errlen) != 0)
		goto close;
	/* second row: +05:30 offset, infinity clamps, nulls, unchanged TOAST */
	for (int i = 0; i < 16; i++)
		v[i] = tl_null();
	v[0] = tl_int(2);
	v[1] = tl_dec(false, "5", 1);                 /* 0.5: padded to the column's scale, 0.50 */
	v[3] = tl_ts(INT64_C(1706688900000000));      /* 2024-01-31 13:45:00+05:30 */
	v[4] = tl_ts(INT64_C(253402300799999999));    /* infinity, clamped */
	v[5] = tl_date(-719162);                      /* -infinity, clamped */
	v[7] = tl_bytes("", 0);
	v[12] = tl_unchanged();
	tl_change(&c, t, SL_OP_UPDATE_INSERT, v, UINT64_C(0x16B374D8), 2, INT64_C(1706708700000000));
	c.tx_id = 777;
	if (ops->write(ctx, &c, err, errlen) != 0)
		goto close;
	/* third: a delete with only the key */
	for (int i = 1; i < 16; i++)
		v[i] = tl_null();
	v[0] = tl_int(3);
	tl_change(&c, t, SL_OP_DELETE, v, UINT64_C(0x16B374D8), 3, INT64_C(1706708700000000));
	c.tx_id = 777;
	if (ops->write(ctx, &c, err, errlen) != 0)
		goto close;
	{
		struct sl_position d;
		if (ops->flush(ctx, &d, err, errlen) < 0)
			goto close;
	}
	rc = 0;
close:
	ops->close(ctx);
out:
	sl_table_free(t);
	return rc;
}

/* BULK_ROWS rows of public.bulk_t (id, note) in one transaction, through
 * many blocks and files (1 MB files), for avro_pycheck.py's check_bulk: id i
 * has note "note <i> " repeated i % 7 times. */
#define BULK_ROWS 30000
static int write_bulk(const char *dir, const char *stream, enum sl_codec codec, int threads, char *err,
		      size_t errlen)
{
	const struct tl_col cols[] = {
		{ "id", T_INT8, -1, "bigint", true },
		{ "note", T_TEXT, -1, "text", false },
	};
	struct sl_table *t = tl_table("public", "bulk_t", cols, 2);
	const struct sl_sink_ops *ops = sl_sink_lookup("avro_dir");
	struct sl_position d;
	struct sl_value v[2];
	struct sl_change c;
	char note[200];
	void *ctx;
	int rc = -1;

	if (open_lake(&ctx, dir, stream, codec, 1, threads, 3600, err, errlen) != 0)
		goto out;
	for (int i = 1; i <= BULK_ROWS; i++) {
		size_t n = 0;
		for (int k = 0; k < i % 7; k++)
			n += (size_t)snprintf(note + n, sizeof note - n, "note %d ", i);
		note[n] = '\0';
		v[0] = tl_int(i);
		v[1] = tl_str(note);
		tl_change(&c, t, SL_OP_INSERT, v, UINT64_C(0x16B374D8), (uint32_t)i, INT64_C(1706708700000000));
		if (ops->write(ctx, &c, err, errlen) != 0)
			goto close;
	}
	if (ops->flush(ctx, &d, err, errlen) < 0)
		goto close;
	rc = 0;
close:
	ops->close(ctx);
out:
	sl_table_free(t);
	return rc;
}

int main(void)
{
	const char *srcdir = getenv("SLUICE_TOP_SRCDIR");
	const char *probe[] = { PYTHON, "-c", "import avro.datafile, avro.io", NULL };
	char script[4096], err[512];
	char *dir;
	int rc;

	if (!srcdir || !*srcdir)
		srcdir = SLUICE_SRCDIR;
	if (access(PYTHON, X_OK) != 0 || run(probe, true) != 0) {
		printf("1..0 # SKIP %s lacks the avro module (Debian package python3-avro)\n", PYTHON);
		return 0;
	}
	dir = tl_mkdtemp("pycheck");
	/* s_*_threads: the blocks compressed by compression threads */
	if (write_stream(dir, "s_null", SL_CODEC_NULL, 0, err, sizeof err) != 0 ||
	    write_stream(dir, "s_deflate", SL_CODEC_DEFLATE, 0, err, sizeof err) != 0 ||
	    write_stream(dir, "s_snappy", SL_CODEC_SNAPPY, 0, err, sizeof err) != 0 ||
	    write_stream(dir, "s_deflate_threads", SL_CODEC_DEFLATE, 2, err, sizeof err) != 0 ||
	    write_stream(dir, "s_snappy_threads", SL_CODEC_SNAPPY, 2, err, sizeof err) != 0 ||
	    write_bulk(dir, "b_deflate_threads", SL_CODEC_DEFLATE, 2, err, sizeof err) != 0 ||
	    write_bulk(dir, "b_snappy_threads", SL_CODEC_SNAPPY, 1, err, sizeof err) != 0 ||
	    write_stream(dir, "s_zstandard", SL_CODEC_ZSTANDARD, 0, err, sizeof err) != 0 ||
	    write_stream(dir, "s_zstandard_threads", SL_CODEC_ZSTANDARD, 2, err, sizeof err) != 0 ||
	    write_bulk(dir, "b_zstandard_threads", SL_CODEC_ZSTANDARD, 2, err, sizeof err) != 0) {
		printf("1..1\nnot ok 1 - writing the files failed: %s\n", err);
		tl_rm_rf(dir);
		free(dir);
		return 1;
	}
	snprintf(script, sizeof script, "%s/tests/unit/avro_pycheck.py", srcdir);
	{
		const char *argv[] = { PYTHON, script, dir, NULL };
		rc = run(argv, false);
	}
	tl_rm_rf(dir);
	free(dir);
	return rc == 0 ? 0 : 1;
}
