/* compress.h - the compressors of what a rule pushes (docs/rules.md,
 * "Compression"): top-k, random-k, block-wise int8 and 4-bit E3M0. Each
 * takes a vector p of n floats (a gradient, a pseudo-gradient, or a
 * model's difference from the weights the server sent) and replaces it by
 * D(C(p)), what the server decodes; the byte count is what the message
 * carries. Plain host arithmetic, no state: error feedback's residual is
 * the caller's (engine/run/compress_push.c). */
#ifndef SL_COMPRESS_H
#define SL_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

typedef enum cmp_kind {
	CMP_NONE,  /* the floats as they are: 4 bytes each */
	CMP_TOPK,  /* the k largest |p_i| (ties: the lower index): 8k bytes */
	CMP_RANDK, /* k indices drawn from a shared seed: 4k bytes */
	CMP_INT8,  /* per block, q = round(p / s), s = max|p| / 127 */
	CMP_INT4,  /* per block, sign and 3 exponent bits: 0 or max|p| 2^-j */
	CMP_N
} cmp_kind;

/* the quantisers' block: a scale (fp32) per this many floats */
#define CMP_BLOCK 256

/* the names, in cmp_kind's order, NULL-terminated */
extern const char *const compress_names[];

/* the kind named name, or -1 */
int compress_kind(const char *name);

/* a sparsifier keeps k = ceil(ratio n) values (1e-9 of slack against
 * the rounding of ratio n: 0.07 of 100 is 7), at least 1, at most n */
size_t compress_k(double ratio, size_t n);

/* the k-th largest of a[0..n) (1 <= k <= n), counting equal values; a may
 * be reordered */
float compress_kth_largest(float *a, size_t n, size_t k);

/* the bytes of the message for n floats: 4n (none), 8k (topk), 4k
 * (randk), n + 4 blocks (int8), ceil(n / 2) + 4 blocks (int4); block is
 * the quantisers' block size */
double compress_bytes(int kind, double ratio, size_t n, size_t block);

/* Replace p[0..n) by D(C(p)). kept (n bytes, may be NULL) gets 1 where a
 * sparsifier sent the value, 0 elsewhere (all 1 for the quantisers).
 * randk draws its indices from the stream (seed, stream), which a server
 * can draw too. 0, or -1 when out of memory (p unchanged). */
int compress_apply(int kind, double ratio, size_t block, uint64_t seed, uint64_t stream,
		   float *p, size_t n, unsigned char *kept);

/* The same with error feedback (GRACE's residual memory): p = p + e,
 * then D(C(p)) in p, and e = (p + e) - D(C(p + e)), exactly; e NULL: no
 * feedback (compress_apply). 0, or -1 when out of memory. */
int compress_ef(int kind, double ratio, size_t block, uint64_t seed, uint64_t stream, float *p,
		float *e, size_t n, unsigned char *kept);

#endif
