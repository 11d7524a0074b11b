/*
 * sources/mysql/my_ddl.c: reads just enough of a statement from a binlog
 * QUERY event to know whether it changes tables, and which: in ROW format
 * the binlog carries rows for DML, but DDL (CREATE, ALTER, DROP, RENAME,
 * TRUNCATE) as statement text.  The source re-reads the catalog for the
 * tables a DDL names, and turns a TRUNCATE into TRUNCATE records.
 *
 * The tokenizer knows identifiers (plain and `quoted`), string literals,
 * numbers, punctuation and comments (/ * * /, -- and #); the text of an
 * executable comment / *!NNNNN ... * / counts as code.  A statement it
 * cannot read is SL_MY_STMT_UNKNOWN_DDL: the caller then checks every table.
 */
#include "sources/mysql/my_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum tk { TK_END = 0, TK_WORD, TK_QUOTED, TK_STRING, TK_PUNCT };

struct lexer {
	const char *p, *end;
	enum tk kind;
	char text[256];     /* the token: a word, an identifier unquoted, or the punctuation character */
	bool overflow;      /* the identifier was longer than text */
};

static bool word_char(unsigned char c)
{
	return isalnum(c) || c == '_' || c == '$' || c >= 0x80;
}

static void skip_space(struct lexer *l)
{
	for (;;) {
		while (l->p < l->end && (isspace((unsigned char)*l->p) || *l->p == ';'))
			l->p++;
		if (l->p + 1 < l->end && l->p[0] == '/' && l->p[1] == '*') {
			if (l->p + 2 < l->end && l->p[2] == '!') {
				/* an executable comment: its text is code */
				l->p += 3;
				while (l->p < l->end && isdigit((unsigned char)*l->p))
					l->p++;
				continue;
			}
			l->p += 2;
			while (l->p + 1 < l->end && !(l->p[0] == '*' && l->p[1] == '/'))
				l->p++;
			l->p = l->p + 1 < l->end ? l->p + 2 : l->end;
			continue;
		}
		if (l->p + 1 < l->end && l->p[0] == '*' && l->p[1] == '/') {
			l->p += 2;  /* the end of an executable comment */
			continue;
		}
		if ((l->p + 2 < l->end && l->p[0] == '-' && l->p[1] == '-' && isspace((unsigned char)l->p[2])) ||
		    (l->p < l->end && l->p[0] == '#')) {
			while (l->p < l->end && *l->p != '\n')
				l->p++;
			continue;
		}
		return;
	}
}

static void next(struct lexer *l)
{
	size_t n = 0;

	l->overflow = false;
	l->text[0] = '\0';
	skip_space(l);
	if (l->p >= l->end) {
		l->kind = TK_END;
		return;
	}
	if (*l->p == '`') {
		l->p++;
		while (l->p < l->end) {
			if (*l->p == '`') {
				if (l->p + 1 < l->end && l->p[1] == '`') {
					l->p++;
				} else {
					l->p++;
					break;
				}
			}
			if (n + 1 < sizeof l->text)
				l->text[n++] = *l->p;
			else
				l->overflow = true;
			l->p++;
		}
		l->text[n] = '\0';
		l->kind = TK_QUOTED;
		return;
	}
	if (*l->p == '\'' || *l->p == '"') {
		char q = *l->p++;
		while (l->p < l->end && *l->p != q) {
			if (*l->p == '\\' && l->p + 1 < l->end)
				l->p++;
			l->p++;
		}
		if (l->p < l->end)
			l->p++;
		l->kind = TK_STRING;
		return;
	}
	if (word_char((unsigned char)*l->p)) {
		while (l->p < l->end && word_char((unsigned char)*l->p)) {
			if (n + 1 < sizeof l->text)
				l->text[n++] = *l->p;
			else
				l->overflow = true;
			l->p++;
		}
		l->text[n] = '\0';
		l->kind = TK_WORD;
		return;
	}
	l->text[0] = *l->p++;
	l->text[1] = '\0';
	l->kind = TK_PUNCT;
}

static bool is(const struct lexer *l, const char *kw)
{
	return l->kind == TK_WORD && !strcasecmp(l->text, kw);
}

static bool accept(struct lexer *l, const char *kw)
{
	if (!is(l, kw))
		return false;
	next(l);
	return true;
}

static bool punct(const struct lexer *l, char c)
{
	return l->kind == TK_PUNCT && l->text[0] == c;
}

/* Reads [db.]name into out; false when the tokens are no name. */
/* After the first table an INSERT, UPDATE or DELETE names: whether it is
 * the only table the statement changes, or the first of a multi-table
 * UPDATE or DELETE (a list, a join, DELETE t FROM ... or FROM t USING ...). */
static bool single_target(struct lexer *l)
{
	static const char *const after[] = { "SET", "WHERE", "VALUES", "VALUE", "SELECT", "PARTITION", "ORDER",
					     "LIMIT", "ON", "RETURNING", "DEFAULT", "WITH", "JOIN", "INNER", "CROSS",
					     "LEFT", "RIGHT", "NATURAL", "STRAIGHT_JOIN", "FROM", "USING", NULL };
	bool alias = l->kind == TK_QUOTED || l->kind == TK_WORD;

	for (int i = 0; after[i] && alias; i++)
		alias = !is(l, after[i]);
	if (accept(l, "AS") || alias)
		next(l);   /* the table's alias */
	return !punct(l, ',') && !is(l, "JOIN") && !is(l, "INNER") && !is(l, "CROSS") && !is(l, "LEFT") &&
	       !is(l, "RIGHT") && !is(l, "NATURAL") && !is(l, "STRAIGHT_JOIN") && !is(l, "FROM") && !is(l, "USING");
}

static bool read_name(struct lexer *l, const char *default_db, struct sl_my_name *out)
{
	if ((l->kind != TK_WORD && l->kind != TK_QUOTED) || l->overflow)
		return false;
	snprintf(out->table, sizeof out->table, "%s", l->text);
	snprintf(out->db, sizeof out->db, "%s", default_db ? default_db : "");
	out->role = SL_MY_TOUCHES;
	out->fill = SL_MY_FILL_NONE;
	out->column[0] = '\0';
	next(l);
	if (punct(l, '.')) {
		next(l);
		if ((l->kind != TK_WORD && l->kind != TK_QUOTED) || l->overflow)
			return false;
		snprintf(out->db, sizeof out->db, "%s", out->table);
		snprintf(out->table, sizeof out->table, "%s", l->text);
		next(l);
	}
	return true;
}

/* The first column of a clause that gives the existing rows a value
 * without row events, and why. */
static void fill_note(struct sl_my_name *x, enum sl_my_fill why, const char *name)
{
	if (x->fill != SL_MY_FILL_NONE)
		return;
	x->fill = why;
	snprintf(x->column, sizeof x->column, "%s", name);
}

/* After ADD, MODIFY or CHANGE in ALTER TABLE: reads the clause to its end
 * (a comma outside parentheses) and notes in x (fill_note) the first
 * column that the existing rows get a value for other than NULL without
 * row events.  ADD: a DEFAULT other than NULL (a literal, or
 * SL_MY_FILL_VOLATILE: an expression or a function), or NOT NULL (whose
 * implicit default is the type's zero or empty value), or a TIMESTAMP with neither
 * (SL_MY_FILL_TIMESTAMP: NOT NULL with a default of its own under
 * explicit_defaults_for_timestamp = OFF).  MODIFY, CHANGE (modify): NOT
 * NULL, which turns the column's NULLs into the type's implicit default
 * (a DEFAULT applies to future rows only).  An index, key, constraint,
 * partition or period is no column: nothing read. */
enum clause { CL_ADD, CL_MODIFY, CL_CHANGE };

/* At the token after DEFAULT: whether it is a literal (a number, maybe
 * signed, a string, maybe with an introducer or as X'..' or B'..', TRUE or
 * FALSE), the same value for every row, rather than an expression or a
 * function such as CURRENT_TIMESTAMP. */
static bool literal(const struct lexer *l)
{
	bool quote_next = l->p < l->end && *l->p == '\'';

	if (l->kind == TK_STRING || is(l, "TRUE") || is(l, "FALSE"))
		return true;
	if (l->kind == TK_WORD && isdigit((unsigned char)l->text[0]))
		return true;
	if (l->kind == TK_WORD && quote_next && (l->text[0] == '_' || (!l->text[1] && strchr("xXbBnN", l->text[0]))))
		return true;
	return (punct(l, '-') || punct(l, '+') || punct(l, '.')) && l->p < l->end &&
	       (isdigit((unsigned char)*l->p) || *l->p == '.');
}

static void column_clause(struct lexer *l, enum clause kind, struct sl_my_name *x)
{
	static const char *const not_column[] = { "INDEX", "KEY", "PRIMARY", "UNIQUE", "FULLTEXT", "SPATIAL",
						  "FOREIGN", "CONSTRAINT", "CHECK", "PARTITION", "PERIOD",
						  "SYSTEM", "VECTOR", NULL };
	char name[256] = "";
	bool at_name = true, at_type = false, ts = false, nulls = false, list, modify = kind != CL_ADD;
	int depth = 0;

	for (int i = 0; not_column[i]; i++)
		if (is(l, not_column[i]))
			return;
	accept(l, "COLUMN");
	if (accept(l, "IF")) {
		accept(l, "NOT");
		accept(l, "EXISTS");
	}
	if ((list = punct(l, '('))) {
		next(l);   /* ADD COLUMN (a int, b int) */
		depth = 1;
	}
	for (;;) {
		bool end = l->kind == TK_END || (depth == 0 && punct(l, ','));
		if (end || (list && depth == 1 && (punct(l, ',') || punct(l, ')')))) {
			if (ts && !nulls && !modify)   /* a column's definition ends */
				fill_note(x, SL_MY_FILL_TIMESTAMP, name);
			ts = nulls = false;
			at_name = !end;
		}
		if (end)
			break;
		if (at_name && (l->kind == TK_WORD || l->kind == TK_QUOTED)) {
			snprintf(name, sizeof name, "%s", l->text);   /* the first word of a column's definition */
			at_name = false;
			at_type = true;
			next(l);
			if (kind == CL_CHANGE && (l->kind == TK_WORD || l->kind == TK_QUOTED)) {
				if (strcmp(name, l->text) != 0)   /* CHANGE old new: renamed */
					fill_note(x, SL_MY_FILL_RENAMED, l->text);
				snprintf(name, sizeof name, "%s", l->text);
				next(l);
			}
			continue;
		}
		if (at_type) {
			ts = is(l, "TIMESTAMP");
			at_type = false;
		}
		if (punct(l, '(') || punct(l, ')')) {
			depth += punct(l, '(') ? 1 : -1;
		} else if (is(l, "DEFAULT") || is(l, "NOT")) {
			bool dflt = is(l, "DEFAULT");
			next(l);
			nulls = true;
			if (dflt != is(l, "NULL") && (!modify || !dflt))
				fill_note(x, modify ? SL_MY_FILL_NOT_NULL : dflt && !literal(l) ? SL_MY_FILL_VOLATILE :
					  SL_MY_FILL_DEFAULT, name);
			continue;
		} else if (is(l, "NULL")) {
			nulls = true;
		}
		next(l);
	}
}

static void add(struct sl_my_name *names, int max, int *n, const struct sl_my_name *x)
{
	if (*n < max)
		names[*n] = *x;
	(*n)++;
}

/* ALTER ...: after the word ALTER. */
static enum sl_my_stmt parse_alter(struct lexer *l, const char *default_db, struct sl_my_name *names, int max,
				  int *n)
{
	struct sl_my_name x;

	accept(l, "ONLINE");
	accept(l, "IGNORE");
	if (is(l, "DATABASE") || is(l, "SCHEMA"))
		return SL_MY_STMT_DB_DDL;
	if (!accept(l, "TABLE"))
		return SL_MY_STMT_OTHER;   /* ALTER USER, VIEW, EVENT, ... */
	if (accept(l, "IF"))
		accept(l, "EXISTS");
	if (!read_name(l, default_db, &x))
		return SL_MY_STMT_UNKNOWN_DDL;
	add(names, max, n, &x);
	/* ALTER TABLE t ... RENAME [TO | AS] t2; and the partition
	 * operations that remove or bring rows without row events:
	 * TRUNCATE / DROP PARTITION, EXCHANGE PARTITION p WITH TABLE t2 */
	while (l->kind != TK_END) {
		if (accept(l, "TRUNCATE") || accept(l, "DROP")) {
			if (is(l, "PARTITION") && *n > 0 && max > 0)
				names[0].role = SL_MY_BINDS;
			continue;
		}
		if (accept(l, "EXCHANGE")) {
			if (!accept(l, "PARTITION"))
				continue;
			if (*n > 0 && max > 0)
				names[0].role = SL_MY_BINDS;
			while (l->kind != TK_END && !is(l, "WITH"))
				next(l);
			if (accept(l, "WITH") && accept(l, "TABLE") && read_name(l, default_db, &x)) {
				x.role = SL_MY_BINDS;
				add(names, max, n, &x);
			}
			continue;
		}
		if (is(l, "ADD") || is(l, "MODIFY") || is(l, "CHANGE")) {
			enum clause kind = is(l, "ADD") ? CL_ADD : is(l, "MODIFY") ? CL_MODIFY : CL_CHANGE;
			next(l);
			if (*n > 0 && max > 0)
				column_clause(l, kind, &names[0]);
			continue;
		}
		if (accept(l, "RENAME")) {
			if (accept(l, "COLUMN")) {
				/* RENAME COLUMN [IF EXISTS] a TO b */
				if (accept(l, "IF"))
					accept(l, "EXISTS");
				if (l->kind == TK_WORD || l->kind == TK_QUOTED)
					next(l);
				if (accept(l, "TO") && (l->kind == TK_WORD || l->kind == TK_QUOTED) && *n > 0 && max > 0)
					fill_note(&names[0], SL_MY_FILL_RENAMED, l->text);
				continue;
			}
			if (is(l, "INDEX") || is(l, "KEY") || is(l, "CONSTRAINT"))
				continue;
			if (!accept(l, "TO"))
				accept(l, "AS");
			if (read_name(l, default_db, &x)) {
				if (*n > 0 && max > 0)
					names[0].role = SL_MY_ENDS;
				x.role = SL_MY_BINDS;
				add(names, max, n, &x);
			}
			continue;
		}
		next(l);
	}
	return *n > max ? SL_MY_STMT_UNKNOWN_DDL : SL_MY_STMT_TABLE_DDL;
}

/* DROP ...: after the word DROP. */
static enum sl_my_stmt parse_drop(struct lexer *l, const char *default_db, struct sl_my_name *names, int max,
				  int *n)
{
	struct sl_my_name x;

	if (accept(l, "DATABASE") || accept(l, "SCHEMA")) {
		/* every table of the database ends: the name is the
		 * database's, with an empty table */
		if (accept(l, "IF"))
			accept(l, "EXISTS");
		if (read_name(l, NULL, &x) && !x.db[0]) {
			snprintf(x.db, sizeof x.db, "%s", x.table);
			x.table[0] = '\0';
			x.role = SL_MY_ENDS;
			add(names, max, n, &x);
		}
		return SL_MY_STMT_DB_DDL;
	}
	if (accept(l, "INDEX")) {
		while (l->kind != TK_END && !is(l, "ON"))
			next(l);
		if (!accept(l, "ON") || !read_name(l, default_db, &x))
			return SL_MY_STMT_UNKNOWN_DDL;
		add(names, max, n, &x);
		return SL_MY_STMT_TABLE_DDL;
	}
	if (accept(l, "TEMPORARY"))
		return SL_MY_STMT_OTHER;
	if (!accept(l, "TABLE") && !accept(l, "TABLES"))
		return SL_MY_STMT_OTHER;   /* VIEW, USER, ... */
	if (accept(l, "IF"))
		accept(l, "EXISTS");
	for (;;) {
		if (!read_name(l, default_db, &x))
			return SL_MY_STMT_UNKNOWN_DDL;
		x.role = SL_MY_ENDS;
		add(names, max, n, &x);
		if (!punct(l, ','))
			break;
		next(l);
	}
	return *n > max ? SL_MY_STMT_UNKNOWN_DDL : SL_MY_STMT_TABLE_DDL;
}

enum sl_my_stmt sl_my_ddl_parse(const char *sql, size_t len, const char *default_db, struct sl_my_name *names,
				int max, int *n)
{
	struct lexer l = { .p = sql, .end = sql + len };
	struct sl_my_name x;

	*n = 0;
	next(&l);
	if (is(&l, "BEGIN") || is(&l, "COMMIT") || is(&l, "ROLLBACK") || is(&l, "SAVEPOINT") || is(&l, "RELEASE") ||
	    is(&l, "XA"))
		return SL_MY_STMT_TX;
	if (accept(&l, "TRUNCATE")) {
		accept(&l, "TABLE");
		if (!read_name(&l, default_db, &x))
			return SL_MY_STMT_UNKNOWN_DDL;
		add(names, max, n, &x);
		return SL_MY_STMT_TRUNCATE;
	}
	if (accept(&l, "RENAME")) {
		if (!accept(&l, "TABLE") && !accept(&l, "TABLES"))
			return SL_MY_STMT_OTHER;   /* RENAME USER */
		for (;;) {
			if (!read_name(&l, default_db, &x))
				return SL_MY_STMT_UNKNOWN_DDL;
			x.role = SL_MY_ENDS;
			add(names, max, n, &x);
			if (!accept(&l, "TO") || !read_name(&l, default_db, &x))
				return SL_MY_STMT_UNKNOWN_DDL;
			x.role = SL_MY_BINDS;
			add(names, max, n, &x);
			if (!punct(&l, ','))
				break;
			next(&l);
		}
		return *n > max ? SL_MY_STMT_UNKNOWN_DDL : SL_MY_STMT_TABLE_DDL;
	}
	if (accept(&l, "CREATE")) {
		if (accept(&l, "OR"))
			accept(&l, "REPLACE");
		if (is(&l, "DATABASE") || is(&l, "SCHEMA"))
			return SL_MY_STMT_DB_DDL;
		if (accept(&l, "TEMPORARY"))
			return SL_MY_STMT_OTHER;   /* not in the binlog as rows */
		if (accept(&l, "UNIQUE") || accept(&l, "FULLTEXT") || accept(&l, "SPATIAL") || is(&l, "INDEX")) {
			if (!accept(&l, "INDEX"))
				return SL_MY_STMT_UNKNOWN_DDL;
			while (l.kind != TK_END && !is(&l, "ON"))
				next(&l);
			if (!accept(&l, "ON") || !read_name(&l, default_db, &x))
				return SL_MY_STMT_UNKNOWN_DDL;
			add(names, max, n, &x);
			return SL_MY_STMT_TABLE_DDL;
		}
		if (!accept(&l, "TABLE"))
			return SL_MY_STMT_OTHER;   /* VIEW, PROCEDURE, USER, SEQUENCE, ... */
		if (accept(&l, "IF")) {
			accept(&l, "NOT");
			accept(&l, "EXISTS");
		}
		if (!read_name(&l, default_db, &x))
			return SL_MY_STMT_UNKNOWN_DDL;
		add(names, max, n, &x);
		return SL_MY_STMT_TABLE_DDL;
	}
	if (accept(&l, "ALTER")) {
		return parse_alter(&l, default_db, names, max, n);
	}
	if (accept(&l, "DROP")) {
		return parse_drop(&l, default_db, names, max, n);
	}
	if (is(&l, "GRANT") || is(&l, "REVOKE") || is(&l, "SET") || is(&l, "FLUSH") || is(&l, "ANALYZE") ||
	    is(&l, "OPTIMIZE") || is(&l, "REPAIR") || is(&l, "CHECK") || is(&l, "INSTALL") || is(&l, "UNINSTALL") ||
	    is(&l, "DO") || is(&l, "CALL") || is(&l, "KILL") || is(&l, "SHUTDOWN") || is(&l, "PURGE") ||
	    is(&l, "RESET") || l.kind == TK_END)
		return SL_MY_STMT_OTHER;
	/* INSERT / UPDATE / DELETE / REPLACE logged as statements (a session in
	 * STATEMENT or MIXED format): changes the source cannot read. */
	if (accept(&l, "INSERT") || accept(&l, "REPLACE") || accept(&l, "UPDATE") || accept(&l, "DELETE") ||
	    accept(&l, "LOAD")) {
		while (accept(&l, "LOW_PRIORITY") || accept(&l, "DELAYED") || accept(&l, "HIGH_PRIORITY") ||
		       accept(&l, "IGNORE") || accept(&l, "QUICK") || accept(&l, "INTO") || accept(&l, "FROM") ||
		       accept(&l, "DATA") || accept(&l, "CONCURRENT") || accept(&l, "LOCAL"))
			;
		if (read_name(&l, default_db, &x)) {
			x.role = single_target(&l) ? SL_MY_TOUCHES : SL_MY_BINDS;
			add(names, max, n, &x);
		}
		return SL_MY_STMT_DML;
	}
	return SL_MY_STMT_UNKNOWN_DDL;
}
