// 3D average / max pooling on rank-5 tensors of any layout (tensor_kernels.h): one thread per
// output element, the window clipped to the input as the reference backend does.
#include "cuda/cuda_errors.h"
#include "cuda/device_common.cuh"
#include "cuda/tensor_kernels.h"

#include <cfloat>

namespace voxseg::cuda {
namespace {

using namespace device;

__global__ void poolKernel(PoolArgs p, int64_t total) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        int64_t o[5], rest = i;
        for (int a = 4; a >= 0; --a) {
            o[a] = rest % p.y.shape[a];
            rest /= p.y.shape[a];
        }
        math::PoolWindow w[3];
        int64_t padded = 1;
        for (int a = 0; a < 3; ++a) {
            w[a] = math::poolWindow(o[a + 2], p.x.shape[a + 2], p.kernel[a], p.stride[a], p.pad[a],
                                    p.pad_end[a]);
            padded *= w[a].padded;
        }
        const int64_t base = o[0] * p.x.strides[0] + o[1] * p.x.strides[1];
        float acc = p.max ? -FLT_MAX : 0.0f;
        int64_t valid = 0;
        for (int64_t d = w[0].begin; d < w[0].end; ++d)
            for (int64_t h = w[1].begin; h < w[1].end; ++h)
                for (int64_t x = w[2].begin; x < w[2].end; ++x) {
                    const float v =
                        loadAs(p.x.data, p.x.type,
                               base + d * p.x.strides[2] + h * p.x.strides[3] + x * p.x.strides[4]);
                    acc = p.max ? fmaxf(acc, v) : acc + v;
                    ++valid;
                }
        if (!p.max) {
            const int64_t div = p.count_include_pad ? padded : valid;
            acc = div > 0 ? acc / float(div) : 0.0f;
        }
        storeAs(p.y.data, p.y.type, math::stridedOffset(i, 5, p.y.shape, p.y.mod, p.y.strides),
                acc);
    }
}

}  // namespace

Status launchPool(const PoolArgs& args, cudaStream_t stream) {
    if (args.x.rank != 5 || args.y.rank != 5) return internalError("pooling of a non-3D tensor");
    const int64_t total = args.y.numel();
    if (total == 0) return Status::ok();
    poolKernel<<<blocksFor(total), kThreads, 0, stream>>>(args, total);
    VOXSEG_CUDA_CHECK_LAUNCH("pooling kernel");
    return Status::ok();
}

}  // namespace voxseg::cuda
