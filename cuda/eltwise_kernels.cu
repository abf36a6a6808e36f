// Broadcasting element-wise ops and rotary embeddings
// (tensor_kernels.h). Operands of any storage type; math in float32 (kernels_math.h).
#include "cuda/cuda_errors.h"
#include "cuda/device_common.cuh"
#include "cuda/tensor_kernels.h"

namespace voxseg::cuda {
namespace {

using namespace device;

__device__ __forceinline__ float operand(const TensorDesc& t, const TensorDesc& y, int64_t i) {
    return loadAs(t.data, t.type, math::stridedOffset(i, t.rank, y.shape, t.mod, t.strides));
}

__global__ void eltwiseKernel(EltwiseArgs e, int64_t total) {
    const int arity = math::eltArity(e.op);
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        const float a = operand(e.a, e.y, i);
        const float b = arity > 1 ? operand(e.b, e.y, i) : 0.0f;
        const float c = arity > 2 ? operand(e.c, e.y, i) : 0.0f;
        const float v = math::eltwise(e.op, a, b, c, e.alpha, e.lo, e.hi);
        storeAs(e.y.data, e.y.type,
                math::stridedOffset(i, e.y.rank, e.y.shape, e.y.mod, e.y.strides), v);
    }
}

__global__ void rotaryKernel(const float* __restrict__ x, float* __restrict__ y, int64_t total,
                             int64_t d, const float* __restrict__ cos_table,
                             const float* __restrict__ sin_table, int64_t table) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x)
        y[i] = math::rotary(x, i, d, cos_table, sin_table, table);
}

}  // namespace

Status launchEltwise(const EltwiseArgs& args, cudaStream_t stream) {
    const int64_t total = args.y.numel();
    if (total == 0) return Status::ok();
    eltwiseKernel<<<blocksFor(total), kThreads, 0, stream>>>(args, total);
    VOXSEG_CUDA_CHECK_LAUNCH("element-wise tensor kernel");
    return Status::ok();
}

Status launchRotary(const float* x, float* y, int64_t total, int64_t d, const float* cos_table,
                    const float* sin_table, int64_t table, cudaStream_t stream) {
    if (total == 0) return Status::ok();
    rotaryKernel<<<blocksFor(total), kThreads, 0, stream>>>(x, y, total, d, cos_table, sin_table,
                                                            table);
    VOXSEG_CUDA_CHECK_LAUNCH("rotary embedding kernel");
    return Status::ok();
}

}  // namespace voxseg::cuda
