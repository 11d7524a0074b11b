/*
 * sources/mysql/my_server_pos.c: a stream's position against the server:
 * whether the server still has the binlog a checkpoint's position needs
 * (a lost position), where a stream starts (prepare) and the server's
 * current position.
 */
#include "sources/mysql/my_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

/* ---- positions on the server ---- */

/* The message for a position that cannot be resumed: what happened and
 * the one command that recovers. */
int my_lost(const struct sl_source_stream *st, const struct sl_source_config *cfg,
	    const struct sl_source_resume *resume, const struct sl_position *p, const char *why, char *err,
	    size_t errlen)
{
	struct sl_buf b;
	char pos[2 * SL_POS_TEXT_MAX];

	sl_buf_init(&b, 0);
	if (my_pos_encode(p, pos, sizeof pos) < 0)
		snprintf(pos, sizeof pos, "?");
	sl_buf_printf(&b, "stream \"%s\": the binlog position %s%s%s%s cannot be resumed on source \"%s\": %s; changes "
		      "after it may be gone, and sluice will not skip them silently. To recover, run `", st->name, pos,
		      resume && resume->checkpoint_path ? " of checkpoint \"" : "",
		      resume && resume->checkpoint_path ? resume->checkpoint_path : "",
		      resume && resume->checkpoint_path ? "\"" : "", cfg ? cfg->name : "?", why);
	sl_source_backfill_command(&b, st);
	sl_buf_puts(&b, "`, then start sluice again: it takes a new position and backfills every table");
	snprintf(err, errlen, "%s", sl_buf_failed(&b) ? "out of memory" : b.data);
	sl_buf_free(&b);
	return SL_ELOST;
}

/* The MariaDB GTID list at the start of the oldest binlog: the GTIDs before
 * it were purged. */
static int oldest_gtid_list(MYSQL *c, const char *file, char *out, size_t outlen, char *err, size_t errlen)
{
	struct sl_buf q;
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	int rc;

	out[0] = '\0';
	sl_buf_init(&q, 0);
	sl_buf_puts(&q, "SHOW BINLOG EVENTS IN ");
	sl_my_append_literal(&q, file);
	sl_buf_puts(&q, " LIMIT 5");
	rc = sl_buf_failed(&q) ? SL_EFAIL : sl_my_query(c, q.data, &res, err, errlen);
	sl_buf_free(&q);
	if (rc < 0)
		return rc;
	while (res && (row = mysql_fetch_row(res))) {
		if (row[2] && !strcmp(row[2], "Gtid_list") && row[5]) {
			const char *a = strchr(row[5], '['), *e = a ? strchr(a, ']') : NULL;
			if (a && e)
				snprintf(out, outlen, "%.*s", (int)(e - a - 1), a + 1);
		}
	}
	if (res)
		mysql_free_result(res);
	return SL_OK;
}

/* Whether the server still has position p: SL_OK, SL_ELOST with the
 * message, or another failure. */
int my_judge_position(MYSQL *c, const struct sl_my_server *srv, const struct sl_source_config *cfg,
		      const struct sl_source_stream *st, const struct sl_source_resume *resume,
		      const struct sl_position *p, char *err, size_t errlen)
{
	struct sl_my_binlog_file *logs = NULL;
	char file[SL_POS_TEXT_MAX], why[1600], list[256];
	const char *gtid = sl_my_pos_gtid(p);
	int n = 0, rc, found = -1;

	sl_my_pos_file(p, file);
	if ((rc = sl_my_binlogs(c, &logs, &n, err, errlen)) < 0)
		return rc;
	for (int i = 0; i < n; i++)
		if (!strcmp(logs[i].name, file))
			found = i;
	if (*gtid) {
		/* A GTID resume needs the GTIDs after the state, wherever they are. */
		if (srv->mariadb && n > 0) {
			struct sl_mariadb_gtid_pos have, purged;
			sl_mariadb_gtid_pos_init(&have);
			sl_mariadb_gtid_pos_init(&purged);
			rc = oldest_gtid_list(c, logs[0].name, list, sizeof list, err, errlen);
			if (rc == SL_OK && list[0] &&
			    sl_mariadb_gtid_pos_parse(&have, gtid, strlen(gtid), why, sizeof why) == 0 &&
			    sl_mariadb_gtid_pos_parse(&purged, list, strlen(list), why, sizeof why) == 0) {
				for (size_t i = 0; i < purged.n && rc == SL_OK; i++) {
					const struct sl_mariadb_gtid *g = sl_mariadb_gtid_pos_get(&have, purged.v[i].domain);
					if (!g || g->seq < purged.v[i].seq) {
						snprintf(why, sizeof why, "the binlogs holding the GTIDs after %s were purged (the "
							 "oldest binlog, %s, starts after %s)", gtid, logs[0].name, list);
						rc = my_lost(st, cfg, resume, p, why, err, errlen);
					}
				}
			}
			sl_mariadb_gtid_pos_free(&have);
			sl_mariadb_gtid_pos_free(&purged);
		} else if (!srv->mariadb) {
			char purged_text[4096];
			struct sl_mysql_gtid_set have, purged;
			sl_mysql_gtid_set_init(&have);
			sl_mysql_gtid_set_init(&purged);
			rc = sl_my_query_value(c, "SELECT @@global.gtid_purged", purged_text, sizeof purged_text, NULL, err,
					       errlen);
			if (rc == SL_OK && sl_mysql_gtid_set_parse(&have, gtid, strlen(gtid), why, sizeof why) == 0 &&
			    sl_mysql_gtid_set_parse(&purged, purged_text, strlen(purged_text), why, sizeof why) == 0 &&
			    !sl_mysql_gtid_set_is_subset(&purged, &have)) {
				snprintf(why, sizeof why, "GTIDs it has not read were purged (gtid_purged is %.300s)", purged_text);
				rc = my_lost(st, cfg, resume, p, why, err, errlen);
			}
			sl_mysql_gtid_set_free(&have);
			sl_mysql_gtid_set_free(&purged);
		}
		free(logs);
		return rc;
	}
	if (found < 0) {
		if (n > 0 && sl_my_file_seq(file, strlen(file)) < sl_my_file_seq(logs[0].name, strlen(logs[0].name)))
			snprintf(why, sizeof why, "binlog file %s was purged (the oldest binlog is now %s)", file, logs[0].name);
		else if (n > 0)
			snprintf(why, sizeof why, "the server has no binlog file %s (its binlogs are %s to %s: another server, "
				 "or one restored from a backup)", file, logs[0].name, logs[n - 1].name);
		else
			snprintf(why, sizeof why, "the server keeps no binlog file");
		rc = my_lost(st, cfg, resume, p, why, err, errlen);
	} else if (p->w[1] > logs[found].size) {
		snprintf(why, sizeof why, "binlog file %s ends at %" PRIu64 ", before the position", file, logs[found].size);
		rc = my_lost(st, cfg, resume, p, why, err, errlen);
	}
	free(logs);
	return rc;
}

int my_prepare(void *ctx, const struct sl_source_resume *resume, struct sl_source_plan *plan, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	int rc;

	memset(plan, 0, sizeof *plan);
	if ((rc = sl_my_check_prereqs(s->meta, &s->srv, s->cfg, s->st, NULL, err, errlen)) < 0)
		return rc;
	plan->status_interval_ms = s->heartbeat_ms;
	if (!resume->has_position || resume->reset) {
		plan->need_position = true;
		return SL_OK;
	}
	return my_judge_position(s->meta, &s->srv, s->cfg, s->st, resume, &resume->durable, err, errlen);
}

int my_current_position(void *ctx, struct sl_position *out, char *err, size_t errlen)
{
	struct my_src *s = ctx;

	return sl_my_head(s->meta, &s->srv, out, err, errlen);
}
