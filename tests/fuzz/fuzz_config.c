/*
 * tests/fuzz/fuzz_config.c: the configuration reader (agent/config.c and
 * its INI reader) on an input taken as a configuration file: loaded from
 * a scratch file, as `sluice check` loads one, then freed.
 */
#include "agent/config.h"
#include "common/log.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file(data, size);
	struct sl_config *cfg;
	char err[1024];

	sl_log_min_level = SL_LOG_ERROR;
	if (!path)
		return 0;
	cfg = sl_config_load(path, err, sizeof err);
	sl_config_free(cfg);
	return 0;
}
