/*
 * sources/postgres/pg_slot.c: the stream's replication slot against its
 * checkpoint.
 *
 * A slot can be resumed when it exists, is not lost, and has not confirmed
 * more than the checkpoint made durable.  Otherwise changes may be gone and
 * sluice stops with exit code 4 (SL_ELOST) and a message that says what
 * happened and gives the one command that recovers:
 *
 *   sluice backfill -c FILE --stream NAME      then start sluice again
 *
 * `sluice backfill` (discard_position) drops a slot that cannot be resumed
 * and asks for a new position, so that the next run creates a new slot and
 * backfills every table from its snapshot: no step by hand, whatever the
 * cause.  Every message and every action below follows that one rule.
 */
#include "sources/postgres/pg_internal.h"

#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

enum verdict {
	SLOT_ABSENT,     /* no slot, and the checkpoint needs none: create one */
	SLOT_USABLE,     /* resume from it, or adopt it when the checkpoint has no position */
	SLOT_MISSING,    /* no slot, but the checkpoint read changes from one */
	SLOT_LOST,       /* wal_status = lost: the server removed WAL it needed */
	SLOT_AHEAD,      /* it confirmed beyond the checkpoint's durable position */
	SLOT_LEFTOVER,   /* a new slot was asked for (`sluice backfill`), but one exists */
	SLOT_FOREIGN,    /* not a logical pgoutput slot of the stream's database */
};

static enum verdict judge(const struct sl_pg_slot_info *si, const char *dbname, const struct sl_source_resume *resume)
{
	if (!si->exists)
		return resume && resume->has_position && !resume->reset ? SLOT_MISSING : SLOT_ABSENT;
	if (!si->logical || strcmp(si->plugin, "pgoutput") != 0 || strcmp(si->database, dbname) != 0)
		return SLOT_FOREIGN;
	if (!strcmp(si->wal_status, "lost"))
		return SLOT_LOST;
	if (resume && resume->reset)
		return SLOT_LEFTOVER;
	if (resume && resume->has_position && si->confirmed_flush_lsn > resume->durable.w[0])
		return SLOT_AHEAD;
	return SLOT_USABLE;
}

/* ". To recover, run `sluice backfill ...`[, which drops the slot], then
 * start sluice again: ..." */
static void recovery(struct sl_buf *b, const struct sl_source_stream *st, bool drops)
{
	sl_buf_puts(b, ". To recover, run `");
	sl_source_backfill_command(b, st);
	sl_buf_printf(b, "`%s, then start sluice again: it creates a new slot and backfills every table",
		      drops ? ", which drops the slot" : "");
}

/* The message for a slot that cannot be used; returns its status. */
static int explain(enum verdict v, const struct sl_pg_slot_info *si, const struct sl_source_config *cfg,
		   const struct sl_source_stream *st, const struct sl_source_resume *resume, char *err, size_t errlen)
{
	char a[18], d[18];
	struct sl_buf b;
	int rc = SL_ELOST;

	sl_buf_init(&b, 0);
	if (resume && resume->has_position)
		sl_lsn_format(resume->durable.w[0], d);
	switch (v) {
	case SLOT_FOREIGN:
		if (!si->logical || strcmp(si->plugin, "pgoutput") != 0)
			sl_buf_printf(&b, "stream \"%s\": slot \"%s\" exists but is not a logical pgoutput slot "
				      "(plugin \"%s\")", st->name, sl_pg_stream(st)->slot, si->plugin);
		else
			sl_buf_printf(&b, "stream \"%s\": slot \"%s\" belongs to database \"%s\", not \"%s\"",
				      st->name, sl_pg_stream(st)->slot, si->database, sl_pg_conf(cfg)->dbname);
		rc = SL_EPREREQ;
		break;
	case SLOT_MISSING:
		sl_buf_printf(&b, "stream \"%s\": replication slot \"%s\" does not exist on source \"%s\", but the "
			      "checkpoint \"%s\" says changes up to %s were already read from it; changes after that "
			      "position may be gone, and sluice will not skip them silently", st->name, sl_pg_stream(st)->slot,
			      cfg->name, resume->checkpoint_path, d);
		recovery(&b, st, false);
		break;
	case SLOT_LOST:
		sl_buf_printf(&b, "stream \"%s\": replication slot \"%s\" is lost (wal_status = lost): the server "
			      "removed WAL it still needed, so changes %s%s are gone", st->name, sl_pg_stream(st)->slot,
			      resume && resume->has_position ? "after " : "it had not delivered yet",
			      resume && resume->has_position ? d : "");
		recovery(&b, st, true);
		break;
	case SLOT_AHEAD:
		sl_lsn_format(si->confirmed_flush_lsn, a);
		sl_buf_printf(&b, "stream \"%s\": slot \"%s\" has confirmed position %s, ahead of %s in checkpoint "
			      "\"%s\": changes between them were acknowledged by another reader, or the checkpoint is "
			      "stale", st->name, sl_pg_stream(st)->slot, a, d, resume->checkpoint_path);
		recovery(&b, st, true);
		sl_buf_puts(&b, " (if the checkpoint is stale, putting the current one back resumes the slot instead)");
		break;
	default:
		sl_buf_printf(&b, "stream \"%s\": slot \"%s\" is usable", st->name, sl_pg_stream(st)->slot);
		rc = SL_EFAIL;
		break;
	}
	snprintf(err, errlen, "%s", sl_buf_failed(&b) ? "out of memory" : b.data);
	sl_buf_free(&b);
	return rc;
}

/* A slot has one reader: who reads it (the walsender's pid, and from
 * pg_stat_replication its client and application_name when the role may see
 * them), and what to do.  Returns rc. */
static int in_use(PGconn *c, const struct sl_pg_slot_info *si, const struct sl_source_stream *st, int rc,
		  char *err, size_t errlen)
{
	char pid[16];
	const char *params[1] = { pid };
	PGresult *res = NULL;
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "stream \"%s\": replication slot \"%s\" is in use by another process", st->name, sl_pg_stream(st)->slot);
	if (si->active_pid > 0) {
		snprintf(pid, sizeof pid, "%d", si->active_pid);
		sl_buf_printf(&b, " (walsender pid %d", si->active_pid);
		res = PQexecParams(c, "SELECT coalesce(application_name, ''), coalesce(host(client_addr), 'a local "
				   "socket') FROM pg_stat_replication WHERE pid = $1", 1, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 1))
			sl_buf_printf(&b, ", application_name \"%s\", client %s", PQgetvalue(res, 0, 0),
				      PQgetvalue(res, 0, 1));
		sl_buf_puts(&b, ")");
	}
	sl_buf_puts(&b, ": another agent (or a tool such as pg_recvlogical) reads it. Stop it before starting this "
		    "stream, or give this stream a slot of its own (stream key slot)");
	snprintf(err, errlen, "%s", sl_buf_failed(&b) ? "out of memory" : b.data);
	PQclear(res);
	sl_buf_free(&b);
	return rc;
}

static int drop_slot(PGconn *c, const struct sl_source_stream *st, char *err, size_t errlen)
{
	const char *params[1] = { sl_pg_stream(st)->slot };
	PGresult *res = PQexecParams(c, "SELECT pg_drop_replication_slot($1)", 1, NULL, params, NULL, NULL, 0);
	int rc = SL_OK;

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		char what[160];
		snprintf(what, sizeof what, "stream \"%s\": could not drop replication slot \"%s\"", st->name, sl_pg_stream(st)->slot);
		sl_pg_err(err, errlen, what, c, res);
		rc = sl_pg_sqlstate_is(res, "42501") ? SL_EPREREQ : SL_EFAIL;
	}
	PQclear(res);
	return rc;
}

int sl_pg_slot_prepare(PGconn *c, const struct sl_source_config *cfg, const struct sl_source_stream *st,
		       const struct sl_source_resume *resume, struct sl_source_plan *plan, char *err, size_t errlen)
{
	struct sl_pg_slot_info si;
	enum verdict v;
	int rc;

	if ((rc = sl_pg_slot_info(c, sl_pg_stream(st)->slot, &si, err, errlen)) < 0)
		return rc;
	v = judge(&si, sl_pg_conf(cfg)->dbname, resume);
	switch (v) {
	case SLOT_ABSENT:
		plan->need_position = true;
		return SL_OK;
	case SLOT_USABLE:
	case SLOT_AHEAD:
	case SLOT_LEFTOVER:
		if (si.active)  /* retried: it may be this agent's own walsender, after a silent failure */
			return in_use(c, &si, st, SL_EFAIL, err, errlen);
		break;
	default:
		return explain(v, &si, cfg, st, resume, err, errlen);
	}
	if (v == SLOT_AHEAD)
		return explain(v, &si, cfg, st, resume, err, errlen);
	if (v == SLOT_LEFTOVER) {
		/* `sluice backfill` asked for a new slot and every table is
		 * backfilled from its snapshot: a slot of that name is left over
		 * from a run that stopped before it saved its checkpoint. */
		if ((rc = drop_slot(c, st, err, errlen)) < 0)
			return rc;
		sl_info("stream \"%s\": dropped replication slot \"%s\", left over from an earlier attempt to create "
			"a new one", st->name, sl_pg_stream(st)->slot);
		plan->need_position = true;
		return SL_OK;
	}
	if (!resume->has_position) {
		/* A slot made outside sluice (or before a crash that lost the first
		 * checkpoint): start at its position; backfill covers the rest. */
		plan->adopt = true;
		memset(&plan->start, 0, sizeof plan->start);
		plan->start.w[0] = si.confirmed_flush_lsn;
	}
	return SL_OK;
}

int sl_pg_slot_check(PGconn *c, const struct sl_source_config *cfg, const struct sl_source_stream *st,
		     const struct sl_source_resume *resume, bool *exists, char *err, size_t errlen)
{
	struct sl_pg_slot_info si;
	enum verdict v;
	int rc;

	if ((rc = sl_pg_slot_info(c, sl_pg_stream(st)->slot, &si, err, errlen)) < 0)
		return rc;
	*exists = si.exists;
	v = judge(&si, sl_pg_conf(cfg)->dbname, resume);
	/* Read while no agent of this state_dir runs the stream: by someone
	 * else, whom run would wait for forever. */
	if (si.active && st->agent_pid <= 0 && (v == SLOT_USABLE || v == SLOT_AHEAD || v == SLOT_LEFTOVER))
		return in_use(c, &si, st, SL_EPREREQ, err, errlen);
	/* An agent that reads the slot acknowledges right after it saves its
	 * checkpoint, so the file read before may be behind: no verdict then. */
	if (v == SLOT_AHEAD && si.active)
		return SL_OK;
	if (v == SLOT_LOST || v == SLOT_FOREIGN || v == SLOT_MISSING || v == SLOT_AHEAD)
		return explain(v, &si, cfg, st, resume, err, errlen);
	return SL_OK;
}

int sl_pg_discard_position(const struct sl_source_config *cfg, const struct sl_source_stream *st,
			   const struct sl_source_resume *resume, bool dry_run, bool *renew, FILE *out,
			   char *err, size_t errlen)
{
	struct sl_pg_slot_info si;
	const char *why = NULL;
	enum verdict v;
	char a[18], d[18], reason[128];
	PGconn *c = sl_pg_connect(cfg, false, err, errlen);
	int rc;

	*renew = false;
	if (!c)
		return sl_pg_err_status();
	if ((rc = sl_pg_slot_info(c, sl_pg_stream(st)->slot, &si, err, errlen)) < 0)
		goto out;
	v = judge(&si, sl_pg_conf(cfg)->dbname, resume);
	switch (v) {
	case SLOT_ABSENT:
	case SLOT_USABLE:
		goto out;
	case SLOT_FOREIGN:
		rc = explain(v, &si, cfg, st, resume, err, errlen);
		goto out;
	case SLOT_MISSING:
		*renew = true;
		goto out;
	case SLOT_LOST:
		why = "it is lost";
		break;
	case SLOT_AHEAD:
		sl_lsn_format(si.confirmed_flush_lsn, a);
		sl_lsn_format(resume->durable.w[0], d);
		snprintf(reason, sizeof reason, "its confirmed position %s is ahead of the checkpoint's %s", a, d);
		why = reason;
		break;
	case SLOT_LEFTOVER:
		why = "a new slot was already asked for";
		break;
	}
	*renew = true;
	if (dry_run)
		goto out;
	if (si.active) {
		rc = in_use(c, &si, st, SL_EFAIL, err, errlen);
		goto out;
	}
	if ((rc = drop_slot(c, st, err, errlen)) < 0)
		goto out;
	fprintf(out, "stream %s: dropped replication slot %s (%s): it could not be resumed\n", st->name, sl_pg_stream(st)->slot, why);
out:
	PQfinish(c);
	return rc;
}
