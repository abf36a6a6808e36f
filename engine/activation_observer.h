// Activation observers (issue 40, docs/int8.md "Observing activations"): a compiled graph hands
// the float32 values of named intermediate tensors to a callback during run(), as each is
// computed. INT8 calibration (`voxseg model calibrate`) uses it to collect the range of the
// tensors that int8 convolutions read (engine/quant/int8_policy.h, int8CandidateTensors) while the
// fp32 network runs through the real pre-processing and sliding window.
//
// Set CompileOptions::observer (engine/backend.h) before compile(): every run() of that compiled
// graph then calls `callback` once per requested tensor, on the thread that called run(), right
// after the step that computes the tensor (graph inputs: before the first step), in the order of
// the graph's nodes. `data` is the tensor as plain row-major float32 (N C D H W for 3-D nets),
// numel(shape) elements, valid only during the call: copy or reduce what you keep. `shape` is
// the shape this graph was compiled for (batch included: one call covers the whole batch).
//
// Names are graph tensor names (Value::name) as they exist after optimize(): a tensor fused
// away (a Conv's output before the activation fused into it) cannot be observed, and compile()
// refuses an unknown name, naming it. Supported by the cpu backend at fp32 and bf16 (bf16 tensors
// are widened to float32); the reference and cuda backends, and int8 compiles, refuse a
// non-empty observer. Observing costs one copy of each observed tensor into plain float32.
// Thread safety: the callback runs on run()'s thread; a graph is run by one thread at a time.
#pragma once

#include "engine/graph/tensor.h"

#include <functional>
#include <string>
#include <vector>

namespace voxseg::engine {

using ActivationCallback =
    std::function<void(const std::string& tensor, const float* data, const Shape& shape)>;

struct ActivationObserver {
    std::vector<std::string> tensors;  // graph tensor names to observe; empty: observe nothing
    ActivationCallback callback;

    bool active() const { return !tensors.empty(); }
};

}  // namespace voxseg::engine
