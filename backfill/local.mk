# backfill: the orchestration of backfills (snapshot plans, groups, chunks,
# watermarks, re-backfills while streaming, progress).  The sources keep
# their readers; this folder decides what is read when, and in which order
# its rows reach the pipeline.  Linked into the agent's library.
libslagent_a_SOURCES += %D%/backfill.c %D%/backfill.h %D%/backfill_chunk.c %D%/backfill_chunk.h \
	%D%/rebackfill.c %D%/rebackfill.h
