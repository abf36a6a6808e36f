// Graphs and a calibration shared by the int8 tests of the cpu backend
// (tests/engine/int8_graph_test.cpp) and the cuda backend (tests/cuda/cuda_int8_test.cpp).
#pragma once

#include "engine/graph/graph.h"
#include "engine/graph/tensor.h"
#include "engine/quant/quantization_record.h"

#include <memory>

namespace voxseg::engine::testing {

// One nnU-Net level with odd sizes, input [1, 2, 16, 14, 12]: (conv3 -> InstanceNorm ->
// LeakyReLU) x2 with a residual add, a strided conv down, ConvTranspose up, concat with the skip,
// a block, a 1x1 head (7 convs).
Graph int8UnetLevel();

// Calibration by min/max of the cpu backend's fp32 run on `input`: every int8 candidate tensor's
// range (no float_layers; the weight bits this CPU multiplies exactly).
std::shared_ptr<QuantizationRecord> calibrateMinMax(const Graph& g, const Tensor& input);

}  // namespace voxseg::engine::testing
