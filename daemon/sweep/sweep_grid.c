/* sweep_grid.c - a sweep file into its cells: axes, variants, seeds, the
 * cells' names (pure functions, no I/O; tests/test_sweep.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonout.h"
#include "sl.h"
#include "sweep.h"

/* keys whose value is a list by nature: a list there is the value, not an
 * axis (a sweep over schedules is a set of variants) */
static int
natural_list(const char *path)
{
	return !strcmp(path, "schedule") || !strcmp(path, "worker_overrides");
}

static void
join(char *out, size_t cap, const char *prefix, const char *key)
{
	if (prefix[0])
		snprintf(out, cap, "%s.%s", prefix, key);
	else
		snprintf(out, cap, "%s", key);
}

/* a list or an object holding one somewhere below (a value of an axis
 * must be plain): the path of the first, or 0 */
static int
find_list(const json_t *v, const char *at, char *where, size_t cap)
{
	if (json_is_array(v)) {
		snprintf(where, cap, "%s", at);
		return 1;
	}
	if (!json_is_object(v))
		return 0;
	const char *k;
	json_t *x;
	json_object_foreach((json_t *)v, k, x) {
		char p[256];
		join(p, sizeof(p), at, k);
		if (find_list(x, p, where, cap))
			return 1;
	}
	return 0;
}

/* one variant's axes: every list below obj (outside the natural lists),
 * in the order met; checked: not empty, no list in a value */
typedef struct axes_of {
	char key[SWEEP_MAX_AXES][128];
	json_t *vals[SWEEP_MAX_AXES]; /* borrowed arrays */
	int n;
} axes_of;

static int
collect(json_t *obj, const char *prefix, axes_of *a, char *err)
{
	const char *k;
	json_t *v;
	json_object_foreach(obj, k, v) {
		char path[256];
		join(path, sizeof(path), prefix, k);
		if (json_is_object(v)) {
			if (collect(v, path, a, err) < 0)
				return -1;
			continue;
		}
		if (!json_is_array(v) || natural_list(path))
			continue;
		if (!json_array_size(v))
			return sl_fail(err, SL_EINVAL,
				       "%s: an empty list (an axis needs at least one value)", path);
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x) {
			char at[300], where[300];
			snprintf(at, sizeof(at), "%s[%zu]", path, i);
			if (find_list(x, at, where, sizeof(where)))
				return sl_fail(err, SL_EINVAL,
					       "%s: a list inside a list (an axis takes numbers, "
					       "strings, booleans or objects; for combinations, "
					       "use \"variants\")", where);
		}
		if (a->n == SWEEP_MAX_AXES)
			return sl_fail(err, SL_EINVAL, "%s: more than %d axes", path,
				       SWEEP_MAX_AXES);
		size_t len = strlen(path);
		if (len >= sizeof(a->key[0]))
			return sl_fail(err, SL_EINVAL, "%s: the key path is too long", path);
		memcpy(a->key[a->n], path, len + 1);
		a->vals[a->n++] = v;
	}
	return 0;
}

/* set obj's value at a dotted path (its objects exist: the path came from
 * obj's own walk) */
static void
set_path(json_t *obj, const char *path, json_t *val)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", path);
	char *p = buf, *dot;
	while ((dot = strchr(p, '.'))) {
		*dot = 0;
		obj = json_object_get(obj, p);
		p = dot + 1;
	}
	json_object_set(obj, p, val);
}

/* a deep merge: src's keys over dst's, objects merged key by key */
static void
merge(json_t *dst, const json_t *src)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)src, k, v) {
		json_t *d = json_object_get(dst, k);
		if (json_is_object(d) && json_is_object(v))
			merge(d, v);
		else
			json_object_set_new(dst, k, json_deep_copy(v));
	}
}

/* a value as a label: strings bare, the rest as compact JSON */
static char *
label_of(const json_t *v)
{
	if (json_is_string(v))
		return strdup(json_string_value(v));
	return jsonout_dumps(v);
}

static uint64_t
fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

void
sweep_cell_name(const char *label, char *out, size_t cap)
{
	if (cap < 24) {
		out[0] = 0;
		return;
	}
	if (!label[0]) {
		snprintf(out, cap, "base");
		return;
	}
	size_t max = cap - 1, n = 0;
	int changed = 0;
	const size_t keep = max - 14; /* room for "-" and 12 hex digits */
	for (const char *p = label; *p && n < max; p++) {
		char c = *p;
		int safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			   (c >= '0' && c <= '9') || c == '.' || c == '=' || c == '-' || c == '_';
		if (c == ',')
			c = '_';
		else if (!safe) {
			c = '_';
			changed = 1;
		}
		out[n++] = c;
	}
	out[n] = 0;
	if (strlen(label) > max)
		changed = 1;
	if (changed) {
		if (n > keep)
			n = keep;
		snprintf(out + n, cap - n, "-%012llx",
			 (unsigned long long)(fnv1a(label) & 0xffffffffffffULL));
	}
}

int
sweep_in_shard(int index, int shard, int n_shards)
{
	return n_shards <= 1 || index % n_shards == shard;
}

/* the global axis list: k added once, in order */
static int
add_axis(sweep_grid *g, const char *k, char *err)
{
	for (int i = 0; i < g->n_axes; i++)
		if (!strcmp(g->axis[i].key, k))
			return 0;
	if (g->n_axes == SWEEP_MAX_AXES)
		return sl_fail(err, SL_EINVAL, "%s: more than %d axes", k, SWEEP_MAX_AXES);
	snprintf(g->axis[g->n_axes++].key, sizeof(g->axis[0].key), "%s", k);
	return 0;
}

/* append a cell: run (consumed), axes (consumed) */
static int
add_cell(sweep_grid *g, json_t *run, json_t *axes, char *err)
{
	if (g->n_cells == SWEEP_MAX_CELLS) {
		json_decref(run);
		json_decref(axes);
		return sl_fail(err, SL_EINVAL, "more than %d cells", SWEEP_MAX_CELLS);
	}
	if (!(g->n_cells & (g->n_cells - 1)) || !g->cell) {
		int cap = g->n_cells ? 2 * g->n_cells : 16;
		sweep_cell *c = realloc(g->cell, sizeof(*c) * (size_t)cap);
		if (!c) {
			json_decref(run);
			json_decref(axes);
			return sl_fail(err, SL_ENOMEM, "out of memory");
		}
		g->cell = c;
	}
	sweep_cell *c = &g->cell[g->n_cells];
	memset(c, 0, sizeof(*c));
	c->index = g->n_cells++;
	c->run = run;
	c->axes = axes;
	return 0;
}

/* the product of one (merged) run object's axes, with its variant name and
 * the seeds */
static int
expand_one(sweep_grid *g, json_t *obj, const char *variant, char *err)
{
	axes_of a = {.n = 0};
	if (collect(obj, "", &a, err) < 0)
		return -SL_EINVAL;
	if (variant && add_axis(g, "variant", err) < 0)
		return -SL_EINVAL;
	for (int i = 0; i < a.n; i++) {
		if (g->seeds && !strcmp(a.key[i], "seed"))
			return sl_fail(err, SL_EINVAL,
				       "seed: a list beside \"seeds\" (choose one: \"seeds\": N runs "
				       "seeds 1..N)");
		if (add_axis(g, a.key[i], err) < 0)
			return -SL_EINVAL;
	}
	size_t pos[SWEEP_MAX_AXES] = {0};
	int seeds = g->seeds ? g->seeds : 1;
	for (;;) {
		for (int s = 1; s <= seeds; s++) {
			json_t *run = json_deep_copy(obj), *axes = json_object();
			if (variant)
				json_object_set_new(axes, "variant", json_string(variant));
			for (int i = 0; i < a.n; i++) {
				json_t *v = json_array_get(a.vals[i], pos[i]);
				set_path(run, a.key[i], v);
				json_object_set(axes, a.key[i], v);
			}
			if (g->seeds) {
				json_object_set_new(run, "seed", json_integer(s));
				json_object_set_new(axes, "seed", json_integer(s));
			}
			if (add_cell(g, run, axes, err) < 0)
				return -SL_EINVAL;
		}
		int i = a.n - 1; /* the odometer: the last axis turns fastest */
		while (i >= 0 && ++pos[i] == json_array_size(a.vals[i]))
			pos[i--] = 0;
		if (i < 0)
			break;
	}
	return 0;
}

/* cells in one run object (before expanding: the limit's check names the
 * axes and their sizes) */
static double
count_cells(json_t *obj, int seeds, char *what, size_t cap, char *err)
{
	axes_of a = {.n = 0};
	if (collect(obj, "", &a, err) < 0)
		return -1;
	double n = seeds ? seeds : 1;
	size_t len = strlen(what);
	for (int i = 0; i < a.n; i++) {
		n *= (double)json_array_size(a.vals[i]);
		len += (size_t)snprintf(what + len, len < cap ? cap - len : 0, "%s%s %zu",
					len ? " x " : "", a.key[i], json_array_size(a.vals[i]));
		if (len >= cap)
			len = cap - 1;
	}
	if (seeds && len < cap)
		snprintf(what + len, cap - len, "%sseeds %d", len ? " x " : "", seeds);
	return n;
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
sweep_expand(const json_t *spec, sweep_grid *g, char *err)
{
	return sweep_expand_max(spec, SWEEP_MAX_CELLS, g, err);
}

/* the sweep's own keys of spec: "seeds" and "target" into g, "variants"
 * checked (an object of named partial run objects without the sweep's
 * own keys); 0 or -SL_EINVAL */
static int
own_keys(const json_t *spec, sweep_grid *g, char *err)
{
	json_t *seeds = json_object_get(spec, "seeds"), *variants = json_object_get(spec, "variants");
	json_t *target = json_object_get(spec, "target");
	if (seeds) {
		if (!json_is_integer(seeds) || json_integer_value(seeds) < 1 ||
		    json_integer_value(seeds) > 1000)
			return sl_fail(err, SL_EINVAL, "seeds: expected a count of seeds in [1, 1000] "
				       "(every cell runs with seeds 1..N)");
		g->seeds = (int)json_integer_value(seeds);
	}
	if (target) {
		if (!json_is_number(target) || json_number_value(target) <= 0 ||
		    json_number_value(target) > 1)
			return sl_fail(err, SL_EINVAL, "target: expected a test accuracy in (0, 1] "
				       "(for the columns updates_to_target and virtual_s_to_target)");
		g->target = json_number_value(target);
	}
	if (variants && (!json_is_object(variants) || !json_object_size(variants)))
		return sl_fail(err, SL_EINVAL, "variants: expected an object of named partial run "
			       "objects ({\"name\": {...}, ...}), not empty");
	const char *k;
	json_t *v;
	json_object_foreach(variants, k, v) {
		if (!json_is_object(v))
			return sl_fail(err, SL_EINVAL, "variants.%s: expected a partial run object", k);
		static const char *const own[] = {"seeds", "variants", "target"};
		for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
			if (json_object_get(v, own[i]))
				return sl_fail(err, SL_EINVAL, "variants.%s.%s: the sweep's own "
					       "keys (seeds, variants, target) go at the top of "
					       "the file", k, own[i]);
		if (!k[0] || strlen(k) > 48)
			return sl_fail(err, SL_EINVAL, "variants: a name of 1 to 48 characters, "
				       "got \"%s\"", k);
	}
	return 0;
}

/* the grid's size, before it is built: more than max_cells refused,
 * naming each variant's axes and their sizes; 0 or -SL_EINVAL */
static int
check_size(json_t *base, json_t *variants, int seeds, int max_cells, char *err)
{
	double total = 0;
	char what[512] = "";
	if (variants) {
		const char *k;
		json_t *v;
		json_object_foreach(variants, k, v) {
			json_t *m = json_deep_copy(base);
			merge(m, v);
			char w[256] = "";
			double n = count_cells(m, seeds, w, sizeof(w), err);
			json_decref(m);
			if (n < 0)
				return -SL_EINVAL;
			total += n;
			size_t len = strlen(what);
			snprintf(what + len, sizeof(what) - len, "%s%s: %s", len ? "; " : "", k,
				 w[0] ? w : "1");
		}
	} else {
		total = count_cells(base, seeds, what, sizeof(what), err);
		if (total < 0)
			return -SL_EINVAL;
	}
	if (total > max_cells)
		return sl_fail(err, SL_EINVAL, "the grid has %.0f cells (%s): more than %d", total,
			       what, max_cells);
	return 0;
}

/* the cells: base's product, or each variant merged over base in turn */
static int
expand_variants(sweep_grid *g, json_t *base, json_t *variants, char *err)
{
	if (!variants)
		return expand_one(g, base, NULL, err);
	const char *k;
	json_t *v;
	json_object_foreach(variants, k, v) {
		json_t *m = json_deep_copy(base);
		merge(m, v);
		int rc = expand_one(g, m, k, err);
		json_decref(m);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* a cell's label, "key=value,..." in the global axis order (malloc'd;
 * NULL out of memory) */
static char *
cell_label(const sweep_grid *g, const sweep_cell *c)
{
	size_t cap = 64, len = 0;
	char *l = malloc(cap);
	if (!l)
		return NULL;
	l[0] = 0;
	for (int j = 0; j < g->n_axes; j++) {
		json_t *v = json_object_get(c->axes, g->axis[j].key);
		if (!v)
			continue;
		char *s = label_of(v);
		size_t need = len + strlen(g->axis[j].key) + strlen(s ? s : "") + 3;
		if (need > cap) {
			while (cap < need)
				cap *= 2;
			char *nl = realloc(l, cap);
			if (!nl) {
				free(s);
				free(l);
				return NULL;
			}
			l = nl;
		}
		len += (size_t)snprintf(l + len, cap - len, "%s%s=%s", len ? "," : "",
					g->axis[j].key, s ? s : "");
		free(s);
	}
	return l;
}

/* two labels that differ only in unsafe characters, or a 48-bit hash
 * collision: refused rather than one cell overwriting another */
static int
unique_names(const sweep_grid *g, char *err)
{
	if (g->n_cells < 2)
		return 0;
	char **names = malloc(sizeof(char *) * (size_t)g->n_cells);
	if (!names)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	for (int i = 0; i < g->n_cells; i++)
		names[i] = g->cell[i].name;
	qsort(names, (size_t)g->n_cells, sizeof(char *), cmp_name);
	int rc = 0;
	for (int i = 1; i < g->n_cells && rc == 0; i++)
		if (!strcmp(names[i], names[i - 1]))
			rc = sl_fail(err, SL_EINVAL, "two cells have the same name \"%s\" (two "
				     "variants the same? rename one)", names[i]);
	free(names);
	return rc;
}

int
sweep_expand_max(const json_t *spec, int max_cells, sweep_grid *g, char *err)
{
	memset(g, 0, sizeof(*g));
	if (!json_is_object(spec))
		return sl_fail(err, SL_EINVAL, "a sweep file is a JSON object (a run object with lists)");
	json_t *base = json_deep_copy(spec);
	json_t *variants = json_incref(json_object_get(base, "variants"));
	int rc = own_keys(base, g, err);
	json_object_del(base, "seeds");
	json_object_del(base, "variants");
	json_object_del(base, "target");
	if (rc == 0) /* the size first, so a grid too large is refused before it is built */
		rc = check_size(base, variants, g->seeds, max_cells, err);
	if (rc == 0)
		rc = expand_variants(g, base, variants, err);
	json_decref(variants);
	json_decref(base);
	if (rc == 0 && g->seeds) /* the last column, whatever the variants */
		rc = add_axis(g, "seed", err);
	/* labels and names, in the global axis order; names collision-free */
	for (int i = 0; rc == 0 && i < g->n_cells; i++) {
		sweep_cell *c = &g->cell[i];
		if (!(c->label = cell_label(g, c)))
			rc = sl_fail(err, SL_ENOMEM, "out of memory");
		else
			sweep_cell_name(c->label, c->name, sizeof(c->name));
	}
	if (rc == 0)
		rc = unique_names(g, err);
	if (rc < 0)
		sweep_grid_free(g);
	return rc;
}

void
sweep_grid_free(sweep_grid *g)
{
	for (int i = 0; i < g->n_cells; i++) {
		json_decref(g->cell[i].run);
		json_decref(g->cell[i].axes);
		free(g->cell[i].label);
	}
	free(g->cell);
	memset(g, 0, sizeof(*g));
}

/* ---- what changed ---------------------------------------------------------- */

static void
diff_add(char *out, size_t cap, int *n, const char *path)
{
	size_t len = strlen(out);
	if (len + strlen(path) + 6 < cap)
		snprintf(out + len, cap - len, "%s%s", len ? ", " : "", path);
	else if (len + 4 < cap && (len < 3 || strcmp(out + len - 3, "...")))
		snprintf(out + len, cap - len, "...");
	(*n)++;
}

static void
diff_walk(const json_t *a, const json_t *b, const char *prefix, char *out, size_t cap, int *n)
{
	if (json_is_object(a) && json_is_object(b)) {
		const char *k;
		json_t *v;
		json_object_foreach((json_t *)a, k, v) {
			char p[256];
			join(p, sizeof(p), prefix, k);
			json_t *w = json_object_get(b, k);
			if (!w)
				diff_add(out, cap, n, p);
			else
				diff_walk(v, w, p, out, cap, n);
		}
		json_object_foreach((json_t *)b, k, v) {
			if (!json_object_get(a, k)) {
				char p[256];
				join(p, sizeof(p), prefix, k);
				diff_add(out, cap, n, p);
			}
		}
		return;
	}
	if (!json_equal((json_t *)a, (json_t *)b))
		diff_add(out, cap, n, prefix[0] ? prefix : "(the whole file)");
}

int
sweep_diff(const json_t *a, const json_t *b, char *out, size_t cap)
{
	int n = 0;
	if (cap)
		out[0] = 0;
	diff_walk(a, b, "", out, cap, &n);
	return n;
}
