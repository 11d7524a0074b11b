/*
 * sources/mysql/my_conn.c: connections to a MySQL / MariaDB server, their
 * errors, small query helpers, identifier quoting, and the server settings
 * and privileges the source needs (see my_internal.h).
 */
#include "sources/mysql/my_internal.h"

#include <errmsg.h>
#include <inttypes.h>
#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

static _Thread_local int last_err_status = SL_EFAIL;

int sl_my_err_status(void)
{
	return last_err_status;
}

static int classify(unsigned int e)
{
	switch (e) {
	case ER_ACCESS_DENIED_ERROR:           /* 1045: a failed login */
	case ER_DBACCESS_DENIED_ERROR:         /* 1044 */
	case ER_TABLEACCESS_DENIED_ERROR:      /* 1142 */
	case ER_COLUMNACCESS_DENIED_ERROR:     /* 1143 */
	case ER_SPECIFIC_ACCESS_DENIED_ERROR:  /* 1227: "you need (at least one of) the ... privilege(s)" */
	case 1698:                             /* ER_ACCESS_DENIED_NO_PASSWORD_ERROR */
	case 1251:                             /* ER_NOT_SUPPORTED_AUTH_MODE */
	case 1370:                             /* ER_PROCACCESS_DENIED_ERROR */
	case 1130:                             /* ER_HOST_NOT_PRIVILEGED */
		return SL_EPREREQ;
	case ER_MASTER_FATAL_ERROR_READING_BINLOG:  /* 1236: a purged or unknown position */
		return SL_ELOST;
	case 4052:                             /* ER_SLAVE_SAME_ID (MariaDB) */
		return SL_ECONFIG;
	default:
		return SL_EFAIL;
	}
}

static int err_text(char *err, size_t errlen, const char *what, unsigned int e, const char *msg)
{
	int rc = classify(e);
	size_t n;

	snprintf(err, errlen, "%s: %s (error %u)", what, msg && *msg ? msg : "unknown error", e);
	for (char *p = err; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	n = strlen(err);
	if (rc == SL_EPREREQ && n + 1 < errlen)
		snprintf(err + n, errlen - n, "%s", e == ER_ACCESS_DENIED_ERROR || e == 1698 || e == 1251 || e == 1130
			 ? " (a failed login is not retried: fix the user, its password or its host)"
			 : " (a missing privilege is not retried: `sluice check` lists the GRANT statements the user needs)");
	last_err_status = rc;
	sl_log_note_errno(0);
	return rc;
}

int sl_my_err(char *err, size_t errlen, const char *what, MYSQL *c)
{
	return err_text(err, errlen, what, mysql_errno(c), mysql_error(c));
}

/* A statement's error.  A row fetch that fails while reading (the server
 * gone, its connection killed, an error packet in the middle of the rows)
 * leaves the error on the connection and none on the statement: take the
 * connection's then. */
int sl_my_stmt_err(char *err, size_t errlen, const char *what, MYSQL_STMT *st)
{
	if (mysql_stmt_errno(st) == 0 && st->mysql && mysql_errno(st->mysql) != 0)
		return sl_my_err(err, errlen, what, st->mysql);
	return err_text(err, errlen, what, mysql_stmt_errno(st), mysql_stmt_error(st));
}

/* The TLS settings of ssl_mode (Connector/C has no "preferred": it is the
 * library's default, TLS when the server requires it).  The server's
 * certificate is verified explicitly or explicitly not. */
static void set_tls(MYSQL *c, const struct sl_source_config *cfg)
{
	my_bool yes = 1, no = 0;
	const char *m = sl_my_conf(cfg)->ssl_mode;

	if (cfg->sslrootcert)
		mysql_options(c, MYSQL_OPT_SSL_CA, cfg->sslrootcert);
	if (!m) {
		mysql_options(c, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, cfg->sslrootcert ? &yes : &no);
		return;
	}
	if (!strcmp(m, "disabled")) {
		mysql_options(c, MYSQL_OPT_SSL_ENFORCE, &no);
		mysql_options(c, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &no);
	} else if (!strcmp(m, "required")) {
		mysql_options(c, MYSQL_OPT_SSL_ENFORCE, &yes);
		mysql_options(c, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &no);
	} else if (!strcmp(m, "verify_ca") || !strcmp(m, "verify_identity")) {
		mysql_options(c, MYSQL_OPT_SSL_ENFORCE, &yes);
		mysql_options(c, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &yes);
	} else {
		mysql_options(c, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &no);
	}
}

MYSQL *sl_my_connect(const struct sl_source_config *cfg, int read_timeout_s, struct sl_my_server *srv,
		     char *err, size_t errlen)
{
	MYSQL *c = mysql_init(NULL);
	unsigned int ct = cfg->connect_timeout > 0 ? (unsigned)cfg->connect_timeout : 10;
	my_bool no = 0;
	char what[300], v[64];
	int rc;

	last_err_status = SL_EFAIL;
	if (!c) {
		snprintf(err, errlen, "source \"%s\": out of memory", cfg->name ? cfg->name : "?");
		return NULL;
	}
	mysql_options(c, MYSQL_OPT_CONNECT_TIMEOUT, &ct);
	if (read_timeout_s > 0) {
		unsigned int rt = (unsigned)read_timeout_s;
		mysql_options(c, MYSQL_OPT_READ_TIMEOUT, &rt);
		mysql_options(c, MYSQL_OPT_WRITE_TIMEOUT, &rt);
	}
	mysql_options(c, MYSQL_OPT_RECONNECT, &no);
	mysql_options(c, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	/* Read values as stored, with the binlog's conventions: no charset
	 * conversion of results, TIMESTAMPs in UTC, no sql_mode that changes
	 * what SELECT returns (PAD_CHAR_TO_FULL_LENGTH) or how literals read. */
	mysql_options(c, MYSQL_INIT_COMMAND,
		      "SET character_set_results = NULL, time_zone = '+00:00', sql_mode = ''");
	set_tls(c, cfg);
	snprintf(what, sizeof what, "source \"%s\": could not connect to %s:%d as \"%s\"", cfg->name ? cfg->name : "?",
		 cfg->host ? cfg->host : "127.0.0.1", cfg->port, cfg->user ? cfg->user : "");
	if (!mysql_real_connect(c, cfg->host ? cfg->host : "127.0.0.1", cfg->user, cfg->password, NULL,
				(unsigned)cfg->port, NULL, 0)) {
		sl_my_err(err, errlen, what, c);
		mysql_close(c);
		return NULL;
	}
	if (srv) {
		memset(srv, 0, sizeof *srv);
		snprintf(srv->version_text, sizeof srv->version_text, "%s", mysql_get_server_info(c));
		srv->version = mysql_get_server_version(c);
		srv->mariadb = strstr(srv->version_text, "MariaDB") != NULL;
		if ((rc = sl_my_query_value(c, "SELECT @@server_id", v, sizeof v, NULL, err, errlen)) < 0) {
			last_err_status = rc;
			mysql_close(c);
			return NULL;
		}
		srv->server_id = (uint32_t)strtoul(v, NULL, 10);
	}
	return c;
}

int sl_my_exec(MYSQL *c, const char *sql, char *err, size_t errlen)
{
	MYSQL_RES *res;

	if (mysql_real_query(c, sql, strlen(sql)) != 0) {
		char what[200];
		snprintf(what, sizeof what, "%.120s", sql);
		return sl_my_err(err, errlen, what, c);
	}
	/* drain any result */
	do {
		if ((res = mysql_store_result(c)))
			mysql_free_result(res);
	} while (mysql_next_result(c) == 0);
	return SL_OK;
}

int sl_my_query(MYSQL *c, const char *sql, MYSQL_RES **res, char *err, size_t errlen)
{
	char what[200];

	*res = NULL;
	snprintf(what, sizeof what, "%.120s", sql);
	if (mysql_real_query(c, sql, strlen(sql)) != 0)
		return sl_my_err(err, errlen, what, c);
	*res = mysql_store_result(c);
	if (!*res && mysql_field_count(c) > 0)
		return sl_my_err(err, errlen, what, c);
	return SL_OK;
}

int sl_my_query_buf(MYSQL *c, struct sl_buf *q, MYSQL_RES **res, char *err, size_t errlen)
{
	int rc;

	*res = NULL;
	if (sl_buf_failed(q)) {
		sl_buf_free(q);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	rc = sl_my_query(c, q->data, res, err, errlen);
	sl_buf_free(q);
	return rc;
}

int sl_my_query_value(MYSQL *c, const char *sql, char *out, size_t outlen, bool *found, char *err,
		      size_t errlen)
{
	MYSQL_RES *res;
	MYSQL_ROW row;
	unsigned long *len;
	int rc = sl_my_query(c, sql, &res, err, errlen);

	if (found)
		*found = false;
	if (outlen)
		out[0] = '\0';
	if (rc < 0)
		return rc;
	if (res && (row = mysql_fetch_row(res)) && (len = mysql_fetch_lengths(res))) {
		if (found)
			*found = true;
		if (row[0])
			snprintf(out, outlen, "%.*s", (int)len[0], row[0]);
	}
	if (res)
		mysql_free_result(res);
	return SL_OK;
}

int sl_my_append_ident(struct sl_buf *b, const char *name)
{
	sl_buf_putc(b, '`');
	for (const char *p = name; *p; p++) {
		if (*p == '`')
			sl_buf_putc(b, '`');
		sl_buf_putc(b, *p);
	}
	return sl_buf_putc(b, '`');
}

int sl_my_append_qualified(struct sl_buf *b, const char *db, const char *table)
{
	sl_my_append_ident(b, db);
	sl_buf_putc(b, '.');
	return sl_my_append_ident(b, table);
}

int sl_my_append_literal(struct sl_buf *b, const char *s)
{
	sl_buf_putc(b, '\'');
	for (const char *p = s; *p; p++) {
		if (*p == '\'' || *p == '\\')
			sl_buf_putc(b, *p);
		sl_buf_putc(b, *p);
	}
	return sl_buf_putc(b, '\'');
}

/* ---- settings and privileges ---- */

int sl_my_retention_s(MYSQL *c, int64_t *out, char *err, size_t errlen)
{
	char v[64];
	bool found;
	int rc;

	*out = 0;
	rc = sl_my_query_value(c, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES "
			       "WHERE VARIABLE_NAME = 'BINLOG_EXPIRE_LOGS_SECONDS'", v, sizeof v, &found, err, errlen);
	if (rc < 0)
		return rc;
	if (found && v[0]) {
		*out = strtoll(v, NULL, 10);
		if (*out > 0)
			return SL_OK;
	}
	rc = sl_my_query_value(c, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES "
			       "WHERE VARIABLE_NAME = 'EXPIRE_LOGS_DAYS'", v, sizeof v, &found, err, errlen);
	if (rc < 0)
		return rc;
	if (found && v[0])
		*out = (int64_t)(strtod(v, NULL) * 86400.0);
	return SL_OK;
}

/* The current user as GRANT names it: 'user'@'host'. */
static int current_user(MYSQL *c, char *out, size_t outlen, char *err, size_t errlen)
{
	char v[512];
	char *at;
	int rc = sl_my_query_value(c, "SELECT CURRENT_USER()", v, sizeof v, NULL, err, errlen);

	if (rc < 0)
		return rc;
	at = strrchr(v, '@');
	if (at) {
		*at = '\0';
		snprintf(out, outlen, "'%s'@'%s'", v, at + 1);
	} else {
		snprintf(out, outlen, "'%s'", v);
	}
	return SL_OK;
}

int sl_my_select_covers(MYSQL *c, const char *db, bool *covers, char *err, size_t errlen)
{
	char grantee[600], v[32];
	struct sl_buf q;
	int rc;

	*covers = false;
	if ((rc = current_user(c, grantee, sizeof grantee, err, errlen)) < 0)
		return rc;
	sl_buf_init(&q, 0);
	sl_buf_puts(&q, "SELECT (SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = ");
	sl_my_append_literal(&q, grantee);
	sl_buf_puts(&q, " AND PRIVILEGE_TYPE IN ('SELECT', 'ALL PRIVILEGES'))");
	if (db) {
		/* a database grant's name is a LIKE pattern (`shop\_%`) */
		sl_buf_puts(&q, " + (SELECT COUNT(*) FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = ");
		sl_my_append_literal(&q, grantee);
		sl_buf_puts(&q, " AND PRIVILEGE_TYPE = 'SELECT' AND ");
		sl_my_append_literal(&q, db);
		sl_buf_puts(&q, " LIKE TABLE_SCHEMA)");
	}
	if (sl_buf_failed(&q)) {
		sl_buf_free(&q);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	rc = sl_my_query_value(c, q.data, v, sizeof v, NULL, err, errlen);
	sl_buf_free(&q);
	if (rc < 0)
		return rc;
	*covers = strcmp(v, "0") != 0;
	return SL_OK;
}

/* Which of the global privileges the source needs the user lacks. */
static int missing_privileges(MYSQL *c, const struct sl_my_server *srv, const char *grantee, struct sl_buf *missing,
			      char *err, size_t errlen)
{
	struct sl_buf q;
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	bool slave = false, monitor = false, all = false, reload = !sl_my_snapshot_locks(srv);
	int rc;

	sl_buf_init(&q, 0);
	sl_buf_puts(&q, "SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = ");
	sl_my_append_literal(&q, grantee);
	if ((rc = sl_my_query_buf(c, &q, &res, err, errlen)) < 0)
		return rc;
	while (res && (row = mysql_fetch_row(res))) {
		if (!row[0])
			continue;
		if (!strcmp(row[0], "REPLICATION SLAVE"))
			slave = true;
		else if (!strcmp(row[0], "BINLOG MONITOR") || !strcmp(row[0], "REPLICATION CLIENT"))
			monitor = true;
		else if (!strcmp(row[0], "SUPER") && !srv->mariadb)
			monitor = true;
		else if (!strcmp(row[0], "RELOAD"))
			reload = true;
		else if (!strcmp(row[0], "ALL PRIVILEGES"))
			all = true;
	}
	if (res)
		mysql_free_result(res);
	if (all)
		return SL_OK;
	if (!slave)
		sl_buf_puts(missing, "REPLICATION SLAVE");
	if (!monitor)
		sl_buf_printf(missing, "%s%s", missing->len ? ", " : "",
			      srv->mariadb && srv->version >= 100500 ? "BINLOG MONITOR" : "REPLICATION CLIENT");
	/* the snapshot's position is taken under FLUSH TABLES WITH READ LOCK */
	if (!reload)
		sl_buf_printf(missing, "%sRELOAD", missing->len ? ", " : "");
	return SL_OK;
}

int sl_my_check_prereqs(MYSQL *c, const struct sl_my_server *srv, const struct sl_source_config *cfg,
			const struct sl_source_stream *st, FILE *out, char *err, size_t errlen)
{
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	char grantee[600];
	struct sl_buf missing;
	int64_t retention;
	int rc;

	rc = sl_my_query(c, srv->mariadb && srv->version >= 100500
			 ? "SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata"
			 : srv->mariadb ? "SELECT @@log_bin, @@binlog_format, @@binlog_row_image, 'NO_LOG'"
			 : "SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata",
			 &res, err, errlen);
	if (rc < 0)
		return rc;
	row = res ? mysql_fetch_row(res) : NULL;
	if (!row) {
		if (res)
			mysql_free_result(res);
		snprintf(err, errlen, "stream \"%s\": source \"%s\" did not report its binlog settings", st->name,
			 cfg->name);
		return SL_EFAIL;
	}
	if (!row[0] || strcmp(row[0], "1") != 0) {
		snprintf(err, errlen, "stream \"%s\": source \"%s\" does not write a binary log (log_bin is off): "
			 "start the server with log_bin and binlog_format=ROW", st->name, cfg->name);
		rc = SL_EPREREQ;
	} else if (!row[1] || strcasecmp(row[1], "ROW") != 0) {
		snprintf(err, errlen, "stream \"%s\": source \"%s\" has binlog_format = %s; sluice reads ROW events "
			 "only: set binlog_format=ROW in the server's configuration (and SET GLOBAL binlog_format = "
			 "'ROW', which takes effect for new sessions)", st->name, cfg->name, row[1] ? row[1] : "NULL");
		rc = SL_EPREREQ;
	} else if (!row[2] || strcasecmp(row[2], "FULL") != 0) {
		snprintf(err, errlen, "stream \"%s\": source \"%s\" has binlog_row_image = %s; sluice needs FULL row "
			 "images: set binlog_row_image=FULL in the server's configuration (and SET GLOBAL "
			 "binlog_row_image = 'FULL')", st->name, cfg->name, row[2] ? row[2] : "NULL");
		rc = SL_EPREREQ;
	} else if (sl_my_conf(cfg)->server_id == srv->server_id) {
		snprintf(err, errlen, "stream \"%s\": source \"%s\": server_id = %" PRIu32 " is the server's own "
			 "server_id; give sluice one that no server and no other replica uses", st->name, cfg->name,
			 sl_my_conf(cfg)->server_id);
		rc = SL_ECONFIG;
	}
	if (rc == SL_OK && out) {
		fprintf(out, "stream %s: source %s: %s, log_bin on, binlog_format = ROW, binlog_row_image = FULL\n",
			st->name, cfg->name, srv->version_text);
		if (!row[3] || strcasecmp(row[3], "FULL") != 0)
			fprintf(out, "stream %s: source %s: note: binlog_row_metadata = %s: column names, signedness, "
				"charsets and ENUM strings come from information_schema (FULL puts them in the binlog, "
				"which is safer across schema changes)\n", st->name, cfg->name, row[3] ? row[3] : "NULL");
	}
	mysql_free_result(res);
	if (rc < 0)
		return rc;

	/* privileges */
	if ((rc = current_user(c, grantee, sizeof grantee, err, errlen)) < 0)
		return rc;
	sl_buf_init(&missing, 0);
	if ((rc = missing_privileges(c, srv, grantee, &missing, err, errlen)) == SL_OK && missing.len > 0) {
		snprintf(err, errlen, "stream \"%s\": user %s on source \"%s\" lacks %s; as an administrator run: GRANT "
			 "%s ON *.* TO %s", st->name, grantee, cfg->name, missing.data, missing.data, grantee);
		rc = SL_EPREREQ;
	}
	sl_buf_free(&missing);
	if (rc < 0)
		return rc;
	if (out)
		fprintf(out, "stream %s: source %s: user %s may read the binlog\n", st->name, cfg->name, grantee);

	/* retention */
	if ((rc = sl_my_retention_s(c, &retention, err, errlen)) < 0)
		return rc;
	if (retention > 0 && retention < 86400) {
		if (out)
			fprintf(out, "stream %s: source %s: warning: binlogs expire after %" PRId64 " s; a stream stopped "
				"for longer loses its position (exit code 4)\n", st->name, cfg->name, retention);
		else
			sl_warn("stream \"%s\": source \"%s\": binlogs expire after %" PRId64 " s; a stream stopped for "
				"longer loses its position", st->name, cfg->name, retention);
	} else if (out) {
		if (retention > 0)
			fprintf(out, "stream %s: source %s: binlogs expire after %" PRId64 " s\n", st->name, cfg->name,
				retention);
		else
			fprintf(out, "stream %s: source %s: binlogs do not expire by time\n", st->name, cfg->name);
	}
	return SL_OK;
}

int sl_my_binlogs(MYSQL *c, struct sl_my_binlog_file **out, int *n, char *err, size_t errlen)
{
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	int rc = sl_my_query(c, "SHOW BINARY LOGS", &res, err, errlen);
	uint64_t nr;

	*out = NULL;
	*n = 0;
	if (rc < 0)
		return rc;
	nr = res ? mysql_num_rows(res) : 0;
	if (nr > 0 && !(*out = calloc(nr, sizeof **out))) {
		mysql_free_result(res);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	while (res && (row = mysql_fetch_row(res)) && (uint64_t)*n < nr) {
		snprintf((*out)[*n].name, sizeof (*out)[*n].name, "%s", row[0] ? row[0] : "");
		(*out)[*n].size = row[1] ? strtoull(row[1], NULL, 10) : 0;
		(*n)++;
	}
	if (res)
		mysql_free_result(res);
	return SL_OK;
}

int sl_my_head(MYSQL *c, const struct sl_my_server *srv, struct sl_position *out, char *err, size_t errlen)
{
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	char gtid[SL_POS_TEXT_MAX];
	int rc = sl_my_query(c, "SHOW MASTER STATUS", &res, err, errlen);

	if (rc < 0)
		return rc;
	row = res ? mysql_fetch_row(res) : NULL;
	if (!row || !row[0] || !row[1]) {
		if (res)
			mysql_free_result(res);
		snprintf(err, errlen, "SHOW MASTER STATUS returned nothing: is log_bin on?");
		return SL_EPREREQ;
	}
	gtid[0] = '\0';
	if (srv->mariadb) {
		rc = sl_my_query_value(c, "SELECT @@gtid_binlog_pos", gtid, sizeof gtid, NULL, err, errlen);
	} else if (mysql_num_fields(res) >= 5 && row[4]) {
		/* Executed_Gtid_Set, printed with newlines after commas */
		size_t k = 0;
		for (const char *p = row[4]; *p && k + 1 < sizeof gtid; p++)
			if (*p != '\n' && *p != ' ')
				gtid[k++] = *p;
		gtid[k] = '\0';
	}
	if (rc == SL_OK)
		*out = sl_my_pos(row[0], strtoull(row[1], NULL, 10), gtid, NULL);
	mysql_free_result(res);
	return rc;
}
