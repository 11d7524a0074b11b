/*
 * common/util.h: small helpers shared by every folder: clocks, PostgreSQL LSN
 * text, durable file writes, and checked number parsing.
 */
#ifndef SLUICE_COMMON_UTIL_H
#define SLUICE_COMMON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SL_ERRLEN 512

/* Microseconds between the Unix epoch and the PostgreSQL epoch (2000-01-01). */
#define SL_PG_EPOCH_OFFSET_US INT64_C(946684800000000)

/* Wall clock, microseconds since the Unix epoch. */
int64_t sl_now_us(void);
/* Monotonic clock, milliseconds. */
int64_t sl_mono_ms(void);
/* Names the calling thread (top -H, ps -L, /proc/PID/task/TID/comm): at
 * most 15 bytes of name are kept. */
void sl_thread_name(const char *name);
/* CLOCK_MONOTONIC in microseconds. */
int64_t sl_mono_us(void);
/* The CLOCK_MONOTONIC time ms milliseconds from now, for
 * pthread_cond_timedwait on a condition variable made with that clock. */
struct timespec sl_mono_deadline(int ms);
/* Spins briefly (a few microseconds, SL_SPIN_ROUNDS pauses) until ready(arg)
 * is true, before a thread goes to sleep waiting for it: a producer that is
 * running delivers soon, and a wake-up costs both threads far more.  Returns
 * whether it became true. */
#define SL_SPIN_ROUNDS 1000
bool sl_spin_until(bool (*ready)(void *), void *arg);

/* Formats an LSN as PostgreSQL does ("16/B374D848") into out (>= 18 bytes). */
void sl_lsn_format(uint64_t lsn, char out[static 18]);
/* Parses "X/Y"; returns 0 or -1. */
int sl_lsn_parse(const char *s, uint64_t *out);

/* Checked parsing: the whole string must be a number in [min, max]. 0 or -1. */
int sl_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int sl_parse_u64(const char *s, uint64_t max, uint64_t *out);
/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar, with
 * astronomical years (1 BC is 0). */
int64_t sl_days_from_civil(int64_t y, int m, int d);
/* The value of a hex digit, or -1. */
int sl_hexval(char c);
/* A UUID's 36-character text form (8-4-4-4-12 hex digits, either case)
 * into 16 bytes; 0, or -1 when it is not one. */
int sl_uuid_parse(const char *s, size_t len, unsigned char out[static 16]);

/* Writes data to path atomically: "<path>.tmp", fsync, rename, fsync of the
 * directory.  Returns 0, or -1 with a message in err. */
int sl_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);
/* The same with the file's mode (sl_write_file_atomic: 0600). */
int sl_write_file_atomic_mode(const char *path, const void *data, size_t len, int mode, char *err,
			      size_t errlen);
/* Appends len bytes of lines to the dead-letter file at path (created with
 * mode 0600 if missing: rows may hold anything) and fsyncs it.  Returns 0,
 * or -1 with a message in err, which starts with who ("clickhouse: "). */
int sl_dead_letter_append(const char *who, const char *path, const void *lines, size_t len, char *err,
			  size_t errlen);
/* Room for element n of the array arr (*alloc elements of elem bytes each):
 * arr itself while n < *alloc, else arr grown (doubled, at least first
 * elements), *alloc updated.  The array to use from then on, or NULL when
 * out of memory (arr and *alloc unchanged). */
void *sl_grow(void *arr, size_t *alloc, size_t n, size_t elem, size_t first);

/* fsyncs the directory that holds path (or path itself if is_dir). 0 or -1 (errno set). */
int sl_fsync_dir_of(const char *path, bool is_dir);
/* mkdir -p with mode 0755; 0 or -1 (errno set). */
int sl_mkdir_p(const char *path);
/* A share of the files this process may open (RLIMIT_NOFILE's soft limit,
 * which the agent raises to its hard limit at start), for a writer that
 * keeps files open: the limit less 64 (sockets, logs, the state directory)
 * divided by div; min when the limit is 96 or less; unlimited when there is
 * no limit, it cannot be read, or it is above unlimited * div. */
uint64_t sl_fd_share(uint64_t div, uint64_t min, uint64_t unlimited);

/* FNV-1a over n bytes at p, from h (SL_FNV1A_BASIS to start): the hash
 * behind schema_key, the tree's and verify's string maps, and backfill's
 * chunk keys. */
#define SL_FNV1A_BASIS UINT64_C(0xcbf29ce484222325)
uint64_t sl_fnv1a(uint64_t h, const void *p, size_t n);
/* Reads a whole file; *out is malloc'd and NUL-terminated, freed by the caller.
 * Returns 0, 1 if the file does not exist, or -1 with a message in err. */
int sl_read_file(const char *path, char **out, size_t *len, char *err, size_t errlen);

/* Big-endian readers for wire formats. */
static inline uint16_t sl_get_u16(const unsigned char *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t sl_get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t sl_get_u64(const unsigned char *p)
{
	return (uint64_t)sl_get_u32(p) << 32 | sl_get_u32(p + 4);
}
static inline void sl_put_u32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}
static inline void sl_put_u64(unsigned char *p, uint64_t v)
{
	sl_put_u32(p, (uint32_t)(v >> 32));
	sl_put_u32(p + 4, (uint32_t)v);
}

#endif

#ifndef SLUICE_COMMON_ERRCODES
#define SLUICE_COMMON_ERRCODES
/* Failure codes that callers handle; the process exit code is their negation. */
enum sl_status {
	SL_OK = 0,
	SL_EFAIL = -1,     /* runtime failure (exit 1) */
	SL_ECONFIG = -2,   /* usage or configuration error (exit 2) */
	SL_EPREREQ = -3,   /* source prerequisites not met (exit 3) */
	SL_ELOST = -4,     /* position lost (exit 4) */
	SL_EDATA = -5,     /* a value the source sent cannot be converted: it would fail
			    * again, so it is not retried (exit 1) */
	SL_ERESTART = -6,  /* not a failure: the stream's tables changed (a table created,
			    * dropped, re-created, renamed, a partition attached); the
			    * stream restarts at once from its checkpoint to take them in */
	SL_EAGAIN = -7,    /* not a failure: nothing was done, try again in a moment */
	SL_EVERIFY = -8,   /* `sluice verify` found problems, each printed (exit 1) */
	SL_ESTALE = -9,    /* not a failure: the source's table no longer has the columns (or
			    * the name) of the stream's view of it, a DDL after the stream's
			    * position; nothing was done */
};

/* The process exit code for a status, from one table: 0 success, 1 runtime
 * failure (SL_EFAIL, SL_EDATA, SL_EVERIFY, and SL_ERESTART, SL_EAGAIN or
 * SL_ESTALE when one ever ends a command), 2 configuration, 3 prerequisites, 4 position
 * lost.  Any status not in the enum maps to 1. */
int sl_status_exit_code(int status);
#endif

#ifndef SLUICE_COMMON_HOLD
#define SLUICE_COMMON_HOLD
/* What the source server keeps for a stream's position (its position
 * holder: a PostgreSQL slot, the binlog file a MySQL position is in), in the
 * one vocabulary that agent/ and ops/ know.  Each source maps its own facts
 * to it (sources/source.h, struct sl_source_status). */
enum sl_hold {
	SL_HOLD_UNKNOWN = 0,  /* the source cannot tell */
	SL_HOLD_KEPT,         /* the server keeps the log the position needs */
	SL_HOLD_AT_RISK,      /* the server will soon remove log the position still needs */
	SL_HOLD_LOST,         /* the server removed log the position needed */
};
/* "unknown", "kept", "at_risk", "lost": the words of `sluice status --json`. */
const char *sl_hold_name(enum sl_hold h);
#endif
