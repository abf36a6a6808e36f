// One row-major (batched) float32 matrix product on cuBLASLt, planned once at compile time:
// D[b] = A[b] (M x K) * B[b] (K x N) [+ C[b]] [+ bias[N] along each row], batch strides 0 for an
// operand shared by every batch item. Storage stays float32; the math mode picks the tensor-core
// path: kFp32 is CUBLAS_COMPUTE_32F (FMA only, no TF32: parity with the reference backend),
// kBf16 / kFp16 round the inputs to bf16 / fp16 on tensor cores with float32 accumulation
// (CUBLAS_COMPUTE_32F_FAST_16BF / _16F), as the backend's precision asks.
//
// Row-major D = A B is computed as column-major D^T = B^T A^T, so that the bias epilogue (one
// value per column-major row) runs along the last axis. Ownership: an LtGemm owns its
// descriptors and the algorithm chosen for the pointers it was planned with. Move-only; one
// thread at a time. Units: elements (leading dimensions, strides), bytes (workspace).
#pragma once

#include "core/status.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <string>

namespace voxseg::cuda {

enum class GemmMath { kFp32, kBf16, kFp16 };

struct GemmPlan {
    int64_t m = 0, n = 0, k = 0;
    int64_t batch = 1;
    int64_t lda = 0, ldb = 0, ldd = 0;                 // row-major leading dimensions
    int64_t stride_a = 0, stride_b = 0, stride_d = 0;  // batch strides (0: shared)
    bool accumulate = false;                           // D += A B (C is D's layout), else D = A B
    const float* bias = nullptr;                       // [n], fixed for the plan; nullptr: none
    // Alignment in bytes every pointer later passed to run() has (gemmAlignment).
    uint32_t align_a = 4, align_b = 4, align_c = 4, align_d = 4;
    std::string describe() const;  // "M x K x N, batch B" for error messages
};

class LtGemm {
  public:
    LtGemm() = default;
    ~LtGemm();
    LtGemm(LtGemm&& other) noexcept;
    LtGemm& operator=(LtGemm&& other) noexcept;
    LtGemm(const LtGemm&) = delete;
    LtGemm& operator=(const LtGemm&) = delete;

    // Fails with kUnsupported when cuBLASLt has no algorithm for the plan within
    // `workspace_bytes`.
    static Result<LtGemm> create(cublasLtHandle_t handle, const GemmPlan& plan, GemmMath math,
                                 size_t workspace_bytes);
    // `c` is read when the plan accumulates (it may be `d`).
    Status run(cublasLtHandle_t handle, const float* a, const float* b, const float* c, float* d,
               void* workspace, size_t workspace_bytes, cudaStream_t stream) const;

  private:
    void release();
    Status makeDesc(cublasComputeType_t compute);
    GemmPlan plan_;
    cublasLtMatmulDesc_t desc_ = nullptr;
    cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
    cublasLtMatmulAlgo_t algo_{};
};

// Largest power of two <= 256 dividing `p` and every byte step in `steps` (batch strides, tile
// offsets): the alignment cuBLASLt may assume.
uint32_t gemmAlignment(const void* p, std::initializer_list<int64_t> steps);

Status cublasStatus(cublasStatus_t status, const std::string& what);

// Returns the failed cuBLASLt call as a Status (the enclosing function returns Status/Result).
#define VOXSEG_CUBLAS_CHECK(call)                                          \
    do {                                                                   \
        const cublasStatus_t voxseg_cublas_st_ = (call);                   \
        if (voxseg_cublas_st_ != CUBLAS_STATUS_SUCCESS)                    \
            return ::voxseg::cuda::cublasStatus(voxseg_cublas_st_, #call); \
    } while (0)

}  // namespace voxseg::cuda
