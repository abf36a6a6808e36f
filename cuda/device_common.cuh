// Device-side helpers shared by the CUDA kernel files (kernels.cu and the tensor kernels): storage
// <-> float32 conversion (compile-time and run-time types), vector packs, grid sizes and the
// storage-type dispatch. Internal to cuda/; included only by .cu files.
#pragma once

#include "cuda/kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace voxseg::cuda::device {

constexpr int kThreads = 256;

// Storage <-> float conversions (float32 statistics and accumulation whatever the storage).
__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ __forceinline__ T fromFloat(float v);
template <>
__device__ __forceinline__ float fromFloat<float>(float v) {
    return v;
}
template <>
__device__ __forceinline__ __half fromFloat<__half>(float v) {
    return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

// V consecutive elements moved as one aligned access (16 bytes for 8 halves).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
    T v[V];
};

inline unsigned blocksFor(int64_t work, int threads = kThreads) {
    const int64_t blocks = (work + threads - 1) / threads;
    return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 1 << 20));
}

template <typename Fn>
void dispatch(StorageType type, Fn&& fn) {
    switch (type) {
        case StorageType::kFloat32:
            fn(float{});
            break;
        case StorageType::kFloat16:
            fn(__half{});
            break;
        case StorageType::kBFloat16:
            fn(__nv_bfloat16{});
            break;
    }
}

// Run-time typed access (the tensor kernels read operands of different storage types).
__device__ __forceinline__ float loadAs(const void* p, StorageType t, int64_t i) {
    switch (t) {
        case StorageType::kFloat16:
            return __half2float(static_cast<const __half*>(p)[i]);
        case StorageType::kBFloat16:
            return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
        default:
            return static_cast<const float*>(p)[i];
    }
}

__device__ __forceinline__ void storeAs(void* p, StorageType t, int64_t i, float v) {
    switch (t) {
        case StorageType::kFloat16:
            static_cast<__half*>(p)[i] = __float2half_rn(v);
            break;
        case StorageType::kBFloat16:
            static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
            break;
        default:
            static_cast<float*>(p)[i] = v;
            break;
    }
}

}  // namespace voxseg::cuda::device
