// Single int8 convolutions for the cuda backend's int8 path (cuda/int8_conv.h), shared by the host
// replay (cuda_int8_plan_test.cpp, runs everywhere) and the device test (cuda_int8_test.cpp,
// label gpu): each case builds a one-Conv graph (optimised: a following ReLU/LeakyReLU or residual
// Add fused into it), a record whose source scale is a power of two (so the float input
// (q - zp) * scale is exact in bf16 and quantises back to q), seeded u8 source bytes, a residual
// exact in bf16 and fp16, and the expected float output from the exact integer reference
// (engine/quant/int8_conv_reference.h).
#pragma once

#include "cuda/int8_conv.h"
#include "engine/graph/graph.h"
#include "engine/graph/tensor.h"
#include "engine/quant/quantization_record.h"

#include <ostream>
#include <string>
#include <vector>

namespace voxseg::cuda::testing {

struct Int8Case {
    std::string name;
    engine::Shape input;  // N C D H W
    int64_t out_channels = 8;
    std::vector<int64_t> kernel{3, 3, 3}, strides{1, 1, 1}, pads{1, 1, 1, 1, 1, 1};
    int zero_point = 0;
    bool bias = true;
    enum class Epilogue { kNone, kRelu, kLeakyRelu, kResidualLeakyRelu } epilogue = Epilogue::kNone;
};

std::vector<Int8Case> int8Cases();
// gtest prints a case by its name (not its bytes).
inline void PrintTo(const Int8Case& c, std::ostream* os) { *os << c.name; }

struct Int8Prepared {
    engine::Graph graph;  // optimised
    engine::QuantizationRecord record;
    std::vector<engine::Tensor> inputs;  // x (and the residual r)
    std::vector<float> expected;         // N OC D H W, float32 before any storage rounding
};
Int8Prepared prepareInt8Case(const Int8Case& c);

// The cpu backend's fp32 output 0 of `g` on `inputs`, the reference the int8 and fp8 plans are
// held to; empty (with a test failure) when it cannot run.
std::vector<float> cpuFp32(const engine::Graph& g, const std::vector<engine::Tensor>& inputs);

// A plan for the packing tests: 3 output channels, 2 input channels, a 1x1x3 kernel (k 6, kp 16).
Int8ConvPlan packingPlan();

}  // namespace voxseg::cuda::testing
