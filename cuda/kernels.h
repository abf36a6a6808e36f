// Launchers of voxseg's own CUDA kernels (kernels.cu): layout conversion, the fused epilogue
// (bias / InstanceNorm apply / residual / activation / copy into a concat slice), InstanceNorm
// statistics, softmax and binary elementwise ops, and the sliding-window kernels (patch gather,
// Gaussian-weighted accumulation, normalisation + argmax).
//
// Activations are channels-last (NDHWC) in the storage type; a View addresses a channel slice of
// such a tensor (rows of `ldc` channels, starting at `c_offset`), which is how concatenation
// is done without copies and how inputs are zero-padded to 8 channels for tensor cores.
// All launches are asynchronous on `stream`; they return launch errors only. Per-element math is
// in kernels_math.h. Thread safety: launchers are stateless.
#pragma once

#include "core/status.h"
#include "cuda/kernels_math.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace voxseg::cuda {

enum class StorageType { kFloat32, kFloat16, kBFloat16 };
size_t storageSize(StorageType type);

struct View {
    void* data = nullptr;  // start of the whole tensor (channel 0 of the row)
    int64_t channels = 0;
    int64_t ldc = 0;  // channels per stored row
    int64_t c_offset = 0;
};

struct EpilogueArgs {
    View x;                           // input
    View y;                           // output (may alias x)
    View residual;                    // data == nullptr: none
    const float* scale = nullptr;     // per channel (or per image*channel); nullptr = 1
    const float* shift = nullptr;     // likewise; nullptr = 0
    int64_t affine_image_stride = 0;  // 0: per channel; C: per (image, channel)
    math::Act act = math::Act::kNone;
    float alpha = 0.0f;                  // LeakyReLU slope
    const float* prelu_slope = nullptr;  // per channel (PReLU), else nullptr
    float lo = 0.0f, hi = 0.0f;          // Clip
};

// NCDHW float32 (host layout, already on the device) -> channels-last view (pad channels zeroed).
Status launchToChannelsLast(const float* src, View dst, StorageType type, int64_t n,
                            int64_t spatial, cudaStream_t stream);
// Channels-last view -> NCDHW float32 on the device.
Status launchToChannelsFirst(View src, StorageType type, float* dst, int64_t n, int64_t spatial,
                             cudaStream_t stream);

Status launchEpilogue(const EpilogueArgs& args, StorageType type, int64_t n, int64_t spatial,
                      cudaStream_t stream);

// InstanceNorm statistics of `x` -> per (image, channel) affine (scale, shift) in float32,
// folding gamma/beta (nullptr = 1 / 0). `partials` is scratch of instanceNormScratchBytes().
size_t instanceNormScratchBytes(int64_t n, int64_t channels, int64_t spatial);
Status launchInstanceNormStats(View x, StorageType type, int64_t n, int64_t spatial,
                               const float* gamma, const float* beta, float epsilon, void* partials,
                               float* scale, float* shift, cudaStream_t stream);

// Softmax over channels, per voxel (x and y may alias).
Status launchSoftmax(View x, View y, StorageType type, int64_t n, int64_t spatial,
                     cudaStream_t stream);

enum class BinaryOp { kAdd, kSub, kMul, kDiv };
Status launchBinary(View a, View b, View y, BinaryOp op, StorageType type, int64_t n,
                    int64_t spatial, cudaStream_t stream);

// ---- sliding window ----

struct Box {
    int64_t d, h, w;
};

// Copies the patch at `origin` (in padded coordinates; the volume sits at `pad_before` inside the
// padded frame, zeros elsewhere) of a C,D,H,W float32 volume into batch slot `slot` of `dst`.
// `flip` mirrors the patch (bit a: spatial axis a, math::mirrored) for test-time augmentation.
Status launchGatherPatch(const float* volume, Box size, Box pad_before, Box origin, Box patch,
                         View dst, StorageType type, int64_t slot, cudaStream_t stream,
                         int flip = 0);

// accum[k, padded voxel] += weight * logits[slot][k]; weight_sum += weight (classes =
// src.channels). `flip`: the logits are of a patch gathered with that flip; they are mirrored
// back as they are added.
Status launchAccumulatePatch(View logits, StorageType type, int64_t slot, const float* gauss,
                             Box patch, Box origin, Box padded, float* accum, float* weight_sum,
                             cudaStream_t stream, int flip = 0);

// For each voxel of slices [z_begin, z_end) of the unpadded volume: logits / weight_sum (written
// to `probs`, K,D,H,W, if not nullptr) and labels = argmax over classes (D,H,W).
Status launchNormalizeArgmax(const float* accum, const float* weight_sum, int64_t classes, Box size,
                             Box pad_before, Box padded, int64_t z_begin, int64_t z_end,
                             float* probs, uint16_t* labels, cudaStream_t stream);

}  // namespace voxseg::cuda
