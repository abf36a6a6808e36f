// Launchers of the CUDA backend's tensor kernels: the ops of transformer layers on tensors of any
// rank (copy_kernels.cu: strided copy / broadcast / tile / fill; eltwise_kernels.cu: broadcasting
// element-wise ops and rotary embeddings; row_kernels.cu: LayerNorm, softmax, reductions and the
// attention softmax; pool_kernels.cu: 3D average / max pooling).
//
// A TensorDesc addresses a tensor on the device: `rank` axes of `shape`, element strides (a
// channels-last activation of kernels.h is the NCDHW shape with strides [S*ldc, 1, H*W*ldc, W*ldc,
// ldc]) and a per-axis `mod` (math::stridedOffset: mod = shape for a view, 1 to broadcast an axis,
// less than shape to repeat it). Element types are the backend's storage types; statistics and
// math are float32. All launches are asynchronous on `stream` and return launch errors only.
// Thread safety: launchers are stateless.
#pragma once

#include "core/status.h"
#include "cuda/kernels.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace voxseg::cuda {

constexpr int kMaxTensorRank = 8;

struct TensorDesc {
    void* data = nullptr;  // element 0 (offsets already applied)
    StorageType type = StorageType::kFloat32;
    int rank = 0;
    int64_t shape[kMaxTensorRank] = {};
    int64_t mod[kMaxTensorRank] = {};
    int64_t strides[kMaxTensorRank] = {};
    int64_t numel() const {
        int64_t n = 1;
        for (int a = 0; a < rank; ++a) n *= shape[a];
        return n;
    }
};

// dst[i] = src[i] over dst's shape (src read through its strides and mods).
Status launchCopy(const TensorDesc& dst, const TensorDesc& src, cudaStream_t stream);
Status launchFill(const TensorDesc& dst, float value, cudaStream_t stream);

// y = op(a, b, c) per element of y (operands broadcast through their descs; operands the op does
// not read have data == nullptr). y may alias an operand with the same addressing (in place).
struct EltwiseArgs {
    TensorDesc y, a, b, c;
    math::EltOp op = math::EltOp::kCopy;
    float alpha = 0.0f, lo = 0.0f, hi = 0.0f;
};
Status launchEltwise(const EltwiseArgs& args, cudaStream_t stream);

// Row-major float32 x [..., T, D] -> y (may not alias x): math::rotary with tables of `table`.
Status launchRotary(const float* x, float* y, int64_t total, int64_t d, const float* cos_table,
                    const float* sin_table, int64_t table, cudaStream_t stream);

// Rows of a normalisation: row r = (o, i) with o < outer, i < inner starts at o * outer_stride +
// i * inner_stride elements and holds `cols` values `col_stride` apart (LayerNorm: [rows, cols]
// row-major; ChannelLayerNorm: positions of [N, C, spatial] in either layout).
struct RowView {
    void* data = nullptr;
    StorageType type = StorageType::kFloat32;
    int64_t outer = 0, inner = 1, outer_stride = 0, inner_stride = 0, col_stride = 1;
};

// y = (x - mean) / sqrt(var + epsilon) * gamma + beta per row (biased variance, float32); gamma
// and beta of `cols` values (beta may be nullptr). x and y may alias.
Status launchLayerNorm(const RowView& x, const RowView& y, int64_t cols, const float* gamma,
                       const float* beta, float epsilon, cudaStream_t stream);

// Softmax of row-major float32 x viewed as [outer, len, inner] over the middle axis (in place
// allowed).
Status launchSoftmaxAxis(const float* x, float* y, int64_t outer, int64_t len, int64_t inner,
                         cudaStream_t stream);

// In place on scores [batch][rows][cols] (float32, row-major): s = softmax(s * scale + bias +
// mask) per row. `bias` and `mask` (data == nullptr: none) are addressed as the full [..., Tq,
// Tk] score tensor whose rows [q0, q0 + rows) of each batch item this tile holds (tq = Tq of the
// full tensor).
Status launchAttentionSoftmax(float* scores, int64_t batch, int64_t rows, int64_t cols, int64_t q0,
                              int64_t tq, float scale, const TensorDesc& bias,
                              const TensorDesc& mask, cudaStream_t stream);

// Reduction of x over the axes where y's shape is 1 and x's is not (y keeps x's rank: keepdims
// shape; mean, sum or max).
enum class ReduceKind { kMean, kSum, kMax };
Status launchReduce(const TensorDesc& y, const TensorDesc& x, ReduceKind kind, cudaStream_t stream);

// 3D pooling of rank-5 x into y (NCDHW descs; ONNX AveragePool / MaxPool, dilation 1).
struct PoolArgs {
    TensorDesc y, x;
    bool max = false;
    bool count_include_pad = false;
    int64_t kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, pad[3] = {}, pad_end[3] = {};
};
Status launchPool(const PoolArgs& args, cudaStream_t stream);

}  // namespace voxseg::cuda
