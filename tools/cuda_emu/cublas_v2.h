/* cublas_v2.h - cuBLAS's SGEMM and batched SGEMM as the plugin calls them,
 * emulated on the host (emu.cc): column-major, double sums, and the
 * argument checks cuBLAS makes (a leading dimension too small is
 * CUBLAS_STATUS_INVALID_VALUE, said on stderr). */
#pragma once
#include "cuda_runtime.h"
typedef void *cublasHandle_t;
typedef int cublasStatus_t;
enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_ALLOC_FAILED = 3, CUBLAS_STATUS_INVALID_VALUE = 7 };
typedef enum { CUBLAS_OP_N, CUBLAS_OP_T } cublasOperation_t;
#define CUBLAS_DEFAULT_MATH 0
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, int m);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
			   const float *alpha, const float *A, int lda, const float *B, int ldb,
			   const float *beta, float *C, int ldc);
cublasStatus_t cublasSgemmBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
				  int n, int k, const float *alpha, const float *const A[], int lda,
				  const float *const B[], int ldb, const float *beta, float *const C[],
				  int ldc, int count);
