/* config.c - run object defaults and validation. */
#include "config.h"

#include "fields.h"
#include "graph_spec.h"
#include "model.h"
#include "split.h"
#include "suggest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void
config_defaults(run_config *c)
{
	memset(c, 0, sizeof(*c));
	fields_defaults(&fields_run, c);
}

const char *
delay_dist_name(delay_dist d)
{
	const char *n = field_choice(fields_find(&fields_delay, "dist"), (int)d);
	return n ? n : "?";
}

int
config_rule_known(const char *name)
{
	return rule_find(name) != NULL;
}

int
config_choice_fail(const field_desc *f, const char *path, const char *s, char *err)
{
	char list[176] = "expected ", note[SL_ERR_LEN];
	size_t n = strlen(list);
	field_choices_str(f, list + n, sizeof(list) - n);
	suggest near;
	suggest_start(&near, s);
	const char *c;
	for (int i = 0; (c = field_choice(f, i)); i++)
		suggest_offer(&near, c);
	return sl_fail(err, SL_EINVAL, "%s: unknown \"%s\"%s", path, s,
		       suggest_note(note, sizeof(note), list, NULL, near.best));
}

int
config_validate(const run_config *c, char *err)
{
	int rc = fields_validate(&fields_run, c, "", err);
	if (rc < 0)
		return rc;
	split_spec sp;
	if ((rc = split_parse(c->data_split, &sp, err)) < 0)
		return rc;
	if (c->workers == 0 && strcmp(c->clock, "wall"))
		return sl_fail(err, SL_EINVAL, "workers: 0 (remote workers only) needs the wall "
			       "clock; the virtual clock simulates its workers: give 1 or more");
	for (int i = 0; i < c->n_overrides; i++) {
		const worker_override *o = &c->overrides[i];
		char p[48];
		snprintf(p, sizeof(p), "worker_overrides[%d]", i);
		if ((rc = fields_validate(&fields_override, o, p, err)) < 0)
			return rc;
		snprintf(p, sizeof(p), "worker_overrides[%d].spb_depth", i);
		if (o->has_spb && (rc = config_spb_fits(p, o->spb_depth, c->model, err)) < 0)
			return rc;
	}
	return 0;
}

int
config_spb_depths(const char *spec, int *depths, int max)
{
	int cuts[CFG_SPB_MAX], n = 0;
	int k = fields_model_cuts(spec, cuts, CFG_SPB_MAX);
	if (k < 0 || max < 1)
		return k < 0 ? -1 : 0;
	depths[n++] = 0;
	/* ascending and distinct: those up to CFG_SPB_MAX are among the first */
	for (int i = 0; i < SL_MIN(k, CFG_SPB_MAX) && n < max; i++)
		if (cuts[i] <= CFG_SPB_MAX)
			depths[n++] = cuts[i];
	return n;
}

int
config_spb_fits(const char *path, int depth, const char *spec, char *err)
{
	int layers = fields_model_layers(spec);
	if (layers >= 0 && depth > layers)
		return sl_fail(err, SL_EINVAL,
			       "%s: must be in [0, %d] (\"%s\" has %d parameterised layers), got %d",
			       path, layers, spec, layers, depth);
	return config_spb_at_boundary(path, depth, spec, err);
}

int
config_spb_at_boundary(const char *path, int depth, const char *spec, char *err)
{
	int d[CFG_SPB_MAX + 1], layers = fields_model_layers(spec);
	int n = config_spb_depths(spec, d, CFG_SPB_MAX + 1), below = 0, above = 0;
	if (n < 0 || depth <= 0 || depth >= layers)
		return 0; /* an unknown spec, or full backprop */
	for (int i = 1; i < n; i++) {
		if (d[i] == depth)
			return 0;
		if (d[i] < depth)
			below = d[i];
		else if (!above)
			above = d[i];
	}
	char list[112], label[64], near[40];
	model_depths_str(d + 1, n - 1, list, sizeof(list));
	if (above)
		snprintf(near, sizeof(near), "%d and %d", below, above);
	else
		snprintf(near, sizeof(near), "%d", below);
	return sl_fail(err, SL_EINVAL,
		       "%s: %d ends inside a block of %s: expected 0 (full backprop) or a block "
		       "boundary: %s (the nearest: %s)",
		       path, depth, graph_spec_label(spec, label, sizeof(label)), list, near);
}

int
config_optim_fits(const char *rule, const opt_cfg *o, double momentum, char *err)
{
	const rule_class *rc = rule_find(rule);
	const char *name = field_choice(fields_find(&fields_run, "optimizer"), o->kind);
	if ((o->kind == OPT_MOMENTUM || o->kind == OPT_NESTEROV) && !(momentum > 0))
		return sl_fail(err, SL_EINVAL, "momentum: optimizer %s needs momentum > 0 "
			       "(0.9 is usual), got %g", name, momentum);
	if (rc && (rc->flags & RULE_SHARED) && o->kind != OPT_SGD)
		return sl_fail(err, SL_EINVAL, "optimizer: %s steps the shared weights from "
			       "its threads without a lock, with sgd or heavy-ball momentum; %s "
			       "needs state updated under the server's lock: use another rule, "
			       "or optimizer sgd", rc->name, name);
	if (rc && (rc->flags & RULE_SHARED) && o->clip > 0)
		return sl_fail(err, SL_EINVAL, "clip: %s steps the shared weights without a "
			       "lock; clipping is not offered there: use clip 0", rc->name);
	const lr_sched *s = &o->sched;
	if ((s->kind == SCHED_COSINE || s->kind == SCHED_LINEAR) &&
	    !(s->decay_updates > s->warmup))
		return sl_fail(err, SL_EINVAL, "lr_schedule.decay_updates: must be past the "
			       "warm-up (%g updates) for a %s decay, got %g", s->warmup,
			       s->kind == SCHED_COSINE ? "cosine" : "linear", s->decay_updates);
	return 0;
}

int
config_compress_fits(const char *rule, const rule_params *rp, char *err)
{
	const rule_class *rc = rule_find(rule);
	if (rc && (rc->flags & RULE_SHARED) && rp->compress[0] && strcmp(rp->compress, "none"))
		return sl_fail(err, SL_EINVAL, "rule_params.compress: %s pushes nothing (its "
			       "threads step the shared weights in place), so there is nothing to "
			       "compress: use compress \"none\" or another rule", rc->name);
	if (rc && rc->push_bytes && rp->compress[0] && strcmp(rp->compress, "none"))
		return sl_fail(err, SL_EINVAL, "rule_params.compress: %s sends a message of its "
			       "own (its rule_params say what it keeps), which the compressors do "
			       "not take: use compress \"none\"", rc->name);
	int listed = 0;
	for (int i = 0; rc && rc->params && rc->params[i]; i++)
		listed |= !strcmp(rc->params[i], "compress");
	if (rc && !listed && rp->compress[0] && strcmp(rp->compress, "none"))
		return sl_fail(err, SL_EINVAL, "rule_params.compress: %s's push is sparse "
			       "already (the values at a mask every worker draws alike) and is "
			       "not compressed: use compress \"none\" or another rule", rc->name);
	return 0;
}

int
config_fragments_fit(const char *rule, const rule_params *rp, int units, char *err)
{
	const rule_class *rc = rule_find(rule);
	if (!rc || !(rc->flags & RULE_FRAGMENTS))
		return 0;
	if (units >= 0 && rp->fragments > units)
		return sl_fail(err, SL_EINVAL, "rule_params.fragments: %g, but the model has %d "
			       "unit%s (its parameterised layers, a residual block counting as "
			       "one) to cut into fragments: give at most %d", rp->fragments,
			       units, units == 1 ? "" : "s", units);
	if (rp->fragments > rp->H)
		return sl_fail(err, SL_EINVAL, "rule_params.fragments: %g, more than H (%g): "
			       "a fragment syncs every H / fragments local steps", rp->fragments,
			       rp->H);
	double gap = floor(rp->H / rp->fragments);
	if (rp->overlap >= gap)
		return sl_fail(err, SL_EINVAL, "rule_params.overlap: %g, but it must be below "
			       "floor(H / fragments) = %g (H %g, fragments %g): a fragment's "
			       "reply is taken before the next fragment is sent", rp->overlap,
			       gap, rp->H, rp->fragments);
	return 0;
}

int
config_overrides_fit(const run_config *c, char *err)
{
	for (int i = 0; i < c->n_overrides; i++)
		if (c->overrides[i].id >= c->workers)
			return sl_fail(err, SL_EINVAL,
				       "worker_overrides[%d].id: no worker %d (the run has %d workers: ids 0..%d)",
				       i, c->overrides[i].id, c->workers, c->workers - 1);
	return 0;
}
