/* dct.h - the orthonormal DCT-II of DeMo (Peng et al. 2024; the rule
 * demo, engine/ps/rules/demo.c), on host floats: a tensor cut into
 * chunks, each transformed on its own, and the k largest coefficients of
 * each chunk kept. A vector of n floats is cut into chunks of c floats; a
 * row-major matrix of rows x cols into blocks of r x c (r the rows'
 * chunk side, c the columns'), transformed separably (Y = B_r X B_c^T,
 * B the basis of a side). A side is the dimension's largest divisor not
 * above the target (DeMo's _get_smaller_split: 784 -> 56 for 64, 97 ->
 * 1), so the chunks tile the tensor. Coefficient (k, l) of a block sits
 * where the block's element (k, l) sits: a tensor's coefficients have its
 * own layout. The transforms are direct (the basis applied on each side,
 * c multiply-adds per float a side, in double), the basis computed in
 * double and rounded to float. The top-k selects by a quickselect
 * (compress.h). Pure functions: no state, no I/O. */
#ifndef SL_DCT_H
#define SL_DCT_H

#include <stddef.h>

/* the largest side a chunk may have (rule_params demo_chunk's bound) */
#define DCT_MAX_SIDE 256

/* the chunk side of a dimension of n (>= 1): its largest divisor <= target
 * (target >= 1) */
size_t dct_side(size_t n, size_t target);

/* The orthonormal DCT-II basis of side c (1 <= c <= DCT_MAX_SIDE) into
 * b[c * c]: b[k c + j] = s_k cos(pi (2 j + 1) k / (2 c)), s_0 =
 * sqrt(1 / c), s_k = sqrt(2 / c); its rows are orthonormal, so the
 * inverse is its transpose. */
void dct_basis(size_t c, float *b);

/* One tensor, rows x cols row-major (rows 1: a vector of cols floats),
 * cut for target: x into its chunks' coefficients y (dct_encode), or
 * back (dct_decode: the inverse, to rounding). x and y do not overlap.
 * 0, or -1 when out of memory. */
int dct_encode(const float *x, size_t rows, size_t cols, size_t target, float *y);
int dct_decode(const float *y, size_t rows, size_t cols, size_t target, float *x);

/* The bases of the chunk sides a caller's transforms use, each computed
 * once (dct_basis, widened to double, and its transpose) and kept until
 * dct_bases_free: one step of demo transforms a dozen tensors over three
 * sides. Zero-initialise; up to DCT_BASES sides, then the others are
 * computed at each transform. The same bits as without. */
#define DCT_BASES 8
typedef struct dct_bases {
	int n;
	size_t side[DCT_BASES];
	double *b[DCT_BASES], *bt[DCT_BASES]; /* B and its transpose, side^2 each */
} dct_bases;
void dct_bases_free(dct_bases *c);

/* dct_encode and dct_decode with the bases kept in c (NULL: none kept) */
int dct_encode_with(dct_bases *c, const float *x, size_t rows, size_t cols, size_t target,
		    float *y);
int dct_decode_with(dct_bases *c, const float *y, size_t rows, size_t cols, size_t target,
		    float *x);

/* Keep the k (at least 1, at most the chunk's size) coefficients of each
 * chunk of y (as dct_encode cut it) with the largest magnitudes, the
 * lower index (within the chunk, row-major) first among equals; zero the
 * rest. kept[i] = 1 where y[i] is kept, else 0. 0, or -1 when out of
 * memory. */
int dct_topk(float *y, size_t rows, size_t cols, size_t target, size_t k, float *kept);

/* the coefficients dct_topk keeps of such a tensor */
size_t dct_kept(size_t rows, size_t cols, size_t target, size_t k);

#endif
