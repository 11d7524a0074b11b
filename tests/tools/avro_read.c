/*
 * tests/tools/avro_read.c: reads Avro container files with avro-c, the second
 * reader the integration tests use beside Python's.  For each FILE it prints
 * one line: "FILE", then "<TAB>UUID<TAB>CSN" per record, then "<TAB>COUNT",
 * where uuid and source_metadata.change_sequence_number are read through
 * avro-c's value API.
 * Exits 1 if any file cannot be read to its end.
 */
#include <avro.h>
#include <stdio.h>
#include <string.h>

static int get_string(avro_value_t *rec, const char *name, const char **out)
{
	avro_value_t v;
	size_t len;

	if (avro_value_get_by_name(rec, name, &v, NULL) != 0)
		return -1;
	return avro_value_get_string(&v, out, &len);
}

static int read_file(const char *path)
{
	avro_file_reader_t r;
	avro_schema_t schema;
	avro_value_iface_t *iface;
	avro_value_t rec;
	long count = 0;
	int rc = 0, st;

	if (avro_file_reader(path, &r) != 0) {
		fprintf(stderr, "%s: %s\n", path, avro_strerror());
		return -1;
	}
	schema = avro_file_reader_get_writer_schema(r);
	iface = avro_generic_class_from_schema(schema);
	avro_generic_value_new(iface, &rec);
	printf("%s", path);
	while ((st = avro_file_reader_read_value(r, &rec)) == 0) {
		avro_value_t md;
		const char *uuid = NULL, *csn = NULL;
		if (get_string(&rec, "uuid", &uuid) != 0 ||
		    avro_value_get_by_name(&rec, "source_metadata", &md, NULL) != 0 ||
		    get_string(&md, "change_sequence_number", &csn) != 0) {
			fprintf(stderr, "%s: record %ld lacks uuid or change_sequence_number\n", path, count);
			rc = -1;
			break;
		}
		printf("\t%s\t%s", uuid, csn);
		count++;
	}
	if (st != 0 && st != EOF) {
		fprintf(stderr, "%s: record %ld: %s\n", path, count, avro_strerror());
		rc = -1;
	}
	printf("\t%ld\n", count);
	avro_value_decref(&rec);
	avro_value_iface_decref(iface);
	avro_schema_decref(schema);
	avro_file_reader_close(r);
	return rc;
}

int main(int argc, char **argv)
{
	int rc = 0;

	for (int i = 1; i < argc; i++)
		if (read_file(argv[i]) < 0)
			rc = 1;
	return rc;
}
