/* compress_push.c - compression of what a worker pushes, with error
 * feedback (docs/rules.md, "Compression"). It runs in the run, where a
 * push meets the server (step_push_grad, step_hold and the rules' own
 * deliveries through rule_ops.compress), after the gradient is in the
 * worker's buffer: the same point for an in-process worker and a remote
 * one, whose gradient came back over the wire, so both take the same
 * arithmetic and a remote run is a local one's. The residual e of error
 * feedback is each worker's, host memory, in checkpoints:
 *
 *   p = d + e (d the gradient, or the model less the server's weights);
 *   c = C(p); the server decodes D(c); e <- p - D(c). */
#include "run_impl.h"
#include "compress.h"

#include <stdlib.h>
#include <string.h>

static int
kind_of(const run *r)
{
	int k = compress_kind(r->cfg.rp.compress);
	return k < 0 ? CMP_NONE : k;
}

double
step_push_size(const run *r, size_t n)
{
	if (r->rule->push_bytes) { /* the rule's own message (demo's) */
		int nl;
		const ps_layer *layers = ps_layers(r->ps, &nl);
		return r->rule->push_bytes(layers, nl, r->n_params - n, &r->cfg.rp);
	}
	return compress_bytes(kind_of(r), r->cfg.rp.compress_ratio, n, CMP_BLOCK);
}

/* the stream of random-k's indices: the worker and its push's sequence
 * number, which the message carries, under the run's seed */
static uint64_t
push_stream(const worker *w)
{
	return (1ull << 63) | ((uint64_t)(unsigned)w->rw.id << 40) | (w->rw.seq & ((1ull << 40) - 1));
}

/* a model's message, decoded: the server's weights a plus D(C(p)); where a
 * sparsifier without error feedback kept a value, the model's own x_i
 * (the value sent, 8 bytes as the difference would be), so ratio 1 is the
 * rule without compression bit for bit */
static void
decode_model(int kind, int ef, float *x, const float *a, const float *p,
	     const unsigned char *kept, size_t n)
{
	int sparse = kind == CMP_TOPK || kind == CMP_RANDK;
	for (size_t i = 0; i < n; i++)
		if (!(sparse && !ef && kept[i]))
			x[i] = a[i] + p[i];
}

int
step_compress(run *r, worker *w, float *buf, size_t off, const float *anchor)
{
	if (off >= r->n_params)
		return 0;
	return step_compress_range(r, w, buf, off, r->n_params - off, anchor);
}

int
step_compress_range(run *r, worker *w, float *buf, size_t off, size_t n, const float *anchor)
{
	int kind = kind_of(r);
	if (kind == CMP_NONE || off >= r->n_params || !n || n > r->n_params - off)
		return 0;
	if (r->cfg.rp.ef && !w->ef_res && !(w->ef_res = calloc(r->n_params, sizeof(float))))
		return run_fail(r, -SL_ENOMEM, "out of memory for error feedback's residual");
	/* host copies: x the message's floats, a the anchor, p what is compressed */
	float *s = malloc(sizeof(float) * 3 * n + n);
	if (!s)
		return run_fail(r, -SL_ENOMEM, "out of memory compressing a push");
	float *x = s, *a = s + n, *p = s + 2 * n;
	unsigned char *kept = (unsigned char *)(s + 3 * n);
	backend *be = w->rw.be;
	be->ops->download(be, x, buf + off, sizeof(float) * n);
	if (anchor) {
		r->be_ps->ops->download(r->be_ps, a, anchor + off, sizeof(float) * n);
		for (size_t i = 0; i < n; i++)
			p[i] = x[i] - a[i];
	} else {
		memcpy(p, x, sizeof(float) * n);
	}
	/* a slice short of the end (a fragment's) draws its own indices */
	uint64_t stream = push_stream(w);
	if (n < r->n_params - off)
		stream ^= (uint64_t)off * 0x9E3779B97F4A7C15ull;
	if (compress_ef(kind, r->cfg.rp.compress_ratio, CMP_BLOCK, r->cfg.seed, stream, p,
			r->cfg.rp.ef ? w->ef_res + off : NULL, n, kept) < 0) {
		free(s);
		return run_fail(r, -SL_ENOMEM, "out of memory compressing a push");
	}
	if (anchor)
		decode_model(kind, r->cfg.rp.ef, x, a, p, kept, n);
	be->ops->upload(be, buf + off, anchor ? x : p, sizeof(float) * n);
	free(s);
	return 0;
}

void
step_compress_changed(run *r, const char *rule_before, const rule_params *before)
{
	if (!strcmp(rule_before, r->cfg.rule) && !strcmp(before->compress, r->cfg.rp.compress) &&
	    before->ef == r->cfg.rp.ef)
		return;
	for (int i = 0; i < r->n_slots; i++) {
		free(r->w[i]->ef_res);
		r->w[i]->ef_res = NULL;
	}
}
