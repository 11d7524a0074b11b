/*
 * schema/schema.c: table schema versions, change sequence numbers, record
 * uuids, and the comparison and canonical encoding of typed values.
 */
#include "schema/schema.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nettle/sha1.h>

#include "common/buf.h"
#include "common/util.h"

/* The namespace of every record uuid: UUIDv5 needs one; this one is fixed
 * forever, since changing it would change every uuid sluice ever wrote. */
static const uint8_t sluice_uuid_ns[16] = {
	0x6b, 0x1e, 0x3c, 0x52, 0x8f, 0x0d, 0x4a, 0x3e,
	0x9c, 0x57, 0x2d, 0x41, 0x0b, 0x7e, 0x55, 0xc1,
};

void sl_csn_format(char out[static SL_CSN_LEN + 1], uint64_t position, uint32_t seq)
{
	/* Called for every change: hand-rolled instead of snprintf. */
	static const char hex[] = "0123456789ABCDEF";

	for (int i = 15; i >= 0; i--) {
		out[i] = hex[position & 0xf];
		position >>= 4;
	}
	out[16] = '-';
	for (int i = 26; i >= 17; i--) {
		out[i] = (char)('0' + seq % 10);
		seq /= 10;
	}
	out[SL_CSN_LEN] = '\0';
}

void sl_csn_next_seq(char csn[static SL_CSN_LEN + 1])
{
	for (int i = SL_CSN_LEN - 1; i > 16; i--) {
		if (csn[i] != '9') {
			csn[i]++;
			return;
		}
		csn[i] = '0';
	}
}

void sl_change_set_csn(struct sl_change *c, uint64_t csn_pos, uint32_t seq)
{
	c->csn_pos = csn_pos;
	c->seq = seq;
	sl_csn_format(c->csn, csn_pos, seq);
}

/* Feeds one name piece to the hash, with a NUL after it as a separator. */
static void sha1_piece(struct sha1_ctx *h, const void *p, size_t n, bool nul)
{
	sha1_update(h, n, p);
	if (nul)
		sha1_update(h, 1, (const uint8_t *)"");
}

/* RFC 4122 name-based UUID, version 5: SHA-1 over the namespace and the
 * name "<stream>\0<schema>.<table>\0<csn>[\0<extra>]", truncated to 16
 * bytes with the version and variant bits set.  The prefix up to the CSN is
 * the same for every record of a table: it is hashed once into a
 * sl_uuid_prefix, which each record's uuid starts from (a copy of the SHA-1
 * state, nothing allocated). */
void sl_uuid_prefix_init(struct sl_uuid_prefix *u, const char *stream, const struct sl_table *t)
{
	u->table = t;
	sha1_init(&u->h);
	sha1_update(&u->h, sizeof sluice_uuid_ns, sluice_uuid_ns);
	sha1_piece(&u->h, stream, strlen(stream), true);
	sha1_piece(&u->h, t->ns, strlen(t->ns), false);
	sha1_piece(&u->h, ".", 1, false);
	sha1_piece(&u->h, t->name, strlen(t->name), true);
}

void sl_change_set_uuid_from(struct sl_change *c, const struct sl_uuid_prefix *u, const void *extra,
			     size_t extra_len)
{
	uint8_t digest[SHA1_DIGEST_SIZE];
	struct sha1_ctx h = u->h;

	sha1_piece(&h, c->csn, SL_CSN_LEN, extra != NULL);
	if (extra)
		sha1_update(&h, extra_len, extra);
	sha1_digest(&h, sizeof digest, digest);
	memcpy(c->uuid, digest, 16);
	c->uuid[6] = (uint8_t)((c->uuid[6] & 0x0f) | 0x50);
	c->uuid[8] = (uint8_t)((c->uuid[8] & 0x3f) | 0x80);
}

void sl_change_set_uuid(struct sl_change *c, const char *stream, const void *extra, size_t extra_len)
{
	struct sl_uuid_prefix u;

	sl_uuid_prefix_init(&u, stream, c->table);
	sl_change_set_uuid_from(c, &u, extra, extra_len);
}

const char *sl_type_name(enum sl_type t)
{
	switch (t) {
	case SL_T_STRING: return "string";
	case SL_T_BOOL: return "bool";
	case SL_T_INT32: return "int32";
	case SL_T_INT64: return "int64";
	case SL_T_FLOAT: return "float";
	case SL_T_DOUBLE: return "double";
	case SL_T_DECIMAL: return "decimal";
	case SL_T_BYTES: return "bytes";
	case SL_T_DATE: return "date";
	case SL_T_TIME: return "time";
	case SL_T_TIMESTAMP: return "timestamp";
	case SL_T_TIMESTAMPTZ: return "timestamptz";
	case SL_T_UUID: return "uuid";
	case SL_T_JSON: return "json";
	case SL_T_UINT64: return "uint64";
	}
	return "unknown";
}

const char *sl_value_kind_name(unsigned kind)
{
	switch (kind) {
	case SL_V_NULL: return "null";
	case SL_V_UNCHANGED: return "unchanged";
	case SL_V_BOOL: return "boolean";
	case SL_V_INT: return "integer";
	case SL_V_UINT: return "unsigned integer";
	case SL_V_FLOAT: return "float";
	case SL_V_DOUBLE: return "double";
	case SL_V_DECIMAL: return "decimal";
	case SL_V_BYTES: return "bytes";
	case SL_V_STRING: return "string";
	case SL_V_JSON: return "json";
	case SL_V_DATE: return "date";
	case SL_V_TIME: return "time";
	case SL_V_TIMESTAMP: return "timestamp";
	case SL_V_UUID: return "uuid";
	}
	return "unknown";
}

/* The value kind each column type takes (besides null and unchanged). */
static const uint8_t kind_of_type[] = {
	[SL_T_STRING] = SL_V_STRING,
	[SL_T_BOOL] = SL_V_BOOL,
	[SL_T_INT32] = SL_V_INT,
	[SL_T_INT64] = SL_V_INT,
	[SL_T_UINT64] = SL_V_UINT,
	[SL_T_FLOAT] = SL_V_FLOAT,
	[SL_T_DOUBLE] = SL_V_DOUBLE,
	[SL_T_DECIMAL] = SL_V_DECIMAL,
	[SL_T_BYTES] = SL_V_BYTES,
	[SL_T_DATE] = SL_V_DATE,
	[SL_T_TIME] = SL_V_TIME,
	[SL_T_TIMESTAMP] = SL_V_TIMESTAMP,
	[SL_T_TIMESTAMPTZ] = SL_V_TIMESTAMP,
	[SL_T_UUID] = SL_V_UUID,
	[SL_T_JSON] = SL_V_JSON,
};

int sl_value_check_kind(enum sl_type t, const struct sl_value *v, const char *column, char *err, size_t errlen)
{
	if ((unsigned)t >= sizeof kind_of_type / sizeof *kind_of_type) {
		snprintf(err, errlen, "column \"%s\": unknown output type %d", column, (int)t);
		return -1;
	}
	if (v->kind == kind_of_type[t])
		return 0;
	if (v->kind > SL_V_UUID)
		snprintf(err, errlen, "column \"%s\": unknown value kind %u", column, v->kind);
	else
		snprintf(err, errlen, "column \"%s\": a value of kind %s does not fit type %s", column,
			 sl_value_kind_name(v->kind), sl_type_name(t));
	return -1;
}

const char *sl_op_name(enum sl_op op)
{
	switch (op) {
	case SL_OP_INSERT: return "INSERT";
	case SL_OP_UPDATE_INSERT: return "UPDATE-INSERT";
	case SL_OP_UPDATE_DELETE: return "UPDATE-DELETE";
	case SL_OP_DELETE: return "DELETE";
	case SL_OP_TRUNCATE: return "TRUNCATE";
	}
	return "UNKNOWN";
}

bool sl_value_equal(const struct sl_value *a, const struct sl_value *b)
{
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case SL_V_NULL:
	case SL_V_UNCHANGED:
		return true;
	case SL_V_BOOL:
		return a->b == b->b;
	case SL_V_INT:
	case SL_V_DATE:
	case SL_V_TIME:
	case SL_V_TIMESTAMP:
		return a->i == b->i;
	case SL_V_UINT:
		return a->u == b->u;
	case SL_V_FLOAT:
		return memcmp(&a->f, &b->f, sizeof a->f) == 0;
	case SL_V_DOUBLE:
		return memcmp(&a->d, &b->d, sizeof a->d) == 0;
	case SL_V_DECIMAL:
		if (a->neg != b->neg || a->scale != b->scale)
			return false;
		/* fall through */
	case SL_V_BYTES:
	case SL_V_STRING:
	case SL_V_JSON:
	case SL_V_UUID:
		return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
	}
	return false;
}

int sl_value_key_bytes(struct sl_buf *b, const struct sl_value *v)
{
	unsigned char h[1 + 1 + 2 + 8];
	size_t n = 0;
	uint32_t u32;
	uint64_t u64;

	h[n++] = v->kind;
	switch (v->kind) {
	case SL_V_NULL:
	case SL_V_UNCHANGED:
		break;
	case SL_V_BOOL:
		h[n++] = v->b ? 1 : 0;
		break;
	case SL_V_INT:
	case SL_V_UINT:
	case SL_V_DATE:
	case SL_V_TIME:
	case SL_V_TIMESTAMP:
		sl_put_u64(h + n, v->u);
		n += 8;
		break;
	case SL_V_FLOAT:
		memcpy(&u32, &v->f, sizeof u32);
		sl_put_u32(h + n, u32);
		n += 4;
		break;
	case SL_V_DOUBLE:
		memcpy(&u64, &v->d, sizeof u64);
		sl_put_u64(h + n, u64);
		n += 8;
		break;
	case SL_V_DECIMAL:
		h[n++] = v->neg ? 1 : 0;
		h[n++] = (unsigned char)((uint16_t)v->scale >> 8);
		h[n++] = (unsigned char)(uint16_t)v->scale;
		/* then the digit count and the digits, as for the kinds below */
		/* fall through */
	case SL_V_BYTES:
	case SL_V_STRING:
	case SL_V_JSON:
	case SL_V_UUID:
		sl_put_u32(h + n, v->len);
		n += 4;
		if (sl_buf_append(b, h, n) < 0)
			return -1;
		return sl_buf_append(b, v->p, v->len);
	default:
		return -1;
	}
	return sl_buf_append(b, h, n);
}

struct sl_table *sl_table_new(const char *ns, const char *name)
{
	struct sl_table *t = calloc(1, sizeof *t);

	if (!t)
		return NULL;
	t->ns = strdup(ns);
	t->name = strdup(name);
	t->est_rows = -1;
	if (!t->ns || !t->name) {
		sl_table_free(t);
		return NULL;
	}
	return t;
}

int sl_table_add_column(struct sl_table *t, const char *name, enum sl_type type, int precision, int scale,
			uint32_t src_type, int32_t src_typmod, const char *type_name, bool is_key)
{
	struct sl_column *c;

	/* Doubling: a column at a time, a table of n columns would copy its
	 * array n times over (a Relation message may announce 65535). */
	if (t->ncols >= t->acols) {
		int room = t->ncols < 4 ? 8 : t->ncols * 2;
		struct sl_column *cols = realloc(t->cols, sizeof *cols * (size_t)room);
		if (!cols)
			return -1;
		t->cols = cols;
		t->acols = room;
	}
	c = &t->cols[t->ncols];
	memset(c, 0, sizeof *c);
	c->name = strdup(name);
	c->type_name = type_name ? strdup(type_name) : NULL;
	if (!c->name || (type_name && !c->type_name)) {
		free(c->name);
		free(c->type_name);
		return -1;
	}
	c->src_type = src_type;
	c->src_typmod = src_typmod;
	c->is_key = is_key;
	c->type = type;
	if (type == SL_T_DECIMAL) {
		c->precision = precision;
		c->scale = scale;
	}
	t->ncols++;
	return 0;
}

static bool is_alpha(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool is_alnum(char c)
{
	return is_alpha(c) || (c >= '0' && c <= '9');
}

/* True if s is a valid Avro name: [A-Za-z_][A-Za-z0-9_]*. */
static bool valid_avro_name(const char *s)
{
	if (!is_alpha(*s) && *s != '_')
		return false;
	for (; *s; s++)
		if (!is_alnum(*s) && *s != '_')
			return false;
	return true;
}

static bool name_taken(const struct sl_table *t, const char *name)
{
	for (int i = 0; i < t->ncols; i++)
		if (t->cols[i].avro_name && !strcmp(t->cols[i].avro_name, name))
			return true;
	return false;
}

/* The Avro field name of a column whose name is not a valid Avro name: every
 * byte outside [A-Za-z0-9] (the underscore included), and a leading digit,
 * becomes '_' and two lowercase hex digits ("a-b" -> "a_2db", "1st" ->
 * "_31st").  Every '_' of the result starts such an escape, so two such
 * columns never get the same name; if the result is another column's valid
 * name (a contrived pair), _2, _3, ... is appended. */
static char *escaped_avro_name(const struct sl_table *t, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	struct sl_buf b;
	size_t len;

	sl_buf_init(&b, 0);
	for (const char *p = src; *p; p++) {
		unsigned char ch = (unsigned char)*p;
		if (is_alpha((char)ch) || (is_alnum((char)ch) && p != src)) {
			sl_buf_putc(&b, (char)ch);
		} else {
			sl_buf_putc(&b, '_');
			sl_buf_putc(&b, hex[ch >> 4]);
			sl_buf_putc(&b, hex[ch & 15]);
		}
	}
	if (b.len == 0)
		sl_buf_putc(&b, '_');  /* an empty name (never from a catalog) */
	len = b.len;
	for (int n = 2; !sl_buf_failed(&b) && name_taken(t, b.data); n++) {
		b.len = len;
		sl_buf_printf(&b, "_%d", n);
	}
	return sl_buf_detach(&b);
}

/* Field names that stay put: a column whose name is a valid Avro name keeps
 * it, whatever other columns come and go; the others get their escaped form
 * (escaped_avro_name), which depends on nothing but the name, unless it
 * meets another column's valid name. */
static int assign_avro_names(struct sl_table *t)
{
	for (int i = 0; i < t->ncols; i++) {
		free(t->cols[i].avro_name);
		t->cols[i].avro_name = NULL;
	}
	for (int i = 0; i < t->ncols; i++)
		if (valid_avro_name(t->cols[i].name) && !(t->cols[i].avro_name = strdup(t->cols[i].name)))
			return -1;
	for (int i = 0; i < t->ncols; i++)
		if (!t->cols[i].avro_name && !(t->cols[i].avro_name = escaped_avro_name(t, t->cols[i].name)))
			return -1;
	return 0;
}

/* Appends one name of the object with '%' and the bytes unsafe in a path
 * ('/', control characters, DEL) as %XX; with double_underscore, '_' is
 * written "__"; with escape_lead_underscore, a leading '_' is "%5F". */
static void put_object_part(struct sl_buf *b, const char *s, bool double_underscore, bool escape_lead_underscore)
{
	for (const char *p = s; *p; p++) {
		unsigned char ch = (unsigned char)*p;
		if (ch == '_' && double_underscore)
			sl_buf_puts(b, "__");
		else if (ch == '%' || ch == '/' || ch < 0x20 || ch == 0x7f ||
			 (ch == '_' && p == s && escape_lead_underscore))
			sl_buf_printf(b, "%%%02X", ch);
		else
			sl_buf_putc(b, (char)ch);
	}
}

char *sl_object_name(const char *ns, const char *name)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	put_object_part(&b, ns, true, false);
	sl_buf_putc(&b, '_');
	put_object_part(&b, name, false, true);
	return sl_buf_detach(&b);
}

int sl_value_decimal_text(struct sl_buf *b, const struct sl_value *v)
{
	size_t nd = v->len, sc = v->scale > 0 ? (size_t)v->scale : 0;

	if (v->neg)
		sl_buf_putc(b, '-');
	if (nd <= sc) {
		sl_buf_puts(b, "0.");
		for (size_t i = nd; i < sc; i++)
			sl_buf_putc(b, '0');
		sl_buf_append(b, v->p, nd);
	} else {
		sl_buf_append(b, v->p, nd - sc);
		if (sc) {
			sl_buf_putc(b, '.');
			sl_buf_append(b, v->p + nd - sc, sc);
		}
	}
	return sl_buf_failed(b) ? -1 : 0;
}

/* h with a column's missing value: a version whose added column reads
 * another value for the existing rows is another version.  Columns without
 * one hash as before, so that no table's key changes. */
static uint64_t missing_hash(uint64_t h, const struct sl_value *v)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	if (sl_value_key_bytes(&b, v) == 0 && !sl_buf_failed(&b))
		h = sl_fnv1a(h, b.data, b.len);
	sl_buf_free(&b);
	return sl_fnv1a(h, "missing", 7);
}

int sl_column_set_missing(struct sl_column *col, const struct sl_value *v)
{
	char *p = NULL;

	if (sl_value_has_bytes(&col->missing))
		free((void *)col->missing.p);
	memset(&col->missing, 0, sizeof col->missing);
	if (!v || v->kind == SL_V_NULL || v->kind == SL_V_UNCHANGED)
		return 0;
	if (sl_value_has_bytes(v) && !(p = malloc(v->len ? v->len : 1)))
		return -1;
	col->missing = *v;
	if (sl_value_has_bytes(v)) {
		if (v->len)
			memcpy(p, v->p, v->len);
		col->missing.p = p;
	}
	return 0;
}

int sl_table_finish(struct sl_table *t)
{
	uint64_t h = SL_FNV1A_BASIS;

	if (assign_avro_names(t) < 0)
		return -1;
	free(t->object);
	if (!(t->object = sl_object_name(t->ns, t->name)))
		return -1;

	h = sl_fnv1a(h, t->ns, strlen(t->ns) + 1);
	h = sl_fnv1a(h, t->name, strlen(t->name) + 1);
	for (int i = 0; i < t->ncols; i++) {
		const struct sl_column *c = &t->cols[i];
		unsigned char k = c->is_key;
		h = sl_fnv1a(h, c->name, strlen(c->name) + 1);
		h = sl_fnv1a(h, &c->src_type, sizeof c->src_type);
		h = sl_fnv1a(h, &c->src_typmod, sizeof c->src_typmod);
		h = sl_fnv1a(h, &k, 1);
		if (c->missing.kind != SL_V_NULL)
			h = missing_hash(h, &c->missing);
	}
	snprintf(t->schema_key, sizeof t->schema_key, "%016" PRIx64, h);
	return 0;
}

void sl_table_free(struct sl_table *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->ncols; i++) {
		free(t->cols[i].name);
		free(t->cols[i].avro_name);
		free(t->cols[i].type_name);
		free(t->cols[i].doc);
		sl_column_set_missing(&t->cols[i], NULL);
	}
	free(t->cols);
	free(t->ns);
	free(t->name);
	free(t->object);
	free(t->src_columns);
	free(t);
}

bool sl_table_has_key(const struct sl_table *t)
{
	for (int i = 0; i < t->ncols; i++)
		if (t->cols[i].is_key)
			return true;
	return false;
}

bool sl_table_same_columns(const struct sl_table *a, const struct sl_table *b)
{
	if (a->ncols != b->ncols || strcmp(a->ns, b->ns) || strcmp(a->name, b->name))
		return false;
	for (int i = 0; i < a->ncols; i++) {
		const struct sl_column *x = &a->cols[i], *y = &b->cols[i];
		if (strcmp(x->name, y->name) || x->src_type != y->src_type ||
		    x->src_typmod != y->src_typmod || x->is_key != y->is_key)
			return false;
	}
	return true;
}

/* A copy of table version tab: the changes' own version may be freed once
 * write() returns, and a batch is encoded at flush time. */
struct sl_table *sl_table_copy(const struct sl_table *tab)
{
	struct sl_table *c = sl_table_new(tab->ns, tab->name);

	if (!c)
		return NULL;
	for (int i = 0; i < tab->ncols; i++) {
		const struct sl_column *col = &tab->cols[i];
		if (sl_table_add_column(c, col->name, col->type, col->precision, col->scale, col->src_type,
					col->src_typmod, col->type_name, col->is_key) < 0 ||
		    sl_column_set_missing(&c->cols[i], &col->missing) < 0)
			goto fail;
	}
	if (sl_table_finish(c) < 0)
		goto fail;
	/* The version's own names and key, whatever finish derived. */
	for (int i = 0; i < tab->ncols; i++) {
		char *n = strdup(tab->cols[i].avro_name);
		if (!n)
			goto fail;
		free(c->cols[i].avro_name);
		c->cols[i].avro_name = n;
	}
	memcpy(c->schema_key, tab->schema_key, sizeof c->schema_key);
	c->relid = tab->relid;
	c->shape = tab->shape;
	c->src_flags = tab->src_flags;
	c->no_row_identity = tab->no_row_identity;
	c->src = tab->src;
	return c;
fail:
	sl_table_free(c);
	return NULL;
}
