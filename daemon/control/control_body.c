/* control_body.c - the bodies of the API's mutating calls, checked as pure
 * functions: no run, no lock, no I/O (tests/fuzz/api_fuzz.c drives them). */
#include <string.h>

#include "config_json.h"
#include "control.h"

json_t *
ctl_body_parse(const char *body, size_t len, char *err)
{
	json_error_t je;
	json_t *j = json_loadb(body ? body : "", body ? len : 0, JSON_REJECT_DUPLICATES, &je);
	if (j && json_is_object(j))
		return j;
	if (j)
		snprintf(err, SL_ERR_LEN, "body: expected a JSON object");
	else
		snprintf(err, SL_ERR_LEN, "body: line %d, column %d: %s", je.line, je.column,
			 je.text);
	json_decref(j);
	return NULL;
}

json_t *
ctl_workers_body(json_t *body, char *err)
{
	json_t *n = json_object_get(body, "count");
	if (json_object_size(body) != 1 || !n) {
		snprintf(err, SL_ERR_LEN, "%s",
			 json_object_size(body) && !n ? "body: only \"count\" may be set here"
						      : "count: missing");
		return NULL;
	}
	return json_pack("{s:O}", "workers", n);
}

int
ctl_checkpoint_body(json_t *body, const char **path, char *err)
{
	json_t *p = json_object_get(body, "path");
	*path = NULL;
	if (json_object_size(body) > (p ? 1u : 0u))
		return sl_fail(err, SL_EINVAL, "body: only \"path\" may be set here");
	if (p && (!json_is_string(p) || !*json_string_value(p) ||
		  strlen(json_string_value(p)) >= CTL_PATH_MAX - 64))
		return sl_fail(err, SL_EINVAL, "path: expected a file name");
	*path = p ? json_string_value(p) : NULL;
	return 0;
}

int
ctl_run_body(json_t *body, run_config *cfg, run_sched **sched, int *n_sched,
	     const char **resume, char *err)
{
	json_t *res = json_object_get(body, "resume");
	*sched = NULL;
	*n_sched = 0;
	*resume = NULL;
	if (res) {
		if (!json_is_string(res) || json_object_size(body) != 1)
			return sl_fail(err, SL_EINVAL,
				       "resume: expected {\"resume\": \"path\"} alone");
		*resume = json_string_value(res);
		return 0;
	}
	config_defaults(cfg);
	runlog_strip(body); /* a log's first record is a run object too */
	int rc = config_apply_json(body, cfg, err);
	if (rc == 0)
		rc = sched_from_json(json_object_get(body, "schedule"), cfg, sched, n_sched,
				     err);
	return rc;
}
