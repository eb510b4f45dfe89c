/* compress.c - the compressors of what a rule pushes (compress.h;
 * docs/rules.md, "Compression"). Top-k and random-k as GRACE (Xu et al.,
 * sands-lab/grace) defines them, 8 bytes a kept value for top-k (an int32
 * index and an fp32 value) and 4 for random-k (the indices come from a seed
 * the server shares); int8 with a block-wise scale max|x| / 127, as a
 * torchft fork quantises; 4-bit E3M0 as Streaming DiLoCo names it (1 sign
 * bit, 3 exponent bits, no mantissa), scaled per block by max|x| as
 * documented there, since the paper does not say how it scales. */
#include "compress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

const char *const compress_names[] = {"none", "topk", "randk", "int8", "int4", NULL};

int
compress_kind(const char *name)
{
	for (int i = 0; compress_names[i]; i++)
		if (!strcmp(name, compress_names[i]))
			return i;
	return -1;
}

size_t
compress_k(double ratio, size_t n)
{
	double k = ceil(ratio * (double)n - 1e-9);
	if (!(k >= 1))
		return n ? 1 : 0;
	return k > (double)n ? n : (size_t)k;
}

double
compress_bytes(int kind, double ratio, size_t n, size_t block)
{
	double blocks = block ? (double)((n + block - 1) / block) : 0;
	switch (kind) {
	case CMP_TOPK:
		return 8.0 * (double)compress_k(ratio, n);
	case CMP_RANDK:
		return 4.0 * (double)compress_k(ratio, n);
	case CMP_INT8:
		return (double)n + 4.0 * blocks;
	case CMP_INT4:
		return (double)((n + 1) / 2) + 4.0 * blocks;
	default:
		return 4.0 * (double)n;
	}
}

static void
swap_f(float *a, size_t i, size_t j)
{
	float t = a[i];
	a[i] = a[j];
	a[j] = t;
}

/* h[0..n) a min-heap but for its root: sift the root down */
static void
sift_down(float *h, size_t n)
{
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < n && h[l] < h[m])
			m = l;
		if (l + 1 < n && h[l + 1] < h[m])
			m = l + 1;
		if (m == i)
			return;
		float t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* The k-th largest of a[0, n) (counting equal values), a reordered.
 * For a few out of many (DeMo's 32 of a 64 x 64 chunk) a min-heap of the
 * k largest seen: one compare for most values. Otherwise quickselect with
 * a three-way partition, so ties cost nothing. The same value either way. */
float
compress_kth_largest(float *a, size_t n, size_t k)
{
	if (k <= 64 && k * 16 <= n) {
		float h[64];
		for (size_t i = 0; i < k; i++) { /* sift up */
			size_t j = i;
			h[j] = a[i];
			while (j && h[(j - 1) / 2] > h[j]) {
				float t = h[j];
				h[j] = h[(j - 1) / 2];
				h[(j - 1) / 2] = t;
				j = (j - 1) / 2;
			}
		}
		for (size_t i = k; i < n; i++)
			if (a[i] > h[0]) {
				h[0] = a[i];
				sift_down(h, k);
			}
		return h[0];
	}
	size_t lo = 0, hi = n, want = k - 1;
	for (;;) {
		float pv = a[lo + (hi - lo) / 2];
		size_t lt = lo, i = lo, gt = hi;
		while (i < gt) {
			if (a[i] > pv)
				swap_f(a, lt++, i++);
			else if (a[i] < pv)
				swap_f(a, i, --gt);
			else
				i++;
		}
		if (want < lt)
			hi = lt;
		else if (want < gt)
			return pv;
		else
			lo = gt;
	}
}

/* keep the k largest |p_i|, the lower index first among equals */
static int
topk(float *p, size_t n, size_t k, unsigned char *kept)
{
	float *a = malloc(sizeof(float) * n);
	if (!a)
		return -1;
	for (size_t i = 0; i < n; i++)
		a[i] = fabsf(p[i]);
	float t = compress_kth_largest(a, n, k);
	size_t above = 0;
	for (size_t i = 0; i < n; i++)
		above += fabsf(p[i]) > t;
	size_t ties = k - above;
	for (size_t i = 0; i < n; i++) {
		float m = fabsf(p[i]);
		int keep = m > t || (m == t && ties > 0 && ties--);
		kept[i] = (unsigned char)keep;
		if (!keep)
			p[i] = 0;
	}
	free(a);
	return 0;
}

/* keep k indices drawn without replacement (a partial Fisher-Yates
 * shuffle of 0..n-1 from the stream), the values as they are */
static int
randk(float *p, size_t n, size_t k, uint64_t seed, uint64_t stream, unsigned char *kept)
{
	uint32_t *idx = malloc(sizeof(uint32_t) * n);
	if (!idx)
		return -1;
	for (size_t i = 0; i < n; i++)
		idx[i] = (uint32_t)i;
	rng g;
	rng_seed(&g, seed, stream);
	for (size_t i = 0; i < k; i++) {
		size_t j = i + (size_t)rng_below(&g, (uint64_t)(n - i));
		uint32_t t = idx[i];
		idx[i] = idx[j];
		idx[j] = t;
	}
	memset(kept, 0, n);
	for (size_t i = 0; i < k; i++)
		kept[idx[i]] = 1;
	for (size_t i = 0; i < n; i++)
		if (!kept[i])
			p[i] = 0;
	free(idx);
	return 0;
}

/* the largest |p_i| of a block */
static float
block_max(const float *p, size_t n)
{
	float mx = 0;
	for (size_t i = 0; i < n; i++)
		mx = fabsf(p[i]) > mx ? fabsf(p[i]) : mx;
	return mx;
}

/* int8: s = max|p| / 127, q = round(p / s) (halves away from zero)
 * within [-127, 127], decoded q s */
static void
int8_block(float *p, size_t n)
{
	float s = block_max(p, n) / 127.0f;
	for (size_t i = 0; i < n; i++) {
		if (!(s > 0)) {
			p[i] = 0;
			continue;
		}
		float q = roundf(p[i] / s);
		q = q > 127 ? 127 : q < -127 ? -127 : q;
		p[i] = q * s;
	}
}

/* E3M0: the code's 3 exponent bits e give 0 (e = 0) or M 2^(e - 7)
 * (e = 1..7: M/64 .. M), M the block's max|p|; each value goes to the
 * nearest of them (a tie to the larger), with its sign */
static void
int4_block(float *p, size_t n)
{
	float mx = block_max(p, n);
	for (size_t i = 0; i < n; i++) {
		double r = mx > 0 ? fabs((double)p[i]) / mx : 0, dist = r;
		int code = 0;
		for (int e = 1; e <= 7; e++) {
			double d = fabs(r - ldexp(1.0, e - 7));
			if (d <= dist) {
				dist = d;
				code = e;
			}
		}
		float v = code ? ldexpf(mx, code - 7) : 0.0f;
		p[i] = p[i] < 0 ? -v : v;
	}
}

int
compress_apply(int kind, double ratio, size_t block, uint64_t seed, uint64_t stream,
	       float *p, size_t n, unsigned char *kept)
{
	if (!n || kind == CMP_NONE || kind < 0 || kind >= CMP_N) {
		if (kept)
			memset(kept, 1, n);
		return 0;
	}
	unsigned char *k8 = kept ? kept : malloc(n);
	if (!k8)
		return -1;
	int rc = 0;
	if (kind == CMP_TOPK)
		rc = topk(p, n, compress_k(ratio, n), k8);
	else if (kind == CMP_RANDK)
		rc = randk(p, n, compress_k(ratio, n), seed, stream, k8);
	else {
		size_t b = block ? block : n;
		for (size_t o = 0; o < n; o += b)
			(kind == CMP_INT8 ? int8_block : int4_block)(p + o, n - o < b ? n - o : b);
		memset(k8, 1, n);
	}
	if (!kept)
		free(k8);
	return rc;
}

int
compress_ef(int kind, double ratio, size_t block, uint64_t seed, uint64_t stream, float *p,
	    float *e, size_t n, unsigned char *kept)
{
	if (!e)
		return compress_apply(kind, ratio, block, seed, stream, p, n, kept);
	float *p0 = malloc(sizeof(float) * (n ? n : 1));
	if (!p0)
		return -1;
	for (size_t i = 0; i < n; i++)
		p0[i] = p[i] += e[i];
	int rc = compress_apply(kind, ratio, block, seed, stream, p, n, kept);
	if (rc == 0)
		for (size_t i = 0; i < n; i++)
			e[i] = p0[i] - p[i];
	free(p0);
	return rc;
}
