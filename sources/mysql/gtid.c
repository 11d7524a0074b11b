/*
 * sources/mysql/gtid.c: MariaDB GTID positions and MySQL GTID sets (see
 * gtid.h for the text forms and what they mean).
 */
#include "sources/mysql/gtid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void trim(const char **s, size_t *len)
{
	while (*len > 0 && is_space(**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len > 0 && is_space((*s)[*len - 1]))
		(*len)--;
}

/* An unsigned decimal of 1 to 20 digits, at most max. */
static int parse_dec(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > 20)
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - '0';
		if (d > 9 || v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static void bad_text(char *err, size_t errlen, const char *what, const char *s, size_t len)
{
	snprintf(err, errlen, "invalid %s \"%.*s\"%s", what, (int)(len > 64 ? 64 : len), s, len > 64 ? "..." : "");
}

static void oom(char *err, size_t errlen)
{
	snprintf(err, errlen, "out of memory");
}

/* Grows *v (of element size sz) to hold at least need elements. */
static int grow(void **v, size_t *alloc, size_t need, size_t sz)
{
	size_t n;
	void *nv;

	if (need <= *alloc)
		return 0;
	n = *alloc ? *alloc * 2 : 4;
	while (n < need)
		n *= 2;
	nv = realloc(*v, n * sz);
	if (!nv)
		return -1;
	*v = nv;
	*alloc = n;
	return 0;
}

/* ---- MariaDB ---- */

int sl_mariadb_gtid_parse(const char *s, size_t len, struct sl_mariadb_gtid *out, char *err, size_t errlen)
{
	const char *d1 = memchr(s, '-', len), *d2;
	uint64_t dom, srv, seq;

	if (!d1)
		goto bad;
	d2 = memchr(d1 + 1, '-', len - (size_t)(d1 + 1 - s));
	if (!d2 || parse_dec(s, (size_t)(d1 - s), UINT32_MAX, &dom) < 0 ||
	    parse_dec(d1 + 1, (size_t)(d2 - d1 - 1), UINT32_MAX, &srv) < 0 ||
	    parse_dec(d2 + 1, len - (size_t)(d2 + 1 - s), UINT64_MAX, &seq) < 0)
		goto bad;
	out->domain = (uint32_t)dom;
	out->server = (uint32_t)srv;
	out->seq = seq;
	return 0;
bad:
	bad_text(err, errlen, "MariaDB GTID (want domain-server-seq)", s, len);
	return -1;
}

void sl_mariadb_gtid_pos_init(struct sl_mariadb_gtid_pos *p)
{
	memset(p, 0, sizeof *p);
}

void sl_mariadb_gtid_pos_clear(struct sl_mariadb_gtid_pos *p)
{
	p->n = 0;
}

void sl_mariadb_gtid_pos_free(struct sl_mariadb_gtid_pos *p)
{
	free(p->v);
	memset(p, 0, sizeof *p);
}

/* The index of domain in p, or where it would go (*found false). */
static size_t find_domain(const struct sl_mariadb_gtid_pos *p, uint32_t domain, bool *found)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->v[mid].domain < domain)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < p->n && p->v[lo].domain == domain;
	return lo;
}

/* Inserts or replaces; dup_is_error refuses a domain already present. */
static int pos_put(struct sl_mariadb_gtid_pos *p, const struct sl_mariadb_gtid *g, bool dup_is_error)
{
	bool found;
	size_t i = find_domain(p, g->domain, &found);

	if (found) {
		if (dup_is_error)
			return 1;
		p->v[i] = *g;
		return 0;
	}
	if (grow((void **)&p->v, &p->alloc, p->n + 1, sizeof *p->v) < 0)
		return -1;
	memmove(&p->v[i + 1], &p->v[i], (p->n - i) * sizeof *p->v);
	p->v[i] = *g;
	p->n++;
	return 0;
}

int sl_mariadb_gtid_pos_parse(struct sl_mariadb_gtid_pos *p, const char *s, size_t len, char *err,
			      size_t errlen)
{
	const char *end = s + len;

	p->n = 0;
	trim(&s, &len);
	if (len == 0)
		return 0;
	end = s + len;
	while (s <= end) {
		const char *comma = memchr(s, ',', (size_t)(end - s));
		const char *item = s;
		size_t ilen = (size_t)((comma ? comma : end) - s);
		struct sl_mariadb_gtid g;
		int rc;

		trim(&item, &ilen);
		if (sl_mariadb_gtid_parse(item, ilen, &g, err, errlen) < 0)
			goto fail;
		rc = pos_put(p, &g, true);
		if (rc < 0) {
			oom(err, errlen);
			goto fail;
		}
		if (rc > 0) {
			snprintf(err, errlen, "MariaDB GTID position has two GTIDs of domain %u", g.domain);
			goto fail;
		}
		if (!comma)
			break;
		s = comma + 1;
	}
	return 0;
fail:
	p->n = 0;
	return -1;
}

int sl_mariadb_gtid_pos_format(const struct sl_mariadb_gtid_pos *p, struct sl_buf *out)
{
	for (size_t i = 0; i < p->n; i++)
		sl_buf_printf(out, "%s%u-%u-%llu", i ? "," : "", p->v[i].domain, p->v[i].server,
			      (unsigned long long)p->v[i].seq);
	return sl_buf_failed(out) ? -1 : 0;
}

int sl_mariadb_gtid_pos_add(struct sl_mariadb_gtid_pos *p, const struct sl_mariadb_gtid *g, char *err,
			    size_t errlen)
{
	if (pos_put(p, g, false) < 0) {
		oom(err, errlen);
		return -1;
	}
	return 0;
}

const struct sl_mariadb_gtid *sl_mariadb_gtid_pos_get(const struct sl_mariadb_gtid_pos *p, uint32_t domain)
{
	bool found;
	size_t i = find_domain(p, domain, &found);

	return found ? &p->v[i] : NULL;
}

bool sl_mariadb_gtid_pos_contains(const struct sl_mariadb_gtid_pos *p, const struct sl_mariadb_gtid *g)
{
	const struct sl_mariadb_gtid *e = sl_mariadb_gtid_pos_get(p, g->domain);

	return e && e->seq >= g->seq;
}

static enum sl_gtid_order order_of(bool a_more, bool b_more)
{
	if (a_more && b_more)
		return SL_GTID_DIVERGED;
	if (a_more)
		return SL_GTID_AFTER;
	if (b_more)
		return SL_GTID_BEFORE;
	return SL_GTID_EQUAL;
}

enum sl_gtid_order sl_mariadb_gtid_pos_compare(const struct sl_mariadb_gtid_pos *a,
					       const struct sl_mariadb_gtid_pos *b)
{
	bool a_more = false, b_more = false;
	size_t i = 0, j = 0;

	/* Both are sorted by domain: walk them together. */
	while (i < a->n || j < b->n) {
		if (j >= b->n || (i < a->n && a->v[i].domain < b->v[j].domain)) {
			a_more = true;
			i++;
		} else if (i >= a->n || b->v[j].domain < a->v[i].domain) {
			b_more = true;
			j++;
		} else {
			if (a->v[i].seq > b->v[j].seq)
				a_more = true;
			else if (a->v[i].seq < b->v[j].seq)
				b_more = true;
			i++;
			j++;
		}
	}
	return order_of(a_more, b_more);
}

/* ---- MySQL ---- */

int sl_mysql_uuid_parse(const char *s, size_t len, unsigned char out[static 16])
{
	return sl_uuid_parse(s, len, out);
}

void sl_mysql_uuid_format(const unsigned char uuid[static 16], char out[static 37])
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (int k = 0; k < 16; k++) {
		if (k == 4 || k == 6 || k == 8 || k == 10)
			out[o++] = '-';
		out[o++] = hex[uuid[k] >> 4];
		out[o++] = hex[uuid[k] & 15];
	}
	out[o] = '\0';
}

void sl_mysql_gtid_set_init(struct sl_mysql_gtid_set *s)
{
	memset(s, 0, sizeof *s);
}

void sl_mysql_gtid_set_clear(struct sl_mysql_gtid_set *s)
{
	/* Keeps every array, the sids' interval arrays included, for reuse:
	 * slots past n keep their iv pointers. */
	for (size_t i = 0; i < s->n; i++)
		s->sids[i].n = 0;
	s->n = 0;
}

void sl_mysql_gtid_set_free(struct sl_mysql_gtid_set *s)
{
	for (size_t i = 0; i < s->alloc; i++)
		free(s->sids[i].iv);
	free(s->sids);
	memset(s, 0, sizeof *s);
}

/* The sid entry of uuid, created (empty) when create is set; NULL when it
 * does not exist (or out of memory). */
static struct sl_mysql_gtid_sid *find_sid(struct sl_mysql_gtid_set *s, const unsigned char uuid[16],
					  bool create)
{
	size_t lo = 0, hi = s->n, i;
	struct sl_mysql_gtid_sid spare;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (memcmp(s->sids[mid].uuid, uuid, 16) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->n && memcmp(s->sids[lo].uuid, uuid, 16) == 0)
		return &s->sids[lo];
	if (!create)
		return NULL;
	if (s->n == s->alloc) {
		size_t old = s->alloc;
		if (grow((void **)&s->sids, &s->alloc, s->n + 1, sizeof *s->sids) < 0)
			return NULL;
		memset(&s->sids[old], 0, (s->alloc - old) * sizeof *s->sids);
	}
	/* The slot at n may hold a spare interval array from a clear: move it
	 * into the new entry's place. */
	i = lo;
	spare = s->sids[s->n];
	memmove(&s->sids[i + 1], &s->sids[i], (s->n - i) * sizeof *s->sids);
	s->sids[i] = spare;
	memcpy(s->sids[i].uuid, uuid, 16);
	s->sids[i].n = 0;
	s->n++;
	return &s->sids[i];
}

static const struct sl_mysql_gtid_sid *find_sid_c(const struct sl_mysql_gtid_set *s, const unsigned char uuid[16])
{
	return find_sid((struct sl_mysql_gtid_set *)s, uuid, false);
}

/* Adds first..last to sid's intervals, merging overlapping and adjacent ones. */
static int sid_add(struct sl_mysql_gtid_sid *sid, uint64_t first, uint64_t last)
{
	size_t i = 0, j;

	/* i: the first interval that ends at or after first - 1 (could merge). */
	while (i < sid->n && sid->iv[i].last + 1 < first)
		i++;
	/* j: one past the last interval that starts at or before last + 1. */
	j = i;
	while (j < sid->n && sid->iv[j].first <= last + 1)
		j++;
	if (j > i) {
		/* Merge iv[i..j-1] with the new interval into iv[i]. */
		if (sid->iv[i].first < first)
			first = sid->iv[i].first;
		if (sid->iv[j - 1].last > last)
			last = sid->iv[j - 1].last;
		sid->iv[i].first = first;
		sid->iv[i].last = last;
		memmove(&sid->iv[i + 1], &sid->iv[j], (sid->n - j) * sizeof *sid->iv);
		sid->n -= j - i - 1;
		return 0;
	}
	if (grow((void **)&sid->iv, &sid->alloc, sid->n + 1, sizeof *sid->iv) < 0)
		return -1;
	memmove(&sid->iv[i + 1], &sid->iv[i], (sid->n - i) * sizeof *sid->iv);
	sid->iv[i].first = first;
	sid->iv[i].last = last;
	sid->n++;
	return 0;
}

int sl_mysql_gtid_set_add_interval(struct sl_mysql_gtid_set *s, const unsigned char uuid[static 16],
				   uint64_t first, uint64_t last, char *err, size_t errlen)
{
	struct sl_mysql_gtid_sid *sid;

	if (first < 1 || first > last || last > SL_MYSQL_GNO_MAX) {
		snprintf(err, errlen, "invalid GTID interval %llu-%llu (numbers go from 1 to %lld)",
			 (unsigned long long)first, (unsigned long long)last, (long long)SL_MYSQL_GNO_MAX);
		return -1;
	}
	sid = find_sid(s, uuid, true);
	if (!sid || sid_add(sid, first, last) < 0) {
		/* An entry created just now stays empty: drop it. */
		if (sid && sid->n == 0) {
			struct sl_mysql_gtid_sid keep = *sid;
			size_t i = (size_t)(sid - s->sids);
			memmove(&s->sids[i], &s->sids[i + 1], (s->n - i - 1) * sizeof *s->sids);
			s->n--;
			s->sids[s->n] = keep;
		}
		oom(err, errlen);
		return -1;
	}
	return 0;
}

int sl_mysql_gtid_set_add(struct sl_mysql_gtid_set *s, const unsigned char uuid[static 16], uint64_t gno,
			  char *err, size_t errlen)
{
	return sl_mysql_gtid_set_add_interval(s, uuid, gno, gno, err, errlen);
}

bool sl_mysql_gtid_set_contains(const struct sl_mysql_gtid_set *s, const unsigned char uuid[static 16],
				uint64_t gno)
{
	const struct sl_mysql_gtid_sid *sid = find_sid_c(s, uuid);
	size_t lo = 0, hi;

	if (!sid)
		return false;
	hi = sid->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (sid->iv[mid].last < gno)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < sid->n && sid->iv[lo].first <= gno;
}

/* Parses one "uuid:iv[:iv...]" item into s. */
static int parse_sid_item(struct sl_mysql_gtid_set *s, const char *p, size_t len, char *err, size_t errlen)
{
	unsigned char uuid[16];
	const char *end = p + len, *q;

	if (len < 36 || sl_mysql_uuid_parse(p, 36, uuid) < 0) {
		bad_text(err, errlen, "GTID set item (want uuid:interval[:interval...])", p, len);
		return -1;
	}
	q = p + 36;
	if (q == end || *q != ':') {
		bad_text(err, errlen, "GTID set item (want uuid:interval[:interval...])", p, len);
		return -1;
	}
	while (q < end && *q == ':') {
		const char *start = ++q, *dash, *stop;
		uint64_t first, last;

		stop = memchr(start, ':', (size_t)(end - start));
		if (!stop)
			stop = end;
		if (stop > start && (*start < '0' || *start > '9')) {
			bad_text(err, errlen, "GTID set item (tagged GTIDs are not supported)", p, len);
			return -1;
		}
		dash = memchr(start, '-', (size_t)(stop - start));
		if (parse_dec(start, (size_t)((dash ? dash : stop) - start), UINT64_MAX, &first) < 0 ||
		    (dash && parse_dec(dash + 1, (size_t)(stop - dash - 1), UINT64_MAX, &last) < 0)) {
			bad_text(err, errlen, "GTID interval", start, (size_t)(stop - start));
			return -1;
		}
		if (!dash)
			last = first;
		if (sl_mysql_gtid_set_add_interval(s, uuid, first, last, err, errlen) < 0)
			return -1;
		q = stop;
	}
	return 0;
}

int sl_mysql_gtid_set_parse(struct sl_mysql_gtid_set *s, const char *text, size_t len, char *err,
			    size_t errlen)
{
	const char *end;

	sl_mysql_gtid_set_clear(s);
	trim(&text, &len);
	if (len == 0)
		return 0;
	end = text + len;
	for (;;) {
		const char *comma = memchr(text, ',', (size_t)(end - text));
		const char *item = text;
		size_t ilen = (size_t)((comma ? comma : end) - text);

		trim(&item, &ilen);
		if (parse_sid_item(s, item, ilen, err, errlen) < 0) {
			sl_mysql_gtid_set_clear(s);
			return -1;
		}
		if (!comma)
			break;
		text = comma + 1;
	}
	return 0;
}

int sl_mysql_gtid_set_format(const struct sl_mysql_gtid_set *s, struct sl_buf *out)
{
	for (size_t i = 0; i < s->n; i++) {
		char u[37];
		sl_mysql_uuid_format(s->sids[i].uuid, u);
		sl_buf_printf(out, "%s%s", i ? "," : "", u);
		for (size_t k = 0; k < s->sids[i].n; k++) {
			const struct sl_mysql_gtid_ival *v = &s->sids[i].iv[k];
			if (v->first == v->last)
				sl_buf_printf(out, ":%llu", (unsigned long long)v->first);
			else
				sl_buf_printf(out, ":%llu-%llu", (unsigned long long)v->first,
					      (unsigned long long)v->last);
		}
	}
	return sl_buf_failed(out) ? -1 : 0;
}

static void put_le64(struct sl_buf *out, uint64_t v)
{
	unsigned char b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	sl_buf_append(out, b, 8);
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

int sl_mysql_gtid_set_encode(const struct sl_mysql_gtid_set *s, struct sl_buf *out)
{
	put_le64(out, s->n);
	for (size_t i = 0; i < s->n; i++) {
		sl_buf_append(out, s->sids[i].uuid, 16);
		put_le64(out, s->sids[i].n);
		for (size_t k = 0; k < s->sids[i].n; k++) {
			put_le64(out, s->sids[i].iv[k].first);
			put_le64(out, s->sids[i].iv[k].last + 1);
		}
	}
	return sl_buf_failed(out) ? -1 : 0;
}

int sl_mysql_gtid_set_decode(struct sl_mysql_gtid_set *s, const unsigned char *p, size_t len, char *err,
			     size_t errlen)
{
	const unsigned char *end = p + len;
	uint64_t nsids;

	sl_mysql_gtid_set_clear(s);
	if (len < 8)
		goto truncated;
	nsids = get_le64(p);
	p += 8;
	if (nsids >> 56) {
		snprintf(err, errlen, "binary GTID set: the tagged format is not supported");
		return -1;
	}
	for (uint64_t i = 0; i < nsids; i++) {
		const unsigned char *uuid;
		uint64_t niv;
		if ((size_t)(end - p) < 24)
			goto truncated;
		uuid = p;
		niv = get_le64(p + 16);
		p += 24;
		if (niv > (size_t)(end - p) / 16)
			goto truncated;
		for (uint64_t k = 0; k < niv; k++) {
			uint64_t first = get_le64(p), stop = get_le64(p + 8);
			p += 16;
			if (stop <= first || stop - 1 > SL_MYSQL_GNO_MAX || first < 1) {
				snprintf(err, errlen, "binary GTID set: bad interval %llu-%llu", (unsigned long long)first,
					 (unsigned long long)stop);
				goto fail;
			}
			if (sl_mysql_gtid_set_add_interval(s, uuid, first, stop - 1, err, errlen) < 0)
				goto fail;
		}
	}
	if (p != end) {
		snprintf(err, errlen, "binary GTID set: %zu bytes after the set", (size_t)(end - p));
		goto fail;
	}
	return 0;
truncated:
	snprintf(err, errlen, "binary GTID set: truncated");
fail:
	sl_mysql_gtid_set_clear(s);
	return -1;
}

/* True if every interval of a lies inside b's intervals (both normalised). */
static bool sid_subset(const struct sl_mysql_gtid_sid *a, const struct sl_mysql_gtid_sid *b)
{
	size_t j = 0;

	for (size_t i = 0; i < a->n; i++) {
		while (j < b->n && b->iv[j].last < a->iv[i].first)
			j++;
		/* b's intervals are not adjacent, so one of them must hold all of it. */
		if (j >= b->n || b->iv[j].first > a->iv[i].first || b->iv[j].last < a->iv[i].last)
			return false;
	}
	return true;
}

bool sl_mysql_gtid_set_is_subset(const struct sl_mysql_gtid_set *a, const struct sl_mysql_gtid_set *b)
{
	for (size_t i = 0; i < a->n; i++) {
		const struct sl_mysql_gtid_sid *sb = find_sid_c(b, a->sids[i].uuid);
		if (a->sids[i].n == 0)
			continue;
		if (!sb || !sid_subset(&a->sids[i], sb))
			return false;
	}
	return true;
}

enum sl_gtid_order sl_mysql_gtid_set_compare(const struct sl_mysql_gtid_set *a,
					     const struct sl_mysql_gtid_set *b)
{
	bool ab = sl_mysql_gtid_set_is_subset(a, b), ba = sl_mysql_gtid_set_is_subset(b, a);

	return order_of(!ab, !ba);  /* a has more when it is not inside b */
}
