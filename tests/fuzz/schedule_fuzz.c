/* schedule_fuzz.c - libFuzzer harness for a run object's "schedule" array
 * (sched_from_json: timed changes {"at": {"v"|"t"}, "worker"?, "set"}),
 * parsed against the default run with 4 workers. Each entry accepted must
 * read back from the log as the same change. */
#include <math.h>
#include <string.h>

#include "config_json.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[SL_ERR_LEN] = "";
	json_t *arr = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	if (!arr)
		return 0;
	run_config cur;
	config_defaults(&cur);
	cur.workers = 4;
	run_sched *s;
	int n;
	int rc = sched_from_json(arr, &cur, &s, &n, err);
	FUZZ_EXPECT(rc == 0 || (rc < 0 && err[0]), "rc %d without a message", rc);
	if (rc == 0) {
		FUZZ_EXPECT((size_t)n == (json_is_array(arr) ? json_array_size(arr) : 0),
			    "%d entries", n);
		for (int i = 0; i < n; i++) {
			FUZZ_EXPECT(s[i].by_version || (isfinite(s[i].t) && s[i].t >= 0),
				    "entry %d at t %g", i, s[i].t);
			fuzz_change_round_trip(&s[i].cmd, &cur);
		}
		free(s);
	}
	json_decref(arr);
	return 0;
}
