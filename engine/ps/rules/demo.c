/* demo.c - DeMo, decoupled momentum optimisation (Peng, Quesnelle and
 * Kingma 2024, arXiv 2411.19870; its reference code bloc97/DeMo demo.py,
 * which EXO Gym copies as demo_impl/demo.py), as a synchronous round of
 * the parameter server, one per step, as ssgd's.
 *
 * Each worker computes its gradient g on the server's weights and keeps
 * its own decoupled momentum delta (host memory, in checkpoints):
 *   delta <- beta delta + lr g                     (demo_decay: beta)
 *   per chunk, the demo_topk largest |DCT(delta)| coefficients are sent
 *   delta <- delta - IDCT(what was sent)           (error feedback)
 * The server sums the round's coefficients and counts each one's
 * senders; when every running worker's message is in, it takes the mean
 * of each coefficient over its senders (a coefficient one worker sent is
 * not halved), Q = IDCT(those means), and
 *   w <- w (1 - lr wd) - lr sign(Q)
 * with the run's learning rate (and its schedule) and weight decay, on
 * every layer someone sent. Every worker then pulls the result. The run's
 * optimiser and momentum take no part: delta is DeMo's momentum, sign its
 * step.
 *
 * Tensors and chunks (engine/ps/dct.h): a layer's weights are a row-major
 * matrix (ps_layer rows x cols: a dense or linear layer's [out][in], a
 * conv's [cout][cin k k], a table's [V][E]), cut into blocks of r x c, r
 * and c each dimension's largest divisor not above demo_chunk, transformed
 * separably; its bias, and a norm's gains and biases, vectors cut into
 * chunks the same way. The reference takes torch's 2-D shapes; a conv's
 * 4-D kernel, which it does not cut, is here its 2-D [cout][cin k k].
 *
 * Bytes: the reference sends each chunk's indices as int64 and values as
 * fp32 (torch.topk's indices, the parameter's dtype), 12 bytes a kept
 * coefficient, min(demo_topk, chunk size) of them a chunk; a push costs
 * that (push_bytes). The pull is the server's weights, as every rule's. */
#include <math.h>
#include <stdlib.h>

#include "dct.h"
#include "model.h"
#include "ps.h"
#include "rules.h"

/* bytes a kept coefficient costs: an int64 index and an fp32 value */
#define DEMO_COEF_BYTES 12.0

/* the i-th tensor of layer L (rows x cols floats from *off; rows 1: a
 * vector); 0 when it has no i-th */
static int
tensor_at(const ps_layer *L, int i, size_t *off, size_t *rows, size_t *cols)
{
	size_t m = L->rows * L->cols;
	if (m > L->len)
		m = 0; /* not a shape of this layer: all of it one vector */
	if (m) {
		if (i == 0) {
			*off = L->off;
			*rows = L->rows;
			*cols = L->cols;
			return 1;
		}
		i--;
	}
	size_t rest = L->len - m;
	if (!rest)
		return 0;
	size_t v = L->vlen && !m && rest % L->vlen == 0 ? L->vlen : rest;
	if ((size_t)i >= rest / v)
		return 0;
	*off = L->off + m + (size_t)i * v;
	*rows = 1;
	*cols = v;
	return 1;
}

static size_t
chunk_of(const rule_params *rp)
{
	return rp->demo_chunk >= 1 ? (size_t)rp->demo_chunk : 1;
}

static size_t
topk_of(const rule_params *rp)
{
	return rp->demo_topk >= 1 ? (size_t)rp->demo_topk : 1;
}

double
demo_push_bytes(const ps_layer *layers, int n_layers, size_t off, const rule_params *rp)
{
	double kept = 0;
	size_t o, r, c;
	for (int l = 0; l < n_layers; l++) {
		if (layers[l].off < off)
			continue;
		for (int i = 0; tensor_at(&layers[l], i, &o, &r, &c); i++)
			kept += (double)dct_kept(r, c, chunk_of(rp), topk_of(rp));
	}
	return DEMO_COEF_BYTES * kept;
}

int
demo_encode(const ps_layer *layers, int n_layers, size_t off, const rule_params *rp,
	    float lr, const float *g, float *delta, float *coef, float *kept)
{
	const float beta = (float)rp->demo_decay;
	size_t o, r, c, big = 0;
	for (int l = 0; l < n_layers; l++)
		for (int i = 0; tensor_at(&layers[l], i, &o, &r, &c); i++)
			big = r * c > big ? r * c : big;
	float *sent = malloc(sizeof(float) * (big ? big : 1));
	dct_bases bases = {0};
	if (!sent)
		return -1;
	int rc = 0;
	for (int l = 0; l < n_layers && rc == 0; l++) {
		const ps_layer *L = &layers[l];
		if (L->off < off)
			continue;
		for (size_t j = L->off; j < L->off + L->len; j++) {
			delta[j] *= beta;
			delta[j] += lr * g[j];
		}
		for (int i = 0; rc == 0 && tensor_at(L, i, &o, &r, &c); i++) {
			if (dct_encode_with(&bases, delta + o, r, c, chunk_of(rp), coef + o) < 0) {
				rc = -1;
				break;
			}
			if (dct_topk(coef + o, r, c, chunk_of(rp), topk_of(rp), kept + o) < 0 ||
			    dct_decode_with(&bases, coef + o, r, c, chunk_of(rp), sent) < 0) {
				rc = -1;
				break;
			}
			for (size_t j = 0; j < r * c; j++)
				delta[o + j] -= sent[j];
		}
	}
	free(sent);
	dct_bases_free(&bases);
	return rc;
}

int
demo_apply(const ps_layer *layers, int n_layers, const int *layer_count,
	   const rule_params *rp, float lr, float wd, const float *sum, const float *senders,
	   float *w)
{
	size_t o, r, c, big = 0;
	for (int l = 0; l < n_layers; l++)
		for (int i = 0; tensor_at(&layers[l], i, &o, &r, &c); i++)
			big = r * c > big ? r * c : big;
	float *buf = malloc(sizeof(float) * 2 * (big ? big : 1));
	dct_bases bases = {0};
	if (!buf)
		return -1;
	float *mean = buf, *q = buf + big;
	const float keep = (float)(1.0 - (double)lr * (double)wd);
	int rc = 0;
	for (int l = 0; l < n_layers && rc == 0; l++) {
		if (!layer_count[l])
			continue; /* nobody sent it: not updated */
		for (int i = 0; tensor_at(&layers[l], i, &o, &r, &c); i++) {
			/* the mean of each coefficient over its senders */
			for (size_t j = 0; j < r * c; j++) {
				float n = senders ? senders[o + j] : (float)layer_count[l];
				mean[j] = n > 0 ? sum[o + j] / n : 0.0f;
			}
			if (dct_decode_with(&bases, mean, r, c, chunk_of(rp), q) < 0) {
				rc = -1;
				break;
			}
			for (size_t j = 0; j < r * c; j++) {
				float s = q[j] > 0 ? 1.0f : q[j] < 0 ? -1.0f : 0.0f;
				if (wd != 0)
					w[o + j] *= keep;
				w[o + j] -= lr * s;
			}
		}
	}
	free(buf);
	dct_bases_free(&bases);
	return rc;
}

/* the worker: its momentum, its chunks' top coefficients sent; the
 * round's rule (RULE_WAIT) holds it until every running worker's are in */
static uint64_t
deliver(rule_run *e, rule_worker *w)
{
	ps *p = e->ps;
	size_t n = ps_size(p), off = w->grad_off;
	int nl;
	const ps_layer *layers = ps_layers(p, &nl);
	if (!w->delta && !(w->delta = calloc(n, sizeof(float)))) {
		e->ops->fail(e, -SL_ENOMEM, "out of memory for a worker's demo momentum");
		return 0;
	}
	float *s = malloc(sizeof(float) * 3 * n);
	if (!s) {
		e->ops->fail(e, -SL_ENOMEM, "out of memory for a demo push");
		return 0;
	}
	float *g = s, *coef = s + n, *kept = s + 2 * n;
	w->be->ops->download(w->be, g + off, w->m->grads + off, sizeof(float) * (n - off));
	if (demo_encode(layers, nl, off, e->rp, ps_lr(p), g, w->delta, coef, kept) < 0) {
		free(s);
		e->ops->fail(e, -SL_ENOMEM, "out of memory for a demo push");
		return 0;
	}
	ps_grad m = {.worker = w->id, .seq = w->seq, .v_read = w->v_read, .off = off,
		     .batch = w->batch_n, .g = coef, .kept = kept, .host = 1};
	uint64_t v0 = ps_version(p);
	ps_result res;
	int rc = ps_push(p, &m, e->ops->round_size(e), &res);
	free(s);
	if (rc < 0) {
		e->ops->push_failed(e, w->id, "a demo push", rc);
		return 0;
	}
	if (!res.applied) { /* wait for the round */
		w->waiting = 1;
		w->wait_v = v0;
	} else {
		e->ops->version_changed(e);
	}
	return res.tau;
}

/* the server's round: the mean per coefficient over its senders, its
 * IDCT's sign, the step (host copies: the arithmetic is DeMo's own) */
static int
server_round(ps *p, const int *layer_count)
{
	backend *be = ps_backend(p);
	size_t n = ps_size(p);
	int nl;
	const ps_layer *layers = ps_layers(p, &nl);
	const float *senders = ps_round_senders(p);
	float *h = malloc(sizeof(float) * (senders ? 3 : 2) * n);
	if (!h)
		return -SL_ENOMEM;
	float *w = h, *sum = h + n, *cnt = senders ? h + 2 * n : NULL;
	float lr, mu, wd;
	ps_opt(p, &lr, &mu, &wd);
	float *wr = ps_weights_rw(p);
	be->ops->download(be, w, wr, sizeof(float) * n);
	be->ops->download(be, sum, ps_round_sum(p), sizeof(float) * n);
	if (cnt)
		be->ops->download(be, cnt, senders, sizeof(float) * n);
	int rc = demo_apply(layers, nl, layer_count, ps_params(p), lr, wd, sum, cnt, w);
	if (rc == 0)
		be->ops->upload(be, wr, w, sizeof(float) * n);
	free(h);
	return rc < 0 ? -SL_ENOMEM : 0;
}

const rule_class rule_demo = {
	.name = "demo",
	.doc = "DeMo: each worker's decoupled momentum, its top DCT coefficients per chunk "
	       "sent; the server steps by the sign of their mean's inverse DCT",
	.flags = RULE_ROUND | RULE_WAIT,
	.params = (const char *const[]){"demo_decay", "demo_topk", "demo_chunk", NULL},
	.server_push = rule_server_round,
	.deliver = deliver,
	.server_round = server_round,
	.push_bytes = demo_push_bytes,
};
