/*
 * agent/lock.h: one agent at a time per stream and state_dir.
 *
 * A stream's run holds an exclusive flock() on "<state_dir>/<stream>.lock"
 * for as long as it runs (across its retries), and `sluice backfill` holds it
 * while it edits the checkpoint.  The holder writes its pid into the file, so
 * that whoever is refused can name it.  The lock goes with the process: a
 * crash or kill -9 releases it, and the file itself is left in place (removing
 * a lock file races with the next taker).
 */
#ifndef SLUICE_AGENT_LOCK_H
#define SLUICE_AGENT_LOCK_H

#include <stddef.h>

struct sl_stream_lock {
	int fd;                   /* -1: not held */
	char *path;               /* owned */
};

/* Takes the stream's lock without waiting (creating state_dir if needed).
 * Returns SL_OK; SL_ECONFIG when another process holds it, with a message
 * in err that names the lock file and the holder's pid (the caller adds
 * what to do); SL_EFAIL when the file cannot be created or locked.  On
 * failure lk holds nothing. */
int sl_stream_lock_take(struct sl_stream_lock *lk, const char *state_dir, const char *stream,
			char *err, size_t errlen);
/* Releases the lock (nothing when not held). */
void sl_stream_lock_release(struct sl_stream_lock *lk);

/* The pid written in "<state_dir>/<stream>.lock" when a live process holds
 * that lock, else 0.  Takes no lock (the file's pid is checked with kill 0),
 * so that `status` never gets in an agent's way. */
long sl_stream_lock_holder(const char *state_dir, const char *stream);

#endif
