/*
 * sinks/iceberg/ice_store.c: where an iceberg destination's tables live (see
 * sl_ice_store_open in iceberg.h): a folder store (avro_dir's) or an S3 store
 * (s3's), and the root of the locations the tables' metadata names.
 */
#include "sinks/iceberg/iceberg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sinks/avro_dir/avro_dir.h"

int sl_ice_store_open(const void *conf, const struct sl_sink_stream *ss, int max_attempts, struct sl_store *out,
		      char **root, char *err, size_t errlen)
{
	const struct sl_iceberg_conf *c = conf;
	struct sl_sink_stream none;
	struct sl_buf b;
	char *abs = NULL;
	int rc;

	*root = NULL;
	out->ops = NULL;
	out->ctx = NULL;
	sl_buf_init(&b, 0);
	if (c->s3.bucket) {
		if (!ss) {
			memset(&none, 0, sizeof none);
			ss = &none;
		}
		if ((rc = sl_s3_store(out, &c->s3, ss, max_attempts, err, errlen)) < 0)
			return rc;
		sl_buf_printf(&b, "s3://%s", sl_s3_store_root(out));
		while (b.len > 0 && b.data[b.len - 1] == '/')
			b.data[--b.len] = '\0';
	} else {
		if (sl_mkdir_p(c->path) < 0 && errno != EEXIST) {
			snprintf(err, errlen, "could not create \"%s\": %s", c->path, sl_strerror(errno));
			return -1;
		}
		if (!(abs = realpath(c->path, NULL))) {
			snprintf(err, errlen, "could not resolve \"%s\": %s", c->path, sl_strerror(errno));
			return -1;
		}
		if (sl_avro_dir_store(out, abs, err, errlen) < 0) {
			free(abs);
			return -1;
		}
		sl_buf_puts(&b, abs);
		free(abs);
	}
	if (!(*root = sl_buf_detach(&b))) {
		out->ops->close(out->ctx);
		out->ops = NULL;
		snprintf(err, errlen, "iceberg sink: out of memory");
		return -1;
	}
	return 0;
}

const char *sl_ice_key_of(const char *root, const char *location)
{
	size_t n = strlen(root);

	if (strncmp(location, root, n) != 0 || location[n] != '/')
		return NULL;
	return location + n + 1;
}
