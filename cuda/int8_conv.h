// The cuda backend's int8 convolution (issue 40 item 5; docs/int8-gpu.md): a Conv that the
// package's calibration covers (engine/quant/int8_policy.h decides which, as on the cpu backend)
// runs as im2col rows of shifted s8 source bytes (quantised from the float activation with the
// tensor's scale and zero point), one s8 x s8 -> s32 matrix product on cuBLASLt's int8 tensor-core
// kernels per chunk of rows (cublaslt_int8_gemm.h), and an epilogue that adds the zero-point
// compensation, the bias, scale, residual and ReLU/LeakyReLU and writes the float storage type
// (the dequantised rule of engine/quant/int8_scheme.h; per-element math in int8_math.h).
//
// Why not cuDNN: its documented int8 convolution configurations (INT8x4 / INT8x32 in NHWC) are
// 4-D tensors, i.e. 2-D convolutions, and nnU-Net's are 3-D; a path that could not be tried here
// without a GPU should not rest on an undocumented case. cuBLASLt's int8 products are exact in
// s32, so the result follows the integer reference bit for bit up to the float storage rounding
// (tests/cuda/cuda_int8_plan_test.cpp on the host, cuda_int8_test.cpp on a GPU).
//
// Precision fp8 (sm_89+) plans the same convolutions the same way with e4m3 bytes
// (packFp8Conv): the source's calibrated range [lo, hi] becomes the symmetric scale
// max(|lo|, |hi|) / 448, each output channel's weights are scaled by their largest magnitude /
// 448, the product is cuBLASLt's e4m3 x e4m3 -> fp32 (not exact: fp32 sums in cuBLASLt's order),
// and the epilogue is fp8Dequantised. Why not cuDNN: its FP8 convolutions exist only as
// runtime-fusion graphs, and whether one runs 3-D on Hopper can only be probed on such a GPU.
// Not yet run on a GPU (docs/int8-gpu.md#fp8).
//
// packInt8Conv / packFp8Conv are host code (no device): the planner calls them, and tests run them
// on any machine. Units: elements; bytes where named.
#pragma once

#include "core/status.h"
#include "cuda/int8_math.h"
#include "engine/quant/int8_scheme.h"

#include <cstdint>
#include <vector>

namespace voxseg::cuda {

// Rows of one im2col chunk: at most `budget_bytes` of s8 rows plus s32 results, a multiple of 128
// (cuBLASLt tiles), never more than the convolution's rows rounded up to 128.
int64_t int8ChunkRows(int64_t rows, int64_t kp, int64_t cout_padded, size_t budget_bytes);

// The planned convolution, before and after its parameters are placed.
struct Int8ConvPlan {
    math::Int8Geometry geometry;
    int64_t cout = 0;
    int64_t cout_padded = 0;  // the GEMM's m: cout rounded up to 16 (zero weight rows)
    int64_t chunk_rows = 0;   // im2col rows per GEMM call
    math::Format8 format = math::Format8::kInt8;
    // int8: 1 / src.scale, as quantizeActivation computes it, and src.zero_point; fp8: 448 / amax
    // (amax: the larger side of the source's calibrated range) and 0.
    float inv_scale = 1.0f;
    float zero_point = 0.0f;
    bool has_bias = false, has_residual = false;
    math::Act act = math::Act::kNone;  // kNone, kRelu or kLeakyRelu
    float alpha = 0.0f;
    // Parameter blob offsets: s8 or e4m3 weights [cout_padded][kp], math::Int8Channel [cout].
    int64_t weights_offset = -1, channels_offset = -1;
    // Resolved.
    const int8_t* weights = nullptr;
    const math::Int8Channel* channels = nullptr;

    size_t im2colBytes() const;  // one chunk of s8 rows (256-byte aligned)
    double flops() const;        // 2 x multiply-adds of the convolution (not of the padding)
    size_t resultBytes() const;  // one chunk of s32 or fp32 results (256-byte aligned)
    math::Int8Quantizer int8Quantizer() const { return {inv_scale, zero_point}; }
    math::E4m3Quantizer e4m3Quantizer() const { return {inv_scale}; }
};

// The packed parameters of one convolution.
struct Int8ConvPack {
    std::vector<int8_t> weights;              // [cout_padded][kp] (e4m3 bits for fp8)
    std::vector<math::Int8Channel> channels;  // [cout]
};

// Quantises `weights` (O, I, kD, kH, kW float32, I = geometry.cin) per output channel with
// `weight_qmax` and fills the GEMM layout, the compensation of `src`'s zero point and the
// dequantising scales and bias (engine::quant::setRequantisation with dst {1, 0}); `bias` may be
// empty. Sets plan.inv_scale, zero_point, has_bias, cout_padded. kInvalidArgument when the sizes
// disagree or a channel's compensation would overflow s32.
Result<Int8ConvPack> packInt8Conv(Int8ConvPlan& plan, const std::vector<float>& weights,
                                  const std::vector<float>& bias,
                                  const engine::quant::ActivationQuant& src, int weight_qmax);

// The fp8 packing of the same convolution: e4m3 weights per output channel (scale = the channel's
// largest |w| / 448, 1 for an all-zero channel), the symmetric source scale from `src`'s range
// ((255 - zp) and zp steps of src.scale on either side of 0), compensation 0, bias in output
// units. Sets plan.format, inv_scale, zero_point (0), has_bias, cout_padded. kInvalidArgument
// when the sizes disagree or the source's range is empty.
Result<Int8ConvPack> packFp8Conv(Int8ConvPlan& plan, const std::vector<float>& weights,
                                 const std::vector<float>& bias,
                                 const engine::quant::ActivationQuant& src);

}  // namespace voxseg::cuda
