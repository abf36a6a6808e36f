#include "cuda/cublaslt_gemm.h"

#include <fmt/format.h>

#include <utility>

namespace voxseg::cuda {

Status cublasStatus(cublasStatus_t status, const std::string& what) {
    const StatusCode code =
        status == CUBLAS_STATUS_ALLOC_FAILED ? StatusCode::kOutOfMemory : StatusCode::kDeviceError;
    // cublasGetStatusName lives in libcublas, which the backend does not link: the number is
    // cublasStatus_t of cublas_api.h.
    return {code, fmt::format("{} failed: cuBLAS status {}", what, int(status)), "cublasLt"};
}

std::string GemmPlan::describe() const {
    return fmt::format("matrix product {} x {} x {}, batch {}", m, k, n, batch);
}

uint32_t gemmAlignment(const void* p, std::initializer_list<int64_t> steps) {
    uint64_t a = reinterpret_cast<uint64_t>(p);
    for (int64_t s : steps) a |= uint64_t(s < 0 ? -s : s);
    uint32_t align = 256;
    while (align > 1 && (a % align) != 0) align /= 2;
    return align;
}

namespace {

Status layout(cublasLtMatrixLayout_t* out, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
              int64_t stride) {
    VOXSEG_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(out, CUDA_R_32F, uint64_t(rows), uint64_t(cols), ld));
    if (batch > 1) {
        const int32_t count = int32_t(batch);
        VOXSEG_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
            *out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        VOXSEG_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
            *out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
    return Status::ok();
}

}  // namespace

LtGemm::~LtGemm() { release(); }

void LtGemm::release() {
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (d_) cublasLtMatrixLayoutDestroy(d_);
    desc_ = nullptr;
    a_ = b_ = d_ = nullptr;
}

LtGemm::LtGemm(LtGemm&& other) noexcept { *this = std::move(other); }

LtGemm& LtGemm::operator=(LtGemm&& other) noexcept {
    if (this != &other) {
        release();
        plan_ = other.plan_;
        algo_ = other.algo_;
        desc_ = std::exchange(other.desc_, nullptr);
        a_ = std::exchange(other.a_, nullptr);
        b_ = std::exchange(other.b_, nullptr);
        d_ = std::exchange(other.d_, nullptr);
    }
    return *this;
}

Status LtGemm::makeDesc(cublasComputeType_t compute) {
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    desc_ = nullptr;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F));
    const cublasOperation_t no_trans = CUBLAS_OP_N;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA,
                                                       &no_trans, sizeof(no_trans)));
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB,
                                                       &no_trans, sizeof(no_trans)));
    if (plan_.bias) {
        const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
        VOXSEG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                           &epilogue, sizeof(epilogue)));
        const void* bias = plan_.bias;
        VOXSEG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                           &bias, sizeof(bias)));
    }
    return Status::ok();
}

Result<LtGemm> LtGemm::create(cublasLtHandle_t handle, const GemmPlan& plan, GemmMath math,
                              size_t workspace_bytes) {
    LtGemm g;
    g.plan_ = plan;
    // Column-major: D^T (N x M, ld ldd) = B^T (N x K, ld ldb) * A^T (K x M, ld lda).
    VOXSEG_RETURN_IF_ERROR(layout(&g.a_, plan.n, plan.k, plan.ldb, plan.batch, plan.stride_b));
    VOXSEG_RETURN_IF_ERROR(layout(&g.b_, plan.k, plan.m, plan.lda, plan.batch, plan.stride_a));
    VOXSEG_RETURN_IF_ERROR(layout(&g.d_, plan.n, plan.m, plan.ldd, plan.batch, plan.stride_d));

    cublasLtMatmulPreference_t pref = nullptr;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    struct PrefGuard {
        cublasLtMatmulPreference_t p;
        ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
    } guard{pref};
    const uint64_t ws = workspace_bytes;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    // The pointers are sub-buffers of the arena: tell cuBLASLt their real alignment (its
    // column-major A is our B).
    const uint32_t align_a = plan.align_b, align_b = plan.align_a, align_c = plan.align_c,
                   align_d = plan.align_d;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
    VOXSEG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d)));
    // The precision's tensor-core mode first; plain float32 when cuBLASLt has nothing for it.
    const cublasComputeType_t preferred = math == GemmMath::kBf16   ? CUBLAS_COMPUTE_32F_FAST_16BF
                                          : math == GemmMath::kFp16 ? CUBLAS_COMPUTE_32F_FAST_16F
                                                                    : CUBLAS_COMPUTE_32F;
    for (cublasComputeType_t compute : {preferred, CUBLAS_COMPUTE_32F}) {
        VOXSEG_RETURN_IF_ERROR(g.makeDesc(compute));
        cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, g.desc_, g.a_, g.b_, g.d_,
                                                                 g.d_, pref, 1, &result, &found);
        if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
            g.algo_ = result.algo;
            return g;
        }
        if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
            return cublasStatus(st, "cublasLtMatmulAlgoGetHeuristic");
    }
    return unsupported("cuBLASLt has no algorithm for the " + plan.describe());
}

Status LtGemm::run(cublasLtHandle_t handle, const float* a, const float* b, const float* c,
                   float* d, void* workspace, size_t workspace_bytes, cudaStream_t stream) const {
    const float alpha = 1.0f, beta = plan_.accumulate ? 1.0f : 0.0f;
    if (!plan_.accumulate) c = d;
    VOXSEG_CUBLAS_CHECK(cublasLtMatmul(handle, desc_, &alpha, b, a_, a, b_, &beta, c, d_, d, d_,
                                       &algo_, workspace, workspace_bytes, stream));
    return Status::ok();
}

}  // namespace voxseg::cuda
