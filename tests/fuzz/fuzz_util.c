/*
 * tests/fuzz/fuzz_util.c: frames and the input streams of the fuzz targets.
 */
#include <stdio.h>

#include "common/log.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	sl_log_min_level = SL_LOG_ERROR;
	return 0;
}

int fuzz_next_frame(const uint8_t **p, const uint8_t *end, const uint8_t **frame, size_t *len)
{
	size_t n;

	if (end - *p < 2)
		return 0;
	n = (size_t)(*p)[0] << 8 | (*p)[1];
	*p += 2;
	if (n > (size_t)(end - *p))
		n = (size_t)(end - *p);
	*frame = *p;
	*len = n;
	*p += n;
	return 1;
}

FILE *fuzz_stream(const uint8_t *data, size_t size)
{
	/* "r": glibc reads the buffer and never writes it */
	return fmemopen((void *)data, size, "r");
}
