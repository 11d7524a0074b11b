/*
 * sources/postgres/pg_wait.c: what sluice waits for on the server.
 *
 * A replication slot's creation.  CREATE_REPLICATION_SLOT builds a
 * consistent snapshot before it returns: the walsender waits (wait event
 * Lock/transactionid) for every transaction that holds an xid and was
 * running when the command started, one after the other, and reports
 * nothing.  A session left "idle in transaction" stalls a new stream for as
 * long as it stays so.  While it waits, this file asks the server, on the
 * source's catalog connection, which sessions block the walsender
 * (pg_blocking_pids) and since when their transactions run
 * (pg_stat_activity), logs that every 10 s, hands it to the stream's hooks
 * for `sluice status`, and passes on the hooks' stop() as a cancel.
 *
 * A backfill while streaming.  pgoutput publishes a change by the
 * publication as of the change's place in the WAL: a transaction that
 * changed a table before the table entered the publication (sluice adds it
 * at the start, or a user did) streams only its changes after that, even
 * though it commits later.  A chunk read while it is open misses its
 * commit, and its earlier changes never come: a row it deleted stays.  So
 * the first chunk of a table in a run waits until every transaction that
 * was writing the table (or a partition of it) then has ended: the ones
 * that hold a lock that writes take (pg_locks) at the first try.  It does
 * not block the stream: read_chunk answers SL_EAGAIN meanwhile, and the
 * wait is logged and reported as above.
 */
#include "sources/postgres/pg_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

#define FIRST_REPORT_MS 2000
#define REPORT_EVERY_MS 10000
#define MAX_BLOCKERS 16
#define WRITERS_CHECK_MS 200        /* how often the writers a first chunk waits for are asked about */

/* The writers a first chunk waits for hold RowExclusiveLock, which every
 * statement that changes rows takes (INSERT, UPDATE, DELETE, MERGE, COPY
 * FROM): ALTER PUBLICATION ADD TABLE (ShareUpdateExclusiveLock) does not
 * wait for it, while it waits for the stronger locks that TRUNCATE and
 * DDL take.  A writer that also holds AccessExclusiveLock is left to the
 * chunk's own lock, which waits for it anyway (sl_pg_read_chunk). */

void sl_pg_slot_wait_init(struct sl_pg_slot_wait *w, PGconn *meta, const struct sl_source_stream *st,
			  const char *slot)
{
	memset(w, 0, sizeof *w);
	w->meta = meta;
	w->st = st;
	w->slot = slot;
	w->next_report_ms = FIRST_REPORT_MS;
}

/* The sessions of res from column col on (pid, transaction age in
 * seconds, state, user, application) into bl; their count. */
static int read_blockers(const PGresult *res, int col, struct sl_source_blocker *bl)
{
	int n = 0;

	for (int i = 0; i < PQntuples(res) && n < MAX_BLOCKERS; i++) {
		int64_t v;
		bl[n].pid = sl_parse_i64(PQgetvalue(res, i, col), 0, INT32_MAX, &v) == 0 ? v : 0;
		bl[n].xact_age_s = sl_parse_i64(PQgetvalue(res, i, col + 1), -1, INT64_MAX, &v) == 0 ? v : -1;
		bl[n].state = PQgetvalue(res, i, col + 2);
		bl[n].user = PQgetvalue(res, i, col + 3);
		bl[n].application = PQgetvalue(res, i, col + 4);
		n++;
	}
	return n;
}

/* Logs detail and hands the wait to st's hooks (*reported then). */
static void send_wait(const struct sl_source_stream *st, const char *action, const char *detail, int64_t waited_ms,
		      const struct sl_source_blocker *bl, int n, bool *reported)
{
	const struct sl_source_hooks *h = st->hooks;
	struct sl_source_wait sw;

	sl_warn("stream \"%s\": %s", st->name, detail);
	if (h && h->waiting) {
		sw.action = action;
		sw.waited_ms = waited_ms;
		sw.detail = detail;
		sw.nblockers = n;
		sw.blockers = bl;
		h->waiting(h->payload, &sw);
		*reported = true;
	}
}

/* Appends the sessions bl[0..n), and how to end the first. */
static void put_blockers(struct sl_buf *out, const struct sl_source_blocker *bl, int n)
{
	for (int i = 0; i < n; i++) {
		if (bl[i].pid > 0)
			sl_buf_printf(out, "%spid %" PRId64 " (", i ? ", " : "", bl[i].pid);
		else
			sl_buf_printf(out, "%s%s (", i ? ", " : "", bl[i].state);
		if (bl[i].xact_age_s >= 0)
			sl_buf_printf(out, "transaction open for %" PRId64 " s, ", bl[i].xact_age_s);
		if (bl[i].pid > 0)
			sl_buf_printf(out, "%s, ", *bl[i].state ? bl[i].state : "state unknown");
		sl_buf_printf(out, "user \"%s\", application \"%s\")", bl[i].user, bl[i].application);
	}
	if (bl[0].pid > 0)
		sl_buf_printf(out, "; it goes on when they end (SELECT pg_terminate_backend(%" PRId64 ") ends the first)",
			      bl[0].pid);
	else
		sl_buf_puts(out, "; it goes on when they end (COMMIT PREPARED or ROLLBACK PREPARED ends the first)");
}

/* Appends the walsender's wait event ("Lock/transactionid"), if any. */
static void wait_event(PGconn *c, const char *pid, struct sl_buf *out)
{
	const char *params[1] = { pid };
	PGresult *res = PQexecParams(c, "SELECT coalesce(wait_event_type || '/' || wait_event, '') "
				     "FROM pg_stat_activity WHERE pid = $1::int", 1, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && *PQgetvalue(res, 0, 0))
		sl_buf_printf(out, " (wait event %s)", PQgetvalue(res, 0, 0));
	PQclear(res);
}

/* Logs and reports one round: the sessions that block walsender_pid. */
static void report(struct sl_pg_slot_wait *w, int walsender_pid, int64_t waited_ms)
{
	struct sl_source_blocker bl[MAX_BLOCKERS];
	struct sl_buf action, detail;
	PGresult *res = NULL;
	char pid[16];
	const char *params[1] = { pid };
	int n = 0;

	sl_buf_init(&action, 0);
	sl_buf_init(&detail, 0);
	snprintf(pid, sizeof pid, "%d", walsender_pid);
	sl_buf_printf(&action, "creating replication slot \"%s\"", w->slot);
	res = PQexecParams(w->meta,
		"SELECT a.pid, coalesce(extract(epoch FROM now() - a.xact_start)::bigint, -1), coalesce(a.state, ''), "
		"       coalesce(a.usename::text, ''), coalesce(a.application_name, '') "
		"FROM pg_stat_activity a WHERE a.pid = ANY (pg_blocking_pids($1::int)) "
		"ORDER BY a.xact_start NULLS LAST, a.pid", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		n = read_blockers(res, 0, bl);
	} else {
		char e[SL_ERRLEN];
		sl_pg_err(e, sizeof e, "could not read pg_stat_activity", w->meta, res);
		sl_debug("stream \"%s\": %s", w->st->name, e);
	}
	sl_buf_printf(&detail, "%s has waited %" PRId64 " s", action.data ? action.data : "", waited_ms / 1000);
	if (n > 0) {
		sl_buf_puts(&detail, " for transactions that were open when it started: ");
		put_blockers(&detail, bl, n);
	} else {
		wait_event(w->meta, pid, &detail);
		sl_buf_puts(&detail, "; it waits for every transaction that was open when it started to end, prepared "
			    "transactions included (pg_prepared_xacts)");
	}
	if (!sl_buf_failed(&detail) && !sl_buf_failed(&action))
		send_wait(w->st, action.data, detail.data, waited_ms, bl, n, &w->reported);
	PQclear(res);
	sl_buf_free(&action);
	sl_buf_free(&detail);
}

bool sl_pg_slot_wait_tick(void *payload, int walsender_pid, int64_t waited_ms)
{
	struct sl_pg_slot_wait *w = payload;
	const struct sl_source_hooks *h = w->st->hooks;

	if (h && h->stop && h->stop(h->payload)) {
		sl_info("stream \"%s\": cancelling the creation of replication slot \"%s\" (a signal)", w->st->name,
			w->slot);
		return true;
	}
	if (waited_ms >= w->next_report_ms) {
		report(w, walsender_pid, waited_ms);
		w->next_report_ms = waited_ms + REPORT_EVERY_MS;
	}
	return false;
}

void sl_pg_slot_wait_end(struct sl_pg_slot_wait *w)
{
	const struct sl_source_hooks *h = w->st->hooks;

	if (w->reported && h && h->waiting)
		h->waiting(h->payload, NULL);
	w->reported = false;
}

/* ---- a backfill's first chunk ---- */

void sl_pg_writers_end(struct sl_pg_writers *w, const struct sl_source_stream *st)
{
	const struct sl_source_hooks *h = st->hooks;

	if (w->reported && h && h->waiting)
		h->waiting(h->payload, NULL);
	free(w->vx);
	w->vx = NULL;
	w->reported = false;
}

/* Logs and reports the transactions of res (rows of the pg_locks query of
 * sl_pg_writers_wait) that the first chunk of t waits for. */
static void writers_report(struct sl_pg_writers *w, const struct sl_source_stream *st, const struct sl_table *t,
			   PGresult *res, int64_t waited_ms)
{
	struct sl_source_blocker bl[MAX_BLOCKERS];
	struct sl_buf action, detail;
	int n = read_blockers(res, 1, bl);

	if (n == 0)
		return;
	sl_buf_init(&action, 0);
	sl_buf_init(&detail, 0);
	sl_buf_printf(&action, "backfilling %s.%s", t->ns, t->name);
	sl_buf_printf(&detail, "the backfill of %s.%s has waited %" PRId64 " s for transactions that were writing "
		      "the table when it began (what they wrote before the table was in the publication is not "
		      "streamed, so its first chunk must see their commits): ", t->ns, t->name, waited_ms / 1000);
	put_blockers(&detail, bl, n);
	if (!sl_buf_failed(&detail) && !sl_buf_failed(&action))
		send_wait(st, action.data, detail.data, waited_ms, bl, n, &w->reported);
	sl_buf_free(&action);
	sl_buf_free(&detail);
}

int sl_pg_writers_wait(struct sl_pg_writers *w, PGconn *c, const struct sl_source_stream *st,
		       const struct sl_table *t, char *err, size_t errlen)
{
	char relid[16];
	const char *params[2] = { relid, w->vx };
	PGresult *res;
	int64_t now = sl_mono_ms();
	int n;

	if (w->done)
		return SL_OK;
	if (w->begun && now < w->next_check_ms)
		return SL_EAGAIN;
	snprintf(relid, sizeof relid, "%" PRIu32, t->relid);
	/* A prepared transaction holds its locks with no pid, under the
	 * virtual transaction of the session that prepared it. */
	res = PQexecParams(c,
		"SELECT l.virtualtransaction, coalesce(a.pid, 0), "
		"       coalesce(extract(epoch FROM now() - coalesce(a.xact_start, p.prepared))::bigint, -1), "
		"       CASE WHEN l.pid IS NULL THEN 'prepared transaction \"' || coalesce(p.gid, '?') || '\"' "
		"            ELSE coalesce(a.state, '') END, "
		"       coalesce(a.usename::text, p.owner::text, ''), coalesce(a.application_name, '') "
		"FROM (SELECT virtualtransaction, pid FROM pg_locks "
		"      WHERE locktype = 'relation' AND granted AND mode = 'RowExclusiveLock' "
		"        AND (relation = $1::oid OR relation IN (SELECT relid FROM pg_partition_tree($1::oid::regclass))) "
		"        AND pid IS DISTINCT FROM pg_backend_pid() "
		"        AND ($2::text[] IS NULL OR virtualtransaction = ANY ($2::text[])) "
		"      EXCEPT "
		"      SELECT virtualtransaction, pid FROM pg_locks "
		"      WHERE locktype = 'relation' AND granted AND mode = 'AccessExclusiveLock' "
		"        AND (relation = $1::oid OR relation IN (SELECT relid FROM pg_partition_tree($1::oid::regclass)))) l "
		"LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
		"LEFT JOIN LATERAL (SELECT gid, prepared, owner FROM pg_prepared_xacts "
		"                   WHERE l.pid IS NULL AND transaction IN (SELECT transactionid FROM pg_locks "
		"                         WHERE locktype = 'transactionid' AND pid IS NULL "
		"                           AND virtualtransaction = l.virtualtransaction) LIMIT 1) p ON true "
		"ORDER BY coalesce(a.xact_start, p.prepared) NULLS LAST, l.virtualtransaction",
		2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		int rc = sl_pg_err(err, errlen, "could not read pg_locks", c, res);
		PQclear(res);
		return rc;
	}
	n = PQntuples(res);
	if (!w->begun) {
		struct sl_buf vx;
		w->begun = true;
		w->since_ms = now;
		w->next_report_ms = now + FIRST_REPORT_MS;
		if (n > 0) {
			sl_buf_init(&vx, 0);
			sl_buf_putc(&vx, '{');
			for (int i = 0; i < n; i++)
				sl_buf_printf(&vx, "%s\"%s\"", i ? "," : "", PQgetvalue(res, i, 0));
			sl_buf_putc(&vx, '}');
			if (!(w->vx = sl_buf_detach(&vx))) {
				PQclear(res);
				snprintf(err, errlen, "out of memory");
				return SL_EFAIL;
			}
			sl_debug("stream \"%s\": the first chunk of %s.%s waits for %d transactions writing it", st->name,
				 t->ns, t->name, n);
		}
	}
	if (n == 0) {
		if (w->reported)
			sl_info("stream \"%s\": the backfill of %s.%s goes on: the transactions it waited for ended "
				"(after %" PRId64 " s)", st->name, t->ns, t->name, (now - w->since_ms) / 1000);
		PQclear(res);
		sl_pg_writers_end(w, st);
		w->done = true;
		return SL_OK;
	}
	if (now >= w->next_report_ms) {
		writers_report(w, st, t, res, now - w->since_ms);
		w->next_report_ms = now + REPORT_EVERY_MS;
	}
	PQclear(res);
	w->next_check_ms = now + WRITERS_CHECK_MS;
	return SL_EAGAIN;
}
