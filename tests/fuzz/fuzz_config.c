/*
 * tests/fuzz/fuzz_config.c: the configuration reader (agent/config.c and
 * its INI reader) on an input taken as a configuration file: loaded as
 * `sluice check` loads one, but from memory (sl_config_load_stream, which
 * sl_config_load calls with the file it opened), then freed.
 */
#include "agent/config.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *f = fuzz_stream(data, size);
	char err[1024];

	if (f)
		sl_config_free(sl_config_load_stream(f, "fuzz.conf", err, sizeof err));
	return 0;
}
