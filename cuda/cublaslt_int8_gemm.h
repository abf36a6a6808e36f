// One 8-bit matrix product on cuBLASLt's tensor-core kernels, planned once: the int8 or fp8
// convolution's (int8_conv.h) D[rows][m] = A[rows][k] * W[m][k]^T, row-major, alpha 1, beta 0.
// int8: s8 x s8 -> s32, exact (CUBLAS_COMPUTE_32I; sm_75+). fp8: e4m3 x e4m3 -> fp32
// (CUBLAS_COMPUTE_32F, unit scales, cuBLASLt's default accumulation, not the fast one; sm_89+).
// In cuBLASLt's column-major terms that is D^T (m x rows) = W^T (op T of a k x m matrix) *
// A^T (k x rows): the "TN" form both kinds require, with m and k multiples of 16 for fp8 and of 4
// for int8 (the plan pads them to 16).
//
// Ownership: owns its descriptors and the algorithm chosen. Move-only; one thread at a time.
#pragma once

#include "core/status.h"
#include "cuda/int8_math.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace voxseg::cuda {

class LtInt8Gemm {
  public:
    LtInt8Gemm() = default;
    ~LtInt8Gemm();
    LtInt8Gemm(LtInt8Gemm&& other) noexcept;
    LtInt8Gemm& operator=(LtInt8Gemm&& other) noexcept;
    LtInt8Gemm(const LtInt8Gemm&) = delete;
    LtInt8Gemm& operator=(const LtInt8Gemm&) = delete;

    // kUnsupported when cuBLASLt has no algorithm of `format` for m x k x rows within
    // `workspace_bytes` (GPUs before Turing have no int8 tensor cores, before Ada no FP8 ones).
    static Result<LtInt8Gemm> create(cublasLtHandle_t handle, int64_t m, int64_t k, int64_t rows,
                                     size_t workspace_bytes,
                                     math::Format8 format = math::Format8::kInt8);
    // d: s32 (int8) or fp32 (fp8) [rows][m].
    Status run(cublasLtHandle_t handle, const int8_t* w, const int8_t* a, void* d, void* workspace,
               size_t workspace_bytes, cudaStream_t stream) const;

  private:
    void release();
    cublasLtMatmulDesc_t desc_ = nullptr;
    cublasLtMatrixLayout_t w_ = nullptr, a_ = nullptr, d_ = nullptr;
    cublasLtMatmulAlgo_t algo_{};
    math::Format8 format_ = math::Format8::kInt8;
};

}  // namespace voxseg::cuda
