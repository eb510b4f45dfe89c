/* split_run.c - the run's data split ("data_split", engine/data/split.h):
 * made for the worker count when the run starts, made again when the
 * count changes, and each worker's sampler over its own part (its own
 * seeded permutation per epoch of its part, its own epoch counter). Under
 * "iid" none of this runs: step.c's one shared permutation is the sampler.
 * docs/architecture.md, "Non-IID data". */
#include "run_impl.h"

#include <stdlib.h>
#include <string.h>

/* a worker's permutation of its part: one stream per (split, worker,
 * epoch of its part) */
#define SAMPLE_STREAM 0x5350000000000000ull

static int
split_labelled(const run *r)
{
	const dataset *d = &r->data->train;
	return ds_ylen(d) == 1 && d->y != NULL;
}

/* the class counts of part j (or of the whole set under iid) */
static void
split_count(run *r)
{
	const dataset *d = &r->data->train;
	if (!r->part_cls)
		return;
	if (r->split.kind == SPLIT_IID) {
		memset(r->part_cls, 0, sizeof(uint32_t) * (size_t)d->classes);
		for (uint32_t i = 0; i < d->n; i++)
			r->part_cls[d->y[i]]++;
		return;
	}
	for (int j = 0; j < r->split_n; j++)
		split_hist(d, r->part + r->part_off[j], r->part_off[j + 1] - r->part_off[j],
			   r->part_cls + (size_t)j * (size_t)d->classes);
}

/* the split number gen for n workers into the run (every worker starts
 * a new epoch of its new part at its next batch) */
static int
split_build(run *r, int n, uint64_t gen, char *err)
{
	int rc = split_make(&r->split, &r->data->train, n, r->cfg.seed, gen, r->part,
			    r->part_off, err);
	if (rc < 0)
		return rc;
	r->split_n = n;
	r->split_gen = gen + 1;
	for (int i = 0; i < r->n_slots; i++)
		r->w[i]->sp_pos = r->w[i]->sp_n = 0;
	split_count(r);
	return 0;
}

int
split_run_fits(const run *r, int n, char *err)
{
	const dataset *d = &r->data->train;
	return split_fits(&r->split, d->n, split_labelled(r), n, err);
}

/* cfg.data_split parsed, the arrays its kind needs made (iid: the
 * whole set's class counts) */
static int
split_setup(run *r, char *err)
{
	const dataset *d = &r->data->train;
	int rc = split_parse(r->cfg.data_split, &r->split, err);
	if (rc < 0)
		return rc;
	free(r->part);
	free(r->part_cls);
	r->part = r->part_cls = NULL;
	r->split_n = 0;
	size_t rows = r->split.kind == SPLIT_IID ? 1 : CFG_MAX_WORKERS;
	if (split_labelled(r) &&
	    !(r->part_cls = calloc(rows * (size_t)d->classes, sizeof(uint32_t))))
		return sl_fail(err, SL_ENOMEM, "out of memory");
	if (r->split.kind != SPLIT_IID && !(r->part = calloc(d->n ? d->n : 1, sizeof(uint32_t))))
		return sl_fail(err, SL_ENOMEM, "out of memory");
	if (r->split.kind == SPLIT_IID)
		split_count(r);
	return 0;
}

int
split_run_init(run *r, char *err)
{
	int rc = split_setup(r, err);
	if (rc < 0 || r->split.kind == SPLIT_IID)
		return rc;
	if ((rc = split_run_fits(r, r->cfg.workers, err)) < 0)
		return rc;
	return r->cfg.workers > 0 ? split_build(r, r->cfg.workers, 0, err) : 0;
}

/* the split made last, to cb.split (once) */
static void
split_tell(run *r)
{
	if (r->split_told == r->split_gen)
		return;
	r->split_told = r->split_gen;
	run_split s = {.spec = r->cfg.data_split, .splits = r->split_gen, .n_parts = r->split_n,
		       .n_classes = r->part_cls ? r->data->train.classes : 0,
		       .off = r->part_off, .classes = r->part_cls};
	if (r->cb.split)
		r->cb.split(r->cb.ud, run_now(r), ps_version(r->ps), &s);
}

void
split_run_refresh(run *r)
{
	char why[SL_ERR_LEN];
	int n = r->cfg.workers;
	if (r->split.kind == SPLIT_IID || n < 1)
		return;
	if (n != r->split_n && split_build(r, n, r->split_gen, why) < 0) {
		run_fail(r, -SL_EINVAL, why);
		return;
	}
	split_tell(r);
}

/* w's permutation of its part for its epoch e */
static int
split_deal(run *r, worker *w, uint64_t e)
{
	int j = w->rw.id;
	if (j >= r->split_n)
		return 0;
	uint32_t lo = r->part_off[j], m = r->part_off[j + 1] - lo;
	uint32_t *p = realloc(w->sp_perm, sizeof(uint32_t) * (m ? m : 1));
	if (!p)
		return run_fail(r, -SL_ENOMEM, "out of memory for a worker's part");
	w->sp_perm = p;
	memcpy(p, r->part + lo, sizeof(uint32_t) * m);
	rng g;
	rng_seed(&g, r->cfg.seed, SAMPLE_STREAM | (r->split_gen - 1) << 40 |
				      (uint64_t)j << 32 | (e & 0xffffffffu));
	rng_shuffle(&g, p, m);
	w->sp_n = m;
	return 0;
}

int
split_take(run *r, worker *w, int want, uint32_t *idx)
{
	int got = 0;
	if (w->sp_pos >= w->sp_n) {
		if (split_deal(r, w, w->sp_epochs) < 0 || !w->sp_n)
			return 0;
		w->sp_epochs++;
		w->sp_pos = 0;
	}
	/* a batch never straddles an epoch of the part: the last may be short */
	while (got < want && w->sp_pos < w->sp_n)
		idx[got++] = w->sp_perm[w->sp_pos++];
	return got;
}

int
split_run_restore(run *r, char *err)
{
	uint64_t gen = r->split_gen;
	int n = r->split_n, rc = split_setup(r, err);
	if (rc < 0 || r->split.kind == SPLIT_IID)
		return rc;
	if (n < 1 || !gen)
		return 0;
	if ((rc = split_build(r, n, gen - 1, err)) < 0)
		return sl_fail(err, SL_EFORMAT, "checkpoint: %s", err);
	r->split_told = r->split_gen; /* its record is in the log before the checkpoint */
	return 0;
}

int
split_restore_worker(run *r, worker *w, uint32_t pos, uint32_t n, char *err)
{
	if (r->split.kind == SPLIT_IID || !n)
		return 0;
	if (w->rw.id >= r->split_n || !w->sp_epochs)
		return sl_fail(err, SL_EFORMAT, "checkpoint: \"workers[%d].part_n\" is %u, "
			       "but the worker has no part begun in a split of %d", w->rw.id, n,
			       r->split_n);
	if (split_deal(r, w, w->sp_epochs - 1) < 0)
		return sl_fail(err, SL_ENOMEM, "checkpoint: out of memory");
	if (w->sp_n != n || pos > n)
		return sl_fail(err, SL_EFORMAT, "checkpoint: \"workers[%d].part\" holds %u "
			       "samples, its split %u", w->rw.id, n, w->sp_n);
	w->sp_pos = pos;
	return 0;
}

void
split_snap(const run *r, run_snapshot *s)
{
	const dataset *d = &r->data->train;
	s->split_gen = r->split_gen;
	if (r->part_cls && s->n_workers)
		s->classes = calloc((size_t)s->n_workers * (size_t)d->classes, sizeof(uint32_t));
	s->n_classes = s->classes ? d->classes : 0;
	for (int i = 0; i < s->n_workers; i++) {
		worker_snap *ws = &s->workers[i];
		int id = ws->id, iid = r->split.kind == SPLIT_IID;
		ws->part = iid ? d->n : id < r->split_n ? r->part_off[id + 1] - r->part_off[id] : 0;
		if (s->classes && (iid || id < r->split_n))
			memcpy(s->classes + (size_t)i * (size_t)d->classes,
			       r->part_cls + (iid ? 0 : (size_t)id * (size_t)d->classes),
			       sizeof(uint32_t) * (size_t)d->classes);
	}
}
