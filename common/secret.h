/*
 * common/secret.h: values that may hold a secret: ${NAME} expansion of
 * configuration values, and passwords read from an environment variable
 * (password_env) or from a file (password_file).
 *
 * Every string these functions return is malloc'd, belongs to the caller,
 * and may hold a secret: free it with sl_secret_free(), which wipes it first.
 * Their messages never contain a secret: they name the key and quote only the
 * text the caller passes as `shown` (see below), never a value read from the
 * environment or from a file.  Nothing here exits or logs.
 */
#ifndef SLUICE_COMMON_SECRET_H
#define SLUICE_COMMON_SECRET_H

#include <stdbool.h>
#include <stddef.h>

/* A password file larger than this is a mistake, not a password. */
#define SL_SECRET_FILE_MAX 65536

/* Expands ${NAME} (NAME is [A-Za-z_][A-Za-z0-9_]*) to the value of the
 * environment variable NAME, and $$ to "$", in the value of key.  Any other
 * "$", and an unset variable, are errors; a variable that is set but empty
 * expands to nothing.  Returns 0 with the result in *out (free it with
 * sl_secret_free(): it may hold whatever the environment held) and
 * *expanded telling whether anything came from the environment; or -1 with
 * a message in err that names key and the variable, never a value. */
int sl_env_expand(const char *in, const char *key, char **out, bool *expanded, char *err,
		  size_t errlen);

/* key = VAR (password_env): the secret is the value of environment variable
 * var.  Unset or empty is an error.  shown is how messages name the
 * variable: var itself when it was written in the file, or the text as
 * written (before ${NAME} expansion) when var came from the environment and
 * might hold anything.  Returns 0 with the secret in *out (free with
 * sl_secret_free()), or -1 with a message in err. */
int sl_secret_from_env(const char *key, const char *var, const char *shown, char **out, char *err,
		       size_t errlen);

/* key = PATH (password_file): the secret is the content of the file at
 * path, without one trailing newline ("\n" or "\r\n").  The file must be a
 * regular file owned by the effective user with no group or other
 * permission bits (libpq's rule for .pgpass, except that this refuses where
 * libpq warns), at most SL_SECRET_FILE_MAX bytes, with no NUL byte, and not
 * empty once the newline is gone.  A FIFO does not block.  shown names the
 * file in messages (see sl_secret_from_env()).  Returns 0 with the secret in
 * *out (free with sl_secret_free()), or -1 with a message in err. */
int sl_secret_from_file(const char *key, const char *path, const char *shown, char **out,
			char *err, size_t errlen);

/* Wipes the string s and frees it.  NULL is fine. */
void sl_secret_free(char *s);

#endif
