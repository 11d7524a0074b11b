/*
 * sinks/iceberg/ice_maint.h: maintenance of the iceberg sink's tables,
 * through a store (sinks/avro_tree/store.h), so that it serves a local
 * warehouse and a bucket alike.
 *
 * `sluice verify` (ice_verify) reads each table of a stream back, from its
 * version-hint.text, and reports, one line each:
 *
 *   - a metadata file, manifest list or manifest that is missing or that
 *     cannot be read, or whose size differs from what names it;
 *   - a file the current snapshot names (data or equality delete file) that
 *     is missing, whose size differs from its manifest entry, that cannot be
 *     read to its end, or whose record count differs from the entry's;
 *   - a gap in the chain of snapshots from the current one back to the
 *     oldest the metadata holds: a parent the metadata does not hold while
 *     older snapshots remain, a sequence number that does not follow its
 *     parent's, a sluice.last-csn below its parent's (positions that go
 *     back), or a snapshot of another stream.
 *
 * A snapshot's sluice.position is the last source position its flush
 * covers; its parent's is where it starts.  With every snapshot of the
 * chain present, the positions they cover leave no gap.  Files under data/
 * that the current snapshot does not name (a commit that did not complete,
 * files a TRUNCATE dropped) are noted, not counted as problems.
 */
#ifndef SLUICE_SINKS_ICEBERG_ICE_MAINT_H
#define SLUICE_SINKS_ICEBERG_ICE_MAINT_H

#include <stddef.h>
#include <stdio.h>

#include "sinks/avro_tree/store.h"

/* `sluice verify` of stream's tables in store, printing what it finds to
 * out.  Returns 0 when everything checks, SL_EVERIFY when it found
 * problems (each printed), or another negative enum sl_status with the
 * message in err when it could not finish. */
int ice_verify(struct sl_store store, const char *stream, FILE *out, char *err, size_t errlen);

#endif
