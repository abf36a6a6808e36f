#include "cuda/cuda_errors.h"
#include "cuda/device_common.cuh"
#include "cuda/int8_kernels.h"

#include <type_traits>

namespace voxseg::cuda {
namespace {

using namespace device;

struct LoadFloat {
    template <typename T>
    __device__ float operator()(const T* src, int64_t i) const {
        return toFloat(src[i]);
    }
};

// One thread per slot (math::int8Im2colSlot) of the chunk: the row's index arithmetic is done once
// per tap, not once per byte.
template <typename T, typename Quantize>
__global__ void int8Im2colKernel(math::Int8Geometry g, const T* __restrict__ src, Quantize quantize,
                                 int64_t row0, int64_t rows, int64_t chunk,
                                 int8_t* __restrict__ a) {
    const int64_t slots = math::int8Im2colSlots(g);
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < chunk * slots;
         i += int64_t(gridDim.x) * blockDim.x)
        math::int8Im2colSlot(g, src, LoadFloat{}, quantize, row0, rows, i / slots, i % slots, a);
}

struct EpilogueDev {
    const void* d;
    int64_t ldd, cout;
    const math::Int8Channel* channels;
    bool has_bias, has_residual;
    math::Act act;
    float alpha;
    const void* residual;
    int64_t r_ldc, r_off;
    void* y;
    int64_t y_ldc, y_off;
};

// Acc: int32_t (int8, int8Dequantised) or float (fp8, fp8Dequantised).
template <typename T, typename Acc>
__global__ void int8EpilogueKernel(EpilogueDev e, int64_t row0, int64_t rows) {
    const int64_t total = rows * e.cout;
    const Acc* d = static_cast<const Acc*>(e.d);
    const T* res = static_cast<const T*>(e.residual);
    T* y = static_cast<T*>(e.y);
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / e.cout, oc = i % e.cout;
        const int64_t row = row0 + r;
        const float rv = e.has_residual ? toFloat(res[row * e.r_ldc + e.r_off + oc]) : 0.0f;
        float f;
        if constexpr (std::is_same_v<Acc, float>)
            f = math::fp8Dequantised(d[r * e.ldd + oc], e.channels[oc], e.has_bias, e.has_residual,
                                     rv);
        else
            f = math::int8Dequantised(d[r * e.ldd + oc], e.channels[oc], e.has_bias, e.has_residual,
                                      rv);
        f = math::int8Activate(f, e.act, e.alpha);
        y[row * e.y_ldc + e.y_off + oc] = fromFloat<T>(f);
    }
}

}  // namespace

Status launchInt8Im2col(const Int8ConvPlan& plan, View src, StorageType type, int64_t row0,
                        int64_t rows, int8_t* a, cudaStream_t stream) {
    const math::Int8Geometry& g = plan.geometry;
    const unsigned blocks = blocksFor(plan.chunk_rows * math::int8Im2colSlots(g));
    dispatch(type, [&](auto tag) {
        using T = decltype(tag);
        const T* x = static_cast<const T*>(src.data);
        if (plan.format == math::Format8::kE4M3)
            int8Im2colKernel<<<blocks, kThreads, 0, stream>>>(g, x, plan.e4m3Quantizer(), row0,
                                                              rows, plan.chunk_rows, a);
        else
            int8Im2colKernel<<<blocks, kThreads, 0, stream>>>(g, x, plan.int8Quantizer(), row0,
                                                              rows, plan.chunk_rows, a);
    });
    VOXSEG_CUDA_CHECK_LAUNCH("int8 im2col kernel");
    return Status::ok();
}

Status launchInt8Epilogue(const Int8ConvPlan& plan, const void* d, int64_t row0, int64_t rows,
                          View residual, View y, StorageType type, cudaStream_t stream) {
    const EpilogueDev e{d,
                        plan.cout_padded,
                        plan.cout,
                        plan.channels,
                        plan.has_bias,
                        plan.has_residual,
                        plan.act,
                        plan.alpha,
                        residual.data,
                        residual.ldc,
                        residual.c_offset,
                        y.data,
                        y.ldc,
                        y.c_offset};
    const unsigned blocks = blocksFor(rows * plan.cout);
    dispatch(type, [&](auto tag) {
        using T = decltype(tag);
        if (plan.format == math::Format8::kE4M3)
            int8EpilogueKernel<T, float><<<blocks, kThreads, 0, stream>>>(e, row0, rows);
        else
            int8EpilogueKernel<T, int32_t><<<blocks, kThreads, 0, stream>>>(e, row0, rows);
    });
    VOXSEG_CUDA_CHECK_LAUNCH("int8 epilogue kernel");
    return Status::ok();
}

}  // namespace voxseg::cuda
