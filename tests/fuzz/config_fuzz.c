/* config_fuzz.c - libFuzzer harness for the run object (config_parse:
 * JSON text to a run_config over the defaults, its schedule included). Any
 * input is accepted or refused with a message; an accepted run object
 * written back (config_to_json) must parse again to the same object, since
 * logs and checkpoints store it that way. */
#include <string.h>

#include "config_json.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[SL_ERR_LEN] = "";
	run_config cfg;
	config_defaults(&cfg);
	int rc = config_parse((const char *)data, size, &cfg, err);
	FUZZ_EXPECT(rc == 0 || rc == -SL_EINVAL || rc == -SL_ENOMEM, "rc %d", rc);
	if (rc < 0) {
		FUZZ_EXPECT(err[0], "an error without a message (rc %d)", rc);
		return 0;
	}
	json_t *out = config_to_json(&cfg);
	run_config again;
	config_defaults(&again);
	rc = config_apply_json(out, &again, err);
	FUZZ_EXPECT(rc == 0, "the run object written back is refused: %s", err);
	json_t *out2 = config_to_json(&again);
	FUZZ_EXPECT(json_equal(out, out2), "the run object changes when read back");
	json_decref(out);
	json_decref(out2);
	return 0;
}
