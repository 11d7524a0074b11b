/*
 * backfill/backfill.c: backfill orchestration (see backfill.h).
 */
#include "backfill/backfill.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

/* A table backfilled with fewer rows than this is not waited for before the
 * next one is read, and one estimated to have fewer joins a group
 * (sl_backfill_run). */
#define SMALL_TABLE_ROWS 10000
/* The most tables in a group: a crash redoes the group's tables not yet
 * durable, and each checkpoint save writes every table's entry. */
#define GROUP_TABLES 100
_Static_assert(GROUP_TABLES <= SL_PIPE_GROUP_MAX, "a group fits in one pipeline event");

static const struct sl_table *find_table(struct sl_table *const *tables, int n, const struct sl_ckpt_table *e)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(e->ns, tables[i]->ns) && !strcmp(e->table, tables[i]->name))
			return tables[i];
	return NULL;
}

int sl_backfill_plan(struct sl_backfill_plan *plan, const struct sl_checkpoint *ck,
		     struct sl_table *const *tables, int ntables, const char *stream)
{
	memset(plan, 0, sizeof *plan);
	if (ck->ntables == 0)
		return 0;
	plan->items = calloc((size_t)ck->ntables, sizeof *plan->items);
	if (!plan->items)
		return -1;
	for (int i = 0; i < ck->ntables; i++) {
		const struct sl_ckpt_table *e = &ck->tables[i];
		const struct sl_table *t;
		if (e->state != SL_BF_PENDING && e->state != SL_BF_RUNNING)
			continue;
		t = find_table(tables, ntables, e);
		if (!t) {
			sl_warn("stream \"%s\": table %s is in the checkpoint but no longer selected; skipping its backfill",
				stream, e->name);
			continue;
		}
		plan->items[plan->n].idx = i;
		plan->items[plan->n].table = t;
		plan->items[plan->n].running = e->state == SL_BF_RUNNING;
		plan->items[plan->n].method = e->method;
		if (e->state == SL_BF_RUNNING && e->resume_key && sl_table_has_key(t)) {
			if (!(plan->items[plan->n].after = strdup(e->resume_key)))
				return -1;
			plan->items[plan->n].rows0 = e->rows;
			plan->items[plan->n].chunks0 = e->chunks;
		}
		plan->n++;
	}
	return 0;
}

void sl_backfill_plan_free(struct sl_backfill_plan *plan)
{
	for (int i = 0; i < plan->n; i++)
		free(plan->items[i].after);
	free(plan->items);
	memset(plan, 0, sizeof *plan);
}

struct row_ctx {
	struct sl_pipe *pipe;
	const atomic_int *signals;
	const struct sl_table *t;
	const struct sl_backfill_item *it;
	uint64_t chunks;       /* chunks complete so far, with the item's earlier ones */
	bool interrupted;
	char *err;
	size_t errlen;
};

static int on_row(void *payload, const struct sl_table *t, const struct sl_value *vals)
{
	struct row_ctx *r = payload;   /* or the struct run it begins */

	if (r->signals && atomic_load(r->signals) >= 1) {  /* a first or a second signal */
		snprintf(r->err, r->errlen, "backfill of \"%s\".\"%s\" interrupted by a signal", t->ns, t->name);
		r->interrupted = true;
		return -1;
	}
	/* The pipe's message, if any, is already in err (pc.err). */
	return sl_pipe_backfill_row(r->pipe, t, vals) < 0 ? -1 : 0;
}

/* The chunked read's progress: every row up to upto was pushed; the writer
 * checkpoints it once those rows are durable. */
static int on_progress(void *payload, const char *upto, uint64_t rows)
{
	struct row_ctx *r = payload;

	r->chunks++;
	return sl_pipe_backfill_progress(r->pipe, r->it->idx, upto, r->it->rows0 + rows, r->chunks) < 0 ? -1 : 0;
}

/* Reads one table of the plan, in chunks when the source can. */
static int read_table(const struct sl_source_ops *src, void *srcctx, void *snap, const struct sl_backfill_item *it,
		      uint64_t chunk_rows, struct row_ctx *r, uint64_t *rows, char *err, size_t errlen)
{
	struct sl_chunked_read o;

	r->t = it->table;
	r->it = it;
	r->chunks = it->chunks0;
	if (!src->snapshot_read_chunked)
		return src->snapshot_read(srcctx, snap, it->table, on_row, r, rows, err, errlen);
	memset(&o, 0, sizeof o);
	o.after = it->after;
	o.chunk_rows = chunk_rows;
	o.progress = on_progress;
	return src->snapshot_read_chunked(srcctx, snap, it->table, &o, on_row, r, rows, err, errlen);
}

/* Locks every table of the plan in the snapshot at once, before the first
 * read (sl_source_ops.snapshot_lock), so that none changes unseen by the
 * snapshot while an earlier one is read. */
static int lock_tables(const struct sl_backfill_plan *plan, const struct sl_source_ops *src, void *srcctx,
		       void *snap, char *err, size_t errlen)
{
	const struct sl_table **tables;
	int rc;

	if (!src->snapshot_lock || plan->n == 0)
		return SL_OK;
	if (!(tables = calloc((size_t)plan->n, sizeof *tables))) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	for (int i = 0; i < plan->n; i++)
		tables[i] = plan->items[i].table;
	rc = src->snapshot_lock(srcctx, snap, tables, plan->n, err, errlen);
	free(tables);
	return rc;
}

/* True when item it may be backfilled in a group of small tables: read
 * from the start, and not known to be large (a table never analyzed has no
 * estimate: a large one then costs only its group's redo after a crash). */
static bool groupable(const struct sl_backfill_item *it)
{
	return !it->after && it->table->est_rows < SMALL_TABLE_ROWS;
}

/* One run of sl_backfill_run: what its items share.  Its row context comes
 * first, so that a run is on_row's payload too (snapshot_read_tables
 * passes one payload to every callback). */
struct run {
	struct row_ctx r;
	const struct sl_backfill_plan *plan;
	const struct sl_source_ops *src;
	void *srcctx, *snap;
	const struct sl_snapshot_info *info;
	bool marker;
	struct sl_pipe *pipe;
	const struct sl_checkpoint *ck;
	const char *stream;
	char pos[2 * SL_POS_TEXT_MAX];
	int first;       /* the group read by snapshot_read_tables starts at this item */
	int rc;          /* a callback's failure, for the source's -1 */
	int64_t t0;      /* when the item's read started */
};

/* Item it's backfill starts: its start is pushed and logged. */
static int item_start(struct run *x, const struct sl_backfill_item *it)
{
	const char *name = x->ck->tables[it->idx].name;
	int rc;

	if ((rc = sl_pipe_backfill_start(x->pipe, it->idx, it->table, x->info, x->marker && !it->after,
					 it->after != NULL)) < 0)
		return rc;
	if (it->after)
		sl_info("stream \"%s\": backfilling %s at %s, resuming after its last durable chunk (%" PRIu64
			" rows, %" PRIu64 " chunks durable)", x->stream, name, x->pos, it->rows0, it->chunks0);
	else
		sl_info("stream \"%s\": backfilling %s at %s", x->stream, name, x->pos);
	sl_log_set_table(name);   /* until it is read, or for the error that stops it */
	x->t0 = sl_mono_ms();
	return SL_OK;
}

/* Item it was read (rows rows): its done is pushed and logged.  Done once
 * durable: the figure then covers the writer too (encoding, compression,
 * flush).  A small table is not waited for: the writer makes it durable in
 * order while the next one is read (a group's members with one flush after
 * its last), and the last sync of sl_backfill_run covers it. */
static int item_done(struct run *x, const struct sl_backfill_item *it, uint64_t rows)
{
	int64_t ms;
	int rc;

	sl_log_set_table(NULL);
	if ((rc = sl_pipe_backfill_done(x->pipe, it->idx, it->table, it->rows0 + rows, NULL)) < 0 ||
	    (rows >= SMALL_TABLE_ROWS && (rc = sl_pipe_sync(x->pipe)) < 0))
		return rc;
	ms = sl_mono_ms() - x->t0;
	sl_info("stream \"%s\": backfilled %s: %" PRIu64 " rows read in %.2f s (%.0f rows/s)", x->stream,
		x->ck->tables[it->idx].name, rows, (double)ms / 1000.0, (double)rows * 1000.0 / (double)(ms > 0 ? ms : 1));
	return SL_OK;
}

static int group_start(void *payload, int i)
{
	struct run *x = payload;
	const struct sl_backfill_item *it = &x->plan->items[x->first + i];

	x->r.t = it->table;
	x->r.it = it;
	x->r.chunks = it->chunks0;
	return (x->rc = item_start(x, it)) < 0 ? -1 : 0;
}

static int group_done(void *payload, int i, uint64_t rows)
{
	struct run *x = payload;

	return (x->rc = item_done(x, &x->plan->items[x->first + i], rows)) < 0 ? -1 : 0;
}

/* From item first on, the groupable items (at most GROUP_TABLES) are
 * pushed as one group (sl_pipe_backfill_group) when there are two or
 * more, and read together when the source can (snapshot_read_tables: over
 * the snapshot's connections, handed on in order); *end is set past the
 * items it covers (past first when none), *read past those it read. */
static int push_group(struct run *x, int first, int *end, int *read)
{
	static const struct sl_table_reads reads = { .start = group_start, .done = group_done };
	const struct sl_backfill_plan *plan = x->plan;
	int idx[GROUP_TABLES];
	const struct sl_table *tables[GROUP_TABLES];
	int n = 0, rc;

	*read = first;
	while (first + n < plan->n && n < GROUP_TABLES && groupable(&plan->items[first + n])) {
		idx[n] = plan->items[first + n].idx;
		tables[n] = plan->items[first + n].table;
		n++;
	}
	*end = first + (n > 1 ? n : 1);
	if (n <= 1)
		return SL_OK;
	if ((rc = sl_pipe_backfill_group(x->pipe, idx, tables, n, x->info, x->marker)) < 0 ||
	    !x->src->snapshot_read_tables)
		return rc;
	x->first = first;
	x->rc = SL_OK;
	rc = x->src->snapshot_read_tables(x->srcctx, x->snap, tables, n, &reads, on_row, x, x->r.err, x->r.errlen);
	if (rc < 0)
		return x->rc < 0 ? x->rc : rc;
	*read = *end;
	return SL_OK;
}

/* Every row is read: the snapshot goes (see sl_backfill_run). */
static void release_snapshot(struct run *x, void **snap)
{
	if (*snap) {
		x->src->snapshot_close(x->srcctx, *snap);
		*snap = NULL;
		x->snap = NULL;
	}
}

int sl_backfill_run(const struct sl_backfill_plan *plan, const struct sl_source_ops *src, void *srcctx,
		    void **snap, const struct sl_snapshot_info *info, bool marker, uint64_t chunk_rows,
		    struct sl_pipe *pipe, const struct sl_checkpoint *ck, const char *stream, const atomic_int *signals,
		    bool *interrupted, char *err, size_t errlen)
{
	struct run x = {
		.r = { .pipe = pipe, .signals = signals, .err = err, .errlen = errlen },
		.plan = plan, .src = src, .srcctx = srcctx, .snap = *snap, .info = info, .marker = marker,
		.pipe = pipe, .ck = ck, .stream = stream,
	};
	int group_end = 0;  /* the items before it were pushed in a group, or alone */
	int read_end = 0;   /* the items before it were read with their group */
	int rc = SL_OK;

	*interrupted = false;
	if (src->desc->pos_encode(&info->pos, x.pos, sizeof x.pos) < 0)
		snprintf(x.pos, sizeof x.pos, "?");
	if ((rc = lock_tables(plan, src, srcctx, *snap, err, errlen)) < 0)
		return rc;
	for (int i = 0; i < plan->n; i++) {
		const struct sl_backfill_item *it = &plan->items[i];
		uint64_t rows = 0;

		if (i >= group_end && (rc = push_group(&x, i, &group_end, &read_end)) < 0)
			break;
		if (i < read_end)
			continue;
		if ((rc = item_start(&x, it)) < 0 ||
		    (rc = read_table(src, srcctx, *snap, it, chunk_rows, &x.r, &rows, err, errlen)) < 0)
			break;
		if (i == plan->n - 1)
			release_snapshot(&x, snap);
		if ((rc = item_done(&x, it, rows)) < 0)
			break;
	}
	if (rc < 0) {
		*interrupted = x.r.interrupted;
		return rc;
	}
	release_snapshot(&x, snap);
	return plan->n > 0 ? sl_pipe_sync(pipe) : SL_OK;
}
