/* streaming_diloco.c - Streaming DiLoCo (Douillard et al. 2025, arXiv
 * 2501.18512): DiLoCo whose model is exchanged a fragment at a time, in the
 * background. The model's units (its parameterised layers; a residual
 * block, the layers between two cut depths, counts as one: ps_set_units)
 * are cut into P = `fragments` fragments in the paper's strided pattern,
 * unit u in fragment u mod P. Each worker takes inner steps of the run's
 * optimiser on its own weights (its state its own, as diloco's). Counting
 * its local steps t, fragment p syncs after the step at which t mod H =
 * floor((p + 1) H / P) mod H: fragment 0 first, the last at H (torchft's
 * offsets, so P = 1 is diloco's round). There the worker sends its model
 * on the fragment (compressed, as its difference from the anchor, the
 * global fragment it last took, which is what the server holds there) and
 * goes on without waiting: it computes `overlap` = tau more local steps,
 * then takes the new global fragment g_p (waiting for the round only if
 * it is not complete): anchor_p = g_p, theta_p = g_p + mix (theta_p -
 * g_p), torchft's lerp from the global fragment toward the local one, the
 * paper's alpha theta + (1 - alpha) g. The server's round of a fragment
 * completes when every running worker's model of it is in: Delta = W -
 * mean on the fragment's coordinates through the outer optimiser there
 * (ps_fragment_add); the version advances. With tau < floor(H / P) at
 * most one fragment of a worker is in flight. With P = 1, tau = 0, mix 0
 * the rule is diloco bit for bit. The staleness recorded at each step is
 * the local steps since the last sync point (diloco's, with P = 1). */
#include "model.h"
#include "optim.h"
#include "ps.h"
#include "rules.h"

/* the fragments, between 1 and the model's units */
static int
parts(const ps *p, const rule_params *rp)
{
	int P = (int)rp->fragments, u = ps_units(p);
	return P < 1 ? 1 : P > u ? u : P;
}

static int
period(const rule_params *rp)
{
	return rp->H < 1 ? 1 : (int)rp->H;
}

/* the overlap, below floor(H / P) (config_fragments_fit refuses more) */
static int
overlap(const rule_run *e)
{
	int gap = period(e->rp) / parts(e->ps, e->rp), tau = (int)e->rp->overlap;
	return tau >= gap ? (gap > 0 ? gap - 1 : 0) : tau < 0 ? 0 : tau;
}

/* where fragment p syncs within a period: floor((p + 1) H / P) mod H */
static int
sync_point(int p, int P, int H)
{
	return (int)(((long long)(p + 1) * H / P) % H);
}

/* the fragment that syncs when the count reaches c (mod H), or -1 */
static int
sync_part(const rule_run *e, int c)
{
	int P = parts(e->ps, e->rp), H = period(e->rp);
	for (int p = 0; p < P; p++)
		if (sync_point(p, P, H) == c % H)
			return p;
	return -1;
}

/* the local steps since the last sync point, count c (mod H) */
static int
since_sync(const rule_run *e, int c)
{
	int P = parts(e->ps, e->rp), H = period(e->rp), last = 0;
	c %= H;
	for (int p = 0; p < P; p++) {
		int s = sync_point(p, P, H);
		if (s <= c && s > last)
			last = s;
	}
	return c - last;
}

/* take the global fragment of the round the worker waited for: the
 * anchor becomes it, the weights its mix with the local ones */
static void
take(rule_run *e, rule_worker *w)
{
	int nl;
	ps_layers(e->ps, &nl);
	ps_range rg[nl];
	size_t floats;
	int nr = ps_fragment_ranges(e->ps, w->frag, parts(e->ps, e->rp), rg, &floats);
	backend *be = w->be, *sb = ps_backend(e->ps);
	const float *g = ps_weights(e->ps);
	/* a remote worker's weights are its own: the global fragment goes
	 * down with its next step and is mixed in there (remote_down) */
	const float a = w->remote ? 0.0f : (float)e->rp->mix;
	for (int i = 0; i < nr; i++) {
		size_t o = rg[i].off, n = rg[i].len;
		sb->ops->copy(sb, w->wprev + o, g + o, sizeof(float) * n);
		optim_mix(be, w->m->params + o, w->wprev + o, n, a);
	}
	if (w->remote)
		w->took_part = 1 + w->frag;
	w->frag = -1;
	w->waiting = 0;
	w->reply = 1;
	w->reply_floats = floats;
	if (e->rp->inner_reset)
		rule_inner_reset(w);
}

/* the anchor and the message's scratch (a resumed worker has its anchor
 * from the checkpoint, not the scratch); 0, or -1 when the run failed */
static int
buffers(rule_run *e, rule_worker *w)
{
	backend *be = w->be;
	size_t n = ps_size(e->ps);
	if ((!w->wprev && !(w->wprev = be->ops->alloc(be, sizeof(float) * n))) ||
	    (!w->tmp && !(w->tmp = be->ops->alloc(be, sizeof(float) * n)))) {
		e->ops->fail(e, -SL_ENOMEM, "out of memory for a worker's anchor weights");
		return -1;
	}
	return 0;
}

static void
pull(rule_run *e, rule_worker *w)
{
	if (w->have == UINT64_MAX) {
		/* the first step under the rule: the server's weights, all
		 * of them the anchor, the schedule from its start */
		backend *be = w->be;
		size_t n = ps_size(e->ps);
		if (buffers(e, w) < 0)
			return;
		if (e->rp->inner_reset)
			rule_inner_reset(w);
		ps_pull(e->ps, w->id, w->m->params, &w->have);
		be->ops->copy(be, w->wprev, w->m->params, sizeof(float) * n);
		w->frag = -1;
		w->frag_left = 0;
		w->local_steps = 0;
		w->took_part = 0;
	} else if (w->frag >= 0 && w->frag_left <= 0) {
		take(e, w);
	}
	w->v_read = ps_version(e->ps);
}

/* send the worker's model on fragment p; the reply is taken tau steps on */
static void
send(rule_run *e, rule_worker *w, int p)
{
	if (e->ops->check_model(e, w) < 0 || buffers(e, w) < 0)
		return;
	int nl;
	ps_layers(e->ps, &nl);
	ps_range rg[nl];
	int nr = ps_fragment_ranges(e->ps, p, parts(e->ps, e->rp), rg, NULL);
	backend *be = w->be;
	/* the message in the scratch: the local weights stay as they are */
	for (int i = 0; i < nr; i++) {
		be->ops->copy(be, w->tmp + rg[i].off, w->m->params + rg[i].off,
			      sizeof(float) * rg[i].len);
		if (e->ops->compress_range(e, w, w->tmp, rg[i].off, rg[i].len,
					   ps_weights(e->ps)) < 0)
			return;
	}
	uint64_t v0 = ps_version(e->ps);
	ps_grad m = {.worker = w->id, .seq = w->seq, .v_read = w->v_read,
		     .batch = w->batch_n, .g = w->tmp, .part = p};
	ps_result res;
	int rc = ps_push(e->ps, &m, e->ops->n_running(e), &res);
	if (rc < 0) {
		e->ops->push_failed(e, w->id, "a model fragment", rc);
		return;
	}
	w->frag = p;
	w->frag_left = overlap(e);
	w->wait_v = v0;
	w->waiting = w->frag_left == 0; /* the next step takes the reply */
	if (res.applied)
		e->ops->version_changed(e);
}

static uint64_t
deliver(rule_run *e, rule_worker *w)
{
	int H = period(e->rp), c = w->local_steps % H;
	uint64_t tau = (uint64_t)since_sync(e, c);
	if (w->have == UINT64_MAX || rule_local_step(e, w, w->m->grads) < 0)
		return tau;
	c = (c + 1) % H;
	w->local_steps = c;
	if (w->frag >= 0 && w->frag_left > 0 && --w->frag_left == 0)
		w->waiting = 1; /* the reply is due at the next step */
	int p = sync_part(e, c);
	if (p >= 0 && w->frag < 0)
		send(e, w, p);
	return tau;
}

/* the step that reaches a sync point sends its fragment */
static int
exchanges(const rule_run *e, const rule_worker *w)
{
	return w->frag < 0 && sync_part(e, w->local_steps % period(e->rp) + 1) >= 0;
}

/* its bytes: the fragment's, compressed range by range as they are sent */
static double
exchange_bytes(const rule_run *e, const rule_worker *w)
{
	int p = sync_part(e, w->local_steps % period(e->rp) + 1), nl;
	if (p < 0)
		return 0;
	ps_layers(e->ps, &nl);
	ps_range rg[nl];
	int nr = ps_fragment_ranges(e->ps, p, parts(e->ps, e->rp), rg, NULL);
	double b = 0;
	for (int i = 0; i < nr; i++)
		b += e->ops->push_bytes(e, rg[i].len);
	return b;
}

/* a remote worker's exchange brings back the fragment it sends */
static int
remote_up(const rule_run *e, const rule_worker *w, ps_range *out, int cap)
{
	int p = sync_part(e, w->local_steps % period(e->rp) + 1), nl;
	ps_layers(e->ps, &nl);
	if (p < 0 || w->frag >= 0 || cap < nl)
		return 0;
	return ps_fragment_ranges(e->ps, p, parts(e->ps, e->rp), out, NULL);
}

/* ... and the global fragment it took goes down, to be mixed in */
static int
remote_down(rule_run *e, rule_worker *w, ps_range *out, int cap, float *mix)
{
	int p = w->took_part - 1, nl;
	w->took_part = 0;
	ps_layers(e->ps, &nl);
	if (p < 0 || cap < nl)
		return 0;
	*mix = (float)e->rp->mix;
	return ps_fragment_ranges(e->ps, p, parts(e->ps, e->rp), out, NULL);
}

static int
phase_h(const rule_run *e, const rule_worker *w)
{
	(void)w;
	return period(e->rp);
}

static int
server_push(ps *p, const ps_grad *g, int round_size, ps_result *res)
{
	int rc = ps_fragment_add(p, g, parts(p, ps_params(p)), round_size);
	if (rc < 0)
		return rc;
	res->applied = rc;
	return 0;
}

const rule_class rule_streaming_diloco = {
	.name = "streaming-diloco",
	.doc = "Streaming DiLoCo: diloco a strided fragment at a time, each exchanged while "
	       "overlap more local steps are computed, the global fragment mixed in",
	.flags = RULE_LOCAL | RULE_OUTER | RULE_FRAGMENTS | RULE_PHASES,
	.params = (const char *const[]){"H", "fragments", "overlap", "mix", "outer_lr",
					"outer_momentum", "outer_opt", "inner_reset",
					RULE_PUSH_PARAMS, NULL},
	.server_push = server_push,
	.pull = pull,
	.deliver = deliver,
	.exchanges = exchanges,
	.exchange_bytes = exchange_bytes,
	.phase_h = phase_h,
	.remote_up = remote_up,
	.remote_down = remote_down,
	.stale_unit = "local steps",
};
