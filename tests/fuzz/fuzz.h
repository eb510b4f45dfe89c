/* fuzz.h - what the libFuzzer harnesses in tests/fuzz/ share. A harness is
 * tests/fuzz/NAME_fuzz.c defining LLVMFuzzerTestOneInput; `make fuzz` and
 * tests/integration/libfuzz.sh find it by that name, and run it on a copy
 * of tests/fuzz/corpus/NAME/ (seeds) after replaying tests/fuzz/regress/NAME/
 * (inputs that once crashed it). A parser's contract is checked with
 * FUZZ_EXPECT: a failed expectation aborts, which libFuzzer reports as a
 * crash with the input that caused it. */
#ifndef SL_FUZZ_H
#define SL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_EXPECT(cond, ...)                                              \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "%s:%d: expected %s: ", __FILE__,   \
				__LINE__, #cond);                           \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			abort();                                            \
		}                                                           \
	} while (0)

/* A change accepted from JSON must read back from the log as the same
 * change: cmd_to_json's "set" parses (cmd_from_json, against the same run)
 * to a change that writes the same record. A change that is only a
 * checkpoint is logged as a checkpoint record instead, so it is skipped. */
static inline void
fuzz_change_round_trip(const run_cmd *cmd, const run_config *cur)
{
	char err[SL_ERR_LEN] = "";
	if (!(cmd->fields & ~(unsigned)CMD_CHECKPOINT))
		return;
	json_t *rec = cmd_to_json(cmd);
	run_cmd back;
	int rc = cmd_from_json(json_object_get(rec, "set"), cmd->worker, cur, "", &back, err);
	FUZZ_EXPECT(rc == 0, "a change written to the log is refused: %s", err);
	memcpy(back.origin, cmd->origin, sizeof(back.origin));
	json_t *rec2 = cmd_to_json(&back);
	FUZZ_EXPECT(json_equal(rec, rec2), "a change differs when read back from the log");
	json_decref(rec);
	json_decref(rec2);
}

#endif
