/* test_dataset_text.c - text as a data set: contexts and their targets,
 * the vocabulary, the held-out last tenth, the seeded offsets, plain and
 * gzip files, the synthetic text, text:webster, and every refusal. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <sys/stat.h>

#include "dataset_util.h"

/* A text whose byte i is i (len <= 256): every byte occurs once, so the
 * vocabulary is 0..len-1 and a token id is the byte's position. */
static uint8_t *
counting_text(size_t len)
{
	ck_assert_uint_le(len, 256);
	uint8_t *b = malloc(len);
	ck_assert_ptr_nonnull(b);
	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)i;
	return b;
}

/* Bytes of a little seeded English-like text (words from a list). */
static uint8_t *
words_text(size_t len, unsigned k)
{
	static const char *const w[] = {"the ", "staleness ", "of ", "a ",
					"gradient, ", "server\n", "worker ",
					"Webster. ", "1913 "};
	uint8_t *b = malloc(len);
	ck_assert_ptr_nonnull(b);
	size_t i = 0;
	while (i < len) {
		k = k * 1103515245u + 12345u;
		const char *s = w[(k >> 16) % 9];
		for (; *s && i < len; s++)
			b[i++] = (uint8_t)*s;
	}
	return b;
}

static int
same_dataset(const dataset *a, const dataset *b)
{
	return a->n == b->n && a->dim == b->dim && a->ylen == b->ylen &&
	       a->classes == b->classes &&
	       memcmp(a->x, b->x, (size_t)a->n * (size_t)a->dim * sizeof(float)) == 0 &&
	       memcmp(a->y, b->y, (size_t)a->n * (size_t)a->ylen) == 0;
}

/* ---- contexts over bytes in memory (ds_text) ----------------------------- */

/* Every position's target is the next byte of the text: with the counting
 * text, x[t] = off + t and y[t] = off + t + 1. */
START_TEST(targets_are_the_next_byte)
{
	char err[SL_ERR_LEN] = "";
	uint8_t *b = counting_text(200);
	dataset_pair p;
	const int T = 3;
	ck_assert_msg(ds_text(b, 200, T, 7, "counting", &p, err) == 0, "%s", err);
	ck_assert_int_eq(p.ctx, T);
	const dataset *s[2] = {&p.train, &p.test};
	for (int k = 0; k < 2; k++) {
		const dataset *d = s[k];
		ck_assert_int_eq(d->dim, T);
		ck_assert_int_eq(d->ylen, T);
		ck_assert_int_eq(d->c * d->h * d->w, T);
		ck_assert_int_eq(d->classes, 200);
		for (uint32_t i = 0; i < d->n; i++) {
			const float *x = d->x + (size_t)i * T;
			const uint8_t *y = d->y + (size_t)i * T;
			for (int t = 0; t < T; t++) {
				ck_assert_float_eq(x[t], x[0] + (float)t);
				ck_assert_float_eq((float)y[t], x[t] + 1.0f);
			}
		}
	}
	ds_pair_free(&p);
	free(b);
}
END_TEST

/* The last tenth (len / 10 bytes, rounded down) is held out: training
 * contexts start at 0..head-T-1 (every one of them, over seeds), in
 * increasing order, and never read the tail; the held-out ones are min(256, tail - T) evenly spaced
 * starts of the tail, the first at the tail's start and the last ending
 * at the text's end, the same for every seed. */
START_TEST(held_out_last_tenth)
{
	char err[SL_ERR_LEN] = "";
	const size_t len = 209, tail = 20, head = 189;
	const int T = 3;
	uint8_t *b = counting_text(len);
	unsigned char hit[256] = {0};
	dataset_pair first;
	ck_assert_int_eq(ds_text(b, len, T, 1, "c", &first, err), 0);
	for (uint64_t seed = 1; seed <= 60; seed++) {
		dataset_pair p;
		ck_assert_msg(ds_text(b, len, T, seed, "c", &p, err) == 0, "%s", err);
		ck_assert_uint_eq(p.train.n, head / T);
		for (uint32_t i = 0; i < p.train.n; i++) {
			float off = p.train.x[(size_t)i * T];
			ck_assert_float_ge(off, 0.0f);
			/* in the text's order: index ranges are stretches */
			if (i > 0)
				ck_assert_float_le(p.train.x[(size_t)(i - 1) * T], off);
			/* the last target (off + T) is still before the tail */
			ck_assert_float_le(off, (float)(head - T - 1));
			hit[(int)off] = 1;
		}
		ck_assert_uint_eq(p.test.n, tail - T);
		ck_assert(same_dataset(&p.test, &first.test));
		for (uint32_t i = 0; i < p.test.n; i++)
			ck_assert_float_eq(p.test.x[(size_t)i * T], (float)(head + i));
		ds_pair_free(&p);
	}
	for (size_t off = 0; off + T < head; off++)
		ck_assert_msg(hit[off], "no training context starts at %zu", off);
	ds_pair_free(&first);

	/* A long tail: 256 contexts, spread over it, ends included. */
	uint8_t *w = words_text(100000, 5);
	ck_assert_int_eq(ds_text(w, 100000, 8, 3, "w", &first, err), 0);
	ck_assert_uint_eq(first.test.n, DS_TEXT_EVAL);
	ck_assert_uint_eq(first.train.n, 90000 / 8);
	const dataset *te = &first.test;
	uint8_t dec[9];
	for (int t = 0; t < 8; t++)
		dec[t] = first.vocab[(int)te->x[t]];
	dec[8] = first.vocab[te->y[7]];
	ck_assert_mem_eq(dec, w + 90000, 9);
	size_t last = (size_t)(te->n - 1) * 8;
	for (int t = 0; t < 8; t++)
		dec[t] = first.vocab[(int)te->x[last + t]];
	dec[8] = first.vocab[te->y[last + 7]];
	ck_assert_mem_eq(dec, w + 100000 - 9, 9);
	ds_pair_free(&first);
	free(w);
	free(b);
}
END_TEST

/* The bytes that occur, in increasing order; ids decode to the text. */
START_TEST(vocabulary)
{
	char err[SL_ERR_LEN] = "";
	const size_t len = 4000;
	uint8_t *b = words_text(len, 9);
	b[100] = 0x00; /* in the training part */
	b[len - 3] = 0xff; /* only in the held-out tail */
	dataset_pair p;
	ck_assert_int_eq(ds_text(b, len, 16, 2, "w", &p, err), 0);
	unsigned char seen[256] = {0};
	for (size_t i = 0; i < len; i++)
		seen[b[i]] = 1;
	int nv = 0;
	for (int c = 0; c < 256; c++)
		if (seen[c])
			ck_assert_uint_eq(p.vocab[nv++], c);
	ck_assert_int_eq(p.vocab_n, nv);
	ck_assert_uint_eq(p.vocab[0], 0x00);
	ck_assert_uint_eq(p.vocab[nv - 1], 0xff);
	ck_assert_int_eq(p.train.classes, nv);
	ck_assert_int_eq(p.test.classes, nv);
	/* every training context decodes to T + 1 bytes of the first part */
	for (uint32_t i = 0; i < p.train.n; i++) {
		uint8_t dec[17];
		for (int t = 0; t < 16; t++) {
			float id = p.train.x[(size_t)i * 16 + t];
			ck_assert_float_lt(id, (float)nv);
			dec[t] = p.vocab[(int)id];
		}
		dec[16] = p.vocab[p.train.y[(size_t)i * 16 + 15]];
		ck_assert_ptr_nonnull(memmem(b, len - len / 10, dec, 17));
	}
	ds_pair_free(&p);
	free(b);
}
END_TEST

/* The same bits for a seed, other training contexts for another. */
START_TEST(same_bits_for_a_seed)
{
	char err[SL_ERR_LEN] = "";
	uint8_t *b = words_text(50000, 3);
	dataset_pair a, a2, c;
	ck_assert_int_eq(ds_text(b, 50000, 32, 11, "w", &a, err), 0);
	ck_assert_int_eq(ds_text(b, 50000, 32, 11, "w", &a2, err), 0);
	ck_assert_int_eq(ds_text(b, 50000, 32, 12, "w", &c, err), 0);
	ck_assert(same_dataset(&a.train, &a2.train));
	ck_assert(same_dataset(&a.test, &a2.test));
	ck_assert(!same_dataset(&a.train, &c.train));
	ck_assert(same_dataset(&a.test, &c.test));
	ck_assert_mem_eq(a.vocab, c.vocab, 256);
	ds_pair_free(&a);
	ds_pair_free(&a2);
	ds_pair_free(&c);
	free(b);
}
END_TEST

/* Shortest text: 10 (T + 1) bytes; one byte less is refused, naming it. */
START_TEST(too_short_empty_bad_context)
{
	char err[SL_ERR_LEN] = "";
	uint8_t *b = counting_text(100);
	dataset_pair p;
	ck_assert_int_eq(ds_text(b, 100, 9, 1, "ten", &p, err), 0);
	ck_assert_uint_eq(p.train.n, 10);
	ck_assert_uint_eq(p.test.n, 1);
	ds_pair_free(&p);

	memset(&p, 0x55, sizeof p);
	ck_assert_int_eq(ds_text(b, 99, 9, 1, "short.txt", &p, err), -SL_EFORMAT);
	ck_assert(is_zeroed(&p, sizeof p));
	ASSERT_HAS(err, "short.txt");
	ASSERT_HAS(err, "too short");
	ASSERT_HAS(err, "99 bytes");
	ASSERT_HAS(err, "at least 100");

	ck_assert_int_eq(ds_text(b, 0, 9, 1, "empty.txt", &p, err), -SL_EFORMAT);
	ASSERT_HAS(err, "empty.txt: empty (0 bytes)");
	ck_assert_int_eq(ds_text(NULL, 0, 9, 1, NULL, &p, err), -SL_EFORMAT);
	ASSERT_HAS(err, "<buffer>: empty");

	ck_assert_int_eq(ds_text(b, 100, 0, 1, "c", &p, err), -SL_EINVAL);
	ASSERT_HAS(err, "context length 0 is out of range");
	ck_assert_int_eq(ds_text(b, 100, DS_TEXT_MAX_CTX + 1, 1, "c", &p, err),
			 -SL_EINVAL);
	ck_assert_int_eq(ds_text(b, 100, 9, 1, "c", NULL, err), -SL_EINVAL);
	free(b);
}
END_TEST

/* ---- the synthetic text -------------------------------------------------- */

/* space 0, a..o 1..15 */
#define SYM(ch) ((ch) == ' ' ? 0 : (ch) - 'a' + 1)

START_TEST(synthetic_text_chain)
{
	char err[SL_ERR_LEN] = "";
	const size_t n = 400000;
	uint8_t *a, *a2, *c;
	ck_assert_int_eq(ds_synthetic_text(n, 5, &a, err), 0);
	ck_assert_int_eq(ds_synthetic_text(n, 5, &a2, err), 0);
	ck_assert_int_eq(ds_synthetic_text(n, 6, &c, err), 0);
	ck_assert_mem_eq(a, a2, n);
	ck_assert(memcmp(a, c, n) != 0);
	/* space and a..o only; each pair of previous symbols has at most 4
	 * successors, and the conditional entropy is 1.75 bits a byte */
	static uint32_t cnt[16][16][16];
	memset(cnt, 0, sizeof cnt);
	for (size_t i = 0; i < n; i++) {
		ck_assert_msg(a[i] == ' ' || (a[i] >= 'a' && a[i] <= 'o'),
			      "byte %zu is %d", i, a[i]);
		if (i < 2)
			continue;
		cnt[SYM(a[i - 2])][SYM(a[i - 1])][SYM(a[i])]++;
	}
	double h = 0;
	for (int x = 0; x < 16; x++)
		for (int y = 0; y < 16; y++) {
			double tot = 0;
			int succ = 0;
			for (int z = 0; z < 16; z++) {
				tot += cnt[x][y][z];
				succ += cnt[x][y][z] > 0;
			}
			ck_assert_int_le(succ, 4);
			for (int z = 0; z < 16; z++)
				if (cnt[x][y][z])
					h -= cnt[x][y][z] * log2(cnt[x][y][z] / tot);
		}
	h /= (double)(n - 2);
	ck_assert_msg(fabs(h - 1.75) < 0.02, "conditional entropy %.4f bits", h);
	free(a);
	free(a2);
	free(c);
	ck_assert_int_eq(ds_synthetic_text(0, 5, &a, err), -SL_EINVAL);
	ck_assert_ptr_null(a);
}
END_TEST

/* ---- files and specs (ds_load_ctx) --------------------------------------- */

START_TEST(plain_and_gzip_give_the_same_data)
{
	char dir[512], spec[1100], err[SL_ERR_LEN] = "";
	sl_test_tmpdir(dir, sizeof dir);
	uint8_t *b = words_text(30000, 4);
	write_in(dir, "a.txt", b, 30000);
	char path[1024];
	snprintf(path, sizeof path, "%s/a.txt.gz", dir);
	gzFile g = gzopen(path, "wb");
	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(gzwrite(g, b, 30000), 30000);
	ck_assert_int_eq(gzclose(g), Z_OK);

	dataset_pair p, q;
	snprintf(spec, sizeof spec, "text:%s/a.txt", dir);
	ck_assert_msg(ds_load_ctx(spec, 24, 9, &p, err) == 0, "%s", err);
	ck_assert_str_eq(p.note, "");
	snprintf(spec, sizeof spec, "text:%s/a.txt.gz", dir);
	ck_assert_msg(ds_load_ctx(spec, 24, 9, &q, err) == 0, "%s", err);
	ck_assert(same_dataset(&p.train, &q.train));
	ck_assert(same_dataset(&p.test, &q.test));
	ck_assert_int_eq(p.vocab_n, q.vocab_n);
	ck_assert_mem_eq(p.vocab, q.vocab, 256);
	ck_assert_int_eq(p.ctx, 24);
	ck_assert_uint_eq(p.train.n, 27000 / 24);
	/* the file's bytes through ds_text give the same bits too */
	dataset_pair r;
	ck_assert_int_eq(ds_text(b, 30000, 24, 9, "w", &r, err), 0);
	ck_assert(same_dataset(&p.train, &r.train));
	ds_pair_free(&p);
	ds_pair_free(&q);
	ds_pair_free(&r);
	free(b);
	rm_dir(dir);
}
END_TEST

START_TEST(bad_files_refused_by_name)
{
	char dir[512], spec[1100], err[SL_ERR_LEN] = "";
	sl_test_tmpdir(dir, sizeof dir);
	dataset_pair p;
	uint8_t *b = words_text(1000, 1);
	write_in(dir, "empty.txt", b, 0);
	write_in(dir, "short.txt", b, 649); /* T 64 needs 650 */
	write_in(dir, "ok.txt", b, 650);
	uint8_t junk[40] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad};
	write_in(dir, "bad.gz", junk, sizeof junk);
	mkdir(strcat(strcpy(spec, dir), "/sub"), 0700);

	static const struct {
		const char *file;
		int rc;
		const char *what;
	} bad[] = {
		{"empty.txt", -SL_EFORMAT, "empty (0 bytes)"},
		{"short.txt", -SL_EFORMAT, "too short for a context of 64 bytes: 649 bytes"},
		{"missing.txt", -SL_EIO, "No such file"},
		{"sub", -SL_EIO, "Is a directory"},
		{"bad.gz", -SL_EFORMAT, "gzip"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(spec, sizeof spec, "text:%s/%s", dir, bad[i].file);
		memset(&p, 0x66, sizeof p);
		err[0] = '\0';
		ck_assert_int_eq(ds_load_ctx(spec, 64, 1, &p, err), bad[i].rc);
		ck_assert(is_zeroed(&p, sizeof p));
		ASSERT_HAS(err, spec + 5);
		ASSERT_HAS(err, bad[i].what);
	}
	snprintf(spec, sizeof spec, "text:%s/ok.txt", dir);
	ck_assert_msg(ds_load_ctx(spec, 64, 1, &p, err) == 0, "%s", err);
	ck_assert_uint_eq(p.test.n, 1);
	ck_assert_str_eq(p.name, spec);
	ds_pair_free(&p);

	/* a file that cannot be read (root reads any: only checked as a user) */
	if (geteuid() != 0) {
		snprintf(spec, sizeof spec, "%s/ok.txt", dir);
		ck_assert_int_eq(chmod(spec, 0), 0);
		snprintf(spec, sizeof spec, "text:%s/ok.txt", dir);
		ck_assert_int_eq(ds_load_ctx(spec, 64, 1, &p, err), -SL_EIO);
		ASSERT_HAS(err, "Permission denied");
	}
	free(b);
	snprintf(spec, sizeof spec, "%s/sub", dir);
	ck_assert_int_eq(rmdir(spec), 0);
	rm_dir(dir);
}
END_TEST

/* A text spec needs the model's context; the specs' own errors. */
START_TEST(text_specs)
{
	char err[SL_ERR_LEN] = "";
	dataset_pair p;
	ck_assert(ds_spec_is_text("text:x"));
	ck_assert(ds_spec_is_text("synthetic-text:10"));
	ck_assert(!ds_spec_is_text("synthetic:10"));
	ck_assert(!ds_spec_is_text("fashion-mnist"));
	ck_assert(!ds_spec_is_text(NULL));

	ck_assert_int_eq(ds_load("synthetic-text:5000", 1, &p, err), -SL_EINVAL);
	ASSERT_HAS(err, "synthetic-text:5000 is text: it needs the model's context length");
	ck_assert_int_eq(ds_load_ctx("text:/etc/hostname", -1, 1, &p, err), -SL_EINVAL);
	ASSERT_HAS(err, "got -1");
	const char *bad[] = {"text:", "synthetic-text:", "synthetic-text:0",
			     "synthetic-text:abc", "synthetic-text:-3",
			     "synthetic-text:268435457"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(&p, 0x77, sizeof p);
		ck_assert_int_eq(ds_load_ctx(bad[i], 16, 1, &p, err), -SL_EINVAL);
		ck_assert_msg(strncmp(err, "dataset: ", 9) == 0, "%s: %s", bad[i], err);
		ck_assert(is_zeroed(&p, sizeof p));
	}

	ck_assert_int_eq(ds_load_ctx("synthetic-text:5000", 16, 4, &p, err), 0);
	ck_assert_str_eq(p.name, "synthetic-text:5000");
	ck_assert_uint_eq(p.train.n, 4500 / 16);
	ck_assert_int_eq(p.vocab_n, 16);
	ck_assert_uint_eq(p.vocab[0], ' ');
	ck_assert_uint_eq(p.vocab[15], 'o');
	/* the same as the generator's bytes cut by ds_text */
	uint8_t *t;
	dataset_pair q;
	ck_assert_int_eq(ds_synthetic_text(5000, 4, &t, err), 0);
	ck_assert_int_eq(ds_text(t, 5000, 16, 4, "s", &q, err), 0);
	ck_assert(same_dataset(&p.train, &q.train));
	ck_assert(same_dataset(&p.test, &q.test));
	free(t);
	ds_pair_free(&q);
	ds_pair_free(&p);

	/* image sets: one label a sample, no vocabulary, the context ignored */
	ck_assert_int_eq(ds_load_ctx("synthetic:60", 64, 1, &p, err), 0);
	ck_assert_int_eq(p.train.ylen, 1);
	ck_assert_int_eq(p.test.ylen, 1);
	ck_assert_int_eq(p.ctx, 0);
	ck_assert_int_eq(p.vocab_n, 0);
	ds_pair_free(&p);
}
END_TEST

/* The default corpus: dict-gcide's GCIDE when installed (make deps),
 * else the synthetic text with a note. */
START_TEST(webster)
{
	char err[SL_ERR_LEN] = "";
	dataset_pair p;
	struct stat st;
	int present = stat(DS_WEBSTER_PATH, &st) == 0;
	ck_assert_msg(ds_load_ctx("text:webster", 64, 1, &p, err) == 0, "%s", err);
	ck_assert_str_eq(p.name, "text:webster");
	if (present) {
		ck_assert_str_eq(p.note, "");
		/* 39,952,321 bytes in bookworm's 0.48.5+nmu2 */
		ck_assert_uint_gt(p.train.n, 30000000 / 64);
		ck_assert_uint_eq(p.test.n, DS_TEXT_EVAL);
		ck_assert_int_gt(p.vocab_n, 60);
		ck_assert_uint_ge(p.vocab[p.vocab_n - 1], 'z');
	} else {
		ASSERT_HAS(p.note, "install dict-gcide");
		ck_assert_int_eq(p.vocab_n, 16);
	}
	ds_pair_free(&p);
}
END_TEST

static Suite *
dataset_text_suite(void)
{
	Suite *s = suite_create("dataset_text");
	TCase *tc = tcase_create("contexts");
	tcase_add_test(tc, targets_are_the_next_byte);
	tcase_add_test(tc, held_out_last_tenth);
	tcase_add_test(tc, vocabulary);
	tcase_add_test(tc, same_bits_for_a_seed);
	tcase_add_test(tc, too_short_empty_bad_context);
	suite_add_tcase(s, tc);

	tc = tcase_create("synthetic");
	tcase_add_test(tc, synthetic_text_chain);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, plain_and_gzip_give_the_same_data);
	tcase_add_test(tc, bad_files_refused_by_name);
	tcase_add_test(tc, text_specs);
	tcase_add_test(tc, webster);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(dataset_text_suite)
