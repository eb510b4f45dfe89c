/* sim.c - the cluster simulator's events, time and accounting (cluster.h):
 * from one decision point to the next, every running job advances at its
 * rate; at each point completions, arrivals and queue thresholds are
 * taken and the policy decides, through its row of operations (policy.c's
 * table). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_impl.h"
#include "heap.h"
#include "sl.h"

int
cl_check(const cl_config *c, const cl_model *models, int n_models,
	 const cl_job *jobs, size_t n_jobs, char *err)
{
	if (c->gpus < 1)
		return sl_fail(err, SL_EINVAL, "gpus: must be at least 1");
	if (!(c->gpu_mem_gb > 0) || !isfinite(c->gpu_mem_gb))
		return sl_fail(err, SL_EINVAL, "gpu_mem_gb: must be a positive number");
	if (c->policy < 0 || c->policy >= CL_N_POLICIES)
		return sl_fail(err, SL_EINVAL, "policy: unknown");
	if (!(c->restart_s >= 0) || !isfinite(c->restart_s))
		return sl_fail(err, SL_EINVAL, "restart_s: must be >= 0");
	if (c->n_thresholds < 0 || c->n_thresholds > CL_MAX_THRESHOLDS)
		return sl_fail(err, SL_EINVAL, "thresholds: at most %d", CL_MAX_THRESHOLDS);
	for (int i = 0; i < c->n_thresholds; i++)
		if (!(c->thresholds[i] > (i ? c->thresholds[i - 1] : 0)) || !isfinite(c->thresholds[i]))
			return sl_fail(err, SL_EINVAL, "thresholds: must be positive and rising");
	for (int m = 0; m < n_models; m++) {
		const cl_model *x = &models[m];
		if (x->n_sched < 1 || x->n_sched > CL_MAX_SCHED)
			return sl_fail(err, SL_EINVAL, "model %s: needs 1 to %d schedules", x->name,
				       CL_MAX_SCHED);
		for (int k = 0; k < x->n_sched; k++) {
			const cl_sched *s = &x->sched[k];
			if (!(s->compute_s >= 0) || !(s->comm_s >= 0) || !(s->compute_s + s->comm_s > 0) ||
			    !isfinite(s->compute_s + s->comm_s))
				return sl_fail(err, SL_EINVAL,
					       "model %s, schedule %s: compute_s and comm_s must be >= 0 "
					       "with a positive sum", x->name, s->name);
			if (!(s->mem_gb >= 0) || s->mem_gb > c->gpu_mem_gb)
				return sl_fail(err, SL_EINVAL,
					       "model %s, schedule %s: mem_gb %g does not fit a GPU's %g",
					       x->name, s->name, s->mem_gb, c->gpu_mem_gb);
			if (!(s->iter_mult > 0) || !isfinite(s->iter_mult))
				return sl_fail(err, SL_EINVAL,
					       "model %s, schedule %s: iter_mult must be positive", x->name,
					       s->name);
		}
	}
	for (size_t i = 0; i < n_jobs; i++) {
		const cl_job *j = &jobs[i];
		if (!(j->arrival >= 0) || !isfinite(j->arrival))
			return sl_fail(err, SL_EINVAL, "job %ld: arrival must be a time >= 0", j->id);
		if (j->gpus < 1 || j->gpus > c->gpus)
			return sl_fail(err, SL_EINVAL, "job %ld: wants %d GPUs, the cluster has %d", j->id,
				       j->gpus, c->gpus);
		if (j->model < 0 || j->model >= n_models)
			return sl_fail(err, SL_EINVAL, "job %ld: no such model", j->id);
		if (!(j->iters > 0) || !isfinite(j->iters))
			return sl_fail(err, SL_EINVAL, "job %ld: iterations must be positive", j->id);
	}
	return 0;
}

/* ---- time ----------------------------------------------------------------- */

/* the rate and compute share of every job of a plan entry */
static void
set_rates(sim *s, const cl_group *g)
{
	const cl_model *mod;
	if (g->n == 1) {
		int j = g->job[0], k = g->sched[0];
		mod = &s->models[s->jobs[j].model];
		double t = sched_time(s, j, k);
		s->js[j].rate = 1.0 / (t * mod->sched[k].iter_mult);
		s->js[j].comp_frac = mod->sched[k].compute_s / t;
		return;
	}
	double cyc = pair_cycle(s, g->job[0], g->sched[0], g->job[1], g->sched[1]);
	for (int i = 0; i < 2; i++) {
		int j = g->job[i], k = g->sched[i];
		mod = &s->models[s->jobs[j].model];
		s->js[j].rate = 1.0 / (cyc * mod->sched[k].iter_mult);
		s->js[j].comp_frac = mod->sched[k].compute_s / cyc;
	}
}

/* running job j from its last settling to s->t: progress after its warm
 * up, attained service, GPU-seconds allocated and computing */
void
settle(sim *s, int j)
{
	jstate *x = &s->js[j];
	const double g = s->jobs[j].gpus, dt = s->t - x->t_set;
	if (dt > 0) {
		double from = x->warm_until > x->t_set ? x->warm_until : x->t_set;
		double run = s->t > from ? s->t - from : 0;
		x->remaining -= x->rate * run;
		x->attained += g * dt;
		s->jobs[j].alloc_gpu_s += g * dt;
		s->jobs[j].compute_gpu_s += g * x->comp_frac * run;
	}
	x->t_set = s->t;
}

static int
ev_before(const ev *a, const ev *b)
{
	if (a->t != b->t)
		return a->t < b->t;
	if (a->kind != b->kind)
		return a->kind < b->kind;
	return a->id < b->id;
}

SL_HEAP(evheap, ev, ev_before)

static void
ev_push(sim *s, ev e)
{
	if (evheap_push(&s->evh, &s->n_ev, &s->cap_ev, e) < 0)
		s->failed = 1;
}

static ev
ev_pop(sim *s)
{
	return evheap_pop(s->evh, &s->n_ev);
}

static int
ev_live(const sim *s, const ev *e)
{
	const jstate *x = &s->js[e->j];
	return x->st == JS_RUNNING && x->ver == e->ver;
}

/* running job j's next events from its settled state: its completion and
 * (las) the next queue threshold it crosses; earlier ones go stale */
static void
plan_events(sim *s, int j)
{
	jstate *x = &s->js[j];
	x->ver++;
	double from = x->warm_until > x->t_set ? x->warm_until : x->t_set;
	double tc = from + (x->remaining > 0 ? x->remaining : 0) / x->rate;
	ev_push(s, (ev){tc, 0, s->jobs[j].id, j, x->ver});
	if (!s->pol->thresholds)
		return;
	const double g = s->jobs[j].gpus;
	for (int q = 0; q < s->c->n_thresholds; q++) {
		double th = s->c->thresholds[q];
		if (!cl_crossed(x->attained, th)) {
			double tt = x->t_set + (th - x->attained) / g;
			if (tt < tc)
				ev_push(s, (ev){tt, 1 + q, s->jobs[j].id, j, x->ver});
			break;
		}
	}
}

/* the next decision point: the soonest live event or the next arrival */
static double
next_event(sim *s, size_t next_arrival, const int *order)
{
	double tn = next_arrival < s->n_jobs ? s->jobs[order[next_arrival]].arrival : INFINITY;
	while (s->n_ev && !ev_live(s, &s->evh[0]))
		ev_pop(s);
	if (s->n_ev && s->evh[0].t < tn)
		tn = s->evh[0].t;
	return tn;
}

/* ---- applying a plan -------------------------------------------------------- */

void
group_apply(sim *s, const cl_group *g)
{
	int changed = 0;
	for (int i = 0; i < g->n; i++) {
		const jstate *x = &s->js[g->job[i]];
		int partner = g->n == 2 ? g->job[1 - i] : -1;
		changed |= x->st != JS_RUNNING || x->sched != g->sched[i] ||
			   x->partner != partner || x->alone_again;
	}
	for (int i = 0; i < g->n; i++) {
		int j = g->job[i];
		jstate *x = &s->js[j];
		if (x->st != JS_RUNNING) { /* starts (again) */
			if (x->st == JS_WAITING)
				s->n_waiting--;
			/* an arrival within the instant's 1e-9 starts at it, not
			 * before it: no negative queueing delay */
			if (s->jobs[j].first_start < 0)
				s->jobs[j].first_start = fmax(s->t, s->jobs[j].arrival);
			if (x->ran)
				x->warm_until = s->t + s->c->restart_s;
			x->st = JS_RUNNING;
			x->ran = 1;
			x->t_set = s->t;
			if (s->pol->started)
				s->pol->started(s, j);
		} else if (changed) {
			settle(s, j); /* at the old rate, up to now */
		}
		x->sched = g->sched[i];
		x->partner = g->n == 2 ? g->job[1 - i] : -1;
		x->alone_again = 0;
	}
	if (changed) {
		set_rates(s, g);
		for (int i = 0; i < g->n; i++)
			plan_events(s, g->job[i]);
	}
}

void
run_add(sim *s, int j)
{
	s->js[j].run_at = s->n_run;
	s->run[s->n_run++] = j;
}

/* j leaves the running list (its place taken by the last: fifo, gandiva
 * and jigsaw keep their order in the stamps, las in its tree) */
void
run_remove(sim *s, int j)
{
	size_t at = s->js[j].run_at;
	int last = s->run[--s->n_run];
	s->run[at] = last;
	s->js[last].run_at = at;
}

void
preempt_and_start(sim *s)
{
	for (size_t i = 0; i < s->n_pre; i++) {
		int j = s->pre[i];
		settle(s, j);
		s->jobs[j].preemptions++;
		s->js[j].partner = -1;
		s->js[j].ver++; /* its events go stale */
		run_remove(s, j);
		s->free_gpus += s->jobs[j].gpus;
	}
	for (size_t i = 0; i < s->n_take; i++) {
		int j = s->take[i];
		cl_group g = {1, {j, -1}, {alone_sched(s, j), -1}};
		group_apply(s, &g);
		run_add(s, j);
		s->free_gpus -= s->jobs[j].gpus;
	}
	for (size_t i = 0; i < s->n_pre; i++)
		wait_push(s, s->pre[i]);
}

/* srtf: the plan is every job that runs from now; the running jobs
 * it leaves out are preempted, the rest run as it says, in its order */
static void
apply_plan(sim *s)
{
	for (size_t i = 0; i < s->n_run; i++) {
		int j = s->run[i];
		if (!s->js[j].planned) {
			settle(s, j);
			s->jobs[j].preemptions++;
			s->js[j].partner = -1;
			s->js[j].ver++; /* its events go stale */
			wait_push(s, j);
		}
	}
	s->n_run = 0;
	int used = 0;
	for (int p = 0; p < s->n_plan; p++) {
		const cl_group *g = &s->plan[p];
		group_apply(s, g);
		for (int i = 0; i < g->n; i++)
			run_add(s, g->job[i]);
		used += s->jobs[g->job[0]].gpus;
	}
	s->free_gpus = s->c->gpus - used;
}

/* ---- the run ---------------------------------------------------------------- */

/* (arrival, id) order of job indices; jobs passed through glibc's qsort_r */
static int
cmp_order(const void *pa, const void *pb, void *jobs)
{
	const cl_job *js = jobs;
	const cl_job *a = &js[*(const int *)pa], *b = &js[*(const int *)pb];
	if (a->arrival != b->arrival)
		return a->arrival < b->arrival ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

static int
cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;
	return (a > b) - (a < b);
}

/* the q-quantile by nearest rank of n sorted values */
static double
quantile(const double *v, size_t n, double q)
{
	size_t r = (size_t)ceil(q * (double)n);
	return v[r ? r - 1 : 0];
}

static void
summarise(const sim *s, cl_summary *out)
{
	memset(out, 0, sizeof(*out));
	size_t n = s->n_jobs;
	double *jct = malloc(sizeof(double) * (n ? n : 1));
	double first = INFINITY, last = 0, alloc = 0, comp = 0, samples = 0, qd = 0;
	for (size_t i = 0; i < n; i++) {
		const cl_job *j = &s->jobs[i];
		if (j->arrival < first)
			first = j->arrival;
		if (j->finish > last)
			last = j->finish;
		alloc += j->alloc_gpu_s;
		comp += j->compute_gpu_s;
		samples += j->iters * j->batch;
		qd += j->first_start - j->arrival;
		out->preemptions += j->preemptions;
		if (jct)
			jct[i] = j->finish - j->arrival;
		out->avg_jct += j->finish - j->arrival;
	}
	out->jobs = (int)n;
	if (!n)
		return;
	out->avg_jct /= (double)n;
	out->avg_queue_delay = qd / (double)n;
	out->makespan = last - first;
	double gs = s->c->gpus * out->makespan;
	out->util_alloc = gs > 0 ? alloc / gs : 0;
	out->util_compute = gs > 0 ? comp / gs : 0;
	out->samples_per_gpu_h = gs > 0 ? samples / (gs / 3600.0) : 0;
	if (jct) {
		qsort(jct, n, sizeof(double), cmp_double);
		out->p50_jct = quantile(jct, n, 0.5);
		out->p95_jct = quantile(jct, n, 0.95);
		out->max_jct = jct[n - 1];
		free(jct);
	}
}

int
cl_simulate(const cl_config *c, const cl_model *models, int n_models,
	    cl_job *jobs, size_t n_jobs, cl_summary *out, cl_tick_fn tick,
	    void *ud, char *err)
{
	int rc = cl_check(c, models, n_models, jobs, n_jobs, err);
	if (rc < 0)
		return rc;
	sim s = {.c = c, .pol = policy_ops(c), .models = models, .jobs = jobs, .n_jobs = n_jobs,
		 .free_gpus = c->gpus};
	size_t n = n_jobs ? n_jobs : 1;
	int *order = malloc(sizeof(int) * n);
	s.js = calloc(n, sizeof(jstate));
	s.run = malloc(sizeof(int) * n);
	s.plan = malloc(sizeof(cl_group) * n);
	s.back = malloc(sizeof(wq_ent) * 2 * n);
	s.again = malloc(sizeof(int) * n);
	if (!order || !s.js || !s.run || !s.plan || !s.back || !s.again)
		goto oom;
	for (size_t i = 0; i < n_jobs; i++) {
		order[i] = (int)i;
		jobs[i].first_start = jobs[i].finish = -1;
		jobs[i].preemptions = 0;
		jobs[i].alloc_gpu_s = jobs[i].compute_gpu_s = 0;
		s.js[i] = (jstate){.st = JS_PENDING, .partner = -1, .remaining = jobs[i].iters,
				   .fq = -1};
	}
	qsort_r(order, n_jobs, sizeof(int), cmp_order, jobs);
	for (size_t i = 0; i < n_jobs; i++)
		s.js[order[i]].rank = (int)i;
	s.order = order;
	if (policy_init(&s) < 0)
		goto oom;
	const int by_key = s.run_in_order;
	size_t next = 0;
	long events = 0;
	s.t = n_jobs ? jobs[order[0]].arrival : 0;
	while (next < n_jobs || s.n_run || s.n_waiting) {
		double tn = next_event(&s, next, order);
		if (!isfinite(tn))
			break; /* cannot happen after cl_check: every job fits alone */
		s.t = tn;
		/* the events due now: completions, then las thresholds (1e-9
		 * relative: the same instant) */
		int done = 0;
		while (s.n_ev && s.evh[0].t <= tn + 1e-9 * (1 + tn)) {
			ev e = ev_pop(&s);
			if (!ev_live(&s, &e))
				continue;
			int j = e.j;
			jstate *x = &s.js[j];
			settle(&s, j);
			if (e.kind > 0) {
				/* las threshold kind - 1, due now: crossed, whatever
				 * the rounding of the service's sum */
				double th = c->thresholds[e.kind - 1];
				if (!cl_crossed(x->attained, th))
					x->attained = th;
				if (s.pol->crossed)
					s.pol->crossed(&s, j); /* its key rose */
				plan_events(&s, j);
				continue;
			}
			/* its completion, due now (a live event: its rate has not
			 * changed since), whatever the rounding of its progress */
			x->st = JS_DONE;
			x->remaining = 0;
			if (s.pol->finished)
				s.pol->finished(&s, j);
			jobs[j].finish = s.t;
			jobs[j].last_sched = x->sched;
			if (by_key)
				done++; /* leaves the list below, in order */
			else
				run_remove(&s, j);
			if (x->partner >= 0) { /* up to now at the pair's rate */
				settle(&s, x->partner);
				s.js[x->partner].partner = -1;
				s.js[x->partner].alone_again = 1;
				if (!by_key)
					s.again[s.n_again++] = x->partner;
			} else {
				s.free_gpus += jobs[j].gpus; /* the group's last member */
			}
		}
		if (done) { /* srtf: its list stays in key order, nearly */
			size_t k = 0;
			for (size_t i = 0; i < s.n_run; i++)
				if (s.js[s.run[i]].st == JS_RUNNING)
					s.run[k++] = s.run[i];
			s.n_run = k;
		}
		while (next < n_jobs && jobs[order[next]].arrival <= s.t + 1e-9 * (1 + s.t))
			wait_push(&s, order[next++]);
		if (s.pol->decide(&s))
			apply_plan(&s);
		if (s.failed == 2) {
			rc = sl_fail(err, SL_ESTATE,
				     "cluster: %s at t=%.6f decided job %ld otherwise than a full "
				     "ranking would (verify)", s.pol->name, s.t, jobs[s.bad_job].id);
			goto out;
		}
		if (s.failed) {
			rc = sl_fail(err, SL_ENOMEM, "cluster: out of memory for the waiting jobs");
			goto out;
		}
		events++;
		if (tick)
			tick(ud, s.t, s.free_gpus, (int)s.n_run, (int)s.n_waiting);
	}
	summarise(&s, out);
	out->events = events;
	goto out;
oom:
	rc = sl_fail(err, SL_ENOMEM, "cluster: out of memory for %zu jobs", n_jobs);
out:
	free(order);
	free(s.js);
	free(s.run);
	free(s.plan);
	free(s.back);
	free(s.again);
	policy_free(&s);
	free(s.heap);
	free(s.evh);
	return rc;
}
