/*
 * tests/fuzz/fuzz.h: what the libFuzzer targets of tests/fuzz share (see
 * doc/testing.md, "Fuzzing"): the entry point libFuzzer calls, the split of
 * an input into length-prefixed frames, and a file for the decoders that
 * read a path.
 */
#ifndef SLUICE_TESTS_FUZZ_FUZZ_H
#define SLUICE_TESTS_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next frame of *p (< end): a big-endian u16 length, then that many
 * bytes (fewer when the input ends first).  Returns 1 with *frame and *len,
 * 0 at the end of the input. */
int fuzz_next_frame(const uint8_t **p, const uint8_t *end, const uint8_t **frame, size_t *len);

/* Writes data to this process's scratch file (made on first use, removed at
 * exit) and returns its path, or NULL. */
const char *fuzz_file(const uint8_t *data, size_t size);

#endif
