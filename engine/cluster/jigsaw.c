/* jigsaw.c - JigSaw: gandiva's packing with each job's partial-backprop
 * schedule chosen for goodput: alone, the schedule of most goodput; packed,
 * the pair of schedules of most summed goodput within one GPU's memory
 * (order.c does the packing). */
#include "cluster_impl.h"

/* the best schedules for a and b together, within one GPU's memory: their
 * summed goodput, or 0 when no pair fits. ka, kb receive the choice. */
static double
pair_best(const sim *s, int a, int b, int *ka, int *kb)
{
	const int na = s->models[s->jobs[a].model].n_sched;
	const int nb = s->models[s->jobs[b].model].n_sched;
	double best = 0;
	for (int i = 0; i < na; i++)
		for (int k = 0; k < nb; k++) {
			if (sched_mem(s, a, i) + sched_mem(s, b, k) > s->c->gpu_mem_gb)
				continue;
			double cyc = pair_cycle(s, a, i, b, k);
			double gp = (1.0 / sched_mult(s, a, i) + 1.0 / sched_mult(s, b, k)) / cyc;
			if (gp > best) {
				best = gp;
				*ka = i;
				*kb = k;
			}
		}
	return best;
}

/* summed goodput packed, against a's alone; 0 when no pair fits */
static double
jigsaw_gain(const sim *s, int a, int j, int *ka, int *kb)
{
	double gp = pair_best(s, a, j, ka, kb);
	if (gp <= 0)
		return 0;
	return gp - goodput_alone(s, a, s->js[a].sched);
}

static int
jigsaw_decide(sim *s)
{
	return order_decide(s, jigsaw_gain);
}

const cl_policy_ops cl_jigsaw = {
	.name = "jigsaw",
	.best_alone = 1,
	.init = order_pack_init,
	.free = order_pack_free,
	.decide = jigsaw_decide,
};
