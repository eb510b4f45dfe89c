/* conv_kern.h - the convolution kernels on [C][H][W][B] (direct, and
 * Winograd's F(2x2, 3x3) for the 3x3 stride-1 layers), written
 * once and compiled once per ISA level: backend_cpu_conv.c includes this
 * file several times, each time with
 *   KN(name)  the name with the level's suffix,
 *   VW        floats per vector (16 AVX-512, 8 AVX2, 4 SSE, 1 scalar),
 *   KTARGET   the level's target attribute (empty for the baseline),
 *   CBF, OBF  the forward's register block: output channels x columns
 *             (Winograd's GEMMs: output channels x vectors of images),
 *   CBW, RBW, KNW  the weight gradient's block: output channels x rows
 *             of taps x columns of taps.
 * The blocks are sized to the level's register file (32 vector registers
 * with AVX-512, 16 below), which is why one blocking is not compiled for
 * every level: an AVX-512 blocking built for AVX2 spills.
 *
 * A vector holds one pixel of VW consecutive images. A batch that is not a
 * multiple of VW ends with a vector that overlaps the one before it: the
 * forward writes those lanes twice with the same value, and the weight
 * gradient masks them out. Callers pass batches of at least VW.
 *
 * The inner block functions take their block sizes as arguments that are
 * constants at every call (always_inline), so each (cb, ob) pair compiles
 * to straight code with the accumulators in registers. The file undefines
 * its parameters at its end. */

_Static_assert(CBF >= 1 && CBF <= 6 && OBF >= 1 && OBF <= 4 && CBW >= 1 &&
		       CBW <= 4 && RBW >= 1 && RBW <= 5 && KNW >= 1 && KNW <= 7,
	       "conv_kern.h: block sizes out of range");

typedef float KN(vf) __attribute__((vector_size(VW * 4)));
typedef float KN(vfu) __attribute__((vector_size(VW * 4), aligned(4)));
typedef int32_t KN(vi) __attribute__((vector_size(VW * 4)));
typedef int32_t KN(viu) __attribute__((vector_size(VW * 4), aligned(4)));

#define VLD(p) (*(const KN(vfu) *)(p))
#define VST(p, v) (*(KN(vfu) *)(p) = (v))

/* start of vector v of nv over a batch of B (the last overlaps) */
static inline int
KN(vstart)(int v, int B)
{
	return (v + 1) * VW <= B ? v * VW : B - VW;
}

/* ---- forward: y[co][oh][ow][b] = act(b[co] + sum x . w) --------------- */

/* a block's sums start at the bias ... */
static inline __attribute__((always_inline)) KTARGET void
KN(acc_init)(const int cb, const int ob, const cjob *j, int co, KN(vf) acc[6][8])
{
#pragma GCC unroll 6
	for (int c = 0; c < cb; c++) {
		float bv = j->bias ? j->bias[co + c] : 0.0f;
#pragma GCC unroll 8
		for (int o = 0; o < ob; o++)
			acc[c][o] = (KN(vf)){0} + bv;
	}
}

/* ... and go out through the activation */
static inline __attribute__((always_inline)) KTARGET void
KN(acc_store)(const int cb, const int ob, const cjob *j, int co, int oh, int ow,
	      int b, KN(vf) acc[6][8])
{
	const KN(vf) zero = {0};
#pragma GCC unroll 6
	for (int c = 0; c < cb; c++)
#pragma GCC unroll 8
		for (int o = 0; o < ob; o++) {
			KN(vf) v = acc[c][o];
			if (j->relu) /* NaN -> 0, as the reference */
				v = (KN(vf))((KN(vi))v & (KN(vi))(v > zero));
			VST(j->y + (size_t)(co + c) * j->ys_c + (size_t)oh * j->ys_r +
				    (size_t)(ow + o) * j->ys_p + b, v);
		}
}

static inline __attribute__((always_inline)) KTARGET void
KN(fwd_block)(const int cb, const int ob, const int k3, const cjob *j, int co,
	      int oh, int ow, int b)
{
	/* k3: a 3x3 kernel at stride 1, known when compiled, every tap
	 * computed (the padding's zeros too: a border row is a few percent) */
	const int k = k3 ? 3 : j->k, kw = k3 ? 3 : j->kw, s = k3 ? 1 : j->s, B = j->B;
	const int kk = k * kw, K = j->cin * kk;
	const size_t rowB = (size_t)j->wp * B, chB = (size_t)j->hp * rowB;
	KN(vf) acc[6][8];
	KN(acc_init)(cb, ob, j, co, acc);
	const float *xb = j->x + (size_t)(oh * s) * rowB + (size_t)(ow * s) * B + b;
	const float *wb = j->w + (size_t)co * K;
	/* the taps that can meet a nonzero input (the rest read padding) */
	const int ki0 = k3 ? 0 : SL_MAX(0, j->nz_r0 - oh * s);
	const int ki1 = k3 ? 3 : SL_MIN(k, j->nz_r1 - oh * s);
	const int kj0 = k3 ? 0 : SL_MAX(0, j->nz_c0 - (ow + ob - 1) * s);
	const int kj1 = k3 ? 3 : SL_MIN(kw, j->nz_c1 - ow * s);
	for (int ci = 0; ci < j->cin; ci++)
#pragma GCC unroll 3
		for (int ki = ki0; ki < ki1; ki++) {
			const float *xr = xb + ci * chB + ki * rowB;
			const float *wr = wb + ci * kk + ki * kw;
#pragma GCC unroll 3
			for (int kj = kj0; kj < kj1; kj++) {
				KN(vf) xv[8];
#pragma GCC unroll 8
				for (int o = 0; o < ob; o++)
					xv[o] = VLD(xr + (size_t)(o * s + kj) * B);
#pragma GCC unroll 6
				for (int c = 0; c < cb; c++) {
					const float wv = wr[(size_t)c * K + kj];
#pragma GCC unroll 8
					for (int o = 0; o < ob; o++)
						acc[c][o] += xv[o] * wv;
				}
			}
		}
	KN(acc_store)(cb, ob, j, co, oh, ow, b, acc);
}

#define KN_FWD_OB(C)                                                          \
	switch (ob) {                                                          \
	case 1: KN(fwd_any)(C, 1, mode, edge, j, co, oh, ow, b); break;                   \
	case 2: if (OBF >= 2) KN(fwd_any)(C, 2, mode, edge, j, co, oh, ow, b); break;     \
	case 3: if (OBF >= 3) KN(fwd_any)(C, 3, mode, edge, j, co, oh, ow, b); break;     \
	case 4: if (OBF >= 4) KN(fwd_any)(C, 4, mode, edge, j, co, oh, ow, b); break;     \
	case 5: if (OBF >= 5) KN(fwd_any)(C, 5, mode, edge, j, co, oh, ow, b); break;     \
	case 6: if (OBF >= 6) KN(fwd_any)(C, 6, mode, edge, j, co, oh, ow, b); break;     \
	case 7: if (OBF >= 7) KN(fwd_any)(C, 7, mode, edge, j, co, oh, ow, b); break;     \
	default: if (OBF >= 8) KN(fwd_any)(C, 8, mode, edge, j, co, oh, ow, b); break;    \
	}

/* The same sum for a 3x3 kernel at stride 1 with a padding of 1 read
 * from x unpadded ([cin][hp][wp][B] with hp, wp the input's own size,
 * equal to the output's): the taps that fall outside the image are not
 * computed rather than read from a padded copy. The rows are clipped at
 * run time; the columns by edge, known when compiled: 0 a block inside,
 * 1 the block at column 0 (its first column's left tap is outside), 2 the
 * block that ends at the last column (its last column's right tap). The
 * taps skipped are the padded copy's zeros, so the sums are the same. */
static inline __attribute__((always_inline)) KTARGET void
KN(fwd_block_u)(const int cb, const int ob, const int edge, const cjob *j,
		int co, int oh, int ow, int b)
{
	const int B = j->B, K = j->cin * 9;
	const long rowB = (long)j->wp * B, chB = (long)j->hp * rowB;
	KN(vf) acc[6][8];
	KN(acc_init)(cb, ob, j, co, acc);
	/* offsets are signed: the block's first column's left tap is at
	 * column ow - 1, read only when ow > 0 */
	const float *xb = j->x + b;
	const long col0 = (long)(ow - 1) * B;
	const float *wb = j->w + (size_t)co * K;
	const int ki0 = oh == 0 ? 1 : 0, ki1 = oh == j->hp - 1 ? 2 : 3;
	for (int ci = 0; ci < j->cin; ci++) {
		/* the input's channels lie a power of two apart in a residual
		 * net's maps (32 x 32 x 64 floats), so they share cache sets
		 * and what the last block read is gone: fetch the lines of the
		 * channel after next while this one is summed */
		if (ci + 2 < j->cin)
#pragma GCC unroll 3
			for (int ki = ki0; ki < ki1; ki++) {
				const float *xp = xb + (ci + 2) * chB + (long)(oh + ki - 1) * rowB + col0;
#pragma GCC unroll 6
				for (int o = 0; o < ob + 2; o++)
					if (!(edge == 1 && o == 0) && !(edge == 2 && o == ob + 1))
						__builtin_prefetch(xp + (long)o * B);
			}
#pragma GCC unroll 3
		for (int ki = ki0; ki < ki1; ki++) {
			const float *xr = xb + ci * chB + (long)(oh + ki - 1) * rowB;
			const float *wr = wb + ci * 9 + ki * 3;
#pragma GCC unroll 3
			for (int kj = 0; kj < 3; kj++) {
				KN(vf) xv[8];
#pragma GCC unroll 8
				for (int o = 0; o < ob; o++)
					if (!(edge == 1 && o + kj == 0) &&
					    !(edge == 2 && o == ob - 1 && kj == 2))
						xv[o] = VLD(xr + (col0 + (long)(o + kj) * B));
#pragma GCC unroll 6
				for (int c = 0; c < cb; c++) {
					const float wv = wr[(size_t)c * K + kj];
#pragma GCC unroll 8
					for (int o = 0; o < ob; o++)
						if (!(edge == 1 && o + kj == 0) &&
						    !(edge == 2 && o == ob - 1 && kj == 2))
							acc[c][o] += xv[o] * wv;
				}
			}
		}
	}
	KN(acc_store)(cb, ob, j, co, oh, ow, b, acc);
}

/* one block of any kind: mode 0 any kernel, 1 a 3x3 at stride 1 read
 * padded, 2 the same read unpadded with its edge (fwd_block_u) */
static inline __attribute__((always_inline)) KTARGET void
KN(fwd_any)(const int cb, const int ob, const int mode, int edge, const cjob *j,
	    int co, int oh, int ow, int b)
{
	if (mode < 2)
		KN(fwd_block)(cb, ob, mode, j, co, oh, ow, b);
	else if (edge == 0)
		KN(fwd_block_u)(cb, ob, 0, j, co, oh, ow, b);
	else if (edge == 1)
		KN(fwd_block_u)(cb, ob, 1, j, co, oh, ow, b);
	else
		KN(fwd_block_u)(cb, ob, 2, j, co, oh, ow, b);
}

/* output rows [oh0, oh1) of every channel, blocks of a mode (fwd_any);
 * mode 2 when the columns make two blocks or more */
static inline __attribute__((always_inline)) KTARGET void
KN(fwd_rows_k)(const int mode, const cjob *j, int oh0, int oh1)
{
	const int nv = (j->B + VW - 1) / VW;
	const int cbs = even_block(j->cout, CBF), obs = even_block(j->wo, OBF);
	for (int oh = oh0; oh < oh1; oh++)
		for (int co = 0; co < j->cout; co += cbs) {
			const int cb = SL_MIN(cbs, j->cout - co);
			for (int ow = 0; ow < j->wo; ow += obs) {
				const int ob = SL_MIN(obs, j->wo - ow);
				const int edge = ow == 0 ? 1 : ow + ob == j->wo ? 2 : 0;
				for (int v = 0; v < nv; v++) {
					const int b = KN(vstart)(v, j->B);
					switch (cb) {
					case 1: KN_FWD_OB(1) break;
					case 2: if (CBF >= 2) { KN_FWD_OB(2) } break;
					case 3: if (CBF >= 3) { KN_FWD_OB(3) } break;
					case 4: if (CBF >= 4) { KN_FWD_OB(4) } break;
					case 5: if (CBF >= 5) { KN_FWD_OB(5) } break;
					default: if (CBF >= 6) { KN_FWD_OB(6) } break;
					}
				}
			}
		}
}
#undef KN_FWD_OB

/* each mode a function of its own (one function of all three runs slower) */
static __attribute__((noinline)) KTARGET void
KN(fwd_rows_any)(const cjob *j, int oh0, int oh1)
{
	KN(fwd_rows_k)(0, j, oh0, oh1);
}

static __attribute__((noinline)) KTARGET void
KN(fwd_rows_k3)(const cjob *j, int oh0, int oh1)
{
	KN(fwd_rows_k)(1, j, oh0, oh1);
}

static __attribute__((noinline)) KTARGET void
KN(fwd_rows_u)(const cjob *j, int oh0, int oh1)
{
	KN(fwd_rows_k)(2, j, oh0, oh1);
}

static KTARGET void
KN(fwd_rows)(const cjob *j, int oh0, int oh1)
{
	if (j->unpad)
		KN(fwd_rows_u)(j, oh0, oh1);
	else if (j->k == 3 && j->kw == 3 && j->s == 1)
		KN(fwd_rows_k3)(j, oh0, oh1);
	else
		KN(fwd_rows_any)(j, oh0, oh1);
}

/* ---- Winograd's F(2x2, 3x3): a 3x3 kernel at stride 1, padding 1 -------
 * Each 2x2 block of outputs (a tile) is A^T [sum over ci of U . V] A: V =
 * B^T d B transforms the tile's 4x4 patch d of one input channel, U = G g
 * G^T one 3x3 kernel g (wino_weights, once per call), and . multiplies
 * element by element. For the 16 elements that is 16 small GEMMs over the
 * input channels: 16 multiplies for a tile and a pair of channels against
 * the direct sum's 36. The transforms' matrices are Lavin and Gray's
 * (2016): B^T rows (1 0 -1 0) (0 1 1 0) (0 -1 1 0) (0 1 0 -1), G rows
 * (1 0 0) (1/2 1/2 1/2) (1/2 -1/2 1/2) (0 0 1), A^T rows (1 1 1 0)
 * (0 1 -1 -1). A job's items are (tile, group of batch vectors); V for
 * one item, [16][cin][vectors] (each element's slab padded by a line), is
 * the calling thread's scratch. */

/* B^T d B of one 4x4 patch, in place */
static inline __attribute__((always_inline)) KTARGET void
KN(wino_bt)(KN(vf) d[4][4])
{
	KN(vf) t[4][4];
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		t[0][c] = d[0][c] - d[2][c];
		t[1][c] = d[1][c] + d[2][c];
		t[2][c] = d[2][c] - d[1][c];
		t[3][c] = d[1][c] - d[3][c];
	}
#pragma GCC unroll 4
	for (int r = 0; r < 4; r++) {
		d[r][0] = t[r][0] - t[r][2];
		d[r][1] = t[r][1] + t[r][2];
		d[r][2] = t[r][2] - t[r][1];
		d[r][3] = t[r][1] - t[r][3];
	}
}

/* V[e][ci][v] for the tile at (ty, tx), the batch's vectors [v0, v0 + nvb):
 * the patch's pixels outside the image are the padding's zeros */
static KTARGET void
KN(wino_in)(const gjob *j, int ty, int tx, int v0, int nvb, float *V,
	    size_t vs, size_t es)
{
	const int H = j->h, W = j->w, B = j->B;
	const long rowB = (long)W * B, chB = (long)H * rowB;
	const int r0 = 2 * ty - 1, c0 = 2 * tx - 1;
	const int inside = r0 >= 0 && c0 >= 0 && r0 + 4 <= H && c0 + 4 <= W;
	/* a patch at the border reads its pixels outside the image from the
	 * nearest inside and masks them to zero: no branch a pixel */
	long off[4][4];
	KN(vi) keep[4][4];
	if (!inside)
		for (int r = 0; r < 4; r++)
			for (int c = 0; c < 4; c++) {
				const int rr = SL_MIN(SL_MAX(r0 + r, 0), H - 1);
				const int cc = SL_MIN(SL_MAX(c0 + c, 0), W - 1);
				off[r][c] = rr * rowB + (long)cc * B;
				keep[r][c] = (KN(vi)){0} + (rr == r0 + r && cc == c0 + c ? -1 : 0);
			}
	/* the lines of the next tile's two new columns, fetched while this
	 * tile is read: a patch's 4 rows of every channel are as many streams,
	 * more than the prefetchers follow */
	const int nc = c0 + 4 < W ? SL_MIN(2, W - c0 - 4) : 0;
	const long pf0 = (long)(c0 + 4) * B + KN(vstart)(v0, B);
	const long pf1 = (long)(c0 + 4 + nc - 1) * B + KN(vstart)(v0 + nvb - 1, B) + VW;
	for (int ci = 0; ci < j->cin; ci++) {
		if (nc > 0)
			for (int r = SL_MAX(r0, 0); r < SL_MIN(r0 + 4, H); r++)
				for (long o = pf0; o < pf1; o += 16)
					__builtin_prefetch(j->x + ci * chB + r * rowB + o);
		for (int v = 0; v < nvb; v++) {
			const float *xp = j->x + ci * chB + KN(vstart)(v0 + v, B);
			KN(vf) d[4][4];
			if (inside) {
#pragma GCC unroll 4
				for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
					for (int c = 0; c < 4; c++)
						d[r][c] = VLD(xp + (r0 + r) * rowB + (long)(c0 + c) * B);
			} else {
#pragma GCC unroll 4
				for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
					for (int c = 0; c < 4; c++)
						d[r][c] = (KN(vf))((KN(vi))VLD(xp + off[r][c]) &
								   keep[r][c]);
			}
			KN(wino_bt)(d);
			float *vp = V + ci * vs + (size_t)v * VW;
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
				for (int c = 0; c < 4; c++)
					VST(vp + (size_t)(r * 4 + c) * es, d[r][c]);
		}
	}
}

/* Output channels co..co+cb-1 of the tile's ob vectors: the 16 GEMMs'
 * sums over the input channels in registers, one element at a time, then
 * A^T M A, the bias and the activation, stored where inside the output. */
static inline __attribute__((always_inline)) KTARGET void
KN(wino_block)(const int cb, const int ob, const gjob *j, const float *V,
	       size_t vs, size_t es, int co, int ty, int tx, int v0)
{
	KN(vf) M[16][CBF][OBF];
	const size_t us = (size_t)j->cin * j->cout;
	for (int e = 0; e < 16; e++) {
		KN(vf) acc[6][8];
#pragma GCC unroll 6
		for (int c = 0; c < cb; c++)
#pragma GCC unroll 8
			for (int o = 0; o < ob; o++)
				acc[c][o] = (KN(vf)){0};
		const float *ue = j->u + e * us + co, *ve = V + e * es;
		for (int ci = 0; ci < j->cin; ci++, ue += j->cout, ve += vs) {
			KN(vf) xv[8];
#pragma GCC unroll 8
			for (int o = 0; o < ob; o++)
				xv[o] = VLD(ve + (size_t)o * VW);
#pragma GCC unroll 6
			for (int c = 0; c < cb; c++) {
				const float wv = ue[c];
#pragma GCC unroll 8
				for (int o = 0; o < ob; o++)
					acc[c][o] += xv[o] * wv;
			}
		}
#pragma GCC unroll 6
		for (int c = 0; c < cb; c++)
#pragma GCC unroll 8
			for (int o = 0; o < ob; o++)
				M[e][c][o] = acc[c][o];
	}
	const KN(vf) zero = {0};
	const int oh = 2 * ty, ow = 2 * tx;
	const int two_r = oh + 1 < j->h, two_c = ow + 1 < j->w;
	const size_t chB = (size_t)j->h * j->w * j->B, rowB = (size_t)j->w * j->B;
	for (int c = 0; c < cb; c++) {
		const float bv = j->bias ? j->bias[co + c] : 0.0f;
		for (int o = 0; o < ob; o++) {
			KN(vf) t[2][4], y[2][2];
#pragma GCC unroll 4
			for (int k = 0; k < 4; k++) {
				t[0][k] = M[k][c][o] + M[4 + k][c][o] + M[8 + k][c][o];
				t[1][k] = M[4 + k][c][o] - M[8 + k][c][o] - M[12 + k][c][o];
			}
#pragma GCC unroll 2
			for (int i = 0; i < 2; i++) {
				y[i][0] = t[i][0] + t[i][1] + t[i][2] + bv;
				y[i][1] = t[i][1] - t[i][2] - t[i][3] + bv;
				if (j->relu) /* NaN -> 0, as the reference */
					for (int k = 0; k < 2; k++)
						y[i][k] = (KN(vf))((KN(vi))y[i][k] &
								   (KN(vi))(y[i][k] > zero));
			}
			float *yp = j->y + (size_t)(co + c) * chB + (size_t)oh * rowB +
				    (size_t)ow * j->B + KN(vstart)(v0 + o, j->B);
			VST(yp, y[0][0]);
			if (two_c)
				VST(yp + j->B, y[0][1]);
			if (two_r) {
				VST(yp + rowB, y[1][0]);
				if (two_c)
					VST(yp + rowB + j->B, y[1][1]);
			}
		}
	}
}

#define KN_WINO_OB(C)                                                         \
	switch (nvb) {                                                         \
	case 1: KN(wino_block)(C, 1, j, V, vs, es, co, ty, tx, v0); break;      \
	case 2: if (OBF >= 2) KN(wino_block)(C, 2, j, V, vs, es, co, ty, tx, v0); break; \
	case 3: if (OBF >= 3) KN(wino_block)(C, 3, j, V, vs, es, co, ty, tx, v0); break; \
	default: if (OBF >= 4) KN(wino_block)(C, 4, j, V, vs, es, co, ty, tx, v0); break; \
	}

/* Items [i0, i1) of wino_count(): V is this thread's scratch */
static KTARGET void
KN(wino_items)(const gjob *j, float *V, long i0, long i1)
{
	const int nv = (j->B + VW - 1) / VW, chs = even_block(nv, OBF);
	const int nch = (nv + chs - 1) / chs, cbs = even_block(j->cout, CBF);
	for (long it = i0; it < i1; it++) {
		const int t = (int)(it / nch), v0 = (int)(it % nch) * chs;
		const int ty = t / j->tw, tx = t % j->tw, nvb = SL_MIN(chs, nv - v0);
		const size_t vs = (size_t)nvb * VW, es = WINO_SLAB(j->cin, vs);
		KN(wino_in)(j, ty, tx, v0, nvb, V, vs, es);
		for (int co = 0; co < j->cout; co += cbs) {
			const int cb = SL_MIN(cbs, j->cout - co);
			switch (cb) {
			case 1: KN_WINO_OB(1) break;
			case 2: if (CBF >= 2) { KN_WINO_OB(2) } break;
			case 3: if (CBF >= 3) { KN_WINO_OB(3) } break;
			case 4: if (CBF >= 4) { KN_WINO_OB(4) } break;
			case 5: if (CBF >= 5) { KN_WINO_OB(5) } break;
			default: if (CBF >= 6) { KN_WINO_OB(6) } break;
			}
		}
	}
}
#undef KN_WINO_OB

/* ---- weight gradient: dw[co][ci][ki][kj] = sum dy . x ------------------ */

/* Taps [ki0, ki0 + kr) x [kj0, kj0 + kn) for channels co..co+cb-1 and
 * input channel ci, summed over every output pixel and image, the
 * block's sums in registers. The images are the innermost loop, so a
 * pixel's vectors are read one after another and every cache line
 * brought in is used whole (lanes hold different images, and the sum
 * over lanes comes once at the end). The last vector's lanes that the one
 * before it already summed are masked out. */
static inline __attribute__((always_inline)) KTARGET void
KN(dw_block)(const int cb, const int kr, const int kn, const wjob *j, int co,
	     int ci, int ki0, int kj0)
{
	const int s = j->s, B = j->B, k = j->k, nv = (B + VW - 1) / VW;
	const int nfull = B / VW;
	const size_t rowB = (size_t)j->wp * B, chB = (size_t)j->hp * rowB;
	const size_t dchB = (size_t)j->ho * j->wo * B, sB = (size_t)s * B;
	const float *x0 = j->x + ci * chB + (size_t)ki0 * rowB + (size_t)kj0 * B;
	const float *d0 = j->dy + (size_t)co * dchB;
	/* the output pixels whose taps can meet a nonzero input */
	const int oh0 = SL_MAX(0, cdiv(j->nz_r0 - (ki0 + kr - 1), s));
	const int oh1 = SL_MIN(j->ho, cdiv(j->nz_r1 - ki0, s));
	const int ow0 = SL_MAX(0, cdiv(j->nz_c0 - (kj0 + kn - 1), s));
	const int ow1 = SL_MIN(j->wo, cdiv(j->nz_c1 - kj0, s));
	KN(vi) keep;
	for (int l = 0; l < VW; l++)
		keep[l] = l < nv * VW - B ? 0 : -1;
	KN(vf) acc[4][5][7];
#pragma GCC unroll 4
	for (int c = 0; c < cb; c++)
#pragma GCC unroll 5
		for (int r = 0; r < kr; r++)
#pragma GCC unroll 7
			for (int t = 0; t < kn; t++)
				acc[c][r][t] = (KN(vf)){0};
	for (int oh = oh0; oh < oh1; oh++) {
		const float *xr = x0 + (size_t)(oh * s) * rowB + ow0 * sB;
		const float *dr = d0 + ((size_t)oh * j->wo + ow0) * B;
		for (int ow = ow0; ow < ow1; ow++, xr += sB, dr += B)
			for (int v = 0; v < nv; v++) {
				const int b = KN(vstart)(v, B);
				KN(vf) d[4];
#pragma GCC unroll 4
				for (int c = 0; c < cb; c++) {
					d[c] = VLD(dr + c * dchB + b);
					if (v == nfull)
						d[c] = (KN(vf))((KN(vi))d[c] & keep);
				}
#pragma GCC unroll 5
				for (int r = 0; r < kr; r++)
#pragma GCC unroll 7
					for (int t = 0; t < kn; t++) {
						const KN(vf) xv = VLD(xr + r * rowB + (size_t)t * B + b);
#pragma GCC unroll 4
						for (int c = 0; c < cb; c++)
							acc[c][r][t] += d[c] * xv;
					}
			}
	}
	for (int c = 0; c < cb; c++)
		for (int r = 0; r < kr; r++)
			for (int t = 0; t < kn; t++) {
				float sum = 0.0f;
				for (int l = 0; l < VW; l++)
					sum += acc[c][r][t][l];
				j->dw[(((size_t)(co + c) * j->cin + ci) * k + ki0 + r) * k +
				      kj0 + t] = sum;
			}
}

#define KN_DW_KN(C, R)                                                        \
	switch (kn) {                                                          \
	case 1: KN(dw_block)(C, R, 1, j, co, ci, ki0, kj0); break;              \
	case 2: if (KNW >= 2) KN(dw_block)(C, R, 2, j, co, ci, ki0, kj0); break; \
	case 3: if (KNW >= 3) KN(dw_block)(C, R, 3, j, co, ci, ki0, kj0); break; \
	case 4: if (KNW >= 4) KN(dw_block)(C, R, 4, j, co, ci, ki0, kj0); break; \
	case 5: if (KNW >= 5) KN(dw_block)(C, R, 5, j, co, ci, ki0, kj0); break; \
	case 6: if (KNW >= 6) KN(dw_block)(C, R, 6, j, co, ci, ki0, kj0); break; \
	default: if (KNW >= 7) KN(dw_block)(C, R, 7, j, co, ci, ki0, kj0); break; \
	}
#define KN_DW_KR(C)                                                           \
	switch (kr) {                                                          \
	case 1: KN_DW_KN(C, 1) break;                                          \
	case 2: if (RBW >= 2) { KN_DW_KN(C, 2) } break;                        \
	case 3: if (RBW >= 3) { KN_DW_KN(C, 3) } break;                        \
	case 4: if (RBW >= 4) { KN_DW_KN(C, 4) } break;                        \
	default: if (RBW >= 5) { KN_DW_KN(C, 5) } break;                       \
	}

/* Work items [i0, i1) of dw_count(): (ci, block of tap rows, block of
 * channels), the channel block fastest so a thread's share mixes full
 * and short blocks. */
static KTARGET void
KN(dw_items)(const wjob *j, long i0, long i1)
{
	const int cbs = even_block(j->cout, CBW), rbs = even_block(j->k, RBW);
	const long ncb = (j->cout + cbs - 1) / cbs, nrb = (j->k + rbs - 1) / rbs;
	for (long it = i0; it < i1; it++) {
		const int co = (int)(it % ncb) * cbs;
		const int ki0 = (int)(it / ncb % nrb) * rbs, ci = (int)(it / ncb / nrb);
		const int cb = SL_MIN(cbs, j->cout - co), kr = SL_MIN(rbs, j->k - ki0);
		const int kns = even_block(j->k, KNW);
		for (int kj0 = 0; kj0 < j->k; kj0 += kns) {
			const int kn = SL_MIN(kns, j->k - kj0);
			switch (cb) {
			case 1: KN_DW_KR(1) break;
			case 2: if (CBW >= 2) { KN_DW_KR(2) } break;
			case 3: if (CBW >= 3) { KN_DW_KR(3) } break;
			default: if (CBW >= 4) { KN_DW_KR(4) } break;
			}
		}
	}
}
#undef KN_DW_KN
#undef KN_DW_KR

/* ---- max pooling ------------------------------------------------------- */

/* Channels [c0, c1): the first maximum of each window in row order, lane
 * by lane, as selects (random data would mispredict branches). */
static KTARGET void
KN(pool_fwd)(const conv_geom *g, const float *x, float *y, int32_t *arg,
	     int B, int c0, int c1)
{
	const int H = g->h, W = g->w, nv = (B + VW - 1) / VW;
	for (int c = c0; c < c1; c++)
		for (int oh = 0; oh < g->ho; oh++)
			for (int ow = 0; ow < g->wo; ow++) {
				const size_t o = (((size_t)c * g->ho + oh) * g->wo + ow) * B;
				int ih0, ih1, iw0, iw1;
				pool_window(g, oh, ow, &ih0, &ih1, &iw0, &iw1);
				for (int v = 0; v < nv; v++) {
					const int b = KN(vstart)(v, B);
					const float *xc = x + (size_t)c * H * W * B + b;
					KN(vf) m = VLD(xc + ((size_t)ih0 * W + iw0) * B);
					KN(vi) a = (KN(vi)){0} + (ih0 * W + iw0);
					for (int ih = ih0; ih < ih1; ih++)
						for (int iw = ih == ih0 ? iw0 + 1 : iw0; iw < iw1; iw++) {
							const KN(vf) xv = VLD(xc + ((size_t)ih * W + iw) * B);
							const KN(vi) t = xv > m;
							m = (KN(vf))(((KN(vi))xv & t) | ((KN(vi))m & ~t));
							a = (((KN(vi)){0} + (ih * W + iw)) & t) | (a & ~t);
						}
					VST(y + o + b, m);
					*(KN(viu) *)(arg + o + b) = a;
				}
			}
}

/* Windows that do not overlap (k <= stride): each input pixel takes the
 * gradient of the one output whose maximum it was, or zero. */
static KTARGET void
KN(pool_bwd_tiled)(const conv_geom *g, const float *dy, const int32_t *arg,
		   float *dx, int B, int c0, int c1)
{
	const int H = g->h, W = g->w, nv = (B + VW - 1) / VW;
	/* windows that tile the image write every pixel: nothing to clear */
	const int tiles = g->pad == 0 && g->k == g->stride && g->ho * g->k == H &&
			  g->wo * g->k == W;
	for (int c = c0; c < c1; c++) {
		float *dc = dx + (size_t)c * H * W * B;
		if (!tiles)
			memset(dc, 0, sizeof(float) * H * W * B);
		for (int oh = 0; oh < g->ho; oh++)
			for (int ow = 0; ow < g->wo; ow++) {
				const size_t o = (((size_t)c * g->ho + oh) * g->wo + ow) * B;
				int ih0, ih1, iw0, iw1;
				pool_window(g, oh, ow, &ih0, &ih1, &iw0, &iw1);
				for (int v = 0; v < nv; v++) {
					const int b = KN(vstart)(v, B);
					const KN(vi) a = *(const KN(viu) *)(arg + o + b);
					const KN(vi) d = (KN(vi))VLD(dy + o + b);
					for (int ih = ih0; ih < ih1; ih++)
						for (int iw = iw0; iw < iw1; iw++) {
							const KN(vi) t = a == ((KN(vi)){0} + (ih * W + iw));
							VST(dc + ((size_t)ih * W + iw) * B + b, (KN(vf))(d & t));
						}
				}
			}
	}
}

static const conv_kern KN(kern) = {VW, OBF, CBW, RBW, KN(fwd_rows), KN(dw_items),
				    KN(wino_items), KN(pool_fwd), KN(pool_bwd_tiled)};

#undef VLD
#undef VST
#undef KN
#undef VW
#undef KTARGET
#undef CBF
#undef OBF
#undef CBW
#undef RBW
#undef KNW
