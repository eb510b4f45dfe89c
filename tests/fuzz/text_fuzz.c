/* text_fuzz.c - libFuzzer harness for text cut into contexts (ds_text).
 * The first byte picks the context length (1..32), the second the seed;
 * the rest is the text. An accepted text is checked: the length bound,
 * a sorted vocabulary holding every byte of the text, the contexts'
 * counts, ids below the vocabulary's size, each context's T + 1 bytes
 * found in its own part of the text (training: the first part; held out:
 * the last tenth), targets shifted by one. */
#include "dataset.h"
#include "fuzz.h"

/* The bytes of context i of d, decoded through the vocabulary, into out
 * (ctx + 1 bytes), checking the shift of the targets on the way. */
static void
decode(const dataset_pair *p, const dataset *d, uint32_t i, uint8_t *out)
{
	int T = p->ctx;
	const float *x = d->x + (size_t)i * (size_t)T;
	const uint8_t *y = d->y + (size_t)i * (size_t)T;
	for (int t = 0; t < T; t++) {
		FUZZ_EXPECT(x[t] >= 0.0f && x[t] < (float)p->vocab_n &&
				    x[t] == (float)(int)x[t],
			    "context %u: x[%d] = %g", i, t, x[t]);
		FUZZ_EXPECT(y[t] < p->vocab_n, "context %u: y[%d] = %u", i, t, y[t]);
		if (t + 1 < T)
			FUZZ_EXPECT((float)y[t] == x[t + 1], "context %u: y[%d] = %u, x[%d] = %g",
				    i, t, y[t], t + 1, x[t + 1]);
		out[t] = p->vocab[(int)x[t]];
	}
	out[T] = p->vocab[y[T - 1]];
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	int ctx = data[0] % 32 + 1;
	uint64_t seed = data[1];
	data += 2;
	size -= 2;
	char err[SL_ERR_LEN] = "";
	dataset_pair p;
	int rc = ds_text(data, size, ctx, seed, "", &p, err);
	FUZZ_EXPECT(rc == 0 || (rc < 0 && err[0]), "rc %d without a message", rc);
	FUZZ_EXPECT((rc == 0) == (size >= 10 * ((size_t)ctx + 1)),
		    "rc %d for %zu bytes, context %d: %s", rc, size, ctx, err);
	if (rc < 0)
		return 0;

	FUZZ_EXPECT(p.ctx == ctx && p.vocab_n >= 1 && p.vocab_n <= 256, "ctx %d, %d in vocab",
		    p.ctx, p.vocab_n);
	for (int k = 1; k < p.vocab_n; k++)
		FUZZ_EXPECT(p.vocab[k - 1] < p.vocab[k], "vocab[%d] = %u after %u", k, p.vocab[k],
			    p.vocab[k - 1]);
	unsigned char in_vocab[256] = {0};
	for (int k = 0; k < p.vocab_n; k++)
		in_vocab[p.vocab[k]] = 1;
	for (size_t i = 0; i < size; i++)
		FUZZ_EXPECT(in_vocab[data[i]], "byte %zu (%u) not in the vocabulary", i, data[i]);

	size_t tail = size / 10, head = size - tail;
	FUZZ_EXPECT(p.train.n == head / (size_t)ctx, "%u training contexts", p.train.n);
	FUZZ_EXPECT(p.test.n == (tail - (size_t)ctx < DS_TEXT_EVAL ? tail - (size_t)ctx : DS_TEXT_EVAL),
		    "%u held-out contexts", p.test.n);
	const dataset *s[2] = {&p.train, &p.test};
	for (int k = 0; k < 2; k++)
		FUZZ_EXPECT(s[k]->dim == ctx && s[k]->ylen == ctx && s[k]->classes == p.vocab_n &&
				    s[k]->c == 1 && s[k]->h == 1 && s[k]->w == ctx,
			    "split %d: dim %d ylen %d classes %d", k, s[k]->dim, s[k]->ylen,
			    s[k]->classes);
	uint8_t buf[34];
	for (uint32_t i = 0; i < p.train.n && i < 64; i++) {
		decode(&p, &p.train, i, buf);
		FUZZ_EXPECT(memmem(data, head, buf, (size_t)ctx + 1) != NULL,
			    "training context %u is not in the first part", i);
	}
	for (uint32_t i = 0; i < p.test.n && i < 64; i++) {
		decode(&p, &p.test, i, buf);
		FUZZ_EXPECT(memmem(data + head, tail, buf, (size_t)ctx + 1) != NULL,
			    "held-out context %u is not in the last tenth", i);
	}
	ds_pair_free(&p);
	return 0;
}
