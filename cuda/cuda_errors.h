// Turning CUDA runtime and cuDNN failures into voxseg Status values, and querying devices.
//
// Every CUDA/cuDNN call in cuda/ goes through VOXSEG_CUDA_CHECK / VOXSEG_CUDNN_CHECK so that a
// failure becomes a Status naming the call and the cause: allocation failures are kOutOfMemory
// (the caller retries with a smaller batch), everything else kDeviceError. Thread-safe.
#pragma once

#include "core/status.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

namespace voxseg::cuda {

// kOutOfMemory for allocation failures, kDeviceError otherwise; `what` names the call.
Status cudaStatus(cudaError_t error, const std::string& what);
Status cudnnStatus(cudnnStatus_t status, const std::string& what);

// Number of usable devices, or kDeviceError naming the cause ("no CUDA driver", "driver older
// than the CUDA 13 runtime", "no device"). Any error of cudaGetDeviceCount means "no usable GPU".
Result<int> usableDeviceCount();
// True when this machine has no GPU at all (no CUDA device; or no driver and no NVIDIA device
// node), as opposed to a GPU whose driver or runtime fails: the registry's auto device then
// falls back to the CPU with an info line instead of a warning.
bool noGpuHardware();

// "NVIDIA H200 (sm_90, 139 GiB, driver 13.0, cuDNN 9.19.0)".
Result<std::string> describeDevice(int device);

// Compute capability as major * 10 + minor (90 for Hopper).
Result<int> computeCapability(int device);

}  // namespace voxseg::cuda

#define VOXSEG_CUDA_CHECK(call)                                         \
    do {                                                                \
        const cudaError_t voxseg_cuda_err_ = (call);                    \
        if (voxseg_cuda_err_ != cudaSuccess)                            \
            return ::voxseg::cuda::cudaStatus(voxseg_cuda_err_, #call); \
    } while (0)

#define VOXSEG_CUDNN_CHECK(call)                                         \
    do {                                                                 \
        const cudnnStatus_t voxseg_cudnn_st_ = (call);                   \
        if (voxseg_cudnn_st_ != CUDNN_STATUS_SUCCESS)                    \
            return ::voxseg::cuda::cudnnStatus(voxseg_cudnn_st_, #call); \
    } while (0)

// After a kernel launch: launch-configuration errors and (asynchronously reported) earlier faults.
#define VOXSEG_CUDA_CHECK_LAUNCH(what)                                 \
    do {                                                               \
        const cudaError_t voxseg_cuda_err_ = cudaGetLastError();       \
        if (voxseg_cuda_err_ != cudaSuccess)                           \
            return ::voxseg::cuda::cudaStatus(voxseg_cuda_err_, what); \
    } while (0)
