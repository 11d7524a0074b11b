/*
 * tests/fuzz/fuzz_ocf.c: the Avro object container readers that verify and
 * compact use, on an input taken as a container file: sinks/avro/ocf.c's
 * block reader (header, codecs, sync markers, CRC-32s) to the end, then
 * avro_read.c's record reader (avro-c's generic values) to the end.
 */
#include <avro.h>

#include "common/log.h"
#include "sinks/avro/avro_read.h"
#include "sinks/avro/ocf.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file(data, size);
	struct sl_ocf_reader *r = NULL;
	struct sl_avro_read *ar = NULL;
	char err[1024];

	sl_log_min_level = SL_LOG_ERROR;
	if (!path)
		return 0;
	if (sl_ocf_reader_open(&r, path, err, sizeof err) == 0) {
		const void *block;
		size_t len;
		uint64_t count;
		while (sl_ocf_reader_block(r, &block, &len, &count, err, sizeof err) == 1)
			;
		sl_ocf_reader_close(r);
	}
	if (sl_avro_read_open(&ar, path, err, sizeof err) == 0) {
		avro_value_t *v;
		while (sl_avro_read_next(ar, &v, err, sizeof err) == 1)
			;
		sl_avro_read_close(ar);
	}
	return 0;
}
