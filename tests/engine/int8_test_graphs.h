// Graphs and a calibration shared by the int8 tests of the cpu backend
// (tests/engine/int8_graph_test.cpp) and the cuda backend (tests/cuda/cuda_int8_test.cpp).
#pragma once

#include "engine/graph/graph.h"
#include "engine/graph/tensor.h"
#include "engine/quant/quantization_record.h"

#include <memory>
#include <string>
#include <vector>

namespace voxseg::engine::testing {

// How often `what` occurs in `text` (a plan's describe()).
int countOf(const std::string& text, const std::string& what);

// One nnU-Net level with odd sizes, input [1, 2, 16, 14, 12]: (conv3 -> InstanceNorm ->
// LeakyReLU) x2 with a residual add, a strided conv down, ConvTranspose up, concat with the skip,
// a block, a 1x1 head (7 convs).
Graph int8UnetLevel();

// How far an int8 result lies from fp32: the largest and the mean absolute difference and the
// fp32 output's range (max - min); the int8 tests bound max < 3 % and mean < 0.5 % of the range.
struct Int8Error {
    double max = 0, mean = 0, range = 0;
};
Int8Error int8ErrorVsFp32(const std::vector<float>& got, const std::vector<float>& fp32);

// Calibration by min/max of the cpu backend's fp32 run on `input`: every int8 candidate tensor's
// range, the up-samplings' inputs included (no float_layers, int8_upsampling off; the weight
// bits this CPU multiplies exactly).
std::shared_ptr<QuantizationRecord> calibrateMinMax(const Graph& g, const Tensor& input);
// The same for a graph of several inputs, observing the tensors named in `also` too.
std::shared_ptr<QuantizationRecord> calibrateMinMax(const Graph& g,
                                                    const std::vector<Tensor>& inputs,
                                                    const std::vector<std::string>& also = {});

// 8-bit normalisation inputs for `record` (its float_layers as set): each int8NormInputs tensor's
// per-channel largest magnitude (less the dropped bias) over the fp32 run on `input`, / 127.
// Returns how many were added.
size_t addNormInputScales(const Graph& g, const Tensor& input, QuantizationRecord& record);
size_t addNormInputScales(const Graph& g, const std::vector<Tensor>& inputs,
                          QuantizationRecord& record);

}  // namespace voxseg::engine::testing
