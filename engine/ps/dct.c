/* dct.c - DeMo's chunked orthonormal DCT-II and its top-k per chunk
 * (dct.h). */
#include "dct.h"
#include "compress.h"

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

/* the chunk sides of a tensor and their bases, the float basis widened
 * to double */
typedef struct cut {
	size_t r, c;   /* block rows and columns */
	int inverse;
	double *br;    /* the rows' basis */
	double *bc;    /* the columns': B_c (inverse), else its transpose */
	double *t, *acc; /* r x c and c of scratch */
	unsigned char *nz; /* r: does row i of t hold a nonzero */
} cut;

static void
cut_free(cut *k)
{
	free(k->br);
	free(k->bc);
	free(k->t);
	free(k->acc);
	free(k->nz);
}

static int
cut_make(cut *k, size_t rows, size_t cols, size_t target, int inverse)
{
	k->inverse = inverse;
	k->r = rows > 1 ? dct_side(rows, target) : 1;
	k->c = dct_side(cols, target);
	size_t big = k->r > k->c ? k->r : k->c;
	float *f = malloc(sizeof(float) * big * big);
	k->br = malloc(sizeof(double) * k->r * k->r);
	k->bc = malloc(sizeof(double) * k->c * k->c);
	k->t = malloc(sizeof(double) * k->r * k->c);
	k->acc = malloc(sizeof(double) * k->c);
	k->nz = malloc(k->r);
	if (!f || !k->br || !k->bc || !k->t || !k->acc || !k->nz) {
		free(f);
		cut_free(k);
		return -1;
	}
	dct_basis(k->r, f);
	for (size_t i = 0; i < k->r * k->r; i++)
		k->br[i] = f[i];
	dct_basis(k->c, f);
	for (size_t j = 0; j < k->c; j++)
		for (size_t l = 0; l < k->c; l++)
			k->bc[j * k->c + l] = inverse ? f[j * k->c + l] : f[l * k->c + j];
	free(f);
	return 0;
}


/* one block at x (row stride ld) into y (the same stride): forward, Y =
 * B_r X B_c^T; inverse, X = B_r^T Y B_c. The columns' side first, into
 * t; then the rows' side. Each output a sum of products in double, as
 * rows scaled and added (the inner loops vectorise); a zero input (most
 * of a sparse block) is skipped, and so is a row of t that is all zero. */
static void
block(const cut *k, const float *x, float *y, size_t ld)
{
	const int inverse = k->inverse;
	const size_t r = k->r, c = k->c;
	double *t = k->t, *acc = k->acc;
	for (size_t i = 0; i < r; i++) {
		double *ti = t + i * c;
		for (size_t l = 0; l < c; l++)
			ti[l] = 0;
		k->nz[i] = 0;
		for (size_t j = 0; j < c; j++) {
			const double v = x[i * ld + j];
			if (v == 0)
				continue;
			k->nz[i] = 1;
			/* t_il += x_ij B_c[j][l] (inverse), x_ij B_c[l][j] */
			const double *b = k->bc + j * c;
			for (size_t l = 0; l < c; l++)
				ti[l] += v * b[l];
		}
	}
	for (size_t q = 0; q < r; q++) {
		for (size_t l = 0; l < c; l++)
			acc[l] = 0;
		for (size_t i = 0; i < r; i++) {
			if (!k->nz[i])
				continue;
			const double a = inverse ? k->br[i * r + q] : k->br[q * r + i];
			const double *ti = t + i * c;
			for (size_t l = 0; l < c; l++)
				acc[l] += a * ti[l];
		}
		for (size_t l = 0; l < c; l++)
			y[q * ld + l] = (float)acc[l];
	}
}

static int
transform(const float *x, size_t rows, size_t cols, size_t target, float *y, int inverse)
{
	if (!rows || !cols)
		return 0;
	cut k;
	if (cut_make(&k, rows, cols, target, inverse) < 0)
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
	return transform(x, rows, cols, target, y, 0);
}

int
dct_decode(const float *y, size_t rows, size_t cols, size_t target, float *x)
{
	return transform(y, rows, cols, target, x, 1);
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
