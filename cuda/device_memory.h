// Owning RAII handles for device memory and pinned (page-locked) host memory.
//
// DeviceBuffer wraps one cudaMalloc; the compiled graph plans all its activations into a single
// arena DeviceBuffer (offsets from a liveness plan), so a run allocates nothing. PinnedBuffer is
// page-locked host memory for asynchronous copies that overlap with compute. Allocation failures
// return kOutOfMemory (the caller retries smaller). Move-only; not thread-safe.
#pragma once

#include "core/status.h"

#include <cstddef>

namespace voxseg::cuda {

class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    // `what` names the buffer in the out-of-memory message ("activations of conv_3").
    static Result<DeviceBuffer> allocate(size_t bytes, const char* what);

    void* data() const { return ptr_; }
    size_t bytes() const { return bytes_; }
    template <typename T>
    T* as() const {
        return static_cast<T*>(ptr_);
    }

  private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

class PinnedBuffer {
  public:
    PinnedBuffer() = default;
    ~PinnedBuffer();
    PinnedBuffer(PinnedBuffer&& other) noexcept;
    PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;

    static Result<PinnedBuffer> allocate(size_t bytes, const char* what);

    void* data() const { return ptr_; }
    size_t bytes() const { return bytes_; }
    template <typename T>
    T* as() const {
        return static_cast<T*>(ptr_);
    }

  private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

// Free and total memory of the current device, in bytes.
Status deviceMemoryInfo(size_t* free_bytes, size_t* total_bytes);

}  // namespace voxseg::cuda
