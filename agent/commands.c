/*
 * agent/commands.c: the commands that inspect or prepare a stream without
 * running it: `sluice check`, `sluice verify`, `sluice status` and `sluice
 * backfill`.  Each
 * reaches the source through its interface (check and probe open their own
 * connections), so they work whether or not an agent runs the stream.
 */
#include "agent/commands.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/checkpoint.h"
#include "agent/lock.h"
#include "agent/masking.h"
#include "backfill/rebackfill.h"
#include "agent/runstate.h"
#include "agent/stream.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "ops/alerts.h"
#include "ops/metrics.h"
#include "sinks/sink.h"

/* The stream's tables as its source lists them now, through a connection
 * of their own (*ctx, closed by close_tables() with them).  0, or a
 * negative enum sl_status with a message in err. */
static int open_tables(struct sl_stream_config *sc, const struct sl_source_ops *src,
		       const struct sl_source_stream *sst, void **ctx, struct sl_table ***tables, int *n,
		       char *err, size_t errlen)
{
	int rc;

	*ctx = NULL;
	*tables = NULL;
	*n = 0;
	if ((rc = src->open(ctx, sc->source, sst, err, errlen)) < 0) {
		*ctx = NULL;
		return rc;
	}
	return src->tables(*ctx, tables, n, err, errlen);
}

static void close_tables(const struct sl_source_ops *src, void *ctx, struct sl_table **tables, int n)
{
	for (int i = 0; i < n; i++)
		sl_table_free(tables[i]);
	free(tables);
	if (ctx)
		src->close(ctx);
}

/* Says, for each table whose column rules changed since its output was
 * written (the checkpoint's record of them), what run will do about it. */
static int check_rule_changes(struct sl_stream_config *sc, const struct sl_mask *m, struct sl_table **tables, int n,
			      const struct sl_checkpoint *ck)
{
	struct sl_buf b;
	int rc = SL_OK;

	sl_buf_init(&b, 0);
	for (int i = 0; i < n; i++) {
		const struct sl_ckpt_table *e = sl_ckpt_find(ck, tables[i]->ns, tables[i]->name);
		if (!e || !e->mask || e->state == SL_BF_PENDING)
			continue;
		sl_buf_reset(&b);
		if (sl_stream_mask_rules(m, tables[i], &b) < 0 || sl_buf_putc(&b, '\0') < 0) {
			rc = SL_EFAIL;
			break;
		}
		if (strcmp(e->mask, b.data))
			printf("stream %s: table %s.%s: the column rules changed since its output was written (were "
			       "\"%s\", now \"%s\"): run writes a new table version; the records written before keep "
			       "what the old rules wrote until the table is backfilled again (sluice backfill --table)\n",
			       sc->name, tables[i]->ns, tables[i]->name, e->mask[0] ? e->mask : "none",
			       b.data[0] ? b.data : "none");
	}
	sl_buf_free(&b);
	return rc;
}

/* `sluice check`'s part for the column rules: the columns each table has
 * excluded and masked, and SL_ECONFIG for a rule that matches nothing or
 * excludes a key column; and the tables whose rules changed since their
 * output was written. */
static int check_masking(struct sl_stream_config *sc, const struct sl_source_ops *src,
			 const struct sl_source_stream *sst, const struct sl_checkpoint *ck, char *err, size_t errlen)
{
	struct sl_table **tables;
	struct sl_mask *m = NULL;
	bool recorded = false;
	void *ctx;
	int n, rc;

	for (int k = 0; k < ck->ntables && !recorded; k++)
		recorded = ck->tables[k].mask && ck->tables[k].mask[0];
	if ((rc = sl_stream_mask_new(sc, &m, err, errlen)) < 0 || (!m && !recorded))
		return rc;
	if ((rc = open_tables(sc, src, sst, &ctx, &tables, &n, err, errlen)) == SL_OK && m)
		rc = sl_stream_mask_tables(sc, m, tables, n, stdout, err, errlen);
	if (rc == SL_OK && (rc = check_rule_changes(sc, m, tables, n, ck)) < 0)
		snprintf(err, errlen, "out of memory");
	close_tables(src, ctx, tables, n);
	sl_mask_free(m);
	return rc;
}

int sl_stream_check(struct sl_config *cfg, struct sl_stream_config *sc, char *err, size_t errlen)
{
	const struct sl_source_ops *src = sl_stream_source(sc, err, errlen);
	struct sl_source_stream sst;
	struct sl_source_resume resume;
	struct sl_checkpoint ck;
	char **known;
	int rc;

	if (!src)
		return SL_ECONFIG;
	if (sc->destination->ops->check) {
		struct sl_sink_stream st = {
			.name = sc->name, .mode = sc->write_mode, .destination = sc->destination->name,
			.state_dir = cfg->state_dir,
		};
		if ((rc = sc->destination->ops->check(sc->destination->conf, &st, stdout, err, errlen)) < 0)
			return rc;
	}
	sl_stream_source_view(cfg, sc, &sst);
	sst.agent_pid = sl_stream_lock_holder(cfg->state_dir, sc->name);
	/* The position holder is judged against the checkpoint, as run judges it. */
	if ((rc = sl_ckpt_load(&ck, src->desc, cfg->state_dir, sc->name, err, errlen)) < 0) {
		sl_stream_ckpt_hint(&sst, ck.path, rc, err, errlen);
		sl_ckpt_free(&ck);
		return rc;
	}
	memset(&resume, 0, sizeof resume);
	resume.has_position = ck.exists && ck.has_position;
	resume.reset = ck.reset;
	resume.durable = ck.durable;
	resume.checkpoint_path = ck.path;
	/* The tables followed before, as run knows them (a table that left the
	 * publication since is told apart from a new one). */
	if (!(known = calloc((size_t)ck.ntables + 1, sizeof *known))) {
		snprintf(err, errlen, "out of memory");
		sl_ckpt_free(&ck);
		return SL_EFAIL;
	}
	for (int i = 0; i < ck.ntables; i++)
		known[i] = ck.tables[i].name;
	sst.known_tables = known;
	if ((rc = sl_stream_ckpt_slot(&ck, sc, err, errlen)) == SL_OK)
		rc = src->check(sc->source, &sst, &resume, stdout, err, errlen);
	if (rc == SL_OK)
		rc = check_masking(sc, src, &sst, &ck, err, errlen);
	sst.known_tables = NULL;
	free(known);      /* names owned by ck */
	sl_ckpt_free(&ck);
	return rc;
}

int sl_stream_verify(struct sl_config *cfg, struct sl_stream_config *sc, char *err, size_t errlen)
{
	struct sl_sink_stream st = {
		.name = sc->name, .mode = sc->write_mode, .destination = sc->destination->name,
		.state_dir = cfg->state_dir,
	};

	if (!sc->destination->ops->verify) {
		snprintf(err, errlen, "stream \"%s\": destination \"%s\" (type %s) keeps no manifests to verify against",
			 sc->name, sc->destination->name, sc->destination->type);
		return SL_ECONFIG;
	}
	return sc->destination->ops->verify(sc->destination->conf, &st, stdout, err, errlen);
}

int sl_stream_compact(struct sl_config *cfg, struct sl_stream_config *sc, const char *table, char *err,
		      size_t errlen)
{
	struct sl_sink_stream st = {
		.name = sc->name, .mode = sc->write_mode, .destination = sc->destination->name,
		.state_dir = cfg->state_dir,
	};
	const char *dot = table ? strchr(table, '.') : NULL;
	char *ns = NULL, *object = NULL;
	int rc;

	if (!sc->destination->ops->compact ||
	    (sc->write_mode != SL_WRITE_MERGE && !(sc->destination->ops->caps & SL_SINK_CAP_COMPACT_APPEND))) {
		snprintf(err, errlen, "stream \"%s\": only merge-mode output in a file destination, or an iceberg "
			 "destination, is compacted (its "
			 "write_mode is %s, destination \"%s\" is of type %s)", sc->name,
			 sc->write_mode == SL_WRITE_MERGE ? "merge" : "append", sc->destination->name,
			 sc->destination->type);
		return SL_ECONFIG;
	}
	if (table && (!dot || dot == table || !dot[1])) {
		snprintf(err, errlen, "--table \"%s\" is not SCHEMA.TABLE", table);
		return SL_ECONFIG;
	}
	if (table && (!(ns = strndup(table, (size_t)(dot - table))) || !(object = sl_object_name(ns, dot + 1)))) {
		free(ns);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	rc = sc->destination->ops->compact(sc->destination->conf, &st, object, stdout, err, errlen);
	free(ns);
	free(object);
	return rc;
}

/* The alerts one look at the source raises, by the agent's rules
 * (ops/alerts.c) with the stream's thresholds: a single sample, so each
 * alert starts fresh and is evaluated as often as its fire_after asks.
 * What only a running agent can tell (how long the slot was inactive,
 * whether the durable position is stalled, growth) stays unknown here; the
 * agent's own alerts come from its run file. */
static void status_alerts(const struct sl_stream_config *sc, const struct sl_source_ops *src, bool probe_ok,
			  const char *probe_error, const struct sl_source_status *si, const struct sl_checkpoint *ck,
			  json_t *alerts)
{
	struct sl_alert al[SL_AL_COUNT];
	struct sl_alert_transition tr[SL_AL_COUNT];
	struct sl_alert_inputs in;
	struct sl_alert_limits lim;
	int n = 0;
	int64_t now = sl_now_us();

	memset(al, 0, sizeof al);
	memset(&in, 0, sizeof in);
	memset(&lim, 0, sizeof lim);
	in.probe_ok = probe_ok;
	in.probe_error = probe_error;
	in.exists = si->exists;
	in.expected = ck->exists && ck->has_position && !ck->reset;
	in.hold = si->hold;
	in.hold_word = si->hold_word;
	in.hold_label = src->hold_label;
	in.lag_bytes = si->lag_bytes;
	in.retained_bytes = si->retained_bytes;
	in.inactive_s = -1;
	in.time_to_purge_s = si->log_known ? si->time_to_purge_s : -1;
	in.freshness_s = -1;
	in.stalled_s = -1;
	in.caught_up_s = -1;
	lim.lag_warn_bytes = sc->lag_warn_bytes;
	lim.lag_critical_bytes = sc->lag_critical_bytes;
	lim.retained_warn_bytes = sc->retained_wal_warn_bytes;
	lim.retained_critical_bytes = sc->retained_wal_critical_bytes;
	lim.purge_warn_s = sc->log_purge_warn_seconds;
	for (int pass = 0; pass < 2; pass++)
		sl_alerts_evaluate(al, &in, &lim, &sl_alert_default_policy, now, tr, &n);
	for (int id = 0; id < SL_AL_COUNT; id++) {
		const struct sl_alert_def *d = sl_alert_def((enum sl_alert_id)id);
		if (!al[id].firing)
			continue;
		json_array_append_new(alerts, json_pack("{s:s, s:s, s:s, s:s}", "alert", d->name, "severity",
							sl_alert_severity_name(d->severity), "message", al[id].message,
							"source", "status"));
	}
}

/* The source's own figures (struct sl_source_figure), as they are. */
static json_t *status_figures(const struct sl_source_status *si)
{
	json_t *fig = json_object();

	for (int i = 0; i < si->nfigures; i++) {
		const struct sl_source_figure *f = &si->figures[i];
		if (f->is_text)
			json_object_set_new(fig, f->name, f->text[0] ? json_string(f->text) : json_null());
		else
			json_object_set_new(fig, f->name, f->num >= 0 ? json_integer(f->num) : json_null());
	}
	return fig;
}

/* The source's view of the position holder: the stable fields, and the
 * source's own figures in an object named after its type (doc/
 * operations.md, "sluice status"). */
static void status_slot(const struct sl_source_ops *src, const struct sl_source_status *si, json_t *o)
{
	json_t *slot = json_object();

	json_object_set_new(slot, "exists", json_boolean(si->exists));
	if (si->exists) {
		/* What the server does not know (a lost slot keeps no restart
		 * position; a slot being created has no confirmed one yet) is null. */
		json_object_set_new(slot, "state", json_string(sl_hold_name(si->hold)));
		json_object_set_new(slot, "active", json_boolean(si->active));
		json_object_set_new(slot, "confirmed_position", si->confirmed[0] ? json_string(si->confirmed) : json_null());
		json_object_set_new(slot, "lag_bytes", si->lag_bytes >= 0 ? json_integer(si->lag_bytes) : json_null());
		json_object_set_new(slot, "retained_wal_bytes",
				    si->retained_bytes >= 0 ? json_integer(si->retained_bytes) : json_null());
		json_object_set_new(slot, src->type, status_figures(si));
	}
	json_object_set_new(o, "slot_status", slot);
	if (si->log_known) {
		/* a binlog source: the log the server keeps, and how long it keeps it */
		json_t *bl = json_object();
		json_object_set_new(bl, "head", si->head[0] ? json_string(si->head) : json_null());
		json_object_set_new(bl, "files", si->log_files >= 0 ? json_integer(si->log_files) : json_null());
		json_object_set_new(bl, "bytes", si->log_bytes >= 0 ? json_integer(si->log_bytes) : json_null());
		json_object_set_new(bl, "expire_seconds", si->retention_s >= 0 ? json_integer(si->retention_s) : json_null());
		json_object_set_new(bl, "needed_file", si->restart[0] ? json_string(si->restart) : json_null());
		json_object_set_new(bl, "needed_file_age_seconds",
				    si->oldest_needed_age_s >= 0 ? json_integer(si->oldest_needed_age_s) : json_null());
		json_object_set_new(bl, "time_to_purge_seconds",
				    si->time_to_purge_s >= 0 ? json_integer(si->time_to_purge_s) : json_null());
		json_object_set_new(o, "binlog", bl);
	}
}

/* Adds the agent's firing alerts to alerts, where status did not raise the
 * same one itself (the agent's entry has since_us). */
static void merge_agent_alerts(json_t *alerts, json_t *agent_alerts)
{
	size_t i, k;
	json_t *a, *b;

	json_array_foreach(agent_alerts, i, a) {
		const char *name = json_string_value(json_object_get(a, "alert"));
		bool dup = false;
		json_array_foreach(alerts, k, b) {
			if (name && !strcmp(name, json_string_value(json_object_get(b, "alert")) ?: "")) {
				json_object_set(b, "since_us", json_object_get(a, "since_us"));
				json_object_set_new(b, "source", json_string("agent"));
				dup = true;
			}
		}
		if (!dup) {
			json_t *c = json_deep_copy(a);
			json_object_set_new(c, "source", json_string("agent"));
			json_array_append_new(alerts, c);
		}
	}
}

/* Backfill progress of a table as the agent reports it: rows, estimate,
 * percent and ETA (null when unknown).  ck_done: the checkpoint, which is
 * newer than the run file (rewritten once per probe), says the backfill is
 * done, with ck_rows rows: then so is the progress. */
static json_t *progress(json_t *bf, int64_t now, bool ck_done, json_int_t ck_rows)
{
	json_int_t rows = json_integer_value(json_object_get(bf, "rows"));
	json_t *est = json_object_get(bf, "estimated_rows"), *t0 = json_object_get(bf, "started_us");
	const char *st = json_string_value(json_object_get(bf, "state"));
	json_t *pct = json_null(), *eta = json_null();

	if (ck_done)
		return json_pack("{s:s, s:I, s:O?, s:i, s:n}", "state", "done", "rows", ck_rows, "estimated_rows", est,
				 "percent", 100, "eta_seconds");
	if (st && !strcmp(st, "running") && json_is_integer(est) && json_integer_value(est) > 0) {
		json_int_t e = json_integer_value(est);
		int p = (int)((double)rows * 100.0 / (double)e);
		json_decref(pct);
		pct = json_integer(p > 99 ? 99 : p);
		if (json_is_integer(t0) && rows > 0 && now > json_integer_value(t0)) {
			double rate = (double)rows / ((double)(now - json_integer_value(t0)) / 1e6);
			json_decref(eta);
			eta = json_integer(rows < e ? (json_int_t)((double)(e - rows) / rate) : 0);
		}
	} else if (st && !strcmp(st, "done")) {
		json_decref(pct);
		pct = json_integer(100);
	}
	return json_pack("{s:O?, s:I, s:O?, s:o, s:o}", "state", json_object_get(bf, "state"), "rows", rows,
			 "estimated_rows", est, "percent", pct, "eta_seconds", eta);
}

/* Whether the live agent that wrote run still answers: the probe thread
 * rewrites the run file after every pass, so a file older than 2 ×
 * probe_interval + 5 s means that thread (or the whole process: SIGSTOP, a
 * deadlock, swap) has stopped.  Sets "agent_responding",
 * "run_file_age_seconds" and "responding_limit_seconds" in o. */
static void status_responding(json_t *o, json_t *run, const struct sl_config *cfg)
{
	json_t *iv = json_object_get(run, "probe_interval_seconds");
	int64_t interval = json_is_integer(iv) ? (int64_t)json_integer_value(iv) : (int64_t)cfg->probe_interval;
	int64_t limit = SL_OPS_STALE_S(interval);
	int64_t age_us = sl_now_us() - (int64_t)json_integer_value(json_object_get(run, "updated_us"));

	if (age_us < 0)
		age_us = 0;
	json_object_set_new(o, "agent_responding", json_boolean(age_us <= limit * 1000000));
	json_object_set_new(o, "run_file_age_seconds", json_integer((json_int_t)(age_us / 1000000)));
	json_object_set_new(o, "responding_limit_seconds", json_integer((json_int_t)limit));
}

/* What the agent's run file adds: its state, errors, queue, flushes,
 * heartbeats, alerts and their history, and each table's counters and
 * backfill progress.  live: the process that wrote it still holds the
 * stream's lock. */
static void status_run(json_t *o, json_t *run, bool live, json_t *tabs, json_t *alerts)
{
	int64_t now = sl_now_us();
	const char *key;
	json_t *v;

	if (!run) {
		json_object_set_new(o, "state", json_string("stopped"));
		json_object_set_new(o, "agent", json_null());
		json_object_set_new(o, "last_error", json_null());
		return;
	}
	json_object_set(o, "last_error", json_object_get(run, "last_error"));
	json_object_set(o, "retries", json_object_get(run, "retries"));
	json_object_set(o, "alert_history", json_object_get(run, "alert_history"));
	if (!live) {
		/* A run that ended: how (a kill -9 leaves "streaming" behind: stopped). */
		const char *st = json_string_value(json_object_get(run, "state"));
		json_object_set_new(o, "state", json_string(st && !strcmp(st, "failed") ? "failed" : "stopped"));
		json_object_set_new(o, "agent", json_null());
		return;
	}
	json_object_set(o, "state", json_object_get(run, "state"));
	{
		json_t *a = json_deep_copy(run);
		json_object_del(a, "tables");
		json_object_del(a, "alert_history");
		json_object_set_new(o, "agent", a);
	}
	if (json_is_integer(json_object_get(run, "freshness_seconds")))
		json_object_set(o, "freshness_seconds", json_object_get(run, "freshness_seconds"));
	merge_agent_alerts(alerts, json_object_get(run, "alerts_firing"));
	json_object_foreach(json_object_get(run, "tables"), key, v) {
		json_t *t = json_object_get(tabs, key), *bf = json_object_get(v, "backfill");
		if (!t) {
			t = json_object();
			json_object_set_new(t, "backfill", json_string("pending"));
			json_object_set_new(t, "rows", json_integer(0));
			json_object_set_new(tabs, key, t);
		}
		json_object_set(t, "changes", json_object_get(v, "changes"));
		if (bf)
			json_object_set_new(t, "progress", progress(bf, now, !strcmp(json_string_value(json_object_get(
				t, "backfill")) ?: "", "done"), json_integer_value(json_object_get(t, "rows"))));
	}
}

int sl_stream_status(struct sl_config *cfg, struct sl_stream_config *sc, void *out_json, char *err, size_t errlen)
{
	const struct sl_source_ops *src = sl_stream_source(sc, err, errlen);
	json_t *o = out_json, *tabs, *alerts, *undetermined, *run;
	struct sl_checkpoint ck;
	struct sl_source_stream sst;
	struct sl_source_status si;
	char pos[2 * SL_POS_TEXT_MAX];
	bool probe_ok, alive = false, live;
	long pid;
	int rc;

	if (!src)
		return SL_ECONFIG;
	if ((rc = sl_ckpt_load(&ck, src->desc, cfg->state_dir, sc->name, err, errlen)) < 0) {
		sl_stream_source_view(cfg, sc, &sst);
		sl_stream_ckpt_hint(&sst, ck.path, rc, err, errlen);
		sl_ckpt_free(&ck);
		return rc;
	}
	tabs = json_object();
	alerts = json_array();
	undetermined = json_array();
	json_object_set_new(o, "stream", json_string(sc->name));
	json_object_set_new(o, "source", json_string(sc->source->name));
	json_object_set_new(o, "source_type", json_string(src->type));
	json_object_set_new(o, "destination", json_string(sc->destination->name));
	json_object_set_new(o, "slot", sc->slot ? json_string(sc->slot) : json_null());
	json_object_set_new(o, "checkpoint", ck.exists ? json_string(ck.path) : json_null());
	if (src->desc->pos_encode(&ck.durable, pos, sizeof pos) < 0)
		snprintf(pos, sizeof pos, "?");
	json_object_set_new(o, "durable_position", ck.exists ? json_string(pos) : json_null());
	/* The name this field had when PostgreSQL was the only source. */
	json_object_set_new(o, "durable_lsn", ck.exists ? json_string(pos) : json_null());
	json_object_set_new(o, "last_source_time_us", ck.last_source_ts_us ? json_integer(ck.last_source_ts_us) : json_null());
	for (int i = 0; i < ck.ntables; i++) {
		json_t *t = json_object();
		json_object_set_new(t, "backfill", json_string(sl_bf_state_name(ck.tables[i].state)));
		json_object_set_new(t, "rows", json_integer((json_int_t)ck.tables[i].rows));
		json_object_set_new(tabs, ck.tables[i].name, t);
	}
	pid = sl_stream_lock_holder(cfg->state_dir, sc->name);
	{
		json_t *w = sl_runstate_wait_read(cfg->state_dir, sc->name);
		json_object_set_new(o, "agent_pid", pid > 0 ? json_integer(pid) : json_null());
		json_object_set_new(o, "waiting", w ? w : json_null());
	}
	if (ck.exists && ck.last_source_ts_us)
		json_object_set_new(o, "freshness_seconds", json_integer((sl_now_us() - ck.last_source_ts_us) / 1000000));
	sl_stream_source_view(cfg, sc, &sst);
	sst.durable = ck.exists && ck.has_position ? &ck.durable : NULL;
	sst.durable_ts_us = sst.durable ? ck.last_source_ts_us : 0;
	memset(&si, 0, sizeof si);
	probe_ok = src->probe(sc->source, &sst, &si, err, errlen) == SL_OK;
	if (probe_ok) {
		status_slot(src, &si, o);
	} else {
		json_object_set_new(o, "source_error", json_string(err));
		json_array_append_new(undetermined, json_pack("s+", "the source could not be probed: ", err));
	}
	status_alerts(sc, src, probe_ok, err, &si, &ck, alerts);
	/* The agent's own view, while the agent that wrote it holds the lock. */
	run = sl_runstate_run_read(cfg->state_dir, sc->name, &alive);
	live = alive && pid > 0 && run && json_integer_value(json_object_get(run, "pid")) == pid;
	if (pid > 0 && !live)
		json_array_append_new(undetermined, json_pack("s", "an agent runs the stream, but its run file is missing "
							      "or not its own yet"));
	status_run(o, run, live, tabs, alerts);
	if (live)
		status_responding(o, run, cfg);
	else
		json_object_set_new(o, "agent_responding", json_null());
	json_decref(run);
	json_object_set_new(o, "tables", tabs);
	json_object_set_new(o, "alerts", alerts);
	json_object_set_new(o, "determined", json_boolean(json_array_size(undetermined) == 0));
	json_object_set_new(o, "undetermined", undetermined);
	sl_ckpt_free(&ck);
	return SL_OK;
}

/* Loads the stream's checkpoint for `sluice backfill`.  A corrupt one (the
 * stream's position is unknown) is kept aside as "<path>.corrupt" when every
 * table is to be backfilled: the stream then starts over without one. */
static int load_for_backfill(struct sl_checkpoint *ck, struct sl_config *cfg, struct sl_stream_config *sc,
			     const struct sl_source_ops *src, const struct sl_source_stream *sst, const char *table,
			     char *err, size_t errlen)
{
	int rc = sl_ckpt_load(ck, src->desc, cfg->state_dir, sc->name, err, errlen);

	if (rc == SL_ELOST && !table) {
		if (sl_ckpt_set_aside(ck, err, errlen) < 0)
			return SL_EFAIL;
		printf("stream %s: checkpoint %s is corrupt; kept it as %s.corrupt\n", sc->name, ck->path, ck->path);
		sl_ckpt_free(ck);
		rc = sl_ckpt_load(ck, src->desc, cfg->state_dir, sc->name, err, errlen);
	}
	if (rc == SL_ELOST)
		sl_stream_ckpt_hint(sst, ck->path, rc, err, errlen);
	return rc;
}

#define LIST_AT_MOST 50  /* tables named in a message */

/* `--table T` must name a table the stream selects now: SL_ECONFIG (exit 2)
 * otherwise, with the tables it does select. */
static int check_table_selected(struct sl_stream_config *sc, const struct sl_source_ops *src,
				const struct sl_source_stream *sst, const char *table, char *err, size_t errlen)
{
	struct sl_table **tables = NULL;
	struct sl_buf full, list;
	void *ctx = NULL;
	int n = 0, rc;
	bool found = false;

	sl_buf_init(&full, 0);
	sl_buf_init(&list, 0);
	if ((rc = open_tables(sc, src, sst, &ctx, &tables, &n, err, errlen)) < 0)
		goto out;
	for (int i = 0; i < n; i++) {
		sl_buf_reset(&full);
		sl_buf_printf(&full, "%s.%s", tables[i]->ns, tables[i]->name);
		if (!sl_buf_failed(&full) && !strcmp(full.data, table))
			found = true;
		if (i < LIST_AT_MOST)
			sl_buf_printf(&list, "%s%s", i ? ", " : "", full.data ? full.data : "?");
	}
	if (n > LIST_AT_MOST)
		sl_buf_printf(&list, " and %d more", n - LIST_AT_MOST);
	if (!found) {
		snprintf(err, errlen, "stream \"%s\": --table %s names no table the stream selects (it does not exist "
			 "on source \"%s\", or tables/exclude_tables leave it out); the stream selects %s", sc->name, table,
			 sc->source->name, sl_buf_failed(&list) || !list.data ? "no table" : list.data);
		rc = SL_ECONFIG;
	}
out:
	close_tables(src, ctx, tables, n);
	sl_buf_free(&full);
	sl_buf_free(&list);
	return rc;
}

/* sl_stream_request_backfill() under the stream's lock. */
static int request_backfill(struct sl_config *cfg, struct sl_stream_config *sc, const struct sl_source_ops *src,
			    const char *table, char *err, size_t errlen)
{
	struct sl_checkpoint ck;
	struct sl_source_stream sst;
	struct sl_source_resume resume;
	struct sl_buf cmd;
	bool renew = false;
	int rc = SL_OK, found = 0;

	sl_buf_init(&cmd, 0);
	memset(&ck, 0, sizeof ck);
	sl_stream_source_view(cfg, sc, &sst);
	if (table && (rc = check_table_selected(sc, src, &sst, table, err, errlen)) < 0)
		goto out;
	if ((rc = load_for_backfill(&ck, cfg, sc, src, &sst, table, err, errlen)) < 0)
		goto out;
	snprintf(ck.slot, sizeof ck.slot, "%s", sc->slot ? sc->slot : "");
	memset(&resume, 0, sizeof resume);
	resume.has_position = ck.exists && ck.has_position;
	resume.reset = ck.reset;
	resume.durable = ck.durable;
	resume.checkpoint_path = ck.path;
	/* A position that cannot be resumed is renewed: the source removes what
	 * is left of it (one table alone cannot be backfilled then, so nothing
	 * is removed for --table). */
	if (src->discard_position &&
	    (rc = src->discard_position(sc->source, &sst, &resume, table != NULL, &renew, stdout, err, errlen)) < 0)
		goto out;
	if (renew && table) {
		sl_source_backfill_command(&cmd, &sst);
		snprintf(err, errlen, "stream \"%s\": its position on source \"%s\" cannot be resumed, so every table "
			 "must be backfilled again: run `%s` (without --table)", sc->name, sc->source->name,
			 sl_buf_failed(&cmd) ? "sluice backfill" : cmd.data);
		rc = SL_ECONFIG;
		goto out;
	}
	if (renew) {
		ck.reset = ck.has_position || ck.reset;
		ck.has_position = false;
	}
	for (int i = 0; i < ck.ntables; i++) {
		if (table && strcmp(ck.tables[i].name, table) != 0)
			continue;
		found++;
		if (ck.tables[i].state != SL_BF_RUNNING) {
			ck.tables[i].state = SL_BF_PENDING;
			/* one table: read while streaming; every table: from a snapshot */
			ck.tables[i].method = table ? SL_BF_WATERMARK : SL_BF_SNAPSHOT;
		}
	}
	if (table && !found) {
		struct sl_ckpt_table *e;
		const char *dot = strchr(table, '.');
		char ns[256];
		if (!dot || (size_t)(dot - table) >= sizeof ns) {
			snprintf(err, errlen, "--table must be SCHEMA.TABLE, not \"%s\"", table);
			rc = SL_ECONFIG;
			goto out;
		}
		snprintf(ns, sizeof ns, "%.*s", (int)(dot - table), table);
		e = sl_ckpt_table(&ck, ns, dot + 1);
		if (!e) {
			snprintf(err, errlen, "out of memory");
			rc = SL_EFAIL;
			goto out;
		}
		e->state = SL_BF_PENDING;
		e->method = SL_BF_WATERMARK;
	}
	if (sl_ckpt_save(&ck, err, errlen) < 0) {
		rc = SL_EFAIL;
		goto out;
	}
	printf("stream %s: %s marked for backfill on the next run\n", sc->name, table ? table : "every table");
	if (renew)
		printf("stream %s: the next run creates a new position (slot %s) and backfills every table from it\n",
		       sc->name, sc->slot ? sc->slot : "");
out:
	sl_buf_free(&cmd);
	sl_ckpt_free(&ck);
	return rc;
}

/* While an agent runs the stream: a request it takes within a few seconds
 * (backfill/rebackfill.h), or the next run takes if it is stopping. */
static int request_from_agent(struct sl_config *cfg, struct sl_stream_config *sc, const struct sl_source_ops *src,
			      const char *table, char *err, size_t errlen)
{
	struct sl_source_stream sst;
	long pid = sl_stream_lock_holder(cfg->state_dir, sc->name);
	int rc;

	sl_stream_source_view(cfg, sc, &sst);
	if ((rc = check_table_selected(sc, src, &sst, table, err, errlen)) < 0)
		return rc;
	if (src->watermark_ready && (rc = src->watermark_ready(sc->source, &sst, err, errlen)) < 0) {
		/* the agent could not read it while streaming (MySQL: no watermark table) */
		size_t l = strlen(err);
		if (rc == SL_EPREREQ)
			snprintf(err + l, errlen - l, ". Without it, stop the agent and run this command again: the next run "
				 "reads %s from a snapshot before streaming", table);
		return rc;
	}
	if (sl_bf_request_write(cfg->state_dir, sc->name, table, err, errlen) < 0)
		return SL_EFAIL;
	if (pid > 0)
		printf("stream %s: %s requested for backfill from the running agent (pid %ld): it re-reads the table "
		       "while it streams\n", sc->name, table, pid);
	else
		printf("stream %s: %s requested for backfill: the running agent, or the next run, re-reads the table "
		       "while it streams\n", sc->name, table);
	return SL_OK;
}

int sl_stream_request_backfill(struct sl_config *cfg, struct sl_stream_config *sc, const char *table,
			       char *err, size_t errlen)
{
	const struct sl_source_ops *src = sl_stream_source(sc, err, errlen);
	struct sl_stream_lock lk;
	int rc;

	if (!src)
		return SL_ECONFIG;
	/* The running agent owns the checkpoint: edit it only while no agent
	 * runs the stream.  While one does, one table is requested from it. */
	if ((rc = sl_stream_lock_take(&lk, cfg->state_dir, sc->name, err, errlen)) < 0) {
		if (rc == SL_ECONFIG && table && src->emit_watermark && src->read_chunk)
			return request_from_agent(cfg, sc, src, table, err, errlen);
		if (rc == SL_ECONFIG) {
			size_t l = strlen(err);
			if (src->emit_watermark && src->read_chunk)
				snprintf(err + l, errlen - l, "; stop that agent first to backfill every table (a new "
					 "position for the stream), or name one table with --table: the running agent "
					 "backfills it while it streams");
			else
				snprintf(err + l, errlen - l, "; stop that agent first: a %s source cannot backfill while "
					 "it streams, and sluice backfill changes the stream's checkpoint, which a running "
					 "agent owns", src->type);
		}
		return rc;
	}
	rc = request_backfill(cfg, sc, src, table, err, errlen);
	sl_stream_lock_release(&lk);
	return rc;
}
