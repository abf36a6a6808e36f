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
// packInt8Conv is host code (no device): the planner calls it, and tests run it on any machine.
// Units: elements; bytes where named.
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
    float inv_scale = 1.0f;   // 1 / src.scale, as quantizeActivation computes it
    float zero_point = 0.0f;  // src.zero_point
    bool has_bias = false, has_residual = false;
    math::Act act = math::Act::kNone;  // kNone, kRelu or kLeakyRelu
    float alpha = 0.0f;
    // Parameter blob offsets: s8 weights [cout_padded][kp], math::Int8Channel [cout].
    int64_t weights_offset = -1, channels_offset = -1;
    // Resolved.
    const int8_t* weights = nullptr;
    const math::Int8Channel* channels = nullptr;

    size_t im2colBytes() const;  // one chunk of s8 rows (256-byte aligned)
    double flops() const;        // 2 x multiply-adds of the convolution (not of the padding)
    size_t resultBytes() const;  // one chunk of s32 results (256-byte aligned)
};

// The packed parameters of one convolution.
struct Int8ConvPack {
    std::vector<int8_t> weights;              // [cout_padded][kp]
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

}  // namespace voxseg::cuda
