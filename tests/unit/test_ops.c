/*
 * tests/unit/test_ops.c: the alerts' hysteresis and texts, the Prometheus
 * exposition of the registry, /healthz's verdict, the webhook payload, the
 * stream_down clock, the change counts, the queue sample, liveness and
 * systemd's notify protocol (ops/).
 *
 * Expected texts are written out here from the exposition format's rules
 * (https://prometheus.io/docs/instrumenting/exposition_formats/), not taken
 * from the code's output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/buf.h"
#include "ops/alerts.h"
#include "ops/metrics.h"
#include "ops/sdnotify.h"
#include "ops/webhook.h"

static const struct sl_alert_policy pol = { .fire_after = 1, .resolve_after = 3, .band_pct = 10 };

static void test_threshold_band(void **state)
{
	(void)state;
	assert_int_equal(sl_alert_threshold(-1, 1000, 10), SL_COND_UNKNOWN);
	assert_int_equal(sl_alert_threshold(5000, 0, 10), SL_COND_UNKNOWN);
	assert_int_equal(sl_alert_threshold(1000, 1000, 10), SL_COND_BREACH);
	assert_int_equal(sl_alert_threshold(1001, 1000, 10), SL_COND_BREACH);
	assert_int_equal(sl_alert_threshold(999, 1000, 10), SL_COND_BETWEEN);
	assert_int_equal(sl_alert_threshold(900, 1000, 10), SL_COND_BETWEEN);
	assert_int_equal(sl_alert_threshold(899, 1000, 10), SL_COND_CLEAR);
	assert_int_equal(sl_alert_threshold(0, 1000, 10), SL_COND_CLEAR);
	/* no band: just under is clear */
	assert_int_equal(sl_alert_threshold(999, 1000, 0), SL_COND_CLEAR);
	/* large thresholds do not overflow: 2GB with a 10 % band */
	assert_int_equal(sl_alert_threshold(INT64_C(1932735283), UINT64_C(2147483648), 10), SL_COND_BETWEEN);
	assert_int_equal(sl_alert_threshold(INT64_C(1932735282), UINT64_C(2147483648), 10), SL_COND_CLEAR);
}

static void test_step_fires_once_and_resolves_after_three_clears(void **state)
{
	struct sl_alert a;

	(void)state;
	memset(&a, 0, sizeof a);
	assert_int_equal(sl_alert_step(&a, SL_COND_CLEAR, &pol, 1), 0);
	assert_int_equal(sl_alert_step(&a, SL_COND_BREACH, &pol, 2), 1);
	assert_true(a.firing);
	assert_int_equal(a.since_us, 2);
	assert_int_equal(sl_alert_step(&a, SL_COND_BREACH, &pol, 3), 0);
	assert_int_equal(sl_alert_step(&a, SL_COND_CLEAR, &pol, 4), 0);
	assert_int_equal(sl_alert_step(&a, SL_COND_CLEAR, &pol, 5), 0);
	/* the band restarts the count of clear samples */
	assert_int_equal(sl_alert_step(&a, SL_COND_BETWEEN, &pol, 6), 0);
	assert_int_equal(sl_alert_step(&a, SL_COND_CLEAR, &pol, 7), 0);
	assert_int_equal(sl_alert_step(&a, SL_COND_CLEAR, &pol, 8), 0);
	/* unknown figures change nothing */
	assert_int_equal(sl_alert_step(&a, SL_COND_UNKNOWN, &pol, 9), 0);
	assert_true(a.firing);
	assert_int_equal(sl_alert_step(&a, SL_COND_CLEAR, &pol, 10), -1);
	assert_false(a.firing);
	assert_int_equal(a.since_us, 10);
	assert_int_equal(sl_alert_step(&a, SL_COND_CLEAR, &pol, 11), 0);
}

static void test_step_fire_after_two(void **state)
{
	struct sl_alert_policy p2 = { .fire_after = 2, .resolve_after = 1, .band_pct = 0 };
	struct sl_alert a;

	(void)state;
	memset(&a, 0, sizeof a);
	assert_int_equal(sl_alert_step(&a, SL_COND_BREACH, &p2, 1), 0);
	assert_int_equal(sl_alert_step(&a, SL_COND_CLEAR, &p2, 2), 0);
	assert_int_equal(sl_alert_step(&a, SL_COND_BREACH, &p2, 3), 0);
	assert_int_equal(sl_alert_step(&a, SL_COND_BREACH, &p2, 4), 1);
	assert_int_equal(sl_alert_step(&a, SL_COND_CLEAR, &p2, 5), -1);
}

static struct sl_alert_inputs quiet_inputs(void)
{
	struct sl_alert_inputs in;

	memset(&in, 0, sizeof in);
	in.probe_ok = true;
	in.exists = true;
	in.expected = true;
	in.hold = SL_HOLD_KEPT;
	in.hold_word = "reserved";
	in.hold_label = "wal_status";
	in.lag_bytes = 100;
	in.retained_bytes = 1000;
	in.inactive_s = 0;
	in.time_to_purge_s = -1;
	in.freshness_s = 2;
	in.stalled_s = -1;
	in.caught_up_s = -1;
	return in;
}

static const struct sl_alert_limits limits = {
	.lag_warn_bytes = 256u << 20, .lag_critical_bytes = UINT64_C(2) << 30,
	.retained_warn_bytes = UINT64_C(1) << 30, .retained_critical_bytes = 0,
	.growth_warn_bytes_per_min = 64u << 20, .freshness_warn_s = 300, .inactive_warn_s = 60,
	.purge_warn_s = 3600, .down_warn_s = 60,
};

static int eval(struct sl_alert *al, const struct sl_alert_inputs *in, int64_t now, struct sl_alert_transition *tr)
{
	int n = -1;

	sl_alerts_evaluate(al, in, &limits, &pol, now, tr, &n);
	return n;
}

static void test_evaluate_lag_hysteresis(void **state)
{
	struct sl_alert al[SL_AL_COUNT];
	struct sl_alert_transition tr[SL_AL_COUNT];
	struct sl_alert_inputs in = quiet_inputs();
	int n;

	(void)state;
	memset(al, 0, sizeof al);
	assert_int_equal(eval(al, &in, 1, tr), 0);
	in.lag_bytes = (256 << 20) + 1;
	n = eval(al, &in, 2, tr);
	assert_int_equal(n, 1);
	assert_int_equal(tr[0].id, SL_AL_LAG_WARNING);
	assert_true(tr[0].firing);
	assert_string_equal(tr[0].message,
			    "lag 268435457 bytes (the source's log head minus the confirmed position) >= lag_warn_bytes 268435456");
	/* hovering around the threshold: inside the band, no transition */
	for (int i = 0; i < 10; i++) {
		in.lag_bytes = i % 2 ? (256 << 20) + 5 : (256 << 20) - 5;
		assert_int_equal(eval(al, &in, 3 + i, tr), 0);
	}
	assert_true(al[SL_AL_LAG_WARNING].firing);
	/* well below: resolves at the third clear sample */
	in.lag_bytes = 0;
	assert_int_equal(eval(al, &in, 20, tr), 0);
	assert_int_equal(eval(al, &in, 21, tr), 0);
	n = eval(al, &in, 22, tr);
	assert_int_equal(n, 1);
	assert_int_equal(tr[0].id, SL_AL_LAG_WARNING);
	assert_false(tr[0].firing);
	/* critical and warning fire together past the critical threshold */
	in.lag_bytes = INT64_C(3) << 30;
	n = eval(al, &in, 30, tr);
	assert_int_equal(n, 2);
	assert_int_equal(tr[0].id, SL_AL_LAG_WARNING);
	assert_int_equal(tr[1].id, SL_AL_LAG_CRITICAL);
}

static void test_evaluate_slot_states(void **state)
{
	struct sl_alert al[SL_AL_COUNT];
	struct sl_alert_transition tr[SL_AL_COUNT];
	struct sl_alert_inputs in = quiet_inputs();
	int n;

	(void)state;
	memset(al, 0, sizeof al);
	in.hold = SL_HOLD_KEPT;
	in.hold_word = "extended";
	assert_int_equal(eval(al, &in, 1, tr), 0);
	in.hold = SL_HOLD_AT_RISK;
	in.hold_word = "unreserved";
	n = eval(al, &in, 2, tr);
	assert_int_equal(n, 1);
	assert_int_equal(tr[0].id, SL_AL_WAL_UNRESERVED);
	assert_string_equal(sl_alert_def(tr[0].id)->name, "wal_unreserved");
	assert_int_equal(sl_alert_def(tr[0].id)->severity, SL_ALERT_CRITICAL);
	in.hold = SL_HOLD_LOST;
	in.hold_word = "lost";
	in.retained_bytes = -1;
	n = eval(al, &in, 3, tr);
	assert_int_equal(n, 1);
	assert_int_equal(tr[0].id, SL_AL_SLOT_LOST);
	assert_string_equal(tr[0].message, "the slot is lost (wal_status is lost): changes after its position are "
			    "gone; re-backfill needed");
	assert_true(al[SL_AL_WAL_UNRESERVED].firing);
	/* the slot goes: missing, because the checkpoint has a position in it */
	in.exists = false;
	in.hold = SL_HOLD_UNKNOWN;
	in.hold_word = "";
	n = eval(al, &in, 4, tr);
	assert_int_equal(n, 1);
	assert_int_equal(tr[0].id, SL_AL_SLOT_MISSING);
	/* an unreachable source fires only at its second failed probe, and
	 * leaves the slot's alerts as they are */
	in.probe_ok = false;
	in.probe_error = "connection refused";
	assert_int_equal(eval(al, &in, 5, tr), 0);
	n = eval(al, &in, 6, tr);
	assert_int_equal(n, 1);
	assert_int_equal(tr[0].id, SL_AL_SOURCE_UNREACHABLE);
	assert_string_equal(tr[0].message, "the probe cannot reach the source: connection refused");
	assert_true(al[SL_AL_SLOT_MISSING].firing);
}

static void test_evaluate_freshness_and_down(void **state)
{
	struct sl_alert al[SL_AL_COUNT];
	struct sl_alert_transition tr[SL_AL_COUNT];
	struct sl_alert_inputs in = quiet_inputs();
	int n;

	(void)state;
	memset(al, 0, sizeof al);
	/* without heartbeats an old last change is no alert while nothing is stalled */
	in.freshness_s = 100000;
	assert_int_equal(eval(al, &in, 1, tr), 0);
	in.stalled_s = 301;
	n = eval(al, &in, 2, tr);
	assert_int_equal(n, 1);
	assert_int_equal(tr[0].id, SL_AL_FRESHNESS);
	/* with heartbeats the freshness itself counts */
	memset(al, 0, sizeof al);
	in.stalled_s = -1;
	in.heartbeats = true;
	in.freshness_s = 299;
	assert_int_equal(eval(al, &in, 3, tr), 0);
	in.freshness_s = 300;
	n = eval(al, &in, 4, tr);
	assert_int_equal(n, 1);
	assert_int_equal(tr[0].id, SL_AL_FRESHNESS);
	/* a stream failing for a minute */
	in.down_s = 59;
	in.down_error = "connection lost";
	assert_int_equal(eval(al, &in, 5, tr), 0);
	in.down_s = 60;
	n = eval(al, &in, 6, tr);
	assert_int_equal(n, 1);
	assert_int_equal(tr[0].id, SL_AL_STREAM_DOWN);
	assert_string_equal(tr[0].message, "the stream has been failing for 60 s: connection lost");
	/* binlog purge: fires at or under the limit, clears above the band */
	in.time_to_purge_s = 3600;
	n = eval(al, &in, 7, tr);
	assert_int_equal(n, 1);
	assert_int_equal(tr[0].id, SL_AL_LOG_PURGE);
	in.dead_letters = 1;
	n = eval(al, &in, 8, tr);
	assert_int_equal(n, 1);
	assert_int_equal(tr[0].id, SL_AL_DEAD_LETTERS);
}

static void test_escape_label(void **state)
{
	struct sl_buf b;

	(void)state;
	sl_buf_init(&b, 0);
	sl_ops_escape_label(&b, "a\"b\\c\nd");
	assert_string_equal(b.data, "a\\\"b\\\\c\\nd");
	sl_buf_free(&b);
}

/* Whether text has line, whole. */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

/* Every line is a comment (# HELP / # TYPE) or NAME[{k="v",...}] VALUE, and
 * each sample's family was declared by HELP and TYPE before it, once. */
static void check_grammar(const char *text)
{
	char fam[128] = "";
	const char *p = text;
	int helps = 0;

	while (*p) {
		const char *e = strchr(p, '\n');
		char line[1024];
		assert_non_null(e);
		assert_true((size_t)(e - p) < sizeof line);
		memcpy(line, p, (size_t)(e - p));
		line[e - p] = '\0';
		if (!strncmp(line, "# HELP ", 7)) {
			char *sp = strchr(line + 7, ' ');
			assert_non_null(sp);
			snprintf(fam, sizeof fam, "%.*s", (int)(sp - line - 7), line + 7);
			helps++;
		} else if (!strncmp(line, "# TYPE ", 7)) {
			assert_int_equal(strncmp(line + 7, fam, strlen(fam)), 0);
		} else {
			size_t k = 0;
			while (line[k] == '_' || line[k] == ':' || (line[k] >= 'a' && line[k] <= 'z') ||
			       (line[k] >= 'A' && line[k] <= 'Z') || (line[k] >= '0' && line[k] <= '9'))
				k++;
			assert_true(k > 0);
			/* the family, or its histogram parts */
			assert_int_equal(strncmp(line, fam, strlen(fam)), 0);
			if (line[k] == '{') {
				char *close = strrchr(line, '}');
				assert_non_null(close);
				k = (size_t)(close - line) + 1;
			}
			assert_int_equal(line[k], ' ');
			{
				char *end;
				strtod(line + k + 1, &end);
				if (strcmp(line + k + 1, "+Inf") != 0)
					assert_int_equal(*end, '\0');
			}
		}
		p = e + 1;
	}
	assert_true(helps > 20);
}

static void test_render(void **state)
{
	struct sl_ops *ops = sl_ops_new();
	struct sl_ops_stream *s;
	struct sl_ops_table *t, *t2;
	struct sl_buf b;

	(void)state;
	assert_non_null(ops);
	s = sl_ops_stream_add(ops, "orders");
	assert_non_null(s);
	t = sl_ops_table(s, "public", "order\"s");
	t2 = sl_ops_table(s, "public", "order\"s");
	assert_ptr_equal(t, t2);
	for (int i = 0; i < 7; i++)
		sl_ops_count_change(t, SL_OP_INSERT);
	for (int i = 0; i < 3; i++)
		sl_ops_count_change(t, SL_OP_UPDATE_INSERT);
	sl_ops_count_change(t, SL_OP_DELETE);
	sl_ops_changes_durable(s, true);   /* flushed: counted */
	for (int i = 0; i < 4; i++)
		sl_ops_count_backfill_row(t);
	atomic_store(&t->est_rows, 8);
	atomic_store(&t->bf_state, SL_OPS_BF_RUNNING);
	sl_ops_set_state(s, SL_OPS_STREAMING);
	sl_ops_flushed(s, 3000, true, 0);      /* 3 ms */
	sl_ops_flushed(s, 2000000, false, 0);  /* 2 s */
	pthread_mutex_lock(&s->mu);
	s->has_sample = true;
	s->sample.ok = true;
	s->sample.exists = true;
	s->sample.active = true;
	s->sample.hold = SL_HOLD_KEPT;
	snprintf(s->sample.hold_word, sizeof s->sample.hold_word, "reserved");
	s->sample.hold_metric = "sluice_slot_wal_status";
	s->sample.hold_label = "wal_status";
	s->sample.hold_help = "1 with the slot's wal_status.";
	s->sample.lag_bytes = 4096;
	s->sample.retained_bytes = 81920;
	s->sample.safe_bytes = -1;
	s->sample.time_to_purge_s = -1;
	s->alerts[SL_AL_LAG_WARNING].firing = true;
	pthread_mutex_unlock(&s->mu);
	atomic_store(&s->date_clamps, 3);
	{
		struct sl_ops_source_counts c = { .skipped = 5, .clamps = 1, .nan_nulls = 2 };
		sl_ops_source_counts(s, &c);
		sl_ops_source_run_end(s);
		c.skipped = 2;
		sl_ops_source_counts(s, &c);
	}

	sl_buf_init(&b, 0);
	assert_int_equal(sl_ops_render(ops, &b), 0);
	check_grammar(b.data);
	assert_true(has_line(b.data, "# TYPE sluice_changes_total counter"));
	assert_true(has_line(b.data, "sluice_changes_total{stream=\"orders\",table=\"public.order\\\"s\",op=\"insert\"} 7"));
	assert_true(has_line(b.data, "sluice_changes_total{stream=\"orders\",table=\"public.order\\\"s\",op=\"update\"} 3"));
	assert_true(has_line(b.data, "sluice_changes_total{stream=\"orders\",table=\"public.order\\\"s\",op=\"delete\"} 1"));
	assert_true(has_line(b.data, "sluice_changes_total{stream=\"orders\",table=\"public.order\\\"s\",op=\"truncate\"} 0"));
	assert_true(has_line(b.data, "sluice_backfill_rows_total{stream=\"orders\",table=\"public.order\\\"s\"} 4"));
	assert_true(has_line(b.data, "sluice_backfill_rows_estimated{stream=\"orders\",table=\"public.order\\\"s\"} 8"));
	assert_true(has_line(b.data, "sluice_backfill_progress_ratio{stream=\"orders\",table=\"public.order\\\"s\"} 0.500000"));
	assert_true(has_line(b.data, "sluice_stream_state{stream=\"orders\",state=\"streaming\"} 1"));
	assert_true(has_line(b.data, "sluice_stream_state{stream=\"orders\",state=\"retrying\"} 0"));
	assert_true(has_line(b.data, "sluice_source_lag_bytes{stream=\"orders\"} 4096"));
	assert_true(has_line(b.data, "sluice_slot_retained_wal_bytes{stream=\"orders\"} 81920"));
	assert_true(has_line(b.data, "sluice_slot_wal_status{stream=\"orders\",wal_status=\"reserved\"} 1"));
	assert_null(strstr(b.data, "sluice_slot_safe_wal_bytes{"));  /* unknown: no sample */
	/* the histogram: cumulative buckets, sum and count */
	assert_true(has_line(b.data, "# TYPE sluice_sink_flush_seconds histogram"));
	assert_true(has_line(b.data, "sluice_sink_flush_seconds_bucket{stream=\"orders\",le=\"0.001\"} 0"));
	assert_true(has_line(b.data, "sluice_sink_flush_seconds_bucket{stream=\"orders\",le=\"0.005\"} 1"));
	assert_true(has_line(b.data, "sluice_sink_flush_seconds_bucket{stream=\"orders\",le=\"1\"} 1"));
	assert_true(has_line(b.data, "sluice_sink_flush_seconds_bucket{stream=\"orders\",le=\"5\"} 2"));
	assert_true(has_line(b.data, "sluice_sink_flush_seconds_bucket{stream=\"orders\",le=\"+Inf\"} 2"));
	assert_true(has_line(b.data, "sluice_sink_flush_seconds_sum{stream=\"orders\"} 2.003000"));
	assert_true(has_line(b.data, "sluice_sink_flush_seconds_count{stream=\"orders\"} 2"));
	assert_true(has_line(b.data, "sluice_skipped_changes_total{stream=\"orders\"} 7"));
	assert_true(has_line(b.data, "sluice_timestamp_clamps_total{stream=\"orders\"} 2"));
	assert_true(has_line(b.data, "sluice_decimal_nan_nulls_total{stream=\"orders\"} 4"));
	assert_true(has_line(b.data, "sluice_alert_firing{stream=\"orders\",alert=\"lag_warning\"} 1"));
	assert_true(has_line(b.data, "sluice_alert_firing{stream=\"orders\",alert=\"wal_unreserved\"} 0"));
	assert_true(has_line(b.data, "sluice_dead_letter_total{stream=\"orders\"} 0"));
	assert_true(has_line(b.data, "# TYPE sluice_date_clamps_total counter"));
	assert_true(has_line(b.data, "sluice_date_clamps_total{stream=\"orders\"} 3"));
	assert_true(has_line(b.data, "sluice_webhook_sent_total 0"));
	sl_buf_free(&b);
	sl_ops_free(ops);
}

static void test_health(void **state)
{
	struct sl_ops *ops = sl_ops_new();
	struct sl_ops_stream *a = sl_ops_stream_add(ops, "a"), *b = sl_ops_stream_add(ops, "b");
	struct sl_buf body;

	(void)state;
	sl_ops_set_state(a, SL_OPS_STREAMING);
	sl_ops_set_state(b, SL_OPS_BACKFILLING);
	sl_buf_init(&body, 0);
	assert_int_equal(sl_ops_health(ops, &body), 200);
	assert_string_equal(body.data, "stream a: streaming\nstream b: backfilling\n");
	sl_buf_reset(&body);
	/* a warning does not make it unhealthy; a critical alert does */
	a->alerts[SL_AL_LAG_WARNING].firing = true;
	assert_int_equal(sl_ops_health(ops, &body), 200);
	sl_buf_reset(&body);
	a->alerts[SL_AL_LAG_CRITICAL].firing = true;
	snprintf(a->alerts[SL_AL_LAG_CRITICAL].message, sizeof a->alerts[0].message, "lag big");
	assert_int_equal(sl_ops_health(ops, &body), 503);
	assert_string_equal(body.data, "stream a: streaming; critical alert lag_critical: lag big [unhealthy]\n"
			    "stream b: backfilling\n");
	sl_buf_reset(&body);
	a->alerts[SL_AL_LAG_CRITICAL].firing = false;
	sl_ops_failed(b, "connection lost", true);
	assert_int_equal(sl_ops_health(ops, &body), 503);
	assert_string_equal(body.data, "stream a: streaming\n"
			    "stream b: retrying (last error: connection lost) [unhealthy]\n");
	sl_buf_free(&body);
	sl_ops_free(ops);
}

static void test_webhook_payload(void **state)
{
	struct sl_alert_event ev = {
		.stream = "orders", .id = SL_AL_LAG_CRITICAL, .firing = true, .message = "lag 5 bytes",
		.starts_us = INT64_C(1700000000123456), .host = "db1",
	};
	char *text;
	json_t *j, *a;

	(void)state;
	text = sl_webhook_payload(&ev);
	assert_non_null(text);
	j = json_loads(text, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "text")),
			    "[FIRING] sluice stream orders: lag_critical fires (critical): lag 5 bytes");
	assert_string_equal(json_string_value(json_object_get(j, "version")), "4");
	assert_string_equal(json_string_value(json_object_get(j, "status")), "firing");
	a = json_array_get(json_object_get(j, "alerts"), 0);
	assert_non_null(a);
	assert_string_equal(json_string_value(json_object_get(a, "status")), "firing");
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "labels"), "alertname")), "lag_critical");
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "labels"), "stream")), "orders");
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "labels"), "severity")), "critical");
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "labels"), "instance")), "db1");
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "annotations"), "description")),
			    "lag 5 bytes");
	/* 1700000000 is 2023-11-14T22:13:20Z */
	assert_string_equal(json_string_value(json_object_get(a, "startsAt")), "2023-11-14T22:13:20.123456Z");
	assert_string_equal(json_string_value(json_object_get(a, "endsAt")), "0001-01-01T00:00:00Z");
	json_decref(j);
	free(text);

	ev.firing = false;
	ev.ends_us = INT64_C(1700000060000000);
	text = sl_webhook_payload(&ev);
	j = json_loads(text, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(j, "status")), "resolved");
	assert_string_equal(json_string_value(json_object_get(j, "text")),
			    "[RESOLVED] sluice stream orders: lag_critical resolved (critical): lag 5 bytes");
	a = json_array_get(json_object_get(j, "alerts"), 0);
	assert_string_equal(json_string_value(json_object_get(a, "endsAt")), "2023-11-14T22:14:20.000000Z");
	json_decref(j);
	free(text);
}

/* A resolution says what the figure is now and that it is back under the
 * threshold, not the figure that fired it. */
static void test_resolved_gives_the_figure_now(void **state)
{
	struct sl_alert_inputs in = quiet_inputs();
	struct sl_alert_transition tr[SL_AL_COUNT];
	struct sl_alert al[SL_AL_COUNT] = { { 0 } };
	const char *crit = NULL;
	int n;

	(void)state;
	in.lag_bytes = INT64_C(171307072) * 16;
	assert_int_equal(eval(al, &in, 1, tr), 2);   /* lag_warning and lag_critical */
	in.lag_bytes = 1048576;
	assert_int_equal(eval(al, &in, 2, tr), 0);
	assert_int_equal(eval(al, &in, 3, tr), 0);
	n = eval(al, &in, 4, tr);
	assert_int_equal(n, 2);
	for (int i = 0; i < n; i++) {
		assert_false(tr[i].firing);
		if (tr[i].id == SL_AL_LAG_CRITICAL)
			crit = tr[i].message;
	}
	assert_non_null(crit);
	assert_string_equal(crit, "lag 1048576 bytes (the source's log head minus the confirmed position), "
			    "back under lag_critical_bytes 2147483648");
	/* and the next firing says its own figure again */
	in.lag_bytes = INT64_C(3) << 30;
	assert_int_equal(eval(al, &in, 5, tr), 2);
	assert_string_equal(al[SL_AL_LAG_CRITICAL].message, "lag 3221225472 bytes (the source's log head minus the "
			    "confirmed position) >= lag_critical_bytes 2147483648");
	/* a condition without a figure: the source is reachable again */
	memset(al, 0, sizeof al);
	in = quiet_inputs();
	in.probe_ok = false;
	in.probe_error = "connection refused";
	eval(al, &in, 6, tr);
	assert_int_equal(eval(al, &in, 7, tr), 1);
	in = quiet_inputs();
	eval(al, &in, 8, tr);
	eval(al, &in, 9, tr);
	assert_int_equal(eval(al, &in, 10, tr), 1);
	assert_int_equal(tr[0].id, SL_AL_SOURCE_UNREACHABLE);
	assert_string_equal(tr[0].message, "the probe reaches the source");
}

/* Freshness is judged against the source's activity: a stream that has
 * caught up with its source is fresh however old its last change is (an
 * agent started after a pause, a stream that recovered). */
static void test_freshness_after_catching_up(void **state)
{
	struct sl_alert_inputs in = quiet_inputs();
	struct sl_alert_transition tr[SL_AL_COUNT];
	struct sl_alert al[SL_AL_COUNT] = { { 0 } };
	int n;

	(void)state;
	in.heartbeats = true;
	in.freshness_s = 7200;      /* the last change before a two-hour pause */
	in.caught_up_s = 2;         /* but everything the source has is durable */
	assert_int_equal(eval(al, &in, 1, tr), 0);
	assert_false(al[SL_AL_FRESHNESS].firing);
	/* not caught up yet (the first probe of a run): no verdict from the caught-up time */
	in.caught_up_s = -1;
	in.freshness_s = 100;
	assert_int_equal(eval(al, &in, 2, tr), 0);
	/* stuck since it last caught up */
	in.caught_up_s = 301;
	in.freshness_s = 7501;
	n = eval(al, &in, 3, tr);
	assert_int_equal(n, 1);
	assert_int_equal(tr[0].id, SL_AL_FRESHNESS);
	assert_string_equal(tr[0].message, "the last durable change or heartbeat is 7501 s old (the stream last caught "
			    "up with the source 301 s ago) >= freshness_warn_seconds 300");
	/* without heartbeats: a stalled position that caught up lately is fresh */
	memset(al, 0, sizeof al);
	in.heartbeats = false;
	in.stalled_s = 400;
	in.caught_up_s = 10;
	assert_int_equal(eval(al, &in, 4, tr), 0);
	in.caught_up_s = -1;
	assert_int_equal(eval(al, &in, 5, tr), 1);
	assert_int_equal(tr[0].id, SL_AL_FRESHNESS);
}

/* stream_down's clock measures the current outage: a run that went well
 * for SL_OPS_HEALTHY_S in between starts it again. */
static void test_down_clock(void **state)
{
	struct sl_ops *ops = sl_ops_new();
	struct sl_ops_stream *s = sl_ops_stream_add(ops, "o");
	const int64_t S = 1000000;

	(void)state;
	sl_ops_set_state_at(s, SL_OPS_STARTING, 1 * S);
	sl_ops_failed_at(s, "connection lost", true, 2 * S);
	assert_int_equal(sl_ops_down_seconds(s, 5 * S, 60), 3);
	sl_ops_set_state_at(s, SL_OPS_STARTING, 10 * S);
	assert_int_equal(sl_ops_down_seconds(s, 12 * S, 60), 10);
	/* streams for 5 s: still the same outage */
	sl_ops_set_state_at(s, SL_OPS_STREAMING, 12 * S);
	assert_int_equal(sl_ops_down_seconds(s, 14 * S, 60), -1);
	sl_ops_failed_at(s, "connection lost", true, 17 * S);
	assert_int_equal(sl_ops_down_seconds(s, 19 * S, 60), 17);
	/* streams for 170 s, with no probe looking meanwhile: a new outage */
	sl_ops_set_state_at(s, SL_OPS_STARTING, 20 * S);
	sl_ops_set_state_at(s, SL_OPS_STREAMING, 21 * S);
	sl_ops_failed_at(s, "server closed the connection", true, 191 * S);
	assert_int_equal(sl_ops_down_seconds(s, 193 * S, 60), 2);
	/* a stream that failed for good */
	sl_ops_failed_at(s, "slot lost", false, 194 * S);
	assert_int_equal(sl_ops_down_seconds(s, 195 * S, 60), 60);
	sl_ops_free(ops);
}

static void fake_queue(void *q, uint64_t *bytes, uint64_t *peak)
{
	*bytes = *(uint64_t *)q;
	*peak = 1 << 20;
}

/* Changes count once flushed; the rest are re-reads.  The queue is
 * sampled when read.  Liveness from timestamps. */
static void test_counts_queue_and_liveness(void **state)
{
	struct sl_ops *ops = sl_ops_new();
	struct sl_ops_stream *s = sl_ops_stream_add(ops, "o");
	struct sl_ops_table *t = sl_ops_table(s, "public", "t");
	uint64_t qb = 262144, bytes, peak;
	const int64_t S = 1000000;
	struct sl_buf why;

	(void)state;
	for (int i = 0; i < 3; i++)
		sl_ops_count_change(t, SL_OP_INSERT);
	sl_ops_changes_flight(s);                 /* a flush starts with those 3 */
	sl_ops_count_change(t, SL_OP_DELETE);     /* written meanwhile */
	sl_ops_changes_durable(s, false);         /* the flush in flight succeeded */
	assert_int_equal(atomic_load(&t->changes[SL_OP_INSERT]), 3);
	assert_int_equal(atomic_load(&t->changes[SL_OP_DELETE]), 0);
	sl_ops_count_change(t, SL_OP_INSERT);
	sl_ops_changes_discard(s);                /* the run failed before the next flush */
	assert_int_equal(atomic_load(&t->changes[SL_OP_INSERT]), 3);
	assert_int_equal(atomic_load(&t->changes[SL_OP_DELETE]), 0);
	assert_int_equal(atomic_load(&s->changes_reread), 2);
	sl_ops_count_change(t, SL_OP_DELETE);
	sl_ops_changes_durable(s, true);
	assert_int_equal(atomic_load(&t->changes[SL_OP_DELETE]), 1);

	sl_ops_queue_attach(s, &qb, fake_queue);
	sl_ops_queue_read(s, &bytes, &peak);
	assert_int_equal(bytes, 262144);
	qb = 0;                                   /* drained, with nothing arriving */
	sl_ops_queue_read(s, &bytes, &peak);
	assert_int_equal(bytes, 0);
	assert_int_equal(peak, 1 << 20);
	qb = 524288;
	sl_ops_queue_attach(s, NULL, NULL);       /* the run ends */
	sl_ops_queue_read(s, &bytes, &peak);
	assert_int_equal(bytes, 0);

	sl_buf_init(&why, 0);
	ops->started_us = 100 * S;
	atomic_store(&s->probe_on, true);
	assert_true(sl_ops_live(ops, 110 * S, 15 * S, 10 * S, NULL));
	assert_false(sl_ops_live(ops, 116 * S, 15 * S, 10 * S, &why));
	assert_string_equal(why.data, "stream o: probe not passed yet (16 s) [stuck]\n");
	atomic_store(&s->probe_pass_us, 115 * S);
	atomic_store(&s->writer_progress_us, 112 * S);
	assert_true(sl_ops_live(ops, 120 * S, 15 * S, 10 * S, NULL));
	sl_buf_reset(&why);
	assert_false(sl_ops_live(ops, 123 * S, 15 * S, 10 * S, &why));
	assert_string_equal(why.data, "stream o: probe passed 8 s ago, writer stepped 11 s ago [stuck]\n");
	atomic_store(&s->writer_progress_us, 0);  /* no writer runs (retrying) */
	assert_true(sl_ops_live(ops, 123 * S, 15 * S, 10 * S, NULL));
	sl_buf_free(&why);
	sl_ops_free(ops);
}

/* systemd's notify protocol: nothing without NOTIFY_SOCKET, an abstract
 * "@name" and a path both reach their socket, WATCHDOG_PID must be ours. */
static void test_sd_notify(void **state)
{
	char err[256], name[64], buf[64];
	struct sockaddr_un sa;
	int fd;
	ssize_t n;

	(void)state;
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(sl_sd_notify("READY=1", err, sizeof err), 0);
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	assert_int_equal(sl_sd_notify("READY=1", err, sizeof err), -1);
	assert_string_equal(err, "NOTIFY_SOCKET=relative/path is not a unix socket path or an abstract \"@\" name");

	snprintf(name, sizeof name, "@sluice-test-ops-%ld", (long)getpid());
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, name + 1, strlen(name) - 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
									  strlen(name))), 0);
	setenv("NOTIFY_SOCKET", name, 1);
	assert_int_equal(sl_sd_notify("WATCHDOG=1", err, sizeof err), 1);
	n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
	assert_int_equal(n, 10);
	buf[n] = '\0';
	assert_string_equal(buf, "WATCHDOG=1");
	close(fd);
	unsetenv("NOTIFY_SOCKET");

	unsetenv("WATCHDOG_PID");
	setenv("WATCHDOG_USEC", "2000000", 1);
	assert_int_equal(sl_sd_watchdog_usec(), 2000000);
	snprintf(buf, sizeof buf, "%ld", (long)getpid());
	setenv("WATCHDOG_PID", buf, 1);
	assert_int_equal(sl_sd_watchdog_usec(), 2000000);
	setenv("WATCHDOG_PID", "1", 1);          /* meant for another process */
	assert_int_equal(sl_sd_watchdog_usec(), 0);
	unsetenv("WATCHDOG_PID");
	setenv("WATCHDOG_USEC", "soon", 1);
	assert_int_equal(sl_sd_watchdog_usec(), 0);
	unsetenv("WATCHDOG_USEC");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threshold_band),
		cmocka_unit_test(test_step_fires_once_and_resolves_after_three_clears),
		cmocka_unit_test(test_step_fire_after_two),
		cmocka_unit_test(test_evaluate_lag_hysteresis),
		cmocka_unit_test(test_evaluate_slot_states),
		cmocka_unit_test(test_evaluate_freshness_and_down),
		cmocka_unit_test(test_escape_label),
		cmocka_unit_test(test_render),
		cmocka_unit_test(test_health),
		cmocka_unit_test(test_webhook_payload),
		cmocka_unit_test(test_resolved_gives_the_figure_now),
		cmocka_unit_test(test_freshness_after_catching_up),
		cmocka_unit_test(test_down_clock),
		cmocka_unit_test(test_counts_queue_and_liveness),
		cmocka_unit_test(test_sd_notify),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
