// Internal to the oneDNN CPU backend: instance/group-norm and channel LayerNorm kernels over
// oneDNN layouts.
//
// oneDNN 2.6 has batch and layer normalisation but no instance or group normalisation over the
// spatial axes of NCDHW, so these are written by hand: one memory pass for per-channel moments
// (chunked two-pass mean/M2 in cache, chunks merged with Chan's formula in double: exact enough
// for 128^3 volumes, unlike a running sum of squares), and one pass that applies the per-channel
// affine map, an optional residual and the activation. Both work directly on blocked layouts
// (nCdhw16c: 16 channels are the contiguous SIMD lanes), channels-last and plain layouts,
// f32 or bf16 data (statistics always in f32/f64). Parallel with OpenMP; call from one thread.
#pragma once

#include "engine/graph/graph.h"

#include <dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace voxseg::engine::cpu {

// A rank>=3 tensor seen as groups of `lanes` contiguous channels per spatial position.
// Element (n, c, s) is at n*n_stride + (c / lanes)*group_stride + s*spatial_stride + c % lanes.
struct LaneLayout {
    int64_t batch = 0, channels = 0, spatial = 0;
    int64_t lanes = 1;   // 16 for nCdhw16c, C for channels-last, 1 for plain
    int64_t groups = 0;  // ceil(channels / lanes); lanes * groups = padded channel count
    int64_t n_stride = 0, group_stride = 0, spatial_stride = 0;
    int64_t paddedChannels() const { return lanes * groups; }
};

// The widest build of voxseg's own kernels (these and the attention's softmax,
// cpu_attention_softmax.h) this CPU runs: the units engine/CMakeLists.txt builds with AVX-512
// flags (F, BW, VL, DQ), with AVX2 + FMA, or the x86-64 baseline. Capped by oneDNN's effective
// ISA (DNNL_MAX_CPU_ISA): one setting runs the whole backend as on an older CPU.
enum class KernelIsa { kGeneric, kAvx2, kAvx512 };
KernelIsa kernelIsa();
const char* kernelIsaName(KernelIsa isa);  // "generic", "avx2", "avx512"

// kernelIsaName(kernelIsa()): the loops the kernels below run on this CPU.
const char* normKernelIsa();

// nullopt for layouts these kernels do not walk (the caller reorders to plain first).
std::optional<LaneLayout> laneLayout(const dnnl::memory::desc& md);

// Per (n, c) mean and M2 (sum of squared deviations) over the spatial axes; size batch*channels.
void channelMoments(const void* x, bool bf16, const LaneLayout& layout, std::vector<double>& mean,
                    std::vector<double>& m2);

// y = act(x * scale[n, c] + shift[n, c] (+ residual)), in place allowed (y == x). `scale` and
// `shift` have batch * paddedChannels() entries (zero for padding channels, which stay zero);
// `slope` (PReLU) has paddedChannels() entries. `residual` has the layout of x, or is null.
void affineActivation(const void* x, void* y, const void* residual, bool bf16,
                      const LaneLayout& layout, const float* scale, const float* shift,
                      ActivationKind act, float alpha, const float* slope);

// A second u8 form of a normalisation's result (another reader's scale and zero point: the
// quantising concat of a skip connection), written in the same pass when `q` is set.
struct U8Target {
    uint8_t* q = nullptr;
    float inv_scale = 1.0f, zero_point = 0.0f;
    // Elements from one position to the next in q, for a channels-last x (lanes == channels)
    // written into a wider channels-last tensor (its channels of a concat: q points at its first
    // channel). 0: q has x's element offsets.
    int64_t stride = 0;
    // A halo (int8_policy.h, halo sources; channels-last x only): q is a channels-last tensor of
    // `padded` D, H, W per batch item, x's `size` D, H, W written at `lo` inside it (the caller
    // fills the rest). padded[0] == 0: no halo.
    std::array<int64_t, 3> size{}, padded{}, lo{};
    // Where x's element offset `off` (a position's first lane) goes, and the step per position.
    uint8_t* at(int64_t off, int64_t lanes) const {
        if (padded[0] == 0) return stride == 0 ? q + off : q + off / lanes * stride;
        int64_t p = off / lanes;
        const int64_t x = p % size[2], y = (p / size[2]) % size[1];
        p /= size[2] * size[1];
        const int64_t z = p % size[0], n = p / size[0];
        return q + (((n * padded[0] + z + lo[0]) * padded[1] + y + lo[1]) * padded[2] + x + lo[2]) *
                       positionStep(lanes);
    }
    int64_t positionStep(int64_t lanes) const { return stride == 0 ? lanes : stride; }
    // Of `count` positions from `off` on, how many stay contiguous in q (a halo breaks rows).
    int64_t run(int64_t off, int64_t lanes, int64_t count) const {
        if (padded[0] == 0) return count;
        return std::min(count, size[2] - (off / lanes) % size[2]);
    }
};

// affineActivation, also quantising each result for int8 convolutions (docs/int8.md,
// "Normalisations write u8"): q = rne(clamp(y * inv_scale + zero_point, 0, 255)) at the element
// offsets of x, and y itself (f32 or bf16 as x) only when `y` is not null. Layouts without
// padding channels (channels == paddedChannels()) and with dense positions (spatial_stride ==
// lanes); q is never in place.
void affineActivationU8(const void* x, void* y, uint8_t* q, const void* residual, bool bf16,
                        const LaneLayout& layout, const float* scale, const float* shift,
                        ActivationKind act, float alpha, const float* slope, float inv_scale,
                        float zero_point, U8Target second = {});

// 8-bit normalisation inputs (int8_scheme.h): channelMoments of an s8 tensor, in its integer
// units (the caller applies the per-channel scale), and affineActivation / affineActivationU8
// reading s8, with y and the residual f32 or bf16 (`y_bf16`); the U8 one with the layout
// conditions of affineActivationU8.
void channelMomentsS8(const int8_t* x, const LaneLayout& layout, std::vector<double>& mean,
                      std::vector<double>& m2);
void affineActivationFromS8(const int8_t* x, void* y, const void* residual, bool y_bf16,
                            const LaneLayout& layout, const float* scale, const float* shift,
                            ActivationKind act, float alpha, const float* slope);
void affineActivationU8FromS8(const int8_t* x, void* y, uint8_t* q, const void* residual,
                              bool y_bf16, const LaneLayout& layout, const float* scale,
                              const float* shift, ActivationKind act, float alpha,
                              const float* slope, float inv_scale, float zero_point,
                              U8Target second = {});

// Channel LayerNorm (OpKind::kChannelLayerNorm): per (n, position), the moments over the
// channels, y = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c]; in place allowed. gamma and
// beta have `layout.channels` entries. One pass over cache-sized chunks of positions (the
// moments two-pass within the chunk).
void channelLayerNorm(const void* x, void* y, bool bf16, const LaneLayout& layout,
                      const float* gamma, const float* beta, float eps);

// LayerNorm over rows: y[r, c] = (x[r, c] - mean_r) / sqrt(var_r + eps) * gamma[c] + beta[c],
// x f32, y f32 or bf16 (a bf16 plan's LayerNorm whose readers are MatMuls writes their bf16
// operand directly). gamma and beta have `cols` entries; not in place.
void rowLayerNorm(const float* x, void* y, bool y_bf16, int64_t rows, int64_t cols,
                  const float* gamma, const float* beta, float eps);

}  // namespace voxseg::engine::cpu
