/* cuda_runtime.h - the part of the CUDA runtime that engine/cuda/ uses,
 * emulated on the host (tools/cuda_emu/build.sh): kernels are plain
 * functions run by emu.cc, one fiber per CUDA thread and one block at a
 * time (so __shared__ is a static: the block's), with __syncthreads and
 * the warp shuffles as real barriers; device memory is host memory. For
 * running the plugin's code, orchestration and kernels both, through the
 * parity suite on a machine with no GPU. It says nothing of races between
 * blocks, of timing, or of the GPU's own arithmetic (expf, the _rn
 * intrinsics are plain C++ operators here, built with -ffp-contract=off). */
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#define __global__
#define __device__
#define __host__
#define __shared__ static
struct dim3 {
	unsigned x, y, z;
	dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
extern dim3 threadIdx, blockIdx, blockDim, gridDim;
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInsufficientDriver = 35,
       cudaErrorNoDevice = 100 };
typedef void *cudaStream_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
#define cudaStreamNonBlocking 1
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount, cudaDevAttrClockRate,
		      cudaDevAttrComputeCapabilityMajor, cudaDevAttrComputeCapabilityMinor };
struct cudaDeviceProp { char name[256]; int major, minor, multiProcessorCount; };
cudaError_t emu_malloc(void **p, size_t n);
template <typename T> cudaError_t cudaMalloc(T **p, size_t n) { return emu_malloc((void **)p, n); }
cudaError_t cudaFree(void *p);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);
cudaError_t cudaMemGetInfo(size_t *f, size_t *t);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaGetDeviceCount(int *n);
/* intrinsics */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
using std::min;
using std::max;
void __syncthreads(void);
double emu_shfl(double v, int src_lane); /* the value of lane src (own when out of range) */
int emu_lane(void);
template <typename T> T __shfl_xor_sync(unsigned, T v, int o) { return (T)emu_shfl((double)v, emu_lane() ^ o); }
template <typename T> T __shfl_down_sync(unsigned, T v, int o) { return (T)emu_shfl((double)v, emu_lane() + o); }
void emu_run_grid(dim3 g, dim3 b, const std::function<void()> &body);
template <typename K> struct Launch {
	K *k;
	dim3 g, b;
	template <typename... A> void operator()(A... a) { emu_run_grid(g, b, [&]() { k(a...); }); }
};
#define LAUNCH(k, g, b, ...) Launch<decltype(k)>{k, dim3(g), dim3(b)}
