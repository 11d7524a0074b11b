/*
 * tests/tools/pg_record.c: records a PostgreSQL logical replication stream
 * for the replay tests (tests/replay/README.md).
 *
 *   pg_record --host H --port P --user U --dbname D --slot S --publication PUB --out FILE
 *
 * It opens a replication connection exactly as sluice does (sl_pg_repl_open:
 * replication=database and the same session settings, which fix the text
 * form of every value pgoutput sends), creates the temporary slot S with
 * CREATE_REPLICATION_SLOT ... LOGICAL pgoutput, prints "ready <LSN>" on
 * stdout, and waits for a line on stdin holding the LSN to stop at (the
 * caller runs its workload in between).  It then runs sluice's own
 * START_REPLICATION (pgoutput proto_version 1, the publication, messages on)
 * and appends every CopyData frame it receives, XLogData and keepalives with
 * their headers, to FILE (sl_pg_repl_record), until a keepalive says the
 * server has sent everything before the stop LSN.  While the stream is
 * quiet it asks the server for keepalives with status updates that confirm
 * nothing.  Each frame also goes through the decoder, so a recording that
 * sluice cannot read fails here already.
 *
 * Exit status 0, or 1 with a message on stderr.  A test tool: never built
 * into sluice.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "sources/postgres/pg_internal.h"

#define QUIET_MS 200        /* ask for a keepalive after this long without a frame */
#define GIVE_UP_MS 60000    /* fail when the stop LSN is not reached within this */

static int usage(void)
{
	fprintf(stderr, "usage: pg_record --host H --port P --user U --dbname D --slot S "
		"--publication PUB --out FILE\n");
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, 'h' },
		{ "port", required_argument, NULL, 'p' },
		{ "user", required_argument, NULL, 'U' },
		{ "dbname", required_argument, NULL, 'd' },
		{ "slot", required_argument, NULL, 's' },
		{ "publication", required_argument, NULL, 'P' },
		{ "out", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	struct sl_pg_conf pc;
	struct sl_pg_repl *r = NULL;
	struct sl_pg_repl_event ev;
	const char *slot = NULL, *pub = NULL, *out = NULL;
	char err[SL_ERRLEN], snapshot[128], line[64], lsn_text[18];
	uint64_t consistent, stop, frames[2] = { 0, 0 };
	int64_t port, last_frame_ms, t0;
	FILE *f = NULL;
	int c, rc = 1;

	memset(&pc, 0, sizeof pc);
	pc.base.name = "recorder";
	pc.base.connect_timeout = 10;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': pc.base.host = optarg; break;
		case 'p':
			if (sl_parse_i64(optarg, 1, 65535, &port) < 0)
				return usage();
			pc.base.port = (int)port;
			break;
		case 'U': pc.base.user = optarg; break;
		case 'd': pc.dbname = optarg; break;
		case 's': slot = optarg; break;
		case 'P': pub = optarg; break;
		case 'o': out = optarg; break;
		default: return usage();
		}
	}
	if (!pc.base.host || !pc.base.port || !pc.base.user || !pc.dbname || !slot || !pub || !out || optind != argc)
		return usage();

	if (!(r = sl_pg_repl_open(&pc.base, NULL, NULL, err, sizeof err)))
		goto fail;
	if (sl_pg_repl_create_slot(r, slot, true, NULL, NULL, snapshot, sizeof snapshot, &consistent, err, sizeof err) < 0)
		goto fail;
	sl_lsn_format(consistent, lsn_text);
	printf("ready %s\n", lsn_text);
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin)) {
		snprintf(err, sizeof err, "no stop LSN on stdin");
		goto fail;
	}
	line[strcspn(line, "\r\n")] = '\0';
	if (sl_lsn_parse(line, &stop) < 0) {
		snprintf(err, sizeof err, "\"%s\" is not an LSN", line);
		goto fail;
	}
	if (!(f = fopen(out, "wb"))) {
		snprintf(err, sizeof err, "could not create \"%s\": %s", out, strerror(errno));
		goto fail;
	}
	if (sl_pg_repl_start(r, slot, pub, 0, err, sizeof err) < 0 || sl_pg_repl_record(r, f, err, sizeof err) < 0)
		goto fail;
	t0 = last_frame_ms = sl_mono_ms();
	for (;;) {
		if (sl_pg_repl_next(r, QUIET_MS, &ev, err, sizeof err) < 0)
			goto fail;
		if (ev.kind == SL_PGR_END) {
			snprintf(err, sizeof err, "the server ended the stream before the stop LSN");
			goto fail;
		}
		if (ev.kind == SL_PGR_TIMEOUT) {
			if (sl_mono_ms() - t0 > GIVE_UP_MS) {
				snprintf(err, sizeof err, "the stop LSN %s was not reached in %d s", line, GIVE_UP_MS / 1000);
				goto fail;
			}
			if (sl_mono_ms() - last_frame_ms >= QUIET_MS &&
			    sl_pg_repl_send_status(r, 0, 0, true, err, sizeof err) < 0)
				goto fail;
			continue;
		}
		last_frame_ms = sl_mono_ms();
		frames[ev.kind == SL_PGR_KEEPALIVE]++;
		if (ev.kind == SL_PGR_KEEPALIVE && ev.wal_end >= stop)
			break;
	}
	if (fclose(f) != 0) {
		f = NULL;
		snprintf(err, sizeof err, "could not write \"%s\": %s", out, strerror(errno));
		goto fail;
	}
	f = NULL;
	fprintf(stderr, "pg_record: %" PRIu64 " XLogData and %" PRIu64 " keepalive frames written to %s\n",
		frames[0], frames[1], out);
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "pg_record: %s\n", err);
out:
	if (f)
		fclose(f);
	sl_pg_repl_close(r);
	return rc;
}
