/* config_json.c - JSON <-> run_config and run_cmd, and the schema, all
 * driven by the field tables of engine/run/fields.c. */
#include "config_json.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "fields.h"
#include "graph_json.h"
#include "suggest.h"

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

/* Set one stored field of base from v; path is the field's full name. */
static int
set_scalar(const field_desc *f, void *base, json_t *v, const char *path, char *err)
{
	char *p = (char *)base + f->off;
	switch (f->store) {
	case FS_STR: case FS_ENUM: {
		if (!json_is_string(v))
			return sl_fail(err, SL_EINVAL, "%s: expected a string, got %s",
				       path, jtype(v));
		const char *s = json_string_value(v);
		int k = field_choice_index(f, s);
		if (field_choice(f, 0) && k == -1)
			return config_choice_fail(f, path, s, err);
		if (f->store == FS_ENUM) {
			field_set(f, base, k);
			return 0;
		}
		if (strlen(s) >= f->size || !*s)
			return sl_fail(err, SL_EINVAL,
				       "%s: must be 1..%zu characters", path, f->size - 1);
		memcpy(p, s, strlen(s) + 1);
		return 0;
	}
	case FS_DBL: case FS_INT: case FS_U64: {
		if (!json_is_number(v))
			return sl_fail(err, SL_EINVAL, "%s: expected %s, got %s", path,
				       f->type == FT_INTEGER ? "an integer" : "a number",
				       jtype(v));
		if (f->store == FS_U64 && json_is_integer(v) && json_integer_value(v) >= 0) {
			uint64_t u = (uint64_t)json_integer_value(v); /* exact */
			memcpy(p, &u, sizeof(u));
			return 0;
		}
		double d = json_number_value(v);
		if (!field_in_range(f, d))
			return field_range_fail(f, path, d, err);
		/* a real past what a JSON integer carries (1e20, or 1.6e19 for
		 * a u64): converting it would be undefined, and a value from
		 * 2^63 up could not be written back to the log as an integer
		 * (both found by tests/fuzz/config_fuzz.c); the command line
		 * has the same limit */
		if (f->store == FS_U64 && !(d < 0x1p63))
			return sl_fail(err, SL_EINVAL, "%s: must be an integer below 2^63, got %.10g",
				       path, d);
		field_set(f, base, d);
		return 0;
	}
	case FS_BOOL:
		if (!json_is_boolean(v))
			return sl_fail(err, SL_EINVAL, "%s: expected true or false, got %s",
				       path, jtype(v));
		field_set(f, base, json_is_true(v));
		return 0;
	case FS_NONE:
		break;
	}
	return sl_fail(err, SL_EINVAL, "%s: internal error (no storage)", path);
}

/* path.key into buf */
static const char *
sub_path(char *buf, size_t cap, const char *path, const char *key)
{
	snprintf(buf, cap, "%s%s%s", path, *path ? "." : "", key);
	return buf;
}

/* the keys of t offered to a search for the nearest */
static void
offer_keys(suggest *near, const field_table *t)
{
	for (int i = 0; i < t->n; i++)
		suggest_offer(near, t->f[i].key);
}

/* key, in the object at path, is none of the keys searched in near:
 * "PATH.KEY: unknown fieldWHAT (LIST; did you mean 'PATH.NEAREST'?)", the
 * parenthesis when there is a list or a key near */
static int
unknown_field(const char *path, const char *key, const char *what, const char *list,
	      const suggest *near, char *err)
{
	char p[160], prefix[160], note[SL_ERR_LEN];
	return sl_fail(err, SL_EINVAL, "%s: unknown field%s%s", sub_path(p, sizeof(p), path, key),
		       what, suggest_note(note, sizeof(note), list,
					  sub_path(prefix, sizeof(prefix), path, ""), near->best));
}

/* key, unknown in the object at path whose fields t (then t2, when not
 * NULL) describe; what and list as for unknown_field */
static int
unknown_key_of(const field_table *t, const field_table *t2, const char *path,
	       const char *key, const char *what, const char *list, char *err)
{
	suggest near;
	suggest_start(&near, key);
	offer_keys(&near, t);
	if (t2)
		offer_keys(&near, t2);
	return unknown_field(path, key, what, list, &near, err);
}

/* the stored fields of t named in the object v onto base */
static int
apply_scalars(const field_table *t, void *base, json_t *v, const char *path,
	      char *err)
{
	char p[160];
	if (!json_is_object(v))
		return sl_fail(err, SL_EINVAL, "%s: expected an object, got %s", path,
			       jtype(v));
	const char *key;
	json_t *val;
	json_object_foreach(v, key, val) {
		const field_desc *f = fields_find(t, key);
		sub_path(p, sizeof(p), path, key);
		if (!f)
			return unknown_key_of(t, NULL, path, key, "", NULL, err);
		if (f->store == FS_NONE)
			return sl_fail(err, SL_EINVAL, "%s: unknown field", p);
		int rc = set_scalar(f, base, val, p, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int
parse_delay(json_t *v, delay_cfg *d, const char *path, char *err)
{
	char p[160], list[160];
	if (!json_is_object(v))
		return sl_fail(err, SL_EINVAL, "%s: expected an object, got %s",
			       path, jtype(v));
	delay_cfg t = *d;
	json_t *dist = json_object_get(v, "dist");
	const field_desc *fd = fields_find(&fields_delay, "dist");
	if (dist) {
		int rc = set_scalar(fd, &t, dist, sub_path(p, sizeof(p), path, "dist"), err);
		if (rc < 0)
			return rc;
		/* the chosen distribution's shape takes its default if unset */
		for (int i = 0; i < fields_delay.n; i++) {
			const field_desc *f = &fields_delay.f[i];
			if (f->when_key && f->def != 0 && field_get(f, &t) == 0 &&
			    field_applies(f, &fields_delay, &t))
				field_set(f, &t, f->def);
		}
	}
	json_t *rest = json_deep_copy(v);
	json_object_del(rest, "dist");
	int rc = apply_scalars(&fields_delay, &t, rest, path, err);
	json_decref(rest);
	if (rc < 0)
		return rc;
	/* a change to an existing delay may omit dist; a new one may not */
	if (!dist && d->dist == DELAY_NONE && json_object_size(v) > 0 &&
	    !(json_object_size(v) == 1 && json_object_get(v, "bandwidth_mbps"))) {
		field_choices_str(fd, list, sizeof(list));
		return sl_fail(err, SL_EINVAL, "%s.dist: missing (%s)", path, list);
	}
	*d = t;
	return 0;
}

/* one worker's fields (fields_worker) from v onto base (a worker_override
 * when has is set, else a run_cmd); cmd receives the CMD_* bits */
static int
apply_worker(json_t *v, void *base, int as_cmd, unsigned *cmd, const char *path,
	     char *err)
{
	char p[160];
	const char *key;
	json_t *val;
	json_object_foreach(v, key, val) {
		const field_desc *f = fields_find(&fields_worker, key);
		sub_path(p, sizeof(p), path, key);
		if (!f)
			return unknown_key_of(&fields_worker, NULL, path, key, " for a worker",
					      "delay, spb_depth, speed, step_ms, paused, link", err);
		field_desc g = *f;
		if (as_cmd)
			g.off = f->cmd_off;
		void *at = (char *)base + g.off;
		int rc = g.sub == &fields_delay ? parse_delay(val, at, p, err)
			 : g.type == FT_OBJECT  ? apply_scalars(g.sub, at, val, p, err)
						: set_scalar(&g, base, val, p, err);
		if (rc < 0)
			return rc;
		if (!as_cmd && f->has_off > 0)
			*(int *)((char *)base + f->has_off) = 1;
		*cmd |= f->cmd;
	}
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
		o.link = c->link;
		snprintf(p, sizeof(p), "worker_overrides[%zu]", i);
		if (!json_is_object(e))
			return sl_fail(err, SL_EINVAL, "%s: expected an object, got %s", p,
				       jtype(e));
		json_t *id = json_object_get(e, "id");
		char q[96];
		snprintf(q, sizeof(q), "%s.id", p);
		if (!id)
			return sl_fail(err, SL_EINVAL, "%s: missing", q);
		int rc = set_scalar(fields_find(&fields_override, "id"), &o, id, q, err);
		if (rc < 0)
			return rc;
		json_t *rest = json_deep_copy(e);
		json_object_del(rest, "id");
		unsigned bits = 0;
		rc = apply_worker(rest, &o, 0, &bits, p, err);
		json_decref(rest);
		if (rc < 0)
			return rc;
		c->overrides[c->n_overrides++] = o;
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
		return sl_fail(err, SL_EINVAL, "run: expected a JSON object, got %s",
			       jtype(obj));
	run_config *t = malloc(sizeof(*t));
	if (!t)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	*t = *c;
	const char *key;
	json_t *val;
	int rc = 0;
	json_t *sched = NULL;
	json_object_foreach(obj, key, val) {
		const field_desc *f = fields_find(&fields_run, key);
		void *at = f ? (char *)t + f->off : NULL;
		if (!f)
			rc = unknown_key_of(&fields_run, NULL, "", key, "", NULL, err);
		else if (!strcmp(key, "model") && json_is_object(val))
			rc = graph_json_parse(val, t->model, sizeof(t->model), err);
		else if (f->sub == &fields_delay)
			rc = parse_delay(val, at, key, err);
		else if (f->type == FT_OBJECT)
			rc = apply_scalars(f->sub, at, val, key, err);
		else if (f->sub == &fields_override)
			rc = parse_overrides(val, t, err);
		else if (f->type == FT_ARRAY)
			sched = val; /* once every other field is known */
		else
			rc = set_scalar(f, t, val, key, err);
		if (rc < 0)
			break;
	}
	if (rc == 0 && sched)
		rc = parse_schedule(sched, t, err);
	if (rc == 0)
		rc = config_validate(t, err);
	/* checked when this object sets them: a resumed run's own state may
	 * keep an override for a worker it shrank away */
	if (rc == 0 && (json_object_get(obj, "worker_overrides") || json_object_get(obj, "workers")))
		rc = config_overrides_fit(t, err);
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

/* ---- output ------------------------------------------------------------------ */

/* a number as an integer when it is one (schemas read "min": 0) */
static json_t *
num_json(double d, int integer)
{
	if ((integer || d == floor(d)) && fabs(d) < 9e15)
		return json_integer((json_int_t)d);
	return json_real(d);
}

static json_t *
value_json(const field_desc *f, const void *base)
{
	const char *p = (const char *)base + f->off;
	switch (f->store) {
	case FS_STR: return json_string(p);
	case FS_ENUM: return json_string(field_choice(f, (int)field_get(f, base)));
	case FS_BOOL: return json_boolean(field_get(f, base) != 0);
	case FS_U64: {
		uint64_t u;
		memcpy(&u, p, sizeof(u));
		return json_integer((json_int_t)u);
	}
	case FS_INT: return json_integer((json_int_t)field_get(f, base));
	case FS_DBL:
		return f->type == FT_INTEGER ? json_integer((json_int_t)field_get(f, base))
					     : json_real(field_get(f, base));
	case FS_NONE: break;
	}
	return json_null();
}

static int
at_default(const field_desc *f, const void *base)
{
	if (f->store == FS_STR)
		return !strcmp((const char *)base + f->off, f->def_str ? f->def_str : "");
	return field_get(f, base) == f->def;
}

static json_t *overrides_json(const run_config *c);

/* the fields of t at base that apply (and differ from their default where
 * sparse) */
static json_t *
table_json(const field_table *t, const void *base)
{
	json_t *o = json_object();
	for (int i = 0; i < t->n; i++) {
		const field_desc *f = &t->f[i];
		const void *at = (const char *)base + f->off;
		json_t *v;
		if ((f->flags & FD_NOECHO) || !field_applies(f, t, base))
			continue;
		if (f->store != FS_NONE && (f->flags & FD_SPARSE) && at_default(f, base))
			continue;
		if (f->sub == &fields_override)
			v = overrides_json(base);
		else if (!strcmp(f->key, "model") && t == &fields_run && (v = graph_json(at)))
			; /* a model given node by node, as it was given */
		else if (f->type == FT_OBJECT)
			v = table_json(f->sub, at);
		else
			v = value_json(f, base);
		if (f->type == FT_OBJECT && (f->flags & FD_SPARSE) && !json_object_size(v)) {
			json_decref(v); /* every field at its default */
			continue;
		}
		json_object_set_new(o, f->key, v);
	}
	return o;
}

json_t *
config_delay_json(const delay_cfg *d)
{
	return table_json(&fields_delay, d);
}

static json_t *
overrides_json(const run_config *c)
{
	json_t *ov = json_array();
	for (int i = 0; i < c->n_overrides; i++) {
		const worker_override *w = &c->overrides[i];
		if (w->id >= c->workers)
			continue; /* kept for a worker gone since; not in the run now */
		json_t *e = json_object();
		for (int k = 0; k < fields_override.n; k++) {
			const field_desc *f = &fields_override.f[k];
			if (f->has_off > 0 && !*(const int *)((const char *)w + f->has_off))
				continue;
			json_object_set_new(e, f->key,
					    f->sub == &fields_delay ? config_delay_json(&w->delay)
					    : f->type == FT_OBJECT
						    ? table_json(f->sub, (const char *)w + f->off)
						    : value_json(f, w));
		}
		json_array_append_new(ov, e);
	}
	return ov;
}

json_t *
config_to_json(const run_config *c)
{
	return table_json(&fields_run, c);
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
		return sl_fail(err, SL_EINVAL, "%s: must be in [%d, %d], got %lld", path,
			       lo, hi, (long long)i);
	*out = (int)i;
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
	c->link = cur->link;
	if (worker >= 0) {
		for (int i = 0; i < cur->n_overrides; i++) {
			const worker_override *o = &cur->overrides[i];
			if (o->id == worker && o->has_delay)
				c->delay = o->delay;
			if (o->id == worker && o->has_link)
				c->link = o->link;
		}
	}
	if (!json_is_object(set))
		return sl_fail(err, SL_EINVAL, "%s: expected an object, got %s",
			       *path ? path : "set", jtype(set));
	if (worker >= 0) {
		int rc = apply_worker(set, c, 1, &c->fields, path, err);
		if (rc < 0)
			return rc;
	}
	const char *key;
	json_t *v;
	char p[160];
	json_object_foreach(set, key, v) {
		if (worker >= 0)
			break;
		int rc = 0;
		sub_path(p, sizeof(p), path, key);
		/* controls first: a PATCH's "stop" is stop now, not the run
		 * object's stop conditions */
		const field_desc *f = fields_find(&fields_controls, key);
		if (!f)
			f = fields_find(&fields_run, key);
		if (!f) /* controls first, as they are looked up */
			return unknown_key_of(&fields_controls, &fields_run, path, key, "", NULL,
					      err);
		if (!(f->flags & FD_MUTABLE))
			return sl_fail(err, SL_EINVAL,
				       "%s: cannot change mid-run (POST /api/v1/run starts a new run)",
				       p);
		field_desc g = *f;
		g.off = f->cmd_off;
		void *at = (char *)c + g.off;
		if (f->sub == &fields_delay)
			rc = parse_delay(v, at, p, err);
		else if (f->type == FT_OBJECT)
			rc = apply_scalars(f->sub, at, v, p, err);
		else if (f->store == FS_NONE && !json_is_true(v))
			rc = sl_fail(err, SL_EINVAL, "%s: expected true, got %s", p,
				     json_is_false(v) ? "false" : jtype(v));
		else if (f->store != FS_NONE)
			rc = set_scalar(&g, c, v, p, err);
		if (rc < 0)
			return rc;
		c->fields |= f->cmd;
	}
	if (!c->fields)
		return sl_fail(err, SL_EINVAL, "%s: nothing to change", *path ? path : "set");
	return 0;
}

/* the fields of t that c sets, from their places in c */
static void
cmd_fields_json(json_t *set, const field_table *t, const run_cmd *c)
{
	for (int i = 0; i < t->n; i++) {
		const field_desc *f = &t->f[i];
		if (!(f->flags & FD_MUTABLE) || (f->flags & FD_NOECHO) ||
		    !(c->fields & (f->echo ? f->echo : f->cmd)))
			continue;
		field_desc g = *f;
		g.off = f->cmd_off;
		const void *at = (const char *)c + g.off;
		json_object_set_new(set, f->key,
				    f->type == FT_OBJECT ? table_json(f->sub, at)
				    : f->store == FS_NONE ? json_true()
							  : value_json(&g, c));
	}
}

json_t *
cmd_to_json(const run_cmd *c)
{
	json_t *set = json_object();
	if (c->worker >= 0) {
		cmd_fields_json(set, &fields_worker, c);
	} else {
		cmd_fields_json(set, &fields_run, c);
		cmd_fields_json(set, &fields_controls, c);
	}
	json_t *o = json_pack("{s:s}", "event", "set");
	if (c->worker >= 0)
		json_object_set_new(o, "worker", json_integer(c->worker));
	json_object_set_new(o, "set", set);
	if (c->origin[0])
		json_object_set_new(o, "origin", json_string(c->origin));
	return o;
}

/* ---- schema ---------------------------------------------------------------- */

/* with_mutable: 0 leaves "mutable" out; 2: the enclosing object may
 * change mid-run, and so may its fields */
static json_t *table_schema(const field_table *t, int with_mutable);

static json_t *
field_schema(const field_desc *f, const field_table *t, int with_mutable)
{
	static const char *const types[] = {"number", "integer", "string",
		"boolean", "object", "array"};
	json_t *o = json_pack("{s:s,s:s}", "key", f->key, "type", types[f->type]);
	int integer = f->type == FT_INTEGER;
	if (f->flags & FD_MIN)
		json_object_set_new(o, "min", num_json(f->min, integer));
	if (f->flags & FD_MIN_OPEN)
		json_object_set_new(o, "min_open", json_true());
	if (f->flags & FD_MAX)
		json_object_set_new(o, "max", num_json(f->max, integer));
	if (f->flags & FD_MAX_OPEN)
		json_object_set_new(o, "max_open", json_true());
	if (field_choice(f, 0)) {
		json_t *e = json_array();
		const char *ch;
		for (int i = 0; (ch = field_choice(f, i)); i++)
			json_array_append_new(e, json_string(ch));
		json_object_set_new(o, "enum", e);
	}
	if (f->store == FS_STR && f->def_str)
		json_object_set_new(o, "default", json_string(f->def_str));
	else if (f->store == FS_ENUM)
		json_object_set_new(o, "default", json_string(field_choice(f, (int)f->def)));
	else if (f->store == FS_BOOL)
		json_object_set_new(o, "default", json_boolean(f->def != 0));
	else if (f->store != FS_NONE && f->store != FS_STR && !(f->flags & FD_NODEFAULT))
		json_object_set_new(o, "default", num_json(f->def, integer));
	int mutable = with_mutable == 2 || (f->flags & FD_MUTABLE);
	if (with_mutable)
		json_object_set_new(o, "mutable", json_boolean(mutable));
	if (f->when_key) {
		const field_desc *k = fields_find(t, f->when_key);
		json_t *vals = json_array();
		for (int i = 0; i < 32; i++)
			if (f->when_mask >> i & 1u)
				json_array_append_new(vals, json_string(field_choice(k, i)));
		json_object_set_new(o, "when", json_pack("{s:o}", f->when_key, vals));
	}
	json_object_set_new(o, "doc", json_string(f->doc ? f->doc : ""));
	if (t == &fields_run && !strcmp(f->key, "model"))
		graph_json_schema(o);
	if (f->sub)
		json_object_set_new(o, "fields",
				    table_schema(f->sub, with_mutable ? 1 + (f->type == FT_OBJECT && mutable) : 0));
	return o;
}

static json_t *
table_schema(const field_table *t, int with_mutable)
{
	json_t *a = json_array();
	for (int i = 0; i < t->n; i++)
		json_array_append_new(a, field_schema(&t->f[i], t, with_mutable));
	return a;
}

json_t *
config_schema_json(void)
{
	static const struct {
		unsigned bit;
		const char *name;
	} flag_names[] = {{RULE_ROUND, "round"}, {RULE_WAIT, "wait"}, {RULE_LOCAL, "local"},
			  {RULE_SHARED, "shared"}, {RULE_BACKUP, "backup"},
			  {RULE_OUTER, "outer"}, {RULE_FRAGMENTS, "fragments"}};
	json_t *rules = json_array();
	for (int k = 0; rule_table[k]; k++) {
		const rule_class *r = rule_table[k];
		json_t *ps = json_array(), *fl = json_array();
		for (int i = 0; r->params && r->params[i]; i++)
			json_array_append_new(ps, field_schema(fields_find(&fields_rule_params,
									   r->params[i]),
							       &fields_rule_params, 0));
		for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
			if (r->flags & flag_names[i].bit)
				json_array_append_new(fl, json_string(flag_names[i].name));
		json_array_append_new(rules, json_pack("{s:s,s:b,s:o,s:s,s:o}", "name", r->name,
						       "sync", (r->flags & RULE_ROUND) != 0,
						       "flags", fl, "doc", r->doc ? r->doc : "",
						       "params", ps));
	}
	return json_pack("{s:o,s:o,s:o,s:o}", "fields", table_schema(&fields_run, 1),
			 "worker_fields", table_schema(&fields_worker, 1),
			 "controls", table_schema(&fields_controls, 1), "rules", rules);
}

/* the first key of object o that is none of a, b, c (c may be NULL) */
static const char *
unknown_key(json_t *o, const char *a, const char *b, const char *c)
{
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v) {
		if (strcmp(key, a) && strcmp(key, b) && (!c || strcmp(key, c)))
			return key;
	}
	return NULL;
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
		const char *key = json_is_object(e) ? unknown_key(e, "at", "worker", "set") : NULL;
		if (key) {
			suggest near;
			suggest_start(&near, key);
			suggest_offer(&near, "at");
			suggest_offer(&near, "worker");
			suggest_offer(&near, "set");
			rc = unknown_field(p, key, "", "expected at, worker, set", &near, err);
			free(s);
			return rc;
		}
		if (!json_is_object(e) || !json_is_object(at) || !jv == !jt ||
		    unknown_key(at, "v", "t", NULL)) {
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
