/*
 * common/outage.c: the account of a destination's outages (see outage.h).
 */
#include "common/outage.h"

#include <inttypes.h>

#include "common/log.h"
#include "common/util.h"

void sl_outage_init(struct sl_outage *o, const char *destination, int64_t interval_ms)
{
	pthread_mutex_init(&o->mu, NULL);
	o->destination = destination ? destination : "";
	o->interval_ms = interval_ms > 0 ? interval_ms : SL_OUTAGE_INTERVAL_MS;
	o->since_ms = 0;
	o->logged_ms = 0;
}

void sl_outage_destroy(struct sl_outage *o)
{
	if (o)
		pthread_mutex_destroy(&o->mu);
}

void sl_outage_fail(struct sl_outage *o, const char *cause)
{
	int64_t now = sl_mono_ms();

	if (!o)
		return;
	pthread_mutex_lock(&o->mu);
	sl_log_set_destination(o->destination);
	if (!o->since_ms) {
		o->since_ms = o->logged_ms = now > 0 ? now : 1;
		sl_warn("destination \"%s\" unavailable: %s", o->destination, cause);
	} else if (now - o->logged_ms >= o->interval_ms) {
		o->logged_ms = now;
		sl_warn("destination \"%s\" still unavailable after %" PRId64 " s: %s", o->destination,
			(now - o->since_ms) / 1000, cause);
	}
	sl_log_set_destination(NULL);
	pthread_mutex_unlock(&o->mu);
}

void sl_outage_ok(struct sl_outage *o)
{
	if (!o)
		return;
	pthread_mutex_lock(&o->mu);
	if (o->since_ms) {
		sl_log_set_destination(o->destination);
		sl_info("destination \"%s\" available again after %" PRId64 " s", o->destination,
			(sl_mono_ms() - o->since_ms) / 1000);
		sl_log_set_destination(NULL);
		o->since_ms = 0;
	}
	pthread_mutex_unlock(&o->mu);
}
