// One s8 x s8 -> s32 matrix product on cuBLASLt's int8 (IMMA tensor-core) kernels, planned once:
// the int8 convolution's (int8_conv.h) D[rows][m] = A[rows][k] * W[m][k]^T, row-major, exact in
// s32 (alpha 1, beta 0, CUBLAS_COMPUTE_32I). In cuBLASLt's column-major terms that is
// D^T (m x rows) = W^T (op T of a k x m matrix) * A^T (k x rows): the "TN" form its int8 kernels
// require, with m and k multiples of 4 (the plan pads them to 16).
//
// Ownership: owns its descriptors and the algorithm chosen. Move-only; one thread at a time.
#pragma once

#include "core/status.h"

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

    // kUnsupported when cuBLASLt has no int8 algorithm for m x k x rows within `workspace_bytes`
    // (GPUs before Turing have no int8 tensor cores).
    static Result<LtInt8Gemm> create(cublasLtHandle_t handle, int64_t m, int64_t k, int64_t rows,
                                     size_t workspace_bytes);
    Status run(cublasLtHandle_t handle, const int8_t* w, const int8_t* a, int32_t* d,
               void* workspace, size_t workspace_bytes, cudaStream_t stream) const;

  private:
    void release();
    cublasLtMatmulDesc_t desc_ = nullptr;
    cublasLtMatrixLayout_t w_ = nullptr, a_ = nullptr, d_ = nullptr;
    cublasLtMatmulAlgo_t algo_{};
};

}  // namespace voxseg::cuda
