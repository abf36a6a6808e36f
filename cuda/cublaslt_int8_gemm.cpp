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
        format_ = other.format_;
        desc_ = std::exchange(other.desc_, nullptr);
        w_ = std::exchange(other.w_, nullptr);
        a_ = std::exchange(other.a_, nullptr);
        d_ = std::exchange(other.d_, nullptr);
    }
    return *this;
}

Result<LtInt8Gemm> LtInt8Gemm::create(cublasLtHandle_t handle, int64_t m, int64_t k, int64_t rows,
                                      size_t workspace_bytes, math::Format8 format) {
    const bool fp8 = format == math::Format8::kE4M3;
    const char* what = fp8 ? "fp8" : "int8";
    const int64_t multiple = fp8 ? 16 : 4;
    if (m % multiple != 0 || k % multiple != 0)
        return invalidArgument(
            fmt::format("{} matrix product {} x {}: m and k must be "
                        "multiples of {}",
                        what, m, k, multiple));
    const cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_8I;
    const cudaDataType_t out_type = fp8 ? CUDA_R_32F : CUDA_R_32I;
    LtInt8Gemm g;
    g.format_ = format;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulDescCreate(
        &g.desc_, fp8 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32I, out_type));
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.desc_, CUBLASLT_MATMUL_DESC_TRANSA, &trans,
                                                       sizeof(trans)));
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.desc_, CUBLASLT_MATMUL_DESC_TRANSB,
                                                       &no_trans, sizeof(no_trans)));
    // Column-major: W stored k x m (ld k, transposed), A stored k x rows (ld k), D m x rows (ld m).
    VOXSEG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g.w_, in_type, uint64_t(k), uint64_t(m), k));
    VOXSEG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g.a_, in_type, uint64_t(k), uint64_t(rows), k));
    VOXSEG_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&g.d_, out_type, uint64_t(m), uint64_t(rows), m));

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
        return cublasStatus(st, fmt::format("cublasLtMatmulAlgoGetHeuristic ({})", what));
    if (st != CUBLAS_STATUS_SUCCESS || found == 0)
        return unsupported(fmt::format(
            "cuBLASLt has no {} algorithm for the matrix product {} x {} x {} on this GPU "
            "({} tensor cores need {} or newer); use --precision bf16 or fp16",
            what, m, k, rows, what, fp8 ? "sm_89" : "sm_75"));
    g.algo_ = result.algo;
    return g;
}

Status LtInt8Gemm::run(cublasLtHandle_t handle, const int8_t* w, const int8_t* a, void* d,
                       void* workspace, size_t workspace_bytes, cudaStream_t stream) const {
    // alpha and beta in the compute type's scale type: s32 for int8, fp32 for fp8.
    const int32_t ialpha = 1, ibeta = 0;
    const float falpha = 1.0f, fbeta = 0.0f;
    const bool fp8 = format_ == math::Format8::kE4M3;
    const void* alpha = fp8 ? static_cast<const void*>(&falpha) : &ialpha;
    const void* beta = fp8 ? static_cast<const void*>(&fbeta) : &ibeta;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmul(handle, desc_, alpha, w, w_, a, a_, beta, d, d_, d, d_,
                                       &algo_, workspace, workspace_bytes, stream));
    return Status::ok();
}

}  // namespace voxseg::cuda
