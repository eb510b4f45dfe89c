/* dct.c - DeMo's chunked orthonormal DCT-II and its top-k per chunk
 * (dct.h). */
#include "dct.h"
#include "compress.h"
#include "sl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

size_t
dct_side(size_t n, size_t target)
{
	if (n <= target)
		return n ? n : 1;
	for (size_t c = target; c > 1; c--)
		if (n % c == 0)
			return c;
	return 1;
}

void
dct_basis(size_t c, float *b)
{
	const double pi = 3.14159265358979323846;
	for (size_t k = 0; k < c; k++) {
		double s = sqrt((k ? 2.0 : 1.0) / (double)c);
		for (size_t j = 0; j < c; j++)
			b[k * c + j] = (float)(s * cos(pi * (double)(2 * j + 1) * (double)k /
						       (2.0 * (double)c)));
	}
}

/* the chunk sides of a tensor and their bases (kept in a dct_bases, or
 * its own) */
typedef struct cut {
	size_t r, c;   /* block rows and columns */
	int inverse;
	const double *br;    /* the rows' basis */
	const double *bc;    /* the columns': B_c (inverse), else its transpose */
	double *t, *acc; /* r x c and c of scratch */
	unsigned char *nz; /* r: does row i of t hold a nonzero */
	dct_bases own;   /* the bases when the caller keeps none */
} cut;

void
dct_bases_free(dct_bases *c)
{
	for (int i = 0; i < c->n; i++) {
		free(c->b[i]);
		free(c->bt[i]);
	}
	c->n = 0;
}

/* side's basis as doubles (*b) and its transpose (*bt), from c or made
 * into it; 0, or -1 when out of memory (or c full: the caller's own) */
static int
bases_of(dct_bases *c, size_t side, const double **b, const double **bt)
{
	for (int i = 0; i < c->n; i++)
		if (c->side[i] == side) {
			*b = c->b[i];
			*bt = c->bt[i];
			return 0;
		}
	if (c->n == DCT_BASES)
		return -1;
	float *f = malloc(sizeof(float) * side * side);
	double *d = malloc(sizeof(double) * side * side), *dt = malloc(sizeof(double) * side * side);
	if (!f || !d || !dt) {
		free(f);
		free(d);
		free(dt);
		return -1;
	}
	dct_basis(side, f);
	for (size_t k = 0; k < side; k++)
		for (size_t j = 0; j < side; j++) {
			d[k * side + j] = f[k * side + j];
			dt[j * side + k] = f[k * side + j];
		}
	free(f);
	c->side[c->n] = side;
	c->b[c->n] = d;
	c->bt[c->n] = dt;
	c->n++;
	*b = d;
	*bt = dt;
	return 0;
}

static void
cut_free(cut *k)
{
	free(k->t);
	free(k->acc);
	free(k->nz);
	dct_bases_free(&k->own);
}

static int
cut_make(cut *k, dct_bases *c, size_t rows, size_t cols, size_t target, int inverse)
{
	*k = (cut){.inverse = inverse};
	k->r = rows > 1 ? dct_side(rows, target) : 1;
	k->c = dct_side(cols, target);
	k->t = malloc(sizeof(double) * k->r * k->c);
	k->acc = malloc(sizeof(double) * k->c);
	k->nz = malloc(k->r);
	const double *b, *bt;
	dct_bases *keep = c ? c : &k->own;
	if (!k->t || !k->acc || !k->nz ||
	    (bases_of(keep, k->r, &k->br, &bt) < 0 && bases_of(&k->own, k->r, &k->br, &bt) < 0) ||
	    (bases_of(keep, k->c, &b, &bt) < 0 && bases_of(&k->own, k->c, &b, &bt) < 0)) {
		cut_free(k);
		return -1;
	}
	k->bc = inverse ? b : bt;
	return 0;
}


/* one block at x (row stride ld) into y (the same stride): forward, Y =
 * B_r X B_c^T; inverse, X = B_r^T Y B_c. The columns' side first, into
 * t; then the rows' side. Each output a sum of products in double, in
 * index order, as rows scaled and added (the inner loops vectorise, in
 * the widest clone the CPU runs: the Makefile keeps multiply and add
 * apart, so every clone gives the same bits). Four rows are added in one
 * pass over the output, (((t + a0) + a1) + a2) + a3, the same roundings
 * as one at a time with a quarter of the loads and stores. A zero input
 * (most of a sparse block) adds a zero, which changes nothing, and four
 * of them are skipped; a row of t that is all zero is skipped. */
SIMD_CLONES static void
block(const cut *k, const float *x, float *y, size_t ld)
{
	const int inverse = k->inverse;
	const size_t r = k->r, c = k->c;
	double *t = k->t, *acc = k->acc;
	for (size_t i = 0; i < r; i++) {
		double *ti = t + i * c;
		const float *xi = x + i * ld;
		for (size_t l = 0; l < c; l++)
			ti[l] = 0;
		k->nz[i] = 0;
		size_t j = 0;
		/* t_il += x_ij B_c[j][l] (inverse), x_ij B_c[l][j] */
		for (; j + 4 <= c; j += 4) {
			const double v0 = xi[j], v1 = xi[j + 1], v2 = xi[j + 2], v3 = xi[j + 3];
			if (v0 == 0 && v1 == 0 && v2 == 0 && v3 == 0)
				continue;
			k->nz[i] = 1;
			const double *b0 = k->bc + j * c, *b1 = b0 + c, *b2 = b1 + c, *b3 = b2 + c;
			for (size_t l = 0; l < c; l++)
				ti[l] = (((ti[l] + v0 * b0[l]) + v1 * b1[l]) + v2 * b2[l]) + v3 * b3[l];
		}
		for (; j < c; j++) {
			const double v = xi[j];
			if (v == 0)
				continue;
			k->nz[i] = 1;
			const double *b = k->bc + j * c;
			for (size_t l = 0; l < c; l++)
				ti[l] += v * b[l];
		}
	}
	for (size_t q = 0; q < r; q++) {
		for (size_t l = 0; l < c; l++)
			acc[l] = 0;
		size_t i = 0;
		while (i < r) {
			/* the next four rows of t that hold a nonzero, in order */
			size_t n = 0, at[4];
			for (; i < r && n < 4; i++)
				if (k->nz[i])
					at[n++] = i;
			double a[4] = {0, 0, 0, 0};
			const double *tr[4];
			for (size_t m = 0; m < n; m++) {
				a[m] = inverse ? k->br[at[m] * r + q] : k->br[q * r + at[m]];
				tr[m] = t + at[m] * c;
			}
			if (n == 4) {
				for (size_t l = 0; l < c; l++)
					acc[l] = (((acc[l] + a[0] * tr[0][l]) + a[1] * tr[1][l]) +
						  a[2] * tr[2][l]) + a[3] * tr[3][l];
			} else {
				for (size_t m = 0; m < n; m++)
					for (size_t l = 0; l < c; l++)
						acc[l] += a[m] * tr[m][l];
			}
		}
		for (size_t l = 0; l < c; l++)
			y[q * ld + l] = (float)acc[l];
	}
}

static int
transform(dct_bases *c, const float *x, size_t rows, size_t cols, size_t target, float *y,
	  int inverse)
{
	if (!rows || !cols)
		return 0;
	cut k;
	if (cut_make(&k, c, rows, cols, target, inverse) < 0)
		return -1;
	for (size_t by = 0; by < rows; by += k.r)
		for (size_t bx = 0; bx < cols; bx += k.c)
			block(&k, x + by * cols + bx, y + by * cols + bx, cols);
	cut_free(&k);
	return 0;
}

int
dct_encode(const float *x, size_t rows, size_t cols, size_t target, float *y)
{
	return transform(NULL, x, rows, cols, target, y, 0);
}

int
dct_decode(const float *y, size_t rows, size_t cols, size_t target, float *x)
{
	return transform(NULL, y, rows, cols, target, x, 1);
}

int
dct_encode_with(dct_bases *c, const float *x, size_t rows, size_t cols, size_t target, float *y)
{
	return transform(c, x, rows, cols, target, y, 0);
}

int
dct_decode_with(dct_bases *c, const float *y, size_t rows, size_t cols, size_t target, float *x)
{
	return transform(c, y, rows, cols, target, x, 1);
}

static size_t
clamp_k(size_t k, size_t size)
{
	return k < 1 ? 1 : k > size ? size : k;
}

size_t
dct_kept(size_t rows, size_t cols, size_t target, size_t k)
{
	if (!rows || !cols)
		return 0;
	size_t r = rows > 1 ? dct_side(rows, target) : 1, c = dct_side(cols, target);
	return rows / r * (cols / c) * clamp_k(k, r * c);
}

int
dct_topk(float *y, size_t rows, size_t cols, size_t target, size_t k, float *kept)
{
	if (!rows || !cols)
		return 0;
	size_t r = rows > 1 ? dct_side(rows, target) : 1, c = dct_side(cols, target);
	size_t want = clamp_k(k, r * c);
	float *mag = malloc(sizeof(float) * r * c);
	if (!mag)
		return -1;
	for (size_t by = 0; by < rows; by += r)
		for (size_t bx = 0; bx < cols; bx += c) {
			float *yb = y + by * cols + bx;
			float *kb = kept + by * cols + bx;
			/* the want-th largest magnitude t: those above it kept,
			 * then those equal to it in row-major order until want */
			for (size_t q = 0; q < r; q++)
				for (size_t l = 0; l < c; l++)
					mag[q * c + l] = fabsf(yb[q * cols + l]);
			float t = compress_kth_largest(mag, r * c, want);
			size_t above = 0;
			for (size_t q = 0; q < r; q++)
				for (size_t l = 0; l < c; l++)
					above += fabsf(yb[q * cols + l]) > t;
			size_t ties = want - above;
			for (size_t q = 0; q < r; q++)
				for (size_t l = 0; l < c; l++) {
					size_t i = q * cols + l;
					float m = fabsf(yb[i]);
					int keep = m > t || (m == t && ties > 0 && ties--);
					kb[i] = (float)keep;
					if (!keep)
						yb[i] = 0;
				}
		}
	free(mag);
	return 0;
}
