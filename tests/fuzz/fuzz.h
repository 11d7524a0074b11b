/*
 * tests/fuzz/fuzz.h: what the libFuzzer targets of tests/fuzz share (see
 * doc/testing.md, "Fuzzing"): the entry point libFuzzer calls, the split of
 * an input into length-prefixed frames, and a stream over the input for
 * the decoders that read a file.
 */
#ifndef SLUICE_TESTS_FUZZ_FUZZ_H
#define SLUICE_TESTS_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* libFuzzer's once-per-process setup (fuzz_util.c, for every target): only
 * errors are logged. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The next frame of *p (< end): a big-endian u16 length, then that many
 * bytes (fewer when the input ends first).  Returns 1 with *frame and *len,
 * 0 at the end of the input. */
int fuzz_next_frame(const uint8_t **p, const uint8_t *end, const uint8_t **frame, size_t *len);

/* A stream that reads data (size bytes, read in place: it must outlive the
 * stream), for the readers that take a file's stream; NULL when out of
 * memory.  No file is written: a scratch file written and read back per
 * input is what held these targets to a few hundred inputs a second. */
FILE *fuzz_stream(const uint8_t *data, size_t size);

#endif
