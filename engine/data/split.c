/* split.c - a training set split among workers (split.h). */
#include "split.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the streams a split draws from: one per split made (gen) */
#define SPLIT_STREAM 0x53504c4954000000ull /* "SPLIT" */

static const char split_expected[] =
	"expected iid, shards:<K>, dirichlet:<alpha> or contiguous";

static int
parse_shards(const char *arg, split_spec *out, char *err)
{
	char *end;
	errno = 0;
	long k = strtol(arg, &end, 10);
	if (end == arg || *end || errno || k < 1 || k > 65536)
		return sl_fail(err, SL_EINVAL, "data_split: shards:%s: K (shards per worker) "
			       "must be an integer in [1, 65536]", arg);
	*out = (split_spec){.kind = SPLIT_SHARDS, .k = (int)k};
	return 0;
}

static int
parse_dirichlet(const char *arg, split_spec *out, char *err)
{
	char *end;
	errno = 0;
	double a = strtod(arg, &end);
	if (end == arg || *end || errno || !isfinite(a) || !(a > 0))
		return sl_fail(err, SL_EINVAL, "data_split: dirichlet:%s: alpha must be a "
			       "finite number > 0 (0.5 and 0.1 are usual; smaller is more skewed)",
			       arg);
	*out = (split_spec){.kind = SPLIT_DIRICHLET, .alpha = a};
	return 0;
}

int
split_parse(const char *s, split_spec *out, char *err)
{
	if (!strcmp(s, "iid") || !strcmp(s, "contiguous")) {
		*out = (split_spec){.kind = *s == 'i' ? SPLIT_IID : SPLIT_CONTIGUOUS};
		return 0;
	}
	if (!strncmp(s, "shards:", 7))
		return parse_shards(s + 7, out, err);
	if (!strncmp(s, "dirichlet:", 10))
		return parse_dirichlet(s + 10, out, err);
	return sl_fail(err, SL_EINVAL, "data_split: unknown \"%s\" (%s)", s, split_expected);
}

int
split_fits(const split_spec *sp, uint32_t n_train, int labelled, int n_parts, char *err)
{
	const char *name = sp->kind == SPLIT_SHARDS ? "shards" : "dirichlet";
	uint64_t need = (uint64_t)n_parts;
	if (sp->kind == SPLIT_IID)
		return 0;
	if (sp->kind != SPLIT_CONTIGUOUS && !labelled)
		return sl_fail(err, SL_EINVAL, "data_split: %s splits by class label and this "
			       "data set has none (text): use contiguous or iid", name);
	if (sp->kind == SPLIT_SHARDS)
		need *= (uint64_t)sp->k;
	else if (sp->kind == SPLIT_DIRICHLET)
		need *= SPLIT_MIN_PART;
	if (need > n_train)
		return sl_fail(err, SL_EINVAL, "data_split: %d workers need %llu training "
			       "samples (%s), the data set has %u", n_parts,
			       (unsigned long long)need,
			       sp->kind == SPLIT_SHARDS ? "one a shard"
			       : sp->kind == SPLIT_DIRICHLET ? "10 a worker"
							     : "one a worker",
			       n_train);
	return 0;
}

double
split_gamma(rng *r, double a)
{
	if (a < 1) {
		double u = rng_uniform(r);
		return split_gamma(r, a + 1) * pow(u, 1 / a);
	}
	double d = a - 1.0 / 3, c = 1 / sqrt(9 * d);
	for (;;) {
		double x = rng_normal(r), v = 1 + c * x;
		if (v <= 0)
			continue;
		v = v * v * v;
		double u = rng_uniform(r);
		if (u < 1 - 0.0331 * x * x * x * x ||
		    log(u) < 0.5 * x * x + d * (1 - v + log(v)))
			return d * v;
	}
}

/* the training indices grouped by label, ascending within a class:
 * class k is by[start[k] .. start[k+1]); start has 2 (classes + 1)
 * entries, the second half scratch */
static void
by_class(const dataset *d, uint32_t *by, uint32_t *start)
{
	uint32_t *at = start + d->classes + 1;
	memset(start, 0, sizeof(uint32_t) * (size_t)(d->classes + 1));
	for (uint32_t i = 0; i < d->n; i++)
		start[d->y[i] + 1]++;
	for (int k = 0; k < d->classes; k++)
		start[k + 1] += start[k];
	memcpy(at, start, sizeof(uint32_t) * (size_t)d->classes);
	for (uint32_t i = 0; i < d->n; i++)
		by[at[d->y[i]]++] = i;
}

/* owner[i] (the part of sample i) into the concatenated parts */
static void
gather(const uint16_t *owner, uint32_t n, int n_parts, uint32_t *idx, uint32_t *off)
{
	memset(off, 0, sizeof(uint32_t) * (size_t)(n_parts + 1));
	for (uint32_t i = 0; i < n; i++)
		off[owner[i] + 1]++;
	for (int j = 0; j < n_parts; j++)
		off[j + 1] += off[j];
	uint32_t at[SPLIT_MAX_PARTS];
	memcpy(at, off, sizeof(uint32_t) * (size_t)n_parts);
	for (uint32_t i = 0; i < n; i++)
		idx[at[owner[i]]++] = i;
}

static void
own_contiguous(uint32_t n, int n_parts, uint16_t *owner)
{
	for (int j = 0; j < n_parts; j++)
		for (uint64_t i = (uint64_t)n * j / n_parts; i < (uint64_t)n * (j + 1) / n_parts; i++)
			owner[i] = (uint16_t)j;
}

/* FedAvg's pathological split: shard s is by[s n / S .. (s+1) n / S) of
 * the label-sorted indices, S = n_parts K; the shard ids shuffled, part j
 * takes the K at j K .. j K + K */
static int
own_shards(const dataset *d, int n_parts, int k, rng *g, uint16_t *owner)
{
	uint32_t s = (uint32_t)n_parts * (uint32_t)k, n = d->n;
	uint32_t *by = malloc(sizeof(uint32_t) * n), *start = malloc(sizeof(uint32_t) * 2 * (size_t)(d->classes + 1));
	uint32_t *deal = malloc(sizeof(uint32_t) * s);
	int ok = by && start && deal;
	if (ok) {
		by_class(d, by, start);
		for (uint32_t i = 0; i < s; i++)
			deal[i] = i;
		rng_shuffle(g, deal, s);
		for (uint32_t i = 0; i < s; i++) {
			uint32_t sh = deal[i];
			for (uint64_t t = (uint64_t)n * sh / s; t < (uint64_t)n * (sh + 1) / s; t++)
				owner[by[t]] = (uint16_t)(i / (uint32_t)k);
		}
	}
	free(by);
	free(start);
	free(deal);
	return ok ? 0 : -SL_ENOMEM;
}

/* one class's indices I (shuffled) cut by a Dirichlet(alpha) draw p,
 * balanced: a part already holding n / N samples gets none */
static void
deal_class(uint32_t *cls, uint32_t m, int n_parts, double alpha, uint32_t n, rng *g,
	   uint32_t *size, uint16_t *owner)
{
	double p[SPLIT_MAX_PARTS], sum = 0, cum = 0;
	rng_shuffle(g, cls, m);
	for (int j = 0; j < n_parts; j++) {
		p[j] = split_gamma(g, alpha);
		if ((uint64_t)size[j] * (uint64_t)n_parts >= n)
			p[j] = 0;
		sum += p[j];
	}
	if (!(sum > 0)) /* every draw underflowed or every part is full */
		for (int j = 0; j < n_parts; j++)
			sum += p[j] = (uint64_t)size[j] * (uint64_t)n_parts < n ? 1 : 0;
	if (!(sum > 0))
		for (int j = 0; j < n_parts; j++)
			sum += p[j] = 1;
	uint32_t lo = 0;
	for (int j = 0; j < n_parts; j++) {
		cum += p[j] / sum;
		uint32_t hi = j == n_parts - 1 ? m : (uint32_t)floor(cum * m);
		hi = hi < lo ? lo : hi > m ? m : hi;
		for (uint32_t t = lo; t < hi; t++)
			owner[cls[t]] = (uint16_t)j;
		size[j] += hi - lo;
		lo = hi;
	}
}

/* NIID-Bench's label skew: draws until every part holds SPLIT_MIN_PART */
static int
own_dirichlet(const dataset *d, int n_parts, double alpha, rng *g, uint16_t *owner,
	      char *err)
{
	uint32_t *by = malloc(sizeof(uint32_t) * d->n), *start = malloc(sizeof(uint32_t) * 2 * (size_t)(d->classes + 1));
	uint32_t *cls = malloc(sizeof(uint32_t) * d->n), size[SPLIT_MAX_PARTS];
	int rc = by && start && cls ? -SL_EINVAL : -SL_ENOMEM;
	if (rc == -SL_EINVAL)
		by_class(d, by, start);
	for (int t = 0; rc == -SL_EINVAL && t < SPLIT_TRIES; t++) {
		uint32_t least = UINT32_MAX;
		memset(size, 0, sizeof(size));
		for (int k = 0; k < d->classes; k++) {
			uint32_t m = start[k + 1] - start[k];
			memcpy(cls, by + start[k], sizeof(uint32_t) * m);
			deal_class(cls, m, n_parts, alpha, d->n, g, size, owner);
		}
		for (int j = 0; j < n_parts; j++)
			least = size[j] < least ? size[j] : least;
		if (least >= SPLIT_MIN_PART)
			rc = 0;
	}
	free(by);
	free(start);
	free(cls);
	if (rc == -SL_EINVAL)
		sl_fail(err, SL_EINVAL, "data_split: dirichlet:%g found no split of %u samples "
			"into %d parts of %d or more in %d draws: a larger alpha or fewer workers",
			alpha, d->n, n_parts, SPLIT_MIN_PART, SPLIT_TRIES);
	else if (rc < 0)
		sl_fail(err, SL_ENOMEM, "data_split: out of memory");
	return rc;
}

int
split_make(const split_spec *sp, const dataset *d, int n_parts, uint64_t seed,
	   uint64_t gen, uint32_t *idx, uint32_t *off, char *err)
{
	int rc = split_fits(sp, d->n, ds_ylen(d) == 1 && d->y, n_parts, err);
	if (rc < 0)
		return rc;
	if (sp->kind == SPLIT_IID || n_parts < 1 || n_parts > SPLIT_MAX_PARTS)
		return sl_fail(err, SL_EINVAL, "data_split: no split of %d parts", n_parts);
	uint16_t *owner = malloc(sizeof(uint16_t) * (d->n ? d->n : 1));
	if (!owner)
		return sl_fail(err, SL_ENOMEM, "data_split: out of memory");
	rng g;
	rng_seed(&g, seed, SPLIT_STREAM + gen);
	if (sp->kind == SPLIT_CONTIGUOUS)
		own_contiguous(d->n, n_parts, owner);
	else if (sp->kind == SPLIT_SHARDS &&
		 (rc = own_shards(d, n_parts, sp->k, &g, owner)) < 0)
		sl_fail(err, SL_ENOMEM, "data_split: out of memory");
	else if (sp->kind == SPLIT_DIRICHLET)
		rc = own_dirichlet(d, n_parts, sp->alpha, &g, owner, err);
	if (rc == 0)
		gather(owner, d->n, n_parts, idx, off);
	free(owner);
	return rc;
}

void
split_hist(const dataset *d, const uint32_t *idx, uint32_t n, uint32_t *counts)
{
	memset(counts, 0, sizeof(uint32_t) * (size_t)d->classes);
	for (uint32_t i = 0; i < n; i++)
		counts[d->y[idx[i]]]++;
}
