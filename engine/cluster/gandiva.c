/* gandiva.c - Gandiva's packing: fifo, and a blocked head packed onto the
 * lone running job with as many GPUs where the pair runs fastest against
 * each alone (order.c), each job under the schedule it runs alone. */
#include "cluster_impl.h"

/* the pair's speed over each alone, above 1; 0 when their memory does
 * not fit one GPU */
static double
gandiva_gain(const sim *s, int a, int j, int *ka, int *kb)
{
	int x = s->js[a].sched, y = alone_sched(s, j);
	if (sched_mem(s, a, x) + sched_mem(s, j, y) > s->c->gpu_mem_gb)
		return 0;
	double cyc = pair_cycle(s, a, x, j, y);
	*ka = x;
	*kb = y;
	return (sched_time(s, a, x) + sched_time(s, j, y)) / cyc - 1.0;
}

static int
gandiva_decide(sim *s)
{
	return order_decide(s, gandiva_gain);
}

const cl_policy_ops cl_gandiva = {
	.name = "gandiva",
	.init = order_pack_init,
	.free = order_pack_free,
	.decide = gandiva_decide,
};
