/*
 * agent/stream.c: runs one stream, from any source to any sink:
 *
 *   prepare:  checkpoint, source (tables, log position checked against the
 *             checkpoint), sink
 *   backfill: tables not yet done, read in a snapshot aligned to the
 *             stream's position (backfill/backfill.c)
 *   stream:   the source's events through the pipeline into the sink,
 *             acknowledging only what the sink made durable
 *             (agent/pipeline.c)
 *
 * The source and the sink are reached only through their interfaces
 * (sources/source.h, sinks/sink.h).  This thread is the pipeline's reader;
 * the pipeline starts the writer.
 */
#include "agent/stream.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backfill/backfill.h"
#include "agent/checkpoint.h"
#include "agent/masking.h"
#include "agent/pipeline.h"
#include "backfill/rebackfill.h"
#include "agent/runstate.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "ops/metrics.h"
#include "sinks/sink.h"
#include "sources/source.h"

atomic_int sl_signal_count;

struct stream {
	struct sl_config *cfg;
	struct sl_stream_config *sc;
	const struct sl_run_opts *opts;
	const struct sl_source_ops *src;
	void *srcctx;
	struct sl_source_stream sst;
	struct sl_source_hooks hooks;   /* sst.hooks: signals and long waits */
	const struct sl_sink_ops *sink;
	void *sinkctx;
	struct sl_sink_stream sinkst;
	struct sl_table **tables;
	int ntables;
	struct sl_table **gone;  /* column-less versions of dropped tables, for their markers */
	int ngone;
	struct sl_checkpoint ck;
	struct sl_checkpoint seen;      /* the checkpoint file as the reading thread's hooks last read it */
	uint64_t seen_saves;            /* ck.saves then (durable_ckpt) */
	bool seen_read;
	char **known;            /* sst.known_tables: the names ck follows (pointers into ck) */
	struct sl_pipe *pipe;
	struct sl_rebackfill *rb;       /* backfill while streaming, when the source can */
	bool abandoned;          /* the writer is stuck in the sink: leave sink and checkpoint alone */
	struct sl_mask *mask;    /* the column rules (exclude_columns, mask_columns), or NULL */
	/* the tables' versions at the start, to hand to the sink once the
	 * stream passes start_at (sl_pipe_stream_opts.start; nstart 0 when the
	 * source records no column identities) */
	struct sl_pipe_start_version *start;
	int nstart;
	struct sl_position start_at;
	char *err;
	size_t errlen;
};

static bool draining(void)
{
	return atomic_load(&sl_signal_count) >= 1;
}

static bool cancelled(void)
{
	return atomic_load(&sl_signal_count) >= 2;
}

void sl_stream_source_view(const struct sl_config *cfg, const struct sl_stream_config *sc,
			   struct sl_source_stream *out)
{
	memset(out, 0, sizeof *out);
	out->name = sc->name;
	out->config_path = cfg->abs_path;
	out->tables = sc->tables;
	out->exclude_tables = sc->exclude_tables;
	out->key_columns = sc->key_columns;
	out->merge = sc->write_mode == SL_WRITE_MERGE;
	out->conf = sc->source_conf;
	out->backfill_connections = sc->source->backfill_connections;
	out->backfill_chunk_rows = sc->source->backfill_chunk_rows;
	out->heartbeats = sc->heartbeat_interval > 0;
	out->heartbeat_ms = (int64_t)sc->heartbeat_interval * 1000;
	out->status_ms = (int64_t)sc->status_interval_ms;
}

int sl_stream_ckpt_slot(const struct sl_checkpoint *ck, const struct sl_stream_config *sc, char *err, size_t errlen)
{
	if (!sc->slot || !ck->exists || !ck->slot[0] || !strcmp(ck->slot, sc->slot))
		return SL_OK;
	snprintf(err, errlen, "stream \"%s\": the checkpoint \"%s\" belongs to slot \"%s\", but the config names "
		 "slot \"%s\"", sc->name, ck->path, ck->slot, sc->slot);
	return SL_ECONFIG;
}

void sl_stream_ckpt_hint(const struct sl_source_stream *sst, const char *path, int rc, char *err, size_t errlen)
{
	struct sl_buf b;
	size_t l = strlen(err);

	if (rc != SL_ELOST || !path)
		return;
	sl_buf_init(&b, 0);
	sl_buf_puts(&b, ". To recover, run `");
	sl_source_backfill_command(&b, sst);
	sl_buf_printf(&b, "`, which keeps the corrupt file as \"%s.corrupt\", then start sluice again: it backfills "
		      "every table (or put back a good copy of the checkpoint)", path);
	if (!sl_buf_failed(&b))
		snprintf(err + l, errlen - l, "%s", b.data);
	sl_buf_free(&b);
}

const struct sl_source_ops *sl_stream_source(const struct sl_stream_config *sc, char *err, size_t errlen)
{
	/* The config found the source of the profile's type, or refused it. */
	if (!sc->source->ops)
		snprintf(err, errlen, "stream \"%s\": source \"%s\" has no known type", sc->name, sc->source->name);
	return sc->source->ops;
}

/* The config resolved the sink and refused what it does not support
 * (sl_config_load() checks write_mode against ops->caps). */
static int open_sink(struct stream *s)
{
	int rc;

	s->sink = s->sc->destination->ops;
	s->sinkst.name = s->sc->name;
	s->sinkst.mode = s->sc->write_mode;
	s->sinkst.destination = s->sc->destination->name;
	s->sinkst.state_dir = s->cfg->state_dir;
	s->sinkst.config_path = s->cfg->abs_path;
	s->sinkst.outage = s->opts->outage;
	rc = s->sink->open(&s->sinkctx, s->sc->destination->conf, &s->sinkst, s->err, s->errlen);
	if (rc < 0) {
		s->sinkctx = NULL;
		/* A sink's operator errors (SL_EPREREQ: access refused, no bucket)
		 * are not retried; everything else is a runtime failure. */
		return rc == SL_EPREREQ || rc == SL_ECONFIG ? rc : SL_EFAIL;
	}
	return SL_OK;
}

static int save_ckpt(struct stream *s)
{
	return sl_ckpt_save(&s->ck, s->err, s->errlen) < 0 ? SL_EFAIL : SL_OK;
}

/* True if the stream's tables setting still selects "ns.table". */
static bool still_selected(const struct sl_stream_config *sc, const struct sl_ckpt_table *e)
{
	bool in = false;

	for (char **g = sc->tables; *g && !in; g++)
		in = fnmatch(*g, e->name, 0) == 0;
	for (char **g = sc->exclude_tables; in && g && *g; g++)
		in = fnmatch(*g, e->name, 0) != 0;
	return in;
}

/* Records what the column rules do to each table (sl_stream_mask_rules) in
 * its checkpoint entry.  Rules that changed since a table's output was
 * written make a new table version from here on; the records written before
 * keep what the old rules wrote, and the log says so with the command that
 * rewrites them (a table about to be backfilled anyway needs none).
 * Returns SL_OK or SL_EFAIL (out of memory). */
static int note_rules(struct stream *s)
{
	struct sl_buf b, cmd;
	int rc = SL_OK;

	sl_buf_init(&b, 0);
	sl_buf_init(&cmd, 0);
	for (int i = 0; i < s->ntables && rc == SL_OK; i++) {
		const struct sl_table *t = s->tables[i];
		struct sl_ckpt_table *e = sl_ckpt_table(&s->ck, t->ns, t->name);
		char *text;
		sl_buf_reset(&b);
		if (!e || sl_stream_mask_rules(s->mask, t, &b) < 0 || sl_buf_putc(&b, '\0') < 0) {
			rc = SL_EFAIL;
			break;
		}
		if (e->mask && !strcmp(e->mask, b.data))
			continue;
		if (e->mask && e->state != SL_BF_PENDING) {
			sl_buf_reset(&cmd);
			sl_buf_put_backfill_command(&cmd, s->cfg->abs_path, s->sc->name, t->ns, t->name);
			sl_warn("stream \"%s\": table \"%s\".\"%s\": its column rules changed since its output was "
				"written (were \"%s\", now \"%s\"): its records from here on are a new table version, and "
				"those written before keep what the old rules wrote; to rewrite them too: %s", s->sc->name,
				t->ns, t->name, e->mask[0] ? e->mask : "none", b.data[0] ? b.data : "none",
				sl_buf_failed(&cmd) ? "sluice backfill --table" : cmd.data);
		}
		if (!(text = strdup(b.data))) {
			rc = SL_EFAIL;
			break;
		}
		free(e->mask);
		e->mask = text;
	}
	if (rc != SL_OK)
		snprintf(s->err, s->errlen, "out of memory");
	sl_buf_free(&b);
	sl_buf_free(&cmd);
	return rc;
}

/*
 * Brings the checkpoint's tables in line with what the source lists:
 * - a table new to the stream gets a pending entry (skipped without backfill);
 * - a table whose identity changed (dropped and created again under the same
 *   name: a new OID), whose shape changed (partitions attached or
 *   detached: rows came or went without changes; a backfill running then
 *   starts over, behind a new marker, since its durable chunks may hold
 *   rows of a partition detached since), whose layout changed
 *   since the checkpoint's position (a log that does not describe its rows
 *   holds rows of another layout: the source skips them, see
 *   sl_source_hooks.covered), or whose existing rows changed without
 *   changes (the source's columns_changed: a column added with a default, a
 *   table rewrite, a column dropped and added again) is backfilled again,
 *   its rows preceded by a marker that clears what the output held (a
 *   backfill running then starts over: its durable chunks hold the rows
 *   as they were, which resuming after them would keep);
 * - an entry written before identities were recorded takes the table's;
 * - an entry whose table the source no longer lists, though the stream still
 *   selects its name, was dropped or renamed: its index goes into drops[],
 *   for a TRUNCATE marker (a renamed table is a new object under its new
 *   name).
 * Returns SL_OK or SL_EFAIL (out of memory).
 */
/* sl_rebackfill_config.carries_missing: the stream's sink's. */
static bool carries_missing(const void *arg, const struct sl_table *t)
{
	const struct stream *s = arg;

	return sl_sink_carries_missing(s->sink, s->sc->destination->conf, t);
}

/* True, logged, when the existing rows of table t (checkpoint entry e)
 * changed without a change record since the checkpoint (the source's
 * columns_changed), so that it is backfilled again; a column added with a
 * constant default is not a reason when the sink carries it
 * (sl_sink_carries_missing). */
static bool rows_changed(struct stream *s, const struct sl_ckpt_table *e, const struct sl_table *t)
{
	char why[SL_ERRLEN];
	int cc;

	if (!s->src->columns_changed || !(cc = s->src->columns_changed(e->columns, t->src_columns, why, sizeof why)))
		return false;
	if (cc == SL_COLS_LOST && !s->sink->carries_missing)
		return false;   /* its output never had the value */
	if (cc == SL_COLS_MISSING && carries_missing(s, t)) {
		sl_info("stream \"%s\": table \"%s\".\"%s\": %s: the destination carries it as the column's "
			"default, so nothing is backfilled", s->sc->name, e->ns, e->table, why);
		return false;
	}
	sl_warn("stream \"%s\": table \"%s\".\"%s\": %s: %s", s->sc->name, e->ns, e->table, why,
		s->sc->backfill ? "it is backfilled again, behind a marker" :
		"the stream has backfill = none, so its existing rows keep what the output had");
	return true;
}

/* Entry e (of table i) takes the table's column identities, or, when they
 * differ from its own and no backfill is to bring the table's version
 * (DDL while sluice was stopped, or with no change of the table after it),
 * keeps its own until the version at the start is handed to the sink
 * (s->start[i] due: the writer takes them then), so that a run that ends
 * before that finds the difference again.  -1 out of memory. */
static int take_columns(struct stream *s, struct sl_ckpt_table *e, int i)
{
	const struct sl_table *t = s->tables[i];
	char *c;

	if (!t->src_columns)
		return 0;
	/* Also when the version the sink has is another than the start's,
	 * though the columns at the last start were these: the log described
	 * DDL during the last run, and a later one with no change of the
	 * table after it undid it (a column added, then dropped: issue 17,
	 * seed 4965). */
	if (s->start && (e->state == SL_BF_DONE || e->state == SL_BF_SKIPPED) &&
	    ((e->columns && strcmp(e->columns, t->src_columns) != 0) ||
	     (e->schema_key[0] && strcmp(e->schema_key, t->schema_key) != 0))) {
		s->start[i].state = SL_SV_DUE;
		s->start[i].idx = (int)(e - s->ck.tables);
		return 0;
	}
	if (!(c = strdup(t->src_columns))) {
		snprintf(s->err, s->errlen, "out of memory");
		return -1;
	}
	free(e->columns);
	e->columns = c;
	return 0;
}

static int register_tables(struct stream *s, int **drops, int *ndrops)
{
	*drops = NULL;
	*ndrops = 0;
	if (s->src->columns_changed && s->src->current_position && s->ntables > 0) {
		if (!(s->start = calloc((size_t)s->ntables, sizeof *s->start))) {
			snprintf(s->err, s->errlen, "out of memory");
			return SL_EFAIL;
		}
		s->nstart = s->ntables;
		for (int i = 0; i < s->ntables; i++) {
			s->start[i].table = s->tables[i];
			s->start[i].idx = -1;
		}
	}
	for (int i = 0; i < s->ntables; i++) {
		const struct sl_table *t = s->tables[i];
		int before = s->ck.ntables;
		struct sl_ckpt_table *e = sl_ckpt_table(&s->ck, t->ns, t->name);
		enum sl_bf_state was;
		if (!e) {
			snprintf(s->err, s->errlen, "out of memory");
			return SL_EFAIL;
		}
		was = s->ck.ntables > before ? SL_BF_DONE : e->state;   /* a new entry: made pending here */
		if (e->id && e->id != t->relid && e->state != SL_BF_PENDING) {
			sl_info("stream \"%s\": table %s is not the table it was (dropped and created again, or another "
				"table renamed to its name): it is backfilled as new", s->sc->name, e->name);
			e->state = SL_BF_PENDING;
		} else if (e->id && e->shape != t->shape &&
			   (e->state == SL_BF_DONE || e->state == SL_BF_SKIPPED || e->state == SL_BF_RUNNING)) {
			sl_info("stream \"%s\": the partitions of %s changed, so rows came or went without changes: "
				"it is backfilled again%s", s->sc->name, e->name,
				e->state == SL_BF_RUNNING ? " from the start (the chunks read so far hold the old partitions' "
				"rows)" : "");
			e->state = SL_BF_PENDING;
			sl_ckpt_set_resume(e, NULL);
		} else if (e->layout && t->layout && e->layout != t->layout &&
			   (e->state == SL_BF_DONE || e->state == SL_BF_SKIPPED)) {
			sl_warn("stream \"%s\": the columns of %s changed after the checkpoint's position, and the log "
				"does not describe its rows (binlog_row_metadata is not FULL): its rows logged before the "
				"change cannot be read with today's columns, so it is backfilled again", s->sc->name,
				e->name);
			e->state = SL_BF_PENDING;
		} else if (e->id && (e->state == SL_BF_DONE || e->state == SL_BF_SKIPPED || e->state == SL_BF_RUNNING) &&
			   rows_changed(s, e, t)) {
			if (e->state == SL_BF_RUNNING)
				sl_info("stream \"%s\": the backfill of %s starts over: the chunks read so far hold its rows "
					"as they were", s->sc->name, e->name);
			e->state = SL_BF_PENDING;
			sl_ckpt_set_resume(e, NULL);
		} else if (e->state == SL_BF_DROPPED) {
			e->state = SL_BF_PENDING;  /* a table of that name is back */
		}
		e->id = t->relid;
		e->shape = t->shape;
		e->layout = t->layout;
		if (!s->sc->backfill && e->state == SL_BF_PENDING)
			e->state = SL_BF_SKIPPED;
		if (take_columns(s, e, i) < 0)
			return SL_EFAIL;
		if (e->state == SL_BF_PENDING && was != SL_BF_PENDING && s->ck.has_position)
			e->method = SL_BF_WATERMARK;   /* the stream runs: read it while streaming */
	}
	for (int i = 0; i < s->ck.ntables; i++) {
		struct sl_ckpt_table *e = &s->ck.tables[i];
		bool listed = false;
		if (e->state == SL_BF_DROPPED || !still_selected(s->sc, e))
			continue;
		for (int k = 0; k < s->ntables && !listed; k++)
			listed = !strcmp(e->ns, s->tables[k]->ns) && !strcmp(e->table, s->tables[k]->name);
		if (listed)
			continue;
		if (!*drops && !(*drops = calloc((size_t)s->ck.ntables, sizeof **drops))) {
			snprintf(s->err, s->errlen, "out of memory");
			return SL_EFAIL;
		}
		(*drops)[(*ndrops)++] = i;
	}
	return SL_OK;
}

/* Writes the TRUNCATE marker of every dropped table (see register_tables):
 * a version of it without columns, just after the source's current position
 * (sl_pipe_drop_marker), which comes after every record it had. */
static int mark_drops(struct stream *s, const int *drops, int ndrops)
{
	struct sl_position now;
	int rc;

	if (ndrops == 0)
		return SL_OK;
	if ((rc = s->src->current_position(s->srcctx, &now, s->err, s->errlen)) < 0)
		return rc;
	for (int i = 0; i < ndrops; i++) {
		const struct sl_ckpt_table *e = &s->ck.tables[drops[i]];
		struct sl_table *t = sl_table_new(e->ns, e->table), **nd;
		if (!t || sl_table_finish(t) < 0 ||
		    !(nd = realloc(s->gone, sizeof *nd * (size_t)(s->ngone + 1)))) {
			sl_table_free(t);
			snprintf(s->err, s->errlen, "out of memory");
			return SL_EFAIL;
		}
		t->src = s->src->desc;
		s->gone = nd;
		s->gone[s->ngone++] = t;
		sl_info("stream \"%s\": table %s is no longer one of the stream's tables (dropped, renamed, or "
			"attached to a selected partitioned table): its rows are cleared by a TRUNCATE marker",
			s->sc->name, e->name);
		if ((rc = sl_pipe_drop_marker(s->pipe, drops[i], t, &now)) < 0)
			return rc;
	}
	/* Durable and checkpointed before anything else: a signal that stops
	 * the run during the setup after this (the stop does not drain then,
	 * and the writer saves no checkpoint once stopped) must not leave
	 * markers that the next run writes again. */
	return sl_pipe_sync(s->pipe);
}

/* A new position starts a new history: every table is backfilled again
 * (unless the stream backfills nothing). */
static void restart_history(struct stream *s, const struct sl_snapshot_info *info)
{
	for (int i = 0; i < s->ck.ntables; i++) {
		struct sl_ckpt_table *e = &s->ck.tables[i];
		if (e->state == SL_BF_DONE)
			e->state = SL_BF_PENDING;
		sl_ckpt_set_resume(e, NULL);  /* rows of the old history: the table is read anew */
		e->method = SL_BF_SNAPSHOT;   /* in the new position's snapshot */
		if (!s->sc->backfill && e->state == SL_BF_PENDING)
			e->state = SL_BF_SKIPPED;
	}
	s->ck.has_position = true;
	s->ck.reset = false;
	s->ck.durable = info->pos;
}

/* The source's long waits end at the first signal. */
static bool hook_stop(void *payload)
{
	(void)payload;
	return draining();
}

/* The checkpoint as its file holds it now, for the hooks of the reading
 * thread (the writer thread owns the one in memory, and the file holds
 * what is durable): read once, and again only after a save (ck.saves), so
 * that a stream of many tables does not read it for each.  *out stays the
 * stream's (until the next call).  0, or sl_ckpt_load's failure. */
static int durable_ckpt(struct stream *s, const struct sl_checkpoint **out, char *err, size_t errlen)
{
	uint64_t saves = atomic_load(&s->ck.saves);
	int rc;

	if (!s->seen_read || saves != s->seen_saves) {
		sl_ckpt_free(&s->seen);
		s->seen_read = false;
		if ((rc = sl_ckpt_load(&s->seen, s->src->desc, s->cfg->state_dir, s->sc->name, err, errlen)) < 0)
			return rc;
		s->seen_saves = saves;
		s->seen_read = true;
	}
	*out = &s->seen;
	return SL_OK;
}

/* A followed table was replaced (see struct sl_source_hooks).  The
 * checkpoint is read from its file (durable_ckpt). */
static int hook_replaced(void *payload, const char *ns, const char *table, const struct sl_position *at,
			 bool backfill, char *err, size_t errlen)
{
	struct stream *s = payload;
	const struct sl_checkpoint *ck;
	const struct sl_ckpt_table *e = NULL;
	struct sl_buf name;
	int rc;

	if ((rc = durable_ckpt(s, &ck, err, errlen)) < 0)
		return rc;
	e = sl_ckpt_find(ck, ns, table);
	/* A backfill to come, or one that read all its rows after the
	 * statement.  One that read rows before it, running or done, lacks what
	 * the statement gave the table: with backfill, a request starts it over
	 * (take_requests); without, the caller's TRUNCATE record ends the rows
	 * it read before (a running one reads on, in the table of the name
	 * now, whose rows before its resume key the stream has as changes). */
	rc = e && (e->state == SL_BF_PENDING ||
		   ((e->state == SL_BF_RUNNING || e->state == SL_BF_DONE) && e->has_since &&
		    s->src->desc->pos_compare(&e->since, at) > 0)) ? 0 : 1;
	if (rc == 0 || !backfill)
		return rc;
	sl_buf_init(&name, 0);
	sl_buf_printf(&name, "%s.%s", ns, table);
	if (sl_buf_failed(&name)) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
	} else if (sl_bf_request_write(s->cfg->state_dir, s->sc->name, name.data, err, errlen) < 0) {
		rc = SL_EFAIL;
	}
	sl_buf_free(&name);
	return rc;
}

/* How far the backfill of a followed table holds its changes (see struct
 * sl_source_hooks).  Read from the checkpoint file (durable_ckpt). */
static int hook_covered(void *payload, const char *ns, const char *table, struct sl_position *until, char *err,
			size_t errlen)
{
	struct stream *s = payload;
	const struct sl_checkpoint *ck;
	const struct sl_ckpt_table *e = NULL;
	int rc;

	memset(until, 0, sizeof *until);
	if ((rc = durable_ckpt(s, &ck, err, errlen)) < 0)
		return rc;
	e = sl_ckpt_find(ck, ns, table);
	rc = SL_COVER_NONE;
	if (e && e->method == SL_BF_SNAPSHOT && !e->resumed && (e->state == SL_BF_DONE || e->state == SL_BF_RUNNING)) {
		/* (a resumed backfill read its first rows in an earlier snapshot:
		 * the changes between the two are not in them) */
		*until = e->snapshot;
		rc = SL_COVER_UNTIL;
	} else if (e && e->method == SL_BF_WATERMARK &&
		   ((e->state == SL_BF_RUNNING && !e->resume_key) || e->state == SL_BF_PENDING)) {
		/* A backfill while streaming that has no chunk durable yet, or has
		 * not begun (a table added to the stream): its first watermark is
		 * written at the server's head once it begins, so what the stream
		 * reads before the first watermark of this run is older, and the
		 * marker before its chunks clears it. */
		rc = SL_COVER_FIRST_WATERMARK;
	}
	return rc;
}

/* A long wait, for `sluice status` (the source logs it itself). */
static void hook_waiting(void *payload, const struct sl_source_wait *w)
{
	struct stream *s = payload;
	char err[SL_ERRLEN];

	if (!w) {
		sl_runstate_wait_clear(s->cfg->state_dir, s->sc->name);
		return;
	}
	if (sl_runstate_wait_write(s->cfg->state_dir, s->sc->name, w, err, sizeof err) < 0)
		sl_warn("stream \"%s\": could not record the wait for sluice status: %s", s->sc->name, err);
}

/* A step that failed because a signal cut a wait short is a clean stop. */
static int stopped_by_signal(struct stream *s, int rc, const char *what)
{
	if (rc == SL_OK || !draining())
		return rc;
	sl_info("stream \"%s\": stopped by a signal while %s (%s)", s->sc->name, what, s->err);
	return SL_OK;
}

/* The tables about to be backfilled, for status and the progress line. */
static void note_backfill(struct stream *s, const struct sl_backfill_plan *bf)
{
	struct sl_ops_stream *os = s->opts->ops;

	if (!os)
		return;
	sl_ops_set_state(os, SL_OPS_BACKFILLING);
	for (int i = 0; i < bf->n; i++) {
		struct sl_ops_table *t = sl_ops_table(os, bf->items[i].table->ns, bf->items[i].table->name);
		if (!t)
			continue;
		atomic_store(&t->est_rows, bf->items[i].table->est_rows);
		atomic_store(&t->bf_run_rows, 0);
		atomic_store(&t->bf_state, SL_OPS_BF_PENDING);
	}
}

static void pos_text(const struct stream *s, const struct sl_position *p, char *out, size_t len)
{
	if (s->src->desc->pos_encode(p, out, len) < 0)
		snprintf(out, len, "?");
}

static void stream_free(struct stream *s)
{
	if (s->pipe) {
		sl_pipe_stop(s->pipe, false, &s->abandoned);
		s->pipe = NULL;
	}
	sl_rebackfill_free(s->rb);
	s->rb = NULL;
	if (s->abandoned)
		return;  /* the writer still runs in the sink: the process ends soon */
	if (s->sinkctx)
		s->sink->close(s->sinkctx);
	if (s->srcctx)
		s->src->close(s->srcctx);
	for (int i = 0; i < s->ntables; i++)
		sl_table_free(s->tables[i]);
	free(s->tables);
	for (int i = 0; i < s->ngone; i++)
		sl_table_free(s->gone[i]);
	free(s->gone);
	sl_mask_free(s->mask);
	free(s->known);
	free(s->start);
	sl_ckpt_free(&s->ck);
	sl_ckpt_free(&s->seen);
}

/*
 * The backfill requests `sluice backfill --table` left for the stream
 * (backfill/rebackfill.h): each named table that the stream selects and that
 * is not being backfilled is marked pending.  *paths receives the request
 * files, to be removed once the checkpoint that holds them is saved.
 */
static int take_requests(struct stream *s, char ***paths, int *npaths)
{
	char **tables;

	if (sl_bf_request_list(s->cfg->state_dir, s->sc->name, paths, &tables, npaths, s->err, s->errlen) < 0)
		return SL_EFAIL;
	for (int i = 0; i < *npaths; i++) {
		struct sl_ckpt_table *e = NULL;
		for (int k = 0; k < s->ck.ntables && !e; k++)
			if (!strcmp(s->ck.tables[k].name, tables[i]))
				e = &s->ck.tables[k];
		if (!e || e->state == SL_BF_DROPPED) {
			sl_warn("stream \"%s\": backfill request \"%s\" names %s, which the stream does not select; it is "
				"removed", s->sc->name, (*paths)[i], tables[i]);
			continue;
		}
		sl_info("stream \"%s\": backfill of %s requested (%s)", s->sc->name, tables[i], (*paths)[i]);
		if (e->state == SL_BF_RUNNING && e->method == SL_BF_SNAPSHOT)
			continue;   /* an interrupted first backfill, read before streaming as it is */
		if (e->state == SL_BF_RUNNING) {
			/* Its chunks so far may predate what the request is for
			 * (a running agent keeps such a request until the
			 * backfill is done): it starts over, behind a new marker,
			 * rather than resuming after them. */
			sl_info("stream \"%s\": the backfill of %s starts over", s->sc->name, tables[i]);
			sl_ckpt_set_resume(e, NULL);
			e->rows = e->chunks = 0;
		}
		e->state = SL_BF_PENDING;
		e->method = SL_BF_WATERMARK;
	}
	for (int i = 0; i < *npaths; i++)
		free(tables[i]);
	free(tables);
	return SL_OK;
}

/* The tables the source says the stream may have missed changes of
 * (plan->rebackfill) are backfilled again, as a request would have them. */
static void mark_rebackfill(struct stream *s, const struct sl_source_plan *plan)
{
	for (int i = 0; i < plan->nrebackfill; i++) {
		for (int k = 0; k < s->ck.ntables; k++) {
			struct sl_ckpt_table *e = &s->ck.tables[k];
			if (strcmp(e->name, plan->rebackfill[i]) != 0 || e->state == SL_BF_DROPPED ||
			    e->state == SL_BF_RUNNING)
				continue;
			e->state = SL_BF_PENDING;
			e->method = SL_BF_WATERMARK;
		}
	}
}

static void remove_requests(struct stream *s, char **paths, int n)
{
	for (int i = 0; i < n; i++)
		if (unlink(paths[i]) < 0 && errno != ENOENT)
			sl_warn("stream \"%s\": could not remove the backfill request \"%s\": %s", s->sc->name, paths[i],
				sl_strerror(errno));
}

/*
 * Splits the backfill plan: the tables read while streaming (the watermark
 * method: the stream already has its position, the source can, the table
 * has a key, and its entry says so: a table added to a running stream, or
 * one re-backfilled alone) go to wm, the others (a stream's initial
 * backfill, all tables after a new position) stay in bf, to be read from a
 * snapshot before streaming.  When the source cannot write watermarks now
 * (MySQL: no watermark table), every table stays in bf, with a warning.
 */
static void split_plan(const struct stream *s, struct sl_backfill_plan *bf, struct sl_backfill_plan *wm,
		       bool created)
{
	int keep = 0, want = 0;
	bool ready = true;

	for (int i = 0; i < bf->n; i++)
		want += !created && sl_rebackfill_can(s->src, bf->items[i].table) &&
			bf->items[i].method == SL_BF_WATERMARK;
	if (want > 0 && s->src->watermark_ready) {
		char e[SL_ERRLEN * 2];
		int rc = s->src->watermark_ready(s->sc->source, &s->sst, e, sizeof e);
		if (rc == SL_EPREREQ || rc == SL_ECONFIG) {
			ready = false;
			sl_warn("%s. So %d table%s to backfill %s read from a snapshot before streaming instead of while "
				"streaming", e, want, want == 1 ? "" : "s", want == 1 ? "is" : "are");
		}
	}
	for (int i = 0; i < bf->n; i++) {
		struct sl_backfill_item *it = &bf->items[i];
		if (ready && !created && sl_rebackfill_can(s->src, it->table) && it->method == SL_BF_WATERMARK)
			wm->items[wm->n++] = *it;
		else
			bf->items[keep++] = *it;
	}
	bf->n = keep;
}

/* Starts backfill while streaming: the jobs of wm, and requests to come. */
static int start_rebackfill(struct stream *s, const struct sl_backfill_plan *wm)
{
	struct sl_rebackfill_config rc;
	int r;

	if (!s->src->emit_watermark || !s->src->read_chunk)
		return SL_OK;
	memset(&rc, 0, sizeof rc);
	rc.stream = s->sc->name;
	rc.state_dir = s->cfg->state_dir;
	rc.src = s->src;
	rc.srcctx = s->srcctx;
	rc.pipe = s->pipe;
	rc.ck = &s->ck;
	rc.srccfg = s->sc->source;
	rc.sst = &s->sst;
	rc.tables = s->tables;
	rc.ntables = s->ntables;
	rc.chunk_rows = (uint64_t)s->sst.backfill_chunk_rows;
	rc.backfill = s->sc->backfill;
	rc.carries_missing = carries_missing;
	rc.carries_arg = s;
	rc.err = s->err;
	rc.errlen = s->errlen;
	if ((r = sl_rebackfill_new(&s->rb, &rc)) < 0)
		return r;
	for (int i = 0; i < wm->n; i++) {
		const struct sl_backfill_item *it = &wm->items[i];
		bool resume = it->running && it->method == SL_BF_WATERMARK;
		if ((r = sl_rebackfill_add(s->rb, it->idx, it->table, resume, it->after, it->rows0, it->chunks0)) < 0)
			return r;
	}
	return SL_OK;
}

/* The stream's position: prepared from the checkpoint, created with a
 * snapshot (*snap and *info, *created set), or adopted from the source's
 * plan; and, with until_caught_up, the source's current position as the
 * target (so).  SL_OK, or a failure. */
static int take_position(struct stream *s, struct sl_source_plan *plan, struct sl_pipe_stream_opts *so,
			 void **snap, struct sl_snapshot_info *info, bool *created)
{
	const struct sl_stream_config *sc = s->sc;
	struct sl_source_resume resume;
	char text[2 * SL_POS_TEXT_MAX];
	int rc;

	memset(&resume, 0, sizeof resume);
	resume.has_position = s->ck.exists && s->ck.has_position;
	resume.reset = s->ck.reset;
	resume.durable = s->ck.durable;
	resume.checkpoint_path = s->ck.path;
	if ((rc = s->src->prepare(s->srcctx, &resume, plan, s->err, s->errlen)) < 0)
		return rc;
	mark_rebackfill(s, plan);
	if (s->opts->until_caught_up &&
	    (rc = s->src->current_position(s->srcctx, &so->target, s->err, s->errlen)) < 0)
		return rc;
	so->until_caught_up = s->opts->until_caught_up;

	if (plan->need_position) {
		if ((rc = s->src->snapshot(s->srcctx, true, snap, info, s->err, s->errlen)) < 0)
			return stopped_by_signal(s, rc, "creating the stream's position");
		*created = true;
		pos_text(s, &info->pos, text, sizeof text);
		if (sc->slot)
			sl_info("stream \"%s\": created replication slot \"%s\" at %s", sc->name, sc->slot, text);
		else
			sl_info("stream \"%s\": took a new position at %s", sc->name, text);
		restart_history(s, info);
		if (s->opts->ops)
			atomic_store(&s->opts->ops->expect_position, true);
	} else if (plan->adopt) {
		s->ck.has_position = true;
		s->ck.durable = plan->start;
	}
	return SL_OK;
}

/* Starts the stream's pipeline (s->pipe), whose writer owns the checkpoint
 * from here on.  Its floor is the source's position now: an earlier run
 * (this process's, or one killed) wrote nothing above it. */
static int start_pipe(struct stream *s, const struct sl_source_plan *plan)
{
	struct sl_pipe_config pc;
	int rc;

	memset(&pc, 0, sizeof pc);
	if (s->src->current_position) {
		if ((rc = s->src->current_position(s->srcctx, &pc.floor, s->err, s->errlen)) < 0)
			return rc;
		pc.has_floor = true;
	}
	pc.stream = s->sc->name;
	pc.desc = s->src->desc;
	pc.sink = s->sink;
	pc.sinkctx = s->sinkctx;
	pc.ck = &s->ck;                /* the writer's from here on */
	pc.queue_bytes = s->cfg->queue_bytes;
	pc.status_interval_ms = plan->status_interval_ms;
	pc.signals = &sl_signal_count;
	pc.ops = s->opts->ops;
	pc.mask = s->mask;
	pc.err = s->err;
	pc.errlen = s->errlen;
	return sl_pipe_start(&s->pipe, &pc);
}

/* Reads the tables of bf before streaming, from the snapshot that created
 * the position (*snap) or one of its own, then closes the snapshot (also
 * when bf is empty).  resumed: the stream had a position before.  *stop
 * tells the caller to return the result at once: a failure, or a backfill
 * interrupted by a signal, whose durable part is kept (SL_OK then). */
static int backfill_before(struct stream *s, struct sl_backfill_plan *bf, void **snap, struct sl_snapshot_info *info,
			   bool resumed, bool *stop)
{
	bool interrupted = false;
	int rc;

	*stop = false;
	if (bf->n == 0) {
		if (*snap) {
			s->src->snapshot_close(s->srcctx, *snap);
			*snap = NULL;
		}
		return SL_OK;
	}
	note_backfill(s, bf);
	if (!*snap && (rc = s->src->snapshot(s->srcctx, false, snap, info, s->err, s->errlen)) < 0) {
		*stop = true;
		return stopped_by_signal(s, rc, "taking a snapshot for backfill");
	}
	rc = sl_backfill_run(bf, s->src, s->srcctx, snap, info, resumed, (uint64_t)s->sst.backfill_chunk_rows, s->pipe,
			     &s->ck, s->sc->name, &sl_signal_count, &interrupted, s->err, s->errlen);
	if (rc == SL_OK)
		rc = sl_pipe_sync(s->pipe);
	if (*snap)
		s->src->snapshot_close(s->srcctx, *snap);
	*snap = NULL;
	if (rc < 0) {
		*stop = true;
		if (interrupted && !cancelled()) {
			/* Keep the tables read completely (each was flushed and
			 * checkpointed when done) and the chunks of the
			 * interrupted one up to its resume key; drop what is
			 * not durable, so that the next run, which resumes
			 * after that key (or redoes a table without one),
			 * writes no row twice. */
			bool abandoned;
			rc = sl_pipe_stop(s->pipe, false, &abandoned);
			s->pipe = NULL;
			s->abandoned = abandoned;
			if (rc == SL_OK)
				sl_info("stream \"%s\": backfill interrupted by a signal; it resumes on the next run",
					s->sc->name);
		}
	}
	return rc;
}

/* Streams from the durable position the pipeline holds (the writer owns
 * the checkpoint now), with the backfills of wm read while streaming, until
 * the pipeline stops: SL_OK (stopped, the pipeline drained), SL_ERESTART
 * (the tables changed: what is written is kept, and the caller runs the
 * stream again at once), or a failure. */
static int stream_on(struct stream *s, const struct sl_backfill_plan *wm, struct sl_pipe_stream_opts *so)
{
	const struct sl_stream_config *sc = s->sc;
	struct sl_pipe_hooks hooks;
	struct sl_position from;
	char text[2 * SL_POS_TEXT_MAX];
	int rc;

	if (!sl_pipe_durable(s->pipe, &from, NULL)) {
		snprintf(s->err, s->errlen, "stream \"%s\": no position to stream from", sc->name);
		return SL_EFAIL;
	}
	if ((rc = start_rebackfill(s, wm)) < 0)
		return rc;
	if ((rc = s->src->start(s->srcctx, &from, s->err, s->errlen)) < 0)
		return rc;
	if (s->rb) {
		sl_rebackfill_hooks(s->rb, &hooks);
		so->hooks = &hooks;
	}
	so->start = s->start;
	so->nstart = s->start ? s->nstart : 0;
	so->start_at = s->start_at;
	if (s->opts->ops)
		sl_ops_set_state(s->opts->ops, SL_OPS_STREAMING);
	pos_text(s, &from, text, sizeof text);
	if (sc->slot)
		sl_info("stream \"%s\": streaming from slot \"%s\" at %s", sc->name, sc->slot, text);
	else
		sl_info("stream \"%s\": streaming from %s", sc->name, text);
	rc = sl_pipe_stream(s->pipe, s->src, s->srcctx, so);
	so->hooks = NULL;
	if (rc == SL_ERESTART) {
		bool abandoned;
		int src = sl_pipe_stop(s->pipe, true, &abandoned);
		s->pipe = NULL;
		s->abandoned = abandoned;
		if (src < 0)
			rc = src;
	} else if (rc == SL_OK) {
		struct sl_pipe_stats st;
		bool abandoned;
		sl_pipe_get_stats(s->pipe, &st);
		rc = sl_pipe_stop(s->pipe, true, &abandoned);
		s->pipe = NULL;
		s->abandoned = abandoned;
		if (rc == SL_OK)
			sl_info("stream \"%s\": stopped after %" PRIu64 " changes and %" PRIu64 " backfill rows",
				sc->name, st.changes, st.backfill_rows);
	}
	return rc;
}

int sl_stream_run(struct sl_config *cfg, struct sl_stream_config *sc, const struct sl_run_opts *o,
		  char *err, size_t errlen)
{
	struct stream s;
	struct sl_source_plan plan;
	struct sl_snapshot_info info;
	struct sl_backfill_plan bf = { 0 }, wm = { 0 };
	char **requests = NULL;
	int nrequests = 0;
	struct sl_pipe_stream_opts so;
	void *snap = NULL;
	int *drops = NULL, ndrops = 0;
	bool created = false, had_checkpoint, stop;
	int rc;

	memset(&s, 0, sizeof s);
	memset(&so, 0, sizeof so);
	s.cfg = cfg;
	s.sc = sc;
	s.opts = o;
	s.err = err;
	s.errlen = errlen;
	if (!(s.src = sl_stream_source(sc, err, errlen)))
		return SL_ECONFIG;
	sl_stream_source_view(cfg, sc, &s.sst);
	s.hooks.payload = &s;
	s.hooks.stop = hook_stop;
	s.hooks.waiting = hook_waiting;
	s.hooks.replaced = hook_replaced;
	s.hooks.covered = hook_covered;
	s.sst.hooks = &s.hooks;
	if (sl_mkdir_p(cfg->state_dir) < 0) {
		snprintf(err, errlen, "could not create state_dir \"%s\": %s", cfg->state_dir, sl_strerror(errno));
		return SL_EFAIL;
	}
	if ((rc = sl_ckpt_load(&s.ck, s.src->desc, cfg->state_dir, sc->name, err, errlen)) < 0) {
		sl_stream_ckpt_hint(&s.sst, s.ck.path, rc, err, errlen);
		sl_ckpt_free(&s.ck);
		return rc;  /* none of these is worth a retry */
	}
	sl_runstate_wait_clear(cfg->state_dir, sc->name);  /* left by an agent that was killed */
	if (o->ops) {
		atomic_store(&o->ops->expect_position, s.ck.exists && s.ck.has_position && !s.ck.reset);
		if (s.ck.last_source_ts_us && !atomic_load(&o->ops->durable_source_ts_us))
			atomic_store(&o->ops->durable_source_ts_us, s.ck.last_source_ts_us);
	}
	if ((rc = sl_stream_ckpt_slot(&s.ck, sc, err, errlen)) < 0)
		goto out;
	snprintf(s.ck.slot, sizeof s.ck.slot, "%s", sc->slot ? sc->slot : "");
	had_checkpoint = s.ck.exists;
	/* Tables followed before may have been dropped since: their exact
	 * names in `tables` are no typo. */
	if (!(s.known = calloc((size_t)s.ck.ntables + 1, sizeof *s.known))) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	for (int i = 0; i < s.ck.ntables; i++)
		s.known[i] = s.ck.tables[i].name;
	s.sst.known_tables = s.known;
	if ((rc = open_sink(&s)) < 0)
		goto out;
	if ((rc = s.src->open(&s.srcctx, sc->source, &s.sst, err, errlen)) < 0) {
		s.srcctx = NULL;
		goto out;
	}
	if ((rc = s.src->tables(s.srcctx, &s.tables, &s.ntables, err, errlen)) < 0)
		goto out;
	/* The tables' versions hold all DDL logged before this position (see
	 * sl_pipe_stream_opts.start). */
	if (s.src->current_position && s.src->columns_changed &&
	    (rc = s.src->current_position(s.srcctx, &s.start_at, err, errlen)) < 0)
		goto out;
	if ((rc = sl_stream_mask_new(sc, &s.mask, err, errlen)) < 0 ||
	    (s.mask && (rc = sl_stream_mask_tables(sc, s.mask, s.tables, s.ntables, NULL, err, errlen)) < 0))
		goto out;
	if ((rc = register_tables(&s, &drops, &ndrops)) < 0 || (rc = note_rules(&s)) < 0)
		goto out;
	if ((rc = take_requests(&s, &requests, &nrequests)) < 0)
		goto out;
	if ((rc = take_position(&s, &plan, &so, &snap, &info, &created)) < 0)
		goto out;
	if ((rc = save_ckpt(&s)) < 0)
		goto out;
	remove_requests(&s, requests, nrequests);  /* the checkpoint holds them now */
	if (sl_backfill_plan(&bf, &s.ck, s.tables, s.ntables, sc->name) < 0 ||
	    (bf.n > 0 && !(wm.items = calloc((size_t)bf.n, sizeof *wm.items)))) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	split_plan(&s, &bf, &wm, created);
	if ((rc = start_pipe(&s, &plan)) < 0)
		goto out;
	if ((rc = mark_drops(&s, drops, ndrops)) < 0)
		goto out;
	if ((rc = backfill_before(&s, &bf, &snap, &info, had_checkpoint || !created, &stop)) < 0 || stop)
		goto out;
	if (draining()) {
		rc = SL_OK;
		goto out;
	}
	rc = stream_on(&s, &wm, &so);
out:
	if (snap)
		s.src->snapshot_close(s.srcctx, snap);
	if (o->ops)
		sl_ops_source_run_end(o->ops);
	free(drops);
	sl_backfill_plan_free(&bf);
	sl_backfill_plan_free(&wm);
	for (int i = 0; i < nrequests; i++)
		free(requests[i]);
	free(requests);
	stream_free(&s);
	return rc;
}
