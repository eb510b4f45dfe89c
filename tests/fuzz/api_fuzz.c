/* api_fuzz.c - libFuzzer harness for the bodies of the API's mutating
 * calls. The first byte picks the endpoint, the second the worker of a
 * PATCH /api/v1/workers/{id}; the rest is the body, parsed as the daemon
 * parses it (ctl_body_parse, then the endpoint's own check) against a run
 * of 4 workers. A change that is accepted must survive the trip through
 * the log: cmd_to_json's "set" parses back to the same change. */
#include <string.h>

#include "config_json.h"
#include "control.h"
#include "fuzz.h"

enum { EP_PATCH_RUN, EP_PATCH_WORKER, EP_PUT_WORKERS, EP_POST_RUN, EP_POST_CKPT, EP_N };

static void
change(json_t *set, int worker, const run_config *cur)
{
	char err[SL_ERR_LEN] = "";
	run_cmd cmd;
	int rc = cmd_from_json(set, worker, cur, "", &cmd, err);
	FUZZ_EXPECT(rc == 0 || (rc == -SL_EINVAL && err[0]), "rc %d, err \"%s\"", rc, err);
	if (rc == 0)
		fuzz_change_round_trip(&cmd, cur);
}

static void
post_run(json_t *body)
{
	char err[SL_ERR_LEN] = "";
	run_config cfg;
	run_sched *sched;
	int n;
	const char *resume;
	int rc = ctl_run_body(body, &cfg, &sched, &n, &resume, err);
	FUZZ_EXPECT(rc == 0 || (rc < 0 && err[0]), "rc %d without a message", rc);
	if (rc < 0)
		return;
	FUZZ_EXPECT(!resume || (json_object_size(body) == 1 && !sched),
		    "a resume taken with other fields");
	for (int i = 0; i < n; i++)
		fuzz_change_round_trip(&sched[i].cmd, &cfg);
	free(sched);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	char err[SL_ERR_LEN] = "";
	int ep = data[0] % EP_N, worker = data[1] % 8;
	json_t *body = ctl_body_parse((const char *)data + 2, size - 2, err);
	if (!body) {
		FUZZ_EXPECT(!strncmp(err, "body: ", 6), "err \"%s\"", err);
		return 0;
	}
	run_config cur;
	config_defaults(&cur);
	cur.workers = 4;
	switch (ep) {
	case EP_PATCH_RUN:
		change(body, -1, &cur);
		break;
	case EP_PATCH_WORKER:
		if (worker < cur.workers) /* else 404 before the body is read */
			change(body, worker, &cur);
		break;
	case EP_PUT_WORKERS: {
		json_t *set = ctl_workers_body(body, err);
		FUZZ_EXPECT(set || err[0], "refused without a message");
		if (set)
			change(set, -1, &cur);
		json_decref(set);
		break;
	}
	case EP_POST_RUN:
		post_run(body);
		break;
	case EP_POST_CKPT: {
		const char *path;
		int rc = ctl_checkpoint_body(body, &path, err);
		FUZZ_EXPECT(rc == 0 || (rc == -SL_EINVAL && err[0]), "rc %d", rc);
		FUZZ_EXPECT(rc < 0 || !path || (*path && strlen(path) < CTL_PATH_MAX - 64),
			    "a path the daemon cannot hold");
		break;
	}
	}
	json_decref(body);
	return 0;
}
