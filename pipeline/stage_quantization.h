// INT8 names in staged packages (docs/int8.md, "Staged packages"): each stage is its own network,
// so model.json "quantization" names its tensors and nodes "<stage>/<name>" and every network
// keeps its own ranges. Calibrate observes all stages at once under those names; a stage's
// compile sees only its own part of the observer and of the record, without the prefix.
// Packages with one network use the graph's names as they are. Pure functions; thread-safe.
#pragma once

#include "core/status.h"
#include "engine/backend.h"
#include "engine/model/model_package.h"
#include "engine/quant/int8_policy.h"

#include <set>
#include <string>
#include <vector>

namespace voxseg::pipeline {

// "<stage>/<name>".
std::string stageQuantizationKey(const std::string& stage, const std::string& name);

// What int8 calibration observes in `loaded` and keeps float: per network, the inputs of its
// eligible Convs but the first and last (as `ends` says; engine/quant/int8_policy.h) and, with
// `upsampling`, of its k = s up-samplings,
// stage-prefixed for staged packages. Ensembles (several networks without stages) are refused with
// the reason.
struct Int8Candidates {
    std::vector<std::string> tensors;
    std::vector<std::string> float_layers;
    // The tensors that may be 8-bit normalisation inputs (int8NormInputs), names prefixed.
    std::vector<engine::quant::Int8NormInput> norm_inputs;
    // Of `tensors`, those that may go without a zero point (int8LeakyReluOutputs).
    std::set<std::string> leaky_relu_outputs;
};
Result<Int8Candidates> int8Candidates(const engine::LoadedModel& loaded,
                                      engine::quant::Int8FloatEnds ends = {},
                                      bool upsampling = false);

// Every key of a staged package's record names one of its stages ("<stage>/..."): a key that
// does not would silently run its layer in float. kInvalidArgument naming the key.
Status checkStageQuantizationKeys(const engine::ModelPackage& package);

// The compile options of stage `stage`: the observer reduced to the stage's tensors (its callback
// gets the prefixed names back) and the record to the stage's keys (prefix removed); the rest as
// `compile`.
engine::CompileOptions stageCompileOptions(const engine::CompileOptions& compile,
                                           const std::string& stage);

}  // namespace voxseg::pipeline
