// Strided copy (Transpose, Slice, Expand, Tile, Concat slices, Pad interiors, conversions between
// channels-last activations and row-major tensors) and fill (tensor_kernels.h).
#include "cuda/cuda_errors.h"
#include "cuda/device_common.cuh"
#include "cuda/tensor_kernels.h"

namespace voxseg::cuda {
namespace {

using namespace device;

__global__ void copyKernel(TensorDesc dst, TensorDesc src, int64_t total) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t so = math::stridedOffset(i, src.rank, dst.shape, src.mod, src.strides);
        const int64_t d = math::stridedOffset(i, dst.rank, dst.shape, dst.mod, dst.strides);
        storeAs(dst.data, dst.type, d, loadAs(src.data, src.type, so));
    }
}

__global__ void fillKernel(TensorDesc dst, float value, int64_t total) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x)
        storeAs(dst.data, dst.type,
                math::stridedOffset(i, dst.rank, dst.shape, dst.mod, dst.strides), value);
}

}  // namespace

Status launchCopy(const TensorDesc& dst, const TensorDesc& src, cudaStream_t stream) {
    if (src.rank != dst.rank)
        return internalError("tensor copy between ranks " + std::to_string(src.rank) + " and " +
                             std::to_string(dst.rank));
    const int64_t total = dst.numel();
    if (total == 0) return Status::ok();
    copyKernel<<<blocksFor(total), kThreads, 0, stream>>>(dst, src, total);
    VOXSEG_CUDA_CHECK_LAUNCH("tensor copy kernel");
    return Status::ok();
}

Status launchFill(const TensorDesc& dst, float value, cudaStream_t stream) {
    const int64_t total = dst.numel();
    if (total == 0) return Status::ok();
    fillKernel<<<blocksFor(total), kThreads, 0, stream>>>(dst, value, total);
    VOXSEG_CUDA_CHECK_LAUNCH("tensor fill kernel");
    return Status::ok();
}

}  // namespace voxseg::cuda
