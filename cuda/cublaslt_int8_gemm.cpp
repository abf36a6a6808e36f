#include "cuda/cublaslt_int8_gemm.h"

#include "cuda/cublaslt_gemm.h"

#include <fmt/format.h>

#include <utility>

namespace voxseg::cuda {

LtInt8Gemm::~LtInt8Gemm() { release(); }

void LtInt8Gemm::release() {
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    for (cublasLtMatrixLayout_t l : {w_, a_, d_})
        if (l) cublasLtMatrixLayoutDestroy(l);
    desc_ = nullptr;
    w_ = a_ = d_ = nullptr;
}

LtInt8Gemm::LtInt8Gemm(LtInt8Gemm&& other) noexcept { *this = std::move(other); }

LtInt8Gemm& LtInt8Gemm::operator=(LtInt8Gemm&& other) noexcept {
    if (this != &other) {
        release();
        algo_ = other.algo_;
        desc_ = std::exchange(other.desc_, nullptr);
        w_ = std::exchange(other.w_, nullptr);
        a_ = std::exchange(other.a_, nullptr);
        d_ = std::exchange(other.d_, nullptr);
    }
    return *this;
}

Result<LtInt8Gemm> LtInt8Gemm::create(cublasLtHandle_t handle, int64_t m, int64_t k, int64_t rows,
                                      size_t workspace_bytes) {
    if (m % 4 != 0 || k % 4 != 0)
        return invalidArgument(
            fmt::format("int8 matrix product {} x {}: m and k must be "
                        "multiples of 4",
                        m, k));
    LtInt8Gemm g;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulDescCreate(&g.desc_, CUBLAS_COMPUTE_32I, CUDA_R_32I));
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.desc_, CUBLASLT_MATMUL_DESC_TRANSA, &trans,
                                                       sizeof(trans)));
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.desc_, CUBLASLT_MATMUL_DESC_TRANSB,
                                                       &no_trans, sizeof(no_trans)));
    // Column-major: W stored k x m (ld k, transposed), A stored k x rows (ld k), D m x rows (ld m).
    VOXSEG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g.w_, CUDA_R_8I, uint64_t(k), uint64_t(m), k));
    VOXSEG_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&g.a_, CUDA_R_8I, uint64_t(k), uint64_t(rows), k));
    VOXSEG_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&g.d_, CUDA_R_32I, uint64_t(m), uint64_t(rows), m));

    cublasLtMatmulPreference_t pref = nullptr;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    struct PrefGuard {
        cublasLtMatmulPreference_t p;
        ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
    } guard{pref};
    const uint64_t ws = workspace_bytes;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, g.desc_, g.w_, g.a_, g.d_,
                                                             g.d_, pref, 1, &result, &found);
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
        return cublasStatus(st, "cublasLtMatmulAlgoGetHeuristic (int8)");
    if (st != CUBLAS_STATUS_SUCCESS || found == 0)
        return unsupported(fmt::format(
            "cuBLASLt has no int8 algorithm for the matrix product {} x {} x {} on this GPU "
            "(int8 tensor cores need sm_75 or newer); use --precision bf16 or fp16",
            m, k, rows));
    g.algo_ = result.algo;
    return g;
}

Status LtInt8Gemm::run(cublasLtHandle_t handle, const int8_t* w, const int8_t* a, int32_t* d,
                       void* workspace, size_t workspace_bytes, cudaStream_t stream) const {
    const int32_t alpha = 1, beta = 0;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmul(handle, desc_, &alpha, w, w_, a, a_, &beta, d, d_, d, d_,
                                       &algo_, workspace, workspace_bytes, stream));
    return Status::ok();
}

}  // namespace voxseg::cuda
