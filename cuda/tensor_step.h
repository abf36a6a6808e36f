// TensorStep: one device step of the CUDA backend's tensor ops (the transformer layers:
// MatMul, Attention, LayerNorm, softmax, reductions, element-wise math, data movement), planned by
// the lowering (tensor_lowering.cpp) over TRefs into the arena and the parameter blob, resolved to
// device pointers once the arena exists, and run on the compiled graph's stream.
//
// Values the tensor ops compute are packed row-major float32 (TRef with row-major strides),
// except rank-5 activations that convolutions produce or read, which stay channels-last in the
// storage type (kernels.h View, addressed here through strides); the lowering converts between
// the two at the boundary. Ownership: a TensorStep owns its cuBLASLt plans. Units: elements.
#pragma once

#include "core/status.h"
#include "cuda/cublaslt_gemm.h"
#include "cuda/tensor_kernels.h"
#include "engine/graph/tensor.h"

#include <string>
#include <vector>

namespace voxseg::cuda {

// A planned tensor operand: arena buffer `buffer` or the parameter blob at byte `param`, plus an
// element offset, the storage type and the addressing of TensorDesc (shape, mod, strides).
struct TRef {
    int buffer = -1;
    int64_t param = -1;
    int64_t offset = 0;
    StorageType type = StorageType::kFloat32;
    engine::Shape shape, mod, strides;
    bool valid() const { return buffer >= 0 || param >= 0; }
    int64_t numel() const { return engine::numel(shape); }
};

// Row-major strides of `shape`.
engine::Shape rowMajorStrides(const engine::Shape& shape);
// `t` as an operand of a result of shape `out` (numpy broadcasting: right-aligned, size-1 axes
// broadcast through mod 1).
TRef broadcastTo(const TRef& t, const engine::Shape& out);

struct TensorStep {
    enum class Kind {
        kCopy,       // y = a (strided)
        kFill,       // y = value
        kEltwise,    // y = op(a, b, c)
        kRotary,     // y = rotary(a; tables b = cos, c = sin)
        kLayerNorm,  // y = LayerNorm(a) over rows (x_rows / y_rows) of `cols`; gamma b, beta c
        kSoftmax,    // y = softmax(a) over the middle axis of [outer, len, inner]
        kReduce,     // y = reduce(a)
        kPool,       // y = pool(a)
        kMatMul,     // y = a b (+ bias) (+ residual) per gemms[0]
        kAttention,  // y = softmax(a b * scale + c + mask) v, query tiles of `tile`; scores in
                     // `scratch`
    };
    Kind kind = Kind::kCopy;
    TRef y, a, b, c, residual, scratch;
    TRef v, mask;  // kAttention: V, the second bias (Swin's window mask)
    math::EltOp op = math::EltOp::kCopy;
    float alpha = 0.0f, lo = 0.0f, hi = 0.0f, value = 0.0f, epsilon = 1e-5f, scale = 1.0f;
    int64_t rows = 0, cols = 0, outer = 0, len = 0, inner = 0;
    RowView x_rows, y_rows;  // kLayerNorm: row geometry (data and type from da / dy)
    ReduceKind reduce = ReduceKind::kMean;
    PoolArgs pool;  // kernel geometry (descs filled at resolution)
    // kMatMul: the plan without alignments; kAttention: Tq, Tk, D, Dv, batch, query tile.
    GemmPlan gemm;
    int64_t tq = 0, tk = 0, dh = 0, dv = 0, batch = 0, tile = 0;

    // Resolved (CudaCompiledGraph::compile).
    TensorDesc dy, da, db, dc, dres, dmask;
    float* scratch_ptr = nullptr;
    const float* v_ptr = nullptr;
    std::vector<LtGemm> gemms;  // kMatMul: 1; kAttention: QK and PV for full tiles [+ tail]
};

// Device context a TensorStep runs in.
struct TensorRunContext {
    cublasLtHandle_t lt = nullptr;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    cudaStream_t stream = nullptr;
};

// The matrix product of a resolved kAttention step for a tile of `rows` queries: QK^T into the
// scores (pv false) or scores x V into the output (pv true); run() takes the tile's pointers.
GemmPlan attentionPlan(const TensorStep& step, int64_t rows, bool pv);

// Builds the cuBLASLt plans of a resolved kMatMul / kAttention step (others: nothing to do).
Status planGemms(TensorStep& step, cublasLtHandle_t lt, GemmMath math, size_t workspace_bytes);
Status runTensorStep(const TensorStep& step, const TensorRunContext& ctx);

}  // namespace voxseg::cuda
