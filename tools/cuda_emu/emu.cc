/* emu.cc - the host emulation behind cuda_runtime.h and cublas_v2.h: a
 * launch runs its grid's blocks one after another, each block's threads
 * as fibers (ucontext) scheduled in turn; a fiber gives way only at a
 * barrier (__syncthreads: the block's; a shuffle: its warp's, twice: once
 * to publish its value, once before the slots are reused), so a kernel
 * whose threads would deadlock on a GPU deadlocks here too (said, then
 * abort). The runtime's calls are malloc, memset and memmove. */
#include <ucontext.h>
#include <stdio.h>
#include <vector>
#include "cublas_v2.h"
dim3 threadIdx, blockIdx, blockDim, gridDim;
struct Bar { int n, arrived; unsigned gen; };
struct Fib { ucontext_t ctx; dim3 idx; int state; Bar *bar; };
static std::vector<Fib> F;
static std::vector<char *> stacks;
static ucontext_t sched;
static int cur, nth;
static const std::function<void()> *body;
static Bar blockbar, warpbar[32];
static double slot[1024];
#define STK (256 * 1024)
static void fmain() { (*body)(); F[cur].state = 2; }
static void bar_wait(Bar &b) {
	if (++b.arrived == b.n) {
		b.arrived = 0; b.gen++;
		for (int i = 0; i < nth; i++) if (F[i].state == 1 && F[i].bar == &b) F[i].state = 0;
		return;
	}
	F[cur].state = 1; F[cur].bar = &b;
	swapcontext(&F[cur].ctx, &sched);
}
static int lin() { return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)); }
void __syncthreads(void) { bar_wait(blockbar); }
int emu_lane(void) { return lin() & 31; }
double emu_shfl(double v, int src) {
	int l = lin(), w = l >> 5;
	slot[l] = v;
	bar_wait(warpbar[w]);
	double r = src >= 0 && src < 32 ? slot[(w << 5) | src] : v;
	bar_wait(warpbar[w]);
	return r;
}
void emu_run_grid(dim3 g, dim3 b, const std::function<void()> &fn) {
	nth = (int)(b.x * b.y * b.z);
	if (nth > 1024 || nth % 32) { fprintf(stderr, "emu: block of %d threads\n", nth); abort(); }
	if ((int)F.size() < nth) F.resize(nth);
	while ((int)stacks.size() < nth) stacks.push_back((char *)malloc(STK));
	blockDim = b; gridDim = g; body = &fn;
	for (unsigned bz = 0; bz < g.z; bz++) for (unsigned by = 0; by < g.y; by++) for (unsigned bx = 0; bx < g.x; bx++) {
		blockIdx = dim3(bx, by, bz);
		blockbar = {nth, 0, 0};
		for (int w = 0; w < nth / 32; w++) warpbar[w] = {32, 0, 0};
		for (int i = 0; i < nth; i++) {
			getcontext(&F[i].ctx);
			F[i].ctx.uc_stack.ss_sp = stacks[i]; F[i].ctx.uc_stack.ss_size = STK; F[i].ctx.uc_link = &sched;
			makecontext(&F[i].ctx, fmain, 0);
			F[i].idx = dim3(i % b.x, i / b.x % b.y, i / (b.x * b.y)); F[i].state = 0;
		}
		int done = 0, i = 0, idle = 0;
		while (done < nth) {
			if (F[i].state == 0) {
				cur = i; threadIdx = F[i].idx; idle = 0;
				swapcontext(&sched, &F[i].ctx);
				if (F[i].state == 2) done++;
			} else if (++idle > 2 * nth) { fprintf(stderr, "emu: deadlock\n"); abort(); }
			i = (i + 1) % nth;
		}
	}
}
cudaError_t emu_malloc(void **p, size_t n) { *p = malloc(n ? n : 1); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaFree(void *p) { free(p); return 0; }
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) { if (n) memset(p, v, n); return 0; }
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) { if (n) memmove(d, s, n); return 0; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return 0; }
cudaError_t cudaGetLastError(void) { return 0; }
const char *cudaGetErrorString(cudaError_t) { return "emulated error"; }
static int dummy;
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = &dummy; return 0; }
cudaError_t cudaStreamDestroy(cudaStream_t) { return 0; }
cudaError_t cudaSetDevice(int) { return 0; }
cudaError_t cudaGetDevice(int *d) { *d = 0; return 0; }
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int) {
	*v = a == cudaDevAttrMultiProcessorCount ? 1 : a == cudaDevAttrClockRate ? 1000000 : a == cudaDevAttrComputeCapabilityMajor ? 9 : 0;
	return 0;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) { snprintf(p->name, 256, "emulated"); p->major = 9; p->minor = 0; p->multiProcessorCount = 1; return 0; }
cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *f = 1 << 30; *t = 2u << 30; return 0; }
cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return 0; }
cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return 0; }
cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return 0; }
const char *cublasGetStatusString(cublasStatus_t) { return "emulated cublas error"; }
cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = &dummy; return 0; }
cublasStatus_t cublasDestroy(cublasHandle_t) { return 0; }
cublasStatus_t cublasSetMathMode(cublasHandle_t, int) { return 0; }
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return 0; }
cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
			   const float *alpha, const float *A, int lda, const float *B, int ldb,
			   const float *beta, float *C, int ldc) {
	if (m < 0 || n < 0 || k < 0 || lda < std::max(1, ta == CUBLAS_OP_N ? m : k) ||
	    ldb < std::max(1, tb == CUBLAS_OP_N ? k : n) || ldc < std::max(1, m)) {
		fprintf(stderr, "emu: sgemm invalid: m %d n %d k %d lda %d ldb %d ldc %d ta %d tb %d\n", m, n, k, lda, ldb, ldc, ta, tb);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) {
		double s = 0;
		for (int p = 0; p < k; p++) {
			float a = ta == CUBLAS_OP_N ? A[i + (size_t)p * lda] : A[p + (size_t)i * lda];
			float b = tb == CUBLAS_OP_N ? B[p + (size_t)j * ldb] : B[j + (size_t)p * ldb];
			s += (double)a * b;
		}
		float *c = &C[i + (size_t)j * ldc];
		*c = (float)(*alpha * s + (*beta != 0 ? (double)*beta * *c : 0.0));
	}
	return 0;
}
cublasStatus_t cublasSgemmBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
				  const float *alpha, const float *const A[], int lda, const float *const B[], int ldb,
				  const float *beta, float *const C[], int ldc, int count) {
	for (int i = 0; i < count; i++) {
		cublasStatus_t s = cublasSgemm(h, ta, tb, m, n, k, alpha, A[i], lda, B[i], ldb, beta, C[i], ldc);
		if (s) return s;
	}
	return 0;
}
