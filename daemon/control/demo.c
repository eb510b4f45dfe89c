/* demo.c - demonstration scripts. */
#include "demo.h"

#include <stdio.h>
#include <string.h>

#include "config_json.h"

static const char builtin_json[] =
	"{\"run\": {\"workers\": 4, \"rule\": \"asgd\", \"eval_every\": 100},"
	" \"scenes\": ["
	"  {\"seconds\": 30, \"caption\": \"No delay: 4 workers, asynchronous SGD. Each gradient is about N-1 = 3 versions stale.\","
	"   \"set\": {\"delay\": {\"dist\": \"none\"}}},"
	"  {\"seconds\": 30, \"caption\": \"One straggler: worker 3 waits 200 ms per step. Its gradients arrive dozens of versions stale.\","
	"   \"workers\": [{\"id\": 3, \"set\": {\"delay\": {\"dist\": \"const\", \"mean_ms\": 200}}}]},"
	"  {\"seconds\": 30, \"caption\": \"Heavy tails: Pareto delays (mean 20 ms, alpha 1.5) on every worker. Watch the p99 staleness.\","
	"   \"set\": {\"delay\": {\"dist\": \"pareto\", \"mean_ms\": 20, \"alpha\": 1.5}}},"
	"  {\"seconds\": 20, \"caption\": \"Same delays, rule asgd: gradients applied as they come.\","
	"   \"set\": {\"rule\": \"asgd\"}},"
	"  {\"seconds\": 20, \"caption\": \"Same delays, rule odsgd: synchronous rounds, one-step-delayed local updates. Staleness stays at 1.\","
	"   \"set\": {\"rule\": \"odsgd\", \"rule_params\": {\"warmup\": 20}}},"
	"  {\"seconds\": 20, \"caption\": \"Same delays, rule dcasgd: asynchronous, with delay compensation.\","
	"   \"set\": {\"rule\": \"dcasgd\"}},"
	"  {\"seconds\": 30, \"caption\": \"More workers: 8 asgd workers. Staleness about doubles.\","
	"   \"set\": {\"rule\": \"asgd\", \"workers\": 8, \"delay\": {\"dist\": \"exp\", \"mean_ms\": 10}}}"
	" ]}";

void
demo_free(demo *d)
{
	for (int i = 0; i < d->n; i++) {
		json_decref(d->scene[i].set);
		json_decref(d->scene[i].workers);
	}
	d->n = 0;
}

int
demo_parse(json_t *j, demo *d, char *err)
{
	memset(d, 0, sizeof(*d));
	config_defaults(&d->base);
	d->base.workers = 4;
	if (!json_is_object(j))
		return sl_fail(err, SL_EINVAL, "demo: expected an object");
	const char *key;
	json_t *v;
	json_object_foreach(j, key, v) {
		if (strcmp(key, "run") && strcmp(key, "scenes"))
			return sl_fail(err, SL_EINVAL, "demo.%s: unknown field (expected run, scenes)", key);
	}
	json_t *base = json_object_get(j, "run");
	char e2[SL_ERR_LEN];
	if (base && config_apply_json(base, &d->base, e2) < 0)
		return sl_fail(err, SL_EINVAL, "demo.run.%s", e2);
	json_t *sc = json_object_get(j, "scenes");
	if (!json_is_array(sc) || !json_array_size(sc))
		return sl_fail(err, SL_EINVAL, "demo.scenes: expected a non-empty array");
	if (json_array_size(sc) > DEMO_MAX_SCENES)
		return sl_fail(err, SL_EINVAL, "demo.scenes: at most %d", DEMO_MAX_SCENES);
	size_t i;
	json_t *e;
	run_config cur = d->base;
	json_array_foreach(sc, i, e) {
		char p[64];
		snprintf(p, sizeof(p), "demo.scenes[%zu]", i);
		demo_scene *s = &d->scene[d->n];
		if (!json_is_object(e)) {
			demo_free(d);
			return sl_fail(err, SL_EINVAL, "%s: expected an object", p);
		}
		json_object_foreach(e, key, v) {
			if (strcmp(key, "seconds") && strcmp(key, "caption") &&
			    strcmp(key, "set") && strcmp(key, "workers")) {
				demo_free(d);
				return sl_fail(err, SL_EINVAL,
					       "%s.%s: unknown field (expected seconds, caption, set, workers)",
					       p, key);
			}
		}
		json_t *sec = json_object_get(e, "seconds"), *cap = json_object_get(e, "caption");
		if (!json_is_number(sec) || !(json_number_value(sec) >= 1 &&
					      json_number_value(sec) <= 86400)) {
			demo_free(d);
			return sl_fail(err, SL_EINVAL, "%s.seconds: expected a number in [1, 86400]", p);
		}
		if (!json_is_string(cap) || json_string_length(cap) >= sizeof(s->caption)) {
			demo_free(d);
			return sl_fail(err, SL_EINVAL, "%s.caption: expected a string (< 256 bytes)", p);
		}
		s->seconds = json_number_value(sec);
		snprintf(s->caption, sizeof(s->caption), "%s", json_string_value(cap));
		run_cmd c;
		char q[96];
		json_t *set = json_object_get(e, "set");
		snprintf(q, sizeof(q), "%s.set", p);
		if (set && cmd_from_json(set, -1, &cur, q, &c, err) < 0) {
			demo_free(d);
			return -SL_EINVAL;
		}
		if (set && (c.fields & CMD_WORKERS))
			cur.workers = c.workers;
		json_t *ws = json_object_get(e, "workers");
		if (ws && !json_is_array(ws)) {
			demo_free(d);
			return sl_fail(err, SL_EINVAL, "%s.workers: expected an array", p);
		}
		size_t k;
		json_t *w;
		json_array_foreach(ws, k, w) {
			json_t *id = json_object_get(w, "id");
			snprintf(q, sizeof(q), "%s.workers[%zu]", p, k);
			if (!json_is_object(w)) {
				demo_free(d);
				return sl_fail(err, SL_EINVAL, "%s: expected an object", q);
			}
			json_object_foreach(w, key, v) {
				if (strcmp(key, "id") && strcmp(key, "set")) {
					demo_free(d);
					return sl_fail(err, SL_EINVAL,
						       "%s.%s: unknown field (expected id, set)", q, key);
				}
			}
			if (!json_is_integer(id) || json_integer_value(id) < 0 ||
			    json_integer_value(id) >= cur.workers) {
				demo_free(d);
				return sl_fail(err, SL_EINVAL, "%s.id: expected a worker id below %d",
					       q, cur.workers);
			}
			snprintf(q + strlen(q), sizeof(q) - strlen(q), ".set");
			if (cmd_from_json(json_object_get(w, "set"),
					  (int)json_integer_value(id), &cur, q, &c, err) < 0) {
				demo_free(d);
				return -SL_EINVAL;
			}
		}
		s->set = set ? json_incref(set) : NULL;
		s->workers = ws ? json_incref(ws) : NULL;
		d->n++;
	}
	return 0;
}

int
demo_builtin(demo *d, char *err)
{
	json_error_t je;
	json_t *j = json_loads(builtin_json, 0, &je);
	if (!j)
		return sl_fail(err, SL_EINVAL, "built-in demo: %s", je.text);
	int rc = demo_parse(j, d, err);
	json_decref(j);
	return rc;
}
