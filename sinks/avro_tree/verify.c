/*
 * sinks/avro_tree/verify.c: `sluice verify`, the same for every store: reads
 * a stream's manifests and data files back and reports, one line each:
 *
 *   - a manifest that is missing (a hole in the sequence, or the one that
 *     .latest.json names), cannot be read, or does not chain: its "from" is
 *     not the previous manifest's "to" (a gap or an overlap of positions);
 *   - a listed file that is missing, whose size differs from the manifest,
 *     that the Avro reader cannot read to its end (truncated, corrupt), or
 *     whose record count or first and last CSN differ from the manifest;
 *   - records present twice (the same uuid in two places).
 *
 * Merge mode's compaction records ("<stream>/<object>/.compact-N.json",
 * mirror.h) count as manifests outside the chain: their "files" (the new
 * base) are checked like the others, and their "removed" (the files the
 * base replaced) are accounted for.
 *
 * Files that no manifest lists (written by a run that stopped before its
 * manifest; their records were written again afterwards) and files listed as
 * removed that are still there are noted, not counted as problems.
 *
 * Files are read with avro-c, an Avro implementation independent of the
 * writer (sinks/avro/ocf.c).  Memory: the listing, the manifests, and 20
 * bytes per record for the uuid set.
 */
#include "sinks/avro_tree/tree.h"

#include <avro.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/strmap.h"
#include "common/util.h"
#include "sinks/avro/avro_read.h"
#include "sinks/avro_tree/manifest.h"


/* ---------------------------------------------------------------------- */
/* A string map: key -> entry                                             */

struct entry {
	struct sl_strmap_node node;  /* first: a node of the map is an entry; node.key is key */
	char *key;
	uint64_t size;               /* listed size */
	bool listed;                 /* present in the store */
	int64_t manifest;            /* sequence of the manifest listing it, or 0 (-1: a compaction record) */
	const char *by;              /* the compaction record listing it, when manifest is -1 */
	bool removed;                /* a manifest lists it as removed */
	const struct sl_manifest_file *mf;  /* its manifest entry */
};

/* The entry for key, created if create; NULL if absent or out of memory. */
static struct entry *map_get(struct sl_strmap *m, const char *key, bool create)
{
	struct entry *e = (struct entry *)sl_strmap_find(m, key);

	if (e || !create)
		return e;
	if (!m->nb && sl_strmap_init(m, 1024) < 0)
		return NULL;
	e = calloc(1, sizeof *e);
	if (!e || !(e->key = strdup(key))) {
		free(e);
		return NULL;
	}
	e->node.key = e->key;
	if (sl_strmap_add(m, &e->node) < 0) {
		free(e->key);
		free(e);
		return NULL;
	}
	return e;
}

static void map_free(struct sl_strmap *m)
{
	for (size_t i = 0; i < m->nb; i++) {
		struct sl_strmap_node *e, *next;
		for (e = m->b[i]; e; e = next) {
			next = e->next;
			free(((struct entry *)e)->key);
			free(e);
		}
	}
	sl_strmap_free(m);
}

/* ---------------------------------------------------------------------- */
/* A set of uuids (16 bytes each) with the file each was first seen in    */

struct uslot {
	unsigned char u[16];
	uint32_t file;               /* index + 1 into the checked files; 0: empty */
};

struct uset {
	struct uslot *s;
	size_t cap, n;
};

static bool parse_uuid(const char *s, size_t len, unsigned char out[16])
{
	int k = 0;

	for (size_t i = 0; i < len && k < 32; i++) {
		int v;
		if (s[i] == '-')
			continue;
		if (s[i] >= '0' && s[i] <= '9')
			v = s[i] - '0';
		else if (s[i] >= 'a' && s[i] <= 'f')
			v = s[i] - 'a' + 10;
		else if (s[i] >= 'A' && s[i] <= 'F')
			v = s[i] - 'A' + 10;
		else
			return false;
		if (k % 2 == 0)
			out[k / 2] = (unsigned char)(v << 4);
		else
			out[k / 2] |= (unsigned char)v;
		k++;
	}
	return k == 32;
}

/* Adds u; returns 0 (new), the file index + 1 where it was seen before, or
 * -1 when out of memory. */
static int64_t uset_add(struct uset *us, const unsigned char u[16], uint32_t file)
{
	uint64_t h;
	size_t i;

	if (us->n * 2 >= us->cap) {
		size_t nc = us->cap ? us->cap * 2 : 4096;
		struct uslot *ns = calloc(nc, sizeof *ns);
		if (!ns)
			return -1;
		for (size_t k = 0; k < us->cap; k++) {
			if (!us->s[k].file)
				continue;
			memcpy(&h, us->s[k].u, sizeof h);
			for (i = h & (nc - 1); ns[i].file; i = (i + 1) & (nc - 1))
				;
			ns[i] = us->s[k];
		}
		free(us->s);
		us->s = ns;
		us->cap = nc;
	}
	memcpy(&h, u, sizeof h);  /* a UUIDv5 is a hash already */
	for (i = h & (us->cap - 1); us->s[i].file; i = (i + 1) & (us->cap - 1))
		if (!memcmp(us->s[i].u, u, 16))
			return us->s[i].file;
	memcpy(us->s[i].u, u, 16);
	us->s[i].file = file;
	us->n++;
	return 0;
}

/* ---------------------------------------------------------------------- */

struct verify {
	struct sl_store store;
	const char *stream;
	FILE *out;
	struct sl_strmap keys;       /* every key under <stream>/: entries */
	uint64_t *seqs;              /* manifest sequences listed */
	size_t nseqs, seqs_alloc;
	struct sl_manifest *mans;    /* the readable manifests, by sequence */
	size_t nmans;
	char **recs;                 /* the keys of merge mode's compaction records */
	size_t nrecs, recs_alloc;
	struct sl_manifest *recm;    /* those records, read */
	size_t nrecm;
	struct entry **files;        /* the files to check, in manifest order */
	size_t nfiles, files_alloc;
	struct uset uuids;
	uint64_t problems, notes, records, duplicates;
	uint64_t file_problems;      /* of problems: about one data file */
	bool oom;
};

void sl_tree_report(FILE *out, uint64_t *count, const char *word, const char *stream, const char *object,
		    const char *fmt, va_list ap)
{
	if ((*count)++ >= SL_TREE_REPORT_LINES)
		return;
	fprintf(out, "%s: ", word);
	if (object)
		fprintf(out, "table \"%s/%s\": ", stream, object);
	vfprintf(out, fmt, ap);
	fputc('\n', out);
}

void sl_tree_report_more(FILE *out, const char *word, uint64_t count)
{
	if (count > SL_TREE_REPORT_LINES)
		fprintf(out, "%s: ... and %" PRIu64 " more\n", word, count - SL_TREE_REPORT_LINES);
}

static void problem(struct verify *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(struct verify *v, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sl_tree_report(v->out, &v->problems, "problem", NULL, NULL, fmt, ap);
	va_end(ap);
}

/* A problem with one data file. */
#define fproblem(v, ...) do { (v)->file_problems++; problem((v), __VA_ARGS__); } while (0)

static void note(struct verify *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct verify *v, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sl_tree_report(v->out, &v->notes, "note", NULL, NULL, fmt, ap);
	va_end(ap);
}

static int note_key(void *arg, const char *key, uint64_t size, int64_t mtime_ms)
{
	struct verify *v = arg;
	const char *base = strrchr(key, '/');
	struct entry *e = map_get(&v->keys, key, true);
	uint64_t seq;

	(void)mtime_ms;
	if (!e) {
		v->oom = true;
		return -1;
	}
	e->listed = true;
	e->size = size;
	base = base ? base + 1 : key;
	if (!strncmp(base, ".compact-", 9) && strlen(base) > 14 && !strcmp(base + strlen(base) - 5, ".json")) {
		if (v->nrecs == v->recs_alloc) {
			size_t na = v->recs_alloc ? v->recs_alloc * 2 : 16;
			char **nr = realloc(v->recs, na * sizeof *nr);
			if (!nr) {
				v->oom = true;
				return -1;
			}
			v->recs = nr;
			v->recs_alloc = na;
		}
		v->recs[v->nrecs++] = e->key;
		return 0;
	}
	if (strstr(key, "/" SL_MANIFEST_DIR "/") && sl_manifest_name(base, &seq)) {
		if (v->nseqs == v->seqs_alloc) {
			size_t na = v->seqs_alloc ? v->seqs_alloc * 2 : 64;
			uint64_t *ns = realloc(v->seqs, na * sizeof *ns);
			if (!ns) {
				v->oom = true;
				return -1;
			}
			v->seqs = ns;
			v->seqs_alloc = na;
		}
		v->seqs[v->nseqs++] = seq;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Reads and parses every listed manifest, in sequence order. */
static int load_manifests(struct verify *v, char *err, size_t errlen)
{
	struct sl_buf key, body;
	int rc = 0;

	qsort(v->seqs, v->nseqs, sizeof *v->seqs, cmp_u64);
	v->mans = calloc(v->nseqs ? v->nseqs : 1, sizeof *v->mans);
	if (!v->mans) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	sl_buf_init(&key, 0);
	sl_buf_init(&body, 0);
	for (size_t i = 0; i < v->nseqs && rc == 0; i++) {
		char why[512];
		struct sl_manifest *m = &v->mans[v->nmans];

		sl_buf_reset(&key);
		sl_buf_reset(&body);
		sl_manifest_key(&key, v->stream, v->seqs[i]);
		if (sl_buf_failed(&key)) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
			break;
		}
		rc = v->store.ops->get(v->store.ctx, key.data, &body, err, errlen);
		if (rc == SL_STORE_NOT_FOUND) {
			problem(v, "manifest %s was listed but cannot be found", key.data);
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		if (sl_manifest_decode(m, body.data ? body.data : "", body.len, why, sizeof why) < 0) {
			problem(v, "manifest %s cannot be read: %s", key.data, why);
			continue;
		}
		if (m->sequence != v->seqs[i]) {
			problem(v, "manifest %s says it is number %" PRIu64, key.data, m->sequence);
			sl_manifest_free(m);
			continue;
		}
		if (!m->stream || strcmp(m->stream, v->stream) != 0)
			problem(v, "manifest %s belongs to stream \"%s\"", key.data, m->stream ? m->stream : "");
		v->nmans++;
	}
	sl_buf_free(&key);
	sl_buf_free(&body);
	return rc;
}

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static const char *pos_text(const struct sl_manifest_pos *p)
{
	return p->pos ? p->pos : "the stream's beginning";
}

/* The sequence, previous and from/to chain of the manifests read. */
static void check_chain(struct verify *v)
{
	struct sl_buf key, want;
	uint64_t expect = 1;
	const struct sl_manifest *prev = NULL;

	sl_buf_init(&key, 0);
	sl_buf_init(&want, 0);
	for (size_t i = 0; i < v->nmans; i++) {
		const struct sl_manifest *m = &v->mans[i];

		sl_buf_reset(&key);
		sl_manifest_key(&key, v->stream, m->sequence);
		if (m->sequence > expect) {
			if (m->sequence - expect == 1)
				problem(v, "manifest %" PRIu64 " is missing (the chain goes from %" PRIu64 " to %" PRIu64 ")",
					expect, expect - 1, m->sequence);
			else
				problem(v, "manifests %" PRIu64 " to %" PRIu64 " are missing", expect, m->sequence - 1);
		}
		if (m->sequence == expect && prev) {
			sl_buf_reset(&want);
			sl_manifest_key(&want, v->stream, prev->sequence);
			if (!str_eq(m->previous, want.data))
				problem(v, "manifest %s names %s as its previous one, not %s", key.data,
					m->previous ? m->previous : "none", want.data);
		} else if (m->sequence == 1 && m->previous) {
			problem(v, "manifest %s is the first but names %s as its previous one", key.data, m->previous);
		}
		/* Positions: this one starts where the one before ended. */
		if (prev || m->sequence == 1) {
			const struct sl_manifest_pos *end = prev ? &prev->to : NULL;
			bool same = end ? str_eq(m->from.pos, end->pos) && (!end->pos || !strcmp(m->from.csn, end->csn))
					: !m->from.pos;
			if (!same) {
				const char *a = end ? pos_text(end) : "the stream's beginning", *b = pos_text(&m->from);
				int c = !end || !end->pos ? 1 : !m->from.pos ? -1 : strcmp(m->from.csn, end->csn);
				if (c > 0)
					problem(v, "positions from %s to %s are in no manifest (a gap before %s)", a, b,
						key.data);
				else if (c < 0)
					problem(v, "manifest %s starts at %s, before %s where the previous one ended "
						"(an overlap)", key.data, b, a);
				else
					problem(v, "manifest %s starts at %s, not at %s where the previous one ended",
						key.data, b, a);
			}
		}
		if (m->from.pos && m->to.pos && strcmp(m->to.csn, m->from.csn) < 0)
			problem(v, "manifest %s ends at %s, before it starts (%s)", key.data, m->to.pos, m->from.pos);
		if (!m->to.pos && m->from.pos)
			problem(v, "manifest %s has no end position", key.data);
		prev = m;
		expect = m->sequence + 1;
	}
	sl_buf_free(&key);
	sl_buf_free(&want);
}

/* .latest.json must not name a manifest past the last one found. */
static int check_latest(struct verify *v, char *err, size_t errlen)
{
	struct sl_buf key, body;
	uint64_t last = v->nmans ? v->mans[v->nmans - 1].sequence : 0;
	int rc;

	sl_buf_init(&key, 0);
	sl_buf_init(&body, 0);
	sl_buf_printf(&key, "%s/" SL_MANIFEST_DIR "/" SL_MANIFEST_LATEST, v->stream);
	rc = v->store.ops->get(v->store.ctx, key.data ? key.data : "", &body, err, errlen);
	if (rc == 0) {
		json_t *j = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
		json_t *s = json_object_get(j, "sequence");
		if (!json_is_integer(s) || json_integer_value(s) < 0)
			problem(v, "%s cannot be read", key.data);
		else if ((uint64_t)json_integer_value(s) > last)
			problem(v, "manifest %lld, which %s names as the newest, is missing%s",
				(long long)json_integer_value(s), key.data,
				(uint64_t)json_integer_value(s) == last + 1 ? "" : " (and those before it)");
		json_decref(j);
	} else if (rc == SL_STORE_NOT_FOUND && last > 0) {
		note(v, "%s is missing (it is written after each manifest)", key.data);
	}
	sl_buf_free(&key);
	sl_buf_free(&body);
	return rc < 0 ? rc : 0;
}

/* Collects the files the manifests list, and those they remove. */
/* Reads the compaction records. */
static int load_records(struct verify *v, char *err, size_t errlen)
{
	struct sl_buf body;
	char why[256];
	int rc = 0;

	if (!v->nrecs)
		return 0;
	if (!(v->recm = calloc(v->nrecs, sizeof *v->recm))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	sl_buf_init(&body, 0);
	for (size_t i = 0; i < v->nrecs && rc == 0; i++) {
		sl_buf_reset(&body);
		rc = v->store.ops->get(v->store.ctx, v->recs[i], &body, err, errlen);
		if (rc == SL_STORE_NOT_FOUND) {
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		if (sl_manifest_decode(&v->recm[v->nrecm], body.data ? body.data : "", body.len, why, sizeof why) < 0)
			problem(v, "compaction record %s cannot be read: %s", v->recs[i], why);
		else
			v->nrecm++;
	}
	sl_buf_free(&body);
	return rc;
}

static int add_check(struct verify *v, struct entry *e)
{
	if (v->nfiles == v->files_alloc) {
		size_t na = v->files_alloc ? v->files_alloc * 2 : 256;
		struct entry **nf = realloc(v->files, na * sizeof *nf);
		if (!nf)
			return -1;
		v->files = nf;
		v->files_alloc = na;
	}
	v->files[v->nfiles++] = e;
	return 0;
}

/* The files of manifest m (a compaction record's when by names it, with
 * manifest -1; else a manifest's, with its sequence): files to check,
 * removed files gone. */
static int collect_manifest(struct verify *v, const struct sl_manifest *m, int64_t manifest, const char *by)
{
	for (size_t k = 0; k < m->nfiles; k++) {
		struct entry *e = map_get(&v->keys, m->files[k].path, true);
		if (!e)
			return -1;
		if (e->manifest && by) {
			problem(v, "%s is listed twice (by a manifest and compaction record %s)", e->key, by);
			continue;
		}
		if (e->manifest) {
			problem(v, "%s is listed by manifests %" PRId64 " and %" PRIu64, e->key, e->manifest,
				m->sequence);
			continue;
		}
		e->manifest = manifest;
		e->by = by;
		e->mf = &m->files[k];
		if (add_check(v, e) < 0)
			return -1;
	}
	for (size_t k = 0; k < m->nremoved; k++) {
		struct entry *e = map_get(&v->keys, m->removed[k], true);
		if (!e)
			return -1;
		e->removed = true;
	}
	return 0;
}

/* The files of compaction records: bases to check, replaced files gone. */
static int collect_records(struct verify *v)
{
	for (size_t i = 0; i < v->nrecm; i++)
		if (collect_manifest(v, &v->recm[i], -1, v->recs[i]) < 0)
			return -1;
	return 0;
}

static int collect_files(struct verify *v)
{
	for (size_t i = 0; i < v->nmans; i++)
		if (collect_manifest(v, &v->mans[i], (int64_t)v->mans[i].sequence, NULL) < 0)
			return -1;
	return 0;
}

/* Reads one data file (its blocks by ocf.c, its records by avro-c): counts
 * its records, checks its first and last CSN, and adds its uuids to the set. */
static void read_file(struct verify *v, uint32_t idx, const char *path)
{
	struct entry *e = v->files[idx];
	const struct sl_manifest_file *mf = e->mf;
	struct sl_avro_read *rd;
	avro_value_t *val;
	char first[SL_CSN_LEN + 1] = "", last[SL_CSN_LEN + 1] = "", why[512];
	uint64_t n = 0;
	int rc;

	if (sl_avro_read_open(&rd, path, why, sizeof why) < 0) {
		fproblem(v, "%s cannot be read: %s", e->key, why);
		return;
	}
	while ((rc = sl_avro_read_next(rd, &val, why, sizeof why)) > 0) {
		avro_value_t f, sm;
		const char *s;
		size_t len;
		unsigned char u[16];
		int64_t seen;

		n++;
		if (avro_value_get_by_name(val, "source_metadata", &sm, NULL) == 0 &&
		    avro_value_get_by_name(&sm, "change_sequence_number", &f, NULL) == 0 &&
		    avro_value_get_string(&f, &s, &len) == 0) {
			if (n == 1)
				snprintf(first, sizeof first, "%.*s", (int)(len ? len - 1 : 0), s);
			snprintf(last, sizeof last, "%.*s", (int)(len ? len - 1 : 0), s);
		}
		if (avro_value_get_by_name(val, "uuid", &f, NULL) != 0 || avro_value_get_string(&f, &s, &len) != 0 ||
		    !parse_uuid(s, len ? len - 1 : 0, u)) {
			fproblem(v, "%s: record %" PRIu64 " has no readable uuid", e->key, n);
			continue;
		}
		seen = uset_add(&v->uuids, u, idx + 1);
		if (seen < 0) {
			v->oom = true;
			break;
		}
		if (seen > 0) {
			v->duplicates++;
			if (v->duplicates <= 20)
				problem(v, "record %.*s of %s is also in %s", (int)(len ? len - 1 : 0), s, e->key,
					v->files[seen - 1]->key);
		}
	}
	if (rc < 0)
		fproblem(v, "%s cannot be read to its end (truncated or damaged after record %" PRIu64 "): %s",
			e->key, n, why);
	else if (!v->oom && n != mf->records)
		fproblem(v, "%s holds %" PRIu64 " records, its manifest says %" PRIu64, e->key, n, mf->records);
	else if (!v->oom && n > 0 && (strcmp(first, mf->first_csn) != 0 || strcmp(last, mf->last_csn) != 0))
		fproblem(v, "%s holds CSNs %s to %s, its manifest says %s to %s", e->key, first, last,
			mf->first_csn, mf->last_csn);
	v->records += n;
	sl_avro_read_close(rd);
}

static int check_files(struct verify *v, char *err, size_t errlen)
{
	for (uint32_t i = 0; i < v->nfiles && !v->oom; i++) {
		struct entry *e = v->files[i];
		char *path = NULL;
		bool temporary = false;
		int rc;

		if (e->removed)
			continue;
		if (!e->listed) {
			if (e->manifest < 0)
				fproblem(v, "%s is missing (the base of compaction record %s)", e->key, e->by);
			else
				fproblem(v, "%s is missing (listed by manifest %" PRId64 ")", e->key, e->manifest);
			continue;
		}
		if (e->size != e->mf->bytes) {
			fproblem(v, "%s has %" PRIu64 " bytes, its manifest says %" PRIu64, e->key, e->size, e->mf->bytes);
			continue;
		}
		rc = v->store.ops->fetch(v->store.ctx, e->key, &path, &temporary, err, errlen);
		if (rc == SL_STORE_NOT_FOUND) {
			fproblem(v, "%s is missing (listed by manifest %" PRId64 ")", e->key, e->manifest);
			continue;
		}
		if (rc < 0)
			return rc;
		read_file(v, i, path);
		if (temporary)
			unlink(path);
		free(path);
	}
	return 0;
}

/* Data files that no manifest lists, and removed ones still present. */
static void check_unlisted(struct verify *v)
{
	uint64_t unlisted = 0;

	for (size_t i = 0; i < v->keys.nb; i++) {
		for (struct entry *e = (struct entry *)v->keys.b[i]; e; e = (struct entry *)e->node.next) {
			const char *base = strrchr(e->key, '/');
			if (!e->listed || !sl_tree_data_name(base ? base + 1 : e->key, NULL, NULL))
				continue;
			if (e->removed) {
				note(v, "%s, removed with an interrupted backfill or replaced by a compaction, is still there",
				     e->key);
			} else if (!e->manifest) {
				unlisted++;
				note(v, "%s is in no manifest", e->key);
			}
		}
	}
	if (unlisted)
		note(v, "%" PRIu64 " file%s in no manifest: written by a run that stopped before its manifest "
		     "(their records were written again), or listed by a manifest that is missing", unlisted,
		     unlisted == 1 ? " is" : "s are");
}

int sl_tree_verify(struct sl_store store, const char *stream, FILE *out, char *err, size_t errlen)
{
	struct verify v;
	struct sl_buf prefix;
	int rc;

	memset(&v, 0, sizeof v);
	v.store = store;
	v.stream = stream;
	v.out = out;
	sl_buf_init(&prefix, 0);
	sl_buf_puts(&prefix, stream);
	if (sl_buf_failed(&prefix)) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	err[0] = '\0';
	rc = store.ops->list(store.ctx, prefix.data, note_key, &v, err, errlen);
	sl_buf_free(&prefix);
	if (rc < 0 || v.oom)
		goto fail;
	if ((rc = load_manifests(&v, err, errlen)) < 0)
		goto fail;
	if (v.nmans == 0 && v.nseqs == 0) {
		uint64_t data = 0;
		for (size_t i = 0; i < v.keys.nb; i++)
			for (struct entry *e = (struct entry *)v.keys.b[i]; e; e = (struct entry *)e->node.next) {
				const char *base = strrchr(e->key, '/');
				data += sl_tree_data_name(base ? base + 1 : e->key, NULL, NULL);
			}
		if (data)
			problem(&v, "%" PRIu64 " data files but no manifest under %s/%s/", data,
				store.ops->describe(store.ctx), stream);
	}
	check_chain(&v);
	if ((rc = check_latest(&v, err, errlen)) < 0)
		goto fail;
	if ((rc = load_records(&v, err, errlen)) < 0)
		goto fail;
	if (collect_files(&v) < 0 || collect_records(&v) < 0) {
		v.oom = true;
		goto fail;
	}
	if ((rc = check_files(&v, err, errlen)) < 0 || v.oom)
		goto fail;
	check_unlisted(&v);
	sl_tree_report_more(out, "problem", v.problems);
	if (v.duplicates > 20)
		fprintf(out, "problem: %" PRIu64 " records in all are present more than once\n", v.duplicates);
	if (v.problems)
		fprintf(out, "stream %s: %zu manifests, %zu files, %" PRIu64 " records in %s: PROBLEMS FOUND: %" PRIu64
			" with the manifests or their chain, %" PRIu64 " with files, %" PRIu64 " records present twice\n",
			stream, v.nmans, v.nfiles, v.records, store.ops->describe(store.ctx),
			v.problems - v.file_problems - (v.duplicates < 20 ? v.duplicates : 20), v.file_problems,
			v.duplicates);
	else
		fprintf(out, "stream %s: %zu manifests, %zu files, %" PRIu64 " records in %s: complete, nothing "
			"missing, nothing twice\n", stream, v.nmans, v.nfiles, v.records, store.ops->describe(store.ctx));
	rc = v.problems ? SL_EVERIFY : SL_OK;
	goto out;
fail:
	if (v.oom)
		snprintf(err, errlen, "stream \"%s\": out of memory verifying", stream);
	if (rc >= 0)
		rc = SL_EFAIL;
out:
	for (size_t i = 0; i < v.nmans; i++)
		sl_manifest_free(&v.mans[i]);
	free(v.mans);
	for (size_t i = 0; i < v.nrecm; i++)
		sl_manifest_free(&v.recm[i]);
	free(v.recm);
	free(v.recs);
	free(v.seqs);
	free(v.files);
	free(v.uuids.s);
	map_free(&v.keys);
	return rc;
}
