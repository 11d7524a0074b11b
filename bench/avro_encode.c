/*
 * bench/avro_encode.c: how much CPU the avro_dir write path costs per row,
 * and, apart from it, what converting PostgreSQL's text to typed values costs.
 *
 * It builds synthetic CDC changes of the project benchmark's shape, a table
 * with six columns (bigint key, int, text of about 20 bytes, numeric(12,2),
 * timestamptz, float8): 60% inserts, 30% update-inserts, 10% deletes carrying
 * only the key, 5000 rows per transaction.  A pool of POOL_ROWS distinct rows
 * is prepared up front, each both as pgoutput delivers it (text) and as typed
 * values built directly from the same numbers (CSN and UUID included, so none
 * of that is timed); the conversion of every pooled text row is checked to
 * give exactly the typed row.  The pool is cycled through.  Then it times,
 * over the same rows:
 *
 *   pg text->typed sl_pg_text_row alone (the source's share, not the sink's)
 *   text+encoder   sl_pg_text_row, then sl_avro_enc_record: the whole CPU
 *                  path from pgoutput text to Avro bytes
 *   encoder        sl_avro_enc_record alone on typed values, into a buffer
 *                  reset every 64 KiB
 *   ocf null       encoder + object container file, codec null
 *   ocf deflate 1  ... codec deflate, level 1 (the default)
 *   ocf deflate 6  ... codec deflate, level 6
 *   ocf snappy     ... codec snappy
 *   ocf zstd 1, 3  ... codec zstandard, level 1 and 3
 *   ocf ... N thr  the same with N compression threads: the wall time is
 *                  the writing thread's, whose CPU (cpu us/row, the whole
 *                  process's) the workers share
 *
 * The files go to a temporary folder under $TMPDIR (or /tmp), are not
 * fsynced, and are removed afterwards.  For each case it prints wall-clock
 * microseconds per row, MB/s of encoded (uncompressed) Avro data (of text
 * read, for the conversion alone), and the output size.  It prints figures
 * only and never fails on speed; it exits non-zero only if something does not
 * work.
 *
 * Last, the codecs side by side (bench_codecs): rounds runs of each of null,
 * deflate 1, snappy, zstandard 1 and 3, inline, alternating, with CPU
 * microseconds per record (the whole process: encoder, framing and
 * compression), the compression's share (beyond null's), file bytes per
 * record, and the CPU of reading the file's blocks back decompressed
 * (ocf.c's reader, as verify and compaction do), each as min / median / max.
 *
 *   bench/avro_encode [rows [rounds]]     (default 1000000 rows, 5 rounds)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/util.h"
#include "schema/schema.h"
#include "sources/source.h"
#include "sinks/avro/avro_enc.h"
#include "sinks/avro/ocf.h"
#include "sources/postgres/pg_text.h"

#define POOL_ROWS 65536
#define NCOLS 6
#define TX_ROWS 5000

struct pool {
	struct sl_table *t;
	struct sl_change *changes;   /* POOL_ROWS, with typed values */
	struct sl_position *pos;     /* POOL_ROWS: each change's transaction position */
	struct sl_value *values;     /* POOL_ROWS * NCOLS */
	struct sl_text_value *texts; /* POOL_ROWS * NCOLS: the same rows as text */
	struct sl_buf text;          /* every value's text, back to back */
	size_t *offs;                /* POOL_ROWS * NCOLS offsets into text */
	struct sl_buf digits;        /* the decimal digits of the typed values */
	size_t *doffs;               /* POOL_ROWS offsets into digits */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* xorshift64*: a fixed sequence, so that every run encodes the same rows. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(2685821657736338717);
}

/* The shortest text that reads back as d, as PostgreSQL's float8 output
 * (extra_float_digits 1, the default since 12) writes it. */
static void shortest_double(char *out, size_t outlen, double d)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(out, outlen, "%.*g", prec, d);
		if (strtod(out, NULL) == d)
			return;
	}
}

/* Appends one value's text to the pool and records its offset. */
static void add_text(struct pool *p, size_t slot, const char *s)
{
	p->offs[slot] = p->text.len;
	sl_buf_append(&p->text, s, strlen(s) + 1);
}

static int make_pool(struct pool *p)
{
	static const char *const words[] = { "alder", "birch", "cedar", "douglas", "elm", "fir",
					     "ginkgo", "hazel", "iris", "juniper", "kiwi", "linden" };
	struct sl_table *t = sl_table_new("public", "bench_t");
	const struct sl_source_ops *pg = sl_source_lookup("postgres");
	uint64_t seed = UINT64_C(0x9E3779B97F4A7C15), lsn = UINT64_C(0x16B374D8);
	int64_t ts0 = INT64_C(1706708700000000);  /* 2024-01-31 13:45:00 UTC */
	struct sl_value *vals;
	struct sl_value conv[NCOLS];
	struct sl_buf scratch;
	char s[128], err[SL_ERRLEN];
	int rc = -1;

	if (!t || sl_table_add_column(t, "id", SL_T_INT64, 0, 0, SL_PG_INT8, -1, "bigint", true) < 0 ||
	    sl_table_add_column(t, "qty", SL_T_INT32, 0, 0, SL_PG_INT4, -1, "integer", false) < 0 ||
	    sl_table_add_column(t, "name", SL_T_STRING, 0, 0, SL_PG_TEXT, -1, "text", false) < 0 ||
	    sl_table_add_column(t, "amount", SL_T_DECIMAL, 12, 2, SL_PG_NUMERIC, ((12 << 16) | 2) + 4,
				"numeric(12,2)", false) < 0 ||
	    sl_table_add_column(t, "updated_at", SL_T_TIMESTAMPTZ, 0, 0, SL_PG_TIMESTAMPTZ, -1,
				"timestamp with time zone", false) < 0 ||
	    sl_table_add_column(t, "score", SL_T_DOUBLE, 0, 0, SL_PG_FLOAT8, -1, "double precision", false) < 0 ||
	    sl_table_finish(t) < 0)
		return -1;
	t->src = pg->desc;   /* records carry PostgreSQL's position fields (lsn) */
	p->t = t;
	p->changes = calloc(POOL_ROWS, sizeof *p->changes);
	p->pos = calloc(POOL_ROWS, sizeof *p->pos);
	p->values = calloc((size_t)POOL_ROWS * NCOLS, sizeof *p->values);
	p->texts = calloc((size_t)POOL_ROWS * NCOLS, sizeof *p->texts);
	p->offs = calloc((size_t)POOL_ROWS * NCOLS, sizeof *p->offs);
	p->doffs = calloc(POOL_ROWS, sizeof *p->doffs);
	sl_buf_init(&p->text, 0);
	sl_buf_init(&p->digits, 0);
	if (!p->changes || !p->values || !p->texts || !p->offs || !p->doffs)
		return -1;

	for (size_t i = 0; i < POOL_ROWS; i++) {
		size_t v = i * NCOLS;
		int64_t id = 1000000 + (int64_t)i, us = ts0 + (int64_t)i * 1237;
		time_t secs = (time_t)(us / 1000000);
		struct tm tm;
		int frac = (int)(us % 1000000), n, qty;
		bool neg;
		unsigned long long units;
		unsigned cents;
		double score;

		vals = &p->values[v];
		snprintf(s, sizeof s, "%lld", (long long)id);
		add_text(p, v + 0, s);
		vals[0] = (struct sl_value){ .kind = SL_V_INT, .i = id };
		qty = (int)(rnd(&seed) % 1000);
		snprintf(s, sizeof s, "%d", qty);
		add_text(p, v + 1, s);
		vals[1] = (struct sl_value){ .kind = SL_V_INT, .i = qty };
		snprintf(s, sizeof s, "%s %s %06u", words[rnd(&seed) % 12], words[rnd(&seed) % 12],
			 (unsigned)(rnd(&seed) % 1000000));
		add_text(p, v + 2, s);
		vals[2] = (struct sl_value){ .kind = SL_V_STRING, .len = (uint32_t)strlen(s) };  /* p below */
		neg = rnd(&seed) % 10 == 0;
		units = (unsigned long long)(rnd(&seed) % 10000000);
		cents = (unsigned)(rnd(&seed) % 100);
		snprintf(s, sizeof s, "%s%llu.%02u", neg ? "-" : "", units, cents);
		add_text(p, v + 3, s);
		/* the unscaled value's digits, without leading zeros */
		n = snprintf(s, sizeof s, "%llu", units * 100 + cents);
		p->doffs[i] = p->digits.len;
		sl_buf_append(&p->digits, s, (size_t)n);
		vals[3] = (struct sl_value){ .kind = SL_V_DECIMAL, .neg = neg && units * 100 + cents != 0,
					     .scale = 2, .len = (uint32_t)n };  /* p below */
		gmtime_r(&secs, &tm);
		n = snprintf(s, sizeof s, "%04d-%02d-%02d %02d:%02d:%02d.%06d", tm.tm_year + 1900,
			     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
		while (s[n - 1] == '0')  /* PostgreSQL drops trailing zeros of the fraction */
			n--;
		if (s[n - 1] == '.')
			n--;
		snprintf(s + n, sizeof s - (size_t)n, "+00");
		add_text(p, v + 4, s);
		vals[4] = (struct sl_value){ .kind = SL_V_TIMESTAMP, .i = us };
		score = (double)(rnd(&seed) >> 11) / 9007199254740992.0 * 1000.0;
		shortest_double(s, sizeof s, score);
		add_text(p, v + 5, s);
		vals[5] = (struct sl_value){ .kind = SL_V_DOUBLE, .d = score };
	}
	if (sl_buf_failed(&p->text) || sl_buf_failed(&p->digits))
		return -1;

	sl_buf_init(&scratch, 0);
	for (size_t i = 0; i < POOL_ROWS; i++) {
		struct sl_change *c = &p->changes[i];
		struct sl_text_value *tv = &p->texts[i * NCOLS];
		unsigned kind = (unsigned)(i % 10);

		vals = &p->values[i * NCOLS];
		for (int k = 0; k < NCOLS; k++) {
			char *txt = p->text.data + p->offs[i * NCOLS + (size_t)k];
			tv[k] = (struct sl_text_value){ txt, (uint32_t)strlen(txt), SL_TV_TEXT };
		}
		vals[2].p = tv[2].p;
		vals[3].p = p->digits.data + p->doffs[i];
		c->table = t;
		c->values = vals;
		c->read_method = "postgresql-cdc-wal";
		if (kind < 6) {
			c->op = SL_OP_INSERT;
		} else if (kind < 9) {
			c->op = SL_OP_UPDATE_INSERT;
		} else {
			c->op = SL_OP_DELETE;  /* REPLICA IDENTITY DEFAULT: the key only */
			for (int k = 1; k < NCOLS; k++) {
				vals[k] = (struct sl_value){ .kind = SL_V_NULL };
				tv[k] = (struct sl_text_value){ NULL, 0, SL_TV_NULL };
			}
		}
		/* The typed row must be exactly what the source makes of the text. */
		if (sl_pg_text_row(t, tv, conv, &scratch, NULL, err, sizeof err) < 0) {
			fprintf(stderr, "avro_encode: pool row %zu: %s\n", i, err);
			goto out;
		}
		for (int k = 0; k < NCOLS; k++) {
			if (!sl_value_equal(&conv[k], &vals[k])) {
				fprintf(stderr, "avro_encode: pool row %zu, column %d: the text converts to another value\n",
					i, k);
				goto out;
			}
		}
		if (i % TX_ROWS == 0)
			lsn += 0x1000 + rnd(&seed) % 0x10000;
		p->pos[i].w[0] = lsn;
		c->pos = &p->pos[i];
		c->tx_id = 4242 + i / TX_ROWS;
		c->source_ts_us = ts0 + (int64_t)(i / TX_ROWS) * 1000;
		c->read_ts_us = ts0 + (int64_t)i * 3;
		sl_change_set_csn(c, lsn, (uint32_t)(i % TX_ROWS) + 1);
		sl_change_set_uuid(c, "bench", NULL, 0);
	}
	rc = 0;
out:
	sl_buf_free(&scratch);
	return rc;
}

static void free_pool(struct pool *p)
{
	free(p->changes);
	free(p->pos);
	free(p->values);
	free(p->texts);
	free(p->offs);
	free(p->doffs);
	sl_buf_free(&p->text);
	sl_buf_free(&p->digits);
	sl_table_free(p->t);
}

static void report(const char *name, long rows, double secs, uint64_t in_bytes, uint64_t out_bytes,
		   const char *what)
{
	printf("%-14s %7.3f us/row %8.1f MB/s   %6.1f MB %s", name, secs / (double)rows * 1e6,
	       (double)in_bytes / secs / 1e6, (double)in_bytes / 1e6, what);
	if (out_bytes)
		printf(" -> %6.1f MB file (%.2fx)", (double)out_bytes / 1e6,
		       (double)in_bytes / (double)out_bytes);
	printf("\n");
}

/* The source's share: PostgreSQL text to typed values, row by row, into one
 * reused array and scratch buffer as the pgoutput decoder does.  With e, each
 * converted row is then encoded (the whole CPU path, text to Avro). */
static int bench_convert(const struct pool *p, struct sl_avro_enc *e, long rows)
{
	struct sl_value vals[NCOLS];
	struct sl_pg_text_stats st;
	struct sl_buf scratch, b;
	struct sl_change c;
	uint64_t text_bytes = 0, total = 0;
	char err[SL_ERRLEN];
	double t0;
	int rc = -1;

	memset(&st, 0, sizeof st);
	sl_buf_init(&scratch, 0);
	sl_buf_init(&b, 0);
	for (size_t i = 0; i < POOL_ROWS * NCOLS; i++)
		text_bytes += p->texts[i].len;
	t0 = now_s();
	for (long i = 0; i < rows; i++) {
		size_t r = (size_t)(i % POOL_ROWS);
		if (sl_pg_text_row(p->t, &p->texts[r * NCOLS], vals, &scratch, &st, err, sizeof err) < 0)
			goto out;
		if (!e)
			continue;
		c = p->changes[r];
		c.values = vals;
		if (sl_avro_enc_record(e, &b, &c, err, sizeof err) < 0)
			goto out;
		if (b.len >= SL_OCF_BLOCK_TARGET) {
			total += b.len;
			sl_buf_reset(&b);
		}
	}
	total += b.len;
	if (e)
		report("text+encoder", rows, now_s() - t0, total, 0, "encoded");
	else
		report("pg text->typed", rows, now_s() - t0,
		       (uint64_t)((double)text_bytes * (double)rows / POOL_ROWS), 0, "of text");
	rc = 0;
out:
	if (rc < 0)
		fprintf(stderr, "avro_encode: %s\n", err);
	sl_buf_free(&scratch);
	sl_buf_free(&b);
	return rc;
}

/* The encoder alone; the buffer is reset once it holds a block's worth.
 * quiet: a warm-up run, nothing printed. */
static int bench_encoder(const struct pool *p, struct sl_avro_enc *e, long rows, bool quiet)
{
	struct sl_buf b;
	uint64_t total = 0;
	char err[SL_ERRLEN];
	double t0;

	sl_buf_init(&b, 0);
	t0 = now_s();
	for (long i = 0; i < rows; i++) {
		if (sl_avro_enc_record(e, &b, &p->changes[i % POOL_ROWS], err, sizeof err) < 0) {
			fprintf(stderr, "avro_encode: %s\n", err);
			sl_buf_free(&b);
			return -1;
		}
		if (b.len >= SL_OCF_BLOCK_TARGET) {
			total += b.len;
			sl_buf_reset(&b);
		}
	}
	total += b.len;
	if (!quiet)
		report("encoder", rows, now_s() - t0, total, 0, "encoded");
	sl_buf_free(&b);
	return 0;
}

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What one container file run cost. */
struct ocf_run {
	double wall, cpu;        /* seconds: wall clock, the process's CPU */
	double read_cpu;         /* seconds: reading the blocks back (ocf.c's reader) */
	uint64_t encoded, file;  /* bytes: encoded records, the file */
};

/* Reads the file at path back block by block, decompressed (what verify and
 * compaction do before avro-c decodes the records): the CPU it took in *cpu. */
static int read_blocks(const char *path, double *cpu, char *err, size_t errlen)
{
	struct sl_ocf_reader *rd;
	const void *data;
	size_t len;
	uint64_t count;
	double c0 = cpu_s();
	int rc;

	if (sl_ocf_reader_open(&rd, path, err, errlen) < 0)
		return -1;
	while ((rc = sl_ocf_reader_block(rd, &data, &len, &count, err, errlen)) > 0)
		;
	sl_ocf_reader_close(rd);
	*cpu = cpu_s() - c0;
	return rc;
}

/* Encoder plus container file, written to dir and removed afterwards; with
 * threads compression threads; then read back (read_blocks).  Returns 0 and
 * the costs in *r, or -1. */
static int run_ocf(const struct pool *p, struct sl_avro_enc *e, long rows, const char *dir, enum sl_codec codec,
		   int level, int threads, struct ocf_run *r)
{
	struct sl_ocf_writer *w;
	struct sl_ocf_codec *oc = NULL;
	struct sl_buf path;
	struct stat sb;
	const char *schema;
	size_t schema_len;
	char err[SL_ERRLEN];
	double t0, c0;
	int rc = -1;

	memset(r, 0, sizeof *r);
	sl_buf_init(&path, 0);
	sl_buf_printf(&path, "%s/bench-%d-%d-%d.avro", dir, (int)codec, level, threads);
	if (sl_buf_failed(&path)) {
		fprintf(stderr, "avro_encode: out of memory\n");
		return -1;
	}
	schema = sl_avro_enc_schema(e, &schema_len);
	t0 = now_s();
	c0 = cpu_s();
	if (sl_ocf_codec_new(&oc, codec, level, threads, err, sizeof err) < 0 ||
	    sl_ocf_open(&w, path.data, schema, schema_len, oc, 0, err, sizeof err) < 0)
		goto out;
	for (long i = 0; i < rows; i++) {
		struct sl_buf *b = sl_ocf_record_buf(w);
		size_t before = b->len;
		if (sl_avro_enc_record(e, b, &p->changes[i % POOL_ROWS], err, sizeof err) < 0) {
			sl_ocf_abort(w);
			goto out;
		}
		r->encoded += b->len - before;
		if (sl_ocf_record_done(w, err, sizeof err) < 0) {
			sl_ocf_abort(w);
			goto out;
		}
	}
	if (sl_ocf_close(w, false, err, sizeof err) < 0)
		goto out;
	r->wall = now_s() - t0;
	r->cpu = cpu_s() - c0;
	if (stat(path.data, &sb) < 0) {
		snprintf(err, sizeof err, "could not stat \"%s\": %s", path.data, strerror(errno));
		goto out;
	}
	r->file = (uint64_t)sb.st_size;
	if (read_blocks(path.data, &r->read_cpu, err, sizeof err) < 0)
		goto out;
	rc = 0;
out:
	if (rc < 0)
		fprintf(stderr, "avro_encode: %s\n", err);
	sl_ocf_codec_free(oc);
	unlink(path.data);
	sl_buf_free(&path);
	return rc;
}

static int bench_ocf(const struct pool *p, struct sl_avro_enc *e, long rows, const char *dir,
		     const char *name, enum sl_codec codec, int level, int threads)
{
	struct ocf_run r;

	if (run_ocf(p, e, rows, dir, codec, level, threads, &r) < 0)
		return -1;
	report(name, rows, r.wall, r.encoded, r.file, "encoded");
	printf("%-14s %7.3f cpu us/row\n", "", r.cpu / (double)rows * 1e6);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The codecs side by side: rounds runs of each, inline (threads 0, so the
 * process's CPU is the writing thread's), in an order that rotates every
 * round so that no codec always runs first or after the same one.  Prints
 * CPU microseconds and file bytes per record, min/median/max over the runs;
 * "compress" is the CPU beyond codec null's median (the encoder and the
 * framing, which every codec pays). */
static int bench_codecs(const struct pool *p, struct sl_avro_enc *e, long rows, const char *dir, int rounds)
{
	static const struct { const char *name; enum sl_codec codec; int level; } cs[] = {
		{ "null", SL_CODEC_NULL, 0 },
		{ "deflate 1", SL_CODEC_DEFLATE, 1 },
		{ "snappy", SL_CODEC_SNAPPY, 0 },
		{ "zstandard 1", SL_CODEC_ZSTANDARD, 1 },
		{ "zstandard 3", SL_CODEC_ZSTANDARD, 3 },
	};
	enum { NC = sizeof cs / sizeof cs[0] };
	double *cpu = calloc((size_t)NC * (size_t)rounds, sizeof *cpu);
	double *size = calloc((size_t)NC * (size_t)rounds, sizeof *size);
	double *rd = calloc((size_t)NC * (size_t)rounds, sizeof *rd);
	double base = 0;
	int rc = -1;

	if (!cpu || !size || !rd) {
		fprintf(stderr, "avro_encode: out of memory\n");
		goto out;
	}
	for (int k = 0; k < rounds; k++) {
		for (int j = 0; j < NC; j++) {
			int c = (j + k) % NC;
			struct ocf_run r;
			if (run_ocf(p, e, rows, dir, cs[c].codec, cs[c].level, 0, &r) < 0)
				goto out;
			cpu[c * rounds + k] = r.cpu / (double)rows * 1e6;
			size[c * rounds + k] = (double)r.file / (double)rows;
			rd[c * rounds + k] = r.read_cpu / (double)rows * 1e6;
		}
	}
	printf("\ncodecs, inline, %d alternating runs of %ld rows each: min / median / max\n", rounds, rows);
	printf("%-12s %26s %12s %28s %26s\n", "codec", "cpu us/record", "compress", "bytes/record",
	       "read cpu us/record");
	for (int c = 0; c < NC; c++) {
		double *cv = cpu + c * rounds, *sv = size + c * rounds, *rv = rd + c * rounds;
		qsort(cv, (size_t)rounds, sizeof *cv, cmp_double);
		qsort(sv, (size_t)rounds, sizeof *sv, cmp_double);
		qsort(rv, (size_t)rounds, sizeof *rv, cmp_double);
		if (c == 0)
			base = cv[rounds / 2];
		printf("%-12s %8.3f / %7.3f / %7.3f %9.3f %10.2f / %7.2f / %7.2f %8.3f / %7.3f / %7.3f\n",
		       cs[c].name, cv[0], cv[rounds / 2], cv[rounds - 1], cv[rounds / 2] - base, sv[0],
		       sv[rounds / 2], sv[rounds - 1], rv[0], rv[rounds / 2], rv[rounds - 1]);
	}
	rc = 0;
out:
	free(cpu);
	free(size);
	free(rd);
	return rc;
}

int main(int argc, char **argv)
{
	struct pool p;
	struct sl_avro_enc *e = NULL;
	struct sl_buf dir;
	const char *tmp = getenv("TMPDIR");
	char err[SL_ERRLEN];
	int64_t rows64 = 1000000, rounds = 5;
	long rows;
	int rc = 1;

	if (argc > 3 || (argc >= 2 && sl_parse_i64(argv[1], 1, INT64_C(1) << 40, &rows64) < 0) ||
	    (argc == 3 && sl_parse_i64(argv[2], 1, 1000, &rounds) < 0)) {
		fprintf(stderr, "usage: %s [rows [rounds]]\n", argv[0]);
		return 2;
	}
	rows = (long)rows64;
	memset(&p, 0, sizeof p);
	sl_buf_init(&dir, 0);
	sl_buf_printf(&dir, "%s/sluice-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (sl_buf_failed(&dir) || !mkdtemp(dir.data)) {
		fprintf(stderr, "avro_encode: could not make a temporary folder: %s\n", strerror(errno));
		sl_buf_free(&dir);
		return 1;
	}
	if (make_pool(&p) < 0) {
		fprintf(stderr, "avro_encode: out of memory building the rows\n");
		goto out;
	}
	e = sl_avro_enc_new(p.t, "bench", err, sizeof err);
	if (!e) {
		fprintf(stderr, "avro_encode: %s\n", err);
		goto out;
	}
	printf("avro_encode: %ld rows of public.bench_t (bigint key, int, text, numeric(12,2), "
	       "timestamptz, float8), %d distinct, %zu KiB blocks\n",
	       rows, POOL_ROWS, SL_OCF_BLOCK_TARGET / 1024);
	/* Warm-up: touch the pool and the code once before timing. */
	if (bench_encoder(&p, e, POOL_ROWS, true) < 0)
		goto out;
	if (bench_convert(&p, NULL, rows) < 0 || bench_convert(&p, e, rows) < 0 ||
	    bench_encoder(&p, e, rows, false) < 0 ||
	    bench_ocf(&p, e, rows, dir.data, "ocf null", SL_CODEC_NULL, 0, 0) < 0 ||
	    bench_ocf(&p, e, rows, dir.data, "ocf deflate 1", SL_CODEC_DEFLATE, 1, 0) < 0 ||
	    bench_ocf(&p, e, rows, dir.data, "ocf deflate 6", SL_CODEC_DEFLATE, 6, 0) < 0 ||
	    bench_ocf(&p, e, rows, dir.data, "ocf snappy", SL_CODEC_SNAPPY, 0, 0) < 0 ||
	    bench_ocf(&p, e, rows, dir.data, "ocf defl 1 1thr", SL_CODEC_DEFLATE, 1, 1) < 0 ||
	    bench_ocf(&p, e, rows, dir.data, "ocf defl 1 2thr", SL_CODEC_DEFLATE, 1, 2) < 0 ||
	    bench_ocf(&p, e, rows, dir.data, "ocf snappy 1thr", SL_CODEC_SNAPPY, 0, 1) < 0 ||
	    bench_ocf(&p, e, rows, dir.data, "ocf zstd 1", SL_CODEC_ZSTANDARD, 1, 0) < 0 ||
	    bench_ocf(&p, e, rows, dir.data, "ocf zstd 3", SL_CODEC_ZSTANDARD, 3, 0) < 0 ||
	    bench_ocf(&p, e, rows, dir.data, "ocf zstd 1 1thr", SL_CODEC_ZSTANDARD, 1, 1) < 0 ||
	    bench_codecs(&p, e, rows, dir.data, (int)rounds) < 0)
		goto out;
	rc = 0;
out:
	sl_avro_enc_free(e);
	free_pool(&p);
	rmdir(dir.data);
	sl_buf_free(&dir);
	return rc;
}
