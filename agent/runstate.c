/*
 * agent/runstate.c: the wait file of a running stream (see runstate.h).
 */
#include "agent/runstate.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/util.h"

static char *wait_path(const char *state_dir, const char *stream)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s/%s.wait.json", state_dir, stream);
	return sl_buf_detach(&b);
}

int sl_runstate_wait_write(const char *state_dir, const char *stream, const struct sl_source_wait *w,
			   char *err, size_t errlen)
{
	char *path = wait_path(state_dir, stream), *text = NULL;
	json_t *root = json_object(), *bl = json_array();
	int64_t now = sl_now_us();
	int rc = -1;

	if (!path || !root || !bl) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < w->nblockers; i++) {
		const struct sl_source_blocker *b = &w->blockers[i];
		json_array_append_new(bl, json_pack("{s:I, s:o, s:s, s:s, s:s}", "pid", (json_int_t)b->pid,
						    "transaction_seconds",
						    b->xact_age_s >= 0 ? json_integer(b->xact_age_s) : json_null(),
						    "state", b->state, "user", b->user, "application", b->application));
	}
	json_object_set_new(root, "pid", json_integer((json_int_t)getpid()));
	json_object_set_new(root, "action", json_string(w->action));
	json_object_set_new(root, "detail", json_string(w->detail));
	json_object_set_new(root, "since_us", json_integer(now - w->waited_ms * 1000));
	json_object_set_new(root, "updated_us", json_integer(now));
	json_object_set_new(root, "blocked_by", bl);
	bl = NULL;
	if (!(text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = sl_write_file_atomic(path, text, strlen(text), err, errlen);
out:
	free(text);
	json_decref(bl);
	json_decref(root);
	free(path);
	return rc;
}

void sl_runstate_wait_clear(const char *state_dir, const char *stream)
{
	char *path = wait_path(state_dir, stream);

	if (path)
		unlink(path);
	free(path);
}

void *sl_runstate_wait_read(const char *state_dir, const char *stream)
{
	char *path = wait_path(state_dir, stream), *text = NULL, err[SL_ERRLEN];
	json_t *root = NULL, *out = NULL;
	json_int_t pid, since;

	if (!path || sl_read_file(path, &text, NULL, err, sizeof err) != 0)
		goto done;
	root = json_loads(text, 0, NULL);
	pid = json_integer_value(json_object_get(root, "pid"));
	since = json_integer_value(json_object_get(root, "since_us"));
	if (!json_is_object(root) || pid <= 0 || (kill((pid_t)pid, 0) < 0 && errno == ESRCH))
		goto done;  /* unreadable, or its agent is gone */
	out = json_pack("{s:O?, s:I, s:O?, s:O?, s:I}", "action", json_object_get(root, "action"),
			"waited_seconds", (json_int_t)((sl_now_us() - since) / 1000000),
			"detail", json_object_get(root, "detail"), "blocked_by", json_object_get(root, "blocked_by"),
			"agent_pid", pid);
done:
	json_decref(root);
	free(text);
	free(path);
	return out;
}

static char *run_path(const char *state_dir, const char *stream)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s/%s.run.json", state_dir, stream);
	return sl_buf_detach(&b);
}

int sl_runstate_run_write(const char *state_dir, const char *stream, const char *text, char *err, size_t errlen)
{
	char *path = run_path(state_dir, stream);
	int rc;

	if (!path) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rc = sl_write_file_atomic(path, text, strlen(text), err, errlen);
	free(path);
	return rc;
}

void *sl_runstate_run_read(const char *state_dir, const char *stream, bool *alive)
{
	char *path = run_path(state_dir, stream), *text = NULL, err[SL_ERRLEN];
	json_t *root = NULL;
	json_int_t pid;

	*alive = false;
	if (!path || sl_read_file(path, &text, NULL, err, sizeof err) != 0)
		goto done;
	root = json_loads(text, 0, NULL);
	if (!json_is_object(root)) {
		json_decref(root);
		root = NULL;
		goto done;
	}
	pid = json_integer_value(json_object_get(root, "pid"));
	*alive = pid > 0 && !(kill((pid_t)pid, 0) < 0 && errno == ESRCH);
done:
	free(text);
	free(path);
	return root;
}
