/* ckpt_fuzz.c - libFuzzer harness for the checkpoint parser (not part of
 * make test). run_checkpoint_check() is a pure function of the bytes: it
 * must answer 0 or -SL_EFORMAT for any input, never crash or read out of
 * bounds. The checksum is skipped so the fuzzer reaches the fields; seed
 * the corpus with tests/fixtures/ckpt/[a-z]*.ckpt.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE \
 *     -Iengine $(pkg-config --cflags openblas) tests/fuzz/ckpt_fuzz.c \
 *     engine/[a-z]*.c engine/rules/[a-z]*.c -o build/ckpt_fuzz \
 *     $(pkg-config --libs openblas zlib) -lm -pthread
 *   mkdir -p build/corpus && cp tests/fixtures/ckpt/[a-z]*.ckpt build/corpus/
 *   build/ckpt_fuzz -max_total_time=60 build/corpus */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "run.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[SL_ERR_LEN];
	int rc = run_checkpoint_check(data, size, 1, err);
	if (rc != 0 && rc != -SL_EFORMAT && rc != -SL_ENOMEM)
		abort();
	run_config cfg;
	rc = run_checkpoint_config(data, size, &cfg, err);
	if (rc != 0 && rc != -SL_EFORMAT)
		abort();
	return 0;
}
