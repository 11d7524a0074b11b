/*
 * tests/fuzz/fuzz_ocf.c: the Avro object container readers that verify and
 * compact use, on an input taken as a container file: sinks/avro/ocf.c's
 * block reader (header, codecs, sync markers, CRC-32s) to the end, then
 * avro_read.c's record reader (avro-c's generic values) to the end.  Both
 * read the input in memory, through their stream entry points (the ones
 * that take a path open the file and call them).
 */
#include <avro.h>

#include "sinks/avro/avro_read.h"
#include "sinks/avro/ocf.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sl_ocf_reader *r = NULL;
	struct sl_avro_read *ar = NULL;
	FILE *f;
	char err[1024];

	if ((f = fuzz_stream(data, size)) && sl_ocf_reader_open_stream(&r, f, "fuzz.avro", err, sizeof err) == 0) {
		const void *block;
		size_t len;
		uint64_t count;
		while (sl_ocf_reader_block(r, &block, &len, &count, err, sizeof err) == 1)
			;
		sl_ocf_reader_close(r);
	}
	if ((f = fuzz_stream(data, size)) && sl_avro_read_open_stream(&ar, f, "fuzz.avro", err, sizeof err) == 0) {
		avro_value_t *v;
		while (sl_avro_read_next(ar, &v, err, sizeof err) == 1)
			;
		sl_avro_read_close(ar);
	}
	return 0;
}
