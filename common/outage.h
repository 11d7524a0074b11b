/*
 * common/outage.h: one account of a destination's outages, shared by every
 * sink, so that an operator reads the same three lines whichever the
 * destination:
 *
 *   warning  destination "NAME" unavailable: CAUSE                      once, when it starts
 *   warning  destination "NAME" still unavailable after N s: CAUSE      every interval while it lasts
 *   info     destination "NAME" available again after N s               once, when it ends
 *
 * (in JSON with a "destination" field).  A sink reports each attempt that
 * failed in a way a retry may mend (a refused or broken connection, a
 * time-out, a 5xx, a full disk) with sl_outage_fail(), and each one that
 * reached the destination with sl_outage_ok().  The agent owns one per
 * stream (struct sl_sink_stream's outage) and keeps it across the stream's
 * restarts, so an outage longer than a sink's own retries is still one
 * outage.  Every function takes NULL (no account: nothing is logged), and
 * may be called from any thread.
 */
#ifndef SLUICE_COMMON_OUTAGE_H
#define SLUICE_COMMON_OUTAGE_H

#include <pthread.h>
#include <stdint.h>

/* The default time between two "still unavailable" lines. */
#define SL_OUTAGE_INTERVAL_MS 60000

struct sl_outage {
	pthread_mutex_t mu;
	const char *destination;   /* the profile's name (borrowed) */
	int64_t interval_ms;
	int64_t since_ms;          /* sl_mono_ms() of the first failure; 0 while available */
	int64_t logged_ms;         /* when the last "unavailable" line was written */
};

/* Starts an account for destination (borrowed: it must outlive o), with a
 * "still unavailable" line every interval_ms (0: SL_OUTAGE_INTERVAL_MS). */
void sl_outage_init(struct sl_outage *o, const char *destination, int64_t interval_ms);
void sl_outage_destroy(struct sl_outage *o);

/* An attempt failed in a way a retry may mend; cause says how (no secret). */
void sl_outage_fail(struct sl_outage *o, const char *cause);
/* An attempt reached the destination: ends the outage, if one is on. */
void sl_outage_ok(struct sl_outage *o);

#endif
