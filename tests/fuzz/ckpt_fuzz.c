/* ckpt_fuzz.c - libFuzzer harness for the checkpoint parser.
 * run_checkpoint_check() and run_checkpoint_config() are pure functions of
 * the bytes: they must answer 0 or -SL_EFORMAT for any input, never crash
 * or read out of bounds. The checksum is skipped so the fuzzer reaches the
 * fields. */
#include "fuzz.h"
#include "run.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[SL_ERR_LEN];
	int rc = run_checkpoint_check(data, size, 1, err);
	FUZZ_EXPECT(rc == 0 || rc == -SL_EFORMAT || rc == -SL_ENOMEM, "check: rc %d", rc);
	run_config cfg;
	rc = run_checkpoint_config(data, size, &cfg, err);
	FUZZ_EXPECT(rc == 0 || rc == -SL_EFORMAT, "config: rc %d", rc);
	return 0;
}
