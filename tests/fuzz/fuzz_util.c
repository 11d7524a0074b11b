/*
 * tests/fuzz/fuzz_util.c: frames and the scratch file of the fuzz targets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/fuzz/fuzz.h"

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

static char scratch[64];

static void remove_scratch(void)
{
	unlink(scratch);
}

const char *fuzz_file(const uint8_t *data, size_t size)
{
	FILE *f;
	int rc;

	if (!scratch[0]) {
		int fd;
		snprintf(scratch, sizeof scratch, "/tmp/sluice-fuzz-XXXXXX");
		fd = mkstemp(scratch);
		if (fd < 0) {
			scratch[0] = 0;
			return NULL;
		}
		close(fd);
		atexit(remove_scratch);
	}
	/* no fsync: the file only lives as long as the process */
	if (!(f = fopen(scratch, "wb")))
		return NULL;
	rc = size && fwrite(data, 1, size, f) != size;
	if (fclose(f) != 0 || rc)
		return NULL;
	return scratch;
}
