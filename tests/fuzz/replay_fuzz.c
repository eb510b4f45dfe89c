/* replay_fuzz.c - libFuzzer harness for a run's log read back as a run
 * object and a schedule (runlog_replay, `stalelab run --replay LOG`): JSON
 * lines, a killed writer's torn last line, several runs in one file. The
 * run object it builds must be an object whose schedule parses. */
#include "config_json.h"
#include "fuzz.h"
#include "runlog.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	char err[SL_ERR_LEN] = "";
	json_t *conf = NULL;
	runlog_replay_info info;
	int want = data[0] % 3; /* 0: the last run */
	int rc = runlog_replay((const char *)data + 1, size - 1, want, &conf, &info, err);
	FUZZ_EXPECT(rc == 0 || (rc < 0 && err[0]), "rc %d without a message", rc);
	if (rc < 0) {
		FUZZ_EXPECT(!conf, "a refused log leaves a run object");
		return 0;
	}
	FUZZ_EXPECT(json_is_object(conf), "the run object is not an object");
	FUZZ_EXPECT(info.run >= 1 && info.run <= info.runs, "run %d of %d", info.run, info.runs);
	run_config cfg;
	config_defaults(&cfg);
	if (config_apply_json(conf, &cfg, err) == 0) {
		run_sched *s;
		int n;
		if (sched_from_json(json_object_get(conf, "schedule"), &cfg, &s, &n, err) == 0)
			free(s);
	}
	json_decref(conf);
	return 0;
}
