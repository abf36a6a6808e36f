// The resampling, pooling and rounding nnInteractive 2.6.0's prediction applies on the CPU,
// computed exactly as PyTorch computes them there, so voxseg's interactive session gives the
// same windows and the same network inputs bit for bit (tests/edit/interactive_resample_test.cpp
// compares with torch's own outputs):
// - torch.nn.functional.interpolate(size=...) on [1, 1, D, H, W] tensors: "nearest" (fp16),
//   "area" = adaptive average pooling (fp16 values summed in fp32, rounded once), "trilinear"
//   with align_corners=False (fp32; torch's float scale in / out and source index
//   scale * (i + 0.5) - 0.5, two taps per axis nested depth to width, each level
//   fma(t0, w0, t1 * w1) as torch's AVX2/AVX-512 kernels compute it on any x86-64 CPU with FMA;
//   torch's build for CPUs without FMA would round once more and differ by an ulp at times);
// - nnInteractive's iterative_3x3_same_padding_pool3d (max or min over the k^3 window clipped to
//   the volume), the fp16 division of its interaction normalisation, round_to_nearest_odd,
//   Python's round() (halves to even) and NumPy's legacy np.random.choice(n);
// - crop / paste of a box that may extend past the volume (crop_to_valid + zero padding,
//   paste_tensor).
// Arrays are 3-D, (z, y, x) in C order; fp16 values are IEEE binary16 bit patterns.
#pragma once

#include "edit/interactive/session_state.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace voxseg::edit::interactive {

inline int64_t voxelCount(const Index3& s) { return s[0] * s[1] * s[2]; }

// IEEE binary16 <-> float, round to nearest even (torch's Half conversion).
uint16_t toHalf(float value);
const float* halfTable();  // the float of every fp16 bit pattern
inline float fromHalf(uint16_t bits) {
    static const float* const table = halfTable();
    return table[bits];
}
// dst[i] = float(src[i]) for a row (F16C where the CPU has it).
void halfRowToFloat(const uint16_t* src, float* dst, int64_t n);

// interpolate(x, size=out, mode="nearest") on fp16.
std::vector<uint16_t> resizeNearest(const uint16_t* in, const Index3& in_shape,
                                    const Index3& out_shape);
// interpolate(x, size=out, mode="area") on fp16 (adaptive_avg_pool3d). `support`, if given,
// holds every nonzero input voxel: outputs whose window misses it are 0 without being summed.
std::vector<uint16_t> resizeArea(const uint16_t* in, const Index3& in_shape,
                                 const Index3& out_shape, const Box* support = nullptr);
// interpolate(x, size=out, mode="trilinear", align_corners=False) on fp32.
std::vector<float> resizeTrilinear(const float* in, const Index3& in_shape,
                                   const Index3& out_shape);

// iterative_3x3_same_padding_pool3d(x, kernel, use_min_pool): max (min) over the kernel^3
// window clipped to the volume (kernel odd). Works on any ordered value type (fp16 values
// compare as their float values; pass them as float or use the fp16 overload).
std::vector<uint16_t> poolSame(const uint16_t* in, const Index3& shape, int kernel, bool use_min);
std::vector<uint8_t> poolSame(const uint8_t* in, const Index3& shape, int kernel, bool use_min);

// x /= divisor on an fp16 tensor (torch: float(x) / float(divisor), rounded to fp16).
void divideHalf(uint16_t* data, int64_t count, double divisor);

// utils/rounding.py round_to_nearest_odd.
int roundToNearestOdd(double value);
// Python's round(x) to an integer: halves to even.
int64_t roundHalfEven(double value);
// NumPy's legacy np.random.choice(n) (RandomState.randint(0, n): masked rejection sampling of
// 32-bit MT19937 outputs), on a generator seeded as np.random.seed(s) = std::mt19937(s).
int64_t numpyChoice(std::mt19937& rng, int64_t n);

// Copies the in-volume part of `box` from `src` (volume of `src_shape`) into `dst`, a buffer of
// the box's size; voxels of `dst` outside the volume are left as they are (crop_to_valid + pad
// when `dst` starts zeroed).
template <typename T>
void cropInto(const T* src, const Index3& src_shape, const Box& box, T* dst) {
    Index3 lo, hi;
    for (int d = 0; d < 3; ++d) {
        lo[d] = std::max<int64_t>(box.lo[d], 0);
        hi[d] = std::min<int64_t>(box.hi[d], src_shape[d]);
        if (lo[d] >= hi[d]) return;
    }
    const Index3 bs{box.hi[0] - box.lo[0], box.hi[1] - box.lo[1], box.hi[2] - box.lo[2]};
    for (int64_t z = lo[0]; z < hi[0]; ++z)
        for (int64_t y = lo[1]; y < hi[1]; ++y) {
            const T* s = src + (z * src_shape[1] + y) * src_shape[2];
            T* t = dst + ((z - box.lo[0]) * bs[1] + (y - box.lo[1])) * bs[2] - box.lo[2];
            std::copy(s + lo[2], s + hi[2], t + lo[2]);
        }
}
// Writes `src` (box-sized) into `dst` (volume of `dst_shape`) where `box` lies in the volume
// (paste_tensor), converting each value with `convert`.
template <typename S, typename T, typename F>
void pasteInto(const S* src, const Box& box, T* dst, const Index3& dst_shape, F convert) {
    Index3 lo, hi;
    for (int d = 0; d < 3; ++d) {
        lo[d] = std::max<int64_t>(box.lo[d], 0);
        hi[d] = std::min<int64_t>(box.hi[d], dst_shape[d]);
        if (lo[d] >= hi[d]) return;
    }
    const Index3 bs{box.hi[0] - box.lo[0], box.hi[1] - box.lo[1], box.hi[2] - box.lo[2]};
    for (int64_t z = lo[0]; z < hi[0]; ++z)
        for (int64_t y = lo[1]; y < hi[1]; ++y) {
            const S* s = src + ((z - box.lo[0]) * bs[1] + (y - box.lo[1])) * bs[2] - box.lo[2];
            T* t = dst + (z * dst_shape[1] + y) * dst_shape[2];
            for (int64_t x = lo[2]; x < hi[2]; ++x) t[x] = convert(s[x]);
        }
}

// The part of `box` inside a volume of `shape`, or nullopt when empty (_clip_bbox_to_shape).
std::optional<Box> clipBox(const Box& box, const Index3& shape);
inline Index3 boxSize(const Box& b) {
    return {b.hi[0] - b.lo[0], b.hi[1] - b.lo[1], b.hi[2] - b.lo[2]};
}

}  // namespace voxseg::edit::interactive
