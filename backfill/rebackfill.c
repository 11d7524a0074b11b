/*
 * backfill/rebackfill.c: backfill while streaming, and its requests (see
 * rebackfill.h).
 *
 * The jobs run one at a time, in the order they were queued.  A chunk goes
 * through two steps: the idle hook (between transactions) opens it, writes
 * its low watermark, reads its rows and writes its high watermark; the
 * event hook applies the changes the stream reads to it and, at its high
 * watermark, pushes its rows and the job's progress.  A chunk whose rows
 * cannot be trusted (a change of unknown key, a new version of the table,
 * a high watermark seen before the low one) is read again; so is one whose
 * snapshot misses a transaction the stream already returned (SL_EAGAIN), a
 * moment later.
 *
 * A chunk that finds its table's columns renamed or dropped (SL_ESTALE: a
 * DDL after the stream's position, which the stream's view of the table
 * predates) writes a probe watermark, and waits: for the table's next
 * description, which the stream reads at the table's first change after
 * the DDL, or for the probe.  Once the stream reads the probe it is past
 * the DDL; a chunk still stale then has no description to wait for (no
 * change followed the DDL), and the stream restarts (SL_ERESTART), to
 * take the table as the catalog has it now.  Either way it never wedges.
 */
#include "backfill/rebackfill.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backfill/backfill_chunk.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

#define DEFAULT_CHUNK_ROWS 10000
#define REQUEST_POLL_MS 1000        /* how often the state directory is looked at */
#define RETRY_MS 20                 /* after SL_EAGAIN, doubled each time in a row */
#define RETRY_MAX_MS 1000           /* up to this (a chunk that waits for a long transaction) */
#define SEEN_TX 4096                /* transactions remembered for sl_chunk_check */
#define REQUEST_INFIX ".backfill-request."

struct job {
	int idx;                        /* checkpoint entry */
	const struct sl_table *t;       /* the latest version of the table */
	struct sl_position since;       /* t, a version the run started with (the catalog's), is the
					 * table as of this position: the stream's reader position (or
					 * the run's start) when the job was queued */
	bool has_since;                 /* false: t is one the stream described (the log's order) */
	char *after;                    /* the last key read (owned; NULL: none yet) */
	uint64_t rows, chunks;          /* pushed so far, with those durable before */
	bool marked;                    /* its marker is written: by this run (at the job's start, or at
					 * a low watermark, sl_pipe_job_marker), or a chunk is durable */
	uint64_t marker_csn;            /* the CSN position of the marker this run wrote (0: none) */
	int64_t t0_ms;
	uint64_t rows0;
};

struct sl_rebackfill {
	struct sl_rebackfill_config c;
	const struct sl_table **cur;    /* the latest version of each of c.tables (SCHEMA events) */
	struct sl_position tx_pos;      /* of the transaction the stream is in (BEGIN) */
	bool in_tx;
	struct job *jobs;               /* jobs[0] runs */
	int njobs;
	struct sl_bf_chunk *chunk;
	bool waiting;                   /* a chunk's high watermark is written: wait for it */
	bool finishing;                 /* the chunk read no row: wait for its low watermark, then done */
	char *last;                     /* the open chunk's last key (owned) */
	uint64_t seq;                   /* chunks opened by this run */
	char run[48];                   /* what makes this run's watermarks its own */
	int64_t retry_at_ms;
	int64_t retry_ms;               /* the wait after the next SL_EAGAIN */
	int64_t opened_ms, read_ms;     /* when the open chunk was opened, and read */
	int64_t polled_ms;
	char *probe;                    /* the probe of a stale chunk, until the stream reads it (owned) */
	bool probed;                    /* the stream read it, and no new description of the table came */
	uint64_t seen[SEEN_TX];         /* the last transactions the stream returned */
	size_t nseen, seen_at;
	struct sl_buf text;
	/* test hook SLUICE_FAULT_CHUNKS_SPOILED=1: every chunk is read again
	 * two seconds later, as one spoiled by a change of unknown key, so
	 * that a job runs with no chunk durable for as long as a test needs */
	bool fault_spoiled;
};

/* ---- requests ---- */

static int request_prefix(struct sl_buf *b, const char *stream)
{
	sl_buf_reset(b);
	sl_buf_printf(b, "%s" REQUEST_INFIX, stream);
	return sl_buf_failed(b) ? -1 : 0;
}

int sl_bf_request_write(const char *state_dir, const char *stream, const char *table, char *err, size_t errlen)
{
	struct sl_buf path, body;
	int rc = -1;

	sl_buf_init(&path, 0);
	sl_buf_init(&body, 0);
	sl_buf_printf(&path, "%s/%s" REQUEST_INFIX "%" PRId64 ".%ld", state_dir, stream, sl_now_us(), (long)getpid());
	sl_buf_printf(&body, "%s\n", table);
	if (sl_buf_failed(&path) || sl_buf_failed(&body)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = sl_write_file_atomic(path.data, body.data, body.len, err, errlen);
out:
	sl_buf_free(&path);
	sl_buf_free(&body);
	return rc;
}

void sl_bf_request_list_free(char **paths, char **tables, int n)
{
	for (int i = 0; i < n; i++) {
		free(paths[i]);
		free(tables[i]);
	}
	free(paths);
	free(tables);
}

/* The table named in request file path (its first line), or NULL. */
static char *request_read(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	char *nl;

	if (!f)
		return NULL;
	if (!fgets(line, sizeof line, f)) {
		fclose(f);
		return NULL;
	}
	fclose(f);
	if (!(nl = strchr(line, '\n')))
		return NULL;   /* not written whole: it never is, being renamed into place */
	*nl = '\0';
	return strdup(line);
}

int sl_bf_request_list(const char *state_dir, const char *stream, char ***paths, char ***tables, int *n,
		       char *err, size_t errlen)
{
	struct sl_buf prefix, path;
	DIR *d = opendir(state_dir);
	struct dirent *de;
	int rc = 0;

	*paths = *tables = NULL;
	*n = 0;
	if (!d) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "could not read state_dir \"%s\": %s", state_dir, sl_strerror(errno));
		return -1;
	}
	sl_buf_init(&prefix, 0);
	sl_buf_init(&path, 0);
	if (request_prefix(&prefix, stream) < 0)
		goto oom;
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		char *table, **np, **nt;
		if (strncmp(de->d_name, prefix.data, prefix.len) != 0 || (len > 4 && !strcmp(de->d_name + len - 4, ".tmp")))
			continue;
		sl_buf_reset(&path);
		sl_buf_printf(&path, "%s/%s", state_dir, de->d_name);
		if (sl_buf_failed(&path))
			goto oom;
		if (!(table = request_read(path.data))) {
			sl_warn("stream \"%s\": could not read the backfill request \"%s\"; it is left alone", stream,
				path.data);
			continue;
		}
		np = realloc(*paths, sizeof *np * (size_t)(*n + 1));
		if (np)
			*paths = np;
		nt = realloc(*tables, sizeof *nt * (size_t)(*n + 1));
		if (nt)
			*tables = nt;
		if (!np || !nt || !((*paths)[*n] = strdup(path.data))) {
			free(table);
			goto oom;
		}
		(*tables)[(*n)++] = table;
	}
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
	sl_bf_request_list_free(*paths, *tables, *n);
	*paths = *tables = NULL;
	*n = 0;
	rc = -1;
out:
	closedir(d);
	sl_buf_free(&prefix);
	sl_buf_free(&path);
	return rc;
}

/* ---- jobs ---- */

bool sl_rebackfill_can(const struct sl_source_ops *src, const struct sl_table *t)
{
	return src->emit_watermark && src->read_chunk && sl_table_has_key(t);
}

int sl_rebackfill_new(struct sl_rebackfill **out, const struct sl_rebackfill_config *c)
{
	struct sl_rebackfill *rb = calloc(1, sizeof *rb);

	*out = NULL;
	if (!rb || !(rb->chunk = sl_bf_chunk_new()) ||
	    !(rb->cur = calloc((size_t)(c->ntables > 0 ? c->ntables : 1), sizeof *rb->cur))) {
		if (rb)
			sl_bf_chunk_free(rb->chunk);
		free(rb);
		snprintf(c->err, c->errlen, "out of memory");
		return SL_EFAIL;
	}
	rb->c = *c;
	for (int i = 0; i < c->ntables; i++)
		rb->cur[i] = c->tables[i];
	if (!rb->c.chunk_rows)
		rb->c.chunk_rows = DEFAULT_CHUNK_ROWS;
	snprintf(rb->run, sizeof rb->run, "%ld.%" PRId64, (long)getpid(), sl_now_us());
	sl_buf_init(&rb->text, 0);
	rb->polled_ms = sl_mono_ms();
	rb->fault_spoiled = getenv("SLUICE_FAULT_CHUNKS_SPOILED") != NULL;
	*out = rb;
	return SL_OK;
}

static void job_free(struct job *j)
{
	free(j->after);
}

void sl_rebackfill_free(struct sl_rebackfill *rb)
{
	if (!rb)
		return;
	for (int i = 0; i < rb->njobs; i++)
		job_free(&rb->jobs[i]);
	free(rb->jobs);
	free(rb->cur);
	free(rb->last);
	free(rb->probe);
	sl_bf_chunk_free(rb->chunk);
	sl_buf_free(&rb->text);
	free(rb);
}

static const char *entry_name(const struct sl_rebackfill *rb, int idx)
{
	return rb->c.ck->tables[idx].name;
}

static bool queued(const struct sl_rebackfill *rb, int idx)
{
	for (int i = 0; i < rb->njobs; i++)
		if (rb->jobs[i].idx == idx)
			return true;
	return false;
}

/* Whether t is a version the run started with (the catalog's, read at the
 * start), not one the stream described since. */
static bool start_version(const struct sl_rebackfill *rb, const struct sl_table *t)
{
	for (int i = 0; i < rb->c.ntables; i++)
		if (rb->c.tables[i] == t)
			return true;
	return false;
}

int sl_rebackfill_add(struct sl_rebackfill *rb, int idx, const struct sl_table *t, bool resume, const char *after,
		      uint64_t rows, uint64_t chunks)
{
	struct job *nj = realloc(rb->jobs, sizeof *nj * (size_t)(rb->njobs + 1));
	struct sl_position pos;
	int rc;

	if (!nj) {
		snprintf(rb->c.err, rb->c.errlen, "out of memory");
		return SL_EFAIL;
	}
	rb->jobs = nj;
	nj = &rb->jobs[rb->njobs];
	memset(nj, 0, sizeof *nj);
	nj->idx = idx;
	nj->t = t;
	nj->has_since = start_version(rb, t) && sl_pipe_marker_position(rb->c.pipe, &nj->since);
	nj->rows = nj->rows0 = resume ? rows : 0;
	nj->chunks = resume ? chunks : 0;
	nj->marked = resume && after;
	if (resume && after && !(nj->after = strdup(after))) {
		snprintf(rb->c.err, rb->c.errlen, "out of memory");
		return SL_EFAIL;
	}
	rb->njobs++;
	if (resume) {
		sl_info("stream \"%s\": resuming the backfill of %s while streaming after its last durable chunk "
			"(%" PRIu64 " rows, %" PRIu64 " chunks durable)", rb->c.stream, entry_name(rb, idx), rows, chunks);
		return SL_OK;
	}
	/* Running, durably, behind its marker at once, just after the
	 * reader's position (or the source's when the run started): above
	 * everything written so far, by this run or an earlier one, and before
	 * anything of the table that follows (a destination that lost the
	 * table takes it anew from the marker).  A run that resumes the job
	 * before any chunk of it is durable writes it again at its first low
	 * watermark (mark_job). */
	if (!sl_pipe_marker_position(rb->c.pipe, &pos)) {
		snprintf(rb->c.err, rb->c.errlen, "stream \"%s\": no position to start the backfill of %s at",
			 rb->c.stream, entry_name(rb, idx));
		return SL_EFAIL;
	}
	if ((rc = sl_pipe_job_start(rb->c.pipe, idx, t, &pos, sl_now_us(), true, false)) < 0)
		return rc;
	nj = &rb->jobs[rb->njobs - 1];
	nj->marked = true;
	nj->marker_csn = sl_pipe_marker_csn(rb->c.pipe, &pos, false);
	sl_info("stream \"%s\": backfilling %s while streaming (watermark method, chunks of %" PRIu64 " rows)",
		rb->c.stream, entry_name(rb, idx), rb->c.chunk_rows);
	return SL_OK;
}

static void probe_clear(struct sl_rebackfill *rb)
{
	free(rb->probe);
	rb->probe = NULL;
	rb->probed = false;
}

static void job_done(struct sl_rebackfill *rb)
{
	probe_clear(rb);
	job_free(&rb->jobs[0]);
	memmove(&rb->jobs[0], &rb->jobs[1], sizeof *rb->jobs * (size_t)(rb->njobs - 1));
	rb->njobs--;
}

/* The stream's latest version of "schema.table", or NULL when it does not select it. */
static const struct sl_table *find_table(const struct sl_rebackfill *rb, const char *name)
{
	for (int i = 0; i < rb->c.ntables; i++) {
		const struct sl_table *t = rb->cur[i];
		size_t l = strlen(t->ns);
		if (!strncmp(name, t->ns, l) && name[l] == '.' && !strcmp(name + l + 1, t->name))
			return t;
	}
	return NULL;
}

static bool same_table(const struct sl_table *a, const struct sl_table *b)
{
	return a->relid == b->relid && !strcmp(a->ns, b->ns) && !strcmp(a->name, b->name);
}

static int find_entry(const struct sl_rebackfill *rb, const char *name)
{
	for (int i = 0; i < rb->c.ck->ntables; i++)
		if (!strcmp(rb->c.ck->tables[i].name, name))
			return i;
	return -1;
}

/* "schema.table" of t into name (initialized here; the caller frees it).
 * SL_OK, or SL_EFAIL out of memory. */
static int qualified_name(struct sl_rebackfill *rb, const struct sl_table *t, struct sl_buf *name)
{
	sl_buf_init(name, 0);
	sl_buf_printf(name, "%s.%s", t->ns, t->name);
	if (!sl_buf_failed(name))
		return SL_OK;
	snprintf(rb->c.err, rb->c.errlen, "out of memory");
	return SL_EFAIL;
}

/* Columns added with a constant default that the sink carries: the
 * checkpoint takes t's columns (sl_pipe_columns), so that the next start
 * neither finds nor logs the change again. */
static int carried(struct sl_rebackfill *rb, const struct sl_table *t)
{
	struct sl_buf name;
	int idx, rc;

	if (!t->src_columns)
		return SL_OK;
	if ((rc = qualified_name(rb, t, &name)) == SL_OK && (idx = find_entry(rb, name.data)) >= 0)
		rc = sl_pipe_columns(rb->c.pipe, idx, t->src_columns);
	sl_buf_free(&name);
	return rc;
}

/* Whether a SCHEMA event now describes j's table as it was before j's
 * version: j holds a version the run started with, and the event comes in
 * a transaction of the log below the position that version is of (a
 * replay, from a checkpoint behind the run's start, of changes older than
 * the catalog the version was read from).  Descriptions by the stream
 * come in the log's order: each is newer than the one before.  The
 * job keeps its version: its chunks read the table as it is, with every
 * column (a column added with a default since, which a chunk of the older
 * version would leave out), and the versions of the changes after that
 * position come again with them. */
static bool older_version(const struct sl_rebackfill *rb, const struct job *j)
{
	return rb->in_tx && j->has_since && rb->c.src->desc->pos_compare(&rb->tx_pos, &j->since) < 0;
}

/*
 * A SCHEMA event: the version t replaces its table's everywhere here (also
 * when the source saw no change: the first description of a table in a run
 * is new to the source, and may differ from the version the run started
 * with), and
 * when the source says the table's existing rows changed without a change
 * record (why), a request to backfill it again is written, as `sluice
 * backfill --table` would (durable before any change after it is, and
 * taken at the next idle moment, or at the next start), unless only columns
 * added with a constant default changed them (missing_only) and the sink
 * carries the value as the columns' default.
 */
static int on_schema(struct sl_rebackfill *rb, const struct sl_table *t, bool changed, const char *why,
		     bool missing_only)
{
	struct sl_buf name;
	int rc = SL_OK;

	for (int i = 0; i < rb->c.ntables; i++)
		if (same_table(rb->cur[i], t))
			rb->cur[i] = t;
	for (int i = 0; i < rb->njobs; i++) {
		if (!same_table(rb->jobs[i].t, t) || older_version(rb, &rb->jobs[i]))
			continue;
		if (i == 0 && rb->waiting && (changed || !sl_table_same_columns(rb->jobs[i].t, t))) {
			/* Its rows have the old columns: read them again. */
			sl_bf_chunk_abandon(rb->chunk);
			rb->waiting = rb->finishing = false;
		}
		if (i == 0)
			probe_clear(rb);   /* a stale chunk may be read now */
		rb->jobs[i].t = t;
		rb->jobs[i].has_since = false;   /* the next descriptions follow it in the log */
	}
	if (!why)
		return SL_OK;
	if (missing_only && rb->c.carries_missing && rb->c.carries_missing(rb->c.carries_arg, t)) {
		sl_info("stream \"%s\": table \"%s\".\"%s\": %s: the destination carries it as the column's "
			"default, so nothing is backfilled", rb->c.stream, t->ns, t->name, why);
		return carried(rb, t);
	}
	if (!rb->c.backfill) {
		sl_warn("stream \"%s\": table \"%s\".\"%s\": %s: the stream has backfill = none, so its existing "
			"rows keep what the output had", rb->c.stream, t->ns, t->name, why);
		return SL_OK;
	}
	sl_warn("stream \"%s\": table \"%s\".\"%s\": %s: it is backfilled again, behind a marker", rb->c.stream, t->ns,
		t->name, why);
	if (!rb->c.state_dir)
		return SL_OK;
	if ((rc = qualified_name(rb, t, &name)) == SL_OK &&
	    sl_bf_request_write(rb->c.state_dir, rb->c.stream, name.data, rb->c.err, rb->c.errlen) < 0)
		rc = SL_EFAIL;
	rb->polled_ms = 0;   /* take it at once */
	sl_buf_free(&name);
	return rc;
}


/* The latest version of t that a job holds (a SCHEMA event may have
 * replaced the stream's), else t. */
static const struct sl_table *latest(const struct sl_rebackfill *rb, const struct sl_table *t)
{
	for (int i = 0; i < rb->njobs; i++)
		if (rb->jobs[i].t->relid == t->relid && !strcmp(rb->jobs[i].t->name, t->name) &&
		    !strcmp(rb->jobs[i].t->ns, t->ns))
			return rb->jobs[i].t;
	return t;
}

/* Takes the requests waiting in the state directory: a job for each table
 * (unless one runs already), started durably before its file is removed.
 * SL_ERESTART when a table cannot be read while streaming (no key): the
 * next start reads it from a snapshot. */
static int take_requests(struct sl_rebackfill *rb)
{
	char **paths, **tables;
	int n, rc = SL_OK, started = 0, ready = -1;
	bool restart = false, *keep;

	if (sl_bf_request_list(rb->c.state_dir, rb->c.stream, &paths, &tables, &n, rb->c.err, rb->c.errlen) < 0) {
		sl_warn("stream \"%s\": %s", rb->c.stream, rb->c.err);
		return SL_OK;
	}
	if (!(keep = calloc((size_t)n + 1, sizeof *keep))) {   /* the requests that stay */
		sl_bf_request_list_free(paths, tables, n);
		snprintf(rb->c.err, rb->c.errlen, "out of memory");
		return SL_EFAIL;
	}
	for (int i = 0; i < n && rc == SL_OK; i++) {
		const struct sl_table *t = find_table(rb, tables[i]);
		int idx = find_entry(rb, tables[i]);
		if (!t || idx < 0) {
			sl_warn("stream \"%s\": backfill request \"%s\" names %s, which the stream does not select; "
				"it is removed", rb->c.stream, paths[i], tables[i]);
			continue;
		}
		if (!sl_rebackfill_can(rb->c.src, t)) {
			snprintf(rb->c.err, rb->c.errlen, "stream \"%s\": backfill of %s requested, which has no key to "
				 "read it in chunks while streaming: it is read from a snapshot", rb->c.stream, tables[i]);
			restart = true;
			continue;
		}
		if (rb->njobs > 0 && rb->jobs[0].idx == idx) {
			/* Its chunks so far may predate what the request is for (a
			 * DDL that gave the existing rows new values): the request
			 * stays, and backfills it again, behind a marker of its own,
			 * once this backfill is done. */
			sl_debug("stream \"%s\": %s is being backfilled: backfilled again once done", rb->c.stream,
				 tables[i]);
			keep[i] = true;
			continue;
		}
		if (queued(rb, idx)) {
			sl_info("stream \"%s\": %s is being backfilled already", rb->c.stream, tables[i]);
			continue;
		}
		if (ready < 0) {
			/* can the source write watermarks now (MySQL: its table)? */
			char e[SL_ERRLEN * 2];
			int r = rb->c.src->watermark_ready && rb->c.srccfg && rb->c.sst
					? rb->c.src->watermark_ready(rb->c.srccfg, rb->c.sst, e, sizeof e) : SL_OK;
			ready = !(r == SL_EPREREQ || r == SL_ECONFIG);
			if (!ready)
				snprintf(rb->c.err, rb->c.errlen, "%s. So the backfill of %s requested is read from a snapshot",
					 e, tables[i]);
		}
		if (!ready) {
			restart = true;
			continue;
		}
		sl_info("stream \"%s\": backfill of %s requested (%s)", rb->c.stream, tables[i], paths[i]);
		rc = sl_rebackfill_add(rb, idx, latest(rb, t), false, NULL, 0, 0);
		started++;
	}
	if (rc == SL_OK && restart)
		rc = SL_ERESTART;  /* every request file stays for the next start */
	if (rc == SL_OK && started > 0)
		rc = sl_pipe_sync(rb->c.pipe);   /* the jobs' starts are durable */
	if (rc == SL_OK)
		for (int i = 0; i < n; i++)
			if (!keep[i] && unlink(paths[i]) < 0 && errno != ENOENT)
				sl_warn("stream \"%s\": could not remove the backfill request \"%s\": %s", rb->c.stream,
					paths[i], sl_strerror(errno));
	sl_bf_request_list_free(paths, tables, n);
	free(keep);
	return rc;
}

static bool seen_tx(void *payload, uint64_t tx_id)
{
	const struct sl_rebackfill *rb = payload;

	for (size_t i = 0; i < rb->nseen; i++)
		if (rb->seen[i] == tx_id)
			return true;
	return false;
}

static int on_chunk_row(void *payload, const struct sl_table *t, const struct sl_value *vals)
{
	struct sl_rebackfill *rb = payload;

	(void)t;
	if (sl_bf_chunk_add(rb->chunk, vals) < 0) {
		snprintf(rb->c.err, rb->c.errlen, "out of memory holding a backfill chunk");
		return -1;
	}
	return 0;
}

static const char *wm_text(struct sl_rebackfill *rb, const char *what)
{
	sl_buf_reset(&rb->text);
	sl_buf_printf(&rb->text, "sluice:%s:%s:%" PRIu64 ":%s", rb->c.stream, rb->run, rb->seq, what);
	return sl_buf_failed(&rb->text) ? NULL : rb->text.data;
}

/* A chunk of the running job found its table changed after the stream's
 * view of it (err says how): it waits for the table's next description, or
 * for the probe written now; after the probe, the stream restarts. */
static int stale_chunk(struct sl_rebackfill *rb)
{
	struct sl_position at;
	int rc;

	sl_bf_chunk_abandon(rb->chunk);
	if (rb->probed) {
		char msg[SL_ERRLEN];
		snprintf(msg, sizeof msg, "%s", rb->c.err);
		snprintf(rb->c.err, rb->c.errlen, "stream \"%s\": the backfill of %s met a DDL that no change of the "
			 "table followed (%s), so the stream has no description of it as it is", rb->c.stream,
			 entry_name(rb, rb->jobs[0].idx), msg);
		return SL_ERESTART;
	}
	sl_info("stream \"%s\": the backfill of %s waits for the stream to reach a DDL of the table: %s",
		rb->c.stream, entry_name(rb, rb->jobs[0].idx), rb->c.err);
	if (!wm_text(rb, "probe") || !(rb->probe = strdup(rb->text.data))) {
		snprintf(rb->c.err, rb->c.errlen, "out of memory");
		return SL_EFAIL;
	}
	if ((rc = rb->c.src->emit_watermark(rb->c.srcctx, rb->probe, &at, rb->c.err, rb->c.errlen)) < 0)
		probe_clear(rb);
	return rc;
}

/* Opens the next chunk of the running job: low watermark, rows, high
 * watermark. */
static int open_chunk(struct sl_rebackfill *rb)
{
	struct job *j = &rb->jobs[0];
	struct sl_chunk_check chk = { .payload = rb, .seen = seen_tx, .recent = rb->seen, .nrecent = rb->nseen };
	struct sl_position at;
	char *low = NULL, *last = NULL;
	const char *high;
	uint64_t rows = 0;
	int rc;

	rb->seq++;
	rb->opened_ms = sl_mono_ms();
	if (!wm_text(rb, "low") || !(low = strdup(rb->text.data)) || !(high = wm_text(rb, "high")) ||
	    sl_bf_chunk_open(rb->chunk, j->t, low, high) < 0) {
		free(low);
		snprintf(rb->c.err, rb->c.errlen, "out of memory");
		return SL_EFAIL;
	}
	sl_bf_chunk_set_floor(rb->chunk, j->marker_csn);
	rc = rb->c.src->emit_watermark(rb->c.srcctx, low, &at, rb->c.err, rb->c.errlen);
	free(low);
	if (rc < 0)
		return rc;
	rc = rb->c.src->read_chunk(rb->c.srcctx, j->t, j->after, rb->c.chunk_rows, &chk, on_chunk_row, rb, &rows,
				   &last, rb->c.err, rb->c.errlen);
	if (rc == SL_EAGAIN) {
		sl_bf_chunk_abandon(rb->chunk);
		if (rb->retry_ms < RETRY_MS)
			rb->retry_ms = RETRY_MS;
		rb->retry_at_ms = sl_mono_ms() + rb->retry_ms;
		rb->retry_ms = rb->retry_ms * 2 < RETRY_MAX_MS ? rb->retry_ms * 2 : RETRY_MAX_MS;
		return SL_OK;
	}
	rb->retry_ms = RETRY_MS;
	if (rc == SL_ESTALE)
		return stale_chunk(rb);
	probe_clear(rb);
	if (rc < 0) {
		sl_bf_chunk_abandon(rb->chunk);
		return rc;
	}
	if (rows == 0) {
		/* No row is left: the job is done at this chunk's low watermark,
		 * once the stream reads it (finish_job). */
		rb->finishing = true;
		rb->waiting = true;
		return SL_OK;
	}
	free(rb->last);
	rb->last = last;
	rb->read_ms = sl_mono_ms();
	if (!(high = wm_text(rb, "high")))
		rc = SL_EFAIL;
	else
		rc = rb->c.src->emit_watermark(rb->c.srcctx, high, &at, rb->c.err, rb->c.errlen);
	if (rc < 0) {
		sl_bf_chunk_abandon(rb->chunk);
		return rc;
	}
	rb->waiting = true;
	return SL_OK;
}

/* The running job read every row: it is done, complete as of pos (the
 * low watermark of the chunk that found no row left: every row was read
 * in a snapshot before it). */
static int finish_job(struct sl_rebackfill *rb, const struct sl_position *pos)
{
	struct job *j = &rb->jobs[0];
	int64_t ms = sl_mono_ms() - j->t0_ms;
	int rc;

	rb->waiting = rb->finishing = false;
	sl_bf_chunk_abandon(rb->chunk);
	/* Done once durable (and the figure below covers the writer). */
	if ((rc = sl_pipe_backfill_done(rb->c.pipe, j->idx, j->t, j->rows, pos)) < 0 ||
	    (rc = sl_pipe_sync(rb->c.pipe)) < 0)
		return rc;
	sl_info("stream \"%s\": backfilled %s while streaming: %" PRIu64 " rows in %" PRIu64 " chunks, "
		"%.2f s (%.0f rows/s)", rb->c.stream, entry_name(rb, j->idx), j->rows, j->chunks,
		(double)ms / 1000.0, (double)(j->rows - j->rows0) * 1000.0 / (double)(ms > 0 ? ms : 1));
	job_done(rb);
	return SL_OK;
}

/* The high watermark of the open chunk: its rows, at pos. */
static int close_chunk(struct sl_rebackfill *rb, const struct sl_position *pos)
{
	struct job *j = &rb->jobs[0];
	const struct sl_table *t = sl_bf_chunk_table(rb->chunk);
	const struct sl_value *vals;
	size_t it = 0;
	int rc;

	rb->waiting = false;
	if (rb->fault_spoiled)   /* idle meanwhile (longer than the reader's wait), so that changes flush */
		rb->retry_at_ms = sl_mono_ms() + 2000;
	if (sl_bf_chunk_spoiled(rb->chunk) || rb->fault_spoiled) {
		sl_debug("stream \"%s\": a chunk of %s met a change of unknown key: it is read again", rb->c.stream,
			 entry_name(rb, j->idx));
		return SL_OK;
	}
	if ((rc = sl_pipe_backfill_at(rb->c.pipe, pos, sl_now_us())) < 0)
		return rc;
	while (sl_bf_chunk_next(rb->chunk, &it, &vals)) {
		if ((rc = sl_pipe_backfill_row(rb->c.pipe, t, vals)) < 0)
			return rc;
		j->rows++;
	}
	j->chunks++;
	sl_debug("stream \"%s\": chunk %" PRIu64 " of %s: %" PRIu64 " rows read in %" PRId64 " ms, %" PRIu64
		 " changes applied, its high watermark %" PRId64 " ms later", rb->c.stream, j->chunks,
		 entry_name(rb, j->idx), sl_bf_chunk_read_rows(rb->chunk), rb->read_ms - rb->opened_ms,
		 sl_bf_chunk_applied(rb->chunk), sl_mono_ms() - rb->read_ms);
	if ((rc = sl_pipe_backfill_progress(rb->c.pipe, j->idx, rb->last, j->rows, j->chunks)) < 0)
		return rc;
	free(j->after);
	j->after = rb->last;
	rb->last = NULL;
	return SL_OK;
}

/*
 * The low watermark at pos of the running job's chunk: the job's marker,
 * unless it has one (a durable chunk, or this run wrote it).  It goes here
 * rather than at the stream's position when the job started: the source
 * may skip the table's changes up to the first low watermark of the run
 * (sl_source_hooks.covered, SL_COVER_FIRST_WATERMARK), replays of changes
 * that an earlier run wrote beyond the position it checkpointed included,
 * and a delete skipped so leaves the row it deletes in the output, above
 * a marker at the job's start, while no chunk reads it.  At the watermark,
 * the marker is above every record before it, of this run or an earlier
 * one, and below every change and chunk after it.
 */
static int mark_job(struct sl_rebackfill *rb, const struct sl_position *pos)
{
	struct job *j = &rb->jobs[0];
	int rc;

	if (j->marked)
		return SL_OK;
	if ((rc = sl_pipe_job_marker(rb->c.pipe, j->idx, j->t, pos, sl_now_us())) < 0)
		return rc;
	j->marked = true;
	j->marker_csn = sl_pipe_marker_csn(rb->c.pipe, pos, true);
	sl_bf_chunk_set_floor(rb->chunk, j->marker_csn);
	return SL_OK;
}

static int hook_event(void *payload, const struct sl_event *ev)
{
	struct sl_rebackfill *rb = payload;
	int rc;

	switch (ev->kind) {
	case SL_EV_BEGIN:
		rb->tx_pos = ev->pos;
		rb->in_tx = true;
		rb->seen[rb->seen_at] = ev->tx_id;
		rb->seen_at = (rb->seen_at + 1) % SEEN_TX;
		if (rb->nseen < SEEN_TX)
			rb->nseen++;
		return SL_OK;
	case SL_EV_CHANGE:
		if (rb->waiting && sl_bf_chunk_change(rb->chunk, &ev->change) < 0) {
			snprintf(rb->c.err, rb->c.errlen, "out of memory applying a change to a backfill chunk");
			return SL_EFAIL;
		}
		return SL_OK;
	case SL_EV_COMMIT:
		rb->in_tx = false;
		return SL_OK;
	case SL_EV_SCHEMA:
		return on_schema(rb, ev->table, ev->changed, ev->rebackfill, ev->rebackfill_missing);
	case SL_EV_WATERMARK:
		if (rb->probe && !rb->probed && ev->watermark && !strcmp(ev->watermark, rb->probe)) {
			rb->probed = true;   /* past the DDL: the chunk is tried again */
			return SL_OK;
		}
		if (!rb->waiting)
			return SL_OK;
		switch (sl_bf_chunk_watermark(rb->chunk, ev->watermark)) {
		case SL_BF_WM_HIGH:
			return close_chunk(rb, &ev->pos);
		case SL_BF_WM_BAD:
			rb->waiting = false;   /* read it again */
			return SL_OK;
		case SL_BF_WM_LOW:
			if ((rc = mark_job(rb, &ev->pos)) < 0)
				return rc;
			return rb->finishing ? finish_job(rb, &ev->pos) : SL_OK;
		case SL_BF_WM_OTHER:
			return SL_OK;
		}
		return SL_OK;
	default:
		return SL_OK;
	}
}

static int hook_idle(void *payload)
{
	struct sl_rebackfill *rb = payload;
	int64_t now = sl_mono_ms();
	int rc;

	if (rb->c.state_dir && now - rb->polled_ms >= REQUEST_POLL_MS) {
		rb->polled_ms = now;
		if ((rc = take_requests(rb)) < 0)
			return rc;
	}
	if (rb->waiting || rb->njobs == 0 || now < rb->retry_at_ms || (rb->probe && !rb->probed))
		return SL_OK;
	if (!rb->jobs[0].t0_ms)
		rb->jobs[0].t0_ms = now;
	return open_chunk(rb);
}

static bool hook_busy(void *payload)
{
	const struct sl_rebackfill *rb = payload;

	return rb->njobs > 0;
}

void sl_rebackfill_hooks(struct sl_rebackfill *rb, struct sl_pipe_hooks *h)
{
	memset(h, 0, sizeof *h);
	h->payload = rb;
	h->event = hook_event;
	h->idle = hook_idle;
	h->busy = hook_busy;
}
