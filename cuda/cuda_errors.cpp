#include "cuda/cuda_errors.h"

#include <fmt/format.h>

#include <filesystem>

namespace voxseg::cuda {

Status cudaStatus(cudaError_t error, const std::string& what) {
    const std::string cause =
        fmt::format("{} ({})", cudaGetErrorString(error), cudaGetErrorName(error));
    if (error == cudaErrorMemoryAllocation) {
        // Clear the sticky-free error so that the caller can retry with a smaller batch.
        (void)cudaGetLastError();
        return {
            StatusCode::kOutOfMemory,
            fmt::format("out of GPU memory in {}: {}; use a smaller --batch or patch", what, cause),
            "cuda"};
    }
    return {StatusCode::kDeviceError, fmt::format("CUDA error in {}: {}", what, cause), "cuda"};
}

Status cudnnStatus(cudnnStatus_t status, const std::string& what) {
    const std::string cause = cudnnGetErrorString(status);
    const int code = static_cast<int>(status);
    if (code == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
        code == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
        return {StatusCode::kOutOfMemory,
                fmt::format("out of memory in {}: {}; use a smaller --batch or patch", what, cause),
                "cudnn"};
    }
    // Shapes, layouts or types cuDNN has no kernel for (or rejects as parameters) are
    // "unsupported" (the caller may use --device cpu); a missing or mismatched library or driver
    // is a device error.
    const bool library_problem = code == CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER ||
                                 code == CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART ||
                                 code == CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING ||
                                 code == CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE;
    if (!library_problem && (code / 1000 == 2 || code / 1000 == 3)) {
        return {
            StatusCode::kUnsupported,
            fmt::format("cuDNN cannot run {}: {} (use --device cpu for this model)", what, cause),
            "cudnn"};
    }
    return {StatusCode::kDeviceError, fmt::format("cuDNN error in {}: {}", what, cause), "cudnn"};
}

Result<int> usableDeviceCount() {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        std::string hint;
        if (err == cudaErrorInsufficientDriver)
            hint = "no NVIDIA driver, or one older than this CUDA runtime";
        else if (err == cudaErrorNoDevice)
            hint = "no CUDA device";
        else
            hint = "the CUDA driver could not be initialised";
        return Status(
            StatusCode::kDeviceError,
            fmt::format("no usable GPU: {} ({}); use --device cpu", hint, cudaGetErrorString(err)),
            "cuda");
    }
    if (count <= 0)
        return Status(StatusCode::kDeviceError,
                      "no usable GPU: no CUDA device found; use --device cpu", "cuda");
    return count;
}

bool noGpuHardware() {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    (void)cudaGetLastError();
    if (err == cudaSuccess) return count <= 0;
    if (err == cudaErrorNoDevice) return true;
    // No driver: a GPU is there only if the kernel exposes an NVIDIA device.
    return err == cudaErrorInsufficientDriver && !std::filesystem::exists("/dev/nvidia0") &&
           !std::filesystem::exists("/proc/driver/nvidia");
}

Result<int> computeCapability(int device) {
    int major = 0, minor = 0;
    VOXSEG_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    VOXSEG_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return major * 10 + minor;
}

Result<std::string> describeDevice(int device) {
    cudaDeviceProp prop{};
    VOXSEG_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    int driver = 0;
    VOXSEG_CUDA_CHECK(cudaDriverGetVersion(&driver));
    const size_t cudnn = cudnnGetVersion();
    return fmt::format("{} (sm_{}{}, {} GiB, {} SMs, driver CUDA {}.{}, cuDNN {}.{}.{})", prop.name,
                       prop.major, prop.minor, prop.totalGlobalMem >> 30, prop.multiProcessorCount,
                       driver / 1000, (driver % 1000) / 10, cudnn / 10000, (cudnn % 10000) / 100,
                       cudnn % 100);
}

}  // namespace voxseg::cuda
