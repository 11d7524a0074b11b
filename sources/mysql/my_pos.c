/*
 * sources/mysql/my_pos.c: the MySQL / MariaDB source's positions
 * (my_internal.h): their file, offset, GTID and done point, their order,
 * CSN, text form, metadata values, and the source's description.
 *
 * Positions: (file number, offset) with the file name and a GTID in the
 * text.  The CSN's position part is the file number in the high 32 bits
 * and the offset of the transaction's first event in the low 32, so plain
 * string order is binlog order across rotations.  A transaction's records
 * carry its own position and GTID; its end (what the checkpoint keeps)
 * carries the position after its last event and the GTID state there.
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

/* ---- positions ---- */

int64_t sl_my_file_seq(const char *file, size_t len)
{
	size_t i = len;
	int64_t v = 0;

	while (i > 0 && file[i - 1] >= '0' && file[i - 1] <= '9')
		i--;
	if (i == len || i == 0 || file[i - 1] != '.' || len - i > 9)
		return -1;
	for (; i < len; i++)
		v = v * 10 + (file[i] - '0');
	return v;
}

struct sl_position sl_my_pos(const char *file, uint64_t offset, const char *gtid, bool *dropped)
{
	struct sl_position p;
	size_t fl = strlen(file), gl = gtid ? strlen(gtid) : 0;
	int64_t seq = sl_my_file_seq(file, fl);

	memset(&p, 0, sizeof p);
	p.w[0] = seq < 0 ? 0 : (uint64_t)seq;
	p.w[1] = offset;
	if (fl >= SL_POS_TEXT_MAX)
		fl = SL_POS_TEXT_MAX - 1;
	memcpy(p.text, file, fl);
	if (dropped)
		*dropped = false;
	if (gl > 0) {
		if (fl + 1 + gl < SL_POS_TEXT_MAX) {
			p.text[fl] = '\t';
			memcpy(p.text + fl + 1, gtid, gl);
		} else if (dropped) {
			*dropped = true;
		}
	}
	return p;
}

/* A resume position may carry a "done" point after its file name
 * ("file\x1fdonefile:offset\tgtid"): where the stream had read to when
 * it resumes earlier, at a held XA transaction's start.  Every group that
 * starts before it was written already (but for XA PREPARE groups, which
 * wait for their XA COMMIT): see resume_pos. */
#define DONE_SEP '\x1f'

void sl_my_pos_file(const struct sl_position *p, char *out)
{
	size_t n = strcspn(p->text, "\t\x1f");

	memcpy(out, p->text, n);
	out[n] = '\0';
}

const char *sl_my_pos_gtid(const struct sl_position *p)
{
	const char *t = strchr(p->text, '\t');

	return t ? t + 1 : "";
}

/* The done point of p into file and *off; false when it has none. */
bool my_pos_done(const struct sl_position *p, char *file, size_t filelen, uint64_t *off)
{
	const char *d = strchr(p->text, DONE_SEP), *colon;
	size_t n;

	if (!d)
		return false;
	d++;
	n = strcspn(d, "\t");
	colon = memrchr(d, ':', n);
	if (!colon || (size_t)(colon - d) >= filelen)
		return false;
	memcpy(file, d, (size_t)(colon - d));
	file[colon - d] = '\0';
	*off = strtoull(colon + 1, NULL, 10);
	return true;
}

/* p with the done point file:off after its file name (dropped if it does
 * not fit). */
void my_pos_set_done(struct sl_position *p, const char *file, uint64_t off)
{
	char head[SL_POS_TEXT_MAX], gtid[SL_POS_TEXT_MAX];
	int n;

	sl_my_pos_file(p, head);
	snprintf(gtid, sizeof gtid, "%s", sl_my_pos_gtid(p));
	n = snprintf(p->text, sizeof p->text, "%s%c%s:%" PRIu64 "%s%s", head, DONE_SEP, file, off, *gtid ? "\t" : "",
		     gtid);
	if (n < 0 || (size_t)n >= sizeof p->text)
		*p = sl_my_pos(head, p->w[1], *gtid ? gtid : NULL, NULL);
}

/* The binlog places of two positions in order (their done points aside). */
int my_place_compare(const struct sl_position *a, const struct sl_position *b)
{
	if (a->w[0] != b->w[0])
		return a->w[0] < b->w[0] ? -1 : 1;
	if (a->w[1] != b->w[1])
		return a->w[1] < b->w[1] ? -1 : 1;
	return 0;
}

/* Positions in binlog order; at the same place, one with a later done
 * point has read further (a held XA transaction keeps the place). */
int my_pos_compare(const struct sl_position *a, const struct sl_position *b)
{
	char fa[SL_POS_TEXT_MAX], fb[SL_POS_TEXT_MAX];
	uint64_t oa = 0, ob = 0;
	int64_t sa = -1, sb = -1;
	int c = my_place_compare(a, b);

	if (c != 0)
		return c;
	if (my_pos_done(a, fa, sizeof fa, &oa))
		sa = sl_my_file_seq(fa, strlen(fa));
	if (my_pos_done(b, fb, sizeof fb, &ob))
		sb = sl_my_file_seq(fb, strlen(fb));
	if (sa != sb)
		return sa < sb ? -1 : 1;
	return oa < ob ? -1 : oa > ob ? 1 : 0;
}

uint64_t my_pos_csn(const struct sl_position *p)
{
	return p->w[0] << 32 | (p->w[1] & 0xffffffffu);
}

static int my_pos_decode_plain(const char *text, struct sl_position *out);

/* "mb.000003:1234" or "mb.000003:1234 0-1-20", and " +mb.000003:5678"
 * after it for a done point */
int my_pos_encode(const struct sl_position *p, char *out, size_t outlen)
{
	char file[SL_POS_TEXT_MAX];
	const char *g = sl_my_pos_gtid(p);
	int n;

	char done[SL_POS_TEXT_MAX];
	uint64_t doff = 0;
	bool has_done = my_pos_done(p, done, sizeof done, &doff);

	sl_my_pos_file(p, file);
	n = snprintf(out, outlen, "%s:%" PRIu64 "%s%s", file[0] ? file : "?", p->w[1], *g ? " " : "", g);
	if (n >= 0 && (size_t)n < outlen && has_done)
		n += snprintf(out + n, outlen - (size_t)n, " +%s:%" PRIu64, done, doff);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

static int my_pos_decode(const char *text, struct sl_position *out)
{
	const char *plus = strstr(text, " +");
	char head[SL_POS_TEXT_MAX * 2];

	if (plus) {
		/* "file:off [gtid] +donefile:doneoff" */
		struct sl_position d;
		if ((size_t)(plus - text) >= sizeof head)
			return -1;
		memcpy(head, text, (size_t)(plus - text));
		head[plus - text] = '\0';
		if (my_pos_decode_plain(head, out) < 0 || my_pos_decode_plain(plus + 2, &d) < 0)
			return -1;
		sl_my_pos_file(&d, head);
		my_pos_set_done(out, head, d.w[1]);
		return 0;
	}
	return my_pos_decode_plain(text, out);
}

static int my_pos_decode_plain(const char *text, struct sl_position *out)
{
	const char *sp = strchr(text, ' '), *colon;
	char file[SL_POS_TEXT_MAX];
	size_t hl = sp ? (size_t)(sp - text) : strlen(text);
	uint64_t off;
	char num[32];

	memset(out, 0, sizeof *out);
	/* no position (a table whose backfill was skipped, or not yet taken,
	 * has no snapshot): what my_pos_encode writes for it */
	if (!strcmp(text, "?:0"))
		return 0;
	colon = memrchr(text, ':', hl);
	if (!colon || colon == text || (size_t)(colon - text) >= sizeof file || hl - (size_t)(colon - text) - 1 >= sizeof num)
		return -1;
	memcpy(file, text, (size_t)(colon - text));
	file[colon - text] = '\0';
	memcpy(num, colon + 1, hl - (size_t)(colon - text) - 1);
	num[hl - (size_t)(colon - text) - 1] = '\0';
	if (sl_parse_u64(num, UINT32_MAX, &off) < 0 || sl_my_file_seq(file, strlen(file)) < 0)
		return -1;
	*out = sl_my_pos(file, off, sp ? sp + 1 : NULL, NULL);
	return strlen(sl_my_pos_gtid(out)) == (sp ? strlen(sp + 1) : 0) ? 0 : -1;
}

static const struct sl_meta_field my_meta[] = {
	{ "log_file", SL_META_STRING },
	{ "log_position", SL_META_LONG },
	{ "gtid", SL_META_OPT_STRING },
};

static void my_meta_values(const struct sl_position *p, struct sl_meta_value *out, char *buf, size_t buflen)
{
	size_t n = strcspn(p->text, "\t\x1f");
	const char *g = sl_my_pos_gtid(p);

	(void)buf;
	(void)buflen;
	out[0].s = p->text;
	out[0].len = n;
	out[1].i = (int64_t)p->w[1];
	out[2].s = *g ? g : NULL;
	out[2].len = strlen(g);
}

const struct sl_source_desc sl_my_desc = {
	.kind = "mysql",
	.ns_field = "database",
	.read_method_cdc = "mysql-cdc-binlog",
	.read_method_backfill = "mysql-backfill-fulldump",
	.pos_compare = my_pos_compare,
	.pos_csn = my_pos_csn,
	.pos_encode = my_pos_encode,
	.pos_decode = my_pos_decode,
	.nmeta = 3,
	.meta = my_meta,
	.meta_values = my_meta_values,
};
