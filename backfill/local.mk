# backfill
