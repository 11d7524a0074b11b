# ops: the running agent's figures (metrics.c), their HTTP endpoint
# (http.c: /metrics, /healthz, /livez), the alerts (alerts.c), the lag and
# retention probe (probe.c), the alert webhook (webhook.c) and systemd's
# notify protocol with its watchdog (sdnotify.c).  Below the agent: it
# knows no source and no sink, only schema/ and common/.
noinst_LIBRARIES += libslops.a
libslops_a_SOURCES = %D%/metrics.c %D%/metrics.h %D%/alerts.c %D%/alerts.h \
	%D%/probe.c %D%/probe.h %D%/webhook.c %D%/webhook.h %D%/http.c %D%/http.h \
	%D%/sdnotify.c %D%/sdnotify.h
libslops_a_CPPFLAGS = $(AM_CPPFLAGS) $(MHD_CFLAGS) $(CURL_CFLAGS) $(JANSSON_CFLAGS)
OPS_LIBS = libslops.a $(MHD_LIBS) $(CURL_LIBS) $(JANSSON_LIBS) -lpthread
