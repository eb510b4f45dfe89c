/* config_json.c - table-driven JSON <-> run_config. */
#include "config_json.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

typedef enum { F_STR, F_DBL, F_INT, F_U64, F_BOOL } ftype;

typedef struct field {
	const char *name;
	ftype type;
	size_t off;
	size_t size;     /* F_STR: buffer size */
	double min, max; /* numbers */
} field;

#define FSTR(n, m) {#n, F_STR, offsetof(run_config, m), sizeof(((run_config *)0)->m), 0, 0}
#define FDBL(n, m, lo, hi) {#n, F_DBL, offsetof(run_config, m), 0, lo, hi}
#define FINT(n, m, lo, hi) {#n, F_INT, offsetof(run_config, m), 0, lo, hi}

static const field top_fields[] = {
	FSTR(model, model),
	FSTR(dataset, dataset),
	FSTR(device, device),
	FSTR(rule, rule),
	FSTR(clock, clock),
	FDBL(lr, lr, 1e-12, 100),
	FDBL(momentum, momentum, 0, 0.999999),
	FDBL(weight_decay, weight_decay, 0, 0.999999),
	FINT(batch, batch, 1, 65536),
	FINT(workers, workers, 1, CFG_MAX_WORKERS),
	FINT(threads, threads, 0, 64),
	FINT(eval_every, eval_every, 0, 100000000),
	{"seed", F_U64, offsetof(run_config, seed), 0, 0, 0},
};

#define RP(n, lo, hi) {#n, F_DBL, offsetof(rule_params, n), 0, lo, hi}
static const field rp_fields[] = {
	RP(s, 0, 1e6), RP(lambda, 0, 1e6), RP(H, 1, 1e6), RP(n, 1, 256),
	RP(local_lr, 1e-12, 100), RP(m, 0, 0.999999), RP(beta, 0, 1e3),
	RP(period, 1, 1e6), RP(warmup, 0, 1e9),
	{"adaptive", F_BOOL, offsetof(rule_params, adaptive), 0, 0, 0},
	{"local_opt", F_STR, offsetof(rule_params, local_opt),
	 sizeof(((rule_params *)0)->local_opt), 0, 0},
};

#define DF(n, lo, hi) {#n, F_DBL, offsetof(delay_cfg, n), 0, lo, hi}
static const field delay_fields[] = {
	DF(mean_ms, 0, 3600e3), DF(sigma, 1e-9, 10), DF(alpha, 1.000001, 100),
	DF(spread, 0, 1), DF(bandwidth_mbps, 0, 1e9),
	{"s", F_INT, offsetof(delay_cfg, s), 0, 0, 1e6},
};

static const char *
jtype(const json_t *v)
{
	if (!v)
		return "nothing";
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE: case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

/* Set one field of base from v; path is the field's full name. */
static int
set_field(const field *f, void *base, json_t *v, const char *path, char *err)
{
	char *p = (char *)base + f->off;
	switch (f->type) {
	case F_STR: {
		if (!json_is_string(v))
			return sl_fail(err, SL_EINVAL, "%s: expected a string, got %s",
				       path, jtype(v));
		const char *s = json_string_value(v);
		if (strlen(s) >= f->size || !*s)
			return sl_fail(err, SL_EINVAL,
				       "%s: must be 1..%zu characters", path, f->size - 1);
		memcpy(p, s, strlen(s) + 1);
		return 0;
	}
	case F_DBL: {
		if (!json_is_number(v))
			return sl_fail(err, SL_EINVAL, "%s: expected a number, got %s",
				       path, jtype(v));
		double d = json_number_value(v);
		if (!(d >= f->min && d <= f->max))
			return sl_fail(err, SL_EINVAL, "%s: %g is out of range [%g, %g]",
				       path, d, f->min, f->max);
		memcpy(p, &d, sizeof(d));
		return 0;
	}
	case F_INT: {
		if (!json_is_integer(v))
			return sl_fail(err, SL_EINVAL, "%s: expected an integer, got %s",
				       path, jtype(v));
		json_int_t i = json_integer_value(v);
		if (i < f->min || i > f->max)
			return sl_fail(err, SL_EINVAL,
				       "%s: %lld is out of range [%.0f, %.0f]", path,
				       (long long)i, f->min, f->max);
		int iv = (int)i;
		memcpy(p, &iv, sizeof(iv));
		return 0;
	}
	case F_U64: {
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return sl_fail(err, SL_EINVAL,
				       "%s: expected a non-negative integer", path);
		uint64_t u = (uint64_t)json_integer_value(v);
		memcpy(p, &u, sizeof(u));
		return 0;
	}
	case F_BOOL:
		if (!json_is_boolean(v))
			return sl_fail(err, SL_EINVAL, "%s: expected true or false", path);
		*(int *)p = json_is_true(v);
		return 0;
	}
	return sl_fail(err, SL_EINVAL, "%s: internal error", path);
}

static const field *
find(const field *fs, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(fs[i].name, key))
			return &fs[i];
	return NULL;
}

#define NF(a) (sizeof(a) / sizeof((a)[0]))

static int
parse_delay(json_t *v, delay_cfg *d, const char *path, char *err)
{
	char p[96];
	if (!json_is_object(v))
		return sl_fail(err, SL_EINVAL, "%s: expected an object, got %s",
			       path, jtype(v));
	delay_cfg t = *d;
	json_t *dist = json_object_get(v, "dist");
	if (dist) {
		static const char *const names[] = {"none", "const", "uniform",
			"exp", "lognormal", "pareto", "version"};
		if (!json_is_string(dist))
			return sl_fail(err, SL_EINVAL, "%s.dist: expected a string", path);
		const char *s = json_string_value(dist);
		int found = -1;
		for (int i = 0; i < (int)NF(names); i++)
			if (!strcmp(s, names[i]))
				found = i;
		if (found < 0)
			return sl_fail(err, SL_EINVAL,
				       "%s.dist: unknown \"%s\" (expected none, const, uniform, exp, lognormal, pareto, version)",
				       path, s);
		t.dist = (delay_dist)found;
		/* shape defaults for the chosen distribution */
		if (t.dist == DELAY_LOGNORMAL && t.sigma == 0)
			t.sigma = 1.0;
		if (t.dist == DELAY_PARETO && t.alpha == 0)
			t.alpha = 2.5;
		if (t.dist == DELAY_UNIFORM && t.spread == 0)
			t.spread = 1.0;
	}
	const char *key;
	json_t *val;
	json_object_foreach(v, key, val) {
		if (!strcmp(key, "dist"))
			continue;
		snprintf(p, sizeof(p), "%s.%s", path, key);
		if (!strcmp(key, "where")) {
			const char *w = json_is_string(val) ? json_string_value(val) : "";
			if (!strcmp(w, "worker"))
				t.at_server = 0;
			else if (!strcmp(w, "server"))
				t.at_server = 1;
			else
				return sl_fail(err, SL_EINVAL,
					       "%s: expected \"worker\" or \"server\"", p);
			continue;
		}
		const field *f = find(delay_fields, NF(delay_fields), key);
		if (!f)
			return sl_fail(err, SL_EINVAL, "%s: unknown field", p);
		int rc = set_field(f, &t, val, p, err);
		if (rc < 0)
			return rc;
	}
	/* a change to an existing delay may omit dist; a new one may not */
	if (!dist && d->dist == DELAY_NONE && json_object_size(v) > 0 &&
	    !(json_object_size(v) == 1 && json_object_get(v, "bandwidth_mbps")))
		return sl_fail(err, SL_EINVAL,
			       "%s.dist: missing (const, uniform, exp, lognormal, pareto or version)",
			       path);
	*d = t;
	return 0;
}

static int
parse_overrides(json_t *v, run_config *c, char *err)
{
	if (!json_is_array(v))
		return sl_fail(err, SL_EINVAL,
			       "worker_overrides: expected an array, got %s", jtype(v));
	if (json_array_size(v) > CFG_MAX_OVERRIDES)
		return sl_fail(err, SL_EINVAL,
			       "worker_overrides: at most %d entries", CFG_MAX_OVERRIDES);
	size_t i;
	json_t *e;
	c->n_overrides = 0;
	json_array_foreach(v, i, e) {
		char p[64];
		worker_override o;
		memset(&o, 0, sizeof(o));
		o.delay = c->delay;
		snprintf(p, sizeof(p), "worker_overrides[%zu]", i);
		if (!json_is_object(e))
			return sl_fail(err, SL_EINVAL, "%s: expected an object", p);
		json_t *id = json_object_get(e, "id");
		if (!json_is_integer(id) || json_integer_value(id) < 0 ||
		    json_integer_value(id) >= CFG_MAX_WORKERS)
			return sl_fail(err, SL_EINVAL,
				       "%s.id: expected an integer in 0..%d", p,
				       CFG_MAX_WORKERS - 1);
		o.id = (int)json_integer_value(id);
		const char *key;
		json_t *val;
		json_object_foreach(e, key, val) {
			char q[96];
			snprintf(q, sizeof(q), "%s.%s", p, key);
			int rc = 0;
			if (!strcmp(key, "id")) {
				continue;
			} else if (!strcmp(key, "delay")) {
				o.has_delay = 1;
				rc = parse_delay(val, &o.delay, q, err);
			} else if (!strcmp(key, "spb_depth")) {
				if (!json_is_integer(val) || json_integer_value(val) < 0 ||
				    json_integer_value(val) > 64)
					return sl_fail(err, SL_EINVAL,
						       "%s: expected an integer in 0..64", q);
				o.has_spb = 1;
				o.spb_depth = (int)json_integer_value(val);
			} else if (!strcmp(key, "speed")) {
				if (!json_is_number(val) || !(json_number_value(val) > 0) ||
				    json_number_value(val) > 100)
					return sl_fail(err, SL_EINVAL,
						       "%s: expected a number in (0, 100]", q);
				o.has_speed = 1;
				o.speed = json_number_value(val);
			} else if (!strcmp(key, "paused")) {
				if (!json_is_boolean(val))
					return sl_fail(err, SL_EINVAL,
						       "%s: expected true or false", q);
				o.has_paused = 1;
				o.paused = json_is_true(val);
			} else {
				return sl_fail(err, SL_EINVAL, "%s: unknown field", q);
			}
			if (rc < 0)
				return rc;
		}
		c->overrides[c->n_overrides++] = o;
	}
	return 0;
}

static int
parse_stop(json_t *v, run_config *c, char *err)
{
	if (!json_is_object(v))
		return sl_fail(err, SL_EINVAL, "stop: expected an object, got %s",
			       jtype(v));
	const char *key;
	json_t *val;
	json_object_foreach(v, key, val) {
		if (!strcmp(key, "steps")) {
			if (!json_is_integer(val) || json_integer_value(val) < 0)
				return sl_fail(err, SL_EINVAL,
					       "stop.steps: expected a non-negative integer");
			c->stop_steps = (uint64_t)json_integer_value(val);
			continue;
		}
		double *dst = !strcmp(key, "epochs") ? &c->stop_epochs
			      : !strcmp(key, "seconds") ? &c->stop_seconds
			      : !strcmp(key, "target_acc") ? &c->stop_target_acc
						     : NULL;
		if (!dst)
			return sl_fail(err, SL_EINVAL,
				       "stop.%s: unknown field (expected epochs, steps, seconds, target_acc)",
				       key);
		if (!json_is_number(val))
			return sl_fail(err, SL_EINVAL, "stop.%s: expected a number, got %s",
				       key, jtype(val));
		double d = json_number_value(val);
		double hi = dst == &c->stop_target_acc ? 1.0 : 1e9;
		if (!(d >= 0 && d <= hi))
			return sl_fail(err, SL_EINVAL, "stop.%s: %g is out of range [0, %g]",
				       key, d, hi);
		*dst = d;
	}
	return 0;
}

static int
parse_schedule(json_t *v, run_config *c, char *err)
{
	run_sched *sched;
	int n, rc = sched_from_json(v, c, &sched, &n, err);
	if (rc < 0)
		return rc;
	free(sched);
	c->n_schedule = n;
	return 0;
}

int
config_apply_json(json_t *obj, run_config *c, char *err)
{
	if (!json_is_object(obj))
		return sl_fail(err, SL_EINVAL, "run: expected a JSON object");
	run_config *t = malloc(sizeof(*t));
	if (!t)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	*t = *c;
	const char *key;
	json_t *val;
	int rc = 0;
	json_object_foreach(obj, key, val) {
		const field *f = find(top_fields, NF(top_fields), key);
		if (f) {
			rc = set_field(f, t, val, key, err);
		} else if (!strcmp(key, "rule_params")) {
			if (!json_is_object(val)) {
				rc = sl_fail(err, SL_EINVAL,
					     "rule_params: expected an object, got %s", jtype(val));
				break;
			}
			const char *k2;
			json_t *v2;
			json_object_foreach(val, k2, v2) {
				char p[64];
				snprintf(p, sizeof(p), "rule_params.%s", k2);
				const field *g = find(rp_fields, NF(rp_fields), k2);
				rc = g ? set_field(g, &t->rp, v2, p, err)
				       : sl_fail(err, SL_EINVAL, "%s: unknown field", p);
				if (rc < 0)
					break;
			}
		} else if (!strcmp(key, "delay")) {
			rc = parse_delay(val, &t->delay, "delay", err);
		} else if (!strcmp(key, "worker_overrides")) {
			rc = parse_overrides(val, t, err);
		} else if (!strcmp(key, "stop")) {
			rc = parse_stop(val, t, err);
		} else if (!strcmp(key, "schedule")) {
			rc = parse_schedule(val, t, err);
		} else {
			rc = sl_fail(err, SL_EINVAL, "%s: unknown field", key);
		}
		if (rc < 0)
			break;
	}
	if (rc == 0)
		rc = config_validate(t, err);
	if (rc == 0)
		*c = *t;
	free(t);
	return rc;
}

int
config_parse(const char *text, size_t len, run_config *c, char *err)
{
	json_error_t je;
	json_t *obj = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!obj)
		return sl_fail(err, SL_EINVAL, "line %d, column %d: %s", je.line,
			       je.column, je.text);
	int rc = config_apply_json(obj, c, err);
	json_decref(obj);
	return rc;
}

json_t *
config_delay_json(const delay_cfg *d)
{
	json_t *o = json_pack("{s:s}", "dist", delay_dist_name(d->dist));
	if (d->dist == DELAY_VERSION) {
		json_object_set_new(o, "s", json_integer(d->s));
	} else if (d->dist != DELAY_NONE) {
		json_object_set_new(o, "mean_ms", json_real(d->mean_ms));
		if (d->dist == DELAY_LOGNORMAL)
			json_object_set_new(o, "sigma", json_real(d->sigma));
		if (d->dist == DELAY_PARETO)
			json_object_set_new(o, "alpha", json_real(d->alpha));
		if (d->dist == DELAY_UNIFORM)
			json_object_set_new(o, "spread", json_real(d->spread));
	}
	if (d->at_server)
		json_object_set_new(o, "where", json_string("server"));
	if (d->bandwidth_mbps > 0)
		json_object_set_new(o, "bandwidth_mbps", json_real(d->bandwidth_mbps));
	return o;
}

static json_t *
rp_to_json(const rule_params *rp)
{
	json_t *o = json_object();
	for (size_t i = 0; i < NF(rp_fields); i++) {
		const field *f = &rp_fields[i];
		const char *p = (const char *)rp + f->off;
		json_object_set_new(o, f->name,
				    f->type == F_STR    ? json_string(p)
				    : f->type == F_BOOL ? json_boolean(*(const int *)p)
							: json_real(*(const double *)p));
	}
	return o;
}

json_t *
config_to_json(const run_config *c)
{
	json_t *o = json_object();
	for (size_t i = 0; i < NF(top_fields); i++) {
		const field *f = &top_fields[i];
		const char *p = (const char *)c + f->off;
		json_t *v = NULL;
		if (f->type == F_STR)
			v = json_string(p);
		else if (f->type == F_DBL)
			v = json_real(*(const double *)p);
		else if (f->type == F_INT)
			v = json_integer(*(const int *)p);
		else if (f->type == F_U64)
			v = json_integer((json_int_t)*(const uint64_t *)p);
		json_object_set_new(o, f->name, v);
	}
	json_object_set_new(o, "rule_params", rp_to_json(&c->rp));
	json_object_set_new(o, "delay", config_delay_json(&c->delay));
	json_t *ov = json_array();
	for (int i = 0; i < c->n_overrides; i++) {
		const worker_override *w = &c->overrides[i];
		json_t *e = json_pack("{s:i}", "id", w->id);
		if (w->has_delay)
			json_object_set_new(e, "delay", config_delay_json(&w->delay));
		if (w->has_spb)
			json_object_set_new(e, "spb_depth", json_integer(w->spb_depth));
		if (w->has_speed)
			json_object_set_new(e, "speed", json_real(w->speed));
		if (w->has_paused)
			json_object_set_new(e, "paused", json_boolean(w->paused));
		json_array_append_new(ov, e);
	}
	json_object_set_new(o, "worker_overrides", ov);
	json_t *st = json_object();
	if (c->stop_epochs > 0)
		json_object_set_new(st, "epochs", json_real(c->stop_epochs));
	if (c->stop_steps)
		json_object_set_new(st, "steps", json_integer((json_int_t)c->stop_steps));
	if (c->stop_seconds > 0)
		json_object_set_new(st, "seconds", json_real(c->stop_seconds));
	if (c->stop_target_acc > 0)
		json_object_set_new(st, "target_acc", json_real(c->stop_target_acc));
	json_object_set_new(o, "stop", st);
	return o;
}

/* ---- changes ------------------------------------------------------------ */

static int
get_int(json_t *v, const char *path, int lo, int hi, int *out, char *err)
{
	if (!json_is_integer(v))
		return sl_fail(err, SL_EINVAL, "%s: expected an integer, got %s", path,
			       jtype(v));
	json_int_t i = json_integer_value(v);
	if (i < lo || i > hi)
		return sl_fail(err, SL_EINVAL, "%s: %lld is out of range [%d, %d]", path,
			       (long long)i, lo, hi);
	*out = (int)i;
	return 0;
}

static int
get_num(json_t *v, const char *path, double lo, double hi, double *out,
	char *err)
{
	if (!json_is_number(v))
		return sl_fail(err, SL_EINVAL, "%s: expected a number, got %s", path,
			       jtype(v));
	double d = json_number_value(v);
	if (!(d >= lo && d <= hi))
		return sl_fail(err, SL_EINVAL, "%s: %g is out of range [%g, %g]", path,
			       d, lo, hi);
	*out = d;
	return 0;
}

int
cmd_from_json(json_t *set, int worker, const run_config *cur, const char *path,
	      run_cmd *c, char *err)
{
	memset(c, 0, sizeof(*c));
	c->worker = worker;
	c->rp = cur->rp;
	c->delay = cur->delay;
	if (worker >= 0) {
		for (int i = 0; i < cur->n_overrides; i++)
			if (cur->overrides[i].id == worker && cur->overrides[i].has_delay)
				c->delay = cur->overrides[i].delay;
	}
	if (!json_is_object(set))
		return sl_fail(err, SL_EINVAL, "%s: expected an object, got %s", path,
			       jtype(set));
	const char *key;
	json_t *v;
	char p[128];
	json_object_foreach(set, key, v) {
		int rc = 0;
		snprintf(p, sizeof(p), "%s%s%s", path, *path ? "." : "", key);
		if (!strcmp(key, "delay")) {
			rc = parse_delay(v, &c->delay, p, err);
			c->fields |= CMD_DELAY;
		} else if (!strcmp(key, "paused")) {
			if (!json_is_boolean(v))
				return sl_fail(err, SL_EINVAL, "%s: expected true or false", p);
			c->paused = json_is_true(v);
			c->fields |= CMD_PAUSED;
		} else if (!strcmp(key, "spb_depth") && worker >= 0) {
			rc = get_int(v, p, 0, 64, &c->spb_depth, err);
			c->fields |= CMD_SPB;
		} else if (!strcmp(key, "speed") && worker >= 0) {
			rc = get_num(v, p, 1e-6, 100, &c->speed, err);
			c->fields |= CMD_SPEED;
		} else if (worker >= 0) {
			return sl_fail(err, SL_EINVAL,
				       "%s: unknown field for a worker (delay, spb_depth, speed, paused)",
				       p);
		} else if (!strcmp(key, "rule")) {
			if (!json_is_string(v) || !config_rule_known(json_string_value(v)))
				return sl_fail(err, SL_EINVAL,
					       "%s: unknown rule (expected ssgd, asgd, softsync, ssp, sasgd, dcasgd, odsgd, localsgd, easgd, hogwild)",
					       p);
			snprintf(c->rule, sizeof(c->rule), "%s", json_string_value(v));
			c->fields |= CMD_RULE;
		} else if (!strcmp(key, "rule_params")) {
			if (!json_is_object(v))
				return sl_fail(err, SL_EINVAL, "%s: expected an object", p);
			const char *k2;
			json_t *v2;
			json_object_foreach(v, k2, v2) {
				char q[160];
				snprintf(q, sizeof(q), "%s.%s", p, k2);
				const field *g = find(rp_fields, NF(rp_fields), k2);
				rc = g ? set_field(g, &c->rp, v2, q, err)
				       : sl_fail(err, SL_EINVAL, "%s: unknown field", q);
				if (rc < 0)
					return rc;
			}
			c->fields |= CMD_RULE_PARAMS;
		} else if (!strcmp(key, "lr")) {
			rc = get_num(v, p, 1e-12, 100, &c->lr, err);
			c->fields |= CMD_LR;
		} else if (!strcmp(key, "momentum")) {
			rc = get_num(v, p, 0, 0.999999, &c->momentum, err);
			c->fields |= CMD_MOMENTUM;
		} else if (!strcmp(key, "weight_decay")) {
			rc = get_num(v, p, 0, 0.999999, &c->weight_decay, err);
			c->fields |= CMD_WEIGHT_DECAY;
		} else if (!strcmp(key, "batch")) {
			rc = get_int(v, p, 1, 65536, &c->batch, err);
			c->fields |= CMD_BATCH;
		} else if (!strcmp(key, "workers")) {
			rc = get_int(v, p, 1, CFG_MAX_WORKERS, &c->workers, err);
			c->fields |= CMD_WORKERS;
		} else if (!strcmp(key, "eval_every")) {
			rc = get_int(v, p, 0, 100000000, &c->eval_every, err);
			c->fields |= CMD_EVAL_EVERY;
		} else if (!strcmp(key, "stop")) {
			if (!json_is_true(v))
				return sl_fail(err, SL_EINVAL, "%s: expected true", p);
			c->fields |= CMD_STOP;
		} else if (!strcmp(key, "checkpoint")) {
			if (!json_is_string(v) || !json_string_length(v) ||
			    json_string_length(v) >= sizeof(c->path))
				return sl_fail(err, SL_EINVAL,
					       "%s: expected a file name (< %zu bytes)", p,
					       sizeof(c->path));
			snprintf(c->path, sizeof(c->path), "%s", json_string_value(v));
			c->fields |= CMD_CHECKPOINT;
		} else {
			return sl_fail(err, SL_EINVAL, "%s: unknown field", p);
		}
		if (rc < 0)
			return rc;
	}
	if (!c->fields)
		return sl_fail(err, SL_EINVAL, "%s: nothing to change", *path ? path : "set");
	return 0;
}

json_t *
cmd_to_json(const run_cmd *c)
{
	json_t *set = json_object();
	if (c->fields & CMD_RULE)
		json_object_set_new(set, "rule", json_string(c->rule));
	if (c->fields & (CMD_RULE | CMD_RULE_PARAMS))
		json_object_set_new(set, "rule_params", rp_to_json(&c->rp));
	if (c->fields & CMD_LR)
		json_object_set_new(set, "lr", json_real(c->lr));
	if (c->fields & CMD_MOMENTUM)
		json_object_set_new(set, "momentum", json_real(c->momentum));
	if (c->fields & CMD_WEIGHT_DECAY)
		json_object_set_new(set, "weight_decay", json_real(c->weight_decay));
	if (c->fields & CMD_BATCH)
		json_object_set_new(set, "batch", json_integer(c->batch));
	if (c->fields & CMD_WORKERS)
		json_object_set_new(set, "workers", json_integer(c->workers));
	if (c->fields & CMD_EVAL_EVERY)
		json_object_set_new(set, "eval_every", json_integer(c->eval_every));
	if (c->fields & CMD_DELAY)
		json_object_set_new(set, "delay", config_delay_json(&c->delay));
	if (c->fields & CMD_SPB)
		json_object_set_new(set, "spb_depth", json_integer(c->spb_depth));
	if (c->fields & CMD_SPEED)
		json_object_set_new(set, "speed", json_real(c->speed));
	if (c->fields & CMD_PAUSED)
		json_object_set_new(set, "paused", json_boolean(c->paused));
	if (c->fields & CMD_STOP)
		json_object_set_new(set, "stop", json_true());
	json_t *o = json_pack("{s:s}", "event", "set");
	if (c->worker >= 0)
		json_object_set_new(o, "worker", json_integer(c->worker));
	json_object_set_new(o, "set", set);
	if (c->origin[0])
		json_object_set_new(o, "origin", json_string(c->origin));
	return o;
}

int
sched_from_json(json_t *arr, const run_config *cur, run_sched **out, int *n,
		char *err)
{
	*out = NULL;
	*n = 0;
	if (!arr)
		return 0;
	if (!json_is_array(arr))
		return sl_fail(err, SL_EINVAL, "schedule: expected an array");
	size_t cnt = json_array_size(arr), i;
	if (!cnt)
		return 0;
	run_sched *s = calloc(cnt, sizeof(*s));
	if (!s)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	json_t *e;
	json_array_foreach(arr, i, e) {
		char p[64];
		snprintf(p, sizeof(p), "schedule[%zu]", i);
		json_t *at = json_object_get(e, "at"), *set = json_object_get(e, "set");
		json_t *jv = at ? json_object_get(at, "v") : NULL;
		json_t *jt = at ? json_object_get(at, "t") : NULL;
		json_t *jw = json_object_get(e, "worker");
		int worker = -1, rc;
		if (!json_is_object(e) || !json_is_object(at) || (!jv && !jt)) {
			free(s);
			return sl_fail(err, SL_EINVAL,
				       "%s.at: expected {\"v\": N} or {\"t\": seconds}", p);
		}
		if (jv) {
			if (!json_is_integer(jv) || json_integer_value(jv) < 0) {
				free(s);
				return sl_fail(err, SL_EINVAL,
					       "%s.at.v: expected a non-negative integer", p);
			}
			s[i].by_version = 1;
			s[i].v = (uint64_t)json_integer_value(jv);
		} else if (!json_is_number(jt) || json_number_value(jt) < 0) {
			free(s);
			return sl_fail(err, SL_EINVAL, "%s.at.t: expected seconds >= 0", p);
		} else {
			s[i].t = json_number_value(jt);
		}
		if (jw) {
			char q[80];
			snprintf(q, sizeof(q), "%s.worker", p);
			if ((rc = get_int(jw, q, 0, CFG_MAX_WORKERS - 1, &worker, err)) < 0) {
				free(s);
				return rc;
			}
		}
		char q[80];
		snprintf(q, sizeof(q), "%s.set", p);
		if ((rc = cmd_from_json(set, worker, cur, q, &s[i].cmd, err)) < 0) {
			free(s);
			return rc;
		}
		snprintf(s[i].cmd.origin, sizeof(s[i].cmd.origin), "schedule");
	}
	*out = s;
	*n = (int)cnt;
	return 0;
}
