// Runs the CUDA backend's plan of a graph on the host, for tests on machines without a GPU: the
// planner (cuda_planner.h), buffer placement and operand resolution are the real ones; every
// device step is replayed by a plain host loop in float32 storage, with the arena filled with NaN
// first so that a step reading a buffer nobody wrote (a lifetime or addressing bug) shows. What
// this checks is the lowering (strides, offsets, aliasing, weight packing, GEMM and attention
// tiling parameters); the kernels, cuDNN and cuBLASLt themselves run only on a GPU
// (tests/cuda/cuda_backend_test.cpp). cuDNN convolutions replay as direct loops over the packed
// weights; InstanceNorm statistics in double, folded by the kernels' normAffine. int8
// convolutions (options.quantization) replay with the kernels' own per-element math
// (cuda/int8_math.h) and an integer product, chunk by chunk as the device runs them; fp8 ones
// (options.fp8) with the same math and the e4m3 products summed in double, rounded once.
// Thread-safe (no shared state).
#pragma once

#include "core/status.h"
#include "cuda/cuda_planner.h"
#include "engine/graph/graph.h"
#include "engine/graph/tensor.h"

#include <vector>

namespace voxseg::cuda::testing {

Result<std::vector<engine::Tensor>> runPlanOnHost(const engine::Graph& graph,
                                                  const std::vector<engine::Tensor>& inputs,
                                                  const planning::PlanOptions& options = {});

}  // namespace voxseg::cuda::testing
