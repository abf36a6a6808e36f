// Row-wise tensor kernels (tensor_kernels.h): LayerNorm (also over channels), softmax over any
// axis, the attention softmax with scale and bias, and reductions. float32 statistics; one warp per
// row where the row is contiguous.
#include "cuda/cuda_errors.h"
#include "cuda/device_common.cuh"
#include "cuda/tensor_kernels.h"

#include <cfloat>

namespace voxseg::cuda {
namespace {

using namespace device;

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp;

__device__ __forceinline__ float warpSum(float v) {
    for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warpMax(float v) {
    for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

unsigned rowBlocks(int64_t rows) { return blocksFor(rows, kRowsPerBlock); }

__device__ __forceinline__ int64_t rowStart(const RowView& v, int64_t r) {
    const int64_t o = r / v.inner;
    return o * v.outer_stride + (r - o * v.inner) * v.inner_stride;
}

// One warp per row: mean, then the biased variance around it (two passes, float32).
__global__ void layerNormKernel(RowView x, RowView y, int64_t cols, const float* __restrict__ gamma,
                                const float* __restrict__ beta, float epsilon) {
    const int lane = threadIdx.x % kWarp;
    const int64_t rows = x.outer * x.inner;
    for (int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kWarp; r < rows;
         r += int64_t(gridDim.x) * kRowsPerBlock) {
        const int64_t xr = rowStart(x, r), yr = rowStart(y, r);
        float sum = 0.0f;
        for (int64_t c = lane; c < cols; c += kWarp)
            sum += loadAs(x.data, x.type, xr + c * x.col_stride);
        const float mean = warpSum(sum) / float(cols);
        float sq = 0.0f;
        for (int64_t c = lane; c < cols; c += kWarp) {
            const float d = loadAs(x.data, x.type, xr + c * x.col_stride) - mean;
            sq += d * d;
        }
        const float rstd = 1.0f / sqrtf(warpSum(sq) / float(cols) + epsilon);
        for (int64_t c = lane; c < cols; c += kWarp) {
            const float v = loadAs(x.data, x.type, xr + c * x.col_stride);
            storeAs(y.data, y.type, yr + c * y.col_stride,
                    (v - mean) * rstd * gamma[c] + (beta ? beta[c] : 0.0f));
        }
    }
}

// Contiguous rows (inner == 1): one warp per row.
__global__ void softmaxRowsKernel(const float* x, float* y, int64_t rows, int64_t len) {
    const int lane = threadIdx.x % kWarp;
    for (int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kWarp; r < rows;
         r += int64_t(gridDim.x) * kRowsPerBlock) {
        const float* xr = x + r * len;
        float mx = -FLT_MAX;
        for (int64_t c = lane; c < len; c += kWarp) mx = fmaxf(mx, xr[c]);
        mx = warpMax(mx);
        float sum = 0.0f;
        for (int64_t c = lane; c < len; c += kWarp) sum += expf(xr[c] - mx);
        const float inv = 1.0f / warpSum(sum);
        float* yr = y + r * len;
        for (int64_t c = lane; c < len; c += kWarp) yr[c] = expf(xr[c] - mx) * inv;
    }
}

// Strided rows (inner > 1): one thread per (outer, inner) position.
__global__ void softmaxStridedKernel(const float* x, float* y, int64_t outer, int64_t len,
                                     int64_t inner) {
    const int64_t total = outer * inner;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t o = i / inner, in = i - o * inner;
        const float* xr = x + o * len * inner + in;
        float* yr = y + o * len * inner + in;
        float mx = -FLT_MAX;
        for (int64_t k = 0; k < len; ++k) mx = fmaxf(mx, xr[k * inner]);
        float sum = 0.0f;
        for (int64_t k = 0; k < len; ++k) sum += expf(xr[k * inner] - mx);
        const float inv = 1.0f / sum;
        for (int64_t k = 0; k < len; ++k) yr[k * inner] = expf(xr[k * inner] - mx) * inv;
    }
}

__global__ void attentionSoftmaxKernel(float* scores, int64_t batch, int64_t rows, int64_t cols,
                                       int64_t q0, int64_t tq, float scale, TensorDesc bias,
                                       TensorDesc mask) {
    const int lane = threadIdx.x % kWarp;
    const int64_t total = batch * rows;
    for (int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kWarp; r < total;
         r += int64_t(gridDim.x) * kRowsPerBlock) {
        const int64_t b = r / rows, i = r - b * rows;
        float* sr = scores + r * cols;
        // Flat index of (b, q0 + i, 0) in the full [..., Tq, Tk] score tensor.
        const int64_t full_row = (b * tq + q0 + i) * cols;
        float mx = -FLT_MAX;
        for (int64_t c = lane; c < cols; c += kWarp) {
            float v = sr[c] * scale;
            const TensorDesc* terms[2] = {&bias, &mask};
            for (const TensorDesc* b : terms)
                if (b->data)
                    v += loadAs(
                        b->data, b->type,
                        math::stridedOffset(full_row + c, b->rank, b->shape, b->mod, b->strides));
            sr[c] = v;
            mx = fmaxf(mx, v);
        }
        mx = warpMax(mx);
        float sum = 0.0f;
        for (int64_t c = lane; c < cols; c += kWarp) {
            const float e = expf(sr[c] - mx);
            sr[c] = e;
            sum += e;
        }
        const float inv = 1.0f / warpSum(sum);
        for (int64_t c = lane; c < cols; c += kWarp) sr[c] *= inv;
    }
}

__global__ void reduceKernel(TensorDesc y, TensorDesc x, ReduceKind kind, int64_t count,
                             int64_t total) {
    for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total;
         o += int64_t(gridDim.x) * blockDim.x) {
        // Offset of the first reduced element: y's index along kept axes, 0 along reduced ones.
        int64_t base = 0, rest = o;
        for (int a = y.rank - 1; a >= 0; --a) {
            const int64_t i = rest % y.shape[a];
            rest /= y.shape[a];
            base += i * x.strides[a];
        }
        float acc = kind == ReduceKind::kMax ? -FLT_MAX : 0.0f;
        for (int64_t k = 0; k < count; ++k) {
            int64_t off = base, r = k;
            for (int a = x.rank - 1; a >= 0; --a) {
                if (y.shape[a] != 1 || x.shape[a] == 1) continue;
                off += (r % x.shape[a]) * x.strides[a];
                r /= x.shape[a];
            }
            const float v = loadAs(x.data, x.type, off);
            acc = kind == ReduceKind::kMax ? fmaxf(acc, v) : acc + v;
        }
        if (kind == ReduceKind::kMean) acc /= float(count);
        storeAs(y.data, y.type, math::stridedOffset(o, y.rank, y.shape, y.mod, y.strides), acc);
    }
}

}  // namespace

Status launchLayerNorm(const RowView& x, const RowView& y, int64_t cols, const float* gamma,
                       const float* beta, float epsilon, cudaStream_t stream) {
    const int64_t rows = x.outer * x.inner;
    if (rows == 0 || cols == 0) return Status::ok();
    layerNormKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(x, y, cols, gamma, beta, epsilon);
    VOXSEG_CUDA_CHECK_LAUNCH("LayerNorm kernel");
    return Status::ok();
}

Status launchSoftmaxAxis(const float* x, float* y, int64_t outer, int64_t len, int64_t inner,
                         cudaStream_t stream) {
    if (outer * len * inner == 0) return Status::ok();
    if (inner == 1)
        softmaxRowsKernel<<<rowBlocks(outer), kThreads, 0, stream>>>(x, y, outer, len);
    else
        softmaxStridedKernel<<<blocksFor(outer * inner), kThreads, 0, stream>>>(x, y, outer, len,
                                                                                inner);
    VOXSEG_CUDA_CHECK_LAUNCH("softmax kernel");
    return Status::ok();
}

Status launchAttentionSoftmax(float* scores, int64_t batch, int64_t rows, int64_t cols, int64_t q0,
                              int64_t tq, float scale, const TensorDesc& bias,
                              const TensorDesc& mask, cudaStream_t stream) {
    if (batch * rows == 0) return Status::ok();
    attentionSoftmaxKernel<<<rowBlocks(batch * rows), kThreads, 0, stream>>>(
        scores, batch, rows, cols, q0, tq, scale, bias, mask);
    VOXSEG_CUDA_CHECK_LAUNCH("attention softmax kernel");
    return Status::ok();
}

Status launchReduce(const TensorDesc& y, const TensorDesc& x, ReduceKind kind,
                    cudaStream_t stream) {
    if (x.rank != y.rank) return internalError("reduction between different ranks");
    int64_t count = 1;
    for (int a = 0; a < x.rank; ++a)
        if (y.shape[a] == 1) count *= x.shape[a];
    const int64_t total = y.numel();
    if (total == 0 || count == 0) return Status::ok();
    reduceKernel<<<blocksFor(total), kThreads, 0, stream>>>(y, x, kind, count, total);
    VOXSEG_CUDA_CHECK_LAUNCH("reduction kernel");
    return Status::ok();
}

}  // namespace voxseg::cuda
