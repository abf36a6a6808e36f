// The CUDA/cuDNN backend: runs an engine::Graph on one NVIDIA GPU in fp32 (FMA only, for parity),
// fp16 or bf16 (tensor cores, float32 accumulation), channels-last activations, fused
// InstanceNorm/bias/residual/activation kernels and copy-free concatenation.
//
// Ownership: makeCudaBackend returns a Backend that owns a cuDNN algorithm cache shared by the
// graphs it compiles; each CompiledGraph owns its device memory, stream and cuDNN handle.
// Whole volumes run through the CUDA sliding window (cuda_sliding_window.h: patches, ensembles and
// mirroring on the device), which Backend::makeSlidingWindow returns for 3D patches.
// Thread safety: the Backend may be shared; a CompiledGraph is used by one thread at a time.
// Units: host tensors are float32 NCDHW, as the Backend contract says.
#pragma once

#include "core/status.h"
#include "engine/backend.h"

#include <memory>
#include <string>

namespace voxseg::cuda {

// Fails with kDeviceError naming the cause when there is no usable GPU (no driver, a driver
// older than the CUDA runtime, no device) or `device` does not exist.
Result<std::unique_ptr<engine::Backend>> makeCudaBackend(int device = 0);

// The cuda backend's "auto" precision (Backend::autoPrecision) for compute capability
// `capability` (major * 10 + minor): bf16 on sm_80+, fp16 on sm_70+ (tensor cores, float32
// accumulation), else fp32. Pure, so it is tested without a GPU.
engine::PrecisionChoice cudaAutoPrecision(int capability);

}  // namespace voxseg::cuda
