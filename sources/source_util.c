/*
 * sources/source_util.c: helpers every source kind shares (see the end of
 * source.h): the recovery command that messages name, and the rules of the
 * stream's table selection that do not depend on the database.
 */
#include "sources/source.h"

#include "common/buf.h"

int sl_source_backfill_command(struct sl_buf *b, const struct sl_source_stream *st)
{
	sl_buf_puts(b, "sluice backfill -c ");
	sl_buf_put_shell_word(b, st->config_path ? st->config_path : "FILE");
	sl_buf_puts(b, " --stream ");
	return sl_buf_put_shell_word(b, st->name);
}
