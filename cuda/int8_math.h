// Per-element math of the cuda backend's int8 convolution (int8_conv.h), as __host__ __device__
// functions so that the host replay of a plan (tests/cuda/host_steps.cpp) runs the same code as
// the kernels (int8_kernels.cu) and can be compared with the integer reference
// (engine/quant/int8_conv_reference.h) on machines without a GPU.
//
// The scheme is the engine's (engine/quant/int8_scheme.h, docs/int8.md): u8 sources with a zero
// point, s8 weights per output channel, s32 accumulators, the same requantisation rule. The GPU
// multiplies on s8 x s8 tensor cores (cuBLASLt), so a source byte q is stored as q - 128 and the
// shift is undone exactly in integers: with every padded tap holding zp - 128 (a real zero),
//     sum_k (q_k - zp) w_k = sum_k (q_k - 128) w_k + (128 - zp) sum_k w_k,
// where the last term is one constant per output channel (Int8Compensation). Float steps use
// explicitly rounded operations on the device (no contraction into a fused multiply-add), as the
// reference computes them on the host.
//
// Precision fp8 (GPUs with FP8 tensor cores) runs the same plan with e4m3 bytes instead: sources
// x / scale and weights per output channel, both symmetric and saturated to +-448, products summed
// in fp32 by cuBLASLt; no zero point, so no compensation (Format8, quantizeE4m3, fp8Dequantised).
//
// Pure functions and plain structs; thread-safe. Units: elements.
#pragma once

#include "cuda/kernels_math.h"

#include <cuda_fp8.h>

#include <cstdint>

namespace voxseg::cuda::math {

// One int8 convolution lowered to im2col rows: output voxel r (flattened n, d, h, w) reads one row
// of k = taps * cin shifted source bytes, tap-major (kd, kh, kw), channel-minor, followed by
// zero columns up to kp (cuBLASLt's int8 kernels want k a multiple of 4; kp is one of 16).
struct Int8Geometry {
    int64_t n = 0, cin = 0;
    int64_t in[3] = {0, 0, 0};      // D, H, W of the source
    int64_t ldc = 0, c_offset = 0;  // the source view's row length and first channel (planned)
    int64_t out[3] = {0, 0, 0};
    int64_t kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0};  // pads_begin
    int64_t k = 0, kp = 0;
    VOXSEG_HD int64_t rows() const { return n * out[0] * out[1] * out[2]; }
    VOXSEG_HD int64_t taps() const { return kernel[0] * kernel[1] * kernel[2]; }
};

// A source value as the shifted s8 the GEMM reads: oneDNN's quantising reorder
// (engine::quant::quantizeActivation: rne(clamp(x * inv + zp, 0, 255)), two roundings) minus 128.
VOXSEG_HD int8_t quantizeShifted(float x, float inv, float zero_point) {
#if defined(__CUDA_ARCH__)
    float f = __fadd_rn(__fmul_rn(x, inv), zero_point);
#else
    float f = x * inv;
    f = f + zero_point;
#endif
    f = f < 0.0f ? 0.0f : (f > 255.0f ? 255.0f : f);
    return static_cast<int8_t>(static_cast<int>(rintf(f)) - 128);
}

// The 8-bit format of a planned convolution: int8 (shifted u8 sources, s8 weights, s32 products)
// or FP8 e4m3 (precision fp8; fp32 products).
enum class Format8 : int { kInt8 = 0, kE4M3 };

// The largest finite e4m3 value: calibrated ranges map onto [-448, 448].
constexpr float kE4m3Max = 448.0f;

// A value as the e4m3 byte the FP8 product reads: x * inv rounded to the nearest e4m3 (ties to
// even) and saturated to +-448, NaN to 0x7f: cuda_fp8.h's conversion (the cvt.rn.satfinite
// instruction on sm_89+, the same rule in software on older devices and on the host).
VOXSEG_HD uint8_t quantizeE4m3(float x, float inv) {
#if defined(__CUDA_ARCH__)
    const float f = __fmul_rn(x, inv);
#else
    const float f = x * inv;
#endif
    return static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
}

// The value of an e4m3 byte (sign, 4 exponent bits of bias 7, 3 mantissa bits; exponent 0 is
// subnormal, 0x7f / 0xff are NaN). Every e4m3 value is exact in float, and so is the product of
// two of them.
VOXSEG_HD float e4m3Value(uint8_t b) {
    const int e = (b >> 3) & 0xf, m = b & 7;
    const float sign = (b & 0x80) ? -1.0f : 1.0f;
    if (e == 0xf && m == 7) return NAN;
    if (e == 0) return sign * ldexpf(float(m), -9);
    return sign * ldexpf(float(8 + m), e - 10);
}

// What im2col writes for a source value and for a padded tap (a real zero), per format.
struct Int8Quantizer {
    float inv, zero_point;
    VOXSEG_HD int8_t operator()(float x) const { return quantizeShifted(x, inv, zero_point); }
    VOXSEG_HD int8_t padding() const { return static_cast<int8_t>(int(zero_point) - 128); }
};
struct E4m3Quantizer {
    float inv;
    VOXSEG_HD int8_t operator()(float x) const { return static_cast<int8_t>(quantizeE4m3(x, inv)); }
    VOXSEG_HD int8_t padding() const { return 0; }
};

// Element offset in the source view of channel 0 of tap `tap` (kd, kh, kw row-major) of im2col
// row `row`, or -1 where the tap falls into the padding. The tap's cin channels follow it.
VOXSEG_HD int64_t int8TapOffset(const Int8Geometry& g, int64_t row, int64_t tap) {
    int64_t rest = row;
    const int64_t ow = rest % g.out[2];
    rest /= g.out[2];
    const int64_t oh = rest % g.out[1];
    rest /= g.out[1];
    const int64_t od = rest % g.out[0];
    const int64_t n = rest / g.out[0];
    const int64_t kw = tap % g.kernel[2], kh = (tap / g.kernel[2]) % g.kernel[1],
                  kd = tap / (g.kernel[2] * g.kernel[1]);
    const int64_t z = od * g.stride[0] - g.pad[0] + kd;
    const int64_t y = oh * g.stride[1] - g.pad[1] + kh;
    const int64_t x = ow * g.stride[2] - g.pad[2] + kw;
    if (z < 0 || z >= g.in[0] || y < 0 || y >= g.in[1] || x < 0 || x >= g.in[2]) return -1;
    const int64_t voxel = ((n * g.in[0] + z) * g.in[1] + y) * g.in[2] + x;
    return voxel * g.ldc + g.c_offset;
}

// Slots of one im2col row: one per tap, and a last one for the zero columns [k, kp).
VOXSEG_HD int64_t int8Im2colSlots(const Int8Geometry& g) { return g.taps() + 1; }

// Slot `slot` of row `r` of an im2col chunk that starts at row `row0` and holds `rows` real rows,
// written into `a` ([chunk][kp] bytes): a tap's cin quantised source bytes (`quantize`: shifted
// int8 or e4m3; contiguous in the channels-last source and in the row), quantize.padding() where
// the tap falls outside the source, 0 in rows past the convolution's end and in the columns
// [k, kp). `load` reads source element `i` as float. With cin a multiple of 4 the bytes go four
// at a time (the row, the tap's first column and the chunk are 4-byte aligned: kp is a multiple
// of 16).
template <typename Src, typename Load, typename Quantize>
VOXSEG_HD void int8Im2colSlot(const Int8Geometry& g, const Src* src, Load load, Quantize quantize,
                              int64_t row0, int64_t rows, int64_t r, int64_t slot, int8_t* a) {
    int8_t* row = a + r * g.kp;
    if (slot == g.taps()) {
        for (int64_t c = g.k; c < g.kp; ++c) row[c] = 0;
        return;
    }
    int8_t* dst = row + slot * g.cin;
    const int64_t off = r < rows ? int8TapOffset(g, row0 + r, slot) : -1;
    const int8_t fill = r < rows ? quantize.padding() : int8_t{0};
    if (g.cin % 4 == 0) {
        for (int64_t c = 0; c < g.cin; c += 4) {
            uint32_t packed = 0;
            for (int j = 0; j < 4; ++j) {
                const int8_t b = off < 0 ? fill : quantize(load(src, off + c + j));
                packed |= uint32_t(uint8_t(b)) << (8 * j);
            }
            *reinterpret_cast<uint32_t*>(dst + c) = packed;
        }
    } else {
        for (int64_t c = 0; c < g.cin; ++c) dst[c] = off < 0 ? fill : quantize(load(src, off + c));
    }
}

// What the epilogue needs per output channel (int8_conv.h packs them into the parameter blob).
struct Int8Channel {
    int32_t compensation;  // int8: (128 - zp) * sum of the channel's weights; fp8: 0
    float bias;   // int8: in accumulator units; fp8: in output units (0 when the conv has none)
    float scale;  // src.scale * w_scale[oc]: dequantises (the rule's dst is {1, 0})
};

// requantisedValue() of engine/quant/int8_scheme.h for a float destination (dst {1, 0}): float of
// the exact accumulator, + bias, * scale, + residual (a float tensor, scale 1), then ReLU or
// LeakyReLU (int8Activate) as the reference writes them.
VOXSEG_HD float int8Dequantised(int32_t acc, const Int8Channel& ch, bool has_bias,
                                bool has_residual, float residual) {
    const int32_t exact = acc + ch.compensation;
#if defined(__CUDA_ARCH__)
    float f = __int2float_rn(exact);
    if (has_bias) f = __fadd_rn(f, ch.bias);
    f = __fmul_rn(f, ch.scale);
    if (has_residual) f = __fadd_rn(f, residual);
#else
    float f = static_cast<float>(exact);
    if (has_bias) f = f + ch.bias;
    f = f * ch.scale;
    if (has_residual) f = f + residual;
#endif
    return f;
}

// fp8's epilogue: the fp32 product of e4m3 values times the channel's scale, + bias, + residual,
// each step rounded once (then int8Activate).
VOXSEG_HD float fp8Dequantised(float acc, const Int8Channel& ch, bool has_bias, bool has_residual,
                               float residual) {
#if defined(__CUDA_ARCH__)
    float f = __fmul_rn(acc, ch.scale);
    if (has_bias) f = __fadd_rn(f, ch.bias);
    if (has_residual) f = __fadd_rn(f, residual);
#else
    float f = acc * ch.scale;
    if (has_bias) f = f + ch.bias;
    if (has_residual) f = f + residual;
#endif
    return f;
}

// The activation after int8Dequantised: ReLU and LeakyReLU exactly as the reference's rule
// (f > 0 ? f : f * alpha); any other `act` is left to a float epilogue step after the convolution.
VOXSEG_HD float int8Activate(float f, Act act, float alpha) {
    if (act == Act::kRelu) return f > 0.0f ? f : 0.0f;
    if (act == Act::kLeakyRelu) {
#if defined(__CUDA_ARCH__)
        const float neg = __fmul_rn(f, alpha);
#else
        const float neg = f * alpha;
#endif
        return f > 0.0f ? f : neg;
    }
    return f;
}

}  // namespace voxseg::cuda::math
