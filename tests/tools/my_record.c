/*
 * tests/tools/my_record.c: records a MySQL/MariaDB binlog stream for the
 * replay tests (tests/replay/mysql/).
 *
 *   my_record --host H --port P --user U --password-file F --server-id N
 *             --file BINLOG --pos OFFSET --out FILE
 *
 * It opens a dump connection exactly as sluice does (sl_my_dump_open:
 * checksums, MariaDB's GTID capability, registration), from BINLOG:OFFSET,
 * in non-blocking mode, and appends every event the server sends to FILE
 * (sl_my_dump_record) until the server's EOF at its head.  Each event also
 * goes through the event decoder, so a recording sluice cannot read fails
 * here already.  Exit status 0, or 1 with a message on stderr.  A test tool:
 * never built into sluice.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "sources/mysql/my_internal.h"

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, 'h' }, { "port", required_argument, NULL, 'p' },
		{ "user", required_argument, NULL, 'u' }, { "password-file", required_argument, NULL, 'w' },
		{ "server-id", required_argument, NULL, 's' }, { "file", required_argument, NULL, 'f' },
		{ "pos", required_argument, NULL, 'o' }, { "out", required_argument, NULL, 'O' },
		{ NULL, 0, NULL, 0 },
	};
	struct sl_my_conf pc;
	struct sl_my_server srv;
	struct sl_my_dump_opts o;
	struct sl_my_dump *d = NULL;
	struct sl_binlog_reader rd;
	struct sl_binlog_event ev;
	const char *out = NULL, *pwfile = NULL;
	char err[SL_ERRLEN], *pw = NULL;
	size_t pwlen;
	uint64_t n = 0;
	int c, rc = 1;
	FILE *f = NULL;
	MYSQL *m;

	memset(&pc, 0, sizeof pc);
	memset(&o, 0, sizeof o);
	pc.base.name = "record";
	pc.base.connect_timeout = 10;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': pc.base.host = optarg; break;
		case 'p': pc.base.port = atoi(optarg); break;
		case 'u': pc.base.user = optarg; break;
		case 'w': pwfile = optarg; break;
		case 's': o.server_id = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'f': o.file = optarg; break;
		case 'o': o.offset = strtoull(optarg, NULL, 10); break;
		case 'O': out = optarg; break;
		default: return 1;
		}
	}
	if (!pc.base.host || !pc.base.port || !pc.base.user || !o.server_id || !o.file || !out) {
		fprintf(stderr, "usage: my_record --host H --port P --user U [--password-file F] --server-id N "
			"--file BINLOG --pos OFFSET --out FILE\n");
		return 1;
	}
	if (pwfile) {
		if (sl_read_file(pwfile, &pw, &pwlen, err, sizeof err) != 0) {
			fprintf(stderr, "my_record: %s\n", err);
			return 1;
		}
		while (pwlen && (pw[pwlen - 1] == '\n' || pw[pwlen - 1] == '\r'))
			pw[--pwlen] = '\0';
		pc.base.password = pw;
	}
	if (!(m = sl_my_connect(&pc.base, 30, &srv, err, sizeof err))) {
		fprintf(stderr, "my_record: %s\n", err);
		goto out;
	}
	mysql_close(m);
	o.report_host = "sluice my_record";
	o.non_block = true;
	if (!(f = fopen(out, "wb"))) {
		perror(out);
		goto out;
	}
	if (sl_my_dump_open(&d, &pc.base, &srv, &o, 60000, err, sizeof err) < 0 ||
	    sl_my_dump_record(d, f, err, sizeof err) < 0) {
		fprintf(stderr, "my_record: %s\n", err);
		goto out;
	}
	sl_binlog_reader_init(&rd, SL_BL_CHECKSUM_CRC32, o.file);
	for (;;) {
		enum sl_my_read what;
		const unsigned char *p;
		size_t len;
		if (sl_my_dump_read(d, 1000, &what, &p, &len, err, sizeof err) < 0) {
			fprintf(stderr, "my_record: %s\n", err);
			goto out;
		}
		if (what == SL_MY_EOF)
			break;
		if (what == SL_MY_TIMEOUT)
			continue;
		if (sl_binlog_decode(&rd, p, len, &ev, err, sizeof err) < 0) {
			fprintf(stderr, "my_record: event %" PRIu64 ": %s\n", n, err);
			goto out;
		}
		n++;
	}
	if (fclose(f) != 0) {
		f = NULL;
		perror(out);
		goto out;
	}
	f = NULL;
	fprintf(stderr, "my_record: %" PRIu64 " events\n", n);
	rc = 0;
out:
	if (f)
		fclose(f);
	sl_my_dump_close(d);
	free(pw);
	return rc;
}
