/*
 * tests/fuzz/fuzz_manifest.c: the manifest decoder of the Avro file tree
 * destinations (sinks/avro_tree/manifest.c) on an input taken as a
 * manifest's JSON; a manifest it accepts is encoded again.
 */
#include "common/buf.h"
#include "sinks/avro_tree/manifest.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sl_manifest m;
	struct sl_buf out;
	char err[1024];

	sl_buf_init(&out, 0);
	if (sl_manifest_decode(&m, (const char *)data, size, err, sizeof err) == 0)
		(void)sl_manifest_encode(&m, &out, err, sizeof err);
	sl_manifest_free(&m);
	sl_buf_free(&out);
	return 0;
}
