/*
 * sources/postgres/pg_wait.c: what a replication slot's creation waits for.
 *
 * CREATE_REPLICATION_SLOT builds a consistent snapshot before it returns:
 * the walsender waits (wait event Lock/transactionid) for every transaction
 * that holds an xid and was running when the command started, one after the
 * other, and reports nothing.  A session left "idle in transaction" stalls a
 * new stream for as long as it stays so.  While it waits, this file asks the
 * server, on the source's catalog connection, which sessions block the
 * walsender (pg_blocking_pids) and since when their transactions run
 * (pg_stat_activity), logs that every 10 s, hands it to the stream's hooks
 * for `sluice status`, and passes on the hooks' stop() as a cancel.
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

void sl_pg_slot_wait_init(struct sl_pg_slot_wait *w, PGconn *meta, const struct sl_source_stream *st,
			  const char *slot)
{
	memset(w, 0, sizeof *w);
	w->meta = meta;
	w->st = st;
	w->slot = slot;
	w->next_report_ms = FIRST_REPORT_MS;
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
	const struct sl_source_hooks *h = w->st->hooks;
	struct sl_source_blocker bl[MAX_BLOCKERS];
	struct sl_source_wait sw;
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
		for (int i = 0; i < PQntuples(res) && n < MAX_BLOCKERS; i++) {
			int64_t v;
			bl[n].pid = sl_parse_i64(PQgetvalue(res, i, 0), 0, INT32_MAX, &v) == 0 ? v : 0;
			bl[n].xact_age_s = sl_parse_i64(PQgetvalue(res, i, 1), -1, INT64_MAX, &v) == 0 ? v : -1;
			bl[n].state = PQgetvalue(res, i, 2);
			bl[n].user = PQgetvalue(res, i, 3);
			bl[n].application = PQgetvalue(res, i, 4);
			n++;
		}
	} else {
		char e[SL_ERRLEN];
		sl_pg_err(e, sizeof e, "could not read pg_stat_activity", w->meta, res);
		sl_debug("stream \"%s\": %s", w->st->name, e);
	}
	sl_buf_printf(&detail, "%s has waited %" PRId64 " s", action.data ? action.data : "", waited_ms / 1000);
	if (n > 0) {
		sl_buf_puts(&detail, " for transactions that were open when it started: ");
		for (int i = 0; i < n; i++) {
			sl_buf_printf(&detail, "%spid %" PRId64 " (", i ? ", " : "", bl[i].pid);
			if (bl[i].xact_age_s >= 0)
				sl_buf_printf(&detail, "transaction open for %" PRId64 " s, ", bl[i].xact_age_s);
			sl_buf_printf(&detail, "%s, user \"%s\", application \"%s\")", *bl[i].state ? bl[i].state : "state unknown",
				      bl[i].user, bl[i].application);
		}
		sl_buf_printf(&detail, "; it goes on when they end (SELECT pg_terminate_backend(%" PRId64 ") ends the "
			      "first)", bl[0].pid);
	} else {
		wait_event(w->meta, pid, &detail);
		sl_buf_puts(&detail, "; it waits for every transaction that was open when it started to end, prepared "
			    "transactions included (pg_prepared_xacts)");
	}
	if (sl_buf_failed(&detail) || sl_buf_failed(&action))
		goto out;
	sl_warn("stream \"%s\": %s", w->st->name, detail.data);
	if (h && h->waiting) {
		sw.action = action.data;
		sw.waited_ms = waited_ms;
		sw.detail = detail.data;
		sw.nblockers = n;
		sw.blockers = bl;
		h->waiting(h->payload, &sw);
		w->reported = true;
	}
out:
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
