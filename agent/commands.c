/*
 * agent/commands.c: the commands that inspect or prepare a stream without
 * running it: `sluice check`, `sluice status` and `sluice backfill`.  Each
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
#include "agent/rebackfill.h"
#include "agent/runstate.h"
#include "agent/stream.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sinks/sink.h"

int sl_stream_check(struct sl_config *cfg, struct sl_stream_config *sc, char *err, size_t errlen)
{
	const struct sl_source_ops *src = sl_stream_source(sc, err, errlen);
	struct sl_source_stream sst;
	struct sl_source_resume resume;
	struct sl_checkpoint ck;
	int rc;

	if (!src)
		return SL_ECONFIG;
	if (sc->destination->ops->check) {
		struct sl_sink_stream st = {
			.name = sc->name, .mode = sc->write_mode, .destination = sc->destination->name,
		};
		if ((rc = sc->destination->ops->check(sc->destination->conf, &st, stdout, err, errlen)) < 0)
			return rc;
	}
	sl_stream_source_view(cfg, sc, &sst);
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
	if ((rc = sl_stream_ckpt_slot(&ck, sc, err, errlen)) == SL_OK)
		rc = src->check(sc->source, &sst, &resume, stdout, err, errlen);
	sl_ckpt_free(&ck);
	return rc;
}

static void add_alert(json_t *alerts, const char *name, const char *severity, const char *text)
{
	json_t *a = json_object();
	json_object_set_new(a, "alert", json_string(name));
	json_object_set_new(a, "severity", json_string(severity));
	json_object_set_new(a, "message", json_string(text));
	json_array_append_new(alerts, a);
}

/* The source's view of the position holder, with the alerts its figures raise. */
static void status_slot(const struct sl_stream_config *sc, const struct sl_source_status *si,
			const struct sl_checkpoint *ck, json_t *o, json_t *alerts)
{
	json_t *slot = json_object();
	char msg[256];

	json_object_set_new(slot, "exists", json_boolean(si->exists));
	if (si->exists) {
		/* What the server does not know (a lost slot keeps no restart
		 * position; a slot being created has no confirmed one yet) is null. */
		json_object_set_new(slot, "confirmed_flush_lsn", si->confirmed[0] ? json_string(si->confirmed) : json_null());
		json_object_set_new(slot, "restart_lsn", si->restart[0] ? json_string(si->restart) : json_null());
		json_object_set_new(slot, "active", json_boolean(si->active));
		json_object_set_new(slot, "wal_status", si->state[0] ? json_string(si->state) : json_null());
		json_object_set_new(slot, "lag_bytes", si->lag_bytes >= 0 ? json_integer(si->lag_bytes) : json_null());
		json_object_set_new(slot, "retained_wal_bytes",
				    si->retained_bytes >= 0 ? json_integer(si->retained_bytes) : json_null());
		json_object_set_new(slot, "safe_wal_size", si->safe_bytes >= 0 ? json_integer(si->safe_bytes) : json_null());
		if (!strcmp(si->state, "lost"))
			add_alert(alerts, "slot_lost", "critical", "the replication slot is lost: re-backfill needed");
		if (sc->lag_critical_bytes && si->lag_bytes >= (int64_t)sc->lag_critical_bytes) {
			snprintf(msg, sizeof msg, "slot lag %" PRId64 " bytes >= lag_critical_bytes %" PRIu64,
				 si->lag_bytes, sc->lag_critical_bytes);
			add_alert(alerts, "lag", "critical", msg);
		} else if (sc->lag_warn_bytes && si->lag_bytes >= (int64_t)sc->lag_warn_bytes) {
			snprintf(msg, sizeof msg, "slot lag %" PRId64 " bytes >= lag_warn_bytes %" PRIu64,
				 si->lag_bytes, sc->lag_warn_bytes);
			add_alert(alerts, "lag", "warning", msg);
		}
		if (sc->retained_wal_warn_bytes && si->retained_bytes >= (int64_t)sc->retained_wal_warn_bytes) {
			snprintf(msg, sizeof msg, "slot retains %" PRId64 " bytes of WAL >= retained_wal_warn_bytes %" PRIu64,
				 si->retained_bytes, sc->retained_wal_warn_bytes);
			add_alert(alerts, "retained_wal", "warning", msg);
		}
	} else if (ck->exists && ck->has_position) {
		add_alert(alerts, "slot_missing", "critical", "the replication slot is missing: re-backfill needed");
	}
	json_object_set_new(o, "slot_status", slot);
}

int sl_stream_status(struct sl_config *cfg, struct sl_stream_config *sc, void *out_json, char *err, size_t errlen)
{
	const struct sl_source_ops *src = sl_stream_source(sc, err, errlen);
	json_t *o = out_json, *tabs, *alerts;
	struct sl_checkpoint ck;
	struct sl_source_stream sst;
	struct sl_source_status si;
	char pos[2 * SL_POS_TEXT_MAX];
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
	json_object_set_new(o, "stream", json_string(sc->name));
	json_object_set_new(o, "source", json_string(sc->source->name));
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
	json_object_set_new(o, "tables", tabs);
	{
		long pid = sl_stream_lock_holder(cfg->state_dir, sc->name);
		json_t *w = sl_runstate_wait_read(cfg->state_dir, sc->name);
		json_object_set_new(o, "agent_pid", pid > 0 ? json_integer(pid) : json_null());
		json_object_set_new(o, "waiting", w ? w : json_null());
	}
	sl_stream_source_view(cfg, sc, &sst);
	if (src->probe(sc->source, &sst, &si, err, errlen) == SL_OK) {
		status_slot(sc, &si, &ck, o, alerts);
	} else {
		json_object_set_new(o, "source_error", json_string(err));
		add_alert(alerts, "source_unreachable", "critical", err);
	}
	if (ck.exists && ck.last_source_ts_us && sc->freshness_warn_seconds) {
		int64_t age = (sl_now_us() - ck.last_source_ts_us) / 1000000;
		json_object_set_new(o, "freshness_seconds", json_integer(age));
	}
	json_object_set_new(o, "alerts", alerts);
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
	if ((rc = src->open(&ctx, sc->source, sst, err, errlen)) < 0)
		goto out;
	if ((rc = src->tables(ctx, &tables, &n, err, errlen)) < 0)
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
	for (int i = 0; i < n; i++)
		sl_table_free(tables[i]);
	free(tables);
	if (ctx)
		src->close(ctx);
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
 * (agent/rebackfill.h), or the next run takes if it is stopping. */
static int request_from_agent(struct sl_config *cfg, struct sl_stream_config *sc, const struct sl_source_ops *src,
			      const char *table, char *err, size_t errlen)
{
	struct sl_source_stream sst;
	long pid = sl_stream_lock_holder(cfg->state_dir, sc->name);
	int rc;

	sl_stream_source_view(cfg, sc, &sst);
	if ((rc = check_table_selected(sc, src, &sst, table, err, errlen)) < 0)
		return rc;
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
		if (rc == SL_ECONFIG && table)
			return request_from_agent(cfg, sc, src, table, err, errlen);
		if (rc == SL_ECONFIG) {
			size_t l = strlen(err);
			snprintf(err + l, errlen - l, "; stop that agent first to backfill every table (a new position "
				 "for the stream), or name one table with --table: the running agent backfills it while it "
				 "streams");
		}
		return rc;
	}
	rc = request_backfill(cfg, sc, src, table, err, errlen);
	sl_stream_lock_release(&lk);
	return rc;
}
