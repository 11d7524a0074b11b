/*
 * sinks/iceberg/ice_widen.c: type promotion in place (see ice_widen.h).
 */
#include "sinks/iceberg/ice_widen.h"

#include "sinks/avro/avro_read.h"
#include "sinks/avro/avro_value.h"

bool ice_widens(enum ice_kind from, int fp, int fs, enum ice_kind to, int tp, int ts)
{
	if (from == ICE_INT && to == ICE_LONG)
		return true;
	if (from == ICE_FLOAT && to == ICE_DOUBLE)
		return true;
	return from == ICE_DECIMAL && to == ICE_DECIMAL && fs == ts && tp > fp;
}

/* v, a value that is not a union, as field f's type. */
static int plain_as(avro_writer_t w, struct sl_buf *b, avro_value_t *v, const struct ice_field *f)
{
	int32_t i;
	float x;
	const void *p;
	size_t n, size;

	switch (avro_value_get_type(v)) {
	case AVRO_INT32:
		if (f->kind != ICE_LONG)
			break;
		return avro_value_get_int(v, &i) != 0 ? -1 : sl_avro_put_long(b, i);
	case AVRO_FLOAT:
		if (f->kind != ICE_DOUBLE)
			break;
		return avro_value_get_float(v, &x) != 0 ? -1 : sl_avro_put_double(b, (double)x);
	case AVRO_FIXED:
		if (f->kind != ICE_DECIMAL || avro_value_get_fixed(v, &p, &n) != 0)
			break;
		size = (size_t)ice_decimal_size(f->precision);
		if (n >= size)
			break;
		/* big-endian two's complement: the sign byte repeated in front */
		for (unsigned char pad = n > 0 && (((const unsigned char *)p)[0] & 0x80) ? 0xff : 0; n < size; size--)
			if (sl_avro_put_byte(b, pad) < 0)
				return -1;
		return sl_avro_put_raw(b, p, n);
	default:
		break;
	}
	return sl_avro_value_bytes(w, b, v);
}

int ice_value_as(avro_writer_t w, struct sl_buf *b, avro_value_t *v, const struct ice_field *f)
{
	avro_value_t branch;
	int disc;

	if (avro_value_get_type(v) != AVRO_UNION)
		return plain_as(w, b, v, f);
	if (avro_value_get_discriminant(v, &disc) != 0 || avro_value_get_current_branch(v, &branch) != 0)
		return -1;
	if (avro_value_get_type(&branch) == AVRO_NULL)
		return sl_avro_value_bytes(w, b, v);
	if (sl_avro_put_long(b, disc) < 0)
		return -1;
	return plain_as(w, b, &branch, f);
}
