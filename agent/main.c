/*
 * agent/main.c: the command line: check, run, status, backfill, verify, compact,
 * version.
 * Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error,
 * 3 source or destination prerequisites not met, 4 position lost.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "agent/commands.h"
#include "agent/config.h"
#include "agent/lock.h"
#include "agent/monitor.h"
#include "agent/stream.h"
#include "common/log.h"
#include "common/util.h"
#include "ops/http.h"
#include "ops/metrics.h"
#include "common/outage.h"

static const char usage_main[] =
	"sluice: change data capture from PostgreSQL (pgoutput) and MySQL/MariaDB\n"
	"(binlog) into Avro files in a folder (avro_dir) or an S3 bucket (s3), or into\n"
	"ClickHouse tables (clickhouse), in append or merge mode\n"
	"\n"
	"usage: sluice COMMAND [OPTIONS]\n"
	"\n"
	"commands:\n"
	"  check    -c FILE [--stream NAME]      validate the config and the source prerequisites\n"
	"  run      -c FILE [--stream NAME] [--until-caught-up]\n"
	"                                        backfill, then stream changes until stopped\n"
	"  status   -c FILE [--stream NAME] [--json]\n"
	"                                        state, positions, lag, backfill progress, alerts\n"
	"  backfill -c FILE --stream NAME [--table SCHEMA.TABLE]\n"
	"                                        request a (re-)backfill: of one table from the\n"
	"                                        running agent, else on the next run\n"
	"  verify   -c FILE --stream NAME        check the output against its manifests:\n"
	"                                        nothing missing, damaged or twice\n"
	"  compact  -c FILE --stream NAME [--table SCHEMA.TABLE]\n"
	"                                        fold merge-mode files into a new base;\n"
	"                                        rewrite an iceberg table's small files\n"
	"  version                               print the version\n"
	"\n"
	"Run `sluice COMMAND --help` for the options of one command.\n"
	"Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error (also:\n"
	"another agent runs the stream), 3 source or destination prerequisites not\n"
	"met (also: a schema change the destination's table cannot take), 4 position\n"
	"lost or checkpoint corrupt (operator action needed: the message gives the\n"
	"command that recovers).  status: 1 an alert fires, 5 some status could not\n"
	"be determined, 6 no agent runs a stream, 7 a stream failed, 8 the agent is\n"
	"not responding (`sluice status --help`).\n"
	"Documentation: README.md and doc/ (configuration.md for every key,\n"
	"operations.md, deploy.md, mysql.md, clickhouse.md, s3.md).\n";

static const char usage_check[] =
	"usage: sluice check -c FILE [--stream NAME]\n"
	"\n"
	"Validates FILE, then for every stream connects to its source and checks what\n"
	"`sluice run` depends on, with run's exit codes and words: wal_level, the\n"
	"REPLICATION attribute, USAGE on each selected table's schema and SELECT on the\n"
	"table, replica identities and keys (a unique NOT NULL key in merge mode;\n"
	"key_columns NOT NULL and held by the replica identity), that the role may\n"
	"create the publication or add the tables it lacks and that an existing one\n"
	"fits, the slot against the stream's checkpoint, and the destination: an\n"
	"avro_dir path must be writable; for s3, a small object is written under\n"
	"<prefix>/<stream>/ and deleted, which proves the credentials and the bucket;\n"
	"ClickHouse must answer, let the user write and have (or let it create) the\n"
	"database; a metrics_listen address must be free to listen on (bound and\n"
	"closed again; not tested while an agent of this config runs).  It lists the\n"
	"columns of each table that exclude_columns leaves out and mask_columns masks.\n"
	"Changes nothing else.  Exit 0 when everything is in order, 2 for a bad config\n"
	"(or a tables entry without glob characters that names no table, a column\n"
	"rule that matches no column, an excluded key column), 3 when a source\n"
	"prerequisite is missing (the message gives the GRANT or the statement to\n"
	"run), the destination refuses the credentials or lacks its bucket, or\n"
	"metrics_listen cannot be bound, 4 when the stream's position is lost.\n"
	"\n"
	"  -c, --config FILE     the configuration file\n"
	"  -s, --stream NAME     check only this stream\n";

static const char usage_run[] =
	"usage: sluice run -c FILE [--stream NAME] [--until-caught-up]\n"
	"\n"
	"Runs every stream of FILE (or only NAME).  On a stream's first run it creates\n"
	"the publication and the replication slot, backfills the selected tables from\n"
	"the slot's snapshot, then follows the slot.  Output is acknowledged to the\n"
	"source only after it is durable in the destination and checkpointed.\n"
	"\n"
	"  -c, --config FILE     the configuration file\n"
	"  -s, --stream NAME     run only this stream\n"
	"  -u, --until-caught-up finish any backfill, stream until everything up to the\n"
	"                        source's WAL position at start-up is durable and\n"
	"                        acknowledged, then exit 0\n"
	"\n"
	"A runtime failure (a restarted server, a dropped connection, a full disk) is\n"
	"retried from the last checkpoint with backoff (1 s doubling to 30 s; at most\n"
	"5 retries with --until-caught-up).  Configuration errors, missing\n"
	"prerequisites (a destination that refuses the user, a schema change its\n"
	"table cannot take), a lost position and a corrupt checkpoint are not\n"
	"retried: the stream stops at once.  A destination outage is logged when it\n"
	"starts, every [agent] outage_log_interval (60 s) while it lasts, and when\n"
	"it ends.\n"
	"\n"
	"Each stream is locked (<state_dir>/<stream>.lock) while it runs: a second\n"
	"agent for the same stream and state_dir exits 2 at once.\n"
	"\n"
	"SIGTERM or SIGINT drains (flush, checkpoint, acknowledge, exit 0); a second\n"
	"signal cancels at once, acknowledging nothing that is not durable.  SIGHUP is\n"
	"logged and ignored: restart sluice to apply a new configuration.\n"
	"\n"
	"While it runs, a probe per stream reads the slot's lag and retained WAL on a\n"
	"connection of its own every probe_interval and raises alerts (logged, on\n"
	"/metrics, POSTed to alert_webhook); /metrics, /healthz (readiness) and /livez\n"
	"(liveness) are served on metrics_listen, when it is set (an address that\n"
	"cannot be bound: exit 3); heartbeat_interval writes heartbeats through the\n"
	"slot.  Under systemd (NOTIFY_SOCKET) it sends READY=1 once the streams run,\n"
	"WATCHDOG=1 while its probes and writers make progress (WATCHDOG_USEC) and\n"
	"STOPPING=1 at the first signal.  On a terminal, a live line shows backfill\n"
	"progress.\n";

static const char usage_status[] =
	"usage: sluice status -c FILE [--stream NAME] [--json]\n"
	"\n"
	"Prints, per stream (or only NAME): its state (starting, backfilling,\n"
	"streaming, retrying, stopped, failed), whether an agent runs it and what it\n"
	"waits for (a slot being created waits for open transactions), the last error\n"
	"with its time and the retries, the durable position from the checkpoint, the\n"
	"slot's confirmed position, lag and retained WAL (\"unknown\", null in --json,\n"
	"when the server has no figure), freshness, each table's backfill state and,\n"
	"while it runs, its progress (rows, estimate, %, ETA), and the alerts that\n"
	"fire, with their recent history.  While an agent runs the stream, also what\n"
	"only the agent knows (queue, last flush, heartbeats, its alerts), from the\n"
	"run file it keeps in state_dir.  Works whether or not an agent runs.\n"
	"\n"
	"  -c, --config FILE     the configuration file\n"
	"  -s, --stream NAME     only this stream (exit 2 when there is none of that name)\n"
	"  -j, --json            the same as JSON\n"
	"\n"
	"An agent whose run file is older than 2 x probe_interval + 5 s (its probe\n"
	"thread rewrites it after every pass) is shown as \"agent: not responding\".\n"
	"\n"
	"Exit codes (with several streams or cases, the highest wins):\n"
	"  0  an agent runs every stream, every status was determined, no alert fires\n"
	"  1  an alert fires (or stdout cannot be written)\n"
	"  2  usage or configuration error (--stream naming no stream)\n"
	"  5  some status could not be determined (a source that cannot be reached, a\n"
	"     checkpoint that cannot be read, a run file missing for a running agent)\n"
	"  6  no agent runs a stream\n"
	"  7  a stream failed: its last run ended with an error that is not retried\n"
	"     (exit 2, 3 or 4 of run)\n"
	"  8  the agent that runs a stream is not responding\n";

static const char usage_backfill[] =
	"usage: sluice backfill -c FILE --stream NAME [--table SCHEMA.TABLE]\n"
	"\n"
	"Marks every table of the stream (or one it selects) to be backfilled again on\n"
	"the next `sluice run`.  When the stream's slot cannot be resumed (missing,\n"
	"lost, or ahead of the checkpoint), it drops what is left of it, and the next\n"
	"run creates a new slot and backfills every table; a corrupt checkpoint is kept\n"
	"as <checkpoint>.corrupt and the stream starts over.  This is how a stream\n"
	"recovers after exit code 4.\n"
	"\n"
	"With --table, while an agent runs the stream, the request goes to that agent\n"
	"(a file in state_dir it looks for every second): it re-reads the table in\n"
	"chunks while it keeps streaming, with low and high watermarks written into\n"
	"the source's log, so that no chunk row overwrites a newer change; with no agent\n"
	"running, the next run does the same.  A MySQL/MariaDB source writes its\n"
	"watermarks into its watermark_table: without that table the request is refused\n"
	"(exit 3, with the statements to run), and the next run reads a table marked\n"
	"for backfill from a snapshot before streaming.  Without --table it is refused\n"
	"(exit 2) while an agent runs the stream.\n"
	"\n"
	"  -c, --config FILE     the configuration file\n"
	"  -s, --stream NAME     the stream\n"
	"  -t, --table S.T       only this table, which the stream must select\n";

static const char usage_verify[] =
	"usage: sluice verify -c FILE --stream NAME\n"
	"\n"
	"Reads the stream's manifests (<stream>/_manifests/ in the destination) and\n"
	"every data file they list back from the destination (a folder or a bucket),\n"
	"and reports each problem on its own line: a missing manifest or a break in\n"
	"their chain of positions (a gap or an overlap), a listed file that is\n"
	"missing, has another size, cannot be read to its end, or holds another\n"
	"record count or CSN range than its manifest says, and records present twice\n"
	"(the same uuid).  Files no manifest lists are noted, not counted.\n"
	"An iceberg destination: each table's current snapshot, its manifest list,\n"
	"manifests and files (missing, another size or record count, unreadable),\n"
	"and its chain of snapshots (a missing one, a gap in sequence numbers).\n"
	"Changes nothing; it may run while an agent runs the stream.\n"
	"Exit 0 when everything checks, 1 when it found problems or could not read\n"
	"the destination, 2 for a bad config, 3 when the destination refuses the\n"
	"credentials or its bucket does not exist.\n"
	"\n"
	"  -c, --config FILE     the configuration file\n"
	"  -s, --stream NAME     the stream\n";

static const char usage_compact[] =
	"usage: sluice compact -c FILE --stream NAME [--table SCHEMA.TABLE]\n"
	"\n"
	"For a stream with write_mode = merge and a file destination (avro_dir, s3):\n"
	"folds the current files of each table (or of one) into a new base that holds\n"
	"only the table's current rows (the record with the highest CSN per key, no\n"
	"deleted row, nothing older than the latest TRUNCATE, which it keeps), then\n"
	"records the replacement in <stream>/<object>/.compact-N.json and .base.json\n"
	"and only then removes the replaced files.  It may run while an agent runs\n"
	"the stream: files the agent publishes meanwhile stay as they are.  Two\n"
	"compactions of a stream never overlap: it waits for the lock\n"
	"<state_dir>/<stream>.compact.lock (the agent's automatic compaction skips\n"
	"its turn while it is held).  Prints one line per table.\n"
	"For an iceberg destination, in either mode: rewrites small data files (in\n"
	"merge mode every data file, with the equality deletes applied) into one\n"
	"and commits a replace snapshot, on top of what an agent commits meanwhile.\n"
	"Exit 0 when done, 1 when it failed (the files are then as they were, or a\n"
	"new base is there beside them: the next compaction folds it), 2 usage or\n"
	"configuration error (also: the stream is not in merge mode), 3 when the\n"
	"destination refuses the credentials or its bucket does not exist.\n"
	"\n"
	"  -c, --config FILE     the configuration file\n"
	"  -s, --stream NAME     the stream\n"
	"  -t, --table S.T       only this table\n";

static int load_config(const char *path, struct sl_config **out)
{
	char err[SL_ERRLEN * 2];

	if (!path) {
		fprintf(stderr, "sluice: -c FILE is required\n");
		return 2;
	}
	*out = sl_config_load(path, err, sizeof err);
	if (!*out) {
		fprintf(stderr, "sluice: %s\n", err);
		return 2;
	}
	sl_log_min_level = (*out)->log_level;
	sl_log_format = (*out)->log_format;
	return 0;
}

/* 0 when name is NULL or names a stream of cfg; else 2, with cfg freed. */
static int known_stream(struct sl_config *cfg, const char *name)
{
	if (!name || sl_config_stream(cfg, name))
		return 0;
	fprintf(stderr, "sluice: %s: no stream named \"%s\"\n", cfg->path, name);
	sl_config_free(cfg);
	return 2;
}

struct opts {
	const char *config, *stream, *table;
	bool until_caught_up, json, help;
};

static bool known(const struct option *lo, const char *name, size_t len)
{
	for (; lo->name; lo++)
		if (strlen(lo->name) == len && !strncmp(lo->name, name, len))
			return true;
	return false;
}

/* Parses the options of command cmd, which takes those in takes (their
 * short letters; every command takes --help): another option is a usage
 * error (exit 2) that names it.  Returns 0, 2, or -1 after --help. */
static int parse_opts(int argc, char **argv, struct opts *o, const char *cmd, const char *takes, const char *usage)
{
	static const struct option lo[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "stream", required_argument, NULL, 's' },
		{ "table", required_argument, NULL, 't' },
		{ "until-caught-up", no_argument, NULL, 'u' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	memset(o, 0, sizeof *o);
	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":c:s:t:ujh", lo, NULL)) != -1) {
		if (ch != 'h' && ch != '?' && ch != ':' && !strchr(takes, ch)) {
			const char *name = NULL;
			for (int i = 0; lo[i].name; i++)
				if (lo[i].val == ch)
					name = lo[i].name;
			fprintf(stderr, "sluice %s: --%s is not an option of this command\n\n%s", cmd, name, usage);
			return 2;
		}
		switch (ch) {
		case 'c': o->config = optarg; break;
		case 's': o->stream = optarg; break;
		case 't': o->table = optarg; break;
		case 'u': o->until_caught_up = true; break;
		case 'j': o->json = true; break;
		case 'h': o->help = true; break;
		case ':':
		default: {
			/* the word as given for a long option, the letter for a short one */
			const char *word = argv[optind - 1], *eq = strchr(word, '=');
			char shortopt[3] = { '-', (char)optopt, '\0' };
			if (strncmp(word, "--", 2) != 0)
				word = shortopt;
			if (ch == ':')
				fprintf(stderr, "sluice %s: a value is needed after %s\n\n%s", cmd, word, usage);
			else if (word != shortopt && eq && known(lo, word + 2, (size_t)(eq - word - 2)))
				fprintf(stderr, "sluice %s: --%.*s takes no value\n\n%s", cmd, (int)(eq - word - 2), word + 2,
					usage);
			else
				fprintf(stderr, "sluice %s: unknown option %s\n\n%s", cmd, word, usage);
		}
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sluice %s: unexpected argument \"%s\"\n\n%s", cmd, argv[optind], usage);
		return 2;
	}
	if (o->help) {
		fputs(usage, stdout);
		return -1;
	}
	return 0;
}

struct worker {
	pthread_t th;
	struct sl_config *cfg;
	struct sl_stream_config *sc;
	struct sl_run_opts ro;
	atomic_int *finished;    /* cmd_run's count of workers that have returned */
	struct sl_stream_lock lock; /* held from before the first attempt to the end */
	struct sl_monitor *mon;
	struct sl_ops_stream *ops;  /* the stream's metrics, or NULL */
	struct sl_outage outage;    /* its destination's outages, across its attempts */
	int rc;
	char err[SL_ERRLEN * 2];
};

/* A runtime failure (a lost connection, a restarted server, a full disk) is
 * retried from the last checkpoint with backoff, 1 s doubling to 30 s: the
 * same path as a restart after a crash, so nothing is lost or skipped.
 * Configuration, prerequisite and lost-position errors are not retried.
 * With --until-caught-up a stream gives up after MAX_CAUGHT_UP_RETRIES. */
#define MAX_BACKOFF_S 30
#define STR_(x) #x
#define STR(x) STR_(x)
#define MAX_CAUGHT_UP_RETRIES 5

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int delay = 1, tries = 0;

	sl_thread_name("sl-stream");   /* reads the source; its writer is sl-writer */
	sl_log_set_stream(w->sc->name);
	for (;;) {
		int64_t t0 = sl_mono_ms();
		sl_log_clear_error();
		sl_log_set_table(NULL);
		if (w->ops)
			sl_ops_attempt(w->ops);
		w->rc = sl_stream_run(w->cfg, w->sc, &w->ro, w->err, sizeof w->err);
		if (w->rc == SL_ERESTART && sl_signal_count == 0) {
			/* Not a failure: its tables changed; take them in at once. */
			sl_info("%s; restarting the stream to take it in", w->err);
			w->rc = SL_OK;
			continue;
		}
		if (w->rc != SL_EFAIL || sl_signal_count > 0)
			break;
		if (w->ro.until_caught_up && ++tries > MAX_CAUGHT_UP_RETRIES)
			break;
		if (sl_mono_ms() - t0 > 60000)
			delay = 1;  /* it ran well for a while: start the backoff over */
		if (w->ops) {
			sl_ops_failed(w->ops, w->err, true);
			sl_monitor_write_run(w->mon, w->sc);
		}
		sl_warn("%s; retrying from the last checkpoint in %d s", w->err, delay);
		for (int i = 0; i < delay * 10 && sl_signal_count == 0; i++) {
			struct timespec ts = { 0, 100 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
		if (sl_signal_count > 0)
			break;
		delay = delay * 2 > MAX_BACKOFF_S ? MAX_BACKOFF_S : delay * 2;
	}
	/* A drain asked for while the stream failed in a way it retries (or
	 * waited to retry): what is durable is checkpointed and the rest is
	 * read again on the next start, so the stop is as clean as a drain's.
	 * So is a drain asked for while the stream ended to take in a change
	 * of its tables (SL_ERESTART: the pipeline drained, and the next start
	 * reads the statement again). */
	if (w->rc == SL_EFAIL && sl_signal_count > 0) {
		sl_info("stopped on request while the stream was failing (%s); it resumes from its checkpoint on the "
			"next start", w->err);
		w->rc = SL_OK;
	} else if (w->rc == SL_ERESTART && sl_signal_count > 0) {
		sl_info("stopped on request while the stream restarted (%s); it resumes from its checkpoint on the "
			"next start", w->err);
		w->rc = SL_OK;
	}
	/* Said at once, not when the other streams end: they keep running. */
	if (w->rc < 0) {
		sl_error("%s", w->err);
		sl_info("the stream stopped%s (exit code %d); the agent exits when every stream has stopped, with "
			"the highest exit code", w->rc == SL_EFAIL && w->ro.until_caught_up && sl_signal_count == 0
				? " after " STR(MAX_CAUGHT_UP_RETRIES) " retries" : "", sl_status_exit_code(w->rc));
	}
	if (w->ops) {
		if (w->rc < 0)
			sl_ops_failed(w->ops, w->err, false);
		else
			sl_ops_set_state(w->ops, SL_OPS_STOPPED);
		sl_monitor_write_run(w->mon, w->sc);
	}
	atomic_fetch_add(w->finished, 1);
	kill(getpid(), SIGUSR1);  /* wakes main's sigtimedwait() at once */
	return NULL;
}

/* The signals of a running agent.  Every thread blocks them and main takes
 * them with sigtimedwait() while it waits for the workers, so no handler
 * runs: SIGTERM and SIGINT count towards sl_signal_count (1 drains, 2
 * cancels), SIGHUP is logged and otherwise ignored (there is no reload), and
 * SIGUSR1 is how a worker that returns wakes main. */
static void wait_for_workers(const sigset_t *sigs, atomic_int *finished, int n, struct sl_monitor *mon)
{
	bool tty = isatty(STDERR_FILENO) == 1;
	int64_t next_line = 0;

	while (atomic_load(finished) < n) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		int sig = sigtimedwait(sigs, NULL, &ts);

		/* On a terminal, a live line of backfill progress. */
		if (tty && sl_mono_ms() >= next_line) {
			char line[400];
			sl_monitor_progress(mon, line, sizeof line);
			sl_log_status_line(line);
			next_line = sl_mono_ms() + 1000;
		}

		if (sig == SIGTERM || sig == SIGINT) {
			int count = atomic_fetch_add(&sl_signal_count, 1) + 1;
			if (count == 1) {
				sl_info("received %s: draining (flush, checkpoint, acknowledge); a second signal cancels",
					sig == SIGTERM ? "SIGTERM" : "SIGINT");
				sl_monitor_stopping(mon);
			}
			else if (count == 2)
				sl_info("received %s again: cancelling", sig == SIGTERM ? "SIGTERM" : "SIGINT");
		} else if (sig == SIGHUP) {
			sl_warn("received SIGHUP: configuration reload is not supported; restart sluice to apply "
				"a new configuration");
		}
	}
	if (tty)
		sl_log_status_line(NULL);
}

/* A file per table of a transaction stays open until the transaction's
 * files are finished: the soft limit on open files (often 1024) is raised
 * to the hard limit, as far as the system lets. */
static void raise_nofile(void)
{
	struct rlimit rl;
	rlim_t was;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	was = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		sl_debug("could not raise the open file limit from %llu to %llu: %s", (unsigned long long)was,
			 (unsigned long long)rl.rlim_max, sl_strerror(errno));
	else
		sl_debug("raised the open file limit from %llu to %llu (RLIMIT_NOFILE)", (unsigned long long)was,
			 (unsigned long long)rl.rlim_max);
}

static int cmd_run(int argc, char **argv)
{
	struct sl_config *cfg = NULL;
	struct worker *ws = NULL;
	struct sl_stream_config **run = NULL;
	struct sl_monitor *mon = NULL;
	struct opts o;
	int rc, n = 0, started = 0, worst = 0;
	atomic_int finished;
	sigset_t sigs;

	if ((rc = parse_opts(argc, argv, &o, "run", "csu", usage_run)) != 0)
		return rc < 0 ? 0 : rc;
	if ((rc = load_config(o.config, &cfg)) != 0)
		return rc;
	if ((rc = known_stream(cfg, o.stream)) != 0)
		return rc;
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();

	ws = calloc((size_t)cfg->nstreams, sizeof *ws);
	run = calloc((size_t)cfg->nstreams, sizeof *run);
	if (!ws || !run) {
		free(ws);
		free(run);
		sl_config_free(cfg);
		return 1;
	}
	for (int i = 0; i < cfg->nstreams; i++)
		ws[i].lock.fd = -1;
	/* Every stream's lock first: a second agent for one of them stops here,
	 * before it touches any stream. */
	for (int i = 0; i < cfg->nstreams; i++) {
		struct worker *w = &ws[n];
		char err[SL_ERRLEN * 2];
		if (o.stream && strcmp(cfg->streams[i].name, o.stream) != 0)
			continue;
		w->cfg = cfg;
		w->sc = &cfg->streams[i];
		w->ro.until_caught_up = o.until_caught_up;
		sl_outage_init(&w->outage, w->sc->destination->name, (int64_t)cfg->outage_log_interval * 1000);
		w->ro.outage = &w->outage;
		rc = sl_stream_lock_take(&w->lock, cfg->state_dir, w->sc->name, err, sizeof err);
		if (rc < 0) {
			if (rc == SL_ECONFIG)
				sl_error("%s; only one agent at a time may run a stream: stop the other one first", err);
			else
				sl_error("%s", err);
			worst = sl_status_exit_code(rc);
			goto out;
		}
		n++;
	}
	/* Blocked in every thread from here on: main takes them with
	 * sigtimedwait() (wait_for_workers). */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	/* Metrics, /healthz, the webhook and a probe per stream, on threads of
	 * their own (which inherit the blocked signals). */
	{
		char err[SL_ERRLEN * 2];
		for (int i = 0; i < n; i++)
			run[i] = ws[i].sc;
		if ((rc = sl_monitor_start(&mon, cfg, run, n, err, sizeof err)) < 0) {
			sl_error("%s", err);
			worst = sl_status_exit_code(rc);
			goto out;
		}
		for (int i = 0; i < n; i++) {
			ws[i].mon = mon;
			ws[i].ops = ws[i].ro.ops = sl_monitor_stream(mon, ws[i].sc);
		}
		sl_monitor_probe_start(mon);
	}
	atomic_init(&finished, 0);
	for (started = 0; started < n; started++) {
		struct worker *w = &ws[started];
		w->finished = &finished;
		if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
			fprintf(stderr, "sluice: could not start a thread for stream \"%s\"\n", w->sc->name);
			worst = 1;
			break;
		}
	}
	wait_for_workers(&sigs, &finished, started, mon);
	/* The process ends when every stream has; its exit code is the highest
	 * of theirs (each was logged when its stream stopped). */
	for (int i = 0; i < started; i++) {
		pthread_join(ws[i].th, NULL);
		if (sl_status_exit_code(ws[i].rc) > worst)
			worst = sl_status_exit_code(ws[i].rc);
	}
out:
	sl_monitor_stop(mon);
	for (int i = 0; i < n; i++)
		sl_stream_lock_release(&ws[i].lock);
	for (int i = 0; i < cfg->nstreams; i++)
		if (ws[i].ro.outage)
			sl_outage_destroy(ws[i].ro.outage);
	free(run);
	free(ws);
	sl_config_free(cfg);
	return worst;
}

/* check's test of metrics_listen: bind it and close it again, so that a
 * port another process holds is found before run fails on it (exit 3).
 * While an agent of this config runs, the port is its own: not tested. */
static int check_metrics_listen(struct sl_config *cfg)
{
	char err[SL_ERRLEN * 2];

	if (!cfg->metrics_listen || !*cfg->metrics_listen)
		return 0;
	for (int i = 0; i < cfg->nstreams; i++) {
		long pid = sl_stream_lock_holder(cfg->state_dir, cfg->streams[i].name);
		if (pid > 0) {
			printf("metrics_listen %s: not tested: the running agent (pid %ld) serves it\n",
			       cfg->metrics_listen, pid);
			return 0;
		}
	}
	if (sl_http_check(cfg->metrics_listen, err, sizeof err) < 0) {
		fprintf(stderr, "sluice: %s: %s\n", cfg->path, err);
		return sl_status_exit_code(SL_EPREREQ);
	}
	printf("metrics_listen %s: ok (the endpoint can listen there)\n", cfg->metrics_listen);
	return 0;
}

static int cmd_check(int argc, char **argv)
{
	struct sl_config *cfg = NULL;
	struct opts o;
	char err[SL_ERRLEN * 2];
	int rc, worst = 0;

	if ((rc = parse_opts(argc, argv, &o, "check", "cs", usage_check)) != 0)
		return rc < 0 ? 0 : rc;
	if ((rc = load_config(o.config, &cfg)) != 0 || (rc = known_stream(cfg, o.stream)) != 0)
		return rc;
	printf("config %s: ok (%d sources, %d destinations, %d streams)\n", cfg->path, cfg->nsources,
	       cfg->ndestinations, cfg->nstreams);
	worst = check_metrics_listen(cfg);
	for (int i = 0; i < cfg->nstreams; i++) {
		if (o.stream && strcmp(cfg->streams[i].name, o.stream) != 0)
			continue;
		rc = sl_stream_check(cfg, &cfg->streams[i], err, sizeof err);
		if (rc < 0) {
			fprintf(stderr, "sluice: %s\n", err);
			if (sl_status_exit_code(rc) > worst)
				worst = sl_status_exit_code(rc);
		}
	}
	sl_config_free(cfg);
	if (worst == 0)
		printf("all checks passed\n");
	return worst;
}

/* A status string, or "unknown" for null. */
static const char *text_or_unknown(json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : "unknown";
}

/* "N bytes", or "unknown" for null. */
static const char *bytes_or_unknown(json_t *v, char *buf, size_t len)
{
	if (!json_is_integer(v))
		return "unknown";
	snprintf(buf, len, "%lld bytes", (long long)json_integer_value(v));
	return buf;
}

/* "  waiting: creating replication slot "x" for 25 s, blocked by pid 77
 * (transaction open for 40 s, idle in transaction)" */
static void print_waiting(json_t *w)
{
	json_t *b;
	size_t i;

	if (!json_is_object(w))
		return;
	printf("  waiting: %s for %lld s", text_or_unknown(json_object_get(w, "action")),
	       (long long)json_integer_value(json_object_get(w, "waited_seconds")));
	json_array_foreach(json_object_get(w, "blocked_by"), i, b) {
		json_t *age = json_object_get(b, "transaction_seconds");
		printf("%s pid %lld (", i ? "," : ", blocked by", (long long)json_integer_value(json_object_get(b, "pid")));
		if (json_is_integer(age))
			printf("transaction open for %lld s, ", (long long)json_integer_value(age));
		printf("%s)", text_or_unknown(json_object_get(b, "state")));
	}
	printf("\n");
}

/* "12 s ago" / "3 min ago" for a Unix-microsecond time; "never" for null. */
static const char *ago(json_t *us, char *buf, size_t len)
{
	int64_t d;

	if (!json_is_integer(us))
		return "never";
	d = (sl_now_us() - (int64_t)json_integer_value(us)) / 1000000;
	if (d < 0)
		d = 0;
	if (d < 120)
		snprintf(buf, len, "%lld s ago", (long long)d);
	else if (d < 7200)
		snprintf(buf, len, "%lld min ago", (long long)(d / 60));
	else
		snprintf(buf, len, "%lld h ago", (long long)(d / 3600));
	return buf;
}

static void print_table_line(const char *name, json_t *v)
{
	json_t *pr = json_object_get(v, "progress"), *ch = json_object_get(v, "changes");
	const char *st = json_string_value(json_object_get(v, "backfill"));

	printf("  table %s: backfill %s", name, st ? st : "?");
	if (pr && json_is_string(json_object_get(pr, "state")) &&
	    strcmp(json_string_value(json_object_get(pr, "state")), "done") != 0) {
		json_t *est = json_object_get(pr, "estimated_rows"), *pct = json_object_get(pr, "percent"),
		       *eta = json_object_get(pr, "eta_seconds");
		printf(" (%s now: %lld", json_string_value(json_object_get(pr, "state")),
		       (long long)json_integer_value(json_object_get(pr, "rows")));
		if (json_is_integer(est))
			printf("/%lld rows", (long long)json_integer_value(est));
		else
			printf(" rows, estimate unknown");
		if (json_is_integer(pct))
			printf(", %lld%%", (long long)json_integer_value(pct));
		if (json_is_integer(eta))
			printf(", ETA %lld s", (long long)json_integer_value(eta));
		printf(")");
	} else {
		printf(" (%lld rows)", (long long)json_integer_value(json_object_get(v, "rows")));
	}
	if (json_is_object(ch))
		printf("; changes: %lld inserts, %lld updates, %lld deletes, %lld truncates",
		       (long long)json_integer_value(json_object_get(ch, "insert")),
		       (long long)json_integer_value(json_object_get(ch, "update")),
		       (long long)json_integer_value(json_object_get(ch, "delete")),
		       (long long)json_integer_value(json_object_get(ch, "truncate")));
	printf("\n");
}

static void print_agent(json_t *a)
{
	json_t *hb = json_object_get(a, "heartbeats");
	char b1[32];

	char b2[32];

	printf("  queue: %lld bytes (peak %lld); last flush: %s; %lld flushes\n",
	       (long long)json_integer_value(json_object_get(a, "queue_bytes")),
	       (long long)json_integer_value(json_object_get(a, "queue_peak_bytes")),
	       ago(json_object_get(a, "last_flush_us"), b1, sizeof b1),
	       (long long)json_integer_value(json_object_get(a, "flushes")));
	printf("  threads: probe's last pass %s; writer's last progress %s\n",
	       ago(json_object_get(a, "probe_pass_us"), b1, sizeof b1),
	       json_is_integer(json_object_get(a, "writer_progress_us")) ?
	       ago(json_object_get(a, "writer_progress_us"), b2, sizeof b2) : "(no writer runs)");
	if (!strcmp(json_string_value(json_object_get(hb, "from")) ?: "", "server")) {
		printf("  heartbeats: the server's own, %lld came back\n",
		       (long long)json_integer_value(json_object_get(hb, "received")));
	} else if (json_integer_value(json_object_get(hb, "interval_seconds")) > 0) {
		if (json_is_true(json_object_get(hb, "on")))
			printf("  heartbeats: every %lld s, %lld sent, %lld came back\n",
			       (long long)json_integer_value(json_object_get(hb, "interval_seconds")),
			       (long long)json_integer_value(json_object_get(hb, "sent")),
			       (long long)json_integer_value(json_object_get(hb, "received")));
		else
			printf("  heartbeats: off: %s\n", text_or_unknown(json_object_get(hb, "note")));
	}
}

/* The source's own figures of the position holder: " (name value, ...)". */
static void print_figures(json_t *fig)
{
	const char *key;
	json_t *v;
	bool first = true;

	json_object_foreach(fig, key, v) {
		printf("%s%s ", first ? " (" : ", ", key);
		if (json_is_integer(v))
			printf("%lld", (long long)json_integer_value(v));
		else
			printf("%s", text_or_unknown(v));
		first = false;
	}
	printf("%s\n", first ? "" : ")");
}

static void print_status_text(json_t *s)
{
	json_t *slot = json_object_get(s, "slot_status"), *alerts = json_object_get(s, "alerts"), *v;
	json_t *agent = json_object_get(s, "agent"), *le = json_object_get(s, "last_error");
	const char *key;
	char b1[32];
	size_t i;

	printf("stream %s (source %s -> destination %s)\n", json_string_value(json_object_get(s, "stream")),
	       json_string_value(json_object_get(s, "source")), json_string_value(json_object_get(s, "destination")));
	v = json_object_get(s, "agent_pid");
	if (json_is_false(json_object_get(s, "agent_responding")))
		printf("  agent: not responding (pid %lld: its run file was last written %lld s ago, more than 2 x "
		       "probe_interval + 5 s = %lld s)\n", (long long)json_integer_value(v),
		       (long long)json_integer_value(json_object_get(s, "run_file_age_seconds")),
		       (long long)json_integer_value(json_object_get(s, "responding_limit_seconds")));
	else if (json_is_integer(v))
		printf("  agent: running (pid %lld)\n", (long long)json_integer_value(v));
	else
		printf("  agent: not running\n");
	printf("  state: %s", text_or_unknown(json_object_get(s, "state")));
	if (json_is_object(agent))
		printf(" (since %s)", ago(json_object_get(agent, "state_since_us"), b1, sizeof b1));
	printf("\n");
	if (json_is_object(le))
		printf("  last error (%s, %lld retries): %s\n", ago(json_object_get(le, "at_us"), b1, sizeof b1),
		       (long long)json_integer_value(json_object_get(s, "retries")),
		       text_or_unknown(json_object_get(le, "message")));
	v = json_object_get(s, "durable_lsn");
	printf("  durable position:  %s\n", json_is_string(v) ? json_string_value(v) : "(never run)");
	print_waiting(json_object_get(s, "waiting"));
	if (slot && json_is_true(json_object_get(slot, "exists"))) {
		char lag[32], retained[32];
		printf("  slot %s: confirmed %s, %s, %s", json_string_value(json_object_get(s, "slot")),
		       text_or_unknown(json_object_get(slot, "confirmed_position")),
		       json_is_true(json_object_get(slot, "active")) ? "active" : "inactive",
		       text_or_unknown(json_object_get(slot, "state")));
		print_figures(json_object_get(slot, json_string_value(json_object_get(s, "source_type"))));
		printf("  lag: %s, retained WAL: %s\n", bytes_or_unknown(json_object_get(slot, "lag_bytes"), lag, sizeof lag),
		       bytes_or_unknown(json_object_get(slot, "retained_wal_bytes"), retained, sizeof retained));
	} else if (slot) {
		printf("  slot %s: does not exist\n", json_string_value(json_object_get(s, "slot")));
	} else {
		printf("  source: %s\n", json_string_value(json_object_get(s, "source_error")));
	}
	if ((v = json_object_get(s, "freshness_seconds")))
		printf("  freshness: %lld s since the source time of the last durable change\n",
		       (long long)json_integer_value(v));
	if (json_is_object(agent))
		print_agent(agent);
	json_object_foreach(json_object_get(s, "tables"), key, v)
		print_table_line(key, v);
	if (json_array_size(alerts) == 0)
		printf("  alerts: none\n");
	json_array_foreach(alerts, i, v)
		printf("  ALERT %s (%s): %s\n", json_string_value(json_object_get(v, "alert")),
		       json_string_value(json_object_get(v, "severity")), json_string_value(json_object_get(v, "message")));
	{
		json_t *h = json_object_get(s, "alert_history");
		size_t n = json_array_size(h);
		for (i = n > 5 ? n - 5 : 0; i < n; i++) {
			json_t *e = json_array_get(h, i);
			printf("  alert history: %s %s %s\n", ago(json_object_get(e, "at_us"), b1, sizeof b1),
			       text_or_unknown(json_object_get(e, "alert")), text_or_unknown(json_object_get(e, "status")));
		}
	}
	json_array_foreach(json_object_get(s, "undetermined"), i, v)
		printf("  UNDETERMINED: %s\n", json_string_value(v));
}

/* `sluice status` exit codes (doc/operations.md); with several streams or
 * several cases, the highest wins. */
#define STATUS_OK 0            /* every stream's status was determined, and no alert fires */
#define STATUS_ALERT 1         /* an alert fires (and everything was determined) */
#define STATUS_UNKNOWN 5       /* some status could not be determined (a source that cannot be probed,
				* a checkpoint that cannot be read, an agent whose view is missing) */
#define STATUS_NO_AGENT 6      /* no agent runs a stream */
#define STATUS_FAILED 7        /* a stream failed: its last run ended with an error that is not retried */
#define STATUS_NOT_RESPONDING 8    /* the agent that runs a stream does not respond (stale run file) */

/* The exit code that one stream's status s calls for. */
static int status_code(json_t *s)
{
	if (json_is_false(json_object_get(s, "agent_responding")))
		return STATUS_NOT_RESPONDING;
	if (!strcmp(json_string_value(json_object_get(s, "state")) ?: "", "failed"))
		return STATUS_FAILED;
	if (!json_is_integer(json_object_get(s, "agent_pid")))
		return STATUS_NO_AGENT;
	if (!json_is_true(json_object_get(s, "determined")))
		return STATUS_UNKNOWN;
	return json_array_size(json_object_get(s, "alerts")) > 0 ? STATUS_ALERT : STATUS_OK;
}

static int cmd_status(int argc, char **argv)
{
	struct sl_config *cfg = NULL;
	struct opts o;
	char err[SL_ERRLEN * 2];
	json_t *all;
	int rc, worst = STATUS_OK;

	if ((rc = parse_opts(argc, argv, &o, "status", "csj", usage_status)) != 0)
		return rc < 0 ? 0 : rc;
	if ((rc = load_config(o.config, &cfg)) != 0 || (rc = known_stream(cfg, o.stream)) != 0)
		return rc;
	all = json_array();
	for (int i = 0; i < cfg->nstreams; i++) {
		json_t *s = json_object();
		if (o.stream && strcmp(cfg->streams[i].name, o.stream) != 0) {
			json_decref(s);
			continue;
		}
		rc = sl_stream_status(cfg, &cfg->streams[i], s, err, sizeof err);
		if (rc < 0) {
			fprintf(stderr, "sluice: %s\n", err);
			if (worst < STATUS_UNKNOWN)
				worst = STATUS_UNKNOWN;
			json_decref(s);
			continue;
		}
		if (status_code(s) > worst)
			worst = status_code(s);
		if (!o.json)
			print_status_text(s);
		json_array_append_new(all, s);
	}
	if (o.json) {
		json_t *root = json_pack("{s:O}", "streams", all);
		char *text = json_dumps(root, JSON_INDENT(2));
		if (text)
			puts(text);
		free(text);
		json_decref(root);
	}
	json_decref(all);
	sl_config_free(cfg);
	return worst;
}

/* The start of a command on one stream (backfill, verify, compact): its
 * options, --stream (required), the config and the stream.  true with
 * *cfg and *sc set; false with *rc the exit status (nothing to free). */
static bool stream_command(int argc, char **argv, const char *name, const char *takes, const char *usage,
			   struct opts *o, struct sl_config **cfg, struct sl_stream_config **sc, int *rc)
{
	if ((*rc = parse_opts(argc, argv, o, name, takes, usage)) != 0) {
		*rc = *rc < 0 ? 0 : *rc;   /* --help: done */
		return false;
	}
	if (!o->stream) {
		fprintf(stderr, "sluice: %s needs --stream NAME\n", name);
		*rc = 2;
		return false;
	}
	if ((*rc = load_config(o->config, cfg)) != 0)
		return false;
	if ((*rc = known_stream(*cfg, o->stream)) != 0)
		return false;
	*sc = sl_config_stream(*cfg, o->stream);
	return true;
}

static int cmd_backfill(int argc, char **argv)
{
	struct sl_config *cfg = NULL;
	struct sl_stream_config *sc;
	struct opts o;
	char err[SL_ERRLEN * 2];
	int rc;

	if (!stream_command(argc, argv, "backfill", "cst", usage_backfill, &o, &cfg, &sc, &rc))
		return rc;
	rc = sl_stream_request_backfill(cfg, sc, o.table, err, sizeof err);
	if (rc < 0)
		fprintf(stderr, "sluice: %s\n", err);
	sl_config_free(cfg);
	return sl_status_exit_code(rc);
}

static int cmd_verify(int argc, char **argv)
{
	struct sl_config *cfg = NULL;
	struct sl_stream_config *sc;
	struct opts o;
	char err[SL_ERRLEN * 2];
	int rc;

	if (!stream_command(argc, argv, "verify", "cs", usage_verify, &o, &cfg, &sc, &rc))
		return rc;
	rc = sl_stream_verify(cfg, sc, err, sizeof err);
	sl_config_free(cfg);
	if (rc == SL_EVERIFY)
		return 1;  /* the problems are on stdout */
	if (rc < 0) {
		fprintf(stderr, "sluice: %s\n", err);
		return rc == SL_EPREREQ || rc == SL_ECONFIG ? sl_status_exit_code(rc) : 1;
	}
	return 0;
}

static int cmd_compact(int argc, char **argv)
{
	struct sl_config *cfg = NULL;
	struct sl_stream_config *sc;
	struct opts o;
	char err[SL_ERRLEN * 2];
	int rc;

	if (!stream_command(argc, argv, "compact", "cst", usage_compact, &o, &cfg, &sc, &rc))
		return rc;
	rc = sl_stream_compact(cfg, sc, o.table, err, sizeof err);
	sl_config_free(cfg);
	if (rc < 0) {
		fprintf(stderr, "sluice: %s\n", err);
		return rc == SL_EPREREQ || rc == SL_ECONFIG ? sl_status_exit_code(rc) : 1;
	}
	return 0;
}

/* Output that did not reach stdout (a full disk, a closed pipe, /dev/full)
 * is a failure: exit 1 (or the command's own failure code) and say so on
 * stderr.  stdout is fully buffered into a file, so the error often shows
 * only at the final flush or close.  report: rc describes what the lost
 * output said (`sluice status`), so it gives way to 1. */
static int finish_stdout(int rc, bool report)
{
	int failed = ferror(stdout), e = 0;

	if (fflush(stdout) != 0) {
		failed = 1;
		e = errno;
	}
	if (fclose(stdout) != 0 && !failed) {
		failed = 1;
		e = errno;
	}
	if (!failed)
		return rc;
	if (e)
		fprintf(stderr, "sluice: could not write to standard output: %s\n", sl_strerror(e));
	else
		fprintf(stderr, "sluice: could not write to standard output\n");
	return rc && !report ? rc : 1;
}

static int dispatch(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	if (!cmd || !strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(usage_main, cmd ? stdout : stderr);
		return cmd ? 0 : 2;
	}
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("sluice %s\n", PACKAGE_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(cmd, "check"))
		return cmd_check(argc - 1, argv + 1);
	if (!strcmp(cmd, "status"))
		return cmd_status(argc - 1, argv + 1);
	if (!strcmp(cmd, "backfill"))
		return cmd_backfill(argc - 1, argv + 1);
	if (!strcmp(cmd, "verify"))
		return cmd_verify(argc - 1, argv + 1);
	if (!strcmp(cmd, "compact"))
		return cmd_compact(argc - 1, argv + 1);
	fprintf(stderr, "sluice: unknown command \"%s\"\n\n%s", cmd, usage_main);
	return 2;
}

int main(int argc, char **argv)
{
	bool report = argc > 1 && !strcmp(argv[1], "status") && !(argc > 2 && !strcmp(argv[2], "--help"));

	return finish_stdout(dispatch(argc, argv), report);
}
