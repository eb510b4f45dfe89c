/* config.c - run object defaults and validation. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"

void
config_defaults(run_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->model, "mlp:784-256-128-10");
	strcpy(c->dataset, "fashion-mnist");
	strcpy(c->device, "auto");
	strcpy(c->rule, "asgd");
	c->rp.s = 3;
	c->rp.lambda = 0.04;
	c->rp.H = 8;
	c->rp.n = 2;
	c->rp.local_lr = 0.1;
	c->rp.m = 0.95;
	c->rp.beta = 0.9;
	c->rp.period = 10;
	c->rp.warmup = 200;
	strcpy(c->rp.local_opt, "sgd");
	c->lr = 0.05;
	c->batch = 64;
	c->workers = 1;
	c->delay.dist = DELAY_NONE;
	strcpy(c->clock, "wall");
	c->seed = 1;
	c->eval_every = 200;
}

const char *
delay_dist_name(delay_dist d)
{
	static const char *const names[] = {
		[DELAY_NONE] = "none", [DELAY_CONST] = "const",
		[DELAY_UNIFORM] = "uniform", [DELAY_EXP] = "exp",
		[DELAY_LOGNORMAL] = "lognormal", [DELAY_PARETO] = "pareto",
		[DELAY_VERSION] = "version",
	};
	return (unsigned)d < sizeof(names) / sizeof(names[0]) ? names[d] : "?";
}

static int
check_delay(const delay_cfg *d, const char *field, char *err)
{
	if (!(d->mean_ms >= 0) || d->mean_ms > 3600e3)
		return sl_fail(err, SL_EINVAL, "%s.mean_ms: must be in 0..3600000",
			       field);
	if (d->dist == DELAY_LOGNORMAL && !(d->sigma > 0 && d->sigma <= 10))
		return sl_fail(err, SL_EINVAL, "%s.sigma: must be in (0, 10]", field);
	if (d->dist == DELAY_PARETO && !(d->alpha > 1 && d->alpha <= 100))
		return sl_fail(err, SL_EINVAL,
			       "%s.alpha: must be in (1, 100] (a finite mean)", field);
	if (d->dist == DELAY_UNIFORM && !(d->spread >= 0 && d->spread <= 1))
		return sl_fail(err, SL_EINVAL, "%s.spread: must be in [0, 1]", field);
	if (d->dist == DELAY_VERSION && (d->s < 0 || d->s > 1000000))
		return sl_fail(err, SL_EINVAL, "%s.s: must be in 0..1000000", field);
	if (!(d->bandwidth_mbps >= 0))
		return sl_fail(err, SL_EINVAL, "%s.bandwidth_mbps: must be >= 0",
			       field);
	return 0;
}

int
config_rule_known(const char *name)
{
	static const char *const rules[] = {
		"ssgd", "asgd", "softsync", "ssp", "sasgd", "dcasgd",
		"odsgd", "localsgd", "easgd", "hogwild", NULL,
	};
	for (int i = 0; rules[i]; i++)
		if (!strcmp(name, rules[i]))
			return 1;
	return 0;
}

int
config_validate(const run_config *c, char *err)
{
	int rc;
	if (!config_rule_known(c->rule))
		return sl_fail(err, SL_EINVAL,
			       "rule: unknown \"%s\" (expected ssgd, asgd, softsync, ssp, sasgd, dcasgd, odsgd, localsgd, easgd, hogwild)",
			       c->rule);
	if ((rc = backend_check_name(c->device, err)) < 0)
		return rc;
	if (strcmp(c->clock, "wall") && strcmp(c->clock, "virtual"))
		return sl_fail(err, SL_EINVAL,
			       "clock: unknown \"%s\" (expected wall, virtual)",
			       c->clock);
	if (!(c->lr > 0) || !isfinite(c->lr) || c->lr > 100)
		return sl_fail(err, SL_EINVAL, "lr: must be > 0 and <= 100");
	if (!(c->momentum >= 0 && c->momentum < 1))
		return sl_fail(err, SL_EINVAL, "momentum: must be in [0, 1)");
	if (!(c->weight_decay >= 0 && c->weight_decay < 1))
		return sl_fail(err, SL_EINVAL, "weight_decay: must be in [0, 1)");
	if (c->batch < 1 || c->batch > 65536)
		return sl_fail(err, SL_EINVAL, "batch: must be in 1..65536");
	if (c->workers < 1 || c->workers > CFG_MAX_WORKERS)
		return sl_fail(err, SL_EINVAL, "workers: must be in 1..%d",
			       CFG_MAX_WORKERS);
	if (c->threads < 0 || c->threads > 64)
		return sl_fail(err, SL_EINVAL, "threads: must be in 0..64");
	if ((rc = check_delay(&c->delay, "delay", err)) < 0)
		return rc;
	for (int i = 0; i < c->n_overrides; i++) {
		const worker_override *o = &c->overrides[i];
		char f[48];
		if (o->id < 0 || o->id >= CFG_MAX_WORKERS)
			return sl_fail(err, SL_EINVAL,
				       "worker_overrides[%d].id: must be in 0..%d", i,
				       CFG_MAX_WORKERS - 1);
		snprintf(f, sizeof(f), "worker_overrides[%d].delay", i);
		if (o->has_delay && (rc = check_delay(&o->delay, f, err)) < 0)
			return rc;
		if (o->has_spb && (o->spb_depth < 0 || o->spb_depth > 64))
			return sl_fail(err, SL_EINVAL,
				       "worker_overrides[%d].spb_depth: must be in 0..64", i);
		if (o->has_speed && !(o->speed > 0 && o->speed <= 100))
			return sl_fail(err, SL_EINVAL,
				       "worker_overrides[%d].speed: must be in (0, 100]", i);
	}
	if (c->stop_epochs < 0 || !isfinite(c->stop_epochs))
		return sl_fail(err, SL_EINVAL, "stop.epochs: must be >= 0");
	if (c->stop_seconds < 0 || !isfinite(c->stop_seconds))
		return sl_fail(err, SL_EINVAL, "stop.seconds: must be >= 0");
	if (c->stop_target_acc < 0 || c->stop_target_acc > 1)
		return sl_fail(err, SL_EINVAL, "stop.target_acc: must be in [0, 1]");
	if (c->eval_every < 0)
		return sl_fail(err, SL_EINVAL, "eval_every: must be >= 0");
	if (c->rp.s < 0 || c->rp.H < 1 || c->rp.n < 1 || c->rp.lambda < 0 ||
	    !(c->rp.local_lr > 0) || c->rp.period < 1 || c->rp.warmup < 0 ||
	    c->rp.beta < 0 || c->rp.m < 0 || c->rp.m >= 1)
		return sl_fail(err, SL_EINVAL,
			       "rule_params: out of range (s >= 0, H >= 1, n >= 1, lambda >= 0, local_lr > 0, period >= 1, warmup >= 0, 0 <= m < 1)");
	return 0;
}
