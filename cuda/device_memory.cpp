#include "cuda/device_memory.h"

#include "cuda/cuda_errors.h"

#include <fmt/format.h>

#include <utility>

namespace voxseg::cuda {

DeviceBuffer::~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        if (ptr_) cudaFree(ptr_);
        ptr_ = std::exchange(other.ptr_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes, const char* what) {
    DeviceBuffer buffer;
    if (bytes == 0) return buffer;
    const cudaError_t err = cudaMalloc(&buffer.ptr_, bytes);
    if (err != cudaSuccess) {
        buffer.ptr_ = nullptr;
        return cudaStatus(err, fmt::format("cudaMalloc of {:.1f} MiB for {}",
                                           static_cast<double>(bytes) / (1 << 20), what));
    }
    buffer.bytes_ = bytes;
    return buffer;
}

PinnedBuffer::~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
        if (ptr_) cudaFreeHost(ptr_);
        ptr_ = std::exchange(other.ptr_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

Result<PinnedBuffer> PinnedBuffer::allocate(size_t bytes, const char* what) {
    PinnedBuffer buffer;
    if (bytes == 0) return buffer;
    const cudaError_t err = cudaMallocHost(&buffer.ptr_, bytes);
    if (err != cudaSuccess) {
        buffer.ptr_ = nullptr;
        return cudaStatus(err, fmt::format("cudaMallocHost of {:.1f} MiB for {}",
                                           static_cast<double>(bytes) / (1 << 20), what));
    }
    buffer.bytes_ = bytes;
    return buffer;
}

Status deviceMemoryInfo(size_t* free_bytes, size_t* total_bytes) {
    VOXSEG_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
    return Status::ok();
}

}  // namespace voxseg::cuda
