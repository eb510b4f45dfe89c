/* dataset_text.c - text as a data set for a language model: the
 * vocabulary (the bytes that occur), the held-out last tenth, contexts of
 * T + 1 bytes at seeded offsets (ds_text), and the seeded synthetic text
 * (ds_synthetic_text). Both are pure functions over bytes: no I/O, no
 * globals. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"
#include "rng.h"

/* Streams of the run's seed: the training contexts' offsets, the
 * synthetic chain's successors and the walk through it. */
#define TEXT_OFFSET_STREAM UINT64_C(0x7478746f66667300) /* "txtoffs" */
#define TEXT_CHAIN_STREAM UINT64_C(0x7478746368616900)  /* "txtchai" */
#define TEXT_WALK_STREAM UINT64_C(0x7478747761006b00)   /* "txtwa.k" */

/* The synthetic text's symbols and the successors each context has. */
static const char syn_alpha[] = " abcdefghijklmno";
#define SYN_K 16
#define SYN_SUCC 4

/* Room for n contexts of ctx positions in d (x and y), shaped as text. */
static int
alloc_split(dataset *d, size_t n, int ctx, int classes, const char *what,
	    char *err)
{
	d->x = sl_calloc_aligned(n, (size_t)ctx * sizeof(float));
	d->y = malloc(n * (size_t)ctx);
	if (!d->x || !d->y) {
		sl_free_aligned(d->x);
		free(d->y);
		d->x = NULL;
		d->y = NULL;
		return sl_fail(err, SL_ENOMEM,
			       "%s: out of memory for %zu contexts of %d bytes",
			       what, n, ctx);
	}
	d->n = (uint32_t)n;
	d->c = 1;
	d->h = 1;
	d->w = ctx;
	d->dim = ctx;
	d->classes = classes;
	d->ylen = ctx;
	return 0;
}

/* Context i of d from the ctx + 1 bytes at p: position t reads byte t and
 * is trained to predict byte t + 1. */
static void
put_context(dataset *d, size_t i, const uint8_t *p, int ctx,
	    const uint8_t id[256])
{
	float *x = d->x + i * (size_t)ctx;
	uint8_t *y = d->y + i * (size_t)ctx;
	for (int t = 0; t < ctx; t++) {
		x[t] = (float)id[p[t]];
		y[t] = id[p[t + 1]];
	}
}

static int
cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return (x > y) - (x < y);
}

int
ds_text(const uint8_t *buf, size_t len, int ctx, uint64_t seed,
	const char *what, dataset_pair *out, char *err)
{
	what = ds_name_or_buffer(what);
	if (!out)
		return sl_fail(err, SL_EINVAL, "%s: NULL output", what);
	memset(out, 0, sizeof *out);
	if (!buf && len)
		return sl_fail(err, SL_EINVAL, "%s: NULL text", what);
	if (ctx < 1 || ctx > DS_TEXT_MAX_CTX)
		return sl_fail(err, SL_EINVAL,
			       "%s: context length %d is out of range (1..%d; "
			       "the model's T sets it)",
			       what, ctx, DS_TEXT_MAX_CTX);
	/* Both parts hold one context of ctx + 1 bytes; the held-out tail
	 * (len / 10 bytes) is the shorter. */
	size_t need = 10 * ((size_t)ctx + 1);
	if (len == 0)
		return sl_fail(err, SL_EFORMAT,
			       "%s: empty (0 bytes); contexts of %d bytes need a "
			       "text of at least %zu bytes",
			       what, ctx, need);
	if (len < need)
		return sl_fail(err, SL_EFORMAT,
			       "%s: too short for a context of %d bytes: %zu bytes, "
			       "at least %zu needed (the held-out last tenth must "
			       "hold %d + 1 bytes)",
			       what, ctx, len, need, ctx);
	if (len > DS_TEXT_MAX_BYTES)
		return sl_fail(err, SL_EFORMAT, "%s: larger than %zu bytes",
			       what, DS_TEXT_MAX_BYTES);

	/* The vocabulary: every byte that occurs, in increasing order. */
	unsigned char seen[256] = {0};
	uint8_t id[256] = {0};
	for (size_t i = 0; i < len; i++)
		seen[buf[i]] = 1;
	int nv = 0;
	for (int b = 0; b < 256; b++)
		if (seen[b]) {
			id[b] = (uint8_t)nv;
			out->vocab[nv++] = (uint8_t)b;
		}
	out->vocab_n = nv;
	out->ctx = ctx;

	size_t tail = len / 10, head = len - tail;
	size_t ntrain = head / (size_t)ctx;
	size_t ntest = SL_MIN((size_t)DS_TEXT_EVAL, tail - (size_t)ctx);
	int rc;
	if ((rc = alloc_split(&out->train, ntrain, ctx, nv, what, err)) < 0 ||
	    (rc = alloc_split(&out->test, ntest, ctx, nv, what, err)) < 0) {
		ds_pair_free(out);
		return rc;
	}

	/* Training contexts start anywhere in the first part such that
	 * their last byte (the last target) is still in it; they are stored
	 * in the order of their offsets, so a range of indices is a stretch
	 * of the text (contiguous shards). */
	size_t *offs = malloc(ntrain * sizeof *offs);
	if (!offs) {
		ds_pair_free(out);
		return sl_fail(err, SL_ENOMEM, "%s: out of memory for %zu offsets", what,
			       ntrain);
	}
	rng r;
	rng_seed(&r, seed, TEXT_OFFSET_STREAM);
	for (size_t i = 0; i < ntrain; i++)
		offs[i] = (size_t)rng_below(&r, head - (size_t)ctx);
	qsort(offs, ntrain, sizeof *offs, cmp_size);
	for (size_t i = 0; i < ntrain; i++)
		put_context(&out->train, i, buf + offs[i], ctx, id);
	free(offs);
	/* Held-out contexts: evenly spaced over the tail's start offsets
	 * 0..tail-ctx-1, first and last included, the same for every seed. */
	size_t span = tail - (size_t)ctx - 1;
	for (size_t i = 0; i < ntest; i++) {
		size_t off = ntest > 1 ? (size_t)((uint64_t)i * span / (ntest - 1)) : 0;
		put_context(&out->test, i, buf + head + off, ctx, id);
	}
	return 0;
}

int
ds_synthetic_text(size_t n, uint64_t seed, uint8_t **out, char *err)
{
	if (!out)
		return sl_fail(err, SL_EINVAL, "synthetic-text: NULL output");
	*out = NULL;
	if (n == 0)
		return sl_fail(err, SL_EINVAL,
			       "synthetic-text: n must be positive (got 0)");
	if (n > DS_TEXT_MAX_BYTES)
		return sl_fail(err, SL_EINVAL,
			       "synthetic-text: n must be at most %zu (got %zu)",
			       DS_TEXT_MAX_BYTES, n);
	uint8_t *t = malloc(n);
	if (!t)
		return sl_fail(err, SL_ENOMEM,
			       "synthetic-text: out of memory for %zu bytes", n);

	/* Each context (a, b) of the two previous symbols gets SYN_SUCC
	 * distinct successors (a partial shuffle of the symbols). */
	uint8_t succ[SYN_K][SYN_K][SYN_SUCC];
	rng r;
	rng_seed(&r, seed, TEXT_CHAIN_STREAM);
	for (int a = 0; a < SYN_K; a++)
		for (int b = 0; b < SYN_K; b++) {
			uint8_t perm[SYN_K];
			for (int k = 0; k < SYN_K; k++)
				perm[k] = (uint8_t)k;
			for (int k = 0; k < SYN_SUCC; k++) {
				int j = k + (int)rng_below(&r, (uint64_t)(SYN_K - k));
				uint8_t s = perm[k];
				perm[k] = perm[j];
				perm[j] = s;
				succ[a][b][k] = perm[k];
			}
		}

	/* The walk: successor k with probability 1/2, 1/4, 1/8, 1/8 (of 8
	 * equally likely draws: 4, 2, 1, 1), from a seeded start context. */
	static const uint8_t pick[8] = {0, 0, 0, 0, 1, 1, 2, 3};
	rng_seed(&r, seed, TEXT_WALK_STREAM);
	int a = (int)rng_below(&r, SYN_K), b = (int)rng_below(&r, SYN_K);
	for (size_t i = 0; i < n; i++) {
		int c = succ[a][b][pick[rng_below(&r, 8)]];
		t[i] = (uint8_t)syn_alpha[c];
		a = b;
		b = c;
	}
	*out = t;
	return 0;
}
